"""The Ranks page (heat map ranks x iterations, straggler table) and the History page (a kernel over
runs, ceilings over time, regressions) on real data: the CLI's JSON, the page and its offline export
show the same numbers."""

from __future__ import annotations

import gzip
import json

import pytest

from analyzers.errors import ParameterError, UnknownName
from tests.conftest import H200_TORCH, REPO, SAMPLES
from tests.dashboard.helpers import frames, open_page, texts, vega_specs
from tests.support.single_source import _cli, _export, _html_rows
from dashboard.core.source import Source

DLRM = REPO / "tests" / "corpus" / "param" / "dlrm_8rank"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """The 8-rank DLRM job as one run; the M=1 FFN trace stored three times as the same CI file, the
    last time 25 % slower (a regression) ; the two H200 bench runs."""
    from collectors.store import Store

    root = tmp_path_factory.mktemp("ranks") / "store"
    s = Store(root)
    ids = {"job": Source(s).ingest_path(DLRM)[0].run_id}
    t = json.loads(gzip.open(H200_TORCH / "ffn_M1_eager.json.gz").read())
    for i, f in enumerate((1.0, 1.005, 1.25)):
        u = json.loads(json.dumps(t))
        u["traceName"] = f"ci {i}"
        for e in u["traceEvents"]:
            if e.get("cat") == "kernel" and "nvjet" in e["name"]:
                e["dur"] = round(e["dur"] * f, 3)
        ids[f"ci{i}"] = Source(s).ingest_bytes(json.dumps(u).encode(), "ci_ffn.json")[0].run_id
    for p in sorted((SAMPLES / "h200x2" / "bench_suite").glob("bench_*.json.gz")):
        Source(s).ingest_path(p)
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


def test_ranks_page_cli_and_export_agree(env, capsys):
    root, ids = env
    rep = _cli(capsys, "analyze", ids["job"], "--format", "json", "--store", str(root))
    it = rep["iterations"][0]
    assert (it["straggler_rank"], it["cause"]) == (7, "host/launch")

    at = open_page("ranks", run=ids["job"])
    assert not at.exception, at.exception
    strag = next(f for f in frames(at) if "straggler_rank" in f.columns).row(0, named=True)
    assert (strag["step"], strag["straggler_rank"], strag["cause"]) == (10, 7, "host/launch")
    assert strag["job_ms"] == pytest.approx(it["job_ns"] / 1e6) and strag[
        "late_ms"
    ] == pytest.approx(it["lateness_ns"] / 1e6)
    ranks = next(f for f in frames(at) if "offset_us" in f.columns)
    assert ranks["rank"].to_list() == list(range(8)) and ranks["straggler_count"].to_list() == [
        0
    ] * 7 + [1]
    assert any("Iteration time per rank" in json.dumps(s) for s in vega_specs(at))
    from collectors.store import Store
    from dashboard.web.reports import build

    heat = (
        build(Source(Store(root)), "ranks", {"run": ids["job"]})
        .charts()["rank_heatmap"]
        .chart.to_dict()
    )
    cells = heat["datasets"][heat["data"]["name"]]
    assert len(cells) == 8 and {c["rank"] for c in cells if c["straggler"]} == {7}
    assert {c["rank"]: c["value"] for c in cells}[1] == pytest.approx(19.901)
    assert "collective instances left together: 8 of 8" in texts(at)

    html = _export(root, f"ranks?run={ids['job']}&metric=wait_ns")
    row = _html_rows(html, ["iteration", "ranks", "iteration time [ms]"])[0]
    assert row[5] == "7" and row[6] == "host/launch" and row[7] == f"{it['lateness_ns'] / 1e6:,.3f}"
    assert "Waiting for later ranks in collectives per rank and iteration" in html


def test_ranks_page_widgets_and_bad_links(env):
    from collectors.store import Store
    from dashboard.web.reports import build

    root, ids = env
    at = open_page("ranks", run=ids["job"], metric="nonsense")
    assert not at.exception and "No metric" in texts(at)
    at.selectbox[1].set_value("exposed_comm_ns").run()
    assert at.query_params["metric"] == "exposed_comm_ns"
    src = Source(Store(root))
    with pytest.raises(UnknownName, match="metric"):
        build(src, "ranks", {"run": ids["job"], "metric": "nonsense"})
    with pytest.raises(ParameterError, match="threshold"):
        build(src, "ranks", {"run": ids["job"], "threshold": "2"})
    # a 60 % tolerance: nobody makes the others wait that long
    rep = build(src, "ranks", {"run": ids["job"], "threshold": "0.6"})
    assert rep.tables()["stragglers"].frame["verdict"].to_list() == ["balanced"]


def test_history_page_cli_and_export_agree(env, capsys):
    root, ids = env
    cli = _cli(capsys, "query", "regressions", "--format", "json", "--store", str(root))[
        "regressions"
    ]
    # +25 %, not the +0.5 % before it
    assert {r["run_id"] for r in cli} == {ids["ci2"]}
    assert all(r["previous_run_id"] == ids["ci1"] for r in cli)
    # 2 nvjet kernels
    assert [r["change_pct"] for r in cli] == pytest.approx([100 * (1.25 / 1.005 - 1)] * 2, abs=0.01)
    kern = _cli(
        capsys, "query", "kernel", "nvjet_sm90_tst_64x8", "--format", "json", "--store", str(root)
    )["kernels"]
    assert [k["run_id"] for k in kern] == [ids["ci0"], ids["ci1"], ids["ci2"]]

    at = open_page("history", kernel="nvjet_sm90_tst_64x8")
    assert not at.exception, at.exception
    page_k = next(f for f in frames(at) if "median_us" in f.columns)
    assert sorted(page_k["median_us"].to_list()) == pytest.approx(
        sorted(k["median_ns"] / 1e3 for k in kern)
    )
    reg = next(f for f in frames(at) if "after_us" in f.columns)
    assert set(reg["run_id"]) == {ids["ci2"]} and reg.height == len(cli)
    ceil = next(f for f in frames(at) if "resource" in f.columns)
    assert set(ceil.filter(ceil["resource"] == "dram")["gpu"]) == {
        "NVIDIA H200 · GPU-1c9a41d8",
        "NVIDIA H200 · GPU-259bb68d",
    }
    assert any("over time" in json.dumps(s) for s in vega_specs(at))

    html = _export(root, "history?kernel=nvjet_sm90_tst_64x8&noise=30")
    # +25 % is inside a 30 % floor
    assert "No kernel is slower than in the previous run" in html
    with pytest.raises(ParameterError):
        _export(root, "history?noise=-1")
