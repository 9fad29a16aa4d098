"""The Kernels page's "Against the textbook" section and the launch detail's model
(analyzers.kernel_models through dashboard.core.textbook.models_for): how much of the kernel time carries
the chapter's prediction, how much of it runs at the model, the ops with the most time to win
against it, the elementwise chains fusion would merge, and for one launch the model's terms and how
each parameter was inferred. Also the per-launch columns the Kernels table shows beside the counters
(`display_columns` of analyzers.kernel_models.launch_frame)."""

from __future__ import annotations

import polars as pl

from analyzers.kernel_models import (
    FUSED_TOL,
    TIME_TOL,
    TRAFFIC_TOL,
    ModelResult,
    _verdict,
    ops_table,
    param_text,
    summary,
)
from analyzers.units import fmt_bytes, fmt_ns
from collectors.store import Run
from dashboard.web.reports import join_blocks
from dashboard.web.reports.report_blocks import Heading, Metrics, Table, Text, code, num, text
from dashboard.core.source import Source

MODEL_TERMS = (
    "t_pred = n·t0 + max(bytes ÷ DRAM bandwidth, FLOP ÷ compute peak): the chapter's "
    "traffic-or-work time plus the fixed cost of each launch (Experiment 5-2)"
)

#: the table's model columns (per launch; per kernel they are summed over its launches, the ratio
#: recomputed)
MODEL_COLS = {
    "model_class": text(
        "class (model)",
        "what the kernel does: from the aten op and the trace's shapes when a trace of the same "
        "program is joined, else from its counters (analyzers/kernel_classes.py)",
    ),
    "model_case": text(
        "case",
        "the chapter's case whose model judges it (README: The chapter's models on your own "
        "kernels)",
    ),
    "model_pred_ns": num(
        "model", "µs", "%.1f", MODEL_TERMS + " (analyzers/kernel_models.py)", scale=1e-3
    ),
    "model_ratio": num(
        "meas ÷ model", "×", "%.2f", f"measured ÷ predicted; at the model within ±{TIME_TOL:.0%}"
    ),
    "model_verdict": text(
        "vs textbook",
        f"agrees: within ±{TIME_TOL:.0%} of the model; slower: the time above it can be won; "
        "faster: the model's traffic or FLOP is wrong for this launch",
    ),
    "model_win_ns": num(
        "to win",
        "µs",
        "%.1f",
        "measured − predicted, where positive: what a kernel at the ceilings would save",
        scale=1e-3,
    ),
    "model_traffic": text(
        "traffic",
        "DRAM bytes ÷ the minimum traffic from the trace's shapes (at the minimum within "
        f"{TRAFFIC_TOL[0]:g}–{TRAFFIC_TOL[1]:g}×; of the longest launch per kernel)",
    ),
}


def display_columns(frame: pl.DataFrame) -> pl.DataFrame:
    """The model's display columns (the ratio and verdict of the summed times) on a launch or kernel
    frame; its times stay in ns under the analysis's keys (model_pred_ns, model_win_ns)."""
    if "model_pred_ns" not in frame.columns:
        return frame
    ratio = pl.col("model_meas_ns") / pl.col("model_pred_ns")
    return frame.with_columns(
        ratio.alias("model_ratio"),
        pl.when(pl.col("model_pred_ns").is_not_null())
        .then(ratio.map_elements(_verdict, return_dtype=pl.String))
        .otherwise(pl.col("model_verdict"))
        .alias("model_verdict"),
    )


def story_card(s: dict) -> tuple:
    """The Kernels page's first-screen card of analyzers.kernel_models.summary."""
    total = s["total_ns"] or 0.0
    if not total or not s["coverage"]:
        return (
            "to win vs the textbook",
            "—",
            "no launch carries the chapter's prediction: " + s["sentence"],
        )
    at = f"{s['verdict_ns']['agrees'] / total:.0%} at the model"
    return (
        "to win vs the textbook",
        fmt_ns(s["win_ns"]),
        f"{at}; Σ (measured − the chapter's predicted time) where positive, over the "
        f"{s['coverage'] or 0:.0%} of the kernel time that carries a prediction (section "
        f"Against the textbook)",
    )


def overview_blocks(result: ModelResult, joined_label: str | None) -> list:
    """The section on the Kernels page: cards, one sentence, the ops with the most to win, the chains."""
    s = summary(result)
    total = s["total_ns"] or 0.0
    cards = Metrics(
        [
            (
                "with a prediction",
                "—" if s["coverage"] is None else f"{s['coverage']:.0%}",
                "share of the profiled kernel time whose launch carries the chapter's model"
                + (
                    f"; {s['shapes_share']:.0%} with shapes from the joined trace"
                    if s["shapes_share"]
                    else ""
                ),
            ),
            (
                "at the model",
                f"{s['verdict_ns']['agrees'] / total:.0%}" if total else "—",
                f"share of the kernel time within ±{TIME_TOL:.0%} of its predicted time",
            ),
            (
                "to win vs the model",
                fmt_ns(s["win_ns"]),
                "Σ (measured − predicted) where positive: the ceilings are "
                + (
                    "measured (bench runs)"
                    if "measured" in result.roofs.dram_src
                    else "the spec sheet's"
                ),
            ),
            (
                "fusing chains",
                fmt_ns(s["chain_saving_ns"]) if result.chains else "—",
                "fusion.activation_chain: elementwise chains on one tensor in the joined step, per "
                "step",
            ),
        ]
    )
    out: list = [Heading("Against the textbook"), cards]
    rf = result.roofs
    out.append(
        Text(
            f"Model: {MODEL_TERMS}. DRAM {rf.dram / 1e12:.2f} TB/s ({rf.dram_src}); tensor "
            f"{(rf.tensor or 0) / 1e12:.0f} TFLOP/s ({rf.tensor_src}); t0 {rf.floor_ns / 1e3:.2f} "
            f"µs ({rf.floor_src})."
            + (f" Trace: {joined_label}." if joined_label else "")
            + (" " + " ".join(result.notes) if result.notes else ""),
            "caption",
        )
        if rf.dram
        else Text("No DRAM bandwidth for this GPU: no model.", "caption")
    )
    every = ops_table(result).filter(pl.col("predicted_ns").is_not_null())
    # one row per work (class, op, parameters): eight layers' identical GEMMs are one cause, not
    # eight rows
    t = (
        every.group_by("class", "op", "params", maintain_order=True)
        .agg(
            pl.col("id").first(),
            pl.len().alias("ops"),
            pl.col("measured_ns").sum(),
            pl.col("predicted_ns").sum(),
            pl.col("win_ns").sum(),
            pl.col("traffic_verdict").first(),
        )
        .with_columns((pl.col("measured_ns") / pl.col("predicted_ns")).alias("ratio"))
    )
    if t.height:
        n_work = t.height
        t = (
            t.sort("win_ns", descending=True, nulls_last=True, maintain_order=True)
            .head(10)
            .with_columns(
                pl.col("ratio").map_elements(_verdict, return_dtype=pl.String).alias("verdict"),
                pl.col("op").fill_null("—").str.replace("^aten::", ""),
                pl.col("traffic_verdict").fill_null("not judged (no shapes)"),
            )
        )
        out.append(
            Table(
                "textbook_ops",
                t,
                {
                    "id": num(
                        "launch",
                        help="the first launch of this work (its detail shows the model's terms)",
                    ),
                    "ops": num(
                        "ops", help="ops doing the same work (class, op and parameters) in the run"
                    ),
                    "class": text("class"),
                    "op": text(
                        "op",
                        "the aten op (or Inductor launcher) that launched it, from the joined trace",
                    ),
                    "params": text(
                        "parameters",
                        "inferred: from the trace's shapes, else from the counters (detail: how)",
                    ),
                    "measured_ns": num(
                        "measured",
                        "µs",
                        "%.1f",
                        "Σ gpu__time_duration.sum of the ops' launches (ncu)",
                        scale=1e-3,
                    ),
                    "predicted_ns": num("model", "µs", "%.1f", MODEL_TERMS, scale=1e-3),
                    "ratio": num("meas ÷ model", "×", "%.2f"),
                    "verdict": text("verdict", f"±{TIME_TOL:.0%}"),
                    "win_ns": num(
                        "to win",
                        "µs",
                        "%.1f",
                        "Σ (measured − predicted) where positive",
                        scale=1e-3,
                    ),
                    "traffic_verdict": text(
                        "traffic",
                        "DRAM bytes ÷ the minimum (at the minimum within "
                        f"{TRAFFIC_TOL[0]:g}–{TRAFFIC_TOL[1]:g}×), of the first op",
                    ),
                },
                static=True,
                caption=f"The {t.height} of {n_work} kinds of work with the most time to "
                f"win against the model ({every.height} ops); a launch's detail gives its terms "
                "and how each parameter was inferred.",
            )
        )
    if result.chains:
        c = pl.DataFrame(
            [
                {
                    "ops": " → ".join(x.replace("aten::", "") for x in ch.ops),
                    "launches": ", ".join(map(str, ch.launches)),
                    "numel": ch.numel,
                    "unfused": ch.unfused_bytes,
                    "fused": ch.fused_bytes,
                    "measured_ns": ch.measured_ns,
                    "fused_predicted_ns": ch.fused_predicted_ns,
                    "saving_ns": ch.saving_ns,
                }
                for ch in result.chains
            ]
        ).with_columns(
            pl.col("unfused").map_elements(fmt_bytes, return_dtype=pl.String),
            pl.col("fused").map_elements(fmt_bytes, return_dtype=pl.String),
        )
        out.append(
            Table(
                "chains",
                c,
                {
                    "ops": text(
                        "chain",
                        "consecutive elementwise ops, each reading the previous one's result",
                    ),
                    "launches": text("launches"),
                    "numel": num("elements"),
                    "unfused": text("traffic unfused"),
                    "fused": text("fused", "without the intermediates written and read back"),
                    "measured_ns": num(
                        "measured",
                        "µs",
                        "%.1f",
                        "Σ ncu durations of the chain's launches",
                        scale=1e-3,
                    ),
                    "fused_predicted_ns": num(
                        "fused (model)",
                        "µs",
                        "%.1f",
                        "t0 + fused traffic ÷ DRAM bandwidth",
                        scale=1e-3,
                    ),
                    "saving_ns": num(
                        "saves", "µs", "%.1f", "per occurrence in the step", scale=1e-3
                    ),
                },
                static=True,
                caption=f"fusion.activation_chain on this step's elementwise chains; checked "
                f"against a compiled program's fused kernel within ±{FUSED_TOL:.0%} (README: The "
                "textbook's predictions).",
            )
        )
    return out


def launch_blocks(result: ModelResult | None, launch_id: int) -> list:
    """The selected launch's model: class and evidence, parameters and how, terms, verdicts."""
    if result is None:
        return []
    m = result.by_id().get(launch_id)
    if m is None:
        return []
    out: list = [Heading("The textbook's model", 3)]
    if m.primary != m.id:
        return out + [Text(m.note + ".", "caption")]
    lines = [
        f"**{m.label}** ({code(m.case) if m.case else 'no chapter case'})"
        + (f", launched by {code(m.op)}" if m.op else "")
        + (
            f" — {len(m.launches)} launches of one op: " + ", ".join(map(str, m.launches))
            if len(m.launches) > 1
            else ""
        )
        + ". Why this class: "
        + "; ".join(m.evidence)
        + "."
    ]
    if m.params:
        lines.append(
            "Parameters: "
            + param_text(m)
            + ". How: "
            + "; ".join(f"{k}: {v}" for k, v in m.how.items())
            + "."
        )
    if m.predicted_ns is not None:
        comp = "" if m.t_compute_ns is None else f", FLOP ÷ peak {fmt_ns(m.t_compute_ns)}"
        lines.append(
            f"Terms: n·t0 {fmt_ns(m.t0_ns)} + max(bytes ÷ bandwidth {fmt_ns(m.t_mem_ns)}{comp}) = "
            f"**{fmt_ns(m.predicted_ns)}** predicted; measured **{fmt_ns(m.measured_ns)}** (ncu) → "
            f"{m.time_ratio:.2f}× : **{m.verdict}** (±{TIME_TOL:.0%})"
            + (f"; {fmt_ns(m.win_ns)} to win." if m.win_ns else ".")
        )
    if m.traffic_ratio is not None:
        lines.append(
            f"Traffic: DRAM {fmt_bytes(m.moved_bytes)} (ncu) against a minimum of "
            f"{fmt_bytes(m.min_bytes)} → {m.traffic_ratio:.2f}×: **{m.traffic_verdict}**."
        )
    elif m.predicted_ns is not None:
        lines.append("Traffic: not judged — without shapes the model uses what the launch moved.")
    if m.note:
        lines.append(m.note + ".")
    return out + [Text("\n\n".join(lines))]


def models_of(
    src: Source,
    run: Run | None,
    wanted_trace: str | None = None,
    trace=None,
    joined=None,
    problems: list[str] | None = None,
):
    """The textbook's models of an ncu run (dashboard.core.textbook) with the trace the page joins (the
    URL's ?trace=, else found); None when they cannot be computed (said in `problems`)."""
    from dashboard.core.textbook import models_for

    if run is None:
        return None
    if trace is None and joined is None:
        trace, joined = join_blocks.trace_for(src, run, wanted_trace, [])
    try:
        return models_for(src, run, trace, joined)
    except Exception as e:  # noqa: BLE001 - the page stands without the model section
        (problems if problems is not None else []).append(
            f"The textbook's models could not be computed for this run ({type(e).__name__}: {e})."
        )
        return None
