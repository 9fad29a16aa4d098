"""Which textbook cases a profiled kernel runs, and its measurements of them.

A launch is matched to a case by words in its name (`CASE_HINTS`); parameters the name states (tile sizes,
padding) are read from it (`name_params`); its Nsight Compute counters become the case's measurements
(catalog.measurements_from_ncu); `kernel_comparisons` evaluates each matched case for the GPU and compares.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from analyzers.cases.catalog import Comparison, compare, evaluate, measurements_from_ncu
from analyzers.cases.model import CaseError
from analyzers.gpus import GPUSpec

# textbook cases a kernel may run, recognised by words in its name
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


def matching_cases(name: str) -> list[str]:
    low = name.lower()
    return [cid for cid, words in CASE_HINTS.items() if any(w in low for w in words)]


def name_params(case_id: str, name: str) -> dict:
    """Case parameters a kernel's name states: tile sizes ("64x64"), transpose tile and padding."""
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


@dataclass
class KernelCase:
    case_id: str
    section: str
    params: dict
    comparisons: list[Comparison]
    problem: str | None = None


def kernel_comparisons(name: str, metrics: dict[str, float], gpu: GPUSpec) -> list[KernelCase]:
    """For each case the kernel's name matches: the case evaluated on this GPU (with the name's parameters, the
    chapter's otherwise) and compared with the launch's counters (metric name -> value in base units)."""
    out = []
    for cid in matching_cases(name):
        params = name_params(cid, name)
        try:
            ev = evaluate(cid, gpu if gpu.from_registry else None, params or None)
            comps = compare(ev, [x for x in measurements_from_ncu(cid, metrics, gpu=gpu.name)
                                 if x.quantity in ev.predictions])
            out.append(KernelCase(cid, ev.case.section, params, comps))
        except (LookupError, CaseError, ValueError) as e:
            out.append(KernelCase(cid, "", params, [], e.args[0] if e.args else str(e)))
    return out
