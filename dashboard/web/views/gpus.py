"""GPUs: spec sheets vs measured ceilings, the bench runs, and the same cases compared across GPUs, each
normalised to its own peaks.  URL: ?gpu=NAME,NAME (GPUs to compare; default all with bench results)."""

from __future__ import annotations

import streamlit as st

from dashboard.web import store_access, widgets
from dashboard.web.render_streamlit import render_streamlit
from dashboard.web.reports import gpus as page
from dashboard.web.reports.report_blocks import code

src = store_access.source()
qp = widgets.params()
st.title("GPUs")
res = src.bench_results()
have = res["gpu"].unique(maintain_order=True).to_list()
asked = page._gpu_list(qp.get("gpu"))
for g in asked:
    if g not in have:
        st.warning(f"Unknown GPU {code(g)}: no bench run of it in this store.")
wanted = [g for g in asked if g in have]
if len(have) > 1:
    wanted = st.multiselect("GPUs to compare", have, default=wanted or have)
state = {"gpu": wanted if wanted and len(wanted) < len(have) else None}
widgets.sync(state)
rep = page.build(src, state)
st.caption(rep.subtitle)
render_streamlit(rep)
widgets.share_panel("gpus", state, [rep])
