"""`kernelscope hotspots RUN --launch N`: a launch's source hot spots (analyzers.source_hotspots),
as the Kernels page shows them."""

from __future__ import annotations

from typing import Annotated

import typer

from dashboard.cli._app import ListFormat, StoreOpt, app, echo_json, open_source
from dashboard.cli.render import print_table


@app.command()
def hotspots(
    run_id: Annotated[
        str, typer.Argument(help="An Nsight Compute run id (a .ncu-rep with the Source Counters).")
    ],
    launch: Annotated[int, typer.Option("--launch", help="The profiled launch's id.")] = 0,
    by: Annotated[
        str,
        typer.Option(
            "--by", help="sass (instructions) or line (CUDA source lines, with -lineinfo)."
        ),
    ] = "sass",
    top: Annotated[int, typer.Option("--top", help="Rows shown in the table output.")] = 25,
    format: Annotated[
        ListFormat, typer.Option("--format", help="Output format.")
    ] = ListFormat.table,
    store: StoreOpt = None,
) -> None:
    """The SASS instructions (or CUDA source lines) of one launch ranked by warp-state samples, then
    instructions executed, with the stall reasons of their samples; from the Source Counters of a
    .ncu-rep (ncu --set full)."""
    from collectors.errors import ArtifactError

    src = open_source(store)
    run = src.get_kind(run_id, ("ncu",), "an Nsight Compute run")
    h = src.source_hotspots(run, launch)
    if h is None:
        raise ArtifactError(
            run.source_name,
            f"no source-level data for launch {launch}: it is in .ncu-rep reports recorded with "
            "the Source Counters section (ncu --set full)",
        )
    if by not in ("sass", "line"):
        raise typer.BadParameter("--by is sass or line")
    if by == "line" and not h.has_lines:
        raise ArtifactError(
            run.source_name, "no CUDA source lines in this report: compile with nvcc -lineinfo"
        )
    table = h.sass if by == "sass" else h.lines
    if format is ListFormat.json:
        echo_json(
            {
                "run": run.run_id,
                "launch": launch,
                "total_samples": h.total_samples,
                "total_inst_executed": h.total_inst_executed,
                "missing": h.missing,
                "reasons": h.reasons.to_dicts(),
                "rows": table.drop([c for c in table.columns if c.startswith("stall_")]).to_dicts(),
                "units": {
                    "samples": "warp-state samples",
                    "inst_executed": "warp instructions",
                    "sample_share": "fraction of all samples",
                    "offset": "bytes from the function's start",
                },
            }
        )
        return
    typer.echo(
        f"{run.source_name} launch {launch}: {h.total_samples:,} warp-state samples, "
        f"{h.total_inst_executed:,.0f} warp instructions"
    )
    for m in h.missing:
        typer.echo(f"not in this report: {m}")
    cols = (
        [("offset", "offset", None), ("sass", "SASS", None)]
        if by == "sass"
        else [("file", "file", None), ("line", "line", None), ("code", "source", None)]
    )
    print_table(
        table.head(top).to_dicts(),
        cols
        + [
            ("samples", "samples", 1),
            ("sample_share", "share [%]", 100),
            ("top_reasons", "stalled on", None),
            ("inst_executed", "warp inst", 1),
        ],
    )
