"""Which textbook cases a profiled launch runs, recognised by what it does (its counters and
launch), never by its name; the case's parameters inferred from the launch itself, so a launch is
only ever compared with the prediction for its own configuration.

More: docs/architecture.md, *analyzers.cases.kernel_match*.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from analyzers.cases.catalog import Comparison, compare, evaluate, measurements_from_ncu
from analyzers.cases.model import CaseError
from analyzers.cases.verdicts import Measurement
from analyzers.gpus import GPUSpec
from analyzers.units import number_of

SMEM_SHARE_MIN = 0.25
POW2_TOL = 0.02
TILES = (16, 32, 64, 128, 256)
K_STEPS = (8, 16, 32, 64)


@dataclass
class KernelCase:
    case_id: str
    section: str
    params: dict  # every parameter set from the launch
    inferred: dict[str, str] = field(default_factory=dict)  # parameter -> how it was inferred
    comparisons: list[Comparison] = field(default_factory=list)
    problem: str | None = None


def _pow2(x: float) -> int | None:
    if x is None or x < 0.95:
        return None
    p = 2 ** round(math.log2(x))
    return int(p) if abs(x - p) / p <= POW2_TOL and p <= 32 else None


def _column_read(row: dict, gpu: GPUSpec):
    wf, cf = number_of(row, "smem_ld_wavefronts"), number_of(row, "smem_ld_bank_conflicts")
    req = (number_of(row, "smem_ld_requests") or 0) + (number_of(row, "smem_ldsm_requests") or 0)
    d, clk = number_of(row, "duration_ns"), number_of(row, "sm_clock_hz")
    if not (wf and cf is not None and req and d and clk and gpu.sm_count):
        return None
    if wf / (gpu.sm_count * clk) * 1e9 < SMEM_SHARE_MIN * d:
        return None
    phases = (wf - cf) / req
    q = round(phases)
    if q not in (1, 2, 4) or abs(phases - q) > 0.03 * q:
        return None
    degree = _pow2(wf / (wf - cf))
    if degree is None:
        return None
    width = 4 * q
    stride = q * (degree if degree > 1 else 33)
    how = {
        "width": f"{width} B: {phases:.2f} ideal wavefronts per shared load instruction "
        "((wavefronts − conflicts) / instructions) = the phases of a {width}-byte access".replace(
            "{width}", str(width)
        ),
        "stride": (
            f"{stride} words: the measured conflict degree {wf / (wf - cf):.2f} ≈ {degree} = "
            f"gcd(stride / {q}, {32 // q}); "
            + (
                "any stride coprime with 32 (a padded row) gives 1"
                if degree == 1
                else f"any stride with that gcd gives {degree}"
            )
        ),
    }
    meas = [
        Measurement(
            wf / req,
            "count",
            "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum ÷ "
            "smsp__sass_inst_executed_op_shared_ld.sum",
            quantity="wavefronts",
            gpu=gpu.name,
        )
    ]
    return {"stride": stride, "width": width}, how, meas


def _transpose(row: dict, gpu: GPUSpec):
    bx, by, bz = (number_of(row, f"block_{a}") for a in "xyz")
    gx, gy = number_of(row, "grid_x"), number_of(row, "grid_y")
    smem = number_of(row, "smem_static_bytes")
    rd, wr = number_of(row, "dram_read_bytes"), number_of(row, "dram_write_bytes")
    flop = (number_of(row, "flop_fp32") or 0) + (number_of(row, "flop_tensor") or 0)
    if not (
        bx
        and bx == by
        and (bz or 1) == 1
        and int(bx) in (8, 16, 32)
        and smem
        and rd
        and wr
        and gx
        and gx == gy
    ):
        return None
    t = int(bx)
    pad = smem / (4 * t) - t
    if pad < 0 or pad != int(pad) or pad > 32 or flop > 0.01 * rd or abs(rd - wr) > 0.2 * rd:
        return None
    n = int(gx) * t
    how = {
        "t": f"{t}: the block is {t} × {t} threads",
        "pad": f"{int(pad)}: static shared memory {smem:,.0f} B = t·(t + pad)·4",
        "n": f"{n}: grid {int(gx)} × t",
    }
    return {"t": t, "pad": int(pad), "n": n}, how, []


def _tiling(row: dict, gpu: GPUSpec):
    gx, gy = number_of(row, "grid_x"), number_of(row, "grid_y")
    smem = (number_of(row, "smem_static_bytes") or 0) + (number_of(row, "smem_dynamic_bytes") or 0)
    flop = (number_of(row, "flop_fp32") or 0) + (number_of(row, "flop_tensor") or 0)
    wr = number_of(row, "dram_write_bytes")
    if not (gx and gy and gy > 1 and smem and flop > 0 and wr):
        return None
    fits = []
    for m in TILES:
        for n in TILES:
            for k in K_STEPS:
                for stage in (2, 4):
                    for acc in (0, 4):
                        if stage * k * (m + n) + acc * m * n != smem:
                            continue
                        M, N = int(gy) * m, int(gx) * n
                        K = flop / (2 * M * N)
                        if K < k or abs(K / k - round(K / k)) >= 0.005:
                            continue
                        e = _elem(wr, M * N)
                        if e is not None:
                            fits.append((m, n, k, stage, acc, M, N, int(round(K / k)) * k, e))
    shapes = {(f[0], f[1]) for f in fits}
    if len(shapes) != 1:
        return None
    m, n, k, stage, acc, M, N, K, e = fits[0]
    how = {
        "m, n": f"{m} × {n}: the only tile shape whose staged tiles fit the {smem:,.0f} B of "
        f"shared memory (S = stage·k·(m + n) + acc·m·n with stage {stage}, k {k}, acc {acc}) and "
        "give a whole K and element size",
        "M, N": f"{M}, {N}: grid ({int(gx)}, {int(gy)}) × the tile",
        "K": f"{K}: FLOP ÷ (2·M·N)",
        "elem": f"{e} B: the smallest element size with e·M·N ≥ the DRAM writes ({wr:,.0f} B; C "
        "is written once, and part of it can stay in L2 when the kernel ends)",
    }
    params = {"M": M, "N": N, "K": K, "m": m, "n": n, "k": k, "stage": stage, "acc": acc, "elem": e}
    if number_of(row, "block_size"):
        params["threads"] = int(number_of(row, "block_size"))
    if number_of(row, "registers_per_thread") is not None:
        params["regs"] = int(number_of(row, "registers_per_thread"))
    return params, how, []


def _elem(writes: float, mn: int) -> int | None:
    """Element size of C from the DRAM writes: the smallest of 1, 2, 4 B with e·M·N >= writes (2 %
    slack), if at least half of C reached DRAM."""
    for e in (1, 2, 4):
        if e * mn >= 0.98 * writes:
            return e if writes >= 0.5 * e * mn else None
    return None


#: quantities a recogniser reads to infer the parameters: shown as inferred, never as a verdict
USED_FOR_INFERENCE = {
    "bank.column_read": {"degree", "conflicts"},
    "transpose.tile": set(),
    "tiling.traffic": set(),
}

RECOGNISERS = {
    "bank.column_read": _column_read,
    "transpose.tile": _transpose,
    "tiling.traffic": _tiling,
}


def infer(row: dict, gpu: GPUSpec) -> dict[str, tuple[dict, dict, list]]:
    """case id -> (parameters, how each was inferred, extra measurements) for the cases this launch runs."""
    out = {}
    for cid, rec in RECOGNISERS.items():
        r = rec(row, gpu)
        if r is not None:
            out[cid] = r
    return out


def kernel_comparisons(
    row: dict, metrics: dict[str, float], gpu: GPUSpec, source: str = "ncu"
) -> list[KernelCase]:
    """For each case the launch runs (module docstring): the case evaluated on this GPU with the
    launch's own parameters, compared with its counters (metric name -> value in base units)."""
    out = []
    for cid, (params, how, extra) in infer(row, gpu).items():
        try:
            ev = evaluate(cid, gpu if gpu.from_registry else None, params)
            used = USED_FOR_INFERENCE.get(cid, set())
            extra = [replace(x, source=f"{source}: {x.source}") for x in extra]
            meas = [
                x
                for x in measurements_from_ncu(cid, metrics, source=source, gpu=gpu.name) + extra
                if x.quantity in ev.predictions and x.quantity not in used
            ]
            out.append(KernelCase(cid, ev.case.section, params, how, compare(ev, meas)))
        except (LookupError, CaseError, ValueError) as e:
            out.append(KernelCase(cid, "", params, how, [], e.args[0] if e.args else str(e)))
    return out
