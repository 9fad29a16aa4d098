"""Issue 37, the pages on the project's recorded LLM workloads (sample_traces/llm_workloads): the
story first.

- Timeline of the eager decode: the verdict (launch-bound), the time per step and the estimated gain
  of capturing the step as a CUDA graph (analyzers.remedy) come before the timeline itself.
- Kernels of the compiled decode's Nsight Compute report: one row per kernel by default (32 rows for
  122 launches), the run's story (kernel time, what can be won, the Speed-of-Light split), launches
  one click away (?by=launch).
- Home: the newest traces' verdicts and remedies; the opportunities name distinct kernels.
- The page's numbers are the analyzers' (the remedy sentence is analyzers.remedy.remedy_sentence of
  the summary).
"""

from __future__ import annotations

import os

import pytest

from tests.conftest import SAMPLES
from tests.dashboard.helpers import (
    cards as page_cards,
    component_data,
    frames,
    open_page,
    texts,
    vega_specs,
)
from dashboard.core.source import Source

LLM = SAMPLES / "llm_workloads"


@pytest.fixture(scope="module")
def llm_store(tmp_path_factory):
    pytest.importorskip("ncu_report")
    from collectors.store import Store

    root = tmp_path_factory.mktemp("llm") / "store"
    s = Store(root)
    ids = {
        n: Source(s).ingest_path(LLM / "h100" / f"{n}.json.gz")[0].run_id
        for n in ("decode_eager", "decode_graph")
    }
    ids["ncu"] = (
        Source(s).ingest_path(LLM / "h100_schedule" / "decode_compile_token8.ncu-rep.gz")[0].run_id
    )
    return root, ids


@pytest.fixture
def ids(llm_store, monkeypatch, tmp_path):
    from dashboard.web import store_access

    root, ids = llm_store
    monkeypatch.setenv("KERNELSCOPE_STORE", str(root))
    monkeypatch.setenv("KERNELSCOPE_SAMPLES", str(tmp_path / "no_samples"))
    store_access.clear_caches()
    yield ids
    store_access.clear_caches()


def test_eager_decode_timeline_leads_with_verdict_step_time_and_the_graph_estimate(ids):
    from analyzers.remedy import remedy_sentence
    from collectors.store import Store

    at = open_page("timeline", run=ids["decode_eager"])
    assert not at.exception
    t = texts(at)
    verdict = t.index("launch-bound** (rank 0, GPU 0)")
    assert verdict < t.index("Main remedy: capture the step as a CUDA graph")
    c = {m.label: m for m in page_cards(at)}
    assert c["time per step"].value == "10.9 ms" and c[
        "with a CUDA graph (model)"
    ].value.startswith("≈ 1.4")
    assert c["with a CUDA graph (model)"].delta.startswith("−9.")
    store = Store(os.environ["KERNELSCOPE_STORE"])
    s = Source(store).trace(store.get(ids["decode_eager"])).summary
    # the analyzers' sentence, as computed there
    assert remedy_sentence(s.remedy).split(" Model:")[0] in t


def test_graph_decode_timeline_says_the_gain_is_a_bound(ids):
    at = open_page("timeline", run=ids["decode_graph"])
    c = {m.label: m for m in page_cards(at)}
    assert c["with no gaps (bound)"].value.startswith("≥ ")
    assert "a bound" in texts(at)


def test_kernels_page_one_row_per_kernel_and_its_story(ids):
    at = open_page("kernels", run=ids["ncu"])
    assert not at.exception
    table = component_data(at, "kernelscope.table")
    # sorted by the time to win against the textbook's model (issue 44), largest first
    assert len(table["rows"]) == 32 and table["sort"] == "model_win_ns" and table["desc"] is True
    heads = [c["header"] for c in table["columns"]]
    assert heads[:6] == [
        "kernel",
        "grid · block",
        "launches",
        "total [µs]",
        "share [%]",
        "median [µs]",
    ]
    assert sum(int(r[heads.index("launches")]) for r in table["rows"]) == 122
    c = {m.label: m.value for m in page_cards(at)}
    assert c["kernel time"] == "864 µs" and c["can be won (findings)"].endswith("%)")
    assert c["to win vs the textbook"].endswith("µs")
    assert "122 profiled launches of 32 kernels" in texts(at)
    # the selected row is the first (the most time to win against the model), its longest launch
    # opens below
    assert table["selected"] == table["ids"][0]
    # a name shared by kernels of other launch configurations stays apart, and long names are one
    # line, shortened
    names = [r[0] for r in table["rows"]]
    assert (
        len(set(zip(names, (r[1] for r in table["rows"])))) == 32
        and max(len(n) for n in names) <= 57
    )
    assert {c["key"]: c["cls"] for c in table["columns"]}["kernel"] == "name" and table["full"]
    launches = component_data(
        open_page("kernels", run=ids["ncu"], by="launch"), "kernelscope.table"
    )
    # sent in pages of 50
    assert launches["total"] == 122 and len(launches["rows"]) == 50


def test_roofline_rings_the_launch_the_page_shows(ids):
    at = open_page("kernels", run=ids["ncu"], kernel="3", show="charts", by="launch")
    specs = vega_specs(at)
    roof = next(
        s
        for s in specs
        if str(s.get("title", "")).startswith("Hierarchical roofline")
        or str(s.get("title", "")).startswith("Instruction roofline")
    )
    ring = [
        layer
        for layer in roof["layer"]
        if any(
            t.get("title") == "selected launch"
            for t in layer.get("encoding", {}).get("tooltip", [])
        )
    ]
    assert ring and any(
        s.get("title", "") == "Speed of Light of the kernels with the most time"
        or (isinstance(s.get("title"), dict) and "Speed of Light" in s["title"].get("text", ""))
        for s in specs
    )


def test_home_tells_each_trace_its_remedy_and_lists_distinct_kernels(ids):
    at = open_page(None)
    assert not at.exception
    stories = next(f for f in frames(at) if "verdict" in f.columns)
    row = {r["run"]: r for r in stories.iter_rows(named=True)}
    assert row["decode_eager.json.gz"]["verdict"] == "launch-bound"
    assert row["decode_eager.json.gz"]["remedy"] == "capture the step as a CUDA graph"
    assert (
        1.2
        < row["decode_eager.json.gz"]["after_ms"]
        < 1.7
        < 10
        < row["decode_eager.json.gz"]["step_ms"]
    )
    top = next(f for f in frames(at) if "finding" in f.columns)
    # never the same kernel twice: a name with another grid is another kernel, and says so
    assert (
        top.select("kernel", "config").unique().height == top.height == 5
        and (top["launches"] >= 1).all()
    )
    assert not any(("0%" in f or "0 %" in f) and "10" not in f for f in top["finding"].to_list())


def test_every_metric_carries_nsight_computes_own_label(ids):
    from collectors.ncu import _labels, metric_labels

    at = open_page("kernels", run=ids["ncu"], show="metrics", q="duration")
    table = next(f for f in frames(at) if "label" in f.columns and "metric" in f.columns)
    row = table.filter(table["metric"] == "gpu__time_duration.sum").row(0, named=True)
    assert row["label"] == "Duration" and row["section"] == "GPU Speed Of Light Throughput"
    # the label table keeps its own shape: (section, body, label) -> metric, for the readers of CSV
    # exports
    assert (
        all(isinstance(k, tuple) and len(k) == 3 for k in list(_labels())[:5]) and metric_labels()
    )
