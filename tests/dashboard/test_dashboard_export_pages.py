"""The offline HTML export of the Timeline, Textbook cases and Claims pages: each page's own share
link is exported, and the file holds the numbers the page shows (with units and sources), nothing
from the network."""

from __future__ import annotations

import html as htm
import re

import pytest
from streamlit.testing.v1 import AppTest

from analyzers.cases import evaluate
from collectors.store import Store
from dashboard.core.source import Source
from tests.conftest import H200_TORCH, REPO, SAMPLES
from tests.dashboard.helpers import cards, dataframes, parse_cards, share_link, texts, walk

BENCH = (
    SAMPLES / "h200" / "bench_suite" / "bench_nvidia-h200_06deee61.json.gz"
)  # the recorded H200 bench run
VIEWS = REPO / "dashboard" / "web" / "views"


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    """Two real PyTorch profiler traces and the recorded H200 bench run (its launch floor, its case results)."""
    from collectors.store import Store

    root = tmp_path_factory.mktemp("export_pages") / "store"
    s = Store(root)
    ids = {
        key: Source(s).ingest_path(p)[0].run_id
        for key, p in [
            ("m1024", H200_TORCH / "ffn_M1024_eager.json.gz"),
            ("add", H200_TORCH / "triton_add_x300.json.gz"),
            ("bench", BENCH),
        ]
    }
    return root, ids


@pytest.fixture
def wired(env, monkeypatch):
    """The module's store behind the pages (KERNELSCOPE_STORE), with fresh caches."""
    from dashboard.web import store_access

    monkeypatch.setenv("KERNELSCOPE_STORE", str(env[0]))
    store_access.clear_caches()
    yield env
    store_access.clear_caches()


def _export(root, target: str) -> str:
    from collectors.store import Store
    from dashboard.web.reports import export_html

    text = export_html(Source(Store(root)), target)
    # one self-contained file: no script or stylesheet loaded from anywhere
    assert text.startswith("<!DOCTYPE html>")
    assert all("src=" not in s for s in re.findall(r"<script\b[^>]*>", text, flags=re.I))
    assert not re.search(
        r"<(script|link|img|iframe)[^>]+(src|href)\s*=\s*[\"']?https?:", text, flags=re.I
    )
    return text


def _page(name: str, **params) -> AppTest:
    at = AppTest.from_file(str(VIEWS / f"{name}.py"), default_timeout=60)
    for k, v in params.items():
        at.query_params[k] = v
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    # the sidebar's offline copy
    assert any(e.type == "download_button" for e in walk(at._tree))
    return at


def test_timeline_export_shows_what_the_page_shows(wired):
    root, ids = wired
    at = _page("timeline", run=ids["m1024"], kernel="nvjet", speedup="2", show="whatif")
    # the page's default section
    devices = _page("timeline", run=ids["m1024"], kernel="nvjet", speedup="2")
    link = share_link(at)
    assert link == f"/timeline?run={ids['m1024']}&kernel=nvjet&speedup=2&show=whatif"
    html = _export(root, f"http://gpu-server:8501{link}&token=hunter2")
    assert "hunter2" not in html and "ffn_M1024_eager.json.gz" in html and "NVIDIA H200" in html
    # the what-if, with the change against the measured run time
    shown = {m.label: m.value for m in cards(at)}
    assert {
        k: shown[k] for k in ("measured run time", "what-if (trace dependencies)", "Amdahl")
    } == {
        "measured run time": "2.302 ms",
        "what-if (trace dependencies)": "1.417 ms",
        "Amdahl": "1.345 ms",
    }
    # the export's cards are the page's: labels, values, help and the change with its colour (lower
    # is better)
    exported = [(c.label, c.value, c.help, c.delta, c.direction) for c in parse_cards(html)]
    assert exported == [(c.label, c.value, c.help, c.delta, c.direction) for c in cards(at)]
    assert ("what-if (trace dependencies)", "-0.885 ms", "good") in [
        (c.label, c.delta, c.direction) for c in cards(at)
    ]
    assert "kernels match <code>nvjet</code>" in html
    # the per-device summary: same verdict and numbers, headers with units and definitions as help
    summary = dataframes(devices)[0].iloc[0]
    assert (summary["verdict"], summary["kernel_count"]) == ("not launch-bound", 25)
    assert (
        "<td>not launch-bound</td>" in html
        and f'<td class="n">{summary["busy_ns"] / 1e6:.3f}</td>' in html
    )
    for header in (
        "busy [ms]",
        "idle of window [%]",
        "median [µs]",
        "queue median [µs]",
        "share of busy time [%]",
    ):
        assert f">{header}</th>" in html
    assert 'title="length of the union of kernel, memcpy and memset intervals' in html
    # the launch floor measured by the recorded bench run on the same GPU, on the page and in the
    # file
    assert "Launch floor 6.5 µs per kernel" in texts(devices)
    assert "Launch floor 6.5 µs per kernel" in html
    assert "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT" in html  # the top kernel
    assert (
        html.count('<div class="chart"') == 4
        and "Time per step (bar)" in html
        and "Launch delay per kernel (HTA definition)" in html
    )
    # the definitions
    assert "ui.perfetto.dev" in html


def test_timeline_export_of_a_run_id(env, tmp_path):
    from dashboard.cli import main

    root, ids = env
    out = tmp_path / "t.html"
    assert main(["export", ids["add"][:8], "--html", str(out), "--store", str(root)]) == 0
    html = out.read_text(encoding="utf-8")
    assert "<td>launch-bound</td>" in html and "triton_add_x300.json.gz" in html
    # the default: the kernel with the most time
    assert "kernels match <code>add_kernel</code>" in html
    # launch-bound: faster kernels do not help
    assert [c.value for c in parse_cards(html)].count("7.504 ms") == 2


def test_cases_export_shows_what_the_page_shows(wired):
    root, ids = wired
    at = _page("cases", case="tiling.traffic", gpu="H200")
    link = share_link(at)
    assert link == "/cases?case=tiling.traffic&gpu=NVIDIA+H200"
    html = _export(root, link)
    assert "Case <code>tiling.traffic</code> on NVIDIA H200" in html
    # parameters (the same table on the page until "Edit parameters") and every prediction with its
    # unit
    assert "<td>M</td><td>1024</td>" in html and "<td>elem</td><td>2</td><td>B</td>" in html
    shown = next(d for d in dataframes(at) if "parameter" in d.columns)
    for _, r in shown.iterrows():
        assert f"<td>{r['parameter']}</td><td>{htm.escape(r['value'])}</td>" in html
    df = next(d for d in dataframes(at) if "quantity" in d.columns)
    preds = dict(zip(df["quantity"], df["value"]))
    # the store holds the recorded H200 bench run: the rates are its measured ceilings, the time a
    # predicted estimate
    assert preds["traffic"] == "3096 MiB" and preds["time_bound"] == "104.2 µs"
    assert (
        preds["time"]
        == evaluate(
            "tiling.traffic", "H200", ceilings=Source(Store(root)).best_ceilings("NVIDIA H200")
        )["time"].display
    )
    for q, v in preds.items():
        assert f"<td>{q}</td><td>{htm.escape(v)}</td>" in html
    assert (
        "Rates from the store&#x27;s measured ceilings of this GPU" in html
        and "dram_copy_bandwidth" in html
    )
    assert (
        "What each predicted time is made of" in html
        and "<td>latency (Little&#x27;s law)</td>" in html
    )
    assert html.count('<div class="chart"') == 1 and "traffic vs square tile size" in html
    # the stored bench measurements, each judged at its own parameters (the bench run's verdicts)
    measured = next(d for d in dataframes(at) if "verdict" in d.columns)
    # 3 times, 3 L2 reads, 3 occupancies, 2 time ratios
    assert {"agrees", "differs-unexplained"} <= set(measured["verdict"]) and len(measured) == 11
    for _, r in measured.iterrows():
        assert f"bench run {ids['bench']}" in r["source"]
        row = "".join(
            f"<td>{htm.escape(r[c])}</td>"
            for c in ("metric", "parameters", "predicted", "measured", "source", "verdict")
        )
        assert row in html
    assert "time (FP32 CUDA cores)" in html


def test_cases_export_with_measurements_in_the_url(env):
    root, _ = env
    html = _export(
        root,
        "cases?case=fusion.activation_chain&meas=unfused_time:14.2:µs&meas=fused_time:50:µs&meas=bad",
    )
    ev = evaluate("fusion.activation_chain")
    un, fu = ev["unfused_time"].display, ev["fused_time"].display
    assert (
        f"<td>unfused_time</td><td>{un}</td><td>14.2 µs</td><td>entered on this page</td>" in html
    )
    assert (
        "<td>differs-unexplained</td>" in html
        and f"<td>fused_time</td><td>{fu}</td><td>50 µs</td>" in html
    )
    assert "Ignored measurement <code>bad</code>" in html
    # impossible parameters: the error only
    html = _export(root, "cases?case=tiling.traffic&m=4096")
    assert (
        "tile m=4096 is larger than the matrix (M=1024)" in html
        and '<div class="chart"' not in html
    )


def test_claims_export_shows_what_the_page_shows(wired):
    from analyzers.cases import claims

    root, _ = wired
    at = _page("claims", verdict=["refuted", "unit-error"], claim="bank.tile_width_rule")
    link = share_link(at)
    assert link == "/claims?verdict=refuted&verdict=unit-error&claim=bank.tile_width_rule"
    html = _export(root, link)
    table = dataframes(at)[0]
    assert set(table["verdict"]) == {"refuted", "unit-error"} and "triton.a100_matmul_rate" in set(
        table["id"]
    )
    for _, r in table.iterrows():
        assert f"<td>{r['id']}</td><td>{r['verdict']}</td>" in html
    assert "a10g.mma_sync_tflops" not in html  # above-peak: filtered out
    assert f"{len(table)} of {len(claims())} claims; verdicts refuted, unit-error" in html
    # the claim in detail: quotation, verdict, the computed table
    assert "<h2>bank.tile_width_rule</h2>" in html and "<blockquote>" in html
    assert (
        "<strong>refuted</strong>" in html
        and ">degree</th>" in html
        and "<td>bank_rule</td>" in html
    )
    assert list(dataframes(at)[2]["degree"]) == [1, 32, 1]


def test_export_names_the_problem_instead_of_falling_back(env, tmp_path, capsys):
    from dashboard.cli import main

    root, ids = env
    out = tmp_path / "x.html"
    for target, message in [
        ("cases?case=no.such.case", "no textbook case 'no.such.case'"),
        (
            "cases?case=tiling.traffic&gpu=Voodoo+5",
            "no GPU 'Voodoo 5' (`kernelscope gpus` lists the registry)",
        ),
        ("claims?claim=no.such.claim", "no claim 'no.such.claim'"),
        ("timeline?run=ffffffffffff", "no run 'ffffffffffff'"),
        (
            f"timeline?run={ids['bench']}",
            f"run {ids['bench']} is a bench run, not a PyTorch profiler trace",
        ),
        (
            f"timeline?run={ids['m1024']}&device=3:1",
            f"no device '3:1' (run {ids['m1024']} has rank:device all, 0:0)",
        ),
    ]:
        assert main(["export", target, "--html", str(out), "--store", str(root)]) == 1, target
        assert message in capsys.readouterr().err, target
    assert not out.exists()


def test_claims_show_the_bench_ceilings_they_name(wired, tmp_path):
    """Claims whose check names a bench ceiling carry the recorded H200 value (page and export
    alike); a store without bench runs gives none."""
    import json as _json

    from collectors.store import Store
    from analyzers.cases.claims import CLAIM_CEILINGS
    from tests.support.samples import H200

    root, ids = wired
    ceilings = {
        c["metric"]: c["value"]
        for c in _json.loads(__import__("gzip").open(H200).read())["ceilings"]
    }
    got = Source(Store(root)).claim_measurements()
    assert set(got) == {
        "triton.a100_matmul_rate",
        "a10g.memory_spec",
        "a10g.bandwidth_fractions",
        "a10g.coalescing_utilisation",
        "headline.bandwidth",
        "a10g.mma_sync_tflops",
        "graph.solidification_dispatch",
    }
    for m in got.values():
        assert (
            m.gpu == "NVIDIA H200" and m.value == ceilings[m.quantity] and ids["bench"] in m.source
        )
        assert m.quantity in CLAIM_CEILINGS.values()
    assert (
        got["a10g.memory_spec"].unit == "B/s" and got["graph.solidification_dispatch"].unit == "s"
    )
    html = _export(root, "claims?claim=a10g.memory_spec")
    from analyzers.units import fmt

    assert f"measured {fmt(ceilings['dram_copy_bandwidth'], 'B/s')} on NVIDIA H200" in htm.unescape(
        html
    )
    at = _page("claims", claim="a10g.memory_spec")
    assert any("on NVIDIA H200 (kernelscope bench run" in m.value for m in at.markdown)
    assert Source(Store(tmp_path / "empty")).claim_measurements() == {}


def test_an_export_with_chinese_text_embeds_the_cjk_font(tmp_path):
    """The Claims page quotes the seed in Chinese: its export carries the bundled CJK subset (SIL
    OFL) as data, other exports do not pay for it."""
    from collectors.store import Store
    from dashboard.web.reports import export_html

    src = Source(Store(tmp_path / "s"))
    claims = export_html(src, "claims?claim=triton.a100_matmul_rate")
    assert (
        "纯Triton" in claims
        and "font-family: 'Kernelscope CJK'" in claims
        and "data:font/woff2;base64," in claims
    )
    assert "data:font/woff2" not in export_html(src, "gpus")
