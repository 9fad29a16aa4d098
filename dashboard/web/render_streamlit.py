"""The Streamlit renderer of a Report (dashboard.web.reports.report_blocks): text, headings, tables with units
and help, charts (altair, drawn with the kernelscope theme) and metric cards."""

from __future__ import annotations

import streamlit as st

from dashboard.web.render_html import CARDS_CSS, cards_html
from dashboard.web.reports.report_blocks import (
    Chart,
    Heading,
    Metrics,
    Report,
    Table,
    Text,
    Timeline,
)
from dashboard.web.theme import ensure_theme

# ---------------------------------------------------------------------------------------------------


def sized(chart):
    """The chart with its width fitted to the page and its own height kept (Vega-Lite "fit-x"), as
    the HTML export draws it. Streamlit's default ("fit") squeezes title, axes and legend into the
    plot's height, which collapsed charts with a legend or long axis labels to a few pixels."""
    enc = getattr(chart, "encoding", None)
    has = (
        enc is not None and repr(enc) != "Undefined"
    )  # altair's Undefined for a layer's own encoding
    if type(chart).__name__ in ("FacetChart", "HConcatChart", "VConcatChart", "ConcatChart") or (
        has
        and any(
            repr(getattr(enc, k, None)) not in ("Undefined", "None")
            for k in ("row", "column", "facet")
        )
    ):
        return chart  # a grid of views keeps its own size (Vega-Lite cannot fit it)
    try:
        return chart.properties(autosize={"type": "fit-x", "contains": "padding"})
    except Exception:  # noqa: BLE001 - a chart kind that takes no autosize: draw it as it is
        return chart


def _mergeable(b) -> bool:
    """Text that can share one markdown element with its neighbours: headings, paragraphs, one-line captions."""
    if isinstance(b, Heading):
        return True
    return isinstance(b, Text) and (
        b.kind == "markdown" or (b.kind == "caption" and "\n" not in b.md)
    )


def _markdown_of(b) -> str:
    if isinstance(b, Heading):
        return f"### {b.text}" if b.level <= 2 else f"**{b.text}**"
    return f":small[:gray[{b.md}]]" if b.kind == "caption" else b.md


def _runs(blocks):
    """The blocks with each run of two or more mergeable texts (a heading, its paragraphs and
    captions) replaced by one markdown string: every Streamlit element costs the browser about 8 ms
    to mount on a page load, so a page of 30 short texts drew 0.2 s slower than the same texts in a
    few elements (st.caption is markdown in small grey type: `:small[:gray[…]]` draws the same)."""
    run: list = []
    for b in list(blocks) + [None]:
        if b is not None and _mergeable(b):
            run.append(b)
            continue
        if len(run) > 1:
            yield "\n\n".join(_markdown_of(x) for x in run)
        else:
            yield from run
        run = []
        if b is not None:
            yield b


def _dark() -> bool:
    """Whether the browser shows Streamlit's dark theme (it follows the OS's preference; st.context.theme)."""
    try:
        return getattr(st.context.theme, "type", None) == "dark"
    except (AttributeError, RuntimeError):
        return False


def render_streamlit(blocks, container=None) -> None:
    """Draw blocks (a Report or a list of blocks) with Streamlit; charts keep the kernelscope theme
    (its dark variant on a dark page)."""
    ensure_theme(_dark())
    st_ = container or st
    if isinstance(blocks, Report):
        blocks = blocks.blocks
    seen: dict[str, int] = {}
    for b in _runs(blocks):
        if isinstance(b, str):
            st_.markdown(b)
        elif isinstance(b, Text):
            if b.kind == "markdown":
                st_.markdown(b.md)
            else:
                getattr(st_, b.kind)(b.md)
        elif isinstance(b, Heading):
            (st_.subheader if b.level <= 2 else st_.markdown)(
                b.text if b.level <= 2 else f"**{b.text}**"
            )
        elif isinstance(b, Table):
            # every table as plain HTML (dashboard/web/static/table.js): the same text as the export,
            # and far lighter in the browser than Streamlit's data grid (whose JavaScript alone
            # costs about a second per page load)
            from dashboard.web.components import table, table_rows_wanted

            n = seen.get(b.name, 0)
            seen[b.name] = n + 1
            key = f"table-{b.name}" + (f"-{n}" if n else "")
            with st_.container():
                table(b.cells(table_rows_wanted(key)), key=key)
            if b.caption:
                st_.caption(b.caption)
        elif isinstance(b, Chart):
            st_.altair_chart(sized(b.chart), theme=None, width="stretch", key=f"chart-{b.name}")
            if b.caption:
                st_.caption(b.caption)
        elif isinstance(b, Timeline):
            from dashboard.web.components import timeline

            timeline(b.payload, key=f"timeline-{b.name}")
            if b.caption:
                st_.caption(b.caption)
        elif isinstance(b, Metrics):
            # one HTML element for the whole block (dashboard.web.render_html.cards_html, as in the
            # export): twelve st.metric cards in their columns are about sixty Streamlit elements,
            # and cost the Kernels page about 0.1 s of a 1.0-1.1 s load
            # (docs/findings-kernels-page-load.md)
            st_.html(f"<style>{CARDS_CSS}</style>{cards_html(b)}")
        else:  # pragma: no cover - a builder bug
            raise TypeError(f"unknown block {type(b).__name__}")
