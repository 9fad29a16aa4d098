"""History: a kernel over runs and GPUs, ceilings over time per GPU, regressions between consecutive
runs.

The page rebuilds from the URL:
?kernel=<regex>&gpu=<name>&source=<file>&resource=<dram|...>&noise=<%>.
"""

from __future__ import annotations

import streamlit as st

from dashboard.web import store_access, widgets
from dashboard.web.render_streamlit import render_streamlit
from dashboard.web.reports import history as page

src = store_access.source()
p = page.params_of(widgets.params(), strict=False)
st.title("History")
c1, c2, c3 = st.columns([4, 3, 3])
kernel = c1.text_input("Kernel name (regex)", value=p["kernel"])
gpu = c2.text_input("GPU (name as stored; empty: all)", value=p["gpu"] or "")
source = c3.text_input("File (empty: all)", value=p["source"] or "")
c4, c5 = st.columns(2)
res = list(page.RESOURCE_LABELS)
resource = c4.selectbox(
    "Ceiling", res, index=res.index(p["resource"]), format_func=page.RESOURCE_LABELS.get
)
noise = c5.number_input(
    "noise floor [%]", min_value=0.0, max_value=100.0, value=float(p["noise"]), step=1.0
)
state = {
    "kernel": kernel or None,
    "gpu": gpu or None,
    "source": source or None,
    "resource": None if resource == "dram" else resource,
    "noise": None if noise == 5.0 else f"{noise:g}",
}
widgets.sync(state)
try:
    rep = page.report(src, page.params_of(state, strict=False))
except Exception as e:  # noqa: BLE001 - a bad regex is the user's to fix, said in place
    st.error(str(e))
    st.stop()
st.caption(rep.subtitle)
render_streamlit(rep)
widgets.share_panel("history", state, [rep])
