"""The typed Kineto reader (collectors.kineto_typed, msgspec structs) against the readers it goes
before: on every real PyTorch profiler trace of the corpus and the H200 samples it gives exactly the
frames, top-level object, event count and category counts of the NDJSON reader (tier 1), or of the
exact reader (tier 2) where tier 1 cannot read the file; on variants of a real trace that exercise
its other branches (epoch timestamps with ns decimals, "args": null, a pid written as text, a grid
of two values) too; and a value its structs do not describe makes it step aside, the file then read
as before."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest
from polars.testing import assert_frame_equal

from collectors import kineto, kineto_events, kineto_typed
from collectors.decompress import read_chunks
from collectors.kineto_events import FastPathFailed
from tests.support.kineto_docs import (
    TRACES,  # noqa: F401
    _kineto,  # noqa: F401
    KINETO,
    _whole,
    _same,
    _doc,
    SAMPLE,
    _with_decimals,  # noqa: F401
    _sample,
    _dump,
)  # noqa: F401


@pytest.fixture(autouse=True, params=["scanner", "msgspec"])
def tier0(request, monkeypatch):
    """Each test twice: with the compiled scanner taking the pieces it can
    (collectors/_kineto_scan.c), and with msgspec decoding every piece
    (tests/collectors/test_kineto_scan.py holds the two to each other)."""
    monkeypatch.setenv("KERNELSCOPE_KINETO_SCAN", "1" if request.param == "scanner" else "0")
    return request.param


def _tier2(data: bytes):
    """Tier 2 (orjson, chunk by chunk), else tier 3 (the whole document at once), as collectors.kineto runs them."""

    def frames(top, chunks):
        out = {"gpu": [], "api": [], "cpu": [], "ann": []}
        cats: dict = {}
        n = 0
        for events in chunks:
            cols = kineto_events.collect_events(events, n, "t")
            for c, k in cols.cats.items():
                cats[c] = cats.get(c, 0) + k
            for k, df in kineto_events.event_frames(cols, "t").items():
                out[k].append(df)
            n += len(events)
        return top, out, n, cats

    try:
        return frames(*kineto_events.fast_chunks(data))
    except FastPathFailed:
        obj = kineto_events.loads(data)
        obj = {"traceEvents": obj} if isinstance(obj, list) else obj
        events = obj.pop("traceEvents")
        return frames(obj, [events])


def _reference(data: bytes):
    """(tier, result) of the reader that reads the document when the typed reader is not there."""
    try:
        return "ndjson", kineto_events.ndjson_frames(data)
    except FastPathFailed:
        return "exact", _tier2(data)


def test_the_corpus_has_traces_for_the_typed_reader():
    assert len(KINETO) >= 30


@pytest.mark.parametrize("path", KINETO, ids=[p.name for p in KINETO])
def test_typed_reader_equals_the_reader_before_it(path):
    data = _doc(path)
    tier, ref = _reference(data)
    try:
        typed = kineto_typed.typed_frames(data)
    except FastPathFailed:
        assert tier == "exact", f"{path.name}: tier 1 reads it, the typed reader must too"
        return
    _same(typed, ref)
    # many pieces
    streamed = kineto_typed.typed_stream(read_chunks(path, path.name, step=4096), step=5000)
    _same(streamed, ref)


def test_most_corpus_traces_take_the_typed_path():
    ok = 0
    for p in KINETO:
        try:
            kineto_typed.typed_frames(_doc(p))
            ok += 1
        except FastPathFailed:
            pass
    assert ok >= 25, ok


def _epoch_doc(shortest: bool) -> bytes:
    """ffn_M1_eager without baseTimeNanoseconds: ts as epoch µs (~1.8e15) with three decimals, or
    (shortest) as the shortest text of the nearest float64, which is what a writer printing a double
    writes."""
    doc = _sample()
    base = doc.pop("baseTimeNanoseconds")
    for e in doc["traceEvents"]:
        if "ts" in e:
            e["ts"] = Decimal(base) / 1000 + e["ts"]
            if shortest:
                e["ts"] = Decimal(repr(float(e["ts"])))
    return _dump(doc)


def test_epoch_timestamps_with_ns_decimals_are_read_from_their_digits():
    """Epoch µs with three decimals: float64 holds them to 0.25 µs only, so the typed reader reads
    those pieces' timestamps from their digits and every ns equals the trace's own; the NDJSON
    reader (which gets the numbers from polars as floats) is within 0.25 µs of them and equal on
    every other column."""
    data = _epoch_doc(shortest=False)
    assert re.search(rb'"ts": 17\d{14}\.\d{3}', data)
    typed = _whole(kineto_typed.typed_frames(data)[1])
    ndjson = _whole(kineto_events.ndjson_frames(data)[1])
    for k in typed:
        assert_frame_equal(typed[k].drop("ts"), ndjson[k].drop("ts"))
        assert (typed[k]["ts"] - ndjson[k]["ts"]).abs().max() <= 250
    original = kineto.parse(SAMPLE.read_bytes(), SAMPLE.name).tables["gpu_ops"]
    shifted = kineto.parse(data, "epoch.json").tables["gpu_ops"]
    assert shifted["start_ns"].to_list() == original["start_ns"].to_list()
    # the digits matter: a float64 reader loses them
    assert (typed["gpu"]["ts"] != ndjson["gpu"]["ts"]).any()


def test_epoch_timestamps_printed_from_doubles_equal_the_exact_reader():
    """The same timestamps printed as a double's shortest text: the typed and the exact reader agree
    to the ns. (polars' NDJSON reader, tier 1, formats the float it parsed, not always to the same
    shortest digits: within 0.25 µs.)"""
    data = _epoch_doc(shortest=True)
    assert re.search(rb'"ts": 17\d{14}\.\d\b', data)
    typed = kineto_typed.typed_frames(data)
    _same(typed, _tier2(data))
    ndjson = _whole(kineto_events.ndjson_frames(data)[1])
    for k, f in _whole(typed[1]).items():
        assert (f["ts"] - ndjson[k]["ts"]).abs().max() <= 250


def test_args_null_text_pid_and_short_grid_as_tier_one_reads_them():
    doc = _sample()
    ev = doc["traceEvents"]
    kernels = [e for e in ev if e.get("cat") == "kernel"]
    ops = [e for e in ev if e.get("cat") == "cpu_op"]
    kernels[0]["args"]["grid"] = kernels[0]["args"]["grid"][:2]  # [x, y]: grid_z null
    ops[0]["args"] = None  # "args": null
    ops[1]["pid"] = str(ops[1]["pid"])  # a pid written as text
    kernels[1]["tid"] = "stream 7"  # text that is no number: null
    data = _dump(doc)
    typed = kineto_typed.typed_frames(data)
    _same(typed, kineto_events.ndjson_frames(data))
    g = _whole(typed[1])["gpu"]
    assert g["grid_z"].null_count() == 1 and g["tid"].null_count() == 1
    c = _whole(typed[1])["cpu"]
    assert c["pid"].null_count() == 0 and c["external_id"].null_count() == 1


def test_events_of_the_tables_categories_that_are_not_complete_are_left_out(monkeypatch):
    """A kernel, a runtime call, a cpu_op or an annotation whose "ph" is not "X" (an instant, a
    begin) is not a row, as tier 1 and tier 2 read it; the typed reader looks at the events' phases
    only when a piece has one (its first reading meets a struct without a name), and reads them
    then."""
    # msgspec's second reading is what is tested
    monkeypatch.setenv("KERNELSCOPE_KINETO_SCAN", "0")
    doc = _sample()
    ev = doc["traceEvents"]
    for cat, ph in (("kernel", "i"), ("cuda_runtime", "B"), ("cpu_op", "i")):
        e = next(e for e in ev if e.get("cat") == cat)
        e["ph"] = ph
        e.pop("dur", None)
    data = _dump(doc)
    calls = []
    real = kineto_typed._group_columns

    def spy(events, cat, codes, text, dec):
        calls.append(sum(map(bool, codes)))
        return real(events, cat, codes, text, dec)

    monkeypatch.setattr(kineto_typed, "_group_columns", spy)
    typed = kineto_typed.typed_frames(data)
    _same(typed, _tier2(data))
    _same(typed, kineto_events.ndjson_frames(data))
    assert len(calls) == 2 and calls[0] - calls[1] == 3  # read again, without the three
    n = {k: sum(f.height for f in v) for k, v in typed[1].items()}
    # the document before the change
    whole = kineto_events.ndjson_frames(_dump(_sample()))
    assert {k: sum(f.height for f in v) for k, v in whole[1].items()} == {
        **n,
        "gpu": n["gpu"] + 1,
        "api": n["api"] + 1,
        "cpu": n["cpu"] + 1,
    }


@pytest.mark.parametrize(
    "change",
    [
        "bytes as text",
        "correlation as float",
        "ts missing",
        "flow id as text",
        "unknown phase",
        "phase missing",
        "flow ts as text",
    ],
)
def test_what_the_structs_do_not_describe_goes_to_the_next_reader(monkeypatch, change):
    """The typed reader steps aside (or, where the change is in what it does not read, reads the
    file); what the file gives (its tables, or the exact reader's one-line error) is what it gave
    without the typed reader."""
    doc = _sample()
    ev = doc["traceEvents"]
    k = next(e for e in ev if e.get("cat") == "kernel")
    if change == "bytes as text":
        k["args"]["bytes"] = "12"
    elif change == "correlation as float":
        k["args"]["correlation"] = 1.5
    elif change == "ts missing":
        del k["ts"]
    elif change == "unknown phase":  # not a phase of the Trace Event Format
        next(e for e in ev if e.get("ph") == "f")["ph"] = "Z"
    elif change == "phase missing":
        del next(e for e in ev if e.get("ph") == "f")["ph"]
    # other events' timestamps are not read (nor by tier 2)
    elif change == "flow ts as text":
        next(e for e in ev if e.get("ph") == "s")["ts"] = "12.5"
    # a field no struct declares: still read by the typed reader
    else:
        next(e for e in ev if e.get("ph") == "f")["id"] = "x"
    data = _dump(doc)

    def outcome():
        try:
            return kineto.parse(data, "t.json").tables
        except Exception as e:  # noqa: BLE001
            return f"{type(e).__name__}: {e}"

    got = outcome()
    if change in ("flow id as text", "flow ts as text"):
        kineto_typed.typed_frames(data)
    else:
        with pytest.raises(FastPathFailed):
            kineto_typed.typed_frames(data)
    monkeypatch.setattr(kineto, "typed_frames", lambda d: (_ for _ in ()).throw(FastPathFailed()))
    before = outcome()
    if isinstance(before, str):
        assert got == before and "traceEvents[" in before
    else:
        assert not isinstance(got, str)
        for t in got:
            assert got[t].equals(before[t]), t


# ------------------------------------------------------------------------- the splitter and the
# category structs
@pytest.mark.parametrize("chunk,step", [(4096, 5000), (1 << 20, 64 << 10), (7, 300)])
def test_pieces_are_the_events_in_order_framed_or_not(chunk, step):
    """split_events hands out memoryviews of its one buffer: framed, each is a JSON array of whole
    events (the bytes it writes the brackets over are put back: the unframed pieces of the same
    reading are the events' text exactly); together they are the document's events in order,
    whatever the chunk and piece sizes."""
    data = _doc(SAMPLE)
    if chunk < 100:
        data = _dump(_sample())[:200_000]
        data = data[: data.rindex(b"},\n  {") + 1] + b"\n]}"  # a shorter document, still whole
    events = kineto_events.loads(data)["traceEvents"]
    framed, plain, seps = [], [], set()

    def keep_framed(piece, sep):
        assert piece[0] == ord("[") and piece[-1] == ord("]")
        framed.extend(kineto_events.loads(bytes(piece)))

    def keep_plain(piece, sep):
        seps.add(sep)
        plain.append(bytes(piece))

    chunks = lambda: (data[i : i + chunk] for i in range(0, len(data), chunk))  # noqa: E731
    top = kineto_events.split_events(chunks(), keep_framed, step, framed=True)
    assert kineto_events.split_events(chunks(), keep_plain, step) == top
    assert "traceEvents" not in top and top == {
        k: v for k, v in kineto_events.loads(data).items() if k != "traceEvents"
    }
    assert framed == events
    (sep,) = seps
    # "}" sep "{"
    assert kineto_events.loads(b"[" + sep[1:-1].join(p.strip() for p in plain) + b"]") == events
    assert len(plain) > 1


@pytest.mark.parametrize("framed", [True, False])
def test_a_mapped_document_gives_the_pieces_of_the_chunked_one_and_is_released(tmp_path, framed):
    """The whole document as a private memory map (collectors.decompress.mapped): the same pieces as
    the document read in chunks, the file left as it was (the brackets are written into this
    process's copy of two pages and put back), and the pages already read unmapped piece by piece,
    in order, never past the piece being read."""
    import mmap

    data = _doc(SAMPLE)
    path = tmp_path / "t.json"
    path.write_bytes(data)
    step = 64 << 10
    chunked, pieces, released = [], [], []

    def keep(into):
        def read(piece, sep):
            into.append(bytes(piece))

        return read

    top = kineto_events.split_events(
        (data[i : i + 4096] for i in range(0, len(data), 4096)), keep(chunked), step, framed=framed
    )

    class Map(mmap.mmap):
        def madvise(self, option, start, length):
            assert (
                option == mmap.MADV_DONTNEED
                and start % mmap.PAGESIZE == 0 == length % mmap.PAGESIZE
            )
            assert start + length <= len(data) - len(pieces[-1])  # before the piece just read
            released.append((start, length))
            return super().madvise(option, start, length)

    with open(path, "rb") as f:
        m = Map(f.fileno(), 0, access=mmap.ACCESS_COPY)
    assert kineto_events.split_events(m, keep(pieces), step, framed=framed) == top
    assert m[:] == data and path.read_bytes() == data
    m.close()
    assert len(pieces) > 3
    assert (
        _events_of(pieces, framed)
        == _events_of(chunked, framed)
        == kineto_events.loads(data)["traceEvents"]
    )
    # contiguous, in order
    assert released and all(a + n == b for (a, n), (b, _) in zip(released, released[1:]))
    assert released[-1][0] + released[-1][1] > len(data) // 2


def _events_of(pieces: list[bytes], framed: bool) -> list:
    out = []
    for p in pieces:
        out.extend(kineto_events.loads(p if framed else b"[" + p + b"]"))
    return out


def test_a_category_outside_the_known_list_is_read_as_text(monkeypatch):
    """Categories are decoded as KNOWN_CATEGORIES (one shared string each); a piece with another
    category (a vendor's flow events, a newer Kineto's activity) is decoded again with categories as
    text, and reads as tier 1 reads it; without that second decoder the typed reader would step
    aside."""
    # msgspec's second decoder is what is tested
    monkeypatch.setenv("KERNELSCOPE_KINETO_SCAN", "0")
    doc = _sample()
    ev = doc["traceEvents"]
    for e in [e for e in ev if e.get("cat") == "ac2g"][:3]:
        e["cat"] = "vendor_flow"
    op = next(e for e in ev if e.get("cat") == "cpu_op")
    ev.append({**op, "cat": "vendor_op", "name": "vendor::thing"})
    assert "vendor_flow" not in kineto_typed.KNOWN_CATEGORIES
    data = _dump(doc)
    used = []
    real = kineto_typed._decoder

    def spy(comm, known):
        used.append(known)
        return real(comm=comm, known=known)

    monkeypatch.setattr(kineto_typed, "_decoder", spy)
    typed = kineto_typed.typed_frames(data)
    _same(typed, kineto_events.ndjson_frames(data))
    assert typed[3]["vendor_flow"] == 3 and typed[3]["vendor_op"] == 1
    # the piece was decoded again with text categories
    assert used == [False]
    with pytest.raises(kineto_typed.msgspec.ValidationError):
        kineto_typed._LEAN.decode(data[data.index(b"[\n  {") : data.rindex(b"]") + 1])
