"""Section 5.4 — compilers: legal and illegal transformations, FP8 scales, fusion that reads more, choice."""

from __future__ import annotations

import math

import numpy as np

from analyzers.cases import numerics
from analyzers.cases.model import (
    US,
    Case,
    Chart,
    Figure,
    Measure,
    Param,
    ceil_div,
    check_tile,
    pred,
)


# ------------------------------------------------------------------------------------------------
# fusion.illegal_moves — loop transforms
# ------------------------------------------------------------------------------------------------


def _illegal(p, gpu):
    c = p.M * p.N * p.elem
    return [
        pred("intermediate_bytes", "intermediate C", c, "B", "M·N·e", kind="exact", rel_tol=0),
        pred(
            "saved_traffic",
            "traffic saved by compute_at (C not written and re-read)",
            2 * c,
            "B",
            "2·M·N·e",
            kind="exact",
            rel_tol=0.05,
        ),
        pred(
            "output_tiles",
            "output tiles (io, jo)",
            ceil_div(p.M, p.BM) * ceil_div(p.N, p.BN),
            "count",
            "ceil(M/BM)·ceil(N/BN)",
            kind="exact",
            rel_tol=0,
        ),
        pred(
            "k_blocks",
            "reduction blocks (ko)",
            ceil_div(p.K, p.BK),
            "count",
            "ceil(K/BK)",
            kind="exact",
            rel_tol=0,
        ),
        pred(
            "acc_bytes",
            "FP32 accumulator per tile",
            p.BM * p.BN * 4,
            "B",
            "BM·BN·4",
            kind="exact",
            rel_tol=0,
        ),
        pred(
            "a_tile_bytes",
            "A tile per ko step",
            p.BM * p.BK * p.elem,
            "B",
            "BM·BK·e",
            kind="exact",
            rel_tol=0,
        ),
        pred(
            "w_tile_bytes",
            "W tile per ko step",
            p.BK * p.BN * p.elem,
            "B",
            "BK·BN·e",
            kind="exact",
            rel_tol=0,
        ),
    ]


def _illegal_validate(p, gpu):
    check_tile(p.BM, "BM", p.M, "M")
    check_tile(p.BN, "BN", p.N, "N")
    check_tile(p.BK, "BK", p.K, "K")


ILLEGAL = Case(
    id="fusion.illegal_moves",
    title="Loop transforms: what compute_at saves and which moves are illegal",
    section="5.4",
    summary=(
        "Y = SiLU(A·W): split i into (io, ii), reorder, split K into reduction blocks of 32 and "
        "compute SiLU at each output tile after the ko loop (compute_at): the 24 MiB intermediate "
        "C is never written and re-read (48 MiB saved). Illegal: moving the activation into the "
        "reduction (changes the mathematics), dropping the BF16 rounding (changes the numbers), "
        "softmax by blocks without the statistics (two blocks with values 1 and 3 each normalise "
        "to 1). The table shows an input that tells each illegal move apart."
    ),
    params=(
        Param("M", "count", 1024, "rows", type="int", positive=True),
        Param("N", "count", 12288, "columns", type="int", positive=True),
        Param("K", "count", 4096, "reduction length", type="int", positive=True),
        Param("BM", "count", 64, "output tile rows", type="int", positive=True),
        Param("BN", "count", 64, "output tile columns", type="int", positive=True),
        Param("BK", "count", 32, "reduction block", type="int", positive=True),
        Param("elem", "B", 2, "bytes per element (BF16)", type="int", positive=True),
    ),
    model=_illegal,
    validate=_illegal_validate,
    tables=lambda p, gpu: {"illegal_moves": numerics.illegal_moves_demo()},
    figures=(
        Figure("compute_at saves 48 MiB", 48, "MiB", key="saved_traffic"),
        Figure("16 × 192 = 3072 output tiles", 3072, "count", key="output_tiles"),
        Figure("K split into 128 reduction blocks", 128, "count", key="k_blocks"),
        Figure("FP32 accumulator 16 KiB", 16, "KiB", key="acc_bytes"),
        Figure("A and W tiles 4 KiB each", 4, "KiB", key="a_tile_bytes"),
    ),
    measurements=(),
)


# ------------------------------------------------------------------------------------------------
# quant.fp8_row_scale — Example 5-7
# ------------------------------------------------------------------------------------------------


def _fp8(p, gpu):
    row_bytes = p.K * p.elem
    fits = row_bytes + gpu.reserved_smem_per_block_bytes <= gpu.smem_per_block_optin_bytes
    rng = np.random.default_rng(p.seed)
    row = rng.standard_normal(p.K)
    whole = numerics.fp8_row_quantize(row)
    part = numerics.fp8_row_quantize(row, p.partial) if p.partial < p.K else whole
    return [
        pred("row_bytes", "one row", row_bytes, "B", "K·e", kind="exact", rel_tol=0),
        pred(
            "fp8_max", "E4M3FN largest value", numerics.E4M3_MAX, "", "448", kind="exact", rel_tol=0
        ),
        pred(
            "dram_reads_per_row",
            "DRAM reads of the row",
            1 if fits else 2,
            "count",
            "1 if the row stays on chip between the max and the quantisation, else 2",
            kind="exact",
            rel_tol=0,
        ),
        pred(
            "max_rel_error",
            "max relative error, scale from the whole row",
            whole["max_rel_error"],
            "",
            "E4M3 rounding of x/scale",
            kind="info",
        ),
        pred(
            "clipped_partial_scale",
            f"values clipped when the scale sees only the first {p.partial}",
            part["clipped"],
            "count",
            "|x|/scale > 448",
            kind="info",
        ),
        pred(
            "max_rel_error_partial_scale",
            "max relative error with that partial scale",
            part["max_rel_error"],
            "",
            "",
            kind="info",
        ),
    ]


FP8 = Case(
    id="quant.fp8_row_scale",
    title="FP8 row scale needs the whole row first",
    section="5.4 · Example 5-7",
    summary=(
        "E4M3FN's largest value is 448, so the row scale is max|x| / 448: a reduction over the "
        "whole row must finish before any element can be quantised. A kernel that quantises while "
        "it streams the row must either keep the row on chip or read it twice; a scale from part "
        "of the row clips the larger values (shown on a random row, run here with numpy)."
    ),
    params=(
        Param("K", "count", 4096, "row length", type="int", positive=True, max=1 << 22),
        Param("elem", "B", 2, "bytes per input element (FP16/BF16)", type="int", positive=True),
        Param(
            "partial",
            "count",
            64,
            "elements a streaming kernel has seen when it must pick a scale",
            type="int",
            positive=True,
            from_chapter=False,
        ),
        Param("seed", "count", 0, "random seed", type="int", min=0, from_chapter=False),
    ),
    model=_fp8,
    figures=(Figure("E4M3FN max = 448", 448, "", key="fp8_max"),),
    measurements=(),
)


# ------------------------------------------------------------------------------------------------
# quant.fused_reads — Example 5-8 ("fusion reads 40 % more")
# ------------------------------------------------------------------------------------------------


def _fused_reads(p, gpu):
    a_in = p.M * p.K * p.in_bytes
    a_q = p.M * p.K * p.q
    cols = ceil_div(p.N, p.n)
    rows = ceil_div(p.M, p.m)
    w_out = rows * p.K * p.N * p.q + p.M * p.N * p.out
    sep = a_in + a_q + cols * a_q + w_out
    fus = a_in + cols * a_in + w_out
    return [
        pred("a_input_bytes", "A in FP16", a_in, "B", "M·K·2", kind="exact", rel_tol=0),
        pred("a_fp8_bytes", "A in FP8", a_q, "B", "M·K·1", kind="exact", rel_tol=0),
        pred(
            "column_blocks", "output column blocks", cols, "count", "N / n", kind="exact", rel_tol=0
        ),
        pred(
            "weights_and_output",
            "weights (re-read per row block) and output",
            w_out,
            "B",
            "(M/m)·K·N·1 + M·N·2",
            kind="exact",
            rel_tol=0,
        ),
        pred(
            "separate_traffic",
            "quantise first, then matmul",
            sep,
            "B",
            "read A + write FP8 + (N/n)·FP8 A + W&out",
            kind="exact",
            rel_tol=0.05,
        ),
        pred(
            "fused_traffic",
            "quantise inside the matmul",
            fus,
            "B",
            "read A (scales) + (N/n)·FP16 A + W&out",
            kind="exact",
            rel_tol=0.05,
        ),
        pred(
            "fused_extra", "fused reads more by", 100 * (fus / sep - 1), "%", "fused / separate − 1"
        ),
    ]


def _fused_reads_validate(p, gpu):
    check_tile(p.m, "m", p.M, "M")
    check_tile(p.n, "n", p.N, "N")


FUSED_READS = Case(
    id="quant.fused_reads",
    title="Fusing the quantisation into the matmul reads 40 % more",
    section="5.4 · Example 5-8",
    summary=(
        "A [4096, 4096] FP16 → FP8, W [4096, 1536] FP8. Separately: read 32 MiB, write 16 MiB of "
        "FP8, and each of the 12 output column blocks (n = 128) re-reads 16 MiB of FP8. Fused into "
        "the matmul: read 32 MiB once for the row scales, then each column block re-reads 32 MiB "
        "of FP16 and quantises in place. Weights and output are 204 MiB in both. 444 vs 620 MiB: "
        "+40 %."
    ),
    params=(
        Param("M", "count", 4096, "rows of A", type="int", positive=True),
        Param("K", "count", 4096, "columns of A", type="int", positive=True),
        Param("N", "count", 1536, "columns of W", type="int", positive=True),
        Param(
            "m",
            "count",
            128,
            "output tile rows (W is re-read per row block)",
            type="int",
            positive=True,
        ),
        Param("n", "count", 128, "output tile columns", type="int", positive=True),
        Param("in_bytes", "B", 2, "bytes per input element (FP16)", type="int", positive=True),
        Param("q", "B", 1, "bytes per FP8 element", type="int", positive=True),
        Param("out", "B", 2, "bytes per output element", type="int", positive=True),
    ),
    model=_fused_reads,
    validate=_fused_reads_validate,
    figures=(
        Figure("read 32 MiB of FP16", 32, "MiB", key="a_input_bytes"),
        Figure("write 16 MiB of FP8", 16, "MiB", key="a_fp8_bytes"),
        Figure("12 output column blocks", 12, "count", key="column_blocks"),
        Figure("weights and output 204 MiB in both", 204, "MiB", key="weights_and_output"),
        Figure("separate: 444 MiB", 444, "MiB", key="separate_traffic"),
        Figure("fused: 620 MiB", 620, "MiB", key="fused_traffic"),
        Figure("+40 %", 40, "%", key="fused_extra", tol=0.02),
    ),
    measurements=(
        Measure(
            "ncu",
            "dram__bytes_read.sum + dram__bytes_write.sum",
            "separate_traffic",
            "sum over the quantise and matmul kernels (fused: one kernel → fused_traffic)",
        ),
    ),
    chart=Chart(
        "n",
        (32, 64, 128, 256, 512),
        ("separate_traffic", "fused_traffic"),
        title="traffic vs output column block",
        log_x=True,
    ),
)


# ------------------------------------------------------------------------------------------------
# dispatch.call_ratio — Example 5-9, Experiment 5-6
# ------------------------------------------------------------------------------------------------


def _root(d0: float, d1: float) -> float:
    """p where the linear difference d(p) = d0 + (d1 − d0)·p crosses zero; nan if it never does in [0, 1]."""
    if d1 == d0:
        return math.nan
    r = d0 / (d0 - d1)
    return r if 0.0 <= r <= 1.0 else math.nan


def _dispatch(p, gpu):
    old = p.p * p.old_a + (1 - p.p) * p.old_b
    new = p.p * p.new_a + (1 - p.p) * p.new_b
    ma, mb = min(p.old_a, p.new_a), min(p.old_b, p.new_b)
    choose = p.p * ma + (1 - p.p) * mb + p.select
    # new − old at p = 0 and p = 1; choose − old likewise
    p_new = _root(p.new_b - p.old_b, p.new_a - p.old_a)
    p_choose = _root(mb + p.select - p.old_b, ma + p.select - p.old_a)
    best = min((old, "old"), (new, "new"), (choose, "choose per shape"))[1]
    return [
        pred(
            "old_mean", "old implementation, mean per call", old * US, "s", "p·A_old + (1−p)·B_old"
        ),
        pred(
            "new_mean", "new implementation, mean per call", new * US, "s", "p·A_new + (1−p)·B_new"
        ),
        pred(
            "choose_mean",
            "choose per shape (+ selection cost)",
            choose * US,
            "s",
            "p·min(A) + (1−p)·min(B) + c",
        ),
        pred(
            "break_even_new",
            "p above which new beats old",
            p_new,
            "",
            "(B_new − B_old) / ((B_new − B_old) − (A_new − A_old))",
            kind="exact",
            rel_tol=0.001,
        ),
        pred(
            "break_even_choose",
            "p above which choosing per shape beats always-old",
            p_choose,
            "",
            "root of p·(min A − A_old) + (1−p)·(min B − B_old) + c",
            kind="exact",
            rel_tol=0.001,
        ),
        pred("best", "best strategy at this p", best, "text", "smallest mean"),
    ]


DISPATCH = Case(
    id="dispatch.call_ratio",
    title="Which implementation wins depends on the call mix",
    section="5.4 · Example 5-9, Experiment 5-6",
    summary=(
        "Old: A and B both 10 µs; new: A 5 µs, B 20 µs. With a fraction p of calls being A the new "
        "mean is 5p + 20(1 − p): better only if p > 2/3 (p = 1/2 → 12.5 µs, 2/3 → 10, 9/10 → 6.5). "
        "Choosing per shape at +1 µs per call beats always-old when 5p + 10(1 − p) + 1 < 10, i.e. "
        "p > 0.2."
    ),
    params=(
        Param("p", "", 0.5, "fraction of calls that are shape A", min=0, max=1),
        Param("old_a", "µs", 10, "old implementation on A", min=0),
        Param("old_b", "µs", 10, "old implementation on B", min=0),
        Param("new_a", "µs", 5, "new implementation on A", min=0),
        Param("new_b", "µs", 20, "new implementation on B", min=0),
        Param("select", "µs", 1, "cost of choosing per call (Experiment 5-6)", min=0),
    ),
    model=_dispatch,
    figures=(
        Figure("p = 1/2 → 12.5 µs", 12.5, "µs", key="new_mean"),
        Figure("p = 2/3 → 10 µs", 10, "µs", key="new_mean", params={"p": 2 / 3}),
        Figure("p = 9/10 → 6.5 µs", 6.5, "µs", key="new_mean", params={"p": 0.9}),
        Figure("new is better only if p > 2/3", 2 / 3, "", key="break_even_new", tol=0.001),
        Figure(
            "choosing per shape at +1 µs beats always-old when p > 0.2",
            0.2,
            "",
            key="break_even_choose",
            tol=0.001,
        ),
    ),
    measurements=(
        Measure(
            "trace",
            "kernel time per input shape × calls per shape",
            "new_mean",
            "mean per call from a trace's per-shape kernel durations",
        ),
    ),
    chart=Chart(
        "p",
        tuple(i / 20 for i in range(21)),
        ("old_mean", "new_mean", "choose_mean"),
        title="mean time per call vs fraction of calls that are A",
    ),
)


# ------------------------------------------------------------------------------------------------
# autotune.payback
# ------------------------------------------------------------------------------------------------


def _autotune(p, gpu):
    saved = (p.before - p.after) * US
    calls = p.tune / saved if saved > 0 else math.inf
    return [
        pred("saved_per_call", "time saved per call", saved, "s", "t_before − t_after"),
        pred(
            "break_even_calls",
            "calls until tuning pays back",
            calls,
            "count",
            "T_tune / saved per call",
            kind="info",
        ),
        pred(
            "payback_time",
            "wall time until it pays back",
            calls / p.rate if p.rate else math.inf,
            "s",
            "calls / call rate",
            kind="info",
        ),
    ]


AUTOTUNE = Case(
    id="autotune.payback",
    title="How long until tuning pays back",
    section="5.4",
    summary=(
        "Break-even calls = tuning time ÷ time saved per call; at a given call rate that is a wall "
        "time. The chapter's calculator is interactive; the defaults here are illustrative."
    ),
    params=(
        Param("tune", "s", 60, "tuning time", min=0, from_chapter=False),
        Param("before", "µs", 20, "time per call before tuning", min=0, from_chapter=False),
        Param("after", "µs", 15, "time per call after tuning", min=0, from_chapter=False),
        Param("rate", "count", 1000, "calls per second", min=0, from_chapter=False),
    ),
    model=_autotune,
    measurements=(
        Measure(
            "bench",
            "compile.amortization/first_call_time",
            None,
            "autotuning time ≈ first-call time of an autotuned Triton kernel",
        ),
    ),
)

CASES = (ILLEGAL, FP8, FUSED_READS, DISPATCH, AUTOTUNE)
