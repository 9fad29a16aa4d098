"""Cross-run questions on index frames: a kernel over runs, ceilings over time, regressions between
consecutive runs of the same source on the same GPU (and the measurements that flip a regression)."""

from __future__ import annotations

import polars as pl
import pytest

from analyzers import history
from analyzers.errors import ParameterError
from collectors.index import CEILING_ROW_SCHEMA, KERNEL_ROW_SCHEMA


def krows(rows) -> pl.DataFrame:
    """(run_id, created, source, gpu, name, median_ns, std_ns)."""
    out = []
    for run, t, src, gpu, name, med, std in rows:
        out.append(
            {
                "run_id": run,
                "kind": "kineto",
                "source_name": src,
                "gpu_name": gpu,
                "gpu_uuid": None,
                "created": float(t),
                "name": name,
                "config": "grid (1,1,1) block (1,1,1)",
                "n": 10,
                "total_ns": 10.0 * med,
                "median_ns": float(med),
                "mean_ns": float(med),
                "std_ns": float(std),
                "min_ns": float(med),
                "max_ns": float(med),
                "indexed_at": 0,
            }
        )
    return pl.DataFrame(out, schema=KERNEL_ROW_SCHEMA)


K = krows(
    [
        ("r1", 1, "ci.json", "H200", "gemm", 100, 0),
        ("r1", 1, "ci.json", "H200", "relu", 10, 0),
        ("r2", 2, "ci.json", "H200", "gemm", 110, 0),
        ("r2", 2, "ci.json", "H200", "relu", 10, 0),
        ("r3", 3, "ci.json", "H100", "gemm", 300, 0),  # another GPU: its own history
        # another source: not compared with ci.json
        ("r4", 4, "other.json", "H200", "gemm", 500, 0),
        ("r5", 5, "ci.json", "H200", "gemm", 111, 0),
    ]
)


def test_kernel_history_filters_and_orders():
    h = history.kernel_history(K, "gem")
    assert h["run_id"].to_list() == ["r1", "r2", "r3", "r4", "r5"]
    assert history.kernel_history(K.lazy(), "gemm", gpu="H200", source="ci.json")[
        "median_ns"
    ].to_list() == [100, 110, 111]
    assert history.kernel_history(K, "gemm", last=2)["run_id"].to_list() == ["r4", "r5"]
    with pytest.raises(ParameterError, match="invalid kernel regex"):
        history.kernel_history(K, "(")


@pytest.mark.parametrize("noise,expected", [(0.05, [("r2", "gemm")]), (0.15, [])])
def test_regressions_are_consecutive_runs_of_the_same_source_and_gpu(noise, expected):
    """r1 -> r2: gemm +10 % (a regression above a 5 % floor, not above 15 %); r2 -> r5: +0.9 %; r3
    (H100) and r4 (another file) have no predecessor."""
    r = history.regressions(K, noise_floor=noise)
    assert [(x["run_id"], x["name"]) for x in r.iter_rows(named=True)] == expected
    every = history.regressions(K, noise_floor=noise, statuses=None)
    assert set(every["run_id"]) == {"r2", "r5"}
    assert (
        every.filter((pl.col("run_id") == "r5") & (pl.col("name") == "gemm"))["previous_run_id"][0]
        == "r2"
    )
    # relu absent: not a row
    assert every.filter(pl.col("run_id") == "r5")["status"].to_list() == ["unchanged"]
    if expected:
        assert r["change_pct"][0] == pytest.approx(10.0)


def test_spread_widens_the_threshold():
    noisy = krows([("a", 1, "s", "g", "k", 100, 10), ("b", 2, "s", "g", "k", 110, 10)])
    r = history.regressions(noisy, statuses=None).row(0, named=True)
    assert r["threshold_pct"] == pytest.approx(100 * 2 * ((0.1**2 + (10 / 110) ** 2) ** 0.5))
    # a 10 % change inside a 27 % threshold (over twice the 5 % floor) is not "unchanged": it could
    # not be seen
    assert r["status"] == "too noisy to judge"
    calm = krows([("a", 1, "s", "g", "k", 100, 1), ("b", 2, "s", "g", "k", 102, 1)])
    assert history.regressions(calm, statuses=None).row(0, named=True)["status"] == "unchanged"


def test_ceiling_history_labels_gpus_of_the_same_name_by_uuid():
    rows = []
    for run, t, uuid, v in (
        ("b1", 1, "GPU-aaaaaaaa-1", 4.2e12),
        ("b2", 2, "GPU-bbbbbbbb-2", 4.3e12),
        ("b3", 3, "GPU-aaaaaaaa-1", 4.1e12),
    ):
        for metric, val, unit in (
            ("dram_copy_bandwidth", v, "B/s"),
            ("fp32_flop_rate", 6e13, "FLOP/s"),
        ):
            rows.append(
                {
                    "run_id": run,
                    "kind": "bench",
                    "source_name": "b.json",
                    "gpu_name": "NVIDIA H200",
                    "gpu_uuid": uuid,
                    "created": float(t),
                    "metric": metric,
                    "value": val,
                    "unit": unit,
                    "cv": 0.001,
                    "source": "event timing",
                    "params": "{}",
                    "indexed_at": 0,
                }
            )
    c = pl.DataFrame(rows, schema=CEILING_ROW_SCHEMA)
    h = history.ceiling_history(c, resource="dram")
    assert h["value"].to_list() == [4.2e12, 4.3e12, 4.1e12]
    assert h["gpu"].to_list() == [
        "NVIDIA H200 · GPU-aaaaaaaa",
        "NVIDIA H200 · GPU-bbbbbbbb",
        "NVIDIA H200 · GPU-aaaaaaaa",
    ]  # as the GPUs page labels them
    assert set(history.ceiling_history(c)["resource"]) == {"dram", "fp32"}
