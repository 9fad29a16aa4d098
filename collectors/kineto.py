"""PyTorch profiler (Kineto) Chrome-trace JSON -> the normalized timeline tables.

The timeline tables are shared with the Nsight Systems parser (`collectors.nsys`), so every analyzer
works on both sources. All times are Int64 nanoseconds on the trace's own clock (Kineto: Unix epoch;
nsys: the session clock), durations are `*_ns`, sizes `*_bytes`.

Tables (schemas below, checked with `conform` where data enters):
- `gpu_ops`   one row per kernel / memcpy / memset on a GPU, joined to its launch call (by correlation id
              within a rank / process) and to the CPU op that issued it (by External id).
- `api_calls` CUDA runtime and driver API calls (launches, copies, synchronisations ...).
- `cpu_ops`   Kineto `cpu_op` events (aten operators); empty for nsys.
- `nvtx`      annotation ranges: NVTX push/pop and start/end ranges (nsys), `user_annotation`
              (record_function) ranges (Kineto).

Definitions used for the derived columns of `gpu_ops`:
- launch_delay_ns = max(0, start_ns - api_end_ns)            (HTA's "launch delay")
- queue_ns        = start_ns - api_end_ns if >= 0 else null   (Nsight Systems' "Queue Dur")
- graph_launch_correlation = the correlation id of the cudaGraphLaunch that ran the op (several ops share it)

Kineto timestamps (formats.md §5.1): `ts`/`dur` are microseconds with ns decimals; with
`baseTimeNanoseconds` the `ts` are relative to it (unix_ns = base + ts*1000), without it they are absolute
epoch microseconds. They are converted to integer ns after subtracting the trace's smallest whole
microsecond, so no precision is lost beyond what the writer printed.

A folder of rank traces is one run: `pack_rank_folder` makes a deterministic tar of them ("<folder>.kineto.tar")
and `parse` reads such a tar as one multi-rank run (`rank` column = `distributedInfo.rank`, 0 when absent).
"""
from __future__ import annotations

import io
import json
import re
import tarfile
import zlib
from pathlib import Path
from typing import Iterable

import polars as pl

from collectors.artifact import Parsed, gunzip_if_needed
from collectors.errors import ArtifactError

try:  # a fast JSON parser when installed; the standard library otherwise
    import orjson as _json_fast

    _loads = _json_fast.loads
except ImportError:  # pragma: no cover - depends on the environment
    _loads = json.loads
json_loads = _loads  # the JSON parser in use (orjson when installed), shared with collectors.nsys

# --------------------------------------------------------------------------------------------------
# The normalized timeline tables (shared with collectors.nsys)
# --------------------------------------------------------------------------------------------------
GPU_OPS_SCHEMA = pl.Schema({
    "rank": pl.Int32,                 # Kineto: distributedInfo.rank (0 when absent); nsys: process index
    "pid": pl.Int64,                  # OS pid of the process that launched the op
    "device": pl.Int32,               # CUDA device ordinal as the process saw it
    "stream": pl.Int64,
    "kind": pl.String,                # "kernel" | "memcpy" | "memset"
    "name": pl.String,
    "start_ns": pl.Int64,
    "end_ns": pl.Int64,
    "duration_ns": pl.Int64,
    "correlation": pl.Int64,          # CUPTI correlation id (per process)
    "launch_api": pl.String,          # name of the API call with the same correlation id (null: not in trace)
    "api_tid": pl.Int64,
    "api_start_ns": pl.Int64,
    "api_end_ns": pl.Int64,
    "api_duration_ns": pl.Int64,
    "launch_delay_ns": pl.Int64,      # max(0, start_ns - api_end_ns)
    "queue_ns": pl.Int64,             # start_ns - api_end_ns, null when negative
    "graph_launch_correlation": pl.Int64,
    "external_id": pl.Int64,          # Kineto "External id" (op id of the issuing CPU op)
    "op_name": pl.String,             # the CPU op (aten::mm ...) joined by External id
    "grid_x": pl.Int32, "grid_y": pl.Int32, "grid_z": pl.Int32,
    "block_x": pl.Int32, "block_y": pl.Int32, "block_z": pl.Int32,
    "registers_per_thread": pl.Int32,
    "shared_memory_bytes": pl.Int64,  # static + dynamic shared memory per block
    "bytes": pl.Int64,                # memcpy / memset size
    "copy_kind": pl.String,           # HtoD, DtoH, DtoD, HtoH, PtoP ... (memcpy only)
})

# the columns a parser provides before `link_launches` adds the launch / op columns
GPU_RAW_COLUMNS = ("rank", "pid", "device", "stream", "kind", "name", "start_ns", "end_ns", "duration_ns",
                   "correlation", "external_id", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z",
                   "registers_per_thread", "shared_memory_bytes", "bytes", "copy_kind")
GPU_RAW_SCHEMA = pl.Schema({c: GPU_OPS_SCHEMA[c] for c in GPU_RAW_COLUMNS})

API_CALLS_SCHEMA = pl.Schema({
    "rank": pl.Int32,
    "pid": pl.Int64,
    "tid": pl.Int64,
    "name": pl.String,                # without nsys' _vNNNN suffix
    "kind": pl.String,                # launch | graph_launch | memcpy | memset | sync | other
    "blocking": pl.Boolean,           # the host waits for GPU work (synchronize calls, cudaMemcpy)
    "start_ns": pl.Int64,
    "end_ns": pl.Int64,
    "duration_ns": pl.Int64,
    "correlation": pl.Int64,
    "external_id": pl.Int64,
})

CPU_OPS_SCHEMA = pl.Schema({
    "rank": pl.Int32, "pid": pl.Int64, "tid": pl.Int64, "name": pl.String,
    "start_ns": pl.Int64, "end_ns": pl.Int64, "duration_ns": pl.Int64, "external_id": pl.Int64,
})

NVTX_SCHEMA = pl.Schema({
    "rank": pl.Int32, "pid": pl.Int64, "tid": pl.Int64, "name": pl.String,
    "start_ns": pl.Int64, "end_ns": pl.Int64, "duration_ns": pl.Int64,
})

TIMELINE_SCHEMAS: dict[str, pl.Schema] = {
    "gpu_ops": GPU_OPS_SCHEMA, "api_calls": API_CALLS_SCHEMA, "cpu_ops": CPU_OPS_SCHEMA, "nvtx": NVTX_SCHEMA,
}

GRAPH_LAUNCH_APIS = ("cudaGraphLaunch", "cuGraphLaunch")
_SYNC_APIS = {"cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize", "cudaThreadSynchronize",
              "cuCtxSynchronize", "cuStreamSynchronize", "cuEventSynchronize"}
_BLOCKING_COPY = re.compile(r"^(cudaMemcpy(2D|3D|ToSymbol|FromSymbol|Peer)?|cuMemcpy(DtoH|HtoD|DtoD|Peer)?(_v2)?)$")


def conform(df: pl.DataFrame, schema: pl.Schema, table: str, *, keep_categorical: bool = False) -> pl.DataFrame:
    """The table's columns in schema order and types; raises ValueError naming a missing column.
    keep_categorical: leave Categorical string columns as they are (intermediate frames: repeated kernel
    names then cost one copy each until the final conform)."""
    missing = [c for c in schema if c not in df.columns]
    if missing:
        raise ValueError(f"table {table!r} lacks columns {missing}")
    return df.select([pl.col(c) if keep_categorical and df.schema[c] == pl.Categorical and t == pl.String
                      else pl.col(c).cast(t, strict=True) for c, t in schema.items()])


def empty(schema: pl.Schema) -> pl.DataFrame:
    return pl.DataFrame(schema=schema)


def api_kind(name: str) -> tuple[str, bool]:
    """(kind, blocking) of a CUDA API call from its name."""
    if name in GRAPH_LAUNCH_APIS:
        return "graph_launch", False
    if "LaunchKernel" in name or "LaunchCooperativeKernel" in name:
        return "launch", False
    if name in _SYNC_APIS:
        return "sync", True
    if name.startswith(("cudaMemcpy", "cuMemcpy")):
        return "memcpy", bool(_BLOCKING_COPY.match(name))
    if name.startswith(("cudaMemset", "cuMemset")):
        return "memset", False
    return "other", False


def api_kind_columns(names: pl.Series) -> pl.DataFrame:
    """kind and blocking for a column of API names (computed once per distinct name)."""
    uniq = names.unique().to_list()
    mapping = {n: api_kind(n) for n in uniq if n is not None}
    kinds = {n: k for n, (k, _) in mapping.items()}
    blocking = {n: b for n, (_, b) in mapping.items()}
    return pl.DataFrame({
        "kind": names.replace_strict(kinds, default="other", return_dtype=pl.String),
        "blocking": names.replace_strict(blocking, default=False, return_dtype=pl.Boolean),
    })


def _is_sorted(df: pl.DataFrame, keys: list[str]) -> bool:
    """Whether df is sorted by keys (lexicographically, nulls first)."""
    if df.height < 2:
        return True
    prev = [pl.col(k).shift(1) for k in keys]
    cur = [pl.col(k) for k in keys]
    # row i is out of order when, at the first key that differs from row i-1, it is smaller
    bad = pl.lit(False)
    same = pl.lit(True)
    for p, c in zip(prev, cur):
        p_ = p.fill_null(-(1 << 62))
        c_ = c.fill_null(-(1 << 62))
        bad = bad | (same & (c_ < p_))
        same = same & (c_ == p_)
    return not df.select(bad.slice(1).any()).item()


def link_launches(gpu_raw: pl.DataFrame, api_calls: pl.DataFrame, cpu_ops: pl.DataFrame) -> pl.DataFrame:
    """Join each GPU op to the API call with its correlation id (within its rank / process) and to the
    CPU op with its External id; derive launch delay and queue time. Returns a `gpu_ops` table.
    api_calls must be sorted by start_ns (when a runtime and a driver call share a correlation id, the
    outer one, which starts first, is the launch call)."""
    launches = (
        api_calls.filter(pl.col("correlation").is_not_null())
        .unique(["rank", "correlation"], keep="first")   # api_calls come sorted by start: the outer call
        .select("rank", "correlation",
                pl.col("name").alias("launch_api"), pl.col("pid").alias("api_pid"), pl.col("tid").alias("api_tid"),
                pl.col("start_ns").alias("api_start_ns"), pl.col("end_ns").alias("api_end_ns"),
                pl.col("external_id").alias("api_external_id"))
    )
    # ops in (rank, device, stream, start) order; traces usually deliver them so, then nothing moves
    order = ["rank", "device", "stream", "start_ns"]
    if not _is_sorted(gpu_raw, order):
        gpu_raw = gpu_raw.sort(order)
    # the joins run on narrow key frames (left order kept); their columns are then put beside the ops
    lk = gpu_raw.select("rank", "correlation").join(launches, on=["rank", "correlation"], how="left",
                                                     maintain_order="left").drop("rank", "correlation")
    g = pl.concat([gpu_raw, lk], how="horizontal")
    lag = pl.col("start_ns") - pl.col("api_end_ns")
    g = g.with_columns(
        pl.coalesce("api_pid", "pid").alias("pid"),
        pl.coalesce("external_id", "api_external_id").alias("external_id"),
        (pl.col("api_end_ns") - pl.col("api_start_ns")).alias("api_duration_ns"),
        pl.when(lag >= 0).then(lag).otherwise(None).alias("queue_ns"),
        pl.when(lag >= 0).then(lag).when(lag < 0).then(0).otherwise(None).alias("launch_delay_ns"),
        pl.when(pl.col("launch_api").is_in(GRAPH_LAUNCH_APIS)).then(pl.col("correlation"))
        .otherwise(None).alias("graph_launch_correlation"),
    )
    ops = (cpu_ops.filter(pl.col("external_id").is_not_null())
           .sort("start_ns")
           .unique(["rank", "external_id"], keep="last", maintain_order=True)  # innermost op of a nest
           .select("rank", "external_id", pl.col("name").alias("op_name")))
    on = g.select("rank", "external_id").join(ops, on=["rank", "external_id"], how="left", maintain_order="left")
    g = g.with_columns(on["op_name"])
    g = g.select([pl.col(c).cast(t, strict=True) for c, t in GPU_OPS_SCHEMA.items()])
    return conform(g, GPU_OPS_SCHEMA, "gpu_ops")


# --------------------------------------------------------------------------------------------------
# Reading the JSON: the events array in chunks, so a large trace never exists as one list of dicts
# --------------------------------------------------------------------------------------------------
CHUNK_BYTES = 8 << 20
_SEP = re.compile(rb"\}\s*,\s*\{")
_GPU_CATS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset",
             "Kernel": "kernel", "Memcpy": "memcpy", "Memset": "memset"}
_API_CATS = {"cuda_runtime", "cuda_driver"}


class _FastPathFailed(Exception):
    pass


def _json_error(name: str, e: Exception) -> ArtifactError:
    return ArtifactError(name, f"not valid JSON ({e}); the file may be truncated or not a trace")


def _locate(data: bytes) -> tuple[dict, int, int]:
    """(top-level object without traceEvents, index of the events array's "[", index of its "]").
    The rest of the document with an empty array must parse; raises _FastPathFailed otherwise."""
    key = data.find(b'"traceEvents"')
    if key < 0:
        raise _FastPathFailed
    m = re.compile(rb'"traceEvents"\s*:\s*\[').match(data, key)
    if not m:
        raise _FastPathFailed
    open_at = m.end() - 1
    head = data[:open_at]
    top = None
    close_at = len(data)
    for _ in range(8):  # the array's closing bracket: the last "]" after which the document parses
        close_at = data.rfind(b"]", open_at, close_at)
        if close_at < 0:
            raise _FastPathFailed
        try:
            top = _loads(head + b"[]" + data[close_at + 1:])
            break
        except ValueError:
            continue
    if not isinstance(top, dict):
        raise _FastPathFailed
    top.pop("traceEvents", None)
    return top, open_at, close_at


def _fast_chunks(data: bytes) -> tuple[dict, Iterable[list]]:
    """(top-level object without traceEvents, iterator over lists of events).

    Locate the `traceEvents` array and split it between events at `}, {` separators into pieces of
    about CHUNK_BYTES, each parsed on its own. Every piece (and the rest of the document with an empty
    array) must parse as JSON; a split inside a string cannot, so a wrong guess raises _FastPathFailed
    and the caller parses the whole document at once instead."""
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
                yield _loads(b"[" + piece + b"]")
            except ValueError:
                raise _FastPathFailed from None

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
_ARGS = pl.Struct({"device": pl.Int64, "stream": pl.Int64, "correlation": pl.Int64, "External id": pl.Int64,
                   "grid": pl.List(pl.Int64), "block": pl.List(pl.Int64), "registers per thread": pl.Int64,
                   "shared memory": pl.Int64, "bytes": pl.Int64})
_EVENT_SCHEMA = {"ph": pl.String, "cat": pl.String, "name": pl.Categorical, "pid": pl.String, "tid": pl.String,
                 "ts": pl.Float64, "dur": pl.Float64, "args": _ARGS}


def _ndjson_frames(data: bytes) -> tuple[dict, dict[str, list[pl.DataFrame]], int]:
    """Tier 1 reader: (top, typed frames per category, number of events).

    JSON text cannot hold a raw newline inside a string, so the events array becomes NDJSON by turning the
    separator between events (the bytes of the first `}, {` found, e.g. Kineto's "},\n  {") into a
    newline once every newline has become a space. polars then reads each piece with a fixed schema.
    Anything unexpected (another separator layout, a split inside a string, a value of the wrong type, a
    missing ts / dur / name) raises _FastPathFailed, and the exact Python readers take over."""
    top, open_at, close_at = _locate(data)
    m = _SEP.search(data, open_at + 1, close_at)
    frames: dict[str, list[pl.DataFrame]] = {"gpu": [], "api": [], "cpu": [], "ann": []}
    n_events = 0
    if m is None:  # zero or one event: not worth a special path
        raise _FastPathFailed
    sep = m.group(0)
    sep_flat = sep.translate(_NL_TO_SPACE)
    pos = open_at + 1
    while pos < close_at:
        target = pos + NDJSON_CHUNK_BYTES
        cut = data.find(sep, target, close_at) if target < close_at else -1
        end = cut + 1 if cut >= 0 else close_at
        piece = data[pos:end]
        pos = cut + len(sep) - 1 if cut >= 0 else close_at
        piece = piece.translate(_NL_TO_SPACE).replace(sep_flat, b"}\n{")
        try:
            df = pl.read_ndjson(io.BytesIO(piece), schema=_EVENT_SCHEMA)
        except (pl.exceptions.PolarsError, ValueError, TypeError):
            raise _FastPathFailed from None
        del piece
        n_events += df.height
        for k, f in _split_events(df).items():
            frames[k].append(f)
    return top, frames, n_events


def _split_events(df: pl.DataFrame) -> dict[str, pl.DataFrame]:
    """One NDJSON piece -> the frames `_build` takes (same columns as the Python readers produce)."""
    x = df.filter(pl.col("ph") == "X")
    cat = pl.col("cat")
    a = pl.col("args")
    ident = lambda c: pl.col(c).cast(pl.Int64, strict=False)  # noqa: E731 - "Spans" etc. become null
    base = [pl.col("name"), ident("pid").alias("pid"), ident("tid").alias("tid"), pl.col("ts"), pl.col("dur")]
    out = {}
    g = x.filter(cat.is_in(list(_GPU_CATS)))
    if g.height:
        out["gpu"] = g.select(
            cat.replace_strict(_GPU_CATS, return_dtype=pl.String).alias("kind"), *base,
            a.struct.field("device").alias("device"), a.struct.field("stream").alias("stream"),
            a.struct.field("correlation").alias("correlation"), a.struct.field("External id").alias("external_id"),
            *[a.struct.field(f).list.get(i, null_on_oob=True).cast(pl.Int32).alias(f"{f}_{xyz}")
              for f in ("grid", "block") for i, xyz in enumerate("xyz")],
            a.struct.field("registers per thread").alias("registers_per_thread"),
            a.struct.field("shared memory").alias("shared_memory_bytes"), a.struct.field("bytes").alias("bytes"))
    api = x.filter(cat.is_in(list(_API_CATS)))
    if api.height:
        out["api"] = api.select(*base, a.struct.field("correlation").alias("correlation"),
                                a.struct.field("External id").alias("external_id"))
    cpu = x.filter(cat == "cpu_op")
    if cpu.height:
        out["cpu"] = cpu.select(*base, a.struct.field("External id").alias("external_id"))
    ann = x.filter(cat == "user_annotation")
    if ann.height:
        out["ann"] = ann.select(*base)
    for f in out.values():
        if f.select(pl.any_horizontal(pl.col("name", "ts", "dur").is_null().any())).item():
            raise _FastPathFailed   # the exact reader names the event
    return out


# --------------------------------------------------------------------------------------------------
# Tier 2: events -> Python objects -> columns (exact error messages)
# --------------------------------------------------------------------------------------------------
class _Cols:
    """Per-category column lists of one chunk."""

    def __init__(self):
        self.gpu = {k: [] for k in ("kind", "name", "pid", "tid", "ts", "dur", "device", "stream", "correlation",
                                    "external_id", "grid", "block", "regs", "smem", "bytes", "idx")}
        self.api = {k: [] for k in ("name", "pid", "tid", "ts", "dur", "correlation", "external_id", "idx")}
        self.cpu = {k: [] for k in ("name", "pid", "tid", "ts", "dur", "external_id", "idx")}
        self.ann = {k: [] for k in ("name", "pid", "tid", "ts", "dur", "idx")}


def _collect(events: list, base_idx: int, name: str) -> _Cols:
    c = _Cols()
    g, a, p, n = c.gpu, c.api, c.cpu, c.ann
    g_kind, g_name, g_pid, g_tid, g_ts, g_dur = g["kind"].append, g["name"].append, g["pid"].append, \
        g["tid"].append, g["ts"].append, g["dur"].append
    g_dev, g_str, g_cor, g_ext, g_grid, g_block = g["device"].append, g["stream"].append, g["correlation"].append, \
        g["external_id"].append, g["grid"].append, g["block"].append
    g_regs, g_smem, g_bytes, g_idx = g["regs"].append, g["smem"].append, g["bytes"].append, g["idx"].append
    gpu_cats, api_cats = _GPU_CATS, _API_CATS
    empty_args: dict = {}
    for i, e in enumerate(events):
        if type(e) is not dict:
            raise ArtifactError(name, f"traceEvents[{base_idx + i}] is a {type(e).__name__}, expected an object")
        if e.get("ph") != "X":
            continue
        cat = e.get("cat")
        kind = gpu_cats.get(cat)
        if kind is not None:
            args = e.get("args", empty_args)
            if type(args) is not dict:
                raise ArtifactError(name, f"traceEvents[{base_idx + i}] ({cat}): 'args' is not an object")
            g_kind(kind); g_name(e.get("name")); g_pid(e.get("pid")); g_tid(e.get("tid"))
            g_ts(e.get("ts")); g_dur(e.get("dur")); g_dev(args.get("device")); g_str(args.get("stream"))
            g_cor(args.get("correlation")); g_ext(args.get("External id")); g_grid(args.get("grid"))
            g_block(args.get("block")); g_regs(args.get("registers per thread")); g_smem(args.get("shared memory"))
            g_bytes(args.get("bytes")); g_idx(base_idx + i)
        elif cat in api_cats:
            args = e.get("args", empty_args)
            if type(args) is not dict:
                raise ArtifactError(name, f"traceEvents[{base_idx + i}] ({cat}): 'args' is not an object")
            a["name"].append(e.get("name")); a["pid"].append(e.get("pid")); a["tid"].append(e.get("tid"))
            a["ts"].append(e.get("ts")); a["dur"].append(e.get("dur")); a["correlation"].append(args.get("correlation"))
            a["external_id"].append(args.get("External id")); a["idx"].append(base_idx + i)
        elif cat == "cpu_op":
            args = e.get("args", empty_args)
            if type(args) is not dict:
                raise ArtifactError(name, f"traceEvents[{base_idx + i}] ({cat}): 'args' is not an object")
            p["name"].append(e.get("name")); p["pid"].append(e.get("pid")); p["tid"].append(e.get("tid"))
            p["ts"].append(e.get("ts")); p["dur"].append(e.get("dur")); p["external_id"].append(args.get("External id"))
            p["idx"].append(base_idx + i)
        elif cat == "user_annotation":
            n["name"].append(e.get("name")); n["pid"].append(e.get("pid")); n["tid"].append(e.get("tid"))
            n["ts"].append(e.get("ts")); n["dur"].append(e.get("dur")); n["idx"].append(base_idx + i)
    return c


def _series(values: list, dtype, field: str, idx: list, name: str, *, required: bool = False) -> pl.Series:
    """A typed column; wrong types or (for required fields) missing values -> ArtifactError naming the event."""
    try:
        s = pl.Series(field, values, dtype=dtype, strict=True)
    except (TypeError, ValueError, OverflowError, pl.exceptions.PolarsError):
        s = None
    if s is None or (required and s.null_count()):
        want = {pl.Float64: "a number", pl.Int64: "an integer", pl.String: "a string"}.get(dtype, str(dtype))
        for v, i in zip(values, idx):
            if v is None:
                if required:
                    raise ArtifactError(name, f"traceEvents[{i}] has no '{field}'")
                continue
            try:
                pl.Series([v], dtype=dtype, strict=True)
            except (TypeError, ValueError, OverflowError, pl.exceptions.PolarsError):
                raise ArtifactError(name, f"traceEvents[{i}]: '{field}' is {v!r}, expected {want}") from None
            if isinstance(v, bool):
                raise ArtifactError(name, f"traceEvents[{i}]: '{field}' is {v!r}, expected {want}")
        raise ArtifactError(name, f"column {field!r} has values of the wrong type")  # pragma: no cover
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
            raise ArtifactError(name, f"traceEvents[{i}]: '{field}' is {v!r}, expected [x, y, z] integers")
    return pl.Series(out, dtype=pl.Int32)


def _frames(c: _Cols, name: str) -> dict[str, pl.DataFrame]:
    """Typed (float µs) frames of one chunk."""
    out = {}
    g = c.gpu
    if g["ts"]:
        ix = g["idx"]
        out["gpu"] = pl.DataFrame([
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
            _series(g["regs"], pl.Int64, "registers per thread", ix, name).alias("registers_per_thread"),
            _series(g["smem"], pl.Int64, "shared memory", ix, name).alias("shared_memory_bytes"),
            _series(g["bytes"], pl.Int64, "bytes", ix, name),
            _id_series(g["tid"], "tid", ix, name),
        ])
    for key, cols, extra in (("api", c.api, ("correlation", "external_id")), ("cpu", c.cpu, ("external_id",)),
                             ("ann", c.ann, ())):
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
            series.append(_series(cols[f], pl.Int64, "correlation" if f == "correlation" else "External id",
                                  ix, name).alias(f))
        out[key] = pl.DataFrame(series)
    return out


def _to_ns(df: pl.DataFrame, base_ns: int, origin_us: int) -> pl.DataFrame:
    """float µs ts/dur -> Int64 ns start/end/duration (see module docstring)."""
    start = ((pl.col("ts") - origin_us) * 1000.0).round().cast(pl.Int64) + (origin_us * 1000 + base_ns)
    dur = (pl.col("dur") * 1000.0).round().cast(pl.Int64)
    return df.with_columns(start.alias("start_ns"), dur.alias("duration_ns")).with_columns(
        (pl.col("start_ns") + pl.col("duration_ns")).alias("end_ns")).drop("ts", "dur")


_MEMCPY_KIND = re.compile(r"^Memcpy (\w+)")


def _copy_kinds(names: pl.Series) -> dict[str, str]:
    """Memcpy name -> copy kind ("Memcpy HtoD (Pinned -> Device)" -> "HtoD"), once per distinct name."""
    out = {}
    for n in names.unique().drop_nulls().cast(pl.String).to_list():
        m = _MEMCPY_KIND.match(n)
        if m:
            out[n] = m.group(1)
    return out


def _parse_one(data: bytes, name: str, rank_override: int | None = None) -> tuple[dict[str, pl.DataFrame], dict]:
    """One Kineto JSON document -> (tables, meta). Tier 1 (NDJSON via polars) first; on anything unexpected
    tier 2 (orjson, chunk by chunk, exact errors), then tier 3 (the whole document at once)."""
    try:
        top, frames, n = _ndjson_frames(data)
        return _build(top, frames, name, rank_override, n)
    except _FastPathFailed:
        pass
    frames = {"gpu": [], "api": [], "cpu": [], "ann": []}
    base_idx = 0
    try:
        top, chunks = _fast_chunks(data)
        for events in chunks:
            if not isinstance(events, list):  # pragma: no cover - chunks are lists by construction
                raise ArtifactError(name, "traceEvents is not an array")
            for k, df in _frames(_collect(events, base_idx, name), name).items():
                frames[k].append(df)
            base_idx += len(events)
    except _FastPathFailed:
        # a split fell inside a string (or the file is broken): start again on the whole document
        return _parse_one_slow(data, name, rank_override)
    return _build(top, frames, name, rank_override, base_idx)


def _parse_one_slow(data: bytes, name: str, rank_override: int | None) -> tuple[dict[str, pl.DataFrame], dict]:
    try:
        obj = _loads(data)
    except ValueError as e:
        raise _json_error(name, e) from None
    if isinstance(obj, list):
        obj = {"traceEvents": obj}
    if not isinstance(obj, dict):
        raise ArtifactError(name, f"not a trace: the JSON document is a {type(obj).__name__}, not an object")
    events = obj.pop("traceEvents", None)
    if not isinstance(events, list):
        raise ArtifactError(name, "no 'traceEvents' array: not a PyTorch profiler (Chrome) trace")
    frames: dict[str, list[pl.DataFrame]] = {"gpu": [], "api": [], "cpu": [], "ann": []}
    step = 50_000
    for i in range(0, len(events), step):
        for k, df in _frames(_collect(events[i:i + step], i, name), name).items():
            frames[k].append(df)
    return _build(obj, frames, name, rank_override, len(events))


def _int_or_none(v) -> int | None:
    if type(v) is int:
        return v
    if isinstance(v, str) and v.strip().lstrip("-").isdigit():
        return int(v)
    return None


def _build(top: dict, frames: dict[str, list[pl.DataFrame]], name: str, rank_override: int | None,
           n_events: int) -> tuple[dict[str, pl.DataFrame], dict]:
    dist = top.get("distributedInfo")
    rank = rank_override
    if rank is None:
        rank = _int_or_none(dist.get("rank")) if isinstance(dist, dict) else None
        rank = 0 if rank is None else rank
    base = top.get("baseTimeNanoseconds")
    if base is not None and type(base) is not int:
        base = _int_or_none(base)
        if base is None:
            raise ArtifactError(name, "'baseTimeNanoseconds' is not an integer")
    base_ns = base or 0

    cat = {k: (pl.concat(v, how="diagonal_relaxed") if v else None) for k, v in frames.items()}
    for v in frames.values():
        v.clear()  # the caller's chunk frames are no longer needed
    mins = [df["ts"].min() for df in cat.values() if df is not None and df.height]
    origin_us = int(min(mins) // 1) if mins else 0
    for k, df in cat.items():
        if df is not None:
            if df["dur"].min() is not None and df["dur"].min() < 0:
                raise ArtifactError(name, f"negative 'dur' in a {k} event")
            cat[k] = _to_ns(df, base_ns, origin_us).with_columns(pl.lit(rank, pl.Int32).alias("rank"))

    # api calls
    if cat["api"] is not None:
        api = cat["api"]
        api = pl.concat([api, api_kind_columns(api["name"])], how="horizontal")
        api = conform(api, API_CALLS_SCHEMA, "api_calls").sort("start_ns")
    else:
        api = empty(API_CALLS_SCHEMA)
    cpu = conform(cat["cpu"], CPU_OPS_SCHEMA, "cpu_ops") if cat["cpu"] is not None else empty(CPU_OPS_SCHEMA)
    nvtx = conform(cat["ann"], NVTX_SCHEMA, "nvtx") if cat["ann"] is not None else empty(NVTX_SCHEMA)

    # the traced process: the most common pid among API calls (GPU events carry the device as pid)
    pids = api["pid"].drop_nulls().mode().sort() if api.height else []
    host_pid = int(pids[0]) if len(pids) else None
    if cat["gpu"] is not None:
        g = cat["gpu"]
        g = g.with_columns(
            pl.coalesce(pl.col("device"), pl.col("pid")).cast(pl.Int32).alias("device"),
            pl.coalesce(pl.col("stream"), pl.col("tid")).alias("stream"),
            pl.lit(host_pid, pl.Int64).alias("pid"),
            pl.when(pl.col("kind") == "memcpy").then(pl.col("name").replace_strict(
                _copy_kinds(g["name"]), default=None, return_dtype=pl.String)).otherwise(None).alias("copy_kind"),
        )
        gpu_raw = conform(g, GPU_RAW_SCHEMA, "gpu_ops", keep_categorical=True)
    else:
        gpu_raw = empty(GPU_RAW_SCHEMA)
    del cat
    gpu = link_launches(gpu_raw, api, cpu)

    meta = _meta(top, rank, base, name, n_events)
    return {"gpu_ops": gpu, "api_calls": api, "cpu_ops": cpu.sort("start_ns"),
            "nvtx": nvtx.sort("start_ns")}, meta


_DEVICE_KEYS = {
    "name": "name", "totalGlobalMem": "total_memory_bytes", "computeMajor": "cc_major", "computeMinor": "cc_minor",
    "maxThreadsPerBlock": "max_threads_per_block", "maxThreadsPerMultiprocessor": "max_threads_per_sm",
    "regsPerBlock": "regs_per_block", "regsPerMultiprocessor": "regs_per_sm", "warpSize": "warp_size",
    "sharedMemPerBlock": "smem_per_block_bytes", "sharedMemPerMultiprocessor": "smem_per_sm_bytes",
    "numSms": "sm_count", "sharedMemPerBlockOptin": "smem_per_block_optin_bytes",
}


def _meta(top: dict, rank: int, base: int | None, name: str, n_events: int) -> dict:
    devices = []
    props = top.get("deviceProperties")
    if isinstance(props, list):
        for d in props:
            if isinstance(d, dict):
                row = {"device": d.get("id")}
                row.update({v: d[k] for k, v in _DEVICE_KEYS.items() if k in d})
                devices.append(row)
    dist = top.get("distributedInfo") if isinstance(top.get("distributedInfo"), dict) else None
    meta = {
        "source_format": "kineto",
        "trace_name": top.get("traceName") if isinstance(top.get("traceName"), str) else name,
        "rank": rank,
        "world_size": _int_or_none(dist.get("world_size")) if dist else None,
        "distributed_backend": dist.get("backend") if dist else None,
        "clock": "unix epoch ns",
        "timestamps": "relative to baseTimeNanoseconds" if base is not None else "absolute epoch microseconds",
        "base_time_ns": base,
        "devices": devices,
        "event_count": n_events,
    }
    for k in ("schemaVersion", "cuda_driver_version", "cuda_runtime_version", "cupti_version", "trace_id"):
        if k in top and isinstance(top[k], (int, str)):
            meta[k] = top[k]
    return meta


def _finish_meta(tables: dict[str, pl.DataFrame], meta: dict) -> dict:
    g = tables["gpu_ops"]
    k = g.filter(pl.col("kind") == "kernel")
    meta["counts"] = {
        "gpu_ops": g.height, "kernels": k.height,
        "kernels_with_launch": int(k["launch_api"].is_not_null().sum()),
        "memcpy": int((g["kind"] == "memcpy").sum()), "memset": int((g["kind"] == "memset").sum()),
        "api_calls": tables["api_calls"].height, "cpu_ops": tables["cpu_ops"].height, "nvtx": tables["nvtx"].height,
    }
    if g.height:
        meta["window_ns"] = [int(g["start_ns"].min()), int(g["end_ns"].max())]
    names = {}
    for d in meta.get("devices", []):
        if d.get("device") is not None and d.get("name"):
            names[d["device"]] = d["name"]
    if names:
        used = g["device"].drop_nulls().mode().sort().to_list() if g.height else []
        gpu = names.get(used[0]) if used else None
        meta["gpu_name"] = gpu or next(iter(names.values()))
    return meta


# --------------------------------------------------------------------------------------------------
# Public entry points
# --------------------------------------------------------------------------------------------------
def is_tar(data: bytes) -> bool:
    return len(data) > 262 and data[257:262] == b"ustar"


def parse(data: bytes, name: str) -> Parsed:
    """A Kineto trace (JSON, .json.gz) or a rank archive made by `pack_rank_folder` -> Parsed(kind="kineto")."""
    data, inner = gunzip_if_needed(data, name)
    if is_tar(data):
        return _parse_tar(data, name)
    tables, meta = _parse_one(data, name)
    meta["ranks"] = [meta["rank"]]
    return Parsed("kineto", tables, _finish_meta(tables, meta))


def _parse_tar(data: bytes, name: str) -> Parsed:
    try:
        tf = tarfile.open(fileobj=io.BytesIO(data), mode="r:")
        members = [m for m in tf.getmembers() if m.isfile()]
    except tarfile.TarError as e:
        raise ArtifactError(name, f"corrupt rank archive ({e})") from None
    if not members:
        raise ArtifactError(name, "rank archive holds no trace")
    parts, metas = [], []
    for m in sorted(members, key=lambda m: m.name):
        raw = tf.extractfile(m).read()
        member = f"{name}:{m.name}"
        raw, _ = gunzip_if_needed(raw, member)
        tables, meta = _parse_one(raw, member)
        parts.append(tables)
        metas.append(meta)
    ranks = [m["rank"] for m in metas]
    if len(set(ranks)) != len(ranks):
        raise ArtifactError(name, f"rank archive has repeated ranks {sorted(ranks)}")
    tables = {t: pl.concat([p[t] for p in parts]) for t in TIMELINE_SCHEMAS}
    tables["gpu_ops"] = tables["gpu_ops"].sort("rank", "device", "stream", "start_ns")
    meta = dict(metas[0])
    meta.update({
        "rank": None, "ranks": ranks, "trace_name": name,
        "rank_traces": [{"rank": m["rank"], "trace_name": m["trace_name"], "event_count": m["event_count"]}
                        for m in metas],
        "event_count": sum(m["event_count"] for m in metas),
    })
    meta["devices"] = [dict(d, rank=m["rank"]) for m in metas for d in m["devices"]]
    meta = _finish_meta(tables, meta)
    return Parsed("kineto", tables, meta)


_SKIP_SUFFIXES = {".cu", ".py", ".sh", ".md", ".txt", ".cuh"}


def _peek_rank(path: Path) -> int | None:
    """distributedInfo.rank of a Kineto trace, reading only its beginning; None if absent / not a trace."""
    try:
        with open(path, "rb") as f:
            head = f.read(1 << 20)
    except OSError:
        return None
    if head[:2] == b"\x1f\x8b":
        try:
            head = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(head, 1 << 20)
        except zlib.error:
            return None
    if not head.lstrip()[:1] == b"{" or b'"traceEvents"' not in head and b'"schemaVersion"' not in head:
        return None
    m = re.search(rb'"distributedInfo"\s*:\s*\{[^{}]*?"rank"\s*:\s*(\d+)', head)
    return int(m.group(1)) if m else None


def pack_rank_folder(folder: Path) -> tuple[bytes, str] | None:
    """A folder holding only Kineto traces of distinct ranks (>= 2) -> (tar bytes, "<folder>.kineto.tar").

    The tar is deterministic (sorted names, zero mtimes, owner 0, mode 0644), so the same folder is the
    same run id. Returns None when the folder is not such a set (then its files are separate runs).
    Hidden files and sources / notes (.py, .md, ...) are ignored; a subfolder or any other file -> None."""
    folder = Path(folder)
    if not folder.is_dir():
        return None
    files = []
    for p in sorted(folder.iterdir()):
        if p.name.startswith("."):
            continue
        if p.is_dir():
            return None
        if p.suffix.lower() in _SKIP_SUFFIXES or p.name == "record_summary.json":
            continue
        if not (p.name.lower().endswith(".json") or p.name.lower().endswith(".json.gz")):
            return None
        files.append(p)
    if len(files) < 2:
        return None
    ranks = [_peek_rank(p) for p in files]
    if any(r is None for r in ranks) or len(set(ranks)) != len(ranks):
        return None
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tf:
        for p in files:
            data = p.read_bytes()
            info = tarfile.TarInfo(p.name)
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue(), f"{folder.name}.kineto.tar"
