"""`kernelscope export URL_OR_RUN --html FILE`: one self-contained offline HTML file of a dashboard
page; `kernelscope export TRACE_RUN --perfetto FILE`: a trace as a Chrome trace JSON that Perfetto
opens.
Start-up: imports that only some commands, pages or GPUs need sit inside the functions that use
them, so each command loads what it uses."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from dashboard.cli._app import GpuOpt, StoreOpt, app, open_source


@app.command()
def export(
    url_or_run: Annotated[
        str,
        typer.Argument(
            help="A dashboard link "
            "(http://server:8501/kernels?run=…&kernel=5, or just kernels?run=…) or a run id: its "
            "page is exported."
        ),
    ],
    html: Annotated[Optional[Path], typer.Option("--html", help="The HTML file to write.")] = None,
    perfetto: Annotated[
        Optional[Path],
        typer.Option(
            "--perfetto",
            help="For a trace run: the Chrome trace JSON file to write (opens in "
            "https://ui.perfetto.dev).",
        ),
    ] = None,
    store: StoreOpt = None,
    gpu: GpuOpt = None,
) -> None:
    """Write the page a dashboard link shows (the same tables and charts) into one HTML file that
    opens offline: charts inline (no CDN), every name escaped. Exportable pages: home, runs,
    kernels, compare, gpus, timeline, cases, claims. A link naming an unknown run, case, GPU, claim
    or device is refused. With --perfetto, a trace run (PyTorch profiler or Nsight Systems) is
    written as a Chrome trace: streams, CPU threads, NVTX ranges and launch -> kernel arrows."""
    if (html is None) == (perfetto is None):
        raise typer.BadParameter("give one of --html FILE or --perfetto FILE")
    if perfetto is not None:
        _perfetto(url_or_run, perfetto, store)
        return
    from dashboard.web.render_html import render_html, vega_bundle
    from dashboard.web.reports import build_target

    rep, shown, base = build_target(open_source(store, gpu), url_or_run)
    text = render_html([rep], source=shown, base_url=base)
    try:
        html.write_text(text, encoding="utf-8")
    except OSError as e:
        typer.echo(f"kernelscope: {html}: cannot write ({e.strerror})", err=True)
        raise typer.Exit(1) from None
    if vega_bundle() is None:
        typer.echo(
            "kernelscope: charts left out: install the export extra (pip install "
            "'kernelscope[export]')",
            err=True,
        )
    typer.echo(f"{html}\t{len(text.encode()) / 1e6:.1f} MB")


def _perfetto(run_id: str, out: Path, store) -> None:
    from collectors.schema import TRACE_KINDS
    from dashboard.web.render_perfetto import chrome_trace

    src = open_source(store)
    run = src.get_kind(run_id, TRACE_KINDS, "a PyTorch profiler trace or Nsight Systems export")
    data = chrome_trace(
        run.table("gpu_ops"),
        run.table("api_calls"),
        run.table("cpu_ops"),
        run.table("nvtx"),
        name=run.source_name,
        gpu_name=run.meta.get("gpu_name"),
    )
    try:
        out.write_bytes(data)
    except OSError as e:
        typer.echo(f"kernelscope: {out}: cannot write ({e.strerror})", err=True)
        raise typer.Exit(1) from None
    typer.echo(
        f"{out}\t{len(data) / 1e6:.1f} MB\topen it at https://ui.perfetto.dev (Open trace file)"
    )
