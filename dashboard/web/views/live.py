"""Live: the server's GPUs through NVML, refreshed (utilisation, clocks, memory, power,
temperature).

URL: ?every=SECONDS (refresh period; 0 pauses). On a machine without an NVIDIA driver the page says
so.
"""

from __future__ import annotations

import time
from collections import deque

import polars as pl
import streamlit as st

from dashboard.web import charts, nvml, widgets
from dashboard.web.render_streamlit import render_streamlit
from dashboard.web.reports.report_blocks import Table, num, text
from dashboard.web.theme import ensure_theme

st.title("Live")
qp = widgets.params()
try:
    every = float(qp.get("every", 2))
    # at most one NVML read a second per viewer
    every = every if every == 0 or 1 <= every <= 3600 else 2.0
except ValueError:
    every = 2.0
c1, c2 = st.columns([1, 3])
every = c1.number_input(
    "refresh every [s] (0 = paused, else ≥ 1)",
    min_value=0.0,
    max_value=3600.0,
    value=every,
    step=1.0,
)
every = 0.0 if every == 0 else max(1.0, every)
widgets.sync({"every": None if every == 2 else f"{every:g}"})
history: deque = st.session_state.setdefault("live_history", deque(maxlen=300))


@st.fragment(run_every=every if every > 0 else None)
def live() -> None:
    snap = nvml.snapshot()
    if snap.state != "ok":
        (st.info if snap.state in ("no_driver", "no_gpu") else st.warning)(
            {
                "no_driver": "**No NVIDIA driver.** ",
                "no_permission": "**No permission.** ",
                "no_gpu": "**No GPU.** ",
            }.get(snap.state, "")
            + snap.message
        )
        return
    st.caption(
        f"{snap.message} · read {time.strftime('%H:%M:%S', time.localtime(snap.time_s))} (NVML: "
        "nvmlDeviceGetUtilizationRates, nvmlDeviceGetClockInfo, nvmlDeviceGetMemoryInfo, "
        "nvmlDeviceGetPowerUsage, nvmlDeviceGetTemperature)"
    )
    rows = []
    for g in snap.gpus:
        rows.append(
            {
                "gpu": f"{g.index}: {g.name}",
                "util_gpu_pct": g.util_gpu_pct,
                "util_mem_pct": g.util_mem_pct,
                "sm_clock_mhz": g.sm_clock_mhz,
                "sm_clock_max_mhz": g.sm_clock_max_mhz,
                "mem_clock_mhz": g.mem_clock_mhz,
                "mem_used_gib": None if g.mem_used_bytes is None else g.mem_used_bytes / 2**30,
                "mem_total_gib": None if g.mem_total_bytes is None else g.mem_total_bytes / 2**30,
                "power_w": g.power_w,
                "power_limit_w": g.power_limit_w,
                "temperature_c": g.temperature_c,
            }
        )
        history.append(
            {
                "t": snap.time_s,
                "gpu": f"{g.index}: {g.name}",
                "util_gpu_pct": g.util_gpu_pct,
                "power_w": g.power_w,
            }
        )
    frame = pl.DataFrame(
        rows,
        schema={
            "gpu": pl.String,
            "util_gpu_pct": pl.Float64,
            "util_mem_pct": pl.Float64,
            "sm_clock_mhz": pl.Float64,
            "sm_clock_max_mhz": pl.Float64,
            "mem_clock_mhz": pl.Float64,
            "mem_used_gib": pl.Float64,
            "mem_total_gib": pl.Float64,
            "power_w": pl.Float64,
            "power_limit_w": pl.Float64,
            "temperature_c": pl.Float64,
        },
    )
    render_streamlit(
        [
            Table(
                "live",
                frame,
                {
                    "gpu": text("GPU"),
                    "util_gpu_pct": num(
                        "busy", "%", "%.0f", "% of the last sample period a kernel ran"
                    ),
                    "util_mem_pct": num(
                        "memory busy",
                        "%",
                        "%.0f",
                        "% of the period device memory was read or written",
                    ),
                    "sm_clock_mhz": num("SM clock", "MHz", "%.0f"),
                    "sm_clock_max_mhz": num("SM clock max", "MHz", "%.0f"),
                    "mem_clock_mhz": num("memory clock", "MHz", "%.0f"),
                    "mem_used_gib": num("memory used", "GiB", "%.1f"),
                    "mem_total_gib": num("memory total", "GiB", "%.1f"),
                    "power_w": num("power", "W", "%.0f"),
                    "power_limit_w": num("power limit", "W", "%.0f"),
                    "temperature_c": num("temperature", "°C", "%.0f"),
                },
            )
        ]
    )
    h = pl.DataFrame(
        list(history),
        schema={
            "t": pl.Float64,
            "gpu": pl.String,
            "util_gpu_pct": pl.Float64,
            "power_w": pl.Float64,
        },
    )
    if h.height > 1:
        ensure_theme()
        h = h.with_columns(seconds_ago=pl.col("t") - pl.col("t").max())
        st.altair_chart(charts.utilisation_lines(h), theme=None, width="stretch")


live()
widgets.share_panel("live", {"every": None if every == 2 else f"{every:g}"}, None)
