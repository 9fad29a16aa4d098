"""What every GPU case of `kernelscope bench` runs with: the `Context` (torch, CuPy, the compiled
chapter-5 kernels, device facts, the L2 flush buffer, timing defaults, per-case bookkeeping) and the
device attributes written with every result.

Each case function (collectors.bench.cases lists them) takes a `Context` and emits result records
through `ctx.emit` (so a case that fails half-way keeps what it measured). Kernels that need an
exact shared-memory layout come from kernels/chapter5.cuh, compiled at run time with NVRTC through
CuPy and launched on torch's current stream; the rest are torch and Triton.

In an `--ncu-child` process the same functions run with `ctx.ncu_child` set: every custom kernel is
launched once (`ctx.profile_point`) and listed in a manifest, for Nsight Compute to profile.
Start-up: imports that only some commands, pages or GPUs need sit inside the functions that use
them, so each command loads what it uses.
"""

from __future__ import annotations

import contextlib
import json
import traceback
import warnings
from pathlib import Path

from collectors.bench import harness
from collectors.bench.harness import MIB, make_record

KERNEL_SRC = Path(__file__).resolve().parent / "kernels" / "chapter5.cuh"
NAN = float("nan")

#: device property (cudaDeviceProp name, as CuPy returns it) -> Nsight Compute device attribute
#: (without `device__attribute_`), so analyzers.gpus.resolve_gpu can read a bench result like a
#: report.
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

    def __init__(
        self,
        device: int = 0,
        *,
        quick: bool = False,
        ncu_child: bool = False,
        manifest_path: str | None = None,
        log=print,
    ):
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
        self.cuda_props = {
            k: (v.decode(errors="replace").rstrip("\x00") if isinstance(v, bytes) else v)
            for k, v in raw.items()
            if isinstance(v, (int, float, str, bytes)) and k not in ("uuid", "luid")
        }
        self.attributes = device_attributes(self.cuda_props)
        self.sms = int(self.props.multi_processor_count)
        self.l2_bytes = int(self.props.L2_cache_size) or 64 * MIB
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
            msg = (
                f"{label}: {type(e).__name__}: {e} (at {Path(where.filename).name}:{where.lineno})"
            )
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
        return harness.time_gpu(fn, **kw)

    def flush(self) -> None:
        self.flush_buf.zero_()

    def flush_if(self, working_set_bytes: float):
        """The L2 flush when the working set could stay (partly) cached: below 4x the L2."""
        return self.flush if working_set_bytes < 4 * self.l2_bytes else None

    def sync(self) -> None:
        self.torch.cuda.synchronize()

    def check(self, name, out, ref, tol) -> float:
        err = harness.check(name, out, ref, tol)
        self.checks[name] = err
        return err

    def check_equal(self, name, out, ref) -> float:
        err = harness.check_equal(name, out, ref)
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
                # ExternalStream is deprecated in CuPy 14, still there
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", DeprecationWarning)
                    st = self.cupy.cuda.ExternalStream(sp)
            self._streams[sp] = st
        self.kernel(name)(grid, block, args, shared_mem=smem, stream=st)

    def blocks_per_sm(self, name: str, block: int, smem: int = 0) -> int:
        """Resident blocks per SM for a launch, from the driver's occupancy API."""
        from cupy.cuda import driver

        k = self.kernel(name)
        return int(driver.occupancyMaxActiveBlocksPerMultiprocessor(k.kernel.ptr, block, smem))

    def profile_point(self, kernel: str, params: dict, fn, notes: str | None = None) -> bool:
        """In an ncu child: launch fn() once, list it in the manifest and return True (the caller
        then skips its timing). Elsewhere: False."""
        if not self.ncu_child:
            return False
        fn()
        self.sync()
        with open(self.manifest_path, "a") as f:
            f.write(
                json.dumps(
                    {"case": self.case_id, "kernel": kernel, "params": params, "notes": notes}
                )
                + "\n"
            )
        return True


def ceiling_record(
    metric: str,
    unit: str,
    values: dict,
    timings: dict,
    extra: dict | None = None,
    *,
    higher_is_better: bool = True,
) -> dict:
    """One ceiling: the best of several methods, with every method's value in params["variants"]."""
    if not values:
        raise RuntimeError(f"{metric}: no method succeeded")
    best = (max if higher_is_better else min)(values, key=values.get)
    t = timings[best]
    flags = ["noisy"] if harness.is_noisy(t.median, t.stats.cv) else []
    params = {"method": best, **(extra or {}), "variants": {k: float(v) for k, v in values.items()}}
    return make_record(
        "ceiling",
        metric,
        float(values[best]),
        unit,
        params,
        source=t.source,
        cv=t.stats.cv,
        n=t.stats.n,
        notes=t.note(),
        flags=flags,
    )
