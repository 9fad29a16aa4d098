"""Measured ceilings per GPU (from `kernelscope bench` runs) and the launch floor.

Pure functions over a ceilings frame (CEILING_SCHEMA: one row per measured ceiling of a bench run, newest run
first), which dashboard.source builds from the store with `ceilings_frame`:

- `classify_ceiling(name, unit)`: the resource a ceiling measures (dram, l2, smem, bf16, fp32, h2d, host_memcpy,
  launch, launch_cxx, sync, kernel, graph);
- `best_ceilings(ceilings, gpu_name)`: the best measured value per resource of one GPU (highest rate, lowest
  cost) with its source text: what "% of the measured ceiling", the roofline's measured roofs and the findings'
  peaks use;
- `launch_floor_ns(ceilings, gpu_name)`: the back-to-back empty-kernel launch time of that GPU (newest run);
- `spec_peak(gpu, resource)`, `result_peak(gpu, case, metric, unit)`: the spec-sheet figure a measurement is
  normalised to.
"""
from __future__ import annotations

from typing import NamedTuple

import polars as pl

from analyzers.gpus import GPUSpec

CEILING_SCHEMA = pl.Schema({"gpu_name": pl.String, "gpu": pl.String, "ceiling": pl.String, "resource": pl.String,
                            "value": pl.Float64, "unit": pl.String, "cv": pl.Float64, "source": pl.String,
                            "run_id": pl.String})
RESOURCES = {  # resource -> (GPUSpec field of its spec-sheet peak, label)
    "dram": ("dram_bandwidth_bytes_per_s", "DRAM bandwidth"),
    "l2": (None, "L2 bandwidth"),
    "smem": (None, "shared-memory bandwidth"),
    "bf16": ("bf16_dense_flop_per_s", "BF16 dense (tensor cores)"),
    "fp32": ("fp32_flop_per_s", "FP32 (CUDA cores)"),
    "h2d": ("host_link_bytes_per_s", "host ↔ device"),
    "launch": (None, "launch cost"),
    "launch_cxx": (None, "launch cost from C++ (CUDA runtime)"),
    "sync": (None, "launch + synchronize"),
    "kernel": (None, "one kernel between two events"),
    "graph": (None, "graph replay per node"),
    "host_memcpy": (None, "host memcpy into pinned memory"),
}
#: the ceiling metric of the launch floor (kernelscope bench, case "ceiling")
LAUNCH_FLOOR_METRIC = "launch_back_to_back"


class Ceiling(NamedTuple):
    value: float          # base units: B/s, FLOP/s, or s for costs
    source: str           # "<ceiling> (<how measured>, run <id>)"


def classify_ceiling(name: str, unit: str) -> str | None:
    """Which resource a measured ceiling describes, from its name and unit (B/s, FLOP/s, s)."""
    n = name.lower()
    if unit == "FLOP/s":
        if any(w in n for w in ("bf16", "tensor", "mma", "gemm", "matmul", "fp16")):
            return "bf16"
        return "fp32" if any(w in n for w in ("fp32", "fma", "ffma", "float")) else None
    if unit == "B/s":
        if "memcpy" in n and "host" in n:
            return "host_memcpy"
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
        if "kernel_event" in n:
            return "kernel"
        if "launch" in n and "sync" in n:
            return "sync"
        if "launch" in n and ("cxx" in n or "c++" in n):
            return "launch_cxx"
        if "launch" in n:
            return "launch"
    return None


def ceilings_frame(table: pl.DataFrame, *, run_id: str, gpu_name: str | None, gpu_label: str | None = None
                   ) -> pl.DataFrame:
    """One bench run's ceilings table (records of case "ceiling") as CEILING_SCHEMA rows, each with its resource."""
    gpu_name = gpu_name or "unknown GPU"
    if not table.height or not {"metric", "value", "unit"} <= set(table.columns):
        return pl.DataFrame(schema=CEILING_SCHEMA)
    t = table.filter(pl.col("value").is_not_null())
    names = t["metric"].cast(pl.String).to_list()
    units = t["unit"].cast(pl.String).fill_null("").to_list()
    return pl.DataFrame({
        "gpu_name": [gpu_name] * t.height, "gpu": [gpu_label or gpu_name] * t.height, "ceiling": names,
        "resource": [classify_ceiling(n, u) for n, u in zip(names, units)], "value": t["value"].cast(pl.Float64),
        "unit": units, "cv": t["cv"].cast(pl.Float64) if "cv" in t.columns else [None] * t.height,
        "source": (t["source"].cast(pl.String).fill_null("microbenchmark") if "source" in t.columns
                   else ["microbenchmark"] * t.height),
        "run_id": [run_id] * t.height}, schema=CEILING_SCHEMA)


def best_ceilings(ceilings: pl.DataFrame, gpu_name: str) -> dict[str, Ceiling]:
    """The highest measured rate (or lowest cost) per resource of one GPU: resource -> Ceiling(value, source)."""
    out: dict[str, Ceiling] = {}
    sub = ceilings.filter((pl.col("gpu_name") == gpu_name) & pl.col("resource").is_not_null())
    for r in sub.iter_rows(named=True):
        res, v = r["resource"], r["value"]
        better = (v < out[res].value) if r["unit"] == "s" and res in out else (res not in out or v > out[res].value)
        if better:
            out[res] = Ceiling(v, f"{r['ceiling']} ({r['source']}, run {r['run_id']})")
    return out


def launch_floor_ns(ceilings: pl.DataFrame, gpu_name: str | None) -> float | None:
    """The launch floor for launch-bound detection: the back-to-back empty-kernel launch time measured by
    `kernelscope bench` (ceiling `launch_back_to_back`) on a GPU of this name, from the newest run (the frame's
    first matching row); None when there is no such measurement."""
    if not gpu_name:
        return None
    c = ceilings.filter((pl.col("gpu_name") == gpu_name) & (pl.col("ceiling") == LAUNCH_FLOOR_METRIC)
                        & (pl.col("unit") == "s"))
    return float(c["value"][0]) * 1e9 if c.height else None


def gpu_labels(runs: list[tuple[str, str | None, str | None]]) -> dict[str, str]:
    """(run id, GPU name, GPU UUID) of bench runs -> run id -> the GPU's label: its name, plus the first
    characters of its UUID when runs of several physical GPUs with that name are present (one run per GPU of a
    multi-GPU server)."""
    uuids: dict[str, set] = {}
    for _, name, uuid in runs:
        uuids.setdefault(name or "unknown GPU", set()).add(uuid)
    out = {}
    for rid, name, uuid in runs:
        name = name or "unknown GPU"
        out[rid] = f"{name} · {str(uuid)[:12]}" if len(uuids[name]) > 1 and uuid else name
    return out


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
