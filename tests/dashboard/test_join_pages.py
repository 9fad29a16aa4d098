"""The Kernels and Timeline pages with an ncu run and a timeline of the same program (the H200
training step): the join is found without being asked, shown per launch, and the same on the page
and in its export; the Timeline's canvas colours each kernel by the bound of its matched ncu launch."""

from __future__ import annotations

import pytest

from tests.conftest import SAMPLES
from tests.dashboard.helpers import cards, component_data, decode_timeline, frames, open_page, texts
from dashboard.core.source import Source

pytest.importorskip("ncu_report")
HERE = SAMPLES / "h200" / "train_step"


@pytest.fixture
def env(tmp_path, monkeypatch):
    from collectors.store import Store
    from dashboard.web import store_access

    s = Store(tmp_path / "store")
    ids = {
        "ncu": Source(s).ingest_path(HERE / "train_step_ncu_nvtx.ncu-rep.gz")[0].run_id,
        "trace": Source(s).ingest_path(HERE / "train_step_trace.json.gz")[0].run_id,
    }
    monkeypatch.setenv("KERNELSCOPE_STORE", str(s.root))
    monkeypatch.setenv("KERNELSCOPE_SAMPLES", str(tmp_path / "none"))
    monkeypatch.delenv("KERNELSCOPE_TOKEN", raising=False)
    store_access.clear_caches()
    yield s, ids
    store_access.clear_caches()


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
    # the 15 backward kernels, said once
    assert "launched from another host thread" in t
    labels = [m.label for m in cards(at)]
    assert "launches per step" in labels and "time lost per step" in labels


def test_export_of_the_kernels_page_has_the_joined_table(env):
    from dashboard.web.reports import export_html

    s, ids = env
    html = export_html(Source(s), f"kernels?run={ids['ncu']}&kernel=7")
    assert "In the timeline of the same program" in html and "lost per step" in html


def test_timeline_page_gives_each_kernel_its_ncu_bound_and_detail(env):
    s, ids = env
    # the top-kernels section
    at = open_page("timeline", run=ids["trace"], show="kernels")
    assert not at.exception
    top = next(f for f in frames(at) if "ncu_bound" in f.columns)
    bound = {
        k: v for k, v in zip(top["kernel"].to_list(), top["ncu_bound"].to_list()) if v and v != "—"
    }
    assert (
        bound["nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_bias_TNT"] == "varies"
    )  # three GEMMs, bounds differ
    assert any(v == "launch" for v in bound.values())
    # the backward pass is not in the ncu window
    assert not any("Backward" in k for k in bound)
    links = [x for x in top["ncu_link"].to_list() if x]
    assert links and all(x.startswith(f"kernels?run={ids['ncu']}&kernel=") for x in links)


def test_a_wrong_trace_in_the_url_is_said_in_place(env):
    s, ids = env
    at = open_page("kernels", run=ids["ncu"], trace="ffffffffffffffff")
    assert not at.exception
    assert "Timeline `ffffffffffffffff`" in texts(at)


def _kernel_marks(head, arr, gpu_ops):
    """(gpu_ops row, its name, grid, bound) of every single kernel mark of a timeline payload."""
    k, src = head["kinds"].index("kernel"), head["srcs"].index("gpu_ops")
    out = []
    for i in range(len(arr["start"])):
        if arr["kind"][i] == k and arr["src"][i] == src and arr["row"][i] >= 0:
            r = gpu_ops.row(int(arr["row"][i]), named=True)
            b = arr["bound"][i]
            out.append(
                (
                    int(arr["row"][i]),
                    r["name"],
                    (r["grid_x"], r["grid_y"], r["grid_z"]),
                    None if b == 255 else head["legend"]["names"][b],
                )
            )
    return out


def test_timeline_colours_each_kernel_by_its_ncu_bound(env):
    from analyzers.join import BOUNDS

    s, ids = env
    at = open_page("timeline", run=ids["trace"])
    assert not at.exception
    head, arr = decode_timeline(component_data(at, "kernelscope.timeline")["bytes"])
    lg = head["legend"]
    assert head["color"] == "bound" and lg["ncu_run"] == ids["ncu"] and lg["names"] == list(BOUNDS)
    assert (
        set(lg["meanings"]) == set(BOUNDS)
        and "t_dram" in lg["meanings"]["dram"]
        and "70 %" in lg["meanings"]["dram"]
        and "counters" in lg["source"]
    )
    marks = _kernel_marks(head, arr, s.get(ids["trace"]).table("gpu_ops"))
    # 5 steps of 27 kernels, all judged
    assert len(marks) == 27 * 5 and all(b in BOUNDS for *_, b in marks)
    ncu = {r["id"]: r["bound"] for r in Source(s).ncu(ids["ncu"]).kernels.iter_rows(named=True)}

    def bounds(pred):
        return {b for _, name, grid, b in marks if pred(name, grid)}

    # the optimizer's big multi-tensor kernel (grid 261): DRAM-bound by its own counters (ncu launch
    # 11), in every one of the five steps, not only in the profiled step 6
    big = [b for _, n, g, b in marks if "multi_tensor_apply" in n and g == (261, 1, 1)]
    assert big == ["dram"] * 5 and ncu[11] == "dram"
    # one GEMM configuration is tensor-bound (launch 3), the other two launches of the kernel are
    # latency-bound
    assert (
        bounds(lambda n, g: n.startswith("nvjet") and "bias_TNT" in n and g == (2, 64, 1))
        == {ncu[3]}
        == {"tensor"}
    )
    assert bounds(lambda n, g: n.startswith("nvjet") and "bias_TNT" in n and g == (2, 66, 1)) == {
        "latency"
    }
    # the one-block fill kernel is shorter than its launch call in the trace: "launch", whatever ncu
    # says
    assert (
        bounds(lambda n, g: "FillFunctor" in n and g == (1, 1, 1)) == {"launch"}
        and ncu[9] == "latency"
    )
    # the backward pass ran on autograd's thread, outside ncu's NVTX range: not profiled
    assert bounds(lambda n, g: "backward" in n.lower()) == {"not profiled"}


def test_timeline_colour_choice_and_no_join(env):
    s, ids = env
    # the URL's choice; the legend stays offered
    at = open_page("timeline", run=ids["trace"], color="name")
    head, arr = decode_timeline(component_data(at, "kernelscope.timeline")["bytes"])
    assert head["color"] == "name" and head["legend"] and "bound" in {a[0] for a in head["arrays"]}
    at = open_page("timeline", run=ids["trace"], color="heat")
    head, _ = decode_timeline(component_data(at, "kernelscope.timeline")["bytes"])
    assert head["color"] == "bound" and "Unknown colouring `heat`" in texts(at)
    # no ncu run of the same program (the URL names one that is not in the store): coloured by name,
    # no legend
    at = open_page("timeline", run=ids["trace"], ncu="ffffffffffffffff")
    head, arr = decode_timeline(component_data(at, "kernelscope.timeline")["bytes"])
    assert head["color"] == "name" and head["legend"] is None and "bound" not in arr


def test_timeline_export_carries_the_bounds(env):
    import base64
    import re
    from dashboard.web.reports import export_html

    s, ids = env
    html = export_html(Source(s), f"timeline?run={ids['trace']}")
    data = base64.b64decode(re.search(r'atob\("([A-Za-z0-9+/=]+)"\)', html).group(1))
    head, arr = decode_timeline(data)
    assert head["color"] == "bound" and head["legend"]["ncu_run"] == ids["ncu"]
    marks = _kernel_marks(head, arr, s.get(ids["trace"]).table("gpu_ops"))
    assert {b for _, n, g, b in marks if "multi_tensor_apply" in n and g == (261, 1, 1)} == {"dram"}
    # the legend is drawn by the same canvas code
    assert "ks-tl-legend" in html
