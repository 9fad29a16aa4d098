"""Measured ceilings per GPU (from `kernelscope bench` runs) and the launch floor.

More: docs/architecture.md, *analyzers.ceilings*.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import polars as pl

from analyzers.gpus import GPUSpec, find_gpu

CEILING_SCHEMA = pl.Schema(
    {
        "gpu_name": pl.String,
        "gpu": pl.String,
        "ceiling": pl.String,
        "resource": pl.String,
        "value": pl.Float64,
        "unit": pl.String,
        "cv": pl.Float64,
        "source": pl.String,
        "run_id": pl.String,
        "throttled": pl.Boolean,
        "host": pl.String,
    }
)
#: resources the host sets (submitting launches, copying in host memory, the host link): stored per
#: host and used per host — the newest run's host unless one is named — never the best over hosts
#: (issue 38: 3.11 µs C++ launches on the H100's host, 4.98 µs on the H200's)
HOST_RESOURCES = frozenset({"launch", "launch_cxx", "sync", "host_memcpy", "h2d", "d2h"})
#: judge_ceilings adds these
JUDGED_SCHEMA = CEILING_SCHEMA | pl.Schema(
    {"model": pl.String, "status": pl.String, "reason": pl.String}
)
#: a measured rate is plausible between these fractions of the datasheet peak (2 % above it for
#: rounded datasheet figures): a copy or an FMA loop cannot beat the datasheet (the H200 measures 89
#: % DRAM copy, 90 % FP32, 80 % BF16), and a ceiling below 5 % of it is a broken measurement, not
#: the GPU's limit
SPEC_FRACTION = (0.05, 1.02)
NO_DATASHEET = (
    "measured on a GPU the registry does not hold: no datasheet to check it against (`kernelscope "
    "ceilings --pin RUN` trusts it)"
)
#: costs (seconds): an empty-kernel launch and a graph node on any GPU the registry holds
COST_BOUNDS = {
    "launch": (0.5e-6, 1e-3),
    "launch_cxx": (0.5e-6, 1e-3),
    "kernel": (0.5e-6, 1e-3),
    "sync": (1e-6, 10e-3),
    "graph": (0.05e-6, 1e-3),
    # one dependent load: an L2 hit takes 100–300 ns, a DRAM load 250–900 ns on any GPU
    # the registry holds
    "latency_l2": (30e-9, 2e-6),
    "latency_dram": (80e-9, 5e-6),
}
#: a host memcpy into pinned memory: between a slow laptop and any server's memory bandwidth
HOST_MEMCPY_BOUNDS = (1e8, 1e12)
RESOURCES = {  # resource -> (GPUSpec field of its spec-sheet peak, label)
    "dram": ("dram_bandwidth_bytes_per_s", "DRAM bandwidth"),
    "l2": (None, "L2 bandwidth"),
    "smem": (None, "shared-memory bandwidth"),
    "bf16": ("bf16_dense_flop_per_s", "BF16 dense (tensor cores)"),
    "fp32": ("fp32_flop_per_s", "FP32 (CUDA cores)"),
    "h2d": ("host_link_bytes_per_s", "host → device"),
    "d2h": ("host_link_bytes_per_s", "device → host"),
    "launch": (None, "launch cost"),
    "launch_cxx": (None, "launch cost from C++ (CUDA runtime)"),
    "sync": (None, "launch + synchronize"),
    "kernel": (None, "one kernel between two events"),
    "graph": (None, "graph replay per node"),
    "host_memcpy": (None, "host memcpy into pinned memory"),
    "latency_dram": (None, "DRAM load latency, unloaded"),
    "latency_l2": (None, "L2 load latency, unloaded"),
}
#: the ceiling metric of the launch floor (kernelscope bench, case "ceiling")
LAUNCH_FLOOR_METRIC = "launch_back_to_back"


class Ceiling(NamedTuple):
    value: float  # base units: B/s, FLOP/s, or s for costs
    source: str  # "<ceiling> (<how measured>, run <id>)"


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
        # the other direction: never a host-to-device figure (issue 38)
        if "d2h" in n:
            return "d2h"
        if any(w in n for w in ("h2d", "host", "pinned", "pageable", "pcie")):
            return "h2d"
        if "l2" in n:
            return "l2"
        if any(w in n for w in ("smem", "shared")):
            return "smem"
        if any(w in n for w in ("dram", "copy", "hbm", "memory")):
            return "dram"
        return None
    if unit == "s":
        if "latency" in n and "launch" not in n:
            return (
                "latency_l2"
                if "l2" in n
                else ("latency_dram" if any(w in n for w in ("dram", "hbm")) else None)
            )
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


def ceilings_frame(
    table: pl.DataFrame,
    *,
    run_id: str,
    gpu_name: str | None,
    gpu_label: str | None = None,
    host: str | None = None,
) -> pl.DataFrame:
    """One bench run's ceilings table (records of case "ceiling") as CEILING_SCHEMA rows, each with
    its resource; host: the run's host id (collectors.bench.run.host_info), else the run's own
    ("host of run <id>")."""
    gpu_name = gpu_name or "unknown GPU"
    if not table.height or not {"metric", "value", "unit"} <= set(table.columns):
        return pl.DataFrame(schema=CEILING_SCHEMA)
    t = table.filter(pl.col("value").is_not_null())
    names = t["metric"].cast(pl.String).to_list()
    units = t["unit"].cast(pl.String).fill_null("").to_list()
    return pl.DataFrame(
        {
            "gpu_name": [gpu_name] * t.height,
            "gpu": [gpu_label or gpu_name] * t.height,
            "ceiling": names,
            "resource": [classify_ceiling(n, u) for n, u in zip(names, units)],
            "value": t["value"].cast(pl.Float64),
            "unit": units,
            "cv": t["cv"].cast(pl.Float64) if "cv" in t.columns else [None] * t.height,
            "source": (
                t["source"].cast(pl.String).fill_null("microbenchmark")
                if "source" in t.columns
                else ["microbenchmark"] * t.height
            ),
            "run_id": [run_id] * t.height,
            # measured while NVML reported a clock-event (throttle) reason
            # (collectors.bench.harness): kept apart
            "throttled": (
                t["flags"].list.contains("throttled").fill_null(False)
                if "flags" in t.columns and t.schema["flags"] == pl.List(pl.String)
                else [False] * t.height
            ),
            "host": [host or f"host of run {run_id}"] * t.height,
        },
        schema=CEILING_SCHEMA,
    )


def model_of(gpu_name: str | None) -> str:
    """The GPU model a name identifies: the registry's canonical name, else the name as given."""
    name = (gpu_name or "unknown GPU").strip()
    g = find_gpu(name)
    return g.name if g else name


def smem_bandwidth_bound(gpu: GPUSpec) -> float | None:
    """SMs × 128 bytes per clock × boost clock: the shared-memory (and L1) bandwidth no kernel can pass."""
    return gpu.sm_count * 128 * gpu.boost_clock_mhz * 1e6 if gpu.boost_clock_mhz else None


def implausible(resource: str | None, unit: str, value: float, gpu: GPUSpec | None) -> str | None:
    """Why a measured ceiling cannot be its GPU's limit (None when it can)."""
    if value is None or not math.isfinite(value) or value <= 0:
        return f"{value!r} is not a positive finite number"
    if resource is None:
        return "not a ceiling of a known resource (name and unit)"
    if resource in COST_BOUNDS:
        lo, hi = COST_BOUNDS[resource]
        if unit != "s" or not lo <= value <= hi:
            return f"{value * 1e6:.3g} µs is outside {lo * 1e6:g}–{hi * 1e6:g} µs, the range of a {RESOURCES[resource][1]}"
        return None
    if resource == "host_memcpy":
        lo, hi = HOST_MEMCPY_BOUNDS
        return (
            None
            if unit == "B/s" and lo <= value <= hi
            else f"{value:.3g} {unit} is outside {lo:g}–{hi:g} B/s"
        )
    if gpu is None or not gpu.from_registry:
        return NO_DATASHEET
    peak = spec_peak(gpu, resource)
    if resource == "smem" or resource == "l2":
        peak = smem_bandwidth_bound(gpu)
        if peak and value > peak * SPEC_FRACTION[1]:
            return f"above {gpu.name}'s shared-memory bound SMs × 128 B × boost clock = {peak / 1e12:.1f} TB/s"
        floor = (gpu.dram_bandwidth_bytes_per_s or 0) * 0.5
        if resource == "l2" and value < floor:
            return f"below half of {gpu.name}'s DRAM peak: not an L2 bandwidth"
        return None
    if not peak:
        return None
    lo, hi = SPEC_FRACTION
    if value > peak * hi:
        return (
            f"{value / peak:.3g}× {gpu.name}'s datasheet peak {peak:.4g} {unit}: no measurement "
            f"can pass it (limit {hi:g}×)"
        )
    if value < peak * lo:
        return f"{100 * value / peak:.2g} % of {gpu.name}'s datasheet peak: a broken measurement, not a ceiling"
    return None


#: a ceiling whose repetitions spread more than this (coefficient of variation) is too noisy to be a
#: limit: it is shown as "noisy" and never used (issue 38: a one-kernel-between-events floor with an
#: 83 % spread was trusted)
MAX_CEILING_CV = 0.25


def judge_ceilings(
    ceilings: pl.DataFrame,
    pinned: dict[str, str] | None = None,
    excluded: set[str] | frozenset = frozenset(),
) -> pl.DataFrame:
    """Each ceiling with its GPU model, status (trusted, rejected, noisy, excluded, not pinned) and
    reason (JUDGED_SCHEMA). pinned: GPU model -> run id whose ceilings alone are used for that
    model; excluded: run ids never used; noisy: its spread (cv) is above MAX_CEILING_CV. A throttled
    ceiling stays trusted (a lower bound of its resource) and says so in its `throttled` column."""
    pinned = {model_of(k): v for k, v in (pinned or {}).items()}
    rows = []
    for r in ceilings.iter_rows(named=True):
        model = model_of(r["gpu_name"])
        gpu = find_gpu(model)
        if r["run_id"] in excluded:
            status, reason = "excluded", "its run is excluded (kernelscope ceilings --exclude)"
        elif model in pinned and pinned[model] != r["run_id"]:
            status, reason = "not pinned", f"run {pinned[model]} is pinned for {model}"
        else:
            why = implausible(r["resource"], r["unit"] or "", r["value"], gpu)
            if why == NO_DATASHEET and pinned.get(model) == r["run_id"]:
                status, reason = "trusted", "pinned by the user; no datasheet to check it against"
            else:
                status, reason = ("rejected", why) if why else ("trusted", None)
            cv = r.get("cv")
            if status == "trusted" and cv is not None and cv == cv and cv > MAX_CEILING_CV:
                status, reason = (
                    "noisy",
                    (
                        f"its repetitions spread {cv:.0%} (coefficient of variation), above "
                        f"{MAX_CEILING_CV:.0%}: too noisy to be a limit"
                    ),
                )
        rows.append({**r, "model": model, "status": status, "reason": reason})
    return pl.DataFrame(rows, schema=JUDGED_SCHEMA)


def best_ceilings(
    ceilings: pl.DataFrame, gpu_name: str, host: str | None = None
) -> dict[str, Ceiling]:
    """The highest trusted rate (or lowest cost) per resource measured on the same GPU model as
    `gpu_name`: resource -> Ceiling(value, source). Host-side resources (HOST_RESOURCES) come from
    one host: `host` when its runs measured them, else the newest run's (the frame is newest first).
    `ceilings` is judged first when it has no status column."""
    out: dict[str, Ceiling] = {}
    if "status" not in ceilings.columns:
        ceilings = judge_ceilings(ceilings)
    sub = ceilings.filter((pl.col("model") == model_of(gpu_name)) & (pl.col("status") == "trusted"))
    # host-side resource -> the host whose figures are used (newest run's, or named)
    hosts: dict[str, str] = {}
    for r in sub.iter_rows(named=True):
        res, v = r["resource"], r["value"]
        h = r.get("host") or f"host of run {r['run_id']}"
        if res in HOST_RESOURCES:
            want = (
                host
                if host is not None and sub.filter(pl.col("host") == host).height
                else hosts.setdefault(res, h)
            )
            if h != want:
                continue
        better = (
            (v < out[res].value)
            if r["unit"] == "s" and res in out
            else (res not in out or v > out[res].value)
        )
        if better:
            where = f", {h}" if res in HOST_RESOURCES else ""
            out[res] = Ceiling(v, f"{r['ceiling']} ({r['source']}, run {r['run_id']}{where})")
    return out


def launch_floor_ns(ceilings: pl.DataFrame, gpu_name: str | None) -> float | None:
    """The launch floor for launch-bound detection: the back-to-back empty-kernel launch time
    measured by `kernelscope bench` (ceiling `launch_back_to_back`) on a GPU of this model, from the
    newest run whose value is trusted (the frame's first matching row); None when there is no such
    measurement."""
    if not gpu_name:
        return None
    if "status" not in ceilings.columns:
        ceilings = judge_ceilings(ceilings)
    c = ceilings.filter(
        (pl.col("model") == model_of(gpu_name))
        & (pl.col("ceiling") == LAUNCH_FLOOR_METRIC)
        & (pl.col("unit") == "s")
        & (pl.col("status") == "trusted")
    )
    return float(c["value"][0]) * 1e9 if c.height else None


def gpu_labels(runs: list[tuple[str, str | None, str | None]]) -> dict[str, str]:
    """(run id, GPU name, GPU UUID) of bench runs -> run id -> the GPU's label: its name, plus the
    first characters of its UUID when runs of several physical GPUs with that name are present (one
    run per GPU of a multi-GPU server)."""
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


def smem_spec_peak(gpu: GPUSpec | None) -> float | None:
    """Shared-memory bandwidth from the spec sheet: SMs × 128 B × boost clock (B/s); None without a clock."""
    return smem_bandwidth_bound(gpu) if gpu is not None and gpu.sm_count else None


def bounding_resource(case: str, metric: str, unit: str, params: dict | None = None) -> str | None:
    """The resource whose ceiling bounds a bench result's rate (issue 38: a rate is a fraction of
    the ceiling that bounds it, never of an unrelated one): a shared-memory column read and an
    unpadded transpose (32-way conflicts) are bound by shared memory; host copies by the host link;
    matrix work by the tensor cores; other B/s by DRAM and other FLOP/s by FP32. None for quantities
    that are not rates."""
    name = f"{case} {metric}".lower()
    params = params or {}
    if unit == "B/s":
        if any(w in name for w in ("h2d", "d2h", "host", "pinned", "pageable")):
            return "h2d"
        if case == "bank.column_read" or (
            case == "transpose.tile" and params.get("padded") is False
        ):
            return "smem"
        return "dram"
    if unit == "FLOP/s":
        return (
            "bf16"
            if any(w in name for w in ("bf16", "mma", "matmul", "gemm", "tiling", "tensor"))
            else "fp32"
        )
    return None


def result_peak(
    gpu: GPUSpec | None, case: str, metric: str, unit: str, params: dict | None = None
) -> tuple[float | None, str]:
    """The GPU's own spec peak a bench result is normalised to: that of its bounding resource
    (bounding_resource; shared memory: SMs × 128 B × boost clock)."""
    if gpu is None:
        return None, ""
    res = bounding_resource(case, metric, unit, params)
    if res is None:
        return None, ""
    if res == "smem":
        return smem_spec_peak(gpu), RESOURCES["smem"][1] + " (SMs × 128 B × boost clock)"
    return spec_peak(gpu, res), RESOURCES[res][1]
