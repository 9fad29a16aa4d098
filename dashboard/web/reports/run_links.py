"""What several page builders share: links, run selection from a URL, run and GPU tables, URL parameter helpers."""

from __future__ import annotations

import datetime as dt
from urllib.parse import urlencode

import polars as pl

from analyzers.gpu_compare import gpu_label
from analyzers.gpus import all_gpus, find_gpu
from collectors.errors import RunNotFound
from collectors.store import Run
from dashboard.web.reports.report_blocks import Col, Table, Text, code, num, text
from dashboard.web.pages import PAGE_FOR_KIND
from dashboard.core.source import Source

# query parameters that may repeat (?meas=…&meas=…): kept as lists
REPEATABLE = ("meas", "verdict")


def link(page: str, **params) -> str:
    """A relative link to a page with its query parameters (empty values dropped)."""
    q = {k: v for k, v in params.items() if v not in (None, "", [])}
    return page + (f"?{urlencode(q)}" if q else "")


def param_list(raw) -> list[str]:
    """A repeatable query parameter as a list ([] when absent)."""
    if raw in (None, ""):
        return []
    return [str(x) for x in raw] if isinstance(raw, (list, tuple)) else [str(raw)]


def plain_cols(frame: pl.DataFrame) -> dict[str, Col]:
    """Columns shown under their own names (tables whose columns a model names)."""
    return {c: num(c) if frame.schema[c].is_numeric() else text(c) for c in frame.columns}


def pick_run(
    src: Source,
    wanted: str | None,
    kinds: tuple[str, ...],
    problems: list[str],
    default_index: int = 0,
) -> Run | None:
    """The run a parameter names (id or unique prefix) if it is of one of `kinds`; otherwise the
    newest such run (with a problem noted). None when the store has none."""
    runs = src.runs(kinds)
    if wanted:
        try:
            run = src.get(wanted)
            if run.kind in kinds:
                return run
            problems.append(f"Run {code(wanted)} is a {run.kind} run, not {' or '.join(kinds)}.")
        except RunNotFound as e:
            problems.append(f"Run {code(e.run_id)}: {e.problem} — showing the newest run instead.")
    if not runs:
        return None
    return runs[min(default_index, len(runs) - 1)]


def notes_blocks(meta: dict, extra_warnings: list[str] | tuple = ()) -> list[Text]:
    """A run's warnings (what to know before trusting its numbers) and what its file lacks, one block each."""
    out = [
        Text(f"Warning: {w}", "warning")
        for w in [*extra_warnings, *(meta.get("warnings") or [])]
        if w
    ]
    lacks = meta.get("lacks") or []
    if lacks:
        out.append(Text("The file lacks " + "; ".join(lacks) + ".", "caption"))
    return out


#: what each kind of run is, in the words of the tools that made it (run pickers, the runs table)
KIND_WORDS = {
    "ncu": "Nsight Compute",
    "kineto": "PyTorch trace",
    "nsys": "Nsight Systems",
    "bench": "microbenchmarks",
}


def run_label(run: Run) -> str:
    gpu = gpu_label(run.meta.get("gpu_name"))
    return f"{run.run_id} — {run.source_name} ({KIND_WORDS.get(run.kind, run.kind)}, {gpu})"


def runs_table(runs: list[Run], name: str = "runs") -> Table:
    rows = []
    for r in runs:
        info = r.info
        rows.append(
            {
                "open": link(PAGE_FOR_KIND.get(r.kind, "runs"), run=r.run_id),
                "run_id": r.run_id,
                "kind": KIND_WORDS.get(r.kind, r.kind),
                "source_name": info.source_name,
                "gpu_name": gpu_label(info.gpu_name) if info.gpu_name else None,
                "items": info.item_count,
                "item_label": info.item_label,
                "size_mib": info.size_bytes / 2**20,
                "warnings": " · ".join(info.warnings) or None,
                "created": dt.datetime.fromtimestamp(info.created, dt.timezone.utc).strftime(
                    "%Y-%m-%d %H:%M UTC"
                ),
            }
        )
    frame = pl.DataFrame(
        rows,
        schema={
            "open": pl.String,
            "run_id": pl.String,
            "kind": pl.String,
            "source_name": pl.String,
            "gpu_name": pl.String,
            "items": pl.Int64,
            "item_label": pl.String,
            "size_mib": pl.Float64,
            "warnings": pl.String,
            "created": pl.String,
        },
    )
    return Table(
        name,
        frame,
        {
            "open": Col("open", kind="link", link_text="open"),
            "run_id": text("run id"),
            "kind": text("kind"),
            "source_name": text("file"),
            "gpu_name": text("GPU"),
            "items": num(
                "items", help="profiled launches (ncu), kernels (traces) or results (bench)"
            ),
            "item_label": text("counting"),
            "size_mib": num("artifact", "MiB", "%.2f"),
            "created": text("stored"),
            "warnings": text(
                "warnings",
                help="problems the run was stored with (no GPU activity, "
                "kernels without their launch call ...)",
            ),
        },
    )


def _div(v, s):
    return None if v is None else v / s


def gpu_table(src: Source) -> Table:
    """The GPU registry with the best measured ceilings (analyzers.ceilings.best_ceilings) next to
    the spec figures where bench runs have them."""
    ceil = src.ceilings()
    measured = {g: src.best_ceilings(g) for g in ceil["gpu_name"].unique().to_list()}
    names = [g.name for g in all_gpus()]
    extra = [g for g in measured if g not in names and find_gpu(g) is None]
    store_gpus: dict[str, int] = {}
    for r in src.runs():
        g = r.meta.get("gpu_name")
        if g:
            key = find_gpu(g).name if find_gpu(g) else g
            store_gpus[key] = store_gpus.get(key, 0) + 1

    def m_of(m: dict, res: str, scale: float):
        return _div(m[res].value, scale) if res in m else None

    rows = []
    for g in all_gpus():
        m = {}
        for name, res in measured.items():
            if find_gpu(name) is g or name == g.name:
                m = res
        rows.append(
            {
                "gpu": g.name,
                "cc": f"{g.cc[0]}.{g.cc[1]}",
                "sm_count": g.sm_count,
                "runs": store_gpus.get(g.name, 0),
                "dram_spec_gbps": _div(g.dram_bandwidth_bytes_per_s, 1e9),
                "dram_measured_gbps": m_of(m, "dram", 1e9),
                "fp32_spec_tflops": _div(g.fp32_flop_per_s, 1e12),
                "fp32_measured_tflops": m_of(m, "fp32", 1e12),
                "bf16_spec_tflops": _div(g.bf16_dense_flop_per_s, 1e12),
                "bf16_measured_tflops": m_of(m, "bf16", 1e12),
                "l2_mib": _div(g.l2_bytes, 2**20),
                "memory_gb": _div(g.memory_bytes, 1e9),
                "host_link": g.host_link,
            }
        )
    for name in extra:
        m = measured[name]
        rows.append(
            {
                "gpu": name,
                "runs": store_gpus.get(name, 0),
                "dram_measured_gbps": m_of(m, "dram", 1e9),
                "fp32_measured_tflops": m_of(m, "fp32", 1e12),
                "bf16_measured_tflops": m_of(m, "bf16", 1e12),
            }
        )
    frame = pl.DataFrame(
        rows,
        schema={
            "gpu": pl.String,
            "cc": pl.String,
            "sm_count": pl.Int64,
            "runs": pl.Int64,
            "dram_spec_gbps": pl.Float64,
            "dram_measured_gbps": pl.Float64,
            "fp32_spec_tflops": pl.Float64,
            "fp32_measured_tflops": pl.Float64,
            "bf16_spec_tflops": pl.Float64,
            "bf16_measured_tflops": pl.Float64,
            "l2_mib": pl.Float64,
            "memory_gb": pl.Float64,
            "host_link": pl.String,
        },
    )
    # the GPUs with data first (runs in the store, then measured ceilings), then the registry's
    # others
    frame = (
        frame.with_row_index("_i")
        .sort(
            [pl.col("runs").fill_null(0), pl.col("dram_measured_gbps").is_not_null(), pl.col("_i")],
            descending=[True, True, False],
        )
        .drop("_i")
    )
    spec = "spec sheet (`kernelscope gpus --format json` lists each source)"
    meas = "best measured ceiling of the GPU's bench runs (kernelscope bench; analyzers.ceilings)"
    return Table(
        "gpus",
        frame,
        {
            "gpu": text("GPU"),
            "cc": text("CC"),
            "sm_count": num("SMs"),
            "runs": num("runs in store"),
            "dram_spec_gbps": num("DRAM spec", "GB/s", "%.0f", spec),
            "dram_measured_gbps": num("DRAM measured", "GB/s", "%.0f", meas),
            "fp32_spec_tflops": num("FP32 spec", "TFLOP/s", "%.1f", spec),
            "fp32_measured_tflops": num("FP32 measured", "TFLOP/s", "%.1f", meas),
            "bf16_spec_tflops": num("BF16 dense spec", "TFLOP/s", "%.0f", spec),
            "bf16_measured_tflops": num("BF16 measured", "TFLOP/s", "%.0f", meas),
            "l2_mib": num("L2", "MiB", "%.0f", spec),
            "memory_gb": num("memory", "GB", "%.0f", spec),
            "host_link": text("host link"),
        },
    )
