"""Runs: upload artifacts and list the runs in the store."""
from __future__ import annotations

import streamlit as st

from collectors.errors import ArtifactError
from dashboard import data

PAGE_FOR_KIND = {"ncu": "kernels", "kineto": "timeline", "nsys": "timeline", "bench": "gpus"}

st.title("Kernelscope")
st.caption("GPU kernels measured (Nsight Compute, Nsight Systems, PyTorch profiler, microbenchmarks) "
           "next to what the hardware and the textbook predict.")
store = data.store()

with st.expander("Upload artifacts", expanded=not store.runs()):
    st.markdown(
        "Profile with `ncu --set full -o r ./app` and upload `r.ncu-rep` (or a CSV export: "
        "`ncu --import r.ncu-rep --page raw --csv > r.csv`), a PyTorch profiler trace (`.json`/`.json.gz`), "
        "or an Nsight Systems SQLite export (`nsys export --type sqlite r.nsys-rep`). "
        "For files larger than the upload limit run `kernelscope ingest FILE` on the server.")
    files = st.file_uploader("Artifacts", accept_multiple_files=True, key="uploads")
    for f in files or []:
        try:
            run, created = store.ingest_bytes(f.getvalue(), f.name)
        except ArtifactError as e:
            st.error(f"**{f.name}**: {e.problem}. Nothing was stored.")
            continue
        page = PAGE_FOR_KIND.get(run.kind, "runs")
        st.success(f"**{f.name}** → run `{run.run_id}` ({run.kind}, {'new' if created else 'already stored'}) — "
                   f"[open](/{page}?run={run.run_id})")

runs = data.runs_frame(store)
st.subheader(f"Runs ({runs.height})")
if runs.height == 0:
    st.info("The store is empty. Upload an artifact above, or run `kernelscope ingest sample_traces/`.")
else:
    import polars as pl
    view = runs.with_columns(
        open=pl.concat_str([pl.lit("/"), pl.col("kind").replace_strict(PAGE_FOR_KIND, default="runs"),
                            pl.lit("?run="), pl.col("run_id")]),
        size_mib=pl.col("size_bytes") / 2**20,
    ).select("open", "run_id", "kind", "source_name", "gpu_name", "items", "size_mib", "created")
    st.dataframe(view, hide_index=True, width="stretch", column_config={
        "open": st.column_config.LinkColumn("open", display_text="open"),
        "items": st.column_config.NumberColumn("kernels / results"),
        "size_mib": st.column_config.NumberColumn("artifact [MiB]", format="%.2f"),
        "created": st.column_config.TextColumn("stored (UTC)"),
    })
