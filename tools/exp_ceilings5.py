"""Fifth one-off experiment (device): copy kernels with L2 prefetch-size and eviction-priority hints;
where the spread of host-bound timings (eager Triton FFN, pageable copies, torch.compile steady state)
comes from: their sample distributions, CPU pinning near the GPU, the VM's steal time. Results in
bench/results/exp_ceilings5_h200.txt."""
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import cupy as cp  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

from collectors.bench import cases as C  # noqa: E402
from collectors.bench import harness as H  # noqa: E402


def line(*a):
    print(*a, flush=True)


def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=20).stdout.strip()
    except Exception as e:  # noqa: BLE001
        return f"{cmd}: {e}"


line("nproc", os.cpu_count(), "| loadavg", sh("cat /proc/loadavg"))
line(sh("vmstat 1 4"))
line("governor", sh("cat /sys/devices/system/cpu/cpu0/cpufreq/scaling_governor 2>/dev/null || echo none"))
line(sh("lscpu | grep -E 'Model name|NUMA|Thread|Socket|MHz|Hypervisor'"))

ctx = C.Context(0, log=print)
bus = ctx.cuda_props.get("pciBusID")
cpulist = sh("cat /sys/bus/pci/devices/*/local_cpulist 2>/dev/null | sort | uniq -c | head -5")
line("pci local cpulists:", cpulist)

SRC = r'''
#define ONESHOT(NAME, LD, ST) \
extern "C" __global__ void NAME(const float4* __restrict__ a, float4* __restrict__ b, long long n) { \
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; \
  if (i < n) { float4 v; \
    asm volatile(LD " {%0,%1,%2,%3}, [%4];" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(a + i)); \
    asm volatile(ST " [%0], {%1,%2,%3,%4};" :: "l"(b + i), "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w) : "memory"); } }
ONESHOT(plain, "ld.global.v4.f32", "st.global.v4.f32")
ONESHOT(pf128, "ld.global.L2::128B.v4.f32", "st.global.v4.f32")
ONESHOT(pf256, "ld.global.L2::256B.v4.f32", "st.global.v4.f32")
ONESHOT(nc256, "ld.global.nc.L2::256B.v4.f32", "st.global.v4.f32")
#define POLICY(NAME, LDP, STP) \
extern "C" __global__ void NAME(const float4* __restrict__ a, float4* __restrict__ b, long long n) { \
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; \
  if (i < n) { float4 v; unsigned long long pl, ps; \
    asm volatile("createpolicy.fractional.L2::" LDP ".b64 %0, 1.0;" : "=l"(pl)); \
    asm volatile("createpolicy.fractional.L2::" STP ".b64 %0, 1.0;" : "=l"(ps)); \
    asm volatile("ld.global.L2::cache_hint.v4.f32 {%0,%1,%2,%3}, [%4], %5;" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(a + i), "l"(pl)); \
    asm volatile("st.global.L2::cache_hint.v4.f32 [%0], {%1,%2,%3,%4}, %5;" :: "l"(b + i), "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w), "l"(ps) : "memory"); } }
POLICY(ef_ld, "evict_first", "evict_normal")
POLICY(ef_st, "evict_normal", "evict_first")
POLICY(el_st, "evict_first", "evict_last")
POLICY(ef_both, "evict_first", "evict_first")
'''
try:
    mod = cp.RawModule(code=SRC, options=("-arch=sm_90",))
    stream = cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)
    for gib in (4,):
        nbytes = gib << 30
        a = torch.rand(nbytes // 4, device=ctx.dev)
        b = torch.empty_like(a)
        n4 = nbytes // 16
        for name in ("plain", "pf128", "pf256", "nc256", "ef_ld", "ef_st", "el_st", "ef_both"):
            k = mod.get_function(name)
            for bs in (256, 512):
                grid = (n4 + bs - 1) // bs

                def fn(k=k, grid=grid, bs=bs):
                    with stream:
                        k((grid,), (bs,), (a.data_ptr(), b.data_ptr(), cp.int64(n4)))
                b.zero_()
                fn()
                torch.cuda.synchronize()
                ok = torch.equal(a, b)
                t = H.time_gpu(fn, target_s=0.1)
                line(f"copy {gib} GiB {name:8s} block {bs}: {2 * nbytes / t.median / 1e12:.3f} TB/s = "
                     f"{2 * nbytes / t.median / 4.8e12 * 100:.1f} % cv {t.stats.cv:.4f} ok {ok}")
        t = H.time_gpu(lambda: b.copy_(a), target_s=0.1)
        line(f"copy {gib} GiB torch copy_: {2 * nbytes / t.median / 1e12:.3f} TB/s = {2 * nbytes / t.median / 4.8e12 * 100:.1f} %")
        del a, b
        torch.cuda.empty_cache()
except Exception as e:  # noqa: BLE001
    line(f"copy hints FAILED: {type(e).__name__}: {e}")


def dist(label, t):
    xs = sorted(t.samples)
    q = lambda p: xs[min(len(xs) - 1, int(p * len(xs)))] * 1e6  # noqa: E731
    line(f"{label}: median {t.median * 1e6:.1f} us cv {t.stats.cv:.4f} n {len(xs)} | min {xs[0] * 1e6:.1f} p10 {q(.1):.1f} "
         f"p50 {q(.5):.1f} p90 {q(.9):.1f} max {xs[-1] * 1e6:.1f} | attempts {[round(c, 4) for _, c in t.attempts]}")


from collectors.bench import tkernels as tk  # noqa: E402

hdim, fdim = 4096, 12288
wg = (torch.randn(hdim, fdim, device=ctx.dev) * 0.02).bfloat16()
wu = (torch.randn(hdim, fdim, device=ctx.dev) * 0.02).bfloat16()
wd = (torch.randn(fdim, hdim, device=ctx.dev) * 0.02).bfloat16()
x = torch.randn(1, hdim, device=ctx.dev).bfloat16()
z = torch.empty(1, fdim, device=ctx.dev, dtype=torch.bfloat16)
ffn_t = lambda: tk.silu_mul(x @ wg, x @ wu, z) @ wd  # noqa: E731
ffn_u = lambda: (torch.nn.functional.silu(x @ wg) * (x @ wu)) @ wd  # noqa: E731
m = 64 << 20
d = torch.empty(m // 4, device=ctx.dev)
h = torch.rand(m // 4)
all_cpus = set(range(os.cpu_count()))


def host_host_memcpy():
    a_ = np.random.rand(m // 8)
    b_ = np.random.rand(m // 8)
    ts = []
    for _ in range(33):
        t0 = time.perf_counter()
        np.copyto(b_, a_)
        ts.append(time.perf_counter() - t0)
    ts = ts[3:]
    return statistics.pstdev(ts) / statistics.mean(ts)


for label, cpus in (("all cpus", all_cpus), ("cpu 2", {2}), ("cpus 2-3", {2, 3})):
    os.sched_setaffinity(0, cpus)
    for trial in range(2):
        dist(f"[{label}] eager FFN fused triton x3 batch 8", H.time_gpu(lambda: [ffn_t() for _ in range(3)], sync_each=True,
                                                                        allow_graph=False, batch=8, min_reps=50, max_reps=50, attempts=1))
        dist(f"[{label}] eager FFN unfused x3 batch 8", H.time_gpu(lambda: [ffn_u() for _ in range(3)], sync_each=True,
                                                                   allow_graph=False, batch=8, min_reps=50, max_reps=50, attempts=1))
        dist(f"[{label}] h2d pageable 64 MiB", H.time_gpu(lambda: d.copy_(h, non_blocking=True), sync_each=True,
                                                          allow_graph=False, min_reps=30, max_reps=30, attempts=1))
        dist(f"[{label}] d2h pageable 64 MiB", H.time_gpu(lambda: h.copy_(d), sync_each=True,
                                                          allow_graph=False, min_reps=30, max_reps=30, attempts=1))
        line(f"[{label}] host memcpy 64 MiB cv {host_host_memcpy():.4f}")
os.sched_setaffinity(0, all_cpus)
line(sh("vmstat 1 3"))
