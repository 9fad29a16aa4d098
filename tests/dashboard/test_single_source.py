"""Each number computed once: the CLI (JSON), the Streamlit page and the offline HTML export show
the same value for DRAM bandwidth and % of peak, bank-conflict degree, the biggest finding,
launch-delay median / p90, idle fraction and the best measured ceiling per GPU — on the real H200
samples and the recorded H200 bench run."""

from __future__ import annotations

from dataclasses import replace


import pytest

from tests.conftest import H200_KERNELS, H200_TORCH, SAMPLES
from tests.dashboard.helpers import component_data, frames, open_page
from tests.support.single_source import _cli, _export, _html_rows  # noqa: F401
from dashboard.core.source import Source

pytest.importorskip("ncu_report")
BENCH = SAMPLES / "h200" / "bench_suite" / "bench_nvidia-h200_06deee61.json.gz"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    from collectors.store import Store

    root = tmp_path_factory.mktemp("single") / "store"
    s = Store(root)
    ids = {
        "ncu": Source(s).ingest_path(H200_KERNELS / "full.ncu-rep.gz")[0].run_id,
        "trace": Source(s).ingest_path(H200_TORCH / "ffn_M1024_eager.json.gz")[0].run_id,
        "bench": Source(s).ingest_path(BENCH)[0].run_id,
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


def test_kernel_quantities_cli_page_export(env, capsys):
    """DRAM bandwidth, its % of the spec peak, the bank-conflict degree and the biggest finding with
    its estimated loss: analyzers.ncu_run computes them; the three surfaces show that value."""
    from dashboard.web.reports.kernels import KERNEL_COLS

    root, ids = env
    rep = _cli(capsys, "analyze", ids["ncu"], "--format", "json", "--store", str(root))
    cli = {k["id"]: k for k in rep["kernels"]}
    # the bench run's copy ceiling is used
    assert rep["measured_ceilings"]["dram"]["value"] > 4e12

    pairs = {
        "memory": [
            ("dram_bandwidth_gbps", "dram_bandwidth_gbps", 1),
            ("dram_peak_fraction", "dram_peak_fraction", 100),
            ("dram_measured_fraction", "dram_measured_fraction", 100),
        ],
        "shared": [("smem_conflict_degree", "smem_conflict_degree", 1)],
        "summary": [("lost_ns", "lost_ns", 1e-3), ("top_finding", "top_finding", None)],
    }
    for group, keys in pairs.items():
        # the page's table (the interactive table component) and the export show the same cells, one
        # column group
        at = open_page("kernels", run=ids["ncu"], cols=group, by="launch")
        assert not at.exception
        t = component_data(at, "kernelscope.table")
        order = [c["key"] for c in t["columns"]]
        page = {int(i): r for i, r in zip(t["ids"], t["rows"])}
        html = _export(root, f"kernels?run={ids['ncu']}&cols={group}&by=launch")
        exported = {int(r[0]): r for r in _html_rows(html, [c["header"] for c in t["columns"]][:3])}
        assert len(cli) == len(page) == len(exported) == 9
        for kid, c in cli.items():
            for cli_key, page_key, scale in keys:
                # the page's key is the analysis's; its column scales the analysis's value
                assert page_key == cli_key
                col = KERNEL_COLS[page_key]
                shown = col.format(c[cli_key])
                if scale not in (None, 1) and c[cli_key] is not None:
                    assert shown == replace(col, scale=None).format(c[cli_key] * scale)
                assert page[kid][order.index(page_key)] == shown, (kid, page_key)
                assert exported[kid][order.index(page_key)] == shown, (kid, page_key)
    # the stride-32 column read: 32-way conflicts, and the finding that names them
    assert cli[5]["smem_conflict_degree"] == pytest.approx(32.0, abs=0.2)
    assert "bank conflicts" in cli[5]["top_finding"]


def test_timeline_quantities_cli_page_export(env, capsys):
    """Launch-delay median and p90, and the idle fraction (analyzers.timeline.summarize)."""
    root, ids = env
    rep = _cli(capsys, "analyze", ids["trace"], "--format", "json", "--store", str(root))
    dev = rep["summary"]["devices"][0]

    at = open_page("timeline", run=ids["trace"])
    delays = open_page("timeline", run=ids["trace"], show="delays")
    assert not at.exception and not delays.exception
    by_cols = {tuple(f.columns): f for f in frames(at) + frames(delays)}
    # the page's tables carry the analysis's keys and values (analyzers.quantities.TIMELINE_QUANTITIES)
    summary = next(f for cols, f in by_cols.items() if "idle_fraction" in cols).row(0, named=True)
    stats = next(f for cols, f in by_cols.items() if "launch_delay_p90_ns" in cols).row(
        0, named=True
    )
    assert summary["idle_fraction"] == pytest.approx(dev["gpu_idle_fraction"], rel=1e-5)
    assert stats["launch_delay_median_ns"] / 1e3 == pytest.approx(
        dev["launch_delay_median_us"], abs=5e-4
    )
    assert stats["launch_delay_p90_ns"] / 1e3 == pytest.approx(dev["launch_delay_p90_us"], abs=5e-4)
    assert dev["launch_delay_median_us"] == pytest.approx(572.043) and dev[
        "gpu_idle_fraction"
    ] == pytest.approx(1 - 2_076_915 / 2_223_415, rel=1e-5)

    html = _export(root, f"timeline?run={ids['trace']}")
    row = _html_rows(html, ["rank", "device", "launch-bound?"])[0]
    assert row[7] == f"{dev['gpu_idle_fraction'] * 100:.1f}"
    srow = _html_rows(html, ["rank", "device", "kernels with their launch call"])[0]
    assert (
        srow[3] == f"{dev['launch_delay_median_us']:,.2f}"
        and srow[4] == f"{dev['launch_delay_p90_us']:,.2f}"
    )


def test_best_measured_ceiling_cli_page_export(env, capsys):
    """The best measured DRAM copy ceiling of the H200 (analyzers.ceilings.best_ceilings) on `gpus`,
    the GPUs page and its export."""
    root, ids = env
    rep = _cli(capsys, "gpus", "--format", "json", "--store", str(root))
    h200 = next(g for g in rep["gpus"] if g["name"] == "NVIDIA H200")
    best = h200["measured"]["dram"]["value"]
    assert 4.2e12 < best < 4.8e12 and ids["bench"] in h200["measured"]["dram"]["source"]

    at = open_page("gpus")
    assert not at.exception
    gpus = next(f for f in frames(at) if "dram_measured_gbps" in f.columns)
    assert gpus.filter(gpus["gpu"] == "NVIDIA H200")["dram_measured_gbps"][0] == pytest.approx(
        best / 1e9
    )

    html = _export(root, "gpus")
    row = next(r for r in _html_rows(html, ["GPU", "CC", "SMs"]) if r[0] == "NVIDIA H200")
    assert row[5] == f"{best / 1e9:,.0f}"
