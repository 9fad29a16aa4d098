"""The Streamlit side of data access: one `dashboard.core.source.Source` per store, shared by every
session.

Runs are immutable and content-addressed, so the Source's own bounded cache (keyed by run id and the
set of bench runs) is safe across sessions; Streamlit only keeps the Source object itself
(`st.cache_resource`).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import streamlit as st

from collectors.errors import ArtifactError, StoreError
from collectors.store import Store
from dashboard.core.source import Source

SAMPLES = Path(
    os.environ.get("KERNELSCOPE_SAMPLES", Path(__file__).resolve().parents[2] / "sample_traces")
)
#: uploads parsed at once by this server, whatever the number of sessions: N uploads at the same
#: moment cost the memory of PARSE_SLOTS parses (each bounded by its content: long whitespace runs
#: never reach memory)
PARSE_SLOTS = threading.BoundedSemaphore(int(os.environ.get("KERNELSCOPE_PARSE_SLOTS", "2")))


def store() -> Store:
    return Store(os.environ.get("KERNELSCOPE_STORE") or None)


def samples_wanted() -> bool:
    """Whether an empty store gets the bundled samples: KERNELSCOPE_LOAD_SAMPLES=1/0 (`kernelscope
    dashboard --samples/--no-samples` sets it); by default only the default store, never one given
    by KERNELSCOPE_STORE."""
    flag = os.environ.get("KERNELSCOPE_LOAD_SAMPLES")
    if flag in ("0", "1"):
        return flag == "1"
    return not os.environ.get("KERNELSCOPE_STORE")


def ensure_samples(st_: Store) -> int:
    """On first start with an empty store, load the bundled real samples. Returns how many were ingested."""
    samples = Path(os.environ.get("KERNELSCOPE_SAMPLES", SAMPLES))
    listing = samples / "dashboard_samples.txt"
    if st_.runs() or not listing.is_file():
        return 0
    n = 0
    names = [
        ln.strip()
        for ln in listing.read_text().splitlines()
        if ln.strip() and not ln.startswith("#")
    ]
    src = Source(st_)
    for p in [samples / n_ for n_ in names] + sorted(samples.glob("*/bench*/*.json*")):
        try:
            src.ingest_path(p)
            n += 1
        # e.g. .ncu-rep without the ncu-report extra
        except (ArtifactError, StoreError, ImportError):
            continue
    return n


@st.cache_resource(max_entries=4, show_spinner=False)
def _source(root: str) -> Source:
    return Source(Store(root))


def source() -> Source:
    return _source(str(store().root))


def clear_caches() -> None:
    st.cache_data.clear()
    st.cache_resource.clear()
