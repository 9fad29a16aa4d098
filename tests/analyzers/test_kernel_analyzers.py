"""Per-kernel analyzers on the real H200 reports: numbers fixed from the recorded counters."""

from __future__ import annotations

import json

import pytest

from analyzers.gpus import get_gpu, resolve_gpu
from analyzers.kernels import analyze_kernels, missing_quantities
from collectors.ingest import parse_bytes
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
    assert d[5] == pytest.approx(32.0, abs=1e-9)  # stride 32 words: 32-way
    assert d[6] == pytest.approx(1.0, abs=1e-9)  # stride 33 words: conflict-free
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
    assert spr[0] == 16 and ideal[0] == 16  # float4 copy: 32 lanes x 16 B = 16 sectors
    assert spr[1] == 4 and ideal[1] == 4  # 4-byte loads of the transposes
    assert full["global_ld_coalescing_ratio"].to_list()[0] == 1.0
    assert spr[5] is None  # the column read has no global loads


@pytest.mark.parametrize(
    "name",
    [
        "full.ncu-rep.gz",
        "full_raw.csv.gz",
        "full_raw_base.csv.gz",
        "full_details_base.csv.gz",
        "basic.ncu-rep.gz",
        "basic_raw.csv.gz",
    ],
)
def test_calculator_agrees_with_ncu_on_every_kernel(name):
    a = analyzed(name)
    assert a["predicted_occupancy_pct"].to_list() == pytest.approx(
        a["theoretical_occupancy_pct"].to_list(), abs=0.01
    )
    assert (
        a["occupancy_limiter"].to_list()[8] == "registers"
    )  # 100 registers/thread -> 2 blocks of 256


def test_basic_report_lacks_conflicts_and_says_how_to_collect():
    a = analyzed("basic.ncu-rep.gz")
    assert a["smem_conflict_degree"].null_count() == a.height  # missing, not zero
    miss = {m["quantity"]: m for m in missing_quantities(a)}
    assert (
        "smem_conflict_degree" in miss
        and "--set full" in miss["smem_conflict_degree"]["collect_with"]
    )
    assert "dram_bandwidth_gbps" in miss
    assert "achieved_occupancy_pct" not in miss


def test_unknown_gpu_works_from_device_attributes():
    p = parse_bytes((H200_KERNELS / "full_raw_base.csv.gz").read_bytes(), "x.csv")
    attrs = dict(p.meta["device_attributes"], display_name="NVIDIA H999 Prototype")
    gpu = resolve_gpu("NVIDIA H999 Prototype", attrs)
    assert not gpu.from_registry and gpu.sm_count == 132
    a = analyze_kernels(p.table("kernels"), gpu)
    assert a["predicted_occupancy_pct"].to_list() == pytest.approx(
        a["theoretical_occupancy_pct"].to_list(), abs=0.01
    )
    assert a["dram_peak_fraction"].to_list()[0] is not None


def test_analyze_json_has_the_documented_keys(capsys):
    from dashboard.cli import main

    assert main(["analyze", str(H200_KERNELS / "full.ncu-rep.gz"), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    keys = {
        "id",
        "name",
        "duration_ns",
        "dram_read_bytes",
        "dram_write_bytes",
        "dram_bandwidth_gbps",
        "dram_peak_fraction",
        "achieved_occupancy_pct",
        "theoretical_occupancy_pct",
        "predicted_occupancy_pct",
        "occupancy_limiter",
        "smem_wavefronts",
        "smem_bank_conflicts",
        "smem_conflict_degree",
        "global_ld_sectors_per_request",
    }
    assert len(out["kernels"]) == 9 and keys <= set(out["kernels"][0])
    assert out["gpu"]["name"] == "NVIDIA H200" and out["gpu"]["from_registry"]
    k5 = out["kernels"][5]
    assert k5["name"] == "ks_colread4" and k5["smem_bank_conflicts"] > 2.6e8


def test_analyze_basic_json_reports_missing_as_null(capsys):
    from dashboard.cli import main

    assert main(["analyze", str(H200_KERNELS / "basic_raw.csv.gz"), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert all(
        k["smem_conflict_degree"] is None and k["dram_bandwidth_gbps"] is None
        for k in out["kernels"]
    )
    assert any(m["quantity"] == "smem_conflict_degree" for m in out["missing"])


def test_analyze_table_and_csv(capsys):
    from dashboard.cli import main

    assert main(["analyze", str(H200_KERNELS / "full_raw.csv.gz")]) == 0
    out = capsys.readouterr().out
    assert "ks_matmul_128x128" in out and "duration [µs]" in out
    assert main(["analyze", str(H200_KERNELS / "full_raw.csv.gz"), "--format", "csv"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("id,name,raw_name,duration_ns") and len(lines) == 10


# ---- tensor-core work: cuBLAS BF16 / FP16 / TF32 matmuls and flash attention
# (sample_traces/h200/tensor_kernels)


@pytest.fixture(scope="module")
def tensor():
    from tests.conftest import SAMPLES

    folder = SAMPLES / "h200" / "tensor_kernels"
    p = parse_bytes((folder / "tensor_raw_base.csv.gz").read_bytes(), "tensor_raw_base.csv.gz")
    gpu = resolve_gpu(p.meta["gpu_name"], p.meta["device_attributes"])
    return (
        analyze_kernels(p.table("kernels"), gpu).to_dicts(),
        gpu,
        json.loads((folder / "expected.json").read_text()),
    )


def test_tensor_flop_from_the_ops_path_counters(tensor):
    rows, gpu, exp = tensor
    assert [r["tensor_type"] for r in rows] == ["bf16", "fp16", "tf32", "bf16", None]
    for r in rows[:3]:  # a 4096^3 matmul counts exactly 2 M N K
        assert r["flop_tensor"] == exp["matmul_flop"] == 2 * 4096**3
        assert r["tensor_tflops"] == pytest.approx(r["flop_tensor"] / r["duration_ns"] / 1e3)
    # causal flash attention: the model's 2 h L^2 d (half of 4 h L^2 d), plus the diagonal tiles
    # computed whole
    assert 1.0 < rows[3]["flop_tensor"] / exp["attention_flop_causal"] < 1.05
    assert rows[4]["flop_tensor"] == 0 and rows[4]["flop_fp32"] == pytest.approx(
        exp["mul_elements"], rel=1e-3
    )
    peak = gpu.bf16_dense_flop_per_s
    bf16, fp16, tf32 = rows[:3]
    assert bf16["tensor_peak_fraction"] == pytest.approx(
        bf16["flop_tensor"] / bf16["duration_ns"] * 1e9 / peak
    )
    # ~790 of 989
    assert 0.7 < bf16["tensor_peak_fraction"] < 0.9 and 0.7 < fp16["tensor_peak_fraction"] < 0.9
    # TF32 runs at half the BF16 rate: 402 TFLOP/s is 81 % of its 495
    assert tf32["tensor_peak_fraction"] == pytest.approx(
        tf32["flop_tensor"] / 0.5 / tf32["duration_ns"] * 1e9 / peak
    )
    assert 0.7 < tf32["tensor_peak_fraction"] < 0.9


def test_tensor_bound_findings(tensor):
    from analyzers.findings import kernel_findings

    rows, gpu, _ = tensor
    first = [kernel_findings(r, gpu)[0] for r in rows]
    for f in first[:3]:
        assert f.key == "at_bound" and f.title.startswith("tensor-core throughput-bound")
        assert any(k.startswith("t_tensor") for k in f.metrics) and "BF16 dense" in f.model
    assert first[4].key == "at_bound" and first[4].title.startswith("DRAM")
    # with a measured cuBLAS ceiling the bound uses it (and says so)
    f = kernel_findings(rows[0], gpu, {"bf16": (793e12, "bf16_dense_flop_rate (bench)")})[0]
    assert f.key == "at_bound" and "measured ceiling: bf16_dense_flop_rate" in f.model
    # 788 / 793 TFLOP/s
    assert f"at {rows[0]['tensor_tflops'] * 1e12 / 793e12:.0%} of the ceiling" in f.title


def test_tensor_columns_are_null_without_their_counters():
    a = analyzed("basic_raw.csv.gz")
    assert a["flop_tensor"].null_count() == a.height and a["tensor_type"].null_count() == a.height
    assert "flop_tensor" in [m["quantity"] for m in missing_quantities(a)]


def test_tensor_metrics_edge_cases():
    """FP64-only tensor work has no rated peak (null, not 0 %); a launch without the counters stays
    null; a stored table from before the tensor columns gets them as nulls."""
    import polars as pl

    from analyzers.kernels import tensor_metrics

    k = pl.DataFrame(
        {
            "duration_ns": [1000.0, 1000.0, 1000.0],
            "tensor_flop_bf16": [0.0, None, 2e5],
            "tensor_flop_fp64": [4e9, None, 0.0],
        }
    )
    r = tensor_metrics(k, get_gpu("H200")).to_dicts()
    assert (
        r[0]["tensor_type"] == "fp64"
        and r[0]["flop_tensor"] == 4e9
        and r[0]["tensor_peak_fraction"] is None
    )
    assert (
        r[1]["flop_tensor"] is None
        and r[1]["tensor_type"] is None
        and r[1]["tensor_tflops"] is None
    )
    assert r[2]["tensor_type"] == "bf16" and r[2]["tensor_peak_fraction"] == pytest.approx(
        2e5 / 1e-6 / get_gpu("H200").bf16_dense_flop_per_s
    )
    old = tensor_metrics(pl.DataFrame({"duration_ns": [1000.0]}), get_gpu("H200"))
    assert old["flop_tensor"].to_list() == [None] and "tensor_flop_tf32" in old.columns


def test_a_launch_at_the_measured_ceiling_names_the_bound_first(tensor):
    """The TF32 matmul beats half the measured BF16 ceiling (402 vs 396.5 TFLOP/s): nothing is
    estimated lost, and the finding that names the bound comes before the 1.3-way bank conflicts
    that cost nothing."""
    from analyzers.findings import kernel_findings

    rows, gpu, _ = tensor
    fs = kernel_findings(rows[2], gpu, {"bf16": (793e12, "bf16_dense_flop_rate (bench)")})
    assert fs[0].key == "at_bound" and fs[0].lost_ns == 0 and "tensor-core" in fs[0].title
    assert any(f.key == "bank_conflicts" and f.lost_ns == 0 for f in fs[1:])
