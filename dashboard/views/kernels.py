"""Kernels of one Nsight Compute run: table with units, bandwidth and occupancy charts, kernel detail."""
from __future__ import annotations

import altair as alt
import polars as pl
import streamlit as st

from dashboard import data

store = data.store()
root = str(store.root)
ncu_runs = [r for r in store.runs() if r.kind == "ncu"]
st.title("Kernels")
if not ncu_runs:
    st.info("No Nsight Compute runs in the store yet: upload a report on the Runs page.")
    st.stop()

ids = [r.run_id for r in ncu_runs]
labels = {r.run_id: f"{r.run_id} — {r.manifest['source_name']}" for r in ncu_runs}
wanted = st.query_params.get("run")
if wanted and wanted not in ids:
    try:
        wanted = store.get(wanted).run_id
    except KeyError:
        st.error(f"No Nsight Compute run {wanted!r} in this store.")
        wanted = None
run_id = st.selectbox("Run", ids, index=ids.index(wanted) if wanted in ids else 0, format_func=labels.get)
if st.query_params.get("run") != run_id:
    st.query_params["run"] = run_id

analyzed, gpu, missing = data.ncu_analysis(root, run_id)
peak = gpu["dram_bandwidth_bytes_per_s"]
st.caption(f"GPU **{gpu['name']}** (CC {gpu['cc']}, {gpu['sm_count']} SMs"
           + (f", DRAM peak {peak / 1e9:,.0f} GB/s — {gpu['dram_source']}" if peak else "")
           + (")" if gpu["from_registry"] else "; specs from the report's device attributes)")
           + f" · {analyzed.height} profiled launches")
for m in missing:
    st.warning(f"**{m['quantity']}** is not in this report (needs {', '.join(m['needs'])}); "
               f"collect it with `{m['collect_with']}`.")

view = analyzed.select(
    pl.col("id"), pl.col("short_name").alias("kernel"),
    (pl.col("duration_ns") / 1e3).alias("duration_us"),
    pl.col("dram_bandwidth_gbps"), (pl.col("dram_peak_fraction") * 100).alias("dram_pct_peak"),
    "achieved_occupancy_pct", "theoretical_occupancy_pct", "predicted_occupancy_pct", "occupancy_limiter",
    "smem_ld_conflict_degree", "smem_st_conflict_degree", "smem_conflict_degree",
    "global_ld_sectors_per_request", "global_ld_ideal_sectors_per_request",
    "registers_per_thread", "block_size", "grid_size",
)
num = st.column_config.NumberColumn
st.dataframe(view, hide_index=True, width="stretch", column_config={
    "duration_us": num("duration [µs]", format="%.2f", help="gpu__time_duration.sum (ncu counter)"),
    "dram_bandwidth_gbps": num("DRAM [GB/s]", format="%.0f", help="(dram__bytes_read.sum + dram__bytes_write.sum) / duration"),
    "dram_pct_peak": num("DRAM [% of spec]", format="%.1f", help=f"of the spec-sheet peak: {gpu['dram_source']}"),
    "achieved_occupancy_pct": num("occ. achieved [%]", format="%.1f", help="sm__warps_active.avg.pct_of_peak_sustained_active"),
    "theoretical_occupancy_pct": num("occ. theoretical, ncu [%]", format="%.1f", help="sm__maximum_warps_per_active_cycle_pct"),
    "predicted_occupancy_pct": num("occ. theoretical, ours [%]", format="%.1f", help="CUDA occupancy rules (analyzers/occupancy.py)"),
    "occupancy_limiter": st.column_config.TextColumn("limiter (ours)"),
    "smem_ld_conflict_degree": num("bank ways, loads", format="%.2f", help="wavefronts / (wavefronts − conflicts)"),
    "smem_st_conflict_degree": num("bank ways, stores", format="%.2f"),
    "smem_conflict_degree": num("bank ways, all", format="%.2f"),
    "global_ld_sectors_per_request": num("ld sectors/request", format="%.1f"),
    "global_ld_ideal_sectors_per_request": num("ideal sectors/request", format="%.0f"),
    "registers_per_thread": num("registers/thread"), "block_size": num("threads/block"), "grid_size": num("blocks"),
})

c1, c2 = st.columns(2)
bars = analyzed.select(pl.col("id").cast(pl.String).alias("launch"), pl.col("short_name").alias("kernel"),
                       "dram_bandwidth_gbps").drop_nulls()
if bars.height:
    chart = alt.Chart(bars).mark_bar().encode(
        x=alt.X("launch:N", sort=None, title="launch id"),
        y=alt.Y("dram_bandwidth_gbps:Q", title="achieved DRAM bandwidth [GB/s] (ncu counters)"),
        tooltip=["kernel", alt.Tooltip("dram_bandwidth_gbps:Q", format=",.0f", title="GB/s")])
    if peak:
        rule = alt.Chart(pl.DataFrame({"peak": [peak / 1e9]})).mark_rule(color="firebrick", strokeDash=[4, 3]).encode(
            y="peak:Q", tooltip=[alt.Tooltip("peak:Q", format=",.0f", title="spec peak GB/s")])
        chart = chart + rule
    c1.altair_chart(chart.properties(title="DRAM bandwidth per launch vs spec peak (dashed)"), width="stretch")
occ = analyzed.select(pl.col("id").cast(pl.String).alias("launch"), "achieved_occupancy_pct",
                      "theoretical_occupancy_pct", "predicted_occupancy_pct").unpivot(
    index="launch", variable_name="measure", value_name="pct").drop_nulls().with_columns(
    pl.col("measure").replace({"achieved_occupancy_pct": "achieved (ncu counter)",
                               "theoretical_occupancy_pct": "theoretical (ncu)",
                               "predicted_occupancy_pct": "theoretical (our calculator)"}))
if occ.height:
    c2.altair_chart(alt.Chart(occ).mark_bar().encode(
        x=alt.X("launch:N", title="launch id"), xOffset="measure:N",
        y=alt.Y("pct:Q", title="occupancy [% of max warps per SM]", scale=alt.Scale(domain=[0, 100])),
        color=alt.Color("measure:N", title=None), tooltip=["launch", "measure", alt.Tooltip("pct:Q", format=".1f")],
    ).properties(title="Occupancy: achieved, ncu theoretical, ours"), width="stretch")

st.subheader("Kernel detail")
kid_param = st.query_params.get("kernel")
kids = analyzed["id"].to_list()
try:
    default = kids.index(int(kid_param)) if kid_param is not None else 0
except ValueError:
    default = 0
names = dict(zip(kids, analyzed["kernel_name"].to_list()))
kid = st.selectbox("Launch", kids, index=default, format_func=lambda i: f"{i}: {names[i]}")
if st.query_params.get("kernel") != str(kid):
    st.query_params["kernel"] = str(kid)
metrics = data.run_table(root, run_id, "metrics").filter(pl.col("id") == kid)
flt = st.text_input("Filter metrics", value=st.query_params.get("q", ""), placeholder="e.g. dram__ or occupancy")
if flt != st.query_params.get("q", ""):
    if flt:
        st.query_params["q"] = flt
    elif "q" in st.query_params:
        del st.query_params["q"]
if flt:
    metrics = metrics.filter(pl.col("metric").str.contains(flt, literal=True))
st.dataframe(metrics.select("metric", "value", "unit", "text"), hide_index=True, width="stretch",
             column_config={"value": num("value (base units)"), "unit": "unit", "text": "text value"})
