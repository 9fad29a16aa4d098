"""Per-kernel analyzers on the real H200 reports: numbers fixed from the recorded counters."""
from __future__ import annotations

import json
import math

import pytest

from analyzers.gpus import get_gpu, resolve_gpu
from analyzers.kernels import analyze_kernels, missing_quantities
from collectors.artifact import parse_bytes
from tests.conftest import H200_KERNELS


def analyzed(name):
    p = parse_bytes((H200_KERNELS / name).read_bytes(), name)
    gpu = resolve_gpu(p.meta["gpu_name"], p.meta["device_attributes"])
    return analyze_kernels(p.table("kernels"), gpu)


@pytest.fixture(scope="module")
def full():
    return analyzed("full.ncu-rep.gz")


def test_bank_conflict_degree_column_read(full):
    d = full["smem_ld_conflict_degree"].to_list()
    assert d[5] == pytest.approx(32.0, abs=1e-9)   # stride 32 words: 32-way
    assert d[6] == pytest.approx(1.0, abs=1e-9)    # stride 33 words: conflict-free
    # transposes: the unpadded 32x32 tile's column read serialises (~32-way), padding removes it
    assert d[3] == pytest.approx(67_414_525 / (67_414_525 - 65_317_373))
    assert d[4] == pytest.approx(2_160_327 / (2_160_327 - 63_175)) and d[4] < 1.04 and d[3] > 30


def test_dram_bandwidth_and_fraction_of_spec(full):
    bw = full["dram_bandwidth_gbps"].to_list()[0]
    assert bw == pytest.approx((536_881_920 + 514_216_960) / 283_680)  # bytes per ns = GB/s
    assert full["dram_peak_fraction"].to_list()[0] == pytest.approx(bw * 1e9 / 4.8e12)
    # the counters' own DRAM peak (bytes/cycle x DRAM clock) is close to the 4.8 TB/s spec
    assert 4.5e3 < full["dram_counter_peak_gbps"].to_list()[0] < 5.1e3


def test_tile_traffic_from_l1_matches_the_model_order(full):
    l2_from_l1 = full["l2_read_from_l1_bytes"].to_list()
    assert l2_from_l1[7] == 91_894_368 * 32 and l2_from_l1[8] == 42_586_602 * 32
    mib = [x / 2**20 for x in l2_from_l1[7:9]]
    assert 2700 < mib[0] < 3100 and 1200 < mib[1] < 1560  # tile model reads: 3072 and 1536 MiB


def test_coalescing(full):
    spr = full["global_ld_sectors_per_request"].to_list()
    ideal = full["global_ld_ideal_sectors_per_request"].to_list()
    assert spr[0] == 16 and ideal[0] == 16          # float4 copy: 32 lanes x 16 B = 16 sectors
    assert spr[1] == 4 and ideal[1] == 4            # 4-byte loads of the transposes
    assert full["global_ld_coalescing_ratio"].to_list()[0] == 1.0
    assert spr[5] is None                            # the column read has no global loads


@pytest.mark.parametrize("name", ["full.ncu-rep.gz", "full_raw.csv.gz", "full_raw_base.csv.gz",
                                  "full_details_base.csv.gz", "basic.ncu-rep.gz", "basic_raw.csv.gz"])
def test_calculator_agrees_with_ncu_on_every_kernel(name):
    a = analyzed(name)
    assert a["predicted_occupancy_pct"].to_list() == pytest.approx(a["theoretical_occupancy_pct"].to_list(), abs=0.01)
    assert a["occupancy_limiter"].to_list()[8] == "registers"  # 100 registers/thread -> 2 blocks of 256


def test_basic_report_lacks_conflicts_and_says_how_to_collect():
    a = analyzed("basic.ncu-rep.gz")
    assert a["smem_conflict_degree"].null_count() == a.height      # missing, not zero
    miss = {m["quantity"]: m for m in missing_quantities(a)}
    assert "smem_conflict_degree" in miss and "--set full" in miss["smem_conflict_degree"]["collect_with"]
    assert "dram_bandwidth_gbps" in miss
    assert "achieved_occupancy_pct" not in miss


def test_unknown_gpu_works_from_device_attributes():
    p = parse_bytes((H200_KERNELS / "full_raw_base.csv.gz").read_bytes(), "x.csv")
    attrs = dict(p.meta["device_attributes"], display_name="NVIDIA H999 Prototype")
    gpu = resolve_gpu("NVIDIA H999 Prototype", attrs)
    assert not gpu.from_registry and gpu.sm_count == 132
    a = analyze_kernels(p.table("kernels"), gpu)
    assert a["predicted_occupancy_pct"].to_list() == pytest.approx(a["theoretical_occupancy_pct"].to_list(), abs=0.01)
    assert a["dram_peak_fraction"].to_list()[0] is not None


def test_analyze_json_has_the_documented_keys(capsys):
    from dashboard.cli import main
    assert main(["analyze", str(H200_KERNELS / "full.ncu-rep.gz"), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    keys = {"id", "name", "duration_ns", "dram_read_bytes", "dram_write_bytes", "dram_bandwidth_gbps",
            "dram_peak_fraction", "achieved_occupancy_pct", "theoretical_occupancy_pct", "predicted_occupancy_pct",
            "occupancy_limiter", "smem_wavefronts", "smem_bank_conflicts", "smem_conflict_degree",
            "global_ld_sectors_per_request"}
    assert len(out["kernels"]) == 9 and keys <= set(out["kernels"][0])
    assert out["gpu"]["name"] == "NVIDIA H200" and out["gpu"]["from_registry"]
    k5 = out["kernels"][5]
    assert k5["name"] == "ks_colread4" and k5["smem_bank_conflicts"] > 2.6e8


def test_analyze_basic_json_reports_missing_as_null(capsys):
    from dashboard.cli import main
    assert main(["analyze", str(H200_KERNELS / "basic_raw.csv.gz"), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert all(k["smem_conflict_degree"] is None and k["dram_bandwidth_gbps"] is None for k in out["kernels"])
    assert any(m["quantity"] == "smem_conflict_degree" for m in out["missing"])


def test_analyze_table_and_csv(capsys):
    from dashboard.cli import main
    assert main(["analyze", str(H200_KERNELS / "full_raw.csv.gz")]) == 0
    out = capsys.readouterr().out
    assert "ks_matmul_128x128" in out and "duration [µs]" in out
    assert main(["analyze", str(H200_KERNELS / "full_raw.csv.gz"), "--format", "csv"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("id,name,duration_ns") and len(lines) == 10
