"""Timeline of one PyTorch profiler or Nsight Systems run: where each device's time goes (GPU-,
launch- or host-bound), the zoomable timeline of streams, CPU threads and NVTX ranges with the
detail of a clicked event (and its Nsight Compute counters), launch delays, GPU idle gaps and their
causes, top kernels, and a what-if.

The page rebuilds from the URL: ?run=<run
id>&device=<rank:device|all>&kernel=<regex>&speedup=<s>&t0=<ns>&t1=<ns>
&op=<table:row>&color=<bound|name>. Zooming, clicking and the colour buttons in the timeline rerun
only the timeline's fragment and write t0, t1, op and color back into the URL.
"""

from __future__ import annotations

import streamlit as st

from collectors.schema import TRACE_KINDS
from dashboard.web import components, store_access, widgets
from dashboard.web.render_streamlit import render_streamlit
from dashboard.web.reports import timeline as page
from dashboard.web.reports import timeline_detail as detail

src = store_access.source()
view = page.resolve(src, widgets.params())
st.title("Timeline")
if view.run is None:
    st.info(
        "No PyTorch profiler traces or Nsight Systems exports in the store yet: upload one on "
        "the Upload page."
    )
    st.stop()
render_streamlit(view.problems)

runs = src.runs(TRACE_KINDS)
ids = [r.run_id for r in runs]
labels = {r.run_id: f"{r.run_id} — {r.source_name} ({r.kind})" for r in runs}
run_id = st.selectbox("Run", ids, index=ids.index(view.run.run_id), format_func=labels.get)
if run_id != view.run.run_id:
    view = page.resolve(
        src, {**view.params(), "run": run_id, "device": None, "t0": None, "t1": None, "op": None}
    )
if len(view.devices) > 2:  # "all" and more than one device
    view.device = st.selectbox(
        "Device (rank:device)", view.devices, index=view.devices.index(view.device)
    )
widgets.sync(view.params())

render_streamlit(page.header(view, src.meta(view.run)))
# the story first: where the time goes, the time per step, and whether the trace can be trusted
render_streamlit(
    page.verdict_blocks(src, view) + page.steps_blocks(src, view) + page.integrity_blocks(src, view)
)


def _on_window():
    w = (st.session_state.get("timeline") or {}).get("window") or {}
    if w.get("t1") is not None:
        st.query_params["t0"] = f"{max(0.0, float(w['t0'])):.0f}"
        st.query_params["t1"] = f"{float(w['t1']):.0f}"
        st.session_state["timeline_width"] = int(w.get("width") or detail.DEFAULT_WIDTH)


def _on_select():
    s = (st.session_state.get("timeline") or {}).get("select") or {}
    if s.get("src") in detail.SRCS and s.get("row") is not None:
        st.query_params["op"] = f"{s['src']}:{int(s['row'])}"


def _on_color():
    c = (st.session_state.get("timeline") or {}).get("color")
    if c in page.COLORS:
        st.query_params["color"] = c


@st.fragment
def timeline_view():
    v = page.resolve(src, widgets.params())
    block = detail.timeline_block(src, v, st.session_state.get("timeline_width"))
    components.timeline(
        block.payload,
        key="timeline",
        on_window=_on_window,
        on_select=_on_select,
        on_color=_on_color,
    )
    st.caption(block.caption)
    render_streamlit(detail.event_detail(src, v))


st.subheader("Timeline")
timeline_view()


def _perfetto() -> bytes:
    from dashboard.web.render_perfetto import chrome_trace

    r = src.get(view.run.run_id)
    return chrome_trace(
        r.table("gpu_ops"),
        r.table("api_calls"),
        r.table("cpu_ops"),
        r.table("nvtx"),
        name=r.source_name,
        gpu_name=r.meta.get("gpu_name"),
    )


st.download_button(
    "Download for Perfetto (Chrome trace JSON)",
    data=_perfetto,
    on_click="ignore",
    file_name=f"kernelscope-{view.run.run_id}.perfetto.json",
    mime="application/json",
    icon=":material/download:",
    help="Opens in https://ui.perfetto.dev (Open trace file).",
)

with st.expander("Definitions (how every number on this page is computed)"):
    render_streamlit(page.definitions(view.run))
# one section at a time below the timeline: the page stays light in the browser (the export has them
# all)
view.show = (
    st.segmented_control(
        "Statistics",
        list(page.SECTIONS),
        default=view.show,
        format_func=page.SECTIONS.get,
        required=True,
        key="timeline_show",
    )
    or "devices"
)
widgets.sync(view.params())
SECTION = {
    "devices": page.device_blocks,
    "delays": page.delay_blocks,
    "idle": page.idle_blocks,
    "kernels": page.kernel_blocks,
}
if view.show in SECTION:
    render_streamlit(SECTION[view.show](src, view))
elif page.device_ops(src, view).height:
    st.subheader("What if a kernel were faster?")
    c1, c2 = st.columns([3, 1])
    view.kernel = view.kernel or page.default_kernel(src, view)
    view.kernel = c1.text_input("Kernel name regex", value=view.kernel, key="whatif_kernel")
    view.speedup = c2.number_input(
        "Speedup ×",
        min_value=0.01,
        max_value=1e6,
        value=view.speedup,
        step=0.5,
        key="whatif_speedup",
    )
    widgets.sync(view.params())
    render_streamlit(page.whatif(src, view))


def _reports():
    top = (
        page.verdict_blocks(src, view)
        + page.steps_blocks(src, view)
        + page.integrity_blocks(src, view)
        + [detail.timeline_block(src, view)]
        + detail.event_detail(src, view)
    )
    has_ops = page.device_ops(src, view).height > 0
    return [
        page.report(
            view,
            page.overview(src, view),
            page.whatif(src, view) if has_ops else [],
            src.meta(view.run),
            src,
            top,
        )
    ]


widgets.share_panel("timeline", view.params(), _reports)
