"""Section 5.1 — submission, copies, synchronisation, and how a kernel runs on an SM."""

from __future__ import annotations

import math

from analyzers.cases.model import (
    KIB,
    MIB,
    MS,
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
    need,
    pipeline_time,
    pred,
)
from analyzers.cases.timemodel import (
    KERNEL_FLOOR_US,
    LATENCY_IDLE_NS,
    p_dram,
    p_fp32,
    p_graph_node,
    p_h2d,
    p_host_memcpy,
    p_kernel_floor,
    p_l2,
    p_latency,
    p_launch,
    p_sync,
    src,
    stream_time,
    time_estimate,
    waves,
)
from analyzers.occupancy import occupancy

H100 = "NVIDIA H100 SXM"
H200 = "NVIDIA H200"

# ------------------------------------------------------------------------------------------------
# h2d.chunked_copy — Example 5-1
# ------------------------------------------------------------------------------------------------


def staged_time(nbytes: float, bounce: float, staging: float, link: float) -> float:
    """One copy from pageable memory through a pinned bounce buffer of `bounce` bytes,
    double-buffered: the host memcpy of piece i+1 (bounce / staging) overlaps the DMA of piece i
    (bounce / link) — pipeline_time with the host copy as the move stage and the DMA as the compute
    stage. The last piece may be short."""
    if nbytes <= 0:
        return 0.0
    n = max(1, math.ceil(nbytes / bounce))
    piece = nbytes / n
    return pipeline_time(n, piece / staging, piece / link, slots=2)


def _h2d(p, gpu):
    size = p.size * MIB
    raw = p.link * 1e9
    bw = p.link_bw * 1e9
    st = p.staging * 1e9
    t0 = p.t0 * US
    chunk = size / p.k
    t_raw = size / raw
    t_chunk = t0 + chunk / bw
    t_c = p.compute * US / p.k
    pinned = p.k * t0 + size / bw
    staged_one = staged_time(chunk, p.bounce * MIB, st, bw)
    pageable = p.k * (t0 + staged_one)
    serial = p.k * t_chunk + p.compute * US
    piped = pipeline_time(p.k, t_chunk, t_c, slots=2)
    pin_terms = [
        Term("per-copy cost", p.k * t0, "s", "k · t0", src(p, "t0")),
        Term("transfer", size / bw, "s", "bytes / pinned bandwidth", src(p, "link_bw")),
    ]
    page_terms = [
        Term("per-copy cost", p.k * t0, "s", "k · t0", src(p, "t0")),
        Term(
            "host memcpy into the bounce buffer",
            size / st,
            "s",
            "bytes / host memcpy bandwidth",
            src(p, "staging"),
        ),
        Term(
            "DMA not hidden behind the memcpy",
            pageable - p.k * t0 - size / st,
            "s",
            "pipeline of ceil(chunk / bounce) pieces: staging overlapped with the DMA",
            src(p, "bounce") + "; " + src(p, "link_bw"),
        ),
    ]
    return [
        pred(
            "copy_time",
            "copy time at the link's raw rate",
            t_raw,
            "s",
            "bytes / link bandwidth",
            kind="lower_bound",
            min_physical=t_raw,
            physical="the link's raw rate",
        ),
        pred(
            "pinned_time",
            f"pinned copy in {p.k} chunk(s)",
            pinned,
            "s",
            "k·t0 + bytes / pinned bandwidth",
            rel_tol=0.05,
            min_physical=t_raw,
            physical="the link's raw rate",
            terms=tuple(pin_terms),
        ),
        pred(
            "pinned_bandwidth",
            "pinned copy bandwidth (k chunks, t0 each)",
            size / pinned,
            "B/s",
            "bytes / pinned time (the same measurement as pinned_time)",
            kind="info",
        ),
        pred("chunk_time", "time per chunk copy", t_chunk, "s", "t0 + bytes/(k·BW)"),
        pred(
            "serial_time", "copy all, then compute", serial, "s", "k·(t0 + bytes/(k·BW)) + compute"
        ),
        pred(
            "pipelined_time",
            "chunks overlapped with compute",
            piped,
            "s",
            "t_chunk + (k-1)·max(t_chunk, compute/k) + compute/k",
        ),
        pred(
            "pageable_time",
            f"pageable copy in {p.k} chunk(s), staged through a {p.bounce:g} MiB pinned buffer",
            pageable,
            "s",
            "k · (t0 + staging pipeline of the chunk)",
            rel_tol=0.15,
            min_physical=t_raw,
            physical="the link's raw rate",
            terms=tuple(page_terms),
        ),
        pred(
            "staged_time",
            f"explicit staging through a {p.bounce:g} MiB pinned buffer",
            pageable,
            "s",
            "the same staging pipeline, run by the program instead of the driver",
            rel_tol=0.15,
            min_physical=t_raw,
            physical="the link's raw rate",
            terms=tuple(page_terms),
        ),
        pred(
            "pageable_bandwidth",
            "pageable copy bandwidth",
            size / pageable,
            "B/s",
            "bytes / pageable time",
            kind="info",
        ),
    ]


H2D = Case(
    id="h2d.chunked_copy",
    title="Copying 64 MiB host→device in k chunks",
    section="5.1 · Example 5-1",
    summary=(
        "A host→device copy takes bytes / link bandwidth. Pageable memory is first copied by the "
        "CPU into a pinned staging buffer (an extra pass), so pageable is slower. Splitting into k "
        "chunks lets compute start on the first chunk early, at a fixed cost per copy. Predicted "
        "here: the pinned copy from the achievable pinned bandwidth (the GPU's measured ceiling, "
        "else 86 % of the link) and the per-copy cost; the pageable copy from a model of the "
        "staging path — the host memcpy into a pinned bounce buffer (bandwidth measured on the "
        "same host) overlapped with the DMA of the previous piece."
    ),
    params=(
        Param("size", "MiB", 64, "bytes to copy", positive=True),
        Param("k", "count", 1, "number of chunks", type="int", min=1, max=1 << 20),
        Param(
            "link",
            "GB/s",
            64,
            "host link raw bandwidth, one direction (chapter: PCIe Gen5 x16 = 64 GB/s)",
            positive=True,
            gpu_default=lambda g: g.host_link_bytes_per_s and g.host_link_bytes_per_s / 1e9,
            gpu_default_text="the GPU's host link, one direction",
        ),
        p_h2d(),
        Param(
            "t0",
            "µs",
            KERNEL_FLOOR_US,
            "device-side cost of each copy on the stream (the chapter gives none; an operation "
            "between two events costs ≈2.5 µs on an H200)",
            min=0,
            from_chapter=False,
            ceiling="kernel",
            ceiling_scale=1e6,
        ),
        Param(
            "compute",
            "µs",
            0,
            "compute on the copied data (0 = copy only)",
            min=0,
            from_chapter=False,
        ),
        p_host_memcpy(),
        Param(
            "bounce",
            "MiB",
            2,
            "pinned bounce buffer the staging path copies through (the driver does not document "
            "its size; the suite measures explicit staging with 1–16 MiB)",
            positive=True,
            from_chapter=False,
        ),
    ),
    model=_h2d,
    figures=(
        Figure(
            "64 MiB over PCIe Gen5 x16 (64 GB/s one way) ≈ 1.05 ms",
            1.05,
            "ms",
            key="copy_time",
            params={"link": 64},
        ),
    ),
    measurements=(
        Measure(
            "bench",
            "h2d.chunked_copy/copy_time (pinned)",
            "pinned_time",
            "event-timed torch copies from pinned memory, chunks 1/4/16/64",
        ),
        Measure(
            "bench",
            "h2d.chunked_copy/copy_time (pageable)",
            "pageable_time",
            "event-timed copies from pageable memory",
        ),
        Measure(
            "bench",
            "h2d.chunked_copy/staged_copy_time",
            "staged_time",
            "pageable memory copied through an explicit pinned bounce buffer (numpy memcpy + "
            "async DMA)",
        ),
        Measure(
            "trace",
            "nsys CUPTI_ACTIVITY_KIND_MEMCPY bytes / (end - start)",
            "pinned_bandwidth",
            "per-copy bandwidth of HtoD copies in an Nsight Systems export",
        ),
    ),
    default_gpu=H200,
    chart=Chart(
        "k",
        (1, 2, 4, 8, 16, 32, 64),
        ("serial_time", "pipelined_time"),
        title="copy time vs number of chunks",
        log_x=True,
    ),
)


# ------------------------------------------------------------------------------------------------
# timing.positions — Example 5-2
# ------------------------------------------------------------------------------------------------


def elementwise_time(
    p, gpu, nbytes: float, working_set: float, kernels: int = 1
) -> tuple[float, list[Term]]:
    """Predicted event time of `kernels` elementwise kernels moving `nbytes`: the per-kernel floor
    (t_kernel, an empty kernel between two events) plus streaming the bytes at the DRAM rate — or at
    the L2 rate when the working set fits in the L2 and the caller did not flush it — limited by
    Little's law: every resident thread keeps one 16-byte access in flight, for `latency` ns."""
    l2 = gpu.l2_bytes or 0
    cached = not getattr(p, "flushed", 1) and working_set <= l2
    rate = (p.l2bw if cached else p.bw) * 1e9
    inflight = gpu.sm_count * gpu.max_threads_per_sm * 16
    lat = p.latency * 1e-9
    t_mem = stream_time(nbytes, inflight, lat, rate)
    terms = [
        Term(
            "kernel floor",
            kernels * p.t_kernel * US,
            "s",
            f"{kernels} × t_kernel",
            src(p, "t_kernel"),
        ),
        Term(
            "memory",
            t_mem,
            "s",
            f"{'L2' if cached else 'DRAM'}: latency + bytes / min(rate, bytes in flight / "
            f"latency); {inflight / MIB:.1f} MiB in flight (16 B per resident thread)",
            src(p, "l2bw" if cached else "bw") + "; " + src(p, "latency"),
        ),
    ]
    return kernels * p.t_kernel * US + t_mem, terms


def _timing(p, gpu):
    k, f, s = p.k * US, p.f * US, p.s
    nbytes = 8 * p.n
    ev, terms = elementwise_time(p, gpu, nbytes, nbytes)
    sync_terms = [
        Term(
            "launch + synchronize", p.t_sync * US, "s", "t_sync (a tiny kernel)", src(p, "t_sync")
        ),
        Term(
            "kernel beyond a tiny one",
            ev - p.t_kernel * US,
            "s",
            "event time − t_kernel",
            "the event-time estimate above",
        ),
    ]
    return [
        pred(
            "host_clock_time",
            "host clock around the async call (submission only)",
            p.submit * US,
            "s",
            "submission time",
            rel_tol=0.5,
        ),
        pred("kernel_time_old", "device events around the old kernel", k, "s", "k"),
        pred("kernel_time_new", "device events around the new kernel", k / s, "s", "k / s"),
        pred("call_time_old", "caller waits (old)", f + k, "s", "f + k"),
        pred("call_time_new", "caller waits (new)", f + k / s, "s", "f + k/s"),
        pred(
            "call_speedup",
            "speedup the caller sees",
            (f + k) / (f + k / s),
            "×",
            "(f + k) / (f + k/s)",
        ),
        pred("kernel_speedup", "kernel speedup", s, "×", "s"),
        pred(
            "fixed_fraction", "fixed cost / old kernel time", f / k if k else math.inf, "×", "f / k"
        ),
        time_estimate(
            "event_time",
            f"device events around y = 1.0001·x ({p.n} FP32 elements)",
            terms,
            ev,
            "t_kernel + memory time",
            0.20,
        ),
        time_estimate(
            "host_clock_async",
            "host clock around the asynchronous call",
            [Term("one launch", p.t_launch * US, "s", "t_launch", src(p, "t_launch"))],
            p.t_launch * US,
            "t_launch: the host returns once the kernel is submitted",
            0.25,
        ),
        time_estimate(
            "host_clock_until_result",
            "host clock until the result is back",
            sync_terms,
            p.t_sync * US + ev - p.t_kernel * US,
            "t_sync + (event time − t_kernel)",
            0.20,
        ),
    ]


TIMING = Case(
    id="timing.positions",
    title="Three clocks, three answers: kernel 4× faster, call 1.75× faster",
    section="5.1 · Example 5-2",
    summary=(
        "A host clock around an asynchronous call measures only submission (~3 µs); device events "
        "around the kernel measure the kernel; stopping after the result is back measures what the "
        "caller waits. With call = fixed + kernel, a 4× faster kernel gives a 1.75× faster call "
        "when fixed = 0.75 × the old kernel time: speedup = (f + k) / (f + k/s). For the suite's "
        "kernel (y = 1.0001·x over n FP32 elements) the three clocks are predicted from the GPU's "
        "measured launch floor, its launch + synchronize cost and the kernel's memory time."
    ),
    params=(
        Param("k", "µs", 20, "old kernel time (the 20 µs kernel of Figure 5-3)", positive=True),
        Param(
            "f",
            "µs",
            15,
            "fixed cost around the kernel (0.75 × 20 µs, implied by 4× → 1.75×)",
            min=0,
            back_solved=True,
        ),
        Param("s", "×", 4, "kernel speedup", positive=True),
        Param("submit", "µs", 3, "submission time seen by a host clock", min=0),
        Param(
            "n",
            "count",
            1 << 20,
            "elements of the measured kernel y = 1.0001·x (FP32)",
            type="int",
            positive=True,
            from_chapter=False,
        ),
        Param(
            "flushed",
            "count",
            0,
            "1: the L2 is flushed before the kernel (the suite does not, here)",
            type="choice",
            choices=(0, 1),
            from_chapter=False,
        ),
        p_dram(),
        p_l2(),
        p_kernel_floor(),
        p_launch(),
        p_sync(),
        p_latency(),
    ),
    model=_timing,
    figures=(
        Figure("kernel 4× faster, whole call only 1.75× faster", 1.75, "×", key="call_speedup"),
        Figure(
            "a host clock around the async call sees only submission: 3 µs",
            3,
            "µs",
            key="host_clock_time",
        ),
    ),
    measurements=(
        Measure(
            "bench",
            "timing.positions/host_clock_async_call",
            "host_clock_async",
            "perf_counter around the launch",
        ),
        Measure(
            "bench", "timing.positions/event_time", "event_time", "CUDA events around the kernel"
        ),
        Measure(
            "bench",
            "timing.positions/host_clock_until_result",
            "host_clock_until_result",
            "perf_counter around launch + sync",
        ),
    ),
    chart=Chart(
        "s",
        (1, 1.5, 2, 4, 8, 16, 32),
        ("call_speedup", "kernel_speedup"),
        title="call speedup vs kernel speedup",
        log_x=True,
    ),
)


# ------------------------------------------------------------------------------------------------
# compile.amortization
# ------------------------------------------------------------------------------------------------


def _steady(
    p, gpu, host: float, kernels: int, nbytes: float, host_terms: list[Term]
) -> tuple[float, list[Term]]:
    """Per call, back to back, with one synchronisation at the end: the slower of the host (its
    submissions) and the device (each kernel one graph-node-like gap after the previous plus its
    memory time at the DRAM rate)."""
    dev = kernels * p.t_node * US + nbytes / (p.bw * 1e9)
    terms = host_terms + [
        Term(
            "device",
            dev,
            "s",
            f"{kernels} × t_node + bytes / bw",
            src(p, "t_node") + "; " + src(p, "bw"),
        )
    ]
    return max(host, dev), terms


def _compile(p, gpu):
    gain = p.t_eager - p.t_run
    n_star = p.T_compile / gain if gain > 0 else math.inf
    t = p.M * p.F * 2
    eager, e_terms = _steady(
        p,
        gpu,
        2 * p.t_launch * US,
        2,
        5 * t,
        [
            Term(
                "host",
                2 * p.t_launch * US,
                "s",
                "2 launches (SiLU, multiply) × t_launch",
                src(p, "t_launch"),
            )
        ],
    )
    trit, t_terms = _steady(
        p,
        gpu,
        p.t_triton * US,
        1,
        3 * t,
        [Term("host", p.t_triton * US, "s", "one Triton launch", src(p, "t_triton"))],
    )
    comp, c_terms = _steady(
        p,
        gpu,
        p.t_compiled * US,
        1,
        3 * t,
        [
            Term(
                "host",
                p.t_compiled * US,
                "s",
                "one torch.compile call (guards, launcher)",
                src(p, "t_compiled"),
            )
        ],
    )
    return [
        pred(
            "mean_cost_per_call",
            "mean cost per call after N calls",
            (p.t_run + p.T_compile / p.N) * MS,
            "s",
            "t_run + T_compile / N",
        ),
        pred(
            "compiled_total",
            "compile + N runs",
            (p.T_compile + p.N * p.t_run) * MS,
            "s",
            "T_compile + N·t_run",
        ),
        pred("eager_total", "N eager runs", p.N * p.t_eager * MS, "s", "N·t_eager"),
        pred(
            "break_even_calls",
            "calls until compiling pays off",
            n_star,
            "count",
            "N* = T_compile / (t_eager − t_compiled); never if the compiled run is not faster",
            kind="info",
        ),
        time_estimate(
            "steady_eager_time",
            f"eager SiLU·mul per call at M = {p.M} (back to back)",
            e_terms,
            eager,
            "max(host submissions, device)",
            0.30,
        ),
        time_estimate(
            "steady_triton_time",
            f"one Triton kernel per call at M = {p.M}",
            t_terms,
            trit,
            "max(host submission, device)",
            0.30,
        ),
        time_estimate(
            "steady_compiled_time",
            f"torch.compile per call at M = {p.M}",
            c_terms,
            comp,
            "max(host call, device)",
            0.30,
        ),
    ]


COMPILE = Case(
    id="compile.amortization",
    title="First compile amortised over calls",
    section="5.1",
    summary=(
        "Compiling once costs T_compile; each compiled run costs t_run. After N calls the mean "
        "cost is t_run + T_compile/N. Against an uncompiled path of t_eager per call, compiling "
        "pays off after N* = T_compile / (t_eager − t_run) calls, and never if the compiled run is "
        "not faster."
    ),
    params=(
        Param("T_compile", "ms", 100, "compile time", min=0),
        Param("t_run", "ms", 1, "compiled run time per call", min=0),
        Param(
            "t_eager",
            "ms",
            2,
            "uncompiled run time per call (the chapter gives none)",
            min=0,
            from_chapter=False,
        ),
        Param("N", "count", 100, "number of calls", type="int", min=1),
        Param(
            "M",
            "count",
            1024,
            "rows of the measured SiLU·mul ([M, F] BF16)",
            type="int",
            positive=True,
            from_chapter=False,
        ),
        Param(
            "F",
            "count",
            12288,
            "columns of the measured SiLU·mul",
            type="int",
            positive=True,
            from_chapter=False,
        ),
        p_launch(),
        p_graph_node(),
        p_dram(),
        Param(
            "t_triton",
            "µs",
            4.7,
            "host cost of one Triton launch (CompiledKernel.run ≈ 4.7 µs, bench-anchors §3.5)",
            min=0,
            from_chapter=False,
        ),
        Param(
            "t_compiled",
            "µs",
            44,
            "host cost of one torch.compile call (≈ 44 µs end to end, bench-anchors §3.5)",
            min=0,
            from_chapter=False,
        ),
    ),
    model=_compile,
    figures=(
        Figure(
            "compile 100 ms, each run 1 ms: after 100 calls 1 + 100/100 = 2 ms per call",
            2,
            "ms",
            key="mean_cost_per_call",
            params={"N": 100},
        ),
        Figure(
            "… after 10 calls 11 ms per call", 11, "ms", key="mean_cost_per_call", params={"N": 10}
        ),
    ),
    measurements=(
        Measure(
            "bench",
            "compile.amortization/first_call_time",
            None,
            "torch.compile first call vs eager: an input (T_compile) of this model, not a "
            "prediction",
        ),
        Measure(
            "bench",
            "compile.amortization/steady_call_time",
            "steady_compiled_time",
            "per call, back to back (eager, Triton and torch.compile)",
        ),
    ),
    chart=Chart(
        "N",
        (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000),
        ("mean_cost_per_call",),
        title="mean cost per call vs number of calls",
        log_x=True,
    ),
)


# ------------------------------------------------------------------------------------------------
# launch.overhead
# ------------------------------------------------------------------------------------------------


def _launch(p, gpu):
    k, l = p.t_k * US, p.t_l * US
    total = l + (p.n - 1) * max(l, k) + k
    busy = p.n * k / total
    sub, dev = p.t_submit * US, p.t_node * US
    return [
        pred(
            "total_time",
            "n kernels submitted back to back",
            total,
            "s",
            "t_l + (n−1)·max(t_l, t_k) + t_k",
        ),
        pred(
            "gpu_busy",
            "GPU busy fraction",
            100 * busy,
            "%",
            "n·t_k / total",
            max_physical=100.0,
            physical="100 %",
        ),
        pred("gpu_idle_time", "GPU idle time", total - p.n * k, "s", "total − n·t_k"),
        pred("bound", "who sets the pace", "host" if l > k else "GPU", "text", "host if t_l > t_k"),
        pred(
            "launch_floor",
            "per-kernel time floor",
            max(l, k),
            "s",
            "max(t_l, t_k)",
            kind="lower_bound",
        ),
        time_estimate(
            "back_to_back_time",
            "empty kernels back to back, time per launch",
            [
                Term(
                    "host submission",
                    sub,
                    "s",
                    "t_submit: the host clock when the last launch returned, per launch",
                    src(p, "t_submit"),
                ),
                Term(
                    "device per kernel",
                    dev,
                    "s",
                    "t_node: an empty kernel's device time",
                    src(p, "t_node"),
                ),
            ],
            max(sub, dev),
            "max(t_submit, t_node): the GPU waits for the CPU when t_submit > t_node",
            0.10,
        ),
        time_estimate(
            "cxx_launch_time",
            "empty kernel launched back to back from C++ (CUDA runtime)",
            [Term("the chapter's figure", p.t_cxx * US, "s", "t_cxx", src(p, "t_cxx"))],
            p.t_cxx * US,
            "t_cxx (the chapter's C++ launch floor)",
            0.25,
        ),
    ]


LAUNCH = Case(
    id="launch.overhead",
    title="The GPU waits for the CPU",
    section="5.1",
    summary=(
        "The CPU submits and the GPU executes, as a two-stage pipeline. Big kernels give the CPU "
        "time to prepare the next one; small ones finish before the next submission and the GPU "
        "idles. The per-kernel floor is max(submission, kernel)."
    ),
    params=(
        Param("n", "count", 100, "kernels back to back", type="int", min=1, from_chapter=False),
        Param("t_k", "µs", 2, "GPU time per kernel", min=0, from_chapter=False),
        Param(
            "t_l",
            "µs",
            5,
            "host submission time per kernel (5 µs per launch, as in Figures 5-36/37); the store's "
            "measured back-to-back launch cost of this GPU model's host when a bench run has one",
            min=0,
            ceiling="launch",
            ceiling_scale=1e6,
        ),
        Param(
            "t_submit",
            "µs",
            5,
            "host submission time per launch of the measured launcher (its own host clock at the "
            "end of the launch loop)",
            min=0,
            from_chapter=False,
        ),
        p_graph_node(),
        # the chapter's figure, never the store's measured C++ launch cost: the bench verdict judges
        # this very prediction against that measurement, and a prediction made from it could not
        # fail (issue 38)
        Param(
            "t_cxx",
            "µs",
            4.4,
            "empty-kernel launch back to back from C++ (H200: 4.4 µs)",
            min=0,
            from_chapter=True,
        ),
    ),
    model=_launch,
    measurements=(
        Measure(
            "bench",
            "launch.overhead/back_to_back_time_per_launch",
            "back_to_back_time",
            "empty kernels launched back to back from Python (CuPy, Triton, torch) and from "
            "C++; time per kernel",
        ),
        Measure(
            "bench",
            "launch.overhead/back_to_back_time_per_launch (C++)",
            "cxx_launch_time",
            "an empty kernel launched back to back through the CUDA runtime from a C++ program",
        ),
        Measure(
            "trace",
            "timeline launch gaps (GPU idle between kernels)",
            "gpu_busy",
            "GPU busy fraction from a PyTorch/Nsight Systems trace",
        ),
    ),
    chart=Chart(
        "t_k",
        (0.5, 1, 2, 3, 5, 8, 10, 20, 50),
        ("gpu_busy",),
        title="GPU busy fraction vs kernel time",
        log_x=True,
    ),
)


# ------------------------------------------------------------------------------------------------
# occupancy.sm
# ------------------------------------------------------------------------------------------------


def _occ_smem(p) -> int:
    tile = int(p.elem * p.m * p.k + p.elem * p.k * p.n + p.acc * p.m * p.n) if p.tile else 0
    return tile + int(p.smem_extra)


def carveout_mechanism(
    gpu, threads: int, regs: int, smem_static: int, smem_dynamic: int, what: str
) -> Mechanism:
    """The driver's shared-memory carve-out (ncu: launch__shared_mem_config_size) instead of the
    maximum the model assumes: the calculator re-run with that carve-out gives `what`
    (blocks_by_smem, blocks_per_sm or occupancy)."""

    def f(c):
        r = occupancy(
            gpu,
            threads,
            regs,
            smem_static,
            smem_dynamic,
            smem_config_bytes=int(c["smem_config_bytes"]),
        )
        return {
            "blocks_by_smem": r.limits["shared_mem"],
            "blocks_per_sm": r.blocks_per_sm,
            "occupancy": r.occupancy_pct,
        }[what]

    return Mechanism(
        "the driver's shared-memory carve-out",
        ("smem_config_bytes",),
        f,
        tol=0.0,
        why="the occupancy rules with the carve-out the driver chose for this launch",
    )


def _occupancy(p, gpu):
    smem = _occ_smem(p)
    r = occupancy(gpu, p.threads, p.regs, smem_dynamic_bytes=smem)
    lim = ", ".join(r.limiters) if r.blocks_per_sm else "does not fit"
    bw = need(gpu, "dram_bandwidth_bytes_per_s")
    carve = lambda what: (carveout_mechanism(gpu, p.threads, p.regs, 0, smem, what),)  # noqa: E731
    out = [
        pred(
            "smem_per_block",
            "shared memory per block",
            smem,
            "B",
            "elem·m·k + elem·k·n + acc·m·n (+ extra)",
            kind="exact",
            rel_tol=0,
        ),
        pred(
            "smem_alloc_per_block",
            "allocated per block (+ reserved, 128 B granules)",
            r.smem_per_block_alloc_bytes,
            "B",
            "roundup(S + reserved, 128)",
            kind="exact",
            rel_tol=0,
        ),
        pred(
            "warps_per_block",
            "warps per block",
            r.warps_per_block,
            "count",
            "ceil(threads / 32)",
            kind="exact",
            rel_tol=0,
        ),
        pred(
            "blocks_by_threads",
            "blocks allowed by thread slots",
            r.limits["warps"],
            "count",
            "floor(max warps/SM ÷ warps per block)",
            kind="exact",
            rel_tol=0,
        ),
        pred(
            "blocks_by_regs",
            "blocks allowed by registers",
            r.limits["registers"],
            "count",
            "per sub-partition: floor(regs/4 ÷ roundup(regs·32, 256)) warps",
            kind="exact",
            rel_tol=0,
        ),
        pred(
            "blocks_by_smem",
            "blocks allowed by shared memory",
            r.limits["shared_mem"],
            "count",
            "floor(smem per SM ÷ alloc)",
            kind="exact",
            rel_tol=0,
            mechanisms=carve("blocks_by_smem"),
        ),
        pred(
            "blocks_per_sm",
            "resident blocks per SM",
            r.blocks_per_sm,
            "count",
            "min(threads, registers, shared memory, block limit)",
            kind="exact",
            rel_tol=0,
            mechanisms=carve("blocks_per_sm"),
        ),
        pred(
            "occupancy",
            "theoretical occupancy",
            r.occupancy_pct,
            "%",
            "resident warps ÷ max warps per SM",
            kind="exact",
            rel_tol=0.005,
            max_physical=100.0,
            physical="100 %",
            mechanisms=carve("occupancy"),
        ),
        pred(
            "achieved_occupancy",
            "achieved occupancy (at most the theoretical one)",
            r.occupancy_pct,
            "%",
            "resident warps ÷ max warps per SM",
            kind="upper_bound",
            max_physical=100.0,
            physical="100 %",
        ),
        pred("limiter", "limited by", lim, "text", "every limit equal to the minimum"),
        pred(
            "bandwidth_per_sm",
            "DRAM bandwidth per SM",
            bw / gpu.sm_count,
            "B/s",
            "bandwidth ÷ SMs",
            kind="info",
        ),
    ]
    # an FMA loop with `chains` independent chains per thread: the SM issues one FMA per scheduler
    # per cycle once 4 schedulers × 4 cycles of FMA latency are covered by resident warps × chains
    w = waves(p.blocks, gpu.sm_count, r.blocks_per_sm)
    warps = r.active_warps_per_sm
    ilp = min(1.0, warps * p.chains / 16) if warps else 0.0
    rate = p.fp32 * 1e12 * ilp * w.fill
    # nan: the block does not fit
    t = p.t_kernel * US + p.gflop * 1e9 / rate if rate else math.nan
    out.append(
        time_estimate(
            "fma_time",
            "FMA loop time at this occupancy",
            [
                Term("kernel floor", p.t_kernel * US, "s", "t_kernel", src(p, "t_kernel")),
                Term(
                    "FMA work",
                    t - p.t_kernel * US,
                    "s",
                    f"FLOP / (fp32 × min(1, resident warps × chains / 16) × fill); {w.text}, "
                    f"{warps} warps/SM",
                    src(p, "fp32"),
                ),
            ],
            t,
            "t_kernel + FLOP / achievable FP32 rate",
            0.10,
        )
    )
    return out


def _occ_validate(p, gpu):
    if p.threads > 1024:
        raise CaseError(f"threads={p.threads}: a block has at most 1024 threads")


OCCUPANCY = Case(
    id="occupancy.sm",
    title="SM occupancy calculator: the chapter's 128×128×64 block",
    section="5.1",
    summary=(
        "A block fits on an SM only if it gets thread slots, registers and shared memory; blocks "
        "per SM = the minimum over the three (and the block limit); occupancy = resident warps ÷ "
        "max warps. The chapter's block (128×128 output, K step 64) keeps A 16 KiB + W 16 KiB + an "
        "FP32 accumulator 64 KiB = 96 KiB in shared memory with 256 threads (8 warps). Exact "
        "rules: formats.md §3 (analyzers.occupancy)."
    ),
    params=(
        Param("m", "count", 128, "output tile rows", type="int", positive=True),
        Param("n", "count", 128, "output tile columns", type="int", positive=True),
        Param("k", "count", 64, "K step", type="int", positive=True),
        Param("threads", "count", 256, "threads per block", type="int", positive=True),
        Param(
            "regs",
            "count",
            64,
            "registers per thread (the chapter gives none)",
            type="int",
            min=0,
            max=255,
            from_chapter=False,
        ),
        Param("elem", "B", 2, "bytes per input element (BF16)", type="int", positive=True),
        Param(
            "acc",
            "B",
            4,
            "bytes per accumulator element in shared memory (0 = accumulator in registers)",
            type="int",
            min=0,
        ),
        Param(
            "tile",
            "count",
            1,
            "1: the block keeps the chapter's tiles in shared memory; 0: none (only smem_extra)",
            type="choice",
            choices=(0, 1),
            from_chapter=False,
        ),
        Param(
            "smem_extra",
            "B",
            0,
            "more dynamic shared memory per block (an unused 'spoiler' allocation)",
            type="int",
            min=0,
            from_chapter=False,
        ),
        Param(
            "gflop",
            "GFLOP",
            35.43,
            "work of the measured FMA loop (the suite's ks_occ kernels: 35.4 GFLOP)",
            positive=True,
            from_chapter=False,
        ),
        Param(
            "chains",
            "count",
            8,
            "independent FMA chains per thread of that loop",
            type="int",
            positive=True,
            from_chapter=False,
        ),
        Param(
            "blocks",
            "count",
            4224,
            "blocks of that loop's grid",
            type="int",
            positive=True,
            from_chapter=False,
        ),
        p_fp32(),
        p_kernel_floor(),
    ),
    model=_occupancy,
    validate=_occ_validate,
    figures=(
        Figure(
            "A 16 KiB + W 16 KiB + FP32 accumulator 64 KiB = 96 KiB",
            96,
            "KiB",
            key="smem_per_block",
            gpu=H100,
        ),
        Figure("256 threads (8 warps)", 8, "count", key="warps_per_block", gpu=H100),
        Figure(
            "H100: 3.35 TB/s ÷ 132 SMs per SM",
            3.35e12 / 132 / 1e9,
            "GB/s",
            key="bandwidth_per_sm",
            gpu=H100,
        ),
    ),
    measurements=(
        Measure(
            "ncu", "sm__maximum_warps_per_active_cycle_pct", "occupancy", "theoretical occupancy"
        ),
        Measure(
            "ncu",
            "launch__occupancy_limit_shared_mem",
            "blocks_by_smem",
            "blocks allowed by shared memory",
        ),
        Measure(
            "ncu",
            "launch__occupancy_limit_registers",
            "blocks_by_regs",
            "blocks allowed by registers",
        ),
        Measure(
            "ncu", "launch__occupancy_limit_warps", "blocks_by_threads", "blocks allowed by warps"
        ),
        Measure(
            "ncu",
            "sm__warps_active.avg.pct_of_peak_sustained_active",
            "occupancy",
            "achieved occupancy (at most the theoretical one)",
        ),
        Measure(
            "bench",
            "occupancy.sm/occupancy",
            "occupancy",
            "kernel with swept registers/shared memory",
        ),
        Measure("bench", "occupancy.sm/time", "fma_time", "the FMA loop timed at each occupancy"),
    ),
    default_gpu=H100,
    chart=Chart(
        "regs",
        (16, 32, 40, 48, 64, 96, 128, 168, 255),
        ("occupancy",),
        title="theoretical occupancy vs registers per thread",
    ),
)


# ------------------------------------------------------------------------------------------------
# littles_law
# ------------------------------------------------------------------------------------------------


def _little(p, gpu):
    peak = need(gpu, "dram_bandwidth_bytes_per_s")
    bw = p.bw * 1e9
    lat, idle = p.latency * 1e-9, p.latency_idle * 1e-9
    needed = peak * lat
    threads = gpu.sm_count * gpu.max_threads_per_sm * p.occ / 100
    avail = threads * p.bytes_per_thread
    achieved = min(bw, avail / lat)
    lo, hi = min(p.copy_eff * bw, avail / lat), min(bw, avail / idle)
    occ_needed = 100 * needed / (gpu.sm_count * gpu.max_threads_per_sm * p.bytes_per_thread)

    def with_achieved(c):
        a, t = c["achieved_occupancy"], c["theoretical_occupancy"]
        return min(bw, avail * a / t / lat) if t else None

    return [
        pred(
            "bytes_in_flight_needed",
            "bytes in flight to sustain the bandwidth",
            needed,
            "B",
            "bandwidth × latency",
            kind="info",
        ),
        pred(
            "bytes_in_flight",
            "bytes in flight at this occupancy",
            avail,
            "B",
            "SMs × threads/SM × occupancy × bytes per thread",
            kind="info",
        ),
        pred(
            "achieved_bandwidth",
            "achievable DRAM bandwidth (range: latency under load … unloaded)",
            achieved,
            "B/s",
            "min(ceiling, bytes in flight / latency), latency between its unloaded and "
            "loaded values",
            kind="range",
            lo=lo,
            hi=hi,
            max_physical=peak,
            physical="the DRAM peak",
            terms=(
                Term(
                    "bytes in flight",
                    avail,
                    "B",
                    "SMs × threads/SM × occupancy × bytes per thread",
                    "occupancy calculator / the launch",
                ),
                Term(
                    "at the loaded latency",
                    avail / lat,
                    "B/s",
                    "bytes in flight / latency",
                    src(p, "latency"),
                ),
                Term(
                    "at the unloaded latency",
                    avail / idle,
                    "B/s",
                    "bytes in flight / latency_idle",
                    src(p, "latency_idle"),
                ),
                Term(
                    "ceiling",
                    bw,
                    "B/s",
                    "achievable DRAM bandwidth; a plain copy kernel at least copy_eff × it",
                    src(p, "bw") + "; " + src(p, "copy_eff"),
                ),
            ),
            mechanisms=(
                Mechanism(
                    "the achieved occupancy (fewer warps resident than launched)",
                    ("achieved_occupancy", "theoretical_occupancy"),
                    with_achieved,
                    tol=0.15,
                    why="Little's law with the warps ncu saw resident on average",
                ),
            ),
        ),
        pred(
            "occupancy_needed",
            "occupancy needed to saturate DRAM",
            occ_needed,
            "%",
            "needed ÷ (SMs × threads/SM × bytes per thread)",
            kind="info",
        ),
    ]


LITTLE = Case(
    id="littles_law",
    title="Little's law: bytes in flight hide latency",
    section="5.1",
    summary=(
        "Bytes in flight needed to sustain a bandwidth = bandwidth × latency. Requests in flight "
        "come from resident warps, so fewer resident warps → fewer requests in flight → lower "
        "achieved bandwidth."
    ),
    params=(
        Param(
            "latency",
            "ns",
            550,
            "DRAM latency under load (the chapter gives none; H200 ≈ 500–600 ns)",
            positive=True,
            from_chapter=False,
        ),
        Param(
            "occ", "%", 100, "occupancy (resident threads ÷ max threads)", positive=True, max=100
        ),
        Param(
            "bytes_per_thread",
            "B",
            16,
            "bytes each resident thread keeps in flight",
            positive=True,
            from_chapter=False,
        ),
        p_dram(),
        p_latency(
            "latency_idle",
            LATENCY_IDLE_NS,
            "DRAM latency unloaded",
            "484 cycles ≈ 244 ns on an H100 SXM, HBM3 (bench-anchors §3.2)",
            ceiling="latency_dram",
        ),
        Param(
            "copy_eff",
            "×",
            0.85,
            "share of the DRAM ceiling a plain load/store copy reaches at full occupancy (copy "
            "kernels reach 85–93 % of the spec; the ceiling is the best of several methods)",
            positive=True,
            max=1,
            from_chapter=False,
        ),
    ),
    model=_little,
    figures=(
        Figure(
            "H200: 4.8 TB/s × ~500 ns ≈ 2.4 MB in flight",
            2.4,
            "MB",
            key="bytes_in_flight_needed",
            gpu=H200,
            params={"latency": 500},
            source="reference note (chapter5-cases.md)",
        ),
        Figure(
            "H200: 4.8 TB/s × ~600 ns ≈ 2.9 MB in flight",
            2.9,
            "MB",
            key="bytes_in_flight_needed",
            gpu=H200,
            params={"latency": 600},
            tol=0.02,
            source="reference note (chapter5-cases.md)",
        ),
    ),
    measurements=(
        Measure(
            "bench",
            "littles_law/achieved_bandwidth",
            "achieved_bandwidth",
            "copy bandwidth vs occupancy (block size / shared-memory spoiler sweep)",
        ),
        Measure(
            "ncu",
            "dram__throughput.avg.pct_of_peak_sustained_elapsed",
            None,
            "DRAM throughput % of peak",
        ),
    ),
    chart=Chart(
        "occ",
        (3.125, 6.25, 12.5, 25, 37.5, 50, 75, 100),
        ("achieved_bandwidth",),
        title="achievable bandwidth vs occupancy",
    ),
)


# ------------------------------------------------------------------------------------------------
# mma.granularity
# ------------------------------------------------------------------------------------------------


def _mma(p, gpu):
    per_mma = 2 * p.mma_m * p.mma_n * p.mma_k
    count = (p.m // p.mma_m) * (p.n // p.mma_n) * (p.k // p.mma_k)
    wg = (p.m // 64) * ceil_div(p.n, 256) * (p.k // 16) if p.m % 64 == 0 and p.k % 16 == 0 else None
    out = [
        pred(
            "flop_per_mma",
            "FLOPs per MMA instruction",
            per_mma,
            "FLOP",
            "2 · 16·8·16",
            kind="exact",
            rel_tol=0,
        ),
        pred(
            "mma_per_block_step",
            "MMA instructions per block per K step",
            count,
            "count",
            "(m/16)·(n/8)·(k/16)",
            kind="exact",
            rel_tol=0,
        ),
        pred(
            "mma_per_warp",
            "MMA instructions per warp",
            count / p.warps,
            "count",
            "÷ warps",
            kind="exact",
            rel_tol=0,
        ),
        pred(
            "flop_per_block_step",
            "FLOPs per block per K step",
            2 * p.m * p.n * p.k,
            "FLOP",
            "2·m·n·k",
            kind="exact",
            rel_tol=0,
        ),
        pred(
            "acc_smem_traffic_per_step",
            "accumulator moved between registers and shared memory per K step (if it lives in "
            "shared memory; 0 in registers)",
            2 * 4 * p.m * p.n,
            "B",
            "2 · 4·m·n",
            kind="info",
        ),
    ]
    if wg is not None:
        out.append(
            pred(
                "wgmma_per_block_step",
                "Hopper wgmma (m64 n≤256 k16) per block per K step",
                wg,
                "count",
                "(m/64)·ceil(n/256)·(k/16), one per warpgroup of 4 warps",
                kind="info",
            )
        )
    return out


def _mma_validate(p, gpu):
    for tile, name, g in ((p.m, "m", p.mma_m), (p.n, "n", p.mma_n), (p.k, "k", p.mma_k)):
        if tile % g:
            raise CaseError(f"{name}={tile} is not a multiple of the MMA shape ({g})")
    if (p.m // p.mma_m) * (p.n // p.mma_n) * (p.k // p.mma_k) % p.warps:
        raise CaseError(f"{p.warps} warps cannot share the MMA instructions evenly")


MMA = Case(
    id="mma.granularity",
    title="Matrix instructions: 16×8×16 per MMA",
    section="5.1",
    summary=(
        "One MMA instruction is 16×8×16 = 4,096 FLOPs. A 128×128×64 block needs 8 × 16 × 4 = 512 "
        "of them; 8 warps issue 64 each. Hopper's warpgroup instructions (wgmma) are issued by 4 "
        "warps together, read operands straight from shared memory and run asynchronously."
    ),
    params=(
        Param("m", "count", 128, "block tile rows", type="int", positive=True),
        Param("n", "count", 128, "block tile columns", type="int", positive=True),
        Param("k", "count", 64, "K step", type="int", positive=True),
        Param("warps", "count", 8, "warps per block", type="int", positive=True),
        Param("mma_m", "count", 16, "MMA M", type="int", positive=True),
        Param("mma_n", "count", 8, "MMA N", type="int", positive=True),
        Param("mma_k", "count", 16, "MMA K", type="int", positive=True),
    ),
    model=_mma,
    validate=_mma_validate,
    figures=(
        Figure("one MMA is 16×8×16 = 4096 FLOPs", 4096, "FLOP", key="flop_per_mma"),
        Figure(
            "a 128×128×64 block needs 8×16×4 = 512 MMAs", 512, "count", key="mma_per_block_step"
        ),
        Figure("8 warps issue 64 each", 64, "count", key="mma_per_warp"),
    ),
    measurements=(
        Measure(
            "ncu",
            "smsp__inst_executed_pipe_tensor_op_hmma.sum",
            None,
            "divide by (blocks × K steps) to compare with mma_per_block_step",
        ),
    ),
    chart=Chart(
        "m",
        (16, 32, 64, 128, 256),
        ("mma_per_block_step",),
        link=("n",),
        title="MMA instructions per K step vs square tile size",
        log_x=True,
    ),
)


# ------------------------------------------------------------------------------------------------
# warpspec.producer_consumer — Figure 5-5
# ------------------------------------------------------------------------------------------------


def warpspec_times(gpu, block_bytes: float, flop_per_byte: float) -> tuple[float, float]:
    """(t_move, t_compute) for one block on one SM's share: t_move = bytes / (BW / SMs),
    t_compute = FLOP/B × bytes / (peak / SMs)."""
    bw = need(gpu, "dram_bandwidth_bytes_per_s")
    peak = need(gpu, "bf16_dense_flop_per_s")
    return block_bytes / (bw / gpu.sm_count), flop_per_byte * block_bytes / (peak / gpu.sm_count)


def _warpspec(p, gpu):
    bw = need(gpu, "dram_bandwidth_bytes_per_s")
    peak = need(gpu, "bf16_dense_flop_per_s")
    t_m, t_c = warpspec_times(gpu, p.block * KIB, p.intensity)
    return [
        pred(
            "bandwidth_per_sm",
            "DRAM bandwidth per SM",
            bw / gpu.sm_count,
            "B/s",
            "BW ÷ SMs",
            kind="info",
        ),
        pred(
            "peak_per_sm",
            "BF16 matrix peak per SM",
            peak / gpu.sm_count,
            "FLOP/s",
            "peak ÷ SMs",
            kind="info",
        ),
        pred(
            "t_move", "move one block (producer)", t_m, "s", "bytes ÷ (BW/SMs)", kind="lower_bound"
        ),
        pred(
            "t_compute",
            "compute on it (consumer)",
            t_c,
            "s",
            "FLOP/B · bytes ÷ (peak/SMs)",
            kind="lower_bound",
        ),
        pred(
            "move_compute_ratio", "move time ÷ compute time", t_m / t_c, "×", "t_move / t_compute"
        ),
        pred("machine_balance", "matrix peak ÷ bandwidth", peak / bw, "FLOP/B", "peak / BW"),
        pred(
            "bound",
            "slower stage",
            "move" if t_m > t_c else "compute",
            "text",
            "the slower stage sets the pace",
        ),
        pred(
            "compute_busy",
            "consumer busy fraction",
            100 * t_c / max(t_m, t_c),
            "%",
            "t_compute / max(t_move, t_compute)",
            max_physical=100.0,
            physical="100 %",
        ),
    ]


WARPSPEC = Case(
    id="warpspec.producer_consumer",
    title="Warp specialisation: producers move, consumers compute",
    section="5.1 · Figure 5-5",
    summary=(
        "Each slot has a 'full' barrier (set by the async copy) and an 'empty' one (set when "
        "compute is done). On one SM's share of an H100, moving a 32 KiB K block takes 1.29 µs and "
        "computing on it 0.28 µs: the copy is 4.6× slower, because the block does 64 FLOP per byte "
        "while the H100's matrix-peak-to-bandwidth ratio is ≈ 295 FLOP/B. The slower stage sets "
        "the pace."
    ),
    params=(
        Param("block", "KiB", 32, "bytes per block (a K block)", positive=True),
        Param("intensity", "FLOP/B", 64, "FLOPs per byte moved", positive=True),
    ),
    model=_warpspec,
    figures=(
        Figure("H100: move a 32 KiB K block 1.29 µs", 1.29, "µs", key="t_move", gpu=H100),
        Figure("H100: compute on it 0.28 µs", 0.28, "µs", key="t_compute", gpu=H100),
        Figure("copy 4.6× slower than compute", 4.6, "×", key="move_compute_ratio", gpu=H100),
        Figure(
            "H100 matrix peak ÷ bandwidth ≈ 295 FLOP/byte",
            295,
            "FLOP/B",
            key="machine_balance",
            gpu=H100,
        ),
        Figure(
            "H200 ≈ 206 FLOP/byte",
            206,
            "FLOP/B",
            key="machine_balance",
            gpu=H200,
            source="reference note (chapter5-cases.md)",
        ),
    ),
    measurements=(
        Measure(
            "ncu",
            "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
            "compute_busy",
            "tensor pipe busy % in a warp-specialised kernel",
        ),
        Measure("ncu", "dram__throughput.avg.pct_of_peak_sustained_elapsed", None, "DRAM busy %"),
    ),
    default_gpu=H100,
    chart=Chart(
        "intensity",
        (16, 32, 64, 128, 256, 512),
        ("t_move", "t_compute"),
        title="move vs compute time per block vs FLOP per byte",
        log_x=True,
    ),
)

CASES = (H2D, TIMING, COMPILE, LAUNCH, OCCUPANCY, LITTLE, MMA, WARPSPEC)
