"""Consistency checks on the chapter itself.

1. Every measured figure of the chapter judged against its case's model on the GPU it was measured
   on (e.g. Example 5-4: 120 MiB in 14.2 µs on an RTX PRO 6000 is 4.9× its DRAM peak: only possible
   because the working set fits in its 128 MiB L2).
2. Arithmetic between the chapter's own numbers where no model applies (vLLM's 2.7× vs the 38 % busy
   bound,
   FlashInfer's copies, DeepSeek's "about a quarter", the request length implied by two percentages,
   …).
All numbers come from the case catalog's figures, its models and the GPU registry (the thresholds
'about a quarter' and '−9 %' are the chapter's words).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from analyzers.cases.catalog import evaluate, figure_checks, get_case
from analyzers.units import fmt
from analyzers.gpus import get_gpu


@dataclass(frozen=True)
class ChapterCheck:
    case: str
    title: str
    verdict: str
    explanation: str

    def to_json(self) -> dict:
        return {
            "case": self.case,
            "title": self.title,
            "verdict": self.verdict,
            "explanation": self.explanation,
        }


def _figure(case_id: str, startswith: str):
    """The case's figure whose text starts with `startswith`."""
    for f in get_case(case_id).figures:
        if f.text.startswith(startswith):
            return f
    raise KeyError(f"{case_id}: no figure starting with {startswith!r}")


def _fig(case_id: str, startswith: str) -> float:
    """Base-unit value of the case's figure whose text starts with `startswith`."""
    return _figure(case_id, startswith).base_value()


def _close(a: float, b: float, tol: float) -> bool:
    return math.isclose(a, b, rel_tol=tol)


def _ratio_check(
    case_id: str, title: str, num: float, den: float, quoted, tol: float, what: str
) -> ChapterCheck:
    r = num / den
    ok = _close(r, quoted.value, tol)
    return ChapterCheck(
        case_id,
        title,
        "agrees" if ok else "differs-unexplained",
        f"{what} = {r:.3g}× (quoted {quoted.text.lstrip('… ')}): "
        f"{'consistent' if ok else 'inconsistent'}.",
    )


def arithmetic_checks() -> list[ChapterCheck]:
    out = []

    busy = _fig("runtime.host_bound", "GPU busy") / 100
    gain = _fig("runtime.host_bound", "throughput")
    bound = 1 / busy
    out.append(
        ChapterCheck(
            "runtime.host_bound",
            "2.7× vs what removing host time can give",
            "agrees" if gain <= bound * 1.02 else "differs-explained",
            f"with the GPU busy {busy:.0%} of each step, removing every host wait gives at most "
            f"1/{busy:.2f} = {bound:.2f}×; the reported {gain:g}× is "
            + (
                "within that bound."
                if gain <= bound * 1.02
                else "above it, which fits the chapter's own caveat: it combines three changes "
                "measured with all requests arriving at once (larger batches), so not all of it is "
                "removed host time."
            ),
        )
    )

    rtx = get_gpu(get_case("transpose.tile").default_gpu)
    t16 = _fig("transpose.tile", "RTX PRO 6000: 16×16")
    t32 = _fig("transpose.tile", "RTX PRO 6000: 32×32")
    chk = _ratio_check(
        "transpose.tile",
        "7.9 vs 2.9 µs transposes",
        t16,
        t32,
        _figure("transpose.tile", "… 2.7×"),
        0.02,
        "7.9 µs / 2.9 µs",
    )
    max_bytes = t32 * rtx.dram_bandwidth_bytes_per_s
    n_max = math.isqrt(int(max_bytes / 8))
    out.append(
        ChapterCheck(
            chk.case,
            chk.title,
            chk.verdict,
            chk.explanation
            + (
                " The chapter gives no matrix size: at the "
                f"{fmt(rtx.dram_bandwidth_bytes_per_s, 'B/s')} DRAM peak {fmt(t32, 's')} moves at "
                f"most {fmt(max_bytes, 'B')}, an FP32 matrix of at most {n_max}×{n_max} read and "
                f"written once (larger only if served from the {fmt(rtx.l2_bytes, 'B')} L2)."
            ),
        )
    )

    layers = _fig("plan.reuse", "layers of attention per step")
    per_layer = _fig("plan.reuse", "H2D copies with a plan per layer")
    per_step = _fig("plan.reuse", "H2D copies with one plan per step")
    ok = per_layer == layers * per_step
    out.append(
        ChapterCheck(
            "plan.reuse",
            "144 → 4 host→device copies",
            "agrees" if ok else "differs-unexplained",
            f"{layers:g} layers × {per_step:g} copies per plan = {layers * per_step:g} (quoted "
            f"{per_layer:g}): {'consistent' if ok else 'inconsistent'}.",
        )
    )

    kv_b, kv_a = _fig("amdahl.request", "DeepSeek"), _fig("amdahl.request", "… after sharing")
    rd_b, rd_a = (
        _fig("amdahl.request", "per-layer logical reads before"),
        _fig("amdahl.request", "… after 11"),
    )
    ok = _close(kv_a / kv_b, 0.25, 0.05) and _close(rd_a / rd_b - 1, -0.09, 0.1)
    out.append(
        ChapterCheck(
            "amdahl.request",
            "DeepSeek V4.1: capacity vs reads",
            "agrees" if ok else "differs-unexplained",
            f"resident KV {kv_a / kv_b:.1%} of before ('about a quarter'); per-layer reads "
            f"{rd_a / rd_b - 1:+.1%} ('−9 %'): {'consistent' if ok else 'inconsistent'}; sharing "
            "saves capacity, not reads.",
        )
    )

    share = _fig("request.swiglu_case", "1.6 %") / 100
    old = _fig("request.swiglu_case", "activation total 13.6")
    paired = _fig("request.swiglu_case", "measured median")
    share2 = _fig("request.swiglu_case", "≈ 0.16 %") / 100
    r1, r2 = old / share, paired / share2
    ok = _close(r1, r2, 0.1)
    out.append(
        ChapterCheck(
            "request.swiglu_case",
            "request length implied by the two percentages",
            "agrees" if ok else "differs-unexplained",
            f"13.6 ms at 1.6 % implies a {fmt(r1, 's')} request; 1.3 ms at 0.16 % implies "
            f"{fmt(r2, 's')} ({r2 / r1 - 1:+.0%}): {'consistent' if ok else 'inconsistent'}.",
        )
    )

    out.append(
        _ratio_check(
            "flash.attention_traffic",
            "2.6 ms vs 80 µs",
            _fig("flash.attention_traffic", "RTX PRO"),
            _fig("flash.attention_traffic", "… FlashAttention"),
            _figure("flash.attention_traffic", "… ≈ 33×"),
            0.03,
            "2.6 ms / 80 µs",
        )
    )

    case = get_case("fusion.activation_chain")
    ev = evaluate(case, case.default_gpu)
    g = ev.gpu
    un = _fig("fusion.activation_chain", "measured on an RTX PRO 6000")
    fu = _fig("fusion.activation_chain", "… fused 7.7")
    traffic, ws = ev.value("unfused_traffic"), ev.value("unfused_working_set")
    bw = traffic / un
    peak = g.dram_bandwidth_bytes_per_s
    l2bw = ev.params.l2bw * 1e9
    fits = ws <= (g.l2_bytes or 0)
    kind = (
        "agrees"
        if bw <= peak
        else "differs-explained"
        if fits and bw <= l2bw
        else "differs-unexplained"
        if fits
        else "implausible"
    )
    out.append(
        ChapterCheck(
            "fusion.activation_chain",
            "14.2 µs for 120 MiB",
            kind,
            f"{fmt(traffic, 'B')} in {fmt(un, 's')} is {fmt(bw, 'B/s')}, {bw / peak:.1f}× the "
            f"{g.name}'s {fmt(peak, 'B/s')} DRAM peak: "
            + (
                "within it."
                if bw <= peak
                else f"only its {fmt(g.l2_bytes, 'B')} L2 could serve it (the {fmt(ws, 'B')} "
                f"working set fits), and at {bw / l2bw:.1f}× the L2 bandwidth the model assumes "
                f"for this card ({fmt(l2bw, 'B/s')}: {ev.params.sources.get('l2bw', 'default')}) "
                + ("it can." if bw <= l2bw else "even that is not enough without a faster L2.")
                if fits
                else "the working set does not fit in L2 either, so the figure cannot be right."
            )
            + f" 14.2/7.7 = {un / fu:.2f}× (quoted ≈ 1.8×).",
        )
    )
    return out


def chapter_checks(case_id: str | None = None) -> list[ChapterCheck]:
    """Measured chapter figures judged by their models, then the arithmetic checks (of one case, or all)."""
    out = []
    for c in figure_checks(case_id):
        if c.figure.measured:
            out.append(ChapterCheck(c.case, c.figure.text, c.verdict.kind, c.verdict.explanation))
    return out + [c for c in arithmetic_checks() if case_id is None or c.case == case_id]


def reproduction_failures() -> list[str]:
    """Chapter figures (not measurements) that a model does not reproduce — empty when all is well."""
    return [
        f"{c.case}: {c.verdict.explanation}"
        for c in figure_checks()
        if not c.figure.measured and c.verdict.kind != "agrees"
    ]
