"""`kernelscope cases | predict | claims` through main(argv), output captured."""

from __future__ import annotations

import json

import pytest

from dashboard.cli import main
from dashboard.core.source import Source

MiB = 2**20


@pytest.fixture(autouse=True)
def _empty_store(store):
    """`predict` reads the measured ceilings of the store: an empty one unless a test ingests a run."""
    return store


def run(capsys, *argv) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_cases_table_and_json(capsys):
    rc, out, _ = run(capsys, "cases")
    assert rc == 0
    assert "tiling.traffic" in out and "request.swiglu_case" in out and "narrative" in out
    rc, out, _ = run(capsys, "cases", "--format", "json")
    cases = json.loads(out)["cases"]
    assert rc == 0 and len(cases) == 32
    tiling = next(c for c in cases if c["id"] == "tiling.traffic")
    assert tiling["default_gpu"] == "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"
    assert {p["name"] for p in tiling["params"]} >= {"M", "K", "N", "m", "n", "k"}
    assert next(p for p in tiling["params"] if p["name"] == "m")["default"] == 64


def test_cases_checks(capsys):
    rc, out, _ = run(capsys, "cases", "--checks", "--format", "json")
    checks = json.loads(out)["checks"]
    assert rc == 0
    fusion = [
        c
        for c in checks
        if c["case"] == "fusion.activation_chain" and c["title"] == "14.2 µs for 120 MiB"
    ]
    # 4.9x the DRAM peak, and 2.5x the L2 bandwidth the model assumes for that card (no measurement
    # of it)
    assert (
        fusion
        and fusion[0]["verdict"] == "differs-unexplained"
        and "4.9×" in fusion[0]["explanation"]
    )
    assert "2.5× the L2 bandwidth the model assumes" in fusion[0]["explanation"]


def test_predict_json(capsys):
    rc, out, _ = run(
        capsys,
        "predict",
        "tiling.traffic",
        "--gpu",
        "H100",
        "--set",
        "m=128",
        "--set",
        "n=128",
        "--format",
        "json",
    )
    d = json.loads(out)
    assert rc == 0
    assert d["case"] == "tiling.traffic" and d["gpu"] == "NVIDIA H100 SXM"
    assert d["params"]["m"] == 128 and d["params"]["M"] == 1024
    assert d["predictions"]["traffic"] == {
        **d["predictions"]["traffic"],
        "value": 1560 * MiB,
        "unit": "B",
        "display": "1560 MiB",
    }
    # 80 KiB + 1 KiB on an H100 SM (228 KiB): 2 blocks
    assert d["predictions"]["blocks_by_smem"]["value"] == 2
    fig = next(f for f in d["chapter_figures"] if f["text"] == "128×128 tiles: 1560 MiB")
    assert fig["check"] == "agrees" and fig["value"] == 1560 and fig["unit"] == "MiB"
    assert any(m["name"] == "lts__t_sectors_srcunit_tex_op_read.sum" for m in d["measurements"])


def test_predict_default_gpu_is_the_chapters(capsys):
    rc, out, _ = run(capsys, "predict", "warpspec.producer_consumer", "--format", "json")
    d = json.loads(out)
    assert d["gpu"] == "NVIDIA H100 SXM"
    assert d["predictions"]["t_move"]["value"] == pytest.approx(1.291e-6, rel=1e-3)
    rc, out, _ = run(capsys, "predict", "dispatch.call_ratio", "--format", "json")
    assert json.loads(out)["gpu"] == "NVIDIA H200"


def test_predict_with_a_measurement(capsys):
    rc, out, _ = run(
        capsys,
        "predict",
        "fusion.activation_chain",
        "--measured",
        "unfused_time=14.2us",
        "--format",
        "json",
    )
    (c,) = json.loads(out)["comparisons"]
    assert rc == 0 and c["verdict"] == "differs-unexplained" and c["quantity"] == "unfused_time"
    rc, out, _ = run(
        capsys, "predict", "fusion.activation_chain", "--measured", "unfused_time=40us"
    )
    assert "[differs-explained]" in out and "128 MiB L2" in out and "L2 rate" in out
    rc, out, _ = run(capsys, "predict", "littles_law", "--measured", "bytes_in_flight=4MiB")
    assert rc == 2 and "for information only" in _


TIMED = (
    "h2d.chunked_copy",
    "timing.positions",
    "launch.overhead",
    "occupancy.sm",
    "tiling.traffic",
    "bank.column_read",
    "transpose.tile",
    "rmsnorm.split",
    "fusion.activation_chain",
    "flash.attention_traffic",
    "graph.replay",
    "compile.amortization",
)


@pytest.mark.parametrize("case", TIMED)
def test_predict_gives_a_time_with_terms_and_tolerance_for_every_timed_case(capsys, case):
    rc, out, _ = run(capsys, "predict", case, "--gpu", "H200", "--format", "json")
    d = json.loads(out)
    times = {
        k: p
        for k, p in d["predictions"].items()
        if p["unit"] == "s" and p["kind"] == "estimate" and p.get("terms")
    }
    assert rc == 0 and times, case
    for p in times.values():
        assert p["tolerance"].startswith("±") and p["rel_tol"] > 0
        vals = [t["value"] for t in p["terms"]]
        # the time is a sum of its terms or the kernel floor plus the largest of the others: between
        # the two
        assert max(vals) * 0.999 <= p["value"] <= sum(vals) * 1.001, (case, p["label"])
        assert all(t["source"] for t in p["terms"])
    rc, out, _ = run(capsys, "predict", case, "--gpu", "H200")
    assert rc == 0 and "terms:" in out and "±" in out


def test_predict_uses_the_measured_ceilings_of_the_store(capsys, store):
    from tests.conftest import SAMPLES

    Source(store).ingest_path(
        SAMPLES / "h200" / "bench_suite" / "bench_nvidia-h200_06deee61.json.gz"
    )
    rc, out, _ = run(capsys, "predict", "transpose.tile", "--gpu", "H200", "--format", "json")
    d = json.loads(out)
    # the torch copy_ ceiling, GB/s
    assert d["params"]["bw"] == pytest.approx(4282.838, rel=1e-4)
    assert d["param_sources"]["bw"].startswith("measured ceiling: dram_copy_bandwidth")
    assert d["param_sources"]["latency"].startswith("default: H200 ≈ 500–600 ns")
    rc, out, _ = run(capsys, "predict", "transpose.tile", "--gpu", "H200")
    assert "from the store's measured ceilings: bw ← dram_copy_bandwidth" in out
    # another GPU has no measurement: the spec with the stated derating
    rc, out, _ = run(capsys, "predict", "transpose.tile", "--gpu", "A100", "--format", "json")
    assert json.loads(out)["params"]["bw"] == pytest.approx(0.9 * 2039)


def test_predict_table(capsys):
    rc, out, _ = run(capsys, "predict", "pipeline.double_buffer")
    assert rc == 0
    assert "pipelined_time" in out and "5.44 µs" in out and "6.28 µs" in out
    assert "chapter figures:" in out and "→ agrees" in out
    rc, out, _ = run(capsys, "predict", "runtime.host_bound")
    assert rc == 0 and "no runnable model" in out and "38 %" in out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["predict", "nope"], "no textbook case 'nope'"),
        (["predict", "tiling.traffic", "--gpu", "Radeon"], "no GPU 'Radeon'"),
        (["predict", "tiling.traffic", "--set", "M=-4"], "parameter M='-4': must be > 0"),
        (
            ["predict", "tiling.traffic", "--set", "m=4096"],
            "tile m=4096 is larger than the matrix (M=1024)",
        ),
        (["predict", "tiling.traffic", "--set", "speed=3"], "unknown parameter 'speed'"),
        (["predict", "tiling.traffic", "--set", "m"], "expected NAME=VALUE"),
        (["predict", "tiling.traffic", "--measured", "time=fast"], "expected QUANTITY=VALUE[UNIT]"),
        (["predict", "tiling.traffic", "--measured", "time=3parsecs"], "unknown unit 'parsecs'"),
        (["predict", "tiling.traffic", "--measured", "time=3MiB"], "cannot be compared"),
    ],
)
def test_bad_input_is_one_line_and_non_zero(capsys, argv, message):
    rc, out, err = run(capsys, *argv)
    assert rc != 0
    assert message in err
    assert "Traceback" not in err and len(err.strip().splitlines()) <= 2


def test_claims(capsys):
    rc, out, _ = run(capsys, "claims", "--format", "json")
    cs = json.loads(out)["claims"]
    assert rc == 0 and all({"id", "text", "gpu", "verdict", "explanation"} <= set(c) for c in cs)
    assert {c["id"]: c["verdict"] for c in cs}["a10g.mma_sync_tflops"] == "above-peak"
    rc, out, _ = run(capsys, "claims")
    assert rc == 0 and "unit-error" in out and "a10g.memory_spec" in out
