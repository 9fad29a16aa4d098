"""Upload: several artifacts at once, with progress (each file's stages: received, inflating,
reading — launch k of n for a report —, analysing, storing), a result or an error per file, and a
link to each run.

A file that is not an artifact (wrong type, truncated, random bytes) or is above the upload cap is
named with the problem; nothing of it is stored. Results are kept per uploaded file for the session,
so a rerun does not ingest again.
"""

from __future__ import annotations

import os
import time

import streamlit as st

from analyzers.gpus import all_gpus
from collectors.errors import ArtifactError, StoreError
from collectors.progress import Step, reporting
from dashboard.web import store_access
from dashboard.web.reports.report_blocks import code
from dashboard.web.reports.run_links import link
from dashboard.web.pages import PAGE_FOR_KIND


def cap_bytes() -> int:
    """The upload cap: server.maxUploadSize (set by `kernelscope dashboard --max-upload-mb`), or a
    lower KERNELSCOPE_MAX_UPLOAD_MB."""
    mb = float(st.get_option("server.maxUploadSize"))
    env = os.environ.get("KERNELSCOPE_MAX_UPLOAD_MB")
    if env:
        try:
            mb = min(mb, float(env))
        except ValueError:
            pass
    return int(mb * 1e6)


store = store_access.store()
src = store_access.source()
st.title("Upload")
cap = cap_bytes()
st.markdown(
    "Drop one or several files:\n"
    "- Nsight Compute: `ncu --set full -o r ./app` → `r.ncu-rep`, or a CSV export "
    "(`ncu --import r.ncu-rep --page raw --csv > r.csv`);\n"
    "- PyTorch profiler traces (`.json`, `.json.gz`);\n"
    "- Nsight Systems: `nsys export --type sqlite r.nsys-rep` → `r.sqlite`;\n"
    "- `kernelscope bench` result files.\n\n"
    f"Files up to **{cap / 1e6:,.0f} MB**; for larger ones run `kernelscope ingest FILE` on the "
    "server (the store is shared, the run appears here)."
)
AUTO = "the GPU the file names (or infers)"
gpu_choice = st.selectbox(
    "GPU",
    [AUTO] + [g.name for g in all_gpus()],
    key="upload_gpu",
    help="For files that do not name their GPU (an ncu details-page CSV without its NUMA section, "
    "an old export, a trace without deviceProperties): the GPU they were recorded on. `kernelscope "
    "gpus` lists the specs.",
)
gpu = None if gpu_choice == AUTO else gpu_choice
files = st.file_uploader("Artifacts", accept_multiple_files=True, key="uploads")


def _stages(bar, name: str, i: int, n: int):
    """A progress sink (collectors.progress) that shows each stage of reading file i of n on the
    bar: received, inflating, reading (launch k of n for a report), analysing, storing; at most ten
    redraws a second."""
    last = {"t": 0.0, "stage": None}

    def show(step: Step) -> None:
        now = time.monotonic()
        if step.stage == last["stage"] and now - last["t"] < 0.1 and step.fraction != 1.0:
            return
        last.update(t=now, stage=step.stage)
        within = step.fraction or 0.0
        bar.progress(min(1.0, (i + within) / n), text=f"{name} ({i + 1} of {n}): {step.text()}")

    return show


done: dict = st.session_state.setdefault("ingested", {})
if files:
    bar = st.progress(0.0, text=f"0 of {len(files)} files")
    for i, f in enumerate(files):
        key = (f.file_id, f.name, f.size, gpu)
        if key not in done:
            bar.progress(i / len(files), text=f"Reading {f.name} ({i + 1} of {len(files)})")
            if f.size > cap:
                done[key] = (
                    "error",
                    f"{f.size / 1e6:,.1f} MB is above this server's upload cap of {cap / 1e6:,.0f} "
                    "MB. Copy it to the server and run `kernelscope ingest FILE`.",
                )
            else:
                try:
                    show = _stages(bar, f.name, i, len(files))
                    show(Step("received", f.size, None, "B"))
                    # a bound on the parses running at once
                    with store_access.PARSE_SLOTS, reporting(show):
                        run, created = src.ingest_bytes(f.getvalue(), f.name, gpu=gpu)
                    done[key] = (
                        "ok",
                        run.run_id,
                        run.kind,
                        created,
                        tuple(run.meta.get("warnings") or ()),
                    )
                except ArtifactError as e:
                    done[key] = ("error", f"{e.problem}.")
                except StoreError as e:
                    done[key] = ("error", f"the store could not be written ({e.problem}).")
        res = done[key]
        if res[0] == "ok":
            _, rid, kind, created, warnings = res
            page = PAGE_FOR_KIND.get(kind, "runs")
            st.success(
                f"{code(f.name)} → run `{rid}` ({kind}, {'new' if created else 'already stored'}) "
                f"— [open]({link(page, run=rid)})"
            )
            for w in warnings:
                st.warning(f"{code(f.name)}: {w}")
        else:
            st.error(f"{code(f.name)}: {res[1]} Nothing was stored.")
    ok = sum(1 for f in files if done[(f.file_id, f.name, f.size, gpu)][0] == "ok")
    bar.progress(
        1.0, text=f"{len(files)} of {len(files)} files: {ok} stored, {len(files) - ok} refused"
    )
st.caption(f"Store: {len(store.runs())} runs. All of them: [Runs](runs).")
