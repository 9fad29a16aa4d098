"""Kernelscope dashboard entry point: `kernelscope dashboard` (or `streamlit run dashboard/web/app.py`).

Pages live in dashboard/web/views/ and rebuild themselves from the URL query string alone, so a link
pasted into chat opens the same view in a new browser.

Lab-server mode: when KERNELSCOPE_TOKEN is set (`kernelscope dashboard --token` or the environment;
required with a non-loopback --host; at least 16 characters) a browser gives it once, in the form or
as ?token=… in the first URL: the page that was asked for (its path and every query parameter) opens
after the login, the token is removed from the address bar (a copied link never carries it), and the
browser stays logged in for its session, across reloads and new tabs. Under `kernelscope dashboard`
the gate in front of Streamlit (dashboard/web/gate.py, dashboard/web/serve.py) does all of this before any
session or upload exists, with its own cookie; the form and the signed cookie below (dashboard.web.auth)
serve `streamlit run dashboard/web/app.py`.
"""

from __future__ import annotations

import os

import streamlit as st

from dashboard.web import auth, store_access, widgets
from dashboard.web import pages as registry

st.set_page_config(page_title="Kernelscope", page_icon="🔬", layout="wide")

# the page registry (dashboard.web.pages): one row per page; a page whose script is missing is left out
pages = {
    section: [
        st.Page(p.script, title=p.title, url_path=p.slug, icon=p.icon, default=p.default)
        for p in ps
    ]
    for section, ps in registry.sections().items()
}

token = os.environ.get("KERNELSCOPE_TOKEN")
# dashboard.web.serve's gate checked it before the session existed
if os.environ.get("KERNELSCOPE_GATE") == "asgi":
    token = None
if token and not st.session_state.get("authenticated"):
    # the requested page is chosen from the URL before the gate, so the login keeps it (and its
    # query parameters)
    current = st.navigation(pages, position="hidden")
    if len(token) < auth.MIN_TOKEN:
        st.error(
            f"This server's access token is shorter than {auth.MIN_TOKEN} characters; restart it "
            "with a longer one (e.g. `openssl rand -hex 16`)."
        )
        st.stop()
    if auth.cookie_ok(st.context.cookies.get(auth.COOKIE), token) or auth.token_ok(
        st.query_params.get("token"), token
    ):
        st.session_state["authenticated"] = True
        st.session_state["set_cookie"] = True
        if "token" in st.query_params:
            del st.query_params["token"]
        st.rerun()
    else:
        st.title("Kernelscope")
        st.caption("This server needs an access token (ask whoever started it).")
        entered = st.text_input("Access token", type="password")
        if auth.token_ok(entered, token):
            st.session_state["authenticated"] = True
            st.session_state["set_cookie"] = True
            if "token" in st.query_params:
                del st.query_params["token"]
            st.rerun()
        if entered or st.query_params.get("token"):
            st.error("Wrong token.")
        st.stop()
if "token" in st.query_params:
    del st.query_params["token"]
if token and st.session_state.pop("set_cookie", False):
    st.html(auth.cookie_script(auth.make_cookie(token)), unsafe_allow_javascript=True)

if "samples_checked" not in st.session_state:
    n = store_access.ensure_samples(store_access.store()) if store_access.samples_wanted() else 0
    st.session_state["samples_checked"] = True
    if n:
        st.toast(f"Loaded {n} bundled sample artifacts into the empty store.")

# the page's layout at any width: less empty space above the title, a narrower sidebar on a
# laptop-sized window (at 900 px Streamlit's 300-px sidebar left the page 520 px), and room for a
# table's full width
st.html(f"<style>{widgets.PAGE_CSS}</style>")
st.navigation(pages).run()
