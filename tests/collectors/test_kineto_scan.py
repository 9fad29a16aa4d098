"""The compiled Kineto scanner (collectors/_kineto_scan.c) against msgspec's tier 0, which it stands
in for.

It takes a piece of events only when it gives exactly what msgspec's structs give for it, and hands
any other piece back (rolled back) for msgspec to decode. So each test compares the reader with the
scanner on and off: on every real trace of the corpus (where it must also take every piece it
reads), on variants of a real trace that reach each of its refusals, on pieces it takes and refuses
in one file (the rows stay in file order), and on documents that hypothesis writes with the values
and layouts the format allows and some it does not."""

from __future__ import annotations

import gzip
import json
import os

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collectors import kineto_events, kineto_typed
from collectors.kineto_events import FastPathFailed
from tests.support.kineto_docs import KINETO, _doc, _dump, _same, _sample

scanner = kineto_typed._kineto_scan


def test_the_scanner_is_built_where_a_compiler_is():
    """CI and ./ks install with a C compiler: the scanner must be there (hatch_build.py builds it)."""
    if os.environ.get("KERNELSCOPE_NO_EXTENSION"):
        pytest.skip("installed with KERNELSCOPE_NO_EXTENSION")
    assert scanner is not None and hasattr(scanner, "Scanner")


needs_scanner = pytest.mark.skipif(scanner is None, reason="the compiled scanner is not built")


def _read(data: bytes, scan: bool, monkeypatch, step: int | None = None):
    monkeypatch.setenv("KERNELSCOPE_KINETO_SCAN", "1" if scan else "0")
    try:
        if step is None:
            return kineto_typed.typed_frames(data)
        view = memoryview(data)
        return kineto_typed.typed_stream(
            (view[i : i + 4096] for i in range(0, len(view), 4096)), step=step
        )
    except FastPathFailed:
        return "fast path failed"


def _pieces(data: bytes, step: int = kineto_typed.TYPED_PIECE_BYTES) -> list:
    """The scanner's answer for each piece tier 0 reads: True, or why it refused."""
    sc = scanner.Scanner()
    out = []

    def read(text, sep):
        out.append(sc.feed(text) or sc.refusal())

    try:
        kineto_events.split_events(kineto_events._slices(data, step), read, step, framed=True)
    except FastPathFailed:
        pass
    return out


def _agree(data: bytes, monkeypatch, step: int | None = None):
    on, off = _read(data, True, monkeypatch, step), _read(data, False, monkeypatch, step)
    if isinstance(off, str) or isinstance(on, str):
        assert on == off
    else:
        _same(on, off)
    return on


# ------------------------------------------------------------------------------------------- the
# corpus
@needs_scanner
@pytest.mark.parametrize("path", KINETO, ids=[p.name for p in KINETO])
def test_the_scanner_reads_each_corpus_trace_as_msgspec_does(path, monkeypatch):
    data = _doc(path)
    got = _agree(data, monkeypatch)
    _agree(data, monkeypatch, step=5000)  # many pieces
    # a trace tier 0 reads: every piece taken
    if not isinstance(got, str):
        assert set(_pieces(data)) == {True}, _pieces(data)


@needs_scanner
def test_the_scanner_takes_every_piece_of_each_corpus_trace_msgspec_reads(monkeypatch):
    """The traces of 2020-2026 (PyTorch 1.8 to 2.x, CUDA and ROCm, NCCL): the scanner takes each
    piece of every one that msgspec reads, so none of them pays for a second decoding. The others
    msgspec refuses too (a stream written as text, a grid as text, text after the events array)."""
    taken = {p.name for p in KINETO if set(_pieces(_doc(p))) == {True}}
    read = {p.name for p in KINETO if not isinstance(_read(_doc(p), False, monkeypatch), str)}
    assert taken == read and len(taken) >= 25, (taken ^ read, len(taken))


# ------------------------------------------------------------------------------------------- its
# refusals
def _kernel(doc):
    return next(e for e in doc["traceEvents"] if e.get("cat") == "kernel")


def _change(name):
    """A variant of the real ffn_M1_eager trace reaching one of the scanner's refusals."""
    doc = _sample()
    k = _kernel(doc)
    ev = doc["traceEvents"]
    if name == "tid as digits text":
        k["tid"] = "7"
    elif name == "tid as '+7'":
        k["tid"] = "+7"
    elif name == "pid as 'stream 7'":
        k["pid"] = "stream 7"
    elif name == "name with escapes":
        k["name"] = 'void k<"q">\\ \u00e9\U0001f600\n'
    elif name == "key with an escape":
        return _dump(doc).replace(b'"cat": "kernel"', b'"c\\u0061t": "kernel"', 1)
    elif name == "integer beyond 64 bits":
        k["args"]["correlation"] = 2**70
    elif name == "correlation as float":
        return _dump(doc).replace(
            b'"correlation": %d' % k["args"]["correlation"],
            b'"correlation": %d.0' % k["args"]["correlation"],
            1,
        )
    elif name == "epoch µs with fractions":
        from decimal import Decimal

        for e in ev:
            if "ts" in e:
                e["ts"] = Decimal(e["ts"]) + Decimal("1700000000000000")
    elif name == "epoch µs whole":
        for e in ev:
            if "ts" in e:
                e["ts"] = int(e["ts"]) + 1700000000000000
    elif name == "grid of two values":
        k["args"]["grid"] = [3, 4]
    elif name == "grid beyond 32 bits":
        k["args"]["grid"] = [2**31, 1, 1]
    elif name == "duplicate key":
        return _dump(doc).replace(b'"cat": "kernel"', b'"cat": "kernel", "cat": "kernel"', 1)
    elif name == "args null":
        k["args"] = None
    elif name == "ts missing":
        del k["ts"]
    elif name == "name null":
        k["name"] = None
    elif name == "phase missing":
        del k["ph"]
    elif name == "collective args without a name":
        k["args"].update(
            {"In msg nelems": 5, "Out msg nelems": 6, "dtype": "Float", "Group size": 2}
        )
    elif name == "collective kernel":
        k["args"].update(
            {
                "Collective name": "allreduce",
                "In msg nelems": 5,
                "Out msg nelems": 6,
                "dtype": "Float",
                "Group size": 2,
            }
        )
    elif name == "collective dtype as number":
        k["args"].update({"Collective name": "allreduce", "dtype": 3})
    elif name == "truncated":
        return _dump(doc)[:-5000]
    return _dump(doc)


CHANGES = [
    "tid as digits text",
    "tid as '+7'",
    "pid as 'stream 7'",
    "name with escapes",
    "key with an escape",
    "integer beyond 64 bits",
    "correlation as float",
    "epoch µs with fractions",
    "epoch µs whole",
    "grid of two values",
    "grid beyond 32 bits",
    "duplicate key",
    "args null",
    "ts missing",
    "name null",
    "phase missing",
    "collective args without a name",
    "collective kernel",
    "collective dtype as number",
    "truncated",
]
# what the scanner does with each: take the piece (True), or refuse it and leave it to msgspec
TAKEN = {
    "tid as digits text",
    "pid as 'stream 7'",
    "name with escapes",
    "epoch µs whole",
    "grid of two values",
    "args null",
    "collective args without a name",
    "collective kernel",
}


@needs_scanner
@pytest.mark.parametrize("name", CHANGES)
def test_each_variant_reads_as_msgspec_reads_it(name, monkeypatch):
    data = _change(name)
    got = _agree(data, monkeypatch)
    pieces = _pieces(data)
    # the array's end is not found: no piece at all
    if name == "truncated":
        assert got == "fast path failed" and pieces == []
        return
    if name in TAKEN:
        assert pieces == [True]
    else:
        assert pieces and pieces != [True], pieces
    k = None if isinstance(got, str) else pl.concat(got[1]["gpu"])
    # not read where no GPU op of the piece has a collective
    if name == "collective args without a name":
        assert k["comm_in_nelems"].null_count() == k.height
    if name == "collective kernel":
        assert k["comm_in_nelems"].drop_nulls().to_list() == [5] and k[
            "comm_dtype"
        ].drop_nulls().to_list() == ["Float"]
    if name == "tid as digits text":
        assert 7 in k["tid"].to_list()
    if name == "pid as 'stream 7'":
        assert k["pid"].null_count() == 1
    if name == "name with escapes":
        assert 'void k<"q">\\ \u00e9\U0001f600\n' in k["name"].cast(pl.String).to_list()
    if name == "grid of two values":
        assert k.filter(pl.col("grid_x") == 3)["grid_z"].to_list() == [None]


@needs_scanner
def test_taken_and_refused_pieces_keep_the_rows_in_file_order(monkeypatch):
    """Small pieces, one in the middle refused (a tid "+7"): the scanner's rows before it, msgspec's
    for it, the scanner's after it, in the file's order."""
    doc = _sample()
    kernels = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    kernels[len(kernels) // 2]["tid"] = "+7"
    data = _dump(doc)
    pieces = _pieces(data, step=20000)
    assert pieces.count(True) >= 3 and len(pieces) - pieces.count(True) == 1, pieces
    got = _agree(data, monkeypatch, step=20000)
    rows = pl.concat(got[1]["gpu"])
    assert rows["name"].cast(pl.String).to_list() == [e["name"] for e in kernels]
    # ns, in the file's order
    assert rows["ts"].to_list() == [round(e["ts"] * 1000) for e in kernels]


@needs_scanner
def test_a_flush_hands_over_the_columns_and_empties_the_scanner():
    sc = scanner.Scanner()
    doc = b'[{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1.5, "dur": 2, "args": {}}]'
    assert sc.feed(doc) and sc.feed(doc)
    cols = sc.flush()
    s = {n: pl.Series(n, kineto_typed._Arrow(c)) for n, c in cols["gpu"]}
    assert (
        s["ts"].to_list() == [1.5, 1.5]
        and s["name"].to_list() == ["k", "k"]
        and s["device"].null_count() == 2
    )
    assert sc.flush() == {}
    assert sc.take_counts() == (2, {"kernel": 2}) and sc.take_counts() == (0, {})
    assert not sc.feed(b'[{"ph": "X", "cat": "kernel"') and "past the piece" in sc.refusal()
    # the refused piece left nothing
    assert sc.flush() == {} and sc.take_counts() == (0, {})


# -------------------------------------------------------------------------------------------
# generated documents
_CATS = [
    "kernel",
    "gpu_memcpy",
    "Memset",
    "cuda_runtime",
    "cuda_driver",
    "cpu_op",
    "Operator",
    "user_annotation",
    "python_function",
    "ac2g",
    "Trace",
]
_ARG_KEYS = [
    "External id",
    "external id",
    "device",
    "stream",
    "correlation",
    "registers per thread",
    "shared memory",
    "grid",
    "block",
    "bytes",
    "Collective name",
    "In msg nelems",
    "Out msg nelems",
    "dtype",
    "Group size",
    "Input Dims",
    "Op count",
]


def _num(draw):
    kind = draw(st.integers(0, 7))
    if kind == 0:
        return str(draw(st.integers(-(2**70), 2**70)))
    if kind == 1:
        return repr(draw(st.floats(allow_nan=False, allow_infinity=False)))
    # Kineto's µs with three decimals, relative or epoch
    if kind == 2:
        v = draw(st.one_of(st.integers(0, 10**16), st.integers(5 * 10**15, 2 * 10**18)))
        return f"{v // 1000}.{v % 1000:03d}"
    if kind == 3:
        return str(draw(st.integers(1_600_000_000_000_000, 1_800_000_000_000_000)))
    if kind == 4:
        return draw(st.sampled_from(["1e3", "-0", "0.5e-2", "1E400", "12345678901234567890.5"]))
    return str(draw(st.integers(-5, 10**6)))


def _str(draw):
    s = draw(
        st.one_of(
            st.sampled_from(["", "k", "stream 7", "7", "+7", "-3", "007", "Spans", "aten::mm"]),
            st.text(max_size=8),
        )
    )
    return json.dumps(s, ensure_ascii=draw(st.booleans()))


@st.composite
def _value(draw, depth=0):
    kind = draw(st.integers(0, 9 if depth < 2 else 6))
    if kind <= 3:
        return _num(draw)
    if kind <= 5:
        return _str(draw)
    if kind == 6:
        return draw(st.sampled_from(["null", "true", "false"]))
    if kind == 7:  # a list of integers (grid, block, dims)
        return (
            "["
            + ", ".join(
                str(draw(st.integers(-(2**33), 2**33)))
                if draw(st.integers(0, 5))
                else str(draw(st.integers(0, 1024)))
                for _ in range(draw(st.integers(0, 4)))
            )
            + "]"
        )
    items = draw(st.lists(_value(depth + 1), max_size=3))
    if kind == 8:
        return "[" + ", ".join(items) + "]"
    return "{" + ", ".join(f'"k{i}": {v}' for i, v in enumerate(items)) + "}"


def _valid_num(draw):
    """A number tier 0 reads into a float: Kineto's µs with three decimals (relative or epoch), a
    whole number, a shortest float, an exponent form."""
    kind = draw(st.integers(0, 4))
    if kind == 0:
        v = draw(st.integers(0, 10**16))
        return f"{v // 1000}.{v % 1000:03d}"
    if kind == 1:
        return str(draw(st.one_of(st.integers(-(10**6), 10**6), st.integers(10**15, 2 * 10**18))))
    if kind == 2:
        return repr(draw(st.floats(-1e18, 1e18, allow_nan=False)))
    if kind == 3:
        return draw(st.sampled_from(["1e3", "-0", "0.5e-2", "2.5E+1", "0"]))
    v = draw(st.integers(1_600_000_000_000_000_000, 1_800_000_000_000_000_000))
    return f"{v // 1000}.{v % 1000:03d}"


def _arg(draw, key: str, valid: bool) -> str:
    if not valid and draw(st.integers(0, 3)) == 0:
        return draw(_value())
    if key in ("grid", "block"):
        if draw(st.integers(0, 6)) == 0:
            return "null"
        return (
            "["
            + ", ".join(str(draw(st.integers(1, 2**16))) for _ in range(draw(st.integers(0, 4))))
            + "]"
        )
    if key in ("Collective name", "dtype"):
        return _str(draw)
    if key in ("Input Dims", "Op count"):
        return draw(_value())
    return draw(st.sampled_from(["null", str(draw(st.integers(-2, 2**40)))]))


@st.composite
def _event(draw, valid: bool):
    """One event's text: with valid, only what tier 0 reads (with text ids, epoch times, escapes,
    nulls, short grids, keys in any order); without, any value anywhere."""
    odd = lambda n: not valid and draw(st.integers(0, n)) == 0  # noqa: E731
    fields = {}
    if not odd(30):
        fields["ph"] = json.dumps(
            draw(st.sampled_from(["X"] * 8 + ["i", "M", "f", "s", "B"] + ([] if valid else ["Q"])))
        )
    if draw(st.integers(0, 20)):
        fields["cat"] = draw(_value()) if odd(12) else json.dumps(draw(st.sampled_from(_CATS)))
    fields["name"] = draw(_value()) if odd(10) else _str(draw)
    for k in ("pid", "tid"):
        if draw(st.integers(0, 8)):
            fields[k] = (
                draw(_value())
                if odd(4)
                else (str(draw(st.integers(0, 100))) if draw(st.integers(0, 4)) else _str(draw))
            )
    for k in ("ts", "dur"):
        if draw(st.integers(0, 40 if valid else 15)):
            fields[k] = draw(_value()) if odd(15) else _valid_num(draw)
    if draw(st.integers(0, 4)):
        if odd(12):
            fields["args"] = draw(_value())
        elif draw(st.integers(0, 15)) == 0:
            fields["args"] = "null"
        else:
            keys = draw(st.lists(st.sampled_from(_ARG_KEYS), max_size=7, unique=True))
            fields["args"] = (
                "{" + ", ".join(f"{json.dumps(k)}: {_arg(draw, k, valid)}" for k in keys) + "}"
            )
    order = draw(st.permutations(list(fields))) if draw(st.integers(0, 4)) == 0 else list(fields)
    return "{" + ", ".join(f'"{k}": {fields[k]}' for k in order) + "}"


@st.composite
def _document(draw) -> bytes:
    valid = draw(st.integers(0, 3)) > 0
    events = draw(st.lists(_event(valid), min_size=2, max_size=25))
    top = draw(st.sampled_from(['"schemaVersion": 1, ', ""]))
    return ("{" + top + '"traceEvents": [\n  ' + ",\n  ".join(events) + "\n]}").encode()


@needs_scanner
@settings(
    max_examples=500,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=_document())
def test_generated_documents_read_as_msgspec_reads_them(data):
    """Any document: both readers give the same frames and counts, or both step aside (tier 1 then reads it)."""
    with pytest.MonkeyPatch.context() as mp:
        _agree(data, mp)
        # pieces of a few events: some taken, some refused
        _agree(data, mp, step=300)


def test_the_layout_kept_in_the_samples_is_what_the_tests_write():
    """_dump writes Kineto's layout (one event per line after "[\\n  "), which the piece splitter is given."""
    raw = gzip.decompress(next(p for p in KINETO if p.name == "ffn_M1_eager.json.gz").read_bytes())
    assert b'"traceEvents": [\n  {' in raw and b"},\n  {" in raw


# ------------------------------------------------------------------------------------------- tables
# kept twice
@needs_scanner
@pytest.mark.parametrize(
    "cat",
    sorted(
        {
            *kineto_typed.KNOWN_CATEGORIES,
            *kineto_events._GPU_CATS,
            *kineto_events._API_CATS,
            *kineto_events._CPU_CATS,
            "vendor_op",
        }
    ),
)
def test_each_category_goes_to_the_group_msgspec_puts_it_in(cat, monkeypatch):
    """The scanner's category → table map is C's copy of kineto_events' sets: a category added on
    one side only would put its events in another table (or none)."""
    ev = (
        '{"ph": "X", "cat": "%s", "name": "op", "pid": 1, "tid": 2, "ts": 10.5, "dur": 1.25, '
        '"args": {"External id": 3, "correlation": 4, "device": 0, "stream": 7, "grid": [1, 2, '
        "3]}}" % cat
    )
    data = ('{"traceEvents": [\n  ' + ev + ",\n  " + ev.replace("10.5", "12.5") + "\n]}").encode()
    assert _pieces(data) == [True]
    _agree(data, monkeypatch)


@needs_scanner
@pytest.mark.parametrize("ph", [*kineto_typed._PHASES, "X", "Q", "XX", ""])
def test_each_phase_is_read_or_refused_as_msgspec_does(ph, monkeypatch):
    """The scanner's list of phases is C's copy of kineto_typed._PHASES (and "X")."""
    other = '{"ph": "%s", "cat": "cpu_op", "name": "n", "ts": 1.5, "dur": 2}' % ph
    kernel = '{"ph": "X", "cat": "kernel", "name": "k", "ts": 2.5, "dur": 1}'
    data = ('{"traceEvents": [\n  ' + kernel + ",\n  " + other + "\n]}").encode()
    got = _agree(data, monkeypatch)
    assert (_pieces(data) == [True]) == (not isinstance(got, str))
