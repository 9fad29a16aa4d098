"""Third one-off experiment (device): TMA bulk copies (ks_copy_tma) against torch copy_, read-only and
write-only DRAM bandwidth, the stream hold of time_gpu on the cases that were noisy, pageable copies
(batched, huge pages, the host's own memcpy spread), CUDA-graph FFN eager mode batched, BF16 burst vs
sustained. Results in bench/results/exp_ceilings3_h200.txt."""
import mmap
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import numpy as np  # noqa: E402
import torch  # noqa: E402

from collectors.bench import cases as C  # noqa: E402
from collectors.bench import harness as H  # noqa: E402

ctx = C.Context(0, log=print)
np_ = ctx.np
PEAK = 4.8e12


def line(*a):
    print(*a, flush=True)


def pct(bw):
    return f"{bw / 1e12:.3f} TB/s = {bw / PEAK * 100:.1f} %"


# ---- A. copies -------------------------------------------------------------------------------
nbytes = 4 << 30
src = torch.rand(nbytes // 4, device=ctx.dev)
dst = torch.empty_like(src)
k = ctx.kernel("ks_copy_tma")
configs = [(32768, 4, 1), (32768, 6, 1), (16384, 6, 2), (16384, 8, 1), (32768, 3, 2), (16384, 4, 3),
           (8192, 8, 3), (65536, 3, 1), (49152, 4, 1), (16384, 12 // 2, 1), (4096, 8, 4), (8192, 8, 2)]
best = (0, None)
for chunk, stages, per_sm in configs:
    try:
        smem = 64 + stages * chunk
        k.max_dynamic_shared_size_bytes = smem
        grid = per_sm * ctx.sms

        def fn(grid=grid, chunk=chunk, stages=stages, smem=smem):
            ctx.launch("ks_copy_tma", (grid,), (32,), (src.data_ptr(), dst.data_ptr(),
                       np.uint64(nbytes // chunk), np.uint32(chunk), np.int32(stages)), smem=smem)
        dst.fill_(float("nan"))
        fn()
        torch.cuda.synchronize()
        ok = torch.equal(dst, src)
        t = ctx.time(fn, target_s=0.1)
        bw = 2 * nbytes / t.median
        best = max(best, (bw, (chunk, stages, per_sm)))
        line(f"copy 4 GiB tma chunk {chunk // 1024:3d} KiB x {stages} stages, {per_sm}/SM: {pct(bw)} cv {t.stats.cv:.4f} ok {ok}")
    except Exception as e:  # noqa: BLE001
        line(f"copy tma {chunk} {stages} {per_sm}: FAILED {type(e).__name__}: {e}")
t = ctx.time(lambda: dst.copy_(src), target_s=0.1)
line(f"copy 4 GiB torch copy_: {pct(2 * nbytes / t.median)} cv {t.stats.cv:.4f}")
t = ctx.time(lambda: dst.zero_(), target_s=0.1)
line(f"write-only 4 GiB torch zero_: {pct(nbytes / t.median)} cv {t.stats.cv:.4f}")
t = ctx.time(lambda: dst.fill_(1.5), target_s=0.1)
line(f"write-only 4 GiB torch fill_: {pct(nbytes / t.median)} cv {t.stats.cv:.4f}")
for mult in (1, 2, 4):
    grid = ctx.blocks_per_sm("ks_l2_read", 256) * ctx.sms * mult
    out = torch.empty(grid * 256, device=ctx.dev)
    t = ctx.time(lambda g=grid, o=out: ctx.launch("ks_l2_read", (g,), (256,), (src.data_ptr(), o.data_ptr(),
                 np.int64(nbytes // 16), np.int32(1))), target_s=0.1)
    line(f"read-only 4 GiB ks_l2_read grid {grid}: {pct(nbytes / t.median)} cv {t.stats.cv:.4f}")
if best[1]:
    chunk, stages, per_sm = best[1]
    del src, dst
    torch.cuda.empty_cache()
    nb = 8 << 30
    src = torch.rand(nb // 4, device=ctx.dev)
    dst = torch.empty_like(src)
    smem = 64 + stages * chunk
    k.max_dynamic_shared_size_bytes = smem
    fn = lambda: ctx.launch("ks_copy_tma", (per_sm * ctx.sms,), (32,), (src.data_ptr(), dst.data_ptr(),  # noqa: E731
                            np.uint64(nb // chunk), np.uint32(chunk), np.int32(stages)), smem=smem)
    t = ctx.time(fn, target_s=0.1)
    line(f"copy 8 GiB tma best {best[1]}: {pct(2 * nb / t.median)} cv {t.stats.cv:.4f}")
    t = ctx.time(lambda: dst.copy_(src), target_s=0.1)
    line(f"copy 8 GiB torch copy_: {pct(2 * nb / t.median)} cv {t.stats.cv:.4f}")
    del src, dst
    torch.cuda.empty_cache()

# ---- B. cases that were noisy, with the stream hold (now the default) --------------------------
for case_id in ("bank.column_read", "rmsnorm.split", "fusion.activation_chain", "flash.attention_traffic",
                "timing.positions", "compile.amortization", "graph.replay", "h2d.chunked_copy"):
    ctx.begin_case(case_id)
    t0 = time.perf_counter()
    getattr(C, "case_" + case_id.replace(".", "_"))(ctx)
    worst = [r for r in ctx.records if r["unit"] == "s" and r["value"] > 50e-6 and r["cv"] is not None]
    bad = [r for r in worst if r["cv"] > 0.02]
    line(f"case {case_id}: {len(worst)} timings > 50 us, {len(bad)} with cv > 2 %, errors {ctx.errors} "
         f"({time.perf_counter() - t0:.1f} s); max cv {max((r['cv'] for r in worst), default=0):.4f}")
    for r in bad:
        line(f"   cv {r['cv']:.4f} {r['metric']} {r['value'] * 1e6:.1f} us {r['params']} {r['notes']}")

# hold on/off A/B on a host-heavy multi-kernel call
from collectors.bench import tkernels as tk  # noqa: E402
x = torch.randn(8192, 4096, device=ctx.dev, dtype=torch.bfloat16)
w = torch.randn(4096, device=ctx.dev, dtype=torch.bfloat16)
y = torch.empty_like(x)
part = torch.empty(8192, 2, device=ctx.dev)
for hold in (False, True):
    t = H.time_gpu(lambda: tk.rmsnorm(x, w, y, part, 2, 1e-6), flush=ctx.flush, hold=hold, target_s=0.1)
    line(f"rmsnorm 8192 x 4096 seg 2 flushed hold={hold}: {t.median * 1e6:.1f} us cv {t.stats.cv:.4f}")

# ---- C. pageable copies ---------------------------------------------------------------------
n = 64 << 20
a = np.random.rand(n // 8)
b = np.empty_like(a)
ts = []
for _ in range(30):
    t0 = time.perf_counter()
    np.copyto(b, a)
    ts.append(time.perf_counter() - t0)
line(f"host memcpy 64 MiB (numpy copyto): {n / statistics.median(ts) / 1e9:.2f} GB/s cv {statistics.pstdev(ts) / statistics.mean(ts):.4f}")
d = torch.empty(n // 4, device=ctx.dev)
h = torch.rand(n // 4)
mm = mmap.mmap(-1, n, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
try:
    mm.madvise(mmap.MADV_HUGEPAGE)
except Exception as e:  # noqa: BLE001
    line(f"madvise: {e}")
hh = torch.from_numpy(np.frombuffer(mm, dtype=np.float32))
hh.copy_(h)
for label, host in (("malloc", h), ("THP", hh)):
    for batch in (1, 4, 16):
        t = H.time_gpu(lambda: d.copy_(host, non_blocking=True), sync_each=True, allow_graph=False, batch=batch,
                       min_reps=20, max_reps=20)
        line(f"h2d pageable 64 MiB {label} batch {batch}: {n / t.median / 1e9:.2f} GB/s cv {t.stats.cv:.4f}")
        t = H.time_gpu(lambda: host.copy_(d), sync_each=True, allow_graph=False, batch=batch, min_reps=20, max_reps=20)
        line(f"d2h pageable 64 MiB {label} batch {batch}: {n / t.median / 1e9:.2f} GB/s cv {t.stats.cv:.4f}")
hp = torch.empty(n // 4, pin_memory=True)
t = H.time_gpu(lambda: d.copy_(hp, non_blocking=True), sync_each=True, allow_graph=False, min_reps=20, max_reps=20)
line(f"h2d pinned 64 MiB: {n / t.median / 1e9:.2f} GB/s cv {t.stats.cv:.4f}")

# ---- D. BF16 ceiling (burst vs sustained, as the suite now does) ------------------------------
ctx.begin_case("ceiling")
C.ceiling_bf16_matmul(ctx)
for r in ctx.records:
    line(f"bf16 ceiling: {r['value'] / 1e12:.1f} TFLOP/s cv {r['cv']:.4f} {r['params']['variants']}")
