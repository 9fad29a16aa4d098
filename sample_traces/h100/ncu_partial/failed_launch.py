"""A launch that fails, for Nsight Compute (issue 39): a few good launches, then one kernel that traps.

    ncu --clock-control none --set basic -o OUTDIR/failed_launch python3 failed_launch.py [GOOD]

Launches `ks_scale` GOOD times (default 5), synchronising after each, then `ks_trap`, whose thread 0 executes
`__trap()`: the launch fails on the GPU (the CUDA context is then unusable). The program prints what the
synchronisation after each launch reported and exits 1 once the failure is seen (0 if, unexpectedly, none is).
CuPy only (NVRTC compiles the two kernels); no PyTorch, so the report holds the tiny module alone.
"""
import sys
import time

import cupy as cp

SRC = r"""
extern "C" __global__ void ks_scale(float* x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = x[i] * a + 1.0f;
}
extern "C" __global__ void ks_trap(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += 1.0f;
    if (i == 0) __trap();
}
"""

GOOD = int(sys.argv[1]) if len(sys.argv) > 1 else 5
N = 1 << 20
mod = cp.RawModule(code=SRC)
scale, trap = mod.get_function("ks_scale"), mod.get_function("ks_trap")
x = cp.zeros(N, dtype=cp.float32)              # cudaMemset, not a kernel
grid, block = ((N + 255) // 256,), (256,)
for i in range(GOOD):
    scale(grid, block, (x, cp.float32(0.5), cp.int32(N)))
    cp.cuda.Device().synchronize()
    print(f"launch {i}: ks_scale ok", flush=True)
t = time.perf_counter()
try:
    trap(grid, block, (x, cp.int32(N)))
    print(f"launch {GOOD}: ks_trap issued", flush=True)
    cp.cuda.Device().synchronize()
except Exception as e:  # noqa: BLE001 - the failure is the point: report it and stop
    print(f"launch {GOOD}: ks_trap failed after {time.perf_counter() - t:.3f} s: {type(e).__name__}: {e}",
          flush=True)
    sys.exit(1)
print(f"launch {GOOD}: ks_trap did NOT fail", flush=True)
sys.exit(0)
