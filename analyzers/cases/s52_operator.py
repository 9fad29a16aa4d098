"""Section 5.2 — one operator: tiling, layout (bank conflicts), real traffic, splitting, numerics."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from analyzers.cases import numerics
from analyzers.cases.model import (MIB, Case, CaseError, Chart, Explanation, Figure, Measure, Param,
                                   ceil_div, check_tile, need, pred)
from analyzers.occupancy import occupancy

RTX_PRO = "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"
H200 = "NVIDIA H200"

CARVEOUT = Explanation("the driver chose a smaller shared-memory carve-out than the maximum the model assumes "
                       "(ncu: launch__shared_mem_config_size), so fewer blocks fit by shared memory", 0.0, 1.0)

BANKS = 32          # shared-memory banks of 4 bytes on every NVIDIA GPU since Maxwell
BANK_BYTES = 4


# ------------------------------------------------------------------------------------------------
# tiling.traffic — Example 5-3, Figures 5-8/5-9, Experiment 5-1
# ------------------------------------------------------------------------------------------------

def tile_smem_bytes(m: int, n: int, k: int, stage: int = 2, acc: int = 4) -> int:
    """On-chip need of an m×n output tile with K step k: S = stage·m·k (A) + stage·k·n (W) + acc·m·n."""
    return stage * m * k + stage * k * n + acc * m * n


def tile_traffic_bytes(M: int, K: int, N: int, m: int, n: int, elem: int = 2) -> int:
    """Traffic between the working buffer and the next level: V = e·MK·⌈N/n⌉ + e·KN·⌈M/m⌉ + e·MN."""
    return elem * M * K * ceil_div(N, n) + elem * K * N * ceil_div(M, m) + elem * M * N


def _tiling(p, gpu):
    e = p.elem
    a, w, c = e * p.M * p.K, e * p.K * p.N, e * p.M * p.N
    minimum = a + w + c
    V = tile_traffic_bytes(p.M, p.K, p.N, p.m, p.n, e)
    V_ref = tile_traffic_bytes(p.M, p.K, p.N, p.ref_m, p.ref_n, e)
    S = tile_smem_bytes(p.m, p.n, p.k, p.stage, p.acc)
    occ = occupancy(gpu, p.threads, p.regs, smem_dynamic_bytes=S)
    bw = need(gpu, "dram_bandwidth_bytes_per_s")
    peak = need(gpu, "bf16_dense_flop_per_s")
    flop = 2 * p.M * p.N * p.K
    reads = V - c
    l2 = gpu.l2_bytes or 0
    l1_hits = Explanation("part of the tile loads hit in L1 (the kernel's global loads are cached there), so "
                          "fewer sectors reach L2 than the model's V", 0.5, 1.0)
    l2_absorbs = Explanation(f"the L2 ({l2 / MIB:.0f} MiB) absorbs re-reads of A and W tiles, so DRAM sees "
                             f"between the compulsory {(a + w) / MIB:.0f} MiB and the model's V",
                             (a + w) / reads * 0.98, 1.0)
    warm = Explanation("below even the compulsory reads of A and W: inputs were already in L2 from an earlier "
                       "kernel (a warm cache, or ncu --cache-control none)", 0.0, (a + w) / reads)
    return [
        pred("a_bytes", "A (M×K)", a, "B", "e·M·K", kind="exact", rel_tol=0),
        pred("w_bytes", "W (K×N)", w, "B", "e·K·N", kind="exact", rel_tol=0),
        pred("c_bytes", "C (M×N)", c, "B", "e·M·N", kind="exact", rel_tol=0),
        pred("min_traffic", "minimum traffic (each matrix once)", minimum, "B", "A + W + C", kind="exact",
             rel_tol=0),
        pred("flop", "FLOPs", flop, "FLOP", "2·M·N·K", kind="exact", rel_tol=0),
        pred("smem_per_block", "on-chip need S", S, "B", "2mk + 2kn + 4mn", kind="exact", rel_tol=0),
        pred("smem_alloc_per_block", "S + reserved, in 128 B granules", occ.smem_per_block_alloc_bytes, "B",
             "roundup(S + reserved, 128)", kind="exact", rel_tol=0),
        pred("traffic", "traffic V between working buffer and next level", V, "B",
             "2MK·(N/n) + 2KN·(M/m) + 2MN", kind="exact", rel_tol=0.02),
        pred("traffic_vs_min", "V ÷ minimum", V / minimum, "×", "V / (A + W + C)"),
        pred("l2_read_bytes", "reads reaching L2 from L1 (V minus C writes)", reads, "B",
             "2MK·(N/n) + 2KN·(M/m)", rel_tol=0.10, explanations=(l1_hits,)),
        pred("dram_read_bytes", "DRAM reads if nothing is re-used from L2", reads, "B",
             "2MK·(N/n) + 2KN·(M/m)", rel_tol=0.10, explanations=(l2_absorbs, warm)),
        pred("a_reads", "times A is read", ceil_div(p.N, p.n), "count", "N/n", kind="exact", rel_tol=0),
        pred("w_reads", "times W is read", ceil_div(p.M, p.m), "count", "M/m", kind="exact", rel_tol=0),
        pred("blocks_by_smem", "resident blocks allowed by shared memory", occ.limits["shared_mem"], "count",
             "floor(smem per SM ÷ (S + reserved))", kind="exact", rel_tol=0, explanations=(CARVEOUT,)),
        pred("resident_blocks", "resident blocks (threads, registers, shared memory)", occ.blocks_per_sm, "count",
             "occupancy calculator", kind="exact", rel_tol=0),
        pred("occupancy", "theoretical occupancy", occ.occupancy_pct, "%", "resident warps ÷ max warps",
             kind="exact", rel_tol=0.005, max_physical=100.0, physical="100 %", explanations=(CARVEOUT,)),
        pred("bandwidth_fraction_needed", f"achieved bandwidth needed vs a {p.ref_m}×{p.ref_n} tile to be faster",
             100 * V / V_ref, "%", "V / V_ref (T/T_ref = (V/V_ref)·(B_ref/B))"),
        pred("time", "time lower bound", max(minimum / bw, flop / peak), "s",
             "max(minimum traffic / DRAM BW, FLOPs / BF16 peak)", kind="lower_bound"),
        pred("traffic_time", "time if all of V came from DRAM", V / bw, "s", "V / DRAM BW", kind="info"),
    ]


def _tiling_validate(p, gpu):
    check_tile(p.m, "m", p.M, "M")
    check_tile(p.n, "n", p.N, "N")
    check_tile(p.k, "k", p.K, "K")
    check_tile(p.ref_m, "ref_m", p.M, "M")
    check_tile(p.ref_n, "ref_n", p.N, "N")
    if p.threads > 1024:
        raise CaseError(f"threads={p.threads}: a block has at most 1024 threads")


_TILE_PARAMS = (
    Param("M", "count", 1024, "rows of A and C (tokens)", type="int", positive=True),
    Param("K", "count", 4096, "reduction length (hidden H)", type="int", positive=True),
    Param("N", "count", 12288, "columns of W and C (intermediate F)", type="int", positive=True),
    Param("m", "count", 64, "output tile rows", type="int", positive=True),
    Param("n", "count", 64, "output tile columns", type="int", positive=True),
    Param("k", "count", 32, "K step", type="int", positive=True),
    Param("elem", "B", 2, "bytes per element in memory (BF16)", type="int", positive=True),
    Param("stage", "B", 2, "bytes per A/W element staged on chip (the microbenchmark kernel stages FP32: 4)",
          type="int", positive=True),
    Param("acc", "B", 4, "bytes per accumulator element on chip (0 = accumulator in registers)", type="int", min=0),
    Param("threads", "count", 256, "threads per block", type="int", positive=True, from_chapter=False),
    Param("regs", "count", 32, "registers per thread (the chapter gives none)", type="int", min=0, max=255,
          from_chapter=False),
    Param("ref_m", "count", 64, "reference tile rows (for the bandwidth comparison)", type="int", positive=True),
    Param("ref_n", "count", 64, "reference tile columns", type="int", positive=True),
)

TILING = Case(
    id="tiling.traffic", title="Tiling C = A·W: on-chip need, traffic and residency",
    section="5.2 · Example 5-3, Figures 5-8/5-9, Experiment 5-1",
    summary=("C = A·W with M = 1024, K = 4096, N = 12288 (8, 96 and 24 MiB in BF16, 128 MiB minimum). An m×n "
             "output tile with K step k needs S = 2mk + 2kn + 4mn bytes on chip and causes V = 2MK·(N/n) + "
             "2KN·(M/m) + 2MN bytes between the working buffer and the next level: 3096 MiB for 64×64, 1560 "
             "for 128×128. Bigger tiles need more shared memory, so fewer blocks are resident (25 KiB → 4 "
             "blocks vs 81 KiB → 1 on an RTX PRO 6000 SM), fewer requests are in flight and the achieved "
             "bandwidth falls: half the traffic can be slower (T128/T64 = (1560/3096)·(B64/B128))."),
    params=_TILE_PARAMS,
    model=_tiling, validate=_tiling_validate,
    figures=(
        Figure("A 8 MiB (BF16)", 8, "MiB", key="a_bytes"),
        Figure("W 96 MiB", 96, "MiB", key="w_bytes"),
        Figure("C 24 MiB", 24, "MiB", key="c_bytes"),
        Figure("three matrices read/written once: 128 MiB", 128, "MiB", key="min_traffic"),
        Figure("103 GFLOPs", 103, "GFLOP", key="flop", tol=0.005),
        Figure("64×64 tiles: 3096 MiB", 3096, "MiB", key="traffic"),
        Figure("≈ 24× the minimum", 24, "×", key="traffic_vs_min", tol=0.02),
        Figure("128×128 tiles: 1560 MiB", 1560, "MiB", key="traffic", params={"m": 128, "n": 128}),
        Figure("RTX PRO 6000: a 64×64 block needs 25 KiB (with 1 KiB reserved)", 25, "KiB",
               key="smem_alloc_per_block", gpu=RTX_PRO),
        Figure("… 4 resident", 4, "count", key="blocks_by_smem", gpu=RTX_PRO),
        Figure("RTX PRO 6000: a 128×128 block needs 81 KiB", 81, "KiB", key="smem_alloc_per_block", gpu=RTX_PRO,
               params={"m": 128, "n": 128}),
        Figure("… 1 resident", 1, "count", key="blocks_by_smem", gpu=RTX_PRO, params={"m": 128, "n": 128}),
        Figure("Experiment 5-1: 64×128 needs S = 44 KiB", 44, "KiB", key="smem_per_block", params={"n": 128}),
        Figure("… +1 KiB → 2 resident", 2, "count", key="blocks_by_smem", gpu=RTX_PRO, params={"n": 128}),
        Figure("… V = 2328 MiB", 2328, "MiB", key="traffic", params={"n": 128}),
        Figure("… faster than 64×64 only at ≥ 75.2 % of its achieved bandwidth", 75.2, "%",
               key="bandwidth_fraction_needed", params={"n": 128}, tol=0.001),
    ),
    measurements=(
        Measure("ncu", "lts__t_sectors_srcunit_tex_op_read.sum", "l2_read_bytes",
                "L2 read sectors requested by L1 × 32 B: the model's V without the C writes", factor=32.0),
        Measure("ncu", "dram__bytes_read.sum", "dram_read_bytes", "DRAM reads (much lower: L2 absorbs re-reads)"),
        Measure("ncu", "launch__occupancy_limit_shared_mem", "blocks_by_smem",
                "set stage=4, acc=0 for the microbenchmark kernel (FP32 staging, accumulator in registers)"),
        Measure("ncu", "sm__maximum_warps_per_active_cycle_pct", "occupancy", "theoretical occupancy"),
        Measure("bench", "tiling.traffic/time", "time", "tiled matmul 64×64, 64×128, 128×128 (k = 32)"),
    ),
    default_gpu=RTX_PRO,
    chart=Chart("m", (16, 32, 64, 128, 256), ("traffic", "min_traffic"), link=("n",),
                title="traffic vs square tile size", log_x=True),
)


# ------------------------------------------------------------------------------------------------
# bank.column_read — Figure 5-10
# ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class BankResult:
    degree: float        # wavefronts ÷ ideal wavefronts (1 = conflict-free)
    wavefronts: int      # shared-memory passes for one warp request
    phases: int          # ideal wavefronts (1 for 4-byte, 2 for 8-byte, 4 for 16-byte accesses)

    @property
    def conflicts(self) -> int:
        return self.wavefronts - self.phases


def bank_conflicts(word_addresses: Sequence[int | None], width: int = 4, banks: int | None = None) -> BankResult:
    """Conflict degree of one warp access. `word_addresses[lane]` is the first 4-byte word the lane reads
    (None: inactive lane); each lane reads width/4 consecutive words. 8- and 16-byte accesses are served
    in 2 / 4 phases of 16 / 8 lanes. In each phase a bank serves one distinct word per pass (lanes
    reading the same word share it), so passes = max over banks of the distinct words in that bank."""
    banks = BANKS if banks is None else banks
    if width not in (4, 8, 16):
        raise CaseError(f"width={width}: shared-memory accesses are 4, 8 or 16 bytes")
    words = width // BANK_BYTES
    per_phase = 32 // words
    wavefronts = phases = 0
    lanes = list(word_addresses)
    for start in range(0, len(lanes), per_phase):
        group = [a for a in lanes[start:start + per_phase] if a is not None]
        if not group:
            continue
        by_bank: dict[int, set[int]] = {}
        for a in group:
            for j in range(words):
                by_bank.setdefault((a + j) % banks, set()).add(a + j)
        phases += 1
        wavefronts += max(len(s) for s in by_bank.values())
    if phases == 0:
        raise CaseError("no active lanes")
    return BankResult(wavefronts / phases, wavefronts, phases)


def column_read_addresses(stride: int, width: int = 4, lanes: int = 32) -> list[int]:
    """Lane i reads the element at word i·stride (a column of a tile whose rows are `stride` words)."""
    return [i * stride for i in range(lanes)]


def _bank(p, gpu):
    r = bank_conflicts(column_read_addresses(p.stride, p.width), p.width)
    vw = p.width // BANK_BYTES
    pad = next(s for s in range(p.stride, p.stride + 64 * vw + 1, vw)
               if bank_conflicts(column_read_addresses(s, p.width), p.width).degree == 1)
    return [
        pred("degree", "bank-conflict degree", r.degree, "way",
             "max distinct words per bank (4-byte: gcd(stride, 32))", kind="exact", rel_tol=0.02),
        pred("wavefronts", "shared-memory passes per warp request", r.wavefronts, "count", "Σ over phases",
             kind="exact", rel_tol=0.02),
        pred("ideal_wavefronts", "passes without conflicts", r.phases, "count", "width/4 phases", kind="exact",
             rel_tol=0),
        pred("conflicts", "extra passes (ncu 'bank conflicts') per request", r.conflicts, "count",
             "wavefronts − ideal", kind="exact", rel_tol=0.02),
        pred("time_ratio_vs_free", "slowdown vs a conflict-free read (if shared memory is the bottleneck)",
             r.degree, "×", "= degree", kind="upper_bound", rel_tol=0.05,
             explanations=()),
        pred("smem_bytes_per_clk", "useful shared-memory bytes per clock per SM", 128 / r.degree, "B",
             "128 B/clk ÷ degree", kind="info"),
        pred("conflict_free_stride", "next conflict-free stride (padding)", pad, "count",
             "smallest stride ≥ this one with degree 1", kind="info"),
    ]


def _bank_validate(p, gpu):
    vw = p.width // BANK_BYTES
    if p.stride % vw:
        raise CaseError(f"stride={p.stride}: a {p.width}-byte access needs a stride that is a multiple of "
                        f"{vw} words (alignment)")


BANK = Case(
    id="bank.column_read", title="Bank conflicts reading a column of a 32×32 tile", section="5.2 · Figure 5-10",
    summary=("Shared memory has 32 banks of 4 bytes; bank = word address mod 32. A warp reading one column of "
             "a 32×32 FP32 tile with row stride 32 words sends all 32 lanes to one bank: 32 serialised passes. "
             "Padding each row to 33 words spreads them over the 32 banks (1 pass). For 4-byte words and lane "
             "i reading word i·s the degree is gcd(s, 32); 8/16-byte accesses are split into 2/4 phases. The "
             "bulk copy engine (TMA) cannot pad rows, so it swizzles addresses instead. Same on every NVIDIA "
             "GPU in the registry (32 banks × 4 B)."),
    params=(
        Param("stride", "count", 32, "row stride in 4-byte words", type="int", positive=True, max=4096),
        Param("width", "B", 4, "bytes per access", type="choice", choices=(4, 8, 16)),
    ),
    model=_bank, validate=_bank_validate,
    figures=(
        Figure("row stride 32: all 32 lanes in one bank, 32 passes", 32, "way", key="degree"),
        Figure("padding rows to 33 words: 1 pass", 1, "way", key="degree", params={"stride": 33}),
        Figure("stride 2 → 2-way", 2, "way", key="degree", params={"stride": 2},
               source="reference note (chapter5-cases.md)"),
        Figure("stride 16 → 16-way", 16, "way", key="degree", params={"stride": 16},
               source="reference note (chapter5-cases.md)"),
    ),
    measurements=(
        Measure("ncu", "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum ÷ (… − "
                "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum)", "degree",
                "degree = wavefronts ÷ (wavefronts − conflicts); analyzers.kernels.conflict_degree"),
        Measure("bench", "bank.column_read/time_ratio", "time_ratio_vs_free",
                "time at this stride ÷ time at a conflict-free stride (sweep 1..64, 4/8/16-byte)"),
    ),
    chart=Chart("stride", tuple(range(1, 65)), ("degree",), title="conflict degree vs row stride", mark="bar"),
)


# ------------------------------------------------------------------------------------------------
# transpose.tile — Section 5.4 "measurement overturns intuition"
# ------------------------------------------------------------------------------------------------

def transpose_read_degree(t: int, pad: int) -> BankResult:
    """Warp 0 of a t×t block reading tile[tx][ty] (the transposed read) from a [t][t+pad] FP32 tile."""
    lanes = []
    for lane in range(min(32, t * t)):
        tx, ty = lane % t, lane // t
        lanes.append(tx * (t + pad) + ty)
    return bank_conflicts(lanes, 4)


def _transpose(p, gpu):
    bw = need(gpu, "dram_bandwidth_bytes_per_s")
    rd = transpose_read_degree(p.t, p.pad)
    smem = p.t * (p.t + p.pad) * 4
    traffic = 2 * p.n * p.n * 4
    occ = occupancy(gpu, p.t * p.t, 16, smem_static_bytes=smem)
    return [
        pred("read_degree", "conflict degree of the transposed shared-memory read", rd.degree, "way",
             "bank model on warp 0", kind="exact", rel_tol=0.10),
        pred("smem_per_block", "shared memory per block", smem, "B", "t·(t+pad)·4", kind="exact", rel_tol=0),
        pred("threads_per_block", "threads per block", p.t * p.t, "count", "t²", kind="exact", rel_tol=0),
        pred("resident_blocks", "resident blocks per SM (16 registers/thread)", occ.blocks_per_sm, "count",
             "occupancy calculator", kind="exact", rel_tol=0),
        pred("dram_traffic", "DRAM traffic (read + write once)", traffic, "B", "2·n²·4", rel_tol=0.05),
        pred("time", "time lower bound at DRAM peak", traffic / bw, "s", "2·n²·4 / BW", kind="lower_bound"),
    ]


def _transpose_validate(p, gpu):
    check_tile(p.t, "t", p.n, "n")


TRANSPOSE = Case(
    id="transpose.tile", title="Transpose: 16×16 vs 32×32 tiles, padded or not", section="5.4 (measurement)",
    summary=("The companion transpose on an RTX PRO 6000 took 7.9 µs with 16×16 blocks and 2.9 µs with 32×32 "
             "(2.7×): measurement overturns intuition. Both read and write every element once; what differs is "
             "the shared-memory transposed read (a 32-wide tile sends a warp's column to one bank unless rows "
             "are padded), the block size and the resident blocks. The chapter does not give the matrix size."),
    params=(
        Param("n", "count", 8192, "matrix side (FP32; the chapter gives none, the H200 sample uses 8192)",
              type="int", positive=True, from_chapter=False),
        Param("t", "count", 32, "tile side (block = t×t threads)", type="choice", choices=(8, 16, 32)),
        Param("pad", "count", 0, "padding words per tile row", type="int", min=0, max=32),
    ),
    model=_transpose, validate=_transpose_validate,
    figures=(
        Figure("RTX PRO 6000: 16×16 blocks 7.9 µs", 7.9, "µs", gpu=RTX_PRO, measured=True, params={"t": 16}),
        Figure("RTX PRO 6000: 32×32 blocks 2.9 µs", 2.9, "µs", gpu=RTX_PRO, measured=True),
        Figure("… 2.7× faster", 2.7, "×", gpu=RTX_PRO, measured=True),
    ),
    measurements=(
        Measure("ncu", "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum", "read_degree",
                "degree = wavefronts ÷ (wavefronts − conflicts)"),
        Measure("ncu", "dram__bytes_read.sum + dram__bytes_write.sum", "dram_traffic", "DRAM bytes"),
        Measure("bench", "transpose.tile/time", "time", "16×16 / 32×32, padded or not"),
    ),
    default_gpu=RTX_PRO,
    chart=Chart("t", (8, 16, 32), ("read_degree",), title="transposed-read conflict degree vs tile", mark="bar"),
)


# ------------------------------------------------------------------------------------------------
# rmsnorm.split — Figure 5-11
# ------------------------------------------------------------------------------------------------

def _rmsnorm(p, gpu):
    bw = need(gpu, "dram_bandwidth_bytes_per_s")
    tasks = p.rows * p.s
    x = p.rows * p.hidden * p.elem
    base = 2 * x                                          # read x, write y
    extra = (x + 2 * p.rows * p.s * p.partial) if p.s > 1 else 0
    return [
        pred("tasks", "parallel tasks", tasks, "count", "rows × s", kind="exact", rel_tol=0),
        pred("sm_fill", "SMs with work (one task per SM at a time)", 100 * min(tasks, gpu.sm_count) / gpu.sm_count,
             "%", "min(tasks, SMs) / SMs", max_physical=100.0, physical="100 %"),
        pred("elements_per_task", "elements per task", ceil_div(p.hidden, p.s), "count", "hidden / s",
             kind="exact", rel_tol=0),
        pred("traffic", "DRAM traffic", base + extra, "B",
             "read + write (+ a second read and the partial sums when s > 1)", rel_tol=0.1),
        pred("extra_traffic", "extra traffic from splitting", extra, "B", "one more read + 2·rows·s·4 B",
             kind="exact", rel_tol=0.1),
        pred("time", "time lower bound at DRAM peak", (base + extra) / bw, "s", "traffic / BW",
             kind="lower_bound"),
    ]


def _rmsnorm_validate(p, gpu):
    if p.s > p.hidden:
        raise CaseError(f"s={p.s} segments is more than the row length (hidden={p.hidden})")


RMSNORM = Case(
    id="rmsnorm.split", title="RMSNorm: splitting a row into segments", section="5.2 · Figure 5-11",
    summary=("RMSNorm first reduces each row (sum of squares), then scales it. One task per row gives 1024 "
             "tasks at M = 1024 but 1 task in decode (1 row), leaving the GPU idle. Splitting each row into s "
             "segments makes rows × s tasks at the price of partial sums, a merge and a second read of the "
             "input to scale it."),
    params=(
        Param("rows", "count", 1024, "rows (tokens)", type="int", positive=True),
        Param("hidden", "count", 4096, "row length", type="int", positive=True),
        Param("s", "count", 1, "segments per row", type="int", positive=True),
        Param("elem", "B", 2, "bytes per element (BF16)", type="int", positive=True),
        Param("partial", "B", 4, "bytes per partial sum (FP32)", type="int", positive=True),
    ),
    model=_rmsnorm, validate=_rmsnorm_validate,
    figures=(
        Figure("1024 rows: one task per row = 1024 tasks", 1024, "count", key="tasks"),
        Figure("decode (1 row): 1 task", 1, "count", key="tasks", params={"rows": 1}),
    ),
    measurements=(
        Measure("bench", "rmsnorm.split/time", "time", "rows × segments sweep"),
    ),
    chart=Chart("s", (1, 2, 4, 8, 16, 32, 64, 128, 256), ("sm_fill",), title="SMs with work vs segments per row",
                log_x=True),
)


# ------------------------------------------------------------------------------------------------
# fp.non_associativity — Figure 5-13 (runs on the CPU)
# ------------------------------------------------------------------------------------------------

def _fp(p, gpu):
    na = numerics.non_associativity()
    errs = numerics.segment_sum_ulp(p.rows, p.length, (1, p.segments), p.seed)
    st = {s.segments: s for s in numerics.ulp_stats(errs)}
    one, seg = st[1], st[p.segments]
    better = 100.0 * float((abs(errs[p.segments]) < abs(errs[1])).mean())
    return [
        pred("left", "(1 + 2⁻²⁴) + 2⁻²⁴ in FP32", na["left"], "", "numpy float32", kind="exact", rel_tol=0),
        pred("right", "1 + (2⁻²⁴ + 2⁻²⁴) in FP32", na["right"], "", "numpy float32 = 1 + 2⁻²³", kind="exact",
             rel_tol=0),
        pred("ulp_one_segment", "ULP error, 1 segment (median; range = 1st–99th percentile)", one.median, "ULP",
             f"{p.rows} random rows vs float64", kind="range", lo=one.p1, hi=one.p99),
        pred("ulp_segments", f"ULP error, {p.segments} segments (median; range = 1st–99th percentile)",
             seg.median, "ULP", f"{p.rows} random rows vs float64", kind="range", lo=seg.p1, hi=seg.p99),
        pred("median_abs_one_segment", "median |error|, 1 segment", one.median_abs, "ULP", "", kind="info"),
        pred("median_abs_segments", f"median |error|, {p.segments} segments", seg.median_abs, "ULP", "",
             kind="info"),
        pred("rows_better_with_segments", f"rows where {p.segments} segments beat 1", better, "%", "", kind="info"),
    ]


def _fp_tables(p, gpu):
    counts = sorted({1, 2, 4, 8, 16, 32, 64, p.segments} & set(range(1, p.length + 1)))
    errs = numerics.segment_sum_ulp(p.rows, p.length, counts, p.seed)
    return {"ulp_by_segments": [s.to_row() for s in numerics.ulp_stats(errs)]}


def _fp_chart(p, gpu):
    counts = [s for s in range(1, 65) if s <= p.length]
    errs = numerics.segment_sum_ulp(p.rows, p.length, counts, p.seed)
    rows = []
    for s in numerics.ulp_stats(errs):
        for series, v in (("median", s.median), ("5th percentile", s.p5), ("95th percentile", s.p95)):
            rows.append({"x": s.segments, "series": series, "value": v, "unit": "ULP"})
    return rows


def _fp_validate(p, gpu):
    if p.segments > p.length:
        raise CaseError(f"segments={p.segments} is more than the row length ({p.length})")


FP = Case(
    id="fp.non_associativity", title="Floating-point addition is not associative", section="5.2 · Figure 5-13",
    summary=("In FP32, (1 + 2⁻²⁴) + 2⁻²⁴ = 1 but 1 + (2⁻²⁴ + 2⁻²⁴) = 1 + 2⁻²³. Summing the squares of a row of "
             "4096 BF16 values in FP32 with 1 or 8 segments gives different errors against a float64 "
             "reference (the chapter's row: −175.2 and −9.2 ULP). Here many random rows run for real with "
             "numpy and the error is reported as a distribution. Atomic accumulation makes the order run-"
             "dependent; a fixed-order reduction is deterministic; segment counts that change with the batch "
             "size make the same row give different results in different batches."),
    params=(
        Param("rows", "count", 200, "random rows", type="int", min=1, max=20000, from_chapter=False),
        Param("length", "count", 4096, "row length", type="int", min=1, max=1 << 16),
        Param("segments", "count", 8, "segments to compare with 1", type="int", min=1),
        Param("seed", "count", 0, "random seed", type="int", min=0, from_chapter=False),
    ),
    model=_fp, validate=_fp_validate, tables=_fp_tables, chart_data=_fp_chart,
    figures=(
        Figure("FP32: (1 + 2⁻²⁴) + 2⁻²⁴ = 1", 1.0, "", key="left", tol=0),
        Figure("FP32: 1 + (2⁻²⁴ + 2⁻²⁴) = 1 + 2⁻²³", 1.0 + 2.0 ** -23, "", key="right", tol=0),
        Figure("the chapter's row: 1 segment −175.2 ULP", -175.2, "ULP", key="ulp_one_segment", measured=True),
        Figure("the chapter's row: 8 segments −9.2 ULP", -9.2, "ULP", key="ulp_segments", measured=True),
    ),
    measurements=(
        Measure("bench", "numerics (CPU): analyzers.cases.numerics.segment_sum_ulp", "ulp_segments",
                "runs here with numpy; a GPU reduction kernel can be compared the same way"),
    ),
    chart=None,
)

CASES = (TILING, BANK, TRANSPOSE, RMSNORM, FP)
