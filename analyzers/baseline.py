"""Baselines: run B against run A beyond kernel durations, as Nsight Compute's baselines and a
trace's statistics do.

More: docs/architecture.md, *analyzers.baseline*.
"""

from __future__ import annotations

import math
import re

import polars as pl

from analyzers.units import fmt_short

RELATED_MIN = 0.5
NOISY_LIMIT = 2.0
SPREAD_K = 2.0
#: the profiler's own bookkeeping (replay passes, backed-up bytes, temporaries): not a property of
#: the kernel
BOOKKEEPING = (
    r"^(profiler__|derived_temp|pmsampling|smsp__pcsamp_(buffer|dropped|interval|aggregated))"
)
#: a percentage that moved by less than this many percentage points is unchanged, whatever its
#: relative change
PCT_POINTS = 0.5
#: metric kind -> (name pattern, relative noise threshold; None = the noise floor), first match wins
NOISE_CLASSES: list[tuple[str, str, float | None]] = [
    ("launch parameter", r"^(launch__|device__)", 0.0),
    (
        "time or rate",
        r"(pct_of_peak|per_second|per_cycle|\.pct$|_pct$|\.ratio$|throughput|cycles|duration|time)",
        None,
    ),
    (
        "work count",
        r"(inst_executed|inst_issued|thread_inst|sass_inst|_requests|ops_path|__pred_on)(\.|$)",
        0.005,
    ),
    ("traffic", r"(bytes|sectors|wavefronts|hit_rate|_conflicts)", 0.02),
    ("time or rate", r".", None),
]
UNIT_SECTIONS = {
    "dram": "DRAM",
    "lts": "L2",
    "l1tex": "L1/TEX",
    "sm": "SM",
    "smsp": "SM sub-partition",
    "gpu": "GPU",
    "gpc": "GPC",
    "launch": "launch",
    "device": "device",
    "fbpa": "DRAM controller",
    "idc": "constant cache",
    "tpc": "TPC",
    "pcie": "PCIe",
    "nvlrx": "NVLink",
    "nvltx": "NVLink",
    "profiler": "profiler",
}


def relatedness(names_a, names_b) -> dict:
    a, b = set(n for n in names_a if n), set(n for n in names_b if n)
    shared = a & b
    union = a | b
    j = len(shared) / len(union) if union else 0.0
    return {
        "shared": len(shared),
        "a_only": len(a - b),
        "b_only": len(b - a),
        "jaccard": j,
        "related": j >= RELATED_MIN,
    }


def noise_class(metric: str, noise_floor: float) -> tuple[str, float]:
    for label, pattern, rel in NOISE_CLASSES:
        if re.search(pattern, metric):
            return label, noise_floor if rel is None else rel
    return "time or rate", noise_floor


def section_of(metric: str, section: str | None) -> str:
    if section:
        return section
    unit = re.split(r"__|\.", metric.split(".", 1)[-1] if metric[:1].isupper() else metric)[0]
    return f"counters: {UNIT_SECTIONS.get(unit, unit)}"


def _status(change, threshold, floor) -> str:
    if change is None or threshold is None:
        return "—"
    if abs(change) > threshold:
        return "higher" if change > 0 else "lower"
    return "unchanged" if threshold <= NOISY_LIMIT * floor + 1e-12 else "too noisy to judge"


def metric_diff(a: pl.DataFrame, b: pl.DataFrame, *, noise_floor: float = 0.05) -> pl.DataFrame:
    """a, b: long metric rows (metric, value, unit, section) of one launch each, or of several
    launches of one kernel and configuration (then `id` tells them apart and the spread widens the
    threshold). Returns one row per metric both have a value for: section, metric, unit, kind, a, b,
    n_a, n_b, change_pct, threshold_pct, status, moved (|change| / threshold), sorted as the module
    docstring says."""

    def agg(df: pl.DataFrame) -> pl.DataFrame:
        df = df.drop_nulls("value")
        return df.group_by("metric").agg(
            pl.col("value").median().alias("v"),
            pl.len().alias("n"),
            pl.col("value").std(ddof=0).fill_null(0.0).alias("sd"),
            pl.col("unit").first(),
            pl.col("section").drop_nulls().first(),
        )

    ga, gb = agg(a), agg(b)
    j = ga.join(gb, on="metric", how="inner", suffix="_b").filter(
        ~pl.col("metric").str.contains(BOOKKEEPING)
    )
    if not j.height:
        return pl.DataFrame(schema=DIFF_SCHEMA)
    rows = []
    for r in j.iter_rows(named=True):
        kind, rel = noise_class(r["metric"], noise_floor)
        va, vb = r["v"], r["v_b"]
        spread = 0.0
        if va and vb:
            spread = SPREAD_K * math.sqrt((r["sd"] / va) ** 2 + (r["sd_b"] / vb) ** 2)
        thr = max(rel, spread)
        if va == 0 and vb == 0:
            change = 0.0
        elif va == 0:
            change = None
        else:
            change = vb / va - 1
        status = (
            _status(change, thr, rel if rel else noise_floor)
            if change is not None
            else ("higher" if vb > 0 else "lower")
        )
        if (r["unit"] or r["unit_b"]) == "%" and abs(vb - va) < PCT_POINTS:
            status, change = "unchanged", change if change is not None else 0.0
        moved = (
            (abs(change) / thr if thr > 0 else (math.inf if change else 0.0))
            if change is not None
            else math.inf
        )
        if status == "unchanged":
            moved = min(moved, 1.0)
        rows.append(
            {
                "section": section_of(r["metric"], r["section"] or r["section_b"]),
                "metric": r["metric"],
                "unit": r["unit"] or r["unit_b"] or "",
                "kind": kind,
                "a": va,
                "b": vb,
                "n_a": r["n"],
                "n_b": r["n_b"],
                "change_pct": None if change is None else 100 * change,
                "threshold_pct": 100 * thr,
                "status": status,
                "moved": moved,
            }
        )
    df = pl.DataFrame(rows, schema=DIFF_SCHEMA)
    top = df.group_by("section").agg(pl.col("moved").max().alias("_top"))
    return (
        df.join(top, on="section")
        .sort(["_top", "section", "moved", "metric"], descending=[True, False, True, False])
        .drop("_top")
    )


DIFF_SCHEMA = {
    "section": pl.String,
    "metric": pl.String,
    "unit": pl.String,
    "kind": pl.String,
    "a": pl.Float64,
    "b": pl.Float64,
    "n_a": pl.UInt32,
    "n_b": pl.UInt32,
    "change_pct": pl.Float64,
    "threshold_pct": pl.Float64,
    "status": pl.String,
    "moved": pl.Float64,
}

#: the statistics two traces are compared by: key -> (label, unit, kind)
TRACE_STATS = {
    "step_median_ns": (
        "time per step (steady-state median, first to last GPU op the step launched)",
        "ns",
        "time",
    ),
    "launches_per_step": ("launch calls per step (a graph replay is one)", "count", "time"),
    "kernels_per_step": ("kernels per step", "count", "time"),
    "run_ns": ("run time (first to last event, slowest rank)", "ns", "time"),
    "gpu_busy_ns": ("GPU busy (union of op intervals, all devices)", "ns", "time"),
    "gpu_window_ns": ("GPU window (first to last GPU op, all devices)", "ns", "time"),
    "gpu_idle_fraction": ("GPU idle (share of the window)", "fraction", "time"),
    "kernel_count": ("kernels", "count", "count"),
    "launch_call_count": ("launch calls (a graph replay is one)", "count", "count"),
    "kernels_per_s": ("kernel rate (kernels / GPU window)", "1/s", "time"),
    "launch_latency_median_ns": (
        "launch latency, median (start − max(call end, stream free); own launch calls)",
        "ns",
        "median",
    ),
    "queued_share": (
        "kernels queued behind earlier GPU work (the host ran ahead)",
        "fraction",
        "time",
    ),
    "host_wait_fraction": (
        "waiting for the host (share of the window, per device)",
        "fraction",
        "time",
    ),
    "short_kernel_share": ("launch calls longer than the GPU work they submit", "fraction", "time"),
    "memcpy_count": ("memcpy", "count", "count"),
}


def trace_values(summary, gpu_ops: pl.DataFrame) -> dict:
    """The TRACE_STATS of one trace (analyzers.timeline.TimelineSummary) plus what their noise needs."""
    from analyzers.timeline import _latency_ops

    r = dict(summary.run)
    d = summary.devices
    win = r.get("gpu_window_ns") or 0
    hw = (d["host_wait_fraction"] * d["window_ns"]).sum() / win if win and d.height else None
    sk = d.filter(pl.col("launch_call_count") > 0)
    short = (
        (sk["short_kernel_share"] * sk["launch_call_count"]).sum() / sk["launch_call_count"].sum()
        if sk.height
        else None
    )
    lat = _latency_ops(gpu_ops)
    queued = float(lat["_queued"].mean()) if lat.height else None
    delays = lat["_lat"].drop_nulls()
    main = (summary.steps.main if summary.steps is not None else None) or {}
    return {
        **r,
        "kernels_per_s": r["kernel_count"] * 1e9 / win if win else None,
        "host_wait_fraction": hw,
        "short_kernel_share": short,
        "queued_share": queued,
        "launches_per_step": main.get("launches_median"),
        "kernels_per_step": main.get("kernels_median"),
        "step_median_ns": main.get("step_median_ns"),
        "_steps": main,
        "_delay_sd": float(delays.std()) if delays.len() > 1 else None,
        "_delay_n": delays.len(),
        "launch_delay_median_ns": r.get("launch_latency_median_ns"),
    }


def trace_story(va: dict, vb: dict) -> list[str]:
    """What changed from trace A to trace B, in sentences, from the same values as the statistics:
    step time, launch calls and kernels per step, where the GPU's time goes; a host that now runs
    ahead of the GPU is said as what it is (the GPU became the bottleneck: work waits in the queue),
    never as a launch-delay regression."""
    out = []
    sa, sb = va.get("step_median_ns"), vb.get("step_median_ns")
    if sa and sb:
        ratio = sa / sb
        how = f"{ratio:.2f}× faster" if ratio >= 1 else f"{1 / ratio:.2f}× slower"
        out.append(
            f"Time per step {fmt_short(sa, 'ns')} → {fmt_short(sb, 'ns')} ({how}; steady-state "
            f"medians, {va['_steps'].get('steady_count')} and {vb['_steps'].get('steady_count')} "
            "steps)."
        )
    la, lb = va.get("launches_per_step"), vb.get("launches_per_step")
    if la is not None and lb is not None:
        ga, gb = (
            va["_steps"].get("graph_launches_median") or 0,
            vb["_steps"].get("graph_launches_median") or 0,
        )
        graph = ""
        if gb and not ga:
            graph = " (B replays the step as a CUDA graph: one call launches its kernels)"
        elif ga and not gb:
            graph = " (A replayed the step as a CUDA graph; B launches kernel by kernel)"
        out.append(
            f"Launch calls per step {la:g} → {lb:g}{graph}; kernels per step "
            f"{va.get('kernels_per_step') or 0:g} → {vb.get('kernels_per_step') or 0:g}."
        )
    ia, ib = va.get("gpu_idle_fraction"), vb.get("gpu_idle_fraction")
    if ia is not None and ib is not None:
        out.append(
            f"GPU busy {1 - ia:.1%} → {1 - ib:.1%} of its window; waiting for the host "
            f"{va.get('host_wait_fraction') or 0:.1%} → {vb.get('host_wait_fraction') or 0:.1%}."
        )
    qa, qb = va.get("queued_share"), vb.get("queued_share")
    if qb is not None and qb >= 0.5 and (qa is None or qb > qa + 0.2):
        out.append(
            f"In B the host runs ahead of the GPU: {qb:.0%} of the kernels launched by a call of "
            "their own waited in the queue behind earlier GPU work, so the time from their launch "
            "call to their start grew — the GPU became the bottleneck; this is not a launch-delay "
            "regression."
        )
    return out


def trace_stats(va: dict, vb: dict, *, noise_floor: float = 0.05) -> pl.DataFrame:
    """Two traces' statistics side by side (module docstring): stat, label, unit, a, b, change_pct,
    threshold_pct, noise (how the threshold was set), status."""
    rows = []
    for key, (label, unit, kind) in TRACE_STATS.items():
        a, b = va.get(key), vb.get(key)
        if kind == "count":
            thr, how = 0.0, "exact (a count)"
        elif (
            kind == "median"
            and a
            and b
            and va.get("_delay_sd") is not None
            and vb.get("_delay_sd") is not None
        ):
            se = [
                1.2533 * v["_delay_sd"] / math.sqrt(v["_delay_n"]) / m
                for v, m in ((va, a), (vb, b))
            ]
            thr = max(noise_floor, SPREAD_K * math.sqrt(se[0] ** 2 + se[1] ** 2))
            how = (
                "2 × the medians' standard errors (1.2533 σ/√n)"
                if thr > noise_floor
                else "noise floor"
            )
        else:
            thr, how = noise_floor, "noise floor (one value per trace)"
        change = None if a is None or b is None or not a else b / a - 1
        if a is not None and b is not None and a == 0 and b == 0:
            change = 0.0
        status = _status(change, thr, noise_floor) if change is not None else "—"
        rows.append(
            {
                "stat": key,
                "label": label,
                "unit": unit,
                "a": None if a is None else float(a),
                "b": None if b is None else float(b),
                "a_display": fmt_short(a, unit),
                "b_display": fmt_short(b, unit),
                "change_pct": None if change is None else 100 * change,
                "threshold_pct": 100 * thr,
                "noise": how,
                "status": status,
            }
        )
    return pl.DataFrame(
        rows,
        schema={
            "stat": pl.String,
            "label": pl.String,
            "unit": pl.String,
            "a": pl.Float64,
            "b": pl.Float64,
            "a_display": pl.String,
            "b_display": pl.String,
            "change_pct": pl.Float64,
            "threshold_pct": pl.Float64,
            "noise": pl.String,
            "status": pl.String,
        },
    )
