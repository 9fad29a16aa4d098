"""Chapter section 5.1 cases: submission, copies and synchronisation (h2d.chunked_copy,
timing.positions, compile.amortization, launch.overhead, littles_law, occupancy.sm).
Start-up: imports that only some commands, pages or GPUs need sit inside the functions that use
them, so each command loads what it uses."""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from collectors.bench import harness
from collectors.bench.context import NAN, Context, ceiling_record
from collectors.bench.harness import GIB, MIB, make_record, timing_records

LAUNCH_FLOOR_SRC = Path(__file__).resolve().parent / "kernels" / "launch_floor.cu"
CXX_LAUNCHER = "C++ cudaLaunchKernel (<<<>>>), CUDA runtime"
#: pinned bounce buffers of the explicit staging path (h2d.chunked_copy) and of the host memcpy
#: ceiling
BOUNCE_BYTES = (1 * MIB, 4 * MIB, 16 * MIB)


# =============================================================================================
# 5.1 Submission, copies and synchronisation
# =============================================================================================


def staged_copy(np_src, pinned_bufs, dst, events, bounce: int):
    """fn() copying a pageable host array to `dst` through two pinned bounce buffers of `bounce`
    bytes, as a driver stages a pageable copy: the host memcpy of piece i+1 (numpy, one thread)
    overlaps the DMA of piece i; a buffer is refilled only after the DMA that read it has finished
    (its event)."""
    n = bounce // 4
    total = np_src.shape[0]
    views = [b.numpy() for b in pinned_bufs]

    def fn():
        for i, off in enumerate(range(0, total, n)):
            s = i % 2
            cnt = min(n, total - off)
            events[s].synchronize()
            views[s][:cnt] = np_src[off : off + cnt]
            dst[off : off + cnt].copy_(pinned_bufs[s][:cnt], non_blocking=True)
            events[s].record()

    return fn


def host_memcpy_pieces(np_src, pinned_np, bounce: int):
    """fn() doing only the staging pass: the pageable array copied piece by piece into one pinned buffer."""
    n = bounce // 4
    total = np_src.shape[0]

    def fn():
        for off in range(0, total, n):
            cnt = min(n, total - off)
            pinned_np[:cnt] = np_src[off : off + cnt]

    return fn


def case_h2d_chunked_copy(ctx: Context) -> None:
    """Copy `total` bytes host->device as k chunks (pinned / pageable; k = 1, 4, 16, 64), back to
    back on one stream; time from before the first to after the last chunk. Then the staging path of
    a pageable copy, measured on this host: the host memcpy into a pinned bounce buffer alone
    (ceiling `host_memcpy_bandwidth`, best of 1/4/16 MiB buffers) and the whole staged copy run by
    the program (two bounce buffers, memcpy overlapped with the DMA)."""
    torch = ctx.torch
    total = ctx.pick(64 * MIB, 8 * MIB)
    dev_src = torch.rand(total // 4, device=ctx.dev)
    dst = torch.empty_like(dev_src)
    hosts = {
        "pinned": torch.empty(total // 4, pin_memory=True),
        "pageable": torch.empty(total // 4),
    }
    for h in hosts.values():
        h.copy_(dev_src)
    for mem, host in hosts.items():
        for k in (1, 4, 16, 64):
            with ctx.part(f"{mem} x{k}"):
                size = total // 4 // k
                pairs = [
                    (dst[i * size : (i + 1) * size], host[i * size : (i + 1) * size])
                    for i in range(k)
                ]

                def fn(pairs=pairs):
                    for d, s in pairs:
                        d.copy_(s, non_blocking=True)

                dst.fill_(NAN)
                fn()
                ctx.sync()
                ctx.check_equal(f"{mem} x{k}", dst, dev_src)
                t = ctx.time(fn, sync_each=True, allow_graph=False, max_reps=ctx.pick(30, 5))
                params = {"memory": mem, "chunks": k, "chunk_bytes": size * 4, "total_bytes": total}
                ctx.emit(
                    timing_records(
                        "h2d.chunked_copy",
                        params,
                        t.stats,
                        source=t.source,
                        bytes_moved=total,
                        prefix="copy_",
                        notes=t.note(),
                    )
                )
    src_np = hosts["pageable"].numpy()
    memcpy_vals, memcpy_t = {}, {}
    for bounce in BOUNCE_BYTES:
        with ctx.part(f"host memcpy, {bounce >> 20} MiB pieces"):
            buf = torch.empty(bounce // 4, pin_memory=True)
            fn = host_memcpy_pieces(src_np, buf.numpy(), bounce)
            t = harness.time_host(fn, reps=ctx.pick(15, 3))
            key = f"numpy copy of {total >> 20} MiB pageable into a {bounce >> 20} MiB pinned buffer, one thread"
            memcpy_vals[key], memcpy_t[key] = total / t.median, t
    if memcpy_vals:
        with ctx.part("host memcpy ceiling"):
            ctx.emit(
                ceiling_record(
                    "host_memcpy_bandwidth",
                    "B/s",
                    memcpy_vals,
                    memcpy_t,
                    {"bytes": total, "bytes_counted": "read (pageable) = write (pinned)"},
                )
            )
    events = [torch.cuda.Event(), torch.cuda.Event()]
    for bounce in BOUNCE_BYTES:
        with ctx.part(f"staged x1, {bounce >> 20} MiB bounce"):
            bufs = [torch.empty(bounce // 4, pin_memory=True) for _ in range(2)]
            fn = staged_copy(src_np, bufs, dst, events, bounce)
            dst.fill_(NAN)
            fn()
            ctx.sync()
            ctx.check_equal(f"staged {bounce >> 20} MiB", dst, dev_src)
            t = ctx.time(fn, sync_each=True, allow_graph=False, max_reps=ctx.pick(30, 5))
            params = {
                "memory": "pageable",
                "chunks": 1,
                "chunk_bytes": total,
                "total_bytes": total,
                "bounce_bytes": bounce,
            }
            ctx.emit(
                timing_records(
                    "h2d.chunked_copy",
                    params,
                    t.stats,
                    source=t.source,
                    bytes_moved=total,
                    prefix="staged_copy_",
                    notes="two pinned bounce buffers, numpy "
                    "memcpy overlapped with the DMA; " + t.note(),
                )
            )


def case_timing_positions(ctx: Context) -> None:
    """One kernel (y = 1.0001 x, FP32) at several sizes, timed three ways: a host clock around the
    asynchronous call (submission only), device events around the kernel, and a host clock until the
    result is back (call + synchronize)."""
    torch = ctx.torch
    reps = ctx.pick(50, 8)
    for n in ctx.pick([1 << 16, 1 << 20, 1 << 22, 1 << 24, 1 << 26], [1 << 16, 1 << 20]):
        with ctx.part(f"n={n}"):
            x = torch.rand(n, device=ctx.dev)
            y = torch.empty_like(x)

            def fn():
                torch.mul(x, 1.0001, out=y)

            y.fill_(NAN)
            fn()
            ctx.check(f"mul n={n}", y, x.double() * 1.0001, 1e-6)
            params = {"n_elements": n, "bytes": 8 * n}
            submit, wait = [], []
            for _ in range(reps):
                ctx.sync()
                t0 = time.perf_counter()
                fn()
                submit.append(time.perf_counter() - t0)
                ctx.sync()
            # call + synchronize, `inner` times per sample (host jitter averages out)
            inner = ctx.pick(10, 2)
            with harness._no_gc():
                for _ in range(reps):
                    ctx.sync()
                    t0 = time.perf_counter()
                    for _ in range(inner):
                        fn()
                        ctx.sync()
                    wait.append((time.perf_counter() - t0) / inner)
            ev = ctx.time(
                fn, sync_each=True, hold=True, allow_graph=False, min_reps=reps, max_reps=reps
            )
            for metric, samples, note in (
                ("host_clock_async_call", submit, "GPU idle before each call; L2 not flushed"),
                (
                    "host_clock_until_result",
                    wait,
                    f"GPU idle before each call; {inner} calls per sample, time / call; L2 not "
                    "flushed",
                ),
            ):
                s = harness.summarize(samples)
                ctx.emit(
                    make_record(
                        "timing.positions",
                        metric,
                        s.median,
                        "s",
                        params,
                        source="host clock",
                        cv=s.cv,
                        n=s.n,
                        notes=note,
                    )
                )
            ctx.emit(
                make_record(
                    "timing.positions",
                    "event_time",
                    ev.median,
                    "s",
                    params,
                    source=ev.source,
                    cv=ev.stats.cv,
                    n=ev.stats.n,
                    notes=ev.note(),
                )
            )


def case_compile_amortization(ctx: Context) -> None:
    """First call (compile included) vs steady state of SiLU(G)*U: torch.compile and a Triton JIT
    kernel (a fresh specialisation, so it compiles), next to eager torch. Steady state = host wall
    clock per call, back to back, including the final synchronisation (what a caller pays)."""
    import random

    torch = ctx.torch
    import torch._dynamo  # noqa: F811 - the submodule (ctx.torch is the same package)
    import torch.nn.functional as F

    from collectors.bench import triton_kernels as tk

    f = ctx.pick(12288, 4096)
    ms = ctx.pick([1024, 1], [1])
    calls = ctx.pick(200, 20)

    def steady_note(t):
        return "; ".join(
            x for x in ("per call, back to back, with the final sync", t.attempts_note()) if x
        )

    def per_call(fn):
        def many():
            for _ in range(calls):
                fn()
            ctx.sync()

        return harness.time_host(many, reps=ctx.pick(15, 2), per_call=calls)

    for i, m in enumerate(ms):
        g = torch.randn(m, f, device=ctx.dev, dtype=torch.bfloat16)
        u = torch.randn(m, f, device=ctx.dev, dtype=torch.bfloat16)
        z = torch.empty_like(g)
        ref = F.silu(g.double()) * u.double()
        base = {"m": m, "f": f}
        with ctx.part(f"eager M={m}"):
            t = per_call(lambda: F.silu(g) * u)
            ctx.emit(
                make_record(
                    "compile.amortization",
                    "steady_call_time",
                    t.median,
                    "s",
                    {**base, "impl": "eager"},
                    source="host clock",
                    cv=t.stats.cv,
                    n=t.stats.n,
                    notes=steady_note(t),
                )
            )
        with ctx.part(f"torch.compile M={m}"):
            torch._dynamo.reset()

            def silu_mul(a, b):
                return F.silu(a) * b

            compiled = torch.compile(silu_mul, dynamic=False)
            ctx.sync()
            t0 = time.perf_counter()
            out = compiled(g, u)
            ctx.sync()
            first = time.perf_counter() - t0
            ctx.check(f"torch.compile M={m}", out, ref, 1e-2)
            t = per_call(lambda: compiled(g, u))
            p = {**base, "impl": "torch.compile", "first_compile_in_process": i == 0}
            ctx.emit(
                make_record(
                    "compile.amortization",
                    "first_call_time",
                    first,
                    "s",
                    p,
                    source="host clock",
                    n=1,
                    notes="compile caches empty (fresh TORCHINDUCTOR_CACHE_DIR); "
                    "compile threads: "
                    f"TORCHINDUCTOR_COMPILE_THREADS={os.environ.get('TORCHINDUCTOR_COMPILE_THREADS', 'default')}",
                )
            )
            ctx.emit(
                make_record(
                    "compile.amortization",
                    "steady_call_time",
                    t.median,
                    "s",
                    p,
                    source="host clock",
                    cv=t.stats.cv,
                    n=t.stats.n,
                    notes=steady_note(t),
                )
            )
        with ctx.part(f"Triton JIT M={m}"):
            salt = random.randrange(1, 1 << 30)
            ctx.sync()
            t0 = time.perf_counter()
            tk.silu_mul(g, u, z, salt=salt)
            ctx.sync()
            first = time.perf_counter() - t0
            ctx.check(f"triton silu_mul M={m}", z, ref, 1e-2)
            t = per_call(lambda: tk.silu_mul(g, u, z, salt=salt))
            p = {**base, "impl": "triton"}
            ctx.emit(
                make_record(
                    "compile.amortization",
                    "first_call_time",
                    first,
                    "s",
                    p,
                    source="host clock",
                    n=1,
                    notes="new specialisation: compiled on this call",
                )
            )
            ctx.emit(
                make_record(
                    "compile.amortization",
                    "steady_call_time",
                    t.median,
                    "s",
                    p,
                    source="host clock",
                    cv=t.stats.cv,
                    n=t.stats.n,
                    notes=steady_note(t),
                )
            )


def case_launch_overhead(ctx: Context) -> None:
    """Empty-kernel launch cost from Python: N launches back to back (host submission time and time
    until all are done, per launch), launch + synchronize each, and CUDA-graph replay (per node =
    (T(K nodes) - T(1 node)) / (K - 1)); the same from C++ through the CUDA runtime
    (launch_floor.cu, built with nvcc when the toolkit is here); one empty kernel between two events
    (the device-side floor of a kernel). Emits the launch ceilings too (best launcher, C++, one
    kernel between events)."""
    torch, np = ctx.torch, ctx.np
    from collectors.bench import triton_kernels as tk

    n = ctx.pick(2000, 200)
    rounds = ctx.pick(5, 2)
    x = torch.ones(1, device=ctx.dev)
    launchers = {
        "cupy RawKernel ks_empty": lambda: ctx.launch("ks_empty", (1,), (32,), (np.int32(0),)),
        "Triton empty kernel": lambda: tk.empty(x),
        "torch x.add_(1), 1 element": lambda: x.add_(1),
    }
    b2b_vals, b2b_t, sync_vals, sync_t = {}, {}, {}, {}
    for label, fn in launchers.items():
        with ctx.part(label):
            for _ in range(10):
                fn()
            ctx.sync()
            submit, done = [], []
            for _ in range(rounds):
                ctx.sync()
                t0 = time.perf_counter()
                for _ in range(n):
                    fn()
                t1 = time.perf_counter()
                ctx.sync()
                t2 = time.perf_counter()
                submit.append((t1 - t0) / n)
                done.append((t2 - t0) / n)
            p = {"launcher": label, "launches": n}
            for metric, samples in (
                ("host_submit_time_per_launch", submit),
                ("back_to_back_time_per_launch", done),
            ):
                s = harness.summarize(samples)
                ctx.emit(
                    make_record(
                        "launch.overhead",
                        metric,
                        s.median,
                        "s",
                        p,
                        source="host clock",
                        cv=s.cv,
                        n=s.n,
                    )
                )
            s_done = harness.summarize(done)
            b2b_vals[label] = s_done.median
            b2b_t[label] = harness.Timing(s_done, "host clock")

            def sync_each(fn=fn):
                fn()
                ctx.sync()

            t = harness.time_host(sync_each, reps=max(n // 4, 20))
            sync_vals[label], sync_t[label] = t.median, t
            ctx.emit(
                make_record(
                    "launch.overhead",
                    "launch_and_sync_time",
                    t.median,
                    "s",
                    p,
                    source="host clock",
                    cv=t.stats.cv,
                    n=t.stats.n,
                )
            )
    with ctx.part("launch ceilings"):
        ctx.emit(
            ceiling_record("launch_back_to_back", "s", b2b_vals, b2b_t, higher_is_better=False)
        )
        ctx.emit(ceiling_record("launch_with_sync", "s", sync_vals, sync_t, higher_is_better=False))
    if not ctx.ncu_child:
        with ctx.part("C++ launch floor"):
            cxx_launch_floor(ctx, n, rounds)
    with ctx.part("one kernel between two events"):
        t = ctx.time(
            launchers["cupy RawKernel ks_empty"],
            allow_graph=False,
            min_reps=ctx.pick(50, 5),
            max_reps=ctx.pick(200, 20),
        )
        ctx.emit(
            make_record(
                "launch.overhead",
                "kernel_event_time",
                t.median,
                "s",
                {"launcher": "cupy RawKernel ks_empty"},
                source=t.source,
                cv=t.stats.cv,
                n=t.stats.n,
                notes=t.note(),
            )
        )
        ctx.emit(
            ceiling_record(
                "kernel_event_floor",
                "s",
                {"ks_empty between two events": t.median},
                {"ks_empty between two events": t},
                higher_is_better=False,
            )
        )
    with ctx.part("graph replay"):
        k_nodes = ctx.pick(200, 50)
        times = {}
        for k in (1, k_nodes):
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                launchers["cupy RawKernel ks_empty"]()
            torch.cuda.current_stream().wait_stream(side)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                for _ in range(k):
                    launchers["cupy RawKernel ks_empty"]()
            g.replay()
            ctx.sync()
            times[k] = t = ctx.time(g.replay, allow_graph=False)
            ctx.emit(
                make_record(
                    "launch.overhead",
                    "graph_replay_time",
                    t.median,
                    "s",
                    {"graph_nodes": k},
                    source=t.source,
                    cv=t.stats.cv,
                    n=t.stats.n,
                    notes="empty kernels, one graph launch",
                )
            )
        per_node = (times[k_nodes].median - times[1].median) / (k_nodes - 1)
        t = times[k_nodes]
        ctx.emit(
            make_record(
                "launch.overhead",
                "graph_time_per_node",
                per_node,
                "s",
                {"graph_nodes": k_nodes},
                source=t.source,
                cv=t.stats.cv,
                n=t.stats.n,
                notes="(T(K) - T(1)) / (K - 1)",
            )
        )
        ctx.emit(
            make_record(
                "ceiling",
                "graph_node_replay",
                per_node,
                "s",
                {"method": f"ks_empty graph, (T({k_nodes}) - T(1)) / {k_nodes - 1}"},
                source=t.source,
                cv=t.stats.cv,
                n=t.stats.n,
            )
        )


def find_nvcc() -> str | None:
    p = shutil.which("nvcc")
    if p:
        return p
    hits = sorted(glob.glob("/usr/local/cuda*/bin/nvcc"))
    return hits[-1] if hits else None


def build_launch_floor(out_dir: str) -> str:
    """Compile launch_floor.cu with nvcc (for this machine's GPU) into out_dir; return the program's
    path. RuntimeError naming the problem when nvcc is missing or fails."""
    nvcc = find_nvcc()
    if nvcc is None:
        raise RuntimeError(
            "nvcc not found (PATH, /usr/local/cuda*/bin): the C++ launch floor "
            "needs the CUDA toolkit"
        )
    exe = os.path.join(out_dir, "ks_launch_floor")
    cmd = [nvcc, "-O2", "-std=c++17", "-arch=native", "-o", exe, str(LAUNCH_FLOOR_SRC)]
    r = subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=180)
    if r.returncode != 0:
        r = subprocess.run(
            [c for c in cmd if c != "-arch=native"],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=180,
        )
    if r.returncode != 0:
        raise RuntimeError(f"nvcc failed ({r.returncode}): {(r.stderr or r.stdout).strip()[-300:]}")
    return exe


def parse_launch_floor(text: str) -> dict:
    """The JSON object launch_floor.cu prints (its last line); ValueError for anything else."""
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    if not lines:
        raise ValueError("the C++ launch-floor program printed nothing")
    d = json.loads(lines[-1])
    for key in ("submit", "back_to_back", "launch_sync", "launches"):
        if key not in d:
            raise ValueError(f"the C++ launch-floor program's output lacks {key!r}")
    if not d["submit"] or not d["back_to_back"] or not d["launch_sync"]:
        raise ValueError("the C++ launch-floor program returned no samples")
    return d


def cxx_launch_floor(ctx: Context, n: int, rounds: int) -> None:
    """Build and run launch_floor.cu on this GPU; emit its records (launcher CXX_LAUNCHER) and the
    ceiling `launch_cxx_back_to_back`."""
    with tempfile.TemporaryDirectory(prefix="ks-launch-") as tmp:
        exe = build_launch_floor(tmp)
        r = subprocess.run(
            [exe, str(ctx.device), str(n), str(rounds)],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=60,
        )  # same CUDA_DEVICE_ORDER: the same device index
        if r.returncode != 0:
            raise RuntimeError(
                f"the C++ launch-floor program exited with {r.returncode}: "
                f"{r.stderr.strip()[-300:]}"
            )
        d = parse_launch_floor(r.stdout)
    p = {"launcher": CXX_LAUNCHER, "launches": int(d["launches"])}
    note = f"CUDA runtime {d.get('runtime')}, driver {d.get('driver')}; built with nvcc -O2"
    b2b = None
    for metric, key in (
        ("host_submit_time_per_launch", "submit"),
        ("back_to_back_time_per_launch", "back_to_back"),
        ("launch_and_sync_time", "launch_sync"),
    ):
        s = harness.summarize(d[key])
        ctx.emit(
            make_record(
                "launch.overhead",
                metric,
                s.median,
                "s",
                p,
                source="host clock",
                cv=s.cv,
                n=s.n,
                notes=note,
            )
        )
        if key == "back_to_back":
            b2b = s
    ctx.emit(
        ceiling_record(
            "launch_cxx_back_to_back",
            "s",
            {CXX_LAUNCHER: b2b.median},
            {CXX_LAUNCHER: harness.Timing(b2b, "host clock")},
            higher_is_better=False,
        )
    )


def case_littles_law(ctx: Context) -> None:
    """Achieved copy bandwidth vs resident warps: ks_copy_u1/u4/u8 (1/4/8 16-byte loads in flight
    per thread) launched with exactly b blocks of 256 threads per SM (grid = b x SMs, grid-stride
    loop). Occupancy = b x 8 warps / max warps per SM; bytes in flight = SMs x b x 256 x 16 x
    unroll."""
    torch, np = ctx.torch, ctx.np
    nbytes = ctx.pick(1 * GIB, 128 * MIB, ncu=256 * MIB)
    src = torch.rand(nbytes // 4, device=ctx.dev)
    dst = torch.empty_like(src)
    n4 = np.int64(nbytes // 16)
    max_warps = ctx.props.max_threads_per_multi_processor // 32
    for kname in ("ks_copy_u1", "ks_copy_u4", "ks_copy_u8"):
        unroll = int(kname[-1])
        max_b = ctx.blocks_per_sm(kname, 256)
        bs = sorted({b for b in ctx.pick((1, 2, 3, 4, 6, 8), (1, 4)) if b <= max_b} | {max_b})
        for b in bs:
            with ctx.part(f"{kname} b={b}"):
                grid = b * ctx.sms

                def fn(k=kname, g=grid):
                    ctx.launch(k, (g,), (256,), (src.data_ptr(), dst.data_ptr(), n4))

                params = {
                    "kernel": kname,
                    "unroll": unroll,
                    "blocks_per_sm": b,
                    "warps_per_sm": 8 * b,
                    "occupancy_pct": 100.0 * 8 * b / max_warps,
                    "bytes_in_flight": ctx.sms * b * 256 * 16 * unroll,
                }
                if ctx.profile_point(kname, params, fn, notes=f"buffer {nbytes} B"):
                    continue
                dst.fill_(NAN)
                fn()
                ctx.check_equal(f"{kname} b={b}", dst, src)
                t = ctx.time(fn, flush=ctx.flush_if(2 * nbytes))
                ctx.emit(
                    timing_records(
                        "littles_law",
                        params,
                        t.stats,
                        source=t.source,
                        bytes_moved=harness.copy_bytes(nbytes),
                        notes=f"buffer {nbytes} B; " + t.note(),
                    )
                )


def case_occupancy_sm(ctx: Context) -> None:
    """A kernel whose registers (ks_occ_rN: N live FP32 registers) and dynamic shared memory (an
    unused "spoiler" allocation) are swept; occupancy from the driver's occupancy API, the kernel
    timed (FMA rate); ncu adds achieved and theoretical occupancy. The params carry registers,
    shared memory and block size, so the occupancy calculator's prediction is computed when the run
    is read (analyzers.cases.bench_verdicts)."""
    torch, np = ctx.torch, ctx.np
    block = 256
    grid = ctx.sms * 8 * ctx.pick(4, 1, ncu=2)
    out = torch.empty(grid * block, device=ctx.dev)
    optin = int(ctx.cuda_props.get("sharedMemPerBlockOptin", 48 * 1024))
    configs = [(f"ks_occ_r{r}", 0) for r in (8, 32, 44, 56, 96, 128)]
    configs += [("ks_occ_r8", s * 1024) for s in ctx.pick((8, 20, 40, 60, 100, 200), (40, 100))]
    for kname, smem in configs:
        with ctx.part(f"{kname} smem={smem}"):
            nr = int(kname.split("_r")[1])
            k = ctx.kernel(kname)
            if smem + k.shared_size_bytes > optin:
                continue
            if smem > 48 * 1024:
                k.max_dynamic_shared_size_bytes = smem
            iters = max(64, ctx.pick(16384, 2048, ncu=2048) // nr)

            def fn(kn=kname, sm=smem, it=iters):
                ctx.launch(
                    kn,
                    (grid,),
                    (block,),
                    (out.data_ptr(), np.float32(0.5), np.float32(0.25), np.int32(it)),
                    smem=sm,
                )

            params = {
                "kernel": kname,
                "regs_per_thread": int(k.num_regs),
                "smem_static_bytes": int(k.shared_size_bytes),
                "smem_dynamic_bytes": smem,
                "block_size": block,
            }
            # the occupancy records keep the launch's keys only
            timed = {**params, "grid": grid}
            if ctx.profile_point(kname, params, fn, notes=f"grid {grid}, iters {iters}"):
                continue
            out.fill_(NAN)
            fn()
            ctx.check_equal(kname, out, torch.full_like(out, nr * 0.5))
            with ctx.part(f"{kname} smem={smem} driver"):
                from cupy.cuda import driver

                b = int(driver.occupancyMaxActiveBlocksPerMultiprocessor(k.kernel.ptr, block, smem))
                max_warps = ctx.props.max_threads_per_multi_processor // 32
                ctx.emit(
                    make_record(
                        "occupancy.sm",
                        "driver_occupancy",
                        100.0 * b * block / 32 / max_warps,
                        "%",
                        params,
                        source="driver occupancy API",
                        notes=f"{b} blocks/SM",
                    )
                )
            t = ctx.time(fn)
            ctx.emit(
                timing_records(
                    "occupancy.sm",
                    timed,
                    t.stats,
                    source=t.source,
                    flop=2 * nr * iters * grid * block,
                    notes=f"grid {grid}, iters {iters}; " + t.note(),
                )
            )
