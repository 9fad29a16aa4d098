"""Section 5.3 — neighbouring operators: fusion, buffers, pipelines, FlashAttention."""

from __future__ import annotations

import math

from analyzers.cases import numerics
from analyzers.cases.model import (
    KIB,
    MIB,
    US,
    Case,
    CaseError,
    Chart,
    Explanation,
    Figure,
    Measure,
    Param,
    Term,
    ceil_div,
    need,
    pipeline_time,
    pred,
)
from analyzers.units import fmt
from analyzers.cases.s51_submission import warpspec_times
from analyzers.cases.s52_operator import grid_time
from analyzers.cases.timemodel import (
    p_dram,
    p_kernel_floor,
    p_l2,
    p_latency,
    p_tensor,
    src,
    time_estimate,
    waves,
)

RTX_PRO = "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"
H100 = "NVIDIA H100 SXM"


# ------------------------------------------------------------------------------------------------
# fusion.activation_chain — Example 5-4, Figure 5-15, Experiment 5-2
# ------------------------------------------------------------------------------------------------


def run_steps(
    inputs: dict[str, int],
    steps: list[tuple[str, list[str], dict[str, int]]],
    timeline: list | None = None,
) -> tuple[int, int, int]:
    """(traffic, peak live bytes, bytes touched) of a chain of steps. `inputs` are live from the
    start; each step reads tensors and writes new ones; a tensor is freed after its last read (the
    final outputs stay). Traffic = Σ reads + writes. With `timeline`, one row per step is appended
    to it (what it reads and writes, what is live during it, what is freed after it)."""
    size = dict(inputs)
    last_use: dict[str, int] = {}
    for i, (_, reads, writes) in enumerate(steps):
        for r in reads:
            last_use[r] = i
        size.update(writes)
    live = set(inputs)
    traffic = peak = 0
    for i, (_, reads, writes) in enumerate(steps):
        traffic += sum(size[r] for r in reads) + sum(writes.values())
        live |= set(writes)
        peak = max(peak, sum(size[t] for t in live))
        freed = {r for r in reads if last_use.get(r) == i}
        if timeline is not None:
            timeline.append(
                {
                    "step": steps[i][0],
                    "reads": ", ".join(reads),
                    "writes": ", ".join(writes),
                    "traffic_MiB": (sum(size[r] for r in reads) + sum(writes.values())) / MIB,
                    "live": ", ".join(sorted(live)),
                    "live_MiB": sum(size[t] for t in live) / MIB,
                    "freed_after": ", ".join(sorted(freed)),
                }
            )
        live -= freed
    return traffic, peak, sum(size.values())


def activation_chain(
    M: int,
    F: int,
    elem: int = 2,
    q: int = 1,
    quant: bool = False,
    fused: bool = False,
    timeline: list | None = None,
):
    t = M * F * elem
    inputs = {"G": t, "U": t}
    if fused:
        steps = [
            (
                "silu·mul" + ("·quant" if quant else ""),
                ["G", "U"],
                {"Zq": M * F * q} if quant else {"Z": t},
            )
        ]
    else:
        steps = [("silu", ["G"], {"S": t}), ("mul", ["S", "U"], {"Z": t})]
        if quant:
            steps.append(("quant", ["Z"], {"Zq": M * F * q}))
    return run_steps(inputs, steps, timeline)


def _fusion_tables(p, gpu):
    """Experiment 5-2: allocation, use and release of each tensor, three separate steps vs fully fused."""
    rows: list[dict] = []
    for name, fused in (("three steps", False), ("fully fused", True)):
        tl: list = []
        activation_chain(p.M, p.F, p.elem, p.q, quant=True, fused=fused, timeline=tl)
        rows += [{"variant": name, **r} for r in tl]
    return {"tensor_lifetimes": rows}


def chain_time(
    p, gpu, kernels: list[tuple[str, float, float]], working_set: float, cached: bool | None = None
) -> tuple[float, list[Term]]:
    """Elementwise kernels, each (name, bytes moved, bytes loaded per element): Σ (t_kernel +
    grid_time) with `block_elems` elements per program. From the L2 when the working set fits in it
    and it was not flushed."""
    l2 = gpu.l2_bytes or 0
    if cached is None:
        cached = not p.flushed and working_set <= l2
    rate = p.l2bw if cached else p.bw
    pp = _Rate(p, rate)
    blocks = ceil_div(p.M * p.F, p.block_elems)
    terms = [
        Term(
            "kernel floor",
            len(kernels) * p.t_kernel * US,
            "s",
            f"{len(kernels)} × t_kernel",
            src(p, "t_kernel"),
        )
    ]
    total = len(kernels) * p.t_kernel * US
    for name, nbytes, per_elem in kernels:
        t = grid_time(pp, gpu, nbytes, blocks, p.block_elems * per_elem)
        total += t
        terms.append(
            Term(
                name,
                t,
                "s",
                f"max(stream, {blocks} programs' lifetimes) from {'L2' if cached else 'DRAM'}",
                src(p, "l2bw" if cached else "bw") + "; " + src(p, "latency"),
            )
        )
    return total, terms


class _Rate(dict):
    """The parameters with `bw` replaced by the rate the data come from (DRAM or L2)."""

    def __init__(self, p, rate):
        super().__init__(p)
        self["bw"] = rate

    def __getattr__(self, name):
        return self[name]


def _fusion(p, gpu):
    bw = need(gpu, "dram_bandwidth_bytes_per_s")
    l2 = gpu.l2_bytes or 0
    t = p.M * p.F * p.elem
    un, un_peak, un_touched = activation_chain(p.M, p.F, p.elem, p.q, quant=False, fused=False)
    fu, fu_peak, fu_touched = activation_chain(p.M, p.F, p.elem, p.q, quant=False, fused=True)
    unq, unq_peak, unq_touched = activation_chain(p.M, p.F, p.elem, p.q, quant=True, fused=False)
    fuq, fuq_peak, fuq_touched = activation_chain(p.M, p.F, p.elem, p.q, quant=True, fused=True)
    saved_row = (unq - fuq) / p.M
    t_row = saved_row / bw
    overhead = p.overhead * US
    e = p.elem

    def bound(key, label, traffic, touched, extra=0.0, formula="traffic / DRAM BW"):
        floor = max(0.0, traffic - l2) / bw + extra
        fits = touched <= l2
        return pred(
            key,
            label,
            traffic / bw + extra,
            "s",
            formula,
            kind="lower_bound",
            min_physical=None if fits else floor,
            physical="the DRAM time of the traffic that cannot fit in L2",
        )

    un_k, fu_k = [("SiLU", 2 * t, e), ("multiply", 3 * t, 2 * e)], [("SiLU·multiply", 3 * t, 2 * e)]
    t_un, un_terms = chain_time(p, gpu, un_k, un_touched)
    t_fu, fu_terms = chain_time(p, gpu, fu_k, fu_touched)

    def from_l2(kernels, touched, est):
        """A run that found its working set in the L2 (not flushed): the model with the L2 rate."""
        if not p.flushed or touched > l2:
            return ()
        t_l2 = chain_time(p, gpu, kernels, touched, cached=True)[0]
        return (
            Explanation(
                f"the {touched / MIB:.0f} MiB working set fits in the {l2 / MIB:.0f} MiB L2: a run "
                f"that did not flush it reads at the L2 rate ({fmt(t_l2, 's')} with l2bw = "
                f"{p.l2bw:g} GB/s)",
                t_l2 / est * 0.8,
                1.0,
                why="the same model with the L2 bandwidth "
                "instead of DRAM's, less the model's ±20 %",
            ),
        )

    return [
        pred("tensor_bytes", "G, U, Z each", t, "B", "M·F·e", kind="exact", rel_tol=0),
        pred(
            "unfused_traffic",
            "SiLU then multiply: traffic",
            un,
            "B",
            "(G→S) + (S, U→Z) = 5 tensors",
            kind="exact",
            rel_tol=0.05,
        ),
        pred(
            "fused_traffic",
            "fused SiLU·multiply: traffic",
            fu,
            "B",
            "G, U → Z = 3 tensors",
            kind="exact",
            rel_tol=0.05,
        ),
        pred("traffic_ratio", "fused ÷ unfused", fu / un, "×", "72 / 120"),
        pred("speedup_bound", "speedup if bandwidth-bound", un / fu, "×", "120 / 72", rel_tol=0.15),
        pred(
            "unfused_quant_traffic",
            "SiLU, multiply, FP8 quantise: traffic",
            unq,
            "B",
            "+ (Z → Zq)",
            kind="exact",
            rel_tol=0.05,
        ),
        pred(
            "fused_quant_traffic",
            "all three fused: traffic",
            fuq,
            "B",
            "G, U → Zq",
            kind="exact",
            rel_tol=0.05,
        ),
        pred(
            "unfused_peak_memory",
            "peak memory, three separate steps",
            unq_peak,
            "B",
            "max over steps of live tensors",
            kind="exact",
            rel_tol=0,
        ),
        pred(
            "fused_peak_memory",
            "peak memory, fully fused",
            fuq_peak,
            "B",
            "G + U + Zq",
            kind="exact",
            rel_tol=0,
        ),
        pred(
            "unfused_working_set",
            "bytes touched, SiLU then multiply",
            un_touched,
            "B",
            "G + U + S + Z",
            kind="info",
        ),
        time_estimate(
            "unfused_time",
            "SiLU then multiply (two kernels): time",
            un_terms,
            t_un,
            "Σ kernels (t_kernel + max(stream, program lifetimes))",
            0.20,
            explanations=from_l2(un_k, un_touched, t_un),
        ),
        time_estimate(
            "fused_time",
            "fused SiLU·multiply (one kernel): time",
            fu_terms,
            t_fu,
            "t_kernel + max(stream, program lifetimes)",
            0.20,
            explanations=from_l2(fu_k, fu_touched, t_fu),
        ),
        pred(
            "speedup",
            "fused vs unfused, predicted",
            t_un / t_fu,
            "×",
            "ratio of the two time estimates",
            rel_tol=0.20,
        ),
        bound("unfused_time_bound", "SiLU then multiply: time at DRAM peak", un, un_touched),
        bound("fused_time_bound", "fused: time at DRAM peak", fu, fu_touched),
        bound("unfused_quant_time", "three steps: time at DRAM peak", unq, unq_touched),
        bound(
            "fused_quant_time",
            "fully fused incl. its extra fixed cost",
            fuq,
            fuq_touched,
            overhead,
            "traffic / DRAM BW + fixed overhead",
        ),
        pred(
            "saved_bytes_per_row",
            "bytes saved per row by full fusion",
            saved_row,
            "B",
            "(156 − 60 MiB) / M",
            kind="exact",
            rel_tol=0.01,
        ),
        pred("saved_time_per_row", "time saved per row", t_row, "s", "saved bytes / BW"),
        pred(
            "break_even_rows",
            "rows from which fusion pays for its overhead",
            overhead / t_row,
            "count",
            "overhead / saved time per row",
        ),
    ]


FUSION = Case(
    id="fusion.activation_chain",
    title="Fusing SiLU·multiply (and FP8 quantisation)",
    section="5.3 · Example 5-4, Figure 5-15, Experiment 5-2",
    summary=(
        "G = X·Wg, U = X·Wu, Z = SiLU(G) ⊙ U, each [1024, 12288] BF16 = 24 MiB. SiLU then multiply "
        "moves 120 MiB; fused, 72 MiB (time ratio 0.6, ≈ 1.7×). With the FP8 quantisation too: 156 "
        "vs 60 MiB. Peak memory only goes 72 → 60 MiB: capacity and traffic are different things. "
        "Experiment 5-2: with 5 µs more fixed cost and 1792 GB/s, fusion pays off from ≈ 91 rows."
    ),
    params=(
        Param("M", "count", 1024, "rows (tokens)", type="int", positive=True),
        Param("F", "count", 12288, "intermediate width", type="int", positive=True),
        Param("elem", "B", 2, "bytes per element (BF16)", type="int", positive=True),
        Param("q", "B", 1, "bytes per quantised element (FP8)", type="int", positive=True),
        Param("overhead", "µs", 5, "extra fixed cost of the fused kernel (Experiment 5-2)", min=0),
        Param(
            "flushed",
            "count",
            1,
            "1: the L2 is flushed before each run (the suite's timing); 0: data may stay in the L2 "
            "from the previous run",
            type="choice",
            choices=(0, 1),
            from_chapter=False,
        ),
        Param(
            "block_elems",
            "count",
            1024,
            "elements per program of the elementwise kernels (the suite's Triton kernel: 1024)",
            type="int",
            positive=True,
            from_chapter=False,
        ),
        Param(
            "resident",
            "count",
            16,
            "programs resident per SM (128-thread programs: 2048 / 128)",
            type="int",
            positive=True,
            from_chapter=False,
        ),
        p_kernel_floor(),
        p_dram(),
        p_l2(),
        p_latency(),
    ),
    model=_fusion,
    tables=_fusion_tables,
    figures=(
        Figure("G, U, Z: 24 MiB each", 24, "MiB", key="tensor_bytes"),
        Figure("unfused SiLU then multiply: 120 MiB", 120, "MiB", key="unfused_traffic"),
        Figure("fused: 72 MiB", 72, "MiB", key="fused_traffic"),
        Figure("time ratio 0.6", 0.6, "×", key="traffic_ratio"),
        Figure("≈ 1.7×", 1.7, "×", key="speedup_bound", tol=0.02),
        Figure("with FP8 quantisation: 156 MiB unfused", 156, "MiB", key="unfused_quant_traffic"),
        Figure("… 60 MiB fully fused", 60, "MiB", key="fused_quant_traffic"),
        Figure("peak memory 72 MiB …", 72, "MiB", key="unfused_peak_memory"),
        Figure("… → 60 MiB", 60, "MiB", key="fused_peak_memory"),
        Figure(
            "Experiment 5-2: saved bytes per row 96 KiB",
            96,
            "KiB",
            key="saved_bytes_per_row",
            source="reference note (chapter5-cases.md)",
        ),
        Figure(
            "… 54.9 ns per row at 1792 GB/s",
            54.9,
            "ns",
            key="saved_time_per_row",
            gpu=RTX_PRO,
            source="reference note (chapter5-cases.md)",
        ),
        Figure(
            "… fusion pays off from ≈ 91 rows",
            91,
            "count",
            key="break_even_rows",
            gpu=RTX_PRO,
            tol=0.01,
            source="reference note (chapter5-cases.md)",
        ),
        Figure(
            "measured on an RTX PRO 6000: SiLU then multiply 14.2 µs",
            14.2,
            "µs",
            key="unfused_time",
            gpu=RTX_PRO,
            measured=True,
            params={"flushed": 0},
        ),
        Figure(
            "… fused 7.7 µs",
            7.7,
            "µs",
            key="fused_time",
            gpu=RTX_PRO,
            measured=True,
            params={"flushed": 0},
        ),
        Figure(
            "… ≈ 1.8×", 1.8, "×", key="speedup", gpu=RTX_PRO, measured=True, params={"flushed": 0}
        ),
    ),
    measurements=(
        Measure(
            "ncu",
            "dram__bytes_read.sum + dram__bytes_write.sum",
            "unfused_traffic",
            "sum over the SiLU and multiply kernels (fused: the one kernel → fused_traffic)",
        ),
        Measure(
            "bench",
            "fusion.activation_chain/unfused_time",
            "unfused_time",
            "torch SiLU then mul, over M",
        ),
        Measure(
            "bench",
            "fusion.activation_chain/fused_time",
            "fused_time",
            "one fused Triton kernel, over M",
        ),
    ),
    default_gpu=RTX_PRO,
    chart=Chart(
        "M",
        (1, 8, 32, 64, 91, 128, 256, 512, 1024, 4096),
        ("unfused_quant_time", "fused_quant_time"),
        title="three steps vs fully fused (+ fixed overhead) vs rows",
        log_x=True,
    ),
)


# ------------------------------------------------------------------------------------------------
# pipeline.double_buffer — Example 5-5, Figure 5-17
# ------------------------------------------------------------------------------------------------


def _times(p, gpu) -> tuple[float, float]:
    if p.derive:
        return warpspec_times(gpu, p.block * KIB, p.intensity)
    return p.t_m * US, p.t_c * US


def _pipeline(p, gpu):
    t_m, t_c = _times(p, gpu)
    serial = pipeline_time(p.n, t_m, t_c, 1)
    piped = pipeline_time(p.n, t_m, t_c, p.slots)
    return [
        pred(
            "t_m",
            "move time per block",
            t_m,
            "s",
            "given, or bytes ÷ (BW/SMs) with derive=1",
            kind="info",
        ),
        pred(
            "t_c",
            "compute time per block",
            t_c,
            "s",
            "given, or FLOPs ÷ (peak/SMs) with derive=1",
            kind="info",
        ),
        pred("serial_time", "one buffer: move, then compute", serial, "s", "n·(t_m + t_c)"),
        pred("pipelined_time", f"{p.slots} buffers", piped, "s", "t_m + (n−1)·max(t_m, t_c) + t_c"),
        pred(
            "time_change",
            "change vs serial",
            100 * (piped / serial - 1),
            "%",
            "T_pipe / T_serial − 1",
        ),
        pred(
            "compute_busy",
            "compute unit busy",
            100 * p.n * t_c / piped,
            "%",
            "n·t_c / T_pipe",
            max_physical=100.0,
            physical="100 %",
        ),
        pred(
            "mover_busy",
            "mover busy",
            100 * p.n * t_m / piped,
            "%",
            "n·t_m / T_pipe",
            max_physical=100.0,
            physical="100 %",
        ),
        pred(
            "one_more_slot_time",
            f"with {p.slots + 1} buffers",
            pipeline_time(p.n, t_m, t_c, p.slots + 1),
            "s",
            "simulated",
        ),
        pred(
            "twice_faster_compute_time",
            "with compute twice as fast",
            pipeline_time(p.n, t_m, t_c / 2, p.slots),
            "s",
            "simulated",
        ),
        pred(
            "bound",
            "slower stage",
            "move" if t_m > t_c else "compute",
            "text",
            "the slower stage sets the pace",
        ),
    ]


PIPELINE = Case(
    id="pipeline.double_buffer",
    title="Double buffering: move the next block while computing this one",
    section="5.3 · Example 5-5, Figure 5-17",
    summary=(
        "T_pipe = t_m + (n − 1)·max(t_m, t_c) + t_c for n blocks. With n = 4, t_m = 1.29 µs and "
        "t_c = 0.28 µs (the H100 per-SM figures of Figure 5-5) double buffering only takes 6.28 µs "
        "to 5.44 µs (−13 %); the compute unit is busy ≈ 20 % of the time. Moving is the slow side, "
        "so a third slot or faster compute changes nothing: only fewer bytes or more bandwidth "
        "help. derive=1 takes t_m and t_c from the chosen GPU (Figure 5-5 model)."
    ),
    params=(
        Param("n", "count", 4, "blocks", type="int", min=1, max=100000),
        Param("t_m", "µs", 1.29, "move time per block", min=0),
        Param("t_c", "µs", 0.28, "compute time per block", min=0),
        Param("slots", "count", 2, "buffers (1 = no overlap)", type="int", min=1, max=64),
        Param(
            "derive",
            "count",
            0,
            "1: derive t_m, t_c from the GPU (block, intensity)",
            type="choice",
            choices=(0, 1),
        ),
        Param("block", "KiB", 32, "bytes per block (derive=1)", positive=True),
        Param("intensity", "FLOP/B", 64, "FLOPs per byte (derive=1)", positive=True),
    ),
    model=_pipeline,
    figures=(
        Figure("serial 6.28 µs", 6.28, "µs", key="serial_time"),
        Figure("double-buffered 5.44 µs", 5.44, "µs", key="pipelined_time"),
        Figure("−13 %", -13, "%", key="time_change", tol=0.04),
        Figure("compute busy only ≈ 20 % of the time", 20, "%", key="compute_busy", tol=0.05),
        Figure("a third slot changes nothing: 5.44 µs", 5.44, "µs", key="one_more_slot_time"),
        Figure(
            "faster compute changes nothing: 5.44 µs",
            5.44,
            "µs",
            key="twice_faster_compute_time",
            tol=0.03,
        ),
    ),
    measurements=(
        Measure(
            "ncu",
            "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
            "compute_busy",
            "tensor pipe busy % of a double-buffered kernel",
        ),
    ),
    default_gpu=H100,
    chart=Chart(
        "slots",
        (1, 2, 3, 4, 6, 8),
        ("pipelined_time",),
        title="pipeline time vs number of buffers",
        mark="bar",
    ),
)


# ------------------------------------------------------------------------------------------------
# backpressure.smem_budget
# ------------------------------------------------------------------------------------------------


def _backpressure(p, gpu):
    need_b = int((p.queue * p.block + p.reorder) * KIB)
    reserved = gpu.reserved_smem_per_block_bytes
    optin = gpu.smem_per_block_optin_bytes
    budget = min(optin, (gpu.smem_per_sm_bytes // p.resident - reserved) // 128 * 128)
    slots = max(0, math.floor((budget - p.reorder * KIB) / (p.block * KIB)))
    alloc = ceil_div(need_b + reserved, 128) * 128
    max_res = gpu.smem_per_sm_bytes // alloc if need_b <= optin else 0
    return [
        pred(
            "need_per_block",
            "queue + reorder space per block",
            need_b,
            "B",
            "queue·block + reorder",
            kind="exact",
            rel_tol=0,
        ),
        pred(
            "max_per_block",
            "largest shared memory one block may take",
            optin,
            "B",
            "GPU opt-in limit",
            kind="info",
        ),
        pred(
            "fits_alone",
            "one block with the full queue fits",
            "yes" if need_b <= optin else "no",
            "text",
            "need ≤ opt-in limit",
        ),
        pred(
            "budget_per_block",
            f"shared memory per block with {p.resident} resident",
            budget,
            "B",
            "min(opt-in, smem per SM / resident − reserved)",
            kind="exact",
            rel_tol=0,
        ),
        pred(
            "queue_slots",
            f"queue slots left with {p.resident} resident",
            min(slots, p.queue),
            "count",
            "floor((budget − reorder) / block), at most the queue length",
            kind="exact",
            rel_tol=0,
        ),
        pred(
            "max_resident_full_queue",
            "resident blocks with the full queue",
            max_res,
            "count",
            "floor(smem per SM / (need + reserved))",
            kind="exact",
            rel_tol=0,
        ),
    ]


BACKPRESSURE = Case(
    id="backpressure.smem_budget",
    title="Backpressure: a queue in shared memory",
    section="5.3",
    summary=(
        "Two stages with different access orders need a queue between them: three 16 KiB blocks "
        "plus 32 KiB of reorder space = 80 KiB per block. On an RTX PRO 6000 a block may take 99 "
        "KB, so one block fits alone; with two resident blocks each gets 49 KiB, leaving one queue "
        "slot after the reorder space: the mover must wait for compute to free it before writing "
        "the second block."
    ),
    params=(
        Param("queue", "count", 3, "queued blocks", type="int", min=0),
        Param("block", "KiB", 16, "bytes per queued block", positive=True),
        Param("reorder", "KiB", 32, "reorder space", min=0),
        Param("resident", "count", 2, "resident blocks per SM", type="int", min=1, max=64),
    ),
    model=_backpressure,
    figures=(
        Figure("three 16 KiB blocks + 32 KiB reorder = 80 KiB", 80, "KiB", key="need_per_block"),
        Figure("RTX PRO 6000: a block may take 99 KB", 99, "KiB", key="max_per_block", gpu=RTX_PRO),
        Figure(
            "two resident blocks get 49 KiB each", 49, "KiB", key="budget_per_block", gpu=RTX_PRO
        ),
        Figure("… leaving one queue slot", 1, "count", key="queue_slots", gpu=RTX_PRO),
    ),
    measurements=(),
    default_gpu=RTX_PRO,
    chart=Chart(
        "resident",
        (1, 2, 3, 4, 6, 8),
        ("queue_slots",),
        title="queue slots vs resident blocks",
        mark="bar",
    ),
)


# ------------------------------------------------------------------------------------------------
# flash.attention_traffic — Example 5-6, Figure 5-20
# ------------------------------------------------------------------------------------------------


def _flash(p, gpu):
    bw = need(gpu, "dram_bandwidth_bytes_per_s")
    peak = need(gpu, "bf16_dense_flop_per_s")
    h = p.heads
    one = p.L * p.d * p.elem * h
    required = 4 * one
    s = p.L * p.L * p.score * h
    extra = 4 * s  # S and P, each written once and read once
    flop_std = 4 * p.L * p.L * p.d * h  # QKᵀ and PV
    flop_flash = flop_std * (0.5 if p.causal else 1.0)
    t_std = max((required + extra) / bw, flop_std / peak)
    t_fl = max(required / bw, flop_flash / peak)
    rate, dram = p.tensor * 1e12, p.bw * 1e9
    # standard: QKᵀ, softmax (S -> P), PV as three kernels: the GEMMs at the tensor rate, S and P
    # through DRAM
    std_terms = [
        Term(
            "kernel floor",
            3 * p.t_kernel * US,
            "s",
            "3 × t_kernel (QKᵀ, softmax, PV)",
            src(p, "t_kernel"),
        ),
        Term("two GEMMs", flop_std / rate, "s", "4·L²·d / tensor rate", src(p, "tensor")),
        Term(
            "S and P through DRAM",
            (required + extra) / dram,
            "s",
            "(required + 4·L²·score bytes) / bw",
            src(p, "bw"),
        ),
    ]
    est_std = sum(t.value for t in std_terms)
    # flash: one kernel of heads × ceil(L / q_block) blocks; with fewer blocks than SMs the time is
    # the longest block's (causal: the last query block sees all L keys, twice the average block's
    # work)
    blocks = h * ceil_div(p.L, p.q_block)
    w = waves(blocks, gpu.sm_count, 1)
    per_sm = rate / gpu.sm_count
    longest = 4 * p.q_block * p.L * p.d
    t_work = max(
        flop_flash / (rate * min(1.0, blocks / gpu.sm_count)),
        longest / per_sm if blocks <= gpu.sm_count else 0.0,
        required / dram,
    )
    fl_terms = [
        Term("kernel floor", p.t_kernel * US, "s", "t_kernel", src(p, "t_kernel")),
        Term(
            "tensor work",
            t_work,
            "s",
            "max(FLOPs / (tensor rate × busy SMs), longest block's FLOPs / per-SM rate, "
            "required / bw); " + w.text,
            src(p, "tensor"),
        ),
    ]
    est_fl = p.t_kernel * US + t_work
    return [
        pred("qkvo_bytes", "Q, K, V, O each", one, "B", "L·d·e", kind="exact", rel_tol=0),
        pred(
            "required_traffic",
            "read Q, K, V, write O",
            required,
            "B",
            "4·L·d·e",
            kind="exact",
            rel_tol=0.05,
        ),
        pred("s_bytes", "S (and P) materialised in FP32", s, "B", "L²·4", kind="exact", rel_tol=0),
        pred(
            "standard_extra_traffic",
            "S and P written once and read once",
            extra,
            "B",
            "4·L²·4",
            kind="exact",
            rel_tol=0.05,
        ),
        pred("extra_vs_required", "extra ÷ required", extra / required, "×", "16·L / (e·d·…)"),
        pred(
            "flop",
            "attention FLOPs (QKᵀ and PV)",
            flop_std,
            "FLOP",
            "4·L²·d",
            kind="exact",
            rel_tol=0,
        ),
        time_estimate(
            "standard_time",
            "standard attention (the chapter's three steps): time",
            std_terms,
            est_std,
            "3 t_kernel + GEMMs + S and P through DRAM",
            0.30,
        ),
        time_estimate(
            "flash_time", "FlashAttention: time", fl_terms, est_fl, "t_kernel + tensor work", 0.30
        ),
        pred(
            "standard_time_bound",
            "standard attention: time lower bound",
            t_std,
            "s",
            "max((required + extra)/BW, FLOPs/peak)",
            kind="lower_bound",
        ),
        pred(
            "flash_time_bound",
            "FlashAttention: time lower bound",
            t_fl,
            "s",
            "max(required/BW, FLOPs/peak (halved when causal))",
            kind="lower_bound",
        ),
        pred(
            "speedup_bound",
            "speedup if both run at their bounds",
            t_std / t_fl,
            "×",
            "ratio of the bounds",
            kind="info",
        ),
        pred(
            "speedup",
            "speedup, predicted",
            est_std / est_fl,
            "×",
            "ratio of the two time estimates",
            rel_tol=0.30,
        ),
    ]


FLASH = Case(
    id="flash.attention_traffic",
    title="Standard attention vs FlashAttention: what must move",
    section="5.3 · Example 5-6, Figure 5-20",
    summary=(
        "One head, L = 8192, d = 128: Q, K, V, O are 2 MiB each (8 MiB must move). Standard "
        "attention materialises S and P (FP32, 256 MiB each), written once and read once: 1 GiB = "
        "128× what must move. Online softmax keeps, per row, the running max m, the sum ℓ of "
        "exponentials relative to m and the value sum u (output u/ℓ), so S and P never leave the "
        "chip."
    ),
    params=(
        Param("L", "count", 8192, "sequence length", type="int", positive=True),
        Param("d", "count", 128, "head dimension", type="int", positive=True),
        Param("elem", "B", 2, "bytes per element of Q, K, V, O (BF16)", type="int", positive=True),
        Param("score", "B", 4, "bytes per element of S and P (FP32)", type="int", positive=True),
        Param("heads", "count", 1, "heads × batch", type="int", positive=True),
        Param(
            "causal",
            "count",
            0,
            "causal mask (1: FlashAttention skips the masked half)",
            type="choice",
            choices=(0, 1),
        ),
        Param(
            "q_block",
            "count",
            128,
            "query rows per FlashAttention block",
            type="int",
            positive=True,
            from_chapter=False,
        ),
        p_kernel_floor(),
        p_dram(),
        p_tensor(),
    ),
    model=_flash,
    figures=(
        Figure("Q, K, V, O: 2 MiB each", 2, "MiB", key="qkvo_bytes"),
        Figure("S, P: 256 MiB each (FP32)", 256, "MiB", key="s_bytes"),
        Figure("S and P written once and read once: 1 GiB", 1, "GiB", key="standard_extra_traffic"),
        Figure("1 GiB = 128× what must move", 128, "×", key="extra_vs_required"),
        Figure(
            "RTX PRO 6000, causal, 8192 tokens: math backend 2.6 ms",
            2.6,
            "ms",
            key="standard_time",
            gpu=RTX_PRO,
            params={"causal": 1},
            measured=True,
        ),
        Figure(
            "… FlashAttention 80 µs",
            80,
            "µs",
            key="flash_time",
            gpu=RTX_PRO,
            params={"causal": 1},
            measured=True,
        ),
        Figure("… ≈ 33×", 33, "×", key="speedup", gpu=RTX_PRO, params={"causal": 1}, measured=True),
        Figure(
            "extra peak memory: 848 MiB (math) vs 22 MiB (flash)",
            848,
            "MiB",
            gpu=RTX_PRO,
            measured=True,
        ),
    ),
    measurements=(
        Measure(
            "bench",
            "flash.attention_traffic/math_time",
            "standard_time",
            "SDPA math backend, causal",
        ),
        Measure(
            "bench",
            "flash.attention_traffic/flash_time",
            "flash_time",
            "SDPA flash backend, causal",
        ),
        Measure(
            "ncu",
            "dram__bytes_read.sum + dram__bytes_write.sum",
            "required_traffic",
            "flash kernel DRAM bytes (≈ what must move)",
        ),
    ),
    default_gpu=RTX_PRO,
    chart=Chart(
        "L",
        (512, 1024, 2048, 4096, 8192, 16384, 32768),
        ("standard_time", "flash_time"),
        title="time lower bounds vs sequence length",
        log_x=True,
    ),
)


# ------------------------------------------------------------------------------------------------
# flash.kv_block_size — Figure 5-20, Experiment 5-3
# ------------------------------------------------------------------------------------------------


def kv_rows(budget: int, d: int, b: int, prefetch: int = 0, align: int = 1) -> int:
    """Largest a with 2ad + 2bd·(1 + prefetch) + 4ab + 4ad + 12a ≤ budget (rounded down to `align`)."""
    fixed = 2 * b * d * (1 + prefetch)
    per_row = 2 * d + 4 * b + 4 * d + 12
    a = (budget - fixed) // per_row
    return (a // align) * align


def _kv(p, gpu):
    def at(b):
        a = kv_rows(p.budget, p.d, b, p.prefetch, p.align)
        if a < 1:
            raise CaseError(
                f"with b={b} the K/V slots alone need {2 * b * p.d * (1 + p.prefetch)} B; no Q row "
                f"fits in the {p.budget} B budget"
            )
        scans = ceil_div(p.L, a)
        kv_scan = 2 * p.L * p.d * p.elem
        return a, scans, scans * kv_scan, scans * ceil_div(p.L, b)

    a, scans, traffic, updates = at(p.b)
    _, _, traffic_ref, updates_ref = at(p.ref_b)
    used = 2 * a * p.d + 2 * p.b * p.d * (1 + p.prefetch) + 4 * a * p.b + 4 * a * p.d + 12 * a
    return [
        pred(
            "a",
            "Q rows per block",
            a,
            "count",
            "max a: 2ad + 2bd + 4ab + 4ad + 12a ≤ budget",
            kind="exact",
            rel_tol=0,
        ),
        pred(
            "smem_used",
            "shared memory used",
            used,
            "B",
            "2ad + 2bd + 4ab + 4ad + 12a",
            kind="exact",
            rel_tol=0,
        ),
        pred("scans", "scans of K and V", scans, "count", "ceil(L / a)", kind="exact", rel_tol=0),
        pred(
            "kv_bytes_per_scan",
            "K + V per scan",
            2 * p.L * p.d * p.elem,
            "B",
            "2·L·d·e",
            kind="exact",
            rel_tol=0,
        ),
        pred("kv_traffic", "K/V traffic", traffic, "B", "scans × K+V", kind="exact", rel_tol=0.05),
        pred(
            "updates",
            "online-softmax updates (per Q block × K/V block)",
            updates,
            "count",
            "scans · ceil(L / b)",
            kind="exact",
            rel_tol=0,
        ),
        pred(
            "traffic_saved_vs_ref",
            f"traffic saved vs b={p.ref_b}",
            traffic - traffic_ref,
            "B",
            "traffic(b) − traffic(ref_b)",
            kind="exact",
            rel_tol=0,
        ),
        pred(
            "updates_ratio_vs_ref",
            f"updates with b={p.ref_b} ÷ updates with b={p.b}",
            updates_ref / updates,
            "×",
            "",
            rel_tol=0.02,
        ),
    ]


def _kv_validate(p, gpu):
    if p.b > p.L:
        raise CaseError(f"b={p.b} K/V rows per block is more than the sequence length L={p.L}")
    if p.ref_b > p.L:
        raise CaseError(f"ref_b={p.ref_b} is more than the sequence length L={p.L}")


KV = Case(
    id="flash.kv_block_size",
    title="K/V block size vs Q rows, rescans and softmax updates",
    section="5.3 · Figure 5-20, Experiment 5-3",
    summary=(
        "With a 99 KB (101,376 B) budget, 2ad (Q) + 2bd (K/V slot) + 4ab (scores) + 4ad (output "
        "accumulator) + 12a (row state) ≤ budget. Each Q block rescans all of K and V (4 MiB at L "
        "= 8192, d = 128). b = 64 → a = 82 → 100 scans = 400 MiB; b = 1 → a = 128 → 64 scans = 256 "
        "MiB: 144 MiB less, but 41× more online-softmax updates. A b×d BF16 prefetch slot "
        "(Experiment 5-3): a = 66, 125 scans, 500 MiB. The budget defaults to the GPU's per-block "
        "opt-in limit."
    ),
    params=(
        Param("L", "count", 8192, "sequence length", type="int", positive=True),
        Param("d", "count", 128, "head dimension", type="int", positive=True),
        Param("b", "count", 64, "K/V rows per block", type="int", positive=True),
        Param(
            "budget",
            "B",
            101376,
            "shared memory per block",
            type="int",
            positive=True,
            gpu_default=lambda g: g.smem_per_block_optin_bytes,
            gpu_default_text="the GPU's opt-in per-block limit",
        ),
        Param(
            "prefetch",
            "count",
            0,
            "extra b×d BF16 prefetch slot (Experiment 5-3)",
            type="choice",
            choices=(0, 1),
        ),
        Param(
            "align",
            "count",
            1,
            "round a down to a multiple of this (MMA granularity, e.g. 16)",
            type="int",
            positive=True,
            from_chapter=False,
        ),
        Param("elem", "B", 2, "bytes per K/V element (BF16)", type="int", positive=True),
        Param("ref_b", "count", 1, "K/V rows per block to compare with", type="int", positive=True),
    ),
    model=_kv,
    validate=_kv_validate,
    figures=(
        Figure("99 KB = 101,376 bytes", 101376, "B", key=None, gpu=RTX_PRO),
        Figure("b = 64 → a = 82", 82, "count", key="a", gpu=RTX_PRO),
        Figure("… 100 scans", 100, "count", key="scans", gpu=RTX_PRO),
        Figure("… 400 MiB", 400, "MiB", key="kv_traffic", gpu=RTX_PRO),
        Figure("K and V: 4 MiB per scan", 4, "MiB", key="kv_bytes_per_scan"),
        Figure("b = 1 → a = 128", 128, "count", key="a", gpu=RTX_PRO, params={"b": 1}),
        Figure("… 64 scans", 64, "count", key="scans", gpu=RTX_PRO, params={"b": 1}),
        Figure("… 256 MiB", 256, "MiB", key="kv_traffic", gpu=RTX_PRO, params={"b": 1}),
        Figure("from 64 to 1: 144 MiB less", 144, "MiB", key="traffic_saved_vs_ref", gpu=RTX_PRO),
        Figure(
            "… but 41× more updates (100·128 vs 64·8192)",
            41,
            "×",
            key="updates_ratio_vs_ref",
            gpu=RTX_PRO,
        ),
        Figure(
            "Experiment 5-3, prefetch slot: a = 66",
            66,
            "count",
            key="a",
            gpu=RTX_PRO,
            params={"prefetch": 1},
        ),
        Figure("… 125 scans", 125, "count", key="scans", gpu=RTX_PRO, params={"prefetch": 1}),
        Figure("… 500 MiB", 500, "MiB", key="kv_traffic", gpu=RTX_PRO, params={"prefetch": 1}),
    ),
    measurements=(
        Measure(
            "ncu",
            "dram__bytes_read.sum",
            "kv_traffic",
            "a FlashAttention-style kernel with these a, b",
        ),
    ),
    default_gpu=RTX_PRO,
    chart=Chart(
        "b",
        (1, 2, 4, 8, 16, 32, 64, 128),
        ("kv_traffic",),
        title="K/V traffic vs K/V block rows",
        log_x=True,
    ),
)


# ------------------------------------------------------------------------------------------------
# online_softmax.step — Example 5-6, Exercise 5-3 (runs on the CPU)
# ------------------------------------------------------------------------------------------------


def _stream(p):
    if len(p.s) != len(p.V):
        raise CaseError(f"s has {len(p.s)} scores but V has {len(p.V)} values")
    scores = list(p.s) + ([p.s_add] if p.add else [])
    values = list(p.V) + ([p.V_add] if p.add else [])
    return scores, values


def _softmax(p, gpu):
    scores, values = _stream(p)
    steps = numerics.online_softmax(scores, values)
    ref = numerics.direct_softmax(scores, values)
    last = steps[-1]
    return [
        pred("m", "running max m", last.m, "", "max of the scores", kind="exact", rel_tol=1e-12),
        pred(
            "l",
            "ℓ = Σ e^(s − m)",
            last.l,
            "",
            "rescaled by r = e^(m − m′) when m grows",
            kind="exact",
            rel_tol=1e-12,
        ),
        pred("u", "u = Σ e^(s − m)·V", last.u, "", "rescaled with ℓ", kind="exact", rel_tol=1e-12),
        pred("output", "output u / ℓ", last.out, "", "u / ℓ", kind="exact", rel_tol=1e-12),
        pred(
            "direct_output",
            "direct softmax-weighted sum (float64)",
            ref,
            "",
            "Σ softmax(s)·V",
            kind="info",
        ),
        pred("abs_error", "|online − direct|", abs(last.out - ref), "", "", kind="info"),
    ]


def _softmax_tables(p, gpu):
    scores, values = _stream(p)
    return {
        "steps": [
            {
                "block": s.block,
                "s": s.score,
                "V": s.value,
                "m'": s.m,
                "r = e^(m-m')": s.r,
                "p = e^(s-m')": s.p,
                "l' = r·l + p": s.l,
                "u' = r·u + p·V": s.u,
                "u'/l'": s.out,
            }
            for s in numerics.online_softmax(scores, values)
        ]
    }


SOFTMAX = Case(
    id="online_softmax.step",
    title="Online softmax, one element per block",
    section="5.3 · Example 5-6, Exercise 5-3",
    summary=(
        "State (m, ℓ, u): for each new (score s, value V), m′ = max(m, s), r = e^(m − m′), p = "
        "e^(s − m′), ℓ′ = r·ℓ + p, u′ = r·u + p·V; output u′/ℓ′. When the max grows, ℓ and u are "
        "both rescaled so the relative weights stay. Exercise 5-3 adds an element with score ln 4 "
        "and value 5. The chapter's demo stream is interactive and not in its text; the default "
        "stream here, scores (0, ln 2) with values (1, 2), is chosen so the exercise gives round "
        "numbers (weights 1 : 2 : 4, output 25/7)."
    ),
    params=(
        Param(
            "s",
            "",
            (0.0, math.log(2.0)),
            "scores before the exercise's element (e.g. 0,ln2)",
            type="floats",
            from_chapter=False,
        ),
        Param("V", "", (1.0, 2.0), "values, one per score", type="floats", from_chapter=False),
        Param("add", "count", 1, "1: add Exercise 5-3's element", type="choice", choices=(0, 1)),
        Param("s_add", "", math.log(4.0), "score of the added element (ln 4)"),
        Param("V_add", "", 5.0, "value of the added element"),
    ),
    model=_softmax,
    tables=_softmax_tables,
    figures=(
        Figure(
            "Exercise 5-3: add score ln 4, value 5 — the output must equal the direct softmax "
            "(default stream: 25/7)",
            25 / 7,
            "",
            key="output",
            tol=1e-9,
            source="worked here",
        ),
    ),
    measurements=(
        Measure(
            "bench",
            "numerics (CPU): analyzers.cases.numerics.online_softmax",
            "output",
            "runs here; compared with the float64 direct softmax",
        ),
    ),
)

CASES = (FUSION, PIPELINE, BACKPRESSURE, FLASH, KV, SOFTMAX)
