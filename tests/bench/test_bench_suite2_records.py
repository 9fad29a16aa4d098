"""Records shaped like the ones the suite now writes (suite 2: tensor-core tiling, equal-block
transposes, the C++ launch floor, one kernel between events, the staging path of pageable copies),
read as a stored run is read: each gets its verdict from the case's predicted time, the chapter's
claims become derived ratios with verdicts, and the new ceilings feed the models. Synthetic numbers,
so that the path is tested before the H200 recording exists."""

from __future__ import annotations

import json

import polars as pl
import pytest

from analyzers import ceilings
from analyzers.cases import evaluate
from analyzers.cases.bench_verdicts import attach
from analyzers.gpus import get_gpu
from collectors.bench import harness
from collectors.bench.results import parse

H200 = get_gpu("H200")
MIB = 1 << 20


def _doc(mma_times=(0.40e-3, 0.33e-3, 0.21e-3), cxx=2.6e-6) -> dict:
    rec = harness.make_record
    results = []
    for (kname, bm, bn), t in zip(
        (("ks_mma_64x64", 64, 64), ("ks_mma_64x128", 64, 128), ("ks_mma_128x128", 128, 128)),
        mma_times,
    ):
        p = {
            "kernel": kname,
            "engine": "tensor",
            "tile_m": bm,
            "tile_n": bn,
            "tile_k": 32,
            "m": 1024,
            "k": 4096,
            "n": 12288,
            "regs_per_thread": {64: 32, 128: 94}[bm] if bn == bm else 56,
            "smem_static_bytes": 0,
            "smem_dynamic_bytes": 2 * bm * 32 + 2 * 32 * bn + 4 * bm * bn,
        }
        results += harness.timing_records(
            "tiling.traffic",
            p,
            harness.Stats(t, t, t * 0.003, 0.003, 100, t, t),
            source="event timing",
            flop=2 * 1024 * 4096 * 12288,
        )
    for kname, tile, pad, t in (
        ("ks_transpose_b256_t16", 16, False, 270e-6),
        ("ks_transpose_b256_t16_pad", 16, True, 265e-6),
        ("ks_transpose_b256_t32_pad", 32, True, 130e-6),
        ("ks_transpose_b256_t64_pad", 64, True, 128e-6),
    ):
        p = {"kernel": kname, "tile": tile, "padded": pad, "n": 8192, "block_threads": 256}
        results += harness.timing_records(
            "transpose.tile",
            p,
            harness.Stats(t, t, t * 0.002, 0.002, 200, t, t),
            source="event timing",
            bytes_moved=2 * 8192 * 8192 * 4,
        )
    cxx_p = {"launcher": "C++ cudaLaunchKernel (<<<>>>), CUDA runtime", "launches": 2000}
    results += [
        rec(
            "launch.overhead",
            "host_submit_time_per_launch",
            cxx * 0.95,
            "s",
            cxx_p,
            source="host clock",
            cv=0.01,
            n=5,
        ),
        rec(
            "launch.overhead",
            "back_to_back_time_per_launch",
            cxx,
            "s",
            cxx_p,
            source="host clock",
            cv=0.01,
            n=5,
        ),
    ]
    staged = {
        "memory": "pageable",
        "chunks": 1,
        "chunk_bytes": 64 * MIB,
        "total_bytes": 64 * MIB,
        "bounce_bytes": 4 * MIB,
    }
    results += harness.timing_records(
        "h2d.chunked_copy",
        staged,
        harness.Stats(6.9e-3, 6.9e-3, 1e-5, 0.01, 30, 6.9e-3, 7e-3),
        source="event timing",
        bytes_moved=64 * MIB,
        prefix="staged_copy_",
    )
    pageable = {"memory": "pageable", "chunks": 1, "chunk_bytes": 64 * MIB, "total_bytes": 64 * MIB}
    results += harness.timing_records(
        "h2d.chunked_copy",
        pageable,
        harness.Stats(7.0e-3, 7.0e-3, 1e-5, 0.01, 30, 7e-3, 7e-3),
        source="event timing",
        bytes_moved=64 * MIB,
        prefix="copy_",
    )
    ceilings = [
        rec(
            "ceiling",
            "dram_copy_bandwidth",
            4.28e12,
            "B/s",
            {"method": "torch copy_"},
            source="event timing",
            cv=0.001,
            n=100,
        ),
        rec(
            "ceiling",
            "bf16_dense_flop_rate",
            7.9e14,
            "FLOP/s",
            {},
            source="event timing",
            cv=0.003,
            n=20,
        ),
        rec(
            "ceiling", "l2_read_bandwidth", 8.4e12, "B/s", {}, source="event timing", cv=0.01, n=200
        ),
        rec(
            "ceiling", "kernel_event_floor", 3.0e-6, "s", {}, source="event timing", cv=0.01, n=200
        ),
        rec(
            "ceiling", "host_memcpy_bandwidth", 10e9, "B/s", {}, source="host clock", cv=0.01, n=15
        ),
        rec(
            "ceiling",
            "h2d_pinned_bandwidth",
            55e9,
            "B/s",
            {},
            source="event timing",
            cv=0.002,
            n=12,
        ),
        rec("ceiling", "launch_cxx_back_to_back", cxx, "s", {}, source="host clock", cv=0.01, n=5),
    ]
    return {
        "kernelscope_bench": 1,
        "suite": 2,
        "gpu": {"name": "NVIDIA H200", "uuid": "GPU-06deee61"},
        "versions": {},
        "ceilings": ceilings,
        "results": results,
        "failures": [],
    }


def _read(doc):
    p = parse(json.dumps(doc).encode(), "bench_nvidia-h200_06deee61.json")
    ceil = ceilings.best_ceilings(
        ceilings.ceilings_frame(p.table("ceilings"), run_id="r", gpu_name="NVIDIA H200"),
        "NVIDIA H200",
    )
    res = attach(p.table("results"), H200, ceil)
    return (
        p,
        ceil,
        res.with_columns(pl.Series("p", [json.loads(x) for x in res["params"]], dtype=pl.Object)),
    )


def test_new_ceilings_reach_the_models():
    p, ceil, _ = _read(_doc())
    assert p.meta["suite"] == 2
    assert {"kernel", "host_memcpy", "launch_cxx"} <= set(ceil)
    ev = evaluate("h2d.chunked_copy", H200, ceilings=ceil)
    assert ev.params.staging == pytest.approx(10.0) and ev.params.t0 == pytest.approx(3.0)
    assert ev.params.sources["staging"].startswith("measured ceiling: host_memcpy_bandwidth")


def test_tensor_core_tiling_is_judged_by_its_time_model_and_the_claim_becomes_a_ratio():
    _, ceil, res = _read(_doc())
    times = res.filter((pl.col("case") == "tiling.traffic") & (pl.col("metric") == "time"))
    assert times.height == 3 and set(times["predicted_kind"]) == {"estimate"}
    for r in times.iter_rows(named=True):
        cp = {
            "m": r["p"]["tile_m"],
            "n": r["p"]["tile_n"],
            "stage": 2,
            "acc": 4,
            "engine": "tensor",
            "regs": r["p"]["regs_per_thread"],
        }
        assert r["predicted"] == pytest.approx(
            evaluate("tiling.traffic", H200, cp, ceilings=ceil).value("time")
        )
    # bandwidth and FLOP rate are the same measurement: not judged again
    assert (
        res.filter(
            (pl.col("case") == "tiling.traffic")
            & (pl.col("metric") == "flop_rate")
            & pl.col("verdict").is_not_null()
        ).height
        == 0
    )
    ratio = res.filter(pl.col("metric") == "time_ratio_vs_64x64").sort("value")
    assert ratio.height == 2 and set(ratio["verdict"]) <= {"agrees", "differs-unexplained"}
    # 0.21 / 0.40: the bigger tile is faster here
    r128 = ratio.filter(pl.col("value") < 0.6).row(0, named=True)
    assert r128["value"] == pytest.approx(0.21 / 0.40) and r128["p"]["ref_regs_per_thread"] == 32
    assert "half the traffic can be slower" in r128["notes"]


def test_a_measurement_that_contradicts_the_tiling_model_fails():
    # 64x64 five times slower than modelled
    _, _, res = _read(_doc(mma_times=(2.0e-3, 0.33e-3, 0.21e-3)))
    r = res.filter(
        (pl.col("metric") == "time")
        & (
            pl.col("p").map_elements(
                lambda p: p.get("kernel") == "ks_mma_64x64", return_dtype=pl.Boolean
            )
        )
    ).row(0, named=True)
    assert r["verdict"] == "differs-unexplained" and "Not measured" in r["verdict_explanation"]


def test_equal_block_transposes_give_the_chapters_comparison():
    _, _, res = _read(_doc())
    sp = res.filter(pl.col("metric") == "speedup_vs_tile16")
    assert sp.height == 2 and set(
        sp["p"].map_elements(lambda p: p["block_threads"], return_dtype=pl.Int64)
    ) == {256}
    # 265 µs / 130 µs vs the model's ≈ 2.2×
    assert sp["value"].min() > 2 and set(sp["verdict"]) == {"agrees"}
    t = res.filter((pl.col("case") == "transpose.tile") & (pl.col("metric") == "time"))
    assert set(t["predicted_kind"]) == {"estimate"} and t["verdict"].null_count() == 0


def test_cxx_launch_floor_is_judged_against_the_chapters_figure():
    _, _, res = _read(_doc(cxx=2.6e-6))
    r = res.filter(
        (pl.col("case") == "launch.overhead") & (pl.col("metric") == "back_to_back_time_per_launch")
    ).row(0, named=True)
    assert (
        r["predicted"] == pytest.approx(4.4e-6) and r["verdict"] == "differs-unexplained"
    )  # 2.6 µs: not 4.4
    _, _, res = _read(_doc(cxx=4.3e-6))
    r = res.filter(
        (pl.col("case") == "launch.overhead") & (pl.col("metric") == "back_to_back_time_per_launch")
    ).row(0, named=True)
    assert r["verdict"] == "agrees"


def test_pageable_copies_are_predicted_from_the_measured_staging_path():
    _, ceil, res = _read(_doc())
    rows = {
        r["metric"]: r
        for r in res.filter(pl.col("case") == "h2d.chunked_copy").iter_rows(named=True)
    }
    staged, page = rows["staged_copy_time"], rows["copy_time"]
    # 64 MiB / 10 GB/s of host memcpy + the last piece's DMA + one per-copy cost (t0 = the 3 µs
    # kernel floor)
    assert staged["predicted"] == pytest.approx(3e-6 + 64 * MIB / 10e9 + 4 * MIB / 55e9, rel=1e-6)
    assert staged["verdict"] == "agrees" and page["verdict"] == "agrees"
    assert (
        rows["staged_copy_bandwidth"]["verdict"] is None
        and rows["copy_bandwidth"]["verdict"] is None
    )
