"""The GPU's measured ceilings (records of case "ceiling"): DRAM copy, L2 and shared-memory reads,
cuBLAS BF16, FP32 FMA, host link, launch and graph costs."""

from __future__ import annotations

import time

from collectors.bench import harness
from collectors.bench.context import NAN, Context, ceiling_record
from collectors.bench.harness import GIB, MIB


# =============================================================================================
# Measured ceilings
# =============================================================================================

#: (chunk bytes, stages, blocks per SM) of the TMA bulk-copy variants of the DRAM copy ceiling.
# the best and a large-chunk one (docs/findings-copy-ceiling.md)
TMA_COPY_CONFIGS = ((4096, 8, 4), (32768, 4, 1))


def tma_copy_args(nbytes: int, chunk: int, stages: int) -> tuple[int, int]:
    """(chunks, dynamic shared memory bytes) of a ks_copy_tma launch; ValueError for a shape the
    kernel cannot run (it would leave a tail uncopied, overflow its 8 barriers, or wait forever with
    one stage)."""
    if not 2 <= stages <= 8:
        raise ValueError(f"ks_copy_tma needs 2..8 stages, got {stages}")
    if chunk <= 0 or chunk % 16 or chunk >= 1 << 20:
        raise ValueError(f"ks_copy_tma chunk must be a multiple of 16 below 1 MiB, got {chunk}")
    if nbytes % chunk:
        raise ValueError(
            f"ks_copy_tma copies whole chunks: {nbytes} B is not a multiple of {chunk} B"
        )
    return nbytes // chunk, 64 + stages * chunk


def ceiling_dram_copy(ctx: Context) -> None:
    """Device-memory copy bandwidth, R + W bytes counted: ks_copy_u1/u4/u8 (resident and 4x resident
    grids), TMA bulk copies (ks_copy_tma, compute capability 9.0+) and torch's copy_ on buffers far
    larger than the L2; the best is the ceiling."""
    torch, np = ctx.torch, ctx.np
    # 4 GiB: 4.28 vs 4.16 TB/s at 2 GiB (docs/findings-copy-ceiling.md)
    nbytes = ctx.pick(4 * GIB, 256 * MIB)
    src = torch.rand(nbytes // 4, device=ctx.dev)
    dst = torch.empty_like(src)
    n4 = np.int64(nbytes // 16)
    values, timings = {}, {}
    for kname in ("ks_copy_u1", "ks_copy_u4", "ks_copy_u8"):
        per_sm = ctx.blocks_per_sm(kname, 256)
        for label, grid in (
            ("resident grid", per_sm * ctx.sms),
            ("4x resident grid", 4 * per_sm * ctx.sms),
        ):
            with ctx.part(f"{kname} {label}"):

                def fn(k=kname, g=grid):
                    ctx.launch(k, (g,), (256,), (src.data_ptr(), dst.data_ptr(), n4))

                dst.fill_(NAN)
                fn()
                ctx.check_equal(kname, dst, src)
                key = f"{kname}, {label} ({grid} blocks x 256)"
                timings[key] = t = ctx.time(fn)
                values[key] = harness.copy_bytes(nbytes) / t.median
    if ctx.props.major >= 9:  # Hopper+: the Tensor Memory Accelerator's bulk copies (ks_copy_tma)
        for chunk, stages, per_sm in TMA_COPY_CONFIGS:
            with ctx.part(f"ks_copy_tma {chunk} B x {stages}, {per_sm}/SM"):
                nchunks, smem = tma_copy_args(nbytes, chunk, stages)
                k = ctx.kernel("ks_copy_tma")
                k.max_dynamic_shared_size_bytes = smem
                grid = per_sm * ctx.sms

                def fn(grid=grid, chunk=chunk, stages=stages, smem=smem, nchunks=nchunks):
                    ctx.launch(
                        "ks_copy_tma",
                        (grid,),
                        (32,),
                        (
                            src.data_ptr(),
                            dst.data_ptr(),
                            np.uint64(nchunks),
                            np.uint32(chunk),
                            np.int32(stages),
                        ),
                        smem=smem,
                    )

                dst.fill_(NAN)
                fn()
                ctx.check_equal("ks_copy_tma", dst, src)
                key = f"ks_copy_tma, {chunk // 1024} KiB x {stages} stages, {grid} blocks ({per_sm}/SM)"
                timings[key] = t = ctx.time(fn)
                values[key] = harness.copy_bytes(nbytes) / t.median
    with ctx.part("torch copy_"):
        dst.fill_(NAN)
        dst.copy_(src)
        ctx.check_equal("torch copy_", dst, src)
        timings["torch Tensor.copy_"] = t = ctx.time(lambda: dst.copy_(src))
        values["torch Tensor.copy_"] = harness.copy_bytes(nbytes) / t.median
    ctx.emit(
        ceiling_record(
            "dram_copy_bandwidth",
            "B/s",
            values,
            timings,
            {"buffer_bytes": nbytes, "bytes_counted": "read + write"},
        )
    )


def ceiling_l2_read(ctx: Context) -> None:
    """L2 read bandwidth: a buffer well inside the L2 (min(16 MiB, L2/3)) re-read `passes` times per
    launch with ld.global.cg (L1 bypassed); bytes = passes x buffer."""
    torch, np = ctx.torch, ctx.np
    nbytes = min(16 * MIB, ctx.l2_bytes // 3) // 16 * 16
    passes = ctx.pick(64, 8)
    # positive: no cancellation in the check
    inp = torch.rand(nbytes // 4, device=ctx.dev)
    values, timings = {}, {}
    for mult in (1, 2):
        grid = ctx.blocks_per_sm("ks_l2_read", 256) * ctx.sms * mult
        out = torch.empty(grid * 256, device=ctx.dev)
        with ctx.part(f"ks_l2_read grid {grid}"):

            def fn(g=grid, o=out):
                ctx.launch(
                    "ks_l2_read",
                    (g,),
                    (256,),
                    (inp.data_ptr(), o.data_ptr(), np.int64(nbytes // 16), np.int32(passes)),
                )

            out.fill_(NAN)
            fn()
            ctx.check(
                "ks_l2_read",
                out.double().sum().reshape(1),
                (inp.double().sum() * passes).reshape(1),
                1e-4,
            )
            key = f"ks_l2_read, {grid} blocks x 256"
            timings[key] = t = ctx.time(fn)
            values[key] = passes * nbytes / t.median
    ctx.emit(
        ceiling_record(
            "l2_read_bandwidth",
            "B/s",
            values,
            timings,
            {"buffer_bytes": nbytes, "passes": passes, "bytes_counted": "read"},
        )
    )


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
    ctx.emit(
        ceiling_record(
            "smem_read_bandwidth",
            "B/s",
            {f"ks_smem_read, {grid} blocks x 256": nbytes / t.median},
            {f"ks_smem_read, {grid} blocks x 256": t},
            {"bytes": nbytes},
        )
    )


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

    flop = harness.matmul_flop(n, n, n)
    base = f"torch.matmul bf16 {n}x{n}x{n}"
    values, timings = {}, {}
    # burst: after an idle pause, before the board reaches its power limit (the clock NVIDIA's peak
    # assumes)
    ctx.sync()
    time.sleep(ctx.pick(2.0, 0.05))
    key = f"{base}, burst (after 2 s idle: 6 warm-up calls, then 20 timed)"
    timings[key] = t = ctx.time(
        fn, warmup=3, min_reps=ctx.pick(20, 3), max_reps=ctx.pick(20, 3), attempts=1
    )
    values[key] = flop / t.median
    # sustained: after about 1 s at full load, when power management has settled the clock
    for _ in range(max(1, int(ctx.pick(1.0, 0.02) / t.median))):
        fn()
    key = f"{base}, sustained (after 1 s at full load)"
    timings[key] = t = ctx.time(
        fn, warmup=0, min_reps=ctx.pick(100, 3), max_reps=ctx.pick(100, 3), attempts=1
    )
    values[key] = flop / t.median
    ctx.emit(
        ceiling_record(
            "bf16_dense_flop_rate",
            "FLOP/s",
            values,
            timings,
            {"m": n, "n": n, "k": n, "flop": flop},
        )
    )


def ceiling_fp32_fma(ctx: Context) -> None:
    """FP32 FMA rate: ks_fma, 8 independent chains, 64 FMAs per loop trip; FLOP = 2 x 64 x iters x threads."""
    torch, np = ctx.torch, ctx.np
    iters = ctx.pick(512, 64)
    grid = ctx.blocks_per_sm("ks_fma", 256) * ctx.sms * 2
    out = torch.empty(grid * 256, device=ctx.dev)

    def fn():
        ctx.launch(
            "ks_fma",
            (grid,),
            (256,),
            (out.data_ptr(), np.float32(0.5), np.float32(0.25), np.int32(iters)),
        )

    out.fill_(NAN)
    fn()
    ctx.check_equal("ks_fma", out, torch.full_like(out, 4.0))
    t = ctx.time(fn)
    flop = 2 * 64 * iters * grid * 256
    key = f"ks_fma, {grid} blocks x 256"
    ctx.emit(
        ceiling_record("fp32_flop_rate", "FLOP/s", {key: flop / t.median}, {key: t}, {"flop": flop})
    )


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
                ctx.check_equal(
                    f"{direction} {mem}",
                    (pinned if mem == "pinned" else pageable).to(ctx.dev),
                    dev_src,
                )
            t = ctx.time(fn, min_reps=ctx.pick(8, 3), max_reps=ctx.pick(20, 5), sync_each=True)
            ctx.emit(
                ceiling_record(
                    f"{direction}_{mem}_bandwidth",
                    "B/s",
                    {f"torch copy_, {nbytes} B": nbytes / t.median},
                    {f"torch copy_, {nbytes} B": t},
                    {"bytes": nbytes},
                )
            )


#: bytes between the chained elements of ks_chase
# bytes between chained elements: one element per L2 line, so no two loads share a line
CHASE_LINE = 128


def chase_chain(np, footprint: int, seed: int = 5):
    """A random single cycle through footprint / CHASE_LINE lines (Sattolo's shuffle), as a uint64
    array of footprint / 8 elements where element line·16 holds the index of the next line's
    element: following it from 0 visits every line once before it returns to 0, in an order no
    prefetcher can guess."""
    step = CHASE_LINE // 8
    lines = footprint // CHASE_LINE
    # next of order[i] is order[i + 1]
    order = np.random.default_rng(seed).permutation(lines).astype(np.uint64)
    nxt = np.zeros(footprint // 8, dtype=np.uint64)
    nxt[(order * step).astype(np.int64)] = np.roll(order, -1) * step
    return nxt


def chase_latency(t_long: float, t_short: float, steps_long: int, steps_short: int) -> float:
    """Seconds per dependent load from two launch times of different chain lengths: the launch's
    fixed cost cancels in the difference."""
    if steps_long <= steps_short:
        raise ValueError("the long chain must have more steps than the short one")
    return (t_long - t_short) / (steps_long - steps_short)


def ceiling_load_latency(ctx: Context) -> None:
    """Unloaded load latency of DRAM and of the L2: one thread chases a random single-cycle chain
    (ks_chase), one load in flight; latency = (t(long chase) - t(short chase)) / (steps difference).
    Each launch goes on from where the last one stopped, so a DRAM chain (64 and 512 MiB: both
    beyond any L2, the larger one also paying the TLB misses of its footprint; the lower is the
    ceiling) never meets a line the L2 holds, and the L2 chain (min(4 MiB, L2/8), walked whole once
    before timing) always does."""
    torch, np = ctx.torch, ctx.np
    out = torch.zeros(1, dtype=torch.int64, device=ctx.dev)
    l2 = min(4 * MIB, ctx.l2_bytes // 8)
    for metric, footprints, short, long_ in (
        (
            "dram_load_latency",
            (ctx.pick(64 * MIB, 32 * MIB), ctx.pick(512 * MIB, 64 * MIB)),
            256,
            ctx.pick(4096, 1024),
        ),
        ("l2_load_latency", (l2,), 256, ctx.pick(8192, 2048)),
    ):
        values, timings, extra = {}, {}, {"line_bytes": CHASE_LINE, "steps": [short, long_]}
        for footprint in footprints:
            with ctx.part(f"{metric} {footprint / MIB:g} MiB"):
                host = chase_chain(np, footprint)
                chain = torch.from_numpy(host.view(np.int64)).to(ctx.dev)

                def fn(steps, chain=chain):
                    ctx.launch(
                        "ks_chase", (1,), (1,), (chain.data_ptr(), np.int64(steps), out.data_ptr())
                    )

                out.zero_()
                fn(long_)
                p = 0
                for _ in range(long_):
                    p = int(host[p])
                ctx.check_equal("ks_chase", out, torch.full_like(out, p))
                if metric.startswith("l2"):
                    fn(footprint // CHASE_LINE)  # every line of the chain into the L2
                ctx.sync()
                t = {
                    n: ctx.time(
                        lambda n=n: fn(n),
                        min_reps=ctx.pick(10, 3),
                        max_reps=ctx.pick(20, 5),
                        warmup=1,
                    )
                    for n in (short, long_)
                }
                key = f"ks_chase, 1 thread, {footprint / MIB:g} MiB chain, {long_} - {short} steps"
                values[key] = chase_latency(t[long_].median, t[short].median, long_, short)
                timings[key] = t[long_]
                extra[f"t_short_s, {footprint / MIB:g} MiB"] = t[short].median
                extra[f"t_long_s, {footprint / MIB:g} MiB"] = t[long_].median
        ctx.emit(ceiling_record(metric, "s", values, timings, extra, higher_is_better=False))
