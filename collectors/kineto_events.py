"""Reading a Chrome-trace JSON document's events into typed frames, fast and with exact errors.

The PyTorch profiler (Kineto) writes one JSON object with a `traceEvents` array. This module turns
the events of interest into polars frames per category (GPU ops, CUDA API calls, CPU ops,
annotations), in float µs as written; collectors.kineto converts the times, links launches and
builds the tables.

Three readers, tried in order: tier 1 reads the events array as NDJSON with polars (no Python object
per event); tier 2 parses the array chunk by chunk with orjson and builds columns in Python (exact
error messages naming the event); tier 3 parses the whole document at once (for layouts the chunk
splitter cannot handle).
"""

from __future__ import annotations

import io
import mmap
import re
from typing import Iterable

import orjson
import polars as pl

from collectors import progress
from collectors.errors import ArtifactError

loads = orjson.loads

# --------------------------------------------------------------------------------------------------
# Reading the JSON: the events array in chunks, so a large trace never exists as one list of dicts
# --------------------------------------------------------------------------------------------------
CHUNK_BYTES = 8 << 20
_SEP = re.compile(rb"\}\s*,\s*\{")
# PyTorch <= 1.9 (and some later Meta-internal builds) wrote "Kernel", "Memcpy", "Memset", "Runtime"
# and "Operator", and the lower-case arg "external id" on GPU and runtime events (formats.md §5.2)
_GPU_CATS = {
    "kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "gpu_memset": "memset",
    "Kernel": "kernel",
    "Memcpy": "memcpy",
    "Memset": "memset",
}
_API_CATS = {"cuda_runtime", "cuda_driver", "Runtime"}
_CPU_CATS = {"cpu_op", "Operator"}


class FastPathFailed(Exception):
    pass


def json_error(name: str, e: Exception) -> ArtifactError:
    return ArtifactError(name, f"not valid JSON ({e}); the file may be truncated or not a trace")


def _locate(data: bytes) -> tuple[dict, int, int]:
    """(top-level object without traceEvents, index of the events array's "[", index of its "]").
    The rest of the document with an empty array must parse; raises FastPathFailed otherwise."""
    key = data.find(b'"traceEvents"')
    if key < 0:
        raise FastPathFailed
    m = re.compile(rb'"traceEvents"\s*:\s*\[').match(data, key)
    if not m:
        raise FastPathFailed
    open_at = m.end() - 1
    head = data[:open_at]
    top = None
    close_at = len(data)
    for _ in range(8):  # the array's closing bracket: the last "]" after which the document parses
        close_at = data.rfind(b"]", open_at, close_at)
        if close_at < 0:
            raise FastPathFailed
        try:
            top = loads(head + b"[]" + data[close_at + 1 :])
            break
        except ValueError:
            continue
    if not isinstance(top, dict):
        raise FastPathFailed
    top.pop("traceEvents", None)
    return top, open_at, close_at


def fast_chunks(data: bytes) -> tuple[dict, Iterable[list]]:
    """(top-level object without traceEvents, iterator over lists of events).

    Locate the `traceEvents` array and split it between events at `}, {` separators into pieces of
    about CHUNK_BYTES, each parsed on its own. Every piece (and the rest of the document with an
    empty array) must parse as JSON; a split inside a string cannot, so a wrong guess raises
    FastPathFailed and the caller parses the whole document at once instead."""
    top, open_at, close_at = _locate(data)

    # split points first (cheap), so a failure is found before any event is used
    bounds = []
    pos = open_at + 1
    while pos < close_at:
        target = pos + CHUNK_BYTES
        sep = _SEP.search(data, target, close_at) if target < close_at else None
        end = sep.start() + 1 if sep else close_at
        bounds.append((pos, end))
        pos = sep.end() - 1 if sep else close_at

    def gen():
        for a, b in bounds:
            piece = data[a:b]
            if not piece.strip():
                continue
            try:
                yield loads(b"[" + piece + b"]")
            except ValueError:
                raise FastPathFailed from None

    # parse the first piece eagerly so the common failure (not a split problem) surfaces here
    it = gen()
    try:
        first = next(it)
    except StopIteration:
        return top, iter(())
    return top, _chain_first(first, it)


def _chain_first(first, it):
    yield first
    yield from it


# --------------------------------------------------------------------------------------------------
# Tier 1: the events array as NDJSON, read by polars (no Python object per event)
# --------------------------------------------------------------------------------------------------
NDJSON_CHUNK_BYTES = 8 << 20
_NL_TO_SPACE = bytes.maketrans(b"\r\n", b"  ")
#: args of a collective kernel (PyTorch >= 2.1) -> gpu_ops column
COMM_ARGS = {
    "Collective name": "collective",
    "In msg nelems": "comm_in_nelems",
    "Out msg nelems": "comm_out_nelems",
    "dtype": "comm_dtype",
    "Group size": "comm_group_size",
}
_COMM_TYPES = {
    "Collective name": pl.String,
    "In msg nelems": pl.Int64,
    "Out msg nelems": pl.Int64,
    "dtype": pl.String,
    "Group size": pl.Int64,
}
_ARGS = pl.Struct(
    {
        "device": pl.Int64,
        "stream": pl.Int64,
        "correlation": pl.Int64,
        "External id": pl.Int64,
        "external id": pl.Int64,
        "grid": pl.List(pl.Int64),
        "block": pl.List(pl.Int64),
        "registers per thread": pl.Int64,
        "shared memory": pl.Int64,
        "bytes": pl.Int64,
        **_COMM_TYPES,
    }
)
_EVENT_SCHEMA = {
    "ph": pl.String,
    "cat": pl.String,
    "name": pl.Categorical,
    "pid": pl.String,
    "tid": pl.String,
    "ts": pl.Float64,
    "dur": pl.Float64,
    "args": _ARGS,
}
# Times to integer ns. Below 2**43 µs a float64 is within half a ns of the three-decimal µs value
# Kineto wrote (its spacing there is at most 2**-10 µs = 0.98 ns), so rounding to the ns gives it
# back: every timestamp relative to baseTimeNanoseconds (~5e12 µs in PyTorch 2.x traces) and every
# duration. An absolute epoch timestamp (~1.7e15 µs, traces without baseTimeNanoseconds) is held
# only to 0.25 µs, so "1712195495705754.8" would read as ...754.75: such a piece is read again with
# ts as text and converted from its digits (exact_ns).
EXACT_FLOAT_US = float(2**43)
_TEXT_TS_SCHEMA = dict(_EVENT_SCHEMA, ts=pl.String)


def float_ns(col: str) -> pl.Expr:
    """µs as float64 -> Int64 ns: whole µs exactly, the fraction rounded to the ns (exact below
    EXACT_FLOAT_US and for whole µs)."""
    whole = pl.col(col).floor()
    return ((pl.col(col) - whole) * 1000.0).round().cast(pl.Int64) + whole.cast(pl.Int64) * 1000


def needs_text(ts: pl.Series) -> bool:
    """Whether float64 cannot hold these timestamps to the ns: beyond EXACT_FLOAT_US with fractional values."""
    t = ts.drop_nulls()
    return bool(t.len()) and float(t.abs().max()) >= EXACT_FLOAT_US and not bool((t % 1 == 0).all())


def exact_ns(col: str) -> pl.Expr:
    """A decimal µs value written as text ("1712195495705754.8", "63.813", "-2") -> Int64 ns,
    exactly for up to three decimals (Kineto writes ns as three decimals), rounded half up at the
    fourth; exponent forms (never written by Kineto) through float64. Not a number -> null."""
    s = pl.col(col).cast(pl.String).str.strip_chars()
    neg = s.str.starts_with("-")
    body = s.str.strip_prefix("-")
    parts = body.str.split_exact(".", 1)
    ip = parts.struct.field("field_0").cast(pl.Int64, strict=False)
    fp = parts.struct.field("field_1").fill_null("")
    digits_ok = fp.str.contains(r"^\d*$")
    frac = (fp + "000").str.slice(0, 3).cast(pl.Int64, strict=False)
    up = ((fp + "0000").str.slice(3, 1).cast(pl.Int64, strict=False) >= 5).cast(pl.Int64)
    v = ip * 1000 + frac + up
    exact = pl.when(neg).then(-v).otherwise(v)
    approx = (s.cast(pl.Float64, strict=False) * 1000.0).round().cast(pl.Int64, strict=False)
    return pl.when(ip.is_not_null() & digits_ok).then(exact).otherwise(approx)


_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_HEAD_MAX = 64 << 20


def _slices(data: bytes, step: int):
    view = memoryview(data)
    for i in range(0, len(view), step):
        yield view[i : i + step]


def ndjson_frames(data: bytes) -> tuple[dict, dict[str, list[pl.DataFrame]], int, dict[str, int]]:
    """Tier 1 reader over a document in memory (see ndjson_stream)."""
    return ndjson_stream(_slices(data, NDJSON_CHUNK_BYTES))


def ndjson_stream(
    chunks: Iterable,
) -> tuple[dict, dict[str, list[pl.DataFrame]], int, dict[str, int]]:
    """Tier 1 reader: (top, typed frames per category, number of events, events per category), from
    the document's bytes given as a stream of chunks (a file read piece by piece, or a gzip stream
    decompressed piece by piece), so a large trace is never held whole in memory.

    JSON text cannot hold a raw newline inside a string, so the events array becomes NDJSON by turning the
    separator between events (the bytes of the first `}, {` found, e.g. Kineto's "},\n  {") into a
    newline once every newline has become a space. polars then reads each piece of about NDJSON_CHUNK_BYTES
    with a fixed schema. The top-level object is what remains with an empty events array (it must parse).
    Anything unexpected (another separator layout, a split inside a string, a value of the wrong type, a
    missing ts / dur / name) raises FastPathFailed, and the exact Python readers take over."""
    frames: dict[str, list[pl.DataFrame]] = {"gpu": [], "api": [], "cpu": [], "ann": []}
    n_events = 0
    cats: dict[str, int] = {}

    def read(piece, sep: bytes) -> None:
        nonlocal n_events
        piece = bytes(piece).translate(_NL_TO_SPACE).replace(sep.translate(_NL_TO_SPACE), b"}\n{")
        try:
            df = pl.read_ndjson(io.BytesIO(piece), schema=_EVENT_SCHEMA)
            if needs_text(df["ts"]):
                df = pl.read_ndjson(io.BytesIO(piece), schema=_TEXT_TS_SCHEMA)
        except (pl.exceptions.PolarsError, ValueError, TypeError):
            raise FastPathFailed from None
        del piece
        n_events += df.height
        for c, n in df["cat"].fill_null("<none>").value_counts().iter_rows():
            cats[c] = cats.get(c, 0) + n
        for k, f in _split_events(df).items():
            frames[k].append(f)

    top = split_events(chunks, read, NDJSON_CHUNK_BYTES)
    return top, frames, n_events, cats


def split_events(chunks: Iterable, read, step: int, framed: bool = False) -> dict:
    """The events array of a Chrome-trace document, given as a stream of byte chunks, handed to `read(piece, sep)`
    in pieces of whole events of about `step` bytes (`piece`: the events' text joined by `sep`, the bytes
    between the first two events, e.g. Kineto's "},\n  {"); returns the top-level object without traceEvents (what
    remains with an empty events array; it must parse). FastPathFailed when the layout is not found.

    A piece is a memoryview of one reading buffer, valid only during the call: the chunks are copied
    into it and what follows the last whole event is moved to its front, so no piece is copied and
    its memory is not allocated (and its pages faulted in) again for every piece. `chunks` may
    instead be the whole document as a private memory map (collectors.decompress.mapped): the pieces
    are then views of the page cache's pages, copied nowhere, and the pages read are unmapped as it
    goes, so they do not stay in the process's memory. framed: the piece is a JSON array ("[" and
    "]" around the events), written over the byte before the first event and the first byte after
    the last one (a separator's or the array's own), which are put back after the call."""
    if isinstance(chunks, mmap.mmap):
        buf, lo, hi, eof = chunks, 0, len(chunks), True
        done = 0  # buf[:done] unmapped (whole pages)
    else:
        it = iter(chunks)
        # grown to about twice the largest chunk, then reused
        buf = bytearray()
        lo = hi = 0  # the bytes not yet handed on: buf[lo:hi]
        eof = False
        done = None

    def more() -> bool:
        nonlocal eof, buf, lo, hi
        if eof:
            return False
        nxt = next(it, None)
        if nxt is None:
            eof = True
            return False
        n = len(nxt)
        if hi + n > len(buf):  # move what is left to the front, or grow
            left = bytes(memoryview(buf)[lo:hi])
            if len(left) + n > len(buf):
                buf = bytearray(max(2 * len(buf), len(left) + n))
            buf[: len(left)] = left
            lo, hi = 0, len(left)
        buf[hi : hi + n] = nxt
        hi += n
        return True

    def give(start: int, end: int) -> None:
        """read() the events buf[start:end]; buf[start - 1] and buf[end] exist (framed: the brackets go there)."""
        if not framed:
            read(memoryview(buf)[start:end], sep)
            if done is not None:
                unmap(start)
            return
        before, after = buf[start - 1], buf[end]
        buf[start - 1], buf[end] = 0x5B, 0x5D  # "[", "]"
        try:
            read(memoryview(buf)[start - 1 : end + 1], sep)
        finally:
            buf[start - 1], buf[end] = before, after
        if done is not None:
            unmap(start - 1)

    def unmap(upto: int) -> None:
        """A mapped document's pages before buf[upto] are no longer needed: out of this process's
        memory (the page cache keeps them; the bytes written into them had been put back)."""
        nonlocal done
        end = upto - upto % mmap.PAGESIZE
        if end > done and hasattr(buf, "madvise"):
            buf.madvise(mmap.MADV_DONTNEED, done, end - done)
            done = end
        # the bytes read so far (a stream's are said by collectors.decompress.read_chunks)
        progress.report("reading", upto, len(buf), "B")

    # the head
    while (m := _EVENTS_KEY.search(buf, lo, hi if done is None else min(hi, _HEAD_MAX))) is None:
        if hi - lo > _HEAD_MAX or not more():
            raise FastPathFailed
    head = bytes(buf[lo : m.end() - 1])
    # buf[lo]: the array's "[", one byte before the events
    lo = m.end() - 1
    while (m := _SEP.search(buf, lo, hi)) is None:  # the separator between two events
        if not more():
            # zero or one event: not worth a special path
            raise FastPathFailed
    sep = m.group(0)

    while True:
        while hi - lo < step and more():
            pass
        if eof:
            break
        # whole events only; the rest waits for more bytes
        cut = buf.rfind(sep, lo, hi)
        if cut < 0:
            if not more():
                break
            continue
        give(lo + 1, cut + 1)
        # the next event's "{" and the byte before it
        lo = cut + len(sep) - 2
    # the end: the last events, the array's "]", and the rest of the top-level object
    close = hi
    top = None
    for _ in range(8):
        close = buf.rfind(b"]", lo + 1, close)
        if close < 0:
            raise FastPathFailed
        try:
            top = loads(head + b"[]" + bytes(buf[close + 1 : hi]))
            break
        except ValueError:
            continue
    if not isinstance(top, dict):
        raise FastPathFailed
    top.pop("traceEvents", None)
    pos = lo + 1  # buf[close]: the array's "]"
    while close - pos > step:  # what is left may still be more than one piece
        cut = buf.rfind(sep, pos, pos + step)
        if cut < 0:
            break
        give(pos, cut + 1)
        pos = cut + len(sep) - 1
    if _NOT_BLANK.search(buf, pos, close):
        give(pos, close)
    if done is not None:
        progress.report("reading", len(buf), len(buf), "B")
    return top


_NOT_BLANK = re.compile(rb"\S")


def _split_events(df: pl.DataFrame) -> dict[str, pl.DataFrame]:
    """One NDJSON piece -> the frames `_build` takes (same columns as the Python readers produce)."""
    x = df.filter(pl.col("ph") == "X")
    cat = pl.col("cat")
    a = pl.col("args")
    # "Spans" etc. become null
    ident = lambda c: pl.col(c).cast(pl.Int64, strict=False)
    ts = exact_ns("ts") if df.schema["ts"] == pl.String else float_ns("ts")
    base = [
        pl.col("name"),
        ident("pid").alias("pid"),
        ident("tid").alias("tid"),
        ts.alias("ts"),
        float_ns("dur").alias("dur"),
    ]
    ext = pl.coalesce(a.struct.field("External id"), a.struct.field("external id")).alias(
        "external_id"
    )
    out = {}
    g = x.filter(cat.is_in(list(_GPU_CATS)))
    if g.height:
        out["gpu"] = g.select(
            cat.replace_strict(_GPU_CATS, return_dtype=pl.String).alias("kind"),
            *base,
            a.struct.field("device").alias("device"),
            a.struct.field("stream").alias("stream"),
            a.struct.field("correlation").alias("correlation"),
            ext,
            *[
                a.struct.field(f).list.get(i, null_on_oob=True).cast(pl.Int32).alias(f"{f}_{xyz}")
                for f in ("grid", "block")
                for i, xyz in enumerate("xyz")
            ],
            a.struct.field("registers per thread").alias("registers_per_thread"),
            a.struct.field("shared memory").alias("shared_memory_bytes"),
            a.struct.field("bytes").alias("bytes"),
            *[a.struct.field(k).alias(c) for k, c in COMM_ARGS.items()],
        )
    api = x.filter(cat.is_in(list(_API_CATS)))
    if api.height:
        out["api"] = api.select(*base, a.struct.field("correlation").alias("correlation"), ext)
    cpu = x.filter(cat.is_in(list(_CPU_CATS)))
    if cpu.height:
        out["cpu"] = cpu.select(*base, ext)
    ann = x.filter(cat == "user_annotation")
    if ann.height:
        out["ann"] = ann.select(*base)
    for f in out.values():
        if f.select(pl.any_horizontal(pl.col("name", "ts", "dur").is_null().any())).item():
            raise FastPathFailed  # the exact reader names the event
    return out


# --------------------------------------------------------------------------------------------------
# Tier 2: events -> Python objects -> columns (exact error messages)
# --------------------------------------------------------------------------------------------------
class _Cols:
    """Per-category column lists of one chunk."""

    def __init__(self):
        self.gpu = {
            k: []
            for k in (
                "kind",
                "name",
                "pid",
                "tid",
                "ts",
                "dur",
                "device",
                "stream",
                "correlation",
                "external_id",
                "grid",
                "block",
                "regs",
                "smem",
                "bytes",
                "idx",
                *COMM_ARGS,
            )
        }
        self.api = {
            k: [] for k in ("name", "pid", "tid", "ts", "dur", "correlation", "external_id", "idx")
        }
        self.cpu = {k: [] for k in ("name", "pid", "tid", "ts", "dur", "external_id", "idx")}
        self.ann = {k: [] for k in ("name", "pid", "tid", "ts", "dur", "idx")}
        self.cats: dict[str, int] = {}


def collect_events(events: list, base_idx: int, name: str) -> _Cols:
    c = _Cols()
    g, a, p, n = c.gpu, c.api, c.cpu, c.ann
    g_kind, g_name, g_pid, g_tid, g_ts, g_dur = (
        g["kind"].append,
        g["name"].append,
        g["pid"].append,
        g["tid"].append,
        g["ts"].append,
        g["dur"].append,
    )
    g_dev, g_str, g_cor, g_ext, g_grid, g_block = (
        g["device"].append,
        g["stream"].append,
        g["correlation"].append,
        g["external_id"].append,
        g["grid"].append,
        g["block"].append,
    )
    g_regs, g_smem, g_bytes, g_idx = (
        g["regs"].append,
        g["smem"].append,
        g["bytes"].append,
        g["idx"].append,
    )
    gpu_cats, api_cats, cpu_cats = _GPU_CATS, _API_CATS, _CPU_CATS
    empty_args: dict = {}
    cats = c.cats
    for i, e in enumerate(events):
        if type(e) is not dict:
            raise ArtifactError(
                name, f"traceEvents[{base_idx + i}] is a {type(e).__name__}, expected an object"
            )
        cat = e.get("cat")
        key = cat if isinstance(cat, str) else "<none>"
        cats[key] = cats.get(key, 0) + 1
        if e.get("ph") != "X":
            continue
        kind = gpu_cats.get(cat)
        if kind is not None:
            args = e.get("args", empty_args)
            if type(args) is not dict:
                raise ArtifactError(
                    name, f"traceEvents[{base_idx + i}] ({cat}): 'args' is not an object"
                )
            g_kind(kind)
            g_name(e.get("name"))
            g_pid(e.get("pid"))
            g_tid(e.get("tid"))
            g_ts(e.get("ts"))
            g_dur(e.get("dur"))
            g_dev(args.get("device"))
            g_str(args.get("stream"))
            g_cor(args.get("correlation"))
            g_ext(_ext(args))
            g_grid(args.get("grid"))
            g_block(args.get("block"))
            g_regs(args.get("registers per thread"))
            g_smem(args.get("shared memory"))
            g_bytes(args.get("bytes"))
            g_idx(base_idx + i)
            for k in COMM_ARGS:
                g[k].append(args.get(k))
        elif cat in api_cats:
            args = e.get("args", empty_args)
            if type(args) is not dict:
                raise ArtifactError(
                    name, f"traceEvents[{base_idx + i}] ({cat}): 'args' is not an object"
                )
            a["name"].append(e.get("name"))
            a["pid"].append(e.get("pid"))
            a["tid"].append(e.get("tid"))
            a["ts"].append(e.get("ts"))
            a["dur"].append(e.get("dur"))
            a["correlation"].append(args.get("correlation"))
            a["external_id"].append(_ext(args))
            a["idx"].append(base_idx + i)
        elif cat in cpu_cats:
            args = e.get("args", empty_args)
            if type(args) is not dict:
                raise ArtifactError(
                    name, f"traceEvents[{base_idx + i}] ({cat}): 'args' is not an object"
                )
            p["name"].append(e.get("name"))
            p["pid"].append(e.get("pid"))
            p["tid"].append(e.get("tid"))
            p["ts"].append(e.get("ts"))
            p["dur"].append(e.get("dur"))
            p["external_id"].append(_ext(args))
            p["idx"].append(base_idx + i)
        elif cat == "user_annotation":
            n["name"].append(e.get("name"))
            n["pid"].append(e.get("pid"))
            n["tid"].append(e.get("tid"))
            n["ts"].append(e.get("ts"))
            n["dur"].append(e.get("dur"))
            n["idx"].append(base_idx + i)
    return c


def _ext(args: dict):
    v = args.get("External id")
    return args.get("external id") if v is None else v


def _series(
    values: list, dtype, field: str, idx: list, name: str, *, required: bool = False
) -> pl.Series:
    """A typed column; wrong types or (for required fields) missing values -> ArtifactError naming the event."""
    try:
        s = pl.Series(field, values, dtype=dtype, strict=True)
    except (TypeError, ValueError, OverflowError, pl.exceptions.PolarsError):
        s = None
    if s is None or (required and s.null_count()):
        want = {pl.Float64: "a number", pl.Int64: "an integer", pl.String: "a string"}.get(
            dtype, str(dtype)
        )
        for v, i in zip(values, idx):
            if v is None:
                if required:
                    raise ArtifactError(name, f"traceEvents[{i}] has no '{field}'")
                continue
            try:
                pl.Series([v], dtype=dtype, strict=True)
            except (TypeError, ValueError, OverflowError, pl.exceptions.PolarsError):
                raise ArtifactError(
                    name, f"traceEvents[{i}]: '{field}' is {v!r}, expected {want}"
                ) from None
            if isinstance(v, bool):
                raise ArtifactError(name, f"traceEvents[{i}]: '{field}' is {v!r}, expected {want}")
        raise ArtifactError(name, f"column {field!r} has values of the wrong type")
    return s


def _id_series(values: list, field: str, idx: list, name: str) -> pl.Series:
    """pid / tid: integers in Kineto's CPU and GPU events; other strings become null."""
    try:
        return pl.Series(field, values, dtype=pl.Int64, strict=True)
    except (TypeError, ValueError, OverflowError, pl.exceptions.PolarsError):
        return pl.Series(field, [v if type(v) is int else None for v in values], dtype=pl.Int64)


def _dim(values: list, k: int, field: str, idx: list, name: str) -> pl.Series:
    out = []
    for v, i in zip(values, idx):
        if v is None:
            out.append(None)
        elif isinstance(v, list) and len(v) == 3 and all(type(x) is int for x in v):
            out.append(v[k])
        else:
            raise ArtifactError(
                name, f"traceEvents[{i}]: '{field}' is {v!r}, expected [x, y, z] integers"
            )
    return pl.Series(out, dtype=pl.Int32)


def event_frames(c: _Cols, name: str) -> dict[str, pl.DataFrame]:
    """Typed frames of one chunk (ts, dur: Int64 ns; ts beyond float64's ns range through the
    numbers' shortest text, which is the text the writer printed, and exact_ns)."""
    out = {}
    g = c.gpu
    if g["ts"]:
        ix = g["idx"]
        out["gpu"] = pl.DataFrame(
            [
                pl.Series("kind", g["kind"], dtype=pl.String),
                _series(g["name"], pl.String, "name", ix, name, required=True),
                _id_series(g["pid"], "pid", ix, name),
                _series(g["ts"], pl.Float64, "ts", ix, name, required=True),
                _series(g["dur"], pl.Float64, "dur", ix, name, required=True),
                _series(g["device"], pl.Int64, "device", ix, name),
                _series(g["stream"], pl.Int64, "stream", ix, name),
                _series(g["correlation"], pl.Int64, "correlation", ix, name),
                _series(g["external_id"], pl.Int64, "External id", ix, name).alias("external_id"),
                _dim(g["grid"], 0, "grid", ix, name).alias("grid_x"),
                _dim(g["grid"], 1, "grid", ix, name).alias("grid_y"),
                _dim(g["grid"], 2, "grid", ix, name).alias("grid_z"),
                _dim(g["block"], 0, "block", ix, name).alias("block_x"),
                _dim(g["block"], 1, "block", ix, name).alias("block_y"),
                _dim(g["block"], 2, "block", ix, name).alias("block_z"),
                _series(g["regs"], pl.Int64, "registers per thread", ix, name).alias(
                    "registers_per_thread"
                ),
                _series(g["smem"], pl.Int64, "shared memory", ix, name).alias(
                    "shared_memory_bytes"
                ),
                _series(g["bytes"], pl.Int64, "bytes", ix, name),
                _id_series(g["tid"], "tid", ix, name),
                *[
                    _series(g[k], _COMM_TYPES[k], k, ix, name).alias(c)
                    for k, c in COMM_ARGS.items()
                ],
            ]
        )
    for key, cols, extra in (
        ("api", c.api, ("correlation", "external_id")),
        ("cpu", c.cpu, ("external_id",)),
        ("ann", c.ann, ()),
    ):
        if not cols["ts"]:
            continue
        ix = cols["idx"]
        series = [
            _series(cols["name"], pl.String, "name", ix, name, required=True),
            _id_series(cols["pid"], "pid", ix, name),
            _id_series(cols["tid"], "tid", ix, name),
            _series(cols["ts"], pl.Float64, "ts", ix, name, required=True),
            _series(cols["dur"], pl.Float64, "dur", ix, name, required=True),
        ]
        for f in extra:
            series.append(
                _series(
                    cols[f],
                    pl.Int64,
                    "correlation" if f == "correlation" else "External id",
                    ix,
                    name,
                ).alias(f)
            )
        out[key] = pl.DataFrame(series)
    return {
        k: f.with_columns(
            exact_ns("ts").alias("ts") if needs_text(f["ts"]) else float_ns("ts").alias("ts"),
            float_ns("dur").alias("dur"),
        )
        for k, f in out.items()
    }
