"""Blocks that put an Nsight Compute run and a timeline of the same program side by side
(analyzers.join through Source.join): on the Kernels page, what the timeline says of each profiled
launch (launches per step, share of the step's GPU time, launch delay, traced vs ncu duration) and
the findings ranked by time lost per step; on the Timeline page, each kernel's ncu-derived bound
with a link to its ncu detail.

Which timeline goes with an ncu run: the one the URL names (?trace=RUN on Kernels, ?ncu=RUN on
Timeline), else the newest run of the other kind on the same GPU whose join matches at least half of
the ncu launches.
"""

from __future__ import annotations

import polars as pl

from analyzers.units import fmt_ns, fmt_pct
from collectors.errors import RunNotFound
from collectors.schema import TRACE_KINDS
from collectors.store import Run
from dashboard.web.reports.report_blocks import Col, Heading, Metrics, Table, Text, code, num, text
from dashboard.web.reports.run_links import link
from dashboard.core.source import Source
from analyzers.join import bounds_by_signature, name_overlap

MIN_MATCHED = 0.5
MAX_CANDIDATES = 8


def _good(res, n_ncu: int) -> bool:
    return n_ncu > 0 and len(res.matched) >= MIN_MATCHED * n_ncu


def trace_for(src: Source, ncu_run: Run, wanted: str | None, problems: list[str]):
    """(trace run, join result) for an ncu run: the URL's ?trace=RUN, else the best newest match; (None, None)."""
    n = src.ncu(ncu_run).kernels.height
    if wanted:
        try:
            t = src.get_kind(wanted, TRACE_KINDS, "a timeline")
            return t, src.join(ncu_run, t)
        except RunNotFound as e:
            problems.append(f"Timeline {code(wanted)}: {e}")
            return None, None
    gpu = ncu_run.meta.get("gpu_name")
    for t in [r for r in src.runs(TRACE_KINDS) if r.meta.get("gpu_name") == gpu][:MAX_CANDIDATES]:
        res = _try_join(src, ncu_run, t, problems)
        if res is not None and _good(res, n):
            return t, res
    return None, None


def _try_join(src: Source, ncu_run: Run, trace_run: Run, problems: list[str]):
    """The join of two candidate runs, or None when one of them cannot be analysed (said once, in
    place: one damaged run never takes the page of another down) or when too few of the ncu run's
    kernels are in the trace at all to match half of its launches (analyzers.join.name_overlap: no
    join computed)."""
    try:
        if (
            name_overlap(
                src.table(ncu_run.run_id, "kernels"), src.table(trace_run.run_id, "gpu_ops")
            )
            < MIN_MATCHED
        ):
            return None
        return src.join(ncu_run, trace_run)
    except Exception as e:  # noqa: BLE001 - a candidate's problem is shown, the page stands
        problems.append(
            f"Run {code(ncu_run.run_id)} or {code(trace_run.run_id)} cannot be joined "
            f"({type(e).__name__}); left out."
        )
        return None


def ncu_for(src: Source, trace_run: Run, wanted: str | None, problems: list[str]):
    """(ncu run, join result) for a timeline: the URL's ?ncu=RUN, else the newest ncu run on the
    same GPU whose launches it matches (at least half of them); (None, None)."""
    if wanted:
        try:
            a = src.get_kind(wanted, ("ncu",), "an Nsight Compute run")
            return a, src.join(a, trace_run)
        except RunNotFound as e:
            problems.append(f"Nsight Compute run {code(wanted)}: {e}")
            return None, None
    gpu = trace_run.meta.get("gpu_name")
    for a in [r for r in src.runs(("ncu",)) if r.meta.get("gpu_name") == gpu][:MAX_CANDIDATES]:
        res = _try_join(src, a, trace_run, problems)
        if res is not None and _good(res, src.ncu(a).kernels.height):
            return a, res
    return None, None


def kernels_overview_blocks(trace: Run | None, res) -> list:
    """The Kernels page's section on the timeline: findings ranked by time lost per step."""
    if trace is None:
        return [
            Text(
                "No timeline of this program in the store: ingest a PyTorch profiler trace or an "
                "Nsight Systems export of the same program to see how often each kernel runs per "
                "step and what its findings cost per step (`kernelscope join NCU TRACE`).",
                "caption",
            )
        ]
    d = res.as_dict()
    rows = [
        {
            "launch": m["ncu_id"],
            "kernel": m["base"],
            "per_step": m["count_per_step"],
            "share_pct": m["share_of_step_gpu_time"] * 100,
            "delay_us": None
            if m["launch_delay_median_ns"] is None
            else m["launch_delay_median_ns"] / 1e3,
            "ncu_us": None if m["ncu_duration_ns"] is None else m["ncu_duration_ns"] / 1e3,
            "trace_us": m["trace_duration_median_ns"] / 1e3,
            "agree": {True: "yes", False: "no", None: "—"}[m["durations_agree"]],
            "bound": m["bound"],
            "finding": m["top_finding"],
            "lost_step_us": None if m["lost_per_step_ns"] is None else m["lost_per_step_ns"] / 1e3,
            "confidence": m["confidence"],
        }
        for m in d["matched"]
    ]
    frame = pl.DataFrame(
        rows,
        schema={
            "launch": pl.Int64,
            "kernel": pl.String,
            "per_step": pl.Float64,
            "share_pct": pl.Float64,
            "delay_us": pl.Float64,
            "ncu_us": pl.Float64,
            "trace_us": pl.Float64,
            "agree": pl.String,
            "bound": pl.String,
            "finding": pl.String,
            "lost_step_us": pl.Float64,
            "confidence": pl.String,
        },
    )
    out = [
        Heading("In the timeline of the same program"),
        Text(
            f"{code(trace.source_name)} (run {trace.run_id}): ncu's launches matched in "
            f"{d['window_label'] or 'the trace'}, {len(d['matched'])} of "
            f"{len(d['matched']) + len(d['unmatched_ncu'])}; {d['steps']} step(s), GPU busy "
            f"{fmt_ns(d['step_gpu_busy_median_ns'])} per step (median). [Open the timeline]"
            f"({link('timeline', run=trace.run_id)})",
            "caption",
        ),
        Table(
            "joined",
            frame,
            {
                "launch": num("launch id"),
                "kernel": text("kernel", "function name (analyzers.join.base_name)"),
                "per_step": num(
                    "per step",
                    fmt="%.0f",
                    help="launches of this kernel and "
                    "configuration per step (median over the trace's steps)",
                ),
                "share_pct": num(
                    "step GPU time",
                    "%",
                    "%.1f",
                    "this launch's time / the step's GPU busy time (median)",
                ),
                "delay_us": num("launch delay", "µs", "%.1f", "median, HTA's definition (trace)"),
                "ncu_us": num("ncu", "µs", "%.1f", "gpu__time_duration.sum"),
                "trace_us": num(
                    "trace", "µs", "%.1f", "median duration of this launch over the steps"
                ),
                "agree": text(
                    "agree", "ncu within the trace's p10–p90 spread ±10 % (analyzers.join)"
                ),
                "bound": text(
                    "bound",
                    "ncu-derived (DRAM, FP32, tensor, shared memory, latency); launch when the "
                    "kernel is shorter than its launch call in the trace",
                ),
                "finding": text("biggest finding"),
                "lost_step_us": num(
                    "lost per step",
                    "µs",
                    "%.1f",
                    "the finding's loss per launch × the step's launches it stands for",
                ),
                "confidence": text(
                    "match", "high: name, configuration and order agree; medium: name and order"
                ),
            },
            caption="Ranked by the time the biggest finding costs per step.",
        ),
    ]
    for u in d["unmatched_ncu"]:
        out.append(Text(f"ncu launch {u['ncu_id']} not in the timeline: {u['reason']}.", "caption"))
    reasons: dict[str, int] = {}
    for u in d["unmatched_trace"]:
        reasons[u["reason"]] = reasons.get(u["reason"], 0) + 1
    for reason, n in reasons.items():
        out.append(Text(f"{n} kernel(s) of the step are not in this ncu run: {reason}.", "caption"))
    return out


def launch_blocks(trace: Run | None, res, launch_id: int) -> list:
    """What the timeline says of one profiled launch (the Kernels page's detail)."""
    if trace is None or res is None:
        return []
    m = next((x for x in res.matched if x.ncu_id == launch_id), None)
    if m is None:
        why = next(
            (u["reason"] for u in res.unmatched_ncu if u["ncu_id"] == launch_id), "not matched"
        )
        return [Text(f"In the timeline {code(trace.source_name)}: {why}.", "caption")]
    return [
        Heading("In the timeline of the same program", 3),
        Metrics(
            [
                (
                    "launches per step",
                    f"{m.count_per_step:.0f}",
                    "this kernel and configuration, median over the steps",
                ),
                (
                    "share of the step's GPU time",
                    fmt_pct(m.share_of_step_gpu_time * 100),
                    "kernel time / GPU busy time",
                ),
                (
                    "launch delay",
                    fmt_ns(m.launch_delay_median_ns),
                    "median (HTA): kernel start − end of its launch call",
                ),
                (
                    "traced duration",
                    fmt_ns(m.trace_duration_median_ns),
                    f"p10–p90 {fmt_ns(m.trace_duration_p10_ns)} – "
                    f"{fmt_ns(m.trace_duration_p90_ns)}; ncu {fmt_ns(m.ncu_duration_ns)}",
                ),
                (
                    "time lost per step",
                    fmt_ns(m.lost_per_step_ns),
                    "biggest finding × launches per step",
                ),
            ]
        ),
        Text(
            f"ncu vs trace: {m.duration_note}. Match: {m.confidence} "
            f"({m.step and f'step {m.step}'}, position {m.position}).",
            "caption",
        ),
    ]


def timeline_bounds(src: Source, ncu_run: Run | None, res) -> pl.DataFrame:
    """Per kernel signature of the timeline (analyzers.join.bounds_by_signature): the ncu-derived
    bound ("varies" when its profiled launches differ) and a link to the ncu detail of its first
    profiled launch."""
    schema = {"signature": pl.String, "ncu_bound": pl.String, "ncu_link": pl.String}
    if ncu_run is None or res is None or not res.matched:
        return pl.DataFrame(schema=schema)

    rows = [
        {
            "signature": r["signature"],
            "ncu_bound": r["bound"],
            "ncu_link": link("kernels", run=ncu_run.run_id, kernel=r["ncu_id"]),
        }
        for r in bounds_by_signature(res)
    ]
    return pl.DataFrame(rows, schema=schema)


BOUND_COL = {
    "ncu_bound": text(
        "bound (ncu)",
        "DRAM, FP32, tensor, shared memory, latency; launch when shorter than its launch call "
        "(analyzers.join)",
    ),
    "ncu_link": Col("ncu detail", kind="link", link_text="open"),
}
