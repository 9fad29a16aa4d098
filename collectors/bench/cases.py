"""The GPU cases of `kernelscope bench` and the measured ceilings.

Each case function takes a `Context` and emits result records through `ctx.emit` (so a case that
fails half-way keeps what it measured). Records of case "ceiling" are the GPU's measured ceilings.
Case ids are those of chapter5-cases.md. Kernels that need an exact shared-memory layout come from
kernels/chapter5.cuh, compiled at run time with NVRTC through CuPy and launched on torch's current
stream; the rest are torch and Triton.

In an `--ncu-child` process the same functions run with `ctx.ncu_child` set: every custom kernel is
launched once (`ctx.profile_point`) and listed in a manifest, for Nsight Compute to profile.
"""
from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
import traceback
import warnings
from pathlib import Path

from collectors.bench import harness as H
from collectors.bench.harness import GIB, MIB, make_record, timing_records

KERNEL_SRC = Path(__file__).resolve().parent / "kernels" / "chapter5.cuh"
NAN = float("nan")

#: device property (cudaDeviceProp name, as CuPy returns it) -> Nsight Compute device attribute
#: (without `device__attribute_`), so analyzers.gpus.resolve_gpu can read a bench result like a report.
ATTRIBUTES_FROM_PROPS = {
    "display_name": "name",
    "compute_capability_major": "major",
    "compute_capability_minor": "minor",
    "multiprocessor_count": "multiProcessorCount",
    "max_threads_per_multiprocessor": "maxThreadsPerMultiProcessor",
    "max_blocks_per_multiprocessor": "maxBlocksPerMultiProcessor",
    "max_registers_per_multiprocessor": "regsPerMultiprocessor",
    "max_registers_per_block": "regsPerBlock",
    "max_shared_memory_per_multiprocessor": "sharedMemPerMultiprocessor",
    "max_shared_memory_per_block": "sharedMemPerBlock",
    "max_shared_memory_per_block_optin": "sharedMemPerBlockOptin",
    "reserved_shared_memory_per_block": "reservedSharedMemPerBlock",
    "max_threads_per_block": "maxThreadsPerBlock",
    "l2_cache_size": "l2CacheSize",
    "total_memory": "totalGlobalMem",
    "clock_rate": "clockRate",
    "memory_clock_rate": "memoryClockRate",
    "global_memory_bus_width": "memoryBusWidth",
}


def device_attributes(props: dict) -> dict:
    """Nsight-Compute-style device attributes from cudaDeviceProp fields (missing ones left out)."""
    out = {}
    for attr, prop in ATTRIBUTES_FROM_PROPS.items():
        v = props.get(prop)
        if isinstance(v, bytes):
            v = v.decode(errors="replace").rstrip("\x00")
        if v is not None:
            out[attr] = v
    return out


class Context:
    """What every case needs: torch, CuPy, the compiled chapter-5 module, device facts, the L2 flush
    buffer, timing defaults for full / quick runs, and per-case bookkeeping."""

    def __init__(self, device: int = 0, *, quick: bool = False, ncu_child: bool = False,
                 manifest_path: str | None = None, log=print):
        import cupy
        import numpy as np
        import torch
        self.torch, self.cupy, self.np = torch, cupy, np
        self.log = log
        torch.cuda.set_device(device)
        cupy.cuda.Device(device).use()
        self.device = device
        self.dev = torch.device("cuda", device)
        self.quick = quick
        self.ncu_child = ncu_child
        self.manifest_path = manifest_path
        self.props = torch.cuda.get_device_properties(device)
        raw = cupy.cuda.runtime.getDeviceProperties(device)
        self.cuda_props = {k: (v.decode(errors="replace").rstrip("\x00") if isinstance(v, bytes) else v)
                           for k, v in raw.items() if isinstance(v, (int, float, str, bytes)) and k not in ("uuid", "luid")}
        self.attributes = device_attributes(self.cuda_props)
        self.sms = int(self.props.multi_processor_count)
        self.l2_bytes = int(self.props.L2_cache_size) or 64 * MIB
        self.spec = None
        self.spec_error = None
        try:
            from analyzers.gpus import resolve_gpu
            self.spec = resolve_gpu(self.props.name, self.attributes)
        except Exception as e:  # noqa: BLE001 - occupancy columns are then left out, with the reason
            self.spec_error = f"{type(e).__name__}: {e}"
        self.mod = cupy.RawModule(code=KERNEL_SRC.read_text(), options=("-std=c++17",))
        self._kernels: dict = {}
        self._streams: dict = {}
        self.flush_buf = None
        if not ncu_child:
            n = max(2 * self.l2_bytes, 256 * MIB) // 4
            self.flush_buf = torch.empty(n, dtype=torch.int32, device=self.dev)
        self.begin_case("")

    # ---- per case ----------------------------------------------------------------------------
    def begin_case(self, case_id: str) -> None:
        self.case_id = case_id
        self.records: list[dict] = []
        self.errors: list[str] = []
        self.checks: dict[str, float] = {}

    def emit(self, recs) -> None:
        self.records.extend([recs] if isinstance(recs, dict) else recs)

    @contextlib.contextmanager
    def part(self, label: str):
        """Run one variant of a case; an exception is recorded (case, label, reason) and the case goes on."""
        try:
            yield
        except Exception as e:  # noqa: BLE001 - every failure is reported, none stops the suite
            where = traceback.extract_tb(e.__traceback__)[-1]
            msg = f"{label}: {type(e).__name__}: {e} (at {Path(where.filename).name}:{where.lineno})"
            self.errors.append(msg)
            self.log(f"    ! {msg}")

    # ---- sizes and timing ----------------------------------------------------------------------
    def pick(self, full, quick, ncu=None):
        """The quick value in a quick run; else the ncu value in an ncu child (when given); else full."""
        if self.quick:
            return quick
        return ncu if (self.ncu_child and ncu is not None) else full

    def time(self, fn, **kw):
        kw.setdefault("target_s", self.pick(0.25, 0.03))
        kw.setdefault("min_reps", self.pick(10, 3))
        kw.setdefault("max_reps", self.pick(200, 20))
        return H.time_gpu(fn, **kw)

    def flush(self) -> None:
        self.flush_buf.zero_()

    def flush_if(self, working_set_bytes: float):
        """The L2 flush when the working set could stay (partly) cached: below 4x the L2."""
        return self.flush if working_set_bytes < 4 * self.l2_bytes else None

    def sync(self) -> None:
        self.torch.cuda.synchronize()

    def check(self, name, out, ref, tol) -> float:
        err = H.check(name, out, ref, tol)
        self.checks[name] = err
        return err

    def check_equal(self, name, out, ref) -> float:
        err = H.check_equal(name, out, ref)
        self.checks[name] = err
        return err

    # ---- custom kernels ------------------------------------------------------------------------
    def kernel(self, name: str):
        k = self._kernels.get(name)
        if k is None:
            k = self._kernels[name] = self.mod.get_function(name)
        return k

    def launch(self, name: str, grid: tuple, block: tuple, args: tuple, smem: int = 0) -> None:
        """Launch a chapter5.cuh kernel on torch's current stream (so events and graph capture see it)."""
        sp = self.torch.cuda.current_stream().cuda_stream
        st = self._streams.get(sp)
        if st is None:
            if sp == 0:
                st = self.cupy.cuda.Stream.null
            else:
                with warnings.catch_warnings():      # ExternalStream is deprecated in CuPy 14, still there
                    warnings.simplefilter("ignore", DeprecationWarning)
                    st = self.cupy.cuda.ExternalStream(sp)
            self._streams[sp] = st
        self.kernel(name)(grid, block, args, shared_mem=smem, stream=st)

    def blocks_per_sm(self, name: str, block: int, smem: int = 0) -> int:
        """Resident blocks per SM for a launch: the driver's occupancy API, else analyzers.occupancy."""
        k = self.kernel(name)
        try:
            from cupy.cuda import driver
            return int(driver.occupancyMaxActiveBlocksPerMultiprocessor(k.kernel.ptr, block, smem))
        except Exception:  # noqa: BLE001 - fall back on the project's calculator
            return self.calc_occupancy(name, block, smem).blocks_per_sm

    def calc_occupancy(self, name: str, block: int, smem_dynamic: int = 0):
        from analyzers.occupancy import occupancy
        if self.spec is None:
            raise RuntimeError(f"no GPU spec for occupancy ({self.spec_error})")
        k = self.kernel(name)
        return occupancy(self.spec, block, k.num_regs, k.shared_size_bytes, smem_dynamic)

    def profile_point(self, kernel: str, params: dict, fn, notes: str | None = None) -> bool:
        """In an ncu child: launch fn() once, list it in the manifest and return True (the caller then
        skips its timing). Elsewhere: False."""
        if not self.ncu_child:
            return False
        fn()
        self.sync()
        with open(self.manifest_path, "a") as f:
            f.write(json.dumps({"case": self.case_id, "kernel": kernel, "params": params, "notes": notes}) + "\n")
        return True


def ceiling_record(metric: str, unit: str, values: dict, timings: dict, extra: dict | None = None, *,
                   higher_is_better: bool = True) -> dict:
    """One ceiling: the best of several methods, with every method's value in params["variants"]."""
    if not values:
        raise RuntimeError(f"{metric}: no method succeeded")
    best = (max if higher_is_better else min)(values, key=values.get)
    t = timings[best]
    flags = ["noisy"] if H.is_noisy(t.median, t.stats.cv) else []
    params = {"method": best, **(extra or {}), "variants": {k: float(v) for k, v in values.items()}}
    return make_record("ceiling", metric, float(values[best]), unit, params, source=t.source,
                       cv=t.stats.cv, n=t.stats.n, notes=t.note(), flags=flags)


# =============================================================================================
# Measured ceilings
# =============================================================================================

#: (chunk bytes, stages, blocks per SM) of the TMA bulk-copy variants of the DRAM copy ceiling.
TMA_COPY_CONFIGS = ((4096, 8, 4), (32768, 4, 1))   # the best and a large-chunk one: tools/exp_ceilings3.py


def tma_copy_args(nbytes: int, chunk: int, stages: int) -> tuple[int, int]:
    """(chunks, dynamic shared memory bytes) of a ks_copy_tma launch; ValueError for a shape the kernel cannot
    run (it would leave a tail uncopied, overflow its 8 barriers, or wait forever with one stage)."""
    if not 2 <= stages <= 8:
        raise ValueError(f"ks_copy_tma needs 2..8 stages, got {stages}")
    if chunk <= 0 or chunk % 16 or chunk >= 1 << 20:
        raise ValueError(f"ks_copy_tma chunk must be a multiple of 16 below 1 MiB, got {chunk}")
    if nbytes % chunk:
        raise ValueError(f"ks_copy_tma copies whole chunks: {nbytes} B is not a multiple of {chunk} B")
    return nbytes // chunk, 64 + stages * chunk


def ceiling_dram_copy(ctx: Context) -> None:
    """Device-memory copy bandwidth, R + W bytes counted: ks_copy_u1/u4/u8 (resident and 4x
    resident grids), TMA bulk copies (ks_copy_tma, compute capability 9.0+) and torch's copy_ on buffers
    far larger than the L2; the best is the ceiling."""
    torch, np = ctx.torch, ctx.np
    nbytes = ctx.pick(4 * GIB, 256 * MIB)   # 4 GiB: 4.28 vs 4.16 TB/s at 2 GiB (tools/exp_ceilings.py, H200)
    src = torch.rand(nbytes // 4, device=ctx.dev)
    dst = torch.empty_like(src)
    n4 = np.int64(nbytes // 16)
    values, timings = {}, {}
    for kname in ("ks_copy_u1", "ks_copy_u4", "ks_copy_u8"):
        per_sm = ctx.blocks_per_sm(kname, 256)
        for label, grid in (("resident grid", per_sm * ctx.sms), ("4x resident grid", 4 * per_sm * ctx.sms)):
            with ctx.part(f"{kname} {label}"):
                def fn(k=kname, g=grid):
                    ctx.launch(k, (g,), (256,), (src.data_ptr(), dst.data_ptr(), n4))
                dst.fill_(NAN)
                fn()
                ctx.check_equal(kname, dst, src)
                key = f"{kname}, {label} ({grid} blocks x 256)"
                timings[key] = t = ctx.time(fn)
                values[key] = H.copy_bytes(nbytes) / t.median
    if ctx.props.major >= 9:   # Hopper+: the Tensor Memory Accelerator's bulk copies (ks_copy_tma)
        for chunk, stages, per_sm in TMA_COPY_CONFIGS:
            with ctx.part(f"ks_copy_tma {chunk} B x {stages}, {per_sm}/SM"):
                nchunks, smem = tma_copy_args(nbytes, chunk, stages)
                k = ctx.kernel("ks_copy_tma")
                k.max_dynamic_shared_size_bytes = smem
                grid = per_sm * ctx.sms

                def fn(grid=grid, chunk=chunk, stages=stages, smem=smem, nchunks=nchunks):
                    ctx.launch("ks_copy_tma", (grid,), (32,), (src.data_ptr(), dst.data_ptr(),
                               np.uint64(nchunks), np.uint32(chunk), np.int32(stages)), smem=smem)
                dst.fill_(NAN)
                fn()
                ctx.check_equal("ks_copy_tma", dst, src)
                key = f"ks_copy_tma, {chunk // 1024} KiB x {stages} stages, {grid} blocks ({per_sm}/SM)"
                timings[key] = t = ctx.time(fn)
                values[key] = H.copy_bytes(nbytes) / t.median
    with ctx.part("torch copy_"):
        dst.fill_(NAN)
        dst.copy_(src)
        ctx.check_equal("torch copy_", dst, src)
        timings["torch Tensor.copy_"] = t = ctx.time(lambda: dst.copy_(src))
        values["torch Tensor.copy_"] = H.copy_bytes(nbytes) / t.median
    ctx.emit(ceiling_record("dram_copy_bandwidth", "B/s", values, timings,
                            {"buffer_bytes": nbytes, "bytes_counted": "read + write"}))


def ceiling_l2_read(ctx: Context) -> None:
    """L2 read bandwidth: a buffer well inside the L2 (min(16 MiB, L2/3)) re-read `passes` times per
    launch with ld.global.cg (L1 bypassed); bytes = passes x buffer."""
    torch, np = ctx.torch, ctx.np
    nbytes = min(16 * MIB, ctx.l2_bytes // 3) // 16 * 16
    passes = ctx.pick(64, 8)
    inp = torch.rand(nbytes // 4, device=ctx.dev)            # positive: no cancellation in the check
    values, timings = {}, {}
    for mult in (1, 2):
        grid = ctx.blocks_per_sm("ks_l2_read", 256) * ctx.sms * mult
        out = torch.empty(grid * 256, device=ctx.dev)
        with ctx.part(f"ks_l2_read grid {grid}"):
            def fn(g=grid, o=out):
                ctx.launch("ks_l2_read", (g,), (256,), (inp.data_ptr(), o.data_ptr(), np.int64(nbytes // 16), np.int32(passes)))
            out.fill_(NAN)
            fn()
            ctx.check("ks_l2_read", out.double().sum().reshape(1), (inp.double().sum() * passes).reshape(1), 1e-4)
            key = f"ks_l2_read, {grid} blocks x 256"
            timings[key] = t = ctx.time(fn)
            values[key] = passes * nbytes / t.median
    ctx.emit(ceiling_record("l2_read_bandwidth", "B/s", values, timings,
                            {"buffer_bytes": nbytes, "passes": passes, "bytes_counted": "read"}))


def ceiling_smem_read(ctx: Context) -> None:
    """Shared-memory read bandwidth: conflict-free 16-byte loads (ks_smem_read); bytes = threads x
    iters x 8 x 16."""
    torch, np = ctx.torch, ctx.np
    iters = ctx.pick(256, 64)
    grid = ctx.blocks_per_sm("ks_smem_read", 256) * ctx.sms
    out = torch.empty(grid * 256, device=ctx.dev)

    def fn():
        ctx.launch("ks_smem_read", (grid,), (256,), (out.data_ptr(), np.int32(iters)))
    out.fill_(NAN)
    fn()
    tid = torch.arange(256, device=ctx.dev, dtype=torch.float32).remainder(8).repeat(grid)
    ctx.check_equal("ks_smem_read", out, iters * 8 * (tid + 1.75))
    t = ctx.time(fn)
    nbytes = grid * 256 * iters * 8 * 16
    ctx.emit(ceiling_record("smem_read_bandwidth", "B/s", {f"ks_smem_read, {grid} blocks x 256": nbytes / t.median},
                            {f"ks_smem_read, {grid} blocks x 256": t}, {"bytes": nbytes}))


def ceiling_bf16_matmul(ctx: Context) -> None:
    """Dense BF16 matrix rate through torch.matmul (cuBLAS) on random n x n x n; FLOP = 2 n^3."""
    torch = ctx.torch
    n = ctx.pick(8192, 2048)
    a = torch.randn(n, n, device=ctx.dev, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=ctx.dev, dtype=torch.bfloat16)
    c = torch.empty(n, n, device=ctx.dev, dtype=torch.bfloat16)
    c.fill_(NAN)
    torch.matmul(a, b, out=c)
    ctx.check("torch.matmul bf16", c[:64], a[:64].double() @ b.double(), 1e-2)
    def fn():
        torch.matmul(a, b, out=c)
    flop = H.matmul_flop(n, n, n)
    base = f"torch.matmul bf16 {n}x{n}x{n}"
    values, timings = {}, {}
    # burst: after an idle pause, before the board reaches its power limit (the clock NVIDIA's peak assumes)
    ctx.sync()
    time.sleep(ctx.pick(2.0, 0.05))
    key = f"{base}, burst (after 2 s idle: 6 warm-up calls, then 20 timed)"
    timings[key] = t = ctx.time(fn, warmup=3, min_reps=ctx.pick(20, 3), max_reps=ctx.pick(20, 3), attempts=1)
    values[key] = flop / t.median
    # sustained: after about 1 s at full load, when power management has settled the clock
    for _ in range(max(1, int(ctx.pick(1.0, 0.02) / t.median))):
        fn()
    key = f"{base}, sustained (after 1 s at full load)"
    timings[key] = t = ctx.time(fn, warmup=0, min_reps=ctx.pick(100, 3), max_reps=ctx.pick(100, 3), attempts=1)
    values[key] = flop / t.median
    ctx.emit(ceiling_record("bf16_dense_flop_rate", "FLOP/s", values, timings,
                            {"m": n, "n": n, "k": n, "flop": flop}))


def ceiling_fp32_fma(ctx: Context) -> None:
    """FP32 FMA rate: ks_fma, 8 independent chains, 64 FMAs per loop trip; FLOP = 2 x 64 x iters x threads."""
    torch, np = ctx.torch, ctx.np
    iters = ctx.pick(512, 64)
    grid = ctx.blocks_per_sm("ks_fma", 256) * ctx.sms * 2
    out = torch.empty(grid * 256, device=ctx.dev)

    def fn():
        ctx.launch("ks_fma", (grid,), (256,), (out.data_ptr(), np.float32(0.5), np.float32(0.25), np.int32(iters)))
    out.fill_(NAN)
    fn()
    ctx.check_equal("ks_fma", out, torch.full_like(out, 4.0))
    t = ctx.time(fn)
    flop = 2 * 64 * iters * grid * 256
    key = f"ks_fma, {grid} blocks x 256"
    ctx.emit(ceiling_record("fp32_flop_rate", "FLOP/s", {key: flop / t.median}, {key: t}, {"flop": flop}))


def ceiling_host_link(ctx: Context) -> None:
    """Host<->device copy bandwidth, pinned and pageable, each direction (bytes = size, one way)."""
    torch = ctx.torch
    nbytes = ctx.pick(1024 * MIB, 32 * MIB)
    dev_src = torch.rand(nbytes // 4, device=ctx.dev)
    dev_dst = torch.empty_like(dev_src)
    pinned = torch.empty(nbytes // 4, pin_memory=True)
    pageable = torch.empty(nbytes // 4)
    pinned.copy_(dev_src)
    pageable.copy_(dev_src)
    cases = {
        ("h2d", "pinned"): lambda: dev_dst.copy_(pinned, non_blocking=True),
        ("h2d", "pageable"): lambda: dev_dst.copy_(pageable, non_blocking=True),
        ("d2h", "pinned"): lambda: pinned.copy_(dev_src, non_blocking=True),
        ("d2h", "pageable"): lambda: pageable.copy_(dev_src),
    }
    for (direction, mem), fn in cases.items():
        with ctx.part(f"{direction} {mem}"):
            if direction == "h2d":
                dev_dst.fill_(NAN)
                fn()
                ctx.sync()
                ctx.check_equal(f"{direction} {mem}", dev_dst, dev_src)
            else:
                (pinned if mem == "pinned" else pageable).fill_(NAN)
                fn()
                ctx.sync()
                ctx.check_equal(f"{direction} {mem}", (pinned if mem == "pinned" else pageable).to(ctx.dev), dev_src)
            t = ctx.time(fn, min_reps=ctx.pick(8, 3), max_reps=ctx.pick(20, 5), sync_each=True)
            ctx.emit(ceiling_record(f"{direction}_{mem}_bandwidth", "B/s", {f"torch copy_, {nbytes} B": nbytes / t.median},
                                    {f"torch copy_, {nbytes} B": t}, {"bytes": nbytes}))


# =============================================================================================
# 5.1 Submission, copies and synchronisation
# =============================================================================================

def case_h2d_chunked_copy(ctx: Context) -> None:
    """Copy `total` bytes host->device as k chunks (pinned / pageable; k = 1, 4, 16, 64), back to back
    on one stream; time from before the first to after the last chunk."""
    torch = ctx.torch
    total = ctx.pick(64 * MIB, 8 * MIB)
    dev_src = torch.rand(total // 4, device=ctx.dev)
    dst = torch.empty_like(dev_src)
    hosts = {"pinned": torch.empty(total // 4, pin_memory=True), "pageable": torch.empty(total // 4)}
    for h in hosts.values():
        h.copy_(dev_src)
    for mem, host in hosts.items():
        for k in (1, 4, 16, 64):
            with ctx.part(f"{mem} x{k}"):
                size = total // 4 // k
                pairs = [(dst[i * size:(i + 1) * size], host[i * size:(i + 1) * size]) for i in range(k)]

                def fn(pairs=pairs):
                    for d, s in pairs:
                        d.copy_(s, non_blocking=True)
                dst.fill_(NAN)
                fn()
                ctx.sync()
                ctx.check_equal(f"{mem} x{k}", dst, dev_src)
                t = ctx.time(fn, sync_each=True, allow_graph=False, max_reps=ctx.pick(30, 5))
                params = {"memory": mem, "chunks": k, "chunk_bytes": size * 4, "total_bytes": total}
                ctx.emit(timing_records("h2d.chunked_copy", params, t.stats, source=t.source, bytes_moved=total,
                                        prefix="copy_", notes=t.note()))


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
            inner = ctx.pick(10, 2)       # call + synchronize, `inner` times per sample (host jitter averages out)
            with H._no_gc():
                for _ in range(reps):
                    ctx.sync()
                    t0 = time.perf_counter()
                    for _ in range(inner):
                        fn()
                        ctx.sync()
                    wait.append((time.perf_counter() - t0) / inner)
            ev = ctx.time(fn, sync_each=True, hold=True, allow_graph=False, min_reps=reps, max_reps=reps)
            for metric, samples, note in (
                    ("host_clock_async_call", submit, "GPU idle before each call; L2 not flushed"),
                    ("host_clock_until_result", wait, f"GPU idle before each call; {inner} calls per sample, time / call; "
                                                      "L2 not flushed")):
                s = H.summarize(samples)
                ctx.emit(make_record("timing.positions", metric, s.median, "s", params, source="host clock",
                                     cv=s.cv, n=s.n, notes=note))
            ctx.emit(make_record("timing.positions", "event_time", ev.median, "s", params, source=ev.source,
                                 cv=ev.stats.cv, n=ev.stats.n, notes=ev.note()))


def case_compile_amortization(ctx: Context) -> None:
    """First call (compile included) vs steady state of SiLU(G)*U: torch.compile and a Triton JIT kernel
    (a fresh specialisation, so it compiles), next to eager torch. Steady state = host wall clock per
    call, back to back, including the final synchronisation (what a caller pays)."""
    import random

    torch = ctx.torch
    import torch._dynamo
    import torch.nn.functional as F

    from collectors.bench import tkernels as tk
    f = ctx.pick(12288, 4096)
    ms = ctx.pick([1024, 1], [1])
    calls = ctx.pick(200, 20)

    def steady_note(t):
        return "; ".join(x for x in ("per call, back to back, with the final sync", t.attempts_note()) if x)

    def per_call(fn):
        def many():
            for _ in range(calls):
                fn()
            ctx.sync()
        return H.time_host(many, reps=ctx.pick(15, 2), per_call=calls)

    for i, m in enumerate(ms):
        g = torch.randn(m, f, device=ctx.dev, dtype=torch.bfloat16)
        u = torch.randn(m, f, device=ctx.dev, dtype=torch.bfloat16)
        z = torch.empty_like(g)
        ref = F.silu(g.double()) * u.double()
        base = {"m": m, "f": f}
        with ctx.part(f"eager M={m}"):
            t = per_call(lambda: F.silu(g) * u)
            ctx.emit(make_record("compile.amortization", "steady_call_time", t.median, "s", {**base, "impl": "eager"},
                                 source="host clock", cv=t.stats.cv, n=t.stats.n, notes=steady_note(t)))
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
            ctx.emit(make_record("compile.amortization", "first_call_time", first, "s", p, source="host clock", n=1,
                                 notes="compile caches empty (fresh TORCHINDUCTOR_CACHE_DIR); compile threads: "
                                       f"TORCHINDUCTOR_COMPILE_THREADS={os.environ.get('TORCHINDUCTOR_COMPILE_THREADS', 'default')}"))
            ctx.emit(make_record("compile.amortization", "steady_call_time", t.median, "s", p, source="host clock",
                                 cv=t.stats.cv, n=t.stats.n, notes=steady_note(t)))
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
            ctx.emit(make_record("compile.amortization", "first_call_time", first, "s", p, source="host clock", n=1,
                                 notes="new specialisation: compiled on this call"))
            ctx.emit(make_record("compile.amortization", "steady_call_time", t.median, "s", p, source="host clock",
                                 cv=t.stats.cv, n=t.stats.n, notes=steady_note(t)))


def case_launch_overhead(ctx: Context) -> None:
    """Empty-kernel launch cost from Python: N launches back to back (host submission time and time
    until all are done, per launch), launch + synchronize each, and CUDA-graph replay (per node =
    (T(K nodes) - T(1 node)) / (K - 1)). Emits the launch ceilings too (best launcher)."""
    torch, np = ctx.torch, ctx.np
    from collectors.bench import tkernels as tk
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
            for metric, samples in (("host_submit_time_per_launch", submit), ("back_to_back_time_per_launch", done)):
                s = H.summarize(samples)
                ctx.emit(make_record("launch.overhead", metric, s.median, "s", p, source="host clock", cv=s.cv, n=s.n))
            s_done = H.summarize(done)
            b2b_vals[label] = s_done.median
            b2b_t[label] = H.Timing(s_done, "host clock")

            def sync_each(fn=fn):
                fn()
                ctx.sync()
            t = H.time_host(sync_each, reps=max(n // 4, 20))
            sync_vals[label], sync_t[label] = t.median, t
            ctx.emit(make_record("launch.overhead", "launch_and_sync_time", t.median, "s", p, source="host clock",
                                 cv=t.stats.cv, n=t.stats.n))
    with ctx.part("launch ceilings"):
        ctx.emit(ceiling_record("launch_back_to_back", "s", b2b_vals, b2b_t, higher_is_better=False))
        ctx.emit(ceiling_record("launch_with_sync", "s", sync_vals, sync_t, higher_is_better=False))
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
            ctx.emit(make_record("launch.overhead", "graph_replay_time", t.median, "s", {"graph_nodes": k},
                                 source=t.source, cv=t.stats.cv, n=t.stats.n, notes="empty kernels, one graph launch"))
        per_node = (times[k_nodes].median - times[1].median) / (k_nodes - 1)
        t = times[k_nodes]
        ctx.emit(make_record("launch.overhead", "graph_time_per_node", per_node, "s", {"graph_nodes": k_nodes},
                             source=t.source, cv=t.stats.cv, n=t.stats.n, notes="(T(K) - T(1)) / (K - 1)"))
        ctx.emit(make_record("ceiling", "graph_node_replay", per_node, "s", {"method": f"ks_empty graph, (T({k_nodes}) - T(1)) / {k_nodes - 1}"},
                             source=t.source, cv=t.stats.cv, n=t.stats.n))


def case_littles_law(ctx: Context) -> None:
    """Achieved copy bandwidth vs resident warps: ks_copy_u1/u4/u8 (1/4/8 16-byte loads in flight per
    thread) launched with exactly b blocks of 256 threads per SM (grid = b x SMs, grid-stride loop).
    Occupancy = b x 8 warps / max warps per SM; bytes in flight = SMs x b x 256 x 16 x unroll."""
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
                params = {"kernel": kname, "unroll": unroll, "blocks_per_sm": b, "warps_per_sm": 8 * b,
                          "occupancy_pct": 100.0 * 8 * b / max_warps, "bytes_in_flight": ctx.sms * b * 256 * 16 * unroll}
                if ctx.profile_point(kname, params, fn, notes=f"buffer {nbytes} B"):
                    continue
                dst.fill_(NAN)
                fn()
                ctx.check_equal(f"{kname} b={b}", dst, src)
                t = ctx.time(fn, flush=ctx.flush_if(2 * nbytes))
                ctx.emit(timing_records("littles_law", params, t.stats, source=t.source,
                                        bytes_moved=H.copy_bytes(nbytes), notes=f"buffer {nbytes} B; " + t.note()))


def case_occupancy_sm(ctx: Context) -> None:
    """A kernel whose registers (ks_occ_rN: N live FP32 registers) and dynamic shared memory (an unused
    "spoiler" allocation) are swept; occupancy calculated by analyzers.occupancy and by the driver's
    occupancy API, the kernel timed (FMA rate); ncu adds achieved and theoretical occupancy."""
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
                ctx.launch(kn, (grid,), (block,), (out.data_ptr(), np.float32(0.5), np.float32(0.25), np.int32(it)), smem=sm)
            params = {"kernel": kname, "regs_per_thread": int(k.num_regs), "smem_static_bytes": int(k.shared_size_bytes),
                      "smem_dynamic_bytes": smem, "block_size": block}
            if ctx.profile_point(kname, params, fn, notes=f"grid {grid}, iters {iters}"):
                continue
            out.fill_(NAN)
            fn()
            ctx.check_equal(kname, out, torch.full_like(out, nr * 0.5))
            with ctx.part(f"{kname} smem={smem} calculated"):
                r = ctx.calc_occupancy(kname, block, smem)
                ctx.emit(make_record("occupancy.sm", "calculated_occupancy", r.occupancy_pct, "%",
                                     params, source="calculated", notes=f"analyzers.occupancy: {r.blocks_per_sm} blocks/SM, "
                                     f"limited by {', '.join(r.limiters)}"))
            with ctx.part(f"{kname} smem={smem} driver"):
                from cupy.cuda import driver
                b = int(driver.occupancyMaxActiveBlocksPerMultiprocessor(k.kernel.ptr, block, smem))
                max_warps = ctx.props.max_threads_per_multi_processor // 32
                ctx.emit(make_record("occupancy.sm", "driver_occupancy", 100.0 * b * block / 32 / max_warps, "%",
                                     params, source="driver occupancy API", notes=f"{b} blocks/SM"))
            t = ctx.time(fn)
            ctx.emit(timing_records("occupancy.sm", params, t.stats, source=t.source,
                                    flop=2 * nr * iters * grid * block, notes=f"grid {grid}, iters {iters}; " + t.note()))


# =============================================================================================
# 5.2 One operator: tiling, layout, real traffic
# =============================================================================================

def case_tiling_traffic(ctx: Context) -> None:
    """Tiled BF16 matmul C = A W (FP32 accumulation on CUDA cores, k = 32) with 64x64, 64x128 and
    128x128 output tiles at M = 1024, K = 4096, N = 12288; ncu adds L2<-L1 read sectors and DRAM bytes."""
    torch, np = ctx.torch, ctx.np
    m, k, n = ctx.pick((1024, 4096, 12288), (256, 1024, 1024))
    a = torch.randn(m, k, device=ctx.dev, dtype=torch.bfloat16)
    w = torch.randn(k, n, device=ctx.dev, dtype=torch.bfloat16)
    c = torch.empty(m, n, device=ctx.dev, dtype=torch.bfloat16)
    ref = None if ctx.ncu_child else a.double() @ w.double()
    for kname, bm, bn in (("ks_matmul_64x64", 64, 64), ("ks_matmul_64x128", 64, 128), ("ks_matmul_128x128", 128, 128)):
        with ctx.part(kname):
            def fn(kn=kname, bm=bm, bn=bn):
                ctx.launch(kn, (n // bn, m // bm), (256,), (a.data_ptr(), w.data_ptr(), c.data_ptr(),
                                                            np.int32(m), np.int32(n), np.int32(k)))
            kern = ctx.kernel(kname)
            params = {"kernel": kname, "tile_m": bm, "tile_n": bn, "tile_k": 32, "m": m, "k": k, "n": n,
                      "regs_per_thread": int(kern.num_regs), "smem_static_bytes": int(kern.shared_size_bytes)}
            if ctx.profile_point(kname, params, fn):
                continue
            c.fill_(NAN)
            fn()
            ctx.check(kname, c, ref, 1e-2)
            t = ctx.time(fn, flush=ctx.flush_if(2 * (m * k + k * n + m * n)))
            ctx.emit(timing_records("tiling.traffic", params, t.stats, source=t.source, flop=H.matmul_flop(m, n, k),
                                    notes=t.note()))
            with ctx.part(f"{kname} occupancy"):
                r = ctx.calc_occupancy(kname, 256, 0)
                ctx.emit(make_record("tiling.traffic", "calculated_occupancy", r.occupancy_pct, "%", params,
                                     source="calculated", notes=f"analyzers.occupancy: {r.blocks_per_sm} blocks/SM, "
                                     f"limited by {', '.join(r.limiters)}"))


BANK_STRIDES = {
    4: (list(range(1, 65)), [1, 2, 16, 32, 33], list(range(1, 65))),
    8: (list(range(2, 65, 2)), [2, 32, 34], [2, 4, 8, 16, 32, 34, 64]),
    16: (list(range(4, 65, 4)), [4, 32, 36], [4, 8, 16, 32, 36, 64]),
}


def colread_reference(width: int, stride: int, iters: int):
    """What lane L of ks_colread<width> returns: sum over iterations it of the width/4 words
    (L*stride + (it & 7) * width/4 + j) & 1023, j < width/4 (shared memory holds (i & 1023))."""
    import numpy as np
    vw = width // 4
    lanes = np.arange(32)[:, None, None]
    idx = (lanes * stride + np.arange(8)[None, :, None] * vw + np.arange(vw)[None, None, :]) & 1023
    per_cycle = idx.sum(axis=(1, 2)).astype(np.float64)
    cycles, rest = divmod(iters, 8)
    partial = idx[:, :rest, :].sum(axis=(1, 2)) if rest else 0
    return per_cycle * cycles + partial


def case_bank_column_read(ctx: Context) -> None:
    """Shared-memory column reads: lane i reads `width` bytes at word i x stride (+ a column offset),
    strides 1..64 for 4-byte words and multiples of width/4 for 8/16-byte vectors. Reports the time
    per stride and the time ratio of stride 32 to the padded stride (33 words for 4-byte)."""
    torch, np = ctx.torch, ctx.np
    blocks = ctx.sms * ctx.pick(8, 8, ncu=2)
    iters = ctx.pick(4096, 256, ncu=256)  # 4096 x 4 words x 1023 < 2^24: the FP32 sum stays exact
    out = torch.empty(blocks * 256, device=ctx.dev)
    for width, (full, quick, ncu) in BANK_STRIDES.items():
        kname = f"ks_colread{width}"
        times = {}
        for s in ctx.pick(full, quick, ncu=ncu):
            with ctx.part(f"{kname} stride {s}"):
                smem = (32 * s + 64) * 4

                def fn(s=s, smem=smem):
                    ctx.launch(kname, (blocks,), (256,), (out.data_ptr(), np.int32(s), np.int32(iters)), smem=smem)
                params = {"kernel": kname, "width_bytes": width, "stride_words": s}
                if ctx.profile_point(kname, params, fn, notes=f"{blocks} blocks x 256, {iters} iterations"):
                    continue
                out.fill_(NAN)
                fn()
                got = out.view(-1, 32).cpu().numpy()
                ref = colread_reference(width, s, iters)
                if not np.array_equal(got, np.broadcast_to(ref, got.shape)):
                    raise H.CheckFailed(f"{kname} stride {s}: output differs from the reference")
                ctx.checks[f"{kname} stride {s}"] = 0.0
                times[s] = t = ctx.time(fn, target_s=ctx.pick(0.1, 0.02))
                ctx.emit(timing_records("bank.column_read", params, t.stats, source=t.source,
                                        notes=f"{blocks} blocks x 256, {iters} iterations; " + t.note()))
        pad = 32 + width // 4
        if 32 in times and pad in times:
            ctx.emit(make_record("bank.column_read", "time_ratio_unpadded_padded", times[32].median / times[pad].median, "1",
                                 {"kernel": kname, "width_bytes": width, "strides": f"32/{pad}"}, source=times[32].source,
                                 notes=f"time at stride 32 / time at stride {pad}"))


def case_transpose_tile(ctx: Context) -> None:
    """n x n FP32 transpose through a shared-memory tile: 16x16 and 32x32 blocks, unpadded and padded."""
    torch = ctx.torch
    n = ctx.pick(8192, 1024)
    inp = torch.rand(n, n, device=ctx.dev)
    out = torch.empty_like(inp)
    for kname, tile, pad in (("ks_transpose16", 16, False), ("ks_transpose16_pad", 16, True),
                             ("ks_transpose32", 32, False), ("ks_transpose32_pad", 32, True)):
        with ctx.part(kname):
            def fn(kn=kname, tile=tile):
                ctx.launch(kn, (n // tile, n // tile), (tile, tile), (inp.data_ptr(), out.data_ptr(), ctx.np.int32(n)))
            params = {"kernel": kname, "tile": tile, "padded": pad, "n": n}
            if ctx.profile_point(kname, params, fn):
                continue
            out.fill_(NAN)
            fn()
            ctx.check_equal(kname, out, inp.t())
            t = ctx.time(fn, flush=ctx.flush_if(2 * n * n * 4))
            ctx.emit(timing_records("transpose.tile", params, t.stats, source=t.source,
                                    bytes_moved=H.transpose_bytes(n), notes=t.note()))


def case_rmsnorm_split(ctx: Context) -> None:
    """RMSNorm over [rows, 4096] BF16 (Triton): one program per row (segments = 1, one pass) vs each
    row split into s segments (partial sums of squares, then merge + scale: two kernels)."""
    torch = ctx.torch
    from collectors.bench import tkernels as tk
    h = 4096
    w = torch.randn(h, device=ctx.dev, dtype=torch.bfloat16)
    for rows in ctx.pick((1, 16, 256, 1024, 8192), (1, 64)):
        x = torch.randn(rows, h, device=ctx.dev, dtype=torch.bfloat16)
        y = torch.empty_like(x)
        xd = x.double()
        ref = xd * torch.rsqrt((xd * xd).mean(dim=1, keepdim=True) + 1e-6) * w.double()
        for s in ctx.pick((1, 2, 4, 8, 16, 32), (1, 4)):
            with ctx.part(f"rows={rows} segments={s}"):
                part = torch.empty(rows, s, device=ctx.dev, dtype=torch.float32)

                def fn(s=s, part=part):
                    tk.rmsnorm(x, w, y, part, s, 1e-6)
                y.fill_(NAN)
                fn()
                ctx.check(f"rmsnorm rows={rows} s={s}", y, ref, 1e-2)
                t = ctx.time(fn, flush=ctx.flush_if(2 * rows * h * 2), target_s=ctx.pick(0.1, 0.02))
                params = {"rows": rows, "hidden": h, "segments": s, "tasks": rows * s, "kernels": 1 if s == 1 else 2}
                ctx.emit(timing_records("rmsnorm.split", params, t.stats, source=t.source,
                                        bytes_moved=H.rmsnorm_bytes(rows, h, s), notes=t.note()))


# =============================================================================================
# 5.3 Neighbouring operators: fusion, buffers, pipelines
# =============================================================================================

def case_fusion_activation_chain(ctx: Context) -> None:
    """Z = SiLU(G) * U over [M, 12288] BF16: unfused torch (two kernels, SiLU(G) written and read back)
    vs one fused Triton kernel, over M."""
    torch = ctx.torch
    import torch.nn.functional as F

    from collectors.bench import tkernels as tk
    f = 12288
    for m in ctx.pick((1, 16, 128, 1024, 4096), (1, 64)):
        with ctx.part(f"M={m}"):
            g = torch.randn(m, f, device=ctx.dev, dtype=torch.bfloat16)
            u = torch.randn(m, f, device=ctx.dev, dtype=torch.bfloat16)
            z = torch.empty_like(g)
            ref = F.silu(g.double()) * u.double()
            ctx.check(f"unfused M={m}", F.silu(g) * u, ref, 1e-2)
            z.fill_(NAN)
            tk.silu_mul(g, u, z)
            ctx.check(f"fused M={m}", z, ref, 1e-2)
            for impl, fn, fused in (("unfused torch", lambda: F.silu(g) * u, False),
                                    ("fused triton", lambda: tk.silu_mul(g, u, z), True)):
                nbytes = H.silu_mul_bytes(m, f, 2, fused=fused)
                t = ctx.time(fn, flush=ctx.flush_if(nbytes))
                ctx.emit(timing_records("fusion.activation_chain", {"m": m, "f": f, "impl": impl}, t.stats,
                                        source=t.source, bytes_moved=nbytes, notes=t.note()))


def case_flash_attention_traffic(ctx: Context) -> None:
    """One head, d = 128, causal, BF16: torch SDPA with the math backend (materialises the scores)
    vs the flash backend, over L: time and extra peak memory (max_memory_allocated - allocated before)."""
    torch = ctx.torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    d = 128
    for length in ctx.pick((2048, 4096, 8192), (1024,)):
        q, k, v = (torch.randn(1, 1, length, d, device=ctx.dev, dtype=torch.bfloat16) for _ in range(3))
        with sdpa_kernel([SDPBackend.MATH]):
            ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=True)
        for name, backend in (("math", SDPBackend.MATH), ("flash", SDPBackend.FLASH_ATTENTION)):
            with ctx.part(f"{name} L={length}"):
                def fn(backend=backend):
                    with sdpa_kernel([backend]):
                        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
                ctx.check(f"{name} L={length}", fn(), ref, 1e-2)
                ctx.sync()
                torch.cuda.reset_peak_memory_stats(ctx.dev)
                before = torch.cuda.memory_allocated(ctx.dev)
                o = fn()
                ctx.sync()
                extra = torch.cuda.max_memory_allocated(ctx.dev) - before
                del o
                params = {"backend": name, "length": length, "head_dim": d, "heads": 1, "causal": True}
                ctx.emit(make_record("flash.attention_traffic", "extra_peak_memory", extra, "B", params,
                                     source="torch memory stats", n=1, notes="max_memory_allocated - memory_allocated before the call (output included)"))
                t = ctx.time(fn, flush=ctx.flush_if(64 * MIB))
                ctx.emit(timing_records("flash.attention_traffic", params, t.stats, source=t.source,
                                        bytes_moved=H.attention_min_bytes(length, d), notes=t.note()))


# =============================================================================================
# 5.5 Runtime: submission, replay
# =============================================================================================

def _profile_counts(ctx: Context, fn, calls: int) -> dict:
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        ctx.sync()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            events = json.load(f).get("traceEvents", [])
    return H.count_launches(events)


def case_graph_replay(ctx: Context) -> None:
    """Qwen3-8B FFN (H 4096, F 12288, BF16) at M = 1: three calls eagerly vs the same three captured in
    one CUDA graph, with the activation unfused (torch) or fused (Triton); time per FFN (device idle
    before each repetition), kernels and host launches per FFN counted with the torch profiler."""
    torch = ctx.torch
    import torch.nn.functional as F

    from collectors.bench import tkernels as tk
    hdim, fdim = ctx.pick((4096, 12288), (1024, 3072))
    per = 3
    wg = (torch.randn(hdim, fdim, device=ctx.dev) * 0.02).bfloat16()
    wu = (torch.randn(hdim, fdim, device=ctx.dev) * 0.02).bfloat16()
    wd = (torch.randn(fdim, hdim, device=ctx.dev) * 0.02).bfloat16()
    x = torch.randn(1, hdim, device=ctx.dev).bfloat16()
    z = torch.empty(1, fdim, device=ctx.dev, dtype=torch.bfloat16)
    xd = x.double()
    ref = (F.silu(xd @ wg.double()) * (xd @ wu.double())) @ wd.double()
    ffns = {
        "unfused": lambda: (F.silu(x @ wg) * (x @ wu)) @ wd,
        "fused triton": lambda: tk.silu_mul(x @ wg, x @ wu, z) @ wd,
    }
    for act, ffn in ffns.items():
        with ctx.part(f"{act}"):
            ctx.check(f"ffn {act}", ffn(), ref, 2e-2)

            def eager(ffn=ffn):
                for _ in range(per):
                    ffn()
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                eager()
            torch.cuda.current_stream().wait_stream(side)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                outs = [ffn() for _ in range(per)]
            g.replay()
            ctx.sync()
            ctx.check(f"ffn {act} graph", outs[-1], ref, 2e-2)
            for mode, fn in (("eager", eager), ("graph", g.replay)):
                params = {"mode": mode, "activation": act, "m": 1, "hidden": hdim, "intermediate": fdim, "ffn_per_call": per}
                t = ctx.time(fn, sync_each=True, allow_graph=False, max_reps=ctx.pick(100, 10), batch=ctx.pick(8, 1))
                ctx.emit(make_record("graph.replay", "time_per_ffn", t.median / per, "s", params, source=t.source,
                                     cv=t.stats.cv, n=t.stats.n,
                                     notes=f"{per * t.batch} FFN per repetition ({t.batch} calls of {per}); device idle "
                                           "before each repetition; " + t.note()))
                with ctx.part(f"{act} {mode} profiler counts"):
                    c = _profile_counts(ctx, fn, 2)
                    ctx.emit(make_record("graph.replay", "kernels_per_ffn", c["kernels"] / (2 * per), "count", params,
                                         source="torch profiler", n=2))
                    ctx.emit(make_record("graph.replay", "host_launches_per_ffn",
                                         (c["kernel_launches"] + c["graph_launches"]) / (2 * per), "count", params,
                                         source="torch profiler", n=2, notes="kernel launch calls + graph launch calls"))
            del g, outs


# =============================================================================================
# Registry: order of execution, time limit (s, full / quick), and which cases ncu reruns
# =============================================================================================

CASES = {
    "ceiling.dram_copy": (ceiling_dram_copy, 60, 30),
    "ceiling.l2_read": (ceiling_l2_read, 30, 20),
    "ceiling.smem_read": (ceiling_smem_read, 30, 20),
    "ceiling.bf16_matmul": (ceiling_bf16_matmul, 40, 20),
    "ceiling.fp32_fma": (ceiling_fp32_fma, 30, 20),
    "ceiling.host_link": (ceiling_host_link, 40, 20),
    "h2d.chunked_copy": (case_h2d_chunked_copy, 40, 20),
    "timing.positions": (case_timing_positions, 30, 20),
    "launch.overhead": (case_launch_overhead, 40, 20),
    "littles_law": (case_littles_law, 40, 20),
    "occupancy.sm": (case_occupancy_sm, 40, 20),
    "tiling.traffic": (case_tiling_traffic, 40, 20),
    "bank.column_read": (case_bank_column_read, 60, 20),
    "transpose.tile": (case_transpose_tile, 30, 20),
    "rmsnorm.split": (case_rmsnorm_split, 60, 30),
    "fusion.activation_chain": (case_fusion_activation_chain, 40, 20),
    "flash.attention_traffic": (case_flash_attention_traffic, 40, 20),
    "compile.amortization": (case_compile_amortization, 150, 90),
    "graph.replay": (case_graph_replay, 60, 40),           # last: the torch profiler runs here
}

#: case -> kernel-name prefix that Nsight Compute profiles in the case's child process
NCU_CASES = {
    "bank.column_read": "ks_colread",
    "transpose.tile": "ks_transpose",
    "tiling.traffic": "ks_matmul",
    "littles_law": "ks_copy",
    "occupancy.sm": "ks_occ",
}


def select_cases(spec: str | None) -> list[str]:
    """Case ids from a comma list of ids or prefixes ('ceiling' selects every ceiling.*); all if None.
    Raises ValueError for a name that selects nothing."""
    if not spec:
        return list(CASES)
    wanted = [s.strip() for s in spec.split(",") if s.strip()]
    out = []
    for w in wanted:
        hits = [c for c in CASES if c == w or c.startswith(w + ".") or c.startswith(w)]
        if not hits:
            raise ValueError(f"unknown case {w!r}; known: {', '.join(CASES)}")
        out += [h for h in hits if h not in out]
    return [c for c in CASES if c in out]

