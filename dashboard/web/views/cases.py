"""Textbook cases: pick a case of the chapter "Operators and runtime" and a GPU, change its
parameters, see the model's predictions with units, the chapter's own figures, a chart, the same
case on other GPUs and — when measurements exist — measured vs predicted with a verdict.

The page rebuilds from the URL alone: ?case=ID&gpu=NAME&<param>=VALUE…&meas=QUANTITY:VALUE:UNIT
(repeatable). Parameters equal to their default are left out of the URL. Stored measurements come
from `Source.case_measurements(case_id, gpu_name)` (Nsight Compute) and `Source.case_bench_rows`
(the bench results, judged at their own parameters); measurements typed on the page are kept in the
URL. The blocks are built by `dashboard.web.reports.cases` (resolve, case_predictions, …), which the
HTML export uses too.
"""

from __future__ import annotations

import streamlit as st

from analyzers.cases import Measurement, all_cases, get_case, to_base
from analyzers.gpus import all_gpus, find_gpu
from dashboard.web import store_access, widgets
from dashboard.web.render_streamlit import render_streamlit
from dashboard.web.reports import cases as pages
from dashboard.web.reports.report_blocks import Heading, Report, Text, code

CASES = all_cases()
IDS = [c.id for c in CASES]
ALL_PARAM_NAMES = {p.name for c in CASES for p in c.params}
qp = st.query_params


def _set_qp(key: str, value: str | None) -> None:
    if value is None:
        if key in qp:
            del qp[key]
    elif qp.get(key) != value:
        qp[key] = value


def _stored_measurements(case_id: str, gpu_name: str, values: dict) -> list[Measurement]:
    return list(store_access.source().case_measurements(case_id, gpu_name, values))


st.title("Textbook cases")
st.caption(
    "The chapter “Operators and runtime” as executable models: every number below is computed from "
    "the parameters and the GPU's spec sheet (analyzers/cases), next to the chapter's own figures."
)

# ---- case and GPU -------------------------------------------------------------------------------
params = widgets.params()
wanted = qp.get("case")
if wanted and wanted not in IDS:
    st.warning(f"Unknown case {wanted!r}; showing {pages.DEFAULT_CASE}.")
case_id = st.selectbox(
    "Case",
    IDS,
    index=IDS.index(wanted) if wanted in IDS else IDS.index(pages.DEFAULT_CASE),
    format_func=lambda i: f"{i} — {get_case(i).title}",
)
case_changed = case_id != qp.get("case")
case = get_case(case_id)
chapter_gpu = case.gpu().name

names = [g.name for g in all_gpus()]
g_wanted = qp.get("gpu")
g_found = find_gpu(g_wanted) if g_wanted else None
if g_wanted and g_found is None:
    st.warning(f"Unknown GPU {g_wanted!r}; showing {chapter_gpu}.")
gpu_name = st.selectbox(
    "GPU",
    names,
    index=names.index(g_found.name if g_found else chapter_gpu),
    format_func=lambda n: (
        n + ("  (the chapter's)" if n == chapter_gpu and case.default_gpu else "")
    ),
)
gpu = find_gpu(gpu_name)
view = pages.resolve(
    params,
    case_id,
    gpu_name,  # the URL's parameter values apply to its case only
    store_access.source().best_ceilings(gpu_name),
)
intro = pages.case_intro(view)
render_streamlit(intro)

# ---- parameters ---------------------------------------------------------------------------------
# Shown as one table; the inputs only while "Edit parameters" is on: two dozen Streamlit number
# inputs took about 0.4 s of a full browser load (docs/findings-kernels-page-load.md). The URL holds
# the values either way.
editing = False
if case.params:
    st.subheader("Parameters")
    render_streamlit([Text(p, "warning") for p in view.problems])
    editing = st.toggle(
        "Edit parameters",
        key="case:edit",
        help="Change the model's parameters; the values go into the page's link.",
    )
    if not editing:
        render_streamlit([pages.case_params_table(view)])
    cols = st.columns(4) if editing else []
    for i, p in enumerate(case.params if editing else ()):
        current = view.values[p.name]
        label = p.name + (f" [{p.unit}]" if p.unit and p.unit != "count" else "")
        help_ = (
            p.description
            + ("" if p.from_chapter else " (assumption: the chapter gives no value)")
            + (f" Default: {p.gpu_default_text}." if p.gpu_default else "")
        )
        col = cols[i % 4]
        key = f"case:{case.id}:{p.name}:{gpu.name if p.gpu_default or p.ceiling else ''}"
        if p.type == "choice":
            opts = list(p.choices)
            v = col.selectbox(
                label,
                opts,
                index=opts.index(current) if current in opts else 0,
                help=help_,
                key=key,
            )
        elif p.type == "floats":
            v = col.text_input(label, value=pages.param_text(current), help=help_, key=key)
        elif p.type == "int":
            v = col.number_input(label, value=int(current), step=1, help=help_, key=key)
        else:
            v = col.number_input(label, value=float(current), format="%g", help=help_, key=key)
        view.values[p.name] = v
changed = view.changed()

# ---- write the state back to the URL
# --------------------------------------------------------------
_set_qp("case", case.id)
_set_qp("gpu", None if gpu.name == chapter_gpu else gpu.name)
for name in ALL_PARAM_NAMES:
    _set_qp(name, changed.get(name))
if case_changed and "meas" in qp:
    del qp["meas"]
state = {
    "case": case.id,
    "gpu": None if gpu.name == chapter_gpu else gpu.name,
    **changed,
    "meas": qp.get_all("meas"),
}

# ---- predictions, the same case on other GPUs, the chapter's figures and checks
# --------------------
ev, predicted = pages.case_predictions(view)
render_streamlit(predicted)
if case.runnable and ev is None:
    st.stop()
rep = Report("Textbook cases", list(intro), subtitle=f"Case {code(case.id)} on {gpu.name}")
if case.params:
    rep.add(Heading("Parameters"), pages.case_params_table(view))
rep.add(*predicted)
if ev is not None:
    with st.expander("Same parameters on every GPU of the registry"):
        others = pages.case_other_gpus(view, ev)
        render_streamlit(others)
    rep.add(Heading("Same parameters on every GPU of the registry", 3), *others)
figures = pages.case_figures(case)
render_streamlit(figures)
rep.add(*figures)
checks = pages.case_chapter_checks(case)
if checks:
    with st.expander("Consistency checks on the chapter", expanded=True):
        render_streamlit(checks)
    rep.add(Heading("Consistency checks on the chapter", 3), *checks)

# ---- measured vs predicted
# ------------------------------------------------------------------------
typed, bad = pages.url_measurements(qp.get_all("meas"), gpu.name)
measured = pages.case_measured(
    view,
    ev,
    (_stored_measurements(case.id, gpu.name, view.values) if ev is not None else []) + typed,
    bad,
    store_access.source().case_bench_rows(case.id, gpu.name) if ev is not None else None,
)
render_streamlit(measured)
rep.add(*measured)
if ev is not None:
    numeric = [k for k, p in ev.predictions.items() if p.numeric and p.kind != "info"]
    if numeric:
        with st.form("add_measurement"):
            c1, c2, c3 = st.columns(3)
            qty = c1.selectbox("quantity", numeric)
            val = c2.number_input("measured value", value=0.0, format="%g")
            unit = c3.text_input(
                "unit",
                value=ev.predictions[numeric[0]].unit,
                help="e.g. ms, µs, MiB, GB/s, %, count",
            )
            if st.form_submit_button("Compare"):
                try:
                    to_base(val, unit)
                except ValueError as e:
                    st.error(str(e))
                else:
                    qp["meas"] = qp.get_all("meas") + [f"{qty}:{val:g}:{unit}"]
                    st.rerun()
widgets.share_panel("cases", state, [rep])
