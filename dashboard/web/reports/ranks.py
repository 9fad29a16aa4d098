"""Ranks (?run=RUN&metric=COLUMN&threshold=0.02&step=REGEX): a distributed job's ranks x iterations.

A heat map of every rank's time per iteration (or its own work, exposed communication, collective
waits ...), the straggler of each iteration with its cause, one row per rank, the collectives by
kind and size with their exposed time, and the iteration-time distribution. Every number is
`Source.multirank(run)` (analyzers.stragglers.MultiRank), the object `kernelscope analyze` prints in
its `ranks` and `iterations` sections.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import polars as pl

from analyzers.errors import ParameterError, UnknownName
from analyzers.stragglers import DEFINITIONS, STRAGGLER_THRESHOLD
from collectors.errors import RunNotFound
from collectors.schema import TRACE_KINDS
from collectors.store import Run
from dashboard.web import charts
from dashboard.web.reports.report_blocks import (
    Chart,
    Heading,
    Metrics,
    Report,
    Table,
    Text,
    code,
    num,
    text,
)
from dashboard.web.reports.run_links import link
from dashboard.core.source import Source

#: what the heat map can show: column -> label
METRICS = {
    "step_ns": "iteration time",
    "own_ns": "own work (step − exposed communication)",
    "exposed_comm_ns": "exposed communication",
    "wait_ns": "waiting for later ranks in collectives",
    "compute_ns": "compute",
    "host_wait_ns": "GPU waiting for the host",
    "idle_ns": "other GPU idle",
}
MAX_ITERATIONS = 400  # heat-map columns (the first ones beyond that)
WINDOW = "; share of the rank's GPU window (its primary device's first to last GPU op)"


@dataclass
class RanksView:
    run: Run | None
    metric: str = "step_ns"
    threshold: float = STRAGGLER_THRESHOLD
    step: str = ""
    problems: list[Text] = field(default_factory=list)

    def params(self) -> dict:
        return {
            "run": self.run.run_id if self.run else None,
            "metric": None if self.metric == "step_ns" else self.metric,
            "threshold": None if self.threshold == STRAGGLER_THRESHOLD else f"{self.threshold:g}",
            "step": self.step or None,
        }


def resolve(src: Source, params: dict, *, strict: bool = False) -> RanksView:
    """The view a URL names; a run that is not a trace, an unknown metric or a bad threshold is an
    error when strict (an export), else a note and the default."""
    problems: list[Text] = []
    run = None
    wanted = params.get("run")
    if wanted:
        try:
            run = src.get_kind(
                wanted, TRACE_KINDS, "a PyTorch profiler trace or Nsight Systems export"
            )
        except RunNotFound:
            if strict:
                raise
            problems.append(Text(f"No trace run {code(wanted)} in this store.", "error"))
    if run is None and not wanted:
        traces = src.runs(TRACE_KINDS)
        multi = [r for r in traces if len(r.meta.get("ranks") or []) > 1]
        run = (multi or traces or [None])[0]
    view = RanksView(run, problems=problems)
    metric = params.get("metric") or "step_ns"
    if metric not in METRICS:
        if strict:
            raise UnknownName("metric", metric, "one of " + ", ".join(METRICS))
        problems.append(Text(f"No metric {code(metric)}; showing the iteration time.", "warning"))
        metric = "step_ns"
    view.metric = metric
    raw = params.get("threshold")
    try:
        thr = float(raw) if raw not in (None, "") else STRAGGLER_THRESHOLD
    except ValueError:
        thr = math.nan
    if not (math.isfinite(thr) and 0 <= thr < 1):
        if strict:
            raise ParameterError(f"threshold must be a fraction in [0, 1), got {raw!r}")
        problems.append(
            Text(f"Threshold {code(raw)} is not a fraction in [0, 1); using 0.02.", "warning")
        )
        thr = STRAGGLER_THRESHOLD
    view.threshold = thr
    view.step = params.get("step") or ""
    return view


def _ms(c: str) -> pl.Expr:
    return (pl.col(c) / 1e6).alias(c.replace("_ns", "_ms"))


def heatmap(mr, view: RanksView) -> list:
    rs = mr.rank_steps
    steps = sorted(rs["step"].unique().to_list())
    note = None
    if len(steps) > MAX_ITERATIONS:
        note = Text(
            f"The first {MAX_ITERATIONS} of {len(steps)} iterations are drawn; the tables list all.",
            "caption",
        )
        rs = rs.filter(pl.col("step") <= steps[MAX_ITERATIONS - 1])
    strag = mr.iterations.select("step", pl.col("straggler_rank").alias("_s"))
    cells = rs.join(strag, on="step", how="left").select(
        "rank",
        "step",
        (pl.col(view.metric).cast(pl.Float64) / 1e6).alias("value"),
        (pl.col("rank") == pl.col("_s")).fill_null(False).alias("straggler"),
    )
    label = METRICS[view.metric]
    return [
        Chart(
            "rank_heatmap",
            charts.rank_heatmap(
                cells,
                f"{label} [ms]",
                f"{label.capitalize()} per rank and iteration (red outline: the iteration's "
                "straggler)",
            ),
            DEFINITIONS.get(view.metric, ""),
        ),
        note,
    ]


def straggler_table(mr) -> Table:
    it = mr.iterations.select(
        "step",
        "rank_count",
        _ms("job_ns"),
        (pl.col("median_ns") / 1e6).alias("median_ms"),
        _ms("spread_ns"),
        "straggler_rank",
        "cause",
        (pl.col("lateness_ns") / 1e6).alias("late_ms"),
        "found_by",
        "verdict",
    )
    return Table(
        "stragglers",
        it,
        {
            "step": num("iteration"),
            "rank_count": num("ranks"),
            "job_ms": num("iteration time", "ms", "%.3f", DEFINITIONS["job_ns"]),
            "median_ms": num("median rank", "ms", "%.3f", "median of the ranks' step times"),
            "spread_ms": num("spread", "ms", "%.3f", "longest − shortest step over the ranks"),
            "straggler_rank": num("straggler", help=DEFINITIONS["straggler"]),
            "cause": text(
                "cause", "the straggler's component furthest above that component's median"
            ),
            "late_ms": num("others waited", "ms", "%.3f", DEFINITIONS["caused_wait_ns"]),
            "found_by": text("found by"),
            "verdict": text("verdict"),
        },
        height=360,
    )


def rank_table(mr) -> Table:
    r = mr.ranks
    w = pl.col("window_ns")
    pct = lambda c: (pl.when(w > 0).then(100 * pl.col(c) / w)).alias(c.replace("_ns", "_pct"))
    frame = r.select(
        "rank",
        pl.col("source").str.split("/").list.last().alias("trace"),
        "gpu_name",
        "iterations",
        (pl.col("step_median_ns") / 1e6).alias("step_median_ms"),
        pct("compute_ns"),
        pct("exposed_comm_ns"),
        (100 * pl.col("overlap_fraction")).alias("overlap_pct"),
        pct("host_wait_ns"),
        pct("idle_ns"),
        _ms("wait_ns"),
        (pl.col("caused_wait_ns") / 1e6).alias("caused_ms"),
        (pl.col("clock_offset_ns") / 1e3).alias("offset_us"),
        "straggler_count",
    )
    share = "% of window"
    return Table(
        "ranks",
        frame,
        {
            "rank": num("rank"),
            "trace": text("trace"),
            "gpu_name": text("GPU"),
            "iterations": num("iterations"),
            "step_median_ms": num("median step", "ms", "%.3f"),
            "compute_pct": num("compute", share, "%.1f", DEFINITIONS["compute_ns"] + WINDOW),
            "exposed_comm_pct": num(
                "exposed comm", share, "%.1f", DEFINITIONS["exposed_comm_ns"] + WINDOW
            ),
            "overlap_pct": num(
                "comm overlapped", "% of comm", "%.1f", DEFINITIONS["overlap_fraction"]
            ),
            "host_wait_pct": num(
                "host/launch", share, "%.1f", DEFINITIONS["host_wait_ns"] + WINDOW
            ),
            "idle_pct": num("idle", share, "%.1f", DEFINITIONS["idle_ns"] + WINDOW),
            "wait_ms": num("waited in collectives", "ms", "%.3f", DEFINITIONS["wait_ns"]),
            "caused_ms": num("made others wait", "ms", "%.3f", DEFINITIONS["caused_wait_ns"]),
            "offset_us": num(
                "clock offset",
                "µs",
                "%.1f",
                "median of how much later than the others this rank left the shared collectives (0 "
                "on one host)",
            ),
            "straggler_count": num("straggler in", help="iterations"),
        },
        height=360,
    )


def collectives_table(mr) -> Table:
    c = mr.collectives.select(
        "kind",
        (pl.col("size_bucket_bytes") / 2**20).alias("size_mib"),
        "ranks",
        "count",
        _ms("total_ns"),
        _ms("exposed_ns"),
        (100 * pl.col("exposed_fraction")).alias("exposed_pct"),
        (pl.col("size_min_bytes") / 2**20).alias("min_mib"),
        (pl.col("size_max_bytes") / 2**20).alias("max_mib"),
        "sized_count",
    )
    return Table(
        "collectives",
        c,
        {
            "kind": text("collective"),
            "size_mib": num(
                "size up to",
                "MiB",
                "%.3f",
                "power-of-two bucket of max(in, out) elements × dtype size, from the profiler's "
                "args (— not recorded)",
            ),
            "ranks": num("ranks"),
            "count": num("kernels"),
            "total_ms": num("time", "ms", "%.3f"),
            "exposed_ms": num(
                "exposed", "ms", "%.3f", "each kernel's time not covered by compute kernels"
            ),
            "exposed_pct": num("exposed", "%", "%.1f"),
            "min_mib": num("smallest", "MiB", "%.3f"),
            "max_mib": num("largest", "MiB", "%.3f"),
            "sized_count": num("with size"),
        },
        caption="Collective kernels over all ranks by kind and message size (PyTorch ≥ 2.1 records "
        "sizes).",
    )


def build(src: Source, params: dict) -> Report:
    """The Ranks page of a URL (strict: an unknown run, metric or threshold is an error)."""
    view = resolve(src, params, strict=True)
    return report(src, view)


def report(src: Source, view: RanksView) -> Report:
    if view.run is None:
        return Report("Ranks").add(
            *view.problems,
            Text("No PyTorch profiler traces or Nsight Systems exports in the store.", "info"),
        )
    mr = src.multirank(view.run, step_pattern=view.step or None, threshold=view.threshold)
    rep = Report("Ranks", subtitle=f"{code(view.run.source_name)} · run {view.run.run_id}")
    d = mr.distribution["job"]
    n_strag = int(mr.iterations["straggler_rank"].is_not_null().sum())
    win = int(mr.ranks["window_ns"].sum() or 0)
    exposed = int(mr.ranks["exposed_comm_ns"].sum() or 0)
    ms = lambda v: "—" if v is None else f"{v / 1e6:,.3f} ms"  # noqa: E731
    rep.add(
        *view.problems,
        Text(
            f"{mr.ranks.height} ranks · {mr.iterations.height} iterations · straggler tolerance "
            f"{100 * view.threshold:g} % of the median step · collective instances left together: "
            f"{mr.sync.get('synchronising', 0)} of {mr.sync.get('instances', 0)} · "
            f"[timeline]({link('timeline', run=view.run.run_id)})",
            "caption",
        ),
        *[Text(p, "warning") for p in mr.problems],
        Metrics(
            [
                ("iteration time, median", ms(d.get("median_ns")), DEFINITIONS["job_ns"]),
                ("p90", ms(d.get("p90_ns")), "90th percentile of the iteration time"),
                (
                    "iterations with a straggler",
                    f"{n_strag} of {mr.iterations.height}",
                    DEFINITIONS["straggler"],
                ),
                (
                    "exposed communication",
                    f"{100 * exposed / win:.1f} %" if win else "—",
                    "exposed communication / GPU window, summed over ranks",
                ),
            ],
            lower_is_better=True,
        ),
    )
    rep.add(Heading("Ranks × iterations"), *heatmap(mr, view))
    rep.add(Heading("Straggler of each iteration"), straggler_table(mr))
    rep.add(Heading("Per rank"), rank_table(mr))
    if mr.collectives.height:
        rep.add(Heading("Collectives"), collectives_table(mr))
    if mr.distribution["histogram"]:
        bins = pl.DataFrame(mr.distribution["histogram"]).select(
            (pl.col("lo_ns") / 1e6).alias("lo"), (pl.col("hi_ns") / 1e6).alias("hi"), "count"
        )
        rep.add(
            Heading("Iteration-time distribution"),
            Chart(
                "iteration_histogram",
                charts.histogram_bars(
                    bins, "iteration time [ms] (slowest rank)", "Iteration times"
                ),
            ),
        )
    rep.add(
        Heading("Definitions", 3),
        Text("\n".join(f"- **{k.replace('_', ' ')}**: {v}" for k, v in DEFINITIONS.items())),
    )
    return rep
