"""One row per kernel of an Nsight Compute run: its launches grouped by canonical name and launch
configuration (`kernel_key`: the name with its template arguments, grid and block), with their
count, total and median time, share of the run's kernel time, the biggest finding summed over the
launches, and the per-launch quantities as time-weighted means. The Kernels page, Home's
opportunities, `kernelscope analyze --by kernel` and the export show this one table; launches stay
one click away (`launch_ids`).

More: docs/architecture.md, *analyzers.kernel_groups*.
"""

from __future__ import annotations

import polars as pl

#: per-launch text columns carried as the longest launch's value
TEXT_COLUMNS = (
    "tensor_type",
    "occupancy_limiter",
    "bound",
    "model_class",
    "model_verdict",
    "model_case",
    "model_traffic",
)
#: per-launch numbers that are not rates (counts and sizes): summed
SUMMED = (
    "dram_bytes",
    "flop_fp32",
    "flop_tensor",
    "flop_total",
    "lost_ns",
    "model_pred_ns",
    "model_meas_ns",
    "model_win_ns",
)
#: launch configuration columns: equal within a group (they are part of its key)
CONFIG = (
    "block_x",
    "block_y",
    "block_z",
    "grid_x",
    "grid_y",
    "grid_z",
    "block_size",
    "grid_size",
    "registers_per_thread",
    "smem_static_bytes",
    "smem_dynamic_bytes",
)


def _key(k: pl.DataFrame) -> pl.Expr:
    if "kernel_key" in k.columns:
        return pl.coalesce(pl.col("kernel_key"), pl.col("kernel_name"))
    return pl.col("kernel_name")


def kernel_groups(kernels: pl.DataFrame) -> pl.DataFrame:
    """The run's kernels, one row each (module docstring), sorted by total time (largest first).
    Columns: id (the kernel's longest launch: the one its detail shows), launch_ids, launches,
    total_ns, median_ns, min_ns, max_ns, share, top_finding_key, top_finding, lost_total_ns,
    lost_finding_ns (the top finding's own sum), the name columns, the configuration, TEXT_COLUMNS
    and a time-weighted mean of every other numeric column."""
    k = kernels.with_columns(_key(kernels).alias("_group"))
    if not k.height:
        return k.head(0).with_columns(pl.lit(None, pl.List(pl.Int64)).alias("launch_ids"))
    total = float(k["duration_ns"].sum() or 0.0)
    names = [
        c
        for c in ("kernel_name", "raw_name", "short_name", "display_name", "kernel_key")
        if c in k.columns
    ]
    skip = {"id", "_group", "duration_ns", *names, *TEXT_COLUMNS, *SUMMED, *CONFIG}
    rates = [c for c, t in k.schema.items() if c not in skip and t.is_numeric()]
    w = pl.col("duration_ns")

    def weighted(c: str) -> pl.Expr:
        has = pl.col(c).is_not_null() & w.is_not_null()
        den = w.filter(has).sum()
        return pl.when(den > 0).then((pl.col(c) * w).filter(has).sum() / den).alias(c)

    longest = pl.col("duration_ns").arg_max()
    g = k.group_by("_group", maintain_order=True).agg(
        pl.col("id").get(longest).alias("id"),
        pl.col("id").sort().alias("launch_ids"),
        pl.len().alias("launches"),
        pl.col("duration_ns").sum().alias("total_ns"),
        pl.col("duration_ns").median().alias("median_ns"),
        pl.col("duration_ns").min().alias("min_ns"),
        pl.col("duration_ns").max().alias("max_ns"),
        *[pl.col(c).first() for c in names],
        *[pl.col(c).first() for c in CONFIG if c in k.columns],
        *[pl.col(c).get(longest) for c in TEXT_COLUMNS if c in k.columns],
        *[
            pl.col(c).sum().alias(c) if c != "lost_ns" else pl.col(c).sum().alias("lost_total_ns")
            for c in SUMMED
            if c in k.columns and not c.startswith("model_")
        ],
        # the textbook model's times: a kernel none of whose launches carries a model has none (not
        # 0)
        *[
            pl.when(pl.col(c).is_not_null().any()).then(pl.col(c).sum()).alias(c)
            for c in SUMMED
            if c in k.columns and c.startswith("model_")
        ],
        *[weighted(c) for c in rates],
        pl.col("flags")
        .list.explode(keep_nulls=False, empty_as_null=False)
        .unique()
        .sort()
        .alias("flags")
        if "flags" in k.columns
        else pl.lit(None),
    )
    if "lost_ns" in k.columns and "top_finding_key" in k.columns:
        f = (
            k.filter(pl.col("top_finding_key").is_not_null())
            .group_by("_group", "top_finding_key")
            .agg(
                pl.col("lost_ns").sum().alias("lost_finding_ns"),
                pl.col("top_finding").get(pl.col("lost_ns").arg_max()).alias("top_finding"),
            )
            .sort(["lost_finding_ns", "top_finding_key"], descending=[True, False])
            .unique("_group", keep="first", maintain_order=True)
        )
        g = g.join(f, on="_group", how="left")
    g = g.with_columns(
        (pl.col("total_ns") / total if total else pl.lit(None, pl.Float64)).alias("share"),
        # a lost total of zero launches with no finding is missing, not 0
        pl.when(pl.col("top_finding_key").is_not_null())
        .then(pl.col("lost_total_ns"))
        .alias("lost_total_ns")
        if "top_finding_key" in g.columns
        else pl.col("lost_total_ns"),
    )
    return g.drop("_group", *(["literal"] if "literal" in g.columns else [])).sort(
        ["total_ns", "id"], descending=[True, False]
    )


def group_of(groups: pl.DataFrame, launch_id) -> int | None:
    """The id (longest launch) of the kernel row that holds launch `launch_id`; None when no row does."""
    if launch_id is None or not groups.height:
        return None
    hit = groups.filter(pl.col("launch_ids").list.contains(int(launch_id)))
    return int(hit["id"][0]) if hit.height else None


def run_story(kernels: pl.DataFrame, top: int = 3) -> dict:
    """What an Nsight Compute run says at a glance: its launches and kernels, the kernel time, the
    time its findings estimate can be won (Σ of each launch's biggest finding, capped at the kernel
    time), the Speed-of-Light split over the run (time-weighted SM and DRAM throughput, % of peak:
    ncu's sm__throughput and gpu__dram_throughput) and the kernels with the most time to win (one
    row per kernel, never one kernel twice)."""
    g = kernel_groups(kernels)
    total = float(kernels["duration_ns"].sum() or 0.0) if kernels.height else 0.0
    lost = None
    if "lost_ns" in kernels.columns and kernels["lost_ns"].null_count() < kernels.height:
        lost = min(float(kernels["lost_ns"].sum()), total)

    def weighted(c: str):
        if c not in kernels.columns:
            return None
        k = kernels.filter(pl.col(c).is_not_null() & pl.col("duration_ns").is_not_null())
        den = float(k["duration_ns"].sum() or 0.0)
        return float((k[c] * k["duration_ns"]).sum()) / den if den else None

    best = (
        g.filter(pl.col("lost_total_ns").is_not_null())
        .sort(["lost_total_ns", "total_ns"], descending=True)
        .head(top)
        if "lost_total_ns" in g.columns
        else g.head(0)
    )
    short = kernels.filter(pl.col("duration_ns") < 5_000) if kernels.height else kernels
    return {
        "launches": kernels.height,
        "kernels": g.height,
        "kernel_ns": total,
        "lost_ns": lost,
        "lost_share": (lost / total) if lost is not None and total else None,
        "sm_pct": weighted("sm_throughput_pct"),
        "dram_pct": weighted("dram_throughput_pct"),
        "short_launches": short.height,
        "short_ns": float(short["duration_ns"].sum() or 0.0) if short.height else 0.0,
        "top": [
            {
                "id": r["id"],
                "name": r.get("display_name") or r.get("kernel_name"),
                "launches": r["launches"],
                "total_ns": r["total_ns"],
                "lost_ns": r["lost_total_ns"],
                "finding": r.get("top_finding"),
            }
            for r in best.iter_rows(named=True)
        ],
    }


def story_sentence(s: dict) -> str:
    """run_story as one paragraph (the Kernels page, Home and `kernelscope analyze` say the same)."""
    us = lambda ns: f"{ns / 1e3:,.1f} µs"  # noqa: E731
    out = (
        f"{s['launches']:,} profiled launches of {s['kernels']:,} kernels, {us(s['kernel_ns'])} "
        f"of kernel time"
    )
    if s["lost_ns"] is not None:
        out += (
            f"; the findings estimate {us(s['lost_ns'])} of it ({s['lost_share']:.0%}) can be won "
            "(each launch's biggest finding)"
        )
    out += "."
    if s["sm_pct"] is not None or s["dram_pct"] is not None:
        f = lambda v: "—" if v is None else f"{v:.0f} %"  # noqa: E731
        out += (
            f" Speed of Light over the run (time-weighted, % of peak): SM {f(s['sm_pct'])}, DRAM "
            f"{f(s['dram_pct'])}."
        )
    if s["short_launches"] and s["short_launches"] >= 0.5 * s["launches"]:
        out += (
            f" {s['short_launches']:,} of the launches ({s['short_ns'] / s['kernel_ns']:.0%} of "
            "the time) are shorter than 5 µs: there the launch, not the kernel's counters, sets "
            "the pace — see the program's timeline."
        )
    return out
