"""Timeline of one PyTorch profiler or Nsight Systems run: launch delays, GPU idle gaps and their causes,
launch-bound verdict, top kernels, and a what-if (a chosen kernel made faster) next to Amdahl.

The page rebuilds from the URL: ?run=<run id>&device=<rank:device|all>&kernel=<regex>&speedup=<s>.
"""
from __future__ import annotations

import math

import altair as alt
import polars as pl
import streamlit as st

from analyzers import timeline as T
from dashboard import data
from dashboard.cli.timeline import DEFINITIONS, measured_launch_floor_ns

MAX_POINTS = 5000   # points per chart (the largest gaps / a sample of kernels beyond that)

store = data.store()
root = str(store.root)
runs = [r for r in store.runs() if r.kind in ("kineto", "nsys")]
st.title("Timeline")
if not runs:
    st.info("No PyTorch profiler traces or Nsight Systems exports in the store yet: upload one on the Runs page.")
    st.stop()

ids = [r.run_id for r in runs]
labels = {r.run_id: f"{r.run_id} — {r.manifest['source_name']} ({r.kind})" for r in runs}
wanted = st.query_params.get("run")
if wanted and wanted not in ids:
    try:
        wanted = store.get(wanted).run_id
    except KeyError:
        st.error(f"No trace run {wanted!r} in this store.")
        wanted = None
run_id = st.selectbox("Run", ids, index=ids.index(wanted) if wanted in ids else 0, format_func=labels.get)
if st.query_params.get("run") != run_id:
    st.query_params["run"] = run_id
run = store.get(run_id)
meta = run.meta
g_all = data.run_table(root, run_id, "gpu_ops")
api_all = data.run_table(root, run_id, "api_calls")

# ---- device choice ---------------------------------------------------------------------------------
devs = g_all.select("rank", "device").unique().sort("rank", "device").rows()
dev_keys = ["all"] + [f"{r}:{d}" for r, d in devs]
dev_q = st.query_params.get("device", "all")
if len(devs) > 1:
    dev = st.selectbox("Device (rank:device)", dev_keys, index=dev_keys.index(dev_q) if dev_q in dev_keys else 0)
    if st.query_params.get("device", "all") != dev:
        st.query_params["device"] = dev
else:
    dev = "all"
if dev == "all":
    g = g_all
else:
    r_, d_ = (int(x) for x in dev.split(":"))
    g = g_all.filter((pl.col("rank") == r_) & (pl.col("device") == d_))

counts = meta.get("counts", {})
st.caption(
    f"**{meta.get('gpu_name') or 'GPU name not in the trace'}** · source: "
    + ("PyTorch profiler (Kineto) trace" if run.kind == "kineto" else f"Nsight Systems export {meta.get('nsys_version', '')}")
    + f" · {counts.get('kernels', 0):,} kernels, {counts.get('kernels_with_launch', 0):,} with their launch call in "
      f"the trace · ranks {meta.get('ranks')} · times on the {meta.get('clock', 'trace clock')}")

with st.expander("Definitions (how every number on this page is computed)"):
    for k, v in DEFINITIONS.items():
        st.markdown(f"- **{k.replace('_', ' ')}**: {v}")
    st.markdown("- **Perfetto**: "
                + (f"open `{run.artifact_path}` at https://ui.perfetto.dev (Open trace file) to see the original "
                   "timeline; a `.kineto.tar` rank archive must be unpacked first (one JSON per rank)."
                   if run.kind == "kineto" else
                   f"Perfetto cannot read an nsys SQLite export (`{run.artifact_path}`); open the `.nsys-rep` in "
                   "Nsight Systems instead."))

if g.height == 0:
    st.warning("No GPU operations (kernels, memcpy, memset) in this run.")
    st.stop()

# ---- per-device summary ----------------------------------------------------------------------------
util = T.utilization(g)
floor_ns = measured_launch_floor_ns(store, meta.get("gpu_name"))
lb = T.launch_bound(g, launch_floor_ns=floor_ns)
if floor_ns:
    st.caption(f"Launch floor {floor_ns / 1e3:.1f} µs per kernel: back-to-back empty-kernel launches measured by "
               f"`kernelscope bench` on a {meta.get('gpu_name')} (event timing).")
summary = util.join(lb.select("rank", "device", "short_kernel_share", "host_wait_fraction", "kernels_per_s", "verdict"),
                    on=["rank", "device"], how="left").select(
    "rank", "device", "verdict", "kernel_count", "kernels_with_launch", (pl.col("busy_ns") / 1e6).alias("busy_ms"),
    (pl.col("window_ns") / 1e6).alias("window_ms"), (pl.col("idle_fraction") * 100).alias("idle_pct"),
    (pl.col("short_kernel_share") * 100).alias("short_pct"), (pl.col("host_wait_fraction") * 100).alias("host_wait_pct"),
    "kernels_per_s")
num = st.column_config.NumberColumn
st.subheader("GPU busy time and launch-bound verdict")
st.dataframe(summary, hide_index=True, width="stretch", column_config={
    "kernel_count": num("kernels"), "kernels_with_launch": num("with their launch call"),
    "busy_ms": num("busy [ms]", format="%.3f", help=DEFINITIONS["gpu_busy"]),
    "window_ms": num("window [ms]", format="%.3f", help="last op end − first op start (trace timestamps)"),
    "idle_pct": num("idle [% of window]", format="%.1f", help=DEFINITIONS["gpu_idle_fraction"]),
    "short_pct": num("kernels shorter than their launch call [%]", format="%.1f"),
    "host_wait_pct": num("waiting for the host [% of window]", format="%.1f", help=DEFINITIONS["idle_categories"]),
    "kernels_per_s": num("kernels/s", format="%.0f"),
    "verdict": st.column_config.TextColumn("verdict", help=DEFINITIONS["launch_bound"]),
})

# ---- launch delay histogram ------------------------------------------------------------------------
st.subheader("Launch delay")
k = T.kernels(g).filter(pl.col("launch_delay_ns").is_not_null())
c1, c2 = st.columns([3, 2])
if k.height:
    h = k.select((pl.col("launch_delay_ns") / 1e3).alias("launch_delay_us"), pl.col("launch_api"))
    if h.height > MAX_POINTS:
        h = h.sample(MAX_POINTS, seed=0)
    chart = alt.Chart(h).mark_bar().encode(
        x=alt.X("launch_delay_us:Q", bin=alt.Bin(maxbins=60), title="launch delay [µs] = max(0, start − call end)"),
        y=alt.Y("count():Q", title="kernels", stack=True),
        color=alt.Color("launch_api:N", title="launch call"),
        tooltip=["launch_api", alt.Tooltip("count():Q", title="kernels")])
    c1.altair_chart(chart.properties(title="Launch delay per kernel (HTA definition)"), width="stretch")
    stats = T.launch_stats(g).select(
        "rank", "device", "with_launch", (pl.col("launch_delay_median_ns") / 1e3).alias("median_us"),
        (pl.col("launch_delay_p90_ns") / 1e3).alias("p90_us"), (pl.col("launch_delay_max_ns") / 1e3).alias("max_us"),
        "queue_count", (pl.col("queue_median_ns") / 1e3).alias("queue_median_us"), "delay_outliers")
    c2.dataframe(stats, hide_index=True, column_config={
        "with_launch": num("kernels with launch call"),
        "median_us": num("median [µs]", format="%.2f"), "p90_us": num("p90 [µs]", format="%.2f"),
        "max_us": num("max [µs]", format="%.1f"),
        "queue_count": num("with queue time", help=DEFINITIONS["queue"]),
        "queue_median_us": num("queue median [µs]", format="%.2f", help=DEFINITIONS["queue"]),
        "delay_outliers": num("delay > 100 µs", help="HTA's launch_delay_cutoff"),
    })
else:
    c1.info("No kernel has its launch call in this trace, so launch delays cannot be computed.")

# ---- idle gaps per stream ---------------------------------------------------------------------------
st.subheader("GPU idle gaps per stream")
sg = T.stream_gaps(g)
t0 = int(g["start_ns"].min())
c1, c2 = st.columns([3, 2])
if sg.height:
    pts = sg.sort("gap_ns", descending=True).head(MAX_POINTS).select(
        pl.format("{}:{}:{}", "rank", "device", "stream").alias("stream"),
        ((pl.col("start_ns") - t0) / 1e6).alias("t_ms"), (pl.col("gap_ns") / 1e3).alias("gap_us"), "category",
        pl.col("next_name").str.slice(0, 80).alias("next op"))
    chart = alt.Chart(pts).mark_circle(size=30).encode(
        x=alt.X("t_ms:Q", title="time since the first GPU op [ms]"),
        y=alt.Y("gap_us:Q", title="gap [µs]", scale=alt.Scale(type="log")),
        color=alt.Color("category:N", scale=alt.Scale(domain=list(T.IDLE_CATEGORIES))),
        row=alt.Row("stream:N", title="rank:device:stream"),
        tooltip=["stream", alt.Tooltip("t_ms:Q", format=".3f"), alt.Tooltip("gap_us:Q", format=",.2f"), "category",
                 "next op"])
    c1.altair_chart(chart.properties(height=140, title="Idle gaps before each op (largest 5,000)"))
    cats = T.idle_categories(g).with_columns(pl.format("{}:{}:{}", "rank", "device", "stream").alias("stream_key"),
                                             (pl.col("idle_ns") / 1e3).alias("idle_us"))
    bars = alt.Chart(cats).mark_bar().encode(
        x=alt.X("idle_us:Q", title="idle time [µs]"), y=alt.Y("stream_key:N", title="rank:device:stream"),
        color=alt.Color("category:N", scale=alt.Scale(domain=list(T.IDLE_CATEGORIES))),
        tooltip=["stream_key", "category", alt.Tooltip("idle_us:Q", format=",.1f"), "gap_count",
                 alt.Tooltip("idle_ratio:Q", format=".1%")])
    c2.altair_chart(bars.properties(title="Idle categories per stream (HTA)"), width="stretch")
else:
    c1.info("No idle gaps between ops on any stream.")

tb = T.temporal_breakdown(g).select("rank", "device", "compute_fraction", "communication_fraction", "memcpy_fraction",
                                    "idle_fraction")
st.dataframe(tb.with_columns([(pl.col(c) * 100).alias(c) for c in tb.columns if c.endswith("_fraction")]),
             hide_index=True, width="stretch", column_config={
                 c: num(c.replace("_fraction", " [% of window]"), format="%.1f") for c in tb.columns
                 if c.endswith("_fraction")})

# ---- top kernels --------------------------------------------------------------------------------------
st.subheader("Top kernels by total time")
ks = T.kernel_summary(g).head(20).select(
    pl.col("name").str.slice(0, 120).alias("kernel"), "count", (pl.col("total_ns") / 1e3).alias("total_us"),
    (pl.col("mean_ns") / 1e3).alias("mean_us"), (pl.col("median_ns") / 1e3).alias("median_us"),
    (pl.col("min_ns") / 1e3).alias("min_us"), (pl.col("max_ns") / 1e3).alias("max_us"),
    (pl.col("busy_share") * 100).alias("busy_pct"))
st.dataframe(ks, hide_index=True, width="stretch", column_config={
    "total_us": num("total [µs]", format="%.1f"), "mean_us": num("mean [µs]", format="%.2f"),
    "median_us": num("median [µs]", format="%.2f"), "min_us": num("min [µs]", format="%.2f"),
    "max_us": num("max [µs]", format="%.2f"),
    "busy_pct": num("share of busy time [%]", format="%.1f", help="total / GPU busy time (union of all ops)"),
})

# ---- what-if ------------------------------------------------------------------------------------------
st.subheader("What if a kernel were faster?")
default_kernel = st.query_params.get("kernel") or (ks["kernel"][0].split("<")[0].split("(")[0] if ks.height else ".")
try:
    default_speedup = float(st.query_params.get("speedup", 2.0))
except ValueError:
    default_speedup = 2.0
if not math.isfinite(default_speedup):
    default_speedup = 2.0
c1, c2 = st.columns([3, 1])
pattern = c1.text_input("Kernel name regex", value=default_kernel, key="whatif_kernel")
speedup = c2.number_input("Speedup ×", min_value=0.01, max_value=1e6, value=min(1e6, max(0.01, default_speedup)), step=0.5,
                          key="whatif_speedup")
if st.query_params.get("kernel") != pattern:
    st.query_params["kernel"] = pattern
if st.query_params.get("speedup") != f"{speedup:g}":
    st.query_params["speedup"] = f"{speedup:g}"
try:
    w = T.what_if(g_all, api_all, pattern, float(speedup))
except ValueError as e:
    st.error(str(e))
else:
    m1, m2, m3 = st.columns(3)
    m1.metric("measured run time", f"{w.run_ns / 1e6:,.3f} ms",
              help="first to last event (host API calls and GPU ops), slowest rank")
    m2.metric("what-if (trace dependencies)", f"{w.predicted_ns / 1e6:,.3f} ms",
              delta=f"{(w.predicted_ns - w.run_ns) / 1e6:,.3f} ms", delta_color="inverse")
    m3.metric("Amdahl", f"{w.amdahl_ns / 1e6:,.3f} ms", delta=f"{(w.amdahl_ns - w.run_ns) / 1e6:,.3f} ms",
              delta_color="inverse")
    st.caption(f"{w.matched_kernels:,} kernels match /{pattern}/, {w.matched_kernel_ns / 1e6:,.3f} ms of kernel time "
               f"(f = {w.fraction:.1%} of the run). What-if: {DEFINITIONS['whatif']}. The replay keeps launch calls, stream "
               "order and synchronisations; it cannot see waits between streams or ranks (so it may be optimistic "
               "there), and the host floor it keeps is why it can promise less than Amdahl.")
