"""Where a trace's time goes, per device: GPU-, launch- or host-bound (`bound_verdict`), and each
rank's run time (`run_spans`). analyzers.timeline.summarize computes both once per trace; the
thresholds and the verdict's terms are here so that a test can show the measurement that flips each
verdict."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

GPU_BUSY_MIN = 0.9  # GPU-bound: busy >= 90 % of the window
HOST_WAIT_MIN = 0.3  # host- / launch-bound: waiting for the host >= 30 % of the window
HOST_WAIT_PARTIAL = 0.1  # partly: >= 10 %
SHORT_SHARE_MIN = 0.5  # launch-bound: >= 50 % of the kernels shorter than their launch call
BOUND_VERDICTS = (
    "GPU-bound",
    "launch-bound",
    "host-bound",
    "partly launch-bound",
    "partly host-bound",
    "idle, not waiting for the host",
    "abstains",
)


@dataclass
class TraceFacts:
    """What a device's trace holds beyond its shares, so that a verdict names only causes the trace has."""

    window_ns: int = 0
    # idle in short gaps (< 30 us) between back-to-back work, not waiting for the host
    kernel_wait_ns: int = 0
    short_gaps: int = 0  # how many such gaps
    other_idle_ns: int = 0  # idle in longer gaps with the next op already submitted
    streams: int = 1
    nccl_kernels: int = 0
    event_waits: int = 0  # cudaStreamWaitEvent / cudaEventSynchronize / ... calls
    launch_calls: int = 0
    graph_launches: int = 0
    graph_kernels: int = 0
    # kernels of their own launch call that waited behind earlier GPU work
    queued_share: float | None = None


_EVENT_WAITS = r"(StreamWaitEvent|EventSynchronize|EventQuery|StreamWaitValue)"


def trace_facts(
    gpu_ops: pl.DataFrame, api_calls: pl.DataFrame | None, devices: pl.DataFrame, comm: str
) -> list:
    """TraceFacts per device row (devices: analyzers.timeline.summarize's rows; comm: the NCCL name pattern) (streams, NCCL kernels, event waits of its rank, launch calls, idle causes)."""
    per = gpu_ops.group_by("rank", "device").agg(
        pl.col("stream").n_unique().alias("_streams"),
        ((pl.col("kind") == "kernel") & pl.col("name").str.contains(comm)).sum().alias("_nccl"),
    )
    waits = {}
    if api_calls is not None and api_calls.height:
        w = (
            api_calls.filter(pl.col("name").str.contains(_EVENT_WAITS))
            .group_by("rank")
            .agg(pl.len().alias("n"))
        )
        waits = dict(w.iter_rows())
    d = devices.join(per, on=["rank", "device"], how="left")
    out = []
    for r in d.iter_rows(named=True):
        out.append(
            TraceFacts(
                window_ns=int(r["window_ns"] or 0),
                kernel_wait_ns=int(r["kernel_wait_ns"] or 0),
                short_gaps=int(r.get("short_gaps") or 0),
                other_idle_ns=int(r["other_idle_ns"] or 0),
                streams=int(r["_streams"] or 1),
                nccl_kernels=int(r["_nccl"] or 0),
                event_waits=int(waits.get(r["rank"], 0)),
                launch_calls=int(r["launch_call_count"] or 0),
                graph_launches=int(r["graph_launch_count"] or 0),
                graph_kernels=int(r["graph_kernel_count"] or 0),
                queued_share=r["queued_share"],
            )
        )
    return out


def _ms(ns) -> str:
    return f"{(ns or 0) / 1e6:,.3f} ms"


def bound_verdict(
    idle_fraction: float | None,
    host_wait_fraction: float | None,
    short_kernel_share: float | None,
    facts: TraceFacts | None = None,
    abstain: str | None = None,
) -> tuple[str, str]:
    """(verdict, evidence) for one device: where its time goes (DEFINITIONS["bound"], thresholds
    above). GPU-bound: the GPU is busy; launch-bound: the host cannot submit the (short) work as
    fast as the GPU runs it; host-bound: the GPU waits for a host that is busy with other work
    between launches. host_wait_fraction is the device's (never a sum over streams);
    short_kernel_share is per launch call (a graph replay is one call). With `abstain` (a failed
    blocking integrity check) the verdict is "abstains" and the evidence says why."""
    f = facts or TraceFacts()
    idle = min(max(idle_fraction or 0.0, 0.0), 1.0)
    hw = min(max(host_wait_fraction or 0.0, 0.0), idle)
    short = short_kernel_share
    busy = 1.0 - idle
    short_txt = "—" if short is None else f"{short:.0%}"
    calls = f" of {f.launch_calls:,}" if f.launch_calls else ""
    graph = (
        f"; {f.graph_launches:,} graph replays ran {f.graph_kernels:,} kernels (one launch "
        f"call each)"
        if f.graph_launches
        else ""
    )
    facts = (
        f"GPU busy {busy:.1%} of its window; waiting for the host {hw:.1%}; launch calls longer "
        f"than the GPU work they submit {short_txt}{calls}{graph}"
    )
    if abstain:
        return "abstains", f"No verdict: {abstain} ({facts})."
    if busy >= GPU_BUSY_MIN:
        ahead = ""
        if f.queued_share is not None and f.queued_share >= 0.5:
            ahead = (
                f" The host runs ahead: {f.queued_share:.0%} of the kernels launched by a call of "
                "their own waited in the queue behind earlier GPU work, so their launch delay is "
                "queueing, not launch cost."
            )
        return (
            "GPU-bound",
            f"{facts} (busy ≥ {GPU_BUSY_MIN:.0%}): faster kernels shorten the run.{ahead}",
        )
    is_short = short is not None and short >= SHORT_SHARE_MIN
    if hw >= HOST_WAIT_MIN:
        if is_short:
            remedy = (
                "fewer, larger kernels (fusion) help: the graphs' own replays are already "
                "one call each"
                if f.graph_launches
                else "fewer, larger kernels or CUDA graphs help"
            )
            return "launch-bound", (
                f"{facts}: most launch calls take longer than the GPU work they submit ({remedy})."
            )
        return "host-bound", (
            f"{facts}: the GPU waits for the host, whose time goes elsewhere than launching "
            "(Python, CPU ops, data loading, synchronisation)."
        )
    if hw >= HOST_WAIT_PARTIAL:
        return (
            "partly launch-bound" if is_short else "partly host-bound"
        ), f"{facts} (≥ {HOST_WAIT_PARTIAL:.0%} waiting for the host)."
    idle_ns = idle * f.window_ns
    parts = []
    if f.kernel_wait_ns:
        gaps = (
            f" ({f.short_gaps:,} gaps, {f.kernel_wait_ns / f.short_gaps / 1e3:,.1f} µs each on "
            f"average)"
            if f.short_gaps
            else ""
        )
        parts.append(
            f"{_ms(f.kernel_wait_ns)} of the {_ms(idle_ns)} idle is short gaps (< 30 µs) between "
            f"back-to-back work{gaps}"
        )
    if f.other_idle_ns:
        held = [
            x
            for x, n in (
                (f"{f.streams} streams", f.streams > 1),
                (f"{f.event_waits:,} event waits", f.event_waits),
                (f"{f.nccl_kernels:,} NCCL kernels", f.nccl_kernels),
            )
            if n
        ]
        parts.append(
            f"{_ms(f.other_idle_ns)} is longer gaps with the next op already submitted"
            + (
                f" (the trace has {', '.join(held)})"
                if held
                else " (the trace has one stream, no event waits and no communication)"
            )
        )
    why = "; ".join(parts) if parts else "no idle gap to explain"
    remedy = ""
    if idle_ns and f.kernel_wait_ns >= 0.5 * idle_ns:
        remedy = (
            " The GPU is the bottleneck: it runs its kernels one after another, and the gaps "
            "between them are the rest — fewer, larger kernels (fusion) shrink them."
        )
    return "idle, not waiting for the host", (
        f"{facts}: the GPU's idle time is not spent waiting for the host: {why}.{remedy}"
    )


def run_spans(gpu_ops: pl.DataFrame, api_calls: pl.DataFrame | None = None) -> pl.DataFrame:
    """Per rank: first_ns, last_ns, run_ns = last - first over the rank's host API calls and GPU ops
    (and the launch calls the GPU ops name): the run time the what-if replays
    (DEFINITIONS["run_time"]). Each table is reduced per rank on its own (no concatenated copy of a
    million-op trace)."""

    def span(df: pl.DataFrame, a: str, b: str) -> pl.DataFrame:
        return df.group_by("rank").agg(pl.col(a).min().alias("a"), pl.col(b).max().alias("b"))

    parts = [span(gpu_ops, "start_ns", "end_ns"), span(gpu_ops, "api_start_ns", "api_end_ns")]
    if api_calls is not None and api_calls.height:
        parts.append(span(api_calls, "start_ns", "end_ns").cast({"rank": gpu_ops.schema["rank"]}))
    ev = pl.concat(parts)
    return (
        ev.group_by("rank")
        .agg(pl.col("a").min().alias("first_ns"), pl.col("b").max().alias("last_ns"))
        .with_columns((pl.col("last_ns") - pl.col("first_ns")).alias("run_ns"))
        .sort("rank")
    )
