"""Runs: every run of the store, filtered by kind and GPU (?kind=ncu&gpu=NVIDIA+H200)."""
from __future__ import annotations

from dashboard.reports.blocks import Report, Text
from dashboard.reports.common import runs_table
from dashboard.source import Source


def build(src: Source, params: dict) -> Report:
    kind, gpu = params.get("kind") or None, params.get("gpu") or None
    runs = src.runs()
    shown = [r for r in runs if (not kind or r.kind == kind) and (not gpu or r.meta.get("gpu_name") == gpu)]
    rep = Report("Runs", subtitle=f"{len(shown)} of {len(runs)} runs in the store"
                 + (f" · kind {kind}" if kind else "") + (f" · GPU {gpu}" if gpu else ""))
    if shown:
        rep.add(runs_table(shown))
    else:
        rep.add(Text("No run matches." if runs else
                     "The store is empty. Upload an artifact, or run `kernelscope ingest sample_traces/`.", "info"))
    return rep
