"""Issue 36 on real traces: graph replays are one launch call, the device's shares are the device's,
steps, and a trace-integrity check before any verdict (analyzers.timeline, analyzers.steps,
analyzers.integrity).

Every trace here is real (the project's H200 recordings or the compatibility corpus); the ones that
trip an integrity check that no real trace trips are real traces minimally edited, as each test
says."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import polars as pl
import pytest

from analyzers.bound import TraceFacts, bound_verdict
from analyzers.integrity import abstain_reason, check_trace
from analyzers.steps import sequence_steps, trace_steps
from analyzers.timeline import idle_categories, summarize
from collectors.ingest import parse_bytes, parse_path

REPO = Path(__file__).resolve().parents[2]
FFN = REPO / "sample_traces" / "h200" / "torch_ffn"
CORPUS = REPO / "tests" / "corpus"
BERT_H100 = CORPUS / "tracelens" / "h100_bert-small_2025-07.json.gz"
RESNET_DDP = CORPUS / "hta" / "a100_resnet_ddp_nccl_rank0_2024-05.json.gz"
ALEXNET = CORPUS / "hta" / "a100_param_alexnet_simple_add_2023-09.json.gz"
V100_DDP = CORPUS / "hta" / "v100_16gb_ddp_rank1_2022-08.trimmed.json.gz"
B200 = CORPUS / "tracelens" / "b200_eager_nccl_rank0_2026-01.json.gz"
VLLM_GRAPH = CORPUS / "tracelens" / "mi300x_vllm_decode_hipgraph_2026-03.json.gz"
RESNET_2021 = CORPUS / "pytorch-kineto" / "resnet50_nw0_2021-01.pt.trace.json.gz"
MI250 = CORPUS / "hta" / "amd_mi250_rocm6.2_minitoy.json.gz"


def _summary(p):
    return summarize(
        p.table("gpu_ops"), p.table("api_calls"), cpu_ops=p.table("cpu_ops"), nvtx=p.table("nvtx")
    )


def _parsed(path):
    return parse_path(str(path))


def _edited(path, edit) -> object:
    """A real trace with its JSON minimally edited by `edit(events)`, parsed as a user's file would be."""
    doc = json.loads(gzip.decompress(Path(path).read_bytes()))
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    edit(events)
    return parse_bytes(json.dumps(doc).encode(), Path(path).name)


def _check(checks, key):
    return next(c for c in checks if c["check"] == key)


# --------------------------------------------------------------------------------------------------------------
# Graph replays are one launch call
# --------------------------------------------------------------------------------------------------------------
def test_graph_kernels_have_no_launch_delay_and_a_replay_is_one_call():
    s = _summary(_parsed(FFN / "ffn_M1_graph.json.gz"))
    d = s.devices.row(0, named=True)
    assert d["kernel_count"] == 180 and d["launch_call_count"] == 10
    assert d["graph_launch_count"] == 10 and d["graph_kernel_count"] == 180
    assert d["launch_delay_median_ns"] is None and d["launch_latency_median_ns"] is None
    assert d["short_kernel_share"] == 0.0  # no replay is shorter than its cudaGraphLaunch
    assert d["bound"] == "GPU-bound"
    assert "10 graph replays ran 180 kernels" in d["bound_evidence"]
    # per kernel (the old rule) 84 % of the graph's kernels were "shorter than their launch call":
    # that would flip the evidence; per call none is
    g = _parsed(FFN / "ffn_M1_graph.json.gz").table("gpu_ops")
    assert (g["duration_ns"] < g["api_duration_ns"]).mean() > 0.8


def test_graph_trace_json_has_no_launch_delay_for_graph_kernels(capsys):
    from dashboard.cli import main

    assert main(["analyze", str(FFN / "ffn_M1_graph.json.gz"), "--format", "json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert all(
        k["launch_delay_us"] is None
        for k in rep["kernels"]
        if k["graph_launch_correlation"] is not None
    )
    assert rep["summary"]["launch_delay_median_us"] is None
    dev = rep["summary"]["devices"][0]
    assert dev["graph_launch_count"] == 10 and dev["short_call_share"] == 0.0
    assert rep["step_summary"][0]["source"] == "graphs"


def test_compare_eager_to_graph_reports_launches_and_step_time_not_a_delay_regression():
    from analyzers.baseline import trace_values
    from analyzers.compare import compare_traces

    a, b = _parsed(FFN / "ffn_M1_eager.json.gz"), _parsed(FFN / "ffn_M1_graph.json.gz")
    sa, sb = _summary(a), _summary(b)
    r = compare_traces(
        a.table("gpu_ops"),
        b.table("gpu_ops"),
        trace_values(sa, a.table("gpu_ops")),
        trace_values(sb, b.table("gpu_ops")),
    )
    labels = r.stats["label"].to_list()
    assert not any("launch delay" in x for x in labels)
    stats = {row["stat"]: row for row in r.stats.iter_rows(named=True)}
    assert stats["launches_per_step"]["a"] == 6 and stats["launches_per_step"]["b"] == 1
    assert stats["step_median_ns"]["a"] and stats["step_median_ns"]["b"]
    story = " ".join(r.story)
    assert "Launch calls per step 6 → 1 (B replays the step as a CUDA graph" in story
    assert "Time per step" in story


def test_story_says_the_host_runs_ahead_and_names_no_delay_regression():
    from analyzers.baseline import trace_story

    base = {
        "step_median_ns": 4e6,
        "launches_per_step": 284,
        "kernels_per_step": 284,
        "gpu_idle_fraction": 0.93,
        "host_wait_fraction": 0.9,
        "queued_share": 0.05,
        "_steps": {"steady_count": 15},
    }
    graph = {
        **base,
        "step_median_ns": 3.3e5,
        "launches_per_step": 3,
        "gpu_idle_fraction": 0.01,
        "host_wait_fraction": 0.0,
        "queued_share": 1.0,
        "_steps": {"steady_count": 15, "graph_launches_median": 1},
    }
    story = " ".join(trace_story(base, graph))
    assert "12.12× faster" in story and "GPU became the bottleneck" in story
    assert "not a launch-delay regression" in story
    # the sentence needs the queue: without kernels queued behind GPU work it is not said
    assert "bottleneck" not in " ".join(trace_story(base, {**graph, "queued_share": 0.1}))


def test_join_never_calls_a_graph_kernel_launch_bound():
    from analyzers.join import trace_kernels

    g = _parsed(FFN / "ffn_M1_graph.json.gz")
    k, steps = trace_kernels(g.table("gpu_ops"), g.table("nvtx"))
    assert steps.height == 10  # one step per graph replay
    assert k.group_by("step").len()["len"].unique().to_list() == [18]


# --------------------------------------------------------------------------------------------------------------
# The device's shares are the device's
# --------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("path, old_min", [(RESNET_DDP, 1.5), (ALEXNET, 1.5)])
def test_host_wait_never_exceeds_the_device_idle_on_multi_stream_traces(path, old_min):
    p = _parsed(path)
    g = p.table("gpu_ops")
    s = _summary(p)
    d = s.devices.row(0, named=True)
    assert g["stream"].n_unique() >= 2
    # the old figure summed each stream's host-wait gaps: over 150 % of the window
    old = (
        idle_categories(g).filter(pl.col("category") == "host_wait")["idle_ns"].sum()
        / d["window_ns"]
    )
    assert old > old_min
    assert d["host_wait_fraction"] <= d["idle_fraction"] + 1e-12
    assert (
        d["host_wait_ns"] + d["kernel_wait_ns"] + d["other_idle_ns"]
        == d["window_ns"] - d["busy_ns"]
    )


@pytest.mark.parametrize("path", [V100_DDP, CORPUS / "test-cuda" / "report1.sqlite.gz"])
def test_a_90_percent_busy_multi_stream_trace_is_gpu_bound(path):
    p = _parsed(path)
    s = _summary(p)
    for d in s.devices.iter_rows(named=True):
        if d["kernel_count"] < 10:
            continue
        assert 1 - d["idle_fraction"] >= 0.9
        assert d["bound"] == "GPU-bound"
        assert d["host_wait_fraction"] <= d["idle_fraction"]
    assert p.table("gpu_ops")["stream"].n_unique() >= 3


def test_idle_causes_are_named_only_when_the_trace_holds_them():
    facts = TraceFacts(
        window_ns=10_000_000, kernel_wait_ns=2_190_000, other_idle_ns=520_000, streams=1
    )
    v, e = bound_verdict(0.271, 0.0, 0.1, facts)
    assert v == "idle, not waiting for the host"
    assert "2.190 ms of the 2.710 ms idle is short gaps" in e
    assert "one stream, no event waits and no communication" in e
    assert "communication)" not in e.split("longer gaps")[0]
    v, e = bound_verdict(
        0.271,
        0.0,
        0.1,
        TraceFacts(window_ns=10_000_000, other_idle_ns=2_710_000, streams=3, event_waits=12),
    )
    assert "3 streams, 12 event waits" in e and "NCCL" not in e
    # a measurement that flips it: the same idle, but a third of the window waiting for the host
    assert bound_verdict(0.4, 0.35, 0.1, facts)[0] == "host-bound"


def test_shares_cannot_exceed_one_hundred_percent():
    # a host wait above the idle share is clamped to it
    v, e = bound_verdict(0.2, 1.193, 0.9)
    assert "waiting for the host 20.0%" in e and "119" not in e


# --------------------------------------------------------------------------------------------------------------
# Steps
# --------------------------------------------------------------------------------------------------------------
def test_profiler_steps_of_a_real_trace():
    s = _summary(_parsed(BERT_H100))
    info = s.steps.main
    assert info["source"] == "ProfilerStep" and info["step_count"] >= 1
    assert s.run["step_median_ns"] == info["step_median_ns"]


def test_graph_decode_has_one_step_per_replay():
    s = _summary(_parsed(VLLM_GRAPH))
    info = s.steps.main
    assert info["source"] == "graphs" or info["source"] == "sequence"
    assert info["graph_launches_median"] == 1
    assert 0.7e6 < info["step_median_ns"] < 1.0e6
    assert info["busy_fraction_median"] > 0.99


def test_warm_up_step_is_named_and_kept_out_of_the_median():
    s = _summary(_parsed(B200))
    info = s.steps.main
    assert info["source"] == "sequence" and info["sequence"]["period_kernels"] == 21
    assert [w["step"] for w in info["warmup"]] == [0]
    assert "the steady median" in info["warmup"][0]["reasons"]
    steady = s.steps.steps.filter(pl.col("phase") == "steady")["gpu_ns"]
    assert info["step_median_ns"] == float(steady.median())
    assert info["step_median_ns"] < info["warmup"][0]["gpu_ns"] / 3


def test_sequence_steps_need_a_regular_period():
    k = pl.DataFrame(
        {
            "name": list("abcabcabcabc"),
            "start_ns": list(range(0, 120, 10)),
            "end_ns": [x + 5 for x in range(0, 120, 10)],
            "api_start_ns": [None] * 12,
        },
        schema={
            "name": pl.String,
            "start_ns": pl.Int64,
            "end_ns": pl.Int64,
            "api_start_ns": pl.Int64,
        },
    )
    r, how = sequence_steps(k)
    assert how["period_kernels"] == 3 and r.height == 4
    # the measurement that flips it: names that do not repeat
    k2 = k.with_columns(pl.Series("name", list("abcdefghijkl")))
    assert sequence_steps(k2)[1] is None


def test_sequence_steps_do_not_depend_on_names_read_before():
    """Equal candidates (a, b, c each every 3 kernels) tie-break on the first to run, whatever
    order the process met the names in before (polars' categorical codes are process-wide while
    a series holding them lives)."""
    held = pl.Series(["zz_c", "zz_b"]).cast(pl.Categorical)  # zz_c and zz_b get the first codes
    names = ["zz_a", "zz_b", "zz_c"] * 4
    k = pl.DataFrame(
        {
            "name": names,
            "start_ns": list(range(0, 120, 10)),
            "end_ns": [x + 5 for x in range(0, 120, 10)],
        }
    )
    r, how = sequence_steps(k)
    assert how["anchor"] == "zz_a" and how["before_first"] == 0 and r.height == 4
    assert held.len() == 2


def test_step_pattern_names_token_ranges():
    def add_tokens(events):
        steps = [e for e in events if str(e.get("name", "")).startswith("ProfilerStep#")]
        for e in steps:
            e["name"] = "token_" + e["name"].split("#")[1]

    p = _edited(BERT_H100, add_tokens)
    s = _summary(p)
    assert s.steps.main["source"] == "annotation"  # 'token N' is a default pattern
    s2 = trace_steps(
        p.table("gpu_ops"),
        p.table("api_calls"),
        p.table("cpu_ops"),
        p.table("nvtx"),
        pattern=r"token_(\d+)",
    )
    assert s2.main["source"] == "pattern" and s2.main["step_count"] == s.steps.main["step_count"]


def test_profiler_overhead_is_events_times_the_calibration():
    p = _parsed(BERT_H100)
    st = trace_steps(
        p.table("gpu_ops"),
        p.table("api_calls"),
        p.table("cpu_ops"),
        p.table("nvtx"),
        profiler_ns_per_event=2000,
    )
    row = st.steps.row(0, named=True)
    assert row["events"] > 0 and row["profiler_overhead_ns"] == row["events"] * 2000


# --------------------------------------------------------------------------------------------------------------
# Integrity: each check trips on a real (or really recorded and minimally edited) trace, and passes
# on another
# --------------------------------------------------------------------------------------------------------------
def test_a_clean_real_trace_passes_every_check():
    s = _summary(_parsed(BERT_H100))
    bad = [c for c in s.integrity if c["status"] in ("warn", "fail")]
    assert bad == []
    assert s.run["abstains"] is None


def test_kernels_without_launch_call_real():
    c = _check(_summary(_parsed(RESNET_2021)).integrity, "kernels_without_launch_call")
    assert (
        c["status"] == "warn"
        and c["count"] > 0
        and "launch statistics cover the other" in c["detail"]
    )


def test_launch_calls_without_kernels_and_cut_short_real():
    s = _summary(_parsed(V100_DDP))
    assert _check(s.integrity, "launch_calls_without_gpu_ops")["status"] == "warn"
    cut = _check(s.integrity, "trace_cut_short")
    assert cut["status"] == "warn" and cut["count"] > 0


def test_clock_skew_fails_and_the_verdict_abstains():
    # the GPU ops of the trace 50 µs earlier: each now starts before its launch call
    def skew(events):
        for e in events:
            if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
                e["ts"] = e["ts"] - 50.0

    s = _summary(_edited(BERT_H100, skew))
    c = _check(s.integrity, "gpu_ops_before_launch_call")
    assert c["status"] == "fail" and c["blocking"]
    d = s.devices.row(0, named=True)
    assert d["bound"] == "abstains" and "clock skew" in d["bound_evidence"]
    assert s.run["abstains"]


def test_duplicated_kernel_records_are_counted_once_with_a_warning():
    """Issue 42's probe: one kernel event repeated 49 times went from 83 to 132 kernels, a top
    kernel at 131.6 % of busy time, and a changed verdict. The repeats are removed when the file is
    read, and the run says so."""

    def repeat(events):
        k = next(e for e in events if e.get("cat") == "kernel")
        events.extend([dict(k) for _ in range(49)])

    p = _edited(BERT_H100, repeat)
    assert any("49 GPU op records appeared more than once" in w for w in p.meta["warnings"])
    s, orig = _summary(p), _summary(_parsed(BERT_H100))
    assert s.run["kernel_count"] == orig.run["kernel_count"] == p.meta["item_count"]
    assert s.devices["bound"][0] == orig.devices["bound"][0] == "launch-bound"
    assert s.kernels["busy_share"].max() <= 1.0
    # the integrity check still catches repeats that reach it (a table written by an older reader)
    g = p.table("gpu_ops")
    c = _check(
        check_trace(pl.concat([g, g.head(3)]), p.table("api_calls")), "overlapping_ops_on_stream"
    )
    assert c["status"] == "fail" and "appear more than once" in c["detail"]


def test_programmatic_launch_overlap_is_a_warning_not_a_failure_real():
    s = _summary(_parsed(B200))
    c = _check(s.integrity, "overlapping_ops_on_stream")
    assert c["status"] == "warn" and not any(x["status"] == "fail" for x in s.integrity)
    assert s.devices["bound"][0] == "launch-bound"


def test_piled_up_kernels_make_a_stream_busier_than_its_window():
    # every kernel moved to the first kernel's start (as issue 42's shifted nsys export)
    def pile(events):
        ks = [e for e in events if e.get("cat") == "kernel"]
        for e in ks:
            e["ts"] = ks[0]["ts"] + 60.0

    s = _summary(_edited(BERT_H100, pile))
    c = _check(s.integrity, "stream_busy_over_window")
    assert c["status"] == "fail" and c["blocking"]
    assert s.devices["bound"][0] == "abstains"
    assert 0.0 <= s.devices["idle_fraction"][0] <= 1.0


def test_graph_replays_without_kernels_are_said():
    # the replays' kernels gone, their cudaGraphLaunch calls kept (nsys without node trace)
    def drop(events):
        events[:] = [e for e in events if e.get("cat") != "kernel"] + [
            e for e in events if e.get("cat") == "kernel"
        ][:0]

    ok = _check(_summary(_parsed(FFN / "ffn_M1_graph.json.gz")).integrity, "graph_replays")
    assert ok["status"] == "pass" and "10 graph launches ran 180 kernels" in ok["detail"]
    p = _edited(
        FFN / "ffn_M1_graph.json.gz",
        lambda ev: [ev.remove(e) for e in [e for e in ev if e.get("cat") == "kernel"][:18]],
    )
    c = _check(check_trace(p.table("gpu_ops"), p.table("api_calls")), "graph_replays")
    assert c["status"] == "warn" and c["count"] == 1 and "--cuda-graph-trace=node" in c["detail"]


def test_nccl_kernels_under_both_namings():
    c = _check(_summary(_parsed(B200)).integrity, "nccl_kernels")
    assert c["status"] == "pass" and "1 ncclDevKernel_*" in c["detail"]
    s = _summary(_parsed(RESNET_DDP))
    c = _check(s.integrity, "nccl_kernels")
    assert c["status"] == "pass" and "ncclKernel_*" in c["detail"]
    # the renamed kernels count as communication in the breakdown (HTA#360 found none after the
    # rename)
    t = summarize(_parsed(B200).table("gpu_ops")).temporal.row(0, named=True)
    assert t["communication_ns"] > 0


def test_collectives_on_the_host_without_kernels_warn_real():
    c = _check(
        _summary(
            _parsed(
                CORPUS / "hta" / "v100_ns_resolution_ddp_rank0_2024-04.pt.trace.trimmed.json.gz"
            )
        ).integrity,
        "nccl_kernels",
    )
    assert c["status"] == "warn" and "collectives on the host" in c["detail"]


def test_steps_without_gpu_work_real():
    c = _check(_summary(_parsed(MI250)).integrity, "steps_without_gpu_work")
    assert c["status"] == "warn" and c["count"] >= 1


def test_abstain_reason_lists_only_blocking_failures():
    checks = [
        {"check": "x", "label": "a", "status": "fail", "blocking": False, "detail": "d"},
        {"check": "y", "label": "b", "status": "warn", "blocking": True, "detail": "d"},
    ]
    assert abstain_reason(checks) is None
    checks.append(
        {"check": "z", "label": "c", "status": "fail", "blocking": True, "detail": "why: more"}
    )
    assert abstain_reason(checks) == "the trace fails its integrity check 'c' (why)"


def test_a_compiling_step_is_warm_up_not_steady_real():
    """HTA's torch.compile trace: its one ProfilerStep spends 13.3 s on the host (Dynamo and
    Inductor compiling) for 1.8 µs of GPU work: named as compilation, never a steady step."""
    s = _summary(_parsed(CORPUS / "hta" / "a100_triton_torch_compile_2024-10.json.gz"))
    info = s.steps.main
    assert info["steady_count"] == 0 and info["warmup_count"] == 1
    assert "compilation (13,336.3 ms on the host" in info["warmup"][0]["reasons"]
    assert (
        s.kernels.filter(pl.col("name") == "triton_poi_fused_add_cos_sin_0")["origin"][0]
        == "torch.compile (Inductor, Triton)"
    )


# --------------------------------------------------------------------------------------------------------------
# join: per-step columns over real steps, whatever names them
# --------------------------------------------------------------------------------------------------------------
STEP = REPO / "sample_traces" / "h200" / "train_step"


def _join_json(capsys, *extra):
    from dashboard.cli import main

    rc = main(
        [
            "join",
            str(STEP / "train_step_ncu_nvtx.ncu-rep.gz"),
            str(STEP / "train_step_trace.json.gz"),
            "--format",
            "json",
            *extra,
        ]
    )
    out = capsys.readouterr()
    return rc, out


def test_join_step_option_names_the_steps(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELSCOPE_STORE", str(tmp_path / "store"))
    rc, out = _join_json(capsys)
    assert rc == 0
    default = json.loads(out.out)
    assert default["steps"] == 5 and default["window_label"] == "ProfilerStep#6"
    rc, out = _join_json(capsys, "--step", r"ProfilerStep#(\d+)")
    assert rc == 0 and json.loads(out.out)["matched"] == default["matched"]
    # a per-step column is per step: the fused Adam kernel runs once per step, never the whole
    # trace's count
    adam = [m for m in default["matched"] if "multi_tensor_apply" in m["name"]]
    assert adam and all(m["count_per_step"] == 1 for m in adam)
    rc, out = _join_json(capsys, "--step", "ProfilerStep")  # no group for the step number
    assert rc == 2 and "needs a group" in out.err


def test_join_without_step_ranges_uses_found_steps():
    """Without ProfilerStep ranges the steps are found (here: one per graph replay), so 'per step' is per step."""
    from analyzers.join import trace_kernels

    p = _parsed(REPO / "sample_traces" / "llm_workloads" / "h100" / "decode_graph.json.gz")
    k, steps = trace_kernels(p.table("gpu_ops"), p.table("nvtx"))
    assert steps.height == 16
    per = k.group_by("step").len()["len"]
    # 493 kernels a token: 492 replayed, one launched alone
    assert per.min() == per.max() == 493


def test_an_nsys_export_with_kernels_moved_earlier_abstains(tmp_path):
    """Issue 42's probe: each kernel of a real Nsight Systems export moved 10^12 ns earlier (so
    ~1,000 s long in a 1 s capture) gave a busy share of 12,388 % and a flipped verdict. Now: a
    blocking integrity failure, the verdict abstains, no share above 1; the original file keeps its
    verdict."""
    import sqlite3

    src = CORPUS / "test-cuda" / "report1.sqlite.gz"
    db = tmp_path / "moved.sqlite"
    db.write_bytes(gzip.decompress(src.read_bytes()))
    with sqlite3.connect(db) as c:
        c.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = start - 1000000000000")
    s = _summary(parse_path(str(db)))
    assert s.run["abstains"] and set(s.devices["bound"]) == {"abstains"}
    assert s.kernels["busy_share"].max() <= 1.0
    assert (s.devices["idle_fraction"] >= 0).all() and (s.devices["host_wait_fraction"] <= 1).all()
    orig = _summary(_parsed(src))
    assert orig.run["abstains"] is None and "abstains" not in orig.devices["bound"].to_list()
