"""Bench result documents: parsing, validation, the store, `kernelscope bench` and `analyze` on CPU.
The real GPU runs carry the `gpu` marker."""

from __future__ import annotations

import copy
import gzip
import json
import os
import subprocess
import sys

import polars as pl
import pytest

from collectors.ingest import parse_bytes
from collectors.bench import harness
from analyzers.cases.bench_verdicts import attach
from analyzers.cases import evaluate
from analyzers.gpus import get_gpu
from collectors.bench.results import parse
from collectors.schema import BENCH_SCHEMA
from collectors.bench.run import _clean, write_doc
from collectors.errors import ArtifactError
from tests.conftest import REPO
from dashboard.core.source import Source


def _doc() -> dict:
    rec = harness.make_record
    return {
        "kernelscope_bench": 1,
        "gpu": {
            "name": "NVIDIA H200",
            "uuid": "GPU-2ab1ed74-3a4e-0e1f",
            "index": 0,
            "cc": [9, 0],
            "sm_count": 132,
            "attributes": {"display_name": "NVIDIA H200", "multiprocessor_count": 132},
        },
        "versions": {"torch": "2.11.0+cu130", "triton": "3.6.0", "driver": "580.159.04"},
        "started": "2026-11-30T10:00:00Z",
        "finished": "2026-11-30T10:05:00Z",
        "ceilings": [
            rec(
                "ceiling",
                "dram_copy_bandwidth",
                4.41e12,
                "B/s",
                {"method": "ks_copy_u8"},
                source="event timing",
                cv=0.004,
                n=200,
            )
        ],
        "results": [
            rec(
                "bank.column_read",
                "time",
                2.1e-3,
                "s",
                {"width_bytes": 4, "stride_words": 32},
                source="event timing",
                cv=0.001,
                n=48,
            ),
            rec(
                "bank.column_read",
                "shared_ld_wavefronts",
                276824064.0,
                "count",
                {"width_bytes": 4, "stride_words": 32},
                source="ncu counter",
                n=1,
            ),
            rec(
                "bank.column_read",
                "shared_ld_bank_conflicts",
                268173312.0,
                "count",
                {"width_bytes": 4, "stride_words": 32},
                source="ncu counter",
                n=1,
            ),
            rec(
                "littles_law",
                "bandwidth",
                2.5e12,
                "B/s",
                {"blocks_per_sm": 2},
                source="event timing",
                cv=0.05,
                n=30,
                flags=["noisy", "throttled"],
            ),
        ],
        "failures": [{"case": "compile.amortization", "error": "timed out after 150 s"}],
        "cases": {"bank.column_read": {"status": "ok", "seconds": 12.0}},
    }


def _bytes(doc) -> bytes:
    return json.dumps(doc).encode()


def test_parse_tables_and_meta():
    p = parse(_bytes(_doc()), "bench_nvidia-h200_2ab1ed74.json")
    assert p.kind == "bench"
    res, ceil = p.table("results"), p.table("ceilings")
    # nothing derived is stored
    assert res.schema == BENCH_SCHEMA and ceil.schema == BENCH_SCHEMA
    assert res.height == 4 and ceil.height == 1 and "verdict" not in res.columns
    row = res.row(1, named=True)
    assert row["metric"] == "shared_ld_wavefronts" and row["source"] == "ncu counter"
    assert json.loads(row["params"]) == {"stride_words": 32, "width_bytes": 4}
    assert res["flags"][3].to_list() == ["noisy", "throttled"]
    # read with today's models: the degree is derived from the counters
    # (analyzers.kernels.conflict_degree) and judged by the bank-conflict model of analyzers.cases;
    # the time by the case's time model, whose mechanism reads the same kernel's counters (32
    # wavefronts per load: the model's own degree, so it does not explain the synthetic 2.1 ms, half
    # the predicted time)
    full = attach(res, get_gpu("NVIDIA H200"))
    deg = full.filter(full["metric"] == "bank_conflict_degree").row(0, named=True)
    assert deg["value"] == 32.0 and deg["source"] == "ncu counter"
    assert (
        deg["predicted"] == 32.0 and deg["predicted_unit"] == "way" and deg["verdict"] == "agrees"
    )
    t = full.row(0, named=True)
    assert t["predicted"] == pytest.approx(
        evaluate("bank.column_read", "H200", {"stride": 32}).value("time")
    )
    assert (
        t["verdict"] == "differs-unexplained"
        and "Not measured: the measured wavefronts" in t["verdict_explanation"]
    )
    # a record whose parameters the model cannot take keeps no verdict and says why
    ll = full.filter(full["case"] == "littles_law").row(0, named=True)
    assert ll["verdict"] is None and ll["verdict_explanation"].startswith("no prediction: KeyError")
    assert ceil["value"][0] == 4.41e12
    m = p.meta
    assert m["gpu_name"] == "NVIDIA H200" and m["result_count"] == 4 and m["partial"] is False
    assert m["failures"][0]["case"] == "compile.amortization"
    json.dumps(m)  # the store writes meta as JSON


def test_partial_document_is_marked():
    d = _doc()
    d["finished"] = None
    assert parse(_bytes(d), "b.json").meta["partial"] is True


def test_detected_by_artifact_layer_also_gzipped():
    data = _bytes(_doc())
    assert parse_bytes(data, "b.json").kind == "bench"
    assert parse_bytes(gzip.compress(data), "b.json.gz").table("results").height == 4


@pytest.mark.parametrize(
    "mutate,match",
    [
        (lambda d: d.pop("results"), "lacks 'results'"),
        (lambda d: d.pop("gpu"), "lacks 'gpu'"),
        (lambda d: d.__setitem__("kernelscope_bench", 2), "format 2"),
        (lambda d: d["gpu"].pop("name"), "'gpu' must be an object with a 'name'"),
        (lambda d: d["results"][0].__setitem__("value", None), r"results\[0\].*finite"),
        (lambda d: d["results"][1].pop("unit"), r"results\[1\].*lacks unit"),
        (lambda d: d["ceilings"][0].__setitem__("unit", "GB/s"), r"ceilings\[0\].*unit"),
        (lambda d: d.__setitem__("results", {}), "must be a list"),
        (lambda d: d.__setitem__("failures", ["oops"]), "failures"),
    ],
)
def test_broken_documents(mutate, match):
    d = copy.deepcopy(_doc())
    mutate(d)
    with pytest.raises(ArtifactError, match=match):
        parse(_bytes(d), "bad.json")


def test_bad_json_and_wrong_document():
    with pytest.raises(ArtifactError, match="not valid JSON"):
        parse(b'{"kernelscope_bench": 1, "gpu": ', "trunc.json")
    with pytest.raises(ArtifactError, match="not a kernelscope bench"):
        parse(b'{"traceEvents": []}', "x.json")
    with pytest.raises(ArtifactError, match="not valid JSON"):
        parse(b"\xff\xfe{", "x.json")


def test_write_doc_cleans_non_finite(tmp_path):
    d = _doc()
    d["gpu"]["power_limit_w"] = float("nan")
    p = tmp_path / "b.json"
    write_doc(d, p)
    back = json.loads(p.read_text())
    assert back["gpu"]["power_limit_w"] is None
    assert parse(p.read_bytes(), p.name).table("results").height == 4
    assert _clean({"a": (1, float("inf"))}) == {"a": [1, None]}


def test_store_ingest_and_analyze_json(store, tmp_path, capsys):
    from dashboard.cli import main

    p = tmp_path / "bench_nvidia-h200_2ab1ed74.json"
    p.write_text(json.dumps(_doc()))
    run, created = Source(store).ingest_path(p)
    assert created and run.kind == "bench" and run.meta["gpu_name"] == "NVIDIA H200"
    assert run.table("results").schema == BENCH_SCHEMA
    capsys.readouterr()
    assert main(["analyze", run.run_id, "--format", "json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    r0 = rep["results"][0]
    assert {"case", "metric", "value", "unit", "params", "predicted", "verdict", "cv"} <= set(r0)
    assert r0["params"] == {"width_bytes": 4, "stride_words": 32} and r0["predicted"]["value"] > 0
    assert rep["ceilings"][0]["metric"] == "dram_copy_bandwidth"
    assert rep["failures"][0]["error"].startswith("timed out")


# ---- the command line, on a machine without a GPU
# --------------------------------------------------


def test_bench_without_gpu_runs_cpu_cases(store, monkeypatch, tmp_path, capsys):
    from dashboard.cli import bench as cli_bench
    from dashboard.cli import main

    monkeypatch.setattr(cli_bench, "visible_gpu_count", lambda: 0)
    assert main(["bench", "--quick", "--out", str(tmp_path / "out")]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("kernelscope bench: no NVIDIA GPU visible here")
    run = store.get(lines[-1])
    assert run.kind == "bench" and run.meta["gpu_name"] == "CPU"
    res = run.table("results")
    assert set(res["case"]) == {"fp.non_associativity", "online_softmax.step"}
    right = res.filter((pl.col("metric") == "right_grouping"))["value"][0]
    assert right == 1.0 + 2.0**-23
    err = res.filter(pl.col("metric") == "abs_error")["value"][0]
    assert err < 1e-12


def test_bench_with_gpu_but_no_torch_says_what_to_install(store, monkeypatch, capsys):
    from dashboard.cli import bench as cli_bench
    from dashboard.cli import main

    monkeypatch.setattr(cli_bench, "visible_gpu_count", lambda: 1)
    monkeypatch.setattr(cli_bench, "missing_gpu_packages", lambda: ["torch", "triton"])
    assert main(["bench"]) == 1
    err = capsys.readouterr().err
    assert "needs torch, triton" in err and "bench extra" in err
    assert store.runs() == []


def test_run_module_rejects_unknown_case_before_touching_a_gpu(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "collectors.bench.run", "--out", str(tmp_path), "--cases", "nope"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and "unknown case 'nope'" in r.stderr


# ---- real GPU runs
# ---------------------------------------------------------------------------------


@pytest.mark.gpu
def test_quick_suite_on_gpu(tmp_path):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "collectors.bench.run",
            "--out",
            str(tmp_path),
            "--quick",
            "--cases",
            "ceiling.dram_copy,bank.column_read,transpose.tile",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert r.returncode == 0, r.stdout[-3000:]
    (path,) = tmp_path.glob("bench_*.json")
    p = parse(path.read_bytes(), path.name)
    assert p.meta["finished"] and p.table("ceilings").height == 1
    res = p.table("results")
    t = {
        json.loads(row["params"])["stride_words"]: row["value"]
        for row in res.filter(
            (pl.col("case") == "bank.column_read")
            & (pl.col("metric") == "time")
            & (pl.col("params").str.contains('"width_bytes": 4'))
        ).iter_rows(named=True)
    }
    assert t[32] > 5 * t[33]  # 32-way conflicts against none


def test_predictions_on_recorded_h200_counters():
    """Recorded H200 counters (sample_traces/h200/chapter5_kernels) through the bench parser: the
    tile model's L2 read traffic (64x64) and ncu's theoretical occupancy get verdicts from
    analyzers.cases."""
    from collectors.bench.ncu_rerun import counter_records, parse_raw_csv
    from tests.conftest import H200_KERNELS, SAMPLES

    with gzip.open(H200_KERNELS / "full_raw_base.csv.gz", "rt") as f:
        rows = dict(parse_raw_csv(f.read()))
    env = json.loads((SAMPLES / "h200" / "device_env.json").read_text())
    from collectors.bench.context import device_attributes

    d = _doc()
    d["gpu"]["attributes"] = device_attributes(env["cupy_props"])
    d["results"] = []
    for kname, tile, regs, smem in (
        ("ks_matmul_64x64", 64, 40, 16384),
        ("ks_matmul_128x128", 128, 100, 32768),
    ):
        params = {
            "kernel": kname,
            "tile_m": tile,
            "tile_n": tile,
            "tile_k": 32,
            "m": 1024,
            "k": 4096,
            "n": 12288,
            "regs_per_thread": regs,
            "smem_static_bytes": smem,
        }
        d["results"] += counter_records(
            "tiling.traffic", {"kernel": kname, "params": params}, rows[kname]
        )
    from dashboard.core.source import gpu_for

    p = parse(_bytes(d), "b.json")
    res = attach(p.table("results"), gpu_for(p.meta))
    got = {(json.loads(r["params"])["tile_m"], r["metric"]): r for r in res.iter_rows(named=True)}
    l2 = got[(64, "l2_read_from_l1_bytes")]
    assert l2["predicted"] == 3072 * 2**20 and l2["verdict"] == "agrees"
    assert got[(64, "theoretical_occupancy")]["verdict"] == "agrees"
    assert got[(128, "theoretical_occupancy")]["predicted"] == 25.0
    assert got[(64, "kernel_duration")]["verdict"] is None
