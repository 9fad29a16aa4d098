"""Across the ranks of a distributed job: iteration times, the straggler of each iteration and its
cause, collectives with their exposed time, from the ranks' small summaries
(analyzers.distributed.RankSummary).

`combine(summaries, threshold=0.02) -> MultiRank`. Iterations are matched across ranks by their step
number; only durations on each rank's own clock are compared, so ranks recorded on different hosts
need no clock alignment.

More: docs/architecture.md, *analyzers.stragglers*.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import math
from bisect import bisect_right

import polars as pl

from analyzers.distributed import (
    CAUSES,
    COLLECTIVE_SCHEMA,
    COMPONENTS,
    EVENT_SCHEMA,
    STEP_SCHEMA,
    WHOLE_TRACE_STEP,
    RankSummary,
)

STRAGGLER_THRESHOLD = 0.02
SYNC_ABS_NS = 20_000  # ranks leave a synchronising collective within 20 µs of each other
SYNC_REL = 0.05  # ... or within 5 % of its median duration
OWN_COMPONENTS = ("compute_ns", "memcpy_ns", "host_wait_ns", "idle_ns")
HISTOGRAM_BINS = 20

DEFINITIONS = {
    "iteration": "an annotation range named like the step pattern (ProfilerStep#N, or NVTX 'step "
    "N'); iterations are matched across ranks by N; without such ranges a rank's whole GPU window "
    "is one iteration (-1)",
    "step_ns": "the iteration's range on the rank's own clock",
    "compute_ns": "union of non-collective kernels within the iteration",
    "comm_ns": "union of collective (NCCL) kernels within the iteration",
    "exposed_comm_ns": "union of all kernels − union of compute kernels: communication not "
    "overlapped with compute",
    "overlapped_comm_ns": "comm − exposed: collective time under compute kernels",
    "memcpy_ns": "union of all GPU ops − union of kernels: copies and memsets not under a kernel",
    "host_wait_ns": "GPU idle in gaps the host caused (the next op's launch call began after the "
    "GPU went idle)",
    "idle_ns": "the rest of the GPU idle time",
    "own_ns": "step − exposed communication: the rank's own work",
    "wait_ns": "collective time spent waiting for later ranks: per collective instance (k-th "
    "collective of a kind in the iteration), the kernel's duration − the shortest duration of that "
    "instance over the ranks",
    "caused_wait_ns": "the others' mean wait at the instances this rank arrived at last",
    "overlap_fraction": "overlapped / comm over the rank's GPU window (HTA's comm-comp overlap)",
    "job_ns": "the iteration's time: its longest step over the ranks",
    "straggler": "the rank with the most caused wait when that exceeds threshold × median step; "
    "without shared collectives the slowest rank when its step exceeds the median by that much; "
    "else none. Cause: its component furthest above the component's median",
}


@dataclass
class MultiRank:
    """The cross-rank view of a distributed job (module docstring)."""

    ranks: pl.DataFrame  # one row per rank (RANK_COLUMNS)
    # one row per (rank, iteration): analyzers.distributed.STEP_SCHEMA
    rank_steps: pl.DataFrame
    iterations: pl.DataFrame  # one row per iteration: job time, straggler, cause
    distribution: dict  # iteration-time statistics and histogram
    collectives: pl.DataFrame  # per kind and size bucket, over all ranks
    rank_collectives: pl.DataFrame  # the same per rank
    devices: pl.DataFrame  # analyzers.timeline.summarize rows of every rank
    top_kernels: pl.DataFrame  # name, ranks, count, total_ns, min_ns, max_ns over all ranks
    threshold: float
    step_patterns: list = field(default_factory=list)
    problems: list = field(default_factory=list)
    # collective instances: how many, how many synchronising
    sync: dict = field(default_factory=dict)


# The statistics below are numpy's (np.median, np.quantile(method="nearest"), np.mean, np.std,
# np.histogram), written for the short lists of per-iteration values they see, value for value: a
# short command then need not import numpy (0.07-0.1 s). tests/analyzers/test_stragglers_stats.py
# compares them with numpy's, bit for bit.
def _median(x) -> float:
    """np.median of a list of numbers (NaN when one is NaN or the list is empty)."""
    a = [float(v) for v in x]
    if not a or any(math.isnan(v) for v in a):
        return float("nan")
    a.sort()
    n, m = len(a), len(a) // 2
    return a[m] if n % 2 else (a[m - 1] + a[m]) / 2


def _pairwise_sum(a: list[float], lo: int, n: int) -> float:
    """numpy's pairwise summation of a[lo:lo+n] (its float add reduction: eight partial sums in blocks of 128)."""
    if n < 8:
        res = -0.0
        for i in range(lo, lo + n):
            res += a[i]
        return res
    if n <= 128:
        r = a[lo : lo + 8]
        m = n - n % 8
        for i in range(lo + 8, lo + m, 8):
            for j in range(8):
                r[j] += a[i + j]
        res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
        for i in range(lo + m, lo + n):
            res += a[i]
        return res
    n2 = n // 2
    n2 -= n2 % 8
    return _pairwise_sum(a, lo, n2) + _pairwise_sum(a, lo + n2, n - n2)


def _sum(a: list[float]) -> float:
    return 0.0 + _pairwise_sum(a, 0, len(a))


def _stats(x) -> dict:
    """Count, min, p10/median/p90/p99 (the nearest rank, as np.quantile(method="nearest")), max,
    mean, population standard deviation and coefficient of variation of a list of numbers (ns)."""
    a = [float(v) for v in x]
    if not a:
        return {"count": 0}
    n = len(a)
    srt = sorted(a)
    q = lambda p: srt[round((n - 1) * p)]  # noqa: E731   round half to even, as np.around
    mean = _sum(a) / n
    std = math.sqrt(_sum([(v - mean) * (v - mean) for v in a]) / n)
    return {
        "count": n,
        "min_ns": srt[0],
        "p10_ns": q(0.1),
        "median_ns": q(0.5),
        "p90_ns": q(0.9),
        "p99_ns": q(0.99),
        "max_ns": srt[-1],
        "mean_ns": mean,
        "std_ns": std,
        "cv": std / mean if mean else None,
    }


def _histogram(x, bins: int = HISTOGRAM_BINS) -> list[dict]:
    """np.histogram(x, bins, range=(min, max)): equal bins whose edges are np.linspace's, each
    holding lo <= v < hi (the last one its upper edge too)."""
    a = [float(v) for v in x]
    if not a:
        return []
    lo, hi = min(a), max(a)
    if hi <= lo:
        return [{"lo_ns": lo, "hi_ns": hi, "count": len(a)}]
    step = (hi - lo) / bins
    edges = [(i * step if step else i / bins * (hi - lo)) + lo for i in range(bins)] + [hi]
    counts = [0] * bins
    for v in a:
        counts[min(bisect_right(edges, v) - 1, bins - 1)] += 1
    return [{"lo_ns": edges[i], "hi_ns": edges[i + 1], "count": c} for i, c in enumerate(counts)]


def _argmax(x: list[float]) -> int:
    """The index of the first largest value (np.argmax)."""
    return max(range(len(x)), key=x.__getitem__)


def instances(events: pl.DataFrame) -> pl.DataFrame:
    """One row per collective instance seen on two ranks or more: n (ranks), min_ns (its shortest
    kernel), last_rank (the rank with the shortest: the last to arrive), caused_ns (the others' mean
    wait), exit_spread_ns (how far apart the ranks left it once each rank's clock offset is removed)
    and synchronising (exit_spread_ns <= max(SYNC_ABS_NS, SYNC_REL × its median duration): the ranks
    left it together, so durations differ by waits)."""
    keys = ["step", "kind", "occurrence"]
    e = events.with_columns((pl.col("start_ns") + pl.col("duration_ns")).alias("end_ns"))
    e = e.join(
        e.group_by(keys).agg(pl.len().alias("n"), pl.col("end_ns").median().alias("_med_end")),
        on=keys,
    ).filter(pl.col("n") >= 2)
    off = clock_offsets(e)
    e = e.join(off, on="rank", how="left").with_columns(
        (pl.col("end_ns") - pl.col("clock_offset_ns")).alias("_end")
    )
    return (
        e.sort("duration_ns", "rank")
        .group_by(keys, maintain_order=True)
        .agg(
            pl.len().alias("n"),
            pl.col("duration_ns").first().alias("min_ns"),
            pl.col("rank").first().alias("last_rank"),
            pl.col("duration_ns").sum().alias("_sum"),
            pl.col("duration_ns").median().alias("median_ns"),
            (pl.col("_end").max() - pl.col("_end").min()).alias("exit_spread_ns"),
        )
        .with_columns(
            ((pl.col("_sum") - pl.col("n") * pl.col("min_ns")) / (pl.col("n") - 1)).alias(
                "caused_ns"
            ),
            (
                pl.col("exit_spread_ns")
                <= pl.max_horizontal(pl.lit(SYNC_ABS_NS), SYNC_REL * pl.col("median_ns"))
            ).alias("synchronising"),
        )
        .drop("_sum")
        .sort(keys)
    )


def clock_offsets(e: pl.DataFrame) -> pl.DataFrame:
    """Each rank's clock offset: the median, over the instances it shares, of how much later it left
    them than the instance's median exit (e needs end_ns and _med_end). 0 on one host; the skew
    between hosts otherwise."""
    return (
        e.with_columns((pl.col("end_ns") - pl.col("_med_end")).alias("_d"))
        .group_by("rank")
        .agg(pl.col("_d").median().round().cast(pl.Int64).alias("clock_offset_ns"))
    )


def waits(events: pl.DataFrame, inst: pl.DataFrame | None = None) -> pl.DataFrame:
    """Each rank's row of every synchronising instance (see `instances`) with wait_ns = its duration
    − the instance's shortest, last_rank and caused_ns."""
    keys = ["step", "kind", "occurrence"]
    inst = (
        (instances(events) if inst is None else inst)
        .filter(pl.col("synchronising"))
        .select(*keys, "min_ns", "last_rank", "caused_ns")
    )
    return events.join(inst, on=keys, how="inner").with_columns(
        (pl.col("duration_ns") - pl.col("min_ns")).alias("wait_ns")
    )


def wait_columns(
    rank_steps: pl.DataFrame, events: pl.DataFrame, inst: pl.DataFrame | None = None
) -> pl.DataFrame:
    """rank_steps with wait_ns (the rank's waits in the iteration) and caused_wait_ns (blame it
    received); both null in iterations without a synchronising instance."""
    w = waits(events, inst)
    own = w.group_by("rank", "step").agg(pl.col("wait_ns").sum())
    blame = (
        w.unique(["step", "kind", "occurrence"], keep="first", maintain_order=True)
        # a fixed order: float sums repeat exactly
        .sort("last_rank", "step", "kind", "occurrence")
        .group_by("last_rank", "step", maintain_order=True)
        .agg(pl.col("caused_ns").sum().alias("caused_wait_ns"))
        .rename({"last_rank": "rank"})
    )
    matched = w.select("step").unique().with_columns(pl.lit(True).alias("_matched"))
    return (
        rank_steps.join(own, on=["rank", "step"], how="left")
        .join(blame, on=["rank", "step"], how="left")
        .join(matched, on="step", how="left")
        .with_columns(
            pl.when(pl.col("_matched")).then(pl.col("wait_ns").fill_null(0)).alias("wait_ns"),
            pl.when(pl.col("_matched"))
            .then(pl.col("caused_wait_ns").fill_null(0.0))
            .alias("caused_wait_ns"),
        )
        .drop("_matched")
    )


def straggler_of(group: pl.DataFrame, threshold: float = STRAGGLER_THRESHOLD) -> dict:
    """The straggler of one iteration (module docstring) from its rows (one per rank: STEP_SCHEMA
    columns and caused_wait_ns, null when the iteration has no shared collective instance)."""
    g = group.sort("rank")
    ranks = g["rank"].to_list()
    n = len(ranks)
    step = [float(v) for v in g["step_ns"].to_list()]
    med_step = _median(step)
    tol = threshold * med_step
    out = {
        "rank_count": n,
        "job_ns": int(max(step)),
        "median_ns": med_step,
        "min_ns": int(min(step)),
        "spread_ns": int(max(step) - min(step)),
        "slowest_rank": int(ranks[_argmax(step)]),
        "tolerance_ns": tol,
        "straggler_rank": None,
        "cause": None,
        "lateness_ns": None,
        "cause_excess_ns": None,
        "found_by": None,
        "verdict": "balanced" if n > 1 else "one rank",
    }
    if n < 2:
        return out
    excess = {}
    for c in COMPONENTS:
        v = [float(x) for x in g[c].to_list()]
        med = _median(v)
        excess[c] = [x - med for x in v]
    caused = g["caused_wait_ns"] if "caused_wait_ns" in g.columns else None
    if caused is not None and caused.is_not_null().any():
        cw = [float(x) for x in caused.fill_null(0.0).to_list()]
        i = _argmax(cw)
        late, comps, how = cw[i], OWN_COMPONENTS, "collective waits"
    else:
        i = _argmax(step)
        late, comps, how = step[i] - med_step, COMPONENTS, "step time"
    if not late > tol:
        return out
    best = max(comps, key=lambda k: excess[k][i])
    out.update(
        straggler_rank=int(ranks[i]),
        lateness_ns=late,
        verdict="straggler",
        found_by=how,
        cause=CAUSES[best] if excess[best][i] > 0 else "unclear",
        cause_excess_ns=float(excess[best][i]),
    )
    return out


def combine(summaries: list[RankSummary], *, threshold: float = STRAGGLER_THRESHOLD) -> MultiRank:
    """The MultiRank of rank summaries (distinct ranks; see the module docstring)."""
    seen: dict[int, str] = {}
    for s in summaries:
        if s.rank in seen:
            raise ValueError(f"rank {s.rank} appears twice ({seen[s.rank]} and {s.source})")
        seen[s.rank] = s.source
    summaries = sorted(summaries, key=lambda s: s.rank)
    problems = []
    steps = (
        pl.concat([s.steps for s in summaries]) if summaries else pl.DataFrame(schema=STEP_SCHEMA)
    )
    events = (
        pl.concat([s.events for s in summaries]) if summaries else pl.DataFrame(schema=EVENT_SCHEMA)
    )
    inst = instances(events)
    steps = wait_columns(steps, events, inst)
    e = events.with_columns((pl.col("start_ns") + pl.col("duration_ns")).alias("end_ns"))
    offsets = clock_offsets(
        e.join(inst.select("step", "kind", "occurrence"), on=["step", "kind", "occurrence"]).join(
            e.group_by("step", "kind", "occurrence").agg(
                pl.col("end_ns").median().alias("_med_end")
            ),
            on=["step", "kind", "occurrence"],
        )
    )
    sync = {
        "instances": inst.height,
        "synchronising": int(inst["synchronising"].sum()) if inst.height else 0,
        "exit_spread_median_ns": float(inst["exit_spread_ns"].median()) if inst.height else None,
    }
    if inst.height and sync["synchronising"] < inst.height:
        problems.append(
            f"{inst.height - sync['synchronising']} of {inst.height} collective instances are not "
            "left by all their ranks together (point-to-point with ranks outside this set, or "
            "different sequences per rank): their waits are not counted"
        )
    patterns = sorted({s.step_pattern for s in summaries if s.step_pattern})
    whole = [s.rank for s in summaries if s.step_pattern is None]
    if whole and len(whole) < len(summaries):
        problems.append(
            f"ranks {whole} have no iteration ranges: their whole GPU window is iteration "
            f"{WHOLE_TRACE_STEP}, not comparable with the others' iterations"
        )

    rows = []
    for (step,), g in steps.group_by(["step"], maintain_order=False):
        rows.append({"step": int(step), "name": g["name"][0], **straggler_of(g, threshold)})
    it_schema = {
        "step": pl.Int64,
        "name": pl.String,
        "rank_count": pl.Int64,
        "job_ns": pl.Int64,
        "median_ns": pl.Float64,
        "min_ns": pl.Int64,
        "spread_ns": pl.Int64,
        "slowest_rank": pl.Int64,
        "tolerance_ns": pl.Float64,
        "straggler_rank": pl.Int64,
        "cause": pl.String,
        "lateness_ns": pl.Float64,
        "cause_excess_ns": pl.Float64,
        "found_by": pl.String,
        "verdict": pl.String,
    }
    iterations = pl.DataFrame(rows, schema=it_schema).sort("step")
    n_ranks = len(summaries)
    short = iterations.filter(pl.col("rank_count") < n_ranks)
    if short.height:
        problems.append(
            f"{short.height} iteration(s) are missing on some ranks (e.g. step {short['step'][0]}: "
            f"{short['rank_count'][0]} of {n_ranks} ranks)"
        )

    job = iterations["job_ns"].to_list()
    distribution = {
        "job": _stats(job),
        "rank": _stats(steps["step_ns"].to_list()),
        "histogram": _histogram(job),
    }

    counts = (
        iterations.filter(pl.col("straggler_rank").is_not_null())
        .sort("straggler_rank", "step")
        .group_by("straggler_rank", maintain_order=True)
        .agg(
            pl.len().cast(pl.Int64).alias("straggler_count"),
            pl.col("lateness_ns").sum().alias("lateness_total_ns"),
        )
        .rename({"straggler_rank": "rank"})
    )
    per_rank = (
        steps.sort("rank", "step")
        .group_by("rank", maintain_order=True)
        .agg(
            pl.len().cast(pl.Int64).alias("iterations"),
            pl.col("step_ns").median().alias("step_median_ns"),
            pl.col("step_ns").mean().alias("step_mean_ns"),
            pl.col("step_ns").max().alias("step_max_ns"),
            pl.col("own_ns").median().alias("own_median_ns"),
            pl.col("wait_ns").sum().alias("wait_ns"),
            pl.col("caused_wait_ns").sum().alias("caused_wait_ns"),
        )
    )
    base = pl.DataFrame(
        [
            {
                "rank": s.rank,
                "source": s.source,
                "gpu_name": s.gpu_name,
                "device": s.primary_device,
                **{
                    k: s.totals.get(k)
                    for k in (
                        "window_ns",
                        "compute_ns",
                        "comm_ns",
                        "exposed_comm_ns",
                        "overlapped_comm_ns",
                        "memcpy_ns",
                        "host_wait_ns",
                        "idle_ns",
                        "overlap_fraction",
                        "kernel_count",
                        "comm_kernel_count",
                    )
                },
                "worker_seconds": s.meta.get("seconds"),
                "worker_peak_rss_bytes": s.meta.get("peak_rss_bytes"),
            }
            for s in summaries
        ],
        schema={
            "rank": pl.Int64,
            "source": pl.String,
            "gpu_name": pl.String,
            "device": pl.Int64,
            "window_ns": pl.Int64,
            "compute_ns": pl.Int64,
            "comm_ns": pl.Int64,
            "exposed_comm_ns": pl.Int64,
            "overlapped_comm_ns": pl.Int64,
            "memcpy_ns": pl.Int64,
            "host_wait_ns": pl.Int64,
            "idle_ns": pl.Int64,
            "overlap_fraction": pl.Float64,
            "kernel_count": pl.Int64,
            "comm_kernel_count": pl.Int64,
            "worker_seconds": pl.Float64,
            "worker_peak_rss_bytes": pl.Int64,
        },
    )
    ranks = (
        base.join(per_rank, on="rank", how="left")
        .join(counts, on="rank", how="left")
        .join(offsets, on="rank", how="left")
        .with_columns(
            pl.col("straggler_count").fill_null(0), pl.col("lateness_total_ns").fill_null(0.0)
        )
        .sort("rank")
    )

    rc = (
        pl.concat([s.collectives for s in summaries])
        if summaries
        else pl.DataFrame(schema=COLLECTIVE_SCHEMA)
    )
    coll = (
        rc.group_by("kind", "size_bucket_bytes")
        .agg(
            pl.col("rank").n_unique().cast(pl.Int64).alias("ranks"),
            pl.col("size_min_bytes").min(),
            pl.col("size_max_bytes").max(),
            pl.col("count").sum(),
            pl.col("total_ns").sum(),
            pl.col("exposed_ns").sum(),
            pl.col("overlapped_ns").sum(),
            pl.col("bytes_total").sum(),
            pl.col("sized_count").sum(),
        )
        .with_columns(
            pl.when(pl.col("total_ns") > 0)
            .then(pl.col("exposed_ns") / pl.col("total_ns"))
            .alias("exposed_fraction")
        )
        .sort(
            ["total_ns", "kind", "size_bucket_bytes"],
            descending=[True, False, False],
            nulls_last=True,
        )
    )
    devices = (
        pl.concat([s.devices for s in summaries], how="diagonal_relaxed")
        if summaries
        else pl.DataFrame()
    )
    tk = (
        pl.concat([s.top_kernels.with_columns(pl.lit(s.rank).alias("rank")) for s in summaries])
        if summaries
        else pl.DataFrame(
            schema={
                "name": pl.String,
                "count": pl.UInt32,
                "total_ns": pl.Int64,
                "min_ns": pl.Int64,
                "max_ns": pl.Int64,
                "rank": pl.Int64,
            }
        )
    )
    top = (
        tk.group_by("name")
        .agg(
            pl.col("rank").n_unique().alias("ranks"),
            pl.col("count").sum(),
            pl.col("total_ns").sum(),
            pl.col("min_ns").min(),
            pl.col("max_ns").max(),
        )
        .sort(["total_ns", "name"], descending=[True, False])
        .head(50)
    )
    return MultiRank(
        ranks=ranks,
        rank_steps=steps.sort("rank", "step"),
        iterations=iterations,
        distribution=distribution,
        collectives=coll,
        rank_collectives=rc.sort("rank", "kind"),
        devices=devices,
        top_kernels=top,
        threshold=threshold,
        step_patterns=patterns,
        problems=problems,
        sync=sync,
    )
