"""Compare: run B against run A (?a=RUN&b=RUN&noise=5&pair=N&mq=TEXT), the result `kernelscope
compare A B` prints (Source.compare: analyzers.compare and analyzers.baseline).

Two Nsight Compute runs: launches matched by name and launch configuration with their durations, and
one matched pair metric by metric (every shared metric, grouped by section, the ones that moved most
first). Two traces: their busy / idle / launch statistics and the per-kernel medians. Every row
states its noise threshold; a change inside a threshold wider than twice the noise floor is "too
noisy to judge". Without ?a and ?b the page compares the newest run with the newest *related* one
(sharing at least half of its kernels), never two unrelated runs; two bench runs compare case by
case.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import polars as pl

from analyzers.baseline import RELATED_MIN
from analyzers.compare import CompareResult
from analyzers.units import fmt_ns
from collectors.schema import KINDS, TRACE_KINDS
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
from dashboard.web.reports.run_links import pick_run
from dashboard.web.reports.gpus import gpu_pair_blocks
from dashboard.core.source import Source

COMPARABLE = KINDS  # every stored kind (the format registry)


@dataclass
class CompareView:
    a: Run | None
    b: Run | None
    noise_pct: float = 5.0
    pair: int = 0
    mq: str = ""
    problems: list[str] = field(default_factory=list)

    def params(self) -> dict:
        return {
            "a": self.a.run_id if self.a else None,
            "b": self.b.run_id if self.b else None,
            "noise": None if self.noise_pct == 5.0 else f"{self.noise_pct:g}",
            "pair": self.pair or None,
            "mq": self.mq or None,
        }


def resolve(src: Source, params: dict) -> CompareView:
    problems: list[str] = []
    a = b = None
    if params.get("b"):
        b = pick_run(src, params.get("b"), COMPARABLE, problems)
    if params.get("a"):
        a = pick_run(src, params.get("a"), COMPARABLE, problems)
    if b is None and a is None:  # the newest run that has a related run, and that run
        for r in src.runs(COMPARABLE):
            partner = src.related_run(r)
            if partner is not None:
                a, b = partner, r
                break
    elif a is None:
        a = src.related_run(b)
        if a is None:
            problems.append(
                f"No run in the store is related to B ({code(b.source_name)}): pick run A."
            )
    elif b is None:
        b = src.related_run(a)
        if b is None:
            problems.append(
                f"No run in the store is related to A ({code(a.source_name)}): pick run B."
            )
    try:
        noise = float(params.get("noise") or 5.0)
        if not (0 <= noise <= 100 and math.isfinite(noise)):
            raise ValueError
    except ValueError:
        problems.append(f"Noise floor {code(params.get('noise'))} is not a percentage; using 5 %.")
        noise = 5.0
    try:
        pair = max(0, int(params.get("pair") or 0))
    except ValueError:
        pair = 0
    return CompareView(a, b, noise, pair, params.get("mq") or "", problems)


def related_note(r: CompareResult) -> list[Text]:
    rel = r.related
    if rel["related"]:
        return [
            Text(
                f"A and B share {rel['shared']} kernel names ({rel['a_only']} only in A, "
                f"{rel['b_only']} only in B).",
                "caption",
            )
        ]
    return [
        Text(
            f"A and B share only {rel['shared']} of "
            f"{rel['shared'] + rel['a_only'] + rel['b_only']} kernel names ({rel['jaccard']:.0%}; "
            f"related runs share ≥ {RELATED_MIN:.0%}): they look like different programs, so only "
            "the shared kernels below mean anything.",
            "warning",
        )
    ]


def trace_blocks(r: CompareResult) -> list:
    st = r.stats.rename({"a_display": "a_txt", "b_display": "b_txt"})
    get = {row["stat"]: row for row in st.iter_rows(named=True)}

    def card(key):
        row = get[key]
        delta = (
            None
            if row["change_pct"] is None or row["status"] in ("unchanged", "—")
            else f"{row['change_pct']:+.1f} %"
        )
        # B's value on the card, A's in its label: "A → B" in a quarter of the page clipped ("184 ms
        # → 15.…")
        return (
            f"{row['label'].split(' (')[0]} (A: {row['a_txt']})",
            row["b_txt"],
            row["label"] + f"; A {row['a_txt']} → B {row['b_txt']}; {row['status']}",
            delta,
        )

    story = [Text(" ".join(r.story), "info")] if r.story else []
    first = "step_median_ns" if get["step_median_ns"]["a"] is not None else "run_ns"
    # three cards (each value whole at 900 px); the table below has every statistic
    return story + [
        Metrics(
            [
                card(first),
                card("launches_per_step" if first == "step_median_ns" else "kernel_count"),
                card("gpu_idle_fraction"),
            ],
            lower_is_better=True,
        ),
        Heading("Trace statistics"),
        Table(
            "trace_stats",
            st,
            {
                "label": text("statistic", "analyzers.timeline.summarize of each trace"),
                "a_txt": text("A"),
                "b_txt": text("B"),
                "change_pct": num("change", "%", "%+.1f", "B / A − 1"),
                "threshold_pct": num("noise threshold", "%", "%.1f"),
                "noise": text("threshold from"),
                "status": text(
                    "verdict",
                    "higher / lower beyond the threshold; too noisy to judge when the threshold is "
                    "over twice the noise floor",
                ),
            },
            static=True,
            caption="The traces' own statistics: what the run did (kernels), how long it took "
            "and where the time went, not the sum of kernel durations (B doing less work can "
            "shorten that while the run gets slower).",
        ),
    ]


def metric_blocks(r: CompareResult, view: CompareView) -> list:
    if not r.pairs:
        return [
            Text(
                "No launch of A matches a launch of B (same name and launch configuration): no "
                "metrics to compare.",
                "info",
            )
        ]
    i = min(view.pair, len(r.pairs) - 1)
    p = r.pairs[i]
    d = r.metrics[i]
    if view.mq:
        d = d.filter(
            pl.col("metric").str.contains(view.mq, literal=True)
            | pl.col("section").str.contains(view.mq, literal=True)
        )
    counts = d["status"].value_counts().sort("status")
    summary = ", ".join(f"{n} {s}" for s, n in counts.iter_rows())
    return [
        Heading(f"Metrics: launch {p['a_id']} of A vs launch {p['b_id']} of B"),
        Text(
            f"{code(p['name'])} · {p['config']} · {d.height} shared metrics ({summary}); grouped "
            "by the Nsight Compute section that shows them (raw counters by hardware unit), the "
            "ones that moved most beyond their noise first.",
            "caption",
        ),
        Table(
            "metric_diff",
            d.select(
                "section",
                "metric",
                "unit",
                "a",
                "b",
                "change_pct",
                "threshold_pct",
                "kind",
                "status",
            ),
            {
                "section": text("section"),
                "metric": text("metric (ncu name)"),
                "unit": text("unit"),
                "a": num("A", help="value in A (base units)"),
                "b": num("B", help="value in B (base units)"),
                "change_pct": num("change", "%", "%+.2f", "B / A − 1"),
                "threshold_pct": num(
                    "noise threshold",
                    "%",
                    "%.1f",
                    "from the metric's kind (launch parameter 0 %, work count 0.5 %, traffic 2 %, "
                    "time or rate: the noise floor) or the launches' spread",
                ),
                "kind": text("metric kind"),
                "status": text("verdict"),
            },
            height=460,
        ),
    ]


def build(src: Source, params: dict) -> Report:
    view = resolve(src, params)
    rep = Report("Compare")
    for p in view.problems:
        rep.add(Text(p, "warning"))
    a, b = view.a, view.b
    if a is None or b is None or a.run_id == b.run_id:
        return rep.add(
            Text(
                "Compare needs two related runs of the same kind (two Nsight Compute reports, two "
                "traces, or two bench runs; related = sharing at least half of their kernels). "
                "Pick them above, or upload a second profile of the same program.",
                "info",
            )
        )
    rep.subtitle = (
        f"A = {code(a.source_name)} ({a.run_id}) · B = {code(b.source_name)} ({b.run_id})"
    )
    ga, gb = a.meta.get("gpu_name") or "unknown GPU", b.meta.get("gpu_name") or "unknown GPU"
    if a.kind == "bench" or b.kind == "bench":
        if a.kind != b.kind:
            return rep.add(
                Text(
                    f"Run A is {a.kind} and run B is {b.kind}: only runs of the same kind compare.",
                    "error",
                )
            )
        return rep.add(*gpu_pair_blocks(src, a.run_id, b.run_id))
    if (a.kind in TRACE_KINDS) != (b.kind in TRACE_KINDS):
        return rep.add(
            Text(
                f"Run A is {a.kind} and run B is {b.kind}: only runs of the same kind compare "
                "(Nsight Compute with Nsight Compute, traces with traces).",
                "error",
            )
        )
    # the GPU each run is analysed on (named, inferred or given)
    if a.kind == "ncu" and b.kind == "ncu":
        ga, gb = src.ncu(a).gpu.name, src.ncu(b).gpu.name
        for label, r in (("A", a), ("B", b)):
            for f in src.ncu(r).flagged:
                rep.add(
                    Text(
                        f"Run {label}, launch {f['id']} ({code(f['name'])}) is implausible "
                        f"for its GPU: " + "; ".join(f["flags"]) + ".",
                        "error",
                    )
                )
    r = src.compare(a, b, view.noise_pct / 100)
    per_launch, dims = r.kind == "ncu", r.dims
    c = r.totals["counts"]
    rep.add(
        Text(
            f"A: **{ga}** · B: **{gb}** · kernels matched by name and launch configuration"
            + (
                ""
                if dims
                else " (blocks per grid and threads per block: a run lacks grid and "
                "block dimensions)"
            )
            + (
                " (the n-th launch of each in A with the n-th in B)"
                if per_launch
                else " (per-launch medians; the launches' spread widens the threshold)"
            )
            + f"; a change within max({view.noise_pct:g} %, 2 × the combined relative spread) "
            "is *unchanged*, or *too noisy to judge* when that threshold is over "
            f"{2 * view.noise_pct:g} %.",
            "caption",
        ),
        *related_note(r),
    )
    if r.kind == "trace":
        rep.add(*trace_blocks(r))
    else:
        rep.add(
            Metrics(
                [
                    (
                        "kernel time A",
                        fmt_ns(r.totals["total_a_ns"]),
                        "sum of kernel durations in A",
                    ),
                    (
                        "kernel time B",
                        fmt_ns(r.totals["total_b_ns"]),
                        "sum of kernel durations in B",
                    ),
                    (
                        "change",
                        "—"
                        if r.totals["change_pct"] is None
                        else f"{r.totals['change_pct']:+.1f} %",
                        "B / A − 1",
                    ),
                ]
            )
        )
    rep.add(
        Metrics(
            [
                (
                    "faster / slower / unchanged",
                    f"{c['faster']} / {c['slower']} / {c['unchanged']}",
                    None,
                ),
                (
                    "too noisy to judge",
                    f"{c['too noisy to judge']}",
                    "the launches spread more than twice the noise floor",
                ),
                ("added / removed", f"{c['added']} / {c['removed']}", None),
            ]
        )
    )
    shown = r.kernels.with_columns(
        kernel=pl.col("name"),
        a_us=pl.col("median_ns_a") / 1e3,
        b_us=pl.col("median_ns_b") / 1e3,
        spread_a_us=pl.col("spread_ns_a") / 1e3,
        spread_b_us=pl.col("spread_ns_b") / 1e3,
        delta_us=pl.col("delta_ns") / 1e3,
        nth=pl.col("occurrence") + 1,
    )
    cols = {
        "status": text("status"),
        "kernel": text("kernel"),
        "config": text("launch configuration"),
    }
    if per_launch:
        cols["nth"] = num(
            "launch #", help="n-th launch of this kernel and configuration in the run"
        )
    else:
        cols.update({"n_a": num("launches A"), "n_b": num("launches B")})
    cols.update(
        {
            "a_us": num("A", "µs", "%.2f", "duration (per-launch median for traces)"),
            "b_us": num("B", "µs", "%.2f", "duration (per-launch median for traces)"),
        }
    )
    if not per_launch:
        cols.update(
            {
                "spread_a_us": num("spread A", "µs", "%.2f", "standard deviation of A's launches"),
                "spread_b_us": num("spread B", "µs", "%.2f", "standard deviation of B's launches"),
            }
        )
    cols.update(
        {
            "change_pct": num("change", "%", "%+.1f", "B / A − 1"),
            "threshold_pct": num(
                "noise threshold", "%", "%.1f", "max(noise floor, 2 × combined relative spread)"
            ),
            "delta_us": num("total Δ", "µs", "%+.1f", "total time B − total time A of this kernel"),
        }
    )
    rep.add(Heading("Kernels"), Table("compare", shown, cols))
    matched = shown.filter(pl.col("change_pct").is_not_null())
    if matched.height:
        lab = matched.with_columns(
            label=pl.concat_str(
                [
                    pl.col("name").str.slice(0, 60),
                    pl.lit(" "),
                    pl.col("config"),
                    pl.when(pl.col("occurrence") > 0)
                    .then(pl.format(" #{}", pl.col("occurrence") + 1))
                    .otherwise(pl.lit("")),
                ]
            )
        )
        rep.add(
            Chart(
                "change",
                charts.change_bars(
                    lab.select("label", "change_pct", "threshold_pct", "status").head(40),
                    view.noise_pct,
                ),
            )
        )
    if per_launch and ga != gb:
        rep.add(Heading(f"GPU vs GPU: {ga} vs {gb}, each against its own peaks"))
        rep.add(
            Table(
                "gpu_vs_gpu",
                shown.filter(pl.col("change_pct").is_not_null()),
                {
                    "kernel": text("kernel"),
                    "config": text("launch configuration"),
                    "dram_pct_a": num(
                        f"DRAM of {ga}'s peak", "%", "%.1f", "achieved / that GPU's spec DRAM peak"
                    ),
                    "dram_pct_b": num(
                        f"DRAM of {gb}'s peak", "%", "%.1f", "achieved / that GPU's spec DRAM peak"
                    ),
                    "fp32_pct_a": num(
                        f"FP32 of {ga}'s peak", "%", "%.1f", "achieved / that GPU's spec FP32 peak"
                    ),
                    "fp32_pct_b": num(
                        f"FP32 of {gb}'s peak", "%", "%.1f", "achieved / that GPU's spec FP32 peak"
                    ),
                    "change_pct": num("duration change", "%", "%+.1f"),
                },
            )
        )
    if per_launch:
        rep.add(*metric_blocks(r, view))
    return rep
