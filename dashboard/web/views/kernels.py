"""Kernels of one Nsight Compute run: the launches in column groups (a click on a row selects it, on
a header sorts by it), a search over the full names, the selected launch's detail (findings, source
hot spots, textbook cases, every metric) and the run's rooflines and charts.

URL:
?run=RUN&by=kernel|launch&kernel=LAUNCH_ID&sort=COLUMN&desc=1&cols=GROUP&find=TEXT&q=METRIC_FILTER
"""

from __future__ import annotations

import streamlit as st

from collectors.schema import TRACE_KINDS
from dashboard.web import components, store_access, widgets
from dashboard.web.render_streamlit import render_streamlit
from dashboard.web.reports import kernel_detail
from dashboard.web.reports import kernels as page
from dashboard.web.reports.report_blocks import Report, Table, Text
from dashboard.web.reports.run_links import run_label

src = store_access.source()
view = page.resolve(src, widgets.params())
st.title("Kernels")
runs = src.runs(("ncu",))
if view.run is None:
    for p in view.problems:
        st.warning(p)
    st.info(
        "No Nsight Compute runs in the store yet: upload a report on the [Upload](upload) page."
    )
    st.stop()

ids = [r.run_id for r in runs]
labels = {r.run_id: run_label(r) for r in runs}
run_id = st.selectbox("Run", ids, index=ids.index(view.run.run_id), format_func=labels.get)
if run_id != view.run.run_id:
    view = page.resolve(src, {**view.params(), "run": run_id, "kernel": None, "find": None})


def _on_sort():
    ev = (st.session_state.get("kernels_table") or {}).get("sort") or {}
    if ev.get("key") in page.SORT_KEYS:
        st.query_params["sort"] = ev["key"]
        if ev.get("desc"):
            st.query_params["desc"] = "1"
        # one row per kernel sorts descending by default
        elif (st.query_params.get("by") or "kernel") == "kernel":
            st.query_params["desc"] = "0"
        elif "desc" in st.query_params:
            del st.query_params["desc"]


def _on_select():
    ev = (st.session_state.get("kernels_table") or {}).get("select")
    if ev not in (None, ""):
        st.query_params["kernel"] = str(ev)


story = st.container()  # the run's story (filled below) comes before the controls of the table
c0, c1 = st.columns([1, 2])
by = (
    c0.segmented_control(
        "Rows",
        list(page.BY),
        default=view.by,
        format_func=page.BY.get,
        required=True,
        key="kernels_by",
        help="One row per kernel (its launches grouped by "
        "name, template arguments, grid and block), or one per launch",
    )
    or "kernel"
)
if by != view.by:
    view = page.resolve(src, {**view.params(), "by": by, "sort": None, "desc": None})
view.find = c1.text_input(
    "Find a kernel (full name, regex)", value=view.find, placeholder="e.g. transpose|<32>"
)
groups = list(page.COLUMN_GROUPS)
view.cols = (
    st.segmented_control(
        "Columns",
        groups,
        default=view.cols,
        format_func=lambda g: page.COLUMN_GROUPS[g][0],
        required=True,
        key="kernels_cols",
    )
    or "summary"
)
traces = [""] + [r.run_id for r in src.runs(TRACE_KINDS)]
tlabels = {r.run_id: run_label(r) for r in src.runs(TRACE_KINDS)}
if view.trace and view.trace not in traces:
    traces.append(view.trace)
with st.expander(
    "Timeline of the same program" + (f": {view.trace}" if view.trace else " (found automatically)")
):
    view.trace = (
        st.selectbox(
            "Timeline of the same program",
            traces,
            index=traces.index(view.trace or ""),
            format_func=lambda t: (
                tlabels.get(t, t) if t else "found by matching kernels (automatic)"
            ),
            help="A PyTorch profiler trace or Nsight Systems export of the "
            "program this report profiled: the page then shows how often each kernel runs per step "
            "and what its findings cost per step (analyzers.join).",
        )
        or None
    )
widgets.sync(view.params())

overview = page.overview(src, view)
if overview.subtitle:
    st.caption(overview.subtitle)
table = next(b for b in overview.blocks if isinstance(b, Table) and b.name == "kernels")
i = overview.blocks.index(table)
render_streamlit(overview.blocks[:i], story)
components.table(
    table.cells(components.table_rows_wanted("kernels_table")),
    key="kernels_table",
    on_sort=_on_sort,
    on_select=_on_select,
)
render_streamlit([Text(table.caption, "caption")] if table.caption else [])
render_streamlit(overview.blocks[i + 1 :])

frame = src.ncu(view.run).kernels
kids = frame["id"].to_list()
names = dict(zip(kids, frame["display_name"].to_list()))
d1, d2 = st.columns([2, 3])
view.kernel = d1.selectbox(
    "Launch",
    kids,
    index=kids.index(view.kernel) if view.kernel in kids else 0,
    format_func=lambda k: f"{k}: {names[k]}",
)
shows = list(page.SECTIONS)
view.show = (
    d2.segmented_control(
        "Show",
        shows,
        default=view.show,
        format_func=page.SECTIONS.get,
        required=True,
        key="kernels_show",
    )
    or "detail"
)
if view.show == "metrics":
    view.q = st.text_input("Filter metrics", value=view.q, placeholder="e.g. dram__ or Occupancy")
widgets.sync(view.params())
# one section at a time: the page stays light in the browser (the export has all of them)
if view.show == "detail":
    render_streamlit(kernel_detail.detail(src, view))
elif view.show == "source":
    render_streamlit(kernel_detail.hotspot_blocks(src, view))
elif view.show == "metrics":
    render_streamlit(kernel_detail.metric_blocks(src, view))
else:
    render_streamlit(page.chart_blocks(src, view))
widgets.share_panel(
    "kernels",
    view.params(),
    lambda: [
        Report(
            overview.title,
            overview.blocks
            + kernel_detail.detail(src, view)
            + kernel_detail.hotspot_blocks(src, view)
            + kernel_detail.metric_blocks(src, view)
            + page.chart_blocks(src, view),
            overview.subtitle,
        )
    ],
)
