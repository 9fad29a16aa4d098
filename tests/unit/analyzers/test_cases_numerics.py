"""The CPU-run cases: FP non-associativity, the segment-sum ULP experiment, online softmax, FP8 row scales."""

from __future__ import annotations

import math

import numpy as np
import pytest

from analyzers.cases import evaluate, numerics


def test_non_associativity_in_float32():
    r = numerics.non_associativity()
    assert r["left"] == 1.0 and r["right"] == 1.0 + 2.0**-23 and r["difference"] == 2.0**-23


def test_bf16_rounding():
    x = np.array([1.0, 1.00390625, 1.0048828125, -3.14159265], np.float32)
    # 1 + 2^-8 is a tie between 1 and 1 + 2^-7: round to even -> 1; just above it rounds up
    assert numerics.to_bf16(x).tolist() == [1.0, 1.0, 1.0078125, -3.140625]


def test_segmented_sum_matches_a_plain_loop():
    rng = np.random.default_rng(3)
    rows = rng.random((3, 37)).astype(np.float32)
    for s in (1, 2, 5, 37):
        expected = []
        for row in rows:
            parts = []
            for seg in np.array_split(row, s):
                acc = np.float32(0)
                for x in seg:
                    acc = np.float32(acc + x)
                parts.append(acc)
            tot = np.float32(0)
            for p in parts:
                tot = np.float32(tot + p)
            expected.append(tot)
        assert numerics.segmented_sum_f32(rows, s).tolist() == expected
    with pytest.raises(ValueError):
        numerics.segmented_sum_f32(rows, 38)


def test_ulp_distribution_shrinks_with_segments():
    errs = numerics.segment_sum_ulp(rows=100, length=4096, segment_counts=(1, 8, 64), seed=1)
    stats = {s.segments: s for s in numerics.ulp_stats(errs)}
    assert stats[1].median_abs > 10 * stats[8].median_abs > 10 * stats[64].median_abs * 0.5
    assert stats[1].median < 0 and stats[8].median < 0  # sequential FP32 sums lose low bits
    # the chapter's row (-175.2 and -9.2 ULP) lies inside the simulated 1st-99th percentile ranges
    assert stats[1].p1 <= -175.2 <= stats[1].p99 and stats[8].p1 <= -9.2 <= stats[8].p99


def test_fp_case_reports_a_distribution():
    ev = evaluate("fp.non_associativity", params={"rows": 50})
    assert ev.value("left") == 1.0 and ev.value("right") == 1.0 + 2.0**-23
    assert (
        ev["ulp_one_segment"].kind == "range"
        and ev["ulp_one_segment"].lo < ev["ulp_one_segment"].hi
    )
    table = ev.tables["ulp_by_segments"]
    assert [r["segments"] for r in table] == [1, 2, 4, 8, 16, 32, 64]
    assert table[0]["median_abs_ulp"] > table[-1]["median_abs_ulp"]
    assert evaluate("fp.non_associativity", params={"rows": 50, "seed": 0}).value(
        "ulp_segments"
    ) == ev.value("ulp_segments")  # fixed order, fixed seed: deterministic


def test_online_softmax_exercise_5_3():
    # stream (0, 1), (ln 2, 2), then (ln 4, 5): weights 1 : 2 : 4
    steps = numerics.online_softmax([0.0, math.log(2), math.log(4)], [1, 2, 5])
    assert [round(s.m, 12) for s in steps] == [0.0, round(math.log(2), 12), round(math.log(4), 12)]
    assert (
        steps[1].r == pytest.approx(0.5)
        and steps[1].l == pytest.approx(1.5)
        and steps[1].u == pytest.approx(2.5)
    )
    last = steps[-1]
    assert last.r == pytest.approx(0.5) and last.p == pytest.approx(1.0)
    assert (
        last.l == pytest.approx(1.75)
        and last.u == pytest.approx(6.25)
        and last.out == pytest.approx(25 / 7)
    )
    ev = evaluate("online_softmax.step")
    assert ev.value("output") == pytest.approx(25 / 7) and ev.value("abs_error") < 1e-12
    assert len(ev.tables["steps"]) == 3


def test_online_softmax_other_stream_matches_float64_direct():
    # (3, 10), (1, 20): m = 3, l = 1 + e^-2, u = 10 + 20 e^-2
    ev = evaluate("online_softmax.step", params={"s": "3,1", "V": "10,20", "add": 0})
    assert ev.value("m") == 3 and ev.value("l") == pytest.approx(1 + math.exp(-2))
    assert ev.value("output") == pytest.approx((10 + 20 * math.exp(-2)) / (1 + math.exp(-2)))
    rng = np.random.default_rng(0)
    s, vals = rng.normal(0, 5, 200), rng.normal(size=200)
    assert numerics.online_softmax(s, vals)[-1].out == pytest.approx(
        numerics.direct_softmax(s, vals), rel=1e-12
    )
    with pytest.raises(ValueError, match="s has 2 scores but V has 1"):
        evaluate("online_softmax.step", params={"s": "1,2", "V": "1"})


def test_illegal_moves_change_results():
    for row in numerics.illegal_moves_demo():
        assert row["before"] != pytest.approx(row["after"]), row["move"]


def test_fp8_quantize_and_row_scale():
    q = numerics.quantize_e4m3(np.array([448.0, 500.0, 1.0, 1.0625, 0.001953125, 17.0]))
    # 500 saturates; 1.0625 = 1 + 2^-4 ties to even -> 1.0; 2^-9 is the smallest subnormal; 17 -> 16
    # (step 2)
    assert q.tolist() == [448.0, 448.0, 1.0, 1.0, 0.001953125, 16.0]
    row = np.linspace(0, 3, 4096)  # the first 64 values see only max 0.047
    whole = numerics.fp8_row_quantize(row)
    assert whole["clipped"] == 0 and whole["scale"] == pytest.approx(3 / 448)
    assert numerics.fp8_row_quantize(row, 64)["clipped"] > 0
