"""`kernelscope join NCU TRACE`: the launches of an Nsight Compute run matched to the kernels of a
timeline of the same program (analyzers.join): per kernel its launches per step, share of the step's
GPU time, launch delay, ncu vs traced duration, and the time its biggest finding costs per step."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from dashboard.cli._app import ListFormat, StoreOpt, app, echo_json, load, open_source
from dashboard.cli.render import print_table

TABLE = [
    ("ncu_id", "ncu id", None),
    ("name", "kernel", None),
    ("count_per_step", "per step", None),
    ("share_pct", "step GPU time [%]", 1),
    ("launch_delay_us", "launch delay [µs]", 1),
    ("ncu_us", "ncu [µs]", 1),
    ("trace_us", "trace median [µs]", 1),
    ("agree", "agree", None),
    ("bound", "bound", None),
    ("lost_per_step_us", "lost per step [µs]", 1),
    ("top_finding", "finding", None),
]


@app.command()
def join(
    ncu: Annotated[
        str, typer.Argument(help="The Nsight Compute run: a report / CSV file or a run id.")
    ],
    trace: Annotated[
        str,
        typer.Argument(
            help="The timeline of the same program: a PyTorch "
            "profiler trace, an Nsight Systems SQLite export, or a run id."
        ),
    ],
    format: Annotated[ListFormat, typer.Option("--format", "-f")] = ListFormat.table,
    step: Annotated[
        Optional[str],
        typer.Option(
            "--step",
            metavar="REGEX",
            help="Regex naming the "
            "trace's step ranges, one group = the step number (default: ProfilerStep#N, step / "
            "iteration / token N ranges, graph replays, a repeated kernel sequence).",
        ),
    ] = None,
    store: StoreOpt = None,
) -> None:
    """Match each profiled launch to its kernel in the timeline (by name, launch configuration and
    order within the step, with a confidence), list what did not match and why, and rank the kernels
    by the time their biggest finding costs per step (the finding's loss per launch x the launches
    per step)."""
    src = open_source(store)
    a, _ = load(ncu, store)
    t, _ = load(trace, store)
    if step:
        from analyzers.distributed import check_step_pattern
        from analyzers.errors import ParameterError

        try:
            check_step_pattern(step)
        except ParameterError as e:
            raise typer.BadParameter(str(e)) from None
    res = src.join(a, t, step)
    d = res.as_dict()
    if format is ListFormat.json:
        echo_json(d)
        return
    typer.echo(
        f"ncu window: {d['window_label']} of {d['steps']} step(s); step GPU busy (median) "
        f"{d['step_gpu_busy_median_ns'] / 1e3:,.1f} µs"
    )
    rows = [
        {
            **m,
            "share_pct": m["share_of_step_gpu_time"] * 100,
            "launch_delay_us": None
            if m["launch_delay_median_ns"] is None
            else m["launch_delay_median_ns"] / 1e3,
            "ncu_us": None if m["ncu_duration_ns"] is None else m["ncu_duration_ns"] / 1e3,
            "trace_us": m["trace_duration_median_ns"] / 1e3,
            "agree": {True: "yes", False: "no", None: "—"}[m["durations_agree"]],
            "lost_per_step_us": None
            if m["lost_per_step_ns"] is None
            else m["lost_per_step_ns"] / 1e3,
        }
        for m in d["matched"]
    ]
    print_table(rows, TABLE)
    for u in d["unmatched_ncu"]:
        typer.echo(f"not matched: ncu launch {u['ncu_id']} {u['name'][:80]}: {u['reason']}")
    if d["unmatched_trace"]:
        by_reason: dict[str, int] = {}
        for u in d["unmatched_trace"]:
            by_reason[u["reason"]] = by_reason.get(u["reason"], 0) + 1
        for reason, n in by_reason.items():
            typer.echo(f"not in the ncu run: {n} trace kernel(s) {reason}")
    for note in d["notes"]:
        typer.echo(f"note: {note}")
    for m in d["matched"]:
        if m["durations_agree"] is False:
            typer.echo(f"duration of ncu launch {m['ncu_id']}: {m['duration_note']}")
