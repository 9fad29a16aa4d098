"""The join of an Nsight Compute run with a timeline of the same program (analyzers.join), on a real
training step recorded on the H200 (sample_traces/h200/train_step: a PyTorch profiler trace of steps
4..8, ncu --set full on the NVTX push/pop range of step 6 and on its start/end range (the whole
step), ncu --set basic on a --launch-skip 40 --launch-count 12 window)."""

from __future__ import annotations

import json

import polars as pl
import pytest

from tests.conftest import SAMPLES
from dashboard.core.source import Source

pytest.importorskip("ncu_report")
HERE = SAMPLES / "h200" / "train_step"
TRACE, NVTX, WHOLE, WINDOW = (
    HERE / "train_step_trace.json.gz",
    HERE / "train_step_ncu_nvtx.ncu-rep.gz",
    HERE / "train_step_ncu_whole.ncu-rep.gz",
    HERE / "train_step_ncu_window.ncu-rep.gz",
)
REPORT_KEYS = {
    "name",
    "ncu_id",
    "count_per_step",
    "share_of_step_gpu_time",
    "launch_delay_median_ns",
    "ncu_duration_ns",
    "trace_duration_median_ns",
    "lost_per_step_ns",
    "confidence",
    "durations_agree",
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    from collectors.store import Store

    s = Store(tmp_path_factory.mktemp("join") / "store")
    return s, {p.name: Source(s).ingest_path(p)[0] for p in (TRACE, NVTX, WHOLE, WINDOW)}


def _join(runs, ncu_name, **kw):

    s, r = runs
    return Source(s).join(r[ncu_name], r[TRACE.name])


def test_every_kernel_of_the_nvtx_window_is_matched_on_the_real_step(runs):
    res = _join(runs, NVTX.name)
    assert res.window_step == 6 and res.window_label == "ProfilerStep#6" and res.steps == 5
    assert len(res.matched) == 12 and res.unmatched_ncu == []
    assert {m.confidence for m in res.matched} == {"high"}
    assert sorted(m.ncu_id for m in res.matched) == list(range(12))
    # the backward pass runs on autograd's own thread: outside the push/pop range, each one said why
    assert len(res.unmatched_trace) == 15
    assert all("another host thread" in u["reason"] for u in res.unmatched_trace)
    # ncu vs trace durations agree within the trace's spread over five steps, or say why not
    agree = [m for m in res.matched if m.durations_agree]
    assert len(agree) >= 8
    for m in res.matched:
        if not m.durations_agree:
            assert "replays the launch alone" in m.duration_note
    # the big GEMMs: two launches of one kernel and configuration keep their own durations
    gemms = sorted(
        (m for m in res.matched if m.base.startswith("nvjet") and m.grid == "(2,66,1)"),
        key=lambda m: m.position,
    )
    lo, hi = (m.trace_duration_median_ns / 1e3 for m in gemms)
    assert 45 < lo < 55 and 90 < hi < 100
    assert all(m.count_per_step == 2 for m in gemms)


def test_a_start_end_range_covers_the_whole_step(runs):
    """ncu on the start/end range whole_step_6 (process-wide): all 27 kernels of the step, forward,
    backward and optimizer, matched in step 6 with high confidence; nothing of the step left out."""
    res = _join(runs, WHOLE.name)
    assert (
        res.window_step == 6
        and len(res.matched) == 27
        and res.unmatched_ncu == []
        and res.unmatched_trace == []
    )
    assert {m.confidence for m in res.matched} == {"high"}
    assert sum(m.durations_agree is True for m in res.matched) >= 20
    # one stream
    assert sum(m.share_of_step_gpu_time for m in res.matched) == pytest.approx(1.0, abs=0.02)


def test_time_lost_per_step_ranks_the_findings(runs):
    d = _join(runs, NVTX.name).as_dict()
    lost = [m["lost_per_step_ns"] for m in d["matched"]]
    assert lost == sorted(lost, reverse=True) and lost[0] > 0
    m0 = d["matched"][0]
    assert m0["lost_per_step_ns"] == pytest.approx(m0["lost_ns"] * m0["count_per_step"] / 1)
    shares = sum(m["share_of_step_gpu_time"] for m in d["matched"])
    # the forward pass and optimizer: the backward pass is not in the window
    assert 0.3 < shares < 0.8
    tiny = [m for m in d["matched"] if m["trace_duration_median_ns"] < 2_000]
    assert tiny and all(m["bound"] == "launch" for m in tiny)  # shorter than their launch calls


def test_a_launch_count_window_is_found_as_consecutive_launches(runs):
    res = _join(runs, WINDOW.name)
    assert len(res.matched) == 12 and res.unmatched_ncu == []
    assert any("launch-skip" in n for n in res.notes)
    assert [m.position for m in sorted(res.matched, key=lambda m: m.ncu_id)] == list(range(5, 17))
    reasons = {u["reason"].split(" (")[0] for u in res.unmatched_trace}
    assert reasons == {
        "launched before the first profiled launch",
        "launched after the last profiled launch",
    }


def test_join_cli_json_and_table(runs, capsys):
    from dashboard.cli import main

    s, r = runs
    capsys.readouterr()
    assert (
        main(
            [
                "join",
                r[NVTX.name].run_id,
                r[TRACE.name].run_id,
                "--format",
                "json",
                "--store",
                str(s.root),
            ]
        )
        == 0
    )
    d = json.loads(capsys.readouterr().out)
    assert len(d["matched"]) == 12 and all(REPORT_KEYS <= set(m) for m in d["matched"])
    # files, parsed in memory
    assert main(["join", str(NVTX), str(TRACE), "--store", str(s.root)]) == 0
    out = capsys.readouterr().out
    assert "ProfilerStep#6" in out and "another host thread" in out and "lost per step" in out
    assert main(["join", r[TRACE.name].run_id, r[NVTX.name].run_id, "--store", str(s.root)]) == 1
    assert "not an Nsight Compute run" in capsys.readouterr().err


def test_what_does_not_match_says_why(runs):
    """A renamed kernel and a changed launch configuration: both listed with their reason, the rest matched."""
    from analyzers.join import join

    s, r = runs
    src = Source(s)
    k = src.ncu(r[NVTX.name]).kernels
    k = k.with_columns(  # the join reads the file's own name (raw_name; kernel_name is the canonical one)
        *[
            pl.when(pl.col("id") == 0)
            .then(pl.lit("void my_own_kernel<float>(float*)"))
            .otherwise(pl.col(c))
            .alias(c)
            for c in ("kernel_name", "raw_name")
        ],
        pl.when(pl.col("id") == 7).then(pl.lit(999)).otherwise(pl.col("grid_x")).alias("grid_x"),
    )
    res = join(k, src.trace(r[TRACE.name]).gpu_ops, r[TRACE.name].table("nvtx"))
    why = {u["ncu_id"]: u["reason"] for u in res.unmatched_ncu}
    assert why[0] == "no kernel of this name in the trace"
    assert len(res.matched) == 11 and (
        {m.ncu_id: m.confidence for m in res.matched}.get(7) == "medium"
        or why[7].startswith("the trace runs it with another launch configuration")
    )


def test_names_of_one_kernel_from_ncu_and_the_profiler_give_one_signature():
    from analyzers.join import base_name, signature

    ncu = (
        "void "
        "at::native::<unnamed>::multi_tensor_apply_kernel<at::native::<unnamed>::FusedOptimizerTensorListMetadata<(int)4>, at::native::<unnamed>::FusedAdamMathFunctor<c10::BFloat16, (int)4, (at::native::ADAM_MODE)1, (bool)0>, const float *, double, bool>(T1, T2, T3...)"
    )
    kineto = (
        "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous "
        "namespace)::FusedOptimizerTensorListMetadata<4>, at::native::(anonymous "
        "namespace)::FusedAdamMathFunctor<c10::BFloat16, 4, (at::native::ADAM_MODE)1, false>, "
        "float const*, double, bool>(at::native::(anonymous "
        "namespace)::FusedOptimizerTensorListMetadata<4>, float const*, double, bool)"
    )
    assert signature(ncu) == signature(kineto)
    assert base_name(ncu) == base_name(kineto) == "at::native::{anon}::multi_tensor_apply_kernel"
    lam_ncu = (
        "void at::native::vectorized_elementwise_kernel<(int)8, "
        "at::native::GeluCUDAKernelImpl(at::TensorIteratorBase &)"
        "::[lambda() (instance 2)]::operator ()() const, std::array<char *, (unsigned "
        "long)2>>(int, T2, T3)"
    )
    lam_k = (
        "void at::native::vectorized_elementwise_kernel<8, "
        "at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&)::{lambda()#2}::operator()() "
        "const, std::array<char*, 2ul> >(int, at::native::X, std::array<char*, 2ul>)"
    )
    assert signature(lam_ncu) == signature(lam_k)
    assert signature("void f<(int)8>(int)") != signature("void f<(int)4>(int)")


def test_the_ncu_report_carries_its_nvtx_range(runs):
    s, r = runs
    assert set(r[NVTX.name].table("kernels")["nvtx_range"].to_list()) == {"step_6/; whole_step_6"}
    # the backward pass (autograd's thread) is only in the start/end range
    assert set(r[WHOLE.name].table("kernels")["nvtx_range"].to_list()) == {
        "step_6/; whole_step_6",
        "whole_step_6",
    }
    assert r[WINDOW.name].table("kernels")["nvtx_range"].null_count() == 12


def test_kernel_bounds_by_configuration_by_name_and_not_profiled(runs):
    """analyzers.join.kernel_bounds: a kernel with its grid and block gets the bound of the matched
    launches of that configuration; a merged timeline mark (no grid) the most common bound of its
    name; the rest "not profiled"."""
    from analyzers.join import bounds_by_signature, kernel_bounds, name_overlap

    s, r = runs
    res = _join(runs, NVTX.name)
    g = s.get(r[TRACE.name].run_id).table("gpu_ops").filter(pl.col("kind") == "kernel")
    gemm = g.filter(pl.col("name").str.contains("bias_TNT")).unique(["grid_y"]).sort("grid_y")
    assert gemm["grid_y"].to_list() == [64, 66]
    assert kernel_bounds(res, gemm) == ["tensor", "latency"]
    # the same name as a merged mark: the most common of its three profiled launches (two latency,
    # one tensor)
    merged = gemm.head(1).with_columns(
        [pl.lit(None).alias(f"{w}_{a}") for w in ("grid", "block") for a in "xyz"]
    )
    assert kernel_bounds(res, merged) == ["latency"]
    row = next(b for b in bounds_by_signature(res) if "bias_TNT" in b["signature"])
    assert row["bound"] == "varies" and row["mode"] == "latency" and row["ncu_id"] == 1
    # another configuration of a profiled kernel, and a kernel ncu never saw: not profiled
    other = gemm.head(1).with_columns(pl.lit(7).cast(gemm["grid_y"].dtype).alias("grid_y"))
    back = g.filter(pl.col("name").str.contains("(?i)backward")).head(2)
    assert kernel_bounds(res, pl.concat([other, back])) == ["not profiled"] * 3
    assert kernel_bounds(None, back) == ["not profiled"] * 2
    # the cheap pre-check: every ncu kernel of the step runs in the trace; none of an unrelated
    # report does
    ncu = s.get(r[NVTX.name].run_id).table("kernels")
    assert name_overlap(ncu, g) == 1.0
    from collectors.store import Store
    from tests.conftest import H200_KERNELS

    other_run = Source(Store(s.root)).ingest_path(H200_KERNELS / "basic.ncu-rep.gz")[0]
    assert name_overlap(other_run.table("kernels"), g) == 0.0
