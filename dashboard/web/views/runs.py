"""Runs: every run in the store, filtered by kind and GPU (?kind=ncu&gpu=NVIDIA+H200)."""

from __future__ import annotations

import streamlit as st

from dashboard.web import store_access, widgets
from dashboard.web.render_streamlit import render_streamlit
from dashboard.web.reports import runs as page
from dashboard.web.reports.run_links import KIND_WORDS

src = store_access.source()
qp = widgets.params()
runs = src.runs()
st.title("Runs")
kinds = sorted({r.kind for r in runs} | ({qp["kind"]} if qp.get("kind") else set()))
gpus = sorted(
    {r.meta.get("gpu_name") for r in runs if r.meta.get("gpu_name")}
    | ({qp["gpu"]} if qp.get("gpu") else set())
)
c1, c2 = st.columns(2)
kind = c1.selectbox(
    "Kind",
    [""] + kinds,
    index=([""] + kinds).index(qp.get("kind") or ""),
    format_func=lambda k: KIND_WORDS.get(k, k) if k else "all kinds",
)
gpu = c2.selectbox(
    "GPU",
    [""] + gpus,
    index=([""] + gpus).index(qp.get("gpu") or ""),
    format_func=lambda g: g or "all GPUs",
)
state = {"kind": kind, "gpu": gpu}
widgets.sync(state)
rep = page.build(src, state)
st.caption(rep.subtitle)
render_streamlit(rep)
st.caption(
    "Add files on the [Upload](upload) page, or with `kernelscope ingest PATH` on the server."
)
widgets.share_panel("runs", state, [rep])


@st.dialog("Delete a run")
def _confirm_delete(run_id: str) -> None:
    run = src.get(run_id)
    st.write(
        f"Delete run **{run.run_id}** ({run.kind}, `{run.source_name}`) from the store? Its stored "
        "artifact and tables are removed for everyone using this store; links to it stop working."
    )
    typed = st.text_input("Type the run id to confirm", placeholder=run.run_id)
    c1, c2 = st.columns(2)
    if c1.button(
        "Delete", type="primary", disabled=typed.strip() != run.run_id, icon=":material/delete:"
    ):
        src.delete(run.run_id)
        st.session_state["deleted"] = f"Deleted run {run.run_id} ({run.source_name})."
        st.rerun()
    if c2.button("Cancel"):
        st.rerun()


if runs:
    with st.expander("Delete a run"):
        ids = [r.run_id for r in runs]
        labels = {r.run_id: f"{r.run_id} — {r.source_name} ({r.kind})" for r in runs}
        victim = st.selectbox("Run", ids, format_func=labels.get, key="delete_run")
        if st.button("Delete…", icon=":material/delete:", key="delete_button"):
            _confirm_delete(victim)
if st.session_state.get("deleted"):
    st.toast(st.session_state.pop("deleted"))
