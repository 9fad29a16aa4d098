"""Issue 38 on the recorded bench runs (sample_traces/h*/bench_suite): two GPUs side by side
(analyzers.gpu_compare).

- Each rate is a fraction of the ceiling that bounds it: the unpadded transpose and the
  shared-memory column read against shared memory (SMs × 128 B × boost clock), never DRAM; the
  padded transpose against DRAM.
- A ceiling measured while the GPU throttled is stored and shown as throttled.
- The ratio between GPUs is judged against the ratio of the two predictions; a measurement that
  moves it flips the verdict.
"""

from __future__ import annotations

import json

import polars as pl
import pytest

from analyzers.ceilings import bounding_resource, result_peak, smem_bandwidth_bound
from analyzers.gpu_compare import RATIO_TOLERANCE, compare_gpus, gpu_label
from analyzers.gpus import find_gpu
from tests.conftest import SAMPLES
from dashboard.core.source import Source

H200_RUNS = sorted((SAMPLES / "h200" / "bench_suite").glob("bench_*.json.gz"))


@pytest.fixture(scope="module")
def src(tmp_path_factory):
    from collectors.store import Store

    s = Store(tmp_path_factory.mktemp("gpus") / "store")
    ids = [Source(s).ingest_path(p)[0].run_id for p in H200_RUNS]
    return Source(s), ids


def test_a_rate_is_a_fraction_of_the_ceiling_that_bounds_it(src):
    source, (a, b) = src
    rows = compare_gpus(source.bench_results(), source.ceilings(), a, b)["rows"]
    t = rows.filter((pl.col("case") == "transpose.tile") & (pl.col("unit") == "B/s"))
    assert t.height
    h200 = find_gpu("NVIDIA H200")
    for r in t.iter_rows(named=True):
        padded = json.loads(r["params"])["padded"]
        assert r["bound"] == ("dram" if padded else "smem")
        peak = h200.dram_bandwidth_bytes_per_s if padded else smem_bandwidth_bound(h200)
        assert r["b_pct"] == pytest.approx(r["b_measured"] / peak * 100)
    # an unpadded transpose against shared memory is a small fraction of it, never a third of DRAM
    assert t.filter(pl.col("bound") == "smem")["b_pct"].max() < 15
    assert bounding_resource("bank.column_read", "bandwidth", "B/s") == "smem"
    assert bounding_resource("h2d.chunked_copy", "copy_bandwidth", "B/s") == "h2d"
    assert result_peak(h200, "transpose.tile", "bandwidth", "B/s", {"padded": False})[1].startswith(
        "shared-memory"
    )


def test_throttled_ceilings_are_stored_and_shown_as_throttled(src):
    source, (a, b) = src
    c = source.ceilings()
    run = c.filter(pl.col("run_id") == b)
    # the log says THROTTLED
    assert run.filter(pl.col("resource") == "bf16")["throttled"].all()
    assert not run.filter(pl.col("resource") == "dram")["throttled"].any()
    pair = compare_gpus(source.bench_results(), c, a, b)
    bf16 = next(x for x in pair["ceilings"] if x["resource"] == "bf16")
    assert bf16["b_throttled"] and "throttled on" in pair["summary"]


def test_the_ratio_verdict_flips_with_a_measurement(src):
    source, (a, b) = src
    res = source.bench_results()
    rows = compare_gpus(res, source.ceilings(), a, b)["rows"]
    r = rows.filter(
        (pl.col("case") == "transpose.tile")
        & (pl.col("unit") == "s")
        & pl.col("ratio_verdict").is_not_null()
    ).row(0, named=True)
    assert (
        r["ratio_verdict"] == "agrees"
        and abs(r["speedup"] / r["predicted_speedup"] - 1) <= RATIO_TOLERANCE
    )
    # the same case measured 1.5x slower on B: the GPUs no longer differ as predicted
    slower = res.with_columns(
        pl.when(
            (pl.col("run_id") == b)
            & (pl.col("case") == r["case"])
            & (pl.col("metric") == r["metric"])
            & (pl.col("params") == r["params"])
        )
        .then(pl.col("value") * 1.5)
        .otherwise(pl.col("value"))
        .alias("value")
    )
    flipped = compare_gpus(slower, source.ceilings(), a, b)["rows"].filter(
        (pl.col("case") == r["case"])
        & (pl.col("metric") == r["metric"])
        & (pl.col("params") == r["params"])
    )
    assert flipped["ratio_verdict"].item() == "differs"


def test_one_name_per_gpu_model():
    assert gpu_label("NVIDIA H100 80GB HBM3") == "NVIDIA H100 80GB HBM3 (H100 SXM)"
    assert gpu_label("NVIDIA H200") == "NVIDIA H200"


def test_h200_against_the_recorded_h100_leads_with_the_dram_ratio(tmp_path):
    """The H100 suite recorded beside the H200's (sample_traces/h100/bench_suite): the summary says
    the DRAM ratio next to the spec sheets' (1.40× measured, 1.43× spec), that compute is the same,
    and the launch cost per host."""
    from collectors.store import Store

    s = Store(tmp_path / "store")
    h100 = (
        Source(s)
        .ingest_path(next((SAMPLES / "h100" / "bench_suite").glob("bench_*.json.gz")))[0]
        .run_id
    )
    h200 = Source(s).ingest_path(H200_RUNS[-1])[0].run_id
    src = Source(s)
    r = compare_gpus(src.bench_results(), src.ceilings(), h100, h200)
    assert r["a"] == "NVIDIA H100 80GB HBM3 (H100 SXM)" and r["b"] == "NVIDIA H200"
    assert r["summary"].startswith("H200 / H100 SXM: DRAM 1.40× (spec 1.43×)")
    dram = next(c for c in r["ceilings"] if c["resource"] == "dram")
    assert 1.35 < dram["ratio"] < 1.45 and abs(dram["ratio"] / dram["spec_ratio"] - 1) < 0.05
    fp32 = next(c for c in r["ceilings"] if c["resource"] == "fp32")
    assert abs(fp32["ratio"] - 1) < 0.05 and fp32["a_throttled"]
    assert "µs on A's host" in r["summary"]


def test_host_to_device_and_device_to_host_are_kept_apart(src):
    """A device-to-host figure is never used as the host-to-device ceiling (issue 38: `predict
    h2d.chunked_copy` took the D2H figure on the H100)."""
    from analyzers.ceilings import classify_ceiling

    source, (a, b) = src
    assert classify_ceiling("d2h_pinned_bandwidth", "B/s") == "d2h"
    assert classify_ceiling("h2d_pinned_bandwidth", "B/s") == "h2d"
    best = source.best_ceilings("NVIDIA H200")
    assert best["h2d"].source.startswith("h2d_") and best["d2h"].source.startswith("d2h_")


def test_host_side_ceilings_are_used_per_host(src):
    """Launch costs, host memcpy and the host link belong to the host that measured them (issue 38:
    3.11 µs C++ launches on the H100's host, 4.98 on the H200's): the store uses one host's figures
    — the newest run's, or the one named — never the best over hosts; the GPU's own ceilings stay
    the best over every run. The recorded runs predate stored hosts, so each is its own host."""
    from analyzers.ceilings import HOST_RESOURCES, best_ceilings

    source, _ = src
    judged = source.ceilings()
    hosts = judged["host"].unique().to_list()
    assert len(hosts) == 2 and all(h.startswith("host of run ") for h in hosts)
    newest = judged["run_id"][0]  # newest run first
    launch = judged.filter((pl.col("resource") == "launch") & (pl.col("status") == "trusted"))
    assert launch.height == 2 and launch["value"].n_unique() == 2
    best = best_ceilings(judged, "NVIDIA H200")
    mine = launch.filter(pl.col("run_id") == newest)["value"][0]
    assert best["launch"].value == mine and f"host of run {newest}" in best["launch"].source
    other = launch.filter(pl.col("run_id") != newest).row(0, named=True)
    named = best_ceilings(judged, "NVIDIA H200", other["host"])
    assert named["launch"].value == other["value"]
    assert {"launch_cxx", "host_memcpy", "h2d"} <= HOST_RESOURCES
    dram = judged.filter((pl.col("resource") == "dram") & (pl.col("status") == "trusted"))[
        "value"
    ].max()
    # the GPU's own: the best over every run
    assert best["dram"].value == dram == named["dram"].value


def test_a_new_bench_run_records_its_host(tmp_path):
    import gzip

    from collectors.bench.run import host_info
    from collectors.ingest import parse_path

    h = host_info()
    assert len(h["id"]) == 12 and h["name"] and h["cpus"]
    doc = json.loads(gzip.decompress(H200_RUNS[-1].read_bytes()))
    doc["host"] = h
    p = tmp_path / "bench_with_host.json"
    p.write_text(json.dumps(doc))
    assert parse_path(p).meta["host"]["id"] == h["id"]
