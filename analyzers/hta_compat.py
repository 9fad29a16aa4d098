"""HTA-comparable statistics of a trace (`kernelscope analyze TRACE --compat hta`), next to
Kernelscope's own.

More: docs/architecture.md, *analyzers.hta_compat*.
"""

from __future__ import annotations

import polars as pl

from analyzers.timeline import summarize

HTA_LAUNCH_APIS = ("cudaLaunchKernel", "cudaLaunchKernelExC")
HTA_MEMORY_APIS = ("cudaMemcpyAsync", "cudaMemsetAsync")
HTA_KERNEL_WAIT_US = 30  # consecutive_kernel_delay, compared with µs times
HTA_RUNTIME_CUTOFF_US = 50
HTA_LAUNCH_DELAY_CUTOFF_US = 100


def hta_round(gpu_ops: pl.DataFrame, origin_ns: int = 0) -> pl.DataFrame:
    """gpu_ops with HTA's µs times: ts_us, end_us, dur_us of the op and api_ts_us, api_dur_us of its
    launch call (origin_ns: the trace's time origin, baseTimeNanoseconds, so the rounding happens on
    the values as written)."""

    def up(c):  # ceil((x - origin) / 1000) in integers
        return -((-(pl.col(c) - origin_ns)) // 1000)

    def down(c):
        return (pl.col(c) - origin_ns) // 1000

    return gpu_ops.with_columns(
        up("start_ns").alias("ts_us"),
        down("end_ns").alias("end_us"),
        up("api_start_ns").alias("api_ts_us"),
        down("api_end_ns").alias("api_end_us"),
    ).with_columns(
        (pl.col("end_us") - pl.col("ts_us")).alias("dur_us"),
        (pl.col("api_end_us") - pl.col("api_ts_us")).alias("api_dur_us"),
    )


def hta_launch_stats(
    gpu_ops: pl.DataFrame, origin_ns: int = 0, include_memory_events: bool = True
) -> pl.DataFrame:
    """Per rank, as HTA's get_cuda_kernel_launch_stats: ops (kernels, memcpy, memset) joined to a
    launch call of HTA's list; count, launch delay median / mean / max [µs], cpu (launch call)
    duration median [µs], outliers (cpu_duration > 50 µs, launch_delay > 100 µs), short ops
    (gpu_duration < cpu_duration)."""
    apis = HTA_LAUNCH_APIS + (HTA_MEMORY_APIS if include_memory_events else ())
    r = hta_round(gpu_ops.filter(pl.col("launch_api").is_in(list(apis))), origin_ns)
    d = (pl.col("ts_us") - pl.col("api_ts_us") - pl.col("api_dur_us")).clip(lower_bound=0)
    return (
        r.with_columns(d.alias("launch_delay_us"))
        .group_by("rank")
        .agg(
            pl.len().alias("ops"),
            (pl.col("kind") == "kernel").sum().alias("kernels"),
            pl.col("launch_delay_us").median().alias("launch_delay_median_us"),
            pl.col("launch_delay_us").mean().alias("launch_delay_mean_us"),
            pl.col("launch_delay_us").max().alias("launch_delay_max_us"),
            pl.col("api_dur_us").median().alias("cpu_duration_median_us"),
            (pl.col("api_dur_us") > HTA_RUNTIME_CUTOFF_US).sum().alias("long_launch_calls"),
            (pl.col("launch_delay_us") > HTA_LAUNCH_DELAY_CUTOFF_US).sum().alias("delay_outliers"),
            (pl.col("dur_us") < pl.col("api_dur_us")).sum().alias("short_ops"),
        )
        .sort("rank")
    )


def _union_us(r: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    s = r.select(*by, pl.col("ts_us").alias("s"), pl.col("end_us").alias("e")).sort(*by, "s")
    prev = pl.col("e").cum_max().shift(1).over(by)
    s = s.with_columns(
        ((pl.col("s") > prev) | prev.is_null()).cast(pl.Int64).cum_sum().over(by).alias("_iv")
    )
    return (
        s.group_by(*by, "_iv")
        .agg(pl.col("s").min(), pl.col("e").max())
        .group_by(by)
        .agg((pl.col("e") - pl.col("s")).clip(lower_bound=0).sum().alias("busy_us"))
    )


def hta_temporal(gpu_ops: pl.DataFrame, origin_ns: int = 0) -> pl.DataFrame:
    """Per rank, as HTA's temporal breakdown: kernel_time_us = last end - first start over the
    rank's GPU ops (all devices and streams), idle_time_us = kernel_time_us - |union|, idle
    fraction."""
    r = hta_round(gpu_ops, origin_ns)
    win = r.group_by("rank").agg(
        (pl.col("end_us").max() - pl.col("ts_us").min()).alias("kernel_time_us")
    )
    return (
        win.join(_union_us(r, ["rank"]), on="rank", how="left")
        .with_columns((pl.col("kernel_time_us") - pl.col("busy_us")).alias("idle_time_us"))
        .with_columns(
            pl.when(pl.col("kernel_time_us") > 0)
            .then(pl.col("idle_time_us") / pl.col("kernel_time_us"))
            .otherwise(0.0)
            .alias("idle_fraction")
        )
        .sort("rank")
    )


def hta_idle_breakdown(gpu_ops: pl.DataFrame, origin_ns: int = 0) -> pl.DataFrame:
    """Per (rank, stream, category), as HTA's get_idle_time_breakdown: idle_time_us and its ratio on the stream."""
    r = hta_round(gpu_ops, origin_ns).sort("rank", "stream", "ts_us")
    prev = pl.col("end_us").shift(1).over(["rank", "stream"])
    r = (
        r.with_columns(prev.alias("_prev"))
        .filter(pl.col("_prev").is_not_null())
        .with_columns((pl.col("ts_us") - pl.col("_prev")).alias("gap_us"))
    )
    cat = (
        pl.when(pl.col("api_ts_us") > pl.col("_prev"))
        .then(pl.lit("host_wait"))
        .when(pl.col("gap_us") < HTA_KERNEL_WAIT_US)
        .then(pl.lit("kernel_wait"))
        .otherwise(pl.lit("other"))
    )
    out = (
        r.with_columns(cat.alias("category"))
        .group_by("rank", "stream", "category")
        .agg(pl.col("gap_us").sum().alias("idle_time_us"))
    )
    tot = pl.col("idle_time_us").sum().over(["rank", "stream"])
    return out.with_columns(
        pl.when(tot != 0).then(pl.col("idle_time_us") / tot).alias("idle_time_ratio")
    ).sort("rank", "stream", "category")


def compare(gpu_ops: pl.DataFrame, origin_ns: int = 0) -> list[dict]:
    """Per rank: HTA's launch statistics and idle fraction next to Kernelscope's, and what makes
    them differ: the ops HTA leaves out (by reason) and the effect of its µs rounding (HTA's
    definition on Kernelscope's op set at ns resolution vs rounded)."""
    ours = summarize(gpu_ops)
    dev = ours.devices
    launch = {r["rank"]: r for r in hta_launch_stats(gpu_ops, origin_ns).iter_rows(named=True)}
    temporal = {r["rank"]: r for r in hta_temporal(gpu_ops, origin_ns).iter_rows(named=True)}
    out = []
    for rank in sorted(set(gpu_ops["rank"].drop_nulls().to_list())):
        g = gpu_ops.filter(pl.col("rank") == rank)
        k = g.filter(pl.col("kind") == "kernel")
        apis = list(HTA_LAUNCH_APIS + HTA_MEMORY_APIS)
        left_out = {
            "no launch call in the trace": int(k["launch_api"].is_null().sum()),
            "graph launch": int(k["graph_launch_correlation"].is_not_null().sum()),
            "launched by another call (cuLaunchKernel, HIP ...)": int(
                (
                    k["launch_api"].is_not_null()
                    & k["graph_launch_correlation"].is_null()
                    & ~k["launch_api"].is_in(apis)
                ).sum()
            ),
        }
        d = dev.filter(pl.col("rank") == rank)
        busy, window = int(d["busy_ns"].sum()), int(d["window_ns"].sum())
        delays = k["launch_delay_ns"].drop_nulls()
        # HTA's join at ns resolution: isolates the rounding from the choice of ops
        joined = g.filter(pl.col("launch_api").is_in(apis))
        raw = (joined["start_ns"] - joined["api_end_ns"]).clip(lower_bound=0)
        h, t = launch.get(rank, {}), temporal.get(rank, {})
        out.append(
            {
                "rank": rank,
                "hta": {
                    "ops_with_launch": h.get("ops", 0),
                    "kernels_with_launch": h.get("kernels", 0),
                    "launch_delay_median_us": h.get("launch_delay_median_us"),
                    "launch_delay_mean_us": h.get("launch_delay_mean_us"),
                    "cpu_duration_median_us": h.get("cpu_duration_median_us"),
                    "delay_outliers": h.get("delay_outliers", 0),
                    "long_launch_calls": h.get("long_launch_calls", 0),
                    "short_ops": h.get("short_ops", 0),
                    "kernel_time_us": t.get("kernel_time_us"),
                    "idle_time_us": t.get("idle_time_us"),
                    "idle_fraction": t.get("idle_fraction"),
                },
                "kernelscope": {
                    "kernels": k.height,
                    "kernels_with_launch": int(k["launch_api"].is_not_null().sum()),
                    "launch_delay_median_us": float(delays.median()) / 1e3
                    if delays.len()
                    else None,
                    "busy_us": busy / 1e3,
                    "window_us": window / 1e3,
                    "idle_fraction": (1 - busy / window) if window else 0.0,
                },
                "difference": {
                    "kernels_left_out_by_hta": left_out,
                    "hta_definition_at_ns_launch_delay_median_us": float(raw.median()) / 1e3
                    if raw.len()
                    else None,
                    "rounding_effect_on_median_us": (
                        h["launch_delay_median_us"] - float(raw.median()) / 1e3
                    )
                    if raw.len() and h.get("launch_delay_median_us") is not None
                    else None,
                    "idle_fraction_hta_minus_kernelscope": (
                        t["idle_fraction"] - (1 - busy / window)
                    )
                    if window and t.get("idle_fraction") is not None
                    else None,
                },
            }
        )
    return out
