"""Home: what to do first, the newest Nsight Compute run's biggest findings, the GPUs known, the recent runs."""
from __future__ import annotations

import polars as pl

from collectors.store import Run
from dashboard.reports.blocks import Col, Heading, Report, Table, Text, code, num, text
from dashboard.reports.common import gpu_table, runs_table
from dashboard.source import Source


def top_findings(src: Source, run: Run, limit: int = 5) -> pl.DataFrame:
    """The launches of a run with the largest estimated time lost (analyzers.findings.top_findings)."""
    k = src.ncu(run).kernels.select(pl.col("id").alias("launch"), pl.col("short_name").alias("kernel"),
                                    pl.col("top_finding").alias("finding"), (pl.col("lost_ns") / 1e3).alias("lost_us"),
                                    (pl.col("lost_share") * 100).alias("share_pct"),
                                    pl.col("flags").list.join("; ").replace("", None).alias("implausible"))
    return k.sort("lost_us", descending=True, nulls_last=True).head(limit).with_columns(
        open=pl.format("kernels?run={}&kernel={}", pl.lit(run.run_id), pl.col("launch")))


def build(src: Source, params: dict) -> Report:
    rep = Report("Kernelscope", subtitle="GPU kernels measured next to what the hardware and the textbook predict.")
    runs = src.runs()
    ncu_runs = [r for r in runs if r.kind == "ncu"]
    steps = [
        "**What to do first**",
        "1. Profile on the GPU machine: `ncu --set full -o r ./app` (Nsight Compute), or a PyTorch profiler trace, "
        "or `nsys export --type sqlite r.nsys-rep`.",
        "2. Drop the files on the [Upload](upload) page (or run `kernelscope ingest r.ncu-rep` on the server).",
        "3. Open the run on [Kernels](kernels): findings are ranked by the time they cost; the roofline shows how far "
        "each launch is from the GPU's peaks.",
        "4. Changed something? Profile again and [Compare](compare) the two runs; the link in the sidebar opens the "
        "same view for a teammate, and *Download HTML* makes an offline copy.",
    ]
    if not runs:
        steps.insert(1, "_The store is empty: start with step 1, or `kernelscope ingest sample_traces/`._")
    rep.add(Text("\n".join(steps)))
    for rid, problem in src.broken():
        rep.add(Text(f"Run {code(rid)} cannot be read and is left out of every page: {problem}", "warning"))
    if ncu_runs:
        newest = ncu_runs[0]
        rep.add(Heading(f"Biggest opportunities in the newest Nsight Compute run ({code(newest.source_name)})", 3))
        try:
            top = top_findings(src, newest, limit=5)
        except Exception as e:  # noqa: BLE001 - one run's problem is shown here, the rest of the page stands
            top = None
            rep.add(Text(f"Run {code(newest.run_id)} cannot be analysed ({type(e).__name__}); the other runs are "
                         "unaffected.", "error"))
        flagged = src.ncu(newest).flagged if top is not None else []
        if flagged:
            rep.add(Text(f"{len(flagged)} launch(es) of this run are implausible for its GPU ("
                         + "; ".join(f"launch {f['id']}: {f['flags'][0]}" for f in flagged[:3])
                         + f"): their findings should not be trusted — see [Kernels](kernels?run={newest.run_id}).",
                         "error"))
        if top is not None and top.filter(pl.col("finding").is_not_null()).height:
            rep.add(Table("top_findings", top, {
                "open": Col("open", kind="link", link_text="open"), "kernel": text("kernel"),
                "launch": num("launch id"), "finding": text("finding"),
                "lost_us": num("est. time lost", "µs", "%.1f", "analyzers/findings.py: throughput-bound model"),
                "share_pct": num("of the launch", "%", "%.0f"),
                "implausible": text("implausible", "what cannot be right for this GPU (analyzers.plausibility): "
                                                   "the finding of such a launch should not be trusted"),
            }))
        elif top is not None:
            rep.add(Text("No findings: every launch is close to its bound, or its counters are missing.", "caption"))
    rep.add(Heading("GPUs known"), gpu_table(src),
            Text("Spec figures from the datasheets; measured figures from `kernelscope bench` runs in this store "
                 "(see [GPUs](gpus)).", "caption"))
    rep.add(Heading(f"Recent runs ({len(runs)} in the store)"))
    if runs:
        rep.add(runs_table(runs[:8], "recent_runs"))
        if len(runs) > 8:
            rep.add(Text("All runs: [Runs](runs).", "caption"))
    else:
        rep.add(Text("No runs yet.", "info"))
    return rep
