"""Section 5.5 — runtime: submission, graph replay, plans, dynamic shapes, persistent kernels."""

from __future__ import annotations

import math

from analyzers.cases.model import (
    MIB,
    MS,
    US,
    Case,
    CaseError,
    Chart,
    Figure,
    Measure,
    Param,
    Term,
    need,
    pipeline_time,
    pred,
)
from analyzers.cases.timemodel import (
    p_dram,
    p_graph_node,
    p_kernel_floor,
    p_launch,
    src,
    time_estimate,
)

RTX_PRO = "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"
RTX_4090 = "NVIDIA GeForce RTX 4090"
H100 = "NVIDIA H100 SXM"


# ------------------------------------------------------------------------------------------------
# runtime.host_bound — Example 5-10 (narrative)
# ------------------------------------------------------------------------------------------------

HOST_BOUND = Case(
    id="runtime.host_bound",
    title="vLLM v0.6.0: the faster the GPU, the more it waits for the CPU",
    section="5.5 · Example 5-10",
    summary=(
        "One H100, Llama 3 8B: the API server and the engine shared one Python process and the "
        "GIL; the GPU was busy 38 % of each step. Separate processes, multi-step scheduling and "
        "asynchronous output processing gave 2.7× throughput (1.8× for 70B) with no kernel change. "
        "The 2.7× combines three changes measured with all requests arriving at once and "
        "--num-scheduler-steps 10, so it cannot all be put down to the GIL. What the product can "
        "do: the GPU busy fraction of each step from a trace, and the bound 1 / busy fraction on "
        "what a pure host-side fix can gain."
    ),
    figures=(
        Figure("GPU busy 38 % of each step", 38, "%", gpu=H100, measured=True),
        Figure("throughput 2.7× v0.5.3 (Llama 3 8B)", 2.7, "×", gpu=H100, measured=True),
        Figure("1.8× for 70B", 1.8, "×", measured=True),
    ),
    measurements=(
        Measure(
            "trace",
            "GPU busy fraction per step (kernel time ÷ step time)",
            None,
            "from a PyTorch or Nsight Systems trace of a serving step",
        ),
    ),
    default_gpu=H100,
    no_model_reason=(
        "the chapter reports a real system's before/after; the gain depends on vLLM's scheduler, "
        "not on a formula with GPU specs"
    ),
)


# ------------------------------------------------------------------------------------------------
# graph.replay — Figures 5-27…5-31
# ------------------------------------------------------------------------------------------------

MODES = ("eager", "graph", "fused eager", "fused graph")


def _counts(p):
    return {
        "eager": (p.calls * p.kernels, p.calls * p.kernels),
        "graph": (p.calls * p.graphs_per_call, p.calls * p.kernels),
        "fused eager": (p.calls * p.fused_kernels, p.calls * p.fused_kernels),
        "fused graph": (p.calls * p.graphs_per_call, p.calls * p.fused_kernels),
    }


def _replay(p, gpu):
    c = _counts(p)
    out = []
    # gate, up, down projections, read once each
    weights = p.calls * 3 * p.hidden * p.intermediate * p.elem
    t_w = weights / (p.bw * 1e9)
    for mode in MODES:
        subs, kern = c[mode]
        key = mode.replace(" ", "_")
        graph = "graph" in mode
        out.append(
            pred(
                f"{key}_submissions",
                f"{mode}: host submissions",
                subs,
                "count",
                "calls × (kernels, or graph launches)",
                kind="exact",
                rel_tol=0,
            )
        )
        out.append(
            pred(
                f"{key}_kernels",
                f"{mode}: kernels the GPU runs",
                kern,
                "count",
                "calls × kernels",
                kind="exact",
                rel_tol=0,
            )
        )
        host = subs * (p.graph_launch if graph else p.launch) * US
        dev = kern * p.kernel_time * US
        out.append(
            pred(
                f"{key}_time_bound",
                f"{mode}: time lower bound",
                max(host, dev),
                "s",
                "max(submissions × submission cost, kernels × kernel time)",
                kind="lower_bound",
            )
        )
        gap = p.t_node if graph else p.t_kernel
        t_host = subs * p.t_launch * US
        t_dev = kern * gap * US + t_w
        terms = [
            Term("weights through DRAM", t_w, "s", "calls × 3·H·F·e / bw", src(p, "bw")),
            Term(
                "per-kernel cost on the device",
                kern * gap * US,
                "s",
                f"{kern} × {'t_node (graph replay)' if graph else 't_kernel (stream launches)'}",
                src(p, "t_node" if graph else "t_kernel"),
            ),
            Term(
                "host submissions",
                t_host,
                "s",
                f"{subs} × t_launch (overlapped with the device)",
                src(p, "t_launch"),
            ),
        ]
        out.append(
            time_estimate(
                f"{key}_time",
                f"{mode}: time at M = 1",
                terms,
                max(t_host, t_dev),
                "max(host submissions, device: weights / bw + per-kernel cost)",
                0.15,
            )
        )
    return out


def _replay_chart(p, gpu):
    rows = []
    for mode, (subs, kern) in _counts(p).items():
        rows.append({"x": mode, "series": "host submissions", "value": subs, "unit": "count"})
        rows.append({"x": mode, "series": "GPU kernels", "value": kern, "unit": "count"})
    return rows


REPLAY = Case(
    id="graph.replay",
    title="CUDA graphs cut submissions, fusion cuts kernels",
    section="5.5 · Figures 5-27…5-31",
    summary=(
        "3 FFN calls × 6 kernels: eager = 18 host submissions; a CUDA graph per call = 3 graph "
        "launches (still 18 kernels on the GPU); fusing the activation chain → 5 kernels per FFN → "
        "15. Graphs cut submissions, fusion cuts kernels."
    ),
    params=(
        Param("calls", "count", 3, "FFN calls", type="int", positive=True),
        Param("kernels", "count", 6, "kernels per FFN", type="int", positive=True),
        Param(
            "fused_kernels",
            "count",
            5,
            "kernels per FFN with the activation chain fused",
            type="int",
            positive=True,
        ),
        Param("graphs_per_call", "count", 1, "graph launches per call", type="int", positive=True),
        Param(
            "launch", "µs", 5, "host cost per eager kernel submission", min=0, from_chapter=False
        ),
        Param("graph_launch", "µs", 5, "host cost per graph launch", min=0, from_chapter=False),
        Param("kernel_time", "µs", 10, "GPU time per kernel", min=0, from_chapter=False),
        Param(
            "hidden",
            "count",
            4096,
            "hidden size H of the FFN (Qwen3-8B)",
            type="int",
            positive=True,
        ),
        Param("intermediate", "count", 12288, "intermediate size F", type="int", positive=True),
        Param("elem", "B", 2, "bytes per weight (BF16)", type="int", positive=True),
        p_dram(),
        p_kernel_floor(),
        p_graph_node(),
        p_launch(),
    ),
    model=_replay,
    chart_data=_replay_chart,
    figures=(
        Figure("eager: 18 host submissions", 18, "count", key="eager_submissions"),
        Figure("CUDA graph: 3 graph launches", 3, "count", key="graph_submissions"),
        Figure("… still 18 kernels on the GPU", 18, "count", key="graph_kernels"),
        Figure("fused activation chain: 15 kernels", 15, "count", key="fused_eager_kernels"),
    ),
    measurements=(
        Measure(
            "trace",
            "count of cudaLaunchKernel runtime events",
            "eager_submissions",
            "PyTorch (Kineto) trace",
        ),
        Measure(
            "trace",
            "count of cudaGraphLaunch runtime events",
            "graph_submissions",
            "PyTorch (Kineto) trace",
        ),
        Measure("trace", "count of kernel events", "graph_kernels", "PyTorch (Kineto) trace"),
        Measure(
            "bench",
            "graph.replay/time_per_ffn",
            "graph_time",
            "FFN at M = 1, eager vs one graph, fused or not",
        ),
    ),
)


# ------------------------------------------------------------------------------------------------
# graph.input_copy — Example 5-11, Experiment 5-8
# ------------------------------------------------------------------------------------------------


def _input_copy(p, gpu):
    bw = p.bandwidth * 1e9
    eager = (p.wait + p.compute) * US
    copy = 2 * p.size * MIB / bw
    graph = (p.prep + p.compute) * US + copy
    direct = (p.prep + p.compute) * US
    crit_copy = eager - direct
    return [
        pred("eager_time", "eager: wait for submission + compute", eager, "s", "wait + compute"),
        pred(
            "copy_time",
            "copy the input into the captured address",
            copy,
            "s",
            "2 × size / BW",
            kind="lower_bound",
        ),
        pred(
            "graph_time",
            "graph: prepare + copy + compute",
            graph,
            "s",
            "prep + 2·size/BW + compute",
        ),
        pred(
            "graph_time_direct",
            "graph, input written straight into its buffer",
            direct,
            "s",
            "prep + compute",
        ),
        pred(
            "critical_bytes",
            "input size above which the graph loses",
            max(0.0, crit_copy) * bw / 2,
            "B",
            "(eager − prep − compute) × BW / 2",
        ),
        pred(
            "graph_wins",
            "graph faster than eager",
            "yes" if graph < eager else "no",
            "text",
            "graph < eager",
        ),
    ]


INPUT_COPY = Case(
    id="graph.input_copy",
    title="Copying the input eats the graph's gain",
    section="5.5 · Example 5-11, Experiment 5-8",
    summary=(
        "Eager 40 µs = 20 µs waiting for submission + 20 µs compute. A graph reads its input at "
        "the address captured when it was recorded, so a new input elsewhere is copied there first "
        "(read + write = 2 × size / bandwidth): graph = 5 µs preparation + copy + 20 µs. The graph "
        "loses once the copy exceeds 15 µs: critical size = 7.5 µs × bandwidth (RTX 4090, 1008 "
        "GB/s → ≈ 7.6 MB). Writing the input straight into the graph's buffer removes the copy."
    ),
    params=(
        Param("wait", "µs", 20, "eager: waiting for submission", min=0),
        Param("compute", "µs", 20, "compute", min=0),
        Param("prep", "µs", 5, "graph: preparation", min=0),
        Param("size", "MiB", 2, "input size (Experiment 5-8: 2 and 16 MiB)", min=0),
        Param(
            "bandwidth",
            "GB/s",
            1008,
            "device memory bandwidth",
            positive=True,
            gpu_default=lambda g: (
                g.dram_bandwidth_bytes_per_s and g.dram_bandwidth_bytes_per_s / 1e9
            ),
            gpu_default_text="the GPU's DRAM bandwidth",
        ),
    ),
    model=_input_copy,
    figures=(
        Figure("eager 40 µs = 20 + 20", 40, "µs", key="eager_time"),
        Figure(
            "RTX 4090 (1008 GB/s): critical input ≈ 7.6 MB",
            7.6,
            "MB",
            key="critical_bytes",
            gpu=RTX_4090,
        ),
    ),
    measurements=(
        Measure(
            "bench",
            "graph.input_copy/graph_time",
            "graph_time",
            "graph replay with a copied input, by size",
        ),
    ),
    default_gpu=RTX_4090,
    chart=Chart(
        "size",
        (0.5, 1, 2, 4, 7.2, 8, 16, 32),
        ("eager_time", "graph_time", "graph_time_direct"),
        title="eager vs graph time vs input size",
    ),
)


# ------------------------------------------------------------------------------------------------
# plan.reuse — FlashInfer plan/run (narrative)
# ------------------------------------------------------------------------------------------------

PLAN = Case(
    id="plan.reuse",
    title="FlashInfer plan/run: plan once per step",
    section="5.5",
    summary=(
        "plan picks kernels, splits the work and lays out the workspace from this step's request "
        "lengths and KV locations, then copies the metadata to the GPU; run computes attention. "
        "All 36 layers of a step share the lengths and the KV layout, so one plan per step "
        "suffices: 36 layers of attention 2.0 / 2.4 ms → 0.72 / 0.75 ms, host→device copies 144 → "
        "4 (36 × 4 → 4), kernel count unchanged. Reusing a plan after request lengths changed "
        "gives wrong results."
    ),
    figures=(
        Figure("36 layers of attention 2.0 ms → 0.72 ms", 0.72, "ms", measured=True),
        Figure("… 2.4 ms → 0.75 ms", 0.75, "ms", measured=True),
        Figure("layers of attention per step: 36", 36, "count"),
        Figure("H2D copies with a plan per layer: 144", 144, "count", measured=True),
        Figure("H2D copies with one plan per step: 4", 4, "count", measured=True),
    ),
    measurements=(
        Measure(
            "trace", "count of HtoD memcpy events per step", None, "PyTorch or Nsight Systems trace"
        ),
    ),
    no_model_reason="the chapter reports FlashInfer measurements; the planning cost is "
    "library-specific",
)


# ------------------------------------------------------------------------------------------------
# shapes.specialize — Example 5-12, Experiment 5-7
# ------------------------------------------------------------------------------------------------


def _bucket(rows: int, buckets) -> int:
    for b in sorted(buckets):
        if rows <= b:
            return int(b)
    top = int(max(buckets))
    return -(-rows // top) * top


def _shapes(p, gpu):
    shapes = [(p.small_calls, p.small_rows), (1, p.mid_rows), (1, p.large_rows)]
    rows = sum(c * r for c, r in shapes)
    padded = sum(c * _bucket(r, p.buckets) for c, r in shapes)
    flop_row = 6 * p.H * p.F
    peak = need(gpu, "bf16_dense_flop_per_s")
    derived = {
        "generic": rows * flop_row / (p.mfu_generic / 100 * peak),
        "bucket": padded * flop_row / (p.mfu_bucket / 100 * peak),
        "spec": rows * flop_row / (p.mfu_spec / 100 * peak),
    }
    T = (
        {"generic": p.T_generic * MS, "bucket": p.T_bucket * MS, "spec": p.T_spec * MS}
        if not p.derive_T
        else derived
    )
    P = {"generic": p.P_generic * MS, "bucket": p.P_bucket * MS, "spec": p.P_spec * MS}

    def be(a, b):
        dt = T[a] - T[b]
        return (P[b] - P[a]) / dt if dt > 0 and P[b] > P[a] else math.nan

    totals = {s: P[s] + p.groups * T[s] for s in T}
    best = min(totals, key=totals.get)
    names = {"generic": "generic", "bucket": "buckets", "spec": "specialised"}
    out = [
        pred(
            "rows_per_group",
            "rows per group",
            rows,
            "count",
            "Σ calls × rows",
            kind="exact",
            rel_tol=0,
        ),
        pred(
            "bucket_rows",
            "rows after padding to buckets",
            padded,
            "count",
            "Σ calls × bucket(rows)",
            kind="exact",
            rel_tol=0,
        ),
        pred(
            "bucket_extra_work",
            "extra work from padding",
            100 * (padded / rows - 1),
            "%",
            "padded / rows − 1",
        ),
    ]
    for s in ("generic", "bucket", "spec"):
        out.append(
            pred(
                f"T_{s}_derived",
                f"{names[s]}: time per group from MFU and the GPU peak",
                derived[s],
                "s",
                "rows × 6·H·F / (MFU × BF16 peak)",
                rel_tol=0.02,
            )
        )
    for s in ("generic", "bucket", "spec"):
        out.append(
            pred(
                f"total_{s}", f"{names[s]}: total for {p.groups} groups", totals[s], "s", "P + N·T"
            )
        )
    out += [
        pred(
            "break_even_generic_bucket",
            "groups where buckets catch up with generic",
            be("generic", "bucket"),
            "count",
            "(P_b − P_g) / (T_g − T_b)",
        ),
        pred(
            "break_even_bucket_spec",
            "groups where specialised catches up with buckets",
            be("bucket", "spec"),
            "count",
            "(P_s − P_b) / (T_b − T_s)",
        ),
        pred(
            "break_even_generic_spec",
            "groups where specialised catches up with generic",
            be("generic", "spec"),
            "count",
            "(P_s − P_g) / (T_g − T_s)",
        ),
        pred(
            "best",
            f"fastest strategy for {p.groups} groups",
            names[best],
            "text",
            "smallest P + N·T",
        ),
    ]
    return out


def _shapes_validate(p, gpu):
    if p.mfu_generic <= 0 or p.mfu_bucket <= 0 or p.mfu_spec <= 0:
        raise CaseError("MFU values must be > 0 %")
    if any(b < 1 or not float(b).is_integer() for b in p.buckets):
        raise CaseError("bucket sizes must be whole numbers of rows >= 1")


SHAPES = Case(
    id="shapes.specialize",
    title="Generic, buckets or one program per shape?",
    section="5.5 · Example 5-12, Experiment 5-7",
    summary=(
        "Per group: 10 FFN calls on 8 × 256 rows + 1536 + 2048 rows (5632 rows). Generic: prepare "
        "100 ms, 17.0 ms per group (MFU 20 %). Buckets 512/2048: 400 ms, 12.4 ms (padded to 8192 "
        "rows, 45 % extra work, MFU 40 %). Specialised per shape: 900 ms, 6.8 ms (MFU 50 %). "
        "Total(N) = P + N·T: buckets catch up with generic at N ≈ 65.2, specialised with buckets "
        "at ≈ 89.3 (with generic at ≈ 78.4); at 70 groups buckets (1.27 s) beat specialised (1.38 "
        "s). The per-group times follow from the MFU and a ≈ 500 TFLOP/s GPU (the RTX PRO 6000); "
        "derive_T=1 computes them for the chosen GPU and shapes (Experiment 5-7: small_calls=4)."
    ),
    params=(
        Param("groups", "count", 70, "groups N", type="int", min=0),
        Param("small_calls", "count", 8, "calls with small_rows rows per group", type="int", min=0),
        Param("small_rows", "count", 256, "rows of the small calls", type="int", positive=True),
        Param("mid_rows", "count", 1536, "rows of the middle call", type="int", positive=True),
        Param("large_rows", "count", 2048, "rows of the large call", type="int", positive=True),
        Param("buckets", "count", (512.0, 2048.0), "bucket sizes in rows", type="floats"),
        Param("P_generic", "ms", 100, "generic: preparation", min=0),
        Param("P_bucket", "ms", 400, "buckets: preparation", min=0),
        Param("P_spec", "ms", 900, "specialised: preparation", min=0),
        Param("T_generic", "ms", 17.0, "generic: time per group", min=0),
        Param("T_bucket", "ms", 12.4, "buckets: time per group", min=0),
        Param("T_spec", "ms", 6.8, "specialised: time per group", min=0),
        Param(
            "derive_T",
            "count",
            0,
            "1: use per-group times derived from MFU, shapes and the GPU peak",
            type="choice",
            choices=(0, 1),
        ),
        Param("mfu_generic", "%", 20, "generic MFU", positive=True, max=100),
        Param("mfu_bucket", "%", 40, "buckets MFU", positive=True, max=100),
        Param("mfu_spec", "%", 50, "specialised MFU", positive=True, max=100),
        Param("H", "count", 4096, "hidden width", type="int", positive=True),
        Param("F", "count", 12288, "intermediate width", type="int", positive=True),
    ),
    model=_shapes,
    validate=_shapes_validate,
    figures=(
        Figure("5632 rows per group", 5632, "count", key="rows_per_group"),
        Figure("padded to 8192 rows", 8192, "count", key="bucket_rows"),
        Figure("45 % extra work", 45, "%", key="bucket_extra_work", tol=0.02),
        Figure(
            "generic ↔ buckets: N ≈ 65.2", 65.2, "count", key="break_even_generic_bucket", tol=0.001
        ),
        Figure(
            "buckets ↔ specialised: N ≈ 89.3",
            89.3,
            "count",
            key="break_even_bucket_spec",
            tol=0.001,
        ),
        Figure(
            "generic ↔ specialised: N ≈ 78.4",
            78.4,
            "count",
            key="break_even_generic_spec",
            tol=0.001,
        ),
        Figure("70 groups: buckets 1.27 s", 1.27, "s", key="total_bucket", tol=0.005),
        Figure("… specialised 1.38 s", 1.38, "s", key="total_spec", tol=0.005),
        Figure(
            "generic 17.0 ms per group at MFU 20 % (RTX PRO 6000 peak)",
            17.0,
            "ms",
            key="T_generic_derived",
            gpu=RTX_PRO,
            tol=0.02,
        ),
        Figure(
            "buckets 12.4 ms at MFU 40 %", 12.4, "ms", key="T_bucket_derived", gpu=RTX_PRO, tol=0.02
        ),
        Figure(
            "specialised 6.8 ms at MFU 50 %", 6.8, "ms", key="T_spec_derived", gpu=RTX_PRO, tol=0.02
        ),
    ),
    measurements=(
        Measure(
            "bench",
            "shapes.specialize/prepare_time, group_time",
            None,
            "torch.compile dynamic vs bucketed vs static shapes",
        ),
    ),
    default_gpu=RTX_PRO,
    chart=Chart(
        "groups",
        (0, 20, 40, 60, 65, 70, 78, 89, 100, 120, 150, 200),
        ("total_generic", "total_bucket", "total_spec"),
        title="total time vs number of groups",
    ),
)


# ------------------------------------------------------------------------------------------------
# persistent.block_handoff — Figures 5-36/5-37
# ------------------------------------------------------------------------------------------------


def _persistent(p, gpu):
    n = -(-p.tokens // p.block)
    coarse = (2 * p.launch + n * (p.proj + p.act)) * US
    fine = (p.launch + pipeline_time(n, p.proj + p.task, p.act + p.task, 2)) * US
    crit_tasks = n + 1
    return [
        pred("blocks", "token blocks", n, "count", "ceil(tokens / block)", kind="exact", rel_tol=0),
        pred(
            "coarse_time",
            "two kernels, one after the other",
            coarse,
            "s",
            "2·launch + n·(proj + act)",
        ),
        pred(
            "fine_time",
            "one persistent kernel, handing over block by block",
            fine,
            "s",
            "launch + pipeline(n, proj + task, act + task)",
        ),
        pred("saving", "saving", coarse - fine, "s", "≈ launch + (n−1)·act − (n+1)·task"),
        pred(
            "hidden_activation",
            "activations hidden behind projections",
            (n - 1) * p.act * US,
            "s",
            "(n−1)·act",
        ),
        pred(
            "task_overhead",
            "task overhead on the critical path",
            crit_tasks * p.task * US,
            "s",
            "(n+1)·task",
        ),
        pred(
            "critical_tasks",
            "tasks on the critical path",
            crit_tasks,
            "count",
            "n projections + the last activation",
            kind="exact",
            rel_tol=0,
        ),
    ]


PERSISTENT = Case(
    id="persistent.block_handoff",
    title="Persistent kernel: hand over block by block",
    section="5.5 · Figures 5-36/5-37",
    summary=(
        "512 tokens, up-projection then SiLU, in 8 blocks of 64 tokens: projection 12.8 µs per "
        "block, activation 1.76 µs, 5 µs per launch, +0.7 µs per task with block scheduling. The "
        "saving ≈ one launch (5 µs) + seven hidden activations (12.3 µs) − task overhead on the "
        "critical path (9 tasks, 6.3 µs) ≈ 11 µs. The closer the two stages, the more the overlap "
        "saves; when one is much longer, only the launch is saved."
    ),
    params=(
        Param("tokens", "count", 512, "tokens", type="int", positive=True),
        Param("block", "count", 64, "tokens per block", type="int", positive=True),
        Param("proj", "µs", 12.8, "projection time per block", min=0),
        Param("act", "µs", 1.76, "activation time per block", min=0),
        Param("launch", "µs", 5, "time per launch", min=0),
        Param("task", "µs", 0.7, "overhead per task with block scheduling", min=0),
    ),
    model=_persistent,
    figures=(
        Figure("saving ≈ 11 µs", 11, "µs", key="saving", tol=0.01),
        Figure("seven hidden activations 12.3 µs", 12.3, "µs", key="hidden_activation"),
        Figure("task overhead 6.3 µs", 6.3, "µs", key="task_overhead"),
        Figure(
            "9 tasks", 9, "count", key="critical_tasks", source="reference note (chapter5-cases.md)"
        ),
    ),
    measurements=(
        Measure(
            "trace",
            "kernel span of the projection + activation",
            "fine_time",
            "timeline of a persistent kernel vs two kernels",
        ),
    ),
    chart=Chart(
        "act",
        (0.5, 1.0, 1.76, 3, 6, 12.8, 20, 40),
        ("saving",),
        title="saving vs activation time per block (projection 12.8 µs)",
    ),
)

CASES = (HOST_BOUND, REPLAY, INPUT_COPY, PLAN, SHAPES, PERSISTENT)
