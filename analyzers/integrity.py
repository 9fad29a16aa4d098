"""A trace's integrity, checked before any verdict is given on it.

More: docs/architecture.md, *analyzers.integrity*.
"""

from __future__ import annotations

import polars as pl

CLOCK_TOLERANCE_NS = 1_000
OVERLAP_TOLERANCE_NS = 1_000
_LAUNCH_KINDS = ("launch", "graph_launch")
_GRAPH = ("cudaGraphLaunch", "cuGraphLaunch", "hipGraphLaunch")
BLOCKING = ("gpu_ops_before_launch_call", "overlapping_ops_on_stream", "stream_busy_over_window")
LABELS = {
    "kernels_without_launch_call": "kernels without their launch call",
    "launch_calls_without_gpu_ops": "launch calls without GPU work",
    "gpu_ops_before_launch_call": "GPU ops before their launch call (clock skew)",
    "overlapping_ops_on_stream": "overlapping ops on one stream",
    "stream_busy_over_window": "a stream busy more than 100 % of its window",
    "trace_cut_short": "trace cut short",
    "graph_replays": "CUDA-graph replays recorded kernel by kernel",
    "nccl_kernels": "NCCL kernels recognised",
    "steps_without_gpu_work": "steps without GPU work",
}


def _check(key: str, status: str, count: int, detail: str) -> dict:
    return {
        "check": key,
        "label": LABELS[key],
        "status": status,
        "blocking": key in BLOCKING,
        "count": int(count),
        "detail": detail,
    }


def check_trace(
    gpu_ops: pl.DataFrame,
    api_calls: pl.DataFrame | None = None,
    cpu_ops: pl.DataFrame | None = None,
    steps: pl.DataFrame | None = None,
) -> list[dict]:
    """The checks of the module docstring, in that order."""
    out = []
    # only the columns each check reads: a filter of the whole table would copy a million rows of
    # every column
    kl = gpu_ops.lazy().filter(pl.col("kind") == "kernel")
    nk, no_call, gk = (
        int(x or 0)
        for x in kl.select(
            pl.len().alias("n"),
            pl.col("launch_api").is_null().sum().alias("no_call"),
            pl.col("launch_api").is_in(_GRAPH).sum().alias("graph"),
        )
        .collect()
        .row(0)
    )
    out.append(
        _check(
            "kernels_without_launch_call",
            "warn" if no_call else ("pass" if nk else "n/a"),
            no_call,
            f"{no_call:,} of {nk:,} kernels have no launch call in the trace (launched before "
            "profiling began, or replays of a graph captured before it); launch statistics cover "
            f"the other {nk - no_call:,}"
            if no_call
            else f"every one of the {nk:,} kernels has its launch call",
        )
    )

    # launch calls whose GPU work is missing: the calls less the distinct calls the ops name
    # (counts, no join), and the calls that began after the rank's last GPU op ended (those can have
    # no GPU work in the trace)
    nm = ng = calls = cut = 0
    if api_calls is not None and api_calls.height:
        key = (pl.col("rank").cast(pl.Int64) * (1 << 40) + pl.col("correlation")).alias("_k")
        lc = api_calls.lazy().filter(
            pl.col("kind").is_in(_LAUNCH_KINDS) & pl.col("correlation").is_not_null()
        )
        # distinct (rank, correlation): a runtime call and the driver call inside it share one
        calls, gcalls = (
            int(x or 0)
            for x in lc.select(
                key.n_unique().alias("n"),
                key.filter(pl.col("name").is_in(_GRAPH)).n_unique().alias("g"),
            )
            .collect()
            .row(0)
        )
        ops = gpu_ops.lazy().filter(
            (pl.col("kind") == "kernel")
            & pl.col("launch_api").is_not_null()
            & pl.col("correlation").is_not_null()
        )
        matched, gmatched = (
            int(x or 0)
            for x in ops.select(
                key.n_unique().alias("n"),
                key.filter(pl.col("launch_api").is_in(_GRAPH)).n_unique().alias("g"),
            )
            .collect()
            .row(0)
        )
        nm, ng = max(0, calls - matched), max(0, gcalls - gmatched)
        if nm and gpu_ops.height:
            last = gpu_ops.lazy().group_by("rank").agg(pl.col("end_ns").max().alias("_last"))
            cut = int(
                lc.join(last, on="rank", how="left")
                .filter(pl.col("_last").is_null() | (pl.col("start_ns") > pl.col("_last")))
                .select(key.n_unique())
                .collect()
                .item()
            )
    out.append(
        _check(
            "launch_calls_without_gpu_ops",
            "warn" if nm else ("pass" if calls else "n/a"),
            nm,
            f"{nm:,} of {calls:,} kernel and graph launch calls have no GPU op in the "
            f"trace" + (f" ({ng:,} of them graph launches)" if ng else "")
            if nm
            else f"each of the {calls:,} kernel and graph launch calls has its GPU work in "
            f"the trace",
        )
    )

    # clock skew: GPU ops that start before their own launch call began
    w = (
        gpu_ops.lazy()
        .filter(pl.col("api_start_ns").is_not_null())
        .select("start_ns", "api_start_ns")
        .collect()
    )
    early = w.filter(pl.col("start_ns") < pl.col("api_start_ns") - CLOCK_TOLERANCE_NS)
    ne = early.height
    lead = int((early["api_start_ns"] - early["start_ns"]).max()) if ne else 0
    out.append(
        _check(
            "gpu_ops_before_launch_call",
            "fail" if ne else ("pass" if w.height else "n/a"),
            ne,
            f"{ne:,} of {w.height:,} GPU ops start before their launch call began (by up to "
            f"{lead / 1e3:,.1f} µs): the host and GPU clocks are not aligned, so launch delays and "
            "waits for the host cannot be measured"
            if ne
            else f"no GPU op starts more than {CLOCK_TOLERANCE_NS / 1e3:g} µs before its "
            f"launch call",
        )
    )

    # overlaps and duplicates on one stream; busy over the window. Integer columns only, each op
    # next to the one before it on its stream (the ops come sorted so from the launch join; sorting
    # again is cheap)
    s = gpu_ops.select(
        "rank", "device", "stream", "start_ns", "end_ns", "duration_ns", "correlation"
    )
    grp = ("rank", "device", "stream")
    if not _sorted_by(s, (*grp, "start_ns")):
        s = s.sort(*grp, "start_ns", "end_ns")
    same = pl.all_horizontal([(pl.col(c) == pl.col(c).shift(1)).fill_null(False) for c in grp])
    s = s.with_columns(
        pl.when(same)
        .then(pl.col("end_ns").shift(1) - pl.col("start_ns"))
        .otherwise(None)
        .alias("_over"),
        pl.when(same).then(pl.col("duration_ns").shift(1)).otherwise(None).alias("_prev_dur"),
        (
            same
            & (pl.col("start_ns") == pl.col("start_ns").shift(1))
            & (pl.col("end_ns") == pl.col("end_ns").shift(1))
            & pl.col("correlation").eq_missing(pl.col("correlation").shift(1))
        )
        .fill_null(False)
        .alias("_dup"),
    )
    ov = s.filter(pl.col("_over") > OVERLAP_TOLERANCE_NS)
    # programmatic dependent launch lets a kernel start while the one before it finishes: a small
    # overlap is real; one over half the shorter op (or over 1 ms) is not
    bad = ov.filter(
        ~pl.col("_dup")
        & (
            (pl.col("_over") > 0.5 * pl.min_horizontal("duration_ns", "_prev_dur"))
            | (pl.col("_over") > 1_000_000)
        )
    )
    dup = int(s["_dup"].sum()) if s.height else 0
    nb, small = bad.height, ov.height - bad.height - int(ov["_dup"].sum())
    streams = s.select(grp).n_unique() if s.height else 0
    parts = []
    if nb:
        parts.append(
            f"{nb:,} ops start before the previous op on their stream ended by more than half the "
            f"shorter one (up to {int(bad['_over'].max()) / 1e3:,.1f} µs)"
        )
    if dup:
        parts.append(
            f"{dup:,} records appear more than once (same stream, times and correlation id)"
        )
    if parts:
        out.append(
            _check(
                "overlapping_ops_on_stream",
                "fail",
                nb + dup,
                "; ".join(parts) + ": a stream runs its ops one after another, so the "
                "timeline is impossible",
            )
        )
    elif small:
        out.append(
            _check(
                "overlapping_ops_on_stream",
                "warn",
                small,
                f"{small:,} ops start up to {int(ov['_over'].max()) / 1e3:,.1f} µs before the "
                "previous op on their stream ends (programmatic dependent launch lets a kernel "
                "start while the one before it finishes); busy time counts the overlap once",
            )
        )
    else:
        out.append(
            _check(
                "overlapping_ops_on_stream",
                "pass" if s.height else "n/a",
                0,
                f"the ops of each of the {streams:,} streams follow one another",
            )
        )
    per = s.group_by("rank", "device", "stream").agg(
        pl.col("duration_ns").sum().alias("sum"),
        (pl.col("end_ns").max() - pl.col("start_ns").min()).alias("win"),
    )
    over = per.filter(pl.col("sum") > 1.01 * pl.col("win"))
    worst = float((over["sum"] / over["win"]).max()) if over.height else 0.0
    out.append(
        _check(
            "stream_busy_over_window",
            "fail" if over.height else ("pass" if per.height else "n/a"),
            over.height,
            f"{over.height:,} streams have ops adding up to more than their window (up to "
            f"{worst:.1%}), which one stream cannot do"
            if over.height
            else "no stream's ops add up to more than its window",
        )
    )

    # cut short: launch calls after the rank's last GPU op (counted above)
    out.append(
        _check(
            "trace_cut_short",
            "warn" if cut else "pass",
            cut,
            f"{cut:,} launch calls after the last GPU op have no GPU work in the trace: the "
            "profiler stopped before the GPU finished, so the last step is incomplete"
            if cut
            else "the GPU work of the last launch calls is in the trace",
        )
    )

    # graph replays
    gl = (
        int(api_calls["name"].is_in(_GRAPH).sum())
        if api_calls is not None and api_calls.height
        else 0
    )
    if not gl:
        out.append(_check("graph_replays", "n/a", 0, "no graph launch calls in the trace"))
    elif ng:
        out.append(
            _check(
                "graph_replays",
                "warn",
                ng,
                f"{ng:,} of {gl:,} graph launches have no kernels in the trace: the replays were "
                "recorded as one opaque op or not at all (Nsight Systems: record with "
                "--cuda-graph-trace=node); their GPU time is missing from busy time and steps",
            )
        )
    else:
        out.append(
            _check(
                "graph_replays",
                "pass",
                0,
                f"{gl:,} graph launches ran {gk:,} kernels, each in the trace",
            )
        )

    # NCCL under every naming
    # each distinct name matched once, then counted
    counts = (
        kl.group_by("name").len().collect()
        if nk
        else pl.DataFrame(schema={"name": pl.String, "len": pl.UInt32})
    )
    names = counts["name"].cast(pl.String)
    old = int(counts["len"].filter(names.str.contains(r"ncclKernel_")).sum())
    new = int(counts["len"].filter(names.str.contains(r"ncclDevKernel_")).sum())
    other = int(counts["len"].filter(names.str.contains(r"(?i)nccl|rccl")).sum()) - old - new
    host_comm = 0
    if cpu_ops is not None and cpu_ops.height:
        host_comm = int(cpu_ops["name"].str.contains(r"^(nccl:|c10d::|record_param_comms)").sum())
    total = old + new + other
    if total:
        out.append(
            _check(
                "nccl_kernels",
                "pass",
                total,
                f"{total:,} NCCL kernels: {old:,} ncclKernel_*, {new:,} ncclDevKernel_*, {other:,} "
                "other nccl/rccl names",
            )
        )
    elif host_comm:
        out.append(
            _check(
                "nccl_kernels",
                "warn",
                0,
                f"{host_comm:,} collectives on the host but no kernel named nccl/rccl: "
                "communication time cannot be told apart",
            )
        )
    else:
        out.append(_check("nccl_kernels", "n/a", 0, "no collectives in the trace"))

    if steps is None or not steps.height:
        out.append(_check("steps_without_gpu_work", "n/a", 0, "no steps found"))
    else:
        empty = steps.filter(pl.col("kernels").fill_null(0) + pl.col("other_ops").fill_null(0) == 0)
        ids = ", ".join(str(x) for x in empty["step"].head(8).to_list())
        out.append(
            _check(
                "steps_without_gpu_work",
                "warn" if empty.height else "pass",
                empty.height,
                f"{empty.height:,} of {steps.height:,} steps launched no GPU op (steps "
                f"{ids}{', …' if empty.height > 8 else ''}); they are left out of the step "
                "statistics"
                if empty.height
                else f"each of the {steps.height:,} steps launched GPU work",
            )
        )
    return out


def _sorted_by(df: pl.DataFrame, keys) -> bool:
    """Whether df's rows are in (keys...) order (the launch join leaves GPU ops so): one comparison per row."""
    if df.height < 2:
        return True
    bad, same = pl.lit(False), pl.lit(True)
    for k in keys:
        prev = pl.col(k).shift(1)
        bad = bad | (same & (pl.col(k) < prev))
        same = same & (pl.col(k) == prev)
    return not bool(df.select(bad.slice(1).any()).item())


def abstain_reason(checks: list[dict]) -> str | None:
    """The reason a verdict abstains: the failed blocking checks, or None."""
    bad = [c for c in checks if c["blocking"] and c["status"] == "fail"]
    if not bad:
        return None
    return (
        "the trace fails its integrity check"
        + ("s " if len(bad) > 1 else " ")
        + "; ".join(f"'{c['label']}' ({c['detail'].split(':')[0]})" for c in bad)
    )
