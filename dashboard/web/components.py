"""Streamlit components of the dashboard (Streamlit's components v2: HTML/JS/CSS from
dashboard/web/static/, no build step): the zoomable timeline (timeline.js, a canvas) and the interactive
table (table.js)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import streamlit as st

STATIC = Path(__file__).parent / "static"


def static_text(name: str) -> str:
    return (STATIC / name).read_text(encoding="utf-8")


@lru_cache(maxsize=None)
def _timeline_component():
    return st.components.v2.component(
        "kernelscope.timeline",
        js=static_text("timeline.js"),
        css=static_text("timeline.css"),
        isolate_styles=False,
    )


def _noop() -> None:
    return None


def timeline(payload: bytes, key: str, on_window=None, on_select=None, on_color=None):
    """Draw the timeline; returns its state: `window` ({t0, t1, width} the user zoomed/panned to,
    relative ns), `select` ({src, row} of the event clicked) and `color` ("bound" or "name", the
    kernels' colouring the user chose), each None until it happened. The callbacks run (before the
    rerun of the fragment that holds the timeline) when they change; the state is in
    st.session_state[key] too."""
    return _timeline_component()(
        data=payload,
        key=key,
        on_window_change=on_window or _noop,
        on_select_change=on_select or _noop,
        on_color_change=on_color or _noop,
    )


@lru_cache(maxsize=None)
def _table_component():
    return st.components.v2.component(
        "kernelscope.table",
        js=static_text("table.js"),
        css=static_text("table.css"),
        isolate_styles=False,
    )


#: rows of a table sent with the page; the rest when the user asks for them ("Show all rows"). A
#: table box shows about 15 rows before it scrolls; 200 rows were a third of the GPUs page's browser
#: time
TABLE_PAGE = 50


def table_rows_wanted(key: str) -> int | None:
    """How many rows of the table `key` to send: TABLE_PAGE until its "Show all rows" was clicked, then all."""
    return None if st.session_state.get(f"{key}:all") else TABLE_PAGE


def table(data: dict, key: str, on_sort=None, on_select=None):
    """An HTML table of pre-formatted cells (dashboard.web.reports.report_blocks.Table.cells): header clicks
    send `sort` ({key, desc}), row clicks `select` (the row's id); both as trigger values in
    st.session_state[key]. "Show all rows" on a table sent in part (data["total"] > its rows) sets
    st.session_state[key + ":all"] and reruns."""

    def more():
        st.session_state[f"{key}:all"] = True

    return _table_component()(
        data=data,
        key=key,
        on_sort_change=on_sort or _noop,
        on_select_change=on_select or _noop,
        on_more_change=more,
    )


SHARE_JS = """
export default function(component) {
  const {data, parentElement} = component;
  let box = parentElement.querySelector(".ks-share");
  if (!box) {
    box = document.createElement("div");
    box.className = "ks-share";
    box.innerHTML = '<input readonly aria-label="Link to this view"><button type="button">Copy</button>';
    parentElement.appendChild(box);
    const input = box.querySelector("input"), button = box.querySelector("button");
    input.addEventListener("focus", () => input.select());
    button.addEventListener("click", async () => {
      input.select();
      try { await navigator.clipboard.writeText(input.value); } catch (e) { document.execCommand("copy"); }
      button.textContent = "Copied"; setTimeout(() => { button.textContent = "Copy"; }, 1500);
    });
  }
  box.querySelector("input").value = (data && data.link) || "";
}
"""
SHARE_CSS = """
.ks-share { display: flex; gap: 4px; }
.ks-share input { flex: 1; min-width: 0; font: 12px monospace; padding: 6px; border: 1px solid #d1d5db;
  border-radius: 4px; background: #f9fafb; color: #111827; }
.ks-share button { border: 1px solid #d1d5db; border-radius: 4px; background: #fff; color: #111827; cursor: pointer;
  font-size: 12px; padding: 0 8px; }
"""


@lru_cache(maxsize=None)
def _share_component():
    return st.components.v2.component(
        "kernelscope.share", js=SHARE_JS, css=SHARE_CSS, isolate_styles=False
    )


def share_box(link: str, key: str = "share-link"):
    """A read-only box with the view's link and a Copy button (lighter than st.code's syntax highlighter)."""
    return _share_component()(data={"link": link}, key=key)
