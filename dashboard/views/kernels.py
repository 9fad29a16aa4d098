"""Kernels of one Nsight Compute run: sortable table with units, roofline against spec and measured ceilings,
bandwidth and occupancy charts, and a kernel detail view with findings, textbook cases and every metric.

URL: ?run=RUN&kernel=LAUNCH_ID&sort=COLUMN&desc=1&q=METRIC_FILTER
"""
from __future__ import annotations

import streamlit as st

from collectors.schema import TRACE_KINDS
from dashboard import data, ui
from dashboard.render_streamlit import render_streamlit
from dashboard.reports import kernels as page
from dashboard.reports.blocks import Report
from dashboard.reports.common import run_label

src = data.source()
view = page.resolve(src, ui.params())
st.title("Kernels")
runs = src.runs(("ncu",))
if view.run is None:
    for p in view.problems:
        st.warning(p)
    st.info("No Nsight Compute runs in the store yet: upload a report on the [Upload](upload) page.")
    st.stop()

ids = [r.run_id for r in runs]
labels = {r.run_id: run_label(r) for r in runs}
c1, c2, c3 = st.columns([4, 2, 1])
run_id = c1.selectbox("Run", ids, index=ids.index(view.run.run_id), format_func=labels.get)
if run_id != view.run.run_id:
    view = page.resolve(src, {**view.params(), "run": run_id, "kernel": None})
sort_keys = list(page.SORT_KEYS)
view.sort = c2.selectbox("Sort by", sort_keys, index=sort_keys.index(view.sort),
                         format_func=lambda k: page.KERNEL_COLS[k].header)
view.desc = c3.toggle("descending", value=view.desc)
traces = [""] + [r.run_id for r in src.runs(TRACE_KINDS)]
tlabels = {r.run_id: run_label(r) for r in src.runs(TRACE_KINDS)}
if view.trace and view.trace not in traces:
    traces.append(view.trace)
view.trace = st.selectbox("Timeline of the same program", traces, index=traces.index(view.trace or ""),
                          format_func=lambda t: tlabels.get(t, t) if t else "found by matching kernels (automatic)",
                          help="A PyTorch profiler trace or Nsight Systems export of the program this report "
                               "profiled: the page then shows how often each kernel runs per step and what its "
                               "findings cost per step (analyzers.join).") or None
ui.sync(view.params())

overview = page.overview(src, view)
if overview.subtitle:
    st.caption(overview.subtitle)
render_streamlit(overview)

st.subheader("Kernel detail")
frame = src.ncu(view.run).kernels
kids = frame["id"].to_list()
names = dict(zip(kids, frame["short_name"].to_list()))
d1, d2 = st.columns([3, 2])
view.kernel = d1.selectbox("Launch", kids, index=kids.index(view.kernel) if view.kernel in kids else 0,
                           format_func=lambda i: f"{i}: {names[i]}")
view.q = d2.text_input("Filter metrics", value=view.q, placeholder="e.g. dram__ or occupancy")
ui.sync(view.params())
detail = page.detail(src, view)
render_streamlit(detail)
ui.share_panel("kernels", view.params(), [Report(overview.title, overview.blocks + detail, overview.subtitle)])
