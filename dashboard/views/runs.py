"""Runs: every run in the store, filtered by kind and GPU (?kind=ncu&gpu=NVIDIA+H200)."""
from __future__ import annotations

import streamlit as st

from dashboard import data, ui
from dashboard.render_streamlit import render_streamlit
from dashboard.reports import runs as page

src = data.source()
qp = ui.params()
runs = src.runs()
st.title("Runs")
kinds = sorted({r.kind for r in runs} | ({qp["kind"]} if qp.get("kind") else set()))
gpus = sorted({r.meta.get("gpu_name") for r in runs if r.meta.get("gpu_name")} | ({qp["gpu"]} if qp.get("gpu") else set()))
c1, c2 = st.columns(2)
kind = c1.selectbox("Kind", [""] + kinds, index=([""] + kinds).index(qp.get("kind") or ""),
                    format_func=lambda k: k or "all kinds")
gpu = c2.selectbox("GPU", [""] + gpus, index=([""] + gpus).index(qp.get("gpu") or ""),
                   format_func=lambda g: g or "all GPUs")
state = {"kind": kind, "gpu": gpu}
ui.sync(state)
rep = page.build(src, state)
st.caption(rep.subtitle)
render_streamlit(rep)
st.caption("Add files on the [Upload](upload) page, or with `kernelscope ingest PATH` on the server.")
ui.share_panel("runs", state, [rep])
