"""Measurement harness of `kernelscope bench`: statistics, result records, byte/FLOP accounting,
NVML sampling, device-event timing.

The first half is pure Python (tested on the CPU). The second half times work on a GPU; it imports
torch and pynvml inside the functions that need them, so this module imports anywhere.

A result record is one measured number:
    {"case", "metric", "value", "unit", "params", "cv", "n", "source", "notes", "flags"}
`value` is in base units (s, B, B/s, FLOP/s, count, %); `cv` is the coefficient of variation
(std / mean) of the repetitions behind it, `n` their count; `source` says how it was measured.
Start-up: imports that only some commands, pages or GPUs need sit inside the functions that use
them, so each command loads what it uses.
"""

from __future__ import annotations

import contextlib
import gc
import json
import math
import re
import statistics
import threading
import time
from dataclasses import dataclass, field

# ---------------------------------------------------------------------------------------------
# Constants
# ---------------------------------------------------------------------------------------------

NOISY_CV = 0.02  # flag a result whose repetitions spread more than 2 % ...
NOISY_MIN_S = 50e-6  # ... when one repetition lasts longer than 50 µs
GRAPH_BELOW_S = 5e-6  # time work shorter than this by CUDA-graph replay
HOLD_MAX_S = 2e-3  # longest stream hold before a timed repetition (see time_gpu)
MIB = 1 << 20
GIB = 1 << 30

SOURCES = {
    "event timing",
    "graph replay",
    "host clock",
    "ncu counter",
    "nvml",
    "torch memory stats",
    "torch profiler",
    "calculated",
    "driver occupancy API",
    "compiler",
    "cpu computation",
}
UNITS = {"s", "B", "B/s", "FLOP", "FLOP/s", "count", "%", "1", "Hz"}
RECORD_KEYS = ("case", "metric", "value", "unit", "params", "cv", "n", "source", "notes", "flags")

#: NVML clock-event ("throttle") reason bits that mean the SM clock was held down.
THROTTLE_REASONS = {
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
}


class CaseTimeout(BaseException):
    """Raised (from a SIGALRM handler) when a case overruns its time limit. A BaseException so that
    the per-variant `except Exception` blocks inside a case do not swallow it."""


class CheckFailed(Exception):
    """A kernel's output did not match its reference."""


# ---------------------------------------------------------------------------------------------
# Statistics
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Stats:
    median: float
    mean: float
    std: float
    cv: float | None  # std / mean (population std); None for n < 2 or mean == 0
    n: int
    min: float
    max: float


def summarize(samples) -> Stats:
    """Median, mean, population std, cv = std / mean, min, max of a non-empty sample list."""
    xs = [float(x) for x in samples]
    if not xs:
        raise ValueError("no samples")
    if any(not math.isfinite(x) for x in xs):
        raise ValueError("non-finite sample")
    mean = statistics.fmean(xs)
    std = statistics.pstdev(xs) if len(xs) > 1 else 0.0
    cv = std / mean if len(xs) > 1 and mean != 0 else None
    return Stats(statistics.median(xs), mean, std, cv, len(xs), min(xs), max(xs))


def is_noisy(
    duration_s: float,
    cv: float | None,
    *,
    max_cv: float = NOISY_CV,
    min_duration_s: float = NOISY_MIN_S,
) -> bool:
    """True when a measurement longer than `min_duration_s` spreads more than `max_cv` (std / mean)."""
    return cv is not None and duration_s > min_duration_s and cv > max_cv


# ---------------------------------------------------------------------------------------------
# Records
# ---------------------------------------------------------------------------------------------


def _jsonable(params: dict) -> dict:
    json.dumps(params, allow_nan=False)  # raises for anything a JSON document cannot hold
    return params


def make_record(
    case: str,
    metric: str,
    value,
    unit: str,
    params: dict | None = None,
    *,
    source: str,
    cv: float | None = None,
    n: int | None = None,
    notes: str | None = None,
    flags=(),
) -> dict:
    """One validated result record (see the module docstring)."""
    rec = {
        "case": case,
        "metric": metric,
        "value": value,
        "unit": unit,
        "params": dict(params or {}),
        "cv": cv,
        "n": n,
        "source": source,
        "notes": notes,
        "flags": sorted(set(flags)),
    }
    validate_record(rec)
    return rec


def validate_record(rec: dict) -> None:
    """Raise ValueError naming the first problem of a result record."""
    if not isinstance(rec, dict):
        raise ValueError(f"record is {type(rec).__name__}, not an object")
    missing = [k for k in RECORD_KEYS if k not in rec and k != "flags"]
    if missing:
        raise ValueError(f"record lacks {', '.join(missing)}")
    for k in ("case", "metric", "unit", "source"):
        if not isinstance(rec[k], str) or not rec[k]:
            raise ValueError(f"record {k!r} must be a non-empty string, got {rec[k]!r}")
    v = rec["value"]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ValueError(f"{rec['case']}/{rec['metric']}: value must be a finite number, got {v!r}")
    if rec["unit"] not in UNITS:
        raise ValueError(
            f"{rec['case']}/{rec['metric']}: unit {rec['unit']!r} is not one of {sorted(UNITS)}"
        )
    if rec["source"] not in SOURCES and not rec["source"].startswith("ncu counter"):
        raise ValueError(
            f"{rec['case']}/{rec['metric']}: source {rec['source']!r} is not one of "
            f"{sorted(SOURCES)}"
        )
    if not isinstance(rec["params"], dict):
        raise ValueError(f"{rec['case']}/{rec['metric']}: params must be an object")
    try:
        _jsonable(rec["params"])
    except (TypeError, ValueError) as e:
        raise ValueError(f"{rec['case']}/{rec['metric']}: params are not JSON ({e})") from None
    cv = rec["cv"]
    if cv is not None and (
        isinstance(cv, bool) or not isinstance(cv, (int, float)) or not math.isfinite(cv) or cv < 0
    ):
        raise ValueError(
            f"{rec['case']}/{rec['metric']}: cv must be a finite number >= 0 or null, got {cv!r}"
        )
    n = rec["n"]
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
        raise ValueError(
            f"{rec['case']}/{rec['metric']}: n must be a positive integer or null, got {n!r}"
        )
    if rec["notes"] is not None and not isinstance(rec["notes"], str):
        raise ValueError(f"{rec['case']}/{rec['metric']}: notes must be a string or null")
    flags = rec.get("flags", [])
    if not isinstance(flags, list) or not all(isinstance(f, str) for f in flags):
        raise ValueError(f"{rec['case']}/{rec['metric']}: flags must be a list of strings")


def timing_records(
    case: str,
    params: dict,
    stats: Stats,
    *,
    source: str,
    bytes_moved: float | None = None,
    flop: float | None = None,
    prefix: str = "",
    notes: str | None = None,
) -> list[dict]:
    """`<prefix>time` (s, the median) plus, when given, `<prefix>bandwidth` = bytes / median (B/s)
    and `<prefix>flop_rate` = flop / median (FLOP/s). All carry the same params (with "bytes" /
    "flop" added when given), cv and n, and the flag "noisy" when is_noisy(median, cv)."""
    flags = ["noisy"] if is_noisy(stats.median, stats.cv) else []
    params = dict(params)
    if bytes_moved is not None:
        params["bytes"] = bytes_moved
    if flop is not None:
        params["flop"] = flop
    kw = dict(source=source, cv=stats.cv, n=stats.n, notes=notes, flags=flags)
    out = [make_record(case, prefix + "time", stats.median, "s", params, **kw)]
    if bytes_moved is not None:
        out.append(
            make_record(case, prefix + "bandwidth", bytes_moved / stats.median, "B/s", params, **kw)
        )
    if flop is not None:
        out.append(
            make_record(case, prefix + "flop_rate", flop / stats.median, "FLOP/s", params, **kw)
        )
    return out


def best_record(records: list[dict], metric: str, *, higher_is_better: bool = True) -> dict | None:
    """The record of `metric` with the best value (None if none)."""
    rs = [r for r in records if r["metric"] == metric]
    if not rs:
        return None
    return (max if higher_is_better else min)(rs, key=lambda r: r["value"])


# ---------------------------------------------------------------------------------------------
# Byte and FLOP accounting (the fewest bytes each kernel must move; R + W counted)
# ---------------------------------------------------------------------------------------------


def copy_bytes(nbytes: int) -> int:
    """A device-to-device copy of n bytes reads n and writes n: 2n."""
    return 2 * nbytes


def matmul_flop(m: int, n: int, k: int) -> int:
    """C[m,n] = A[m,k] B[k,n]: 2mnk (one multiply and one add per term)."""
    return 2 * m * n * k


def transpose_bytes(n: int, elem_bytes: int = 4) -> int:
    """An n x n out-of-place transpose reads and writes every element: 2 n^2 e."""
    return 2 * n * n * elem_bytes


def silu_mul_bytes(m: int, f: int, elem_bytes: int = 2, *, fused: bool) -> int:
    """Z = SiLU(G) * U over [m, f]: fused reads G, U and writes Z = 3 m f e; unfused (two kernels)
    also writes SiLU(G) and reads it back = 5 m f e."""
    return (3 if fused else 5) * m * f * elem_bytes


def rmsnorm_bytes(rows: int, hidden: int, segments: int, elem_bytes: int = 2) -> int:
    """RMSNorm of [rows, hidden] with weight [hidden]. One pass (segments = 1): read x, read w,
    write y = (2 rows + 1) hidden e. Split into s > 1 segments (two kernels): x is read twice and
    the rows x s FP32 partial sums are written once and read s times per row = (3 rows + 1) hidden e
    + 4 rows s (1 + s)."""
    if segments <= 1:
        return (2 * rows + 1) * hidden * elem_bytes
    return (3 * rows + 1) * hidden * elem_bytes + 4 * rows * segments * (1 + segments)


def attention_min_bytes(length: int, head_dim: int, elem_bytes: int = 2, heads: int = 1) -> int:
    """Q, K, V read and O written once: 4 L d e per head."""
    return 4 * length * head_dim * elem_bytes * heads


def tile_read_model_bytes(
    m: int, n: int, k: int, tile_m: int, tile_n: int, elem_bytes: int = 2
) -> float:
    """Reads from the next level by a tiled matmul: every output tile reads its A row panel and its W
    column panel once: e (M K N / n + K N M / m)  (= 2MK·N/n + 2KN·M/m for BF16)."""
    return elem_bytes * (m * k * (n / tile_n) + k * n * (m / tile_m))


# ---------------------------------------------------------------------------------------------
# Naming
# ---------------------------------------------------------------------------------------------


def gpu_slug(name: str) -> str:
    """'NVIDIA H200' -> 'nvidia-h200'."""
    s = re.sub(r"[^a-z0-9]+", "-", (name or "gpu").lower()).strip("-")
    return s or "gpu"


def uuid8(uuid: str | None) -> str:
    """First 8 hex digits of a GPU UUID ('GPU-2ab1ed74-...' -> '2ab1ed74'); '00000000' if none."""
    hexd = re.sub(r"[^0-9a-f]", "", (uuid or "").lower().removeprefix("gpu-").removeprefix("mig-"))
    return (hexd[:8] or "0").ljust(8, "0")


def result_file_name(gpu_name: str, uuid: str | None) -> str:
    return f"bench_{gpu_slug(gpu_name)}_{uuid8(uuid)}.json"


# ---------------------------------------------------------------------------------------------
# NVML samples -> a summary per case
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NvmlSample:
    t_s: float
    sm_clock_mhz: float | None
    power_w: float | None
    temp_c: float | None
    reasons: int | None  # NVML clock-event reason bit mask


def throttle_names(mask: int | None) -> list[str]:
    if not mask:
        return []
    return [name for bit, name in sorted(THROTTLE_REASONS.items()) if mask & bit]


def summarize_nvml(samples: list[NvmlSample], max_sm_clock_mhz: float | None = None) -> dict:
    """Clock, power and temperature during a case (min / median / max), the throttle reasons seen
    (THROTTLE_REASONS) and the fraction of samples that had one. `throttled` is True when any sample
    carried a throttle reason; `clock_below_max` when the median SM clock was under 90 % of the
    GPU's maximum (informational: an idle gap also lowers the clock)."""
    out: dict = {"n_samples": len(samples)}
    for key, attr in (
        ("sm_clock_mhz", "sm_clock_mhz"),
        ("power_w", "power_w"),
        ("temp_c", "temp_c"),
    ):
        vals = [getattr(s, attr) for s in samples if getattr(s, attr) is not None]
        out[key] = (
            {"min": min(vals), "median": statistics.median(vals), "max": max(vals)}
            if vals
            else None
        )
    seen: set[str] = set()
    hits = 0
    for s in samples:
        names = throttle_names(s.reasons)
        if names:
            hits += 1
            seen.update(names)
    out["throttle_reasons"] = sorted(seen)
    out["throttled_fraction"] = hits / len(samples) if samples else 0.0
    out["throttled"] = hits > 0
    med = out["sm_clock_mhz"]["median"] if out["sm_clock_mhz"] else None
    out["clock_below_max"] = bool(
        med is not None and max_sm_clock_mhz and med < 0.9 * max_sm_clock_mhz
    )
    return out


def count_launches(trace_events: list[dict]) -> dict:
    """Kernels and host launch calls in a PyTorch profiler (Kineto) trace: kernels = events of cat
    'kernel'; launches = runtime/driver kernel-launch calls; graph_launches = cudaGraphLaunch calls."""
    launch_names = {
        "cudaLaunchKernel",
        "cudaLaunchKernelExC",
        "cuLaunchKernel",
        "cuLaunchKernelEx",
        "cudaLaunchCooperativeKernel",
        "cuLaunchCooperativeKernel",
    }
    graph_names = {"cudaGraphLaunch", "cuGraphLaunch"}
    k = lc = gl = 0
    for e in trace_events:
        cat = e.get("cat")
        if cat == "kernel":
            k += 1
        elif cat in ("cuda_runtime", "cuda_driver"):
            name = e.get("name", "")
            lc += name in launch_names
            gl += name in graph_names
    return {"kernels": k, "kernel_launches": lc, "graph_launches": gl}


def rel_error_np(out, ref) -> float:
    """‖out − ref‖ / ‖ref‖ in float64 (numpy arrays); inf for NaN or a zero reference with nonzero error."""
    import numpy as np

    a = np.asarray(out, dtype=np.float64)
    b = np.asarray(ref, dtype=np.float64)
    num = float(np.linalg.norm(a - b))
    den = float(np.linalg.norm(b))
    if not math.isfinite(num):
        return math.inf
    if den == 0:
        return 0.0 if num == 0 else math.inf
    return num / den


# =============================================================================================
# GPU side (torch / pynvml imported inside)
# =============================================================================================


@dataclass
class Timing:
    stats: Stats
    source: str  # "event timing" | "graph replay" | "host clock"
    flushed: bool = False
    calls_per_graph: int | None = None
    samples: list[float] = field(default_factory=list, repr=False)
    batch: int = 1  # calls between one pair of events (time / call reported)
    held: bool = False  # the stream was held until the repetition was enqueued
    hold_capped: bool = False  # ... for HOLD_MAX_S only, which may be shorter than the enqueue
    attempts: list = field(default_factory=list)  # (median, cv) of every attempt when re-measured

    @property
    def median(self) -> float:
        return self.stats.median

    def note(self) -> str:
        parts = [self.source]
        if self.calls_per_graph:
            parts.append(f"{self.calls_per_graph} calls per graph, time / call")
        if self.batch > 1:
            parts.append(f"{self.batch} calls per event pair, time / call")
        if self.held and self.hold_capped:
            parts.append(
                f"stream held {HOLD_MAX_S * 1e3:g} ms before each repetition (capped: the host may "
                "still be enqueueing when it ends)"
            )
        elif self.held:
            parts.append("stream held until each repetition was enqueued")
        if len(self.attempts) > 1:
            parts.append(self.attempts_note())
        parts.append("L2 flushed before each repetition" if self.flushed else "L2 not flushed")
        return "; ".join(parts)

    def attempts_note(self) -> str:
        """'' for a measurement taken once; else how many attempts it took and their cv."""
        if len(self.attempts) < 2:
            return ""
        cvs = ", ".join(f"{100 * (c or 0):.1f} %" for _, c in self.attempts)
        return f"re-measured after a disturbed attempt: {len(self.attempts)} attempts with cv {cvs}, the quietest kept"


def _clamp(x: float, lo: int, hi: int) -> int:
    return int(max(lo, min(hi, x)))


@contextlib.contextmanager
def _no_gc():
    """The cyclic garbage collector off while timing (as timeit does): a collection in the middle of
    a repetition would stall the host that feeds the GPU."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def hold_seconds(host_enqueue_s: float) -> float:
    """How long to hold the stream before a repetition: 3x the host's enqueue time of one repetition
    plus 20 us, at most HOLD_MAX_S."""
    return min(3 * max(host_enqueue_s, 0.0) + 20e-6, HOLD_MAX_S)


def time_gpu(
    fn,
    *,
    flush=None,
    warmup: int = 2,
    target_s: float = 0.25,
    min_reps: int = 10,
    max_reps: int = 200,
    allow_graph: bool = True,
    sync_each: bool = False,
    hold: bool | None = None,
    batch: int = 1,
    attempts: int = 3,
) -> Timing:
    """Median device time of `fn()` on the current stream.

    Warm-up calls first; a first estimate from 3 calls between two events (and the host's time to
    enqueue them). Work shorter than GRAPH_BELOW_S is captured k times into a CUDA graph and its
    replays are timed (time / k); no flush is possible there (the note says so). Otherwise each
    repetition is bracketed by its own pair of events around `batch` calls (time / call is
    reported), after `flush()` (L2 flush) when given and after a device synchronisation when
    `sync_each`. The number of repetitions is target_s / estimate, clamped to [min_reps, max_reps].

    `hold` (default: on unless `sync_each`): before each repetition the stream runs a spin kernel
    (torch.cuda._sleep) long enough for the host to enqueue the start event, the calls and the end
    event, so the device never waits on the host inside the timed interval (NVIDIA's nvbench and
    nvbandwidth block the stream the same way). Without it a host-side launch gap (Python, Triton's
    launcher) or a garbage collection lands in the measurement. `sync_each` cases measure from an
    idle device on purpose (what a caller waits for) and are not held.

    `attempts`: a rare transient (on the H200 a few repetitions in 10,000 take 70-95 us longer, with
    or without NVML sampling: docs/findings-copy-ceiling.md) is enough to push the cv of 200
    repetitions past NOISY_CV. A noisy measurement is therefore repeated, up to `attempts` times in
    all, and the quietest attempt is kept; Timing.attempts and the note list every attempt's cv.
    """
    import torch

    if batch < 1:
        raise ValueError(f"batch must be >= 1, got {batch}")
    if hold is None:
        hold = not sync_each
    with _no_gc():
        for _ in range(warmup):
            fn()
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        h0 = time.perf_counter()
        s.record()
        for _ in range(3):
            fn()
        e.record()
        host = (time.perf_counter() - h0) / 3
        e.synchronize()
        est = max(s.elapsed_time(e) / 3e3, 1e-7)
        if allow_graph and est < GRAPH_BELOW_S and not sync_each:
            return _time_graph(fn, est, target_s=target_s, min_reps=min_reps, max_reps=max_reps)
        reps = _clamp(target_s / (est * batch), min_reps, max_reps)
        hold_s = hold_seconds(host * batch)
        spin = int(hold_s * _clock_hz(torch)) if hold else 0
        tried = []
        for _ in range(max(1, attempts)):
            starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
            ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
            for i in range(reps):
                if flush is not None:
                    flush()
                if sync_each:
                    torch.cuda.synchronize()
                if spin:
                    torch.cuda._sleep(spin)
                starts[i].record()
                for _ in range(batch):
                    fn()
                ends[i].record()
            torch.cuda.synchronize()
            samples = [a.elapsed_time(b) / 1e3 / batch for a, b in zip(starts, ends)]
            tried.append((summarize(samples), samples))
            if not is_noisy(tried[-1][0].median, tried[-1][0].cv):
                break
    stats, samples = min(tried, key=lambda t: t[0].cv if t[0].cv is not None else 0.0)
    return Timing(
        stats,
        "event timing",
        flushed=flush is not None,
        samples=samples,
        batch=batch,
        held=bool(spin),
        hold_capped=bool(spin) and hold_s >= HOLD_MAX_S,
        attempts=[(t[0].median, t[0].cv) for t in tried],
    )


def _clock_hz(torch) -> float:
    """The SM clock the spin kernel counts (the device's maximum; a lower clock only lengthens the hold)."""
    khz = (
        getattr(torch.cuda.get_device_properties(torch.cuda.current_device()), "clock_rate", 0)
        or 2_000_000
    )
    return khz * 1e3


def _time_graph(fn, est: float, *, target_s: float, min_reps: int, max_reps: int) -> Timing:
    import torch

    k = _clamp(200e-6 / est, 10, 500)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(k):
            fn()
    g.replay()
    torch.cuda.synchronize()
    reps = _clamp(target_s / (k * est), min_reps, max_reps)
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for i in range(reps):
        starts[i].record()
        g.replay()
        ends[i].record()
    torch.cuda.synchronize()
    samples = [a.elapsed_time(b) / 1e3 / k for a, b in zip(starts, ends)]
    del g
    return Timing(summarize(samples), "graph replay", calls_per_graph=k, samples=samples)


def time_host(fn, *, reps: int, warmup: int = 2, per_call: int = 1, attempts: int = 3) -> Timing:
    """Host wall-clock (perf_counter) per call of fn(), which must itself synchronise if it means to
    include device time; `per_call` divides each sample (fn() may run several calls). A noisy
    measurement is repeated like time_gpu's (up to `attempts` in all, the quietest kept)."""
    tried = []
    with _no_gc():
        for _ in range(warmup):
            fn()
        for _ in range(max(1, attempts)):
            samples = []
            for _ in range(reps):
                t0 = time.perf_counter()
                fn()
                samples.append((time.perf_counter() - t0) / per_call)
            tried.append((summarize(samples), samples))
            if not is_noisy(tried[-1][0].median, tried[-1][0].cv):
                break
    stats, samples = min(tried, key=lambda t: t[0].cv if t[0].cv is not None else 0.0)
    return Timing(
        stats, "host clock", samples=samples, attempts=[(t[0].median, t[0].cv) for t in tried]
    )


def rel_error(out, ref) -> float:
    """‖out − ref‖ / ‖ref‖ in float64 on the device (torch tensors); inf when NaN appears."""
    a = out.double()
    b = ref.double()
    num = float((a - b).norm())
    den = float(b.norm())
    if not math.isfinite(num):
        return math.inf
    if den == 0:
        return 0.0 if num == 0 else math.inf
    return num / den


def check(name: str, out, ref, tol: float) -> float:
    """Raise CheckFailed unless rel_error(out, ref) <= tol; return the error."""
    err = rel_error(out, ref)
    if not err <= tol:
        raise CheckFailed(f"{name}: relative error {err:.3g} > {tol:g}")
    return err


def check_equal(name: str, out, ref) -> float:
    import torch

    if not torch.equal(out, ref):
        bad = int((out != ref).sum())
        raise CheckFailed(f"{name}: {bad} of {out.numel()} elements differ from the reference")
    return 0.0


class NvmlSampler:
    """Samples SM clock, power, temperature and clock-event reasons of one GPU every `period_s` in a
    background thread between __enter__ and __exit__; `summary()` gives summarize_nvml()."""

    def __init__(self, handle, period_s: float = 0.05, max_sm_clock_mhz: float | None = None):
        self.handle = handle
        self.period_s = period_s
        self.max_sm_clock_mhz = max_sm_clock_mhz
        self.samples: list[NvmlSample] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _one(self) -> NvmlSample:
        import pynvml as nv

        def safe(f):
            try:
                return f()
            except Exception:  # noqa: BLE001 - a query NVML does not support reads as missing
                return None

        reasons_fn = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
            nv, "nvmlDeviceGetCurrentClocksThrottleReasons"
        )
        clk = safe(lambda: nv.nvmlDeviceGetClockInfo(self.handle, nv.NVML_CLOCK_SM))
        pw = safe(lambda: nv.nvmlDeviceGetPowerUsage(self.handle) / 1000.0)
        tc = safe(lambda: nv.nvmlDeviceGetTemperature(self.handle, nv.NVML_TEMPERATURE_GPU))
        rs = safe(lambda: reasons_fn(self.handle))
        return NvmlSample(time.monotonic(), clk, pw, tc, rs)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.samples.append(self._one())
            self._stop.wait(self.period_s)

    def __enter__(self):
        if self.handle is not None:
            self._thread = threading.Thread(target=self._loop, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        return False

    def summary(self) -> dict | None:
        if self.handle is None:
            return None
        return summarize_nvml(self.samples, self.max_sm_clock_mhz)
