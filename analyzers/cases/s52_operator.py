"""Section 5.2 — one operator: tiling, layout (bank conflicts), real traffic, splitting, numerics."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import math

from analyzers.cases import numerics
from analyzers.cases.model import (
    US,
    Case,
    CaseError,
    Chart,
    Figure,
    Mechanism,
    Measure,
    Param,
    Term,
    ceil_div,
    check_tile,
    need,
    pred,
)
from analyzers.cases.s51_submission import carveout_mechanism
from analyzers.cases.timemodel import (
    L2_LATENCY_NS,
    lifetime_time,
    p_dram,
    p_fp32,
    p_kernel_floor,
    p_l2,
    p_latency,
    p_tensor,
    src,
    stream_time,
    time_estimate,
    waves,
)
from analyzers.occupancy import occupancy

RTX_PRO = "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"
H200 = "NVIDIA H200"

BANKS = 32  # shared-memory banks of 4 bytes on every NVIDIA GPU since Maxwell
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


def issue_factor(tm: int, tn: int) -> float:
    """Share of a CUDA-core matmul's instructions that are FMAs when each thread computes a tm×tn
    patch: per K step it loads tm + tn operands from shared memory and does tm·tn FMAs (1 when tm or
    tn is 0: not modelled)."""
    return tm * tn / (tm * tn + tm + tn) if tm and tn else 1.0


def tile_time(
    p, gpu, m: int, n: int, regs: int | None = None, tm: int | None = None, tn: int | None = None
) -> tuple[float, list[Term], dict]:
    """Predicted time of the tiled matmul with m×n output tiles: t_kernel + the largest of
    - compute: FLOP / (tensor rate, or FP32 rate × the FMA share of the instructions) / the waves'
      fill;
    - L2 traffic: the reads of V (A and W tiles) / L2 bandwidth / fill;
    - DRAM: the compulsory bytes / DRAM bandwidth / fill;
    - latency: each block's K steps wait for their tile loads (L2 latency) and then compute;
      `resident` blocks per
      SM overlap (Little's law): ceil(blocks / SMs) × steps × (L2 latency + compute per step) /
      resident.
    Returns (time, terms, facts)."""
    e = p.elem
    reads = e * p.M * p.K * ceil_div(p.N, n) + e * p.K * p.N * ceil_div(p.M, m)
    compulsory = e * (p.M * p.K + p.K * p.N + p.M * p.N)
    S = tile_smem_bytes(m, n, p.k, p.stage, p.acc)
    occ = occupancy(gpu, p.threads, p.regs if regs is None else regs, smem_dynamic_bytes=S)
    R = occ.blocks_per_sm
    blocks = ceil_div(p.M, m) * ceil_div(p.N, n)
    w = waves(blocks, gpu.sm_count, R)
    flop = 2 * p.M * p.N * p.K
    if p.engine == "tensor":
        rate, rate_src, rate_txt = p.tensor * 1e12, src(p, "tensor"), "tensor rate"
    else:
        tm, tn = (p.tm if tm is None else tm), (p.tn if tn is None else tn)
        f = issue_factor(tm, tn)
        rate, rate_src = (
            p.fp32 * 1e12 * f,
            src(p, "fp32") + f"; FMA share {f:.3f} of a {tm}×{tn} thread patch",
        )
        rate_txt = "FP32 rate × FMA share"
    steps = ceil_div(p.K, p.k)
    t_c_step = 2 * m * n * p.k / (rate / gpu.sm_count)
    lat = p.l2_latency * 1e-9
    t_comp = flop / rate / w.fill
    t_l2 = reads / (p.l2bw * 1e9) / w.fill
    t_dram = compulsory / (p.bw * 1e9) / w.fill
    t_lat = lifetime_time(blocks, gpu.sm_count, R, steps * (lat + t_c_step)) if R else math.inf
    body = max(t_comp, t_l2, t_dram, t_lat)
    terms = [
        Term("kernel floor", p.t_kernel * US, "s", "t_kernel", src(p, "t_kernel")),
        Term("compute", t_comp, "s", f"FLOP / {rate_txt} / fill", rate_src),
        Term("L2 traffic", t_l2, "s", "V reads / L2 bandwidth / fill", src(p, "l2bw")),
        Term("DRAM", t_dram, "s", "compulsory bytes / DRAM bandwidth / fill", src(p, "bw")),
        Term(
            "latency (Little's law)",
            t_lat,
            "s",
            f"ceil(blocks/SMs) × {steps} steps × (L2 latency + compute per step) / {R} resident",
            src(p, "l2_latency") + f"; {w.text} (occupancy calculator: {R} blocks/SM)",
        ),
    ]
    return (
        p.t_kernel * US + body,
        terms,
        {
            "resident": R,
            "waves": w,
            "reads": reads,
            "steps": steps,
            "t_c_step": t_c_step,
            "rate": rate,
        },
    )


def _tiling(p, gpu):
    e = p.elem
    a, w, c = e * p.M * p.K, e * p.K * p.N, e * p.M * p.N
    minimum = a + w + c
    V = tile_traffic_bytes(p.M, p.K, p.N, p.m, p.n, e)
    V_ref = tile_traffic_bytes(p.M, p.K, p.N, p.ref_m, p.ref_n, e)
    S = tile_smem_bytes(p.m, p.n, p.k, p.stage, p.acc)
    occ = occupancy(gpu, p.threads, p.regs, smem_dynamic_bytes=S)
    bw = need(gpu, "dram_bandwidth_bytes_per_s")
    peak = need(gpu, "bf16_dense_flop_per_s" if p.engine == "tensor" else "fp32_flop_per_s")
    flop = 2 * p.M * p.N * p.K
    reads = V - c
    t, terms, facts = tile_time(p, gpu, p.m, p.n)
    t_ref, _, _ = tile_time(
        p,
        gpu,
        p.ref_m,
        p.ref_n,
        regs=p.ref_regs or None,
        tm=p.ref_tm if p.ref_tm else None,
        tn=p.ref_tn if p.ref_tn else None,
    )
    carve = lambda what: (carveout_mechanism(gpu, p.threads, p.regs, 0, S, what),)  # noqa: E731
    l1 = Mechanism(
        "L1 hits (the tile loads that hit in L1 never reach L2)",
        ("l1_hit_rate",),
        lambda cn: reads * (1 - cn["l1_hit_rate"] / 100),
        tol=0.10,
        why="L2 reads = the model's reads × the measured L1 miss rate",
    )

    def issue_time(cn):
        return p.t_kernel * US + cn["warp_instructions"] / (4 * gpu.sm_count * cn["sm_clock"])

    def l2_time(cn):
        return p.t_kernel * US + max(
            cn["l2_read_from_l1_bytes"] / (p.l2bw * 1e9) / facts["waves"].fill, t - p.t_kernel * US
        )

    def achieved_time(cn):
        R = cn["achieved_occupancy"] / 100 * gpu.max_warps_per_sm / occ.warps_per_block
        lat = facts["steps"] * (p.l2_latency * 1e-9 + facts["t_c_step"])
        return p.t_kernel * US + max(
            t - p.t_kernel * US,
            lifetime_time(facts["waves"].blocks, gpu.sm_count, 1, lat) / max(R, 1e-9),
        )

    time_mechs = (
        Mechanism(
            "instruction issue (the kernel's executed warp instructions at one per scheduler "
            "per cycle)",
            ("warp_instructions", "sm_clock"),
            issue_time,
            tol=0.15,
            why="4 schedulers per SM issue one warp instruction per cycle each",
        ),
        Mechanism(
            "the measured L2←L1 traffic at the L2 bandwidth",
            ("l2_read_from_l1_bytes",),
            l2_time,
            tol=0.15,
            why="the model's L2 term with the counted sectors instead of V",
        ),
        Mechanism(
            "the achieved occupancy (fewer blocks resident than the calculator's)",
            ("achieved_occupancy",),
            achieved_time,
            tol=0.15,
            why="the latency term with the warps ncu saw resident on average",
        ),
    )
    return [
        pred("a_bytes", "A (M×K)", a, "B", "e·M·K", kind="exact", rel_tol=0),
        pred("w_bytes", "W (K×N)", w, "B", "e·K·N", kind="exact", rel_tol=0),
        pred("c_bytes", "C (M×N)", c, "B", "e·M·N", kind="exact", rel_tol=0),
        pred(
            "min_traffic",
            "minimum traffic (each matrix once)",
            minimum,
            "B",
            "A + W + C",
            kind="exact",
            rel_tol=0,
        ),
        pred("flop", "FLOPs", flop, "FLOP", "2·M·N·K", kind="exact", rel_tol=0),
        pred(
            "smem_per_block", "on-chip need S", S, "B", "2mk + 2kn + 4mn", kind="exact", rel_tol=0
        ),
        pred(
            "smem_alloc_per_block",
            "S + reserved, in 128 B granules",
            occ.smem_per_block_alloc_bytes,
            "B",
            "roundup(S + reserved, 128)",
            kind="exact",
            rel_tol=0,
        ),
        pred(
            "traffic",
            "traffic V between working buffer and next level",
            V,
            "B",
            "2MK·(N/n) + 2KN·(M/m) + 2MN",
            kind="exact",
            rel_tol=0.02,
        ),
        pred("traffic_vs_min", "V ÷ minimum", V / minimum, "×", "V / (A + W + C)"),
        pred(
            "l2_read_bytes",
            "reads reaching L2 from L1 (V minus C writes)",
            reads,
            "B",
            "2MK·(N/n) + 2KN·(M/m)",
            rel_tol=0.10,
            mechanisms=(l1,),
        ),
        pred(
            "dram_read_bytes",
            "DRAM reads if nothing is re-used from L2 (the L2's reuse is not modelled: shown, not "
            "judged)",
            reads,
            "B",
            "2MK·(N/n) + 2KN·(M/m)",
            kind="info",
        ),
        pred(
            "a_reads",
            "times A is read",
            ceil_div(p.N, p.n),
            "count",
            "N/n",
            kind="exact",
            rel_tol=0,
        ),
        pred(
            "w_reads",
            "times W is read",
            ceil_div(p.M, p.m),
            "count",
            "M/m",
            kind="exact",
            rel_tol=0,
        ),
        pred(
            "blocks_by_smem",
            "resident blocks allowed by shared memory",
            occ.limits["shared_mem"],
            "count",
            "floor(smem per SM ÷ (S + reserved))",
            kind="exact",
            rel_tol=0,
            mechanisms=carve("blocks_by_smem"),
        ),
        pred(
            "resident_blocks",
            "resident blocks (threads, registers, shared memory)",
            occ.blocks_per_sm,
            "count",
            "occupancy calculator",
            kind="exact",
            rel_tol=0,
            mechanisms=carve("blocks_per_sm"),
        ),
        pred(
            "occupancy",
            "theoretical occupancy",
            occ.occupancy_pct,
            "%",
            "resident warps ÷ max warps",
            kind="exact",
            rel_tol=0.005,
            max_physical=100.0,
            physical="100 %",
            mechanisms=carve("occupancy"),
        ),
        pred(
            "bandwidth_fraction_needed",
            f"achieved bandwidth needed vs a {p.ref_m}×{p.ref_n} tile to be faster",
            100 * V / V_ref,
            "%",
            "V / V_ref (T/T_ref = (V/V_ref)·(B_ref/B))",
        ),
        time_estimate(
            "time",
            f"time ({'tensor cores' if p.engine == 'tensor' else 'FP32 CUDA cores'})",
            terms,
            t,
            "t_kernel + max(compute, L2 traffic, DRAM, latency)",
            0.25,
            mechanisms=time_mechs,
        ),
        pred(
            "time_bound",
            "time lower bound",
            max(minimum / bw, flop / peak),
            "s",
            f"max(minimum traffic / DRAM BW, FLOPs / {'BF16' if p.engine == 'tensor' else 'FP32'} "
            f"peak)",
            kind="lower_bound",
        ),
        pred(
            "time_ratio_vs_ref",
            f"time ÷ time of a {p.ref_m}×{p.ref_n} tile (> 1: the tile with less traffic is "
            "slower, the chapter's 'half the traffic can be slower')",
            t / t_ref,
            "×",
            "ratio of the two time estimates (same registers per thread)",
            rel_tol=0.25,
        ),
        pred(
            "traffic_time",
            "time if all of V came from DRAM",
            V / bw,
            "s",
            "V / DRAM BW",
            kind="info",
        ),
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
    Param(
        "stage",
        "B",
        2,
        "bytes per A/W element staged on chip (the microbenchmark kernel stages FP32: 4)",
        type="int",
        positive=True,
    ),
    Param(
        "acc",
        "B",
        4,
        "bytes per accumulator element on chip (0 = accumulator in registers)",
        type="int",
        min=0,
    ),
    Param(
        "threads", "count", 256, "threads per block", type="int", positive=True, from_chapter=False
    ),
    Param(
        "regs",
        "count",
        32,
        "registers per thread (the chapter gives none)",
        type="int",
        min=0,
        max=255,
        from_chapter=False,
    ),
    Param(
        "ref_m",
        "count",
        64,
        "reference tile rows (for the bandwidth comparison)",
        type="int",
        positive=True,
    ),
    Param("ref_n", "count", 64, "reference tile columns", type="int", positive=True),
    Param(
        "ref_regs",
        "count",
        0,
        "registers per thread of the reference tile's kernel (0: the same as this one's)",
        type="int",
        min=0,
        max=255,
        from_chapter=False,
    ),
    Param(
        "engine",
        "",
        "tensor",
        "what multiplies: 'tensor' (BF16 tensor cores, the chapter's kernel) or 'fp32' (FP32 FMAs "
        "on CUDA cores)",
        type="choice",
        choices=("tensor", "fp32"),
        from_chapter=False,
    ),
    Param(
        "tm",
        "count",
        0,
        "rows of the patch each thread computes (FP32 kernel; 0 = not modelled)",
        type="int",
        min=0,
        from_chapter=False,
    ),
    Param("tn", "count", 0, "columns of that patch", type="int", min=0, from_chapter=False),
    Param(
        "ref_tm",
        "count",
        0,
        "thread patch rows of the reference tile's kernel (0: the same)",
        type="int",
        min=0,
        from_chapter=False,
    ),
    Param(
        "ref_tn",
        "count",
        0,
        "thread patch columns of the reference tile's kernel (0: the same)",
        type="int",
        min=0,
        from_chapter=False,
    ),
    p_kernel_floor(),
    p_dram(),
    p_l2(),
    p_tensor(),
    p_fp32(),
    p_latency(
        "l2_latency",
        L2_LATENCY_NS,
        "L2 hit latency",
        "far L2 partition ≈ 475 cycles ≈ 240 ns at 1.98 GHz (bench-anchors §3.2)",
        ceiling="latency_l2",
    ),
)

TILING = Case(
    id="tiling.traffic",
    title="Tiling C = A·W: on-chip need, traffic and residency",
    section="5.2 · Example 5-3, Figures 5-8/5-9, Experiment 5-1",
    summary=(
        "C = A·W with M = 1024, K = 4096, N = 12288 (8, 96 and 24 MiB in BF16, 128 MiB minimum). "
        "An m×n output tile with K step k needs S = 2mk + 2kn + 4mn bytes on chip and causes V = "
        "2MK·(N/n) + 2KN·(M/m) + 2MN bytes between the working buffer and the next level: 3096 MiB "
        "for 64×64, 1560 for 128×128. Bigger tiles need more shared memory, so fewer blocks are "
        "resident (25 KiB → 4 blocks vs 81 KiB → 1 on an RTX PRO 6000 SM), fewer requests are in "
        "flight and the achieved bandwidth falls: half the traffic can be slower (T128/T64 = "
        "(1560/3096)·(B64/B128))."
    ),
    params=_TILE_PARAMS,
    model=_tiling,
    validate=_tiling_validate,
    figures=(
        Figure("A 8 MiB (BF16)", 8, "MiB", key="a_bytes"),
        Figure("W 96 MiB", 96, "MiB", key="w_bytes"),
        Figure("C 24 MiB", 24, "MiB", key="c_bytes"),
        Figure("three matrices read/written once: 128 MiB", 128, "MiB", key="min_traffic"),
        Figure("103 GFLOPs", 103, "GFLOP", key="flop", tol=0.005),
        Figure("64×64 tiles: 3096 MiB", 3096, "MiB", key="traffic"),
        Figure("≈ 24× the minimum", 24, "×", key="traffic_vs_min", tol=0.02),
        Figure("128×128 tiles: 1560 MiB", 1560, "MiB", key="traffic", params={"m": 128, "n": 128}),
        Figure(
            "RTX PRO 6000: a 64×64 block needs 25 KiB (with 1 KiB reserved)",
            25,
            "KiB",
            key="smem_alloc_per_block",
            gpu=RTX_PRO,
        ),
        Figure("… 4 resident", 4, "count", key="blocks_by_smem", gpu=RTX_PRO),
        Figure(
            "RTX PRO 6000: a 128×128 block needs 81 KiB",
            81,
            "KiB",
            key="smem_alloc_per_block",
            gpu=RTX_PRO,
            params={"m": 128, "n": 128},
        ),
        Figure(
            "… 1 resident",
            1,
            "count",
            key="blocks_by_smem",
            gpu=RTX_PRO,
            params={"m": 128, "n": 128},
        ),
        Figure(
            "Experiment 5-1: 64×128 needs S = 44 KiB",
            44,
            "KiB",
            key="smem_per_block",
            params={"n": 128},
        ),
        Figure(
            "… +1 KiB → 2 resident",
            2,
            "count",
            key="blocks_by_smem",
            gpu=RTX_PRO,
            params={"n": 128},
        ),
        Figure("… V = 2328 MiB", 2328, "MiB", key="traffic", params={"n": 128}),
        Figure(
            "… faster than 64×64 only at ≥ 75.2 % of its achieved bandwidth",
            75.2,
            "%",
            key="bandwidth_fraction_needed",
            params={"n": 128},
            tol=0.001,
        ),
    ),
    measurements=(
        Measure(
            "ncu",
            "lts__t_sectors_srcunit_tex_op_read.sum",
            "l2_read_bytes",
            "L2 read sectors requested by L1 × 32 B: the model's V without the C writes",
            factor=32.0,
        ),
        Measure(
            "ncu",
            "dram__bytes_read.sum",
            None,
            "DRAM reads, shown beside the model (much lower: the L2 absorbs re-reads, which the "
            "model does not predict)",
        ),
        Measure(
            "ncu",
            "launch__occupancy_limit_shared_mem",
            "blocks_by_smem",
            "set stage=4, acc=0 for the microbenchmark kernel (FP32 staging, accumulator in "
            "registers)",
        ),
        Measure(
            "ncu", "sm__maximum_warps_per_active_cycle_pct", "occupancy", "theoretical occupancy"
        ),
        Measure(
            "bench",
            "tiling.traffic/time",
            "time",
            "tiled matmul 64×64, 64×128, 128×128 (k = 32): BF16 tensor cores (mma.sync, the "
            "chapter's S in shared memory) and FP32 CUDA cores (labelled)",
        ),
    ),
    default_gpu=RTX_PRO,
    chart=Chart(
        "m",
        (16, 32, 64, 128, 256),
        ("traffic", "min_traffic"),
        link=("n",),
        title="traffic vs square tile size",
        log_x=True,
    ),
)


# ------------------------------------------------------------------------------------------------
# bank.column_read — Figure 5-10
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BankResult:
    degree: float  # wavefronts ÷ ideal wavefronts (1 = conflict-free)
    wavefronts: int  # shared-memory passes for one warp request
    phases: int  # ideal wavefronts (1 for 4-byte, 2 for 8-byte, 4 for 16-byte accesses)

    @property
    def conflicts(self) -> int:
        return self.wavefronts - self.phases


def bank_conflicts(
    word_addresses: Sequence[int | None], width: int = 4, banks: int | None = None
) -> BankResult:
    """Conflict degree of one warp access. `word_addresses[lane]` is the first 4-byte word the lane
    reads (None: inactive lane); each lane reads width/4 consecutive words. 8- and 16-byte accesses
    are served in 2 / 4 phases of 16 / 8 lanes. In each phase a bank serves one distinct word per
    pass (lanes reading the same word share it), so passes = max over banks of the distinct words in
    that bank."""
    banks = BANKS if banks is None else banks
    if width not in (4, 8, 16):
        raise CaseError(f"width={width}: shared-memory accesses are 4, 8 or 16 bytes")
    words = width // BANK_BYTES
    per_phase = 32 // words
    wavefronts = phases = 0
    lanes = list(word_addresses)
    for start in range(0, len(lanes), per_phase):
        group = [a for a in lanes[start : start + per_phase] if a is not None]
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


def colread_time(p, gpu, degree: float, phases: int) -> float:
    """Time of the suite's column-read kernel: `blocks_per_sm` × SMs blocks of `threads`, each warp
    doing `iters` shared loads. The SM's shared-memory pipe serves one wavefront per cycle; a
    conflict-free load still costs `issue` cycles of instruction issue (its loop's other
    instructions, 4 schedulers): per SM, warps × iters × max(wavefronts per load, issue) cycles at
    the SM clock."""
    warps = p.blocks_per_sm * p.threads // 32
    per_load = max(degree * phases, p.issue)
    return p.t_kernel * US + warps * p.iters * per_load / (p.clock * 1e6)


def _bank(p, gpu):
    r = bank_conflicts(column_read_addresses(p.stride, p.width), p.width)
    vw = p.width // BANK_BYTES
    pad = next(
        s
        for s in range(p.stride, p.stride + 64 * vw + 1, vw)
        if bank_conflicts(column_read_addresses(s, p.width), p.width).degree == 1
    )
    free = bank_conflicts(column_read_addresses(pad, p.width), p.width)
    t = colread_time(p, gpu, r.degree, r.phases)
    t_free = colread_time(p, gpu, free.degree, free.phases)
    warps = p.blocks_per_sm * p.threads // 32
    mech = (
        Mechanism(
            "the measured wavefronts per shared load",
            ("shared_ld_wavefronts", "shared_ld_requests"),
            lambda c: colread_time(p, gpu, c["shared_ld_wavefronts"] / c["shared_ld_requests"], 1),
            tol=0.10,
            why="the same formula with ncu's wavefronts ÷ requests",
        ),
        Mechanism(
            "instruction issue (the kernel's warp instructions per shared load)",
            ("warp_instructions", "shared_ld_requests", "shared_ld_wavefronts"),
            lambda c: (
                p.t_kernel * US
                + warps
                * p.iters
                * max(
                    c["shared_ld_wavefronts"] / c["shared_ld_requests"],
                    c["warp_instructions"] / c["shared_ld_requests"] / 4,
                )
                / (p.clock * 1e6)
            ),
            tol=0.10,
            why="4 schedulers issue one warp instruction per cycle each",
        ),
    )
    return [
        pred(
            "degree",
            "bank-conflict degree",
            r.degree,
            "way",
            "max distinct words per bank (4-byte: gcd(stride, 32))",
            kind="exact",
            rel_tol=0.02,
        ),
        pred(
            "wavefronts",
            "shared-memory passes per warp request",
            r.wavefronts,
            "count",
            "Σ over phases",
            kind="exact",
            rel_tol=0.02,
        ),
        pred(
            "ideal_wavefronts",
            "passes without conflicts",
            r.phases,
            "count",
            "width/4 phases",
            kind="exact",
            rel_tol=0,
        ),
        pred(
            "conflicts",
            "extra passes (ncu 'bank conflicts') per request",
            r.conflicts,
            "count",
            "wavefronts − ideal",
            kind="exact",
            rel_tol=0.02,
        ),
        pred(
            "time_ratio_bound",
            "slowdown vs a conflict-free read if shared memory is the only bottleneck",
            r.degree,
            "×",
            "= degree",
            kind="upper_bound",
        ),
        time_estimate(
            "time",
            f"column-read kernel time ({p.blocks_per_sm} blocks of {p.threads} per SM, {p.iters} "
            "loads per warp)",
            [
                Term("kernel floor", p.t_kernel * US, "s", "t_kernel", src(p, "t_kernel")),
                Term(
                    "shared-memory pipe",
                    t - p.t_kernel * US,
                    "s",
                    f"{warps} warps × iters × max(wavefronts {r.wavefronts}, issue "
                    f"{p.issue:g}) / clock",
                    src(p, "clock") + "; " + src(p, "issue"),
                ),
            ],
            t,
            "t_kernel + warps × iters × max(wavefronts, issue) cycles / SM clock",
            0.10,
            mechanisms=mech,
        ),
        pred(
            "time_ratio_vs_free",
            f"time ÷ time at the conflict-free stride {pad}",
            t / t_free,
            "×",
            "ratio of the two time estimates",
            rel_tol=0.15,
        ),
        pred(
            "smem_bytes_per_clk",
            "useful shared-memory bytes per clock per SM",
            128 / r.degree,
            "B",
            "128 B/clk ÷ degree",
            kind="info",
        ),
        pred(
            "conflict_free_stride",
            "next conflict-free stride (padding)",
            pad,
            "count",
            "smallest stride ≥ this one with degree 1",
            kind="info",
        ),
    ]


def _bank_validate(p, gpu):
    vw = p.width // BANK_BYTES
    if p.stride % vw:
        raise CaseError(
            f"stride={p.stride}: a {p.width}-byte access needs a stride that is a multiple of {vw} "
            "words (alignment)"
        )


BANK = Case(
    id="bank.column_read",
    title="Bank conflicts reading a column of a 32×32 tile",
    section="5.2 · Figure 5-10",
    summary=(
        "Shared memory has 32 banks of 4 bytes; bank = word address mod 32. A warp reading one "
        "column of a 32×32 FP32 tile with row stride 32 words sends all 32 lanes to one bank: 32 "
        "serialised passes. Padding each row to 33 words spreads them over the 32 banks (1 pass). "
        "For 4-byte words and lane i reading word i·s the degree is gcd(s, 32); 8/16-byte accesses "
        "are split into 2/4 phases. The bulk copy engine (TMA) cannot pad rows, so it swizzles "
        "addresses instead. Same on every NVIDIA GPU in the registry (32 banks × 4 B)."
    ),
    params=(
        Param(
            "stride", "count", 32, "row stride in 4-byte words", type="int", positive=True, max=4096
        ),
        Param("width", "B", 4, "bytes per access", type="choice", choices=(4, 8, 16)),
        Param(
            "blocks_per_sm",
            "count",
            8,
            "blocks per SM of the measured kernel",
            type="int",
            positive=True,
            from_chapter=False,
        ),
        Param(
            "threads",
            "count",
            256,
            "threads per block of the measured kernel",
            type="int",
            positive=True,
            max=1024,
            from_chapter=False,
        ),
        Param(
            "iters",
            "count",
            4096,
            "shared loads per thread of the measured kernel",
            type="int",
            positive=True,
            from_chapter=False,
        ),
        Param(
            "issue",
            "count",
            1.5,
            "cycles of instruction issue per conflict-free load (its loop issues ≈ 6 warp "
            "instructions; 4 schedulers per SM)",
            positive=True,
            from_chapter=False,
        ),
        Param(
            "clock",
            "MHz",
            1980,
            "SM clock",
            positive=True,
            from_chapter=False,
            gpu_default=lambda g: g.boost_clock_mhz,
            gpu_default_text="the GPU's boost clock",
        ),
        p_kernel_floor(),
    ),
    model=_bank,
    validate=_bank_validate,
    figures=(
        Figure("row stride 32: all 32 lanes in one bank, 32 passes", 32, "way", key="degree"),
        Figure("padding rows to 33 words: 1 pass", 1, "way", key="degree", params={"stride": 33}),
        Figure(
            "stride 2 → 2-way",
            2,
            "way",
            key="degree",
            params={"stride": 2},
            source="reference note (chapter5-cases.md)",
        ),
        Figure(
            "stride 16 → 16-way",
            16,
            "way",
            key="degree",
            params={"stride": 16},
            source="reference note (chapter5-cases.md)",
        ),
    ),
    measurements=(
        Measure(
            "ncu",
            "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum ÷ (… − "
            "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum)",
            "degree",
            "degree = wavefronts ÷ (wavefronts − conflicts); analyzers.kernels.conflict_degree",
        ),
        Measure(
            "bench", "bank.column_read/time", "time", "the column-read kernel timed at each stride"
        ),
        Measure(
            "bench",
            "bank.column_read/time_ratio",
            "time_ratio_vs_free",
            "time at this stride ÷ time at a conflict-free stride (sweep 1..64, 4/8/16-byte)",
        ),
    ),
    chart=Chart(
        "stride",
        tuple(range(1, 65)),
        ("degree",),
        title="conflict degree vs row stride",
        mark="bar",
    ),
)


# ------------------------------------------------------------------------------------------------
# transpose.tile — Section 5.4 "measurement overturns intuition"
# ------------------------------------------------------------------------------------------------


def transpose_read_degree(t: int, pad: int) -> BankResult:
    """Warp 0 of a block of t-wide rows reading tile[tx][ty] (the transposed read) from a [t][t+pad] FP32 tile."""
    lanes = []
    for lane in range(min(32, t * t)):
        tx, ty = lane % t, lane // t
        lanes.append(tx * (t + pad) + ty)
    return bank_conflicts(lanes, 4)


def transpose_time(p, gpu, t: int, rows: int, pad: int) -> tuple[float, list[Term], dict]:
    """Predicted time of an n×n FP32 transpose through t×t shared-memory tiles with blocks of t ×
    rows threads (t/rows elements per thread, all loaded before the barrier): t_kernel + the largest
    of
    - block lifetimes (Little's law): each block lives 2 × latency (its loads are one round trip;
      its stores drain before its slot is reused) plus its shared-memory phase, `resident` blocks
      per SM (occupancy calculator);
    - the shared-memory pipe: every block's wavefronts (transposed reads at the bank model's degree,
      plus the row-wise writes) at one per cycle per SM;
    - DRAM: 2·n²·4 bytes at the DRAM bandwidth."""
    rows = rows or t
    threads = t * rows
    per_thread = t // rows
    rd = transpose_read_degree(t, pad)
    smem = t * (t + pad) * 4
    occ = occupancy(gpu, threads, 16, smem_static_bytes=smem)
    R = occ.blocks_per_sm
    blocks = ceil_div(p.n, t) ** 2
    warps = ceil_div(threads, 32)
    clock = (gpu.boost_clock_mhz or 1500) * 1e6
    t_smem = warps * per_thread * (rd.wavefronts + 1) / clock
    per_sm = ceil_div(blocks, gpu.sm_count)
    lat = p.latency * 1e-9
    t_life = lifetime_time(blocks, gpu.sm_count, R, 2 * lat + t_smem) if R else math.inf
    t_pipe = per_sm * t_smem
    t_dram = 2 * p.n * p.n * 4 / (p.bw * 1e9)
    terms = [
        Term("kernel floor", p.t_kernel * US, "s", "t_kernel", src(p, "t_kernel")),
        Term(
            "block lifetimes (Little's law)",
            t_life,
            "s",
            f"ceil(ceil(blocks/SMs) / {R} resident) × (2 × latency + shared-memory phase): a "
            "block's loads are one round trip, its stores drain before its slot is reused",
            src(p, "latency") + f"; occupancy calculator: {R} blocks/SM",
        ),
        Term(
            "shared-memory pipe",
            t_pipe,
            "s",
            f"ceil(blocks/SMs) × {warps} warps × {per_thread} element(s) × ({rd.wavefronts} + 1) "
            "wavefronts / clock",
            f"bank model degree {rd.degree:g}; boost clock",
        ),
        Term("DRAM", t_dram, "s", "2·n²·4 / DRAM bandwidth", src(p, "bw")),
    ]
    return (
        p.t_kernel * US + max(t_life, t_pipe, t_dram),
        terms,
        {
            "R": R,
            "rd": rd,
            "smem": smem,
            "threads": threads,
            "blocks": blocks,
            "warps": warps,
            "per_thread": per_thread,
            "clock": clock,
            "per_sm": per_sm,
            "t_life": t_life,
            "t_pipe": t_pipe,
            "t_dram": t_dram,
        },
    )


def _transpose(p, gpu):
    bw = need(gpu, "dram_bandwidth_bytes_per_s")
    traffic = 2 * p.n * p.n * 4
    t, terms, f = transpose_time(p, gpu, p.t, p.rows, p.pad)
    t_ref, _, _ = transpose_time(p, gpu, p.ref_t, p.ref_rows, p.pad)
    lat = p.latency * 1e-9

    def measured_degree(c):
        d = c["shared_ld_wavefronts"] / c["shared_ld_requests"]
        ts = f["warps"] * f["per_thread"] * (d + 1) / f["clock"]
        return p.t_kernel * US + max(
            lifetime_time(f["blocks"], gpu.sm_count, f["R"], 2 * lat + ts),
            f["per_sm"] * ts,
            f["t_dram"],
        )

    def measured_dram(c):
        moved = c["dram_read_bytes"] + c["dram_write_bytes"]
        return p.t_kernel * US + max(f["t_life"], f["t_pipe"], moved / (p.bw * 1e9))

    return [
        pred(
            "read_degree",
            "conflict degree of the transposed shared-memory read",
            f["rd"].degree,
            "way",
            "bank model on warp 0",
            kind="exact",
            rel_tol=0.10,
        ),
        pred(
            "smem_per_block",
            "shared memory per block",
            f["smem"],
            "B",
            "t·(t+pad)·4",
            kind="exact",
            rel_tol=0,
        ),
        pred(
            "threads_per_block",
            "threads per block",
            f["threads"],
            "count",
            "t × rows",
            kind="exact",
            rel_tol=0,
        ),
        pred(
            "resident_blocks",
            "resident blocks per SM (16 registers/thread)",
            f["R"],
            "count",
            "occupancy calculator",
            kind="exact",
            rel_tol=0,
        ),
        pred(
            "dram_traffic", "DRAM traffic (read + write once)", traffic, "B", "2·n²·4", rel_tol=0.05
        ),
        time_estimate(
            "time",
            f"transpose time ({p.t}×{p.t} tile, {f['threads']} threads, {f['per_thread']} "
            "element(s) per thread)",
            terms,
            t,
            "t_kernel + max(block lifetimes, shared-memory pipe, DRAM)",
            0.25,
            mechanisms=(
                Mechanism(
                    "the measured bank conflicts (wavefronts per shared load)",
                    ("shared_ld_wavefronts", "shared_ld_requests"),
                    measured_degree,
                    tol=0.15,
                ),
                Mechanism(
                    "the measured DRAM bytes",
                    ("dram_read_bytes", "dram_write_bytes"),
                    measured_dram,
                    tol=0.15,
                ),
            ),
        ),
        pred(
            "speedup_vs_ref",
            f"time of a {p.ref_t}×{p.ref_t} tile ({p.ref_t * (p.ref_rows or p.ref_t)} threads) ÷ "
            "this one (> 1: this tile is faster; the chapter: 32×32 2.7× faster than 16×16)",
            t_ref / t,
            "×",
            "ratio of the two time estimates",
            rel_tol=0.25,
        ),
        pred(
            "time_bound",
            "time lower bound at DRAM peak",
            traffic / bw,
            "s",
            "2·n²·4 / BW",
            kind="lower_bound",
        ),
    ]


def _transpose_validate(p, gpu):
    check_tile(p.t, "t", p.n, "n")
    for t, r, name in ((p.t, p.rows, "rows"), (p.ref_t, p.ref_rows, "ref_rows")):
        rows = r or t
        if t % rows or t * rows > 1024:
            raise CaseError(
                f"{name}={r}: a block of t × rows threads needs rows dividing t={t} and at most "
                "1024 threads"
            )


TRANSPOSE = Case(
    id="transpose.tile",
    title="Transpose: 16×16 vs 32×32 tiles, padded or not",
    section="5.4 (measurement)",
    summary=(
        "The companion transpose on an RTX PRO 6000 took 7.9 µs with 16×16 blocks and 2.9 µs with "
        "32×32 (2.7×): measurement overturns intuition. Both read and write every element once; "
        "what differs is the shared-memory transposed read (a 32-wide tile sends a warp's column "
        "to one bank unless rows are padded), the block size and the resident blocks. The chapter "
        "does not give the matrix size."
    ),
    params=(
        Param(
            "n",
            "count",
            8192,
            "matrix side (FP32; the chapter gives none, the H200 sample uses 8192)",
            type="int",
            positive=True,
            from_chapter=False,
        ),
        Param("t", "count", 32, "tile side", type="choice", choices=(8, 16, 32, 64)),
        Param("pad", "count", 0, "padding words per tile row", type="int", min=0, max=32),
        Param(
            "rows",
            "count",
            0,
            "thread rows per block (block = t × rows threads, t/rows elements each; 0: rows = t, "
            "one element per thread)",
            type="int",
            min=0,
            max=64,
            from_chapter=False,
        ),
        Param(
            "ref_t",
            "count",
            16,
            "tile side to compare with",
            type="choice",
            choices=(8, 16, 32, 64),
        ),
        Param(
            "ref_rows",
            "count",
            0,
            "thread rows per block of that tile (0: = ref_t)",
            type="int",
            min=0,
            max=64,
            from_chapter=False,
        ),
        p_kernel_floor(),
        p_dram(),
        p_latency(),
    ),
    model=_transpose,
    validate=_transpose_validate,
    figures=(
        Figure(
            "RTX PRO 6000: 16×16 blocks 7.9 µs",
            7.9,
            "µs",
            gpu=RTX_PRO,
            measured=True,
            params={"t": 16},
        ),
        Figure("RTX PRO 6000: 32×32 blocks 2.9 µs", 2.9, "µs", gpu=RTX_PRO, measured=True),
        Figure("… 2.7× faster", 2.7, "×", gpu=RTX_PRO, measured=True),
    ),
    measurements=(
        Measure(
            "ncu",
            "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
            "read_degree",
            "degree = wavefronts ÷ (wavefronts − conflicts)",
        ),
        Measure(
            "ncu", "dram__bytes_read.sum + dram__bytes_write.sum", "dram_traffic", "DRAM bytes"
        ),
        Measure(
            "bench",
            "transpose.tile/time",
            "time",
            "16×16 / 32×32 tiles with block = tile, and 16/32/64 tiles at 256 threads per block "
            "(equal block size and occupancy), padded or not",
        ),
    ),
    default_gpu=RTX_PRO,
    chart=Chart(
        "t",
        (8, 16, 32),
        ("read_degree",),
        title="transposed-read conflict degree vs tile",
        mark="bar",
    ),
)


# ------------------------------------------------------------------------------------------------
# rmsnorm.split — Figure 5-11
# ------------------------------------------------------------------------------------------------


def grid_time(p, gpu, nbytes: float, blocks: int, bytes_per_block: float) -> float:
    """One kernel of `blocks` programs, `p.resident` at a time per SM, each loading
    `bytes_per_block` at once: the slower of streaming the bytes (Little's law with every resident
    program's loads in flight) and the programs' lifetimes (a load round trip and a store round trip
    each, `p.latency` apiece)."""
    lat = p.latency * 1e-9
    inflight = min(blocks, gpu.sm_count * p.resident) * bytes_per_block
    return max(
        stream_time(nbytes, inflight, lat, p.bw * 1e9),
        lifetime_time(blocks, gpu.sm_count, p.resident, 2 * lat),
    )


def _rmsnorm(p, gpu):
    bw = need(gpu, "dram_bandwidth_bytes_per_s")
    tasks = p.rows * p.s
    x = p.rows * p.hidden * p.elem
    base = 2 * x  # read x, write y
    extra = (x + 2 * p.rows * p.s * p.partial) if p.s > 1 else 0
    w = p.hidden * p.elem
    seg = p.hidden * p.elem / p.s
    if p.s == 1:
        kernels = [("one pass", grid_time(p, gpu, 2 * x + w, p.rows, seg + w))]
    else:
        part = p.rows * p.s * p.partial
        kernels = [
            ("partial sums", grid_time(p, gpu, x + part, tasks, seg)),
            (
                "merge + scale",
                grid_time(p, gpu, x + w + x + part * p.s, tasks, seg + p.s * p.partial),
            ),
        ]
    t = len(kernels) * p.t_kernel * US + sum(k for _, k in kernels)
    terms = [
        Term(
            "kernel floor",
            len(kernels) * p.t_kernel * US,
            "s",
            f"{len(kernels)} × t_kernel",
            src(p, "t_kernel"),
        )
    ] + [
        Term(
            name,
            k,
            "s",
            f"max(stream (Little's law), ceil(programs/SMs) × 2 × latency / {p.resident} resident)",
            src(p, "bw") + "; " + src(p, "latency") + "; " + src(p, "resident"),
        )
        for name, k in kernels
    ]
    return [
        pred("tasks", "parallel tasks", tasks, "count", "rows × s", kind="exact", rel_tol=0),
        pred(
            "sm_fill",
            "SMs with work (one task per SM at a time)",
            100 * min(tasks, gpu.sm_count) / gpu.sm_count,
            "%",
            "min(tasks, SMs) / SMs",
            max_physical=100.0,
            physical="100 %",
        ),
        pred(
            "elements_per_task",
            "elements per task",
            ceil_div(p.hidden, p.s),
            "count",
            "hidden / s",
            kind="exact",
            rel_tol=0,
        ),
        pred(
            "traffic",
            "DRAM traffic",
            base + extra,
            "B",
            "read + write (+ a second read and the partial sums when s > 1)",
            rel_tol=0.1,
        ),
        pred(
            "extra_traffic",
            "extra traffic from splitting",
            extra,
            "B",
            "one more read + 2·rows·s·4 B",
            kind="exact",
            rel_tol=0.1,
        ),
        time_estimate(
            "time",
            f"RMSNorm time ({len(kernels)} kernel{'s' if len(kernels) > 1 else ''})",
            terms,
            t,
            "Σ kernels (t_kernel + max(stream, program lifetimes))",
            0.30,
        ),
        pred(
            "time_bound",
            "time lower bound at DRAM peak",
            (base + extra) / bw,
            "s",
            "traffic / BW",
            kind="lower_bound",
        ),
    ]


def _rmsnorm_validate(p, gpu):
    if p.s > p.hidden:
        raise CaseError(f"s={p.s} segments is more than the row length (hidden={p.hidden})")


RMSNORM = Case(
    id="rmsnorm.split",
    title="RMSNorm: splitting a row into segments",
    section="5.2 · Figure 5-11",
    summary=(
        "RMSNorm first reduces each row (sum of squares), then scales it. One task per row gives "
        "1024 tasks at M = 1024 but 1 task in decode (1 row), leaving the GPU idle. Splitting each "
        "row into s segments makes rows × s tasks at the price of partial sums, a merge and a "
        "second read of the input to scale it."
    ),
    params=(
        Param("rows", "count", 1024, "rows (tokens)", type="int", positive=True),
        Param("hidden", "count", 4096, "row length", type="int", positive=True),
        Param("s", "count", 1, "segments per row", type="int", positive=True),
        Param("elem", "B", 2, "bytes per element (BF16)", type="int", positive=True),
        Param("partial", "B", 4, "bytes per partial sum (FP32)", type="int", positive=True),
        Param(
            "resident",
            "count",
            16,
            "programs resident per SM (Triton's 4 warps = 128 threads: 2048 / 128)",
            type="int",
            positive=True,
            from_chapter=False,
        ),
        p_kernel_floor(),
        p_dram(),
        p_latency(),
    ),
    model=_rmsnorm,
    validate=_rmsnorm_validate,
    figures=(
        Figure("1024 rows: one task per row = 1024 tasks", 1024, "count", key="tasks"),
        Figure("decode (1 row): 1 task", 1, "count", key="tasks", params={"rows": 1}),
    ),
    measurements=(Measure("bench", "rmsnorm.split/time", "time", "rows × segments sweep"),),
    chart=Chart(
        "s",
        (1, 2, 4, 8, 16, 32, 64, 128, 256),
        ("sm_fill",),
        title="SMs with work vs segments per row",
        log_x=True,
    ),
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
        pred(
            "left",
            "(1 + 2⁻²⁴) + 2⁻²⁴ in FP32",
            na["left"],
            "",
            "numpy float32",
            kind="exact",
            rel_tol=0,
        ),
        pred(
            "right",
            "1 + (2⁻²⁴ + 2⁻²⁴) in FP32",
            na["right"],
            "",
            "numpy float32 = 1 + 2⁻²³",
            kind="exact",
            rel_tol=0,
        ),
        pred(
            "ulp_one_segment",
            "ULP error, 1 segment (median; range = 1st–99th percentile)",
            one.median,
            "ULP",
            f"{p.rows} random rows vs float64",
            kind="range",
            lo=one.p1,
            hi=one.p99,
        ),
        pred(
            "ulp_segments",
            f"ULP error, {p.segments} segments (median; range = 1st–99th percentile)",
            seg.median,
            "ULP",
            f"{p.rows} random rows vs float64",
            kind="range",
            lo=seg.p1,
            hi=seg.p99,
        ),
        pred(
            "median_abs_one_segment",
            "median |error|, 1 segment",
            one.median_abs,
            "ULP",
            "",
            kind="info",
        ),
        pred(
            "median_abs_segments",
            f"median |error|, {p.segments} segments",
            seg.median_abs,
            "ULP",
            "",
            kind="info",
        ),
        pred(
            "rows_better_with_segments",
            f"rows where {p.segments} segments beat 1",
            better,
            "%",
            "",
            kind="info",
        ),
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
        for series, v in (
            ("median", s.median),
            ("5th percentile", s.p5),
            ("95th percentile", s.p95),
        ):
            rows.append({"x": s.segments, "series": series, "value": v, "unit": "ULP"})
    return rows


def _fp_validate(p, gpu):
    if p.segments > p.length:
        raise CaseError(f"segments={p.segments} is more than the row length ({p.length})")


FP = Case(
    id="fp.non_associativity",
    title="Floating-point addition is not associative",
    section="5.2 · Figure 5-13",
    summary=(
        "In FP32, (1 + 2⁻²⁴) + 2⁻²⁴ = 1 but 1 + (2⁻²⁴ + 2⁻²⁴) = 1 + 2⁻²³. Summing the squares of a "
        "row of 4096 BF16 values in FP32 with 1 or 8 segments gives different errors against a "
        "float64 reference (the chapter's row: −175.2 and −9.2 ULP). Here many random rows run for "
        "real with numpy and the error is reported as a distribution. Atomic accumulation makes "
        "the order run-dependent; a fixed-order reduction is deterministic; segment counts that "
        "change with the batch size make the same row give different results in different batches."
    ),
    params=(
        Param(
            "rows", "count", 200, "random rows", type="int", min=1, max=20000, from_chapter=False
        ),
        Param("length", "count", 4096, "row length", type="int", min=1, max=1 << 16),
        Param("segments", "count", 8, "segments to compare with 1", type="int", min=1),
        Param("seed", "count", 0, "random seed", type="int", min=0, from_chapter=False),
    ),
    model=_fp,
    validate=_fp_validate,
    tables=_fp_tables,
    chart_data=_fp_chart,
    figures=(
        Figure("FP32: (1 + 2⁻²⁴) + 2⁻²⁴ = 1", 1.0, "", key="left", tol=0),
        Figure("FP32: 1 + (2⁻²⁴ + 2⁻²⁴) = 1 + 2⁻²³", 1.0 + 2.0**-23, "", key="right", tol=0),
        Figure(
            "the chapter's row: 1 segment −175.2 ULP",
            -175.2,
            "ULP",
            key="ulp_one_segment",
            measured=True,
        ),
        Figure(
            "the chapter's row: 8 segments −9.2 ULP", -9.2, "ULP", key="ulp_segments", measured=True
        ),
    ),
    measurements=(
        Measure(
            "bench",
            "numerics (CPU): analyzers.cases.numerics.segment_sum_ulp",
            "ulp_segments",
            "runs here with numpy; a GPU reduction kernel can be compared the same way",
        ),
    ),
    chart=None,
)

CASES = (TILING, BANK, TRANSPOSE, RMSNORM, FP)
