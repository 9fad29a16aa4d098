"""Compare run A with run B (before/after a change, or one GPU against another).

URL: ?a=RUN&b=RUN&noise=5 (noise floor in %; a change inside it, or inside the launches' spread, is unchanged)
"""
from __future__ import annotations

import streamlit as st

from dashboard import data, ui
from dashboard.render_streamlit import render_streamlit
from dashboard.reports import compare as page
from dashboard.reports.common import run_label

src = data.source()
view = page.resolve(src, ui.params())
st.title("Compare")
for p in view.problems:
    st.warning(p)
runs = src.runs(page.COMPARABLE)
if len(runs) < 2:
    st.info("Compare needs two runs in the store: upload a second report on the [Upload](upload) page.")
    st.stop()
ids = [r.run_id for r in runs]
labels = {r.run_id: run_label(r) for r in runs}
c1, c2, c3 = st.columns([4, 4, 1])
a = c1.selectbox("Run A (before)", ids, index=ids.index(view.a.run_id) if view.a else min(1, len(ids) - 1),
                 format_func=labels.get)
b = c2.selectbox("Run B (after)", ids, index=ids.index(view.b.run_id) if view.b else 0, format_func=labels.get)
noise = c3.number_input("noise floor [%]", min_value=0.0, max_value=100.0, value=float(view.noise_pct), step=1.0,
                        help="A change smaller than this (or than twice the launches' combined spread) is 'unchanged'.")
state = {"a": a, "b": b, "noise": None if noise == 5.0 else f"{noise:g}"}
ui.sync(state)
rep = page.build(src, state)
if rep.subtitle:
    st.caption(rep.subtitle)
render_streamlit(rep)
ui.share_panel("compare", state, [rep])
