"""The bench harness's pure logic: statistics, noise and throttle flags, records, byte/FLOP
accounting, launch counting on recorded traces, the ncu counter maths on recorded H200 counters."""

from __future__ import annotations

import gzip
import json
import math
import sys
import types

import pytest

from collectors.bench import harness
from collectors.bench.cases import select_cases
from collectors.bench.cases_operator import BANK_STRIDES, colread_reference
from collectors.bench.context import device_attributes
from collectors.bench.ncu_rerun import counter_records, pair_actions, parse_raw_csv
from tests.conftest import H200_KERNELS, H200_TORCH, SAMPLES
from tests.support.bench_fakes import _FAKE_NCU, _fake_ncu  # noqa: F401

MIB = 1 << 20


# ---- statistics -------------------------------------------------------------------------------


def test_summarize_median_cv():
    s = harness.summarize([1.0, 2.0, 3.0, 4.0])
    assert s.median == 2.5 and s.mean == 2.5 and s.n == 4 and (s.min, s.max) == (1.0, 4.0)
    assert s.std == pytest.approx(math.sqrt(1.25))
    assert s.cv == pytest.approx(math.sqrt(1.25) / 2.5)


def test_summarize_single_and_bad():
    assert harness.summarize([5e-3]).cv is None
    with pytest.raises(ValueError):
        harness.summarize([])
    with pytest.raises(ValueError):
        harness.summarize([1.0, float("nan")])


@pytest.mark.parametrize(
    "dur,cv,noisy",
    [
        (60e-6, 0.03, True),  # long and spread: noisy
        (1e-3, 0.019, False),  # under 2 %
        (40e-6, 0.5, False),  # too short to judge by the 2 % bar
        (1e-3, None, False),  # one repetition
    ],
)
def test_is_noisy(dur, cv, noisy):
    assert harness.is_noisy(dur, cv) is noisy


# ---- records ----------------------------------------------------------------------------------


def _rec(**kw):
    base = dict(
        case="transpose.tile",
        metric="time",
        value=2.0e-4,
        unit="s",
        params={"tile": 32},
        source="event timing",
        cv=0.01,
        n=50,
    )
    base.update(kw)
    return harness.make_record(
        base.pop("case"),
        base.pop("metric"),
        base.pop("value"),
        base.pop("unit"),
        base.pop("params"),
        **base,
    )


def test_make_record_fields():
    r = _rec(flags=["noisy", "noisy"])
    assert set(r) == set(harness.RECORD_KEYS)
    assert r["flags"] == ["noisy"] and r["notes"] is None


@pytest.mark.parametrize(
    "bad,match",
    [
        (dict(unit="ms"), "unit"),
        (dict(value=float("nan")), "finite"),
        (dict(value=True), "finite"),
        (dict(source="stopwatch"), "source"),
        (dict(cv=-0.1), "cv"),
        (dict(n=0), "n must"),
        (dict(params={"x": {1, 2}}), "JSON"),
        (dict(case=""), "case"),
    ],
)
def test_make_record_rejects(bad, match):
    with pytest.raises(ValueError, match=match):
        _rec(**bad)


def test_validate_record_missing_key():
    r = _rec()
    del r["unit"]
    with pytest.raises(ValueError, match="lacks unit"):
        harness.validate_record(r)


def test_timing_records_derive_rates_and_flag_noise():
    s = harness.Stats(median=2e-3, mean=2e-3, std=1e-4, cv=0.05, n=20, min=1.9e-3, max=2.2e-3)
    recs = harness.timing_records(
        "littles_law",
        {"kernel": "ks_copy_u4"},
        s,
        source="event timing",
        bytes_moved=4e9,
        flop=1e12,
        prefix="copy_",
    )
    by = {r["metric"]: r for r in recs}
    assert by["copy_time"]["value"] == 2e-3
    assert (
        by["copy_bandwidth"]["value"] == pytest.approx(2e12)
        and by["copy_bandwidth"]["unit"] == "B/s"
    )
    assert by["copy_flop_rate"]["value"] == pytest.approx(5e14)
    assert (
        by["copy_bandwidth"]["params"]
        == by["copy_time"]["params"]
        == {"kernel": "ks_copy_u4", "bytes": 4e9, "flop": 1e12}
    )
    assert all(r["flags"] == ["noisy"] and r["cv"] == 0.05 and r["n"] == 20 for r in recs)


def test_best_record():
    recs = [_rec(metric="bandwidth", unit="B/s", value=v) for v in (1e12, 3e12, 2e12)]
    assert harness.best_record(recs, "bandwidth")["value"] == 3e12
    assert harness.best_record(recs, "bandwidth", higher_is_better=False)["value"] == 1e12
    assert harness.best_record(recs, "time") is None


# ---- byte / FLOP accounting (the chapter's numbers) ------------------------------------------


def test_accounting_matches_chapter():
    assert harness.copy_bytes(2 << 30) == 4 << 30
    assert harness.matmul_flop(8192, 8192, 8192) == 2 * 8192**3
    assert harness.transpose_bytes(8192) == 512 * MIB
    # Example 5-4: 120 MiB unfused vs 72 MiB fused at M = 1024, F = 12288, BF16
    assert harness.silu_mul_bytes(1024, 12288, 2, fused=False) == 120 * MIB
    assert harness.silu_mul_bytes(1024, 12288, 2, fused=True) == 72 * MIB
    # Example 5-6: Q, K, V, O of one head at L = 8192, d = 128 = 8 MiB
    assert harness.attention_min_bytes(8192, 128) == 8 * MIB
    # Example 5-3: the tile model's read traffic, 3072 MiB (64x64) and 1536 MiB (128x128)
    assert harness.tile_read_model_bytes(1024, 4096, 12288, 64, 64) == 3072 * MIB
    assert harness.tile_read_model_bytes(1024, 4096, 12288, 128, 128) == 1536 * MIB
    assert harness.rmsnorm_bytes(1, 4096, 1) == 3 * 4096 * 2
    assert harness.rmsnorm_bytes(2, 4096, 4) == 7 * 4096 * 2 + 4 * 2 * 4 * 5


# ---- naming -----------------------------------------------------------------------------------


def test_result_file_name():
    assert harness.gpu_slug("NVIDIA H200") == "nvidia-h200"
    assert harness.gpu_slug("NVIDIA A100-SXM4-80GB") == "nvidia-a100-sxm4-80gb"
    assert harness.uuid8("GPU-2ab1ed74-3a4e-0e1f-9b63-cb9a3a59abcd") == "2ab1ed74"
    assert harness.uuid8(None) == "00000000"
    assert (
        harness.result_file_name("NVIDIA H200", "GPU-2ab1ed74-3a4e")
        == "bench_nvidia-h200_2ab1ed74.json"
    )


# ---- NVML summaries -----------------------------------------------------------------------------


def _s(clk, reasons, t=0.0):
    return harness.NvmlSample(t, clk, 650.0, 60.0, reasons)


def test_nvml_throttle_detected_from_reason_bits():
    out = harness.summarize_nvml([_s(1980, 0), _s(1755, 0x4), _s(1980, 0x1)], max_sm_clock_mhz=1980)
    assert out["throttled"] is True
    assert out["throttle_reasons"] == ["sw_power_cap"]
    assert out["throttled_fraction"] == pytest.approx(1 / 3)
    assert out["sm_clock_mhz"] == {"min": 1755, "median": 1980, "max": 1980}
    assert out["clock_below_max"] is False


def test_nvml_idle_is_not_throttling_but_low_clock_is_reported():
    out = harness.summarize_nvml([_s(345, 0x1), _s(400, 0x1)], max_sm_clock_mhz=1980)
    assert out["throttled"] is False and out["throttle_reasons"] == []
    assert out["clock_below_max"] is True
    assert harness.throttle_names(0x8 | 0x40) == ["hw_slowdown", "hw_thermal_slowdown"]


def test_nvml_sampler_without_handle():
    with harness.NvmlSampler(None) as s:
        pass
    assert s.summary() is None


def test_time_host_divides_per_call():
    calls = []
    t = harness.time_host(lambda: calls.append(1), reps=5, warmup=1, per_call=10)
    assert len(calls) == 6 and t.stats.n == 5 and t.source == "host clock"


class _FakeCuda:
    """Just enough of torch.cuda for time_gpu's logic: a device clock that fn() advances by the next
    duration in `durations` (the last one repeats), events that read it, a recorded spin kernel."""

    def __init__(self, durations):
        self.now, self.durations, self.spins, self.calls, self.log = 0.0, list(durations), [], 0, []
        cuda = self

        class Event:
            def __init__(self, enable_timing=True):
                self.t = None

            def record(self):
                self.t = cuda.now
                cuda.log.append("event")

            def synchronize(self):
                pass

            def elapsed_time(self, other):
                return (other.t - self.t) * 1e3

        self.Event = Event

    def fn(self):
        d = self.durations[min(self.calls, len(self.durations) - 1)]
        self.calls += 1
        self.now += d
        self.log.append("fn")

    def flush(self):
        self.now += 50e-6
        self.log.append("flush")

    def synchronize(self):
        pass

    def _sleep(self, cycles):
        self.spins.append(cycles)
        self.now += cycles / 2e9  # the spin kernel takes device time too
        self.log.append("spin")

    def current_device(self):
        return 0

    def get_device_properties(self, i):
        return types.SimpleNamespace(clock_rate=2_000_000)


def _fake_torch(monkeypatch, durations):
    cuda = _FakeCuda(durations)
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))
    return cuda


def test_time_gpu_batches_holds_and_divides(monkeypatch):
    cuda = _fake_torch(monkeypatch, [100e-6])
    t = harness.time_gpu(
        cuda.fn, warmup=1, target_s=0.01, min_reps=5, max_reps=5, batch=4, allow_graph=False
    )
    assert t.stats.n == 5 and t.batch == 4 and t.median == pytest.approx(100e-6)
    # warm-up, estimate, 5 repetitions of 4 calls
    assert cuda.calls == 1 + 3 + 5 * 4
    assert t.held and len(cuda.spins) == 5 and all(c == cuda.spins[0] > 0 for c in cuda.spins)
    assert (
        "4 calls per event pair" in t.note()
        and "stream held" in t.note()
        and "L2 not flushed" in t.note()
    )
    assert t.attempts and len(t.attempts) == 1 and "re-measured" not in t.note()
    # each repetition: spin, start event, 4 calls, end event (the spin is outside the timed
    # interval)
    assert cuda.log[-7:] == ["spin", "event", "fn", "fn", "fn", "fn", "event"]


def test_time_gpu_flushes_then_holds_then_times(monkeypatch):
    cuda = _fake_torch(monkeypatch, [80e-6])
    t = harness.time_gpu(
        cuda.fn, flush=cuda.flush, warmup=0, min_reps=3, max_reps=3, allow_graph=False
    )
    assert (
        cuda.log[-5:] == ["flush", "spin", "event", "fn", "event"] and cuda.log.count("flush") == 3
    )
    assert (
        t.median == pytest.approx(80e-6)
        and t.flushed
        and "L2 flushed before each repetition" in t.note()
    )


def test_time_gpu_does_not_hold_a_sync_each_measurement(monkeypatch):
    cuda = _fake_torch(monkeypatch, [100e-6])
    t = harness.time_gpu(
        cuda.fn, warmup=0, min_reps=3, max_reps=3, sync_each=True, allow_graph=False
    )
    assert not t.held and cuda.spins == [] and "stream held" not in t.note()


def test_time_gpu_remeasures_a_disturbed_attempt_and_says_so(monkeypatch):
    # warm-up 1 + estimate 3, then attempt 1 = 10 calls of which one is 90 us slower: cv > 2 %
    durs = [200e-6] * 4 + [200e-6] * 9 + [290e-6] + [200e-6] * 10
    cuda = _fake_torch(monkeypatch, durs)
    t = harness.time_gpu(cuda.fn, warmup=1, min_reps=10, max_reps=10, allow_graph=False)
    assert (
        len(t.attempts) == 2
        and t.attempts[0][1] > harness.NOISY_CV
        and t.attempts[1][1] == pytest.approx(0, abs=1e-9)
    )
    assert t.stats.cv == pytest.approx(0, abs=1e-9) and "2 attempts" in t.note()
    # a measurement that stays noisy keeps the quietest attempt and stops after `attempts`
    cuda = _fake_torch(monkeypatch, [200e-6, 260e-6] * 100)
    t = harness.time_gpu(cuda.fn, warmup=0, min_reps=10, max_reps=10, allow_graph=False, attempts=3)
    assert (
        len(t.attempts) == 3
        and t.stats.cv == min(c for _, c in t.attempts)
        and harness.is_noisy(t.median, t.stats.cv)
    )


def test_time_host_remeasures_a_disturbed_attempt(monkeypatch):
    # 2nd sample 3x longer
    clock = iter([0.0, 100e-6, 100e-6, 400e-6] + [i * 100e-6 for i in range(4, 40)])
    monkeypatch.setattr(harness.time, "perf_counter", lambda: next(clock))
    t = harness.time_host(lambda: None, reps=3, warmup=0)
    assert (
        len(t.attempts) == 2
        and t.attempts[0][1] > harness.NOISY_CV
        and t.stats.cv == pytest.approx(0, abs=1e-9)
    )
    assert "re-measured after a disturbed attempt: 2 attempts" in t.attempts_note()


def test_tma_copy_args_refuses_shapes_the_kernel_cannot_run():
    from collectors.bench.ceilings import TMA_COPY_CONFIGS, tma_copy_args

    assert tma_copy_args(4 << 30, 4096, 8) == ((4 << 30) // 4096, 64 + 8 * 4096)
    for chunk, stages, _ in TMA_COPY_CONFIGS:
        tma_copy_args(4 << 30, chunk, stages)
    with pytest.raises(ValueError, match="2..8 stages"):
        tma_copy_args(4 << 30, 4096, 1)  # one stage would wait forever
    with pytest.raises(ValueError, match="not a multiple"):
        tma_copy_args(4 << 30, 48 * 1024, 4)  # the tail would stay uncopied
    with pytest.raises(ValueError, match="multiple of 16"):
        tma_copy_args(4 << 30, 1000, 4)


def test_hold_seconds_covers_the_enqueue_and_is_bounded():
    assert harness.hold_seconds(0) == pytest.approx(20e-6)
    assert harness.hold_seconds(30e-6) == pytest.approx(110e-6)
    assert harness.hold_seconds(1.0) == harness.HOLD_MAX_S


# ---- launch counting on recorded PyTorch traces
# ---------------------------------------------------


def _events(name):
    with gzip.open(H200_TORCH / name, "rt") as f:
        return json.load(f)["traceEvents"]


def test_count_launches_eager_ffn():
    # 20 FFN calls at M = 1, six kernels and six launch calls each
    assert harness.count_launches(_events("ffn_M1_eager.json.gz")) == {
        "kernels": 120,
        "kernel_launches": 120,
        "graph_launches": 0,
    }


def test_count_launches_graph_ffn():
    # 10 replays of a graph of 3 FFN calls: 18 kernels per replay, one graph launch each
    assert harness.count_launches(_events("ffn_M1_graph.json.gz")) == {
        "kernels": 180,
        "kernel_launches": 0,
        "graph_launches": 10,
    }


# ---- bank-conflict kernel reference and the ncu counter maths -----------------------------------


def test_colread_reference_matches_sample_program():
    # ks_samples.cu: lane 0 at stride 32 or 33, 1024 iterations, reads word (it & 7): sum = 128 * 28
    assert colread_reference(4, 32, 1024)[0] == 3584
    assert colread_reference(4, 33, 1024)[0] == 3584


def test_colread_reference_brute_force():
    for width, stride, iters in ((4, 7, 24), (8, 34, 13), (16, 36, 20)):
        vw = width // 4
        ref = colread_reference(width, stride, iters)
        for lane in (0, 5, 31):
            want = sum(
                ((lane * stride + (it & 7) * vw + j) & 1023)
                for it in range(iters)
                for j in range(vw)
            )
            assert ref[lane] == want


def test_bank_strides_are_aligned_and_cover_padding():
    for width, (full, quick, ncu) in BANK_STRIDES.items():
        for s in full + quick + ncu:
            assert s % (width // 4) == 0 and 1 <= s <= 64
        assert {32, 32 + width // 4} <= set(full) & set(quick) & set(ncu)


def _derived(case: str, kernel: str, params: dict, values: dict) -> dict:
    """The records of one profiled kernel read as a stored run is read (analyzers.cases.bench_verdicts.attach)."""
    import polars as pl

    from analyzers.cases.bench_verdicts import attach
    from collectors.bench.results import _rows
    from collectors.schema import BENCH_SCHEMA

    recs = counter_records(case, {"kernel": kernel, "params": params}, values)
    res = attach(pl.DataFrame(_rows(recs, "test", "results"), schema=BENCH_SCHEMA), None)
    return {r["metric"]: r["value"] for r in res.iter_rows(named=True)}


def test_degree_from_recorded_h200_counters():
    # ks_colread4 at stride 32 and 33 on the project's H200 (sample_traces/h200/chapter5_kernels):
    # only the counters are recorded; the degree is derived when the run is read
    s32 = _derived(
        "bank.column_read",
        "ks_colread4",
        {"stride_words": 32},
        {
            "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum": 276824064.0,
            "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum": 268173312.0,
            "smsp__sass_inst_executed_op_shared_ld.sum": 8650752.0,
            "gpu__time_duration.sum": 1e6,
        },
    )
    assert s32["bank_conflict_degree"] == pytest.approx(32.0)
    assert s32["shared_wavefronts_per_request"] == pytest.approx(32.0)
    s33 = _derived(
        "bank.column_read",
        "ks_colread4",
        {"stride_words": 33},
        {
            "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum": 8650752.0,
            "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum": 0.0,
            "smsp__sass_inst_executed_op_shared_ld.sum": 8650752.0,
            "gpu__time_duration.sum": 1e6,
        },
    )
    assert s33["bank_conflict_degree"] == 1.0
    assert "bank_conflict_degree" not in _derived(
        "bank.column_read", "ks_colread4", {}, {"gpu__time_duration.sum": 1e6}
    )


def _sample_rows():
    with gzip.open(H200_KERNELS / "full_raw_base.csv.gz", "rt") as f:
        return parse_raw_csv(f.read())


def test_parse_raw_csv_on_recorded_report():
    rows = _sample_rows()
    names = [n for n, _ in rows]
    assert (
        names[0] == "ks_copy_u4"
        and names.count("ks_colread4") == 2
        and names[-1] == "ks_matmul_128x128"
    )
    mm64 = dict(rows)["ks_matmul_64x64"]
    assert mm64["lts__t_sectors_srcunit_tex_op_read.sum"] == 91894368.0
    assert mm64["gpu__time_duration.sum"] == 3373120.0
    assert mm64["sm__maximum_warps_per_active_cycle_pct"] == 75.0


def test_counter_records_tiling_l2_reads_within_10pct_of_tile_model():
    vals = dict(_sample_rows())["ks_matmul_64x64"]
    entry = {"kernel": "ks_matmul_64x64", "params": {"tile_m": 64, "tile_n": 64}, "notes": None}
    by = {r["metric"]: r for r in counter_records("tiling.traffic", entry, vals)}
    l2 = by["l2_read_from_l1_bytes"]
    assert l2["value"] == 91894368 * 32 and l2["unit"] == "B" and l2["source"] == "ncu counter"
    model = harness.tile_read_model_bytes(1024, 4096, 12288, 64, 64)
    assert abs(l2["value"] / model - 1) < 0.10
    assert by["kernel_duration"]["value"] == pytest.approx(3.37312e-3)
    assert by["theoretical_occupancy"]["value"] == 75.0
    assert "SM clock" in by["kernel_duration"]["notes"]
    # derived on read, not recorded
    assert "dram_bandwidth" not in by and "bank_conflict_degree" not in by


def test_pair_actions_stops_at_mismatch():
    actions = [("ks_colread4", {}), ("ks_colread8", {}), ("ks_colread4", {})]
    entries = [{"kernel": "ks_colread4"}, {"kernel": "ks_colread4"}, {"kernel": "ks_colread4"}]
    pairs, problems = pair_actions(actions, entries)
    assert len(pairs) == 1 and "ks_colread8" in problems[0]
    pairs, problems = pair_actions(actions[:1], entries)
    assert len(pairs) == 1 and "1 profiled kernels but 3" in problems[0]


def test_read_report_with_ncu_report_module():
    pytest.importorskip("ncu_report")
    import shutil
    import tempfile
    from pathlib import Path

    from collectors.bench.ncu_rerun import read_report

    with tempfile.TemporaryDirectory() as tmp:
        rep = Path(tmp) / "full.ncu-rep"
        with gzip.open(H200_KERNELS / "full.ncu-rep.gz", "rb") as f, open(rep, "wb") as g:
            shutil.copyfileobj(f, g)
        actions, how = read_report(rep, "ncu")
    assert how == "ncu_report"
    assert [n for n, _ in actions] == [n for n, _ in _sample_rows()]
    assert dict(actions)["ks_matmul_128x128"]["lts__t_sectors_srcunit_tex_op_read.sum"] == 42586602


# ---- device attributes -> spec -> occupancy, as the cases compute it
# -------------------------------


def test_occupancy_from_device_properties_matches_ncu():
    from analyzers.gpus import resolve_gpu
    from analyzers.occupancy import occupancy

    env = json.loads((SAMPLES / "h200" / "device_env.json").read_text())
    attrs = device_attributes(env["cupy_props"])
    assert (
        attrs["display_name"] == "NVIDIA H200" and attrs["reserved_shared_memory_per_block"] == 1024
    )
    spec = resolve_gpu(attrs["display_name"], attrs)
    # ncu on the H200: ks_matmul_64x64 (40 regs, 16 KiB) 75 %, ks_matmul_128x128 (100 regs, 32 KiB)
    # 25 %
    assert occupancy(spec, 256, 40, 16384, 0).occupancy_pct == 75.0
    assert occupancy(spec, 256, 100, 32768, 0).occupancy_pct == 25.0


def test_select_cases():
    assert select_cases("ceiling")[:2] == ["ceiling.dram_copy", "ceiling.l2_read"]
    assert select_cases("bank.column_read,littles_law") == ["littles_law", "bank.column_read"]
    assert select_cases(None)[0] == "ceiling.dram_copy"
    with pytest.raises(ValueError, match="unknown case"):
        select_cases("no.such.case")


# ---- the runner's robustness: failures, time limits, partial results (a fake context, no GPU)
# ----------


class _FakeCtx:
    """Just enough of cases.Context for run.run_case / run._run_cases."""

    def __init__(self):
        import types

        self.synced = 0
        self.torch = types.SimpleNamespace(
            cuda=types.SimpleNamespace(synchronize=self.sync, empty_cache=lambda: None)
        )
        self.begin_case("")

    def begin_case(self, case_id):
        from collectors.bench.context import Context

        Context.begin_case(self, case_id)

    def emit(self, recs):
        self.records.extend([recs] if isinstance(recs, dict) else recs)

    def part(self, label):
        from collectors.bench.context import Context

        self.log = lambda m: None
        return Context.part(self, label)

    def sync(self):
        self.synced += 1


def _doc():
    return {"ceilings": [], "results": [], "failures": [], "cases": {}}


def test_run_case_keeps_records_of_a_failing_case():
    from collectors.bench.run import run_case

    ctx, doc = _FakeCtx(), _doc()

    def case(c):
        c.emit(
            harness.make_record(
                "ceiling", "dram_copy_bandwidth", 4.4e12, "B/s", {}, source="event timing"
            )
        )
        with c.part("variant A"):
            raise harness.CheckFailed("variant A: relative error 0.5 > 0.01")
        c.emit(
            harness.make_record("littles_law", "bandwidth", 1e12, "B/s", {}, source="event timing")
        )
        raise RuntimeError("boom")

    status = run_case(ctx, "littles_law", case, 10, doc, None, None)
    assert status.startswith("partial: RuntimeError: boom")
    assert [r["metric"] for r in doc["ceilings"]] == ["dram_copy_bandwidth"]
    assert [r["metric"] for r in doc["results"]] == ["bandwidth"]
    errs = [f["error"] for f in doc["failures"]]
    assert errs[0].startswith("variant A: CheckFailed") and errs[1].startswith("RuntimeError: boom")
    assert (
        doc["cases"]["littles_law"]["status"] == "partial"
        and doc["cases"]["littles_law"]["records"] == 2
    )


def test_run_case_time_limit_keeps_what_was_measured():
    import time as _t

    from collectors.bench.run import run_case

    ctx, doc = _FakeCtx(), _doc()

    def slow(c):
        c.emit(
            harness.make_record(
                "bank.column_read", "time", 1e-3, "s", {"stride_words": 1}, source="event timing"
            )
        )
        with c.part("stride 2"):  # the time limit is not swallowed by a part
            _t.sleep(5)
        c.emit(
            harness.make_record(
                "bank.column_read", "time", 1e-3, "s", {"stride_words": 2}, source="event timing"
            )
        )

    t0 = _t.monotonic()
    status = run_case(ctx, "bank.column_read", slow, 0.3, doc, None, None)
    assert _t.monotonic() - t0 < 3
    assert "timed out after 0 s" in status
    assert len(doc["results"]) == 1 and doc["failures"][0]["case"] == "bank.column_read"


def test_run_cases_skips_after_budget(monkeypatch):
    import time as _t

    from collectors.bench import cases
    from collectors.bench import run

    calls = []
    monkeypatch.setattr(
        cases,
        "CASES",
        {"a": (lambda c: calls.append("a"), 5, 5), "b": (lambda c: calls.append("b"), 5, 5)},
    )
    ctx, doc = _FakeCtx(), _doc()
    saves = []
    dead = run._run_cases(
        ctx,
        ["a", "b"],
        doc,
        lambda: saves.append(1),
        lambda m: None,
        _t.monotonic() - 100,
        50,
        False,
        None,
        None,
    )
    assert dead is None and calls == [] and len(doc["failures"]) == 2
    assert "budget" in doc["failures"][0]["error"]
    dead = run._run_cases(
        ctx,
        ["a", "b"],
        doc,
        lambda: saves.append(1),
        lambda m: None,
        _t.monotonic(),
        50,
        False,
        None,
        None,
    )
    assert calls == ["a", "b"] and len(saves) == 2


# ---- the --ncu stage end to end, with a stand-in for ncu that returns the recorded H200 report
# ----------


def test_ncu_stage_attaches_counters(tmp_path, monkeypatch):
    pytest.importorskip("ncu_report")
    import time as _t

    from collectors.bench import ncu_rerun

    monkeypatch.setattr(ncu_rerun, "find_ncu", lambda: _fake_ncu(tmp_path))
    doc = {"results": [], "failures": []}
    ncu_rerun.run_stage(
        doc,
        ["transpose.tile", "bank.column_read"],
        device=0,
        quick=True,
        out_dir=tmp_path,
        file_stem="bench_x",
        deadline=_t.monotonic() + 120,
        save=lambda: None,
        log=lambda m: None,
    )
    assert doc["failures"] == []
    assert doc["ncu"]["status"] == "ok" and doc["ncu"]["version"] == "Version 2025.3.1.0 (fake)"
    assert [r["file"] for r in doc["ncu"]["reports"]] == [
        "bench_x_bank-column_read.ncu-rep",
        "bench_x_transpose-tile.ncu-rep",
    ]
    import polars as pl

    from analyzers.cases.bench_verdicts import attach
    from collectors.bench.results import _rows
    from collectors.schema import BENCH_SCHEMA

    res = attach(pl.DataFrame(_rows(doc["results"], "t", "results"), schema=BENCH_SCHEMA), None)
    deg = [
        r
        for r in res.iter_rows(named=True)
        if r["case"] == "bank.column_read" and r["metric"] == "bank_conflict_degree"
    ]
    assert [
        round(r["value"], 3) for r in deg if json.loads(r["params"])["kernel"] == "ks_colread4"
    ] == [32.0, 1.0]
    tr = {
        r["params"]["kernel"]: r["value"]
        for r in doc["results"]
        if r["case"] == "transpose.tile" and r["metric"] == "dram_read_bytes"
    }
    assert tr["ks_transpose32"] == 268446720
    assert (tmp_path / "ncu" / "bench_x_transpose-tile.log").read_text().startswith("==PROF==")


def test_ncu_stage_counters_forbidden(tmp_path, monkeypatch):
    import time as _t

    from collectors.bench import ncu_rerun

    monkeypatch.setattr(ncu_rerun, "find_ncu", lambda: _fake_ncu(tmp_path))
    monkeypatch.setenv("FAKE_NCU_PERM", "1")
    doc = {"results": [], "failures": []}
    ncu_rerun.run_stage(
        doc,
        ["transpose.tile", "bank.column_read"],
        device=0,
        quick=True,
        out_dir=tmp_path,
        file_stem="bench_x",
        deadline=_t.monotonic() + 120,
        save=lambda: None,
        log=lambda m: None,
    )
    assert doc["results"] == []
    assert len(doc["failures"]) == 1 and doc["failures"][0]["error"].startswith("ERR_NVGPUCTRPERM")
    assert doc["ncu"]["status"].startswith("counters forbidden")


def test_ncu_stage_without_ncu(tmp_path, monkeypatch):
    from collectors.bench import ncu_rerun

    monkeypatch.setattr(ncu_rerun, "find_ncu", lambda: None)
    doc = {"results": [], "failures": []}
    ncu_rerun.run_stage(
        doc,
        ["transpose.tile"],
        device=0,
        quick=True,
        out_dir=tmp_path,
        file_stem="b",
        deadline=0,
        save=lambda: None,
    )
    assert doc["ncu"]["status"] == "ncu not found" and "not found" in doc["failures"][0]["error"]
