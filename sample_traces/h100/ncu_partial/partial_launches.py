"""Many small launches, slowly, for an Nsight Compute run that is stopped before it has what it asked for (issue 39).

    timeout -s INT 20 ncu --clock-control none --set basic -c 120 -o OUTDIR/partial python3 partial_launches.py

Launches `ks_scale` LAUNCHES times (default 400), synchronising after each and sleeping SLEEP seconds (default
0.2) between them, so that a time limit stops the profiled program (and ncu) after some tens of launches, fewer
than `-c` asks for. With SLEEP 0 and LAUNCHES under `-c` it is instead a program that ends with fewer launches
than asked for. CuPy only (NVRTC), so the report stays small.

    python3 partial_launches.py [LAUNCHES] [SLEEP]
"""
import sys
import time

import cupy as cp

SRC = r"""
extern "C" __global__ void ks_scale(float* x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = x[i] * a + 1.0f;
}
"""
LAUNCHES = int(sys.argv[1]) if len(sys.argv) > 1 else 400
SLEEP = float(sys.argv[2]) if len(sys.argv) > 2 else 0.2
N = 1 << 20
scale = cp.RawModule(code=SRC).get_function("ks_scale")
x = cp.zeros(N, dtype=cp.float32)
t0 = time.perf_counter()
for i in range(LAUNCHES):
    scale(((N + 255) // 256,), (256,), (x, cp.float32(0.5), cp.int32(N)))
    cp.cuda.Device().synchronize()
    print(f"launch {i} done at {time.perf_counter() - t0:.2f} s", flush=True)
    if SLEEP:
        time.sleep(SLEEP)
print(f"all {LAUNCHES} launches done", flush=True)
