"""Kernels: one Nsight Compute run
(?run=RUN&by=kernel|launch&kernel=LAUNCH_ID&sort=COLUMN&desc=1&cols=GROUP
&find=TEXT&q=METRIC&show=detail|charts|metrics).

More: docs/architecture.md, *dashboard.web.reports.kernels*.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import polars as pl

from analyzers.gpus import GPUSpec
from analyzers.kernel_groups import group_of, kernel_groups, run_story, story_sentence
from analyzers.kernel_models import launch_frame
from analyzers.kernel_models import summary as textbook_summary
from analyzers.kernels import missing_groups
from analyzers.ncu_run import NcuAnalysis
from analyzers.roofline import flop_roofline, instruction_roofline
from analyzers.quantities import OLD_PAGE_KEYS, QUANTITIES
from analyzers.units import fmt_bytes, fmt_ns, fmt_rate
from collectors.store import Run
from dashboard.web import charts
from dashboard.web.reports.report_blocks import (
    col_of,
    Chart,
    Col,
    Heading,
    Metrics,
    Report,
    Table,
    Text,
    code,
    num,
    text,
)
from dashboard.web.reports import join_blocks, textbook_blocks
from dashboard.web.reports.run_links import notes_blocks, pick_run
from dashboard.web.reports.kernel_detail import detail, hotspot_blocks, metric_blocks, stall_chart
from dashboard.core.source import Source

#: display column -> analysis column: what the table shows of NcuAnalysis.kernels, under the
#: analysis's own keys and in its units (each column's Col scales what it shows: the quantity
#: catalog's `scale`, analyzers.quantities); `kernel` is the analysis's `name` shortened
#: (head…tail, the full name on hover)
DISPLAY = {
    "kernel": "display_name",
    **{q.key: q.key for q in QUANTITIES if q.on_page and q.key != "name"},
}
#: the same, of one row per kernel (analyzers.kernel_groups): totals, and time-weighted means of the
#: rates; the duration column holds the median of the kernel's launches
GROUP_DISPLAY = {
    **{k: v for k, v in DISPLAY.items() if k not in ("duration_ns", "lost_ns")},
    "duration_ns": "median_ns",
    "launches": "launches",
    "total_ns": "total_ns",
    "share": "share",
    "lost_ns": "lost_total_ns",
}


KERNEL_COLS: dict[str, Col] = {
    **{q.column: col_of(q) for q in QUANTITIES if q.on_page},
    "config": text(
        "grid · block",
        "launch configuration: blocks in the grid · threads in a block (x×y×z where y or z is not "
        "1)",
    ),
    "launches": num(
        "launches", help="launches of this kernel (same name, template arguments, grid and block)"
    ),
    "total_ns": num(
        "total",
        "µs",
        "%.1f",
        "Σ gpu__time_duration.sum over its launches (ncu counter)",
        scale=1e-3,
    ),
    "share": num(
        "share",
        "%",
        "%.1f",
        "its total / the run's total kernel time (the profiled launches)",
        scale=100,
    ),
    **textbook_blocks.MODEL_COLS,
    "flag": text(
        "implausible",
        "what cannot be right for this GPU (analyzers.plausibility): a rate above the spec peak, a "
        "launch the GPU cannot run; the launch's other numbers are suspect too",
    ),
}
#: one row per kernel: the time columns that differ from a launch's (the median duration, the lost
#: time summed)
GROUP_COLS = {
    **KERNEL_COLS,
    "duration_ns": num(
        "median", "µs", "%.2f", "median gpu__time_duration.sum of its launches", scale=1e-3
    ),
    "lost_ns": num(
        "est. lost",
        "µs",
        "%.1f",
        "the biggest finding's estimate, summed over the launches",
        scale=1e-3,
    ),
}
SORT_KEYS = tuple(KERNEL_COLS)
_ALWAYS = ("id", "kernel", "duration_ns")
_ALWAYS_GROUP = ("kernel", "config", "launches", "total_ns", "share", "duration_ns")
#: the summary columns of one row per kernel (the rates per resource are in the other column groups)
#: (Speed of Light per kernel is in Memory and Compute: beside the finding it left the kernel's name
#: 12 characters)
SUMMARY_PER_KERNEL = ("model_verdict", "model_win_ns", "top_finding", "lost_ns")
#: ?by=: one row per kernel (default) or per launch
BY = {"kernel": "Kernels", "launch": "Launches"}
#: what the page shows below the table (?show=…); the export has all of them
SECTIONS = {
    "detail": "Launch detail",
    # Nsight Compute's Source page: the SASS text and lines are read from the report on demand
    # (about 2 ms an address in NVIDIA's library), so the detail never waits for them
    "source": "Source hot spots",
    "charts": "Rooflines & charts",
    "metrics": "Every metric",
}
#: column groups (each fits a 1,440-px screen beside the sidebar): name -> (label, columns after id,
#: kernel, duration)
COLUMN_GROUPS: dict[str, tuple[str, tuple[str, ...]]] = {
    "summary": (
        "Summary",
        (
            "top_finding",
            "lost_ns",
            "sm_throughput_pct",
            "dram_throughput_pct",
            "dram_peak_fraction",
            "tensor_peak_fraction",
            "achieved_occupancy_pct",
        ),
    ),
    "memory": (
        "Memory",
        (
            "dram_throughput_pct",
            "dram_bandwidth_gbps",
            "dram_peak_fraction",
            "dram_measured_fraction",
            "global_ld_sectors_per_request",
            "global_ld_ideal_sectors_per_request",
            "global_ld_coalescing_ratio",
        ),
    ),
    "compute": (
        "Compute",
        (
            "sm_throughput_pct",
            "fp32_tflops",
            "tensor_tflops",
            "tensor_type",
            "tensor_peak_fraction",
            "arithmetic_intensity",
        ),
    ),
    "occupancy": (
        "Occupancy & launch",
        (
            "achieved_occupancy_pct",
            "theoretical_occupancy_pct",
            "predicted_occupancy_pct",
            "occupancy_limiter",
            "registers_per_thread",
            "block_size",
            "grid_size",
        ),
    ),
    "shared": (
        "Shared memory",
        ("smem_ld_conflict_degree", "smem_st_conflict_degree", "smem_conflict_degree"),
    ),
    "textbook": (
        "Textbook model",
        (
            "model_class",
            "model_case",
            "model_pred_ns",
            "model_ratio",
            "model_verdict",
            "model_win_ns",
            "model_traffic",
        ),
    ),
}


def display_frame(a: NcuAnalysis, by: str = "launch", models=None) -> pl.DataFrame:
    """The analysis' kernel table under its own keys and units (the columns' Col scale what they
    show: µs, %), plus the columns the charts and the
    detail need; with by="kernel", one row per kernel (analyzers.kernel_groups); with `models`
    (analyzers.kernel_models), the textbook model's columns."""
    k = a.kernels if models is None else a.kernels.join(launch_frame(models), on="id", how="left")
    k = k if by == "launch" else kernel_groups(k)
    spec = DISPLAY if by == "launch" else GROUP_DISPLAY
    shown = [pl.col(src).alias(name) for name, src in spec.items() if src in k.columns]
    keep = [
        c
        for c in (
            "kernel_name",
            "raw_name",
            "short_name",
            "duration_ns",
            "dram_bytes",
            "flop_fp32",
            "flop_tensor",
            "flop_total",
            "smem_static_bytes",
            "smem_dynamic_bytes",
            "block_x",
            "block_y",
            "block_z",
            "grid_x",
            "grid_y",
            "grid_z",
            "lost_share",
            "model_class",
            "model_pred_ns",
            "model_meas_ns",
            "model_win_ns",
            "model_verdict",
            "model_case",
            "model_traffic",
        )
        if c in k.columns
    ]

    def dims(p: str) -> pl.Expr:
        x, y, z = (pl.col(f"{p}_{a}").cast(pl.String) for a in "xyz")
        return (
            pl.when((pl.col(f"{p}_y") == 1) & (pl.col(f"{p}_z") == 1))
            .then(x)
            .otherwise(pl.concat_str([x, y, z], separator="×"))
        )

    config = (
        pl.concat_str([dims("grid"), dims("block")], separator=" · ")
        if all(f"{p}_{a}" in k.columns for p in ("grid", "block") for a in "xyz")
        else pl.lit(None, pl.String)
    ).alias("config")
    return textbook_blocks.display_columns(
        k.select(
            *shown,
            *[c for c in keep if c not in spec],
            config,
            pl.col("flags").list.join("; ").replace("", None).alias("flag"),
        ).with_columns(
            # a share of the tensor peak means something only for a launch that used the tensor
            # cores
            tensor_peak_fraction=pl.when(pl.col("tensor_type").is_not_null()).then(
                pl.col("tensor_peak_fraction")
            )
        )
    )


@dataclass
class KernelsView:
    run: Run | None
    kernel: int | None
    sort: str = "id"
    desc: bool = False
    q: str = ""
    find: str = ""
    cols: str = "summary"
    show: str = "detail"
    problems: list[str] = field(default_factory=list)
    # ?trace=RUN: the timeline of the same program (default: found by the join)
    trace: str | None = None
    by: str = "kernel"  # one row per kernel, or per launch

    @property
    def default_sort(self) -> tuple[str, bool]:
        return ("id", False) if self.by == "launch" else ("model_win_ns", True)

    def params(self) -> dict:
        plain = (self.sort, self.desc) == self.default_sort
        # ?desc: launches sort ascending unless desc=1; kernels descending unless desc=0
        desc = ("1" if self.desc else None) if self.by == "launch" else (None if self.desc else "0")
        return {
            "run": self.run.run_id if self.run else None,
            "by": None if self.by == "kernel" else self.by,
            "kernel": self.kernel,
            "sort": None if plain else self.sort,
            "desc": None if plain else desc,
            "q": self.q or None,
            "find": self.find or None,
            "cols": None if self.cols == "summary" else self.cols,
            "show": None if self.show == "detail" else self.show,
            "trace": self.trace,
        }


def find_filter(find: str) -> pl.Expr:
    """Rows whose full demangled name matches `find`: a case-insensitive regular expression, or the
    literal text when it is not a valid one."""
    try:
        re.compile(find)
        pl.Series(["x"]).str.contains(f"(?i){find}")
        return pl.col("raw_name").str.contains(f"(?i){find}") | pl.col("kernel_name").str.contains(
            f"(?i){find}"
        )
    except (re.error, pl.exceptions.PolarsError):
        return pl.col("raw_name").str.to_lowercase().str.contains(
            find.lower(), literal=True
        ) | pl.col("kernel_name").str.to_lowercase().str.contains(find.lower(), literal=True)


def resolve(src: Source, params: dict) -> KernelsView:
    problems: list[str] = []
    run = pick_run(src, params.get("run"), ("ncu",), problems)
    kernel = None
    if run is not None:
        ids = src.ncu(run).kernels["id"].to_list()
        raw = params.get("kernel")
        try:
            kernel = int(raw) if raw not in (None, "") else None
        except ValueError:
            kernel = None
        if raw not in (None, "") and kernel not in ids:
            problems.append(
                f"No launch {code(raw)} in this run; showing launch {ids[0] if ids else '—'}."
            )
            kernel = None
        if kernel is None and ids:
            kernel = ids[0]
            # the table's first row: the most to win, else time
            if (params.get("by") or "kernel") == "kernel":
                top = first_kernel(src, run, params)
                kernel = top if top is not None else kernel
    by = params.get("by") or "kernel"
    if by not in BY:
        problems.append(f"Unknown row kind {code(by)} (kernel or launch); one row per kernel.")
        by = "kernel"
    # a link shared before the page's keys were the analysis's (?sort=duration_us) still sorts
    sort = OLD_PAGE_KEYS.get(params.get("sort"), params.get("sort"))
    desc = (
        (params.get("desc") in ("1", "true", "yes"))
        if by == "launch"
        else (params.get("desc") not in ("0", "false", "no"))
    )
    if sort is None:
        sort = "id" if by == "launch" else "model_win_ns"
    if sort not in SORT_KEYS:
        problems.append(
            f"Unknown sort column {code(sort)}; sorted by "
            + ("launch id." if by == "launch" else "the time to win against the model.")
        )
        sort, desc = ("id", False) if by == "launch" else ("model_win_ns", True)
    cols = params.get("cols") or "summary"
    if cols not in COLUMN_GROUPS:
        problems.append(f"Unknown column group {code(cols)}; showing the summary.")
        cols = "summary"
    show = params.get("show") or "detail"
    if show not in SECTIONS:
        problems.append(f"Unknown section {code(show)}; showing the launch detail.")
        show = "detail"
    return KernelsView(
        run,
        kernel,
        sort,
        desc,
        params.get("q") or "",
        params.get("find") or "",
        cols,
        show,
        problems,
        params.get("trace") or None,
        by,
    )


def gpu_caption(gpu: GPUSpec, measured: dict) -> str:
    peak = gpu.dram_bandwidth_bytes_per_s
    cc = f"CC {gpu.cc[0]}.{gpu.cc[1]}" if gpu.cc else "CC unknown"
    parts = [f"GPU **{gpu.name}** ({cc}, {gpu.sm_count} SMs"]
    if peak:
        parts.append(f", DRAM spec {fmt_rate(peak, 'B/s')}")
    if gpu.fp32_flop_per_s:
        parts.append(f", FP32 spec {fmt_rate(gpu.fp32_flop_per_s, 'FLOP/s')}")
    parts.append(")" if gpu.from_registry else "; specs from the report's device attributes)")
    if measured.get("dram") or measured.get("fp32"):
        m = []
        if measured.get("dram"):
            m.append(f"DRAM {fmt_rate(measured['dram'].value, 'B/s')}")
        if measured.get("fp32"):
            m.append(f"FP32 {fmt_rate(measured['fp32'].value, 'FLOP/s')}")
        parts.append(" · measured ceilings: " + ", ".join(m))
    return "".join(parts)


def _sum_or_missing(col: pl.Series):
    """The sum of a column, None when no launch has it (missing shown as missing, not as 0)."""
    return None if col.null_count() == col.len() else col.sum()


def missing_warnings(a: NcuAnalysis) -> list[Text]:
    """One warning per counter group the report lacks, naming the ncu option that collects it."""
    return [
        Text(
            f"Not in this report: **{', '.join(g['labels'])}** (counters "
            f"{', '.join(f'`{n}`' for n in g['needs'][:3])}"
            + (", …" if len(g["needs"]) > 3 else "")
            + f"). Collect them with "
            f"`{g['collect_with']}`; these columns show — (missing), not zero.",
            "warning",
        )
        for g in missing_groups(a.missing)
    ]


def launches_table(a: NcuAnalysis, view: KernelsView, models=None) -> Table:
    """The run's kernels (one row each, ?by=kernel) or launches (?by=launch) in the chosen column group."""
    per_kernel = view.by == "kernel"
    frame = display_frame(a, view.by, models)
    if view.find:
        frame = frame.filter(find_filter(view.find))
    extra = COLUMN_GROUPS[view.cols][1]
    if per_kernel and view.cols == "summary":
        extra = SUMMARY_PER_KERNEL
    group = [*(_ALWAYS_GROUP if per_kernel else _ALWAYS), *extra]
    group = list(dict.fromkeys(group))
    if view.sort not in group:
        group.append(view.sort)
    labels = GROUP_COLS if per_kernel else KERNEL_COLS
    cols = {
        c: labels[c]
        for c in group
        if (c != "dram_measured_fraction" or a.measured.get("dram")) and c in frame.columns
    }
    sort = view.sort if view.sort in frame.columns else "id"
    shown = frame.sort(sort, descending=view.desc, nulls_last=True, maintain_order=True)
    selected = view.kernel
    if per_kernel:
        groups = kernel_groups(a.kernels)
        selected = group_of(groups, view.kernel)
        what = (
            f"{shown.height} of {groups.height} kernels ({a.kernels.height} launches grouped by "
            "name, template arguments, grid and block; *Rows: Launches* lists each launch)"
        )
    else:
        what = f"{shown.height} of {a.kernels.height} launches"
    return Table(
        "kernels",
        shown,
        cols,
        select="id",
        sort=sort,
        desc=view.desc,
        selected=selected,
        full="raw_name" if "raw_name" in shown.columns else "kernel_name",
        height=min(460, 40 + 30 * max(shown.height, 1)),
        caption=what + (f" matching {code(view.find)}" if view.find else "") + f"; sorted "
        f"by {labels[sort].header}{' (descending)' if view.desc else ''}. Click a row to open "
        + ("its longest launch" if per_kernel else "its detail")
        + " below, a header to "
        "sort by it (both go into the URL).",
    )


def over_peak_text(a: NcuAnalysis, launch: int | None = None) -> list[Text]:
    notes = [n for n in a.over_peak if launch is None or n["id"] == launch]
    if not notes:
        return []
    return [
        Text(
            "Above 100 %: "
            + "; ".join(
                f"launch {n['id']}: {n['pct']:.1f} % of {n['peak']} — {n['reason']}" for n in notes
            )
            + ".",
            "caption",
        )
    ]


def overview(src: Source, view: KernelsView) -> Report:
    rep = Report("Kernels")
    for p in view.problems:
        rep.add(Text(p, "warning"))
    if view.run is None:
        return rep.add(
            Text(
                "No Nsight Compute runs in the store yet: upload a report on the Upload page.",
                "info",
            )
        )
    a = src.ncu(view.run)
    frame = display_frame(a)
    rep.subtitle = f"{code(view.run.source_name)} · run {view.run.run_id}"
    rep.add(
        Text(gpu_caption(a.gpu, a.measured) + f" · {frame.height} profiled launches", "caption")
    )
    if a.gpu_how:
        rep.add(Text(f"GPU identified: {a.gpu_how}", "caption"))
    meta = src.meta(view.run)
    rep.add(*notes_blocks(meta, [a.gpu_warning] if a.gpu_warning else []))
    if (meta.get("precision") or {}).get("note"):
        rep.add(Text("Precision: " + meta["precision"]["note"], "caption"))
    rep.add(*missing_warnings(a))
    for f in a.flagged:
        rep.add(
            Text(
                f"**Implausible for {a.gpu.name}: launch {f['id']}** ({code(f['name'])}): "
                + "; ".join(f["flags"])
                + ". Its findings and rates are shown but should not "
                "be trusted.",
                "error",
            )
        )
    dram = _sum_or_missing(frame["dram_bytes"])
    story = run_story(a.kernels)
    join_problems: list[str] = []
    trace, joined = join_blocks.trace_for(src, view.run, view.trace, join_problems)
    models = textbook_blocks.models_of(src, view.run, view.trace, trace, joined, join_problems)
    tb = textbook_summary(models) if models is not None else None
    pct = lambda v: "—" if v is None else f"{v:.0f} %"  # noqa: E731
    rep.add(
        Metrics(
            [
                (
                    "kernel time",
                    fmt_ns(story["kernel_ns"]),
                    f"sum of gpu__time_duration.sum over {story['launches']:,} profiled launches "
                    f"of {story['kernels']:,} kernels (grouped by name, template arguments, grid "
                    "and block)",
                ),
                *([textbook_blocks.story_card(tb)] if tb is not None else []),
                (
                    "can be won (findings)",
                    "—"
                    if story["lost_ns"] is None
                    else f"{fmt_ns(story['lost_ns'])} ({story['lost_share']:.0%})",
                    "sum over launches of the biggest finding's estimate (analyzers.findings), "
                    "capped at the kernel time"
                    + (
                        ""
                        if story["lost_ns"] is not None
                        else " — no findings: the counters they need are not in this report"
                    ),
                ),
                (
                    "Speed of Light: SM / DRAM",
                    f"{pct(story['sm_pct'])} / {pct(story['dram_pct'])}",
                    "time-weighted over the launches: sm__throughput and gpu__dram_throughput "
                    ".avg.pct_of_peak_sustained_elapsed (ncu counters)",
                ),
            ]
        )
    )
    rep.add(
        Text(
            story_sentence(story)
            + (
                f" DRAM traffic {fmt_bytes(dram)} (dram__bytes_read.sum + dram__bytes_write.sum)."
                if dram is not None
                else ""
            )
            + (f"\n\nAgainst the textbook: {tb['sentence']}" if tb is not None else ""),
            "info",
        )
    )
    rep.add(Heading(BY[view.by]), launches_table(a, view, models), *over_peak_text(a))
    if models is not None:
        rep.add(
            *textbook_blocks.overview_blocks(
                models, None if trace is None else f"{code(trace.source_name)} (run {trace.run_id})"
            )
        )
    rep.add(
        *[Text(p, "warning") for p in join_problems],
        *join_blocks.kernels_overview_blocks(trace, joined),
    )
    return rep


def first_kernel(src: Source, run: Run, params: dict) -> int | None:
    """The longest launch of the kernel the table lists first by default: the most time to win
    against the textbook's model, else (no model) the most time."""
    a = src.ncu(run)
    models = textbook_blocks.models_of(src, run, params.get("trace") or None)
    g = display_frame(a, "kernel", models)
    if "model_win_ns" in g.columns and g["model_win_ns"].drop_nulls().len():
        g = g.sort("model_win_ns", descending=True, nulls_last=True, maintain_order=True)
    top = g.head(1)["id"].to_list()
    return top[0] if top else None


def chart_blocks(src: Source, view: KernelsView) -> list:
    """The run's charts: hierarchical FLOP and instruction rooflines, DRAM bandwidth, occupancy."""
    if view.run is None:
        return []
    a = src.ncu(view.run)
    frame = display_frame(a)
    out: list = []
    g = display_frame(a, "kernel").head(12)
    sol = (
        g.select(
            "kernel",
            pl.int_range(pl.len()).alias("order"),
            pl.col("sm_throughput_pct").alias("SM throughput"),
            pl.col("dram_throughput_pct").alias("DRAM throughput"),
        )
        if "sm_throughput_pct" in g.columns and "dram_throughput_pct" in g.columns
        else None
    )
    if sol is not None and sol.height:
        sol = sol.unpivot(
            index=["kernel", "order"], variable_name="side", value_name="pct"
        ).drop_nulls("pct")
        if sol.height:
            out += [
                Heading("Speed of Light"),
                Chart(
                    "sol",
                    charts.sol_bars(sol),
                    "The kernels with the most time (one bar pair each, time-weighted over their "
                    "launches): how busy the SMs and DRAM were, % of peak (ncu's sm__throughput "
                    "and gpu__dram_throughput). Both low: the kernel waits on latency or is too "
                    "short to fill the GPU.",
                ),
            ]
    out.append(Heading("Rooflines"))
    fr = flop_roofline(a.kernels, a.gpu, a.measured)
    if fr.points.height:
        out.append(
            Chart(
                "roofline",
                charts.hierarchical_roofline(
                    fr.points,
                    fr.roofs,
                    unit="FLOP",
                    title="Hierarchical roofline: FLOP/s vs FLOP per byte at L1, L2, DRAM",
                    selected=view.kernel,
                ),
                "One point per launch and memory level (L1/shared, L2, DRAM), joined by a grey "
                "line; roofs: the level's bandwidth (slanted; spec or ncu peak dashed, measured "
                "solid) and FP32 / BF16-tensor peaks (flat). A point's FLOP are FP32 + "
                "tensor-core FLOP (TF32 runs at ½ of the BF16 roof, FP8 at 2×). The launch shown "
                f"above (launch {view.kernel}) is ringed in red."
                + (
                    f" Launches with no FLOP counted ({', '.join(map(str, fr.not_drawn))}) are on "
                    "the instruction roofline below."
                    if fr.not_drawn
                    else ""
                ),
            )
        )
    else:
        out.append(
            Text("No launch counted floating-point work: see the instruction roofline.", "caption")
        )
    ir = instruction_roofline(a.kernels, a.gpu, a.measured)
    if ir.points.height:
        out.append(
            Chart(
                "instruction_roofline",
                charts.hierarchical_roofline(
                    ir.points,
                    ir.roofs,
                    unit="warp instructions",
                    title="Instruction roofline: every launch, warp instructions/s vs per byte",
                    selected=view.kernel,
                ),
                "Every launch, also copies and transposes with no FLOP: warp instructions executed "
                "(smsp__inst_executed.sum) per second against the issue rate (SMs × 4 × SM clock) "
                "and per byte moved at each level against that level's bandwidth (Ding & Williams' "
                "instruction roofline)."
                + (
                    " Not drawn (no instruction count): launches "
                    f"{', '.join(map(str, ir.not_drawn))}."
                    if ir.not_drawn
                    else ""
                ),
            )
        )
    elif ir.not_drawn:
        out.append(
            Text(
                "No instruction counts in this report (smsp__inst_executed.sum): collect with `ncu "
                "--set full` for the instruction roofline.",
                "caption",
            )
        )
    bars = frame.select(
        pl.col("id").cast(pl.String).alias("launch"), "kernel", pl.col("dram_bandwidth_gbps")
    ).drop_nulls()
    rules = []
    if a.gpu.dram_bandwidth_bytes_per_s:
        rules.append(
            {
                "label": "spec peak",
                "gbps": a.gpu.dram_bandwidth_bytes_per_s / 1e9,
                "measured": False,
            }
        )
    if a.measured.get("dram"):
        rules.append(
            {"label": "measured ceiling", "gbps": a.measured["dram"].value / 1e9, "measured": True}
        )
    if bars.height:
        out.append(Chart("bandwidth", charts.bandwidth_bars(bars, rules)))
    occ = (
        frame.select(
            pl.col("id").cast(pl.String).alias("launch"),
            "achieved_occupancy_pct",
            "theoretical_occupancy_pct",
            "predicted_occupancy_pct",
        )
        .unpivot(index="launch", variable_name="measure", value_name="pct")
        .drop_nulls()
        .with_columns(
            pl.col("measure").replace(
                {
                    "achieved_occupancy_pct": "achieved (ncu counter)",
                    "theoretical_occupancy_pct": "theoretical (ncu)",
                    "predicted_occupancy_pct": "theoretical (our calculator)",
                }
            )
        )
    )
    if occ.height:
        out.append(Chart("occupancy", charts.occupancy_bars(occ)))
    return out + stall_chart(src, view)


def build(src: Source, params: dict) -> Report:
    """The Kernels page of a URL: overview, the selected launch's detail, the charts."""
    view = resolve(src, params)
    rep = overview(src, view)
    return rep.add(
        *detail(src, view),
        *hotspot_blocks(src, view),
        *metric_blocks(src, view),
        *chart_blocks(src, view),
    )
