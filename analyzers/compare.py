"""Run A vs run B: kernels matched by name and launch configuration, classified with the noise in
mind.

Input: one row per launch with `name`, `config` (grid and block, as text) and `duration_ns`, plus
any other numeric columns to carry (e.g. the fraction of the GPU's DRAM peak).

More: docs/architecture.md, *analyzers.compare*.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from analyzers.baseline import NOISY_LIMIT, metric_diff, relatedness, trace_stats, trace_story

STATUSES = ("slower", "faster", "unchanged", "too noisy to judge", "added", "removed")
NOISE_FLOOR = 0.05
SPREAD_K = 2.0


def ncu_launches(
    kernels: pl.DataFrame, extra: tuple[str, ...] = (), *, dims: bool = True
) -> pl.DataFrame:
    """Launch rows from an (analyzed) ncu kernel table: name (canonical), config "grid (x,y,z) block
    (x,y,z)"; where a launch has no grid and block dimensions, or with dims=False, "grid N blocks,
    block M threads" (its launch__grid_size and launch__block_size); "—" when it has neither."""
    has = set(kernels.columns)
    by_dims = (
        pl.format(
            "grid ({},{},{}) block ({},{},{})",
            "grid_x",
            "grid_y",
            "grid_z",
            "block_x",
            "block_y",
            "block_z",
        )
        if dims
        else pl.lit(None, pl.String)
    )
    by_size = (
        pl.format(
            "grid {} blocks, block {} threads",
            pl.col("grid_size").cast(pl.Int64),
            pl.col("block_size").cast(pl.Int64),
        )
        if {"grid_size", "block_size"} <= has
        else pl.lit(None, pl.String)
    )
    return kernels.sort("id").select(
        pl.col("kernel_name").alias("name"),
        pl.coalesce(by_dims, by_size, pl.lit("—")).alias("config"),
        pl.col("duration_ns").cast(pl.Float64),
        *[pl.col(c) for c in extra if c in has],
    )


def has_dims(kernels: pl.DataFrame) -> bool:
    """Every launch has its grid and block dimensions. Two ncu runs compare by dimensions when both
    have them, else both by blocks per grid and threads per block (a `.ncu-rep` of ncu 2019.x-2020.1
    has only those, its CSV exports dimensions), so one report in two formats matches launch for
    launch."""
    cols = ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z")
    return kernels.height > 0 and all(
        c in kernels.columns and kernels[c].null_count() == 0 for c in cols
    )


def trace_launches(gpu_ops: pl.DataFrame) -> pl.DataFrame:
    """Kernel launch rows from a timeline `gpu_ops` table (Kineto or nsys)."""
    k = gpu_ops.filter(pl.col("kind") == "kernel")
    cfg = [
        c for c in ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z") if c in k.columns
    ]
    if len(cfg) == 6:
        config = (
            pl.when(pl.col("grid_x").is_not_null())
            .then(pl.format("grid ({},{},{}) block ({},{},{})", *cfg))
            .otherwise(pl.lit("—"))
        )
    else:
        config = pl.lit("—")
    return k.sort("start_ns").select(
        pl.col("name"), config.alias("config"), pl.col("duration_ns").cast(pl.Float64)
    )


def _groups(df: pl.DataFrame, per_launch: bool) -> pl.DataFrame:
    extra = [c for c in df.columns if c not in ("name", "config", "duration_ns")]
    if per_launch:
        return df.with_columns(occurrence=pl.int_range(pl.len()).over("name", "config")).select(
            "name",
            "config",
            "occurrence",
            pl.lit(1, pl.UInt32).alias("n"),
            pl.col("duration_ns").alias("median_ns"),
            pl.lit(0.0).alias("spread_ns"),
            pl.col("duration_ns").alias("total_ns"),
            *extra,
        )
    return df.group_by("name", "config", maintain_order=True).agg(
        pl.lit(None, pl.Int64).first().alias("occurrence"),
        pl.len().alias("n"),
        pl.col("duration_ns").median().alias("median_ns"),
        pl.col("duration_ns").std(ddof=0).fill_null(0.0).alias("spread_ns"),
        pl.col("duration_ns").sum().alias("total_ns"),
        *[pl.col(c).mean() for c in extra],
    )


def change_columns(noise_floor: float = NOISE_FLOOR, k: float = SPREAD_K) -> list[pl.Expr]:
    """status, change_pct, threshold_pct from median_ns_a/_b and spread_ns_a/_b (the module
    docstring's rule): the one classification of a kernel's change, for two runs (compare_runs) and
    along a run history (analyzers.history.regressions)."""
    rel = (
        (pl.col("spread_ns_a") / pl.col("median_ns_a")) ** 2
        + (pl.col("spread_ns_b") / pl.col("median_ns_b")) ** 2
    ).sqrt()
    thr = pl.max_horizontal(pl.lit(noise_floor), k * rel)
    change = pl.col("median_ns_b") / pl.col("median_ns_a") - 1
    status = (
        pl.when(pl.col("median_ns_a").is_null())
        .then(pl.lit("added"))
        .when(pl.col("median_ns_b").is_null())
        .then(pl.lit("removed"))
        .when(change < -thr)
        .then(pl.lit("faster"))
        .when(change > thr)
        .then(pl.lit("slower"))
        .when(thr > NOISY_LIMIT * noise_floor + 1e-12)
        .then(pl.lit("too noisy to judge"))
        .otherwise(pl.lit("unchanged"))
    )
    return [
        status.alias("status"),
        (change * 100).alias("change_pct"),
        pl.when(change.is_not_null()).then(thr * 100).alias("threshold_pct"),
    ]


def compare_runs(
    a: pl.DataFrame,
    b: pl.DataFrame,
    *,
    per_launch: bool,
    noise_floor: float = NOISE_FLOOR,
    k: float = SPREAD_K,
) -> pl.DataFrame:
    """One row per kernel (per launch for ncu) of A or B: n_a/n_b, median_a_ns/median_b_ns,
    spread_*_ns, total_*_ns, change_pct, threshold_pct, status; carried columns get suffixes _a and
    _b. Sorted by the absolute time difference, largest first."""
    ga, gb = _groups(a, per_launch), _groups(b, per_launch)
    keys = ["name", "config", "occurrence"]
    ga = ga.rename({c: f"{c}_a" for c in ga.columns if c not in keys})
    gb = gb.rename({c: f"{c}_b" for c in gb.columns if c not in keys})
    j = ga.join(gb, on=keys, how="full", coalesce=True, nulls_equal=True)
    return j.with_columns(
        *change_columns(noise_floor, k),
        delta_ns=pl.col("total_ns_b").fill_null(0) - pl.col("total_ns_a").fill_null(0),
    ).sort(pl.col("delta_ns").abs(), descending=True)


def totals(cmp: pl.DataFrame) -> dict:
    """Total kernel time of A and B (all launches, matched or not), its change, and counts by status."""
    ta = float(cmp["total_ns_a"].fill_null(0).sum())
    tb = float(cmp["total_ns_b"].fill_null(0).sum())
    counts = {s: int((cmp["status"] == s).sum()) for s in STATUSES}
    return {
        "total_a_ns": ta,
        "total_b_ns": tb,
        "change_pct": (tb / ta - 1) * 100 if ta else None,
        "counts": counts,
    }


@dataclass
class CompareResult:
    kind: str  # "ncu" | "trace"
    noise_floor: float
    related: dict  # analyzers.baseline.relatedness
    kernels: pl.DataFrame  # compare_runs
    totals: dict
    # ncu: matched launches {name, config, occurrence, a_id, b_id}
    pairs: list[dict] = field(default_factory=list)
    metrics: dict = field(default_factory=dict)  # ncu: pair index -> metric_diff of that pair
    stats: pl.DataFrame | None = None  # traces: trace_stats
    story: list[str] = field(default_factory=list)  # traces: analyzers.baseline.trace_story
    # ncu: matched by grid/block dimensions (has_dims), else sizes
    dims: bool = True


def launch_metric_rows(metrics: pl.DataFrame, ids, sections: pl.DataFrame | None) -> pl.DataFrame:
    """The long metric rows of some launches (names, texts and units as strings, id Int64) with the
    section of each metric (a run's metric_sections table: metric, section; None: no section known)."""
    m = metrics.filter(pl.col("id").is_in(list(ids))).with_columns(
        pl.col("id").cast(pl.Int64),
        *[pl.col(c).cast(pl.String) for c in ("metric", "text", "unit") if c in metrics.columns],
    )
    if "section" in m.columns:
        return m
    if sections is None or not sections.height:
        return m.with_columns(pl.lit(None, dtype=pl.String).alias("section"))
    return m.join(
        sections.select(pl.col("metric").cast(pl.String), pl.col("section").cast(pl.String)),
        on="metric",
        how="left",
        maintain_order="left",
    )


def compare_ncu(
    ka: pl.DataFrame,
    kb: pl.DataFrame,
    ma: pl.DataFrame,
    mb: pl.DataFrame,
    *,
    noise_floor: float = NOISE_FLOOR,
    extra: tuple[str, ...] = (),
    sections_a: pl.DataFrame | None = None,
    sections_b: pl.DataFrame | None = None,
) -> CompareResult:
    """Two analysed ncu kernel tables (with id, kernel_name, grid/block, duration_ns) and their long
    metric tables (with their metric_sections tables, for the section of each metric): launches
    matched n-th with n-th per (name, configuration: dimensions when both runs have them, else
    blocks and threads per block, see has_dims), each matched pair diffed metric by metric."""
    dims = has_dims(ka) and has_dims(kb)
    la = ncu_launches(ka, extra=("id", *extra), dims=dims)
    lb = ncu_launches(kb, extra=("id", *extra), dims=dims)
    cmp = compare_runs(la, lb, per_launch=True, noise_floor=noise_floor)
    pairs = []
    matched = cmp.filter(pl.col("id_a").is_not_null() & pl.col("id_b").is_not_null())
    for r in matched.sort("id_a").iter_rows(named=True):
        pairs.append(
            {
                "name": r["name"],
                "config": r["config"],
                "occurrence": r["occurrence"],
                "a_id": int(r["id_a"]),
                "b_id": int(r["id_b"]),
            }
        )
    ma = launch_metric_rows(ma, [p["a_id"] for p in pairs], sections_a)
    mb = launch_metric_rows(mb, [p["b_id"] for p in pairs], sections_b)
    metrics = {
        i: metric_diff(
            ma.filter(pl.col("id") == p["a_id"]),
            mb.filter(pl.col("id") == p["b_id"]),
            noise_floor=noise_floor,
        )
        for i, p in enumerate(pairs)
    }
    return CompareResult(
        "ncu",
        noise_floor,
        relatedness(ka["kernel_name"].to_list(), kb["kernel_name"].to_list()),
        cmp,
        totals(cmp),
        pairs,
        metrics,
        dims=dims,
    )


def compare_traces(
    ga: pl.DataFrame,
    gb: pl.DataFrame,
    values_a: dict,
    values_b: dict,
    *,
    noise_floor: float = NOISE_FLOOR,
) -> CompareResult:
    """Two traces (gpu_ops tables and analyzers.baseline.trace_values of each): per-kernel medians
    and the traces' statistics."""
    cmp = compare_runs(
        trace_launches(ga), trace_launches(gb), per_launch=False, noise_floor=noise_floor
    )
    names = lambda g: g.filter(pl.col("kind") == "kernel")["name"].to_list()  # noqa: E731
    return CompareResult(
        "trace",
        noise_floor,
        relatedness(names(ga), names(gb)),
        cmp,
        totals(cmp),
        stats=trace_stats(values_a, values_b, noise_floor=noise_floor),
        story=trace_story(values_a, values_b),
    )
