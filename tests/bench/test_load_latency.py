"""The unloaded load-latency ceiling (case ceiling.load_latency, kernel ks_chase): the chain it
follows, the arithmetic that cancels the launch's fixed cost, how the ceiling is classified and
judged, and the verdict it moves (littles_law's achievable bandwidth at the unloaded latency). The
GPU run itself is in the recorded bench runs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from analyzers.cases.catalog import compare, evaluate
from analyzers.cases.verdicts import Measurement
from analyzers.ceilings import Ceiling, classify_ceiling, implausible
from collectors.bench.ceilings import CHASE_LINE, chase_chain, chase_latency
from dashboard.core.source import Source


@pytest.mark.parametrize("lines", [1, 2, 7, 4096])
def test_the_chain_is_one_cycle_through_every_line(lines):
    chain = chase_chain(np, lines * CHASE_LINE, seed=lines)
    step = CHASE_LINE // 8
    p, seen = 0, []
    for _ in range(lines):
        assert p % step == 0  # every load starts a new line
        seen.append(p)
        p = int(chain[p])
    assert p == 0 and sorted(seen) == [i * step for i in range(lines)]


def test_the_chain_is_not_sequential():
    chain = chase_chain(np, 4096 * CHASE_LINE)
    p, jumps = 0, []
    for _ in range(4095):
        q = int(chain[p])
        jumps.append(q - p)
        p = q
    # a prefetcher could follow a constant stride; a random cycle has almost none repeated
    assert len(set(jumps)) > 3000


def test_latency_is_the_slope_between_two_chain_lengths():
    # 3 µs of launch and 600 ns a load: 256 and 4096 steps
    t = lambda n: 3e-6 + n * 600e-9  # noqa: E731
    assert chase_latency(t(4096), t(256), 4096, 256) == pytest.approx(600e-9)
    with pytest.raises(ValueError):
        chase_latency(1, 1, 256, 256)


def test_classified_per_level_and_judged_as_a_cost():
    assert classify_ceiling("dram_load_latency", "s") == "latency_dram"
    assert classify_ceiling("l2_load_latency", "s") == "latency_l2"
    assert classify_ceiling("launch_back_to_back", "s") == "launch"  # unchanged
    assert classify_ceiling("dram_load_latency", "B/s") == "dram"  # the unit decides first
    assert implausible("latency_dram", "s", 480e-9, None) is None
    # faster than any L2 hit: broken
    assert "outside" in implausible("latency_dram", "s", 20e-9, None)
    assert "outside" in implausible("latency_l2", "s", 3e-6, None)


def test_a_measured_dram_latency_moves_littles_law_upper_bound_and_flips_its_verdict():
    """The unloaded latency bounds the achievable bandwidth at low occupancy from above: 250 ns by
    default; a GPU measured at 500 ns halves the bound, the source says which run measured it, and a
    copy that reached 0.8 TB/s at 6.25 % occupancy agrees with the default bound (1.08 TB/s) and not
    with the measured one (0.54 TB/s)."""
    params = {"occ": 6.25}
    default = evaluate("littles_law", "H100 SXM", params)
    measured = evaluate(
        "littles_law",
        "H100 SXM",
        params,
        ceilings={"latency_dram": Ceiling(500e-9, "dram_load_latency (ks_chase, run r1)")},
    )
    hi = default.predictions["achieved_bandwidth"].hi
    assert measured.predictions["achieved_bandwidth"].hi == pytest.approx(hi / 2, rel=1e-6)
    assert "run r1" in measured.params.sources["latency_idle"]
    assert measured.params["latency_idle"] == pytest.approx(500)
    m = Measurement(0.8e12, "B/s", "bench", quantity="achieved_bandwidth")
    (before,) = compare(default, [m])
    (after,) = compare(measured, [m])
    assert before.verdict.kind == "agrees" and after.verdict.kind.startswith("differs")


RECORDED = sorted(
    (Path(__file__).parents[2] / "sample_traces" / "h100" / "load_latency").glob("bench_*.json.gz")
)


def test_the_recorded_h100_latencies_feed_predict(tmp_path, capsys):
    """The H100 run (sample_traces/h100/load_latency): DRAM 347 ns and L2 144 ns per dependent load,
    stored as the H100's ceilings; `predict littles_law --gpu H100` then uses the measured unloaded
    latency, not the 250 ns default, and names the run."""
    import json

    from collectors.store import Store
    from dashboard.cli import main

    store = Store(tmp_path / "store")
    run_id = Source(store).ingest_path(RECORDED[0])[0].run_id
    best = Source(store).best_ceilings("NVIDIA H100 80GB HBM3")
    assert best["latency_dram"].value == pytest.approx(347e-9, rel=0.01)
    assert best["latency_l2"].value == pytest.approx(144e-9, rel=0.01)
    # the H200 keeps its default
    assert "H200" not in str(Source(store).best_ceilings("NVIDIA H200"))
    assert (
        main(
            [
                "predict",
                "littles_law",
                "--gpu",
                "H100",
                "--store",
                str(store.root),
                "--format",
                "json",
            ]
        )
        == 0
    )
    d = json.loads(capsys.readouterr().out)
    assert d["params"]["latency_idle"] == pytest.approx(347, rel=0.01)
    assert (
        run_id in d["param_sources"]["latency_idle"]
        and "dram_load_latency" in d["param_sources"]["latency_idle"]
    )
