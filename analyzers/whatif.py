"""What-if: a trace's run time if some kernels ran faster, by replaying the trace's own dependencies
(the textbook's Section 5.6 method), next to Amdahl's law. Pure functions over the normalized
timeline tables (`gpu_ops` with their launch calls, `api_calls`); times in ns. analyzers.timeline
has the other timeline quantities."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

import polars as pl

from analyzers.timeline import KERNEL_WAIT_THRESHOLD_NS


@dataclass
class WhatIf:
    pattern: str
    speedup: float
    matched_kernels: int
    matched_kernel_ns: int  # sum of the matched kernels' durations (before)
    # measured run time: first to last event (host calls and GPU ops)
    run_ns: int
    predicted_ns: float  # replay of the dependencies with the faster kernels
    # run_ns * ((1 - f) + f / speedup), f = matched_kernel_ns / run_ns
    amdahl_ns: float
    fraction: float  # f (capped at 1)
    speedup_whatif: float  # run_ns / predicted_ns
    speedup_amdahl: float  # run_ns / amdahl_ns
    ranks: list = field(default_factory=list)  # the same per rank
    # the rank whose run time is run_ns; fraction is its f (its own kernels)
    slowest_rank: int | None = None
    slowest_rank_matched_kernels: int = 0
    slowest_rank_matched_kernel_ns: int = 0

    def as_dict(self) -> dict:
        return asdict(self)


def _check_pattern(pattern: str) -> None:
    try:
        re.compile(pattern)
        pl.Series(["x"]).str.contains(pattern)
    except (re.error, pl.exceptions.ComputeError) as e:
        raise ValueError(f"invalid kernel regex {pattern!r}: {e}") from None


def what_if(
    gpu_ops: pl.DataFrame,
    api_calls: pl.DataFrame,
    pattern: str,
    speedup: float,
    *,
    kernel_wait_threshold_ns: int = KERNEL_WAIT_THRESHOLD_NS,
) -> WhatIf:
    """Predicted run time when the kernels whose name matches `pattern` (a regex, searched) run
    `speedup`x faster, by replaying the trace's own dependencies (the textbook's Section 5.6
    method), next to Amdahl.

    Model, per rank (ranks are replayed independently; the run time is the slowest rank's):
    - Run time = last end - first start over the rank's API calls and GPU ops.
    - GPU ops keep their order on their stream; a matched kernel lasts duration / speedup.
    - An op whose launch call ended after the previous op on its stream had ended was waiting for
      the host (host-gated): it keeps its start on the host timeline (old start + host shift, see
      below). Any other op was waiting for its stream: it starts behind the new end of the previous
      op, keeping the observed op-to-op gap, but not before min(its launch call end, its old start)
      + host shift: new start = max(ready + host shift, new end of the previous op + old gap) An op
      whose launch call is not in the trace is host-gated when it followed a gap of at least
      kernel_wait_threshold_ns, stream-gated otherwise; the first op of a stream follows the host.
    - The host timeline is unchanged except that a blocking call (cudaDeviceSynchronize,
      cudaStreamSynchronize, cudaEventSynchronize, synchronous cudaMemcpy ...) that waited for GPU
      work now ends when that work ends in the replay: the ops it waited for are those launched
      before the call started that ended before it returned; new end = max(new call start, their new
      last end) + the time the call took after the GPU work ended. Every later host call moves by
      (new end - old end) = host shift.
    - Not modelled: waits between streams (cudaStreamWaitEvent, NCCL), kernels sharing the GPU's
      SMs,
      host work that depends on GPU results without a blocking call, and coupling between ranks.
    With speedup = 1 the replay reproduces the measured run time exactly.

    Amdahl: f = sum of the matched kernels' durations / run time (capped at 1);
    predicted = run time * ((1 - f) + f / speedup)."""
    if not speedup > 0:
        raise ValueError("speedup must be > 0")
    _check_pattern(pattern)
    g = gpu_ops.with_columns(
        ((pl.col("kind") == "kernel") & pl.col("name").str.contains(pattern)).alias("_match")
    )
    per_rank = []
    for rank in sorted(
        set(g["rank"].drop_nulls().to_list()) | set(api_calls["rank"].drop_nulls().to_list())
    ):
        r_ops = g.filter(pl.col("rank") == rank)
        r_api = api_calls.filter(pl.col("rank") == rank)
        per_rank.append(_replay_rank(int(rank), r_ops, r_api, speedup, kernel_wait_threshold_ns))
    if not per_rank:
        return WhatIf(pattern, speedup, 0, 0, 0, 0.0, 0.0, 0.0, 1.0, 1.0, [])
    worst = max(per_rank, key=lambda r: r["run_ns"])
    run = worst["run_ns"]
    predicted = max(r["predicted_ns"] for r in per_rank)
    amdahl = max(r["amdahl_ns"] for r in per_rank)
    matched = sum(r["matched_kernels"] for r in per_rank)
    matched_ns = sum(r["matched_kernel_ns"] for r in per_rank)
    return WhatIf(
        pattern=pattern,
        speedup=speedup,
        matched_kernels=matched,
        matched_kernel_ns=matched_ns,
        run_ns=run,
        predicted_ns=predicted,
        amdahl_ns=amdahl,
        fraction=worst["fraction"],
        speedup_whatif=run / predicted if predicted else 1.0,
        speedup_amdahl=run / amdahl if amdahl else 1.0,
        ranks=per_rank,
        slowest_rank=worst["rank"],
        slowest_rank_matched_kernels=worst["matched_kernels"],
        slowest_rank_matched_kernel_ns=worst["matched_kernel_ns"],
    )


def _replay_rank(
    rank: int, ops: pl.DataFrame, api: pl.DataFrame, s: float, gap_threshold: int
) -> dict:
    ops = ops.sort("device", "stream", "start_ns")
    n = ops.height
    starts_old = [
        x
        for x in (api["start_ns"].min(), ops["start_ns"].min(), ops["api_start_ns"].min())
        if x is not None
    ]
    ends_old = [
        x
        for x in (api["end_ns"].max(), ops["end_ns"].max(), ops["api_end_ns"].max())
        if x is not None
    ]
    if not starts_old:
        return {
            "rank": rank,
            "run_ns": 0,
            "predicted_ns": 0.0,
            "amdahl_ns": 0.0,
            "fraction": 0.0,
            "matched_kernels": 0,
            "matched_kernel_ns": 0,
        }
    t0 = min(starts_old)  # times relative to the first event, so floats keep ns precision
    run = max(ends_old) - t0
    rel = lambda c: pl.col(c) - t0  # noqa: E731
    o = ops.select(rel("start_ns"), rel("end_ns"), rel("api_start_ns"), rel("api_end_ns"))
    start = o["start_ns"].to_list()
    end = o["end_ns"].to_list()
    dur = ops["duration_ns"].to_list()
    match = ops["_match"].to_list()
    api_start = o["api_start_ns"].to_list()
    api_end = o["api_end_ns"].to_list()
    streams = list(zip(ops["device"].to_list(), ops["stream"].to_list()))

    blocking = (
        api.filter(pl.col("blocking")).sort("start_ns").select(rel("start_ns"), rel("end_ns"))
    )
    b_start = blocking["start_ns"].to_list()
    b_end = blocking["end_ns"].to_list()

    # issue order: ops by their launch call start (their own start when the call is not in the
    # trace), blocking calls by their start; at equal times an op goes first
    items = [(api_start[i] if api_start[i] is not None else start[i], 0, i) for i in range(n)]
    items += [(b_start[j], 1, j) for j in range(len(b_start))]
    items.sort()

    new_end = [0.0] * n
    last_old: dict = {}
    last_new: dict = {}
    pending: list[int] = []
    shift = 0.0
    for _, typ, i in items:
        if typ == 0:
            key = streams[i]
            prev_old = last_old.get(key)
            if prev_old is None:  # first op on its stream: follows the host
                t = start[i] + shift
            else:
                behind = last_new[key] + (start[i] - prev_old)  # keep the observed op-to-op gap
                if api_end[i] is not None:
                    host_gated = api_end[i] > prev_old
                    ready = start[i] if host_gated else min(api_end[i], start[i])
                    t = max(ready + shift, behind)
                # no launch call: a long gap was an outside wait
                elif start[i] - prev_old >= gap_threshold:
                    t = max(start[i] + shift, behind)
                else:
                    t = behind
            d = dur[i] / s if match[i] else dur[i]
            new_end[i] = t + d
            last_old[key] = end[i] if prev_old is None else max(prev_old, end[i])
            last_new[key] = new_end[i] if key not in last_new else max(last_new[key], new_end[i])
            pending.append(i)
        else:
            s0, e0 = b_start[i], b_end[i]
            waited = [k for k in pending if end[k] <= e0]
            if waited:
                pending = [k for k in pending if end[k] > e0]
            w_old = max((end[k] for k in waited), default=None)
            s_new = s0 + shift
            if w_old is None or w_old <= s0:
                e_new = s_new + (e0 - s0)
            else:
                w_new = max(new_end[k] for k in waited)
                e_new = max(s_new, w_new) + (e0 - w_old)
            shift = e_new - e0

    # the first event does not move (the first host call is not shifted; an op may only move later)
    ends_new = [
        e - t0 + shift for e in (api["end_ns"].max(), ops["api_end_ns"].max()) if e is not None
    ]
    if n:
        ends_new.append(max(new_end))
    predicted = max(ends_new)
    matched_ns = int(ops.filter(pl.col("_match"))["duration_ns"].sum())
    m = min(matched_ns, run)  # f = m / run, capped at 1
    f = m / run if run > 0 else 0.0
    amdahl = run - m + m / s  # = run * ((1 - f) + f / s)
    return {
        "rank": rank,
        "run_ns": int(run),
        "predicted_ns": float(predicted),
        "amdahl_ns": float(amdahl),
        "fraction": f,
        "matched_kernels": int(ops["_match"].sum()),
        "matched_kernel_ns": matched_ns,
    }
