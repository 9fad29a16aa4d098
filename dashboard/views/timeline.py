"""Timeline of one PyTorch profiler or Nsight Systems run: launch delays, GPU idle gaps and their causes,
launch-bound verdict, top kernels, and a what-if (a chosen kernel made faster) next to Amdahl.

The page rebuilds from the URL: ?run=<run id>&device=<rank:device|all>&kernel=<regex>&speedup=<s>.
"""
from __future__ import annotations

import streamlit as st

from collectors.schema import TRACE_KINDS
from dashboard import data, ui
from dashboard.render_streamlit import render_streamlit
from dashboard.reports import timeline as page

src = data.source()
view = page.resolve(src, ui.params())
st.title("Timeline")
if view.run is None:
    st.info("No PyTorch profiler traces or Nsight Systems exports in the store yet: upload one on the Runs page.")
    st.stop()
render_streamlit(view.problems)

runs = src.runs(TRACE_KINDS)
ids = [r.run_id for r in runs]
labels = {r.run_id: f"{r.run_id} — {r.source_name} ({r.kind})" for r in runs}
run_id = st.selectbox("Run", ids, index=ids.index(view.run.run_id), format_func=labels.get)
if run_id != view.run.run_id:
    view = page.resolve(src, {**view.params(), "run": run_id, "device": None})
if len(view.devices) > 2:                              # "all" and more than one device
    view.device = st.selectbox("Device (rank:device)", view.devices, index=view.devices.index(view.device))
ui.sync(view.params())

render_streamlit(page.header(view))
with st.expander("Definitions (how every number on this page is computed)"):
    render_streamlit(page.definitions(view.run))
overview = page.overview(src, view)
render_streamlit(overview)
whatif = []
if page.device_ops(src, view).height:
    st.subheader("What if a kernel were faster?")
    c1, c2 = st.columns([3, 1])
    view.kernel = c1.text_input("Kernel name regex", value=view.kernel, key="whatif_kernel")
    view.speedup = c2.number_input("Speedup ×", min_value=0.01, max_value=1e6, value=view.speedup, step=0.5,
                                   key="whatif_speedup")
    ui.sync(view.params())
    whatif = page.whatif(src, view)
    render_streamlit(whatif)
ui.share_panel("timeline", view.params(), [page.report(view, overview, whatif)])
