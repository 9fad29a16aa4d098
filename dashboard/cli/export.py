"""`kernelscope export URL_OR_RUN --html FILE`: one self-contained offline HTML file of a dashboard page."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from dashboard.cli._app import GpuOpt, StoreOpt, app, open_source


@app.command()
def export(
    url_or_run: Annotated[str, typer.Argument(help="A dashboard link (http://server:8501/kernels?run=…&kernel=5, "
                                                   "or just kernels?run=…) or a run id: its page is exported.")],
    html: Annotated[Path, typer.Option("--html", help="The HTML file to write.")],
    store: StoreOpt = None,
    gpu: GpuOpt = None,
) -> None:
    """Write the page a dashboard link shows (the same tables and charts) into one HTML file that opens
    offline: charts inline (no CDN), every name escaped. Exportable pages: home, runs, kernels, compare, gpus,
    timeline, cases, claims. A link naming an unknown run, case, GPU, claim or device is refused."""
    from dashboard.render_html import render_html, vega_bundle
    from dashboard.reports import build_target
    rep, shown, base = build_target(open_source(store, gpu), url_or_run)
    text = render_html([rep], source=shown, base_url=base)
    try:
        html.write_text(text, encoding="utf-8")
    except OSError as e:
        typer.echo(f"kernelscope: {html}: cannot write ({e.strerror})", err=True)
        raise typer.Exit(1) from None
    if vega_bundle() is None:
        typer.echo("kernelscope: charts left out: install the export extra (pip install 'kernelscope[export]')", err=True)
    typer.echo(f"{html}\t{len(text.encode()) / 1e6:.1f} MB")
