"""What a timeline file is, and what it lacks: shared by the Kineto and Nsight Systems parsers.

- `check_kineto(top, categories, n_events, name)`: refuses, in one line saying what the file looks
  like, a Chrome-trace JSON that is not a PyTorch profiler (Kineto) trace (an Nsight Systems
  timeline converted to Chrome JSON, a browser or Perfetto trace ...), so it is never stored as an
  empty run.
- `trace_notes(tables, meta, lacks)` -> (warnings, lacks): the problems a run is stored with (no GPU
  activity, kernels without their launch call) and what the file's format or version does not
  provide, each one line with its consequence. `kernelscope analyze`, `kernelscope runs` and the
  Runs and Timeline pages show them.
"""

from __future__ import annotations

import polars as pl

from collectors.errors import ArtifactError

#: event categories Kineto writes (formats.md §5.2), old spellings included
KINETO_CATEGORIES = {
    "cpu_op",
    "Operator",
    "kernel",
    "Kernel",
    "cuda_runtime",
    "cuda_driver",
    "Runtime",
    "gpu_memcpy",
    "gpu_memset",
    "Memcpy",
    "Memset",
    "user_annotation",
    "gpu_user_annotation",
    "python_function",
    "ac2g",
    "fwdbwd",
    "async",
    "async_gpu",
    "async_cpu_to_gpu",
    "cuda_profiler_range",
    "cuda_sync",
    "cuda_event",
    "overhead",
    "Trace",
    "cpu_instant_event",
    "external_correlation",
    "Python",
    "collective_comm",
}
KINETO_TOP_KEYS = (
    "schemaVersion",
    "deviceProperties",
    "computeProperties",
    "distributedInfo",
    "baseTimeNanoseconds",
)
#: categories of an Nsight Systems timeline exported or converted to Chrome JSON
_NSYS_LIKE = {"cuda", "cuda_api", "nvtx", "osrt", "cudnn", "cublas", "mpi"}


def _cat_list(categories: dict[str, int], k: int = 4) -> str:
    top = sorted(categories.items(), key=lambda kv: (-kv[1], kv[0]))[:k]
    return ", ".join(f"{c} ({n:,})" for c, n in top)


def check_kineto(top: dict, categories: dict[str, int], n_events: int, name: str) -> None:
    """ArtifactError (one line: what the file looks like, what to do) unless the document is a
    Kineto trace: one of Kineto's top-level keys, or one of its event categories."""
    if any(k in top for k in KINETO_TOP_KEYS) or KINETO_CATEGORIES & set(categories):
        return
    if not n_events:
        raise ArtifactError(name, "an empty Chrome trace (no events): not a PyTorch profiler trace")
    what = f"a Chrome-trace JSON with {n_events:,} events (categories: {_cat_list(categories)})"
    if _NSYS_LIKE & {c.lower() for c in categories}:
        raise ArtifactError(
            name,
            f"{what}, which looks like an Nsight Systems timeline converted to Chrome JSON, not a "
            "PyTorch profiler trace: ingest the Nsight Systems SQLite export instead (nsys export "
            "--type sqlite REPORT.nsys-rep)",
        )
    raise ArtifactError(
        name,
        f"{what}, but not a PyTorch profiler (Kineto) trace: it has none of Kineto's categories "
        "(kernel, cuda_runtime, cpu_op ...) nor its top-level keys (schemaVersion, "
        "deviceProperties); record with torch.profiler and export_chrome_trace()",
    )


def kineto_lacks(meta: dict) -> list[str]:
    """What a Kineto trace's version does not provide (beside trace_notes' common ones)."""
    out = []
    if not meta.get("devices"):
        out.append(
            "a GPU description (deviceProperties, or computeProperties before PyTorch 1.9): the "
            "GPU is not named; give --gpu NAME"
        )
    if meta.get("whole_us_timestamps"):
        out.append(
            "sub-microsecond timestamps (PyTorch <= 1.9 writes whole µs): launch delays and gaps "
            "are multiples of 1 µs"
        )
    cats = meta.get("categories") or {}
    if "Runtime" in cats or "Operator" in cats:
        out.append(
            "current category names (this trace uses PyTorch <= 1.9's Kernel / Runtime / Operator, "
            "read as kernel / cuda_runtime / cpu_op)"
        )
    return out


def trace_notes(
    tables: dict[str, pl.DataFrame], meta: dict, lacks: list[str]
) -> tuple[list[str], list[str]]:
    """(warnings, lacks) of a parsed timeline (tables and meta of collectors.kineto / collectors.nsys)."""
    g = tables["gpu_ops"]
    k = g.filter(pl.col("kind") == "kernel")
    warnings: list[str] = []
    lacks = list(lacks)
    cats = meta.get("categories") or {}
    if g.height == 0:
        if cats.get("cuda_profiler_range"):
            why = (
                f"its {cats['cuda_profiler_range']:,} cuda_profiler_range events are CUPTI "
                "range-profiler counters, not GPU timings: record the timeline without the range "
                "profiler"
            )
        elif meta.get("source_format") == "nsys":
            why = (
                "the export has no CUPTI kernel, memcpy or memset table: record with CUDA tracing "
                "(nsys profile -t cuda)"
            )
        elif not meta.get("devices"):
            why = "a CPU-only profile: record with torch.profiler.ProfilerActivity.CUDA to see the GPU"
        else:
            why = "CUDA activity was not recorded (torch.profiler.ProfilerActivity.CUDA)"
        warnings.append(f"no GPU activity: the trace has no kernel, memcpy or memset events; {why}")
        return warnings, lacks
    no_launch = int(k["launch_api"].is_null().sum())
    if k.height and no_launch:
        warnings.append(
            f"{no_launch:,} of {k.height:,} kernels have no launch call in the trace: they count "
            "in busy time and the idle fraction but have no launch delay (HTA and TraceLens leave "
            "them out altogether; `analyze --compat hta` shows the difference)"
        )
    if k.height and tables["api_calls"].height == 0:
        lacks.append(
            "CUDA runtime / driver API events: no kernel is matched to its launch call, so there "
            "are no launch delays"
        )
    if k.height and k["grid_x"].null_count() == k.height:
        lacks.append("the launch configuration (grid, block) of kernels")
    if k.height and meta.get("source_format") == "kineto" and tables["cpu_ops"].height == 0:
        lacks.append(
            "CPU operator events (cpu_op): kernels are not linked to the aten operators "
            "that issued them"
        )
    return warnings, lacks
