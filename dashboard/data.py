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
from dashboard import pages
from dashboard.pages import NcuRun, Source, load_bench_results, load_ceilings, load_ncu, measurements_for_case

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


# Large immutable frames are cached as resources (shared, not copied per call: cache_data would pickle a
# 2-million-row metrics table on every hit). Nothing mutates them: polars operations return new frames.
@st.cache_resource(max_entries=16, show_spinner=False)
def run_table(root: str, run_id: str, table: str) -> pl.DataFrame:
    return Store(root).get(run_id).table(table)


@st.cache_resource(max_entries=16, show_spinner=False)
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


@st.cache_resource(max_entries=16, show_spinner=False)
def _kernels_frame(root: str, run_id: str, bench_ids: tuple[str, ...]) -> pl.DataFrame:
    from dashboard.pages import kernels_frame
    return kernels_frame(CachedSource(Store(root)), run_id)


class CachedSource(Source):
    """The page builders' data source with Streamlit caches in front of the expensive reads."""

    def table(self, run_id: str, name: str) -> pl.DataFrame:
        return run_table(self.root, self.store.get(run_id).run_id, name)

    def ncu(self, run_id: str) -> NcuRun:
        return _ncu(self.root, run_id)

    def launch_metrics(self, run_id: str, kernel: int) -> pl.DataFrame:
        return _launch_metrics(self.root, run_id, kernel)

    def ceilings(self) -> pl.DataFrame:
        return _ceilings(self.root, tuple(r.run_id for r in self.runs(("bench",))))

    def bench_results(self) -> pl.DataFrame:
        return _bench_results(self.root, tuple(r.run_id for r in self.runs(("bench",))))

    def kernels_frame(self, run_id: str) -> pl.DataFrame:
        """The analyzed launches with display columns and findings (pages.kernels_frame), cached per run and
        set of bench runs (their ceilings enter the % of measured peak and the findings)."""
        return _kernels_frame(self.root, run_id, tuple(r.run_id for r in self.runs(("bench",))))


def source() -> CachedSource:
    return CachedSource(store())


@st.cache_resource(max_entries=64, show_spinner=False)
def _launch_metrics(root: str, run_id: str, kernel: int) -> pl.DataFrame:
    return run_table(root, run_id, "metrics").filter(pl.col("id") == kernel)


def clear_caches() -> None:
    st.cache_data.clear()
    st.cache_resource.clear()


@st.cache_data(max_entries=64, show_spinner=False)
def _case_measurements(root: str, case_id: str, gpu_name: str, run_ids: tuple[str, ...]) -> list:
    return measurements_for_case(Source(Store(root)), case_id, gpu_name)


@st.cache_data(max_entries=16, show_spinner=False)
def _claim_measurements(root: str, run_ids: tuple[str, ...]) -> dict:
    return pages.claim_measurements(Source(Store(root)))


def claim_measurements() -> dict:
    """For the Claims page: the store's bench ceilings that claims name (cached per set of bench runs)."""
    src = source()
    return _claim_measurements(src.root, tuple(r.run_id for r in src.runs(("bench",))))


def case_measurements(case_id: str, gpu_name: str) -> list:
    """For the Textbook cases page (issue 3): the store's measurements of a case on a GPU (cached)."""
    src = source()
    ids = tuple(r.run_id for r in src.runs(("ncu", "bench")))
    return _case_measurements(src.root, case_id, gpu_name, ids)
