"""Chapter section 5.2 cases: one operator's tiling, layout and real traffic (tiling.traffic,
bank.column_read, transpose.tile, rmsnorm.split)."""

from __future__ import annotations

from collectors.bench import harness
from collectors.bench.context import NAN, Context
from collectors.bench.harness import make_record, timing_records


# =============================================================================================
# 5.2 One operator: tiling, layout, real traffic
# =============================================================================================

#: (kernel, tile m, tile n, engine): the chapter's kernel on tensor cores (BF16 mma.sync, its S =
#: 2mk + 2kn + 4mn in dynamic shared memory) and the FP32 CUDA-core kernel (FP32 staging,
#: accumulator in registers), k = 32
TILE_KERNELS = (
    ("ks_mma_64x64", 64, 64, "tensor"),
    ("ks_mma_64x128", 64, 128, "tensor"),
    ("ks_mma_128x128", 128, 128, "tensor"),
    ("ks_matmul_64x64", 64, 64, "fp32"),
    ("ks_matmul_64x128", 64, 128, "fp32"),
    ("ks_matmul_128x128", 128, 128, "fp32"),
)


def mma_smem_bytes(tile_m: int, tile_n: int, tile_k: int = 32) -> int:
    """Dynamic shared memory of ks_mma_<m>x<n>: the chapter's S = 2mk (A) + 2kn (W) + 4mn (FP32 accumulator)."""
    return 2 * tile_m * tile_k + 2 * tile_k * tile_n + 4 * tile_m * tile_n


def case_tiling_traffic(ctx: Context) -> None:
    """C = A W at the chapter's shape (M = 1024, K = 4096, N = 12288, BF16 in and out, FP32
    accumulation, k = 32) with 64x64, 64x128 and 128x128 output tiles, twice: on tensor cores
    (ks_mma_*: BF16 mma.sync with the chapter's shared-memory budget, the kernel the chapter reasons
    about) and on CUDA cores (ks_matmul_*: FP32 FMAs, labelled `engine: fp32`); ncu adds L2<-L1 read
    sectors, DRAM bytes, instructions and occupancy."""
    torch, np = ctx.torch, ctx.np
    m, k, n = ctx.pick((1024, 4096, 12288), (256, 1024, 1024))
    a = torch.randn(m, k, device=ctx.dev, dtype=torch.bfloat16)
    w = torch.randn(k, n, device=ctx.dev, dtype=torch.bfloat16)
    c = torch.empty(m, n, device=ctx.dev, dtype=torch.bfloat16)
    ref = None if ctx.ncu_child else a.double() @ w.double()
    for kname, bm, bn, engine in TILE_KERNELS:
        with ctx.part(kname):
            kern = ctx.kernel(kname)
            smem = mma_smem_bytes(bm, bn) if engine == "tensor" else 0
            if smem > 48 * 1024:
                kern.max_dynamic_shared_size_bytes = smem

            def fn(kn=kname, bm=bm, bn=bn, smem=smem):
                ctx.launch(
                    kn,
                    (n // bn, m // bm),
                    (256,),
                    (
                        a.data_ptr(),
                        w.data_ptr(),
                        c.data_ptr(),
                        np.int32(m),
                        np.int32(n),
                        np.int32(k),
                    ),
                    smem=smem,
                )

            params = {
                "kernel": kname,
                "engine": engine,
                "tile_m": bm,
                "tile_n": bn,
                "tile_k": 32,
                "m": m,
                "k": k,
                "n": n,
                "regs_per_thread": int(kern.num_regs),
                "smem_static_bytes": int(kern.shared_size_bytes),
                "smem_dynamic_bytes": smem,
            }
            if ctx.profile_point(kname, params, fn):
                continue
            c.fill_(NAN)
            fn()
            ctx.check(kname, c, ref, 1e-2)
            t = ctx.time(fn, flush=ctx.flush_if(2 * (m * k + k * n + m * n)))
            ctx.emit(
                timing_records(
                    "tiling.traffic",
                    params,
                    t.stats,
                    source=t.source,
                    flop=harness.matmul_flop(m, n, k),
                    notes=(
                        "BF16 tensor cores (mma.sync), the chapter's shared-memory budget; "
                        if engine == "tensor"
                        else "FP32 FMAs on CUDA cores; "
                    )
                    + t.note(),
                )
            )


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
    """Shared-memory column reads: lane i reads `width` bytes at word i x stride (+ a column
    offset), strides 1..64 for 4-byte words and multiples of width/4 for 8/16-byte vectors. Reports
    the time per stride and the time ratio of stride 32 to the padded stride (33 words for 4-byte)."""
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
                    ctx.launch(
                        kname,
                        (blocks,),
                        (256,),
                        (out.data_ptr(), np.int32(s), np.int32(iters)),
                        smem=smem,
                    )

                params = {"kernel": kname, "width_bytes": width, "stride_words": s}
                if ctx.profile_point(
                    kname, params, fn, notes=f"{blocks} blocks x 256, {iters} iterations"
                ):
                    continue
                out.fill_(NAN)
                fn()
                got = out.view(-1, 32).cpu().numpy()
                ref = colread_reference(width, s, iters)
                if not np.array_equal(got, np.broadcast_to(ref, got.shape)):
                    raise harness.CheckFailed(
                        f"{kname} stride {s}: output differs from the reference"
                    )
                ctx.checks[f"{kname} stride {s}"] = 0.0
                times[s] = t = ctx.time(fn, target_s=ctx.pick(0.1, 0.02))
                ctx.emit(
                    timing_records(
                        "bank.column_read",
                        params,
                        t.stats,
                        source=t.source,
                        notes=f"{blocks} blocks x 256, {iters} iterations; " + t.note(),
                    )
                )
        pad = 32 + width // 4
        if 32 in times and pad in times:
            ctx.emit(
                make_record(
                    "bank.column_read",
                    "time_ratio_unpadded_padded",
                    times[32].median / times[pad].median,
                    "1",
                    {"kernel": kname, "width_bytes": width, "strides": f"32/{pad}"},
                    source=times[32].source,
                    notes=f"time at stride 32 / time at stride {pad}",
                )
            )


#: (kernel, tile, padded, block threads or None): blocks tied to the tile (t x t threads, one
#: element each), then 16, 32 and 64 tiles at 256 threads per block (t x 256/t threads, t²/256
#: elements each: equal block size and occupancy, only the tile changes)
TRANSPOSE_KERNELS = (
    ("ks_transpose16", 16, False, None),
    ("ks_transpose16_pad", 16, True, None),
    ("ks_transpose32", 32, False, None),
    ("ks_transpose32_pad", 32, True, None),
    ("ks_transpose_b256_t16", 16, False, 256),
    ("ks_transpose_b256_t16_pad", 16, True, 256),
    ("ks_transpose_b256_t32", 32, False, 256),
    ("ks_transpose_b256_t32_pad", 32, True, 256),
    ("ks_transpose_b256_t64", 64, False, 256),
    ("ks_transpose_b256_t64_pad", 64, True, 256),
)


def case_transpose_tile(ctx: Context) -> None:
    """n x n FP32 transpose through a shared-memory tile, unpadded and padded: 16x16 and 32x32 tiles
    with the block tied to the tile (t x t threads), then 16, 32 and 64 tiles at 256 threads per
    block (equal block size and occupancy: only the tile changes)."""
    torch = ctx.torch
    n = ctx.pick(8192, 1024)
    inp = torch.rand(n, n, device=ctx.dev)
    out = torch.empty_like(inp)
    for kname, tile, pad, threads in TRANSPOSE_KERNELS:
        with ctx.part(kname):
            block = (tile, tile) if threads is None else (tile, threads // tile)

            def fn(kn=kname, tile=tile, block=block):
                ctx.launch(
                    kn,
                    (n // tile, n // tile),
                    block,
                    (inp.data_ptr(), out.data_ptr(), ctx.np.int32(n)),
                )

            params = {"kernel": kname, "tile": tile, "padded": pad, "n": n}
            if threads is not None:
                params["block_threads"] = threads
            if ctx.profile_point(kname, params, fn):
                continue
            out.fill_(NAN)
            fn()
            ctx.check_equal(kname, out, inp.t())
            t = ctx.time(fn, flush=ctx.flush_if(2 * n * n * 4))
            ctx.emit(
                timing_records(
                    "transpose.tile",
                    params,
                    t.stats,
                    source=t.source,
                    bytes_moved=harness.transpose_bytes(n),
                    notes=t.note(),
                )
            )


def case_rmsnorm_split(ctx: Context) -> None:
    """RMSNorm over [rows, 4096] BF16 (Triton): one program per row (segments = 1, one pass) vs each
    row split into s segments (partial sums of squares, then merge + scale: two kernels)."""
    torch = ctx.torch
    from collectors.bench import triton_kernels as tk

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
                params = {
                    "rows": rows,
                    "hidden": h,
                    "segments": s,
                    "tasks": rows * s,
                    "kernels": 1 if s == 1 else 2,
                }
                ctx.emit(
                    timing_records(
                        "rmsnorm.split",
                        params,
                        t.stats,
                        source=t.source,
                        bytes_moved=harness.rmsnorm_bytes(rows, h, s),
                        notes=t.note(),
                    )
                )
