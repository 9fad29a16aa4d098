"""Verdicts: agrees / differs-explained / differs-unexplained / implausible, one sentence each; the
real H200 Nsight Compute sample (sample_traces/h200/chapter5_kernels) judged against the models."""

from __future__ import annotations

import csv
import gzip

import pytest

from analyzers.cases import (
    Measurement,
    all_cases,
    compare,
    evaluate,
    measurements_from_ncu,
    verdict,
)
from analyzers.cases.model import Explanation, Mechanism, pred
from analyzers.gpus import all_gpus
from tests.conftest import H200_KERNELS

MiB = 2**20


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


# ---- the verdict function
# -------------------------------------------------------------------------


def test_agrees_within_tolerance_and_spread():
    p = pred("t", "time", 100e-6, "s", rel_tol=0.05)
    v = verdict(p, Measurement(104, "µs", "bench"))
    assert v.kind == "agrees" and v.ratio == pytest.approx(1.04)
    assert "measured 104 µs (bench) vs predicted 100 µs" in v.explanation and "±5%" in v.explanation
    assert verdict(p, Measurement(108, "µs", "bench")).kind == "differs-unexplained"
    assert verdict(p, Measurement(108, "µs", "bench", spread=4)).kind == "agrees"  # 5 + 4 µs band


def test_units_are_converted_or_refused():
    p = pred("b", "traffic", 3096 * MiB, "B")
    assert verdict(p, Measurement(3.0234375, "GiB", "ncu")).kind == "agrees"
    with pytest.raises(ValueError, match="cannot be compared"):
        verdict(p, Measurement(3, "ms", "ncu"))
    with pytest.raises(ValueError, match="unknown unit"):
        verdict(p, Measurement(3, "furlongs", "ncu"))


def test_bounds_explanations_and_physical_limits():
    lb = pred(
        "t",
        "time bound",
        70e-6,
        "s",
        kind="lower_bound",
        min_physical=20e-6,
        physical="the L2 floor",
        explanations=(Explanation("the data fit in L2", 0.4, 1.0, "L2 twice as fast as DRAM"),),
    )
    assert verdict(lb, Measurement(90, "µs", "x")).kind == "agrees"
    v = verdict(lb, Measurement(30, "µs", "x"))
    assert (
        v.kind == "differs-explained"
        and "the data fit in L2" in v.explanation
        and "0.4–1×" in v.explanation
    )
    v = verdict(lb, Measurement(10, "µs", "x"))
    assert v.kind == "implausible" and "below the L2 floor" in v.explanation
    bw = pred("bw", "bandwidth", 4.0e12, "B/s", max_physical=4.8e12, physical="the DRAM peak")
    assert verdict(bw, Measurement(5.2, "TB/s", "claim")).kind == "implausible"
    ub = pred("r", "ratio", 32, "×", kind="upper_bound")
    assert verdict(ub, Measurement(17.8, "×", "bench")).kind == "agrees"
    rng = pred("u", "ulp", -120, "ULP", kind="range", lo=-240, hi=-95)
    assert verdict(rng, Measurement(-175.2, "ULP", "chapter")).kind == "agrees"
    assert verdict(rng, Measurement(-10, "ULP", "chapter")).kind == "differs-unexplained"


def test_a_bound_agrees_only_within_its_factor():
    """A lower bound says nothing about a measurement far above it: 60 of the 199 'agrees' of the
    first H200 run were bounds exceeded by up to 1,630x. Now only bound ... factor x bound agrees
    (2x unless stated)."""
    lb = pred("t", "time lower bound", 100e-6, "s", kind="lower_bound")
    assert verdict(lb, Measurement(199, "µs", "x")).kind == "agrees"
    far = verdict(lb, Measurement(201, "µs", "x"))
    assert far.kind == "differs-unexplained" and "2× band above the bound" in far.explanation
    assert verdict(lb, Measurement(163, "ms", "x")).kind == "differs-unexplained"  # 1,630x
    wide = pred("t", "time lower bound", 100e-6, "s", kind="lower_bound", bound_factor=4)
    assert verdict(wide, Measurement(350, "µs", "x")).kind == "agrees"
    ub = pred("r", "slowdown bound", 32, "×", kind="upper_bound")
    assert verdict(ub, Measurement(16, "×", "x")).kind == "agrees"
    assert verdict(ub, Measurement(15, "×", "x")).kind == "differs-unexplained"
    assert verdict(ub, Measurement(40, "×", "x")).kind == "differs-unexplained"
    assert (
        lb.to_json()["tolerance"] == "lower bound: agrees up to 2× it"
        and lb.to_json()["bound_factor"] == 2
    )


def test_a_mechanism_explains_only_from_the_measurements_counters_and_says_how_much():
    p = pred(
        "t",
        "kernel time",
        100e-6,
        "s",
        rel_tol=0.10,
        mechanisms=(
            Mechanism(
                "bank conflicts",
                ("wavefronts", "requests"),
                lambda c: 100e-6 * c["wavefronts"] / c["requests"],
                tol=0.10,
            ),
        ),
    )
    m = Measurement(200, "µs", "bench", counters={"wavefronts": 2.0e6, "requests": 1.0e6})
    v = verdict(p, m)
    assert (
        v.kind == "differs-explained"
        and v.mechanism == "bank conflicts"
        and v.accounted == pytest.approx(1.0)
    )
    assert "computed from the measurement's counters (wavefronts, requests)" in v.explanation
    assert "100% of the gap" in v.explanation
    # counters that account for only part of the gap: unexplained, and the sentence says how much
    v = verdict(
        p, Measurement(400, "µs", "bench", counters={"wavefronts": 2.0e6, "requests": 1.0e6})
    )
    assert (
        v.kind == "differs-unexplained"
        and "bank conflicts would give 200 µs (33% of the gap)" in v.explanation
    )
    # no counters: no explanation, and it says what is missing
    v = verdict(p, Measurement(200, "µs", "bench"))
    assert (
        v.kind == "differs-unexplained"
        and "Not measured: bank conflicts (needs wavefronts, requests)" in v.explanation
    )


def test_info_predictions_are_never_judged():
    with pytest.raises(ValueError, match="for information only"):
        verdict(pred("b", "bytes in flight", 4e6, "B", kind="info"), Measurement(4, "MB", "x"))
    ev = evaluate("littles_law", "H200")
    with pytest.raises(ValueError, match="for information only"):
        compare(ev, [Measurement(2.5, "MB", "x", quantity="bytes_in_flight_needed")])


@pytest.mark.parametrize("case", [c for c in all_cases() if c.runnable], ids=lambda c: c.id)
def test_every_explanation_range_is_narrow_and_justified(case):
    """No catch-all: every stated range is within 3x (lo > 0) and says where it comes from; every
    mechanism names the counters it reads and a tolerance under 50 %."""
    from analyzers.cases import CaseError

    for g in all_gpus():
        try:
            ev = evaluate(case, g)
        # a part without BF16 tensor cores (V100, T4): the catalog test checks the message
        except CaseError:
            continue
        for key, p in ev.predictions.items():
            for ex in p.explanations:
                assert ex.lo > 0 and ex.hi / ex.lo <= 3 and ex.why, (case.id, key, ex)
            for m in p.mechanisms:
                assert m.needs and 0 <= m.tol < 0.5, (case.id, key, m.name)
            if p.kind.endswith("bound"):
                assert 1 < p.bound_factor <= 2, (case.id, key)


def test_text_predictions_cannot_be_compared():
    with pytest.raises(ValueError, match="not a number"):
        verdict(pred("b", "bound", "host", "text"), Measurement(1, "", "x"))


def test_chapter_example_5_4_is_faster_than_dram_allows():
    # RTX PRO 6000, flushed (the default)
    ev = evaluate("fusion.activation_chain")
    (c,) = compare(ev, [Measurement(14.2, "µs", "chapter", quantity="unfused_time")])
    # 120 MiB in 14.2 µs needs 8.9 TB/s: the L2 could only serve it at > 2.5x the L2 bandwidth
    # assumed for this card
    assert c.verdict.kind == "differs-unexplained"
    assert "96 MiB working set fits in the 128 MiB L2" in c.verdict.explanation
    (c,) = compare(ev, [Measurement(40, "µs", "chapter", quantity="unfused_time")])
    assert c.verdict.kind == "differs-explained" and "L2 rate" in c.verdict.explanation
    # the same time for 16x the rows cannot come from L2: the bound's physical limit
    ev = evaluate("fusion.activation_chain", params={"M": 16384})
    (c,) = compare(ev, [Measurement(14.2, "µs", "chapter", quantity="unfused_time_bound")])
    assert c.verdict.kind == "implausible"


def test_compare_needs_a_known_quantity():
    ev = evaluate("tiling.traffic")
    with pytest.raises(KeyError, match="predicts no 'speed'"):
        compare(ev, [Measurement(1, "s", "x", quantity="speed")])
    with pytest.raises(ValueError, match="names no quantity"):
        compare(ev, [Measurement(1, "s", "x")])


# ---- real H200 counters
# -----------------------------------------------------------------------------

# ks_matmul: FP32 staging and FMAs
TILE_KERNEL = {"stage": 4, "acc": 0, "threads": 256, "engine": "fp32"}


def test_tiled_matmul_64x64_on_h200():
    row = kernel("ks_matmul_64x64")
    ev = evaluate(
        "tiling.traffic", "H200", {**TILE_KERNEL, "regs": int(row["launch__registers_per_thread"])}
    )
    assert ev.value("smem_per_block") == row["launch__shared_mem_per_block_static"] == 16384
    got = {
        c.quantity: c
        for c in compare(ev, measurements_from_ncu("tiling.traffic", row, gpu="NVIDIA H200"))
    }
    # L2 <- L1: 91,894,368 sectors x 32 B = 2804 MiB vs the model's 3072 MiB of reads (-8.7 %)
    assert got["l2_read_bytes"].measurement.value == 91_894_368 * 32
    assert got["l2_read_bytes"].verdict.kind == "agrees"
    # DRAM: 1017 MiB, a third of V: the L2's reuse is not modelled, so the DRAM bytes are shown, not
    # judged
    assert "dram_read_bytes" not in got and ev["dram_read_bytes"].kind == "info"
    # occupancy 75 % (40 registers -> 6 blocks) as ncu says; ncu's shared-memory limit 7 < 13: the
    # carve-out the driver chose (launch__shared_mem_config_size, a counter of the same launch)
    # gives exactly 7
    assert got["occupancy"].verdict.kind == "agrees" and ev.value("occupancy") == 75.0
    assert got["blocks_by_smem"].verdict.kind == "differs-explained"
    assert (
        "carve-out" in got["blocks_by_smem"].verdict.explanation
        and "100% of the gap" in got["blocks_by_smem"].verdict.explanation
    )
    # without that counter the same measurement is unexplained: the explanation is computed, not
    # assumed
    (bare,) = [
        m
        for m in measurements_from_ncu(
            "tiling.traffic",
            {k: v for k, v in row.items() if k != "launch__shared_mem_config_size"},
        )
        if m.quantity == "blocks_by_smem"
    ]
    assert compare(ev, [bare])[0].verdict.kind == "differs-unexplained"


def test_tiled_matmul_128x128_on_h200():
    row = kernel("ks_matmul_128x128")
    ev = evaluate(
        "tiling.traffic",
        "H200",
        {**TILE_KERNEL, "m": 128, "n": 128, "regs": int(row["launch__registers_per_thread"])},
    )
    got = {c.quantity: c for c in compare(ev, measurements_from_ncu("tiling.traffic", row))}
    # 42,586,602 x 32 B = 1300 MiB vs 1536 MiB: 0.85; the launch's L1 hit rate (8.57 %) brings the
    # model to 1404 MiB
    assert got["l2_read_bytes"].verdict.kind == "differs-explained"
    assert (
        "L1 hits" in got["l2_read_bytes"].verdict.explanation
        and "56% of the gap" in got["l2_read_bytes"].verdict.explanation
    )
    assert got["occupancy"].verdict.kind == "agrees" and ev.value("occupancy") == 25.0


@pytest.mark.parametrize(
    "name, t, pad",
    [
        ("ks_transpose16", 16, 0),
        ("ks_transpose16_pad", 16, 1),
        ("ks_transpose32", 32, 0),
        ("ks_transpose32_pad", 32, 1),
    ],
)
def test_transpose_conflict_degrees_on_h200(name, t, pad):
    row = kernel(name)
    ev = evaluate("transpose.tile", "H200", {"t": t, "pad": pad})
    ms = measurements_from_ncu("transpose.tile", row)
    (deg,) = [m for m in ms if m.quantity == "read_degree"]
    (c,) = compare(ev, [deg])
    assert c.verdict.kind == "agrees", c.verdict.explanation
    # t·(t+pad)·4 B
    assert ev.value("smem_per_block") == row["launch__shared_mem_per_block_static"]
    assert ev.value("threads_per_block") == row["launch__block_size"]


def test_column_read_degrees_on_h200():
    strided, padded = kernel("ks_colread4", 0), kernel("ks_colread4", 1)
    (d32,) = [
        m for m in measurements_from_ncu("bank.column_read", strided) if m.quantity == "degree"
    ]
    (d33,) = [
        m for m in measurements_from_ncu("bank.column_read", padded) if m.quantity == "degree"
    ]
    assert d32.value == pytest.approx(32.0, abs=0.01) and d33.value == pytest.approx(1.0)
    assert (
        compare(evaluate("bank.column_read", params={"stride": 32}), [d32])[0].verdict.kind
        == "agrees"
    )
    assert (
        compare(evaluate("bank.column_read", params={"stride": 33}), [d33])[0].verdict.kind
        == "agrees"
    )
    # the conflict-free stride-33 run judged against the stride-32 model does not agree
    assert (
        compare(evaluate("bank.column_read", params={"stride": 32}), [d33])[0].verdict.kind
        == "differs-unexplained"
    )


@pytest.mark.parametrize("case", [c for c in all_cases() if c.runnable], ids=lambda c: c.id)
def test_every_case_has_measurements_that_make_its_verdicts_fail(case):
    """For every comparable prediction of every case: the predicted value itself agrees, three times
    (or a third of) it does not — whatever the kind (estimate, exact, range, bound within its
    factor)."""
    import math

    ev = evaluate(case, "H200" if case.default_gpu is None else None)
    judged = 0
    for key, p in ev.predictions.items():
        if not p.numeric or p.kind == "info" or not math.isfinite(p.value):
            continue
        ok = verdict(p, Measurement(p.value, p.unit or "", "test"))
        assert ok.kind == "agrees", (case.id, key, ok.explanation)
        for bad in (3 * p.value, p.value / 3) if p.value else (1.0,):
            v = verdict(p, Measurement(bad, p.unit or "", "test"))
            assert v.kind != "agrees", (case.id, key, bad, v.explanation)
        judged += 1
    assert judged >= 1
