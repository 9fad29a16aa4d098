"""What `analyze --format json` writes for large tables: polars frames and row views streamed in
chunks, one row per line, NaN and infinities as null, the same document whatever the chunk size; and
the big readers (streamed Kineto, batched ncu raw CSV, ADBC nsys) equal to the whole-document /
plain-sqlite3 paths."""

from __future__ import annotations

import io
import json
import math
import sys

import polars as pl
import pytest

from collectors.errors import ArtifactError
from tests.conftest import H200_KERNELS, H200_TORCH, SHARED_NSYS


def _echo(obj, monkeypatch, rows: int, chunk_bytes: int = 1 << 20) -> str:
    from dashboard.cli import _app

    monkeypatch.setattr(_app, "TABLE_CHUNK_ROWS", rows)
    monkeypatch.setattr(_app, "TABLE_CHUNK_BYTES", chunk_bytes)
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    _app.echo_json(obj)
    monkeypatch.setattr(sys, "stdout", sys.__stdout__)
    return out.getvalue()


@pytest.mark.parametrize("rows", [1, 2, 3, 1000])
def test_tables_are_streamed_as_json_arrays(monkeypatch, rows):
    from dashboard.cli._app import Rows

    df = pl.DataFrame(
        {
            "name": ["a\nb", 'q"uote', None, "x"],
            "v": [1.5, math.nan, math.inf, 2.0],
            "n": [1, None, 3, 4],
        }
    )
    view = Rows(df, pl.Series([3, 0], dtype=pl.UInt32), ["name", (pl.col("v") * 2).alias("v2")])
    doc = {
        "a": 1,
        "t": df,
        "nested": [{"view": view}],
        "empty": df.clear(),
        "s": "\x00kernelscope-table-0",
    }
    text = _echo(doc, monkeypatch, rows)
    got = json.loads(text)
    assert got["t"] == [
        {"name": "a\nb", "v": 1.5, "n": 1},
        {"name": 'q"uote', "v": None, "n": None},
        {"name": None, "v": None, "n": 3},
        {"name": "x", "v": 2.0, "n": 4},
    ]
    assert got["nested"] == [{"view": [{"name": "x", "v2": 4.0}, {"name": "a\nb", "v2": 3.0}]}]
    assert got["empty"] == [] and got["s"] == "\x00kernelscope-table-0" and got["a"] == 1
    assert text.count('{"name":') == 6  # one row per line
    assert _echo(doc, monkeypatch, 1) == text  # the chunk size changes nothing
    assert _echo(doc, monkeypatch, 1, chunk_bytes=1) == text


def test_later_chunks_hold_about_table_chunk_bytes(monkeypatch):
    """The first chunk has TABLE_CHUNK_ROWS rows; the later ones as many as make about
    TABLE_CHUNK_BYTES by the first chunk's size (at least as many as the first, at most 16 times as
    many)."""
    from dashboard.cli import _app

    df = pl.DataFrame({"s": [f"{i:08d}" for i in range(1000)], "i": [7] * 1000})
    row = len(b'{"s":"00000000","i":7},\n    ')
    slices = []

    class Spy(_app.Rows):
        def slice(self, off, n):
            slices.append((off, n))
            return super().slice(off, n)

    spy = Spy(df, pl.Series(range(df.height), dtype=pl.UInt32), ["s", "i"])
    whole = json.loads(_echo({"t": df}, monkeypatch, 1000))
    for first, target, later in ((10, 40 * row, 40), (10, 1, 10), (10, 10**9, 160)):
        slices.clear()
        text = _echo({"t": spy}, monkeypatch, first, chunk_bytes=target)
        assert json.loads(text) == whole
        assert slices[0] == (0, first) and {n for _, n in slices[1:-1]} == {later}, slices[:3]
        assert [o for o, _ in slices] == list(range(0, first, first)) + list(
            range(first, 1000, later)
        )


def test_row_views_gather_a_block_of_rows_per_query(monkeypatch):
    """A Rows view's chunks are cut from blocks of BLOCK_ROWS rows, each gathered by one query, in
    order, with the rows and columns of a query per chunk."""
    from dashboard.cli import _app

    df = pl.DataFrame({"s": [f"{i:05d}" for i in range(1000)], "i": list(range(1000))})
    order = pl.Series(list(range(999, -1, -1)), dtype=pl.UInt32)
    gathers = []

    class Spy(_app.Rows):
        BLOCK_ROWS = 64

        def gather(self, off, n):
            gathers.append((off, n))
            return super().gather(off, n)

    cols = ["s", (pl.col("i") * 3).alias("i3")]
    want = [{"s": f"{i:05d}", "i3": 3 * i} for i in range(999, -1, -1)]
    for first in (1, 10, 64, 100, 1000):
        gathers.clear()
        got = json.loads(
            _echo({"t": Spy(df, order, cols)}, monkeypatch, first, chunk_bytes=10 * first)
        )
        assert got["t"] == want
        starts = [o for o, _ in gathers]
        assert gathers[0] == (0, max(first, 64)) and starts == sorted(set(starts))
        assert all(b <= a + n for (a, n), b in zip(gathers, starts[1:]))  # no row left out
        # a block per query, not a chunk: chunks of at most 16 * first rows cut from blocks of 64
        assert len(gathers) <= -(-1000 // max(64 - 16 * first, first)) + 1 and (
            first > 4 or len(gathers) <= 40
        )
    assert Spy(df, order, cols).collect().equals(pl.DataFrame(want))


def test_trace_json_kernels_are_the_ordered_kernel_rows(capsys, tmp_path):
    from dashboard.cli import main

    p = H200_TORCH / "ffn_M1_eager.json.gz"
    assert main(["analyze", str(p), "--format", "json", "--store", str(tmp_path / "s")]) == 0
    rep = json.loads(capsys.readouterr().out)
    k = rep["kernels"]
    assert len(k) == rep["summary"]["kernel_count"] == 120
    assert [(r["rank"], r["device"], r["start_ns"]) for r in k] == sorted(
        (r["rank"], r["device"], r["start_ns"]) for r in k
    )
    assert main(["analyze", str(p), "--format", "csv", "--store", str(tmp_path / "s")]) == 0
    assert pl.read_csv(io.StringIO(capsys.readouterr().out)).height == 120


def test_streamed_kineto_file_equals_bytes(tmp_path, monkeypatch):
    """A trace read from its file as a stream (8 MiB pieces; here 4 KiB), by the typed reader and by
    the NDJSON reader, gives the tables of the whole document."""
    from collectors import kineto, kineto_events, kineto_typed, schema

    src = H200_TORCH / "ffn_M1_eager.json.gz"
    whole = kineto.parse(src.read_bytes(), src.name)
    monkeypatch.setattr(kineto_events, "NDJSON_CHUNK_BYTES", 4096)
    monkeypatch.setattr(kineto, "NDJSON_CHUNK_BYTES", 4096)
    monkeypatch.setattr(kineto_typed, "TYPED_PIECE_BYTES", 4096)
    monkeypatch.setattr(kineto, "TYPED_PIECE_BYTES", 4096)
    typed = kineto.parse_file(src, src.name)
    monkeypatch.setattr(
        kineto,
        "typed_stream",
        lambda *a, **k: (_ for _ in ()).throw(kineto_events.FastPathFailed()),
    )
    streamed = kineto.parse_file(src, src.name)
    for t in schema.TIMELINE_SCHEMAS:
        assert streamed.tables[t].equals(whole.tables[t]), t
        assert typed.tables[t].equals(whole.tables[t]), t
    assert streamed.meta == whole.meta == typed.meta


def test_a_plain_kineto_file_is_read_through_its_map(tmp_path, monkeypatch):
    """A trace that is not compressed is read in place from a private memory map
    (collectors.decompress.mapped), by the typed reader and by the NDJSON reader, and gives the
    tables of the whole document."""
    import gzip
    import mmap
    from collectors import kineto, kineto_events, kineto_typed, schema

    src = tmp_path / "ffn_M1_eager.json"
    src.write_bytes(gzip.decompress((H200_TORCH / "ffn_M1_eager.json.gz").read_bytes()))
    whole = kineto.parse(src.read_bytes(), src.name)
    monkeypatch.setattr(kineto_typed, "TYPED_PIECE_BYTES", 4096)
    monkeypatch.setattr(kineto_events, "NDJSON_CHUNK_BYTES", 4096)
    given = []
    real = kineto_events.split_events

    def spy(chunks, *a, **k):
        given.append(type(chunks))
        return real(chunks, *a, **k)

    monkeypatch.setattr(kineto_typed, "split_events", spy)
    monkeypatch.setattr(kineto_events, "split_events", spy)
    typed = kineto.parse_file(src, src.name)
    monkeypatch.setattr(
        kineto,
        "typed_stream",
        lambda *a, **k: (_ for _ in ()).throw(kineto_events.FastPathFailed()),
    )
    streamed = kineto.parse_file(src, src.name)
    assert given == [mmap.mmap, mmap.mmap]
    for t in schema.TIMELINE_SCHEMAS:
        assert streamed.tables[t].equals(whole.tables[t]), t
        assert typed.tables[t].equals(whole.tables[t]), t
    assert streamed.meta == whole.meta == typed.meta


def test_raw_csv_in_batches_equals_one_batch(monkeypatch, tmp_path):
    """The raw page read in batches of rows (from bytes or from the file) gives the tables of one
    batch; metric names, units and texts are categorical, values numeric."""
    import gzip
    from collectors import ncu, ncu_values

    data = gzip.decompress((H200_KERNELS / "full_raw.csv.gz").read_bytes())
    one = ncu.parse(data, "full_raw.csv")
    monkeypatch.setattr(ncu_values, "RAW_BATCH_BYTES", 5000)
    monkeypatch.setattr(ncu, "RAW_BATCH_BYTES", 5000)
    many = ncu.parse(data, "full_raw.csv")
    path = tmp_path / "full_raw.csv"
    path.write_bytes(data)
    from_file = ncu.parse_file(path, path.name)
    # pieces read on several threads, taken in order
    assert len(data) // 5000 > 2 * ncu_values.RAW_THREADS
    # launch by launch, each in the header's metric order, however it was cut
    for p in (many, from_file):
        assert p.tables["kernels"].equals(one.tables["kernels"])
        assert p.tables["metrics"].equals(one.tables["metrics"])
    m = one.tables["metrics"]
    assert (
        m.schema["metric"] == pl.Categorical()
        and m.schema["value"] == pl.Float64
        and m.height == 9 * 2227
    )
    assert one.meta["metric_count"] == 2227
    # a row cut short in a later piece is named by its number in the file
    lines = data.split(b"\n")
    lines[8] = lines[8][: lines[8].index(b'","', len(lines[8]) // 2) + 1]
    with pytest.raises(ArtifactError, match="kernel row 7 is incomplete"):
        ncu.parse(b"\n".join(lines), "cut.csv")


def test_nsys_without_the_adbc_driver_reads_the_same(tmp_path, monkeypatch):
    """Without adbc-driver-sqlite, Python's sqlite3 reads the same tables."""
    from collectors import nsys, schema
    from tests.support.nsys import two_process_export

    data = two_process_export(tmp_path)
    adbc = nsys.parse(data, "two.sqlite")
    monkeypatch.setattr(nsys._Reader, "_adbc_connection", lambda self: False)
    plain = nsys.parse(data, "two.sqlite")
    for t in schema.TIMELINE_SCHEMAS:
        assert plain.tables[t].equals(adbc.tables[t]), t


@pytest.mark.shared_data
@pytest.mark.parametrize(
    "fname", ["h100_2gpu_1s.sqlite", "mfu_2gpu_before.sqlite", "mfu_2gpu_after.sqlite"]
)
def test_plain_sql_baseline_equals_analyze(fname, capsys, tmp_path):
    """perf/nsys_sql_baseline.py (sqlite3 alone) computes the numbers `analyze` reports, identically."""
    import importlib.util
    from pathlib import Path

    perf = Path(__file__).resolve().parents[2] / "perf"
    saved = list(sys.path)
    # the perf scripts put perf/ on sys.path; it holds a dashboard.py
    try:
        mods = {}
        for name in ("nsys_sql_baseline", "traces"):
            spec = importlib.util.spec_from_file_location(f"_ks_perf_{name}", perf / f"{name}.py")
            mods[name] = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mods[name])
    finally:
        sys.path[:] = saved
    baseline, nsys_identical = mods["nsys_sql_baseline"].baseline, mods["traces"].nsys_identical
    from dashboard.cli import main

    db = SHARED_NSYS / fname
    assert main(["analyze", str(db), "--format", "json", "--store", str(tmp_path / "s")]) == 0
    (tmp_path / "ours.json").write_text(capsys.readouterr().out)
    (tmp_path / "sql.json").write_text(json.dumps(baseline(str(db))))
    assert nsys_identical(tmp_path / "ours.json", tmp_path / "sql.json") == []


@pytest.mark.parametrize("sample", ["ncu", "kineto"])
def test_analyze_of_a_file_computes_its_analysis_once(monkeypatch, capsys, tmp_path, sample):
    """`analyze FILE` checks the file as ingest would (its analysis must succeed) and reports that
    same analysis: the analysis runs once, not once for the check and again for the report; `ingest`
    still checks in a Source of its own (a dashboard's long-lived Source keeps no parsed file)."""
    import analyzers.ncu_run
    import analyzers.timeline
    from dashboard.cli import main

    target = {
        "ncu": (analyzers.ncu_run, "analyze_ncu", H200_KERNELS / "basic_raw.csv.gz"),
        "kineto": (analyzers.timeline, "summarize", H200_TORCH / "ffn_M1_eager.json.gz"),
    }
    module, fn, path = target[sample]
    calls = []
    real = getattr(module, fn)
    monkeypatch.setattr(module, fn, lambda *a, **k: calls.append(1) or real(*a, **k))
    assert main(["analyze", str(path), "--format", "json", "--store", str(tmp_path / "s")]) == 0
    assert json.loads(capsys.readouterr().out)["warnings"] is not None
    assert len(calls) == 1
    calls.clear()
    assert main(["ingest", str(path), "--store", str(tmp_path / "s")]) == 0
    assert len(calls) == 1
