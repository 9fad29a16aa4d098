"""PyTorch profiler (Kineto) Chrome-trace JSON -> the normalized timeline tables.

The timeline tables (collectors.schema.TIMELINE_SCHEMAS) are shared with the Nsight Systems parser,
so every analyzer works on both sources. All times are Int64 nanoseconds on the trace's own clock
(Kineto: Unix epoch; nsys: the session clock), durations are `*_ns`, sizes `*_bytes`.

More: docs/architecture.md, *collectors.kineto*.
"""

from __future__ import annotations

import io
import re
import tarfile

import polars as pl

from collectors.decompress import gunzip_if_needed, is_tar, mapped, read_chunks, squeeze_json
from collectors.errors import ArtifactError
from collectors.limits import max_artifact_bytes
from collectors.kineto_events import (
    NDJSON_CHUNK_BYTES,
    FastPathFailed,
    collect_events,
    event_frames,
    fast_chunks,
    json_error,
    loads,
    ndjson_frames,
    ndjson_stream,
)
from collectors.kineto_typed import TYPED_PIECE_BYTES, typed_frames, typed_stream
from collectors.launches import api_kind_columns, link_launches, op_counts
from collectors.trace_notes import check_kineto, kineto_lacks, trace_notes
from collectors.schema import (
    API_CALLS_SCHEMA,
    CPU_OPS_SCHEMA,
    GPU_RAW_SCHEMA,
    NVTX_SCHEMA,
    TIMELINE_SCHEMAS,
    Parsed,
    conform,
    empty,
    finish_meta,
    sorted_by,
)


def _to_ns(df: pl.DataFrame, base_ns: int) -> pl.DataFrame:
    """ts / dur in ns (kineto_events.exact_ns) -> Int64 ns start/end/duration on the trace's clock."""
    return (
        df.with_columns(
            (pl.col("ts") + base_ns).alias("start_ns"), pl.col("dur").alias("duration_ns")
        )
        .with_columns((pl.col("start_ns") + pl.col("duration_ns")).alias("end_ns"))
        .drop("ts", "dur")
    )


_MEMCPY_KIND = re.compile(r"^Memcpy (\w+)")


def _copy_kinds(names: pl.Series) -> dict[str, str]:
    """Memcpy name -> copy kind ("Memcpy HtoD (Pinned -> Device)" -> "HtoD"), once per distinct name."""
    out = {}
    for n in names.unique().drop_nulls().cast(pl.String).to_list():
        m = _MEMCPY_KIND.match(n)
        if m:
            out[n] = m.group(1)
    return out


def _parse_one(
    data: bytes, name: str, rank_override: int | None = None
) -> tuple[dict[str, pl.DataFrame], dict]:
    """One Kineto JSON document -> (tables, meta). Tier 0 (typed structs via msgspec) first, then
    tier 1 (NDJSON via polars); on anything unexpected tier 2 (orjson, chunk by chunk, exact
    errors), then tier 3 (the whole document at once)."""
    for reader in (typed_frames, ndjson_frames):
        try:
            top, frames, n, cats = reader(data)
            return _build(top, frames, name, rank_override, n, cats)
        except FastPathFailed:
            pass
    frames = {"gpu": [], "api": [], "cpu": [], "ann": []}
    cats: dict[str, int] = {}
    base_idx = 0
    try:
        top, chunks = fast_chunks(data)
        for events in chunks:
            if not isinstance(events, list):  # pragma: no cover - chunks are lists by construction
                raise ArtifactError(name, "traceEvents is not an array")
            cols = collect_events(events, base_idx, name)
            _add_counts(cats, cols.cats)
            for k, df in event_frames(cols, name).items():
                frames[k].append(df)
            base_idx += len(events)
    except FastPathFailed:
        # a split fell inside a string (or the file is broken): start again on the whole document
        return _parse_one_slow(data, name, rank_override)
    return _build(top, frames, name, rank_override, base_idx, cats)


def _add_counts(into: dict, more: dict) -> None:
    for k, v in more.items():
        into[k] = into.get(k, 0) + v


def _parse_one_slow(
    data: bytes, name: str, rank_override: int | None
) -> tuple[dict[str, pl.DataFrame], dict]:
    try:
        obj = loads(data)
    except ValueError as e:
        raise json_error(name, e) from None
    if isinstance(obj, list):
        obj = {"traceEvents": obj}
    if not isinstance(obj, dict):
        raise ArtifactError(
            name, f"not a trace: the JSON document is a {type(obj).__name__}, not an object"
        )
    events = obj.pop("traceEvents", None)
    if not isinstance(events, list):
        raise ArtifactError(name, "no 'traceEvents' array: not a PyTorch profiler (Chrome) trace")
    frames: dict[str, list[pl.DataFrame]] = {"gpu": [], "api": [], "cpu": [], "ann": []}
    cats: dict[str, int] = {}
    step = 50_000
    for i in range(0, len(events), step):
        cols = collect_events(events[i : i + step], i, name)
        _add_counts(cats, cols.cats)
        for k, df in event_frames(cols, name).items():
            frames[k].append(df)
    return _build(obj, frames, name, rank_override, len(events), cats)


def _int_or_none(v) -> int | None:
    if type(v) is int:
        return v
    if isinstance(v, str) and v.strip().lstrip("-").isdigit():
        return int(v)
    return None


def _build(
    top: dict,
    frames: dict[str, list[pl.DataFrame]],
    name: str,
    rank_override: int | None,
    n_events: int,
    cats: dict[str, int],
) -> tuple[dict[str, pl.DataFrame], dict]:
    check_kineto(top, cats, n_events, name)
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
    timed = [df for k, df in cat.items() if k in ("gpu", "api") and df is not None and df.height]
    whole_us = bool(timed) and all(
        df.select(((pl.col("ts") % 1000 == 0) & (pl.col("dur") % 1000 == 0)).all()).item()
        for df in timed
    )
    for k, df in cat.items():
        if df is not None:
            if df["dur"].min() is not None and df["dur"].min() < 0:
                raise ArtifactError(name, f"negative 'dur' in a {k} event")
            cat[k] = _to_ns(df, base_ns).with_columns(pl.lit(rank, pl.Int32).alias("rank"))

    # api calls
    if cat["api"] is not None:
        api = cat["api"]
        api = pl.concat([api, api_kind_columns(api["name"])], how="horizontal")
        api = sorted_by(conform(api, API_CALLS_SCHEMA, "api_calls"), "start_ns")
    else:
        api = empty(API_CALLS_SCHEMA)
    cpu = (
        sorted_by(conform(cat["cpu"], CPU_OPS_SCHEMA, "cpu_ops"), "start_ns")
        if cat["cpu"] is not None
        else empty(CPU_OPS_SCHEMA)
    )
    nvtx = (
        conform(cat["ann"], NVTX_SCHEMA, "nvtx") if cat["ann"] is not None else empty(NVTX_SCHEMA)
    )

    # the traced process: the most common pid among API calls (GPU events carry the device as pid)
    pids = api["pid"].drop_nulls().mode().sort() if api.height else []
    host_pid = int(pids[0]) if len(pids) else None
    if cat["gpu"] is not None:
        g = cat["gpu"]
        g = g.with_columns(
            pl.coalesce(pl.col("device"), pl.col("pid")).cast(pl.Int32).alias("device"),
            pl.coalesce(pl.col("stream"), pl.col("tid")).alias("stream"),
            pl.lit(host_pid, pl.Int64).alias("pid"),
            pl.when(pl.col("kind") == "memcpy")
            .then(
                pl.col("name").replace_strict(
                    _copy_kinds(g["name"]), default=None, return_dtype=pl.String
                )
            )
            .otherwise(None)
            .alias("copy_kind"),
        )
        gpu_raw = conform(g, GPU_RAW_SCHEMA, "gpu_ops", keep_categorical=True)
    else:
        gpu_raw = empty(GPU_RAW_SCHEMA)
    del cat
    gpu = link_launches(gpu_raw, api, cpu)

    meta = _meta(top, rank, base, name, n_events)
    meta["categories"] = dict(sorted(cats.items(), key=lambda kv: (-kv[1], kv[0])))
    meta["whole_us_timestamps"] = whole_us
    return {
        "gpu_ops": gpu,
        "api_calls": api,
        "cpu_ops": cpu,
        "nvtx": sorted_by(nvtx, "start_ns"),
    }, meta


#: deviceProperties (Kineto >= PyTorch 1.9) and computeProperties (PyTorch 1.8/1.9, CUDA runtime
#: field names)
_DEVICE_KEYS = {
    "name": "name",
    "totalGlobalMem": "total_memory_bytes",
    "computeMajor": "cc_major",
    "computeMinor": "cc_minor",
    "major": "cc_major",
    "minor": "cc_minor",
    "maxThreadsPerBlock": "max_threads_per_block",
    "maxThreadsPerMultiprocessor": "max_threads_per_sm",
    "maxThreadsPerMultiProcessor": "max_threads_per_sm",
    "regsPerBlock": "regs_per_block",
    "regsPerMultiprocessor": "regs_per_sm",
    "warpSize": "warp_size",
    "sharedMemPerBlock": "smem_per_block_bytes",
    "sharedMemPerMultiprocessor": "smem_per_sm_bytes",
    "maxSharedMemoryPerMultiProcessor": "smem_per_sm_bytes",
    "numSms": "sm_count",
    "multiProcessorCount": "sm_count",
    "sharedMemPerBlockOptin": "smem_per_block_optin_bytes",
}


def _meta(top: dict, rank: int, base: int | None, name: str, n_events: int) -> dict:
    devices = []
    for key in ("deviceProperties", "computeProperties"):
        props = top.get(key)
        if isinstance(props, list) and not devices:
            for d in props:
                if isinstance(d, dict):
                    row = {"device": d.get("id"), "source": key}
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
        "timestamps": "relative to baseTimeNanoseconds"
        if base is not None
        else "absolute epoch microseconds",
        "base_time_ns": base,
        "devices": devices,
        "event_count": n_events,
    }
    for k in (
        "schemaVersion",
        "cuda_driver_version",
        "cuda_runtime_version",
        "cupti_version",
        "trace_id",
    ):
        if k in top and isinstance(top[k], (int, str)):
            meta[k] = top[k]
    return meta


def _finish_meta(tables: dict[str, pl.DataFrame], meta: dict) -> dict:
    g = tables["gpu_ops"]
    n_k, n_kl, n_mc, n_ms = op_counts(g)
    meta["counts"] = {
        "gpu_ops": g.height,
        "kernels": n_k,
        "kernels_with_launch": n_kl,
        "memcpy": n_mc,
        "memset": n_ms,
        "api_calls": tables["api_calls"].height,
        "cpu_ops": tables["cpu_ops"].height,
        "nvtx": tables["nvtx"].height,
    }
    meta["item_count"] = n_k
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
    warnings, lacks = trace_notes(tables, meta, kineto_lacks(meta))
    meta["warnings"] = meta.get("warnings", []) + warnings
    meta["lacks"] = lacks
    return meta


# --------------------------------------------------------------------------------------------------
# Public entry points
# --------------------------------------------------------------------------------------------------
def parse(data: bytes, name: str) -> Parsed:
    """A Kineto trace (JSON, .json.gz) or a rank archive made by `pack_rank_folder` -> Parsed(kind="kineto")."""
    data, inner = gunzip_if_needed(data, name)
    if is_tar(data):
        return _parse_tar(data, name)
    tables, meta = _parse_one(squeeze_json(data), name)
    meta["ranks"] = [meta["rank"]]
    return Parsed("kineto", tables, finish_meta("kineto", _finish_meta(tables, meta)))


def parse_file(path, name: str) -> Parsed:
    """A Kineto trace file (JSON or .json.gz, not a rank archive) read as a stream: the fast reader
    never holds the whole document (`kernelscope analyze TRACE` on a large trace); anything it
    cannot read goes to `parse`."""
    try:
        # a plain file: its pages read in place, not copied into buffers
        with mapped(path, name) as whole:
            top, frames, n, cats = typed_stream(
                whole if whole is not None else read_chunks(path, name, step=TYPED_PIECE_BYTES)
            )
        tables, meta = _build(top, frames, name, None, n, cats)
    except FastPathFailed:
        try:
            with mapped(path, name) as whole:
                top, frames, n, cats = ndjson_stream(
                    whole if whole is not None else read_chunks(path, name, step=NDJSON_CHUNK_BYTES)
                )
            tables, meta = _build(top, frames, name, None, n, cats)
        # the whole document, its long whitespace runs squeezed on the way
        except FastPathFailed:
            return parse(b"".join(read_chunks(path, name)), name)
    meta["ranks"] = [meta["rank"]]
    return Parsed("kineto", tables, finish_meta("kineto", _finish_meta(tables, meta)))


def _parse_tar(data: bytes, name: str) -> Parsed:
    try:
        tf = tarfile.open(fileobj=io.BytesIO(data), mode="r:")
        members = [m for m in tf.getmembers() if m.isfile()]
    except tarfile.TarError as e:
        raise ArtifactError(name, f"corrupt rank archive ({e})") from None
    if not members:
        raise ArtifactError(name, "rank archive holds no trace")
    parts, metas = [], []
    left = max_artifact_bytes()  # the members together count as one artifact
    for m in sorted(members, key=lambda m: m.name):
        raw = tf.extractfile(m).read()
        member = f"{name}:{m.name}"
        raw, _ = gunzip_if_needed(raw, member, limit=left)
        left -= len(raw)
        tables, meta = _parse_one(raw, member)
        parts.append(tables)
        metas.append(meta)
    ranks = [m["rank"] for m in metas]
    if len(set(ranks)) != len(ranks):
        raise ArtifactError(name, f"rank archive has repeated ranks {sorted(ranks)}")
    tables = {t: pl.concat([p[t] for p in parts]) for t in TIMELINE_SCHEMAS}
    tables["gpu_ops"] = tables["gpu_ops"].sort("rank", "device", "stream", "start_ns")
    meta = dict(metas[0])
    meta.update(
        {
            "rank": None,
            "ranks": ranks,
            "trace_name": name,
            "rank_traces": [
                {"rank": m["rank"], "trace_name": m["trace_name"], "event_count": m["event_count"]}
                for m in metas
            ],
            "event_count": sum(m["event_count"] for m in metas),
        }
    )
    meta["devices"] = [dict(d, rank=m["rank"]) for m in metas for d in m["devices"]]
    cats: dict[str, int] = {}
    for m in metas:
        _add_counts(cats, m["categories"])
    meta["categories"] = cats
    meta["whole_us_timestamps"] = any(m["whole_us_timestamps"] for m in metas)
    return Parsed("kineto", tables, finish_meta("kineto", _finish_meta(tables, meta)))
