"""Multi-rank sections of `kernelscope analyze` (a folder or glob of rank traces, or any trace run):
`ranks`, `iterations`, `collectives`, `iteration_times`; and the report of a rank folder analysed by
fan-out.

The numbers are analyzers.stragglers.MultiRank's, unchanged; times in ns, fractions in [0, 1].
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Optional

import polars as pl
import typer

from analyzers.stragglers import DEFINITIONS as RANK_DEFINITIONS
from dashboard.cli.render import print_table

RANK_COLUMNS = (
    "rank",
    "source",
    "gpu_name",
    "device",
    "iterations",
    "step_median_ns",
    "step_mean_ns",
    "step_max_ns",
    "own_median_ns",
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
    "wait_ns",
    "caused_wait_ns",
    "clock_offset_ns",
    "straggler_count",
    "lateness_total_ns",
    "worker_seconds",
    "worker_peak_rss_bytes",
)
PER_RANK = (
    "rank",
    "step_ns",
    "own_ns",
    "compute_ns",
    "comm_ns",
    "exposed_comm_ns",
    "overlapped_comm_ns",
    "wait_ns",
    "caused_wait_ns",
    "memcpy_ns",
    "host_wait_ns",
    "idle_ns",
    "kernel_count",
    "comm_kernel_count",
)
UNITS = {
    "_ns": "ns",
    "_bytes": "bytes",
    "_fraction": "fraction",
    "_seconds": "s",
    "_count": "count",
}


def _clean(v):
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return round(v, 6) if isinstance(v, float) else v


def _rows(df: pl.DataFrame) -> list[dict]:
    return [{k: _clean(v) for k, v in r.items()} for r in df.to_dicts()]


def sections(mr) -> dict:
    """The `ranks`, `iterations`, `collectives`, `rank_collectives`, `iteration_times` sections of a MultiRank."""
    per = {}
    for r in mr.rank_steps.select("step", *PER_RANK).iter_rows(named=True):
        per.setdefault(r.pop("step"), []).append(r)
    iterations = []
    for r in _rows(mr.iterations):
        r["per_rank"] = per.get(r["step"], [])
        iterations.append(r)
    return {
        "ranks": _rows(mr.ranks.select([c for c in RANK_COLUMNS if c in mr.ranks.columns])),
        "iterations": iterations,
        "collectives": _rows(mr.collectives),
        "rank_collectives": _rows(mr.rank_collectives),
        "iteration_times": mr.distribution,
        "collective_instances": mr.sync,
        "straggler_threshold": mr.threshold,
        "step_patterns": mr.step_patterns,
        "problems": mr.problems,
        "rank_definitions": RANK_DEFINITIONS,
    }


def job_summary(mr) -> dict:
    """Whole-job figures: ranks, iterations, the job iteration time's median and p90, the exposed share."""
    r = mr.ranks
    win = int(r["window_ns"].sum() or 0)
    dist = mr.distribution.get("job", {})
    return {
        "rank_count": r.height,
        "iteration_count": mr.iterations.height,
        "iteration_median_ns": dist.get("median_ns"),
        "iteration_p90_ns": dist.get("p90_ns"),
        "straggler_iterations": int(mr.iterations["straggler_rank"].is_not_null().sum()),
        "gpu_window_ns": win,
        "compute_ns": int(r["compute_ns"].sum() or 0),
        "exposed_comm_ns": int(r["exposed_comm_ns"].sum() or 0),
        "exposed_comm_fraction": (int(r["exposed_comm_ns"].sum() or 0) / win) if win else None,
        "kernel_count": int(r["kernel_count"].sum() or 0),
        "gpu_names": sorted({g for g in r["gpu_name"] if g}),
    }


def folder_report(mr, ex, source: str) -> dict:
    """The JSON of `kernelscope analyze FOLDER_OR_GLOB`: the job summary, the multi-rank sections,
    the devices and top kernels of every rank, and how the analysis ran. Per-kernel rows are not
    gathered across ranks (analyse one rank's file for them)."""
    devices = []
    for u in mr.devices.iter_rows(named=True) if mr.devices.height else []:
        devices.append(
            {
                "rank": u["rank"],
                "device": u["device"],
                "kernel_count": u["kernel_count"],
                "kernels_with_launch": u["kernels_with_launch"],
                "gpu_busy_ns": u["busy_ns"],
                "gpu_window_ns": u["window_ns"],
                "gpu_idle_fraction": _clean(u["idle_fraction"]),
                "launch_delay_median_ns": u["launch_delay_median_ns"],
                "launch_delay_p90_ns": u["launch_delay_p90_ns"],
                "launch_verdict": u["verdict"],
            }
        )
    return {
        "kind": "ranks",
        "source": source,
        "summary": job_summary(mr),
        **sections(mr),
        "devices": devices,
        "top_kernels": _rows(mr.top_kernels),
        "execution": {
            **ex.executor,
            "tasks": ex.tasks,
            "wall_s": round(ex.wall_s, 3),
            "driver_cpu_s": round(ex.cpu_s, 3),
            "driver_peak_rss_bytes": ex.driver_peak_rss_bytes,
            "notes": ex.notes,
            "failures": [{"source": f.source, "problem": f.problem} for f in ex.failures],
        },
        "units": UNITS,
    }


ITERATION_TABLE = [
    ("step", "step", None),
    ("rank_count", "ranks", None),
    ("job_ns", "iteration [ms]", 1e-6),
    ("median_ns", "median rank [ms]", 1e-6),
    ("spread_ns", "spread [ms]", 1e-6),
    ("straggler_rank", "straggler", None),
    ("cause", "cause", None),
    ("lateness_ns", "late by [ms]", 1e-6),
    ("verdict", "verdict", None),
]
RANK_TABLE = [
    ("rank", "rank", None),
    ("iterations", "iterations", None),
    ("step_median_ns", "step median [ms]", 1e-6),
    ("compute_pct", "compute [%]", 1),
    ("exposed_pct", "exposed comm [%]", 1),
    ("host_pct", "host/launch [%]", 1),
    ("idle_pct", "idle [%]", 1),
    ("overlap_pct", "comm overlapped [%]", 1),
    ("straggler_count", "straggler in", None),
    ("source", "trace", None),
]


def print_tables(rep: dict, max_rows: int = 40) -> None:
    """The plain-text view of a multi-rank report: one row per rank, one per iteration (first max_rows)."""
    ranks = []
    for r in rep["ranks"]:
        w = r.get("window_ns") or 0
        pct = lambda k: 100 * (r.get(k) or 0) / w if w else None  # noqa: E731
        ranks.append(
            {
                **r,
                "compute_pct": pct("compute_ns"),
                "exposed_pct": pct("exposed_comm_ns"),
                "host_pct": pct("host_wait_ns"),
                "idle_pct": pct("idle_ns"),
                "overlap_pct": None
                if r.get("overlap_fraction") is None
                else 100 * r["overlap_fraction"],
                "source": Path(r.get("source") or "").name,
            }
        )
    typer.echo("per rank (shares of the rank's GPU window):")
    print_table(ranks, RANK_TABLE)
    its = rep["iterations"]
    typer.echo(
        f"\nper iteration ({len(its)}; straggler tolerance {100 * rep['straggler_threshold']:g} % "
        "of the median step):"
    )
    print_table(its[:max_rows], ITERATION_TABLE)
    if len(its) > max_rows:
        typer.echo(f"... {len(its) - max_rows} more iterations (--format json lists all)")
    d = rep["iteration_times"].get("job", {})
    if d.get("count"):
        typer.echo(
            f"\niteration time over {d['count']} iterations: median {d['median_ns'] / 1e6:.3f} ms, "
            f"p90 {d['p90_ns'] / 1e6:.3f} ms, max {d['max_ns'] / 1e6:.3f} ms (the slowest rank of "
            "each)"
        )
    for p in rep.get("problems", []):
        typer.echo(f"note: {p}")


def csv_rows(rep: dict) -> list[dict]:
    """One row per (iteration, rank) for CSV output."""
    out = []
    for it in rep["iterations"]:
        for r in it["per_rank"]:
            out.append(
                {
                    "step": it["step"],
                    **r,
                    "straggler": r["rank"] == it["straggler_rank"],
                    "cause": it["cause"] if r["rank"] == it["straggler_rank"] else None,
                }
            )
    return out


def echo_execution(ex, err: bool = True) -> None:
    e = ex.executor
    where = e["executor"] + (
        f" at {e['address']}, {e.get('nodes')} node(s)" if e["executor"] == "ray" else ""
    )
    typer.echo(
        f"analysed {ex.tasks} rank source(s) on {where} with {e['workers']} worker(s) in "
        f"{ex.wall_s:.1f} s; driver peak memory {ex.driver_peak_rss_bytes / 2**20:.0f} MiB",
        err=err,
    )
    for f in ex.failures:
        typer.echo(f"kernelscope: {f.source}: {f.problem}", err=True)


def progress(total_label: Optional[str] = None):
    """An on_done callback that reports "analysing ranks done of total" (collectors.progress): the
    command line's bar shows it on a terminal, with an estimate; piped, nothing is printed."""
    from collectors.progress import report

    def cb(done: int, total: int, label: str) -> None:
        report("analysing ranks", done, total)

    return cb
