"""Second one-off experiment (device): copy variants beyond torch copy_, pageable-copy spread with CPU affinity,
and batched event timing for ~100 us kernels. Results in bench/results/exp_ceilings2_h200.txt."""
import os, statistics
import cupy as cp
import torch

SRC = r'''
extern "C" __global__ void oneshot1(const float4* __restrict__ a, float4* __restrict__ b, long long n) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; if (i < n) b[i] = a[i]; }
extern "C" __global__ void na1(const float4* __restrict__ a, float4* __restrict__ b, long long n) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { float4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.f32 {%0,%1,%2,%3}, [%4];"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(a + i));
    asm volatile("st.global.L1::no_allocate.v4.f32 [%0], {%1,%2,%3,%4};" :: "l"(b + i), "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w) : "memory"); } }
extern "C" __global__ void chunk4(const float4* __restrict__ a, float4* __restrict__ b, long long n, long long per) {
  long long lo = (long long)blockIdx.x * per, hi = lo + per < n ? lo + per : n;
  for (long long i = lo + threadIdx.x; i < hi; i += 4 * (long long)blockDim.x) {
    float4 v[4];
    #pragma unroll
    for (int u = 0; u < 4; ++u) { long long k = i + (long long)u * blockDim.x; if (k < hi) v[u] = a[k]; }
    #pragma unroll
    for (int u = 0; u < 4; ++u) { long long k = i + (long long)u * blockDim.x; if (k < hi) b[k] = v[u]; } } }
'''
mod = cp.RawModule(code=SRC, options=("-arch=sm_90",))
dev = torch.device("cuda")


def bench(fn, reps=30, warm=5, batch=1):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(batch):
            fn()
        e.record(); e.synchronize()
        ts.append(s.elapsed_time(e) * 1e-3 / batch)
    return statistics.median(ts), statistics.pstdev(ts) / statistics.mean(ts)


stream = cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)
for gib in (4, 8):
    nbytes = gib << 30
    a = torch.rand(nbytes // 4, device=dev); b = torch.empty_like(a)
    n4 = nbytes // 16
    for name in ("oneshot1", "na1"):
        k = mod.get_function(name)
        for bs in (256, 512):
            grid = (n4 + bs - 1) // bs
            def fn(k=k, grid=grid, bs=bs):
                with stream:
                    k((grid,), (bs,), (a.data_ptr(), b.data_ptr(), cp.int64(n4)))
            b.zero_(); fn(); torch.cuda.synchronize(); assert torch.equal(a, b), name
            t, cv = bench(fn)
            print(f"copy {gib} GiB {name:9s} block {bs}: {2 * nbytes / t / 1e12:.3f} TB/s = {2 * nbytes / t / 4.8e12 * 100:.1f} % cv {cv:.4f}", flush=True)
    k = mod.get_function("chunk4")
    for blocks_per_sm in (2, 4, 8):
        grid = 132 * blocks_per_sm
        per = (n4 + grid - 1) // grid
        def fn(grid=grid, per=per):
            with stream:
                k((grid,), (512,), (a.data_ptr(), b.data_ptr(), cp.int64(n4), cp.int64(per)))
        b.zero_(); fn(); torch.cuda.synchronize(); assert torch.equal(a, b)
        t, cv = bench(fn)
        print(f"copy {gib} GiB chunk4 {grid} blocks x 512: {2 * nbytes / t / 1e12:.3f} TB/s = {2 * nbytes / t / 4.8e12 * 100:.1f} % cv {cv:.4f}", flush=True)
    def memcpy():
        cp.cuda.runtime.memcpyAsync(b.data_ptr(), a.data_ptr(), nbytes, cp.cuda.runtime.memcpyDeviceToDevice, stream.ptr)
    t, cv = bench(memcpy)
    print(f"copy {gib} GiB cudaMemcpyAsync D2D: {2 * nbytes / t / 1e12:.3f} TB/s = {2 * nbytes / t / 4.8e12 * 100:.1f} % cv {cv:.4f}", flush=True)
    t, cv = bench(lambda: b.copy_(a))
    print(f"copy {gib} GiB torch copy_: {2 * nbytes / t / 1e12:.3f} TB/s = {2 * nbytes / t / 4.8e12 * 100:.1f} % cv {cv:.4f}", flush=True)
    del a, b; torch.cuda.empty_cache()

n = 64 << 20
d = torch.empty(n // 4, device=dev); h = torch.rand(n // 4)
for label in ("no affinity", "affinity core 0", "affinity cores 0-7"):
    if label == "affinity core 0":
        os.sched_setaffinity(0, {0})
    elif label == "affinity cores 0-7":
        os.sched_setaffinity(0, set(range(8)))
    for mib, reps in ((64, 20),):
        t, cv = bench(lambda: d.copy_(h, non_blocking=True), reps=reps, warm=3)
        print(f"h2d pageable 64 MiB, {label}: {n / t / 1e9:.2f} GB/s cv {cv:.4f}", flush=True)
    t, cv = bench(lambda: h.copy_(d), reps=20, warm=3)
    print(f"d2h pageable 64 MiB, {label}: {n / t / 1e9:.2f} GB/s cv {cv:.4f}", flush=True)
os.sched_setaffinity(0, set(range(os.cpu_count())))

x = torch.randn(4096, 12288, device=dev, dtype=torch.bfloat16)
for batch in (1, 10):
    t, cv = bench(lambda: torch.nn.functional.silu(x), reps=50, batch=batch)
    print(f"silu 4096x12288 bf16, batch {batch}: {t * 1e6:.1f} us cv {cv:.4f}", flush=True)
