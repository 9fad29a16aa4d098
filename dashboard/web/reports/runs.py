"""Runs: every run of the store, filtered by kind and GPU (?kind=ncu&gpu=NVIDIA+H200)."""

from __future__ import annotations

from collectors.schema import KINDS
from dashboard.web.reports.report_blocks import Report, Text, code
from dashboard.web.reports.run_links import runs_table
from dashboard.core.source import Source


def build(src: Source, params: dict) -> Report:
    kind, gpu = params.get("kind") or None, params.get("gpu") or None
    runs = src.runs()
    shown = [
        r
        for r in runs
        if (not kind or r.kind == kind) and (not gpu or r.meta.get("gpu_name") == gpu)
    ]
    rep = Report(
        "Runs",
        subtitle=f"{len(shown)} of {len(runs)} runs in the store"
        + (f" · kind {code(kind)}" if kind else "")
        + (f" · GPU {code(gpu)}" if gpu else ""),
    )
    if kind and kind not in KINDS:
        rep.add(Text(f"No run kind {code(kind)}: the kinds are {', '.join(KINDS)}.", "warning"))
    if gpu and not any(r.meta.get("gpu_name") == gpu for r in runs):
        rep.add(Text(f"No run on GPU {code(gpu)} in this store.", "warning"))
    for rid, problem in src.broken():
        rep.add(Text(f"Run {code(rid)} cannot be read and is left out: {problem}", "warning"))
    if shown:
        rep.add(runs_table(shown))
    else:
        rep.add(
            Text(
                "No run matches."
                if runs
                else "The store is empty. Upload an artifact, or run `kernelscope ingest "
                "sample_traces/`.",
                "info",
            )
        )
    return rep
