"""Home: where the newest runs stand (each trace's time per step, verdict and main remedy; the
newest Nsight Compute run's kernels with the most time to win, one row per kernel), what to do
first, the GPUs known, the recent runs."""

from __future__ import annotations

import polars as pl

from analyzers.kernel_groups import kernel_groups
from analyzers.remedy import main_verdict
from collectors.schema import TRACE_KINDS
from collectors.store import Run
from dashboard.web.reports.report_blocks import Col, Heading, Report, Table, Text, code, num, text
from dashboard.web.reports.run_links import gpu_table, runs_table
from dashboard.core.source import Source


def top_findings(src: Source, run: Run, limit: int = 5) -> pl.DataFrame:
    """The kernels of a run with the most estimated time to win (analyzers.kernel_groups: one row
    per kernel, the biggest finding summed over its launches), never one kernel twice."""
    g = kernel_groups(src.ncu(run).kernels)
    if "lost_total_ns" not in g.columns:
        g = g.with_columns(
            pl.lit(None, pl.Float64).alias("lost_total_ns"),
            pl.lit(None, pl.String).alias("top_finding"),
        )
    grid = pl.concat_str([pl.col(f"grid_{a}").cast(pl.String) for a in "xyz"], separator="×")
    block = pl.concat_str([pl.col(f"block_{a}").cast(pl.String) for a in "xyz"], separator="×")
    k = g.select(
        pl.col("id").alias("launch"),
        pl.col("short_name").alias("kernel"),
        pl.concat_str([grid, block], separator=" · ").alias("config"),
        "launches",
        pl.col("top_finding").alias("finding"),
        (pl.col("lost_total_ns") / 1e3).alias("lost_us"),
        (pl.col("share") * 100).alias("share_pct"),
        pl.col("flags").list.join("; ").replace("", None).alias("implausible"),
    )
    return (
        k.sort("lost_us", descending=True, nulls_last=True)
        .head(limit)
        .with_columns(
            open=pl.format("kernels?run={}&kernel={}", pl.lit(run.run_id), pl.col("launch"))
        )
    )


#: traces whose story Home shows (the newest first)
STORY_TRACES = 5


def trace_stories(src: Source, runs: list[Run], limit: int = STORY_TRACES) -> pl.DataFrame:
    """The newest traces at a glance: time per step, the verdict and the main remedy with the step
    it predicts (analyzers.timeline.summarize: steps, remedy; analyzers.remedy.main_verdict)."""
    rows = []
    for r in [r for r in runs if r.kind in TRACE_KINDS][:limit]:
        try:
            s = src.trace(r).summary
        # any exception: one run's problem stays on its own page; Home lists the others
        except Exception:
            continue
        bound, _ = main_verdict(s.devices, s.steps.main if s.steps is not None else None)
        rem = s.remedy or {}
        rows.append(
            {
                "open": f"timeline?run={r.run_id}",
                "run": r.source_name,
                "gpu": src.meta(r).get("gpu_name"),
                "step_ms": (s.run.get("step_median_ns") or 0) / 1e6 or None,
                "verdict": bound,
                "remedy": rem.get("remedy"),
                "after_ms": rem["predicted_step_ns"] / 1e6
                if rem.get("predicted_step_ns")
                else None,
                "kind": rem.get("kind"),
            }
        )
    return pl.DataFrame(
        rows,
        schema={
            "open": pl.String,
            "run": pl.String,
            "gpu": pl.String,
            "step_ms": pl.Float64,
            "verdict": pl.String,
            "remedy": pl.String,
            "after_ms": pl.Float64,
            "kind": pl.String,
        },
    )


def build(src: Source, params: dict) -> Report:
    rep = Report(
        "Kernelscope",
        subtitle="GPU kernels measured next to what the hardware and the textbook predict.",
    )
    runs = src.runs()
    ncu_runs = [r for r in runs if r.kind == "ncu"]
    steps = [
        "**What to do first**",
        "1. Profile on the GPU machine: `ncu --set full -o r ./app` (Nsight Compute), or a PyTorch "
        "profiler trace, or `nsys export --type sqlite r.nsys-rep`.",
        "2. Drop the files on the [Upload](upload) page (or run `kernelscope ingest r.ncu-rep` on "
        "the server).",
        "3. Open the run on [Kernels](kernels): findings are ranked by the time they cost; the "
        "roofline shows how far each launch is from the GPU's peaks.",
        "4. Changed something? Profile again and [Compare](compare) the two runs; the link in the "
        "sidebar opens the same view for a teammate, and *Download HTML* makes an offline copy.",
    ]
    if not runs:
        steps.insert(
            1, "_The store is empty: start with step 1, or `kernelscope ingest sample_traces/`._"
        )
        rep.add(Text("\n".join(steps)))
    for rid, problem in src.broken():
        rep.add(
            Text(
                f"Run {code(rid)} cannot be read and is left out of every page: {problem}",
                "warning",
            )
        )
    stories = trace_stories(src, runs)
    if stories.height:
        rep.add(
            Heading("Where the time goes in the newest traces", 3),
            Table(
                "trace_stories",
                stories,
                {
                    "open": Col("open", kind="link", link_text="open"),
                    "run": text("trace"),
                    "gpu": text("GPU"),
                    "step_ms": num(
                        "time per step",
                        "ms",
                        "%.3f",
                        "steady-state median, first to last GPU op each step launched "
                        "(analyzers.steps)",
                    ),
                    "verdict": text(
                        "verdict",
                        "where the time goes: GPU-, launch- or host-bound (analyzers.bound)",
                    ),
                    "remedy": text(
                        "main remedy", "analyzers.remedy: the remedy the verdict points to"
                    ),
                    "after_ms": num(
                        "step with it (model)",
                        "ms",
                        "%.3f",
                        "the step the remedy's model predicts (a CUDA graph: busy time + 400 ns "
                        "per kernel, ±15 %; fusion: a bound; top kernel 2× faster: Amdahl)",
                    ),
                },
                caption="Each trace's verdict and remedy in full on its Timeline page.",
            ),
        )
    if ncu_runs:
        newest = ncu_runs[0]
        rep.add(
            Heading(
                f"Kernels with the most time to win in the newest Nsight Compute run "
                f"({code(newest.source_name)})",
                3,
            )
        )
        try:
            top = top_findings(src, newest, limit=5)
        # any exception: one run's problem is shown here, the rest of the page stands
        except Exception as e:
            top = None
            rep.add(
                Text(
                    f"Run {code(newest.run_id)} cannot be analysed ({type(e).__name__}); the other "
                    "runs are unaffected.",
                    "error",
                )
            )
        flagged = src.ncu(newest).flagged if top is not None else []
        if flagged:
            rep.add(
                Text(
                    f"{len(flagged)} launch(es) of this run are implausible for its GPU ("
                    + "; ".join(f"launch {f['id']}: {f['flags'][0]}" for f in flagged[:3])
                    + f"): their findings should not be trusted — see "
                    f"[Kernels](kernels?run={newest.run_id}).",
                    "error",
                )
            )
        if top is not None and top.filter(pl.col("finding").is_not_null()).height:
            rep.add(
                Table(
                    "top_findings",
                    top,
                    {
                        "open": Col("open", kind="link", link_text="open"),
                        "kernel": text("kernel"),
                        "config": text(
                            "grid · block", "the launch configuration: blocks × threads per block"
                        ),
                        "launches": num(
                            "launches", help="launches of this kernel (same name, grid and block)"
                        ),
                        "finding": text("biggest finding"),
                        "lost_us": num(
                            "est. time to win",
                            "µs",
                            "%.1f",
                            "the biggest finding's estimate, summed over the kernel's launches "
                            "(analyzers/findings.py: throughput-bound model)",
                        ),
                        "share_pct": num("share of kernel time", "%", "%.1f"),
                        "implausible": text(
                            "implausible",
                            "what cannot be right for this GPU (analyzers.plausibility): the "
                            "finding of such a launch should not be trusted",
                        ),
                    },
                )
            )
        elif top is not None:
            rep.add(
                Text(
                    "No findings: every launch is close to its bound, or its counters are missing.",
                    "caption",
                )
            )
    if runs:
        rep.add(Text("\n".join(steps)))
    rep.add(
        Heading("GPUs known"),
        gpu_table(src),
        Text(
            "Spec figures from the datasheets; measured figures from `kernelscope bench` runs in "
            "this store (see [GPUs](gpus)).",
            "caption",
        ),
    )
    rep.add(Heading(f"Recent runs ({len(runs)} in the store)"))
    if runs:
        rep.add(runs_table(runs[:8], "recent_runs"))
        if len(runs) > 8:
            rep.add(Text("All runs: [Runs](runs).", "caption"))
    else:
        rep.add(Text("No runs yet.", "info"))
    return rep
