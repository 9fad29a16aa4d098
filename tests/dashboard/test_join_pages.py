"""The Kernels and Timeline pages with an ncu run and a timeline of the same program (the H200 training step):
the join is found without being asked, shown per launch, and the same on the page and in its export."""
from __future__ import annotations

import pytest

from tests.conftest import SAMPLES
from tests.dashboard.helpers import frames, open_page, texts

pytest.importorskip("ncu_report")
HERE = SAMPLES / "h200" / "train_step"


@pytest.fixture
def env(tmp_path, monkeypatch):
    from collectors.store import Store
    from dashboard import data
    s = Store(tmp_path / "store")
    ids = {"ncu": s.ingest_path(HERE / "train_step_ncu_nvtx.ncu-rep.gz")[0].run_id,
           "trace": s.ingest_path(HERE / "train_step_trace.json.gz")[0].run_id}
    monkeypatch.setenv("KERNELSCOPE_STORE", str(s.root))
    monkeypatch.setenv("KERNELSCOPE_SAMPLES", str(tmp_path / "none"))
    monkeypatch.delenv("KERNELSCOPE_TOKEN", raising=False)
    data.clear_caches()
    yield s, ids
    data.clear_caches()


def test_kernels_page_shows_the_timeline_of_the_same_program(env):
    s, ids = env
    at = open_page("kernels", run=ids["ncu"], kernel="7")
    assert not at.exception
    joined = next(f for f in frames(at) if "lost_step_us" in f.columns)
    assert joined.height == 12 and set(joined["confidence"]) == {"high"}
    lost = joined["lost_step_us"].to_list()
    assert lost == sorted(lost, reverse=True)
    t = texts(at)
    assert "In the timeline of the same program" in t and "ProfilerStep#6" in t
    assert "launched from another host thread" in t                     # the 15 backward kernels, said once
    labels = [m.label for m in at.metric]
    assert "launches per step" in labels and "time lost per step" in labels


def test_export_of_the_kernels_page_has_the_joined_table(env):
    from dashboard.reports import export_html
    from dashboard.source import Source
    s, ids = env
    html = export_html(Source(s), f"kernels?run={ids['ncu']}&kernel=7")
    assert "In the timeline of the same program" in html and "lost per step" in html


def test_timeline_page_gives_each_kernel_its_ncu_bound_and_detail(env):
    s, ids = env
    at = open_page("timeline", run=ids["trace"], show="kernels")            # the top-kernels section
    assert not at.exception
    top = next(f for f in frames(at) if "ncu_bound" in f.columns)
    bound = {k: v for k, v in zip(top["kernel"].to_list(), top["ncu_bound"].to_list()) if v and v != "—"}
    assert bound["nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_bias_TNT"] == "varies"     # three GEMMs, bounds differ
    assert any(v == "launch" for v in bound.values())
    assert not any("Backward" in k for k in bound)        # the backward pass is not in the ncu window
    links = [x for x in top["ncu_link"].to_list() if x]
    assert links and all(x.startswith(f"kernels?run={ids['ncu']}&kernel=") for x in links)


def test_a_wrong_trace_in_the_url_is_said_in_place(env):
    s, ids = env
    at = open_page("kernels", run=ids["ncu"], trace="ffffffffffffffff")
    assert not at.exception
    assert "Timeline `ffffffffffffffff`" in texts(at)
