"""The GPU cases of `kernelscope bench` and the measured ceilings: the registry (order of execution,
time limits, which cases Nsight Compute reruns) and case selection. Case ids are those of
chapter5-cases.md; the case functions live in ceilings.py and cases_*.py, by chapter section;
collectors.bench.context has the `Context` they take.
"""

from __future__ import annotations

from collectors.bench.cases_fusion import (
    case_flash_attention_traffic,
    case_fusion_activation_chain,
    case_graph_replay,
)
from collectors.bench.cases_operator import (
    case_bank_column_read,
    case_rmsnorm_split,
    case_tiling_traffic,
    case_transpose_tile,
)
from collectors.bench.cases_submission import (
    case_compile_amortization,
    case_h2d_chunked_copy,
    case_launch_overhead,
    case_littles_law,
    case_occupancy_sm,
    case_timing_positions,
)
from collectors.bench.ceilings import (
    ceiling_bf16_matmul,
    ceiling_dram_copy,
    ceiling_fp32_fma,
    ceiling_host_link,
    ceiling_l2_read,
    ceiling_load_latency,
    ceiling_smem_read,
)

# =============================================================================================
# Registry: order of execution, time limit (s, full / quick), and which cases ncu reruns
# =============================================================================================

CASES = {
    "ceiling.dram_copy": (ceiling_dram_copy, 60, 30),
    "ceiling.l2_read": (ceiling_l2_read, 30, 20),
    "ceiling.smem_read": (ceiling_smem_read, 30, 20),
    "ceiling.bf16_matmul": (ceiling_bf16_matmul, 40, 20),
    "ceiling.fp32_fma": (ceiling_fp32_fma, 30, 20),
    "ceiling.host_link": (ceiling_host_link, 40, 20),
    "ceiling.load_latency": (ceiling_load_latency, 30, 20),
    "h2d.chunked_copy": (case_h2d_chunked_copy, 40, 20),
    "timing.positions": (case_timing_positions, 30, 20),
    "launch.overhead": (case_launch_overhead, 40, 20),
    "littles_law": (case_littles_law, 40, 20),
    "occupancy.sm": (case_occupancy_sm, 40, 20),
    "tiling.traffic": (case_tiling_traffic, 40, 20),
    "bank.column_read": (case_bank_column_read, 60, 20),
    "transpose.tile": (case_transpose_tile, 30, 20),
    "rmsnorm.split": (case_rmsnorm_split, 60, 30),
    "fusion.activation_chain": (case_fusion_activation_chain, 40, 20),
    "flash.attention_traffic": (case_flash_attention_traffic, 40, 20),
    "compile.amortization": (case_compile_amortization, 150, 90),
    "graph.replay": (case_graph_replay, 60, 40),  # last: the torch profiler runs here
}

#: case -> kernel-name prefix that Nsight Compute profiles in the case's child process
NCU_CASES = {
    "bank.column_read": "ks_colread",
    "transpose.tile": "ks_transpose",
    "tiling.traffic": "ks_m(atmul|ma)_",
    "littles_law": "ks_copy",
    "occupancy.sm": "ks_occ",
}


def select_cases(spec: str | None) -> list[str]:
    """Case ids from a comma list of ids or prefixes ('ceiling' selects every ceiling.*); all if
    None. Raises ValueError for a name that selects nothing."""
    if not spec:
        return list(CASES)
    wanted = [s.strip() for s in spec.split(",") if s.strip()]
    out = []
    for w in wanted:
        hits = [c for c in CASES if c == w or c.startswith(w + ".") or c.startswith(w)]
        if not hits:
            raise ValueError(f"unknown case {w!r}; known: {', '.join(CASES)}")
        out += [h for h in hits if h not in out]
    return [c for c in CASES if c in out]
