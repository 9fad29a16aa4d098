"""Ranks of a distributed job: ranks x iterations heat map, stragglers and their causes,
collectives.

The page rebuilds from the URL: ?run=<run id>&metric=<column>&threshold=<fraction>&step=<regex>.
"""

from __future__ import annotations

import streamlit as st

from collectors.schema import TRACE_KINDS
from dashboard.web import store_access, widgets
from dashboard.web.render_streamlit import render_streamlit
from dashboard.web.reports import ranks as page
from dashboard.web.reports.run_links import run_label

src = store_access.source()
view = page.resolve(src, widgets.params())
st.title("Ranks")
if view.run is None:
    render_streamlit(view.problems)
    st.info(
        "No PyTorch profiler traces or Nsight Systems exports in the store yet. A folder of rank "
        "traces is one run: `kernelscope ingest traces/`."
    )
    st.stop()
runs = src.runs(TRACE_KINDS)
ids = [r.run_id for r in runs]
labels = {r.run_id: f"{run_label(r)} · {len(r.meta.get('ranks') or [0])} rank(s)" for r in runs}
c1, c2, c3 = st.columns([5, 3, 2])
run_id = c1.selectbox("Run", ids, index=ids.index(view.run.run_id), format_func=labels.get)
metrics = list(page.METRICS)
metric = c2.selectbox(
    "Heat map", metrics, index=metrics.index(view.metric), format_func=page.METRICS.get
)
threshold = (
    c3.number_input(
        "straggler tolerance [% of median step]",
        min_value=0.0,
        max_value=99.0,
        value=100 * view.threshold,
        step=0.5,
    )
    / 100
)
step = st.text_input(
    "Iteration ranges (regex, one group = the step number; empty: ProfilerStep#N, then 'step N')",
    value=view.step,
)
state = {
    **view.params(),
    "run": run_id,
    "metric": None if metric == "step_ns" else metric,
    "threshold": None if abs(threshold - 0.02) < 1e-12 else f"{threshold:g}",
    "step": step or None,
}
widgets.sync(state)
first_problems = view.problems
view = page.resolve(src, state)
view.problems = first_problems + view.problems
with st.spinner("Reducing each rank ..."):
    rep = page.report(src, view)
st.caption(rep.subtitle)
render_streamlit(rep)
widgets.share_panel("ranks", state, [rep])
