"""Streamlit components of the dashboard (Streamlit's components v2: HTML/JS/CSS from dashboard/static/, no build
step): the zoomable timeline (timeline.js, a canvas) and the interactive table (table.js)."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import streamlit as st

STATIC = Path(__file__).parent / "static"


def static_text(name: str) -> str:
    return (STATIC / name).read_text(encoding="utf-8")


@lru_cache(maxsize=None)
def _timeline_component():
    return st.components.v2.component("kernelscope.timeline", js=static_text("timeline.js"),
                                      css=static_text("timeline.css"), isolate_styles=False)


def _noop() -> None:
    return None


def timeline(payload: bytes, key: str, on_window=None, on_select=None):
    """Draw the timeline; returns its state: `window` ({t0, t1, width} the user zoomed/panned to, relative ns) and
    `select` ({src, row} of the event clicked), each None until it happened. The callbacks run (before the rerun
    of the fragment that holds the timeline) when they change; the state is in st.session_state[key] too."""
    return _timeline_component()(data=payload, key=key, on_window_change=on_window or _noop,
                                 on_select_change=on_select or _noop)


@lru_cache(maxsize=None)
def _table_component():
    return st.components.v2.component("kernelscope.table", js=static_text("table.js"), css=static_text("table.css"),
                                      isolate_styles=False)


def table(data: dict, key: str, on_sort=None, on_select=None):
    """An HTML table of pre-formatted cells (dashboard.reports.blocks.Table.cells): header clicks send `sort`
    ({key, desc}), row clicks `select` (the row's id); both as trigger values in st.session_state[key]."""
    return _table_component()(data=data, key=key, on_sort_change=on_sort or _noop,
                              on_select_change=on_select or _noop)
