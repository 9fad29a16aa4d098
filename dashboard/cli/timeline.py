"""Timeline commands (`kernelscope whatif`) and the report that `kernelscope analyze` prints for
PyTorch profiler (kind "kineto") and Nsight Systems (kind "nsys") runs.

`report(trace_analysis)` -> dict with `summary` (whole run + `devices`), `devices`, `kernels` (one
row per kernel), `launch`, `idle_categories`, `temporal`, `launch_bound`, `top_kernels` and the
`definitions` used. Times are ns unless the key says `_us`.
Start-up: imports that only some commands, pages or GPUs need sit inside the functions that use
them, so each command loads what it uses.
"""

from __future__ import annotations

import math
from typing import Annotated

import typer

from analyzers.quantities import TRACE_DEVICE_JSON, trace_json_units
from collectors.formats import TRACE_KINDS
from dashboard.cli._app import (
    ListFormat,
    MaxMBOpt,
    Rows,
    StoreOpt,
    app,
    apply_limits,
    echo_json,
    load,
)

TIMELINE_KINDS = TRACE_KINDS  # the format registry's timeline kinds


# columns of the per-kernel table (`kernelscope analyze TRACE` without --format json): (key, header,
# scale)
TABLE_COLUMNS = [
    ("rank", "rank", None),
    ("device", "dev", None),
    ("stream", "stream", None),
    ("name", "kernel", None),
    ("duration_ns", "duration [µs]", 1e-3),
    ("launch_api", "launch call", None),
    ("launch_delay_us", "launch delay [µs]", 1),
    ("queue_us", "queue [µs]", 1),
    ("op_name", "CPU op", None),
]


def _r(x, nd=3):
    if x is None:
        return None
    x = float(x)
    return None if not math.isfinite(x) else round(x, nd)


def _us(ns):
    return None if ns is None else _r(ns / 1e3)


def report(tr, *, max_kernels: int | None = None) -> dict:
    """The timeline report of a trace analysis (dashboard.core.source.TraceAnalysis; see the module
    docstring). Every number is analyzers.timeline.summarize's (computed once per trace), unchanged
    but for ns -> µs. `kernels` is a dashboard.cli._app.Rows view of gpu_ops (one row per kernel, in
    rank, device, start order): echo_json writes it chunk by chunk, the table and CSV outputs read
    it whole."""
    import polars as pl

    from analyzers.timeline import DEFINITIONS

    s = tr.summary
    devices = [_device_row(u) for u in s.devices.iter_rows(named=True)]
    run = s.run
    summary = {
        "kernel_count": run["kernel_count"],
        "kernels_with_launch": run["kernels_with_launch"],
        "gpu_op_count": run["gpu_op_count"],
        "memcpy_count": run["memcpy_count"],
        "memset_count": run["memset_count"],
        "gpu_busy_ns": run["gpu_busy_ns"],
        "gpu_window_ns": run["gpu_window_ns"],
        "gpu_idle_fraction": _r(run["gpu_idle_fraction"], 6),
        "wall_window_ns": run["wall_window_ns"],
        "launch_delay_median_us": _us(run["launch_delay_median_ns"]),
        "launch_delay_p90_us": _us(run["launch_delay_p90_ns"]),
        "device_count": run["device_count"],
        "gpu_name": tr.meta.get("gpu_name"),
        "devices": devices,
        "run_ns": run["run_ns"],
        "slowest_rank": run["slowest_rank"],
        "delay_outliers": run["delay_outliers"],
        "launch_floor_ns": s.launch_floor_ns,
        "launch_call_count": run["launch_call_count"],
        "graph_launch_count": run["graph_launch_count"],
        "graph_kernel_count": run["graph_kernel_count"],
        "launch_latency_median_us": _us(run["launch_latency_median_ns"]),
        "step_median_ns": run["step_median_ns"],
        "step_p90_ns": run["step_p90_ns"],
        "abstains": run["abstains"],
    }
    g = tr.gpu_ops
    is_k = pl.col("kind") == "kernel"
    order = g.select(
        pl.int_range(pl.len(), dtype=pl.UInt32)
        .filter(is_k)
        .sort_by(
            [pl.col(c).filter(is_k) for c in ("rank", "device", "start_ns")], maintain_order=True
        )
    ).to_series()
    if max_kernels is not None:
        order = order.head(max_kernels)
    kern = Rows(
        g,
        order,
        [
            "name",
            "rank",
            "device",
            "stream",
            "start_ns",
            "end_ns",
            "duration_ns",
            "launch_api",
            "correlation",
            (pl.col("launch_delay_ns") / 1e3).round(3).alias("launch_delay_us"),
            (pl.col("queue_ns") / 1e3).round(3).alias("queue_us"),
            "op_name",
            "graph_launch_correlation",
            _graph_position(),
        ],
    )

    def rows(df: pl.DataFrame) -> list[dict]:  # small per-device / per-stream tables
        return [
            {c: (_r(v, 6) if isinstance(v, float) else v) for c, v in r.items()}
            for r in df.iter_rows(named=True)
        ]

    return {
        "kind": tr.kind,
        "gpu": {"name": tr.meta.get("gpu_name")},
        "gpu_name": tr.meta.get("gpu_name"),
        "summary": summary,
        "devices": devices,
        "launch": rows(s.launch),
        "idle_categories": rows(s.idle_categories),
        "temporal": rows(s.temporal),
        "launch_bound": rows(s.launch_bound),
        "top_kernels": rows(s.kernels.head(20)),
        "device_idle": rows(s.device_idle),
        "launch_calls": rows(s.launch_calls),
        # one row per step, written chunk by chunk like the kernels (29,040 steps are no list of
        # Python dicts)
        "steps": Rows(
            s.steps.steps,
            pl.int_range(s.steps.steps.height, dtype=pl.UInt32, eager=True),
            list(s.steps.steps.columns),
        )
        if s.steps is not None and s.steps.steps.height
        else [],
        "step_summary": [_step_summary(r, s.steps.profiler_ns_per_event) for r in s.steps.ranks]
        if s.steps is not None
        else [],
        "integrity": s.integrity or [],
        "remedy": s.remedy,
        "definitions": DEFINITIONS,
        "units": trace_json_units(),
        "kernels": kern,
    }


_HOW = {
    "raw": lambda v: v,
    "int": int,
    "int0": lambda v: int(v or 0),
    "frac": lambda v: _r(v, 6),
    "us": _us,
}


def _device_row(u: dict) -> dict:
    """One row of `summary.devices` from the summary frame's row (analyzers.quantities.TRACE_DEVICE_JSON)."""
    return {key: _HOW[how](u[col]) for key, col, how in TRACE_DEVICE_JSON}


def _graph_position():
    """A graph kernel's position in its replay (0 = the first to start), null for other kernels."""
    import polars as pl

    g = pl.col("graph_launch_correlation")
    return (
        pl.when(g.is_not_null())
        .then(pl.col("start_ns").rank("ordinal").over("rank", "pid", g) - 1)
        .otherwise(None)
        .cast(pl.Int64)
        .alias("graph_position")
    )


def _step_summary(r: dict, ns_per_event: float) -> dict:
    out = {k: (_r(v, 6) if isinstance(v, float) else v) for k, v in r.items()}
    out["profiler_ns_per_event"] = ns_per_event
    return out


def step_lines(rep: dict) -> list[str]:
    """The steps and the profiler's estimated cost as `kernelscope analyze` prints them (one line per rank)."""
    from analyzers.steps import PROFILER_TOLERANCE

    out = []
    bound = {d["rank"]: d.get("bound") for d in rep.get("summary", {}).get("devices", [])}
    for r in rep.get("step_summary", []):
        if not r.get("step_count"):
            out.append(
                f"rank {r['rank']}: no steps found (no ProfilerStep#N, step/iteration/token ranges "
                "or repeated kernel sequence; --step REGEX names them)"
            )
            continue
        if not r.get("steady_count"):
            out.append(f"rank {r['rank']}: {r['step_count']} steps ({r['how']}), none steady")
            continue
        ms = lambda ns: "—" if ns is None else f"{ns / 1e6:,.3f} ms"  # noqa: E731
        line = (
            f"rank {r['rank']}: steps from {r['how']}: {r['steady_count']} steady of "
            f"{r['step_count']}; step time (first to last GPU op it launched) median "
            f"{ms(r['step_median_ns'])}, p90 {ms(r['step_p90_ns'])}; GPU busy "
            f"{100 * (r['busy_fraction_median'] or 0):.1f} % of it; {r['launches_median']:g} "
            f"launch calls ({r['graph_launches_median']:g} graph launches), "
            f"{r['kernels_median']:g} kernels per step"
        )
        if r.get("host_median_ns") is not None:
            line += f"; host {ms(r['host_median_ns'])} per step"
        out.append(line)
        for w in r.get("warmup", []):
            host = f", host {ms(w['host_ns'])}" if w["host_ns"] is not None else ""
            out.append(f"  warm-up step {w['step']}: GPU {ms(w['gpu_ns'])}{host} ({w['reasons']})")
        for w in r.get("set_apart", []):
            out.append(
                f"  step {w['step']} set apart: {w['phase']}"
                + (f" ({w['reasons']})" if w["reasons"] else "")
            )
        ov = r.get("profiler_overhead_median_ns")
        if (
            ov
            and bound.get(r["rank"])
            in ("launch-bound", "host-bound", "partly launch-bound", "partly host-bound")
            and r.get("host_median_ns")
        ):
            out.append(
                f"  profiler overhead (estimate, ±{PROFILER_TOLERANCE:.0%}): "
                f"{r['events_median']:g} recorded host events per step (about "
                f"{r['profiler_ns_per_event'] / 1e3:g} µs each) = {ms(ov)} of the "
                f"{ms(r['host_median_ns'])} host time per step ({ov / r['host_median_ns']:.0%}); "
                "the host is the bottleneck, so the un-profiled step is about "
                f"{ms(max(0.0, r['step_median_ns'] - ov))}"
            )
    from analyzers.remedy import remedy_sentence

    if rep.get("remedy"):
        out.append(remedy_sentence(rep["remedy"]))
    return out


def integrity_lines(rep: dict) -> list[str]:
    return [
        "integrity "
        f"{c['status'].upper()}{' (blocking)' if c['blocking'] and c['status'] == 'fail' else ''}: "
        f"{c['label']}: {c['detail']}"
        for c in rep.get("integrity", [])
        if c["status"] in ("warn", "fail")
    ]


# --------------------------------------------------------------------------------------------------
# kernelscope whatif
# --------------------------------------------------------------------------------------------------
@app.command("whatif")
def whatif_cmd(
    trace: Annotated[
        str,
        typer.Argument(help="A PyTorch profiler trace / nsys SQLite export (path) or a run id."),
    ],
    kernel: Annotated[str, typer.Option("--kernel", help="Regex searched in kernel names.")],
    speedup: Annotated[
        float, typer.Option("--speedup", help="How many times faster the matched kernels run.")
    ],
    format: Annotated[
        ListFormat, typer.Option("--format", help="Output format.")
    ] = ListFormat.table,
    store: StoreOpt = None,
    max_decompressed_mb: MaxMBOpt = None,
) -> None:
    """Predict the run time if kernels matching --kernel ran --speedup times faster: a replay of the
    trace's own dependencies (launch calls, stream order, synchronisations) next to the plain Amdahl
    estimate."""
    from analyzers.timeline import DEFINITIONS
    from analyzers.whatif import what_if

    apply_limits(max_decompressed_mb)
    if not (math.isfinite(speedup) and speedup > 0):
        raise typer.BadParameter(f"--speedup must be a finite number > 0, got {speedup:g}")
    run, _ = load(trace, store)
    if run.kind not in TIMELINE_KINDS:
        raise typer.BadParameter(
            f"{trace} is a {run.kind} run; whatif needs a PyTorch profiler trace or an Nsight "
            "Systems export"
        )
    try:
        w = what_if(run.table("gpu_ops"), run.table("api_calls"), kernel, speedup)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    out = w.as_dict()
    out["saved_ns"] = w.run_ns - w.predicted_ns
    out["amdahl_saved_ns"] = w.run_ns - w.amdahl_ns
    out["definitions"] = {"whatif": DEFINITIONS["whatif"]}
    if format == ListFormat.json:
        echo_json(out)
        return
    ms = lambda ns: f"{ns / 1e6:,.3f} ms"  # noqa: E731
    typer.echo(
        f"kernels matching /{kernel}/: {w.matched_kernels} ({ms(w.matched_kernel_ns)} of kernel "
        f"time, f = {w.fraction:.1%} of the run)"
    )
    typer.echo(f"measured run time                 {ms(w.run_ns)}")
    typer.echo(
        f"what-if (trace dependencies), {speedup:g}x  {ms(w.predicted_ns)}   "
        f"speedup {w.speedup_whatif:.3f}x  saves {ms(out['saved_ns'])}"
    )
    typer.echo(
        f"Amdahl, {speedup:g}x                      {ms(w.amdahl_ns)}   "
        f"speedup {w.speedup_amdahl:.3f}x  saves {ms(out['amdahl_saved_ns'])}"
    )
    if len(w.ranks) > 1:
        for r in w.ranks:
            typer.echo(
                f"  rank {r['rank']}: {ms(r['run_ns'])} -> {ms(r['predicted_ns'])} (Amdahl "
                f"{ms(r['amdahl_ns'])})"
            )
