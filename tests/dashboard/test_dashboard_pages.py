"""AppTest page tests: every page rebuilds from its query parameters, writes widget changes back,
shows its tables with units and its charts (asserted on the Vega-Lite spec); uploads; the token
gate."""

from __future__ import annotations

import json

import polars as pl
import pytest

from tests.conftest import store_snapshot
from tests.dashboard.helpers import (
    BASIC,
    FULL,
    cards as page_cards,
    component_data,
    copy_store,
    dataframes,
    frames,
    make_store,
    open_page,
    share_link,
    shown,
    table_data,
    texts,
    vega_specs,
)
from dashboard.core.source import Source

pytest.importorskip("ncu_report")


@pytest.fixture(scope="module")
def base_store(tmp_path_factory):
    root = tmp_path_factory.mktemp("dash") / "store"
    return root, make_store(root)


@pytest.fixture
def ids(base_store, monkeypatch, tmp_path):
    """A private copy of the module's store (pages may write to it), wired through the environment."""
    from dashboard.web import store_access

    root = copy_store(base_store[0], tmp_path / "store")
    monkeypatch.setenv("KERNELSCOPE_STORE", str(root))
    monkeypatch.setenv("KERNELSCOPE_SAMPLES", str(tmp_path / "no_samples"))
    monkeypatch.setenv("KERNELSCOPE_FAKE_NVML", "1")
    monkeypatch.delenv("KERNELSCOPE_TOKEN", raising=False)
    store_access.clear_caches()
    yield {**base_store[1], "root": root}
    store_access.clear_caches()


def test_home_lists_gpus_with_measured_ceilings_findings_and_runs(ids):
    at = open_page(None)
    assert not at.exception
    t = texts(at)
    assert "What to do first" in t
    top, gpus, recent = [f for f in frames(at) if "verdict" not in f.columns][:3]
    # the newest ncu run is the full report: its kernel with the most time to win is the column read
    # (two launches: stride 32 and 33, one kernel), its biggest finding the stride-32 launch's
    # conflicts; one row per kernel
    row = top.row(0, named=True)
    assert (row["kernel"], row["launches"]) == ("ks_colread4", 2)
    assert "31.9-way shared-memory bank conflicts" == row["finding"]
    assert row["lost_us"] >= 1026.1 - 0.5 and top["kernel"].n_unique() == top.height
    assert row["open"] == f"kernels?run={ids['full']}&kernel=5"
    h200 = gpus.filter(gpus["gpu"] == "NVIDIA H200").row(0, named=True)
    assert h200["dram_spec_gbps"] == pytest.approx(4800)
    assert h200["dram_measured_gbps"] == pytest.approx(4300)  # from the H200 bench run
    assert h200["fp32_measured_tflops"] == pytest.approx(60)
    h100 = gpus.filter(gpus["gpu"] == "NVIDIA H100 SXM").row(0, named=True)
    assert h100["dram_measured_gbps"] == pytest.approx(4300 * 0.7)
    assert recent.height == 6 and set(recent["run_id"]) == {
        v for k, v in ids.items() if k != "root"
    }


def test_kernels_page_rebuilds_from_query_params(ids):
    at = open_page("kernels", run=ids["full"][:6], kernel="5", cols="shared", by="launch")
    assert not at.exception and not at.warning
    # the prefix is written back as the full id
    assert at.query_params["run"] == ids["full"]
    assert at.query_params["kernel"] == "5" and at.query_params["cols"] == "shared"
    table = component_data(at, "kernelscope.table")
    assert len(table["rows"]) == 9 and table["selected"] == "5" and table["sort"] == "id"
    heads = [c["header"] for c in table["columns"]]
    assert heads == [
        "launch id",
        "kernel",
        "duration [µs]",
        "bank ways, loads [ways]",
        "bank ways, stores [ways]",
        "bank ways, all [ways]",
    ]  # one column group, with units
    rows = {r[0]: r for r in table["rows"]}
    assert rows["5"][-1] == "31.87" and rows["6"][-1] == "1.00"
    assert table["full"][5] == "ks_colread4"
    # the detail view of launch 5: findings, source hot spots, textbook cases, every metric
    t = texts(at)
    assert "Launch 5:" in t and "31.9-way shared-memory bank conflicts" in t and "*Model:*" in t
    # the detail points at the launch's source; the Source hot spots section reads it
    names = {x.get("name") for x in table_data(at)}
    assert "Source hot spots" in t and "show=source" in t and "hot_sass" not in names
    src_at = open_page("kernels", run=ids["full"], kernel="5", by="launch", show="source")
    assert not src_at.exception and "Not in this report: CUDA source lines" in texts(src_at)
    hot, cases = shown(src_at, "hot_sass"), shown(at, "cases")
    assert (
        hot["SASS instruction"][0].startswith("LOP3") and "short scoreboard" in hot["stalled on"][0]
    )
    assert cases["verdict"][0] == "agrees" and cases["case (section)"][0].startswith(
        "bank.column_read"
    )
    assert (
        cases["quantity"][0] == "shared-memory passes per warp request"
        and cases["measured (ncu counters)"][0] == "32"
    )
    # the parameters are inferred, and say how
    assert "stride = 32 words" in t
    every = open_page("kernels", run=ids["full"], kernel="5", show="metrics")
    # a long table comes in part, with its size
    part = table_data(every)[-1]
    assert len(part["rows"]) == 50 and part["total"] == 2232
    every.session_state[f"table-{part['name']}:all"] = True  # what its "Show all rows" button sets
    assert frames(every.run())[-1].height == 2232


def test_kernels_page_memory_group_and_over_100_percent_notes(ids):
    at = open_page("kernels", run=ids["full"], kernel="0", cols="memory", by="launch")
    table = component_data(at, "kernelscope.table")
    heads = [c["header"] for c in table["columns"]]
    assert "DRAM [GB/s]" in heads and "DRAM of measured [%]" in heads and len(heads) <= 10
    row0 = table["rows"][0]
    assert row0[heads.index("DRAM of spec [%]")] == "77.2"
    # the copy moves more than the (made-up) 4.3 TB/s measured ceiling of the test store's bench
    # run: said why
    assert row0[heads.index("DRAM of measured [%]")] == "86.2"
    t = texts(at)
    assert "Above 100 %" not in t or "because" in t


def test_stored_measurements_feed_the_textbook_cases_page(ids):
    from collectors.store import Store

    src = Source(Store(ids["root"]))
    # the column read is recognised by its counters in both launches; each is compared only with the
    # prediction for its own stride (32 -> 32 passes per request, 33 -> 1): never the stride-33
    # launch against stride 32
    ms32 = src.case_measurements("bank.column_read", "NVIDIA H200", {"stride": 32, "width": 4})
    ms33 = src.case_measurements("bank.column_read", "NVIDIA H200", {"stride": 33, "width": 4})
    # stride 32: the column read (launch 5) and the unpadded 32x32 transpose (launch 3); the basic
    # report has no shared-memory counters
    assert sorted(round(m.value, 2) for m in ms32 if m.quantity == "wavefronts") == [32.0, 32.15]
    assert [round(m.value, 2) for m in ms33 if m.quantity == "wavefronts"] == [1.0]
    assert all("launch" in m.source for m in ms32 + ms33 if m.quantity == "wavefronts")
    assert src.case_measurements("bank.column_read", "NVIDIA A10G") == []


def test_kernels_rooflines(ids):
    at = open_page("kernels", run=ids["full"], show="charts")
    specs = {
        s.get("title", {}).get("text", s.get("title"))
        if isinstance(s.get("title"), dict)
        else s.get("title"): s
        for s in vega_specs(at)
    }
    roof = next(s for t, s in specs.items() if t and t.startswith("Hierarchical roofline"))
    lines = roof["layer"][0]
    assert (
        lines["encoding"]["x"]["scale"]["type"] == "log"
        and "FLOP/byte" in lines["encoding"]["x"]["title"]
    )
    roofs = set(lines["encoding"]["color"]["scale"]["domain"])
    assert {
        "L1/shared · SMs × 128 B/cycle",
        "L2 · ncu peak",
        "DRAM · spec sheet",
        "DRAM · measured",
        "FP32 · spec sheet",
    } <= roofs  # L1, L2 and DRAM roofs
    assert any(t and t.startswith("Instruction roofline") for t in specs)
    from analyzers.roofline import instruction_roofline
    from collectors.store import Store

    a = Source(Store(ids["root"])).ncu(ids["full"])
    pts = instruction_roofline(a.kernels, a.gpu, a.measured).points
    # every launch is on the instruction roofline, the zero-FLOP copy and transposes too, at three
    # levels each
    assert set(pts["launch"]) == {str(i) for i in range(9)} and set(pts["level"]) == {
        "L1/shared",
        "L2",
        "DRAM",
    }
    assert set(pts.filter(pl.col("work") == "no FLOP")["launch"]) == {"0", "1", "2", "3", "4"}
    assert roof["config"]["font"].startswith("Source Sans Pro")  # the kernelscope theme
    # every chart keeps a height
    for s in specs.values():
        assert (
            s.get("autosize", {}).get("type") in ("fit-x", "pad") and (s.get("height") or 0) >= 260
        )
    bw = next(s for t, s in specs.items() if t and t.startswith("DRAM bandwidth"))
    assert "[GB/s]" in bw["layer"][0]["encoding"]["y"]["title"]


def test_kernels_url_drives_sort_find_and_metric_filter(ids):
    at = open_page(
        "kernels",
        run=ids["full"],
        sort="duration_ns",
        desc="1",
        find="<|transpose",
        show="metrics",
        by="launch",
    )
    table = component_data(at, "kernelscope.table")
    assert table["sort"] == "duration_ns" and table["desc"] is True
    # the transposes, longest first
    assert [r[0] for r in table["rows"]] == ["3", "4", "1", "2"]
    launch = next(s for s in at.selectbox if s.label == "Launch")
    launch.select(3).run()
    assert at.query_params["kernel"] == "3"
    next(t for t in at.text_input if t.label == "Filter metrics").input("dram__bytes").run()
    assert at.query_params["q"] == "dram__bytes"
    assert all("dram__bytes" in m for m in frames(at)[-1]["metric"].to_list())
    link = share_link(at)
    assert (
        link.startswith("/kernels?")
        and f"run={ids['full']}" in link
        and "kernel=3" in link
        and "q=dram__bytes" in link
    )
    assert "sort=duration_ns" in link and "desc=1" in link


def test_kernels_bad_params_warn_and_fall_back(ids):
    at = open_page("kernels", run="zzzzzzzz", kernel="99", sort="nope", cols="nope", by="launch")
    w = " ".join(x.value for x in at.warning)
    assert (
        "zzzzzzzz" in w
        and "No launch" in w
        and "Unknown sort column" in w
        and "Unknown column group" in w
    )
    assert at.query_params["run"] == ids["full"] and at.query_params["kernel"] == "0"


def test_basic_report_shows_missing_as_missing(ids):
    at = open_page("kernels", run=ids["basic"], kernel="0")
    w = [x.value for x in at.warning]
    # one warning per missing counter group, naming the ncu option and no internal key
    assert len(w) == len({x.split("Collect them with")[1] for x in w}) >= 2
    assert any("**DRAM traffic and bandwidth**" in x and "--set full" in x for x in w)
    assert not any("smem_conflict_degree" in x or "dram_bandwidth_gbps" in x for x in w)
    cards = {m.label: m.value for m in page_cards(at)}
    assert cards["can be won (findings)"] == "—" and cards["Speed of Light: SM / DRAM"].endswith(
        " %"
    )  # in basic
    assert cards["DRAM"] == "—"
    table = component_data(at, "kernelscope.table")
    assert "None" not in {c for r in table["rows"] for c in r}
    assert "None" not in texts(at)


def test_upload_good_and_bad_files(ids, monkeypatch):
    from collectors.store import Store

    monkeypatch.setenv("KERNELSCOPE_MAX_UPLOAD_MB", "0.5")
    root = ids["root"]
    # a new run: the CSV export of the report (not yet in the store)
    csv = FULL.parent / "full_raw_base.csv.gz"
    assert csv.is_file()
    before = store_snapshot(root)
    at = open_page("upload")
    at.file_uploader[0].set_value(
        [
            # wrong type
            ("picture.png", b"\x89PNG\r\n\x1a\n" + b"\0" * 64, "image/png"),
            # truncated
            ("cut.ncu-rep.gz", FULL.read_bytes()[:5000], "application/gzip"),
            # random bytes
            ("noise.ncu-rep", bytes(range(256)) * 8, "application/octet-stream"),
            # above the cap
            ("huge.csv", b"x" * 600_000, "text/csv"),
        ]
    ).run()
    assert not at.exception
    errors = [e.value for e in at.error]
    assert len(errors) == 4 and all("Nothing was stored" in e for e in errors)
    assert "picture.png" in errors[0] and "not a recognised artifact" in errors[0]
    assert "truncated" in errors[1]
    assert "upload cap" in errors[3] and "kernelscope ingest" in errors[3]
    assert store_snapshot(root) == before
    at.file_uploader[0].set_value(
        [
            ("full_raw_base.csv.gz", csv.read_bytes(), "application/gzip"),
            ("full.ncu-rep.gz", BASIC.read_bytes(), "application/gzip"),
        ]
    ).run()
    ok = [s.value for s in at.success]
    assert len(ok) == 2 and "new" in ok[0] and "already stored" in ok[1]
    rid = ok[0].split("run `")[1].split("`")[0]
    assert f"(kernels?run={rid})" in ok[0]
    assert Store(root).get(rid).kind == "ncu"
    assert "2 stored, 0 refused" in at.get("progress")[0].proto.text


def test_runs_page_filters(ids):
    at = open_page("runs", kind="ncu")
    t = frames(at)[0]
    # the kind in the tool's words
    assert set(t["kind"]) == {"Nsight Compute"} and t.height == 2
    assert t["open"].to_list()[0].startswith("kernels?run=")
    at.selectbox[0].select("").run()
    assert "kind" not in at.query_params and frames(at)[0].height == 6


def test_compare_two_ncu_runs(ids):
    at = open_page("compare", a=ids["basic"], b=ids["full"])
    assert not at.exception
    cmp = frames(at)[0]
    assert cmp.height == 9
    # the same program profiled twice: durations within a few % -> mostly unchanged at the 5 % floor
    assert set(cmp["status"]) <= {"unchanged", "faster", "slower"}
    assert (cmp["status"] == "unchanged").sum() >= 6
    assert at.query_params["a"] == ids["basic"] and at.query_params["b"] == ids["full"]
    at.number_input[0].set_value(0.0).run()
    assert at.query_params["noise"] == "0"
    cmp0 = frames(at)[0]
    assert (cmp0["status"] == "unchanged").sum() <= (cmp["status"] == "unchanged").sum()
    spec = next(
        s for s in vega_specs(at) if str(s.get("title", "")).startswith("Per-kernel change")
    )
    assert "[%]" in spec["layer"][0]["encoding"]["x"]["title"]


def test_compare_traces_use_the_spread(ids):
    at = open_page("compare", a=ids["m1_eager"], b=ids["m1_graph"])
    cmp = next(f for f in frames(at) if "n_a" in f.columns)  # after the trace statistics
    assert {"n_a", "n_b", "spread_a_us"} <= set(cmp.columns)
    assert cmp["n_a"].max() > 1
    mixed = open_page("compare", a=ids["full"], b=ids["m1_graph"])
    assert "only runs of the same kind" in mixed.error[0].value


def test_compare_bench_runs_across_gpus(ids, capsys):
    """Two bench runs, GPU × GPU (issue 38): the page and `kernelscope compare` give the same result
    — the summary with the DRAM ratio first, each GPU's measurement, the ratio between them and each
    rate as a fraction of its own GPU's bounding ceiling."""
    at = open_page("compare", a=ids["bench_h200"], b=ids["bench_h100"])
    assert not at.exception
    pair = next(f for f in frames(at) if "speedup" in f.columns)
    row = pair.filter(pair["case"] == "littles_law").row(0, named=True)
    assert row["a_pct"] == pytest.approx(3.9e12 / 4.8e12 * 100)
    assert row["b_pct"] == pytest.approx(3.9e12 * 0.7 / 3.35e12 * 100)
    assert row["speedup"] == pytest.approx(0.7)  # a rate: B / A
    t = texts(at)
    assert "H100 SXM / H200: DRAM 0.70× (spec 0.70×)" in t
    from dashboard.cli import main

    capsys.readouterr()
    assert (
        main(
            [
                "compare",
                ids["bench_h200"],
                ids["bench_h100"],
                "--store",
                str(ids["root"]),
                "--format",
                "json",
            ]
        )
        == 0
    )
    cli = json.loads(capsys.readouterr().out)
    assert cli["summary"] in t and {r["case"] for r in cli["rows"]} == set(pair["case"])
    cli_row = next(r for r in cli["rows"] if r["case"] == "littles_law")
    assert cli_row["speedup"] == pytest.approx(row["speedup"]) and cli_row[
        "b_pct"
    ] == pytest.approx(row["b_pct"])


def test_gpus_page(ids):
    at = open_page("gpus")
    assert not at.exception
    ceil = next(f for f in frames(at) if "pct_of_spec" in f.columns)
    dram = ceil.filter(
        (ceil["gpu"] == "NVIDIA H200") & (ceil["resource_label"] == "DRAM bandwidth")
    ).row(0, named=True)
    assert dram["pct_of_spec"] == pytest.approx(4.3 / 4.8 * 100)
    assert dram["shown"] == "4.30 TB/s"
    launch = ceil.filter(ceil["resource_label"] == "launch cost").row(0, named=True)
    assert launch["shown"] == "2.10 µs" and launch["pct_of_spec"] is None
    spec = next(s for s in vega_specs(at) if "spec-sheet peak" in str(s.get("title")))
    assert spec["encoding"]["y"]["title"] == "measured / spec [%]"
    at.multiselect[0].set_value(["NVIDIA H200"]).run()
    assert at.query_params["gpu"] == "NVIDIA H200"
    # one GPU: its results with the peak each is normalised to
    single = frames(at)[-1]
    assert set(single["peak"]) == {"DRAM bandwidth", ""} or "DRAM bandwidth" in set(single["peak"])
    assert single.filter(single["case"] == "littles_law")["pct"].item() == pytest.approx(
        3.9 / 4.8 * 100
    )


def test_live_with_fake_nvml(ids):
    at = open_page("live")
    live = frames(at)[0]
    g0, g1 = live.row(0, named=True), live.row(1, named=True)
    assert g0["util_gpu_pct"] == 87 and g0["power_w"] == 612 and g0["temperature_c"] == 61
    assert g1["power_w"] is None  # NOT_SUPPORTED is shown as missing, not zero
    at.number_input[0].set_value(5.0).run()
    assert at.query_params["every"] == "5"


def test_live_without_driver(ids, monkeypatch):
    monkeypatch.setenv("KERNELSCOPE_FAKE_NVML", "nodriver")
    at = open_page("live")
    assert "No NVIDIA driver" in at.info[0].value and not dataframes(at)


def test_token_gate(ids, monkeypatch):
    from streamlit.testing.v1 import AppTest
    from tests.dashboard.helpers import APP

    good = "s3cret-tøken-0123456789"
    monkeypatch.setenv("KERNELSCOPE_TOKEN", good)
    at = AppTest.from_file(APP, default_timeout=60).run()
    assert at.text_input[0].label == "Access token" and not dataframes(at)
    at.text_input[0].input("wrong").run()
    assert at.error[0].value == "Wrong token." and not dataframes(at)
    at.text_input[0].input("ünïcode").run()  # non-ASCII input must not crash the gate
    assert not at.exception and at.error
    at.text_input[0].input(good).run()
    assert not at.text_input or at.text_input[0].label != "Access token"
    assert dataframes(at)  # the home page is shown
    # a link carrying ?token= lets the session in and the token leaves the address bar
    at2 = AppTest.from_file(APP, default_timeout=60)
    at2.query_params["token"] = good
    at2.run()
    assert dataframes(at2) and "token" not in at2.query_params
    assert "token" not in share_link(at2)
    # a token under 16 characters is refused: the server says so and shows nothing
    monkeypatch.setenv("KERNELSCOPE_TOKEN", "short-token")
    at3 = AppTest.from_file(APP, default_timeout=60)
    at3.query_params["token"] = "short-token"
    at3.run()
    assert "shorter than 16 characters" in at3.error[0].value and not dataframes(at3)


def test_signed_session_cookie():
    from dashboard.web import auth

    tok = "0123456789abcdef-token"
    c = auth.make_cookie(tok, now=1000.0)
    assert auth.cookie_ok(c, tok, now=1000.0 + 3600)
    # another token: logged out
    assert not auth.cookie_ok(c, tok + "x", now=1001.0)
    assert not auth.cookie_ok(c, tok, now=1000.0 + auth.MAX_AGE_S + 1)  # too old
    issued, nonce, sig = c.split(".")
    assert not auth.cookie_ok(f"{int(issued) + 1}.{nonce}.{sig}", tok, now=1002.0)  # edited
    assert not auth.cookie_ok("garbage", tok) and not auth.cookie_ok(None, tok)
    assert not auth.token_ok("short", "short") and auth.token_ok(tok, tok)
    assert "SameSite=Strict" in auth.cookie_script(c) and auth.COOKIE in auth.cookie_script(c)


def test_kernels_page_puts_tensor_core_launches_on_tensor_roofs(tmp_path, monkeypatch):
    """The H200 tensor-core samples with the recorded H200 bench run: tensor columns, BF16 roofs
    from the spec sheet and the measured cuBLAS ceiling, each point labelled with the work it mostly
    does."""
    from collectors.store import Store
    from tests.conftest import SAMPLES
    from dashboard.web import store_access

    s = Store(tmp_path / "store")
    run = (
        Source(s)
        .ingest_path(SAMPLES / "h200" / "tensor_kernels" / "tensor_raw_base.csv.gz")[0]
        .run_id
    )
    Source(s).ingest_path(SAMPLES / "h200" / "bench_suite" / "bench_nvidia-h200_06deee61.json.gz")
    monkeypatch.setenv("KERNELSCOPE_STORE", str(tmp_path / "store"))
    monkeypatch.setenv("KERNELSCOPE_SAMPLES", str(tmp_path / "no_samples"))
    store_access.clear_caches()
    try:
        at = open_page("kernels", run=run, kernel="1", cols="compute", by="launch")
        assert not at.exception
        t = component_data(at, "kernelscope.table")
        heads = [c["header"] for c in t["columns"]]
        col = lambda h: [r[heads.index(h)] for r in t["rows"]]  # noqa: E731
        assert col("tensor type") == ["bf16", "fp16", "tf32", "bf16", "—"]
        assert (
            700 < float(col("tensor [TFLOP/s]")[0]) < 900
            and 70 < float(col("tensor of spec [%]")[2]) < 90
        )
        assert (
            col("tensor of spec [%]")[4] == "—"
            and float(col("arith. intensity [FLOP/B]")[0].replace(",", "")) > 700
        )
        charts = open_page("kernels", run=run, kernel="1", show="charts")
        roof = next(
            v
            for v in vega_specs(charts)
            if str(v.get("title", "")).startswith("Hierarchical roofline")
        )
        assert {
            "FP32 · spec sheet",
            "FP32 · measured",
            "BF16 tensor · spec sheet",
            "BF16 tensor · measured",
        } <= set(roof["layer"][0]["encoding"]["color"]["scale"]["domain"])
        assert any(tt.get("field") == "work" for tt in roof["layer"][2]["encoding"]["tooltip"])
        from analyzers.roofline import flop_roofline

        a = Source(s).ncu(run)
        pts = flop_roofline(a.kernels, a.gpu, a.measured).points.filter(pl.col("level") == "DRAM")
        assert sorted(pts["work"]) == [
            "FP32",
            "tensor BF16",
            "tensor BF16",
            "tensor FP16",
            "tensor TF32",
        ]
        # launch 1 (the BF16 matmul) in detail
        assert "tensor-core throughput-bound" in texts(at)
    finally:
        store_access.clear_caches()


def test_a_long_table_is_sent_in_part_down_to_its_selected_row():
    import polars as pl
    from dashboard.web.reports.report_blocks import Table, num

    t = Table(
        "t",
        pl.DataFrame({"id": list(range(500)), "v": [float(i) for i in range(500)]}),
        {"v": num("v")},
        select="id",
        selected=350,
    )
    part = t.cells(200)
    assert len(part["rows"]) == 351 and part["total"] == 500 and part["ids"][-1] == "350"
    assert (
        len(t.cells()["rows"]) == 500
        and len(Table("u", t.frame.head(20), {"v": num("v")}).cells(200)["rows"]) == 20
    )
