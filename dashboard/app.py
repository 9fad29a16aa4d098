"""Kernelscope dashboard entry point: `kernelscope dashboard` (or `streamlit run dashboard/app.py`).

Pages live in dashboard/views/ and rebuild themselves from the URL query string alone, so a link
pasted into chat opens the same view in a new browser.

Lab-server mode: when KERNELSCOPE_TOKEN is set (`kernelscope dashboard --token` or the environment; required
with a non-loopback --host) every browser must give it once, in the form or as ?token=… in the first URL. Under
`kernelscope dashboard` the gate in front of Streamlit checks it before any session or upload exists
(dashboard/gate.py, dashboard/serve.py); the form below remains for `streamlit run dashboard/app.py`. The token is
then removed from the address bar, so a copied link never carries it.
"""
from __future__ import annotations

import hmac
import os
from pathlib import Path

import streamlit as st

from dashboard import data

st.set_page_config(page_title="Kernelscope", page_icon="🔬", layout="wide")


def token_ok(given: str | None, token: str) -> bool:
    """Constant-time comparison of UTF-8 bytes (str compare_digest refuses non-ASCII input)."""
    return bool(given) and hmac.compare_digest(given.encode(), token.encode())


token = os.environ.get("KERNELSCOPE_TOKEN")
if os.environ.get("KERNELSCOPE_GATE") == "asgi":      # dashboard.serve's gate checked it before the session existed
    token = None
if token and not st.session_state.get("authenticated"):
    if token_ok(st.query_params.get("token"), token):
        st.session_state["authenticated"] = True
    else:
        st.title("Kernelscope")
        st.caption("This server needs an access token (ask whoever started it).")
        entered = st.text_input("Access token", type="password")
        if token_ok(entered, token):
            st.session_state["authenticated"] = True
            if "token" in st.query_params:
                del st.query_params["token"]
            st.rerun()
        if entered or st.query_params.get("token"):
            st.error("Wrong token.")
        st.stop()
if "token" in st.query_params:
    del st.query_params["token"]

if "samples_checked" not in st.session_state:
    n = data.ensure_samples(data.store())
    st.session_state["samples_checked"] = True
    if n:
        st.toast(f"Loaded {n} bundled sample artifacts into the empty store.")

VIEWS = Path(__file__).parent / "views"


def page(fname: str, title: str, slug: str, icon: str, **kw):
    return st.Page(f"views/{fname}", title=title, url_path=slug, icon=icon, **kw)


def optional(fname: str, title: str, slug: str, icon: str):
    """Pages written by other parts of the project appear once their file exists."""
    return page(fname, title, slug, icon) if (VIEWS / fname).is_file() else None


sections = {
    "Kernelscope": [page("home.py", "Home", "home", ":material/home:", default=True),
                    page("upload.py", "Upload", "upload", ":material/upload:"),
                    page("runs.py", "Runs", "runs", ":material/list:")],
    "Analyse": [page("kernels.py", "Kernels", "kernels", ":material/memory:"),
                optional("timeline.py", "Timeline", "timeline", ":material/timeline:"),
                optional("ranks.py", "Ranks", "ranks", ":material/grid_on:"),
                optional("history.py", "History", "history", ":material/query_stats:"),
                page("compare.py", "Compare", "compare", ":material/compare_arrows:")],
    "Hardware": [page("gpus.py", "GPUs", "gpus", ":material/developer_board:"),
                 page("live.py", "Live", "live", ":material/monitor_heart:")],
    "Textbook": [optional("cases.py", "Textbook cases", "cases", ":material/menu_book:"),
                 optional("claims.py", "Claims", "claims", ":material/fact_check:")],
}
st.navigation({k: [p for p in v if p is not None] for k, v in sections.items()
               if any(p is not None for p in v)}).run()
