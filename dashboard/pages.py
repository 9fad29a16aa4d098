"""Page builders: URL query parameters + the run store -> a `Report` (tables, charts, text).

The Streamlit views draw these reports and add the widgets; `kernelscope export` and the download button
write the same reports to one HTML file. A page's whole state is in its query parameters:

    home                      (none)
    runs      ?kind=ncu&gpu=NVIDIA+H200
    kernels   ?run=RUN&kernel=LAUNCH_ID&sort=COLUMN&desc=1&q=METRIC_FILTER
    compare   ?a=RUN&b=RUN&noise=5
    gpus      ?gpu=NAME,NAME
    timeline  ?run=RUN&device=RANK:DEVICE&kernel=REGEX&speedup=S
    cases     ?case=ID&gpu=NAME&<param>=VALUE…&meas=QUANTITY:VALUE:UNIT (repeatable)
    claims    ?verdict=V (repeatable)&claim=ID
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import polars as pl

from analyzers.gpus import GPUSpec, all_gpus, find_gpu, resolve_gpu
from collectors.store import Run, Store
from dashboard import charts
from dashboard.report import Chart, Heading, Metrics, Report, Table, Text, code
from dashboard.theme import Col, fmt_bytes, fmt_ns, fmt_pct, fmt_rate, fmt_value, num, text

PAGE_FOR_KIND = {"ncu": "kernels", "kineto": "timeline", "nsys": "timeline", "bench": "gpus"}
TRACE_KINDS = ("kineto", "nsys")
EXPORTABLE = ("home", "runs", "kernels", "compare", "gpus", "timeline", "cases", "claims")


def link(page: str, **params) -> str:
    """A relative link to a page with its query parameters (empty values dropped)."""
    q = {k: v for k, v in params.items() if v not in (None, "", [])}
    return page + (f"?{urlencode(q)}" if q else "")


# ---------------------------------------------------------------------------------------------------
# Data source: the store plus analyses (the app subclasses it with Streamlit caches)
# ---------------------------------------------------------------------------------------------------

@dataclass
class NcuRun:
    analyzed: pl.DataFrame
    gpu: GPUSpec
    missing: list[dict]


class Source:
    def __init__(self, store: Store):
        self.store = store
        self.root = str(store.root)

    def runs(self, kinds: tuple[str, ...] | None = None) -> list[Run]:
        rs = self.store.runs()
        return [r for r in rs if r.kind in kinds] if kinds else rs

    def get(self, run_id: str) -> Run:
        return self.store.get(run_id)

    def table(self, run_id: str, name: str) -> pl.DataFrame:
        return self.store.get(run_id).table(name)

    def ncu(self, run_id: str) -> NcuRun:
        return load_ncu(self.root, run_id)

    def ceilings(self) -> pl.DataFrame:
        return load_ceilings(self.runs(("bench",)))

    def kernels_frame(self, run_id: str) -> pl.DataFrame:
        return kernels_frame(self, run_id)

    def launch_metrics(self, run_id: str, kernel: int) -> pl.DataFrame:
        """Every ncu metric of one launch (long form: metric, value, unit, text)."""
        return self.table(run_id, "metrics").filter(pl.col("id") == kernel)

    def bench_results(self) -> pl.DataFrame:
        return load_bench_results(self.runs(("bench",)))


def load_ncu(root: str, run_id: str) -> NcuRun:
    from analyzers.kernels import analyze_kernels, missing_quantities
    run = Store(root).get(run_id)
    gpu = resolve_gpu(run.meta.get("gpu_name"), run.meta.get("device_attributes"))
    analyzed = analyze_kernels(run.table("kernels"), gpu)
    return NcuRun(analyzed, gpu, missing_quantities(analyzed))


# ---- measured ceilings and bench results (runs of kind "bench": tables "ceilings" and "results") ------

CEILING_SCHEMA = pl.Schema({"gpu_name": pl.String, "gpu": pl.String, "ceiling": pl.String, "resource": pl.String,
                            "value": pl.Float64, "unit": pl.String, "cv": pl.Float64, "source": pl.String,
                            "run_id": pl.String})
RESOURCES = {  # resource -> (spec field, label)
    "dram": ("dram_bandwidth_bytes_per_s", "DRAM bandwidth"),
    "l2": (None, "L2 bandwidth"),
    "smem": (None, "shared-memory bandwidth"),
    "bf16": ("bf16_dense_flop_per_s", "BF16 dense (tensor cores)"),
    "fp32": ("fp32_flop_per_s", "FP32 (CUDA cores)"),
    "h2d": ("host_link_bytes_per_s", "host ↔ device"),
    "launch": (None, "launch cost"),
    "graph": (None, "graph replay per node"),
}


def classify_ceiling(name: str, unit: str) -> str | None:
    """Which resource a measured ceiling describes, from its name and unit (B/s, FLOP/s, s)."""
    n = name.lower()
    if unit == "FLOP/s":
        if any(w in n for w in ("bf16", "tensor", "mma", "gemm", "matmul", "fp16")):
            return "bf16"
        return "fp32" if any(w in n for w in ("fp32", "fma", "ffma", "float")) else None
    if unit == "B/s":
        if any(w in n for w in ("h2d", "d2h", "host", "pinned", "pageable", "pcie")):
            return "h2d"
        if "l2" in n:
            return "l2"
        if any(w in n for w in ("smem", "shared")):
            return "smem"
        if any(w in n for w in ("dram", "copy", "hbm", "memory")):
            return "dram"
        return None
    if unit == "s":
        if "graph" in n:
            return "graph"
        if "launch" in n:
            return "launch"
    return None


def gpu_labels(bench_runs: list[Run]) -> dict[str, str]:
    """run id -> the GPU's label: its name, plus the first characters of its UUID when bench runs of several
    physical GPUs with that name are in the store (one run per GPU of a multi-GPU server)."""
    uuids: dict[str, set] = {}
    for r in bench_runs:
        uuids.setdefault(r.meta.get("gpu_name") or "unknown GPU", set()).add(r.meta.get("gpu_uuid"))
    out = {}
    for r in bench_runs:
        name = r.meta.get("gpu_name") or "unknown GPU"
        uuid = r.meta.get("gpu_uuid")
        out[r.run_id] = f"{name} · {str(uuid)[:12]}" if len(uuids[name]) > 1 and uuid else name
    return out


def _first(df: pl.DataFrame, *names: str) -> str | None:
    return next((n for n in names if n in df.columns), None)


def load_ceilings(bench_runs: list[Run]) -> pl.DataFrame:
    """Every measured ceiling of the bench runs, one row each (CEILING_SCHEMA). Tolerates the column names
    `ceiling`/`metric`/`name`/`case` for the ceiling's name; a run without a readable table is skipped."""
    rows = []
    labels = gpu_labels(bench_runs)
    for run in bench_runs:
        if "ceilings" not in run.tables:
            continue
        try:
            df = run.table("ceilings")
        except (OSError, KeyError, pl.exceptions.PolarsError):
            continue
        name_c = _first(df, "ceiling", "metric", "name", "case")
        if name_c is None or "value" not in df.columns:
            continue
        gpu = run.meta.get("gpu_name") or "unknown GPU"
        for r in df.iter_rows(named=True):
            unit = str(r.get("unit") or "")
            name = str(r[name_c])
            if "case" in df.columns and name_c != "case" and r.get("case") and r["case"] != "ceiling":
                name = f"{r['case']}: {name}" if r["case"] not in name else name
            v = r.get("value")
            if v is None or not isinstance(v, (int, float)):
                continue
            rows.append({"gpu_name": gpu, "gpu": labels[run.run_id], "ceiling": name,
                         "resource": classify_ceiling(name, unit), "value": float(v), "unit": unit,
                         "cv": r.get("cv"), "source": str(r.get("source") or "microbenchmark"),
                         "run_id": run.run_id})
    return pl.DataFrame(rows, schema=CEILING_SCHEMA)


def best_ceilings(ceilings: pl.DataFrame, gpu_name: str) -> dict[str, tuple[float, str]]:
    """The highest measured rate (or lowest cost) per resource of one GPU: resource -> (value, source text)."""
    out: dict[str, tuple[float, str]] = {}
    sub = ceilings.filter((pl.col("gpu_name") == gpu_name) & pl.col("resource").is_not_null())
    for r in sub.iter_rows(named=True):
        res, v = r["resource"], r["value"]
        better = (v < out[res][0]) if r["unit"] == "s" and res in out else (res not in out or v > out[res][0])
        if better:
            out[res] = (v, f"{r['ceiling']} ({r['source']}, run {r['run_id']})")
    return out


def measured_launch_floor_ns(store, gpu_name: str | None) -> float | None:
    """The launch floor for launch-bound detection: the back-to-back empty-kernel launch time measured by
    `kernelscope bench` (ceiling `launch_back_to_back`) on a GPU of the same name, newest run first; None
    when the store holds no such measurement."""
    if not gpu_name:
        return None
    for run in store.runs():
        if run.kind != "bench" or run.meta.get("gpu_name") != gpu_name or "ceilings" not in run.tables:
            continue
        c = run.table("ceilings").filter(pl.col("metric") == "launch_back_to_back")
        if c.height and c["unit"][0] == "s":
            return float(c["value"][0]) * 1e9
    return None


RESULT_COLUMNS = ("case", "metric", "value", "unit", "params", "cv", "predicted", "predicted_unit", "verdict")


def load_bench_results(bench_runs: list[Run]) -> pl.DataFrame:
    """All bench results with the run's GPU: gpu_name, run_id, case, metric, value, unit, params (JSON text),
    cv, predicted, predicted_unit, verdict (missing columns are null)."""
    frames = []
    labels = gpu_labels(bench_runs)
    for run in bench_runs:
        if "results" not in run.tables:
            continue
        try:
            df = run.table("results")
        except (OSError, KeyError, pl.exceptions.PolarsError):
            continue
        if not {"case", "metric", "value"} <= set(df.columns):
            continue
        cols = []
        for c in RESULT_COLUMNS:
            if c not in df.columns:
                cols.append(pl.lit(None, pl.Float64 if c in ("cv", "predicted", "value") else pl.String).alias(c))
            elif c == "params" and df.schema[c] != pl.String:
                cols.append(pl.Series(c, [json.dumps(_plain(v), sort_keys=True) for v in df[c].to_list()]))
            elif c in ("cv", "predicted", "value"):
                cols.append(pl.col(c).cast(pl.Float64, strict=False))
            else:
                cols.append(pl.col(c).cast(pl.String))
        frames.append(df.select(cols).with_columns(gpu_name=pl.lit(run.meta.get("gpu_name") or "unknown GPU"),
                                                   gpu=pl.lit(labels[run.run_id]), run_id=pl.lit(run.run_id)))
    if not frames:
        return pl.DataFrame(schema={"case": pl.String, "metric": pl.String, "value": pl.Float64, "unit": pl.String,
                                    "params": pl.String, "cv": pl.Float64, "predicted": pl.Float64,
                                    "predicted_unit": pl.String, "verdict": pl.String, "gpu_name": pl.String,
                                    "gpu": pl.String, "run_id": pl.String})
    return pl.concat(frames, how="diagonal_relaxed")


def _plain(v):
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items() if x is not None}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return v


# ---------------------------------------------------------------------------------------------------
# Run selection from query parameters
# ---------------------------------------------------------------------------------------------------

def pick_run(src: Source, wanted: str | None, kinds: tuple[str, ...], problems: list[str],
             default_index: int = 0) -> Run | None:
    """The run a parameter names (id or unique prefix) if it is of one of `kinds`; otherwise the newest such
    run (with a problem noted). None when the store has none."""
    runs = src.runs(kinds)
    if wanted:
        try:
            run = src.get(wanted)
            if run.kind in kinds:
                return run
            problems.append(f"Run {code(wanted)} is a {run.kind} run, not {' or '.join(kinds)}.")
        except KeyError as e:
            problems.append(f"{e.args[0] if e.args else 'No such run'} — showing the newest run instead."
                            .replace(f"in store {src.root}", "in this store"))
    if not runs:
        return None
    return runs[min(default_index, len(runs) - 1)]


def run_label(run: Run) -> str:
    m = run.manifest
    gpu = run.meta.get("gpu_name") or "unknown GPU"
    return f"{run.run_id} — {m['source_name']} ({run.kind}, {gpu})"


# ---------------------------------------------------------------------------------------------------
# Home
# ---------------------------------------------------------------------------------------------------

def gpu_table(src: Source) -> Table:
    """The GPU registry with measured ceilings next to the spec figures where bench runs have them."""
    ceil = src.ceilings()
    measured = {g: best_ceilings(ceil, g) for g in ceil["gpu_name"].unique().to_list()}
    names = [g.name for g in all_gpus()]
    extra = [g for g in measured if g not in names and find_gpu(g) is None]
    rows = []
    store_gpus: dict[str, int] = {}
    for r in src.runs():
        g = r.meta.get("gpu_name")
        if g:
            key = (find_gpu(g).name if find_gpu(g) else g)
            store_gpus[key] = store_gpus.get(key, 0) + 1
    for g in all_gpus():
        m = {}
        for name, res in measured.items():
            if find_gpu(name) is g or name == g.name:
                m = res
        rows.append({
            "gpu": g.name, "cc": f"{g.cc[0]}.{g.cc[1]}", "sm_count": g.sm_count, "runs": store_gpus.get(g.name, 0),
            "dram_spec_gbps": _div(g.dram_bandwidth_bytes_per_s, 1e9),
            "dram_measured_gbps": _div(m.get("dram", (None,))[0], 1e9),
            "fp32_spec_tflops": _div(g.fp32_flop_per_s, 1e12),
            "fp32_measured_tflops": _div(m.get("fp32", (None,))[0], 1e12),
            "bf16_spec_tflops": _div(g.bf16_dense_flop_per_s, 1e12),
            "bf16_measured_tflops": _div(m.get("bf16", (None,))[0], 1e12),
            "l2_mib": _div(g.l2_bytes, 2**20), "memory_gb": _div(g.memory_bytes, 1e9),
            "host_link": g.host_link,
        })
    for name in extra:
        m = measured[name]
        rows.append({"gpu": name, "runs": store_gpus.get(name, 0),
                     "dram_measured_gbps": _div(m.get("dram", (None,))[0], 1e9),
                     "fp32_measured_tflops": _div(m.get("fp32", (None,))[0], 1e12),
                     "bf16_measured_tflops": _div(m.get("bf16", (None,))[0], 1e12)})
    frame = pl.DataFrame(rows, schema={
        "gpu": pl.String, "cc": pl.String, "sm_count": pl.Int64, "runs": pl.Int64, "dram_spec_gbps": pl.Float64,
        "dram_measured_gbps": pl.Float64, "fp32_spec_tflops": pl.Float64, "fp32_measured_tflops": pl.Float64,
        "bf16_spec_tflops": pl.Float64, "bf16_measured_tflops": pl.Float64, "l2_mib": pl.Float64,
        "memory_gb": pl.Float64, "host_link": pl.String})
    spec = "spec sheet (`kernelscope gpus --format json` lists each source)"
    meas = "best measured ceiling of the GPU's bench runs (kernelscope bench)"
    return Table("gpus", frame, {
        "gpu": text("GPU"), "cc": text("CC"), "sm_count": num("SMs"), "runs": num("runs in store"),
        "dram_spec_gbps": num("DRAM spec", "GB/s", "%.0f", spec),
        "dram_measured_gbps": num("DRAM measured", "GB/s", "%.0f", meas),
        "fp32_spec_tflops": num("FP32 spec", "TFLOP/s", "%.1f", spec),
        "fp32_measured_tflops": num("FP32 measured", "TFLOP/s", "%.1f", meas),
        "bf16_spec_tflops": num("BF16 dense spec", "TFLOP/s", "%.0f", spec),
        "bf16_measured_tflops": num("BF16 measured", "TFLOP/s", "%.0f", meas),
        "l2_mib": num("L2", "MiB", "%.0f", spec), "memory_gb": num("memory", "GB", "%.0f", spec),
        "host_link": text("host link"),
    })


def _div(v, s):
    return None if v is None else v / s


def runs_table(runs: list[Run], name: str = "runs") -> Table:
    import datetime as dt
    rows = []
    for r in runs:
        m = r.manifest
        meta = m.get("meta", {})
        rows.append({
            "open": link(PAGE_FOR_KIND.get(r.kind, "runs"), run=r.run_id),
            "run_id": r.run_id, "kind": r.kind, "source_name": m["source_name"], "gpu_name": meta.get("gpu_name"),
            "items": meta.get("kernel_count", meta.get("result_count", (meta.get("counts") or {}).get("kernels"))),
            "size_mib": (m.get("size_bytes") or 0) / 2**20,
            "created": dt.datetime.fromtimestamp(m["created"], dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        })
    frame = pl.DataFrame(rows, schema={"open": pl.String, "run_id": pl.String, "kind": pl.String,
                                       "source_name": pl.String, "gpu_name": pl.String, "items": pl.Int64,
                                       "size_mib": pl.Float64, "created": pl.String})
    return Table(name, frame, {
        "open": Col("open", kind="link", link_text="open"), "run_id": text("run id"), "kind": text("kind"),
        "source_name": text("file"), "gpu_name": text("GPU"),
        "items": num("kernels / results", help="profiled launches (ncu), kernels (traces) or results (bench)"),
        "size_mib": num("artifact", "MiB", "%.2f"), "created": text("stored"),
    })


def home(src: Source) -> Report:
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
    if ncu_runs:
        newest = ncu_runs[0]
        top = top_findings(src, newest, limit=5)
        rep.add(Heading(f"Biggest opportunities in the newest Nsight Compute run ({code(newest.manifest['source_name'])})", 3))
        if top.height:
            rep.add(Table("top_findings", top, {
                "open": Col("open", kind="link", link_text="open"), "kernel": text("kernel"),
                "launch": num("launch id"), "finding": text("finding"),
                "lost_us": num("est. time lost", "µs", "%.1f", "analyzers/findings.py: throughput-bound model"),
                "share_pct": num("of the launch", "%", "%.0f"),
            }))
        else:
            rep.add(Text("No findings: every launch is close to its bound.", "caption"))
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


def top_findings(src: Source, run: Run, limit: int = 5) -> pl.DataFrame:
    table = src.kernels_frame(run.run_id).select(pl.col("id").alias("launch"), "kernel",
                                                 pl.col("top_finding").alias("finding"), "lost_us", "share_pct")
    return table.sort("lost_us", descending=True, nulls_last=True).head(limit).with_columns(
        open=pl.format("kernels?run={}&kernel={}", pl.lit(run.run_id), pl.col("launch")))


def findings_table(src: Source, run_id: str) -> pl.DataFrame:
    """The biggest finding of every launch: launch, kernel, finding, lost_us, share_pct."""
    from analyzers.findings import kernel_findings
    nr = src.ncu(run_id)
    measured = best_ceilings(src.ceilings(), nr.gpu.name)
    rows = []
    for r in nr.analyzed.iter_rows(named=True):
        fs = kernel_findings(r, nr.gpu, measured)
        f = fs[0] if fs else None
        rows.append({"launch": r["id"], "kernel": r["short_name"], "finding": f.title if f else None,
                     "lost_us": f.lost_ns / 1e3 if f else None, "share_pct": f.share * 100 if f else None})
    return pl.DataFrame(rows, schema={"launch": pl.Int64, "kernel": pl.String, "finding": pl.String,
                                      "lost_us": pl.Float64, "share_pct": pl.Float64})


# ---------------------------------------------------------------------------------------------------
# Runs
# ---------------------------------------------------------------------------------------------------

def runs_page(src: Source, kind: str | None = None, gpu: str | None = None) -> Report:
    runs = src.runs()
    shown = [r for r in runs if (not kind or r.kind == kind) and (not gpu or r.meta.get("gpu_name") == gpu)]
    rep = Report("Runs", subtitle=f"{len(shown)} of {len(runs)} runs in the store"
                 + (f" · kind {kind}" if kind else "") + (f" · GPU {gpu}" if gpu else ""))
    if shown:
        rep.add(runs_table(shown))
    else:
        rep.add(Text("No run matches." if runs else
                     "The store is empty. Upload an artifact, or run `kernelscope ingest sample_traces/`.", "info"))
    return rep


# ---------------------------------------------------------------------------------------------------
# Kernels
# ---------------------------------------------------------------------------------------------------

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
}
SORT_KEYS = tuple(KERNEL_COLS)


@dataclass
class KernelsView:
    run: Run | None
    kernel: int | None
    sort: str = "id"
    desc: bool = False
    q: str = ""
    problems: list[str] = field(default_factory=list)

    def params(self) -> dict:
        return {"run": self.run.run_id if self.run else None, "kernel": self.kernel,
                "sort": None if self.sort == "id" else self.sort, "desc": "1" if self.desc else None,
                "q": self.q or None}


def resolve_kernels(src: Source, params: dict) -> KernelsView:
    problems: list[str] = []
    run = pick_run(src, params.get("run"), ("ncu",), problems)
    kernel = None
    if run is not None:
        ids = src.ncu(run.run_id).analyzed["id"].to_list()
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
    return KernelsView(run, kernel, sort, params.get("desc") in ("1", "true", "yes"), params.get("q") or "", problems)


def gpu_caption(gpu: GPUSpec, measured: dict) -> str:
    peak = gpu.dram_bandwidth_bytes_per_s
    parts = [f"GPU **{gpu.name}** (CC {gpu.cc[0]}.{gpu.cc[1]}, {gpu.sm_count} SMs"]
    if peak:
        parts.append(f", DRAM spec {fmt_rate(peak, 'B/s')}")
    if gpu.fp32_flop_per_s:
        parts.append(f", FP32 spec {fmt_rate(gpu.fp32_flop_per_s, 'FLOP/s')}")
    parts.append(")" if gpu.from_registry else "; specs from the report's device attributes)")
    if measured.get("dram") or measured.get("fp32"):
        m = []
        if measured.get("dram"):
            m.append(f"DRAM {fmt_rate(measured['dram'][0], 'B/s')}")
        if measured.get("fp32"):
            m.append(f"FP32 {fmt_rate(measured['fp32'][0], 'FLOP/s')}")
        parts.append(" · measured ceilings: " + ", ".join(m))
    return "".join(parts)


def kernels_frame(src: Source, run_id: str) -> pl.DataFrame:
    """The analyzed launches with display columns (µs, GB/s, %, TFLOP/s) and each launch's biggest finding."""
    nr = src.ncu(run_id)
    measured = best_ceilings(src.ceilings(), nr.gpu.name)
    a = nr.analyzed
    top = findings_table(src, run_id).select("launch", pl.col("finding").alias("top_finding"), "lost_us", "share_pct")
    meas_dram = measured.get("dram", (None,))[0]
    return a.with_columns(
        kernel=pl.col("short_name"),
        duration_us=pl.col("duration_ns") / 1e3,
        dram_gbps=pl.col("dram_bandwidth_gbps"),
        dram_pct_spec=pl.col("dram_peak_fraction") * 100,
        dram_pct_measured=(pl.col("dram_bandwidth_gbps") * 1e9 / meas_dram * 100) if meas_dram else pl.lit(None, pl.Float64),
        fp32_tflops=pl.when(pl.col("duration_ns") > 0).then(pl.col("flop_fp32") / pl.col("duration_ns") / 1e3),
        tensor_pct_spec=pl.when(pl.col("tensor_type").is_not_null()).then(pl.col("tensor_peak_fraction") * 100),
        flop_total=pl.when(pl.col("flop_fp32").is_not_null() | pl.col("flop_tensor").is_not_null())
        .then(pl.sum_horizontal("flop_fp32", "flop_tensor")),
    ).with_columns(
        ai=pl.when(pl.col("dram_bytes") > 0).then(pl.col("flop_total") / pl.col("dram_bytes")),
    ).join(top, left_on="id", right_on="launch", how="left")


def roofline_blocks(nr: NcuRun, measured: dict, frame: pl.DataFrame) -> list:
    """The roofline chart: one point per launch at (FP32 + tensor FLOP) / DRAM bytes, labelled by the work it
    mostly does; FP32 roofs always, tensor roofs (dense BF16: spec sheet and the measured cuBLAS ceiling) when a
    launch used the tensor cores."""
    g = nr.gpu
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
            roofs.append({"label": f"{label} · measured", "flop_per_s": measured[res][0], "measured": True,
                          "dram_bytes_per_s": measured.get("dram", (g.dram_bandwidth_bytes_per_s,))[0]})
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


def kernels_overview(src: Source, view: KernelsView) -> Report:
    rep = Report("Kernels")
    for p in view.problems:
        rep.add(Text(p, "warning"))
    if view.run is None:
        return rep.add(Text("No Nsight Compute runs in the store yet: upload a report on the Upload page.", "info"))
    run_id = view.run.run_id
    nr = src.ncu(run_id)
    ceil = src.ceilings()
    measured = best_ceilings(ceil, nr.gpu.name)
    frame = src.kernels_frame(run_id)
    rep.subtitle = f"{code(view.run.manifest['source_name'])} · run {run_id}"
    rep.add(Text(gpu_caption(nr.gpu, measured) + f" · {frame.height} profiled launches", "caption"))
    for m in nr.missing:
        rep.add(Text(f"**{m['quantity']}** is not in this report (needs {', '.join(m['needs'])}); "
                     f"collect it with `{m['collect_with']}`.", "warning"))
    total = frame["duration_ns"].sum()
    lost = frame["lost_us"].fill_null(0).sum() * 1e3
    rep.add(Metrics([
        ("launches", f"{frame.height}", None),
        ("kernel time", fmt_ns(total), "sum of gpu__time_duration.sum"),
        ("DRAM traffic", fmt_bytes(frame["dram_bytes"].sum()), "dram__bytes_read.sum + dram__bytes_write.sum"),
        ("est. time lost (biggest finding each)", fmt_ns(lost), "sum over launches of the biggest finding's estimate"),
    ]))
    cols = dict(KERNEL_COLS)
    if not measured.get("dram"):
        cols.pop("dram_pct_measured")
    shown = frame.sort(view.sort, descending=view.desc, nulls_last=True)
    rep.add(Heading("Launches"),
            Table("kernels", shown, cols, caption=f"sorted by {cols.get(view.sort, KERNEL_COLS['id']).header}"
                  + (" (descending)" if view.desc else "") + "; click a column header to re-sort in the browser."))

    # roofline: FP32 and tensor-core roofs, each launch against the kind of work it mostly does
    rep.add(*roofline_blocks(nr, measured, frame))
    bars = frame.select(pl.col("id").cast(pl.String).alias("launch"), "kernel",
                        pl.col("dram_gbps")).drop_nulls()
    rules = []
    if nr.gpu.dram_bandwidth_bytes_per_s:
        rules.append({"label": "spec peak", "gbps": nr.gpu.dram_bandwidth_bytes_per_s / 1e9, "measured": False})
    if measured.get("dram"):
        rules.append({"label": "measured ceiling", "gbps": measured["dram"][0] / 1e9, "measured": True})
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


def kernel_detail(src: Source, view: KernelsView) -> list:
    """Blocks of the kernel detail view: the launch's key numbers, findings, textbook cases, every metric."""
    from analyzers.findings import kernel_findings
    if view.run is None or view.kernel is None:
        return []
    run_id = view.run.run_id
    nr = src.ncu(run_id)
    measured = best_ceilings(src.ceilings(), nr.gpu.name)
    frame = src.kernels_frame(run_id).filter(pl.col("id") == view.kernel)
    if not frame.height:
        return [Text(f"No launch {view.kernel} in this run.", "warning")]
    row = frame.row(0, named=True)
    blocks: list = [Heading(f"Launch {row['id']}: {code(row['kernel'])}"),
                    Text(f"Full name: {code(row['kernel_name'])} · grid {_dim(row, 'grid')} × block "
                         f"{_dim(row, 'block')} · {row['registers_per_thread'] and int(row['registers_per_thread'])} "
                         f"registers/thread · shared memory {fmt_bytes((row['smem_static_bytes'] or 0) + (row['smem_dynamic_bytes'] or 0))}/block",
                         "caption"),
                    Metrics([
                        ("duration", fmt_ns(row["duration_ns"]), "gpu__time_duration.sum"),
                        ("DRAM", fmt_rate((row["dram_gbps"] or 0) * 1e9, "B/s") if row["dram_gbps"] is not None else "—",
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
                         f"{row['global_ld_sectors_per_request']:.1f} (ideal {row['global_ld_ideal_sectors_per_request']:.0f})",
                         "coalescing: l1tex__t_sectors / l1tex__t_requests, global loads"),
                    ])]
    findings = kernel_findings(row, nr.gpu, measured)
    blocks.append(Heading("Findings, ranked by estimated time lost", 3))
    if not findings:
        blocks.append(Text("No findings for this launch (its counters are missing or it is at its bound).", "caption"))
    for i, f in enumerate(findings, 1):
        cited = "; ".join(f"{code(k)} = {v}" for k, v in f.metrics.items())
        blocks.append(Text(
            f"**{i}. {f.title}** — est. time lost **{fmt_ns(f.lost_ns)}** ({f.share:.0%} of the launch)\n\n"
            f"{f.text}\n\n*Based on:* {cited}.\n\n*Model:* {f.model}."))
    blocks.extend(case_blocks(row, nr.gpu, src, run_id))
    blocks.append(Heading("Every metric of this launch", 3))
    metrics = src.launch_metrics(run_id, view.kernel)
    if view.q:
        metrics = metrics.filter(pl.col("metric").str.contains(view.q, literal=True))
    blocks.append(Table("metrics", metrics.select("metric", "value", "unit", "text"), {
        "metric": text("metric (ncu name)"), "value": num("value", help="in base units (ns, bytes, percent)"),
        "unit": text("unit"), "text": text("text value")},
        caption=f"{metrics.height} metrics" + (f" matching {code(view.q)}" if view.q else ""), height=400))
    return blocks


def _dim(row: dict, what: str) -> str:
    vals = [row.get(f"{what}_{a}") for a in "xyz"]
    if any(v is None for v in vals):
        return str(int(row[f"{what}_size"])) if row.get(f"{what}_size") is not None else "—"
    return "(" + ", ".join(str(int(v)) for v in vals) + ")"


# textbook cases a kernel may run, recognised by words in its name, and parameters read from the name
CASE_HINTS: dict[str, tuple[str, ...]] = {
    "bank.column_read": ("colread", "column_read", "bank"),
    "transpose.tile": ("transpose",),
    "tiling.traffic": ("matmul", "gemm", "sgemm"),
    "mma.granularity": ("hmma", "mma_"),
    "flash.attention_traffic": ("attention", "flash", "fmha", "sdpa"),
    "flash.kv_block_size": ("flash", "fmha"),
    "fusion.activation_chain": ("silu", "gelu", "swiglu", "activation"),
    "quant.fused_reads": ("quant", "fp8"),
}


def _name_params(case_id: str, name: str) -> dict:
    import re
    low = name.lower()
    if case_id == "tiling.traffic":
        m = re.search(r"(\d+)x(\d+)", low)
        return {"m": int(m.group(1)), "n": int(m.group(2))} if m else {}
    if case_id == "transpose.tile":
        m = re.search(r"transpose_?(\d+)", low)
        out = {"t": int(m.group(1))} if m else {}
        out["pad"] = 1 if "pad" in low else 0
        return out
    return {}


def case_blocks(row: dict, gpu: GPUSpec, src: Source, run_id: str) -> list:
    """Textbook cases this launch may run (recognised by its name, see CASE_HINTS) whose Nsight Compute
    counters it has: the case's prediction for this GPU next to the measurement, with the verdict
    (analyzers.cases, the predictions issue). Parameters come from the chapter, or from the kernel name where
    it states them (tile sizes, padding)."""
    out: list = [Heading("Textbook cases", 3)]
    try:
        from analyzers import cases as catalog
        evaluate, compare, from_ncu = catalog.evaluate, catalog.compare, catalog.measurements_from_ncu
    except (ImportError, AttributeError):
        return out + [Text("The textbook case catalog is not available in this installation.", "caption")]
    name = f"{row.get('kernel_name') or ''} {row.get('short_name') or ''}".lower()
    ids = [cid for cid, words in CASE_HINTS.items() if any(w in name for w in words)]
    if not ids:
        return out + [Text("No textbook case recognised from this kernel's name; evaluate any case for this GPU on "
                           f"the [Textbook cases](cases) page.", "caption")]
    m = src.launch_metrics(run_id, row["id"]).drop_nulls("value")
    metrics = dict(zip(m["metric"].to_list(), m["value"].to_list()))
    rows, notes = [], []
    for cid in ids:
        params = _name_params(cid, name)
        try:
            ev = evaluate(cid, gpu if gpu.from_registry else None, params or None)
            comps = compare(ev, [x for x in from_ncu(cid, metrics, gpu=gpu.name) if x.quantity in ev.predictions])
        except (KeyError, ValueError) as e:
            notes.append(f"{code(cid)}: {code(e.args[0] if e.args else e)}")
            continue
        for c in comps:
            j = c.to_json()
            rows.append({"case": f"{cid} ({ev.case.section})", "params": ", ".join(f"{k}={v}" for k, v in params.items())
                         or "chapter's", "quantity": c.prediction.label, "predicted": j["predicted"]["display"],
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
    else:
        out.append(Text("Recognised " + ", ".join(code(c) for c in ids) + " from the name, but this launch lacks "
                        "the counters they are checked with.", "caption"))
    for n_ in notes:
        out.append(Text(f"Could not evaluate {n_}", "caption"))
    return out


def kernels_page(src: Source, params: dict) -> Report:
    view = resolve_kernels(src, params)
    rep = kernels_overview(src, view)
    return rep.add(*kernel_detail(src, view))


# ---------------------------------------------------------------------------------------------------
# Compare
# ---------------------------------------------------------------------------------------------------

@dataclass
class CompareView:
    a: Run | None
    b: Run | None
    noise_pct: float = 5.0
    problems: list[str] = field(default_factory=list)

    def params(self) -> dict:
        return {"a": self.a.run_id if self.a else None, "b": self.b.run_id if self.b else None,
                "noise": None if self.noise_pct == 5.0 else f"{self.noise_pct:g}"}


COMPARABLE = ("ncu", "kineto", "nsys", "bench")


def resolve_compare(src: Source, params: dict) -> CompareView:
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


def _launches(src: Source, run: Run) -> tuple[pl.DataFrame, bool]:
    from analyzers.compare import ncu_launches, trace_launches
    if run.kind == "ncu":
        a = src.ncu(run.run_id).analyzed.with_columns(
            dram_pct=pl.col("dram_peak_fraction") * 100,
            fp32_pct=(pl.col("flop_fp32") / pl.col("duration_ns") * 1e9 / src.ncu(run.run_id).gpu.fp32_flop_per_s * 100)
            if src.ncu(run.run_id).gpu.fp32_flop_per_s else pl.lit(None, pl.Float64))
        return ncu_launches(a, extra=("dram_pct", "fp32_pct")), True
    return trace_launches(src.table(run.run_id, "gpu_ops")), False


def compare_page(src: Source, params: dict) -> Report:
    from analyzers.compare import compare_runs, totals
    view = resolve_compare(src, params)
    rep = Report("Compare")
    for p in view.problems:
        rep.add(Text(p, "warning"))
    a, b = view.a, view.b
    if a is None or b is None or a.run_id == b.run_id:
        return rep.add(Text("Compare needs two runs of the same kind in the store (two Nsight Compute reports, "
                            "two traces, or two bench runs).", "info"))
    rep.subtitle = f"A = {code(a.manifest['source_name'])} ({a.run_id}) · B = {code(b.manifest['source_name'])} ({b.run_id})"
    ga, gb = a.meta.get("gpu_name") or "unknown GPU", b.meta.get("gpu_name") or "unknown GPU"
    if a.kind == "bench" or b.kind == "bench":
        if a.kind != b.kind:
            return rep.add(Text(f"Run A is {a.kind} and run B is {b.kind}: only runs of the same kind compare.", "error"))
        return rep.add(*bench_compare_blocks(src, [a.run_id, b.run_id]))
    if (a.kind in TRACE_KINDS) != (b.kind in TRACE_KINDS):
        return rep.add(Text(f"Run A is {a.kind} and run B is {b.kind}: only runs of the same kind compare "
                            "(Nsight Compute with Nsight Compute, traces with traces).", "error"))
    la, per_launch = _launches(src, a)
    lb, _ = _launches(src, b)
    cmp = compare_runs(la, lb, per_launch=per_launch, noise_floor=view.noise_pct / 100)
    t = totals(cmp)
    c = t["counts"]
    rep.add(Text(f"A: **{ga}** · B: **{gb}** · kernels matched by name and launch configuration"
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


# ---------------------------------------------------------------------------------------------------
# GPUs
# ---------------------------------------------------------------------------------------------------

def spec_peak(gpu: GPUSpec | None, resource: str | None) -> float | None:
    if gpu is None or resource is None:
        return None
    f = RESOURCES.get(resource, (None,))[0]
    return getattr(gpu, f) if f else None


def result_peak(gpu: GPUSpec | None, case: str, metric: str, unit: str) -> tuple[float | None, str]:
    """The GPU's own spec peak a bench result is normalised to: B/s -> DRAM (host link for host copies),
    FLOP/s -> BF16 dense for matrix work, else FP32."""
    if gpu is None:
        return None, ""
    name = f"{case} {metric}".lower()
    if unit == "B/s":
        res = "h2d" if any(w in name for w in ("h2d", "d2h", "host", "pinned", "pageable")) else "dram"
    elif unit == "FLOP/s":
        res = "bf16" if any(w in name for w in ("bf16", "mma", "matmul", "gemm", "tiling", "tensor")) else "fp32"
    else:
        return None, ""
    return spec_peak(gpu, res), RESOURCES[res][1]


def gpus_page(src: Source, params: dict) -> Report:
    rep = Report("GPUs", subtitle="Spec sheets next to what microbenchmarks measured on each GPU.")
    rep.add(Heading("Spec sheet and measured ceilings"), gpu_table(src))
    ceil = src.ceilings()
    bench_runs = src.runs(("bench",))
    if not bench_runs:
        rep.add(Text("No microbenchmark runs in the store: run `kernelscope bench` on a GPU machine (it stores one "
                     "run per GPU) or ingest its result files; measured ceilings then appear here, in the roofline "
                     "and in every \"% of peak\".", "info"))
        return rep
    if ceil.height:
        # the best of each GPU's runs per ceiling (highest rate, lowest cost), with how many runs measured it
        best = ceil.with_columns(key=pl.when(pl.col("unit") == "s").then(-pl.col("value")).otherwise(pl.col("value"))) \
            .sort("key", descending=True).group_by("gpu", "ceiling", maintain_order=True) \
            .agg(pl.all().exclude("key").first(), pl.len().alias("runs")).sort("gpu", "resource", "ceiling")
        rows = []
        for r in best.iter_rows(named=True):
            g = find_gpu(r["gpu_name"])
            sp = spec_peak(g, r["resource"])
            rows.append({**r, "resource_label": RESOURCES.get(r["resource"], (None, "—"))[1],
                         "shown": fmt_value(r["value"], r["unit"]),
                         "spec": fmt_value(sp, r["unit"]) if sp else "—",
                         "pct_of_spec": r["value"] / sp * 100 if sp and r["unit"] != "s" else None,
                         "cv_pct": r["cv"] * 100 if r["cv"] is not None else None,
                         "open": link("gpus", gpu=r["gpu"])})
        cf = pl.DataFrame(rows, infer_schema_length=None)
        rep.add(Heading("Measured ceilings vs spec"), Table("ceilings", cf, {
            "gpu": text("GPU"), "resource_label": text("resource"), "ceiling": text("measurement"),
            "shown": text("measured"), "spec": text("spec sheet"),
            "pct_of_spec": num("measured of spec", "%", "%.1f", "measured / the GPU's own spec-sheet figure"),
            "cv_pct": num("spread (cv)", "%", "%.2f", "std / mean over the repetitions"),
            "source": text("how measured"), "runs": num("runs", help="bench runs of this GPU that measured it"),
            "run_id": text("best run")}, caption="The best value of each GPU's bench runs."))
        fr = cf.filter(pl.col("pct_of_spec").is_not_null()).select(
            pl.col("resource_label").alias("resource"), "gpu", pl.col("pct_of_spec").alias("pct")
        ).group_by("resource", "gpu", maintain_order=True).agg(pl.col("pct").max())
        if fr.height:
            rep.add(Chart("ceilings_vs_spec", charts.fraction_bars(
                fr, x="resource", x_title="resource", group="gpu", group_title="GPU",
                title="Best measured ceiling as a share of each GPU's own spec-sheet peak",
                value_title="measured / spec [%]")))
    rep.add(Heading("Bench runs"), runs_table(bench_runs, "bench_runs"))
    rep.add(*bench_compare_blocks(src, [r.run_id for r in bench_runs], wanted=_gpu_list(params.get("gpu"))))
    return rep


def _gpu_list(raw) -> list[str]:
    if not raw:
        return []
    items = raw if isinstance(raw, list) else str(raw).split(",")
    return [s.strip() for s in items if s.strip()]


def bench_compare_blocks(src: Source, run_ids: list[str], wanted: list[str] | None = None) -> list:
    """The same bench cases across GPUs (one column per GPU), normalised to each GPU's own spec peak."""
    res = src.bench_results().filter(pl.col("run_id").is_in(run_ids))
    if wanted:
        res = res.filter(pl.col("gpu").is_in(wanted))
    gpus = res["gpu"].unique(maintain_order=True).to_list()
    out: list = [Heading("Same cases across GPUs" if len(gpus) > 1 else "Bench results")]
    if not res.height:
        return out + [Text("No bench results to show" + (f" for {', '.join(code(g) for g in wanted)}" if wanted else "")
                           + ".", "caption")]
    rows = []
    for r in res.iter_rows(named=True):
        peak, peak_name = result_peak(find_gpu(r["gpu_name"]), r["case"], r["metric"], r["unit"] or "")
        rows.append({"case": r["case"], "metric": r["metric"], "params": r["params"] or "", "gpu": r["gpu"],
                     "value": r["value"], "unit": r["unit"] or "", "shown": fmt_value(r["value"], r["unit"] or ""),
                     "pct": r["value"] / peak * 100 if peak and r["value"] is not None else None,
                     "peak": peak_name, "cv_pct": r["cv"] * 100 if r["cv"] is not None else None,
                     "verdict": r["verdict"]})
    df = pl.DataFrame(rows, infer_schema_length=None)
    if len(gpus) > 1:
        wide = df.pivot(on="gpu", index=["case", "metric", "params", "unit"], values=["shown", "pct"],
                        aggregate_function="first")
        cols = {"case": text("case"), "metric": text("metric"), "params": text("parameters")}
        for g in gpus:
            if f"shown_{g}" in wide.columns:
                cols[f"shown_{g}"] = text(f"{g}")
            if f"pct_{g}" in wide.columns:
                cols[f"pct_{g}"] = num(f"{g} of own peak", "%", "%.1f", "value / that GPU's spec peak")
        out.append(Table("bench_across_gpus", wide, cols, caption="Rates as a share of each GPU's own spec-sheet "
                         "peak (DRAM for B/s, host link for host copies, BF16 dense for matrix work, else FP32)."))
        fr = df.filter(pl.col("pct").is_not_null()).with_columns(
            label=pl.concat_str([pl.col("case"), pl.lit(" · "), pl.col("metric")])).group_by("label", "gpu").agg(
            pl.col("pct").max())
        if fr.height:
            out.append(Chart("bench_across_gpus_chart", charts.fraction_bars(
                fr.sort("label"), x="label", x_title="case · metric (best over parameters)", group="gpu",
                group_title="GPU", title="Same cases, each GPU against its own peak")))
    else:
        out.append(Table("bench_results", df, {
            "case": text("case"), "metric": text("metric"), "params": text("parameters"), "shown": text("measured"),
            "pct": num("of spec peak", "%", "%.1f", "value / the GPU's spec peak"), "peak": text("peak used"),
            "cv_pct": num("spread (cv)", "%", "%.2f"), "verdict": text("verdict")}))
    return out


# ---------------------------------------------------------------------------------------------------
# Timeline (PyTorch profiler and Nsight Systems runs)
# ---------------------------------------------------------------------------------------------------

MAX_POINTS = 5000   # points per timeline chart (the largest gaps / a sample of kernels beyond that)


@dataclass
class TimelineView:
    run: Run | None
    devices: list[str] = field(default_factory=lambda: ["all"])   # "all" and each "rank:device" of the run
    device: str = "all"
    kernel: str = ""                # what-if: regex searched in kernel names
    speedup: float = 2.0
    problems: list[Text] = field(default_factory=list)

    def params(self) -> dict:
        return {"run": self.run.run_id if self.run else None, "device": None if self.device == "all" else self.device,
                "kernel": self.kernel, "speedup": f"{self.speedup:g}"}


def device_ops(src: Source, view: TimelineView) -> pl.DataFrame:
    """The run's GPU ops (kernels, memcpy, memset) on the chosen device, or on all of them."""
    g = src.table(view.run.run_id, "gpu_ops")
    if view.device == "all":
        return g
    r, d = (int(x) for x in view.device.split(":"))
    return g.filter((pl.col("rank") == r) & (pl.col("device") == d))


def resolve_timeline(src: Source, params: dict) -> TimelineView:
    """?run=RUN&device=RANK:DEVICE|all&kernel=REGEX&speedup=S; the what-if defaults to the kernel with the most
    time, 2x faster."""
    from analyzers import timeline as T
    problems: list[Text] = []
    runs = src.runs(TRACE_KINDS)
    run, wanted = None, params.get("run")
    if wanted:
        try:
            run = src.get(wanted)
        except KeyError:
            run = None
        if run is None or run.kind not in TRACE_KINDS:
            problems.append(Text(f"No trace run {code(wanted)} in this store.", "error"))
            run = None
    view = TimelineView(run or (runs[0] if runs else None), problems=problems)
    if view.run is None:
        return view
    devs = src.table(view.run.run_id, "gpu_ops").select("rank", "device").unique().sort("rank", "device").rows()
    view.devices = ["all"] + [f"{r}:{d}" for r, d in devs]
    dev = params.get("device") or "all"
    if dev not in view.devices:
        problems.append(Text(f"No device {code(dev)} in this run; showing all devices.", "warning"))
    elif len(devs) > 1:
        view.device = dev
    top = T.kernel_summary(device_ops(src, view)).head(1)["name"].to_list()
    view.kernel = params.get("kernel") or (top[0][:120].split("<")[0].split("(")[0] if top else ".")
    raw = params.get("speedup")
    try:
        speedup = float(raw) if raw not in (None, "") else 2.0
    except ValueError:
        speedup = math.nan
    if not math.isfinite(speedup):
        problems.append(Text(f"Speedup {code(raw)} is not a number; using 2.", "warning"))
        speedup = 2.0
    view.speedup = min(1e6, max(0.01, speedup))
    return view


def timeline_header(view: TimelineView) -> list:
    run, meta = view.run, view.run.meta
    counts = meta.get("counts", {})
    source = ("PyTorch profiler (Kineto) trace" if run.kind == "kineto"
              else f"Nsight Systems export {meta.get('nsys_version', '')}")
    return [Text(f"**{meta.get('gpu_name') or 'GPU name not in the trace'}** · source: {source} · "
                 f"{counts.get('kernels', 0):,} kernels, {counts.get('kernels_with_launch', 0):,} with their launch call "
                 f"in the trace · ranks {meta.get('ranks')} · times on the {meta.get('clock', 'trace clock')}", "caption")]


def timeline_definitions(run: Run) -> list:
    from analyzers.timeline import DEFINITIONS
    perfetto = (f"open {code(run.artifact_path)} at https://ui.perfetto.dev (Open trace file) to see the original "
                "timeline; a `.kineto.tar` rank archive must be unpacked first (one JSON per rank)."
                if run.kind == "kineto" else
                f"Perfetto cannot read an nsys SQLite export ({code(run.artifact_path)}); open the `.nsys-rep` in "
                "Nsight Systems instead.")
    return [Text("\n".join([f"- **{k.replace('_', ' ')}**: {v}" for k, v in DEFINITIONS.items()]
                           + [f"- **Perfetto**: {perfetto}"]))]


def timeline_overview(src: Source, view: TimelineView) -> list:
    """GPU busy time and the launch-bound verdict per device, launch delays, idle gaps and their causes, the
    top kernels."""
    from analyzers import timeline as T
    from analyzers.timeline import DEFINITIONS
    g = device_ops(src, view)
    if g.height == 0:
        return [Text("No GPU operations (kernels, memcpy, memset) in this run.", "warning")]
    out: list = []
    gpu_name = view.run.meta.get("gpu_name")
    floor_ns = measured_launch_floor_ns(src.store, gpu_name)
    if floor_ns:
        out.append(Text(f"Launch floor {floor_ns / 1e3:.1f} µs per kernel: back-to-back empty-kernel launches measured "
                        f"by `kernelscope bench` on a {gpu_name} (event timing).", "caption"))
    lb = T.launch_bound(g, launch_floor_ns=floor_ns)
    summary = T.utilization(g).join(
        lb.select("rank", "device", "short_kernel_share", "host_wait_fraction", "kernels_per_s", "verdict"),
        on=["rank", "device"], how="left").select(
        "rank", "device", "verdict", "kernel_count", "kernels_with_launch", (pl.col("busy_ns") / 1e6).alias("busy_ms"),
        (pl.col("window_ns") / 1e6).alias("window_ms"), (pl.col("idle_fraction") * 100).alias("idle_pct"),
        (pl.col("short_kernel_share") * 100).alias("short_pct"),
        (pl.col("host_wait_fraction") * 100).alias("host_wait_pct"), "kernels_per_s")
    out += [Heading("GPU busy time and launch-bound verdict"), Table("timeline_summary", summary, {
        "rank": num("rank"), "device": num("device"), "verdict": text("verdict", DEFINITIONS["launch_bound"]),
        "kernel_count": num("kernels"), "kernels_with_launch": num("with their launch call"),
        "busy_ms": num("busy", "ms", "%.3f", DEFINITIONS["gpu_busy"]),
        "window_ms": num("window", "ms", "%.3f", "last op end − first op start (trace timestamps)"),
        "idle_pct": num("idle", "% of window", "%.1f", DEFINITIONS["gpu_idle_fraction"]),
        "short_pct": num("kernels shorter than their launch call", "%", "%.1f"),
        "host_wait_pct": num("waiting for the host", "% of window", "%.1f", DEFINITIONS["idle_categories"]),
        "kernels_per_s": num("kernels/s", fmt="%.0f")})]

    out.append(Heading("Launch delay"))
    k = T.kernels(g).filter(pl.col("launch_delay_ns").is_not_null())
    if k.height:
        h = k.select((pl.col("launch_delay_ns") / 1e3).alias("launch_delay_us"), pl.col("launch_api"))
        if h.height > MAX_POINTS:
            h = h.sample(MAX_POINTS, seed=0)
        stats = T.launch_stats(g).select(
            "rank", "device", "with_launch", (pl.col("launch_delay_median_ns") / 1e3).alias("median_us"),
            (pl.col("launch_delay_p90_ns") / 1e3).alias("p90_us"), (pl.col("launch_delay_max_ns") / 1e3).alias("max_us"),
            "queue_count", (pl.col("queue_median_ns") / 1e3).alias("queue_median_us"), "delay_outliers")
        out += [Chart("launch_delay", charts.launch_delay_histogram(h)), Table("launch_delay_stats", stats, {
            "rank": num("rank"), "device": num("device"), "with_launch": num("kernels with launch call"),
            "median_us": num("median", "µs", "%.2f", DEFINITIONS["launch_delay"]),
            "p90_us": num("p90", "µs", "%.2f", DEFINITIONS["launch_delay"]),
            "max_us": num("max", "µs", "%.1f", DEFINITIONS["launch_delay"]),
            "queue_count": num("with queue time", help=DEFINITIONS["queue"]),
            "queue_median_us": num("queue median", "µs", "%.2f", DEFINITIONS["queue"]),
            "delay_outliers": num("delay > 100 µs", help="HTA's launch_delay_cutoff")})]
    else:
        out.append(Text("No kernel has its launch call in this trace, so launch delays cannot be computed.", "info"))

    out.append(Heading("GPU idle gaps per stream"))
    sg = T.stream_gaps(g)
    if sg.height:
        t0 = int(g["start_ns"].min())
        pts = sg.sort("gap_ns", descending=True).head(MAX_POINTS).select(
            pl.format("{}:{}:{}", "rank", "device", "stream").alias("stream"),
            ((pl.col("start_ns") - t0) / 1e6).alias("t_ms"), (pl.col("gap_ns") / 1e3).alias("gap_us"), "category",
            pl.col("next_name").str.slice(0, 80).alias("next op"))
        cats = T.idle_categories(g).with_columns(pl.format("{}:{}:{}", "rank", "device", "stream").alias("stream_key"),
                                                 (pl.col("idle_ns") / 1e3).alias("idle_us"))
        out += [Chart("idle_gaps", charts.idle_gaps(pts, list(T.IDLE_CATEGORIES))),
                Chart("idle_categories", charts.idle_category_bars(cats, list(T.IDLE_CATEGORIES)),
                      "Idle categories: " + DEFINITIONS["idle_categories"] + ".")]
    else:
        out.append(Text("No idle gaps between ops on any stream.", "info"))
    tb = T.temporal_breakdown(g)
    fractions = ("compute_fraction", "communication_fraction", "memcpy_fraction", "idle_fraction")
    out.append(Table("temporal_breakdown", tb.select("rank", "device", *[pl.col(c) * 100 for c in fractions]), {
        "rank": num("rank"), "device": num("device"),
        **{c: num(c.removesuffix("_fraction"), "% of window", "%.1f") for c in fractions}},
        caption="Compute: non-NCCL kernels; communication: NCCL kernels not overlapping compute; memcpy: copies and "
                "memsets not hidden under kernels; idle: the rest. They add up to the window."))

    out.append(Heading("Top kernels by total time"))
    ks = T.kernel_summary(g).head(20).select(
        pl.col("name").str.slice(0, 120).alias("kernel"), "count", (pl.col("total_ns") / 1e3).alias("total_us"),
        (pl.col("mean_ns") / 1e3).alias("mean_us"), (pl.col("median_ns") / 1e3).alias("median_us"),
        (pl.col("min_ns") / 1e3).alias("min_us"), (pl.col("max_ns") / 1e3).alias("max_us"),
        (pl.col("busy_share") * 100).alias("busy_pct"))
    out.append(Table("top_kernels", ks, {
        "kernel": text("kernel"), "count": num("count"), "total_us": num("total", "µs", "%.1f"),
        "mean_us": num("mean", "µs", "%.2f"), "median_us": num("median", "µs", "%.2f"),
        "min_us": num("min", "µs", "%.2f"), "max_us": num("max", "µs", "%.2f"),
        "busy_pct": num("share of busy time", "%", "%.1f", "total / GPU busy time (union of all ops)")}))
    return out


def timeline_whatif(src: Source, view: TimelineView) -> list:
    """The run time if the kernels matching view.kernel ran view.speedup times faster, next to Amdahl."""
    from analyzers import timeline as T
    try:
        w = T.what_if(src.table(view.run.run_id, "gpu_ops"), src.table(view.run.run_id, "api_calls"), view.kernel,
                      float(view.speedup))
    except ValueError as e:
        return [Text(f"No what-if: {code(e)}", "error")]
    ms = lambda ns: f"{ns / 1e6:,.3f} ms"  # noqa: E731
    return [Metrics([
        ("measured run time", ms(w.run_ns), "first to last event (host API calls and GPU ops), slowest rank"),
        ("what-if (trace dependencies)", ms(w.predicted_ns), "replay of the trace's own dependencies",
         ms(w.predicted_ns - w.run_ns)),
        ("Amdahl", ms(w.amdahl_ns), "run × ((1 − f) + f / s)", ms(w.amdahl_ns - w.run_ns)),
    ], lower_is_better=True), Text(
        f"{w.matched_kernels:,} kernels match {code(view.kernel)}, {w.matched_kernel_ns / 1e6:,.3f} ms of kernel time "
        f"(f = {w.fraction:.1%} of the run), made {view.speedup:g}× faster. What-if: "
        f"{T.DEFINITIONS['whatif']}. The replay keeps launch calls, stream order and synchronisations; it cannot see "
        "waits between streams or ranks (so it may be optimistic there), and the host floor it keeps is why it can "
        "promise less than Amdahl.", "caption")]


def timeline_report(view: TimelineView, overview: list, whatif: list) -> Report:
    """The page's blocks in one report (definitions last)."""
    rep = Report("Timeline", subtitle=f"{code(view.run.manifest['source_name'])} · run {view.run.run_id}"
                 + ("" if view.device == "all" else f" · device {view.device}"))
    rep.add(*view.problems, *timeline_header(view), *overview)
    if whatif:
        rep.add(Heading("What if a kernel were faster?"), *whatif)
    return rep.add(Heading("Definitions (how every number on this page is computed)", 3),
                   *timeline_definitions(view.run))


def timeline_page(src: Source, params: dict) -> Report:
    """The Timeline page of a URL. An export does not fall back: a run that is not a trace, or a device the run
    does not have, is an error."""
    if params.get("run"):
        run = src.get(params["run"])                    # KeyError: no such run
        if run.kind not in TRACE_KINDS:
            raise KeyError(f"run {run.run_id} is a {run.kind} run, not a PyTorch profiler trace or Nsight Systems "
                           "export")
    view = resolve_timeline(src, params)
    if view.run is None:
        return Report("Timeline").add(Text("No PyTorch profiler traces or Nsight Systems exports in the store.", "info"))
    if params.get("device") not in (None, "", *view.devices):
        raise KeyError(f"run {view.run.run_id} has no device {params['device']!r} "
                       f"(rank:device: {', '.join(view.devices)})")
    overview = timeline_overview(src, view)
    return timeline_report(view, overview, timeline_whatif(src, view) if device_ops(src, view).height else [])


# ---------------------------------------------------------------------------------------------------
# Textbook cases
# ---------------------------------------------------------------------------------------------------

DEFAULT_CASE = "tiling.traffic"
REPEATABLE = ("meas", "verdict")   # query parameters that may repeat (?meas=…&meas=…): kept as lists


def param_list(raw) -> list[str]:
    """A repeatable query parameter as a list ([] when absent)."""
    if raw in (None, ""):
        return []
    return [str(x) for x in raw] if isinstance(raw, (list, tuple)) else [str(raw)]


def param_text(v) -> str:
    """A case parameter value as written in the URL."""
    if isinstance(v, tuple):
        return ",".join(format(x, ".10g") for x in v)
    if isinstance(v, float):
        return format(v, ".10g")
    return str(v)


def plain_cols(frame: pl.DataFrame) -> dict[str, Col]:
    """Columns shown under their own names (tables whose columns a model names)."""
    return {c: num(c) if frame.schema[c].is_numeric() else text(c) for c in frame.columns}


@dataclass
class CaseView:
    case: Any                      # analyzers.cases.Case
    gpu: GPUSpec
    values: dict                   # parameter -> value (the URL's, else the default; the page: its widgets')
    defaults: dict                 # parameter -> default on this GPU
    problems: list[str] = field(default_factory=list)

    def changed(self) -> dict[str, str]:
        """Parameters that differ from their default, as written in the URL."""
        return {k: param_text(v) for k, v in self.values.items() if param_text(v) != param_text(self.defaults[k])}


def resolve_case(params: dict, case_id: str | None = None, gpu_name: str | None = None) -> CaseView:
    """?case=ID&gpu=NAME&<param>=VALUE…; case_id and gpu_name (the page's choices) replace the URL's. Values in
    the URL apply only to the case it names; a bad value falls back to the default, with a problem noted."""
    from analyzers.cases import CaseError, get_case
    case = get_case(case_id or params.get("case") or DEFAULT_CASE)
    gpu = find_gpu(gpu_name or params.get("gpu") or "") or case.gpu()
    values, defaults, problems = {}, {}, []
    for p in case.params:
        try:
            defaults[p.name] = p.default_for(gpu)
        except CaseError:
            defaults[p.name] = p.default
        values[p.name] = defaults[p.name]
        raw = params.get(p.name) if params.get("case") == case.id else None
        if raw is not None:
            try:
                values[p.name] = p.parse(raw)
            except CaseError as e:
                problems.append(f"{e} — using the default.")
    return CaseView(case, gpu, values, defaults, problems)


def case_intro(view: CaseView) -> list:
    from analyzers.cases import fmt
    case, gpu = view.case, view.gpu
    specs = {"sm_count": ("SMs", ""), "dram_bandwidth_bytes_per_s": ("DRAM", "B/s"),
             "bf16_dense_flop_per_s": ("BF16 dense", "FLOP/s"), "smem_per_sm_bytes": ("smem/SM", "B"),
             "l2_bytes": ("L2", "B")}
    return [Text(f"**{case.title}** · {case.section}"),
            Text(f"{gpu.name} (CC {gpu.cc[0]}.{gpu.cc[1]}): " + " · ".join(
                f"{label} {fmt(getattr(gpu, f), u) if u else getattr(gpu, f)}" for f, (label, u) in specs.items()
                if getattr(gpu, f) is not None) + " — registry; sources in the GPUs page / `kernelscope gpus`.",
                "caption"),
            Text(case.summary)]


def case_params_table(view: CaseView) -> Table:
    """The parameters with their values (the page shows them as inputs)."""
    rows = [{"parameter": p.name, "value": param_text(view.values[p.name]), "unit": "" if p.unit == "count" else p.unit,
             "default": param_text(view.defaults[p.name]),
             "about": p.description + ("" if p.from_chapter else " (assumption: the chapter gives no value)")
             + (f" Default: {p.gpu_default_text}." if p.gpu_default else "")} for p in view.case.params]
    frame = pl.DataFrame(rows, schema={c: pl.String for c in ("parameter", "value", "unit", "default", "about")})
    return Table("case_params", frame, {c: text(c) for c in frame.columns}, static=True)


def case_predictions(view: CaseView) -> tuple[Any, list]:
    """(evaluation, blocks): the predictions on the GPU, the case's tables and its chart. The evaluation is None
    for a case without a model, and when the parameters are impossible (the blocks then say why)."""
    from analyzers.cases import CaseError, evaluate, sweep
    from analyzers.cases.units import scale_for
    case, gpu = view.case, view.gpu
    if not case.runnable:
        return None, [Text(f"No runnable model: {case.no_model_reason}. The chapter's figures and the reasoning are "
                           "below.", "info")]
    try:
        ev = evaluate(case, gpu, view.values)
    except CaseError as e:
        return None, [Text(str(e), "error")]
    preds = pl.DataFrame([{"quantity": k, "value": p.display, "kind": p.kind, "what": p.label, "formula": p.formula}
                          for k, p in ev.predictions.items()],
                         schema={c: pl.String for c in ("quantity", "value", "kind", "what", "formula")})
    out: list = [Heading(f"Predicted on {gpu.name}"), Table("predictions", preds, {
        "quantity": text("quantity"), "value": text("value", "the model's prediction with its unit"),
        "kind": text("kind"), "what": text("what"), "formula": text("formula", "how the model computes it")})]
    for name, rows in ev.tables.items():
        df = pl.DataFrame(rows, infer_schema_length=None)
        out += [Text(name.replace("_", " "), "caption"), Table(f"case_table_{name}", df, plain_cols(df))]
    rows = sweep(ev)
    if rows:
        div, shown = scale_for(max(abs(r["value"]) for r in rows), rows[0]["unit"])
        numeric_x = all(isinstance(r["x"], (int, float)) for r in rows)
        df = pl.DataFrame([{"x": float(r["x"]) if numeric_x else str(r["x"]), "series": r["series"],
                            "value": r["value"] / div} for r in rows])
        ch = case.chart
        x_name = ch.x if ch else "x"
        x_unit = next((p.unit for p in case.params if p.name == x_name), "")
        x_title = f"{x_name} [{x_unit}]" if x_unit and x_unit != "count" else x_name
        at = ev.params.get(ch.x) if ch and numeric_x else None
        out.append(Chart("case_sweep", charts.case_sweep(
            df, x_title=x_title, y_title=f"value [{shown}]" if shown else "value",
            title=(ch.title if ch else case.title) + f" — {gpu.name}", mark=ch.mark if ch else "bar",
            log_x=bool(ch and ch.log_x), at=at if isinstance(at, (int, float)) else None)))
    return ev, out


def case_other_gpus(view: CaseView, ev) -> list:
    """The same parameters on every GPU of the registry: the predictions that depend on the GPU."""
    from analyzers.cases import CaseError, evaluate
    changed = view.changed()
    fixed = {k: v for k, v in view.values.items() if not view.case.param(k).gpu_default or k in changed}
    evs = {}
    for g in all_gpus():
        try:
            evs[g.name] = evaluate(view.case, g, fixed)
        except CaseError as e:
            evs[g.name] = str(e)
    keys = [k for k in ev.predictions
            if len({(e.predictions[k].display if not isinstance(e, str) else e) for e in evs.values()}) > 1]
    if not keys:
        return [Text("None of this case's predictions depend on the GPU.")]
    df = pl.DataFrame([{"GPU": n, **({k: e.predictions[k].display for k in keys} if not isinstance(e, str)
                                     else {keys[0]: e})} for n, e in evs.items()], infer_schema_length=None)
    return [Table("case_gpus", df, {c: text(c) for c in df.columns})]


def case_figures(case) -> list:
    """The chapter's own figures, each reproduced by the model where it has one."""
    from analyzers.cases import figure_checks
    if not case.figures:
        return []
    checks = {id(c.figure): c for c in figure_checks(case.id)}
    df = pl.DataFrame([{
        "figure": f.text, "quoted for": (f.gpu or "—").replace("NVIDIA ", ""),
        "kind": "measured" if f.measured else "computed",
        "model": checks[id(f)].to_json()["model_display"] if id(f) in checks else "—",
        "check": checks[id(f)].verdict.kind if id(f) in checks else "(no model)",
        "explanation": checks[id(f)].verdict.explanation if id(f) in checks else "",
        "source": f.source} for f in case.figures])
    return [Heading("The chapter's figures"), Table("case_figures", df, {c: text(c) for c in df.columns})]


def case_chapter_checks(case) -> list:
    from analyzers.cases.checks import chapter_checks
    return [Text(f"**{c.verdict}** — {c.title}: {c.explanation}") for c in chapter_checks(case.id)]


def url_measurements(raw: list[str], gpu_name: str) -> tuple[list, list[str]]:
    """Measurements typed on the page, kept in the URL as meas=QUANTITY:VALUE:UNIT: (measurements, unreadable)."""
    from analyzers.cases import Measurement, to_base
    out, bad = [], []
    for item in raw:
        parts = item.split(":")
        try:
            key, value, unit = parts[0], float(parts[1]), ":".join(parts[2:])
            to_base(value, unit)
            out.append(Measurement(value, unit, "entered on this page", quantity=key, gpu=gpu_name))
        except (IndexError, ValueError):
            bad.append(item)
    return out, bad


def case_measured(view: CaseView, ev, measurements: list, bad: list[str]) -> list:
    """Measured vs predicted: every measurement of a predicted quantity with its verdict."""
    from analyzers.cases import compare
    out: list = [Heading("Measured vs predicted")]
    if view.case.measurements:
        out.append(Text("Measurements that can confirm this case: " + "; ".join(
            f"{m.kind} `{m.name}`" + (f" → {m.quantity}" if m.quantity else "") for m in view.case.measurements),
            "caption"))
    if ev is None:
        return out
    out += [Text(f"Ignored measurement {code(b)} in the URL (expected QUANTITY:VALUE:UNIT).", "warning") for b in bad]
    comps = []
    for m in measurements:
        try:
            comps += compare(ev, [m])
        except (KeyError, ValueError) as e:
            out.append(Text(f"{m.quantity} = {m.value} {m.unit}: {e.args[0] if e.args else e}", "warning"))
    if not comps:
        return out + [Text("No measurements for this case and GPU yet.")]
    df = pl.DataFrame([{"quantity": c.quantity, "predicted": c.prediction.display,
                        "measured": c.to_json()["measured_display"], "source": c.measurement.source,
                        "verdict": c.verdict.kind, "explanation": c.verdict.explanation} for c in comps])
    return out + [Table("case_measured", df, {
        "quantity": text("quantity"), "predicted": text("predicted (model, this GPU)"), "measured": text("measured"),
        "source": text("source"), "verdict": text("verdict"), "explanation": text("why")})]


def measurements_for_case(src: Source, case_id: str, gpu_name: str) -> list:
    """Stored measurements of a textbook case on one GPU, as analyzers.cases.Measurement:
    - Nsight Compute launches whose name says they run the case (CASE_HINTS), from their counters
      (analyzers.cases.measurements_from_ncu);
    - bench results of the case whose metric is a quantity the case predicts (spread = cv x value).
    Only quantities the case predicts are returned."""
    from analyzers.cases import Measurement, evaluate, measurements_from_ncu
    try:
        keys = set(evaluate(case_id, gpu_name).predictions)
    except (KeyError, ValueError):
        return []
    want = find_gpu(gpu_name)

    def same_gpu(name) -> bool:
        return bool(name) and (name == gpu_name or (want is not None and find_gpu(name) is want))

    out = []
    words = CASE_HINTS.get(case_id, ())
    for run in src.runs(("ncu",)):
        if not words or not same_gpu(run.meta.get("gpu_name")):
            continue
        k = src.table(run.run_id, "kernels")
        hits = k.filter(pl.col("kernel_name").str.to_lowercase().str.contains("|".join(words)))
        if not hits.height:
            continue
        m = src.table(run.run_id, "metrics").filter(pl.col("id").is_in(hits["id"].implode())).drop_nulls("value")
        for kid, short in zip(hits["id"].to_list(), hits["short_name"].to_list()):
            mk = m.filter(pl.col("id") == kid)
            metrics = dict(zip(mk["metric"].to_list(), mk["value"].to_list()))
            for x in measurements_from_ncu(case_id, metrics, source=f"ncu run {run.run_id}, launch {kid} ({short})",
                                           gpu=gpu_name):
                if x.quantity in keys:
                    out.append(x)
    res = src.bench_results()
    res = res.filter((pl.col("case") == case_id) & pl.col("metric").is_in(list(keys)))
    for r in res.iter_rows(named=True):
        if not same_gpu(r["gpu_name"]) or r["value"] is None:
            continue
        spread = abs(r["cv"] * r["value"]) if r["cv"] is not None else None
        out.append(Measurement(r["value"], r["unit"] or "", f"bench run {r['run_id']} {r['params'] or ''}".strip(),
                               spread=spread, quantity=r["metric"], gpu=gpu_name))
    return out


def cases_page(src: Source, params: dict) -> Report:
    """The Textbook cases page of a URL. An export does not fall back: an unknown case or GPU is an error."""
    from analyzers.cases import CASE_IDS
    if params.get("case") and params["case"] not in CASE_IDS:
        raise KeyError(f"no textbook case {params['case']!r} (kernelscope cases lists them)")
    if params.get("gpu") and find_gpu(params["gpu"]) is None:
        raise KeyError(f"no GPU {params['gpu']!r} in the registry (kernelscope gpus lists them)")
    view = resolve_case(params)
    rep = Report("Textbook cases", subtitle=f"Case {code(view.case.id)} on {view.gpu.name}")
    rep.add(*[Text(p, "warning") for p in view.problems], *case_intro(view))
    if view.case.params:
        rep.add(Heading("Parameters"), case_params_table(view))
    ev, blocks = case_predictions(view)
    rep.add(*blocks)
    if view.case.runnable and ev is None:       # impossible parameters: the error, nothing else
        return rep
    if ev is not None:
        rep.add(Heading("Same parameters on every GPU of the registry", 3), *case_other_gpus(view, ev))
    rep.add(*case_figures(view.case))
    checks = case_chapter_checks(view.case)
    if checks:
        rep.add(Heading("Consistency checks on the chapter", 3), *checks)
    typed, bad = url_measurements(param_list(params.get("meas")) if params.get("case") == view.case.id else [],
                                  view.gpu.name)
    return rep.add(*case_measured(view, ev, measurements_for_case(src, view.case.id, view.gpu.name) + typed, bad))


# ---------------------------------------------------------------------------------------------------
# Claims
# ---------------------------------------------------------------------------------------------------

CLAIMS_INTRO = ("Numbers from a self-described internal “whitepaper” (seed 002), each checked against the GPU "
                "registry and the textbook case models. The verdict is computed, not written down: above-peak, "
                "self-contradictory, unit-error, refuted, plausible or unverifiable.")


def claim_verdicts(raw) -> list[str]:
    """The verdicts a URL filters on (?verdict=V, repeatable); unknown ones are ignored."""
    from analyzers.cases import CLAIM_VERDICTS
    return [v for v in param_list(raw) if v in CLAIM_VERDICTS]


def claims_table(shown: list, total: int, chosen: list[str]) -> Table:
    frame = pl.DataFrame([{"id": c.id, "verdict": c.verdict, "GPU": c.gpu.replace("NVIDIA ", ""), "claimed": c.claimed,
                           "text": c.gloss, "explanation": c.explanation} for c in shown],
                         schema={c: pl.String for c in ("id", "verdict", "GPU", "claimed", "text", "explanation")})
    return Table("claims", frame, {
        "id": text("id"), "verdict": text("verdict", "computed from the GPU registry and the case models"),
        "GPU": text("GPU"), "claimed": text("claimed"), "text": text("text"), "explanation": text("explanation")},
        caption=f"{len(shown)} of {total} claims" + (f"; verdicts {', '.join(chosen)}" if chosen else ""))

def claim_detail(c) -> list:
    out: list = [Heading(c.id), Text(f"> {c.text}\n\n{c.gloss} ({c.where} of seed 002)"),
                 Text(f"**{c.verdict}** — {c.explanation}")]
    if c.measurement:
        out.append(Text(f"Measurable on your GPU with {c.measurement.kind} `{c.measurement.name}`: "
                        f"{c.measurement.how}.", "caption"))
    if c.measured_note:
        out.append(Text(c.measured_note))
    if c.details:
        df = pl.DataFrame([{k: (str(v) if not isinstance(v, (int, float)) else v) for k, v in d.items()}
                           for d in c.details])
        out.append(Table("claim_details", df, plain_cols(df)))
    return out


#: the bench quantity a claim names (analyzers.cases.claims: Measure.name) -> the ceiling metric measuring it
CLAIM_CEILINGS = {"ceiling.bf16_matmul": "bf16_dense_flop_rate",
                  "ceiling.dram_copy_bandwidth": "dram_copy_bandwidth",
                  "launch.overhead/empty_kernel_launch_time": "launch_back_to_back"}


def claim_measurements(src: Source) -> dict:
    """{claim id: Measurement} for the claims whose check names a `kernelscope bench` ceiling: the value of
    the newest bench run on the claim's own GPU, else of the newest bench run on any GPU (the note then
    names that GPU); its method, run and cv go with it. Empty when the store has no bench run."""
    from analyzers.cases import claims
    from analyzers.cases.verdicts import Measurement
    bench = [r for r in src.runs(("bench",)) if "ceilings" in r.tables]       # newest first
    out = {}
    for c in claims():
        metric = CLAIM_CEILINGS.get(c.measurement.name) if c.measurement and c.measurement.kind == "bench" else None
        for run in sorted(bench, key=lambda r: r.meta.get("gpu_name") != c.gpu) if metric else ():
            rows = src.table(run.run_id, "ceilings").filter(pl.col("metric") == metric)
            if not rows.height:
                continue
            r = rows.row(0, named=True)
            method = (json.loads(r["params"]) if isinstance(r.get("params"), str) else r.get("params") or {}).get("method")
            cv = r.get("cv")
            out[c.id] = Measurement(float(r["value"]), r["unit"],
                                    f"kernelscope bench run {run.run_id}, ceiling {metric}"
                                    + (f" by {method}" if method else "") + f", {r.get('source') or 'event timing'}"
                                    + (f", cv {100 * cv:.1f} %" if cv is not None else ""),
                                    spread=float(r["value"]) * cv if cv is not None else None,
                                    quantity=metric, gpu=run.meta.get("gpu_name"))
            break
    return out


def claims_page(src: Source, params: dict, measured: dict | None = None) -> Report:
    """The Claims page of a URL (?verdict=V…&claim=ID): the claims table and the chosen claim in detail, with
    the store's bench measurements (claim_measurements) unless `measured` is given. An export does not fall
    back: an unknown claim id is an error."""
    from analyzers.cases import claims
    cs = claims(measured=claim_measurements(src) if measured is None else measured)
    if params.get("claim") and params["claim"] not in {c.id for c in cs}:
        raise KeyError(f"no claim {params['claim']!r} (kernelscope claims lists them)")
    chosen = claim_verdicts(params.get("verdict"))
    shown = [c for c in cs if not chosen or c.verdict in chosen]
    rep = Report("Claims", subtitle=CLAIMS_INTRO)
    rep.add(claims_table(shown, len(cs), chosen))
    if shown:
        rep.add(*claim_detail(next((c for c in shown if c.id == params.get("claim")), shown[0])))
    return rep


BUILDERS = {
    "home": lambda src, p: home(src),
    "runs": lambda src, p: runs_page(src, p.get("kind") or None, p.get("gpu") or None),
    "kernels": kernels_page,
    "compare": compare_page,
    "gpus": gpus_page,
    "timeline": timeline_page,
    "cases": cases_page,
    "claims": claims_page,
}


def build(src: Source, page: str, params: dict) -> Report:
    """The report of an exportable page for its query parameters."""
    if page not in BUILDERS:
        raise KeyError(f"page {page!r} cannot be exported (exportable: {', '.join(EXPORTABLE)})")
    return BUILDERS[page](src, params)
