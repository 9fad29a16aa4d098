"""The main remedy of a trace's steady step and its estimated gain: a model with stated terms (a
CUDA graph for a step whose host sets the pace, fusion for one whose GPU idles between graph
kernels, the top kernel for a busy GPU), computed once per trace by analyzers.timeline.summarize;
the Timeline page, Home, `kernelscope analyze` and the export render `remedy_sentence` of the same
result. Times in ns."""

from __future__ import annotations

import polars as pl

#: the GPU's idle time per kernel inside a CUDA-graph replay (ns). Measured on an H100 (SXM) on the
#: Llama-style decode step of sample_traces/llm_workloads (493 kernels per replay): 325 ns per
#: kernel without the profiler (CUDA events: 1.347 ms a step, 1.187 ms of it kernels) and 465 ns in
#: the profiler's trace; the model takes 400 ns.
GRAPH_KERNEL_GAP_NS = 400.0
#: how far the CUDA-graph estimate may be off (relative, on the step): the decode's eager step
#: predicted 1.43 ms for the graph replays measured at 1.415 ms in the trace (+1 %) and 1.347 ms
#: without the profiler (+6 %)
REMEDY_TOLERANCE = 0.15
#: verdicts under which the host sets the pace
HOST_VERDICTS = ("launch-bound", "host-bound", "partly launch-bound", "partly host-bound")
#: the speed-up assumed for the top kernel of a GPU-bound step (Amdahl within the step)
TOP_KERNEL_SPEEDUP = 2.0


def step_remedy(
    info: dict | None, bound: str | None, top_kernel: dict | None = None
) -> dict | None:
    """The main remedy for a trace's steady step and the step time it predicts: a model with stated
    terms, not a measurement. `info`: one rank's step summary (analyzers.steps: step_median_ns,
    busy_median_ns, kernels_median, graph_launches_median, profiler_overhead_median_ns); `bound`:
    that device's verdict (analyzers.bound); `top_kernel`: {"name", "busy_share"} of the kernel with
    the most time. None when there are no steady steps, the verdict abstains, or no remedy shortens
    the step.

    - The host sets the pace (launch- or host-bound) and the step launches its kernels one call
      each: capture the step as a CUDA graph. Predicted step = the GPU's busy time per step +
      kernels per step × GRAPH_KERNEL_GAP_NS (±REMEDY_TOLERANCE); launches free (no gap at all)
      bounds it from below at the busy time. The gain is given against the step in the trace and
      against the step without the profiler (the trace's step less the profiler's estimated cost),
      which is what the program gains.
    - The GPU idles between the kernels of graph replays: fewer, larger kernels (fusion). The gain
      is an upper bound: at most the idle time of the step (step − busy).
    - The GPU is busy: the kernel with the most time, TOP_KERNEL_SPEEDUP× faster; gain = its share
      of the busy time × busy time × (1 − 1/speed-up) (Amdahl within the step)."""
    if not info or not info.get("steady_count") or bound in (None, "abstains"):
        return None
    step = info.get("step_median_ns")
    busy = info.get("busy_median_ns")
    kernels = info.get("kernels_median") or 0
    if not step or busy is None:
        return None
    overhead = info.get("profiler_overhead_median_ns") or 0.0
    graphs = info.get("graph_launches_median") or 0
    out = {"step_ns": float(step), "busy_ns": float(busy), "kernels": kernels, "bound": bound}
    if bound in HOST_VERDICTS and not graphs:
        predicted = float(busy) + kernels * GRAPH_KERNEL_GAP_NS
        unprofiled = max(float(step) - overhead, predicted)
        if predicted >= step:
            return None
        out.update(
            remedy="capture the step as a CUDA graph",
            action='torch.cuda.CUDAGraph or torch.compile(mode="reduce-overhead"), one '
            "launch call per step",
            kind="estimate",
            predicted_step_ns=predicted,
            floor_ns=float(busy),
            gain_ns=float(step) - predicted,
            speedup=float(step) / predicted,
            unprofiled_step_ns=unprofiled,
            unprofiled_gain_ns=unprofiled - predicted,
            unprofiled_speedup=unprofiled / predicted,
            tolerance=REMEDY_TOLERANCE,
            model=(
                f"GPU busy time per step + {kernels:g} kernels × {GRAPH_KERNEL_GAP_NS:g} ns (the "
                "idle time per kernel of CUDA-graph replays, measured on an H100); launches free: "
                f"the busy time alone; ±{REMEDY_TOLERANCE:.0%}"
            ),
        )
        return out
    if bound == "idle, not waiting for the host" and step > busy:
        out.update(
            remedy="fewer, larger kernels (fusion)",
            action="fuse the small kernels between the big ones, e.g. torch.compile inside "
            "the graph",
            kind="upper bound",
            predicted_step_ns=float(busy),
            floor_ns=float(busy),
            gain_ns=float(step) - float(busy),
            speedup=float(step) / float(busy),
            tolerance=None,
            model="at most the step's idle time: step − GPU busy time per step (every gap gone)",
        )
        return out
    if top_kernel and top_kernel.get("busy_share"):
        share = min(max(float(top_kernel["busy_share"]), 0.0), 1.0)
        gain = share * float(busy) * (1 - 1 / TOP_KERNEL_SPEEDUP)
        name = str(top_kernel.get("name") or "")
        short = name if len(name) <= 60 else name[:59] + "…"
        out.update(
            remedy=f"a {TOP_KERNEL_SPEEDUP:g}× faster top kernel",
            kernel=name,
            kernel_share=share,
            action=f"{short} takes {share:.0%} of the GPU's busy time",
            kind="Amdahl",
            predicted_step_ns=float(step) - gain,
            floor_ns=None,
            gain_ns=gain,
            speedup=float(step) / (float(step) - gain) if step > gain else None,
            tolerance=None,
            model=f"step − its share × busy time × (1 − 1/{TOP_KERNEL_SPEEDUP:g}) (Amdahl "
            f"within the step)",
        )
        return out
    return None


def _x(v: float) -> str:
    return f"{v:.2f}×" if v < 1.5 else f"{v:.1f}×"


def remedy_sentence(r: dict | None) -> str:
    """The remedy as one sentence (the page, the CLI and the export say the same)."""
    if not r:
        return ""
    ms = lambda ns: f"{ns / 1e6:,.3f} ms"  # noqa: E731
    head = f"Main remedy: {r['remedy']} — {r['action']}."
    if r["kind"] == "estimate":
        s = (
            f"{head} Estimated step {ms(r['predicted_step_ns'])} (±{r['tolerance']:.0%}) instead "
            f"of {ms(r['step_ns'])} in the trace ({_x(r['speedup'])} faster)"
        )
        if r.get("unprofiled_step_ns") and r["unprofiled_step_ns"] < r["step_ns"] * 0.98:
            s += (
                f"; against the step without the profiler (about {ms(r['unprofiled_step_ns'])}), "
                f"{ms(r['unprofiled_gain_ns'])} saved per step ({_x(r['unprofiled_speedup'])})"
            )
        return s + f". Model: {r['model']}."
    if r["kind"] == "upper bound":
        return (
            f"{head} At most {ms(r['gain_ns'])} saved per step ({_x(r['speedup'])}), a bound. "
            f"Model: {r['model']}."
        )
    return (
        f"{head} About {ms(r['gain_ns'])} saved per step"
        + (f" ({_x(r['speedup'])})" if r.get("speedup") else "")
        + f". Model: {r['model']}."
    )


def trace_remedy(main: dict, devices: pl.DataFrame, kernels: pl.DataFrame | None) -> dict | None:
    """The main remedy (analyzers.remedy.step_remedy) of the main rank's steady step, judged by the
    verdict of that rank's device with the most busy time."""
    bound = main_verdict(devices, main)[0]
    if not main or bound is None:
        return None
    top = None
    if kernels is not None and kernels.height:
        k = kernels.row(0, named=True)
        top = {"name": k.get("name"), "busy_share": k.get("busy_share")}
    return step_remedy(main, bound, top)


def main_verdict(devices: pl.DataFrame, main: dict | None) -> tuple[str | None, str | None]:
    """(verdict, evidence) of a trace's headline device: the device with the most busy time on the
    rank whose steps are the run's headline (analyzers.steps.TraceSteps.main), or on any rank when
    there are no steps."""
    if devices is None or not devices.height:
        return None, None
    d = devices
    if main and main.get("rank") is not None and (devices["rank"] == main["rank"]).any():
        d = devices.filter(pl.col("rank") == main["rank"])
    r = d.sort("busy_ns", descending=True).row(0, named=True)
    return r["bound"], r["bound_evidence"]
