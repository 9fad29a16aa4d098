"""The detail of one launch on the Kernels page: key numbers, why a share of a peak is above 100 %,
findings ranked by estimated time lost, source hot spots (SASS / CUDA lines by warp-stall samples,
from `.ncu-rep` Source Counters), the textbook cases its counters and launch say it runs (with the
parameters inferred and how), and every metric grouped by its Nsight Compute section.

Takes the view of dashboard.web.reports.kernels (run, kernel, q, hot); every number comes from
`Source.ncu(run)`, `Source.source_hotspots(run, launch)` and analyzers.cases.kernel_match.
"""

from __future__ import annotations

import polars as pl

from analyzers.findings import kernel_findings
from analyzers.gpus import GPUSpec
from analyzers.units import MISSING, fmt_bytes, fmt_ns, fmt_pct, fmt_rate
from collectors.ncu import metric_labels
from dashboard.web import charts
from dashboard.web.reports.report_blocks import (
    Chart,
    Heading,
    Metrics,
    Table,
    Text,
    code,
    num,
    text,
)
from dashboard.core.source import Source
from analyzers.cases.kernel_match import kernel_comparisons
from dashboard.web.reports import join_blocks, textbook_blocks

HOT_ROWS = 25


def _dim(row: dict, what: str) -> str:
    vals = [row.get(f"{what}_{a}") for a in "xyz"]
    if any(v is None for v in vals):
        return str(int(row[f"{what}_size"])) if row.get(f"{what}_size") is not None else MISSING
    return "(" + ", ".join(str(int(v)) for v in vals) + ")"


def _pct(frac) -> str:
    return MISSING if frac is None else fmt_pct(frac * 100)


def _n(v, fmt: str = "{:.0f}") -> str:
    return MISSING if v is None else fmt.format(v)


def key_numbers(row: dict) -> Metrics:
    smem = (row.get("smem_static_bytes") or 0) + (row.get("smem_dynamic_bytes") or 0)
    sol = " / ".join(
        MISSING if row.get(k) is None else f"{row[k]:.0f} %"
        for k in ("sm_throughput_pct", "dram_throughput_pct")
    )
    return Metrics(
        [
            ("duration", fmt_ns(row["duration_ns"]), "gpu__time_duration.sum"),
            (
                "Speed of Light: SM / DRAM",
                sol,
                "sm__throughput and gpu__dram_throughput .avg.pct_of_peak_sustained_elapsed (ncu "
                "counters): how busy the SMs' busiest unit and DRAM were, % of peak",
            ),
            (
                "DRAM",
                MISSING
                if row.get("dram_bandwidth_gbps") is None
                else fmt_rate(row["dram_bandwidth_gbps"] * 1e9, "B/s"),
                f"{_pct(row.get('dram_peak_fraction'))} of the spec peak; bytes "
                f"{fmt_bytes(row.get('dram_bytes'))}",
            ),
            (
                "FP32",
                MISSING
                if row.get("fp32_tflops") is None
                else fmt_rate(row["fp32_tflops"] * 1e12, "FLOP/s"),
                "(fadd + fmul + 2·ffma) / duration",
            ),
            (
                "tensor",
                MISSING
                if not row.get("tensor_tflops")
                else fmt_rate(row["tensor_tflops"] * 1e12, "FLOP/s"),
                f"{row['tensor_type']}, {_pct(row.get('tensor_peak_fraction'))} of the spec peak"
                if row.get("tensor_type")
                else "sm__ops_path_tensor_src_*.sum / duration",
            ),
            (
                "occupancy [%] achieved / ncu / ours",
                " / ".join(
                    _n(row.get(k))
                    for k in (
                        "achieved_occupancy_pct",
                        "theoretical_occupancy_pct",
                        "predicted_occupancy_pct",
                    )
                ),
                f"limiter (ours): {row.get('occupancy_limiter') or MISSING}",
            ),
            (
                "bank ways ld / st",
                " / ".join(
                    _n(row.get(k), "{:.1f}")
                    for k in ("smem_ld_conflict_degree", "smem_st_conflict_degree")
                ),
                "wavefronts / (wavefronts − conflicts)",
            ),
            (
                "ld sectors/request",
                MISSING
                if row.get("global_ld_sectors_per_request") is None
                else f"{row['global_ld_sectors_per_request']:.1f} (ideal "
                f"{_n(row.get('global_ld_ideal_sectors_per_request'))})",
                "coalescing: l1tex__t_sectors / l1tex__t_requests, global loads",
            ),
            (
                "shared memory / block",
                fmt_bytes(smem) if row.get("smem_static_bytes") is not None else MISSING,
                "static + dynamic (launch__shared_mem_per_block_*)",
            ),
        ]
    )


def detail(src: Source, view) -> list:
    """Blocks of the launch's detail (module docstring)."""
    if view.run is None or view.kernel is None:
        return []
    a = src.ncu(view.run)
    row = a.launch(view.kernel)
    if row is None:
        return [Text(f"No launch {view.kernel} in this run.", "warning")]
    regs = row.get("registers_per_thread")
    blocks: list = [
        Heading(f"Launch {row['id']}: {code(row['display_name'])}"),
        Text(
            f"Full name: {code(row.get('raw_name') or row['kernel_name'])} · grid "
            f"{_dim(row, 'grid')} × block {_dim(row, 'block')} · "
            f"{MISSING if regs is None else int(regs)} registers/thread",
            "caption",
        ),
        key_numbers(row),
    ]
    if row.get("flags"):
        blocks.append(
            Text(
                f"**Implausible for {a.gpu.name}:** "
                + "; ".join(row["flags"])
                + ". The numbers of this launch should not be trusted.",
                "error",
            )
        )
    notes = [n for n in a.over_peak if n["id"] == view.kernel]
    for n in notes:
        blocks.append(
            Text(f"{n['pct']:.1f} % of {n['peak']}: above 100 % because {n['reason']}.", "caption")
        )
    findings = kernel_findings(row, a.gpu, a.measured)
    blocks.append(Heading("Findings, ranked by estimated time lost", 3))
    if not findings:
        blocks.append(
            Text(
                "No findings for this launch: the counters they need are not in this report.",
                "caption",
            )
        )
    for i, f in enumerate(findings, 1):
        cited = "; ".join(f"{code(k)} = {v}" for k, v in f.metrics.items())
        blocks.append(
            Text(
                f"**{i}. {f.title}** — est. time lost **{fmt_ns(f.lost_ns)}** ({f.share:.0%} of "
                "the launch)\n\n"
                f"{f.text}\n\n*Based on:* {cited}.\n\n*Model:* {f.model}."
            )
        )

    trace, joined = join_blocks.trace_for(src, view.run, getattr(view, "trace", None), [])
    blocks.extend(
        textbook_blocks.launch_blocks(
            textbook_blocks.models_of(src, view.run, None, trace, joined), view.kernel
        )
    )
    blocks.extend(join_blocks.launch_blocks(trace, joined, view.kernel))
    blocks.extend(source_pointer(src, view))
    blocks.extend(case_blocks(row, a.gpu, src, view.run.run_id))
    return blocks


def metric_blocks(src: Source, view) -> list:
    """Every metric of the launch, grouped by its Nsight Compute section (filter: view.q)."""
    if view.run is None or view.kernel is None:
        return []
    blocks: list = [Heading(f"Every metric of launch {view.kernel}", 3)]
    metrics = src.launch_metrics(view.run.run_id, view.kernel)
    labels = metric_labels()
    metrics = metrics.with_columns(
        pl.col("metric").replace_strict(labels, default=None, return_dtype=pl.String).alias("label")
    )
    if view.q:
        metrics = metrics.filter(
            pl.col("metric").str.contains(view.q, literal=True)
            | pl.col("section").fill_null("").str.contains(view.q, literal=True)
            | pl.col("label")
            .fill_null("")
            .str.to_lowercase()
            .str.contains(view.q.lower(), literal=True)
        )
    metrics = metrics.sort(
        pl.col("section").is_null(), "section", pl.col("label").is_null(), "label", "metric"
    ).with_columns(pl.col("section").fill_null("(no section: a raw counter)"))
    blocks.append(
        Table(
            "metrics",
            metrics.select("section", "label", "metric", "value", "unit", "text"),
            {
                "section": text("section", "the Nsight Compute section that shows it"),
                "label": text("label", "how Nsight Compute's section labels it"),
                "metric": text("metric (ncu name)"),
                "value": num("value", help="in base units (ns, bytes, percent)"),
                "unit": text("unit"),
                "text": text("text value"),
            },
            caption=f"{metrics.height} metrics" + (f" matching {code(view.q)}" if view.q else ""),
            height=400,
        )
    )
    return blocks


def source_pointer(src: Source, view) -> list:
    """The detail's line on the launch's source: where its hot spots are (the Source hot spots
    section, read on demand), or what would give them."""
    if "sass" not in view.run.tables:
        return hotspot_blocks(src, view)  # says what would give source-level data; reads nothing
    link = f"kernels?run={view.run.run_id}&kernel={view.kernel}&show=source"
    if getattr(view, "by", "kernel") == "launch":
        link += "&by=launch"
    return [
        Heading("Source hot spots", 3),
        Text(
            f"This report has source-level data: the SASS instructions and CUDA lines this launch's "
            f"warps were sampled at most, with their stall reasons, are under [Source hot spots]"
            f"({link}) (as Nsight Compute's Source page; read from the report when opened).",
            "caption",
        ),
    ]


def hotspot_blocks(src: Source, view) -> list:
    """Source hot spots (analyzers.source_hotspots): the SASS instructions and CUDA lines the warps
    were sampled at most, with their stall reasons."""
    out: list = [Heading("Source hot spots", 3)]
    h = src.source_hotspots(view.run, view.kernel)
    if h is None:
        return out + [
            Text(
                "No source-level data for this launch: it is in `.ncu-rep` reports only, with the "
                "Source Counters section (`ncu --set full`, or `--section SourceCounters`); "
                "compile with `nvcc -lineinfo` for CUDA source lines.",
                "caption",
            )
        ]
    for m in h.missing:
        out.append(Text(f"Not in this report: {m}.", "caption"))
    rank = "samples" if h.has_samples else "inst_executed"
    if h.has_lines:
        lines = h.lines.head(HOT_ROWS).with_columns(
            (pl.col("sample_share") * 100).alias("sample_pct"),
            pl.format("{}:{}", pl.col("file").str.split("/").list.last(), "line").alias("where"),
        )
        out.append(
            Table(
                "hot_lines",
                lines,
                {
                    "where": text(
                        "CUDA line", "file:line from the report's line table (nvcc -lineinfo)"
                    ),
                    "code": text("source", "the line's text (ncu --import-source yes)"),
                    "samples": num(
                        "warp samples",
                        fmt="%.0f",
                        help="smsp__pcsamp_sample_count summed over its instructions",
                    ),
                    "sample_pct": num("of all samples", "%", "%.1f"),
                    "top_reasons": text(
                        "stalled on",
                        "the biggest stall reasons of its samples "
                        "(smsp__pcsamp_warps_issue_stalled_*), issuing left out",
                    ),
                    "inst_executed": num(
                        "warp instructions",
                        fmt="%.0f",
                        help="inst_executed summed over its instructions",
                    ),
                    "instructions": num("SASS instructions"),
                },
                caption=f"CUDA source lines ranked by warp-state samples ({h.total_samples:,} "
                "samples in all), then instructions executed.",
                static=True,
            )
        )
    sass = h.sass.head(HOT_ROWS).with_columns(
        (pl.col("sample_share") * 100).alias("sample_pct"), pl.format("{}", "offset").alias("pc")
    )
    cols = {
        "pc": text("offset", "address − the function's first address, bytes"),
        "sass": text("SASS instruction", "IAction.sass_by_pc"),
        "samples": num(
            "warp samples", fmt="%.0f", help="smsp__pcsamp_sample_count at this address"
        ),
        "sample_pct": num("of all samples", "%", "%.1f"),
        "top_reasons": text(
            "stalled on", "the biggest stall reasons of its samples, issuing left out"
        ),
        "inst_executed": num("warp instructions", fmt="%.0f", help="inst_executed at this address"),
    }
    if h.has_lines:
        sass = sass.with_columns(
            pl.format("{}:{}", pl.col("file").str.split("/").list.last(), "line").alias("where")
        )
        cols["where"] = text("CUDA line")
    out.append(
        Table(
            "hot_sass",
            sass,
            cols,
            static=True,
            caption=(
                "SASS instructions ranked by "
                f"{'warp-state samples' if rank == 'samples' else 'instructions executed'} (top "
                f"{min(HOT_ROWS, h.sass.height)} of {h.sass.height}; {h.total_samples:,} samples, "
                f"{h.total_inst_executed:,.0f} warp instructions in all). Samples are taken at a "
                "fixed interval from every active warp, so they are proportional to where the "
                "warps spent their time."
            ),
        )
    )
    rs = h.reasons.filter(pl.col("samples") > 0).with_columns((pl.col("share") * 100).alias("pct"))
    # a table here (the page stays light); the same as a chart under "Rooflines & charts"
    if rs.height:
        out.append(
            Table(
                "stall_reasons",
                rs.select("label", "pct", "samples", "waits_for"),
                {
                    "label": text("stall reason", "smsp__pcsamp_warps_issue_stalled_<reason>"),
                    "pct": num("of all samples", "%", "%.1f"),
                    "samples": num("warp samples", fmt="%.0f"),
                    "waits_for": text("the warp waits for"),
                },
                static=True,
                caption='Where the warps waited, summed over the launch ("selected" is a warp that '
                "issued).",
            )
        )
    return out


def stall_chart(src: Source, view) -> list:
    """The launch's warp-state samples by stall reason, as a chart (the Kernels page's charts section)."""
    h = (
        src.source_hotspots(view.run, view.kernel)
        if view.run is not None and view.kernel is not None
        else None
    )
    if h is None or not h.has_samples:
        return []
    rs = h.reasons.filter(pl.col("samples") > 0).with_columns((pl.col("share") * 100).alias("pct"))
    return [Chart("stall_reasons", charts.stall_bars(rs))]


def case_blocks(row: dict, gpu: GPUSpec, src: Source, run_id: str) -> list:
    """Textbook cases this launch runs, recognised by its counters and launch
    (analyzers.cases.kernel_match): the case's prediction for the launch's own parameters next to
    the measurement, with the verdict."""

    out: list = [Heading("Textbook cases", 3)]
    m = src.launch_metrics(run_id, row["id"]).drop_nulls("value")
    matched = kernel_comparisons(row, dict(zip(m["metric"].to_list(), m["value"].to_list())), gpu)
    if not matched:
        return out + [
            Text(
                "No textbook case recognised from this launch's counters and launch configuration "
                "(column reads, transposes and tiled matmuls are recognised by what they do, "
                "whatever their name); evaluate any case for this GPU on the [Textbook "
                "cases](cases) page.",
                "caption",
            )
        ]
    rows = []
    for kc in matched:
        out.append(
            Text(
                f"**{kc.case_id}** ({kc.section}): inferred from the launch — "
                + "; ".join(f"{k} = {v}" for k, v in kc.inferred.items())
                + ".",
                "caption",
            )
        )
        if kc.problem:
            out.append(
                Text(f"Could not evaluate {code(kc.case_id)}: {code(kc.problem)}", "caption")
            )
        for c in kc.comparisons:
            j = c.to_json()
            rows.append(
                {
                    "case": f"{kc.case_id} ({kc.section})",
                    "quantity": c.prediction.label,
                    "predicted": j["predicted"]["display"],
                    "measured": j["measured_display"],
                    "verdict": j["verdict"],
                    "explanation": j["explanation"],
                }
            )
    if rows:
        out.append(
            Table(
                "cases",
                pl.DataFrame(rows),
                {
                    "case": text("case (section)"),
                    "quantity": text("quantity"),
                    "predicted": text("predicted (model, this launch's parameters)"),
                    "measured": text("measured (ncu counters)"),
                    "verdict": text("verdict"),
                    "explanation": text("why"),
                },
                static=True,
                caption="Each launch is compared with the prediction for its own "
                "parameters, inferred as stated above; a quantity used to infer them is never "
                "judged against them.",
            )
        )
    return out
