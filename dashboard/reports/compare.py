"""Compare: run A vs run B (?a=RUN&b=RUN&noise=5): kernels matched by name and launch configuration, each faster,
slower or unchanged (analyzers.compare), and for two GPUs each kernel against its own GPU's peaks; two bench runs
compare case by case."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import polars as pl

from analyzers.compare import compare_runs, has_dims, ncu_launches, totals, trace_launches
from analyzers.units import fmt_ns
from collectors.schema import TRACE_KINDS
from collectors.store import Run
from dashboard import charts
from dashboard.reports.blocks import Chart, Heading, Metrics, Report, Table, Text, code, num, text
from dashboard.reports.common import pick_run
from dashboard.reports.gpus import bench_compare_blocks
from dashboard.source import Source

COMPARABLE = ("ncu", "kineto", "nsys", "bench")


@dataclass
class CompareView:
    a: Run | None
    b: Run | None
    noise_pct: float = 5.0
    problems: list[str] = field(default_factory=list)

    def params(self) -> dict:
        return {"a": self.a.run_id if self.a else None, "b": self.b.run_id if self.b else None,
                "noise": None if self.noise_pct == 5.0 else f"{self.noise_pct:g}"}


def resolve(src: Source, params: dict) -> CompareView:
    problems: list[str] = []
    if params.get("b"):
        b = pick_run(src, params.get("b"), COMPARABLE, problems)
    else:  # newest run of the first kind that has two runs (Nsight Compute first)
        b = None
        for kinds in (("ncu",), TRACE_KINDS, ("bench",)):
            rs = src.runs(kinds)
            if len(rs) >= 2:
                b = rs[0]
                break
        b = b or pick_run(src, None, COMPARABLE, problems)
    if params.get("a"):
        a = pick_run(src, params.get("a"), COMPARABLE, problems)
    elif b is None:
        a = None
    else:
        kinds = TRACE_KINDS if b.kind in TRACE_KINDS else (b.kind,)
        same = [r for r in src.runs(kinds) if r.run_id != b.run_id]
        a = same[0] if same else None
    try:
        noise = float(params.get("noise") or 5.0)
        if not (0 <= noise <= 100 and math.isfinite(noise)):
            raise ValueError
    except ValueError:
        problems.append(f"Noise floor {code(params.get('noise'))} is not a percentage; using 5 %.")
        noise = 5.0
    return CompareView(a, b, noise, problems)


def launches(src: Source, run: Run, dims: bool = True) -> tuple[pl.DataFrame, bool]:
    """(launch rows, per_launch): ncu runs launch by launch with their % of peak (configuration by grid and block
    dimensions, or with dims=False by blocks and threads per block); traces per kernel."""
    if run.kind == "ncu":
        k = src.ncu(run).kernels.with_columns(dram_pct=pl.col("dram_peak_fraction") * 100,
                                              fp32_pct=pl.col("fp32_peak_fraction") * 100)
        return ncu_launches(k, extra=("dram_pct", "fp32_pct"), dims=dims), True
    return trace_launches(src.table(run.run_id, "gpu_ops")), False


def pair(src: Source, a: Run, b: Run) -> tuple[pl.DataFrame, pl.DataFrame, bool, bool]:
    """(launches of A, of B, per_launch, by dimensions): what the page compares. Two ncu runs are matched by grid
    and block dimensions when both have them for every launch, else both by blocks and threads per block."""
    dims = True
    if a.kind == "ncu" and b.kind == "ncu":
        dims = has_dims(src.ncu(a).kernels) and has_dims(src.ncu(b).kernels)
    la, per_launch = launches(src, a, dims)
    lb, _ = launches(src, b, dims)
    return la, lb, per_launch, dims


def build(src: Source, params: dict) -> Report:
    view = resolve(src, params)
    rep = Report("Compare")
    for p in view.problems:
        rep.add(Text(p, "warning"))
    a, b = view.a, view.b
    if a is None or b is None or a.run_id == b.run_id:
        return rep.add(Text("Compare needs two runs of the same kind in the store (two Nsight Compute reports, "
                            "two traces, or two bench runs).", "info"))
    rep.subtitle = f"A = {code(a.source_name)} ({a.run_id}) · B = {code(b.source_name)} ({b.run_id})"
    ga, gb = a.meta.get("gpu_name") or "unknown GPU", b.meta.get("gpu_name") or "unknown GPU"
    if a.kind == "bench" or b.kind == "bench":
        if a.kind != b.kind:
            return rep.add(Text(f"Run A is {a.kind} and run B is {b.kind}: only runs of the same kind compare.", "error"))
        return rep.add(*bench_compare_blocks(src, [a.run_id, b.run_id]))
    if (a.kind in TRACE_KINDS) != (b.kind in TRACE_KINDS):
        return rep.add(Text(f"Run A is {a.kind} and run B is {b.kind}: only runs of the same kind compare "
                            "(Nsight Compute with Nsight Compute, traces with traces).", "error"))
    if a.kind == "ncu" and b.kind == "ncu":   # the GPU each run is analysed on (named, inferred or given)
        ga, gb = src.ncu(a).gpu.name, src.ncu(b).gpu.name
        for label, r in (("A", a), ("B", b)):
            for f in src.ncu(r).flagged:
                rep.add(Text(f"Run {label}, launch {f['id']} ({code(f['name'])}) is implausible for its GPU: "
                             + "; ".join(f["flags"]) + ".", "error"))
    la, lb, per_launch, dims = pair(src, a, b)
    cmp = compare_runs(la, lb, per_launch=per_launch, noise_floor=view.noise_pct / 100)
    t = totals(cmp)
    c = t["counts"]
    rep.add(Text(f"A: **{ga}** · B: **{gb}** · kernels matched by name and launch configuration"
                 + ("" if dims else " (blocks per grid and threads per block: a run lacks grid and block dimensions)")
                 + (" (the n-th launch of each in A with the n-th in B)" if per_launch else
                    " (per-launch medians; the launches' spread widens the threshold)")
                 + f"; a change within max({view.noise_pct:g} %, 2 × the combined relative spread) is *unchanged*.",
                 "caption"))
    rep.add(Metrics([
        ("kernel time A", fmt_ns(t["total_a_ns"]), "sum of kernel durations in A"),
        ("kernel time B", fmt_ns(t["total_b_ns"]), "sum of kernel durations in B"),
        ("change", "—" if t["change_pct"] is None else f"{t['change_pct']:+.1f} %", "B / A − 1"),
        ("faster / slower / unchanged", f"{c['faster']} / {c['slower']} / {c['unchanged']}", None),
        ("added / removed", f"{c['added']} / {c['removed']}", None),
    ]))
    shown = cmp.with_columns(
        kernel=pl.col("name"), a_us=pl.col("median_ns_a") / 1e3, b_us=pl.col("median_ns_b") / 1e3,
        spread_a_us=pl.col("spread_ns_a") / 1e3, spread_b_us=pl.col("spread_ns_b") / 1e3,
        delta_us=pl.col("delta_ns") / 1e3, nth=pl.col("occurrence") + 1)
    cols = {"status": text("status"), "kernel": text("kernel"), "config": text("launch configuration")}
    if per_launch:
        cols["nth"] = num("launch #", help="n-th launch of this kernel and configuration in the run")
    else:
        cols.update({"n_a": num("launches A"), "n_b": num("launches B")})
    cols.update({"a_us": num("A", "µs", "%.2f", "duration (per-launch median for traces)"),
                 "b_us": num("B", "µs", "%.2f", "duration (per-launch median for traces)")})
    if not per_launch:
        cols.update({"spread_a_us": num("spread A", "µs", "%.2f", "standard deviation of A's launches"),
                     "spread_b_us": num("spread B", "µs", "%.2f", "standard deviation of B's launches")})
    cols.update({"change_pct": num("change", "%", "%+.1f", "B / A − 1"),
                 "threshold_pct": num("threshold", "%", "%.1f", "max(noise floor, 2 × combined relative spread)"),
                 "delta_us": num("total Δ", "µs", "%+.1f", "total time B − total time A of this kernel")})
    rep.add(Heading("Kernels"), Table("compare", shown, cols))
    matched = shown.filter(pl.col("change_pct").is_not_null())
    if matched.height:
        lab = matched.with_columns(label=pl.concat_str([
            pl.col("name").str.slice(0, 60), pl.lit(" "), pl.col("config"),
            pl.when(pl.col("occurrence") > 0).then(pl.format(" #{}", pl.col("occurrence") + 1)).otherwise(pl.lit(""))]))
        rep.add(Chart("change", charts.change_bars(lab.select("label", "change_pct", "threshold_pct", "status").head(40),
                                                   view.noise_pct)))
    if per_launch and ga != gb:
        rep.add(Heading(f"GPU vs GPU: {ga} vs {gb}, each against its own peaks"))
        norm = shown.filter(pl.col("change_pct").is_not_null())
        rep.add(Table("gpu_vs_gpu", norm, {
            "kernel": text("kernel"), "config": text("launch configuration"),
            "dram_pct_a": num(f"DRAM of {ga}'s peak", "%", "%.1f", "achieved / that GPU's spec DRAM peak"),
            "dram_pct_b": num(f"DRAM of {gb}'s peak", "%", "%.1f", "achieved / that GPU's spec DRAM peak"),
            "fp32_pct_a": num(f"FP32 of {ga}'s peak", "%", "%.1f", "achieved / that GPU's spec FP32 peak"),
            "fp32_pct_b": num(f"FP32 of {gb}'s peak", "%", "%.1f", "achieved / that GPU's spec FP32 peak"),
            "change_pct": num("duration change", "%", "%+.1f")}))
    return rep
