"""Kineto trace documents for the reader tests: the corpus traces, their bytes, frame equality."""

from __future__ import annotations

import gzip
import json
import re
from decimal import Decimal
from pathlib import Path
import polars as pl
from polars.testing import assert_frame_equal
from collectors.ingest import detect_kind
from tests.conftest import H200_TORCH, REPO


TRACES = sorted(
    p
    for root in (REPO / "tests" / "corpus", REPO / "sample_traces")
    for p in root.rglob("*")
    if p.name.endswith((".json", ".json.gz"))
    and not re.search(r"manifest|expected|record_summary", p.name)
)


def _kineto(p: Path) -> bool:
    data = p.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    if b'"traceEvents"' not in data and not data.lstrip().startswith(b"["):
        return False
    try:
        return detect_kind(data, p.name.removesuffix(".gz")) == "kineto"
    except Exception:  # noqa: BLE001 - not an artifact at all
        return False


KINETO = [p for p in TRACES if _kineto(p)]


def _whole(frames: dict) -> dict:
    return {
        k: pl.concat(v, how="diagonal_relaxed").with_columns(pl.col("name").cast(pl.String))
        for k, v in frames.items()
        if v
    }


def _same(a, b) -> None:
    assert a[0] == b[0] and a[2] == b[2] and a[3] == b[3]
    fa, fb = _whole(a[1]), _whole(b[1])
    assert fa.keys() == fb.keys()
    for k in fa:
        assert_frame_equal(fa[k], fb[k], check_column_order=False)  # tier 2 puts tid later


def _doc(p: Path) -> bytes:
    data = p.read_bytes()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


# ------------------------------------------------------------------------- variants of a real trace
# (ffn_M1_eager)
SAMPLE = H200_TORCH / "ffn_M1_eager.json.gz"


def _sample() -> dict:
    return json.loads(gzip.decompress(SAMPLE.read_bytes()), parse_float=Decimal)


def _dump(doc: dict) -> bytes:
    """Kineto's layout: one event per line (the separator the readers split at)."""
    unmark = lambda x: json.dumps(_with_decimals(x)).replace('"<D>', "").replace('<D>"', "")
    events = doc.pop("traceEvents")
    body = ",\n  ".join(unmark(e) for e in events)
    return f'{unmark(doc)[:-1]}, "traceEvents": [\n  {body}\n]}}'.encode()


def _with_decimals(e):
    """Decimals written as JSON numbers with their digits (json.dumps cannot): marked, then unquoted."""
    if isinstance(e, dict):
        return {k: _with_decimals(v) for k, v in e.items()}
    if isinstance(e, list):
        return [_with_decimals(v) for v in e]
    return f"<D>{e}<D>" if isinstance(e, Decimal) else e
