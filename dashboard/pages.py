"""Page builders: URL query parameters + the run store -> a `Report` (tables, charts, text).

The Streamlit views draw these reports and add the widgets; `kernelscope export` and the download button
write the same reports to one HTML file. A page's whole state is in its query parameters:

    home                      (none)
    runs      ?kind=ncu&gpu=NVIDIA+H200
    kernels   ?run=RUN&kernel=LAUNCH_ID&sort=COLUMN&desc=1&q=METRIC_FILTER
    compare   ?a=RUN&b=RUN&noise=5
    gpus      ?gpu=NAME,NAME
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from urllib.parse import urlencode

import polars as pl

from analyzers.gpus import GPUSpec, all_gpus, find_gpu, resolve_gpu
from collectors.store import Run, Store
from dashboard import charts
from dashboard.report import Chart, Heading, Metrics, Report, Table, Text, code
from dashboard.theme import Col, fmt_bytes, fmt_ns, fmt_pct, fmt_rate, fmt_value, num, text

PAGE_FOR_KIND = {"ncu": "kernels", "kineto": "timeline", "nsys": "timeline", "bench": "gpus"}
TRACE_KINDS = ("kineto", "nsys")
EXPORTABLE = ("home", "runs", "kernels", "compare", "gpus")


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
    "ai": num("arith. intensity", "FLOP/B", "%.2f", "FP32 FLOP / DRAM bytes"),
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
        ai=pl.when(pl.col("dram_bytes") > 0).then(pl.col("flop_fp32") / pl.col("dram_bytes")),
    ).join(top, left_on="id", right_on="launch", how="left")


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

    # roofline
    roofs = []
    if nr.gpu.dram_bandwidth_bytes_per_s and nr.gpu.fp32_flop_per_s:
        roofs.append({"label": "spec sheet", "dram_bytes_per_s": nr.gpu.dram_bandwidth_bytes_per_s,
                      "fp32_flop_per_s": nr.gpu.fp32_flop_per_s, "measured": False})
    if measured.get("dram") or measured.get("fp32"):
        roofs.append({"label": "measured ceilings",
                      "dram_bytes_per_s": measured.get("dram", (nr.gpu.dram_bandwidth_bytes_per_s,))[0],
                      "fp32_flop_per_s": measured.get("fp32", (nr.gpu.fp32_flop_per_s,))[0], "measured": True})
        roofs = [r for r in roofs if r["dram_bytes_per_s"] and r["fp32_flop_per_s"]]
    pts = frame.filter((pl.col("flop_fp32") > 0) & (pl.col("dram_bytes") > 0)).select(
        pl.col("id").cast(pl.String).alias("launch"), "kernel", pl.col("ai").alias("ai_flop_per_byte"),
        (pl.col("fp32_tflops")).alias("tflop_per_s"), "duration_us")
    off = frame.filter(~((pl.col("flop_fp32") > 0) & (pl.col("dram_bytes") > 0)))
    if roofs and pts.height:
        note = "Roofs: attainable = min(FP32 peak, intensity × DRAM peak); spec sheet dashed"
        note += ", measured ceilings solid." if len(roofs) > 1 else "."
        if off.height:
            note += (f" Not on the chart (no FP32 work or no DRAM traffic counted): launches "
                     + ", ".join(str(i) for i in off["id"].to_list()) + ".")
        note += " Tensor-core work is not counted as FP32 FLOP."
        rep.add(Chart("roofline", charts.roofline(pts, roofs), note))
    elif not roofs:
        rep.add(Text("No roofline: the GPU's DRAM or FP32 peak is unknown.", "caption"))
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


BUILDERS = {
    "home": lambda src, p: home(src),
    "runs": lambda src, p: runs_page(src, p.get("kind") or None, p.get("gpu") or None),
    "kernels": kernels_page,
    "compare": compare_page,
    "gpus": gpus_page,
}


def build(src: Source, page: str, params: dict) -> Report:
    """The report of an exportable page for its query parameters."""
    if page not in BUILDERS:
        raise KeyError(f"page {page!r} cannot be exported (exportable: {', '.join(EXPORTABLE)})")
    return BUILDERS[page](src, params)
