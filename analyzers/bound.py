"""Where a trace's time goes, per device: GPU-, launch- or host-bound (`bound_verdict`), and each rank's run time
(`run_spans`). analyzers.timeline.summarize computes both once per trace; the thresholds and the verdict's terms are
here so that a test can show the measurement that flips each verdict."""
from __future__ import annotations

import polars as pl

GPU_BUSY_MIN = 0.9          # GPU-bound: busy >= 90 % of the window
HOST_WAIT_MIN = 0.3         # host- / launch-bound: waiting for the host >= 30 % of the window
HOST_WAIT_PARTIAL = 0.1     # partly: >= 10 %
SHORT_SHARE_MIN = 0.5       # launch-bound: >= 50 % of the kernels shorter than their launch call
BOUND_VERDICTS = ("GPU-bound", "launch-bound", "host-bound", "partly launch-bound", "partly host-bound",
                  "idle, not waiting for the host")


def bound_verdict(idle_fraction: float | None, host_wait_fraction: float | None,
                  short_kernel_share: float | None) -> tuple[str, str]:
    """(verdict, evidence) for one device: where its time goes (DEFINITIONS["bound"], thresholds above).
    GPU-bound: the GPU is busy; launch-bound: the host cannot submit the (short) kernels as fast as the GPU runs
    them; host-bound: the GPU waits for a host that is busy with other work between launches."""
    idle = idle_fraction or 0.0
    hw = host_wait_fraction or 0.0
    short = short_kernel_share
    busy = 1.0 - idle
    short_txt = "—" if short is None else f"{short:.0%}"
    facts = (f"GPU busy {busy:.1%} of its window; waiting for the host {hw:.1%}; kernels shorter than their launch "
             f"call {short_txt}")
    if busy >= GPU_BUSY_MIN:
        return "GPU-bound", f"{facts} (busy ≥ {GPU_BUSY_MIN:.0%}): faster kernels shorten the run."
    is_short = short is not None and short >= SHORT_SHARE_MIN
    if hw >= HOST_WAIT_MIN:
        if is_short:
            return "launch-bound", (f"{facts}: most kernels finish before the host can launch the next one "
                                    "(fewer, larger kernels or CUDA graphs help).")
        return "host-bound", (f"{facts}: the GPU waits for the host, whose time goes elsewhere than launching "
                              "(Python, CPU ops, data loading, synchronisation).")
    if hw >= HOST_WAIT_PARTIAL:
        return ("partly launch-bound" if is_short else "partly host-bound"), \
            f"{facts} (≥ {HOST_WAIT_PARTIAL:.0%} waiting for the host)."
    return "idle, not waiting for the host", (f"{facts}: the GPU's idle time is not spent waiting for the host "
                                              "(waits between streams or devices, events, communication).")


def run_spans(gpu_ops: pl.DataFrame, api_calls: pl.DataFrame | None = None) -> pl.DataFrame:
    """Per rank: first_ns, last_ns, run_ns = last - first over the rank's host API calls and GPU ops (and the
    launch calls the GPU ops name): the run time the what-if replays (DEFINITIONS["run_time"]). Each table is
    reduced per rank on its own (no concatenated copy of a million-op trace)."""
    def span(df: pl.DataFrame, a: str, b: str) -> pl.DataFrame:
        return df.group_by("rank").agg(pl.col(a).min().alias("a"), pl.col(b).max().alias("b"))
    parts = [span(gpu_ops, "start_ns", "end_ns"), span(gpu_ops, "api_start_ns", "api_end_ns")]
    if api_calls is not None and api_calls.height:
        parts.append(span(api_calls, "start_ns", "end_ns").cast({"rank": gpu_ops.schema["rank"]}))
    ev = pl.concat(parts)
    return (ev.group_by("rank").agg(pl.col("a").min().alias("first_ns"), pl.col("b").max().alias("last_ns"))
            .with_columns((pl.col("last_ns") - pl.col("first_ns")).alias("run_ns")).sort("rank"))
