"""The join of GPU ops to the host calls that launched them, shared by both trace formats (Kineto,
nsys).

- `api_kind(name)`: what a CUDA (or HIP) API call does: launch, graph_launch, memcpy, memset, sync,
  other.
- `link_launches(gpu_raw, api_calls, cpu_ops)`: each GPU op joined to the API call with its
  correlation id within its rank / process (the outer call when a runtime and a driver call share
  it) and to the CPU op with its External id, with the derived launch delay (HTA) and queue time
  (Nsight Systems) -> the `gpu_ops` table.

More: docs/architecture.md, *collectors.launches*.
"""

from __future__ import annotations

import re

import polars as pl

from collectors.schema import GPU_OPS_SCHEMA, conform, sorted_by

GRAPH_LAUNCH_APIS = ("cudaGraphLaunch", "cuGraphLaunch", "hipGraphLaunch")
_SYNC_APIS = {
    "cudaDeviceSynchronize",
    "cudaStreamSynchronize",
    "cudaEventSynchronize",
    "cudaThreadSynchronize",
    "cuCtxSynchronize",
    "cuStreamSynchronize",
    "cuEventSynchronize",
    "hipDeviceSynchronize",
    "hipStreamSynchronize",
    "hipEventSynchronize",
}
_BLOCKING_COPY = re.compile(
    r"^(cudaMemcpy(2D|3D|ToSymbol|FromSymbol|Peer)?|cuMemcpy(DtoH|HtoD|DtoD|Peer)?(_v2)?"
    r"|hipMemcpy(2D|3D|ToSymbol|FromSymbol|Peer|DtoH|HtoD|DtoD)?)$"
)


def api_kind(name: str) -> tuple[str, bool]:
    """(kind, blocking) of a CUDA API call from its name."""
    if name in GRAPH_LAUNCH_APIS:
        return "graph_launch", False
    if "LaunchKernel" in name or "LaunchCooperativeKernel" in name:
        return "launch", False
    if name in _SYNC_APIS:
        return "sync", True
    if name.startswith(("cudaMemcpy", "cuMemcpy", "hipMemcpy")):
        return "memcpy", bool(_BLOCKING_COPY.match(name))
    if name.startswith(("cudaMemset", "cuMemset", "hipMemset")):
        return "memset", False
    return "other", False


def api_kind_columns(names: pl.Series) -> pl.DataFrame:
    """kind and blocking for a column of API names (computed once per distinct name)."""
    uniq = names.unique().to_list()
    mapping = {n: api_kind(n) for n in uniq if n is not None}
    kinds = {n: k for n, (k, _) in mapping.items()}
    blocking = {n: b for n, (_, b) in mapping.items()}
    return pl.DataFrame(
        {
            "kind": names.replace_strict(kinds, default="other", return_dtype=pl.String),
            "blocking": names.replace_strict(blocking, default=False, return_dtype=pl.Boolean),
        }
    )


def op_counts(gpu_ops: pl.DataFrame) -> tuple[int, int, int, int]:
    """(kernels, kernels with their launch call, memcpy, memset) of a gpu_ops table, without copying its rows."""
    k = pl.col("kind") == "kernel"
    return tuple(
        int(x)
        for x in gpu_ops.select(
            k.sum().alias("k"),
            (k & pl.col("launch_api").is_not_null()).sum().alias("kl"),
            (pl.col("kind") == "memcpy").sum().alias("mc"),
            (pl.col("kind") == "memset").sum().alias("ms"),
        ).row(0)
    )


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


def _key(a: pl.DataFrame, b: pl.DataFrame, col: str) -> tuple[list[str], list[pl.Expr]]:
    """The join key (rank, col) of frames a and b as one Int64 column (rank * 2**40 + col) when
    every value fits, which polars hashes without encoding rows (a fraction of the memory of a
    two-column key); else both columns."""

    def fits(df):
        if df.height == 0:
            return True
        row = df.select(
            pl.col(col).min().alias("a"),
            pl.col(col).max().alias("b"),
            pl.col("rank").min().alias("c"),
            pl.col("rank").max().alias("d"),
        ).row(0)
        return all(
            v is None or 0 <= v < lim for v, lim in zip(row, (1 << 40, 1 << 40, 1 << 22, 1 << 22))
        )

    if fits(a) and fits(b):
        return ["_key"], [(pl.col("rank").cast(pl.Int64) * (1 << 40) + pl.col(col)).alias("_key")]
    return ["rank", col], [pl.col("rank"), pl.col(col)]


def _first(on: list[str], last: bool = False) -> pl.Expr:
    """Rows whose key is the first (last) of its value: `unique(on, keep=..., maintain_order=True)`
    as a filter, in one hashing pass without sorting the groups (a third to a half of unique's time
    on 175,000 launch calls)."""
    key = pl.col(on[0]) if len(on) == 1 else pl.struct(on)
    return key.is_last_distinct() if last else key.is_first_distinct()


def link_launches(
    gpu_raw: pl.DataFrame, api_calls: pl.DataFrame, cpu_ops: pl.DataFrame
) -> pl.DataFrame:
    """Join each GPU op to the API call with its correlation id (within its rank / process) and to
    the CPU op with its External id; derive launch delay and queue time. Returns a `gpu_ops` table.
    api_calls must be sorted by start_ns (when a runtime and a driver call share a correlation id,
    the outer one, which starts first, is the launch call)."""
    # ops in (rank, device, stream, start) order; traces usually deliver them so, then nothing moves
    order = ["rank", "device", "stream", "start_ns"]
    if not _is_sorted(gpu_raw, order):
        gpu_raw = gpu_raw.sort(order)
    launch_cols = {
        "name": "launch_api",
        "pid": "api_pid",
        "tid": "api_tid",
        "start_ns": "api_start_ns",
        "end_ns": "api_end_ns",
        "external_id": "api_external_id",
    }
    on, key = _key(api_calls, gpu_raw, "correlation")
    # each op's launch call as a row number of api_calls (they come sorted by start: the first of a
    # correlation id is the outer call), joined on narrow key frames with the ops' order kept; the
    # call's columns are then gathered once, straight into the ops' order, with no copy of them
    # made for the join
    calls = (
        api_calls.select(*key, pl.int_range(pl.len(), dtype=pl.UInt32).alias("_row"))
        .drop_nulls(on)
        .filter(_first(on))
    )
    row = gpu_raw.select(*key).join(calls, on=on, how="left", maintain_order="left")["_row"]
    del calls
    lk = api_calls.select(pl.col(c).gather(row).alias(a) for c, a in launch_cols.items())
    del row
    g = pl.concat([gpu_raw, lk], how="horizontal")
    lag = pl.col("start_ns") - pl.col("api_end_ns")
    graph = pl.col("launch_api").is_in(GRAPH_LAUNCH_APIS)
    g = g.with_columns(
        pl.coalesce("api_pid", "pid").alias("pid"),
        pl.coalesce("external_id", "api_external_id").alias("external_id"),
        (pl.col("api_end_ns") - pl.col("api_start_ns")).alias("api_duration_ns"),
        pl.when(lag >= 0).then(lag).otherwise(None).alias("queue_ns"),
        pl.when(graph)
        .then(None)
        .when(lag >= 0)
        .then(lag)
        .when(lag < 0)
        .then(0)
        .otherwise(None)
        .alias("launch_delay_ns"),
        pl.when(graph)
        .then(pl.col("correlation"))
        .otherwise(None)
        .alias("graph_launch_correlation"),
    )
    on, key = _key(cpu_ops, g, "external_id")
    # the innermost CPU op of each External id (the last to start of a nest) as a row number of
    # cpu_ops; only the columns the join needs are filtered and sorted, and the names are gathered
    # once, in the ops' order
    ops = sorted_by(
        cpu_ops.select(
            "rank",
            "external_id",
            "start_ns",
            pl.int_range(pl.len(), dtype=pl.UInt32).alias("_row"),
        ).filter(pl.col("external_id").is_not_null()),
        "start_ns",
    )
    ops = ops.select(*key, "_row").filter(_first(on, last=True))
    row = g.select(*key).join(ops, on=on, how="left", maintain_order="left")["_row"]
    del ops
    g = g.with_columns(cpu_ops["name"].gather(row).alias("op_name"))
    g = g.select([pl.col(c).cast(t, strict=True) for c, t in GPU_OPS_SCHEMA.items()])
    return conform(g, GPU_OPS_SCHEMA, "gpu_ops")
