"""The definitions of the timeline's quantities (analyzers.timeline), one line each, as `kernelscope
analyze` and the dashboard state them; re-exported by analyzers.timeline."""

from __future__ import annotations

DEFINITIONS = {
    "launch_delay": "max(0, kernel start - end of its launch call) (HTA's launch delay; kernels of "
    "a graph replay have none, and a kernel queued behind earlier GPU work waits for the GPU, not "
    "for its launch)",
    "launch_calls": "a launch call is one kernel launch, or one graph launch for all the kernels "
    "of its replay; a call is longer than its GPU work when the call takes longer than its "
    "kernels' time (launch-bound evidence is per call, never per graph kernel)",
    "launch_latency": "kernel start - max(end of its launch call, end of its stream's earlier "
    "work), for kernels launched by a call of their own; a kernel whose stream was still busy when "
    "its call returned is queued (the host ran ahead of the GPU)",
    "queue": "kernel start - end of its launch call, null when the kernel starts before the call "
    "returns (Nsight Systems' Queue Dur)",
    "gpu_busy": "length of the union of kernel, memcpy and memset intervals (overlaps count once)",
    "gpu_window": "last op end - first op start, per device; the run's value sums the devices' "
    "windows",
    "gpu_idle_fraction": "1 - busy / window",
    "idle_categories": "per stream, each gap before an op: host_wait if the op's launch call "
    "started after the previous op ended; else kernel_wait if the gap < 30 us; else other (HTA's, "
    "per stream: a stream's idle time is not the device's)",
    "device_idle": "per device, each gap between its merged busy intervals (all streams): waiting "
    "for the host if the next op's launch call started after the device went idle; else short (< "
    "30 us, back-to-back work); else other (work submitted but waiting). They add up to the "
    "device's idle time, so waiting for the host never exceeds it",
    "launch_bound": "most launch calls (>= 50 %) longer than the GPU work they submit and the "
    "device idle waiting for the host for >= 30 % of its window (10 %: partly)",
    "bound": "per device: GPU-bound if the GPU is busy >= 90 % of its window; else launch-bound if "
    "most launch calls (>= 50 %) take longer than the GPU work they submit and the device waits "
    "for the host >= 30 % of its window; else host-bound if the device waits for the host >= 30 % "
    "of its window (the host is busy elsewhere: Python, CPU ops, data loading, synchronisation); "
    "'partly' launch- or host-bound at >= 10 %; otherwise idle for other reasons, naming only "
    "those the trace holds (short gaps between back-to-back work, other streams, event waits, "
    "communication); 'abstains' when the trace fails a blocking integrity check",
    "steps": "ProfilerStep#N, else annotation / NVTX ranges named step, iteration or token N (or "
    "--step REGEX), else one step per graph replay, else a repeated kernel sequence; a step's time "
    "is from the first to the last GPU op it launched; warm-up steps (compilation, graph capture, "
    "allocator growth, one-time kernels, or over 1.5x the steady median) are kept out of the "
    "median and p90",
    "profiler_overhead": "an estimate: recorded host events per step (CPU ops and runtime calls) x "
    "the profiler's cost per event (analyzers.steps.PROFILER_NS_PER_EVENT); said where the host is "
    "the bottleneck",
    "run_time": "first to last event of the rank (host API calls and GPU ops); the run's is the "
    "slowest rank's",
    "whatif": "replay of the trace's own dependencies with the chosen kernels faster (see "
    "analyzers.whatif.what_if); Amdahl: run * ((1 - f) + f / s), f = matched kernel time / run time",
}
