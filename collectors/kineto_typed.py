"""Tier 0 of the Kineto reader: the events decoded by msgspec into typed structs that declare only
the fields the timeline tables use, in pieces of whole events
(collectors.kineto_events.split_events).

More: docs/architecture.md, *collectors.kineto_typed*.
"""

from __future__ import annotations

import gc
import os
from collections import Counter
from functools import lru_cache
from itertools import compress, repeat
from operator import mul
from typing import Iterable, Literal, Optional, Union

import msgspec
import polars as pl

# the compiled scanner (collectors/_kineto_scan.c), built when installed
try:
    from collectors import _kineto_scan
# no compiler at install time: every piece is decoded by msgspec
except ImportError:
    _kineto_scan = None

from collectors.kineto_events import (
    _API_CATS,
    _CPU_CATS,
    _GPU_CATS,
    COMM_ARGS,
    FastPathFailed,
    exact_ns,
    float_ns,
    needs_text,
    split_events,
)

# (attribute, type, JSON key) of the arguments the tables use; the collective's other arguments are
# declared only for a piece whose kernels have a "Collective name". In the order Kineto writes a
# kernel's arguments: msgspec looks a key up from the field after the last one matched, so this
# order decodes a 67 MB piece of the 304 MB perf trace 3-5 % faster than the order before (182
# against 193 ms, medians of 9 alternated; docs/findings-kineto-reader.md)
_ARG_FIELDS = [
    ("external_id", int, "External id"),
    ("device", int, "device"),
    ("stream", int, "stream"),
    ("correlation", int, "correlation"),
    ("registers_per_thread", int, "registers per thread"),
    ("shared_memory_bytes", int, "shared memory"),
    ("grid", list[int], "grid"),
    ("block", list[int], "block"),
    ("bytes", int, "bytes"),
    ("external_id_lc", int, "external id"),  # PyTorch <= 1.9
    ("collective", str, "Collective name"),
]
_COMM_FIELDS = [
    ("comm_in_nelems", int, "In msg nelems"),
    ("comm_out_nelems", int, "Out msg nelems"),
    ("comm_dtype", str, "dtype"),
    ("comm_group_size", int, "Group size"),
]
assert {a: k for a, _, k in _ARG_FIELDS + _COMM_FIELDS if a.startswith(("coll", "comm"))} == {
    a: k for k, a in COMM_ARGS.items()
}


# The categories PyTorch's profiler writes (Kineto's ActivityType names, the flow events' and those
# of PyTorch <= 1.9): decoded as Literal values, a category is one shared string instead of a new
# one per event (a third of the events' objects, and a hash computed anew for each count); a piece
# with another category is decoded again with categories as plain text.
KNOWN_CATEGORIES = (
    "cpu_op",
    "user_annotation",
    "gpu_user_annotation",
    "gpu_memcpy",
    "gpu_memset",
    "kernel",
    "external_correlation",
    "cuda_runtime",
    "cuda_driver",
    "cpu_instant_event",
    "python_function",
    "overhead",
    "cuda_sync",
    "cuda_profiler_range",
    "collective_comm",
    "gpu_pm_counter",
    "mtia_runtime",
    "mtia_ccp_events",
    "glow_runtime",
    "hpu_op",
    "xpu_runtime",
    "xpu_driver",
    "privateuse1_runtime",
    "privateuse1_driver",
    "ac2g",
    "fwdbwd",
    "async",
    "async_cpu_to_gpu",
    "async_gpu",
    "Trace",
    "Kernel",
    "Memcpy",
    "Memset",
    "Runtime",
    "Operator",
    "Python",
)
_CAT_TYPES = {True: Optional[Literal[KNOWN_CATEGORIES]], False: Optional[str]}

# The phases of the Trace Event Format; an event with another "ph" (or none) goes to the next
# reader.
_PHASES = (
    "B",
    "E",
    "i",
    "I",
    "C",
    "b",
    "n",
    "e",
    "s",
    "t",
    "f",
    "P",
    "N",
    "O",
    "D",
    "M",
    "V",
    "v",
    "R",
    "c",
    "(",
    ")",
)


@lru_cache(maxsize=2)
def _others(known: bool) -> tuple:
    """Any other event (flow arrows, metadata, instants, counters ...): only its category, which is
    counted; the rest (timestamp, names, ids, args) is skipped without building it, as tier 2
    ignores it. One struct per phase."""
    base = msgspec.defstruct("_Other", [("cat", _CAT_TYPES[known], None)], gc=False, tag_field="ph")
    return tuple(
        msgspec.defstruct(f"_Other{i}", [], bases=(base,), tag=ph) for i, ph in enumerate(_PHASES)
    )


class _TextTs(msgspec.Struct, gc=False):
    """The timestamps of the same events as written (for epoch µs beyond float64's ns resolution)."""

    ts: msgspec.Raw = msgspec.Raw()  # empty: no ts


class _Decoder:
    """The structs and decoder of events, with the collective's arguments (comm) or without, the
    categories as KNOWN_CATEGORIES (known) or any text."""

    def __init__(self, comm: bool, known: bool):
        self.known = known
        fields = _ARG_FIELDS + (_COMM_FIELDS if comm else [])
        self.fields = {a for a, _, _ in fields}
        self.args = msgspec.defstruct(
            "_Args",
            [(a, Optional[t], msgspec.field(default=None, name=k)) for a, t, k in fields],
            gc=False,
        )
        self.no_args = self.args()
        # a complete event ("ph": "X"): every field the tables use
        self.event = msgspec.defstruct(
            "_Event",
            [
                ("cat", _CAT_TYPES[known], None),
                ("name", Optional[str], None),
                ("pid", Union[int, str, None], None),
                ("tid", Union[int, str, None], None),
                ("ts", Optional[float], None),
                ("dur", Optional[float], None),
                ("args", Optional[self.args], None),
            ],
            gc=False,
            tag_field="ph",
            tag="X",
        )
        self.decode = msgspec.json.Decoder(list[Union[(self.event, *_others(known))]]).decode


@lru_cache(maxsize=4)
def _decoder(comm: bool, known: bool) -> _Decoder:
    return _Decoder(comm, known)


_LEAN = _decoder(comm=False, known=True)


class _NeedsComm(Exception):
    """A piece decoded without the collective's arguments has a kernel with a "Collective name"."""


#: events decoded at a time: larger pieces spend less in per-piece costs, smaller ones hold less
#: memory
TYPED_PIECE_BYTES = 8 << 20
_DECODE_TS = msgspec.json.Decoder(list[_TextTs]).decode
_ERRORS = (msgspec.DecodeError, msgspec.ValidationError)


def _lister(field: str):
    """objs -> [o.<field> for o in objs]: a list comprehension, which reads a struct field about
    twice as fast as map(attrgetter(field), objs) (CPython specializes the attribute load)."""
    assert field.isidentifier()
    scope: dict = {}
    exec(f"def get(objs):\n    return [o.{field} for o in objs]", scope)
    return scope["get"]


_GET = {a: _lister(a) for a, _, _ in _ARG_FIELDS + _COMM_FIELDS}
_ARG_TYPES = {"collective": pl.String, "comm_dtype": pl.String}
_GROUPS = ("gpu", "api", "cpu", "ann")
# a category's group as a code 1-4 (0: none); an event's selector of group c: its code translated by
# _PICK[c]
_CODE_OF = {
    **{c: 1 for c in _GPU_CATS},
    **{c: 2 for c in _API_CATS},
    **{c: 3 for c in _CPU_CATS},
    "user_annotation": 4,
}
_CODE_BYTE = [bytes([c]) for c in range(len(_GROUPS) + 1)]
# with categories decoded as KNOWN_CATEGORIES: each event's category as a byte (1 + its index, 0:
# none), counted by bytes.count (a C scan per category) instead of a Counter's hash lookup per
# event, and turned into group codes by one translate
_CAT_CODE = {None: 0, **{c: i for i, c in enumerate(KNOWN_CATEGORIES, 1)}}
_CAT_COUNTED = [(bytes([i]), c) for c, i in _CAT_CODE.items()]
_GROUP_OF_CAT = bytes(_CODE_OF.get(c, 0) for c in [None, *KNOWN_CATEGORIES]) + bytes(
    255 - len(KNOWN_CATEGORIES)
)
_PICK = [bytes(int(i == c) for i in range(256)) for c in range(len(_GROUPS) + 1)]
_GPU_INTS = ("device", "stream", "correlation")
_GPU_SIZES = ("registers_per_thread", "shared_memory_bytes", "bytes")
_FAILED = (TypeError, ValueError, OverflowError, pl.exceptions.PolarsError)


def typed_frames(data: bytes) -> tuple[dict, dict[str, list[pl.DataFrame]], int, dict[str, int]]:
    """typed_stream over a document in memory."""
    view = memoryview(data)
    return typed_stream(
        (view[i : i + TYPED_PIECE_BYTES] for i in range(0, len(view), TYPED_PIECE_BYTES))
    )


def typed_stream(
    chunks: Iterable, step: int | None = None
) -> tuple[dict, dict[str, list[pl.DataFrame]], int, dict[str, int]]:
    """(top, typed frames per category, number of events, events per category) of a Chrome-trace
    document given as a stream of byte chunks: the same as kineto_events.ndjson_stream."""
    # per category: each piece's columns
    pieces: dict[str, list[list[pl.Series]]] = {k: [] for k in _GROUPS}
    cats: Counter = Counter()
    n_events = 0
    scanner = _kineto_scan.Scanner() if _kineto_scan is not None and scan_enabled() else None
    scanned = [False]  # the scanner holds rows not yet in `pieces`

    def flush() -> None:
        """The scanner's columns so far into `pieces` (before a piece msgspec decodes, so rows keep file order)."""
        nonlocal n_events
        if not scanned[0]:
            return
        scanned[0] = False
        for k, cols in scanner.flush().items():
            pieces[k].append([pl.Series(n, _Arrow(c)) for n, c in cols])
        n, counts = scanner.take_counts()
        n_events += n
        cats.update(counts)

    def read(text, sep: bytes) -> None:
        nonlocal n_events
        if scanner is not None:
            if scanner.feed(text):
                scanned[0] = True
                return
            flush()
        try:
            dec = _LEAN
            try:
                events = dec.decode(text)
            # another category, or something else a retry finds
            except msgspec.ValidationError:
                dec = _decoder(comm=False, known=False)
                events = dec.decode(text)
            n_events += len(events)
            cat = [e.cat for e in events]
            if dec.known:
                ccodes = bytes(map(_CAT_CODE.__getitem__, cat))
                for b, c in _CAT_COUNTED:
                    if n := ccodes.count(b):
                        cats[c] += n
                codes = ccodes.translate(_GROUP_OF_CAT)
            else:
                cats.update(cat)
                codes = bytes(map(_CODE_OF.get, cat, repeat(0)))
            try:
                cols = _columns(events, cat, codes, text, dec)
            except _NeedsComm:
                del events
                dec = _decoder(comm=True, known=dec.known)
                cols = _columns(dec.decode(text), cat, codes, text, dec)
        except _ERRORS + _FAILED:
            raise FastPathFailed from None
        for k, c in cols.items():
            pieces[k].append(c)

    paused = gc.isenabled()
    gc.disable()
    try:
        top = split_events(chunks, read, step or TYPED_PIECE_BYTES, framed=True)
        if scanner is not None:
            flush()
    finally:
        if paused:
            gc.enable()
    try:
        frames = {k: [_frame(v)] if v else [] for k, v in pieces.items()}
    except _FAILED:
        raise FastPathFailed from None
    counts = {"<none>" if c is None else c: n for c, n in cats.items()}
    return top, frames, n_events, counts


class _Arrow:
    """A column of the compiled scanner, as the Arrow PyCapsule interface that polars imports without a copy."""

    __slots__ = ("capsules",)

    def __init__(self, capsules: tuple):
        self.capsules = capsules

    def __arrow_c_array__(self, requested_schema=None) -> tuple:
        return self.capsules


def scan_enabled() -> bool:
    """Whether the compiled scanner is used (KERNELSCOPE_KINETO_SCAN=0 turns it off, e.g. to compare)."""
    return os.environ.get("KERNELSCOPE_KINETO_SCAN", "1") != "0"


def _columns(
    events: list, cat: list, codes: bytes, text: bytes, dec: _Decoder
) -> dict[str, list[pl.Series]]:
    """One piece's complete events of the four categories (cat: every event's category, codes: its
    group's code, 0: none) -> their columns as polars Series (µs still) per category; _NeedsComm
    when a kernel has collective arguments that `dec` does not declare."""
    try:
        return _group_columns(events, cat, codes, text, dec)
    except AttributeError:
        # an event of a group's category that is not complete (its "ph" is not "X"): its struct has
        # no name. Such events are rare, so the events' types are looked at only then (a pass over
        # every event costs about as much as a column: the structs are fresh from the decoder, out
        # of the CPU's caches).
        x = dec.event
        codes = bytes(map(mul, codes, [type(e) is x for e in events]))
        return _group_columns(events, cat, codes, text, dec)


def _group_columns(
    events: list, cat: list, codes: bytes, text: bytes, dec: _Decoder
) -> dict[str, list[pl.Series]]:
    """_columns of the events whose group code is not 0."""
    out = {}
    for code, k in enumerate(_GROUPS, 1):
        if _CODE_BYTE[code] not in codes:
            continue
        pick = codes.translate(_PICK[code])
        evs = list(compress(events, pick))
        cols = [
            pl.Series("name", [e.name for e in evs], dtype=pl.String),
            _ident("pid", [e.pid for e in evs]),
            _ident("tid", [e.tid for e in evs]),
            pl.Series("ts", [e.ts for e in evs], dtype=pl.Float64),
            pl.Series("dur", [e.dur for e in evs], dtype=pl.Float64),
        ]
        args = [e.args for e in evs]
        if k != "ann":
            if None in args:  # no "args", or "args": null
                args = [a or dec.no_args for a in args]
            get = lambda f, dtype=pl.Int64: _column(args, f, dtype, dec.fields)  # noqa: E731
            ext = [get("external_id"), get("external_id_lc")]
            if k == "gpu":
                comm = [get(f, _ARG_TYPES.get(f, pl.Int64)) for f in COMM_ARGS.values()]
                if comm[0].null_count() < len(evs) and "comm_in_nelems" not in dec.fields:
                    raise _NeedsComm
                kind = map(_GPU_CATS.__getitem__, compress(cat, pick))
                cols = [
                    pl.Series("kind", list(kind), dtype=pl.String),
                    *cols,
                    *[get(f) for f in _GPU_INTS],
                    *ext,
                    *_dims(args, "grid"),
                    *_dims(args, "block"),
                    *[get(f) for f in _GPU_SIZES],
                    *comm,
                ]
            elif k == "api":
                cols += [get("correlation"), *ext]
            else:
                cols += ext
        out[k] = cols
    # epoch µs with fractions, beyond float64's ns resolution: these events' timestamps as written,
    # converted exactly. Decided over the events kept (tier 1 decides over all the piece's events):
    # where the two differ, the kept ones are whole or below that bound, which float64 holds to the
    # ns, so both give the same ns.
    at = {k: [c.name for c in cols].index("ts") for k, cols in out.items()}
    if out and needs_text(pl.concat([cols[at[k]] for k, cols in out.items()])):
        raw = _DECODE_TS(text)
        for code, k in enumerate(_GROUPS, 1):
            if k in out:
                rows = compress(raw, codes.translate(_PICK[code]))
                ts = pl.Series("ts", [bytes(r.ts).decode() or None for r in rows], dtype=pl.String)
                # ns already
                out[k][at[k]] = pl.DataFrame([ts]).select(exact_ns("ts").alias("ts")).to_series()
    return out


def _column(objs: list, field: str, dtype, declared: set) -> pl.Series:
    if field not in declared:  # a key this piece's text does not hold
        return pl.Series(field, [None] * len(objs), dtype=dtype)
    return pl.Series(field, _GET[field](objs), dtype=dtype)


def _ident(name: str, values: list) -> pl.Series:
    """pid / tid: integers as they are; text as polars casts it to Int64 (a number's digits, else
    null), as tier 1 reads them."""
    try:
        return pl.Series(name, values, dtype=pl.Int64)
    except _FAILED:
        return pl.Series(
            name, [None if v is None else str(v) for v in values], dtype=pl.String
        ).cast(pl.Int64, strict=False)


def _dims(args: list, field: str) -> list[pl.Series]:
    """[x, y, z] lists -> field_x, field_y, field_z (Int32; a shorter list or none: null)."""
    values = _GET[field](args)
    if None not in values and set(map(len, values)) == {3}:
        x, y, z = [v[0] for v in values], [v[1] for v in values], [v[2] for v in values]
        return [
            pl.Series(f"{field}_{xyz}", c, dtype=pl.Int64).cast(pl.Int32)
            for xyz, c in zip("xyz", (x, y, z))
        ]
    return [
        pl.Series(
            f"{field}_{xyz}",
            [None if v is None or len(v) <= i else v[i] for v in values],
            dtype=pl.Int64,
        ).cast(pl.Int32)
        for i, xyz in enumerate("xyz")
    ]


def _frame(pieces: list[list[pl.Series]]) -> pl.DataFrame:
    """A category's columns of every piece -> one frame: ts (µs as Float64, or ns from a piece's
    text) and dur as Int64 ns, external_id from either spelling of the key;
    FastPathFailed when a name, ts or dur is missing (the exact reader names the event)."""
    at = [s.name for s in pieces[0]].index("ts")
    if all(p[at].dtype == pl.Float64 for p in pieces):
        ts_ns = float_ns("ts")
    # some pieces' timestamps were read as text (ns already)
    else:
        ts_ns = pl.col("ts")
        for p in pieces:
            if p[at].dtype == pl.Float64:
                p[at] = pl.DataFrame([p[at]]).select(float_ns("ts").alias("ts")).to_series()
    cols = [pl.concat([p[i] for p in pieces], rechunk=False) for i in range(len(pieces[0]))]
    pieces.clear()
    df = pl.DataFrame(cols)
    extra = []
    if "external_id" in df.columns:
        extra = [pl.coalesce("external_id", "external_id_lc").alias("external_id")]
    df = df.with_columns(ts_ns.alias("ts"), float_ns("dur").alias("dur"), *extra)
    if "external_id_lc" in df.columns:
        df = df.drop("external_id_lc")
    if df.select(pl.any_horizontal(pl.col("name", "ts", "dur").is_null().any())).item():
        raise FastPathFailed
    return df
