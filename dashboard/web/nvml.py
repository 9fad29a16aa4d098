"""The server's GPUs through NVML (nvidia-ml-py, imported as `pynvml`), and a fake NVML for tests
and demos.

`snapshot()` returns one `Snapshot`: per GPU utilisation, clocks, memory, power and temperature, or
a state that says why there is nothing ("no NVIDIA driver", "no permission"). Only
`pynvml.NVMLError` is caught; a quantity a GPU does not support (NVML_ERROR_NOT_SUPPORTED) is None.

KERNELSCOPE_FAKE_NVML selects the fake: "1" (two H200s), "nodriver", "nopermission", "nogpu".
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field


@dataclass(frozen=True)
class GpuSample:
    index: int
    name: str
    uuid: str | None
    # nvmlDeviceGetUtilizationRates().gpu: % of time a kernel ran
    util_gpu_pct: float | None
    util_mem_pct: float | None  # .memory: % of time device memory was read or written
    sm_clock_mhz: float | None
    sm_clock_max_mhz: float | None
    mem_clock_mhz: float | None
    mem_used_bytes: int | None
    mem_total_bytes: int | None
    power_w: float | None
    power_limit_w: float | None
    temperature_c: float | None


@dataclass
class Snapshot:
    # ok | no_driver | no_permission | no_gpu | no_package | error
    state: str
    message: str
    time_s: float = field(default_factory=time.time)
    driver: str | None = None
    gpus: list[GpuSample] = field(default_factory=list)


def _module():
    fake = os.environ.get("KERNELSCOPE_FAKE_NVML")
    if fake:
        return FakeNVML(fake)
    import pynvml

    return pynvml


def _text(v) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def snapshot(nvml=None) -> Snapshot:
    """Read every GPU once. `nvml` is the pynvml module (default) or a FakeNVML."""
    if nvml is None:
        try:
            nvml = _module()
        except ImportError:
            return Snapshot(
                "no_package", "nvidia-ml-py is not installed (pip install nvidia-ml-py)."
            )
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as e:
        code = getattr(e, "value", None)
        if code in (nvml.NVML_ERROR_LIBRARY_NOT_FOUND, nvml.NVML_ERROR_DRIVER_NOT_LOADED):
            return Snapshot(
                "no_driver",
                f"No NVIDIA driver on this machine (NVML: {e}). The other pages work without one; "
                "profile on a GPU machine and upload the reports here.",
            )
        if code == nvml.NVML_ERROR_NO_PERMISSION:
            return Snapshot("no_permission", f"No permission to read the GPUs through NVML ({e}).")
        return Snapshot("error", f"NVML could not start: {e}")
    try:
        driver = _text(nvml.nvmlSystemGetDriverVersion())
        n = nvml.nvmlDeviceGetCount()
        if n == 0:
            return Snapshot(
                "no_gpu", "The NVIDIA driver is loaded but reports no GPU.", driver=driver
            )
        gpus = [_read(nvml, i) for i in range(n)]
        return Snapshot(
            "ok", f"{n} GPU{'s' if n > 1 else ''}, driver {driver}", driver=driver, gpus=gpus
        )
    except nvml.NVMLError as e:
        return Snapshot("error", f"NVML error while reading the GPUs: {e}")
    finally:
        try:
            nvml.nvmlShutdown()
        except nvml.NVMLError:
            pass


def _read(nvml, i: int) -> GpuSample:
    h = nvml.nvmlDeviceGetHandleByIndex(i)

    def get(fn, *args):
        try:
            return fn(h, *args)
        except nvml.NVMLError as e:
            if getattr(e, "value", None) in (
                nvml.NVML_ERROR_NOT_SUPPORTED,
                nvml.NVML_ERROR_NO_PERMISSION,
            ):
                return None
            raise

    util = get(nvml.nvmlDeviceGetUtilizationRates)
    mem = get(nvml.nvmlDeviceGetMemoryInfo)
    power = get(nvml.nvmlDeviceGetPowerUsage)
    limit = get(nvml.nvmlDeviceGetEnforcedPowerLimit)
    return GpuSample(
        index=i,
        name=_text(nvml.nvmlDeviceGetName(h)),
        uuid=_text(get(nvml.nvmlDeviceGetUUID) or "") or None,
        util_gpu_pct=None if util is None else float(util.gpu),
        util_mem_pct=None if util is None else float(util.memory),
        sm_clock_mhz=get(nvml.nvmlDeviceGetClockInfo, nvml.NVML_CLOCK_SM),
        sm_clock_max_mhz=get(nvml.nvmlDeviceGetMaxClockInfo, nvml.NVML_CLOCK_SM),
        mem_clock_mhz=get(nvml.nvmlDeviceGetClockInfo, nvml.NVML_CLOCK_MEM),
        mem_used_bytes=None if mem is None else int(mem.used),
        mem_total_bytes=None if mem is None else int(mem.total),
        power_w=None if power is None else power / 1000.0,  # NVML reports mW
        power_limit_w=None if limit is None else limit / 1000.0,
        temperature_c=get(nvml.nvmlDeviceGetTemperature, nvml.NVML_TEMPERATURE_GPU),
    )


# ---------------------------------------------------------------------------------------------------
# Fake NVML: the subset of pynvml used above, deterministic
# ---------------------------------------------------------------------------------------------------


class _FakeError(Exception):
    def __init__(self, value: int):
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return {
            12: "NVML Shared Library Not Found",
            9: "Driver Not Loaded",
            4: "Insufficient Permissions",
            3: "Not Supported",
        }.get(self.value, f"error {self.value}")


class _Obj:
    def __init__(self, **kw):
        self.__dict__.update(kw)


class FakeNVML:
    """Stands in for the pynvml module. mode "1" (or "h200x2"): two H200s, the second idle and
    without power readings; "nodriver", "nopermission", "nogpu"."""

    NVMLError = _FakeError
    NVML_ERROR_LIBRARY_NOT_FOUND = 12
    NVML_ERROR_DRIVER_NOT_LOADED = 9
    NVML_ERROR_NO_PERMISSION = 4
    NVML_ERROR_NOT_SUPPORTED = 3
    NVML_CLOCK_SM = 1
    NVML_CLOCK_MEM = 2
    NVML_TEMPERATURE_GPU = 0

    def __init__(self, mode: str = "1"):
        self.mode = mode
        self.calls = 0

    def nvmlInit(self):
        if self.mode == "nodriver":
            raise _FakeError(12)
        if self.mode == "nopermission":
            raise _FakeError(4)

    def nvmlShutdown(self):
        pass

    def nvmlSystemGetDriverVersion(self):
        return "580.95.05"

    def nvmlDeviceGetCount(self):
        return 0 if self.mode == "nogpu" else 2

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetName(self, h):
        return b"NVIDIA H200"

    def nvmlDeviceGetUUID(self, h):
        return f"GPU-fake-{h}"

    def nvmlDeviceGetUtilizationRates(self, h):
        self.calls += 1
        return _Obj(gpu=87 if h == 0 else 0, memory=64 if h == 0 else 0)

    def nvmlDeviceGetClockInfo(self, h, which):
        return (1980 if h == 0 else 345) if which == self.NVML_CLOCK_SM else 3201

    def nvmlDeviceGetMaxClockInfo(self, h, which):
        return 1980

    def nvmlDeviceGetMemoryInfo(self, h):
        return _Obj(total=150_109_880_320, used=(42 << 30) if h == 0 else (1 << 20), free=0)

    def nvmlDeviceGetPowerUsage(self, h):
        if h == 1:
            raise _FakeError(3)
        return 612_000

    def nvmlDeviceGetEnforcedPowerLimit(self, h):
        return 700_000

    def nvmlDeviceGetTemperature(self, h, which):
        return 61 if h == 0 else 34
