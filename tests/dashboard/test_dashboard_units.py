"""Pure parts behind the dashboard: findings (fixed numbers from the real H200 report), run
comparison with noise, measured-ceiling classification, number formatting, NVML (fake and real),
lab-server flags."""

from __future__ import annotations

import polars as pl
import pytest

from tests.dashboard.helpers import FULL
from dashboard.core.source import Source


@pytest.fixture(scope="module")
def h200():
    pytest.importorskip("ncu_report")
    from analyzers.gpus import resolve_gpu
    from analyzers.kernels import analyze_kernels
    from collectors.ingest import parse_bytes

    p = parse_bytes(FULL.read_bytes(), FULL.name)
    gpu = resolve_gpu(p.meta["gpu_name"], p.meta["device_attributes"])
    return {r["id"]: r for r in analyze_kernels(p.table("kernels"), gpu).iter_rows(named=True)}, gpu


def test_findings_rank_bank_conflicts_of_the_stride32_column_read(h200):
    from analyzers.findings import bounds, kernel_findings, peaks_for

    rows, gpu = h200
    f = kernel_findings(rows[5], gpu)
    assert f[0].key == "bank_conflicts" and f[0].title == "31.9-way shared-memory bank conflicts"
    # t_smem = 276,824,064 wavefronts / (132 SMs x SM clock): the whole 1.06 ms kernel
    b = bounds(rows[5], gpu, peaks_for(gpu))
    assert b["smem"] == pytest.approx(1_059_332, rel=1e-3) and b["smem_ideal"] == pytest.approx(
        33_237, rel=1e-3
    )
    # measured fix (stride 33): 1,011,776 ns
    assert f[0].lost_ns == pytest.approx(1_026_094, rel=1e-3)
    assert (
        "l1tex__data_bank_conflicts_pipe_lsu_mem_shared (ld+st)" in f[0].metrics
        and "wavefronts" in f[0].model
    )
    # the padded launch has no conflict finding
    assert all(x.key != "bank_conflicts" for x in kernel_findings(rows[6], gpu))


def test_findings_say_when_conflicts_do_not_matter(h200):
    from analyzers.findings import kernel_findings

    rows, gpu = h200
    # 16x16 transpose: DRAM-limited
    f16 = {x.key: x for x in kernel_findings(rows[1], gpu)}
    assert f16["bank_conflicts"].lost_ns == 0 and "saves little" in f16["bank_conflicts"].text
    # 32x32: shared memory limits it
    f32 = {x.key: x for x in kernel_findings(rows[3], gpu)}
    assert f32["bank_conflicts"].lost_ns == pytest.approx(158_933, rel=1e-3)
    copy = kernel_findings(rows[0], gpu)[0]
    assert copy.key == "at_bound" and copy.title == "DRAM bandwidth-bound at 77% of the ceiling"


def test_findings_use_measured_ceilings_when_given(h200):
    from analyzers.findings import kernel_findings

    rows, gpu = h200
    f = kernel_findings(rows[0], gpu, {"dram": (4.3e12, "copy kernel")})[0]
    assert f.title == "DRAM bandwidth-bound at 86% of the ceiling"
    assert "measured ceiling: copy kernel" in f.model


def test_findings_small_grid():
    from analyzers.findings import kernel_findings
    from analyzers.gpus import get_gpu

    gpu = get_gpu("NVIDIA H200")
    row = {"duration_ns": 100_000.0, "grid_size": 66.0, "predicted_blocks_per_sm": 2.0}
    f = kernel_findings(row, gpu)
    assert f[0].key == "small_grid" and f[0].lost_ns == pytest.approx(100_000 * (1 - 66 / 264))
    assert kernel_findings({"duration_ns": None}, gpu) == []


def test_compare_noise_rules():
    from analyzers.compare import compare_runs, totals

    a = pl.DataFrame(
        {
            "name": ["k", "k", "m", "gone"],
            "config": ["c"] * 4,
            "duration_ns": [100.0, 200.0, 50.0, 9.0],
        }
    )
    b = pl.DataFrame(
        {
            "name": ["k", "k", "m", "new"],
            "config": ["c"] * 4,
            "duration_ns": [104.0, 150.0, 80.0, 7.0],
        }
    )
    per = {
        (r["name"], r["occurrence"]): r
        for r in compare_runs(a, b, per_launch=True).iter_rows(named=True)
    }
    assert per[("k", 0)]["status"] == "unchanged" and per[("k", 0)]["change_pct"] == pytest.approx(
        4.0
    )
    assert per[("k", 1)]["status"] == "faster" and per[("m", 0)]["status"] == "slower"
    assert per[("gone", 0)]["status"] == "removed" and per[("new", 0)]["status"] == "added"
    assert (
        per[("k", 0)]["threshold_pct"] == pytest.approx(5.0)
        and per[("new", 0)]["threshold_pct"] is None
    )
    # grouped (traces): the spread of k's launches (std 50 and 23 ns) widens the threshold: -15.7 %
    # is noise
    grp = {r["name"]: r for r in compare_runs(a, b, per_launch=False).iter_rows(named=True)}
    assert grp["k"]["threshold_pct"] == pytest.approx(
        200 * ((50 / 150) ** 2 + (23 / 127) ** 2) ** 0.5, rel=1e-6
    )
    # ... a threshold of 76 % can hide almost any change: too noisy to judge, not "unchanged"
    assert grp["k"]["n_a"] == 2 and grp["k"]["status"] == "too noisy to judge"
    # launches that spread little (threshold below twice the floor) are judged: the same -15.7 % is
    # then faster
    a2 = pl.DataFrame({"name": ["k"] * 2, "config": ["c"] * 2, "duration_ns": [150.0, 151.0]})
    b2 = pl.DataFrame({"name": ["k"] * 2, "config": ["c"] * 2, "duration_ns": [126.0, 127.0]})
    tight = compare_runs(a2, b2, per_launch=False).row(0, named=True)
    assert tight["threshold_pct"] == pytest.approx(5.0) and tight["status"] == "faster"
    b3 = pl.DataFrame({"name": ["k"] * 2, "config": ["c"] * 2, "duration_ns": [152.0, 153.0]})
    assert compare_runs(a2, b3, per_launch=False).row(0, named=True)["status"] == "unchanged"
    t = totals(compare_runs(a, b, per_launch=True))
    assert t["total_a_ns"] == 359 and t["total_b_ns"] == 341 and t["counts"]["faster"] == 1


def test_ncu_launch_configuration_by_dimensions_else_by_sizes():
    """Launches compare by grid and block dimensions; a launch without them by blocks and threads
    per block, and two runs of which one lacks dimensions both by sizes (what the Compare page does:
    has_dims on both)."""
    from analyzers.compare import compare_runs, has_dims, ncu_launches, totals

    dims = dict(
        grid_x=[8, 4],
        grid_y=[1, 2],
        grid_z=[1, 1],
        block_x=[256, 256],
        block_y=[1, 1],
        block_z=[1, 1],
    )
    k = pl.DataFrame(
        {
            "id": [0, 1],
            "kernel_name": ["k", "k"],
            "duration_ns": [100.0, 100.0],
            "grid_size": [8.0, 8.0],
            "block_size": [256.0, 256.0],
            **dims,
        }
    )
    none = k.with_columns(pl.lit(None, pl.Int64).alias(c) for c in dims)
    assert ncu_launches(k)["config"].to_list() == [
        "grid (8,1,1) block (256,1,1)",
        "grid (4,2,1) block (256,1,1)",
    ]
    assert ncu_launches(none)["config"].to_list() == ["grid 8 blocks, block 256 threads"] * 2
    assert ncu_launches(k, dims=False)["config"].to_list() == ncu_launches(none)["config"].to_list()
    assert ncu_launches(none.drop("grid_size"))["config"].to_list() == ["—", "—"]
    assert has_dims(k) and not has_dims(none) and not has_dims(k.head(0))
    # the two launches differ in shape only: told apart by dimensions, not by sizes
    swapped = k.with_columns(
        grid_x=pl.Series([4, 8]), grid_y=pl.Series([2, 1]), duration_ns=pl.Series([100.0, 300.0])
    )
    per = compare_runs(ncu_launches(k), ncu_launches(swapped), per_launch=True)
    # matched by shape, not by position
    assert sorted(per["status"]) == ["slower", "unchanged"]
    assert (
        totals(compare_runs(ncu_launches(k), ncu_launches(none), per_launch=True))["counts"][
            "added"
        ]
        == 2
    )
    both = dict(dims=has_dims(k) and has_dims(none))
    assert (
        totals(compare_runs(ncu_launches(k, **both), ncu_launches(none, **both), per_launch=True))[
            "counts"
        ]["unchanged"]
        == 2
    )


def test_ceiling_classification():
    from analyzers.ceilings import classify_ceiling

    assert [
        classify_ceiling(n, u)
        for n, u in [
            ("dram_copy_bandwidth", "B/s"),
            ("l2_read_bandwidth", "B/s"),
            ("smem_read_bandwidth", "B/s"),
            ("bf16_dense_flop_rate", "FLOP/s"),
            ("fp32_flop_rate", "FLOP/s"),
            ("h2d_pinned_bandwidth", "B/s"),
            ("d2h_pageable_bandwidth", "B/s"),
            ("launch_back_to_back", "s"),
            ("graph_node_replay", "s"),
            ("x", "B"),
            ("dram_load_latency", "s"),
        ]
    ] == [
        "dram",
        "l2",
        "smem",
        "bf16",
        "fp32",
        "h2d",
        "d2h",
        "launch",
        "graph",
        None,
        "latency_dram",
    ]  # D2H apart (issue 38)


def test_number_formatting():
    from analyzers.units import fmt_bytes, fmt_ns, fmt_pct, fmt_rate
    from analyzers.units import fmt_short as fmt_value
    from dashboard.web.reports.report_blocks import num

    assert (
        fmt_ns(283_680) == "284 µs" and fmt_ns(1_061_632) == "1.06 ms" and fmt_ns(850) == "850 ns"
    )
    assert fmt_bytes(1_051_100_000) == "1,002 MiB" and fmt_bytes(6144) == "6.00 KiB"
    assert fmt_rate(4.8e12, "B/s") == "4.80 TB/s" and fmt_rate(6.7e13, "FLOP/s") == "67.0 TFLOP/s"
    assert (
        fmt_pct(77.19) == "77.2 %"
        and fmt_value(2.1e-6, "s") == "2.10 µs"
        and fmt_value(None, "s") == "—"
    )
    assert (
        num("duration", "µs", "%.2f").header == "duration [µs]"
        and num("x", fmt="%.1f").format(12345.67) == "12,345.7"
    )


def test_fake_nvml_states():
    from dashboard.web.nvml import FakeNVML, snapshot

    s = snapshot(FakeNVML("1"))
    assert s.state == "ok" and len(s.gpus) == 2 and s.driver == "580.95.05"
    g0, g1 = s.gpus
    assert (g0.util_gpu_pct, g0.sm_clock_mhz, g0.power_w, g0.power_limit_w, g0.temperature_c) == (
        87,
        1980,
        612,
        700,
        61,
    )
    assert g0.mem_used_bytes == 42 << 30 and g1.power_w is None
    assert snapshot(FakeNVML("nodriver")).state == "no_driver"
    assert snapshot(FakeNVML("nopermission")).state == "no_permission"
    assert snapshot(FakeNVML("nogpu")).state == "no_gpu"


def test_real_nvml_answers_without_crashing():
    import pynvml
    from dashboard.web.nvml import snapshot

    s = snapshot(pynvml)
    assert s.state in ("ok", "no_driver", "no_permission", "no_gpu", "error")
    if s.state == "ok":
        assert s.gpus and s.gpus[0].name


@pytest.fixture
def launched(monkeypatch, tmp_path):
    import dashboard.cli.core as core

    calls = []
    monkeypatch.setattr(core.os, "execve", lambda exe, cmd, env: calls.append((cmd, env)))
    monkeypatch.delenv("KERNELSCOPE_TOKEN", raising=False)
    return calls


def test_dashboard_binds_loopback_by_default(launched, tmp_path):
    from dashboard.cli import main

    assert main(["dashboard", "--store", str(tmp_path / "s"), "--max-upload-mb", "50"]) == 0
    cmd, env = launched[0]
    assert cmd[cmd.index("-m") + 1] == "dashboard.web.serve"  # Streamlit behind kernelscope's gate
    assert cmd[cmd.index("--host") + 1] == "127.0.0.1"
    assert cmd[cmd.index("--max-upload-mb") + 1] == "50"
    assert env["KERNELSCOPE_MAX_DECOMPRESSED_MB"] == "50"  # decompression capped by the upload cap
    assert env["KERNELSCOPE_STORE"] == str(tmp_path / "s") and "KERNELSCOPE_TOKEN" not in env
    assert (
        main(
            [
                "dashboard",
                "--store",
                str(tmp_path / "s"),
                "--max-decompressed-mb",
                "900",
                "--allowed-host",
                "dash.example",
            ]
        )
        == 0
    )
    cmd, env = launched[1]
    assert (
        env["KERNELSCOPE_MAX_DECOMPRESSED_MB"] == "900"
        and cmd[cmd.index("--allowed-host") + 1] == "dash.example"
    )


def test_dashboard_on_all_interfaces_needs_a_token(launched, tmp_path, monkeypatch, capsys):
    from dashboard.cli import main

    assert main(["dashboard", "--host", "0.0.0.0", "--store", str(tmp_path / "s")]) == 2
    assert "token" in capsys.readouterr().err and not launched
    assert (
        main(["dashboard", "--host", "0.0.0.0", "--token", "abc", "--store", str(tmp_path / "s")])
        == 2
    )
    # a guessable token is refused
    assert "at least 16" in capsys.readouterr().err and not launched
    tok = "0123456789abcdef"
    assert (
        main(["dashboard", "--host", "0.0.0.0", "--token", tok, "--store", str(tmp_path / "s")])
        == 0
    )
    cmd, env = launched[0]
    assert cmd[cmd.index("--host") + 1] == "0.0.0.0" and env["KERNELSCOPE_TOKEN"] == tok
    monkeypatch.setenv("KERNELSCOPE_TOKEN", "from-env-0123456789")
    assert main(["dashboard", "--host", "0.0.0.0", "--store", str(tmp_path / "s")]) == 0
    assert launched[1][1]["KERNELSCOPE_TOKEN"] == "from-env-0123456789"


def test_samples_only_into_the_default_store_unless_asked(launched, tmp_path, monkeypatch):
    from dashboard.cli import main

    monkeypatch.delenv("KERNELSCOPE_STORE", raising=False)
    assert main(["dashboard", "--store", str(tmp_path / "s")]) == 0
    assert launched[-1][1]["KERNELSCOPE_LOAD_SAMPLES"] == "0"  # a store the user named
    assert main(["dashboard", "--store", str(tmp_path / "s"), "--samples"]) == 0
    assert launched[-1][1]["KERNELSCOPE_LOAD_SAMPLES"] == "1"
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert main(["dashboard"]) == 0
    assert launched[-1][1]["KERNELSCOPE_LOAD_SAMPLES"] == "1"  # the default store
    assert main(["dashboard", "--no-samples"]) == 0
    assert launched[-1][1]["KERNELSCOPE_LOAD_SAMPLES"] == "0"
    monkeypatch.setenv("KERNELSCOPE_STORE", str(tmp_path / "shared"))
    assert main(["dashboard"]) == 0
    assert launched[-1][1]["KERNELSCOPE_LOAD_SAMPLES"] == "0"  # a store given by the environment


def test_gpu_labels_tell_same_name_gpus_apart(tmp_path):
    """One bench run per GPU of a two-GPU server: both are "NVIDIA H200", told apart by their UUIDs."""
    import json
    from collectors.store import Store
    from analyzers.ceilings import gpu_labels
    from tests.dashboard.helpers import bench_doc

    s = Store(tmp_path / "s")
    runs = []
    for uuid in ("GPU-c91839b2-571c", "GPU-c39cba33-b336"):
        doc = json.loads(bench_doc("NVIDIA H200", 1.0))
        doc["gpu"]["uuid"] = uuid
        runs.append(Source(s).ingest_bytes(json.dumps(doc).encode(), f"{uuid}.json")[0])
    labels = gpu_labels([(r.run_id, r.meta["gpu_name"], r.meta["gpu_uuid"]) for r in runs])
    assert sorted(labels.values()) == ["NVIDIA H200 · GPU-c39cba33", "NVIDIA H200 · GPU-c91839b2"]
    assert set(Source(s).bench_results()["gpu"]) == set(labels.values())
    assert gpu_labels([(runs[0].run_id, "NVIDIA H200", "GPU-c91839b2-571c")]) == {
        runs[0].run_id: "NVIDIA H200"
    }


def test_link_columns_follow_only_http_and_paths_on_this_server():
    """Issue 42: table.js built <a href> from any value of a link column; javascript: and other schemes are text."""
    import polars as pl

    from pathlib import Path

    from dashboard.web.reports.report_blocks import Col, Table, safe_link

    assert safe_link("kernels?run=ab&kernel=3") == "kernels?run=ab&kernel=3"
    assert safe_link("/timeline?run=x") == "/timeline?run=x"
    assert safe_link("https://ui.perfetto.dev") == "https://ui.perfetto.dev"
    for bad in (
        "javascript:alert(1)",
        " JavaScript:alert(1)",
        "data:text/html,x",
        "//evil.example/x",
        "vbscript:x",
        "java\tscript:x",
        "file:///etc/passwd",
    ):
        assert safe_link(bad) is None, bad
    t = Table(
        "t",
        pl.DataFrame({"u": ["javascript:alert(1)", "kernels?run=a"]}),
        {"u": Col("u", kind="link")},
    )
    assert t.cells()["rows"] == [[None], ["kernels?run=a"]]
    js = (
        Path(__file__).resolve().parents[2] / "dashboard" / "web" / "static" / "table.js"
    ).read_text()
    assert "safeHref(v)" in js and 'href="${esc(v)}"' not in js
