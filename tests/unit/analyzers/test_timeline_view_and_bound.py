"""The zoomable timeline's tracks and level of detail (analyzers.timeline_view), the
host-/launch-/GPU-bound verdict (analyzers.timeline.bound_verdict) and the run time, on the real
H200 traces; each verdict with a measurement that flips it."""

from __future__ import annotations

import polars as pl
import pytest

from analyzers import timeline
from analyzers import whatif
from analyzers.timeline_view import build_tracks, window, with_launches
from tests.conftest import H200_TORCH


def sample(name):
    from collectors.ingest import parse_path

    return parse_path(H200_TORCH / f"{name}.json.gz").tables


def test_tracks_per_stream_and_thread_with_nesting():
    t = sample("ffn_M1_eager")
    tt = build_tracks(t["gpu_ops"], t["api_calls"], t["cpu_ops"], t["nvtx"])
    assert tt.tracks["kind"].to_list() == ["gpu", "cpu"] and tt.tracks["label"].to_list() == [
        "GPU 0 · stream 7",
        "CPU thread 1172",
    ]
    assert tt.events.height == 120 + 122 + 160 and tt.events["start_ns"].min() == 0
    ev = tt.events
    # aten::matmul > aten::mm > cuLaunchKernelEx on the CPU thread; the stream is one row
    first = ev.filter(pl.col("track") == 1).sort("start_ns").head(3)
    assert first["name"].to_list() == ["aten::matmul", "aten::mm", "cuLaunchKernelEx"]
    assert first["depth"].to_list() == [0, 1, 2]
    assert (
        ev.filter(pl.col("track") == 0)["depth"].max() == 0 and tt.tracks["rows"].to_list()[0] == 1
    )


def test_level_of_detail_keeps_every_event_counted():
    t = sample("ffn_M1_eager")
    tt = build_tracks(t["gpu_ops"], t["api_calls"], t["cpu_ops"], t["nvtx"])
    full = window(tt, 0, tt.end_ns, 1000)
    assert full.detailed and full.marks.height == full.events_in_window == 402
    lod = window(tt, 0, tt.end_ns, 200, max_events=50)
    assert not lod.detailed and lod.marks.height < 402
    # merged marks carry their events
    assert lod.marks["count"].sum() == 402
    px = tt.end_ns / 200
    merged = lod.marks.filter(pl.col("row") < 0)
    assert merged.height and (merged["busy_ns"] <= px * 1.0001 * merged["count"]).all()
    # zooming into 1 % of the trace: every event there is its own mark again
    z = window(tt, 2.2e6, 2.2e6 + 44_000, 1000, max_events=50)
    assert z.detailed and z.marks["count"].max() == 1 and z.events_in_window < 50


def test_kernels_link_to_their_launch_call():
    t = sample("ffn_M1024_eager")
    tt = build_tracks(t["gpu_ops"], t["api_calls"], t["cpu_ops"], t["nvtx"])
    marks = with_launches(tt, t["gpu_ops"], window(tt, 0, tt.end_ns, 1000).marks)
    k = marks.filter((pl.col("src") == "gpu_ops") & (pl.col("kind") == "kernel"))
    cpu_track = tt.tracks.filter(pl.col("kind") == "cpu")["track"][0]
    assert k.height == 25 and (k["link_track"] == cpu_track).all() and k["launch"].null_count() == 0
    g = t["gpu_ops"].with_row_index("row")
    first = k.sort("start_ns").row(0, named=True)
    src = g.filter(pl.col("row") == first["row"]).row(0, named=True)
    assert first["delay_ns"] == src["launch_delay_ns"]
    # relative times throughout
    assert first["link_end_ns"] == src["api_end_ns"] - tt.origin_ns


@pytest.mark.parametrize(
    "idle,host,short,verdict",
    [
        (0.05, 0.04, 0.9, "GPU-bound"),
        (0.6, 0.5, 0.9, "launch-bound"),
        # the training step: GPU waits 50 %, 14 % short kernels
        (0.6, 0.5, 0.14, "host-bound"),
        (0.3, 0.15, 0.7, "partly launch-bound"),
        (0.3, 0.15, 0.2, "partly host-bound"),
        (0.3, 0.02, 0.2, "idle, not waiting for the host"),
    ],
)
def test_bound_verdict_thresholds(idle, host, short, verdict):
    v, evidence = timeline.bound_verdict(idle, host, short)
    assert v == verdict and f"{host:.1%}" in evidence


def _delay_host(t: dict, gap_ns: int) -> dict:
    """The same trace with the host `gap_ns` later before each kernel's launch call: the k-th launch
    (and everything after it) moves by k × gap, as if the host did other work between launches."""
    g = t["gpu_ops"].sort("start_ns").with_row_index("_k")
    shift = (pl.col("_k").cast(pl.Int64) + 1) * gap_ns
    g = g.with_columns(
        [(pl.col(c) + shift).alias(c) for c in ("start_ns", "end_ns", "api_start_ns", "api_end_ns")]
    )
    return {"gpu_ops": g.drop("_k"), "api_calls": t["api_calls"].head(0)}


def test_real_traces_and_a_measurement_that_flips_the_verdict():
    m1024 = sample("ffn_M1024_eager")
    s = timeline.summarize(m1024["gpu_ops"], m1024["api_calls"])
    assert s.devices["bound"].to_list() == ["GPU-bound"]
    # one run time: the what-if's
    assert s.run["run_ns"] == 2_302_313 and s.run["slowest_rank"] == 0
    assert (
        whatif.what_if(m1024["gpu_ops"], m1024["api_calls"], "nvjet", 1.0).run_ns == s.run["run_ns"]
    )
    t = sample("triton_add_x300")
    assert timeline.summarize(t["gpu_ops"], t["api_calls"]).devices["bound"].to_list() == [
        "launch-bound"
    ]
    # the M = 1024 FFN with the host 2 ms late before every launch: the GPU now waits for the host,
    # and its kernels are long: host-bound (not launch-bound)
    slow = _delay_host(m1024, 2_000_000)
    d = timeline.summarize(slow["gpu_ops"], slow["api_calls"]).devices.row(0, named=True)
    assert (
        d["bound"] == "host-bound"
        and d["host_wait_fraction"] > 0.3
        and d["short_kernel_share"] < 0.5
    )
