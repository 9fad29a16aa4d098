"""`kernelscope compare` and the Compare page show one result (Source.compare); the Timeline page's
canvas data, click-through to the same kernel's Nsight Compute counters, and the Perfetto export;
all on the real H200 samples."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest

from tests.conftest import H200_KERNELS, H200_TORCH, SAMPLES
from tests.dashboard.helpers import (
    all_rows,
    cards as page_cards,
    component_data,
    decode_timeline,
    frames,
    open_page,
    shown,
    table_data,
    texts,
)
from dashboard.core.source import Source

pytest.importorskip("ncu_report")


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    from collectors.store import Store

    root = tmp_path_factory.mktemp("surfaces") / "store"
    s = Store(root)
    ids = {
        k: Source(s).ingest_path(p)[0].run_id
        for k, p in [
            ("basic", H200_KERNELS / "basic.ncu-rep.gz"),
            ("full", H200_KERNELS / "full.ncu-rep.gz"),
            ("tensor", SAMPLES / "h200" / "tensor_kernels" / "tensor_raw_base.csv.gz"),
            ("eager", H200_TORCH / "ffn_M1_eager.json.gz"),
            ("graph", H200_TORCH / "ffn_M1_graph.json.gz"),
            ("m1024", H200_TORCH / "ffn_M1024_eager.json.gz"),
        ]
    }
    return root, ids


@pytest.fixture
def env(store, monkeypatch, tmp_path):
    from dashboard.web import store_access

    root, ids = store
    monkeypatch.setenv("KERNELSCOPE_STORE", str(root))
    monkeypatch.setenv("KERNELSCOPE_SAMPLES", str(tmp_path / "none"))
    monkeypatch.delenv("KERNELSCOPE_TOKEN", raising=False)
    store_access.clear_caches()
    yield root, ids
    store_access.clear_caches()


def _cli(capsys, *argv):
    from dashboard.cli import main

    capsys.readouterr()
    rc = main(list(argv))
    return rc, capsys.readouterr()


def test_compare_ncu_cli_and_page_agree(env, capsys):
    root, ids = env
    rc, out = _cli(
        capsys, "compare", ids["basic"], ids["full"], "--format", "json", "--store", str(root)
    )
    assert rc == 0
    rep = json.loads(out.out)
    assert rep["kind"] == "ncu" and rep["related"]["related"] and len(rep["pairs"]) == 9
    pair5 = rep["pairs"][5]
    assert pair5["a_id"] == 5 and len(pair5["metrics"]) > 400
    moved = [m for m in pair5["metrics"] if m["status"] != "unchanged"]
    at = open_page("compare", a=ids["basic"], b=ids["full"], pair="5")
    assert not at.exception
    # the metric diff of pair 5: its first 50 rows
    part = table_data(at)[-1]
    assert len(part["rows"]) == 50 and part["total"] == len(pair5["metrics"])
    page = frames(all_rows(at))[-1]
    assert page.height == len(pair5["metrics"])
    first = page.row(0, named=True)
    assert (first["metric"], first["status"]) == (
        pair5["metrics"][0]["metric"],
        pair5["metrics"][0]["status"],
    )
    assert first["change_pct"] == pytest.approx(pair5["metrics"][0]["change_pct"])
    assert set(page.filter(pl.col("status") != "unchanged")["metric"]) == {
        m["metric"] for m in moved
    }
    kernels = frames(at)[0]
    assert kernels.height == 9 and sorted(kernels["status"]) == sorted(
        k["status"] for k in rep["kernels"]
    )
    rc, out = _cli(
        capsys, "compare", ids["basic"], ids["full"], "--pair", "5", "--store", str(root)
    )
    assert rc == 0 and "pair 5: A launch 5 vs B launch 5" in out.out and "noise [%]" in out.out


def test_compare_traces_by_their_statistics(env, capsys):
    root, ids = env
    rc, out = _cli(
        capsys, "compare", ids["eager"], ids["graph"], "--format", "json", "--store", str(root)
    )
    rep = json.loads(out.out)
    stats = {s["stat"]: s for s in rep["stats"]}
    assert stats["kernel_count"]["a"] == 120 and stats["kernel_count"]["b"] == 180
    assert (
        stats["kernel_count"]["threshold_pct"] == 0 and stats["kernel_count"]["status"] == "higher"
    )
    assert stats["gpu_idle_fraction"]["status"] == "lower" and stats["run_ns"]["status"] == "higher"
    # every row says its noise
    assert all(s["noise"] for s in rep["stats"])
    # graph-launched kernels have no launch latency (a replay is one call): B has no median, and the
    # row says so; HTA's launch delay is no row of Compare (issue 36: it read as a regression beside
    # a faster run)
    assert (
        stats["launch_latency_median_ns"]["b"] is None
        and stats["launch_latency_median_ns"]["status"] == "—"
    )
    assert "launch_delay_median_ns" not in stats
    assert stats["launches_per_step"]["a"] == 6 and stats["launches_per_step"]["b"] == 1
    assert any("Launch calls per step 6 → 1" in line for line in rep["story"])
    assert "too noisy to judge" in {k["status"] for k in rep["kernels"]}
    at = open_page("compare", a=ids["eager"], b=ids["graph"])
    # the statistics table (static)
    static = shown(at, "trace_stats")
    assert list(static["statistic"])[0].startswith("time per step") and "2.34 ms" in list(
        static["A"]
    )
    assert static["verdict"].to_list() == [stats[k]["status"] for k in stats]


def test_unrelated_runs_are_not_compared_by_default(env, capsys):
    root, ids = env
    at = open_page("compare")
    a, b = at.query_params["a"], at.query_params["b"]
    from collectors.store import Store

    src = Source(Store(root))
    assert src.compare(a, b).related["related"]
    # the tensor-core report shares no kernel with the chapter-5 reports: never a default partner of
    # theirs
    assert src.related_run(src.get(ids["tensor"])) is None
    at = open_page("compare", b=ids["tensor"])
    assert "No run in the store is related to B" in " ".join(w.value for w in at.warning)
    rc, out = _cli(capsys, "compare", ids["tensor"], ids["full"], "--store", str(root))
    assert rc == 0 and "WARNING: unrelated runs" in out.out
    rc, out = _cli(capsys, "compare", ids["eager"], ids["full"], "--store", str(root))
    assert rc == 1 and "cannot compare a kineto run" in out.err


def test_timeline_component_data_and_window_from_the_url(env):
    root, ids = env
    at = open_page("timeline", run=ids["m1024"])
    assert not at.exception
    head, arr = decode_timeline(component_data(at, "kernelscope.timeline")["bytes"])
    assert (
        head["detailed"]
        and head["t0"] == 0
        and head["t1"] == head["end"]
        and head["events"] == 35 + 37 + 40
    )
    assert [t["label"] for t in head["tracks"]] == ["GPU 0 · stream 7", "CPU thread 1172"]
    k = head["kinds"].index("kernel")
    kern = np.flatnonzero(arr["kind"] == k)
    # arrows to the CPU thread
    assert len(kern) == 25 and (arr["link_track"][kern] == 1).all()
    assert np.isfinite(arr["delay"][kern]).all() and (arr["launch"][kern] >= 0).all()
    # a zoomed window in the URL: only what overlaps it, and the click (op) comes back as the
    # selection
    t0, t1 = 2_000_000, 2_100_000
    at = open_page("timeline", run=ids["m1024"], t0=str(t0), t1=str(t1), op="gpu_ops:15")
    head, arr = decode_timeline(component_data(at, "kernelscope.timeline")["bytes"])
    assert (head["t0"], head["t1"]) == (t0, t1) and head["selected"] == {
        "src": "gpu_ops",
        "row": 15,
    }
    assert ((arr["end"] >= t0) & (arr["start"] <= t1)).all() and head["events"] < 112


def test_click_through_opens_the_kernel_and_its_ncu_counters(env):
    root, ids = env
    g = pl.read_parquet(next((root / "runs" / ids["m1024"]).glob("tables-v*/gpu_ops.parquet")))
    row = (
        g.with_row_index("r")
        .filter(pl.col("name").str.starts_with("nvjet"))
        .sort("launch_delay_ns", descending=True)["r"][0]
    )
    at = open_page("timeline", run=ids["m1024"], op=f"gpu_ops:{row}")
    t = texts(at)
    assert "Selected: `nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT`" in t
    cards = {m.label: m.value for m in page_cards(at)}
    assert cards["launch call"] == "cuLaunchKernelEx" and cards["launch delay"].endswith(
        "(over 100 µs)"
    )
    # the same kernel is in the tensor-core ncu report of the store (a 4096³ BF16 matmul): its
    # counters, linked
    assert (
        "Its Nsight Compute counters" in t
        and "tensor-core throughput-bound" in cards["biggest finding"]
    )
    link = shown(at, "ncu_matches")
    assert (
        link["matched by"][0] == "same name" and link["ncu report"][0] == "tensor_raw_base.csv.gz"
    )


def test_perfetto_export(env, tmp_path, capsys):
    root, ids = env
    out = tmp_path / "t.json"
    rc, _ = _cli(capsys, "export", ids["m1024"], "--perfetto", str(out), "--store", str(root))
    assert rc == 0
    doc = json.loads(out.read_text())
    ev = doc["traceEvents"]
    x = [e for e in ev if e["ph"] == "X"]
    assert len([e for e in x if e["cat"] == "kernel"]) == 25 and len(x) == 35 + 37 + 40
    starts = {e["id"]: e for e in ev if e["ph"] == "s"}
    finishes = {e["id"]: e for e in ev if e["ph"] == "f"}
    # one arrow per GPU op with a call
    assert starts.keys() == finishes.keys() and len(starts) == 35
    # a launch precedes its kernel
    assert all(starts[i]["ts"] <= finishes[i]["ts"] for i in starts)
    names = {e["args"]["name"] for e in ev if e["ph"] == "M"}
    assert "rank 0 · GPU 0 (NVIDIA H200)" in names and "stream 7" in names
    assert min(e["ts"] for e in x) == 0
    rc, err = _cli(capsys, "export", ids["full"], "--perfetto", str(out), "--store", str(root))
    assert rc == 1 and "not a PyTorch profiler trace" in err.err


def test_source_hotspots_cli_page_and_export_agree(env, capsys):
    root, ids = env
    rc, out = _cli(
        capsys, "hotspots", ids["full"], "--launch", "5", "--format", "json", "--store", str(root)
    )
    assert rc == 0
    rep = json.loads(out.out)
    assert rep["total_samples"] > 100_000 and rep["reasons"][0]["reason"] == "mio_throttle"
    at = open_page("kernels", run=ids["full"], kernel="5", show="source")
    hot = shown(at, "hot_sass")  # the page's SASS hot-spot table
    assert list(hot["SASS instruction"][:5]) == [r["sass"] for r in rep["rows"][:5]]
    assert list(hot["warp samples"][:5]) == [f"{r['samples']:,.0f}" for r in rep["rows"][:5]]
    from collectors.store import Store
    from dashboard.web.reports import export_html

    html = export_html(Source(Store(root)), f"kernels?run={ids['full']}&kernel=5")
    assert rep["rows"][0]["sass"] in html and "Where the warps waited" in html
    rc, out = _cli(capsys, "hotspots", ids["tensor"], "--store", str(root))
    assert rc == 1 and "no source-level data" in out.err  # a CSV export has none
