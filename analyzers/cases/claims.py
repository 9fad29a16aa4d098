"""Claims of the second seed (a self-styled internal "whitepaper" on Tensor IR, Triton and the A10G), each
checked against the GPU registry and the case models.

Verdicts (computed here from the registry and the models, never written down per claim):
- "above-peak": a claimed rate exceeds the GPU's physical peak;
- "self-contradictory": the text's own numbers or code disagree with each other;
- "unit-error": the number only makes sense in another unit than the one written;
- "refuted": the registry or a model contradicts a stated fact (e.g. the SM count, a bank-conflict rule);
- "plausible": consistent with the hardware (possibly optimistic);
- "unverifiable": no model or measurement here can check it (e.g. it relies on APIs that do not exist as
  described).
Where a microbenchmark can measure the quantity, `measurement` names it; pass measured values to
`claims(measured={claim_id: Measurement})` to see them next to the claim.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from analyzers.cases.model import Measure
from analyzers.errors import UnknownName
from analyzers.cases.s52_operator import bank_conflicts, column_read_addresses
from analyzers.units import fmt
from analyzers.cases.verdicts import Measurement
from analyzers.gpus import GPUSpec, all_gpus, get_gpu
from analyzers.occupancy import occupancy

CLAIM_VERDICTS = ("above-peak", "self-contradictory", "unit-error", "refuted", "plausible", "unverifiable")
SEED = "002_43158b2e769b6827.txt"


@dataclass(frozen=True)
class ClaimCheck:
    id: str
    text: str                 # a short quotation (the seed is in Chinese)
    gloss: str                # what it says, in English
    where: str                # section of the seed
    gpu: str                  # registry name of the GPU the claim is about
    quantity: str
    claimed: str              # the claimed value with its unit, as written
    verdict: str
    explanation: str
    measurement: Measure | None = None
    measured: Measurement | None = None
    measured_note: str = ""
    details: tuple[dict, ...] = field(default=())

    def to_json(self) -> dict:
        return {"id": self.id, "text": self.text, "gloss": self.gloss, "where": self.where, "gpu": self.gpu,
                "quantity": self.quantity, "claimed": self.claimed, "verdict": self.verdict,
                "explanation": self.explanation,
                "measurement": self.measurement.to_json() if self.measurement else None,
                "measured": self.measured.to_json() if self.measured else None,
                "measured_note": self.measured_note or None, "details": list(self.details)}


TFLOP, GB = 1e12, 1e9


# ------------------------------------------------------------------------------------------------
# The whitepaper's occupancy helper, reproduced as written (§3.3)
# ------------------------------------------------------------------------------------------------

def whitepaper_calc_occupancy(regs_per_thread, sm_shmem_per_block, threads_per_block, max_threads_per_sm=1024,
                              max_blocks_per_sm=32, total_regs_per_sm=65536, total_shmem_per_sm=49152):
    """The seed's `calc_occupancy`, unchanged: no allocation granularity, no reserved shared memory, a
    division by zero for a kernel without shared memory, and defaults that fit no GPU it targets."""
    blocks_by_regs = total_regs_per_sm // (regs_per_thread * threads_per_block)
    blocks_by_shmem = total_shmem_per_sm // sm_shmem_per_block
    blocks_by_threads = max_threads_per_sm // threads_per_block
    return min(blocks_by_regs, blocks_by_shmem, blocks_by_threads, max_blocks_per_sm)


HELPER_DEFAULTS = {"max_threads_per_sm": 1024, "max_blocks_per_sm": 32, "total_regs_per_sm": 65536,
                   "total_shmem_per_sm": 49152}
# the seed's (garbled) table "配置 寄存器/线程 SM共享内存/块 理论occupancy(块/SM)": "A 32 0 32 / B 64 16KB 16"
HELPER_TABLE = ({"config": "A", "regs": 32, "smem": 0, "claimed_blocks": 32},
                {"config": "B", "regs": 64, "smem": 16 * 1024, "claimed_blocks": 16})


def _helper(regs, smem, threads):
    try:
        return whitepaper_calc_occupancy(regs, smem, threads)
    except ZeroDivisionError:
        return "ZeroDivisionError"


# ------------------------------------------------------------------------------------------------
# Rate claims against peaks
# ------------------------------------------------------------------------------------------------

def _nearest_peak(value: float) -> GPUSpec:
    return min((g for g in all_gpus() if g.bf16_dense_flop_per_s),
               key=lambda g: abs(math.log(g.bf16_dense_flop_per_s / value)))


def _triton_a100() -> ClaimCheck:
    a100 = get_gpu("A100")
    peak = a100.bf16_dense_flop_per_s
    hand, joint = 284.0, 312.0
    lit = joint * 1e9 / peak                       # as written: GFLOPS
    tera = joint * TFLOP / peak                    # if it meant TFLOP/s
    if lit < 0.01 and 0.5 <= tera <= 1.02:
        v = "unit-error"
        why = (f"as written, {joint:g} GFLOPS is {lit:.2%} of the A100's {fmt(peak, 'FLOP/s')} dense BF16/FP16 peak "
               f"(registry) — far too slow for a tuned matmul; read as TFLOP/s it is {tera:.0%} of that peak, i.e. "
               f"exactly the datasheet number, which no real kernel reaches (cuBLAS reaches ≈ 87 %); "
               f"{hand:g} would be {hand * TFLOP / peak:.0%}.")
    elif tera > 1.02:
        v, why = "above-peak", f"{joint:g} TFLOP/s exceeds the A100's {fmt(peak, 'FLOP/s')} peak."
    else:
        v, why = "plausible", f"{joint:g} is {lit:.2%} (GFLOPS) or {tera:.0%} (TFLOP/s) of the A100's peak."
    return ClaimCheck(
        "triton.a100_matmul_rate", "优化策略 GFLOPS(A100) 纯Triton手动调度 284 … Tensor IR+Triton联合优化 312",
        "Triton matmul on A100: 284 GFLOPS hand-scheduled, 312 with 'Tensor IR' joint optimisation",
        "§1 (优化效果对比)", a100.name, "matmul rate", "284 → 312 GFLOPS", v, why,
        Measure("bench", "ceiling.bf16_matmul", None, "cuBLAS BF16 8192³ through torch on the user's GPU"),
        details=({"reading": "GFLOPS as written", "fraction_of_peak": lit},
                 {"reading": "TFLOP/s", "fraction_of_peak": tera}))


def _a10g_memory_spec() -> ClaimCheck:
    a10g = get_gpu("A10G")
    bus_bits, gbps, sms = 320, 19.5, 60
    derived = bus_bits * gbps * 1e9 / 8
    s25 = 600 * GB
    contradict = not math.isclose(derived, s25, rel_tol=0.05)
    reg_bw = a10g.dram_bandwidth_bytes_per_s
    why = (f"§4.1 computes 320-bit × 19.5 Gbps / 8 = {fmt(derived, 'B/s')} (arithmetic right) but §2.5 gives "
           f"{fmt(s25, 'B/s')} for the same card; the registry ({a10g.source_of('dram_bandwidth_bytes_per_s')}) "
           f"has {fmt(reg_bw, 'B/s')} and {a10g.sm_count} SMs, {a10g.memory_type}: §4.1's GA102 with 60 SMs and a "
           f"320-bit GDDR6X bus describes a different card.")
    v = "self-contradictory" if contradict else ("plausible" if math.isclose(derived, reg_bw, rel_tol=0.05)
                                                 else "refuted")
    return ClaimCheck(
        "a10g.memory_spec", "A10G（24GB GDDR6，带宽600 GB/s） vs 显存位宽320-bit、GDDR6X 19.5 Gbps、峰值带宽780 GB/s",
        "A10G: '24 GB GDDR6, 600 GB/s' in §2.5 vs 'GA102, 60 SMs, 320-bit GDDR6X at 19.5 Gbps = 780 GB/s' in §4.1",
        "§2.5 vs §4.1", a10g.name, "DRAM bandwidth", "600 GB/s and 780 GB/s", v, why,
        Measure("bench", "ceiling.dram_copy_bandwidth", None, "copy bandwidth (read + write) on the user's GPU"),
        details=({"source": "§2.5", "bandwidth_B_per_s": s25}, {"source": "§4.1", "bandwidth_B_per_s": derived},
                 {"source": "registry", "bandwidth_B_per_s": reg_bw, "sm_count": a10g.sm_count}))


def _a10g_bandwidth_fractions() -> ClaimCheck:
    a10g = get_gpu("A10G")
    peak_claimed = 600 * GB
    pairs = [(528.3 * GB, 88.1), (571.6 * GB, 95.3)]
    arith_ok = all(abs(100 * bw / peak_claimed - pct) < 0.1 for bw, pct in pairs)
    above = any(bw > a10g.dram_bandwidth_bytes_per_s for bw, _ in pairs)
    gemm_flop = 2 * 8192 ** 3
    t_min = gemm_flop / a10g.bf16_dense_flop_per_s
    moved = pairs[0][0] * t_min
    compulsory = 3 * 8192 * 8192 * 2
    v = "above-peak" if above else ("self-contradictory" if not arith_ok else "plausible")
    why = (f"528.3/600 = {528.3 / 6:.2f} % and 571.6/600 = {571.6 / 6:.2f} % (" + ("arithmetic consistent" if arith_ok else "arithmetic wrong") + "), "
           + ("above" if above else "below") + f" the registry's {fmt(a10g.dram_bandwidth_bytes_per_s, 'B/s')}; public streaming kernels reach 85–93 % of "
           f"spec, so 95 % is optimistic. Note the test kernel is a GEMM with M = N = K = 8192: even at the A10G's "
           f"{fmt(a10g.bf16_dense_flop_per_s, 'FLOP/s')} peak it takes ≥ {fmt(t_min, 's')}, in which 528 GB/s moves "
           f"{fmt(moved, 'B')}, {moved / compulsory:.0f}× the {fmt(compulsory, 'B')} it must move — high DRAM "
           f"utilisation is a sign of poor tiling for a GEMM, not of success.")
    return ClaimCheck(
        "a10g.bandwidth_fractions", "A10G默认 600 528.3 88.1% / A10G启用L2预取 600 571.6 95.3%",
        "A10G: default 528.3 GB/s (88.1 %), with L2 prefetch 571.6 GB/s (95.3 %) of 600",
        "§2.5 (ROI带宽利用率对比)", a10g.name, "achieved DRAM bandwidth", "528.3 → 571.6 GB/s", v, why,
        Measure("bench", "ceiling.dram_copy_bandwidth", None, "copy bandwidth as a fraction of the spec"),
        details=tuple({"bandwidth_B_per_s": bw, "claimed_pct": pct, "pct_of_600": 100 * bw / peak_claimed,
                       "pct_of_registry": 100 * bw / a10g.dram_bandwidth_bytes_per_s} for bw, pct in pairs))


def _a10g_coalescing() -> ClaimCheck:
    a10g = get_gpu("A10G")
    before, after = 51.0, 92.0
    v = "above-peak" if after > 100 else "plausible"
    return ClaimCheck(
        "a10g.coalescing_utilisation", "GMEM Utilization 51% → 92%",
        "A coalescing rewrite raised global-memory utilisation from 51 % to 92 % on the A10G",
        "§4.4", a10g.name, "DRAM utilisation", "51 % → 92 %", v,
        ("both below 100 % and within what streaming kernels reach (85–93 % of spec); " if v == "plausible" else
         f"{after:g} % is above 100 % of the DRAM peak; ") + f"{after:g} % of the "
        f"registry's {fmt(a10g.dram_bandwidth_bytes_per_s, 'B/s')} would be "
        f"{fmt(after / 100 * a10g.dram_bandwidth_bytes_per_s, 'B/s')}.",
        Measure("bench", "ceiling.dram_copy_bandwidth", None, "copy bandwidth as a fraction of the spec"))


def _a10g_mma_sync() -> ClaimCheck:
    a10g = get_gpu("A10G")
    peak = a10g.bf16_dense_flop_per_s
    claims = [("CUTLASS GEMM", 68.0, 212.0), ("hand-written mma.sync", 93.0, 289.0)]
    implied = [tf * TFLOP / (pct / 100) for _, pct, tf in claims]
    nearest = _nearest_peak(sum(implied) / len(implied))
    worst = max(tf * TFLOP for *_, tf in claims)
    v = "above-peak" if worst > peak else "plausible"
    why = (f"289 TFLOP/s is {289 * TFLOP / peak:.1f}× and 212 is {212 * TFLOP / peak:.1f}× the A10G's ≈ "
           f"{fmt(peak, 'FLOP/s')} dense FP16/BF16 tensor peak (registry: {a10g.source_of('bf16_dense_flop_per_s')}); "
           f"the percentages imply a peak of {fmt(implied[0], 'FLOP/s')} and {fmt(implied[1], 'FLOP/s')}, which is "
           f"the {nearest.name}'s {fmt(nearest.bf16_dense_flop_per_s, 'FLOP/s')}: the figures were computed "
           f"against another GPU's peak.")
    return ClaimCheck(
        "a10g.mma_sync_tflops", "CUTLASS GEMM 68 212 / 手写MMA内联 93 289 (TC Util %, TFLOPS FP16)",
        "Hand-written mma.sync on the A10G: 93 % tensor-core use, 289 TFLOP/s, vs CUTLASS 68 %, 212 TFLOP/s",
        "§4.3", a10g.name, "FP16 tensor rate", "212 → 289 TFLOP/s", v, why,
        Measure("bench", "ceiling.bf16_matmul", None, "cuBLAS matmul rate on the user's GPU"),
        details=tuple({"kernel": k, "claimed_pct": pct, "claimed_flop_per_s": tf * TFLOP, "implied_peak": ip,
                       "x_registry_peak": tf * TFLOP / peak} for (k, pct, tf), ip in zip(claims, implied)))


# ------------------------------------------------------------------------------------------------
# Occupancy helper, bank rule, units, registers, ISA
# ------------------------------------------------------------------------------------------------

def _occupancy_helper() -> ClaimCheck:
    a10g = get_gpu("A10G")
    rows = []
    contradictions = []
    for row in HELPER_TABLE:
        helper_answers = {t: _helper(row["regs"], row["smem"], t) for t in range(32, 1025, 32)}
        if row["claimed_blocks"] not in helper_answers.values():
            answers = sorted({a for a in helper_answers.values() if isinstance(a, int)})
            errs = any(not isinstance(a, int) for a in helper_answers.values())
            contradictions.append(f"config {row['config']} ({row['regs']} regs, {row['smem']} B) claims "
                                  f"{row['claimed_blocks']} blocks/SM but the helper "
                                  + ("raises ZeroDivisionError (shared memory 0)" if errs and not answers else
                                     f"gives at most {max(answers)} for any block size"))
        for t in (32, 128, 256):
            real = occupancy(a10g, t, row["regs"], smem_static_bytes=row["smem"])
            rows.append({"config": row["config"], "regs_per_thread": row["regs"], "smem_per_block_B": row["smem"],
                         "threads_per_block": t, "claimed_blocks": row["claimed_blocks"],
                         "helper_blocks": helper_answers[t], "real_blocks": real.blocks_per_sm,
                         "real_occupancy_pct": real.occupancy_pct, "real_limiters": ", ".join(real.limiters)})
    wrong = [f"{k}={v} (A10G: {a})" for k, v, a in (
        ("max_threads_per_sm", HELPER_DEFAULTS["max_threads_per_sm"], a10g.max_threads_per_sm),
        ("total_shmem_per_sm", HELPER_DEFAULTS["total_shmem_per_sm"], a10g.smem_per_sm_bytes),
        ("max_blocks_per_sm", HELPER_DEFAULTS["max_blocks_per_sm"], a10g.max_blocks_per_sm),
        ("total_regs_per_sm", HELPER_DEFAULTS["total_regs_per_sm"], a10g.regs_per_sm)) if v != a]
    v = "self-contradictory" if contradictions else ("refuted" if wrong else "plausible")
    why = ("; ".join(contradictions) + ". " if contradictions else "") + (
        f"Its defaults are wrong for the A10G (CC {a10g.cc[0]}.{a10g.cc[1]}): {', '.join(wrong)}; it ignores the "
        f"256-register allocation granularity, the 128 B shared-memory granularity and the "
        f"{a10g.reserved_smem_per_block_bytes} B reserved per block. The real calculator (analyzers.occupancy) on "
        f"the A10G gives {rows[0]['real_blocks']} blocks for A and {rows[3]['real_blocks']} for B at 32 threads.")
    return ClaimCheck(
        "occupancy.helper_defaults", "calc_occupancy(…, max_threads_per_sm=1024, max_blocks_per_sm=32, "
        "total_regs_per_sm=65536, total_shmem_per_sm=49152) … 精确反映硬件资源竞争关系",
        "An occupancy helper whose defaults (1024 threads, 48 KiB shared memory, 32 blocks per SM) 'exactly "
        "reflect' the hardware, with a table of example configurations (A: 32 regs, 0 smem → 32 blocks; "
        "B: 64 regs, 16 KB → 16 blocks)",
        "§3.3", a10g.name, "blocks per SM", "A: 32, B: 16 blocks/SM", v, why,
        Measure("ncu", "launch__occupancy_limit_*", None, "Nsight Compute occupancy limits for such a kernel"),
        details=tuple(rows))


def _bank_rule() -> ClaimCheck:
    banks, word = 32, 4
    tile_w = (banks * word + 3) // word           # the seed's optimal_tile_w
    cond = (tile_w * word) % banks == 0           # the seed's condition
    row = bank_conflicts([i for i in range(32)], 4).degree            # lanes along a row
    col = bank_conflicts(column_read_addresses(tile_w), 4).degree    # lanes down a column
    col33 = bank_conflicts(column_read_addresses(tile_w + 1), 4).degree
    v = "refuted" if cond and col > 1 else "plausible"
    why = (f"the rule picks a tile width of {tile_w} floats because {tile_w}×4 B = {tile_w * word} is a multiple of "
           f"{banks} — bytes compared with a number of banks. The bank model gives: lanes along a row are "
           f"conflict-free for any width (degree {row:g}), but lanes down a column of a {tile_w}-word-wide tile "
           f"all hit one bank (degree {col:g}); padding rows to {tile_w + 1} words gives degree {col33:g}. The rule "
           f"recommends exactly the worst width for column access.")
    return ClaimCheck(
        "bank.tile_width_rule", "tile宽度需满足 (tile_width * sizeof(T)) % NUM_BANKS == 0 避免行内冲突 … → 32",
        "'tile width × sizeof(T) must be a multiple of the 32 banks to avoid conflicts' (→ width 32)",
        "§3.1", "any (32 banks × 4 B)", "bank-conflict degree", f"width {tile_w}: conflict-free", v, why,
        Measure("bench", "bank.column_read/degree", None, "stride sweep 1..64; ncu bank-conflict counters"),
        details=({"access": "row", "degree": row}, {"access": f"column, stride {tile_w}", "degree": col},
                 {"access": f"column, stride {tile_w + 1}", "degree": col33}))


def _bytes_per_request() -> ClaimCheck:
    sector, lanes = 32, 32
    before, after = 32.1, 127.8
    max_sectors = lanes                         # ≤ one sector per lane for accesses of ≤ 32 B
    ideal_4b, ideal_16b = lanes * 4, lanes * 16
    as_sectors_possible = after <= max_sectors
    v = "unit-error" if not as_sectors_possible or abs(after - ideal_4b) < 1 else "plausible"
    why = (f"ncu reports sectors per request; {after:g} sectors per request is impossible (a warp request "
           f"touches at most {max_sectors} sectors), so the column must be bytes per request. {after:g} B ≈ "
           f"{after / sector:.0f} sectors = {ideal_4b} B is the coalesced ideal for 4-byte loads, but the rewritten "
           f"kernel shown loads 16-byte float4 values, whose ideal is {ideal_16b} B = {ideal_16b // sector} sectors "
           f"per request; {before:g} B ≈ 1 sector. The units are mixed (sectors vs bytes, 4-byte vs 16-byte accesses).")
    return ClaimCheck(
        "ncu.bytes_per_request", "Avg. Bytes/Request 32.1 → 127.8",
        "Average bytes per request rose from 32.1 to 127.8 after the coalescing rewrite",
        "§4.4", "NVIDIA A10G", "bytes per memory request", "32.1 → 127.8", v, why,
        Measure("ncu", "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum / l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
                None, "sectors per request of a coalesced copy kernel (× 32 B for bytes)"))


def _register_file() -> ClaimCheck:
    a10g = get_gpu("A10G")
    sms, regs, warp_bytes = 60, 65536, 32 * 256
    total = sms * regs * 4
    warps = total // warp_bytes
    reg_total = a10g.sm_count * a10g.regs_per_sm * 4
    warps_by_regs = a10g.sm_count * (a10g.regs_per_sm * 4 // warp_bytes)
    resident = a10g.sm_count * a10g.max_warps_per_sm
    arith = abs(total / 1e6 - 15.7) < 0.1 and warps == 1920
    v = ("self-contradictory" if not arith else "refuted" if sms != a10g.sm_count else "plausible")
    why = (f"the arithmetic holds for 60 SMs ({sms} × {regs} × 4 B = {total / 1e6:.1f} MB; ÷ 8 KiB per warp = "
           f"{warps}), but the registry's A10G has {a10g.sm_count} SMs ({a10g.source_of('sm_count')}): "
           f"{reg_total / 1e6:.1f} MB of registers, {warps_by_regs} warps at 64 registers per thread, and at most "
           f"{resident} resident warps ({a10g.max_warps_per_sm} per SM).")
    return ClaimCheck(
        "a10g.register_file", "A10G基于GA102核心共配置60个SM … 15.7 MB … 理论最大warp数为1920",
        "A10G: 60 SMs × 65,536 registers = 15.7 MB; 8 KB per warp → at most 1920 warps",
        "§4.1", a10g.name, "SM count / register file", "60 SMs, 15.7 MB, 1920 warps", v, why,
        Measure("ncu", "device__attribute_multiprocessor_count", None, "SM count of the user's GPU"),
        details=({"source": "seed", "sm_count": sms, "register_bytes": total, "warps": warps},
                 {"source": "registry", "sm_count": a10g.sm_count, "register_bytes": reg_total,
                  "warps_at_64_regs": warps_by_regs, "max_resident_warps": resident}))


def _hopper_on_a10g() -> ClaimCheck:
    a10g = get_gpu("A10G")
    hopper = a10g.cc[0] == 9
    v = "plausible" if hopper else "refuted"
    return ClaimCheck(
        "a10g.hopper_mma", "该命令采集Hopper MMA指令吞吐与DRAM字节总量 (A10G压测)",
        "The ncu command on the A10G 'collects Hopper MMA instruction throughput'",
        "§2.5", a10g.name, "architecture", "Hopper", v,
        f"the registry's A10G is compute capability {a10g.cc[0]}.{a10g.cc[1]} (Ampere); Hopper is 9.0. The metric "
        f"sm__inst_executed_pipe_tensor_op_hmma counts Ampere tensor instructions on this GPU.",
        Measure("ncu", "device__attribute_compute_capability_major", None, "compute capability of the user's GPU"))


def _graph_solidification() -> ClaimCheck:
    return ClaimCheck(
        "graph.solidification_dispatch", "Node dispatch延迟(μs) 18.7 → 3.2 … torch._C._jit_pass_onnx_graph_shape_type_inference(y.graph) # 触发图固化",
        "'Graph solidification' by calling an ONNX shape-inference pass on y.graph cut node dispatch from 18.7 to "
        "3.2 µs and made launch intervals stable (≤ 1.1 ms)",
        "§2.1", "unspecified", "dispatch latency", "18.7 → 3.2 µs", "unverifiable",
        "the code calls a TorchScript/ONNX export pass on `y.graph` of an eager autograd tensor, which has no such "
        "graph; no case model or microbenchmark here measures 'node dispatch latency' of a mechanism that does not "
        "exist as described. Launch costs measured on real GPUs are a few µs per kernel (bench anchors: ≈ 2.5–5 µs), "
        "so a '≤ 1.1 ms' launch interval says nothing about dispatch either.",
        Measure("bench", "launch.overhead/empty_kernel_launch_time", None,
                "the nearest real quantity: launch cost per kernel"))


_CHECKS: tuple[Callable[[], ClaimCheck], ...] = (
    _triton_a100, _a10g_memory_spec, _a10g_bandwidth_fractions, _a10g_coalescing, _a10g_mma_sync,
    _occupancy_helper, _bank_rule, _bytes_per_request, _register_file, _hopper_on_a10g, _graph_solidification)


def claims(measured: Mapping[str, Measurement] | None = None) -> list[ClaimCheck]:
    """Every claim with its computed verdict; `measured` maps claim id -> a measurement on the user's GPU
    (from the microbenchmark the claim names), shown next to the claim."""
    out = []
    measured = dict(measured or {})
    for fn in _CHECKS:
        c = fn()
        m = measured.pop(c.id, None)
        if m is not None:
            note = (f"measured {fmt(*_base(m))} on {m.gpu or 'the user GPU'} ({m.source}); the claim says "
                    f"{c.claimed} on the {c.gpu}.")
            c = ClaimCheck(**{**c.__dict__, "measured": m, "measured_note": note})
        out.append(c)
    if measured:
        raise UnknownName("claim", ", ".join(measured), "known: " + ", ".join(c.id for c in out))
    return out


def _base(m: Measurement) -> tuple[Any, str]:
    return m.base()


#: the bench quantity a claim names (Measure.name) -> the `kernelscope bench` ceiling metric measuring it
CLAIM_CEILINGS = {"ceiling.bf16_matmul": "bf16_dense_flop_rate",
                  "ceiling.dram_copy_bandwidth": "dram_copy_bandwidth",
                  "launch.overhead/empty_kernel_launch_time": "launch_back_to_back"}


def claim_measurements(ceiling_records: list[dict]) -> dict[str, Measurement]:
    """{claim id: Measurement} for the claims whose check names a bench ceiling. `ceiling_records` are the
    ceiling records of the store's bench runs, newest run first, each a dict with run_id, gpu_name, metric, value,
    unit, params (JSON text), cv, source. A claim takes the newest run on its own GPU, else the newest on any GPU
    (the note then names that GPU); the method, run and cv go with it."""
    import json
    out = {}
    for c in (fn() for fn in _CHECKS):
        metric = CLAIM_CEILINGS.get(c.measurement.name) if c.measurement and c.measurement.kind == "bench" else None
        if metric is None:
            continue
        rows = [r for r in ceiling_records if r["metric"] == metric and r.get("value") is not None]
        rows.sort(key=lambda r: r.get("gpu_name") != c.gpu)           # stable: newest first within each group
        if not rows:
            continue
        r = rows[0]
        params = r.get("params")
        method = (json.loads(params) if isinstance(params, str) else params or {}).get("method")
        cv = r.get("cv")
        out[c.id] = Measurement(float(r["value"]), r["unit"],
                                f"kernelscope bench run {r['run_id']}, ceiling {metric}"
                                + (f" by {method}" if method else "") + f", {r.get('source') or 'event timing'}"
                                + (f", cv {100 * cv:.1f} %" if cv is not None else ""),
                                spread=float(r["value"]) * cv if cv is not None else None,
                                quantity=metric, gpu=r.get("gpu_name"))
    return out
