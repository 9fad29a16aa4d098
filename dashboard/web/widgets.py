"""Small Streamlit helpers shared by the views: query parameters <-> widgets, and the share panel.
Start-up: imports that only some commands, pages or GPUs need sit inside the functions that use
them, so each command loads what it uses."""

from __future__ import annotations

import re
from urllib.parse import urlencode

import streamlit as st

from dashboard.web.reports.run_links import REPEATABLE

TOKEN_PARAM = "token"

#: CSS for every page (dashboard/web/app.py): the main column starts near the top; below 1,100 px the
#: sidebar narrows to 220 px and the page's side padding shrinks, so a 900-px window keeps about 640
#: px for tables and cards
PAGE_CSS = """
[data-testid="stMainBlockContainer"] { padding-top: 2.5rem; }
@media (max-width: 1100px) {
  section[data-testid="stSidebar"] { width: 220px !important; min-width: 220px !important; }
  [data-testid="stMainBlockContainer"] { padding-left: 1.25rem; padding-right: 1.25rem; }
}
"""


def params() -> dict:
    """The current query parameters (last value of each; every value of a repeatable one, as a
    list), without the access token."""
    p = {
        k: st.query_params.get_all(k) if k in REPEATABLE else st.query_params.get(k)
        for k in st.query_params.keys()
    }
    p.pop(TOKEN_PARAM, None)
    return p


def _joined(k: str, v):
    """A list value as the URL holds it: repeated keys for a repeatable parameter, else comma-separated."""
    if isinstance(v, (list, tuple)):
        return [str(x) for x in v] if k in REPEATABLE else ",".join(map(str, v))
    return str(v)


def sync(values: dict) -> None:
    """Write a page's state to the URL: set what differs, drop what is empty; other keys are left alone."""
    for k, v in values.items():
        if v is None or v == "" or v == []:
            if k in st.query_params:
                del st.query_params[k]
        else:
            v = _joined(k, v)
            if (st.query_params.get_all(k) if isinstance(v, list) else st.query_params.get(k)) != v:
                st.query_params[k] = v


def share_link(page: str, values: dict) -> str:
    """The full link of this view (page URL + its query parameters, never the token)."""
    q = {k: _joined(k, v) for k, v in values.items() if v not in (None, "", [])}
    base = None
    try:
        base = st.context.url
    except (AttributeError, RuntimeError):
        base = None
    if not base:
        base = f"/{page}" if page != "home" else "/"
    return base + (f"?{urlencode(q, doseq=True)}" if q else "")


def share_panel(page: str, values: dict, reports) -> None:
    """Sidebar: the view's link with a copy button, and an offline HTML download of the same
    tables/charts. `reports`: the page's reports, or a function returning them (built only when the
    download is clicked)."""
    with st.sidebar:
        st.markdown("**Share this view**")
        st.caption(
            "Copy the link (the button at the right of the box); it opens this view for "
            "anyone on this server."
        )
        link = share_link(page, values)
        from dashboard.web.components import share_box

        share_box(link)
        if reports:

            def make() -> str:  # runs on click, in another thread: no Streamlit calls in here
                from dashboard.web.render_html import render_html

                return render_html(reports() if callable(reports) else reports, source=link)

            slug = "-".join(str(values.get(k)) for k in ("run", "a", "b") if values.get(k))
            name = (
                re.sub(
                    r"[^A-Za-z0-9._-]+", "_", f"kernelscope-{page}" + (f"-{slug}" if slug else "")
                )
                + ".html"
            )
            st.download_button(
                "Download HTML (offline copy)",
                data=make,
                file_name=name,
                mime="text/html",
                on_click="ignore",
                icon=":material/download:",
                key="download-html",
                help="One self-contained file: the same tables and charts, no network needed.",
            )
