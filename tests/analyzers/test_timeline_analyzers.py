"""Timeline analyzers on hand-made timelines (exact answers) and on the H200 samples (fixed numbers)."""

from __future__ import annotations

import json

import polars as pl
import pytest

from analyzers import timeline
from analyzers import whatif
from collectors.ingest import parse_bytes
from collectors.schema import API_CALLS_SCHEMA
from tests.conftest import H200_TORCH, SHARED_NSYS
from tests.support.frames import ops  # noqa: F401
from dashboard.core.source import Source


def api(rows) -> pl.DataFrame:
    out = []
    for name, s, e, blocking in rows:
        out.append(
            {
                "rank": 0,
                "pid": 1,
                "tid": 1,
                "name": name,
                "kind": "sync" if blocking else "launch",
                "blocking": blocking,
                "start_ns": s,
                "end_ns": e,
                "duration_ns": e - s,
                "correlation": None,
                "external_id": None,
            }
        )
    return pl.DataFrame(out, schema=API_CALLS_SCHEMA)


def sample(name):
    p = H200_TORCH / f"{name}.json.gz"
    return parse_bytes(p.read_bytes(), p.name)


# ----------------------------------------------------------------------------------------------
# busy, gaps
def test_busy_time_is_a_union_not_a_sum():
    g = ops(
        [
            {"start_ns": 0, "end_ns": 10},
            {"start_ns": 5, "end_ns": 15, "stream": 9},
            {"start_ns": 20, "end_ns": 30},
            {"start_ns": 22, "end_ns": 24, "stream": 9, "kind": "memcpy"},
        ]
    )
    u = timeline.utilization(g).row(0, named=True)
    assert (u["busy_ns"], u["window_ns"], u["idle_ns"]) == (25, 30, 5)
    assert u["idle_fraction"] == pytest.approx(5 / 30)
    assert timeline.gaps(g).select("start_ns", "end_ns", "gap_ns").rows() == [(15, 20, 5)]
    per_stream = timeline.utilization(g, timeline.STREAM)
    assert per_stream["busy_ns"].to_list() == [20, 12]
    tb = timeline.temporal_breakdown(g).row(0, named=True)
    # the copy hides under a kernel
    assert (tb["compute_ns"], tb["memcpy_ns"], tb["idle_ns"]) == (25, 0, 5)


def test_temporal_breakdown_priorities():
    g = ops(
        [
            {"start_ns": 0, "end_ns": 10, "name": "gemm"},
            {"start_ns": 5, "end_ns": 20, "name": "ncclDevKernel_AllReduce", "stream": 9},
            {"start_ns": 18, "end_ns": 30, "kind": "memcpy", "name": "Memcpy DtoH", "stream": 11},
            {"start_ns": 40, "end_ns": 50, "name": "gemm"},
        ]
    )
    tb = timeline.temporal_breakdown(g).row(0, named=True)
    assert (
        tb["window_ns"],
        tb["compute_ns"],
        tb["communication_ns"],
        tb["memcpy_ns"],
        tb["idle_ns"],
    ) == (50, 20, 10, 10, 10)


def test_idle_categories_follow_hta():
    g = ops(
        [
            {"start_ns": 0, "end_ns": 10, "api_start_ns": -5, "api_end_ns": -1},
            # call after drain: host wait
            {"start_ns": 12, "end_ns": 20, "api_start_ns": 11, "api_end_ns": 11},
            # 5 ns < 30 µs: kernel wait
            {"start_ns": 25, "end_ns": 30, "api_start_ns": 0, "api_end_ns": 1},
            # 100 µs: other
            {"start_ns": 100_030, "end_ns": 100_040, "api_start_ns": 2, "api_end_ns": 3},
            # no launch call, short gap
            {"start_ns": 100_050, "end_ns": 100_060},
        ]
    )
    sg = timeline.stream_gaps(g)
    assert sg.select("gap_ns", "category").rows() == [
        (2, "host_wait"),
        (5, "kernel_wait"),
        (100_000, "other"),
        (10, "kernel_wait"),
    ]
    ic = {
        r["category"]: (r["idle_ns"], r["gap_count"])
        for r in timeline.idle_categories(g).iter_rows(named=True)
    }
    assert ic == {"host_wait": (2, 1), "kernel_wait": (15, 2), "other": (100_000, 1)}
    # the threshold is a parameter in ns (HTA's 30 is µs)
    ic2 = timeline.idle_categories(g, kernel_wait_threshold_ns=4)
    assert dict(ic2.select("category", "idle_ns").rows())["other"] == 100_015


def test_launch_stats_and_outliers():
    g = ops(
        [
            {"start_ns": 10, "end_ns": 12, "api_start_ns": 0, "api_end_ns": 5},  # delay 5
            # delay ~300 µs
            {"start_ns": 300_000, "end_ns": 300_010, "api_start_ns": 6, "api_end_ns": 9},
            {
                "start_ns": 300_011,
                "end_ns": 300_100,
                "api_start_ns": 300_000,
                "api_end_ns": 300_050,
            },  # starts early
            {"start_ns": 400_000, "end_ns": 400_001},
        ]
    )  # no launch call
    s = timeline.launch_stats(g).row(0, named=True)
    assert (
        s["op_count"],
        s["with_launch"],
        s["queue_count"],
        s["delay_outliers"],
        s["short_ops"],
    ) == (4, 3, 2, 1, 1)
    assert (s["launch_delay_median_ns"], s["launch_delay_max_ns"]) == (5, 299_991)
    assert timeline.launch_delay_outliers(g)["launch_delay_ns"].to_list() == [299_991]


# ----------------------------------------------------------------------------------------------
# real samples
@pytest.mark.parametrize(
    "name, busy, window, idle_cat, verdict",
    [
        (
            "ffn_M1024_eager",
            2076915,
            2223415,
            {"host_wait": 94784, "kernel_wait": 51716, "other": 0},
            "not launch-bound",
        ),
        (
            "ffn_M1_eager",
            1696794,
            2237911,
            {"host_wait": 357312, "kernel_wait": 183805, "other": 0},
            "partly launch-bound",
        ),
        (
            "ffn_M1_graph",
            2535610,
            2647031,
            {"host_wait": 0, "kernel_wait": 111421, "other": 0},
            "not launch-bound",
        ),
        (
            "triton_add_x300",
            286975,
            6958278,
            {"host_wait": 6671303, "kernel_wait": 0, "other": 0},
            "launch-bound",
        ),
    ],
)
def test_samples_busy_idle_and_launch_bound(name, busy, window, idle_cat, verdict):
    g = sample(name).tables["gpu_ops"]
    u = timeline.utilization(g).row(0, named=True)
    assert (u["busy_ns"], u["window_ns"]) == (busy, window)
    assert dict(timeline.idle_categories(g).select("category", "idle_ns").rows()) == idle_cat
    # idle = the gaps; per stream (one stream here) the categories add up to it
    assert sum(idle_cat.values()) == window - busy == timeline.gaps(g)["gap_ns"].sum()
    lb = timeline.launch_bound(g, launch_floor_ns=4400).row(0, named=True)
    assert lb["verdict"] == verdict
    assert lb["floor_kernels_per_s"] == pytest.approx(1e9 / 4400)


def test_sample_launch_numbers():
    s = timeline.launch_stats(sample("ffn_M1_eager").tables["gpu_ops"]).row(0, named=True)
    assert (s["with_launch"], s["launch_delay_median_ns"], s["queue_count"], s["short_ops"]) == (
        120,
        5508,
        119,
        61,
    )
    t = timeline.launch_bound(sample("triton_add_x300").tables["gpu_ops"]).row(0, named=True)
    # every Triton kernel is shorter than its launch
    assert (t["short_kernels"], t["kernel_count"]) == (300, 300)


def test_kernel_summary():
    ks = timeline.kernel_summary(sample("ffn_M1024_eager").tables["gpu_ops"])
    top = ks.row(0, named=True)
    assert top["name"].startswith("nvjet_sm90") and (
        top["count"],
        top["total_ns"],
        top["min_ns"],
        top["max_ns"],
    ) == (15, 1915384, 124832, 135168)
    assert top["busy_share"] == pytest.approx(1915384 / 2076915)
    assert ks["count"].sum() == 25


# ----------------------------------------------------------------------------------------------
# what-if
def test_whatif_gpu_bound_synthetic():
    g = ops(
        [
            {"start_ns": 5, "end_ns": 105, "api_start_ns": 0, "api_end_ns": 1, "name": "k1"},
            {"start_ns": 106, "end_ns": 206, "api_start_ns": 1, "api_end_ns": 2, "name": "k2"},
            {"start_ns": 207, "end_ns": 307, "api_start_ns": 2, "api_end_ns": 3, "name": "k3"},
        ]
    )
    a = api([("cudaDeviceSynchronize", 3, 310, True)])
    w = whatif.what_if(g, a, "k2", 2.0)
    assert (w.run_ns, w.predicted_ns, w.amdahl_ns) == (310, 260, 260)


def test_whatif_host_bound_synthetic():
    g = ops(
        [
            {"start_ns": 8, "end_ns": 18, "api_start_ns": 0, "api_end_ns": 5},
            {"start_ns": 108, "end_ns": 118, "api_start_ns": 100, "api_end_ns": 105},
            {"start_ns": 208, "end_ns": 218, "api_start_ns": 200, "api_end_ns": 205},
        ]
    )
    a = api([("cudaDeviceSynchronize", 220, 230, True)])
    w = whatif.what_if(g, a, "^k$", 10.0)
    assert (w.run_ns, w.predicted_ns, w.matched_kernels) == (230, 230, 3)  # the host sets the pace
    # Amdahl still promises 27 ns
    assert w.amdahl_ns == pytest.approx(230 - 27)


@pytest.mark.parametrize(
    "name", ["ffn_M1024_eager", "ffn_M1_eager", "ffn_M1_graph", "triton_add_x300"]
)
def test_whatif_identity_on_samples(name):
    p = sample(name)
    w = whatif.what_if(p.tables["gpu_ops"], p.tables["api_calls"], ".", 1.0)
    assert w.predicted_ns == w.run_ns and w.amdahl_ns == w.run_ns


@pytest.mark.parametrize(
    "name, pattern, run, predicted, amdahl",
    [
        # GPU-bound: the GEMMs are on the critical path, but the host floor keeps it above Amdahl
        ("ffn_M1024_eager", "nvjet", 2302313, 1417468, 1344621),
        # host-bound decode: faster GEMMs do not shorten the run; Amdahl says 1.5 ms
        ("ffn_M1_eager", "nvjet", 2336470, 2336470, 1532633.5),
        # the CUDA graph keeps the GPU fed: the replay agrees with Amdahl
        ("ffn_M1_graph", "nvjet", 5027387, 3831788, 3831788),
        # launch-bound Triton loop: no gain at all
        ("triton_add_x300", "add_kernel", 7503551, 7503551, 7360063.5),
    ],
)
def test_whatif_on_samples(name, pattern, run, predicted, amdahl):
    p = sample(name)
    w = whatif.what_if(p.tables["gpu_ops"], p.tables["api_calls"], pattern, 2.0)
    assert (w.run_ns, round(w.predicted_ns), w.amdahl_ns) == (run, predicted, amdahl)


def test_whatif_rejects_bad_input():
    p = sample("ffn_M1024_eager")
    with pytest.raises(ValueError, match="invalid kernel regex"):
        whatif.what_if(p.tables["gpu_ops"], p.tables["api_calls"], "(", 2.0)
    with pytest.raises(ValueError, match="speedup"):
        whatif.what_if(p.tables["gpu_ops"], p.tables["api_calls"], "nvjet", 0)


@pytest.mark.shared_data
def test_whatif_on_real_nsys_pair():
    for f, pred in (("mfu_2gpu_before.sqlite", 237134647), ("mfu_2gpu_after.sqlite", 240243684)):
        p = parse_bytes((SHARED_NSYS / f).read_bytes(), f)
        g, a = p.tables["gpu_ops"], p.tables["api_calls"]
        assert (
            whatif.what_if(g, a, "flash", 1.0).predicted_ns
            == whatif.what_if(g, a, "flash", 1.0).run_ns
        )
        w = whatif.what_if(g, a, "flash", 2.0)
        assert round(w.predicted_ns) == pred and len(w.ranks) == 2


# ---------------------------------------------------------------------------------------------- CLI
def test_cli_analyze_json(capsys):
    from dashboard.cli import main

    assert main(["analyze", str(H200_TORCH / "ffn_M1_graph.json.gz"), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    s = out["summary"]
    assert (s["kernel_count"], s["kernels_with_launch"], s["gpu_busy_ns"], s["gpu_window_ns"]) == (
        180,
        180,
        2535610,
        2647031,
    )
    assert s["gpu_idle_fraction"] == pytest.approx(1 - 2535610 / 2647031, abs=1e-6)
    k = out["kernels"][0]
    assert {
        "name",
        "device",
        "stream",
        "start_ns",
        "duration_ns",
        "launch_api",
        "launch_delay_us",
    } <= set(k)
    assert k["launch_api"] == "cudaGraphLaunch" and len(out["kernels"]) == 180
    assert out["devices"][0]["kernel_count"] == 180


@pytest.mark.shared_data
def test_cli_analyze_two_devices(capsys):
    from dashboard.cli import main

    assert main(["analyze", str(SHARED_NSYS / "mfu_2gpu_before.sqlite"), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    devs = out["summary"]["devices"]
    assert [
        (d["device"], d["kernel_count"], d["kernels_with_launch"], d["gpu_busy_ns"]) for d in devs
    ] == [(0, 1993, 1981, 273817787), (1, 2017, 2005, 267275916)]
    for key in (
        "kernel_count",
        "kernels_with_launch",
        "gpu_busy_ns",
        "gpu_window_ns",
        "gpu_idle_fraction",
    ):
        assert key in devs[0] and key in out["summary"]
    assert out["summary"]["kernel_count"] == 4010


def test_cli_whatif(capsys, store):
    from dashboard.cli import main

    path = H200_TORCH / "ffn_M1024_eager.json.gz"
    run, _ = Source(store).ingest_path(path)
    assert (
        main(["whatif", run.run_id, "--kernel", "nvjet", "--speedup", "2", "--format", "json"]) == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert (out["run_ns"], round(out["predicted_ns"]), out["matched_kernels"]) == (
        2302313,
        1417468,
        15,
    )
    assert main(["whatif", str(path), "--kernel", "nvjet", "--speedup", "2"]) == 0
    text = capsys.readouterr().out
    assert "what-if" in text and "Amdahl" in text and "1.417 ms" in text
    assert main(["whatif", str(path), "--kernel", "(", "--speedup", "2"]) == 2


def test_launch_floor_comes_from_a_bench_run_of_the_same_gpu(store, capsys):
    """kernels per second are compared with the launch floor measured by `kernelscope bench` on that GPU."""
    import json as _json
    from dashboard.cli import main
    from tests.conftest import H200_TORCH, SAMPLES

    trace = H200_TORCH / "triton_add_x300.json.gz"
    assert main(["analyze", str(trace), "--format", "json", "--store", str(store.root)]) == 0
    before = _json.loads(capsys.readouterr().out)["launch_bound"]
    Source(store).ingest_path(
        SAMPLES / "h200" / "bench_suite" / "bench_nvidia-h200_06deee61.json.gz"
    )
    assert main(["analyze", str(trace), "--format", "json", "--store", str(store.root)]) == 0
    after = _json.loads(capsys.readouterr().out)["launch_bound"]
    rows = after if isinstance(after, list) else [after]
    assert any(r.get("launch_floor_ns") and abs(r["launch_floor_ns"] - 6519.2) < 1 for r in rows)
    rows0 = before if isinstance(before, list) else [before]
    assert all(not r.get("launch_floor_ns") for r in rows0)


# ----------------------------------------------------------------------------------------------
# one-pass intervals
def _brute_union(intervals):
    """Length of the union, gaps and merged intervals by the textbook method (sort, merge into a list)."""
    merged = []
    for s, e in sorted(intervals):
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    gaps = [(a[1], b[0]) for a, b in zip(merged, merged[1:]) if b[0] > a[1]]
    return sum(e - s for s, e in merged), gaps, [tuple(m) for m in merged]


@pytest.mark.parametrize("seed", range(40))
def test_one_pass_busy_gaps_and_merge_match_a_plain_merge(seed):
    """Busy time, gaps and merged intervals from one sorted scan equal a plain merge, per device, on
    random timelines with nesting, touching and identical intervals; the temporal breakdown adds up
    to the window."""
    import random

    rnd = random.Random(seed)
    rows = []
    for dev in range(rnd.randint(1, 3)):
        for _ in range(rnd.randint(1, 60)):
            s = rnd.randint(0, 2_000)
            e = s + rnd.choice([0, 1, rnd.randint(1, 50), rnd.randint(1, 400)])
            rows.append(
                {
                    "device": dev,
                    "start_ns": s,
                    "end_ns": e,
                    "stream": rnd.randint(1, 3),
                    "kind": rnd.choice(["kernel", "kernel", "memcpy"]),
                    "name": rnd.choice(["gemm", "nccl_ar"]),
                }
            )
    g = ops(rows)
    u = {r["device"]: r for r in timeline.utilization(g).iter_rows(named=True)}
    gp = timeline.gaps(g)
    mi = timeline.merge_intervals(g)
    tb = {r["device"]: r for r in timeline.temporal_breakdown(g).iter_rows(named=True)}
    for dev in {r["device"] for r in rows}:
        iv = [(r["start_ns"], r["end_ns"]) for r in rows if r["device"] == dev]
        busy, gaps, merged = _brute_union(iv)
        assert u[dev]["busy_ns"] == busy
        assert u[dev]["window_ns"] - busy == sum(b - a for a, b in gaps) == u[dev]["idle_ns"]
        assert gp.filter(pl.col("device") == dev).select("start_ns", "end_ns").rows() == gaps
        assert [
            tuple(x) for x in mi.filter(pl.col("device") == dev).select("start_ns", "end_ns").rows()
        ] == merged
        t = tb[dev]
        assert (
            t["compute_ns"] + t["communication_ns"] + t["memcpy_ns"] + t["idle_ns"]
            == t["window_ns"]
        )
        k_busy = (
            _brute_union(
                [
                    (r["start_ns"], r["end_ns"])
                    for r in rows
                    if r["device"] == dev and r["kind"] == "kernel"
                ]
            )[0]
            if any(r["device"] == dev and r["kind"] == "kernel" for r in rows)
            else 0
        )
        assert t["memcpy_ns"] == busy - k_busy
    s = timeline.summarize(g)
    assert s.devices["busy_ns"].to_list() == timeline.utilization(g)["busy_ns"].to_list()
    assert s.temporal.equals(timeline.temporal_breakdown(g)) and s.launch_bound.equals(
        timeline.launch_bound(g)
    )
    assert s.idle_categories.equals(timeline.idle_categories(g))
