"""Kernelscope dashboard entry point: `kernelscope dashboard` (or `streamlit run dashboard/app.py`).

Pages live in dashboard/views/ and rebuild themselves from the URL query string alone, so a link
pasted into chat opens the same view in a new browser.
"""
from __future__ import annotations

import hmac
import os
from pathlib import Path

import streamlit as st

from dashboard import data

st.set_page_config(page_title="Kernelscope", page_icon="🔬", layout="wide")

# lab-server mode: a token given on the command line (or in KERNELSCOPE_TOKEN) must be supplied once
token = os.environ.get("KERNELSCOPE_TOKEN")
if token and not st.session_state.get("authenticated"):
    given = st.query_params.get("token") or ""
    if not hmac.compare_digest(given, token):
        st.title("Kernelscope")
        entered = st.text_input("Access token", type="password")
        if entered and hmac.compare_digest(entered, token):
            st.session_state["authenticated"] = True
            st.rerun()
        if entered:
            st.error("Wrong token.")
        st.stop()
    st.session_state["authenticated"] = True

if "samples_checked" not in st.session_state:
    n = data.ensure_samples(data.store())
    st.session_state["samples_checked"] = True
    if n:
        st.toast(f"Loaded {n} bundled sample artifacts into the empty store.")

VIEWS = Path(__file__).parent / "views"
pages = [
    st.Page("views/runs.py", title="Runs", url_path="runs", default=True),
    st.Page("views/kernels.py", title="Kernels", url_path="kernels"),
]
for fname, title, slug in [("timeline.py", "Timeline", "timeline"), ("cases.py", "Textbook cases", "cases"),
                           ("claims.py", "Claims", "claims"), ("gpus.py", "GPUs", "gpus")]:
    if (VIEWS / fname).is_file():
        pages.append(st.Page(f"views/{fname}", title=title, url_path=slug))
st.navigation(pages).run()
