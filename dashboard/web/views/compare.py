"""Compare run B with run A (before/after a change, or one GPU against another): the result
`kernelscope compare A B` prints. Without ?a and ?b the newest run is compared with the newest
related one (never two unrelated runs).

URL: ?a=RUN&b=RUN&noise=5&pair=N&mq=TEXT (noise floor in %; pair: which matched launch pair's
metrics to show; mq: a filter on the metric names)
"""

from __future__ import annotations

import streamlit as st

from dashboard.web import store_access, widgets
from dashboard.web.render_streamlit import render_streamlit
from dashboard.web.reports import compare as page
from dashboard.web.reports.run_links import run_label

src = store_access.source()
view = page.resolve(src, widgets.params())
st.title("Compare")
for p in view.problems:
    st.warning(p)
runs = src.runs(page.COMPARABLE)
if len(runs) < 2:
    st.info(
        "Compare needs two runs in the store: upload a second report on the [Upload](upload) page."
    )
    st.stop()
ids = [None] + [r.run_id for r in runs]
labels = {r.run_id: run_label(r) for r in runs}
fmt = lambda i: "— pick a run —" if i is None else labels[i]  # noqa: E731
c1, c2, c3 = st.columns([4, 4, 1])
a = c1.selectbox(
    "Run A (before)", ids, index=ids.index(view.a.run_id) if view.a else 0, format_func=fmt
)
b = c2.selectbox(
    "Run B (after)", ids, index=ids.index(view.b.run_id) if view.b else 0, format_func=fmt
)
noise = c3.number_input(
    "noise floor [%]",
    min_value=0.0,
    max_value=100.0,
    value=float(view.noise_pct),
    step=1.0,
    help="A change smaller than this (or than twice the launches' combined "
    "spread) is 'unchanged'; a threshold over twice this is 'too noisy to judge'.",
)
state = {
    "a": a,
    "b": b,
    "noise": None if noise == 5.0 else f"{noise:g}",
    "pair": view.pair or None,
    "mq": view.mq or None,
}
view = page.resolve(src, state)
if (
    view.a is not None
    and view.b is not None
    and view.a.kind == "ncu" == view.b.kind
    and view.a.run_id != view.b.run_id
):
    r = src.compare(view.a, view.b, view.noise_pct / 100)
    if r.pairs:
        d1, d2 = st.columns([3, 2])
        opts = list(range(len(r.pairs)))
        view.pair = d1.selectbox(
            "Launch pair for the metric comparison",
            opts,
            index=min(view.pair, len(opts) - 1),
            format_func=lambda i: (
                f"A {r.pairs[i]['a_id']} vs B {r.pairs[i]['b_id']}: {r.pairs[i]['name'][:80]}"
            ),
        )
        view.mq = d2.text_input(
            "Filter metrics", value=view.mq, placeholder="e.g. dram__ or Memory Workload"
        )
widgets.sync(view.params())
rep = page.build(src, view.params())
if rep.subtitle:
    st.caption(rep.subtitle)
render_streamlit(rep)
widgets.share_panel("compare", view.params(), [rep])
