"""Timeline
(?run=RUN&device=RANK:DEVICE&kernel=REGEX&speedup=S&t0=NS&t1=NS&op=SRC:ROW&show=SECTION&color=bound|name
&ncu=RUN): PyTorch profiler and Nsight Systems runs.

Where each device's time goes (GPU-, launch- or host-bound, with the evidence), the zoomable
timeline of every stream, CPU thread and NVTX range with the detail of a clicked event
(dashboard.web.reports.timeline_detail), launch delays (the ones over 100 µs named), idle gaps and their
causes, the top kernels, and a what-if (chosen kernels made faster) next to Amdahl. The per-device
numbers come from `Source.trace(run).summary` (analyzers.timeline.summarize), the same object
`kernelscope analyze` prints.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import polars as pl

from analyzers import timeline
from analyzers.errors import UnknownName
from analyzers.remedy import remedy_sentence
from analyzers.quantities import TIMELINE_BY_KEY
from analyzers.timeline import DEFINITIONS
from analyzers.units import fmt_short
from collectors.errors import RunNotFound
from collectors.schema import TRACE_KINDS
from collectors.store import Run
from dashboard.web import charts
from dashboard.web.reports.report_blocks import (
    Col,
    col_of,
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
from dashboard.web.reports import join_blocks
from dashboard.web.reports.run_links import notes_blocks
from dashboard.web.reports.timeline_detail import event_detail, timeline_block
from dashboard.core.source import Source
from analyzers.join import signature
from analyzers.steps import PROFILER_TOLERANCE
from analyzers.whatif import what_if

MAX_POINTS = 5000  # points per timeline chart (the largest gaps / a sample of kernels beyond that)
# bars of the time-per-step chart (the first steps; the statistics cover every step)
MAX_STEP_BARS = 400


@dataclass
class TimelineView:
    run: Run | None
    # "all" and each "rank:device" of the run
    devices: list[str] = field(default_factory=lambda: ["all"])
    device: str = "all"
    kernel: str = ""  # what-if: regex searched in kernel names
    speedup: float = 2.0
    # the timeline's window, ns after the trace's first event (None: whole trace)
    t0: float | None = None
    t1: float | None = None
    op: str = ""  # the clicked event: "gpu_ops:12" (table:row)
    show: str = "devices"  # the section below the timeline (SECTIONS)
    problems: list[Text] = field(default_factory=list)
    # ?ncu=RUN: an Nsight Compute run of the same program (default: found by the join)
    ncu: str | None = None
    # kernels coloured by "bound" (ncu, when joined) or "name"; None: bound if joined
    color: str | None = None

    def params(self) -> dict:
        return {
            "run": self.run.run_id if self.run else None,
            "device": None if self.device == "all" else self.device,
            "kernel": self.kernel or None,
            "speedup": f"{self.speedup:g}",
            "t0": None if self.t0 is None else f"{self.t0:.0f}",
            "t1": None if self.t1 is None else f"{self.t1:.0f}",
            "op": self.op or None,
            "ncu": self.ncu,
            "show": None if self.show == "devices" else self.show,
            "color": self.color,
        }


def device_ops(src: Source, view: TimelineView) -> pl.DataFrame:
    """The run's GPU ops (kernels, memcpy, memset) on the chosen device, or on all of them."""
    g = src.trace(view.run).gpu_ops
    if view.device == "all":
        return g
    r, d = (int(x) for x in view.device.split(":"))
    return g.filter((pl.col("rank") == r) & (pl.col("device") == d))


def resolve(src: Source, params: dict) -> TimelineView:
    """?run=RUN&device=RANK:DEVICE|all&kernel=REGEX&speedup=S; the what-if defaults to the kernel
    with the most time, 2x faster."""
    problems: list[Text] = []
    runs = src.runs(TRACE_KINDS)
    run, wanted = None, params.get("run")
    if wanted:
        try:
            run = src.get(wanted)
        except RunNotFound:
            run = None
        if run is None or run.kind not in TRACE_KINDS:
            problems.append(Text(f"No trace run {code(wanted)} in this store.", "error"))
            run = None
    view = TimelineView(
        run or (runs[0] if runs else None), problems=problems, ncu=params.get("ncu") or None
    )
    if view.run is None:
        return view
    # cheap: the page's first paint must not wait for the summary
    devs = src.trace_devices(view.run)
    view.devices = ["all"] + [f"{r}:{d}" for r, d in devs]
    dev = params.get("device") or "all"
    if dev not in view.devices:
        problems.append(Text(f"No device {code(dev)} in this run; showing all devices.", "warning"))
    elif len(devs) > 1:
        view.device = dev
    view.kernel = (
        params.get("kernel") or ""
    )  # empty: the what-if picks the kernel with the most time
    raw = params.get("speedup")
    try:
        speedup = float(raw) if raw not in (None, "") else 2.0
    except ValueError:
        speedup = math.nan
    if not math.isfinite(speedup):
        problems.append(Text(f"Speedup {code(raw)} is not a number; using 2.", "warning"))
        speedup = 2.0
    view.speedup = min(1e6, max(0.01, speedup))
    try:
        t0 = float(params["t0"]) if params.get("t0") not in (None, "") else None
        t1 = float(params["t1"]) if params.get("t1") not in (None, "") else None
        if (
            t0 is not None
            and t1 is not None
            and not (math.isfinite(t0) and math.isfinite(t1) and t1 > t0)
        ):
            raise ValueError
        view.t0, view.t1 = t0, t1
    except ValueError:
        problems.append(
            Text(
                f"Time window {code(params.get('t0'))}–{code(params.get('t1'))} is not a window; "
                "showing the whole trace.",
                "warning",
            )
        )
    op = params.get("op") or ""
    if op and not re.fullmatch(r"(gpu_ops|api_calls|cpu_ops|nvtx):\d+", op):
        problems.append(Text(f"No event {code(op)}; nothing selected.", "warning"))
        op = ""
    view.op = op
    show = params.get("show") or "devices"
    if show not in SECTIONS:
        problems.append(
            Text(f"Unknown section {code(show)}; showing the per-device statistics.", "warning")
        )
        show = "devices"
    view.show = show
    color = params.get("color") or None
    if color not in (None, *COLORS):
        problems.append(
            Text(
                f"Unknown colouring {code(color)}; kernels are coloured by their ncu bound when an "
                "ncu run of the same program is joined, else by name.",
                "warning",
            )
        )
        color = None
    view.color = color
    return view


def header(view: TimelineView, meta: dict | None = None) -> list:
    run, meta = view.run, meta or view.run.meta
    counts = meta.get("counts", {})
    source = (
        "PyTorch profiler (Kineto) trace"
        if run.kind == "kineto"
        else f"Nsight Systems export {meta.get('nsys_version', '')}"
    )
    ranks = meta.get("ranks") or []
    rid = getattr(run, "run_id", None)
    txt = (
        f"**{meta.get('gpu_name') or 'GPU name not in the trace'}** · source: {source} · "
        f"{counts.get('kernels', 0):,} kernels, {counts.get('kernels_with_launch', 0):,} with "
        f"their launch call in the trace · {len(ranks)} rank{'s' if len(ranks) != 1 else ''}"
        + (f" · [iterations and stragglers per rank](ranks?run={rid})" if rid else "")
    )
    return [Text(txt, "caption"), *notes_blocks(meta)]


def definitions(run: Run) -> list:
    perfetto = (
        f"*Download for Perfetto* (beside the timeline) or `kernelscope export {run.run_id} "
        "--perfetto trace.json` writes this run's tables as a Chrome trace (streams, CPU threads, "
        "NVTX ranges, launch → kernel arrows) that https://ui.perfetto.dev opens (Open trace file)"
        + (
            f"; the original trace is {code(run.artifact_path)}."
            if run.kind == "kineto"
            else "; an nsys SQLite export has no Perfetto reader of its own."
        )
    )
    return [
        Text(
            "\n".join(
                [f"- **{k.replace('_', ' ')}**: {v}" for k, v in DEFINITIONS.items()]
                + [f"- **Perfetto**: {perfetto}"]
            )
        )
    ]


def _kernel_summary(src: Source, view: TimelineView) -> pl.DataFrame:
    """analyzers.timeline.kernel_summary of the chosen device (of the whole run: the summary's, computed once)."""
    if view.device == "all":
        return src.trace(view.run).summary.kernels
    return timeline.kernel_summary(device_ops(src, view))


def timeline_cols(keys) -> dict[str, Col]:
    """The columns of a device table, from the timeline's quantity catalog (analyzers.quantities)."""
    return {k: col_of(TIMELINE_BY_KEY[k]) for k in keys}


def device_summary(src: Source, view: TimelineView) -> pl.DataFrame:
    """The summary rows (analyzers.timeline.summarize) of the chosen device, or of every device."""
    d = src.trace(view.run).summary.devices
    if view.device == "all":
        return d
    r, dev = (int(x) for x in view.device.split(":"))
    return d.filter((pl.col("rank") == r) & (pl.col("device") == dev))


def verdict_blocks(src: Source, view: TimelineView) -> list:
    """Where each device's time goes: GPU-, launch- or host-bound
    (analyzers.timeline.bound_verdict), with the evidence."""
    s = device_summary(src, view)
    if not s.height:
        return []
    rows = s.select(
        "rank",
        "device",
        "bound",
        "bound_evidence",
        (pl.col("run_ns") / 1e6).alias("run_ms"),
        (pl.col("window_ns") / 1e6).alias("window_ms"),
    )
    r = src.trace(view.run).summary.run
    multi = len(view.run.meta.get("ranks") or []) > 1
    out: list = [
        Heading("Where the time goes"),
        Text(
            f"Run time **{r['run_ns'] / 1e6:,.3f} ms** (first to last event, host calls and GPU ops"
            + (f"; the slowest rank, {r['slowest_rank']}" if multi else "")
            + ").",
            "caption",
        ),
    ]
    if rows.height == 1:
        r = rows.row(0, named=True)
        kind = "success" if r["bound"] == "GPU-bound" else "warning"
        kind = "error" if r["bound"] == "abstains" else kind
        out.append(
            Text(
                f"**{r['bound']}** (rank {r['rank']}, GPU {r['device']}). {r['bound_evidence']}",
                kind,
            )
        )
    else:
        out.append(
            Table(
                "bound",
                rows,
                {
                    "rank": num("rank"),
                    "device": num("device"),
                    "bound": text("verdict", DEFINITIONS["bound"]),
                    "bound_evidence": text("evidence"),
                    "run_ms": num("rank's run time", "ms", "%.3f", DEFINITIONS["run_time"]),
                    "window_ms": num(
                        "GPU window",
                        "ms",
                        "%.3f",
                        "last GPU op end − first GPU op start on this device",
                    ),
                },
                static=True,
            )
        )
    return out


def steps_blocks(src: Source, view: TimelineView) -> list:
    """Time per step (analyzers.steps): the steady-state median and p90, launches and kernels per
    step, the warm-up steps apart, the profiler's estimated cost where the host is the bottleneck,
    and a chart per step."""
    s = src.trace(view.run).summary
    st = s.steps
    if st is None:
        return []
    r = view.device.split(":")[0] if view.device != "all" else None
    info = st.rank(int(r)) if r is not None else st.main
    if not info or not info.get("step_count"):
        return [
            Text(
                "No steps found: no `ProfilerStep#N`, no annotation or NVTX range named step, "
                "iteration or token N, no graph replays and no repeated kernel sequence. "
                "`kernelscope analyze RUN --step REGEX` names them.",
                "caption",
            )
        ]
    ms = lambda ns: "—" if ns is None else f"{ns / 1e6:,.3f} ms"  # noqa: E731
    out: list = []
    if info.get("steady_count"):
        cards = [
            (
                "time per step",
                fmt_short(info["step_median_ns"], "ns"),
                f"steady-state median over {info['steady_count']} of {info['step_count']} steps, "
                f"first to last GPU op each launched; p90 {ms(info['step_p90_ns'])}",
            ),
            (
                "GPU busy in a step",
                f"{100 * (info['busy_fraction_median'] or 0):.1f} %",
                "union of the step's GPU ops / its time (median)",
            ),
            (
                "launch calls per step",
                f"{info['launches_median']:g}",
                f"median; {info['graph_launches_median']:g} graph launches (a graph replay is one "
                f"call); {info['kernels_median']:g} kernels per step",
            ),
        ]
        rem = s.remedy if info is st.main else None
        if rem:
            label = {
                "estimate": "with a CUDA graph (model)",
                "upper bound": "with no gaps (bound)",
            }.get(rem["kind"], "top kernel 2× faster (model)")
            value = ("≥ " if rem["kind"] == "upper bound" else "≈ ") + fmt_short(
                rem["predicted_step_ns"], "ns"
            )
            cards.append(
                (label, value, remedy_sentence(rem), "−" + fmt_short(rem["gain_ns"], "ns"))
            )
        out.append(Metrics(cards, lower_is_better=True))
        if rem:
            out.append(Text(remedy_sentence(rem), "info"))
    lines = [
        f"Steps from {info['how']}"
        + (f" (rank {info['rank']})" if len(st.ranks) > 1 else "")
        + (f"; {info['kernels_median']:g} kernels per step." if info.get("steady_count") else ".")
    ]
    for w in info.get("warmup", []):
        host = f", {ms(w['host_ns'])} on the host" if w["host_ns"] is not None else ""
        lines.append(
            f"Warm-up step {w['step']}: {ms(w['gpu_ns'])} on the GPU{host} ({w['reasons']}); kept "
            "out of the median."
        )
    for w in info.get("set_apart", []):
        lines.append(
            f"Step {w['step']} set apart: {w['phase']}"
            + (f" ({w['reasons']})" if w["reasons"] else "")
            + "."
        )
    bound = device_summary(src, view)["bound"].to_list()
    ov = info.get("profiler_overhead_median_ns")
    if (
        ov
        and info.get("host_median_ns")
        and any(
            b in ("launch-bound", "host-bound", "partly launch-bound", "partly host-bound")
            for b in bound
        )
    ):
        lines.append(
            f"The host is the bottleneck, and the profiler adds to it: {info['events_median']:g} "
            f"recorded host events per step (about {st.profiler_ns_per_event / 1e3:g} µs each) = "
            f"**{ms(ov)}** of the {ms(info['host_median_ns'])} host time per step (an estimate, "
            f"±{PROFILER_TOLERANCE:.0%}); without the profiler a step takes about "
            f"{ms(max(0.0, (info['step_median_ns'] or 0) - ov))}."
        )
    out.append(Text(" ".join(lines), "caption"))
    rows = st.steps.filter(pl.col("rank") == info["rank"]).select(
        "step",
        (pl.col("gpu_ns") / 1e6).alias("gpu_ms"),
        (pl.col("busy_ns") / 1e6).alias("busy_ms"),
        (pl.col("host_ns") / 1e6).alias("host_ms"),
        "launches",
        "kernels",
        "phase",
        "reasons",
    )
    shown = (
        f" The chart shows the first {MAX_STEP_BARS:,} of the {rows.height:,} steps."
        if rows.height > MAX_STEP_BARS
        else ""
    )
    out.append(
        Chart(
            "steps",
            charts.step_bars(rows.head(MAX_STEP_BARS)),
            "Each step's time on the GPU clock: from the first to the last GPU op its launch "
            f"calls started (a graph replay's kernels follow its cudaGraphLaunch).{shown}",
        )
    )
    return out


def integrity_blocks(src: Source, view: TimelineView) -> list:
    """The trace's integrity checks (analyzers.integrity): what failed or deserves a warning, and how many passed."""
    checks = src.trace(view.run).summary.integrity or []
    bad = [c for c in checks if c["status"] in ("fail", "warn")]
    ok = sum(c["status"] == "pass" for c in checks)
    if not bad:
        return [
            Text(
                f"Integrity: all {ok} applicable checks pass (launch calls, clocks, stream order, "
                "graph replays, NCCL names, steps).",
                "caption",
            )
        ]
    out = []
    for c in bad:
        kind = "error" if c["status"] == "fail" and c["blocking"] else "warning"
        out.append(
            Text(
                f"Integrity {'failure' if c['status'] == 'fail' else 'warning'}: **{c['label']}**: "
                f"{c['detail']}" + (" — the verdict abstains." if kind == "error" else "."),
                kind,
            )
        )
    out.append(Text(f"{ok} other integrity checks pass.", "caption"))
    return out


#: what kernel marks are coloured by (?color=…): their Nsight Compute bound
#: (analyzers.join.kernel_bounds) or name
COLORS = ("bound", "name")

#: the page's sections below the timeline (?show=…); the export has all of them
SECTIONS = {
    "devices": "Per device",
    "delays": "Launch delays",
    "idle": "Idle gaps",
    "kernels": "Top kernels",
    "whatif": "What-if",
}


def overview(src: Source, view: TimelineView) -> list:
    """Every statistics section: GPU busy time and launch statistics per device, launch delays, idle
    gaps and their causes, the top kernels (the export shows them all; the page one at a time)."""
    if device_ops(src, view).height == 0:
        return [Text("No GPU operations (kernels, memcpy, memset) in this run.", "warning")]
    return (
        device_blocks(src, view)
        + delay_blocks(src, view)
        + idle_blocks(src, view)
        + kernel_blocks(src, view)
    )


def device_blocks(src: Source, view: TimelineView) -> list:
    """GPU busy time and launch statistics per device."""
    g = device_ops(src, view)
    if g.height == 0:
        return [Text("No GPU operations (kernels, memcpy, memset) in this run.", "warning")]
    out: list = []
    tr = src.trace(view.run)
    gpu_name = tr.meta.get("gpu_name")
    floor_ns = tr.summary.launch_floor_ns
    if floor_ns:
        out.append(
            Text(
                f"Launch floor {floor_ns / 1e3:.1f} µs per kernel: back-to-back empty-kernel "
                f"launches measured by `kernelscope bench` on a {gpu_name} (event timing).",
                "caption",
            )
        )
    s = device_summary(src, view)
    keys = (
        "rank",
        "device",
        "verdict",
        "kernel_count",
        "kernels_with_launch",
        "busy_ns",
        "window_ns",
        "idle_fraction",
        "short_kernel_share",
        "host_wait_fraction",
        "kernels_per_s",
    )
    out += [
        Heading("GPU busy time and launch statistics per device"),
        Table("timeline_summary", s.select(keys), timeline_cols(keys)),
    ]

    return out


def delay_blocks(src: Source, view: TimelineView) -> list:
    """Launch delays: histogram by launch call, statistics per device, the kernels delayed over 100 µs."""
    g = device_ops(src, view)
    s = device_summary(src, view)
    out: list = []
    out.append(Heading("Launch delay"))
    k = timeline.kernels(g).filter(pl.col("launch_delay_ns").is_not_null())
    if k.height:
        h = k.select(
            (pl.col("launch_delay_ns") / 1e3).alias("launch_delay_us"), pl.col("launch_api")
        )
        if h.height > MAX_POINTS:
            h = h.sample(MAX_POINTS, seed=0)
        keys = (
            "rank",
            "device",
            "kernels_with_launch",
            "launch_delay_median_ns",
            "launch_delay_p90_ns",
            "launch_delay_max_ns",
            "queue_count",
            "queue_median_ns",
            "delay_outliers",
        )
        out += [
            Chart("launch_delay", charts.launch_delay_histogram(h)),
            Table("launch_delay_stats", s.select(keys), timeline_cols(keys)),
        ]
        late = timeline.launch_delay_outliers(g, limit=50)
        if late.height:
            t0 = src.timeline_tracks(view.run).origin_ns
            shown = late.select(
                "rank",
                "device",
                "stream",
                pl.col("name").str.slice(0, 120).alias("kernel"),
                ((pl.col("start_ns") - t0) / 1e6).alias("at_ms"),
                (pl.col("launch_delay_ns") / 1e3).alias("delay_us"),
                "launch_api",
                (pl.col("duration_ns") / 1e3).alias("duration_us"),
            )
            out.append(
                Table(
                    "delay_outliers",
                    shown,
                    {
                        "rank": num("rank"),
                        "device": num("device"),
                        "stream": num("stream"),
                        "kernel": text("kernel"),
                        "at_ms": num("starts at", "ms", "%.3f", "after the trace's first event"),
                        "delay_us": num("launch delay", "µs", "%.1f", DEFINITIONS["launch_delay"]),
                        "launch_api": text("launch call"),
                        "duration_us": num("duration", "µs", "%.2f"),
                    },
                    caption=f"The {late.height} "
                    f"kernels{' (longest 50)' if late.height == 50 else ''} that started more than "
                    "100 µs after their launch call returned (HTA's cutoff), longest delay first.",
                    static=late.height <= 12,
                )
            )
    else:
        out.append(
            Text(
                "No kernel has its launch call in this trace, so launch delays cannot be computed.",
                "info",
            )
        )

    return out


def idle_blocks(src: Source, view: TimelineView) -> list:
    """GPU idle gaps per stream, their HTA categories, and the temporal breakdown."""
    g = device_ops(src, view)
    tr = src.trace(view.run)
    out: list = []
    out.append(Heading("GPU idle gaps per stream"))
    sg = timeline.stream_gaps(g)
    if sg.height:
        t0 = int(g["start_ns"].min())
        pts = (
            sg.sort("gap_ns", descending=True)
            .head(MAX_POINTS)
            .select(
                pl.format("{}:{}:{}", "rank", "device", "stream").alias("stream"),
                ((pl.col("start_ns") - t0) / 1e6).alias("t_ms"),
                (pl.col("gap_ns") / 1e3).alias("gap_us"),
                pl.col("category").replace_strict(
                    timeline.IDLE_CATEGORY_WORDS, default=pl.col("category")
                ),
                pl.col("next_name").str.slice(0, 80).alias("next op"),
            )
        )
        cats = (
            tr.summary.idle_categories if view.device == "all" else timeline.idle_categories(g)
        ).with_columns(
            pl.format("{}:{}:{}", "rank", "device", "stream").alias("stream_key"),
            (pl.col("idle_ns") / 1e3).alias("idle_us"),
            pl.col("category").replace_strict(
                timeline.IDLE_CATEGORY_WORDS, default=pl.col("category")
            ),
        )
        words = [timeline.IDLE_CATEGORY_WORDS[c] for c in timeline.IDLE_CATEGORIES]
        out += [
            Chart("idle_gaps", charts.idle_gaps(pts, words)),
            Chart(
                "idle_categories",
                charts.idle_category_bars(cats, words),
                "Idle categories: " + DEFINITIONS["idle_categories"] + ".",
            ),
        ]
    else:
        out.append(Text("No idle gaps between ops on any stream.", "info"))
    tb = tr.summary.temporal if view.device == "all" else timeline.temporal_breakdown(g)
    fractions = ("compute_fraction", "communication_fraction", "memcpy_fraction", "idle_fraction")
    out.append(
        Table(
            "temporal_breakdown",
            tb.select("rank", "device", *[pl.col(c) * 100 for c in fractions]),
            {
                "rank": num("rank"),
                "device": num("device"),
                **{c: num(c.removesuffix("_fraction"), "% of window", "%.1f") for c in fractions},
            },
            caption="Compute: non-NCCL kernels; communication: NCCL kernels not overlapping "
            "compute; memcpy: copies and memsets not hidden under kernels; idle: the rest. They "
            "add up to the window.",
        )
    )

    return out


def kernel_blocks(src: Source, view: TimelineView) -> list:
    """The kernels with the most total time."""
    out: list = []
    out.append(Heading("Top kernels by total time"))
    ks = (
        _kernel_summary(src, view)
        .head(20)
        .select(
            pl.col("name").str.slice(0, 120).alias("kernel"),
            "count",
            (pl.col("total_ns") / 1e3).alias("total_us"),
            (pl.col("mean_ns") / 1e3).alias("mean_us"),
            (pl.col("median_ns") / 1e3).alias("median_us"),
            (pl.col("min_ns") / 1e3).alias("min_us"),
            (pl.col("max_ns") / 1e3).alias("max_us"),
            (pl.col("busy_share") * 100).alias("busy_pct"),
            "origin",
            pl.col("name").alias("_name"),
        )
    )
    cols = {
        "kernel": text("kernel"),
        "origin": text(
            "from",
            "where the kernel comes from, by its name (torch.compile's Inductor kernels are named "
            "triton_*)",
        ),
        "count": num("count"),
        "total_us": num("total", "µs", "%.1f"),
        "mean_us": num("mean", "µs", "%.2f"),
        "median_us": num("median", "µs", "%.2f"),
        "min_us": num("min", "µs", "%.2f"),
        "max_us": num("max", "µs", "%.2f"),
        "busy_pct": num(
            "share of busy time", "%", "%.1f", "total / GPU busy time (union of all ops)"
        ),
    }
    problems: list[str] = []
    ncu_run, joined = join_blocks.ncu_for(src, view.run, view.ncu, problems)
    out += [Text(p, "warning") for p in problems]
    if ncu_run is not None:
        b = join_blocks.timeline_bounds(src, ncu_run, joined)
        ks = ks.with_columns(
            pl.col("_name").map_elements(signature, return_dtype=pl.String).alias("signature")
        ).join(b, on="signature", how="left")
        cols.update(join_blocks.BOUND_COL)
        out.append(
            Table(
                "top_kernels",
                ks,
                cols,
                caption=f"Bound and detail from the Nsight "
                f"Compute run {code(ncu_run.source_name)} ({ncu_run.run_id}) of the same program "
                "(analyzers.join).",
            )
        )
    else:
        out.append(Table("top_kernels", ks, cols))
    return out


def default_kernel(src: Source, view: TimelineView) -> str:
    """The what-if's default: the name (without template arguments and parameters) of the kernel with the most time."""
    top = _kernel_summary(src, view).head(1)["name"].to_list()
    return top[0][:120].split("<")[0].split("(")[0] if top else "."


def whatif(src: Source, view: TimelineView) -> list:
    """The run time if the kernels matching view.kernel ran view.speedup times faster, next to Amdahl."""
    if not view.kernel:
        view.kernel = default_kernel(src, view)
    tr = src.trace(view.run)
    try:
        w = what_if(tr.gpu_ops, tr.api_calls, view.kernel, float(view.speedup))
    except ValueError as e:
        return [Text(f"No what-if: {code(e)}", "error")]
    ms = lambda ns: f"{ns / 1e6:,.3f} ms"  # noqa: E731

    def change(ns: float):
        """The change as shown; none when it rounds to nothing (no red arrow for a change of 0.000 ms)."""
        return None if abs(ns) < 0.5e3 else ms(ns)

    multi = len(w.ranks) > 1
    who = (
        (
            f"On rank {w.slowest_rank} (the slowest), {w.slowest_rank_matched_kernels:,} kernels "
            f"match {code(view.kernel)}, {w.slowest_rank_matched_kernel_ns / 1e6:,.3f} ms of its "
            "kernel time" + (f" ({w.matched_kernels:,} on all ranks)" if multi else "")
        )
        if multi
        else f"{w.matched_kernels:,} kernels match {code(view.kernel)}, "
        f"{w.matched_kernel_ns / 1e6:,.3f} ms of kernel time"
    )
    blocks: list = [
        Metrics(
            [
                ("measured run time", ms(w.run_ns), timeline.DEFINITIONS["run_time"]),
                (
                    "what-if (trace dependencies)",
                    ms(w.predicted_ns),
                    "replay of the trace's own dependencies",
                    change(w.predicted_ns - w.run_ns),
                ),
                (
                    "Amdahl",
                    ms(w.amdahl_ns),
                    "run × ((1 − f) + f / s)",
                    change(w.amdahl_ns - w.run_ns),
                ),
            ],
            lower_is_better=True,
        )
    ]
    if not w.matched_kernels:
        blocks.append(Text(f"No kernel matches {code(view.kernel)}: nothing changes.", "info"))
    return blocks + [
        Text(
            f"{who} (f = {w.fraction:.1%} of {'its' if multi else 'the'} run), made "
            f"{view.speedup:g}× faster. What-if: {timeline.DEFINITIONS['whatif']}. The replay keeps "
            "launch calls, stream order and synchronisations; it cannot see waits between streams "
            "or ranks (so it may be optimistic there), and the host floor it keeps is why it can "
            "promise less than Amdahl.",
            "caption",
        )
    ]


def report(
    view: TimelineView,
    overview_blocks: list,
    whatif_blocks: list,
    meta: dict | None = None,
    src: Source | None = None,
    top: list | None = None,
) -> Report:
    """The page's blocks in one report (definitions last); meta: the run's metadata as the Source
    reads it; `top` (verdict, timeline, selected event) before the statistics."""
    rep = Report(
        "Timeline",
        subtitle=f"{code(view.run.source_name)} · run {view.run.run_id}"
        + ("" if view.device == "all" else f" · device {view.device}"),
    )
    rep.add(*view.problems, *header(view, meta), *(top or []), *overview_blocks)
    if whatif_blocks:
        rep.add(Heading("What if a kernel were faster?"), *whatif_blocks)
    return rep.add(
        Heading("Definitions (how every number on this page is computed)", 3),
        *definitions(view.run),
    )


def build(src: Source, params: dict) -> Report:
    """The Timeline page of a URL. An export does not fall back: a run that is not a trace, or a
    device the run does not have, is an error."""
    if params.get("run"):
        src.get_kind(
            params["run"], TRACE_KINDS, "a PyTorch profiler trace or Nsight Systems export"
        )
    view = resolve(src, params)
    if view.run is None:
        return Report("Timeline").add(
            Text("No PyTorch profiler traces or Nsight Systems exports in the store.", "info")
        )
    if params.get("device") not in (None, "", *view.devices):
        raise UnknownName(
            "device",
            params["device"],
            f"run {view.run.run_id} has rank:device " + ", ".join(view.devices),
        )
    top = (
        verdict_blocks(src, view)
        + steps_blocks(src, view)
        + integrity_blocks(src, view)
        + [Heading("Timeline"), timeline_block(src, view)]
        + event_detail(src, view)
    )
    ov = overview(src, view)
    return report(
        view,
        ov,
        whatif(src, view) if device_ops(src, view).height else [],
        src.meta(view.run),
        src,
        top,
    )
