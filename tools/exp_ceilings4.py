"""Fourth one-off experiment (device): does NVML sampling during a timed loop disturb it (column-read
kernel, sampler off / 50 ms / 250 ms, clock-only)? Copy bandwidth against the destination's offset from
the source; the host's own memcpy spread; host-clock timings batched. Results in
bench/results/exp_ceilings4_h200.txt."""
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import numpy as np  # noqa: E402
import pynvml as nv  # noqa: E402
import torch  # noqa: E402

from collectors.bench import cases as C  # noqa: E402
from collectors.bench import harness as H  # noqa: E402

ctx = C.Context(0, log=print)
nv.nvmlInit()
handle = nv.nvmlDeviceGetHandleByIndex(0)


def line(*a):
    print(*a, flush=True)


# ---- NVML interference ---------------------------------------------------------------------------
class ClockOnly:
    def __init__(self, period):
        self.period, self.stop = period, threading.Event()

    def loop(self):
        while not self.stop.is_set():
            nv.nvmlDeviceGetClockInfo(handle, nv.NVML_CLOCK_SM)
            self.stop.wait(self.period)

    def __enter__(self):
        self.t = threading.Thread(target=self.loop, daemon=True)
        self.t.start()

    def __exit__(self, *a):
        self.stop.set()
        self.t.join()


class Nothing:
    def __enter__(self):
        pass

    def __exit__(self, *a):
        pass


blocks = ctx.sms * 8
out = torch.empty(blocks * 256, device=ctx.dev)
for stride in (11, 45):
    fn = lambda s=stride: ctx.launch("ks_colread4", (blocks,), (256,), (out.data_ptr(), np.int32(s), np.int32(4096)),  # noqa: E731
                                     smem=(32 * s + 64) * 4)
    for trial in range(3):
        for label, mk in (("off", Nothing), ("full 50 ms", lambda: H.NvmlSampler(handle, 0.05)),
                          ("full 250 ms", lambda: H.NvmlSampler(handle, 0.25)), ("clock 50 ms", lambda: ClockOnly(0.05)),
                          ("power 50 ms", None)):
            if mk is None:
                class P(ClockOnly):
                    def loop(self):
                        while not self.stop.is_set():
                            nv.nvmlDeviceGetPowerUsage(handle)
                            self.stop.wait(self.period)
                mk = lambda: P(0.05)  # noqa: E731
            with mk():
                t = H.time_gpu(fn, target_s=0.2, max_reps=1000)
            xs = sorted(t.samples)
            line(f"colread stride {stride} trial {trial} nvml {label:11s}: median {t.median * 1e6:.2f} us cv {t.stats.cv:.4f} "
                 f"n {t.stats.n} max {xs[-1] * 1e6:.1f} p99 {xs[int(0.99 * len(xs))] * 1e6:.1f}")

# NVML query latency on the host
for name, q in (("clock", lambda: nv.nvmlDeviceGetClockInfo(handle, nv.NVML_CLOCK_SM)),
                ("power", lambda: nv.nvmlDeviceGetPowerUsage(handle)),
                ("temperature", lambda: nv.nvmlDeviceGetTemperature(handle, nv.NVML_TEMPERATURE_GPU)),
                ("reasons", lambda: nv.nvmlDeviceGetCurrentClocksEventReasons(handle))):
    ts = []
    for _ in range(50):
        t0 = time.perf_counter()
        q()
        ts.append(time.perf_counter() - t0)
    line(f"nvml {name}: median {statistics.median(ts) * 1e6:.1f} us max {max(ts) * 1e6:.1f} us")

# ---- copy vs destination offset --------------------------------------------------------------
n = 4 << 30
src = torch.rand(n // 4, device=ctx.dev)
big = torch.empty((n + (96 << 20)) // 4, device=ctx.dev)
line(f"src at {src.data_ptr():#x}, dst buffer at {big.data_ptr():#x}")
for off in (0, 256, 1024, 4096, 16384, 65536, 1 << 20, (2 << 20) + 4096, 5 << 20, 17 << 20, 33 << 20, 64 << 20):
    dst = big[off // 4: off // 4 + n // 4]
    dst.copy_(src)
    t = H.time_gpu(lambda: dst.copy_(src), target_s=0.1)
    line(f"copy 4 GiB torch copy_ dst offset {off:>9d} B: {2 * n / t.median / 1e12:.3f} TB/s = {2 * n / t.median / 4.8e12 * 100:.1f} % cv {t.stats.cv:.4f}")
# same buffer: copy the first half into the second half
del big
torch.cuda.empty_cache()

# ---- host memcpy spread, warmed up --------------------------------------------------------------
m = 64 << 20
a = np.random.rand(m // 8)
b = np.random.rand(m // 8)
for _ in range(3):
    np.copyto(b, a)
ts = []
for _ in range(40):
    t0 = time.perf_counter()
    np.copyto(b, a)
    ts.append(time.perf_counter() - t0)
line(f"host memcpy 64 MiB warmed: {m / statistics.median(ts) / 1e9:.2f} GB/s cv {statistics.pstdev(ts) / statistics.mean(ts):.4f} "
     f"min {min(ts) * 1e3:.2f} max {max(ts) * 1e3:.2f} ms")

# ---- suite cases with their new settings -----------------------------------------------------------
for case_id in ("timing.positions", "graph.replay", "h2d.chunked_copy"):
    ctx.begin_case(case_id)
    with H.NvmlSampler(handle, 0.25):
        getattr(C, "case_" + case_id.replace(".", "_"))(ctx)
    for r in ctx.records:
        if r["unit"] == "s" and r["value"] > 50e-6 and r["cv"] is not None:
            line(f"  {case_id} {r['metric']} {r['value'] * 1e6:.1f} us cv {r['cv']:.4f} {r['params']} {r['notes']}")
