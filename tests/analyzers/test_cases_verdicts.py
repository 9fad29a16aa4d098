"""Verdicts: agrees / differs-explained / differs-unexplained / implausible, one sentence each; the real H200
Nsight Compute sample (sample_traces/h200/chapter5_kernels) judged against the models."""
from __future__ import annotations

import csv
import gzip

import pytest

from analyzers.cases import (Measurement, compare, evaluate, measurements_from_ncu, verdict)
from analyzers.cases.model import Explanation, pred
from tests.conftest import H200_KERNELS

MiB = 2 ** 20


def ncu_rows() -> list[dict[str, float | str]]:
    """Kernel rows of the real H200 export in base units (numbers with thousands separators parsed)."""
    with gzip.open(H200_KERNELS / "full_raw_base.csv.gz", "rt", newline="") as f:
        rows = list(csv.reader(f))
    header = rows[0]
    out = []
    for r in rows[2:]:
        d: dict[str, float | str] = {}
        for k, val in zip(header, r):
            try:
                d[k] = float(val.replace(",", ""))
            except ValueError:
                d[k] = val
        out.append(d)
    return out


def kernel(name: str, nth: int = 0) -> dict:
    return [r for r in ncu_rows() if r["Kernel Name"] == name][nth]


# ---- the verdict function -------------------------------------------------------------------------

def test_agrees_within_tolerance_and_spread():
    p = pred("t", "time", 100e-6, "s", rel_tol=0.05)
    v = verdict(p, Measurement(104, "µs", "bench"))
    assert v.kind == "agrees" and v.ratio == pytest.approx(1.04)
    assert "measured 104 µs (bench) vs predicted 100 µs" in v.explanation and "±5%" in v.explanation
    assert verdict(p, Measurement(108, "µs", "bench")).kind == "differs-unexplained"
    assert verdict(p, Measurement(108, "µs", "bench", spread=4)).kind == "agrees"     # 5 + 4 µs band


def test_units_are_converted_or_refused():
    p = pred("b", "traffic", 3096 * MiB, "B")
    assert verdict(p, Measurement(3.0234375, "GiB", "ncu")).kind == "agrees"
    with pytest.raises(ValueError, match="cannot be compared"):
        verdict(p, Measurement(3, "ms", "ncu"))
    with pytest.raises(ValueError, match="unknown unit"):
        verdict(p, Measurement(3, "furlongs", "ncu"))


def test_bounds_explanations_and_physical_limits():
    lb = pred("t", "time bound", 70e-6, "s", kind="lower_bound", min_physical=20e-6, physical="the L2 floor",
              explanations=(Explanation("the data fit in L2", 0.0, 1.0),))
    assert verdict(lb, Measurement(90, "µs", "x")).kind == "agrees"
    v = verdict(lb, Measurement(30, "µs", "x"))
    assert v.kind == "differs-explained" and v.explanation.endswith("the data fit in L2.")
    v = verdict(lb, Measurement(10, "µs", "x"))
    assert v.kind == "implausible" and "below the L2 floor" in v.explanation
    bw = pred("bw", "bandwidth", 4.0e12, "B/s", max_physical=4.8e12, physical="the DRAM peak")
    assert verdict(bw, Measurement(5.2, "TB/s", "claim")).kind == "implausible"
    ub = pred("r", "ratio", 32, "×", kind="upper_bound")
    assert verdict(ub, Measurement(17.8, "×", "bench")).kind == "agrees"
    rng = pred("u", "ulp", -120, "ULP", kind="range", lo=-240, hi=-95)
    assert verdict(rng, Measurement(-175.2, "ULP", "chapter")).kind == "agrees"
    assert verdict(rng, Measurement(-10, "ULP", "chapter")).kind == "differs-unexplained"


def test_text_predictions_cannot_be_compared():
    with pytest.raises(ValueError, match="not a number"):
        verdict(pred("b", "bound", "host", "text"), Measurement(1, "", "x"))


def test_chapter_example_5_4_is_faster_than_dram_allows():
    ev = evaluate("fusion.activation_chain")                                # RTX PRO 6000
    (c,) = compare(ev, [Measurement(14.2, "µs", "chapter", quantity="unfused_time")])
    assert c.verdict.kind == "differs-explained"
    assert "96 MiB working set fits in the 128 MiB L2" in c.verdict.explanation
    # the same time for 16x the rows cannot come from L2: implausible
    ev = evaluate("fusion.activation_chain", params={"M": 16384})
    (c,) = compare(ev, [Measurement(14.2, "µs", "chapter", quantity="unfused_time")])
    assert c.verdict.kind == "implausible"


def test_compare_needs_a_known_quantity():
    ev = evaluate("tiling.traffic")
    with pytest.raises(KeyError, match="predicts no 'speed'"):
        compare(ev, [Measurement(1, "s", "x", quantity="speed")])
    with pytest.raises(ValueError, match="names no quantity"):
        compare(ev, [Measurement(1, "s", "x")])


# ---- real H200 counters -----------------------------------------------------------------------------

TILE_KERNEL = {"stage": 4, "acc": 0, "threads": 256}       # ks_matmul: FP32 staging, accumulator in registers


def test_tiled_matmul_64x64_on_h200():
    row = kernel("ks_matmul_64x64")
    ev = evaluate("tiling.traffic", "H200", {**TILE_KERNEL, "regs": int(row["launch__registers_per_thread"])})
    assert ev.value("smem_per_block") == row["launch__shared_mem_per_block_static"] == 16384
    got = {c.quantity: c for c in compare(ev, measurements_from_ncu("tiling.traffic", row, gpu="NVIDIA H200"))}
    # L2 <- L1: 91,894,368 sectors x 32 B = 2804 MiB vs the model's 3072 MiB of reads (-8.7 %)
    assert got["l2_read_bytes"].measurement.value == 91_894_368 * 32
    assert got["l2_read_bytes"].verdict.kind == "agrees"
    # DRAM: 1017 MiB, a third of V: the L2 absorbs re-reads
    assert got["dram_read_bytes"].verdict.kind == "differs-explained"
    assert "absorbs re-reads" in got["dram_read_bytes"].verdict.explanation
    # occupancy 75 % (40 registers -> 6 blocks) as ncu says; ncu's shared-memory limit 7 < 13 by the smaller
    # carve-out the driver chose
    assert got["occupancy"].verdict.kind == "agrees" and ev.value("occupancy") == 75.0
    assert got["blocks_by_smem"].verdict.kind == "differs-explained"
    assert "carve-out" in got["blocks_by_smem"].verdict.explanation


def test_tiled_matmul_128x128_on_h200():
    row = kernel("ks_matmul_128x128")
    ev = evaluate("tiling.traffic", "H200", {**TILE_KERNEL, "m": 128, "n": 128,
                                             "regs": int(row["launch__registers_per_thread"])})
    got = {c.quantity: c for c in compare(ev, measurements_from_ncu("tiling.traffic", row))}
    # 42,586,602 x 32 B = 1300 MiB vs 1536 MiB: 0.85 -> part of the loads hit in L1
    assert got["l2_read_bytes"].verdict.kind == "differs-explained"
    assert got["dram_read_bytes"].verdict.kind == "differs-explained"
    assert got["occupancy"].verdict.kind == "agrees" and ev.value("occupancy") == 25.0


@pytest.mark.parametrize("name, t, pad", [("ks_transpose16", 16, 0), ("ks_transpose16_pad", 16, 1),
                                          ("ks_transpose32", 32, 0), ("ks_transpose32_pad", 32, 1)])
def test_transpose_conflict_degrees_on_h200(name, t, pad):
    row = kernel(name)
    ev = evaluate("transpose.tile", "H200", {"t": t, "pad": pad})
    ms = measurements_from_ncu("transpose.tile", row)
    (deg,) = [m for m in ms if m.quantity == "read_degree"]
    (c,) = compare(ev, [deg])
    assert c.verdict.kind == "agrees", c.verdict.explanation
    assert ev.value("smem_per_block") == row["launch__shared_mem_per_block_static"]      # t·(t+pad)·4 B
    assert ev.value("threads_per_block") == row["launch__block_size"]


def test_column_read_degrees_on_h200():
    strided, padded = kernel("ks_colread4", 0), kernel("ks_colread4", 1)
    (d32,) = [m for m in measurements_from_ncu("bank.column_read", strided) if m.quantity == "degree"]
    (d33,) = [m for m in measurements_from_ncu("bank.column_read", padded) if m.quantity == "degree"]
    assert d32.value == pytest.approx(32.0, abs=0.01) and d33.value == pytest.approx(1.0)
    assert compare(evaluate("bank.column_read", params={"stride": 32}), [d32])[0].verdict.kind == "agrees"
    assert compare(evaluate("bank.column_read", params={"stride": 33}), [d33])[0].verdict.kind == "agrees"
    # the conflict-free stride-33 run judged against the stride-32 model does not agree
    assert compare(evaluate("bank.column_read", params={"stride": 32}), [d33])[0].verdict.kind == \
        "differs-unexplained"
