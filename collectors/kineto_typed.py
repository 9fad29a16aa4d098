"""Tier 0 of the Kineto reader: the events decoded by msgspec into typed structs that declare only the fields the
timeline tables use, in pieces of whole events (collectors.kineto_events.split_events).

msgspec skips every other field (a `cpu_op`'s input shapes and strides, a flow event's binding point) without
building Python objects for it: a complete event ("ph": "X") becomes a struct of the fields the tables use, any
other event (flow arrows, metadata: a third of a training trace) one of its category and timestamp only, told
apart by "ph" as a tagged union; the frames are then filled column by column, each category's events picked in
file order. This reads a Kineto trace several times faster than polars' NDJSON reader with a nested schema
(tier 1), with the same frames: `typed_stream` returns exactly what `kineto_events.ndjson_stream` returns, which
tests/collectors/test_kineto_typed.py checks on every real trace of the corpus. Anything the structs do not
describe (a value of another type, a missing ts / dur / name, a separator inside a string) raises FastPathFailed
and tier 1 reads the file.
"""
from __future__ import annotations

from collections import Counter
from itertools import chain, compress, repeat
from operator import attrgetter, eq
from typing import Iterable, Optional, Union

import msgspec
import polars as pl

from collectors.kineto_events import (_API_CATS, _CPU_CATS, _GPU_CATS, COMM_ARGS, FastPathFailed, exact_ns, float_ns,
                                      needs_text, split_events)


class _Args(msgspec.Struct, gc=False, frozen=True):
    device: Optional[int] = None
    stream: Optional[int] = None
    correlation: Optional[int] = None
    external_id: Optional[int] = msgspec.field(default=None, name="External id")
    external_id_lc: Optional[int] = msgspec.field(default=None, name="external id")   # PyTorch <= 1.9
    grid: Optional[list[int]] = None
    block: Optional[list[int]] = None
    registers_per_thread: Optional[int] = msgspec.field(default=None, name="registers per thread")
    shared_memory_bytes: Optional[int] = msgspec.field(default=None, name="shared memory")
    bytes: Optional[int] = None
    collective: Optional[str] = msgspec.field(default=None, name="Collective name")
    comm_in_nelems: Optional[int] = msgspec.field(default=None, name="In msg nelems")
    comm_out_nelems: Optional[int] = msgspec.field(default=None, name="Out msg nelems")
    comm_dtype: Optional[str] = msgspec.field(default=None, name="dtype")
    comm_group_size: Optional[int] = msgspec.field(default=None, name="Group size")


_NO_ARGS = _Args()


class _Event(msgspec.Struct, gc=False, tag_field="ph", tag="X"):
    """A complete event ("ph": "X"): every field the tables use."""
    cat: Optional[str] = None
    name: Optional[str] = None
    pid: Union[int, str, None] = None
    tid: Union[int, str, None] = None
    ts: Optional[float] = None
    dur: Optional[float] = None
    args: Optional[_Args] = _NO_ARGS


class _Other(msgspec.Struct, gc=False, tag_field="ph"):
    """Any other event (flow arrows, metadata, instants, counters ...): only what the category counts and the
    timestamp check read; the rest (names, ids, args) is skipped without building it."""
    cat: Optional[str] = None
    ts: Optional[float] = None


# The phases of the Trace Event Format; an event with another "ph" (or none) goes to the next reader.
_PHASES = ("B", "E", "i", "I", "C", "b", "n", "e", "s", "t", "f", "P", "N", "O", "D", "M", "V", "v", "R", "c", "(",
           ")")
_OTHERS = tuple(msgspec.defstruct(f"_Other{i}", [], bases=(_Other,), tag=ph) for i, ph in enumerate(_PHASES))


class _TextTs(msgspec.Struct, gc=False):
    """The timestamps of the same events as written (for epoch µs beyond float64's ns resolution)."""
    ts: msgspec.Raw = msgspec.Raw()          # empty: no ts


#: events decoded at a time: larger pieces spend less in polars' per-call costs, smaller ones hold less memory
TYPED_PIECE_BYTES = 8 << 20
_DECODE = msgspec.json.Decoder(list[Union[(_Event, *_OTHERS)]]).decode
_DECODE_TS = msgspec.json.Decoder(list[_TextTs]).decode
_ERRORS = (msgspec.DecodeError, msgspec.ValidationError)
_CAT, _TS, _PID, _TID, _NAME = (attrgetter(f) for f in ("cat", "ts", "pid", "tid", "name"))
_GRID, _BLOCK, _ARGS = attrgetter("grid"), attrgetter("block"), attrgetter("args")
_ARG_TYPES = {"collective": pl.String, "comm_dtype": pl.String}
_GROUP_OF = {**{c: "gpu" for c in _GPU_CATS}, **{c: "api" for c in _API_CATS}, **{c: "cpu" for c in _CPU_CATS},
             "user_annotation": "ann"}


def typed_frames(data: bytes) -> tuple[dict, dict[str, list[pl.DataFrame]], int, dict[str, int]]:
    """typed_stream over a document in memory."""
    view = memoryview(data)
    return typed_stream((view[i:i + TYPED_PIECE_BYTES] for i in range(0, len(view), TYPED_PIECE_BYTES)))


def typed_stream(chunks: Iterable, step: int | None = None) -> tuple[dict, dict[str, list[pl.DataFrame]], int, dict[str, int]]:
    """(top, typed frames per category, number of events, events per category) of a Chrome-trace document given
    as a stream of byte chunks: the same as kineto_events.ndjson_stream."""
    frames: dict[str, list[pl.DataFrame]] = {"gpu": [], "api": [], "cpu": [], "ann": []}
    cats: Counter = Counter()
    n_events = 0

    def read(piece, sep: bytes) -> None:
        nonlocal n_events
        text = b"".join((b"[", piece, b"]"))
        try:
            events = _DECODE(text)
        except _ERRORS:
            raise FastPathFailed from None
        n_events += len(events)
        cats.update(map(_CAT, events))
        for k, f in _frames(events, text).items():
            frames[k].append(f)

    top = split_events(chunks, read, step or TYPED_PIECE_BYTES)
    counts = {"<none>" if c is None else c: n for c, n in cats.items()}
    return top, frames, n_events, counts


def _frames(events: list, text: bytes) -> dict[str, pl.DataFrame]:
    """One piece's events -> the frames of kineto_events._split_events (X events of the four categories), in the
    order of the file."""
    xs = list(compress(events, map(isinstance, events, repeat(_Event))))
    keys = list(map(_GROUP_OF.get, map(_CAT, xs)))
    groups = {k: list(compress(xs, map(eq, keys, repeat(k)))) for k in ("gpu", "api", "cpu", "ann") if k in keys}
    if not groups:
        return {}
    text_ts = None
    if needs_text(pl.Series(map(_TS, events), dtype=pl.Float64)):   # as tier 1 decides, over the piece's events:
        # epoch µs with fractions, beyond float64's ns resolution: the timestamps as written, converted exactly
        try:
            raw = _DECODE_TS(text)
        except _ERRORS:
            raise FastPathFailed from None
        raw_x = list(compress(raw, map(isinstance, events, repeat(_Event))))
        text_ts = {k: list(compress(map(_TS, raw_x), map(eq, keys, repeat(k)))) for k in groups}
    out = {}
    try:
        for k, evs in groups.items():
            cols = _base(evs, None if text_ts is None else text_ts[k])
            if k == "ann":
                out[k] = _with_ns(cols)
                continue
            args = list(map(_ARGS, evs))
            if None in args:                                     # "args": null
                args = [a or _NO_ARGS for a in args]
            if k == "gpu":
                kind = pl.Series("kind", list(map(_CAT, evs)), dtype=pl.String)
                cols = [kind.replace_strict(_GPU_CATS, return_dtype=pl.String),
                        *cols, *_ints(args, ("device", "stream", "correlation")), _external_id(args),
                        *_dims(list(map(_GRID, args)), "grid"), *_dims(list(map(_BLOCK, args)), "block"),
                        *_ints(args, ("registers_per_thread", "shared_memory_bytes", "bytes")),
                        *[_column(args, c, _ARG_TYPES.get(c, pl.Int64)) for c in COMM_ARGS.values()]]
            elif k == "api":
                cols += [_column(args, "correlation", pl.Int64), _external_id(args)]
            else:
                cols.append(_external_id(args))
            out[k] = _with_ns(cols)
    except (TypeError, ValueError, OverflowError, pl.exceptions.PolarsError):
        raise FastPathFailed from None
    for f in out.values():
        if f.select(pl.any_horizontal(pl.col("name", "ts", "dur").is_null().any())).item():
            raise FastPathFailed   # the exact reader names the event
    return out


def _with_ns(cols: list[pl.Series]) -> pl.DataFrame:
    """The frame of the columns, ts (µs: Float64, or text as written) and dur (µs) as Int64 ns, in one pass."""
    df = pl.DataFrame(cols)
    ts = exact_ns("ts") if df.schema["ts"] == pl.String else float_ns("ts")
    return df.with_columns(ts.alias("ts"), float_ns("dur").alias("dur"))


def _column(objs: list, field: str, dtype) -> pl.Series:
    values = list(map(attrgetter(field), objs))
    if values.count(None) == len(values):          # a field these events never have (nccl's args on a plain kernel)
        return pl.repeat(None, len(values), dtype=dtype, eager=True).alias(field)
    return pl.Series(field, values, dtype=dtype)


def _ints(objs: list, fields) -> list[pl.Series]:
    return [_column(objs, f, pl.Int64) for f in fields]


def _base(events: list[_Event], raw_ts: list | None) -> list[pl.Series]:
    """name, pid, tid, ts and dur of events (µs as Float64; ts as its text when raw_ts is given): _with_ns makes
    them ns."""
    if raw_ts is None:
        ts = _column(events, "ts", pl.Float64)
    else:
        ts = pl.Series("ts", [bytes(r).decode() or None for r in raw_ts], dtype=pl.String)
    return [_column(events, "name", pl.Categorical), _ident(list(map(_PID, events)), "pid"),
            _ident(list(map(_TID, events)), "tid"), ts, _column(events, "dur", pl.Float64)]


def _ident(values: list, name: str) -> pl.Series:
    """pid / tid: integers as they are; text as polars casts it to Int64 (a number's digits, else null), as tier 1
    reads them."""
    try:
        return pl.Series(name, values, dtype=pl.Int64)
    except (TypeError, ValueError, OverflowError, pl.exceptions.PolarsError):
        return pl.Series(name, [None if v is None else str(v) for v in values], dtype=pl.String).cast(
            pl.Int64, strict=False)


def _external_id(args: list[_Args]) -> pl.Series:
    a = _column(args, "external_id", pl.Int64)
    return a.zip_with(a.is_not_null(), _column(args, "external_id_lc", pl.Int64))


def _dims(values: list, field: str) -> list[pl.Series]:
    """[x, y, z] lists -> field_x, field_y, field_z (Int32; a shorter list or none: null)."""
    if None not in values and set(map(len, values)) == {3}:
        flat = pl.Series(list(chain.from_iterable(values)), dtype=pl.Int64)
        return [flat.gather_every(3, i).cast(pl.Int32).alias(f"{field}_{xyz}") for i, xyz in enumerate("xyz")]
    return [pl.Series([None if v is None or len(v) <= i else v[i] for v in values], dtype=pl.Int64)
            .cast(pl.Int32).alias(f"{field}_{xyz}") for i, xyz in enumerate("xyz")]
