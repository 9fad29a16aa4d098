"""Data access for the Streamlit pages: the store, runs and analyses, cached by run id.

Runs are immutable and content-addressed, so a run id is a safe cache key. Caches are bounded.
"""
from __future__ import annotations

import os
from pathlib import Path

import polars as pl
import streamlit as st

from collectors.store import Store

SAMPLES = Path(os.environ.get("KERNELSCOPE_SAMPLES", Path(__file__).resolve().parents[1] / "sample_traces"))


def store() -> Store:
    return Store(os.environ.get("KERNELSCOPE_STORE") or None)


def ensure_samples(st_: Store) -> int:
    """On first start with an empty store, load the bundled real samples. Returns how many were ingested."""
    listing = SAMPLES / "dashboard_samples.txt"
    if st_.runs() or not listing.is_file():
        return 0
    n = 0
    names = [ln.strip() for ln in listing.read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    for p in [SAMPLES / n_ for n_ in names] + sorted(SAMPLES.glob("*/bench*/*.json*")):
        try:
            st_.ingest_path(p)
            n += 1
        except Exception:  # noqa: BLE001 - a sample the installed extras cannot read (e.g. no ncu-report) is skipped
            continue
    return n


@st.cache_data(max_entries=64, show_spinner=False)
def run_manifest(root: str, run_id: str) -> dict:
    return Store(root).get(run_id).manifest


@st.cache_data(max_entries=32, show_spinner=False)
def run_table(root: str, run_id: str, table: str) -> pl.DataFrame:
    return Store(root).get(run_id).table(table)


@st.cache_data(max_entries=32, show_spinner=False)
def ncu_analysis(root: str, run_id: str) -> tuple[pl.DataFrame, dict, list[dict]]:
    """(analyzed kernel table, GPU info, missing quantities) for an ncu run."""
    from analyzers.gpus import resolve_gpu
    from analyzers.kernels import analyze_kernels, missing_quantities
    run = Store(root).get(run_id)
    gpu = resolve_gpu(run.meta.get("gpu_name"), run.meta.get("device_attributes"))
    analyzed = analyze_kernels(run.table("kernels"), gpu)
    info = {"name": gpu.name, "cc": f"{gpu.cc[0]}.{gpu.cc[1]}", "sm_count": gpu.sm_count,
            "dram_bandwidth_bytes_per_s": gpu.dram_bandwidth_bytes_per_s,
            "dram_source": gpu.source_of("dram_bandwidth_bytes_per_s"), "from_registry": gpu.from_registry}
    return analyzed, info, missing_quantities(analyzed)


def runs_frame(st_: Store) -> pl.DataFrame:
    from dashboard.cli.core import run_summary
    rows = [run_summary(r) for r in st_.runs()]
    return pl.DataFrame(rows, schema={"run_id": pl.String, "kind": pl.String, "source_name": pl.String,
                                      "gpu_name": pl.String, "items": pl.Int64, "created": pl.String,
                                      "size_bytes": pl.Int64})
