"""Issue 44 on the pages and the command line: the compiled decode's Nsight Compute report (H100,
one token) with the trace of the same program and the H100's bench ceilings in the store.

- Kernels: the first screen says how far the run is from the textbook (the card and the sentence);
  the table has the model's verdict and the time to win, sorted by it; the "Against the textbook"
  section lists the work with the most to win (one row per kind of work); the launch detail gives
  the model's terms and how each parameter was inferred from the trace's shapes.
- `kernelscope analyze REPORT --trace TRACE --format json` carries the same models (one computation:
  the page's sentence is the JSON's).
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import SAMPLES
from tests.dashboard.helpers import cards as page_cards, component_data, open_page, texts
from dashboard.core.source import Source

LLM = SAMPLES / "llm_workloads"
BENCH = SAMPLES / "h100" / "bench_suite" / "bench_nvidia-h100-80gb-hbm3_8abb7767.json.gz"
NCU = LLM / "h100_schedule" / "decode_compile_token8.ncu-rep.gz"
TRACE = LLM / "h100_schedule" / "decode_compile.json.gz"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    pytest.importorskip("ncu_report")
    from collectors.store import Store

    root = tmp_path_factory.mktemp("tb") / "store"
    s = Store(root)
    Source(s).ingest_path(BENCH)
    ids = {
        "trace": Source(s).ingest_path(TRACE)[0].run_id,
        "ncu": Source(s).ingest_path(NCU)[0].run_id,
    }
    return root, ids


@pytest.fixture
def ids(store, monkeypatch, tmp_path):
    from dashboard.web import store_access

    root, ids = store
    monkeypatch.setenv("KERNELSCOPE_STORE", str(root))
    monkeypatch.setenv("KERNELSCOPE_SAMPLES", str(tmp_path / "no_samples"))
    store_access.clear_caches()
    yield ids
    store_access.clear_caches()


def test_kernels_page_judges_every_kernel_against_the_textbook(ids):
    at = open_page("kernels", run=ids["ncu"])
    assert not at.exception
    t = texts(at)
    c = {m.label: m.value for m in page_cards(at)}
    assert c["to win vs the textbook"].endswith("µs") and c["with a prediction"] == "100%"
    assert (
        "Against the textbook: 100% of the profiled kernel time carries the chapter's prediction"
        in t
    )
    assert (
        "with the shapes from the joined trace" in t
        and "most in attention (B1 H16 Lq1 Lk256 d128" in t
    )
    table = component_data(at, "kernelscope.table")
    keys = [col["key"] for col in table["columns"]]
    assert table["sort"] == "model_win_ns" and "model_verdict" in keys and "model_win_ns" in keys
    wins = [r[keys.index("model_win_ns")] for r in table["rows"]]
    nums = [float(w.replace(",", "")) for w in wins if w not in ("", "—", None)]
    assert nums == sorted(nums, reverse=True)
    assert "Model: t_pred = n·t0 + max(bytes ÷ DRAM bandwidth, FLOP ÷ compute peak)" in t
    assert "measured: dram_copy_bandwidth" in t


def test_launch_detail_gives_the_terms_and_how(ids):
    at = open_page("kernels", run=ids["ncu"], kernel="119", by="launch")
    t = texts(at)
    assert (
        "The textbook's model" in t
        and "**matrix multiply** (`tiling.traffic`), launched by `aten::mm`" in t
    )
    assert "M1 N32000 K2048, 2 B" in t and "aten::mm on [1, 2048] × [2048, 32000]" in t
    assert "Terms: n·t0" in t and "Traffic: DRAM" in t and "at the minimum" in t


def test_analyze_json_carries_the_same_models(store, ids):
    """The stored runs (a .ncu-rep file given by path is read again in its child process, 20 s for this one)."""
    from typer.testing import CliRunner

    from dashboard.cli import app_for

    root = str(store[0])
    argv = ["analyze", ids["ncu"], "--trace", ids["trace"], "--format", "json", "--store", root]
    r = CliRunner().invoke(app_for(argv), argv)
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    m = d["models"]
    assert m["coverage"] == pytest.approx(1.0) and 0.6 < m["shapes_ns"] / m["total_ns"] < 1
    first = {x["id"]: x for x in m["launches"]}[119]
    assert (first["params"]["M"], first["params"]["N"], first["params"]["K"]) == (1, 32000, 2048)
    assert first["how"]["M, N, K"].startswith("aten::mm on [1, 2048] × [2048, 32000]")
    k = {x["id"]: x for x in d["kernels"]}[119]
    assert k["model_class"] == "matrix multiply" and k["model_verdict"] in (
        "agrees",
        "slower than the model",
    )
    # without a trace: classes from the counters, nothing from shapes, said
    argv = ["analyze", ids["ncu"], "--format", "json", "--store", root]
    d2 = json.loads(CliRunner().invoke(app_for(argv), argv).stdout)["models"]
    assert (
        d2["shapes_ns"] == 0
        and d2["coverage"] == pytest.approx(1.0)
        and "no trace" in d2["notes"][0]
    )
