"""Issue 37 on the project's own recordings (sample_traces/llm_workloads): the story a run tells at
a glance.

- One row per kernel (analyzers.kernel_groups) on Nsight Compute's report of one token of the
  compiled decode (122 launches): every launch in exactly one row, totals that add up, shares that
  sum to 1, never one kernel twice.
- Findings that fit the kernel: below SHORT_KERNEL_NS a kernel's finding says its launch dominates;
  no finding states a bare "0 %".
- The main remedy (analyzers.remedy) of each trace: the eager decode's CUDA-graph estimate is held
  against the graph replays measured in the trace and without the profiler; each verdict has a
  measurement that flips it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import polars as pl
import pytest

from analyzers.findings import SHORT_KERNEL_NS, kernel_findings, share_text
from analyzers.gpu_identify import resolve_gpu
from analyzers.kernel_groups import group_of, kernel_groups, run_story, story_sentence
from analyzers.ncu_run import analyze_ncu
from analyzers.remedy import GRAPH_KERNEL_GAP_NS, REMEDY_TOLERANCE, remedy_sentence, step_remedy
from analyzers.timeline import summarize
from collectors.ingest import parse_path

pytest.importorskip("ncu_report")

LLM = Path(__file__).resolve().parents[2] / "sample_traces" / "llm_workloads"
REF = json.loads((LLM / "h100" / "summary.json").read_text())["workloads"]


@pytest.fixture(scope="module")
def decode_ncu():
    p = parse_path(str(LLM / "h100_schedule" / "decode_compile_token8.ncu-rep.gz"))
    return analyze_ncu(
        p.table("kernels"), resolve_gpu(p.meta["gpu_name"], p.meta.get("device_attributes"))
    )


@pytest.fixture(scope="module")
def traces():
    out = {}
    for name in ("decode_eager", "decode_graph", "decode_compile", "train_step", "two_streams"):
        p = parse_path(str(LLM / "h100" / f"{name}.json.gz"))
        out[name] = summarize(
            p.table("gpu_ops"),
            p.table("api_calls"),
            cpu_ops=p.table("cpu_ops"),
            nvtx=p.table("nvtx"),
        )
    return out


def test_one_row_per_kernel_holds_every_launch_once(decode_ncu):
    k = decode_ncu.kernels
    g = kernel_groups(k)
    assert k.height == 122 and g.height == 32
    ids = sorted(i for row in g["launch_ids"].to_list() for i in row)
    # every launch in exactly one row
    assert ids == sorted(k["id"].to_list())
    assert g["launches"].sum() == 122 and g["total_ns"].sum() == pytest.approx(
        k["duration_ns"].sum()
    )
    assert g["share"].sum() == pytest.approx(1.0) and g["share"].max() <= 1.0
    # a row is a name with its launch configuration: the same name with another grid is another row
    keys = g.select("kernel_name", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z")
    assert keys.unique().height == g.height and g["kernel_name"].n_unique() < g.height
    # sorted by total time; the row's id is its longest launch, and every launch finds its row
    assert g["total_ns"].to_list() == sorted(g["total_ns"].to_list(), reverse=True)
    for r in g.head(5).iter_rows(named=True):
        durs = k.filter(pl.col("id").is_in(r["launch_ids"]))
        assert r["id"] == durs.sort("duration_ns", descending=True)["id"][0]
        assert r["median_ns"] == pytest.approx(durs["duration_ns"].median())
        assert all(group_of(g, i) == r["id"] for i in r["launch_ids"])
    # the top finding's own sum never exceeds the kernel's summed losses, nor its time
    f = g.filter(pl.col("lost_total_ns").is_not_null())
    assert (f["lost_finding_ns"] <= f["lost_total_ns"] + 1e-6).all() and (
        f["lost_total_ns"] <= f["total_ns"]
    ).all()


def test_run_story_names_distinct_kernels_and_says_the_short_launches(decode_ncu):
    s = run_story(decode_ncu.kernels, top=5)
    assert (s["launches"], s["kernels"]) == (122, 32)
    assert 0 < s["lost_ns"] <= s["kernel_ns"] and 0 < s["lost_share"] <= 1
    names = [(t["name"], t["total_ns"]) for t in s["top"]]
    assert len(set(names)) == len(names) == 5
    assert [t["lost_ns"] for t in s["top"]] == sorted(
        (t["lost_ns"] for t in s["top"]), reverse=True
    )
    assert 0 <= s["sm_pct"] <= 100 and 0 <= s["dram_pct"] <= 100
    assert (
        s["short_launches"]
        == int((decode_ncu.kernels["duration_ns"] < SHORT_KERNEL_NS).sum())
        == 68
    )
    text = story_sentence(s)
    assert "122 profiled launches of 32 kernels" in text and "shorter than 5 µs" in text


def test_short_kernels_say_the_launch_dominates_and_no_finding_says_zero_percent(decode_ncu):
    k = decode_ncu.kernels
    short = k.filter(pl.col("duration_ns") < SHORT_KERNEL_NS)
    assert short.height and set(short["top_finding_key"].drop_nulls()) <= {
        "short_kernel",
        "at_bound",
        "bank_conflicts",
        "uncoalesced",
    }
    assert (short["top_finding_key"] == "short_kernel").sum() >= 0.9 * short.height
    longer = k.filter(pl.col("duration_ns") >= SHORT_KERNEL_NS)
    assert "short_kernel" not in set(longer["top_finding_key"].drop_nulls())
    titles = k["top_finding"].drop_nulls().to_list()
    assert not [t for t in titles if re.search(r"(?<![\d.])0 ?%", t)]


def test_short_kernel_verdict_flips_with_the_duration(decode_ncu):
    """The same launch's counters, measured at 3 µs and at 50 µs: short (the launch dominates), then latency-bound."""
    row = decode_ncu.kernels.filter(pl.col("top_finding_key") == "short_kernel").row(0, named=True)
    gpu = decode_ncu.gpu
    assert kernel_findings({**row, "duration_ns": 3_000.0}, gpu)[0].key == "short_kernel"
    slow = kernel_findings({**row, "duration_ns": 50_000.0}, gpu)
    assert slow[0].key in ("latency", "small_grid") and "short_kernel" not in {f.key for f in slow}


def test_share_text_never_says_a_bare_zero():
    assert [share_text(x) for x in (0.0, 0.0004, 0.061, 0.24)] == [
        "< 0.1 %",
        "< 0.1 %",
        "6.1%",
        "24%",
    ]


def test_eager_decode_remedy_predicts_the_graph_replays_within_its_tolerance(traces):
    r = traces["decode_eager"].remedy
    assert r["remedy"] == "capture the step as a CUDA graph" and r["kind"] == "estimate"
    graph_trace = traces["decode_graph"].steps.main["step_median_ns"]
    graph_plain = REF["decode_graph"]["event_step_median_ns"]  # CUDA events, no profiler
    assert abs(r["predicted_step_ns"] / graph_trace - 1) <= REMEDY_TOLERANCE
    assert abs(r["predicted_step_ns"] / graph_plain - 1) <= REMEDY_TOLERANCE
    # the gain against the un-profiled eager step: the measured eager / graph ratio is within the
    # same tolerance
    measured = REF["decode_eager"]["event_step_median_ns"] / graph_plain
    assert abs(r["unprofiled_speedup"] / measured - 1) <= 2 * REMEDY_TOLERANCE
    s = remedy_sentence(r)
    assert "CUDA graph" in s and f"{GRAPH_KERNEL_GAP_NS:g} ns" in s and "±15%" in s


def test_each_trace_gets_the_remedy_its_verdict_points_to(traces):
    assert traces["decode_compile"].remedy["remedy"] == "capture the step as a CUDA graph"
    assert traces["train_step"].remedy["remedy"] == "capture the step as a CUDA graph"
    g = traces["decode_graph"].remedy
    assert g["remedy"] == "fewer, larger kernels (fusion)" and g["kind"] == "upper bound"
    assert g["predicted_step_ns"] == g["busy_ns"] < g["step_ns"]
    t = traces["two_streams"].remedy
    assert (
        t["kind"] == "Amdahl" and t["kernel"].startswith("nvjet") and 0.5 < t["kernel_share"] <= 1
    )


def test_remedy_verdicts_flip_with_the_measurements():
    info = {
        "steady_count": 10,
        "step_median_ns": 10e6,
        "busy_median_ns": 1.2e6,
        "kernels_median": 493,
        "graph_launches_median": 0,
        "profiler_overhead_median_ns": 3e6,
    }
    assert step_remedy(info, "launch-bound")["remedy"] == "capture the step as a CUDA graph"
    # the same step already replayed as a graph: no graph remedy; a GPU that idles between its
    # kernels: fusion
    assert step_remedy({**info, "graph_launches_median": 1}, "launch-bound") is None
    assert (
        step_remedy({**info, "graph_launches_median": 1}, "idle, not waiting for the host")["kind"]
        == "upper bound"
    )
    # busy GPU: the top kernel; a trace that fails its integrity checks: no remedy at all
    busy = {**info, "busy_median_ns": 9.8e6}
    assert step_remedy(busy, "GPU-bound", {"name": "k", "busy_share": 0.5})["kind"] == "Amdahl"
    assert (
        step_remedy(info, "abstains") is None
        and step_remedy({**info, "steady_count": 0}, "launch-bound") is None
    )
    # a host-bound step whose kernels alone would take longer with graphs than now: nothing to gain
    assert step_remedy({**info, "step_median_ns": 1.3e6}, "host-bound") is None
