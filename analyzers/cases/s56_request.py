"""Section 5.6 — from a local speedup to the whole request."""

from __future__ import annotations

from analyzers.cases.model import MS, US, Case, Chart, Figure, Measure, Param, pred

RTX_PRO = "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"


# ------------------------------------------------------------------------------------------------
# amdahl.request — Amdahl's law, critical path (Figure 5-38); DeepSeek KV sharing (narrative
# figures)
# ------------------------------------------------------------------------------------------------


def _amdahl(p, gpu):
    f = p.f / 100
    s = 1 / ((1 - f) + f / p.s)
    before = p.prep + max(p.A, p.B) + p.finish
    a_new = p.A / p.a_speedup
    after = p.prep + max(a_new, p.B) + p.finish
    return [
        pred(
            "amdahl_speedup", "whole-request speedup (serial stages)", s, "×", "1 / ((1 − f) + f/s)"
        ),
        pred(
            "amdahl_limit",
            "limit as s → ∞",
            1 / (1 - f) if f < 1 else float("inf"),
            "×",
            "1 / (1 − f)",
        ),
        pred(
            "graph_time_before",
            "prep → (A ∥ B) → finish",
            before * US,
            "s",
            "prep + max(A, B) + finish",
        ),
        pred(
            "graph_time_after",
            f"with A {p.a_speedup:g}× faster",
            after * US,
            "s",
            "prep + max(A/s_A, B) + finish",
        ),
        pred(
            "graph_speedup", "request speedup on the graph", before / after, "×", "before / after"
        ),
        pred(
            "a_threshold",
            "A below which shrinking it no longer helps",
            p.B * US,
            "s",
            "= B (B becomes the longest)",
        ),
        pred(
            "critical_branch",
            "longest branch after the change",
            "A" if a_new > p.B else "B",
            "text",
            "",
        ),
    ]


AMDAHL = Case(
    id="amdahl.request",
    title="Amdahl's law and the critical path",
    section="5.6 · Figure 5-38",
    summary=(
        "Serial stages add up: S = 1 / ((1 − f) + f/s). On a dependency graph the longest path "
        "sets the time: with prep 10 → (A ∥ B) → finish 10, shrinking A stops helping once B "
        "becomes the longest branch. Capacity savings are not read savings (DeepSeek V4.1, "
        "narrative only): 38 global-attention layers sharing 4 global KV copies cut resident KV at "
        "8K from 27.455 to 6.953 MiB (about a quarter), but per-layer logical reads only from "
        "12.556 to 11.375 MiB (−9 %): each layer that uses the shared state still reads it. The A "
        "and B durations of Figure 5-38 are interactive in the chapter; the defaults here are "
        "illustrative."
    ),
    params=(
        Param(
            "f",
            "%",
            50,
            "fraction of the request that is sped up",
            min=0,
            max=100,
            from_chapter=False,
        ),
        Param("s", "×", 2, "speedup of that fraction", positive=True, from_chapter=False),
        Param("prep", "µs", 10, "preparation (Figure 5-38)", min=0),
        Param("A", "µs", 30, "branch A", min=0, from_chapter=False),
        Param("B", "µs", 20, "branch B", min=0, from_chapter=False),
        Param("finish", "µs", 10, "finishing step (Figure 5-38)", min=0),
        Param("a_speedup", "×", 2, "how much faster A becomes", positive=True, from_chapter=False),
    ),
    model=_amdahl,
    figures=(
        Figure(
            "DeepSeek V4.1: resident global KV at 8K before sharing 27.455 MiB",
            27.455,
            "MiB",
            measured=True,
        ),
        Figure("… after sharing 6.953 MiB ('about a quarter')", 6.953, "MiB", measured=True),
        Figure("per-layer logical reads before 12.556 MiB", 12.556, "MiB", measured=True),
        Figure("… after 11.375 MiB (−9 %)", 11.375, "MiB", measured=True),
    ),
    measurements=(
        Measure(
            "trace",
            "critical path of a request (longest dependent chain of kernels)",
            None,
            "timeline analysis",
        ),
    ),
    chart=Chart(
        "a_speedup",
        (1, 1.25, 1.5, 2, 3, 4, 8),
        ("graph_time_after",),
        title="request time vs speedup of branch A",
        log_x=True,
    ),
)


# ------------------------------------------------------------------------------------------------
# request.swiglu_case — the chapter's closing case
# ------------------------------------------------------------------------------------------------


def _swiglu(p, gpu):
    steps = p.out_tokens
    prefill_calls = p.layers
    decode_calls = p.layers * (steps - 1)
    old = (prefill_calls * p.prefill_old + decode_calls * p.decode_old) * US
    new = (prefill_calls * p.prefill_new + decode_calls * p.decode_new) * US
    saving = old - new
    return [
        pred(
            "calls",
            "SwiGLU activation calls",
            p.layers * steps,
            "count",
            "layers × steps",
            kind="exact",
            rel_tol=0,
        ),
        pred(
            "prefill_calls",
            "prefill calls",
            prefill_calls,
            "count",
            "layers",
            kind="exact",
            rel_tol=0,
        ),
        pred(
            "decode_calls",
            "decode calls",
            decode_calls,
            "count",
            "layers × (steps − 1)",
            kind="exact",
            rel_tol=0,
        ),
        pred(
            "prefill_old_total",
            "prefill, old kernel",
            prefill_calls * p.prefill_old * US,
            "s",
            "calls × per call",
        ),
        pred(
            "prefill_new_total",
            "prefill, new kernel",
            prefill_calls * p.prefill_new * US,
            "s",
            "calls × per call",
        ),
        pred(
            "decode_old_total",
            "decode, old kernel",
            decode_calls * p.decode_old * US,
            "s",
            "calls × per call",
        ),
        pred(
            "decode_new_total",
            "decode, new kernel",
            decode_calls * p.decode_new * US,
            "s",
            "calls × per call",
        ),
        pred(
            "decode_speedup",
            "decode speedup",
            p.decode_old / p.decode_new,
            "×",
            "old / new per call",
        ),
        pred(
            "old_total",
            "activation total, old (= the most that can be saved)",
            old,
            "s",
            "prefill + decode",
        ),
        pred("new_total", "activation total, new", new, "s", "prefill + decode"),
        pred(
            "activation_share",
            "activation share of the request (old)",
            100 * old / (p.request * MS),
            "%",
            "old total / request time",
        ),
        pred(
            "saving",
            "predicted saving per request",
            saving,
            "s",
            "old total − new total",
            rel_tol=0.15,
        ),
        pred(
            "saving_share",
            "saving as a share of the request",
            100 * saving / (p.request * MS),
            "%",
            "saving / request time",
            rel_tol=0.15,
        ),
        pred(
            "ttft_change",
            "change of time to first token",
            (p.prefill_new - p.prefill_old) * prefill_calls * US,
            "s",
            "prefill new − old (decode comes after the first token)",
            kind="info",
        ),
    ]


SWIGLU = Case(
    id="request.swiglu_case",
    title="One Qwen3-8B request: a 2.6× kernel, a 0.16 % request",
    section="5.6 (closing case), Experiment 5-9",
    summary=(
        "RTX PRO 6000, 7239 input tokens, 32 output tokens, batch 1, BF16, eager, vLLM. 36 layers "
        "× 32 steps = 1152 SwiGLU activation calls: prefill 36 (7239 rows each), decode 1116 (1 "
        "row each). Old vs new kernel: prefill 11.22 vs 11.24 ms, decode 2.37 vs 0.92 ms (2.6×); "
        "activation total 13.6 vs 12.2 ms = 1.6 % of the request; predicted saving ≈ 1.4 ms, "
        "measured median of 11 paired differences 1.3 ms (≈ 0.16 % of the request); time to first "
        "token unchanged (436 ms). Method: count calls per shape, multiply by the per-call saving, "
        "then ask whether the saving lies on the critical path. Per-call times default to the "
        "chapter's totals ÷ calls."
    ),
    params=(
        Param("layers", "count", 36, "layers", type="int", positive=True),
        Param(
            "out_tokens",
            "count",
            32,
            "output tokens (decode steps + 1; Experiment 5-9: 32 → 128)",
            type="int",
            min=1,
        ),
        Param("in_tokens", "count", 7239, "input tokens (prefill rows)", type="int", positive=True),
        Param(
            "prefill_old", "µs", 11220 / 36, "old kernel per prefill call (11.22 ms / 36)", min=0
        ),
        Param(
            "prefill_new", "µs", 11240 / 36, "new kernel per prefill call (11.24 ms / 36)", min=0
        ),
        Param(
            "decode_old", "µs", 2370 / 1116, "old kernel per decode call (2.37 ms / 1116)", min=0
        ),
        Param(
            "decode_new",
            "µs",
            920 / 1116,
            "new kernel per decode call (0.92 ms / 1116)",
            positive=True,
        ),
        Param("request", "ms", 850, "request time (13.6 ms is 1.6 % of it)", positive=True),
    ),
    model=_swiglu,
    figures=(
        Figure("36 layers × 32 steps = 1152 calls", 1152, "count", key="calls"),
        Figure("prefill 36 calls", 36, "count", key="prefill_calls"),
        Figure("decode 1116 calls", 1116, "count", key="decode_calls"),
        Figure("decode 2.37 → 0.92 ms (2.6×)", 2.6, "×", key="decode_speedup", tol=0.01),
        Figure("activation total 13.6 ms (old)", 13.6, "ms", key="old_total", tol=0.005),
        Figure("… 12.2 ms (new)", 12.2, "ms", key="new_total", tol=0.005),
        Figure("1.6 % of the request", 1.6, "%", key="activation_share", tol=0.02),
        Figure("predicted saving ≈ 1.4 ms", 1.4, "ms", key="saving", tol=0.03),
        Figure(
            "measured median of 11 paired differences: 1.3 ms",
            1.3,
            "ms",
            key="saving",
            gpu=RTX_PRO,
            measured=True,
        ),
        Figure(
            "≈ 0.16 % of the request", 0.16, "%", key="saving_share", gpu=RTX_PRO, measured=True
        ),
        Figure("time to first token 436 ms, unchanged", 436, "ms", gpu=RTX_PRO, measured=True),
    ),
    measurements=(
        Measure(
            "trace",
            "SwiGLU kernel calls per input shape (Kineto 'Input Dims')",
            "calls",
            "count calls per shape in a PyTorch trace",
        ),
        Measure(
            "trace",
            "paired request-time differences (median)",
            "saving",
            "interleaved old/new runs of the same request",
        ),
    ),
    default_gpu=RTX_PRO,
    chart=Chart(
        "out_tokens",
        (8, 16, 32, 64, 128, 256, 512),
        ("saving",),
        title="saving vs output tokens",
        log_x=True,
    ),
)

CASES = (AMDAHL, SWIGLU)
