"""One-off experiment (device): which copy kernel / transfer size / timing reaches the hardware ceilings.
Results guided collectors/bench/cases.py's ceilings; kept for the record. python3 tools/exp_ceilings.py"""
import statistics, time
import cupy as cp
import torch

SRC = r'''
extern "C" __global__ void oneshot1(const float4* __restrict__ a, float4* __restrict__ b, long long n) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; if (i < n) b[i] = a[i]; }
extern "C" __global__ void oneshot2(const float4* __restrict__ a, float4* __restrict__ b, long long n) {
  long long i = (long long)blockIdx.x * blockDim.x * 2 + threadIdx.x; long long j = i + blockDim.x;
  float4 x, y; if (i < n) x = a[i]; if (j < n) y = a[j]; if (i < n) b[i] = x; if (j < n) b[j] = y; }
extern "C" __global__ void oneshot4(const float4* __restrict__ a, float4* __restrict__ b, long long n) {
  long long i = (long long)blockIdx.x * blockDim.x * 4 + threadIdx.x; float4 v[4];
  #pragma unroll
  for (int u = 0; u < 4; ++u) { long long k = i + (long long)u * blockDim.x; if (k < n) v[u] = a[k]; }
  #pragma unroll
  for (int u = 0; u < 4; ++u) { long long k = i + (long long)u * blockDim.x; if (k < n) b[k] = v[u]; } }
extern "C" __global__ void oneshot4cs(const float4* __restrict__ a, float4* __restrict__ b, long long n) {
  long long i = (long long)blockIdx.x * blockDim.x * 4 + threadIdx.x; float4 v[4];
  #pragma unroll
  for (int u = 0; u < 4; ++u) { long long k = i + (long long)u * blockDim.x; if (k < n) v[u] = __ldcs(a + k); }
  #pragma unroll
  for (int u = 0; u < 4; ++u) { long long k = i + (long long)u * blockDim.x; if (k < n) __stcs(b + k, v[u]); } }
'''
mod = cp.RawModule(code=SRC)
dev = torch.device("cuda")


def bench(fn, reps=30, warm=5):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); fn(); e.record(); e.synchronize()
        ts.append(s.elapsed_time(e) * 1e-3)
    return statistics.median(ts), statistics.pstdev(ts) / statistics.mean(ts)


for gib in (2, 4):
    nbytes = gib << 30
    a = torch.rand(nbytes // 4, device=dev); b = torch.empty_like(a)
    n4 = nbytes // 16
    stream = cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)
    for name, per in (("oneshot1", 1), ("oneshot2", 2), ("oneshot4", 4), ("oneshot4cs", 4)):
        k = mod.get_function(name)
        for bs in (256, 512, 1024):
            grid = (n4 + bs * per - 1) // (bs * per)
            def fn(k=k, grid=grid, bs=bs):
                with stream:
                    k((grid,), (bs,), (a.data_ptr(), b.data_ptr(), cp.int64(n4)))
            b.zero_(); fn(); torch.cuda.synchronize(); assert torch.equal(a, b), name
            t, cv = bench(fn)
            print(f"copy {gib} GiB {name:10s} block {bs:4d}: {2 * nbytes / t / 1e12:.3f} TB/s = {2 * nbytes / t / 4.8e12 * 100:.1f} % cv {cv:.4f}", flush=True)
    t, cv = bench(lambda: b.copy_(a))
    print(f"copy {gib} GiB torch copy_: {2 * nbytes / t / 1e12:.3f} TB/s = {2 * nbytes / t / 4.8e12 * 100:.1f} % cv {cv:.4f}", flush=True)
    del a, b; torch.cuda.empty_cache()

for mib in (256, 1024):
    n = mib << 20
    d = torch.empty(n // 4, device=dev); h = torch.rand(n // 4).pin_memory()
    for k in (1, 8):
        def fn():
            for _ in range(k):
                d.copy_(h, non_blocking=True)
        t, cv = bench(fn, reps=10, warm=2)
        print(f"h2d pinned {mib} MiB x{k}: {k * n / t / 1e9:.2f} GB/s cv {cv:.4f}", flush=True)

a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16); b = torch.randn_like(a); c = torch.empty_like(a)
for warm, reps in ((3, 10), (50, 50)):
    t, cv = bench(lambda: torch.matmul(a, b, out=c), reps=reps, warm=warm)
    print(f"bf16 matmul 8192^3 warm {warm} reps {reps}: {2 * 8192**3 / t / 1e12:.1f} TFLOP/s cv {cv:.4f}", flush=True)
