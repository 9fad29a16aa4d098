"""The Timeline dashboard page, driven headless with streamlit's AppTest."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.dashboard.helpers import cards, dataframes
from streamlit.testing.v1 import AppTest

from tests.conftest import H200_TORCH, SHARED_NSYS
from dashboard.core.source import Source

PAGE = str(Path(__file__).resolve().parents[2] / "dashboard" / "web" / "views" / "timeline.py")


def _page(run_id: str, **params) -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=60)
    at.query_params["run"] = run_id
    for k, v in params.items():
        at.query_params[k] = v
    return at.run()


def _texts(at) -> str:
    parts = (
        [m.value for m in at.markdown]
        + [c.value for c in at.caption]
        + [s.value for s in at.subheader]
    )
    return "\n".join(str(p) for p in parts)


def test_page_rebuilds_from_the_url(store):
    run, _ = Source(store).ingest_path(H200_TORCH / "ffn_M1024_eager.json.gz")
    Source(store).ingest_path(H200_TORCH / "triton_add_x300.json.gz")
    at = _page(run.run_id, kernel="nvjet", speedup="2")
    assert not at.exception
    assert at.selectbox[0].value == run.run_id
    text = _texts(at)
    assert "NVIDIA H200" in text and "Run time **2.302 ms**" in text and "epoch" not in text
    # times relative to the trace, no raw epoch ns
    assert not re.search(r"\b\d{13,}\b", text)
    # where the time goes, with evidence
    assert "**GPU-bound**" in " ".join(s.value for s in at.success)
    assert "ui.perfetto.dev" in text and str(run.artifact_path) in text
    assert "Click an event on the timeline" in text
    summary = dataframes(at)[0]
    assert summary["kernel_count"].to_list() == [25] and summary["verdict"].to_list() == [
        "not launch-bound"
    ]
    # one section at a time below the timeline, each from the URL
    text = _texts(_page(run.run_id, show="delays"))
    # the delays over 100 µs are named
    assert "Launch delay" in text and "longest delay first" in text
    assert "GPU idle gaps per stream" in _texts(_page(run.run_id, show="idle"))
    at = _page(run.run_id, kernel="nvjet", speedup="2", show="whatif")
    assert at.text_input[0].value == "nvjet" and at.number_input[0].value == 2.0
    metrics = {m.label: m.value for m in cards(at)}
    assert {
        k: metrics[k] for k in ("measured run time", "what-if (trace dependencies)", "Amdahl")
    } == {
        "measured run time": "2.302 ms",
        "what-if (trace dependencies)": "1.417 ms",
        "Amdahl": "1.345 ms",
    }
    assert metrics["time per step"] == "422 µs"  # the steps come first (the story, issue 36)


def test_widget_changes_go_back_to_the_url(store):
    run, _ = Source(store).ingest_path(H200_TORCH / "triton_add_x300.json.gz")
    at = _page(run.run_id, show="whatif")
    assert at.query_params["kernel"] == "add_kernel"  # defaults written back
    at.text_input[0].set_value("add").run()
    at.number_input[0].set_value(4.0).run()
    assert at.query_params["kernel"] == "add" and at.query_params["speedup"] == "4"
    metrics = {m.label: m.value for m in cards(at)}
    assert (
        metrics["what-if (trace dependencies)"] == metrics["measured run time"] == "7.504 ms"
    )  # launch-bound
    # nothing changes: no red arrow for a change of 0.000 ms
    assert next(m for m in cards(at) if m.label.startswith("what-if")).delta is None
    assert "**launch-bound**" in " ".join(w.value for w in at.warning)
    at.text_input[0].set_value("(").run()
    assert any("invalid kernel regex" in e.value for e in at.error)


def test_unknown_run_and_empty_store(store):
    at = _page("doesnotexist")
    assert not at.exception and any("No PyTorch profiler traces" in i.value for i in at.info)
    Source(store).ingest_path(H200_TORCH / "ffn_M1_graph.json.gz")
    at = _page("doesnotexist")
    assert not at.exception and any("No trace run" in e.value for e in at.error)


@pytest.mark.shared_data
def test_page_with_two_devices(store):
    run, _ = Source(store).ingest_path(SHARED_NSYS / "mfu_2gpu_before.sqlite")
    at = _page(run.run_id, device="1:1", kernel="flash", speedup="2")
    assert not at.exception
    assert at.selectbox[1].value == "1:1"
    assert dataframes(at)[0]["device"].to_list() == [1]
    assert "an nsys SQLite export has no Perfetto reader of its own" in _texts(at)


def test_graph_trace_page_says_steps_and_replays_not_launch_delays(store):
    """Issue 36: a CUDA-graph replay trace shows its time per step, launch calls per step and
    integrity first; no graph kernel is given a launch delay or called launch-bound."""
    run, _ = Source(store).ingest_path(H200_TORCH / "ffn_M1_graph.json.gz")
    at = _page(run.run_id)
    assert not at.exception
    metrics = {m.label: m.value for m in cards(at)}
    assert metrics["time per step"] == "261 µs" and metrics["launch calls per step"] == "1"
    text = _texts(at)
    assert "Steps from CUDA-graph replays (one step each)" in text
    assert "Integrity: all" in text
    assert "**GPU-bound**" in " ".join(s.value for s in at.success)
    assert "10 graph replays ran 180 kernels" in " ".join(s.value for s in at.success)
    charts = [c for c in at.get("vega_lite_chart")]
    assert any("Time per step" in c.proto.spec for c in charts)
