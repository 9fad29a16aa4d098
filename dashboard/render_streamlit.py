"""The Streamlit renderer of a Report (dashboard.reports.blocks): text, headings, tables with units and help,
charts (altair, drawn with the kernelscope theme) and metric cards."""
from __future__ import annotations

import inspect

import polars as pl
import streamlit as st

from dashboard.reports.blocks import Chart, Col, Heading, Metrics, Report, Table, Text, Timeline
from analyzers.units import MISSING
from dashboard.theme import ensure_theme

# ---------------------------------------------------------------------------------------------------

def _table_has_hide_index() -> bool:
    return "hide_index" in inspect.signature(st.table).parameters


def column_config(cols: dict[str, Col]) -> dict:
    cc = {}
    for name, c in cols.items():
        if c.kind == "link":
            cc[name] = st.column_config.LinkColumn(c.header, help=c.help, display_text=c.link_text)
        elif c.kind == "text":
            cc[name] = st.column_config.TextColumn(c.header, help=c.help)
        else:
            cc[name] = st.column_config.NumberColumn(c.header, help=c.help, format=c.fmt)
    return cc


def sized(chart):
    """The chart with its width fitted to the page and its own height kept (Vega-Lite "fit-x"), as the HTML export
    draws it. Streamlit's default ("fit") squeezes title, axes and legend into the plot's height, which collapsed
    charts with a legend or long axis labels to a few pixels."""
    enc = getattr(chart, "encoding", None)
    has = enc is not None and repr(enc) != "Undefined"       # altair's Undefined for a layer's own encoding
    if type(chart).__name__ in ("FacetChart", "HConcatChart", "VConcatChart", "ConcatChart") or (
            has and any(repr(getattr(enc, k, None)) not in ("Undefined", "None") for k in ("row", "column", "facet"))):
        return chart      # a grid of views keeps its own size (Vega-Lite cannot fit it)
    try:
        return chart.properties(autosize={"type": "fit-x", "contains": "padding"})
    except Exception:  # noqa: BLE001 - a chart kind that takes no autosize: draw it as it is
        return chart


def render_streamlit(blocks, container=None) -> None:
    """Draw blocks (a Report or a list of blocks) with Streamlit; charts keep the kernelscope theme."""
    ensure_theme()
    st_ = container or st
    if isinstance(blocks, Report):
        blocks = blocks.blocks
    for b in blocks:
        if isinstance(b, Text):
            if b.kind == "markdown":
                st_.markdown(b.md)
            else:
                getattr(st_, b.kind)(b.md)
        elif isinstance(b, Heading):
            (st_.subheader if b.level <= 2 else st_.markdown)(b.text if b.level <= 2 else f"**{b.text}**")
        elif isinstance(b, Table) and b.static:
            cols = [c for c in b.cols if c in b.frame.columns]
            shown = pl.DataFrame({b.cols[c].header: [b.cols[c].format(v) for v in b.frame[c].to_list()] for c in cols},
                                 schema={b.cols[c].header: pl.String for c in cols})
            st_.table(shown, hide_index=True) if _table_has_hide_index() else st_.table(shown)
            if b.caption:
                st_.caption(b.caption)
        elif isinstance(b, Table):
            frame = b.frame.select([c for c in b.cols if c in b.frame.columns])
            # a missing text value shows as "—", as everywhere else (the grid would print "None")
            frame = frame.with_columns([pl.col(c).fill_null(MISSING) for c in frame.columns
                                        if b.cols[c].kind == "text" and frame.schema[c] == pl.String])
            kw = {"height": b.height} if b.height else {}
            st_.dataframe(frame, hide_index=True, width="stretch", column_config=column_config(b.cols),
                          key=f"table-{b.name}", placeholder=MISSING, **kw)
            if b.caption:
                st_.caption(b.caption)
        elif isinstance(b, Chart):
            st_.altair_chart(sized(b.chart), theme=None, width="stretch", key=f"chart-{b.name}")
            if b.caption:
                st_.caption(b.caption)
        elif isinstance(b, Timeline):
            from dashboard.components import timeline
            timeline(b.payload, key=f"timeline-{b.name}")
            if b.caption:
                st_.caption(b.caption)
        elif isinstance(b, Metrics):
            per_row = 3 if len(b.items) > 5 else max(1, len(b.items))
            for i in range(0, len(b.items), per_row):
                cols = st_.columns(per_row)
                for col, (label, value, help_, *delta) in zip(cols, b.items[i:i + per_row]):
                    col.metric(label, value, delta=delta[0] if delta else None, help=help_,
                               delta_color="inverse" if b.lower_is_better else "normal")
        else:  # pragma: no cover - a builder bug
            raise TypeError(f"unknown block {type(b).__name__}")
