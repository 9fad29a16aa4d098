"""Data access for the Streamlit pages: the store, runs and analyses, cached by run id.

Runs are immutable and content-addressed, so a run id is a safe cache key; the bench-derived tables are keyed
on the tuple of bench run ids. Caches are bounded (max_entries) so a long-running lab server does not grow.
"""
from __future__ import annotations

import os
from pathlib import Path

import polars as pl
import streamlit as st

from collectors.store import Store
from dashboard.pages import NcuRun, Source, load_bench_results, load_ceilings, load_ncu

SAMPLES = Path(os.environ.get("KERNELSCOPE_SAMPLES", Path(__file__).resolve().parents[1] / "sample_traces"))


def store() -> Store:
    return Store(os.environ.get("KERNELSCOPE_STORE") or None)


def ensure_samples(st_: Store) -> int:
    """On first start with an empty store, load the bundled real samples. Returns how many were ingested."""
    from collectors.errors import ArtifactError
    samples = Path(os.environ.get("KERNELSCOPE_SAMPLES", SAMPLES))
    listing = samples / "dashboard_samples.txt"
    if st_.runs() or not listing.is_file():
        return 0
    n = 0
    names = [ln.strip() for ln in listing.read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    for p in [samples / n_ for n_ in names] + sorted(samples.glob("*/bench*/*.json*")):
        try:
            st_.ingest_path(p)
            n += 1
        except (ArtifactError, ImportError, OSError):  # e.g. .ncu-rep without the ncu-report extra
            continue
    return n


@st.cache_data(max_entries=64, show_spinner=False)
def run_manifest(root: str, run_id: str) -> dict:
    return Store(root).get(run_id).manifest


@st.cache_data(max_entries=32, show_spinner=False)
def run_table(root: str, run_id: str, table: str) -> pl.DataFrame:
    return Store(root).get(run_id).table(table)


@st.cache_data(max_entries=32, show_spinner=False)
def _ncu(root: str, run_id: str) -> NcuRun:
    return load_ncu(root, run_id)


@st.cache_data(max_entries=8, show_spinner=False)
def _ceilings(root: str, run_ids: tuple[str, ...]) -> pl.DataFrame:
    s = Store(root)
    return load_ceilings([s.get(r) for r in run_ids])


@st.cache_data(max_entries=8, show_spinner=False)
def _bench_results(root: str, run_ids: tuple[str, ...]) -> pl.DataFrame:
    s = Store(root)
    return load_bench_results([s.get(r) for r in run_ids])


def ncu_analysis(root: str, run_id: str) -> tuple[pl.DataFrame, dict, list[dict]]:
    """(analyzed kernel table, GPU info, missing quantities) for an ncu run (kept for other pages)."""
    nr = _ncu(root, run_id)
    gpu = nr.gpu
    info = {"name": gpu.name, "cc": f"{gpu.cc[0]}.{gpu.cc[1]}", "sm_count": gpu.sm_count,
            "dram_bandwidth_bytes_per_s": gpu.dram_bandwidth_bytes_per_s,
            "dram_source": gpu.source_of("dram_bandwidth_bytes_per_s"), "from_registry": gpu.from_registry}
    return nr.analyzed, info, nr.missing


class CachedSource(Source):
    """The page builders' data source with Streamlit caches in front of the expensive reads."""

    def table(self, run_id: str, name: str) -> pl.DataFrame:
        return run_table(self.root, self.store.get(run_id).run_id, name)

    def ncu(self, run_id: str) -> NcuRun:
        return _ncu(self.root, run_id)

    def ceilings(self) -> pl.DataFrame:
        return _ceilings(self.root, tuple(r.run_id for r in self.runs(("bench",))))

    def bench_results(self) -> pl.DataFrame:
        return _bench_results(self.root, tuple(r.run_id for r in self.runs(("bench",))))


def source() -> CachedSource:
    return CachedSource(store())


def runs_frame(st_: Store) -> pl.DataFrame:
    from dashboard.cli.core import run_summary
    rows = [run_summary(r) for r in st_.runs()]
    return pl.DataFrame(rows, schema={"run_id": pl.String, "kind": pl.String, "source_name": pl.String,
                                      "gpu_name": pl.String, "items": pl.Int64, "created": pl.String,
                                      "size_bytes": pl.Int64})


def clear_caches() -> None:
    for f in (run_manifest, run_table, _ncu, _ceilings, _bench_results):
        f.clear()
