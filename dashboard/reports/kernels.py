"""Kernels: one Nsight Compute run (?run=RUN&kernel=LAUNCH_ID&sort=COLUMN&desc=1&q=METRIC_FILTER).

A sortable table with units, the roofline against the spec sheet and the measured ceilings, bandwidth and
occupancy charts, and a launch's detail: key numbers, findings ranked by estimated time lost, the textbook cases
its name says it runs, and every metric. Every number comes from `Source.ncu(run)` (analyzers.ncu_run); this module
only chooses, scales for display and lays out.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from analyzers.findings import kernel_findings
from analyzers.gpus import GPUSpec
from analyzers.ncu_run import NcuAnalysis
from analyzers.units import fmt_bytes, fmt_ns, fmt_pct, fmt_rate
from collectors.store import Run
from dashboard import charts
from dashboard.reports.blocks import Chart, Col, Heading, Metrics, Report, Table, Text, code, num, text
from dashboard.reports import join_blocks
from dashboard.reports.common import notes_blocks, pick_run
from dashboard.source import Source

#: display column -> (analysis column, scale): what the table shows of NcuAnalysis.kernels
DISPLAY = {
    "id": ("id", None), "kernel": ("short_name", None), "duration_us": ("duration_ns", 1e-3),
    "top_finding": ("top_finding", None), "lost_us": ("lost_ns", 1e-3),
    "dram_gbps": ("dram_bandwidth_gbps", None), "dram_pct_spec": ("dram_peak_fraction", 100),
    "dram_pct_measured": ("dram_measured_fraction", 100), "fp32_tflops": ("fp32_tflops", None),
    "tensor_tflops": ("tensor_tflops", None), "tensor_type": ("tensor_type", None),
    "tensor_pct_spec": ("tensor_peak_fraction", 100), "ai": ("arithmetic_intensity", None),
    "achieved_occupancy_pct": ("achieved_occupancy_pct", None),
    "theoretical_occupancy_pct": ("theoretical_occupancy_pct", None),
    "predicted_occupancy_pct": ("predicted_occupancy_pct", None), "occupancy_limiter": ("occupancy_limiter", None),
    "smem_ld_conflict_degree": ("smem_ld_conflict_degree", None),
    "smem_st_conflict_degree": ("smem_st_conflict_degree", None), "smem_conflict_degree": ("smem_conflict_degree", None),
    "global_ld_sectors_per_request": ("global_ld_sectors_per_request", None),
    "global_ld_ideal_sectors_per_request": ("global_ld_ideal_sectors_per_request", None),
    "global_ld_coalescing_ratio": ("global_ld_coalescing_ratio", None),
    "registers_per_thread": ("registers_per_thread", None), "block_size": ("block_size", None),
    "grid_size": ("grid_size", None),
}

KERNEL_COLS: dict[str, Col] = {
    "id": num("launch id"),
    "kernel": text("kernel", "function name without template arguments (the detail view has the full name)"),
    "duration_us": num("duration", "µs", "%.2f", "gpu__time_duration.sum (ncu counter)"),
    "top_finding": text("biggest finding", "analyzers/findings.py; details in the kernel view"),
    "lost_us": num("est. lost", "µs", "%.1f", "time the biggest finding is estimated to cost"),
    "dram_gbps": num("DRAM", "GB/s", "%.0f", "(dram__bytes_read.sum + dram__bytes_write.sum) / duration"),
    "dram_pct_spec": num("DRAM of spec", "%", "%.1f", "achieved / the spec-sheet peak"),
    "dram_pct_measured": num("DRAM of measured", "%", "%.1f", "achieved / the measured copy ceiling (bench run)"),
    "fp32_tflops": num("FP32", "TFLOP/s", "%.2f", "(fadd + fmul + 2·ffma) thread instructions / duration"),
    "tensor_tflops": num("tensor", "TFLOP/s", "%.1f", "sm__ops_path_tensor_src_{bf16,fp16,tf32,fp8,fp64}.sum / duration"),
    "tensor_type": text("tensor type", "the source type with the most tensor FLOP"),
    "tensor_pct_spec": num("tensor of spec", "%", "%.1f",
                           "tensor FLOP / duration / the spec dense BF16 peak × type rate (TF32 ½, FP8 2)"),
    "ai": num("arith. intensity", "FLOP/B", "%.2f", "(FP32 + tensor FLOP) / DRAM bytes"),
    "achieved_occupancy_pct": num("occ. achieved", "%", "%.1f", "sm__warps_active.avg.pct_of_peak_sustained_active"),
    "theoretical_occupancy_pct": num("occ. theoretical (ncu)", "%", "%.1f", "sm__maximum_warps_per_active_cycle_pct"),
    "predicted_occupancy_pct": num("occ. theoretical (ours)", "%", "%.1f", "CUDA occupancy rules, analyzers/occupancy.py"),
    "occupancy_limiter": text("occ. limiter (ours)"),
    "smem_ld_conflict_degree": num("bank ways, loads", "ways", "%.2f", "wavefronts / (wavefronts − conflicts)"),
    "smem_st_conflict_degree": num("bank ways, stores", "ways", "%.2f", "wavefronts / (wavefronts − conflicts)"),
    "smem_conflict_degree": num("bank ways, all", "ways", "%.2f", "wavefronts / (wavefronts − conflicts)"),
    "global_ld_sectors_per_request": num("ld sectors/request", "sectors", "%.1f",
                                         "l1tex__t_sectors / l1tex__t_requests (global loads)"),
    "global_ld_ideal_sectors_per_request": num("ideal sectors/request", "sectors", "%.0f",
                                               "from the bytes used per sector"),
    "global_ld_coalescing_ratio": num("coalescing ratio", "×", "%.2f", "sectors per request / ideal (1 = coalesced)"),
    "registers_per_thread": num("registers/thread", "regs"), "block_size": num("block", "threads"),
    "grid_size": num("grid", "blocks"),
    "flag": text("implausible", "what cannot be right for this GPU (analyzers.plausibility): a rate above the spec "
                                "peak, a launch the GPU cannot run; the launch's other numbers are suspect too"),
}
SORT_KEYS = tuple(KERNEL_COLS)


def display_frame(a: NcuAnalysis) -> pl.DataFrame:
    """The analysis' kernel table in display units (µs, %), plus the columns the charts and the detail need."""
    k = a.kernels
    shown = [(pl.col(src) * scale if scale is not None else pl.col(src)).alias(name)
             for name, (src, scale) in DISPLAY.items()]
    keep = [c for c in ("kernel_name", "raw_name", "short_name", "duration_ns", "dram_bytes", "flop_fp32", "flop_tensor",
                        "flop_total", "smem_static_bytes", "smem_dynamic_bytes", "block_x", "block_y", "block_z",
                        "grid_x", "grid_y", "grid_z", "lost_share") if c in k.columns]
    return k.select(*shown, *[c for c in keep if c not in DISPLAY],
                    pl.col("flags").list.join("; ").replace("", None).alias("flag")).with_columns(
        # a share of the tensor peak means something only for a launch that used the tensor cores
        tensor_pct_spec=pl.when(pl.col("tensor_type").is_not_null()).then(pl.col("tensor_pct_spec")))


@dataclass
class KernelsView:
    run: Run | None
    kernel: int | None
    sort: str = "id"
    desc: bool = False
    q: str = ""
    problems: list[str] = field(default_factory=list)
    trace: str | None = None          # ?trace=RUN: the timeline of the same program (default: found by the join)

    def params(self) -> dict:
        return {"run": self.run.run_id if self.run else None, "kernel": self.kernel,
                "sort": None if self.sort == "id" else self.sort, "desc": "1" if self.desc else None,
                "q": self.q or None, "trace": self.trace}


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
            problems.append(f"No launch {code(raw)} in this run; showing launch {ids[0] if ids else '—'}.")
            kernel = None
        if kernel is None and ids:
            kernel = ids[0]
    sort = params.get("sort") or "id"
    if sort not in SORT_KEYS:
        problems.append(f"Unknown sort column {code(sort)}; sorted by launch id.")
        sort = "id"
    return KernelsView(run, kernel, sort, params.get("desc") in ("1", "true", "yes"), params.get("q") or "", problems,
                       params.get("trace") or None)


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


def roofline_blocks(a: NcuAnalysis, frame: pl.DataFrame) -> list:
    """The roofline chart: one point per launch at (FP32 + tensor FLOP) / DRAM bytes, labelled by the work it
    mostly does; FP32 roofs always, tensor roofs (dense BF16: spec sheet and the measured cuBLAS ceiling) when a
    launch used the tensor cores."""
    g, measured = a.gpu, a.measured
    pts = frame.filter((pl.col("flop_total") > 0) & (pl.col("dram_bytes") > 0)).select(
        pl.col("id").cast(pl.String).alias("launch"), "kernel", pl.col("ai").alias("ai_flop_per_byte"),
        (pl.col("flop_total") / pl.col("duration_ns") / 1e3).alias("tflop_per_s"), "duration_us",
        pl.when(pl.col("flop_tensor").fill_null(0) > pl.col("flop_fp32").fill_null(0))
        .then(pl.lit("tensor ") + pl.col("tensor_type").str.to_uppercase()).otherwise(pl.lit("FP32")).alias("work"))
    off = frame.filter(~((pl.col("flop_total") > 0) & (pl.col("dram_bytes") > 0)))
    kinds = [("FP32", "fp32_flop_per_s", "fp32")]
    if pts.filter(pl.col("work") != "FP32").height:
        kinds.append(("BF16 tensor", "bf16_dense_flop_per_s", "bf16"))
    roofs = []
    for label, field_name, res in kinds:
        if g.dram_bandwidth_bytes_per_s and getattr(g, field_name):
            roofs.append({"label": f"{label} · spec sheet", "dram_bytes_per_s": g.dram_bandwidth_bytes_per_s,
                          "flop_per_s": getattr(g, field_name), "measured": False})
        if measured.get(res) and (measured.get("dram") or g.dram_bandwidth_bytes_per_s):
            dram = measured["dram"].value if measured.get("dram") else g.dram_bandwidth_bytes_per_s
            roofs.append({"label": f"{label} · measured", "flop_per_s": measured[res].value, "measured": True,
                          "dram_bytes_per_s": dram})
    if not roofs:
        return [Text("No roofline: the GPU's DRAM or FP32 peak is unknown.", "caption")]
    if not pts.height:
        return []
    note = ("Roofs: attainable = min(compute peak, intensity × DRAM peak); spec sheet dashed, measured ceilings "
            "(kernelscope bench: copy, FP32 FMA, cuBLAS BF16) solid. A point's FLOP are FP32 + tensor-core FLOP "
            "(ncu counters); read a tensor-core point against the BF16 roofs (TF32 runs at ½ of them, FP8 at 2×; "
            "FP64 tensor work has its own peak, not drawn).")
    if off.height:
        note += (" Not on the chart (no FLOP or no DRAM traffic counted): launches "
                 + ", ".join(str(i) for i in off["id"].to_list()) + ".")
    return [Chart("roofline", charts.roofline(pts, roofs), note)]


def overview(src: Source, view: KernelsView) -> Report:
    rep = Report("Kernels")
    for p in view.problems:
        rep.add(Text(p, "warning"))
    if view.run is None:
        return rep.add(Text("No Nsight Compute runs in the store yet: upload a report on the Upload page.", "info"))
    a = src.ncu(view.run)
    frame = display_frame(a)
    rep.subtitle = f"{code(view.run.source_name)} · run {view.run.run_id}"
    rep.add(Text(gpu_caption(a.gpu, a.measured) + f" · {frame.height} profiled launches", "caption"))
    if a.gpu_how:
        rep.add(Text(f"GPU identified: {a.gpu_how}", "caption"))
    rep.add(*notes_blocks(src.meta(view.run), [a.gpu_warning] if a.gpu_warning else []))
    for m in a.missing:
        rep.add(Text(f"**{m['quantity']}** is not in this report (needs {', '.join(m['needs'])}); "
                     f"collect it with `{m['collect_with']}`.", "warning"))
    for f in a.flagged:
        rep.add(Text(f"**Implausible for {a.gpu.name}: launch {f['id']}** ({code(f['name'])}): "
                     + "; ".join(f["flags"]) + ". Its findings and rates are shown but should not be trusted.",
                     "error"))
    total = frame["duration_ns"].sum()
    lost = frame["lost_us"].fill_null(0).sum() * 1e3
    rep.add(Metrics([
        ("launches", f"{frame.height}", None),
        ("kernel time", fmt_ns(total), "sum of gpu__time_duration.sum"),
        ("DRAM traffic", fmt_bytes(frame["dram_bytes"].sum()), "dram__bytes_read.sum + dram__bytes_write.sum"),
        ("est. time lost (biggest finding each)", fmt_ns(lost), "sum over launches of the biggest finding's estimate"),
    ]))
    cols = dict(KERNEL_COLS)
    if not a.measured.get("dram"):
        cols.pop("dram_pct_measured")
    shown = frame.sort(view.sort, descending=view.desc, nulls_last=True)
    rep.add(Heading("Launches"),
            Table("kernels", shown, cols, caption=f"sorted by {cols.get(view.sort, KERNEL_COLS['id']).header}"
                  + (" (descending)" if view.desc else "") + "; click a column header to re-sort in the browser."))
    join_problems: list[str] = []
    trace, joined = join_blocks.trace_for(src, view.run, view.trace, join_problems)
    rep.add(*[Text(p, "warning") for p in join_problems], *join_blocks.kernels_overview_blocks(trace, joined))
    rep.add(*roofline_blocks(a, frame))
    bars = frame.select(pl.col("id").cast(pl.String).alias("launch"), "kernel", pl.col("dram_gbps")).drop_nulls()
    rules = []
    if a.gpu.dram_bandwidth_bytes_per_s:
        rules.append({"label": "spec peak", "gbps": a.gpu.dram_bandwidth_bytes_per_s / 1e9, "measured": False})
    if a.measured.get("dram"):
        rules.append({"label": "measured ceiling", "gbps": a.measured["dram"].value / 1e9, "measured": True})
    if bars.height:
        rep.add(Chart("bandwidth", charts.bandwidth_bars(bars, rules)))
    occ = frame.select(pl.col("id").cast(pl.String).alias("launch"), "achieved_occupancy_pct",
                       "theoretical_occupancy_pct", "predicted_occupancy_pct").unpivot(
        index="launch", variable_name="measure", value_name="pct").drop_nulls().with_columns(
        pl.col("measure").replace({"achieved_occupancy_pct": "achieved (ncu counter)",
                                   "theoretical_occupancy_pct": "theoretical (ncu)",
                                   "predicted_occupancy_pct": "theoretical (our calculator)"}))
    if occ.height:
        rep.add(Chart("occupancy", charts.occupancy_bars(occ)))
    return rep


def _dim(row: dict, what: str) -> str:
    vals = [row.get(f"{what}_{a}") for a in "xyz"]
    if any(v is None for v in vals):
        return str(int(row[f"{what}_size"])) if row.get(f"{what}_size") is not None else "—"
    return "(" + ", ".join(str(int(v)) for v in vals) + ")"


def detail(src: Source, view: KernelsView) -> list:
    """Blocks of the kernel detail view: the launch's key numbers, findings, textbook cases, every metric."""
    if view.run is None or view.kernel is None:
        return []
    a = src.ncu(view.run)
    frame = display_frame(a).filter(pl.col("id") == view.kernel)
    if not frame.height:
        return [Text(f"No launch {view.kernel} in this run.", "warning")]
    row = frame.row(0, named=True)
    arow = a.launch(view.kernel)
    smem = (row["smem_static_bytes"] or 0) + (row["smem_dynamic_bytes"] or 0)
    regs = row["registers_per_thread"] and int(row["registers_per_thread"])
    blocks: list = [Heading(f"Launch {row['id']}: {code(row['kernel'])}"),
                    Text(f"Full name: {code(row.get('raw_name') or row['kernel_name'])} · grid {_dim(row, 'grid')} × block "
                         f"{_dim(row, 'block')} · {regs} registers/thread · shared memory {fmt_bytes(smem)}/block",
                         "caption"),
                    Metrics([
                        ("duration", fmt_ns(row["duration_ns"]), "gpu__time_duration.sum"),
                        ("DRAM", fmt_rate(row["dram_gbps"] * 1e9, "B/s") if row["dram_gbps"] is not None else "—",
                         f"{fmt_pct(row['dram_pct_spec'])} of the spec peak"),
                        ("FP32", fmt_rate(row["fp32_tflops"] * 1e12, "FLOP/s") if row["fp32_tflops"] is not None else "—",
                         "(fadd + fmul + 2·ffma) / duration"),
                        ("tensor", fmt_rate(row["tensor_tflops"] * 1e12, "FLOP/s") if row["tensor_tflops"] else "—",
                         f"{row['tensor_type']}, {fmt_pct(row['tensor_pct_spec'])} of the spec peak" if row["tensor_type"]
                         else "sm__ops_path_tensor_src_*.sum / duration"),
                        ("occupancy [%] achieved / ncu / ours",
                         " / ".join("—" if row[k] is None else f"{row[k]:.0f}" for k in (
                             "achieved_occupancy_pct", "theoretical_occupancy_pct", "predicted_occupancy_pct")),
                         f"limiter (ours): {row['occupancy_limiter'] or '—'}"),
                        ("bank ways ld / st", " / ".join("—" if row[k] is None else f"{row[k]:.1f}" for k in
                                                          ("smem_ld_conflict_degree", "smem_st_conflict_degree")),
                         "wavefronts / (wavefronts − conflicts)"),
                        ("ld sectors/request", "—" if row["global_ld_sectors_per_request"] is None else
                         f"{row['global_ld_sectors_per_request']:.1f} (ideal "
                         + ("—" if row["global_ld_ideal_sectors_per_request"] is None
                            else f"{row['global_ld_ideal_sectors_per_request']:.0f}") + ")",
                         "coalescing: l1tex__t_sectors / l1tex__t_requests, global loads"),
                    ])]
    if arow.get("flags"):
        blocks.append(Text(f"**Implausible for {a.gpu.name}:** " + "; ".join(arow["flags"])
                           + ". The numbers of this launch should not be trusted.", "error"))
    findings = kernel_findings(arow, a.gpu, a.measured)
    blocks.append(Heading("Findings, ranked by estimated time lost", 3))
    if not findings:
        blocks.append(Text("No findings for this launch (its counters are missing or it is at its bound).", "caption"))
    for i, f in enumerate(findings, 1):
        cited = "; ".join(f"{code(k)} = {v}" for k, v in f.metrics.items())
        blocks.append(Text(
            f"**{i}. {f.title}** — est. time lost **{fmt_ns(f.lost_ns)}** ({f.share:.0%} of the launch)\n\n"
            f"{f.text}\n\n*Based on:* {cited}.\n\n*Model:* {f.model}."))
    trace, joined = join_blocks.trace_for(src, view.run, view.trace, [])
    blocks.extend(join_blocks.launch_blocks(trace, joined, view.kernel))
    blocks.extend(case_blocks(arow, a.gpu, src, view.run.run_id))
    blocks.append(Heading("Every metric of this launch", 3))
    metrics = src.launch_metrics(view.run.run_id, view.kernel)
    if view.q:
        metrics = metrics.filter(pl.col("metric").str.contains(view.q, literal=True))
    blocks.append(Table("metrics", metrics.select("metric", "value", "unit", "text"), {
        "metric": text("metric (ncu name)"), "value": num("value", help="in base units (ns, bytes, percent)"),
        "unit": text("unit"), "text": text("text value")},
        caption=f"{metrics.height} metrics" + (f" matching {code(view.q)}" if view.q else ""), height=400))
    return blocks


def case_blocks(row: dict, gpu: GPUSpec, src: Source, run_id: str) -> list:
    """Textbook cases this launch may run (analyzers.cases.kernel_match, recognised by its name) whose Nsight
    Compute counters it has: the case's prediction for this GPU next to the measurement, with the verdict."""
    from analyzers.cases.kernel_match import kernel_comparisons
    out: list = [Heading("Textbook cases", 3)]
    name = f"{row.get('kernel_name') or ''} {row.get('short_name') or ''}"
    m = src.launch_metrics(run_id, row["id"]).drop_nulls("value")
    matched = kernel_comparisons(name, dict(zip(m["metric"].to_list(), m["value"].to_list())), gpu)
    if not matched:
        return out + [Text("No textbook case recognised from this kernel's name; evaluate any case for this GPU on "
                           "the [Textbook cases](cases) page.", "caption")]
    rows, notes = [], []
    for kc in matched:
        if kc.problem:
            notes.append(f"{code(kc.case_id)}: {code(kc.problem)}")
        for c in kc.comparisons:
            j = c.to_json()
            rows.append({"case": f"{kc.case_id} ({kc.section})",
                         "params": ", ".join(f"{k}={v}" for k, v in kc.params.items()) or "chapter's",
                         "quantity": c.prediction.label, "predicted": j["predicted"]["display"],
                         "measured": j["measured_display"], "verdict": j["verdict"], "explanation": j["explanation"]})
    if rows:
        out.append(Table("cases", pl.DataFrame(rows), {
            "case": text("case (section)"), "params": text("parameters from the name"),
            "quantity": text("quantity"), "predicted": text("predicted (model, this GPU)"),
            "measured": text("measured (ncu counters)"), "verdict": text("verdict"),
            "explanation": text("why")}, static=True,
            caption="Cases recognised from the kernel's name; other parameters are the chapter's. A verdict means "
                    "something only if the launch runs that configuration — change the parameters on the "
                    "[Textbook cases](cases) page."))
    elif not notes:
        out.append(Text("Recognised " + ", ".join(code(kc.case_id) for kc in matched) + " from the name, but this "
                        "launch lacks the counters they are checked with.", "caption"))
    for n_ in notes:
        out.append(Text(f"Could not evaluate {n_}", "caption"))
    return out


def build(src: Source, params: dict) -> Report:
    """The Kernels page of a URL. For an export (strict), a run that is not an ncu run is an error."""
    view = resolve(src, params)
    rep = overview(src, view)
    return rep.add(*detail(src, view))
