"""Timeline analyzers: pure functions over the normalized timeline tables (`collectors.kineto`
schemas).

Inputs are the `gpu_ops` table (kernels, memcpy, memset with their launch calls) and, for the
what-if, the `api_calls` table. All times are Int64 ns; results carry the unit in every column name.
Groups are (rank, device) for device-level results and (rank, device, stream) for stream-level ones.

More: docs/architecture.md, *analyzers.timeline*.
Start-up: imports that only some commands, pages or GPUs need sit inside the functions that use
them, so each command loads what it uses.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from analyzers.bound import (
    BOUND_VERDICTS,  # noqa: F401
    GPU_BUSY_MIN,  # noqa: F401
    HOST_WAIT_MIN,  # noqa: F401
    HOST_WAIT_PARTIAL,  # noqa: F401
    TraceFacts,  # noqa: F401
    SHORT_SHARE_MIN,  # noqa: F401
    bound_verdict,
    run_spans,
    trace_facts,
)
from analyzers.kernel_origin import kernel_origin

DEVICE = ("rank", "device")
STREAM = ("rank", "device", "stream")
KERNEL_WAIT_THRESHOLD_NS = 30_000
LAUNCH_DELAY_CUTOFF_NS = 100_000  # HTA launch_delay_cutoff = 100 µs
RUNTIME_CUTOFF_NS = 50_000  # HTA runtime_cutoff = 50 µs
IDLE_CATEGORIES = ("host_wait", "kernel_wait", "other")
#: the idle categories as pages say them (HTA's names stay in the JSON and the CSV)
IDLE_CATEGORY_WORDS = {
    "host_wait": "waiting for the host",
    "kernel_wait": "short gap between kernels",
    "other": "other",
}
# as collectors.launches names them
GRAPH_LAUNCH_APIS = ("cudaGraphLaunch", "cuGraphLaunch", "hipGraphLaunch")
_COMM = r"(?i)nccl"
# collective kernels (NCCL; RCCL keeps the nccl names), as HTA classifies them
COMM_PATTERN = _COMM

# ,F401  (re-exported: the surfaces import it here)
from analyzers.definitions import DEFINITIONS  # noqa: F401


def kernels(gpu_ops: pl.DataFrame) -> pl.DataFrame:
    return gpu_ops.filter(pl.col("kind") == "kernel")


def _kinds(gpu_ops: pl.DataFrame, kinds) -> pl.LazyFrame:
    """The ops of the given kinds, lazily: what follows reads only the columns it uses (no copy of every column)."""
    lf = gpu_ops.lazy()
    return lf if kinds is None else lf.filter(pl.col("kind").is_in(list(kinds)))


# --------------------------------------------------------------------------------------------------
# Launch delay
# --------------------------------------------------------------------------------------------------
def launch_stats(
    gpu_ops: pl.DataFrame,
    *,
    by=DEVICE,
    kinds=("kernel",),
    launch_delay_cutoff_ns: int = LAUNCH_DELAY_CUTOFF_NS,
    runtime_cutoff_ns: int = RUNTIME_CUTOFF_NS,
) -> pl.DataFrame:
    """Per group: op_count, with_launch (ops whose launch call is in the trace), launch delay mean /
    median / p90 / p99 / max (ns, over ops with a launch call), queue_count (ops with a non-null
    queue time), queue_median_ns, api_duration_median_ns, delay_outliers (launch delay >
    launch_delay_cutoff_ns), long_launch_calls (launch call longer than runtime_cutoff_ns),
    short_ops (op shorter than a launch call of its own; graph-replayed ops never count: see
    launch_call_stats)."""
    d = pl.col("launch_delay_ns")
    return (
        _kinds(gpu_ops, kinds)
        .group_by(list(by))
        .agg(
            pl.len().alias("op_count"),
            pl.col("launch_api").is_not_null().sum().alias("with_launch"),
            d.mean().alias("launch_delay_mean_ns"),
            d.median().alias("launch_delay_median_ns"),
            d.quantile(0.9, "nearest").alias("launch_delay_p90_ns"),
            d.quantile(0.99, "nearest").alias("launch_delay_p99_ns"),
            d.max().alias("launch_delay_max_ns"),
            pl.col("queue_ns").is_not_null().sum().alias("queue_count"),
            pl.col("queue_ns").median().alias("queue_median_ns"),
            pl.col("api_duration_ns").median().alias("api_duration_median_ns"),
            (d > launch_delay_cutoff_ns).sum().alias("delay_outliers"),
            (pl.col("api_duration_ns") > runtime_cutoff_ns).sum().alias("long_launch_calls"),
            # a graph replay's kernels share one launch call: none of them is "shorter than its
            # launch call"
            (
                (pl.col("duration_ns") < pl.col("api_duration_ns"))
                & ~pl.col("launch_api").is_in(GRAPH_LAUNCH_APIS)
            )
            .sum()
            .alias("short_ops"),
        )
        .sort(list(by))
        .collect()
    )


def launch_delay_outliers(
    gpu_ops: pl.DataFrame,
    *,
    cutoff_ns: int = LAUNCH_DELAY_CUTOFF_NS,
    kinds=("kernel",),
    limit: int | None = 100,
) -> pl.DataFrame:
    """Ops whose launch delay exceeds cutoff_ns, longest first."""
    out = (
        _kinds(gpu_ops, kinds)
        .filter(pl.col("launch_delay_ns") > cutoff_ns)
        .sort("launch_delay_ns", descending=True)
        .select(
            *STREAM,
            "name",
            "start_ns",
            "duration_ns",
            "launch_api",
            "api_start_ns",
            "api_end_ns",
            "launch_delay_ns",
            "queue_ns",
        )
    )
    return (out.head(limit) if limit else out).collect()


# --------------------------------------------------------------------------------------------------
# Busy time, idle fraction, gaps: one pass over ops sorted by start
# --------------------------------------------------------------------------------------------------
# Over the ops of a group sorted by start, let M(i) = the latest end among the ops before op i. Op i
# adds max(0, end_i - max(start_i, M(i))) to the union of the intervals (what it covers beyond
# everything before it), and a gap [M(i), start_i) precedes it when start_i > M(i). So busy time,
# gaps and merged intervals come from one sorted scan (a cumulative max), never from materialising
# the merged intervals and grouping them again.
def _sorted(ops: pl.DataFrame, by) -> pl.DataFrame:
    return ops.sort(*by, "start_ns")


def _narrow(gpu_ops: pl.DataFrame, by) -> pl.DataFrame:
    """The columns the interval scans need, sorted by (by..., start_ns): times and three flags
    (kernel, with its launch call, an NCCL kernel), never the names, so that a million-op trace
    sorts a small frame."""
    k = pl.col("kind") == "kernel"
    return _sorted(
        gpu_ops.select(
            *by,
            "start_ns",
            "end_ns",
            "api_start_ns",
            k.alias("_k"),
            (k & pl.col("launch_api").is_not_null()).alias("_l"),
            (k & pl.col("name").str.contains(_COMM)).alias("_c"),
        ),
        list(by),
    )


def _with_prev_end(s: pl.DataFrame, by) -> pl.DataFrame:
    """s sorted by (by..., start_ns) -> with `_prev_end` = latest end of the group's earlier ops
    (null: first). When the first and the last row are of the same group, s (sorted by group) is one
    group, and the scan needs no window: `over` costs about 11 ms against 2 ms for 174,240 ops of
    one stream."""
    by = list(by)
    prev_end = pl.col("end_ns").cum_max().shift(1)
    if s.height and all(s[0, c] == s[-1, c] for c in by):
        return s.with_columns(prev_end.alias("_prev_end"))
    return s.with_columns(prev_end.over(by).alias("_prev_end"))


_COVER = (pl.col("end_ns") - pl.max_horizontal("start_ns", "_prev_end")).clip(lower_bound=0)
_GAP = pl.col("_prev_end").is_not_null() & (pl.col("start_ns") > pl.col("_prev_end"))


def _busy(s: pl.DataFrame, by, alias: str = "busy_ns") -> pl.DataFrame:
    """Per group, the length of the union of the intervals of s (sorted by (by..., start_ns))."""
    by = list(by)
    return (
        _with_prev_end(s.select(*by, "start_ns", "end_ns"), by)
        .group_by(by)
        .agg(_COVER.sum().alias(alias))
    )


def _gaps_sorted(s: pl.DataFrame, by, min_gap_ns: int = 0) -> pl.DataFrame:
    by = list(by)
    return (
        _with_prev_end(s.select(*by, "start_ns", "end_ns"), by)
        .filter(_GAP)
        .select(*by, pl.col("_prev_end").alias("start_ns"), pl.col("start_ns").alias("end_ns"))
        .with_columns((pl.col("end_ns") - pl.col("start_ns")).alias("gap_ns"))
        .filter(pl.col("gap_ns") > min_gap_ns)
    )


def merge_intervals(ops: pl.DataFrame, by=DEVICE) -> pl.DataFrame:
    """Union of the [start_ns, end_ns) intervals per group -> (by..., start_ns, end_ns), sorted."""
    by = list(by)
    s = _with_prev_end(_sorted(ops.select(*by, "start_ns", "end_ns"), by), by)
    new = pl.col("_prev_end").is_null() | (pl.col("start_ns") > pl.col("_prev_end"))
    # sorted by group: ids never cross groups
    s = s.with_columns(new.cast(pl.Int64).cum_sum().alias("_iv"))
    return (
        s.group_by(*by, "_iv", maintain_order=True)
        .agg(pl.col("start_ns").first(), pl.col("end_ns").max())
        .drop("_iv")
    )


def _utilization_sorted(s: pl.DataFrame, by) -> pl.DataFrame:
    """utilization over _narrow(gpu_ops, by)."""
    by = list(by)
    counts = s.group_by(by).agg(
        pl.len().alias("op_count"),
        pl.col("_k").sum().alias("kernel_count"),
        pl.col("_l").sum().alias("kernels_with_launch"),
        pl.col("start_ns").min().alias("first_start_ns"),
        pl.col("end_ns").max().alias("last_end_ns"),
    )
    out = counts.join(_busy(s, by), on=by, how="left").with_columns(
        (pl.col("last_end_ns") - pl.col("first_start_ns")).alias("window_ns")
    )
    return out.with_columns(
        (pl.col("window_ns") - pl.col("busy_ns")).alias("idle_ns"),
        pl.when(pl.col("window_ns") > 0)
        .then(1.0 - pl.col("busy_ns") / pl.col("window_ns"))
        .otherwise(0.0)
        .alias("idle_fraction"),
    ).sort(by)


def utilization(gpu_ops: pl.DataFrame, by=DEVICE) -> pl.DataFrame:
    """Per group: op_count, kernel_count, kernels_with_launch, first_start_ns, last_end_ns,
    window_ns, busy_ns (union of op intervals), idle_ns = window - busy, idle_fraction = idle /
    window."""
    by = list(by)
    return _utilization_sorted(_narrow(gpu_ops, by), by)


def gaps(gpu_ops: pl.DataFrame, by=DEVICE, *, min_gap_ns: int = 0) -> pl.DataFrame:
    """Idle gaps between merged busy intervals per group: (by..., start_ns, end_ns, gap_ns), gap_ns > min_gap_ns."""
    by = list(by)
    return _gaps_sorted(_sorted(gpu_ops.select(*by, "start_ns", "end_ns"), by), by, min_gap_ns)


def stream_gaps(
    gpu_ops: pl.DataFrame,
    *,
    kernel_wait_threshold_ns: int = KERNEL_WAIT_THRESHOLD_NS,
    names: bool = True,
) -> pl.DataFrame:
    """Every idle gap before an op on its stream, with its HTA category (module docstring).

    Columns: rank, device, stream, start_ns (end of the stream's previous work), end_ns (op start),
    gap_ns, category, next_name (the op after the gap; left out with names=False), api_start_ns (its
    launch call start, null if unknown)."""
    s = gpu_ops.select(
        *STREAM,
        "start_ns",
        "end_ns",
        "api_start_ns",
        pl.int_range(pl.len(), dtype=pl.UInt32).alias("_row"),
    )
    s = _with_prev_end(_sorted(s, STREAM), STREAM)
    s = s.filter(_GAP).with_columns((pl.col("start_ns") - pl.col("_prev_end")).alias("gap_ns"))
    cat = (
        pl.when(pl.col("api_start_ns") > pl.col("_prev_end"))
        .then(pl.lit("host_wait"))
        .when(pl.col("gap_ns") < kernel_wait_threshold_ns)
        .then(pl.lit("kernel_wait"))
        .otherwise(pl.lit("other"))
    )
    out = s.select(
        *STREAM,
        pl.col("_prev_end").alias("start_ns"),
        pl.col("start_ns").alias("end_ns"),
        "gap_ns",
        cat.alias("category"),
        "api_start_ns",
        "_row",
    )
    if names:  # the names of the ops after the gaps only
        out = out.with_columns(gpu_ops["name"].gather(out["_row"]).alias("next_name"))
        return out.select(
            *STREAM, "start_ns", "end_ns", "gap_ns", "category", "next_name", "api_start_ns"
        )
    return out.drop("_row")


def idle_categories(
    gpu_ops: pl.DataFrame, *, kernel_wait_threshold_ns: int = KERNEL_WAIT_THRESHOLD_NS, by=STREAM
) -> pl.DataFrame:
    """Idle time per group and HTA category: idle_ns, gap_count, idle_ratio (share of the group's
    idle time). Every group gets the three categories (0 when absent), as HTA reports them."""
    return _idle_categories(
        gpu_ops,
        stream_gaps(gpu_ops, kernel_wait_threshold_ns=kernel_wait_threshold_ns, names=False),
        by,
    )


def _idle_categories(gpu_ops: pl.DataFrame, g: pl.DataFrame, by=STREAM) -> pl.DataFrame:
    by = list(by)
    groups = gpu_ops.select(by).unique()
    grid = groups.join(pl.DataFrame({"category": list(IDLE_CATEGORIES)}), how="cross")
    agg = g.group_by(*by, "category").agg(
        pl.col("gap_ns").sum().alias("idle_ns"), pl.len().alias("gap_count")
    )
    out = grid.join(agg, on=[*by, "category"], how="left").with_columns(
        pl.col("idle_ns").fill_null(0), pl.col("gap_count").fill_null(0).cast(pl.UInt32)
    )
    tot = pl.col("idle_ns").sum().over(by)
    return out.with_columns(
        pl.when(tot > 0).then(pl.col("idle_ns") / tot).otherwise(0.0).alias("idle_ratio")
    ).sort(*by, "category")


# --------------------------------------------------------------------------------------------------
# Launch-bound detection, temporal breakdown, per-kernel summary
# --------------------------------------------------------------------------------------------------
def device_idle(
    gpu_ops: pl.DataFrame, *, kernel_wait_threshold_ns: int = KERNEL_WAIT_THRESHOLD_NS, by=DEVICE
) -> pl.DataFrame:
    """Per device: its idle time (the gaps between its merged busy intervals, all streams together)
    by cause. host_wait_ns: gaps whose next op's launch call started after the device had gone idle
    (the host had not submitted it); kernel_wait_ns: the other gaps shorter than
    kernel_wait_threshold_ns (back-to-back work); other_idle_ns: the rest (work submitted but
    waiting: other streams, events, communication). They add up to the device's idle time, so no
    share of them can exceed the idle share (DEFINITIONS["device_idle"])."""
    return _device_idle(_narrow(gpu_ops, by), by, kernel_wait_threshold_ns)


def _device_idle(
    s: pl.DataFrame, by, kernel_wait_threshold_ns: int = KERNEL_WAIT_THRESHOLD_NS
) -> pl.DataFrame:
    by = list(by)
    g = _with_prev_end(s.select(*by, "start_ns", "end_ns", "api_start_ns"), by).filter(_GAP)
    gap = pl.col("start_ns") - pl.col("_prev_end")
    host = pl.col("api_start_ns").is_not_null() & (pl.col("api_start_ns") > pl.col("_prev_end"))
    short = ~host & (gap < kernel_wait_threshold_ns)
    out = (
        s.select(by)
        .unique()
        .join(
            g.group_by(by).agg(
                gap.filter(host).sum().alias("host_wait_ns"),
                gap.filter(short).sum().alias("kernel_wait_ns"),
                gap.filter(~host & ~short).sum().alias("other_idle_ns"),
                host.sum().alias("host_gaps"),
                short.sum().alias("short_gaps"),
                (~host & ~short).sum().alias("other_gaps"),
            ),
            on=by,
            how="left",
        )
    )
    return out.with_columns(
        pl.col(
            "host_wait_ns",
            "kernel_wait_ns",
            "other_idle_ns",
            "host_gaps",
            "short_gaps",
            "other_gaps",
        )
        .fill_null(0)
        .cast(pl.Int64)
    ).sort(by)


def launch_calls(gpu_ops: pl.DataFrame, by=DEVICE) -> pl.DataFrame:
    """One row per launch call that launched kernels (a graph replay is one call for all its
    kernels): by..., pid, correlation, launch_api, graph (a graph launch), kernel_count,
    api_start_ns, api_end_ns, api_duration_ns, first_start_ns, last_end_ns, gpu_ns (the kernels'
    durations summed, at most their span), short (the call's GPU work is shorter than the call: the
    host cannot keep the GPU busy issuing such calls)."""
    by = list(by)
    k = _kinds(gpu_ops, ("kernel",)).filter(pl.col("launch_api").is_not_null())
    calls = (
        k.group_by(*by, "pid", "correlation")
        .agg(
            pl.col("launch_api").first(),
            pl.len().alias("kernel_count"),
            pl.col("api_start_ns").first(),
            pl.col("api_end_ns").first(),
            pl.col("api_duration_ns").first(),
            pl.col("start_ns").min().alias("first_start_ns"),
            pl.col("end_ns").max().alias("last_end_ns"),
            pl.col("duration_ns").sum().alias("_sum"),
        )
        .collect()
    )
    return (
        calls.with_columns(
            pl.col("launch_api").is_in(GRAPH_LAUNCH_APIS).alias("graph"),
            pl.min_horizontal("_sum", pl.col("last_end_ns") - pl.col("first_start_ns")).alias(
                "gpu_ns"
            ),
        )
        .with_columns((pl.col("gpu_ns") < pl.col("api_duration_ns")).alias("short"))
        .drop("_sum")
        .sort(*by, "api_start_ns")
    )


def launch_call_stats(gpu_ops: pl.DataFrame, by=DEVICE) -> pl.DataFrame:
    """Per device, launch statistics per launch *call* (DEFINITIONS["launch_calls"]):
    launch_call_count, graph_launch_count, graph_kernel_count (kernels those replays ran),
    short_calls, short_call_share (calls whose GPU work is shorter than the call itself, of all
    calls), and the launch latency of the kernels launched by a call of their own: start - max(end
    of the call, end of the stream's earlier work), median and p90 (launch_latency_*_ns), with
    queued_kernels / queued_share: kernels whose stream was still busy when their call returned
    (they waited in the queue behind earlier GPU work: the host was ahead of the GPU)."""
    by = list(by)
    k = _kinds(gpu_ops, ("kernel",)).filter(pl.col("launch_api").is_not_null())
    graph = pl.col("launch_api").is_in(GRAPH_LAUNCH_APIS)
    # a kernel launched by a call of its own is that call (no grouping of a million rows); graph
    # replays are grouped
    own = (
        k.filter(~graph)
        .group_by(by)
        .agg(
            pl.len().alias("_n"),
            (pl.col("duration_ns") < pl.col("api_duration_ns")).sum().alias("_s"),
        )
        .collect()
    )
    gr = (
        launch_calls(gpu_ops.filter(pl.col("launch_api").is_in(GRAPH_LAUNCH_APIS)), by)
        .group_by(by)
        .agg(
            pl.len().alias("graph_launch_count"),
            pl.col("kernel_count").sum().alias("graph_kernel_count"),
            pl.col("short").sum().alias("_gs"),
        )
    )
    c = (
        own.join(gr, on=by, how="full", coalesce=True)
        .with_columns(
            pl.col("_n", "_s", "graph_launch_count", "graph_kernel_count", "_gs").fill_null(0)
        )
        .select(
            *by,
            (pl.col("_n") + pl.col("graph_launch_count")).alias("launch_call_count"),
            "graph_launch_count",
            "graph_kernel_count",
            (pl.col("_s") + pl.col("_gs")).alias("short_calls"),
        )
    )
    c = c.with_columns(
        pl.when(pl.col("launch_call_count") > 0)
        .then(pl.col("short_calls") / pl.col("launch_call_count"))
        .otherwise(None)
        .alias("short_call_share")
    )
    lat = _launch_latency(gpu_ops, by)
    return c.join(lat, on=by, how="full", coalesce=True).sort(by)


def _latency_ops(gpu_ops: pl.DataFrame) -> pl.DataFrame:
    """Kernels launched by a call of their own (not a graph replay), with _lat = start - max(end of
    the call, end of the stream's earlier work) and _queued = the stream was still busy when the
    call returned."""
    own = (
        (pl.col("kind") == "kernel")
        & pl.col("launch_api").is_not_null()
        & ~pl.col("launch_api").is_in(GRAPH_LAUNCH_APIS)
    )
    s = _with_prev_end(
        _sorted(
            gpu_ops.select(*STREAM, "start_ns", "end_ns", "api_end_ns", own.alias("_own")), STREAM
        ),
        STREAM,
    ).filter(pl.col("_own"))
    ready = pl.max_horizontal("api_end_ns", pl.col("_prev_end").fill_null(pl.col("api_end_ns")))
    return s.with_columns(
        (pl.col("start_ns") - ready).clip(lower_bound=0).alias("_lat"),
        (pl.col("_prev_end").fill_null(-(1 << 62)) > pl.col("api_end_ns")).alias("_queued"),
    )


_LATENCY_AGGS = (
    pl.len().alias("own_launch_kernels"),
    pl.col("_lat").median().alias("launch_latency_median_ns"),
    pl.col("_lat").quantile(0.9, "nearest").alias("launch_latency_p90_ns"),
    pl.col("_queued").sum().alias("queued_kernels"),
    pl.col("_queued").mean().alias("queued_share"),
)


def _launch_latency(gpu_ops: pl.DataFrame, by) -> pl.DataFrame:
    return _latency_ops(gpu_ops).group_by(list(by)).agg(*_LATENCY_AGGS)


def launch_bound(
    gpu_ops: pl.DataFrame,
    *,
    launch_floor_ns: float | None = None,
    short_share_min: float = 0.5,
    host_wait_min: float = 0.3,
    host_wait_partial: float = 0.1,
    by=DEVICE,
    kernel_wait_threshold_ns: int = KERNEL_WAIT_THRESHOLD_NS,
) -> pl.DataFrame:
    """Per group: kernel_count, kernels_with_launch, short_kernels and short_kernel_share (launch
    *calls* whose GPU work is shorter than the call, of all launch calls: a graph replay is one
    call, see `launch_call_stats`), window_ns, kernels_per_s (kernel_count / window),
    launch_floor_ns (the parameter: measured back-to-back launch time of an empty kernel),
    floor_kernels_per_s = 1e9 / launch_floor_ns, rate_vs_floor = kernels_per_s /
    floor_kernels_per_s, idle_fraction, host_wait_ns (the device's idle time waiting for the host:
    `device_idle`, never a sum over streams), host_wait_fraction = host_wait_ns / window_ns (at most
    idle_fraction), and the verdict

        "launch-bound"        short_kernel_share >= short_share_min and host_wait_fraction >= host_wait_min
        "partly launch-bound" short_kernel_share >= short_share_min and host_wait_fraction >= host_wait_partial
        "not launch-bound"    otherwise;  launch_bound = (verdict == "launch-bound")

    i.e. most launch calls take longer than the GPU work they submit, and the device spends a large
    part of its window waiting for the host to submit the next op."""
    s = _narrow(gpu_ops, by)
    return _launch_bound(
        gpu_ops,
        _utilization_sorted(s, by),
        _device_idle(s, by, kernel_wait_threshold_ns),
        launch_call_stats(gpu_ops, by),
        launch_floor_ns=launch_floor_ns,
        short_share_min=short_share_min,
        host_wait_min=host_wait_min,
        host_wait_partial=host_wait_partial,
        by=by,
    )


def _launch_bound(
    gpu_ops: pl.DataFrame,
    util: pl.DataFrame,
    dev_idle: pl.DataFrame,
    calls: pl.DataFrame,
    *,
    launch_floor_ns: float | None,
    short_share_min: float = 0.5,
    host_wait_min: float = 0.3,
    host_wait_partial: float = 0.1,
    by=DEVICE,
) -> pl.DataFrame:
    by = list(by)
    u = util.select(*by, "kernel_count", "kernels_with_launch", "window_ns", "idle_fraction")
    out = (
        u.join(dev_idle.select(*by, "host_wait_ns"), on=by, how="left")
        .join(
            calls.select(
                *by,
                pl.col("short_calls").alias("short_kernels"),
                pl.col("short_call_share").alias("short_kernel_share"),
            ),
            on=by,
            how="left",
        )
        .with_columns(pl.col("host_wait_ns").fill_null(0), pl.col("short_kernels").fill_null(0))
    )
    floor = float(launch_floor_ns) if launch_floor_ns else None
    out = out.with_columns(
        pl.when(pl.col("window_ns") > 0)
        .then(pl.col("kernel_count") * 1e9 / pl.col("window_ns"))
        .otherwise(None)
        .alias("kernels_per_s"),
        pl.when(pl.col("window_ns") > 0)
        .then(pl.col("host_wait_ns") / pl.col("window_ns"))
        .otherwise(0.0)
        .alias("host_wait_fraction"),
        pl.lit(floor, pl.Float64).alias("launch_floor_ns"),
        pl.lit(1e9 / floor if floor else None, pl.Float64).alias("floor_kernels_per_s"),
    ).with_columns(
        (pl.col("kernels_per_s") / pl.col("floor_kernels_per_s")).alias("rate_vs_floor"),
    )
    short = pl.col("short_kernel_share").fill_null(0.0) >= short_share_min
    verdict = (
        pl.when(short & (pl.col("host_wait_fraction") >= host_wait_min))
        .then(pl.lit("launch-bound"))
        .when(short & (pl.col("host_wait_fraction") >= host_wait_partial))
        .then(pl.lit("partly launch-bound"))
        .otherwise(pl.lit("not launch-bound"))
    )
    out = out.with_columns(verdict.alias("verdict")).with_columns(
        (pl.col("verdict") == "launch-bound").alias("launch_bound")
    )
    return out.sort(by)


def union_ns(ops: pl.DataFrame, by=DEVICE) -> pl.DataFrame:
    by = list(by)
    return _busy(_sorted(ops.select(*by, "start_ns", "end_ns"), by), by, "ns")


def temporal_breakdown(gpu_ops: pl.DataFrame, by=DEVICE) -> pl.DataFrame:
    """Per group: window_ns, compute_ns = |U(non-NCCL kernels)|, communication_ns = |U(all kernels)|
    - compute_ns, memcpy_ns = |U(all ops)| - |U(all kernels)| (memcpy + memset time not hidden under
    kernels), idle_ns = window_ns - |U(all ops)|, and each as a fraction of the window."""
    by = list(by)
    return _temporal_sorted(_narrow(gpu_ops, by), by)


def _temporal_sorted(s: pl.DataFrame, by, all_busy: pl.DataFrame | None = None) -> pl.DataFrame:
    """temporal_breakdown over _narrow(gpu_ops, by); all_busy: the groups' busy_ns when known."""
    by = list(by)
    k = s.filter(pl.col("_k"))
    comp = _busy(k.filter(~pl.col("_c")), by, "_c")
    allk = _busy(k, by, "_k")
    allo = (
        _busy(s, by, "_a")
        if all_busy is None
        else all_busy.select(*by, pl.col("busy_ns").alias("_a"))
    )
    win = s.group_by(by).agg((pl.col("end_ns").max() - pl.col("start_ns").min()).alias("window_ns"))
    out = (
        win.join(comp, on=by, how="left")
        .join(allk, on=by, how="left")
        .join(allo, on=by, how="left")
        .with_columns(pl.col("_c", "_k", "_a").fill_null(0))
    )
    out = out.select(
        *by,
        "window_ns",
        pl.col("_c").alias("compute_ns"),
        (pl.col("_k") - pl.col("_c")).alias("communication_ns"),
        (pl.col("_a") - pl.col("_k")).alias("memcpy_ns"),
        (pl.col("window_ns") - pl.col("_a")).alias("idle_ns"),
    )
    frac = [
        (pl.col(c) / pl.col("window_ns")).alias(c.replace("_ns", "_fraction"))
        for c in ("compute_ns", "communication_ns", "memcpy_ns", "idle_ns")
    ]
    return out.with_columns(frac).sort(by)


def kernel_summary(
    gpu_ops: pl.DataFrame,
    *,
    kinds=("kernel",),
    by=("name",),
    busy_ns: int | None = None,
    share: bool = True,
    overlapping: bool | None = True,
) -> pl.DataFrame:
    """Per kernel name: count, total_ns, mean_ns, median_ns, min_ns, max_ns, and busy_share = the
    time the kernel ran (the union of its own launches' intervals per device: two of its launches at
    once count once) / busy time of all GPU ops of the trace (union over each device, summed over
    devices; `busy_ns` when the caller has it; null with share=False): at most 1 by construction.
    Shares of different kernels that overlap can add up to more than
    1. overlapping=False (the caller knows no two kernels of a device overlap): the time a kernel
       ran is its total;
    None: the union only where a kernel's total exceeds the busy time (a share over 1 would follow),
    else the total.
    Sorted by total_ns, largest first."""
    if not share:
        busy_ns = 0
    elif busy_ns is None:
        busy_ns = int(union_ns(gpu_ops, DEVICE)["ns"].sum()) if gpu_ops.height else 0
    d = pl.col("duration_ns")
    out = (
        _kinds(gpu_ops, kinds)
        .group_by(list(by))
        .agg(
            pl.len().alias("count"),
            d.sum().alias("total_ns"),
            d.mean().alias("mean_ns"),
            d.median().alias("median_ns"),
            d.min().alias("min_ns"),
            d.max().alias("max_ns"),
        )
        .collect()
    )
    # only a name whose launches add up to more than the busy time needs it
    if overlapping is None:
        overlapping = bool(busy_ns) and out.height > 0 and int(out["total_ns"].max()) > busy_ns
    if busy_ns and not overlapping:
        out = out.with_columns(
            (pl.col("total_ns") / busy_ns).clip(upper_bound=1.0).alias("busy_share")
        )
    elif busy_ns:
        # the time each name ran: the union of its own launches per device, from one sort of integer
        # keys (the names' codes, rank and device packed in one Int64)
        k = _kinds(gpu_ops, kinds).select(*by, "rank", "device", "start_ns", "end_ns").collect()
        code = pl.lit(0, pl.Int64)
        for c in by:
            code = code * (1 << 20) + pl.col(c).cast(pl.String).cast(
                pl.Categorical
            ).to_physical().cast(pl.Int64)
        k = k.with_columns(
            (
                code * (1 << 24)
                + pl.col("rank").cast(pl.Int64) * (1 << 12)
                + pl.col("device").cast(pl.Int64)
            ).alias("_g")
        ).sort("_g", "start_ns")
        ran = (
            k.with_columns(pl.col("end_ns").cum_max().shift(1).over("_g").alias("_pe"))
            .group_by(list(by))
            .agg(
                (pl.col("end_ns") - pl.max_horizontal("start_ns", "_pe"))
                .clip(lower_bound=0)
                .sum()
                .alias("_ran")
            )
        )
        out = (
            out.join(ran, on=list(by), how="left")
            .with_columns((pl.col("_ran") / busy_ns).clip(upper_bound=1.0).alias("busy_share"))
            .drop("_ran")
        )
    else:
        out = out.with_columns(pl.lit(None, pl.Float64).alias("busy_share"))
    if "name" in by:
        out = out.with_columns(kernel_origin(out["name"]).alias("origin"))
    return out.sort(["total_ns", *by], descending=[True] + [False] * len(by))


# --------------------------------------------------------------------------------------------------
# The summary of a trace: per device and for the whole run, computed once for every surface
# --------------------------------------------------------------------------------------------------
@dataclass
class TimelineSummary:
    """What the CLI, the Timeline page and its export show of a trace (see `summarize`), computed once."""

    devices: pl.DataFrame  # one row per (rank, device): DEVICE_SUMMARY_COLUMNS
    run: dict  # the whole run: RUN_SUMMARY_KEYS
    launch_floor_ns: float | None
    launch: pl.DataFrame | None = None  # launch_stats per device
    idle_categories: pl.DataFrame | None = None  # idle_categories per stream (HTA's definition)
    temporal: pl.DataFrame | None = None  # temporal_breakdown per device
    launch_bound: pl.DataFrame | None = None  # launch_bound per device
    kernels: pl.DataFrame | None = None  # kernel_summary (every kernel name)
    # device_idle per device (the causes of the device's idle time)
    device_idle: pl.DataFrame | None = None
    launch_calls: pl.DataFrame | None = None  # launch_call_stats per device
    steps: object | None = None  # analyzers.steps.TraceSteps
    integrity: list | None = None  # analyzers.integrity.check_trace
    # analyzers.remedy.step_remedy of the main rank's steady step
    remedy: dict | None = None


DEVICE_SUMMARY_COLUMNS = (
    "rank",
    "device",
    "kernel_count",
    "kernels_with_launch",
    "op_count",
    "busy_ns",
    "window_ns",
    "idle_fraction",
    "launch_delay_median_ns",
    "launch_delay_p90_ns",
    "launch_delay_max_ns",
    "queue_count",
    "queue_median_ns",
    "delay_outliers",
    "launch_call_count",
    "graph_launch_count",
    "graph_kernel_count",
    "launch_latency_median_ns",
    "launch_latency_p90_ns",
    "queued_share",
    "short_kernel_share",
    "host_wait_ns",
    "kernel_wait_ns",
    "other_idle_ns",
    "host_wait_fraction",
    "kernels_per_s",
    "verdict",
    "bound",
    "bound_evidence",
    "run_ns",
)
RUN_SUMMARY_KEYS = (
    "kernel_count",
    "kernels_with_launch",
    "gpu_op_count",
    "memcpy_count",
    "memset_count",
    "gpu_busy_ns",
    "gpu_window_ns",
    "gpu_idle_fraction",
    "wall_window_ns",
    "launch_delay_median_ns",
    "launch_delay_p90_ns",
    "launch_call_count",
    "graph_launch_count",
    "graph_kernel_count",
    "launch_latency_median_ns",
    "device_count",
    "run_ns",
    "slowest_rank",
    "delay_outliers",
    "step_median_ns",
    "step_p90_ns",
    "abstains",
)


def summarize(
    gpu_ops: pl.DataFrame,
    api_calls: pl.DataFrame | None = None,
    *,
    launch_floor_ns: float | None = None,
    cpu_ops: pl.DataFrame | None = None,
    nvtx: pl.DataFrame | None = None,
    step_pattern: str | None = None,
    profiler_ns_per_event: float | None = None,
) -> TimelineSummary:
    """Per device (rank, device): counts, busy time (union of op intervals), window, idle fraction,
    launch-delay median / p90 / max (HTA's definition, over kernels with a launch call of their
    own), queue time, launch calls (a graph replay is one), launch latency and the share of kernels
    queued behind earlier GPU work (`launch_call_stats`), the device's idle time by cause
    (`device_idle`), the launch-bound evidence and verdict (`launch_bound`), where its time goes
    (`bound`, `bound_evidence`: `bound_verdict`, abstaining when the trace fails a blocking
    integrity check) and its rank's run time (`run_spans`). For the whole run: the same counts, busy
    and window summed over the devices, idle fraction = 1 - busy / window of those sums, the
    launch-delay median / p90 over all kernels, the run time of the slowest rank, and the
    steady-state step time of the first rank with steps. Also the per-device launch statistics,
    per-stream idle categories (HTA's), temporal breakdown, per-kernel summary, steps
    (analyzers.steps) and integrity checks (analyzers.integrity). The one place these numbers are
    computed: the ops are sorted once per device and once per stream, and every interval quantity
    comes from those scans."""
    from analyzers.integrity import abstain_reason, check_trace
    from analyzers.remedy import trace_remedy
    from analyzers.steps import trace_steps, warmup_note

    dev_sorted = _narrow(gpu_ops, DEVICE)
    util = _utilization_sorted(dev_sorted, DEVICE)
    launch = launch_stats(gpu_ops)
    stream_idle = _idle_categories(gpu_ops, stream_gaps(gpu_ops, names=False), STREAM)
    dev_idle = _device_idle(dev_sorted, DEVICE)
    calls = launch_call_stats(gpu_ops)
    lb = _launch_bound(gpu_ops, util, dev_idle, calls, launch_floor_ns=launch_floor_ns)
    temporal = _temporal_sorted(dev_sorted, DEVICE, util)
    del dev_sorted
    spans = (
        run_spans(gpu_ops, api_calls)
        if gpu_ops.height
        else pl.DataFrame(
            schema={"rank": pl.Int32, "first_ns": pl.Int64, "last_ns": pl.Int64, "run_ns": pl.Int64}
        )
    )
    steps = trace_steps(
        gpu_ops,
        api_calls,
        cpu_ops,
        nvtx,
        pattern=step_pattern,
        profiler_ns_per_event=profiler_ns_per_event,
    )
    integrity = check_trace(
        gpu_ops, api_calls, cpu_ops, steps.steps if steps.steps.height else None
    )
    abstain = abstain_reason(integrity)
    call_cols = [
        "launch_call_count",
        "graph_launch_count",
        "graph_kernel_count",
        "launch_latency_median_ns",
        "launch_latency_p90_ns",
        "queued_share",
    ]
    devices = (
        util.join(
            launch.select(
                *DEVICE,
                "launch_delay_median_ns",
                "launch_delay_p90_ns",
                "launch_delay_max_ns",
                "queue_count",
                "queue_median_ns",
                "delay_outliers",
            ),
            on=list(DEVICE),
            how="left",
        )
        .join(calls.select(*DEVICE, *call_cols), on=list(DEVICE), how="left")
        .join(
            dev_idle.select(*DEVICE, "kernel_wait_ns", "other_idle_ns", "short_gaps"),
            on=list(DEVICE),
            how="left",
        )
        .join(
            lb.select(
                *DEVICE,
                "short_kernel_share",
                "host_wait_ns",
                "host_wait_fraction",
                "kernels_per_s",
                "verdict",
            ),
            on=list(DEVICE),
            how="left",
        )
        .join(spans.select("rank", "run_ns"), on="rank", how="left")
    )
    devices = devices.with_columns(
        pl.col("launch_call_count", "graph_launch_count", "graph_kernel_count")
        .fill_null(0)
        .cast(pl.Int64)
    )
    verdicts = []
    for (i, h, sh, win, run_ns), facts in zip(
        devices.select(
            "idle_fraction", "host_wait_fraction", "short_kernel_share", "window_ns", "run_ns"
        ).iter_rows(),
        trace_facts(gpu_ops, api_calls, devices, _COMM),
    ):
        v, e = bound_verdict(i, h, sh, facts, abstain)
        if run_ns and win is not None and run_ns > 1.1 * win and not abstain:
            e += (
                f" The rank's run (host calls included) is {run_ns / 1e6:,.3f} ms, its GPU window "
                f"{win / 1e6:,.3f} ms: for {(run_ns - win) / 1e6:,.3f} ms the host worked with no "
                "GPU op running or queued (before the first or after the last one)."
            )
        verdicts.append((v, e))
    verdicts = [
        (v, e + warmup_note(steps, r, w))
        for (v, e), r, w in zip(verdicts, devices["rank"].to_list(), devices["window_ns"].to_list())
    ]
    devices = devices.with_columns(
        pl.Series("bound", [v for v, _ in verdicts], dtype=pl.String),
        pl.Series("bound_evidence", [e for _, e in verdicts], dtype=pl.String),
    )
    # short_gaps: in device_idle
    devices = devices.select(DEVICE_SUMMARY_COLUMNS).sort(list(DEVICE))
    k = _kinds(gpu_ops, ("kernel",)).select("launch_delay_ns", "launch_api").collect()
    d = k["launch_delay_ns"].drop_nulls()
    busy = int(util["busy_ns"].sum()) if util.height else 0
    window = int(util["window_ns"].sum()) if util.height else 0
    lat = _latency_ops(gpu_ops).select(*_LATENCY_AGGS)
    main = steps.main or {}
    run = {
        "kernel_count": k.height,
        "kernels_with_launch": int(k["launch_api"].is_not_null().sum()),
        "gpu_op_count": gpu_ops.height,
        "memcpy_count": int((gpu_ops["kind"] == "memcpy").sum()),
        "memset_count": int((gpu_ops["kind"] == "memset").sum()),
        "gpu_busy_ns": busy,
        "gpu_window_ns": window,
        "gpu_idle_fraction": (1.0 - busy / window) if window else 0.0,
        "wall_window_ns": int(gpu_ops["end_ns"].max() - gpu_ops["start_ns"].min())
        if gpu_ops.height
        else 0,
        "launch_delay_median_ns": float(d.median()) if d.len() else None,
        "launch_delay_p90_ns": float(d.quantile(0.9, "nearest")) if d.len() else None,
        "launch_call_count": int(devices["launch_call_count"].sum()) if devices.height else 0,
        "graph_launch_count": int(devices["graph_launch_count"].sum()) if devices.height else 0,
        "graph_kernel_count": int(devices["graph_kernel_count"].sum()) if devices.height else 0,
        "launch_latency_median_ns": lat["launch_latency_median_ns"][0] if lat.height else None,
        "device_count": devices.height,
        "run_ns": int(spans["run_ns"].max()) if spans.height else 0,
        "slowest_rank": int(spans.sort("run_ns", descending=True)["rank"][0])
        if spans.height
        else None,
        "delay_outliers": int((d > LAUNCH_DELAY_CUTOFF_NS).sum()) if d.len() else 0,
        "step_median_ns": main.get("step_median_ns"),
        "step_p90_ns": main.get("step_p90_ns"),
        "abstains": abstain,
    }
    kernels = kernel_summary(gpu_ops, busy_ns=busy, overlapping=None)
    return TimelineSummary(
        devices,
        run,
        launch_floor_ns,
        launch=launch,
        idle_categories=stream_idle,
        temporal=temporal,
        launch_bound=lb,
        kernels=kernels,
        device_idle=dev_idle,
        launch_calls=calls,
        steps=steps,
        integrity=integrity,
        remedy=trace_remedy(main, devices, kernels),
    )
