"""Chart builders (altair, the kernelscope theme). Each takes tidy polars frames in base units and
returns a chart whose axes name their quantity, unit and source."""

from __future__ import annotations

import altair as alt
import polars as pl

from dashboard.web.theme import MEASURED_COLOR, SPEC_COLOR, STATUS_COLORS, ensure_theme

#: every chart is at least this tall (px): a chart whose height Vega-Lite derives from its container
#: can collapse to a few pixels in a Streamlit column
MIN_HEIGHT = 260


def roofline(points: pl.DataFrame, roofs: list[dict]) -> alt.LayerChart:
    """Roofline: attainable = min(compute peak, AI x DRAM peak) for each roof, and one point per
    launch.

    points: launch (str), kernel (str), ai_flop_per_byte, tflop_per_s, duration_us, work ("FP32",
    "tensor BF16" …). roofs: dicts with label, dram_bytes_per_s, flop_per_s, measured (bool);
    measured roofs solid, spec dashed."""
    ensure_theme()
    ais = [a for a in points["ai_flop_per_byte"].to_list() if a and a > 0]
    ridges = [r["flop_per_s"] / r["dram_bytes_per_s"] for r in roofs]
    lo = min(ais + ridges) / 8 if ais or ridges else 0.01
    hi = max(ais + ridges) * 8 if ais or ridges else 1000
    n = 80
    rows = []
    for r in roofs:
        for i in range(n + 1):
            ai = lo * (hi / lo) ** (i / n)
            rows.append(
                {
                    "roof": r["label"],
                    "ai_flop_per_byte": ai,
                    "tflop_per_s": min(r["flop_per_s"], ai * r["dram_bytes_per_s"]) / 1e12,
                }
            )
    roof_df = pl.DataFrame(
        rows, schema={"roof": pl.String, "ai_flop_per_byte": pl.Float64, "tflop_per_s": pl.Float64}
    )
    labels = [r["label"] for r in roofs]
    colors = [MEASURED_COLOR if r["measured"] else SPEC_COLOR for r in roofs]
    x = alt.X(
        "ai_flop_per_byte:Q",
        scale=alt.Scale(type="log", domain=[lo, hi]),
        title="arithmetic intensity [FLOP/byte] = (FP32 + tensor FLOP) / DRAM bytes (ncu counters)",
    )
    y = alt.Y(
        "tflop_per_s:Q", scale=alt.Scale(type="log"), title="throughput [TFLOP/s] (FP32 + tensor)"
    )
    lines = (
        alt.Chart(roof_df)
        .mark_line()
        .encode(
            x=x,
            y=y,
            color=alt.Color(
                "roof:N", title="ceiling", scale=alt.Scale(domain=labels, range=colors)
            ),
            strokeDash=alt.StrokeDash(
                "roof:N",
                legend=None,
                scale=alt.Scale(
                    domain=labels, range=[[1, 0] if r["measured"] else [6, 4] for r in roofs]
                ),
            ),
            strokeWidth=alt.StrokeWidth(
                "roof:N",
                legend=None,
                scale=alt.Scale(
                    domain=labels, range=[2.5 if "tensor" in r["label"] else 1.5 for r in roofs]
                ),
            ),
            tooltip=[
                alt.Tooltip("roof:N", title="ceiling"),
                alt.Tooltip("ai_flop_per_byte:Q", format=".3g", title="FLOP/byte"),
                alt.Tooltip("tflop_per_s:Q", format=".3g", title="TFLOP/s"),
            ],
        )
    )
    dots = (
        alt.Chart(points)
        .mark_point(size=90, filled=True, color="#111827")
        .encode(
            x=x,
            y=y,
            shape=alt.Shape("kernel:N", title="kernel"),
            tooltip=[
                alt.Tooltip("launch:N", title="launch id"),
                alt.Tooltip("kernel:N"),
                alt.Tooltip("work:N", title="work"),
                alt.Tooltip("ai_flop_per_byte:Q", format=".3g", title="FLOP/byte"),
                alt.Tooltip("tflop_per_s:Q", format=".3g", title="TFLOP/s"),
                alt.Tooltip("duration_us:Q", format=",.2f", title="duration [µs]"),
            ],
        )
    )
    return (
        alt.layer(lines, dots)
        .resolve_scale(color="independent", shape="independent")
        .properties(title="Roofline: throughput vs arithmetic intensity (per launch)", height=360)
    )


LEVEL_COLORS = {"L1/shared": "#009E73", "L2": "#E69F00", "DRAM": "#0072B2"}


def hierarchical_roofline(
    points: pl.DataFrame,
    roofs: list[dict],
    *,
    unit: str,
    title: str,
    height: int = 380,
    selected: str | None = None,
) -> alt.LayerChart:
    """A hierarchical roofline (analyzers.roofline.Roofline): each launch at every memory level it
    has bytes at, against the memory roofs (slanted, one per level) and the compute roofs (flat).

    points: launch, kernel, level, intensity, rate (per second), duration_us, work; roofs: label,
    kind (memory | compute), level, value, measured. `selected`: a launch id whose points are ringed
    (the launch the page shows)."""
    ensure_theme()
    per = "FLOP" if unit == "FLOP" else "warp inst"
    xs = [x for x in points["intensity"].to_list() if x and x > 0] if points.height else []
    mem = [r for r in roofs if r["kind"] == "memory"]
    comp = [r for r in roofs if r["kind"] == "compute"]
    top = max(
        [r["value"] for r in comp] + ([max(points["rate"].to_list())] if points.height else [1.0])
    )
    ridges = [c["value"] / m["value"] for c in comp for m in mem] or [1.0]
    lo = min(xs + ridges) / 8
    hi = max(xs + ridges) * 8
    big_bw = max([m["value"] for m in mem], default=None)
    rows = []
    n = 60
    for r in roofs:
        for i in range(n + 1):
            x = lo * (hi / lo) ** (i / n)
            y = (
                min(x * r["value"], top)
                if r["kind"] == "memory"
                else min(r["value"], x * big_bw if big_bw else r["value"])
            )
            rows.append(
                {"roof": r["label"], "intensity": x, "rate_per_s": y, "measured": r["measured"]}
            )
    roof_df = pl.DataFrame(
        rows,
        schema={
            "roof": pl.String,
            "intensity": pl.Float64,
            "rate_per_s": pl.Float64,
            "measured": pl.Boolean,
        },
    )
    labels = [r["label"] for r in roofs]
    colors = [
        LEVEL_COLORS.get(r["level"], "#374151") if r["kind"] == "memory" else "#374151"
        for r in roofs
    ]
    x = alt.X(
        "intensity:Q",
        scale=alt.Scale(type="log", domain=[lo, hi]),
        title=f"intensity [{per}/byte] = {per} / bytes moved at the level (ncu counters)",
    )
    y = alt.Y(
        "rate_per_s:Q",
        scale=alt.Scale(type="log"),
        axis=alt.Axis(format="~s"),
        title=f"throughput [{per}/s] (ncu counters / duration)",
    )
    lines = (
        alt.Chart(roof_df)
        .mark_line()
        .encode(
            x=x,
            y=y,
            color=alt.Color("roof:N", title="roof", scale=alt.Scale(domain=labels, range=colors)),
            strokeDash=alt.StrokeDash(
                "roof:N",
                legend=None,
                scale=alt.Scale(
                    domain=labels, range=[[1, 0] if r["measured"] else [6, 4] for r in roofs]
                ),
            ),
            tooltip=[
                alt.Tooltip("roof:N"),
                alt.Tooltip("intensity:Q", format=".3g", title=f"{per}/byte"),
                alt.Tooltip("rate_per_s:Q", format=".3s", title=f"{per}/s"),
            ],
        )
    )
    layers = [lines]
    if points.height:
        pts = points.rename({"rate": "rate_per_s"})
        levels = [lv for lv in LEVEL_COLORS if lv in set(pts["level"].to_list())]
        base = alt.Chart(pts).encode(x=x, y=y)
        layers.append(base.mark_line(color="#9ca3af", strokeWidth=1).encode(detail="launch:N"))
        layers.append(
            base.mark_point(size=80, filled=True).encode(
                fill=alt.Fill(
                    "level:N",
                    title="memory level",
                    scale=alt.Scale(domain=levels, range=[LEVEL_COLORS[lv] for lv in levels]),
                ),
                shape=alt.Shape("work:N", title="work"),
                tooltip=[
                    alt.Tooltip("launch:N", title="launch id"),
                    alt.Tooltip("kernel:N"),
                    alt.Tooltip("level:N"),
                    alt.Tooltip("work:N"),
                    alt.Tooltip("intensity:Q", format=".3g", title=f"{per}/byte"),
                    alt.Tooltip("rate_per_s:Q", format=".3s", title=f"{per}/s"),
                    alt.Tooltip("duration_us:Q", format=",.2f", title="duration [µs]"),
                ],
            )
        )
        sel = pts.filter(pl.col("launch") == str(selected)) if selected is not None else pts.head(0)
        if sel.height:
            layers.append(
                alt.Chart(sel)
                .mark_point(size=260, filled=False, strokeWidth=2.5, color="#d62728")
                .encode(
                    x=x,
                    y=y,
                    tooltip=[
                        alt.Tooltip("launch:N", title="selected launch"),
                        alt.Tooltip("kernel:N"),
                        alt.Tooltip("level:N"),
                    ],
                )
            )
    return (
        alt.layer(*layers)
        .resolve_scale(color="independent", fill="independent", shape="independent")
        .properties(title=title, height=height)
    )


def bandwidth_bars(bars: pl.DataFrame, rules: list[dict]) -> alt.LayerChart | alt.Chart:
    """Achieved DRAM bandwidth per launch (bars: launch, kernel, dram_bandwidth_gbps) against peaks
    (rules: label, gbps, measured)."""
    ensure_theme()
    chart = (
        alt.Chart(bars)
        .mark_bar()
        .encode(
            x=alt.X("launch:N", sort=None, title="launch id"),
            y=alt.Y("dram_bandwidth_gbps:Q", title="achieved DRAM bandwidth [GB/s] (ncu counters)"),
            tooltip=[
                alt.Tooltip("launch:N", title="launch id"),
                "kernel:N",
                alt.Tooltip("dram_bandwidth_gbps:Q", format=",.0f", title="DRAM [GB/s]"),
            ],
        )
    )
    if not rules:
        return chart.properties(title="DRAM bandwidth per launch", height=MIN_HEIGHT)
    rdf = pl.DataFrame(
        rules, schema={"label": pl.String, "gbps": pl.Float64, "measured": pl.Boolean}
    )
    labels = rdf["label"].to_list()
    rule = (
        alt.Chart(rdf)
        .mark_rule(strokeWidth=2)
        .encode(
            y="gbps:Q",
            color=alt.Color(
                "label:N",
                title="peak",
                scale=alt.Scale(
                    domain=labels,
                    range=[MEASURED_COLOR if m else SPEC_COLOR for m in rdf["measured"].to_list()],
                ),
            ),
            strokeDash=alt.StrokeDash(
                "label:N",
                legend=None,
                scale=alt.Scale(
                    domain=labels,
                    range=[[1, 0] if m else [6, 4] for m in rdf["measured"].to_list()],
                ),
            ),
            tooltip=[
                alt.Tooltip("label:N", title="peak"),
                alt.Tooltip("gbps:Q", format=",.0f", title="GB/s"),
            ],
        )
    )
    return alt.layer(chart, rule).properties(
        title="DRAM bandwidth per launch vs peaks", height=MIN_HEIGHT
    )


def occupancy_bars(occ: pl.DataFrame) -> alt.Chart:
    """occ: launch, measure, pct (long form)."""
    ensure_theme()
    return (
        alt.Chart(occ)
        .mark_bar()
        .encode(
            x=alt.X("launch:N", title="launch id", sort=None),
            xOffset="measure:N",
            y=alt.Y(
                "pct:Q", title="occupancy [% of max warps per SM]", scale=alt.Scale(domain=[0, 100])
            ),
            color=alt.Color("measure:N", title=None),
            tooltip=[
                alt.Tooltip("launch:N", title="launch id"),
                "measure:N",
                alt.Tooltip("pct:Q", format=".1f", title="occupancy [%]"),
            ],
        )
        .properties(
            title="Occupancy: achieved (ncu), theoretical (ncu), theoretical (our calculator)",
            height=MIN_HEIGHT,
        )
    )


def change_bars(rows: pl.DataFrame, noise_pct: float) -> alt.LayerChart:
    """Relative change of matched kernels: rows with label, change_pct, status; band = ± noise floor."""
    ensure_theme()
    statuses = list(STATUS_COLORS)
    bars = (
        alt.Chart(rows)
        .mark_bar()
        .encode(
            y=alt.Y(
                "label:N",
                sort=alt.EncodingSortField("change_pct", order="ascending"),
                title=None,
                axis=alt.Axis(labelLimit=360),
            ),
            x=alt.X("change_pct:Q", title="duration change B vs A [%] (negative = faster)"),
            color=alt.Color(
                "status:N",
                title="status",
                scale=alt.Scale(domain=statuses, range=[STATUS_COLORS[s] for s in statuses]),
            ),
            tooltip=[
                "label:N",
                "status:N",
                alt.Tooltip("change_pct:Q", format="+.1f", title="change [%]"),
                alt.Tooltip("threshold_pct:Q", format=".1f", title="noise threshold [%]"),
            ],
        )
    )
    edges = (
        alt.Chart(pl.DataFrame({"noise_pct": [-noise_pct, noise_pct]}))
        .mark_rule(color="#6b7280", strokeDash=[4, 3])
        .encode(x="noise_pct:Q")
    )
    return alt.layer(bars, edges).properties(
        title="Per-kernel change (dashed: ± noise floor)",
        height=max(MIN_HEIGHT, 22 * rows["label"].n_unique()),
    )


def fraction_bars(
    df: pl.DataFrame,
    *,
    x: str,
    x_title: str,
    group: str,
    group_title: str,
    title: str,
    value: str = "pct",
    value_title: str = "[% of the GPU's own peak]",
) -> alt.Chart:
    """Grouped bars of percentages (e.g. measured ceiling / spec peak per GPU)."""
    ensure_theme()
    return (
        alt.Chart(df)
        .mark_bar()
        .encode(
            x=alt.X(f"{x}:N", title=x_title),
            xOffset=f"{group}:N",
            y=alt.Y(f"{value}:Q", title=value_title),
            color=alt.Color(f"{group}:N", title=group_title),
            tooltip=[
                f"{x}:N",
                f"{group}:N",
                alt.Tooltip(f"{value}:Q", format=".1f", title=value_title),
            ],
        )
        .properties(title=title, height=MIN_HEIGHT)
    )


def sol_bars(df: pl.DataFrame) -> alt.Chart:
    """Speed of Light per kernel: SM and DRAM throughput as % of peak (columns kernel, side, pct, order)."""
    return (
        alt.Chart(df)
        .mark_bar()
        .encode(
            y=alt.Y(
                "kernel:N",
                sort=alt.EncodingSortField("order"),
                title=None,
                axis=alt.Axis(labelLimit=260),
            ),
            yOffset="side:N",
            x=alt.X(
                "pct:Q", title="% of peak (ncu Speed of Light)", scale=alt.Scale(domain=[0, 100])
            ),
            color=alt.Color("side:N", title=None, sort=["SM throughput", "DRAM throughput"]),
            tooltip=["kernel", "side", alt.Tooltip("pct:Q", format=".1f", title="% of peak")],
        )
        .properties(
            title="Speed of Light of the kernels with the most time",
            height=max(260, 26 * df["kernel"].n_unique()),
        )
    )


def stall_bars(reasons: pl.DataFrame) -> alt.Chart:
    """Warp-state samples per stall reason of one launch (reasons: label, waits_for, samples, pct)."""
    ensure_theme()
    return (
        alt.Chart(reasons)
        .mark_bar()
        .encode(
            y=alt.Y("label:N", sort="-x", title=None, axis=alt.Axis(labelLimit=260)),
            x=alt.X(
                "pct:Q",
                title="share of the launch's warp-state samples [%] "
                "(smsp__pcsamp_warps_issue_stalled_*)",
            ),
            tooltip=[
                alt.Tooltip("label:N", title="reason"),
                alt.Tooltip("waits_for:N", title="the warp waits for"),
                alt.Tooltip("samples:Q", format=",.0f"),
                alt.Tooltip("pct:Q", format=".1f", title="share [%]"),
            ],
        )
        .properties(
            title="Where the warps waited (warp-state samples by stall reason)",
            height=max(MIN_HEIGHT, 22 * reasons.height),
        )
    )


# ---- timeline (PyTorch profiler / Nsight Systems runs)
# ------------------------------------------------


def launch_delay_histogram(h: pl.DataFrame) -> alt.Chart:
    """Kernels per launch-delay bin, stacked by launch call (h: launch_delay_us, launch_api)."""
    ensure_theme()
    return (
        alt.Chart(h)
        .mark_bar()
        .encode(
            x=alt.X(
                "launch_delay_us:Q",
                bin=alt.Bin(maxbins=60),
                title="launch delay [µs] = max(0, start − call end)",
            ),
            y=alt.Y("count():Q", title="kernels", stack=True),
            color=alt.Color("launch_api:N", title="launch call"),
            tooltip=["launch_api", alt.Tooltip("count():Q", title="kernels")],
        )
        .properties(title="Launch delay per kernel (HTA definition)", height=MIN_HEIGHT)
    )


def idle_gaps(pts: pl.DataFrame, categories: list[str]) -> alt.Chart:
    """One dot per idle gap before an op, one row per stream (pts: stream, t_ms, gap_us, category, next op)."""
    ensure_theme()
    return (
        alt.Chart(pts)
        .mark_circle(size=30)
        .encode(
            x=alt.X("t_ms:Q", title="time since the first GPU op [ms]"),
            y=alt.Y("gap_us:Q", title="gap [µs]", scale=alt.Scale(type="log")),
            color=alt.Color("category:N", scale=alt.Scale(domain=categories)),
            row=alt.Row("stream:N", title="rank:device:stream"),
            tooltip=[
                "stream",
                alt.Tooltip("t_ms:Q", format=".3f"),
                alt.Tooltip("gap_us:Q", format=",.2f"),
                "category",
                "next op",
            ],
        )
        .properties(height=140, title="Idle gaps before each op (largest 5,000)")
    )


def idle_category_bars(cats: pl.DataFrame, categories: list[str]) -> alt.Chart:
    """Idle time per stream and category (cats: stream_key, category, idle_us, gap_count, idle_ratio)."""
    ensure_theme()
    return (
        alt.Chart(cats)
        .mark_bar()
        .encode(
            x=alt.X("idle_us:Q", title="idle time [µs]"),
            y=alt.Y("stream_key:N", title="rank:device:stream"),
            color=alt.Color("category:N", scale=alt.Scale(domain=categories)),
            tooltip=[
                "stream_key",
                "category",
                alt.Tooltip("idle_us:Q", format=",.1f"),
                "gap_count",
                alt.Tooltip("idle_ratio:Q", format=".1%"),
            ],
        )
        .properties(
            title="Idle categories per stream (HTA)",
            height=alt.Step(28) if cats["stream_key"].n_unique() > 8 else MIN_HEIGHT,
        )
    )


# ---- textbook cases
# --------------------------------------------------------------------------------------


def case_sweep(
    df: pl.DataFrame,
    *,
    x_title: str,
    y_title: str,
    title: str,
    mark: str = "bar",
    log_x: bool = False,
    at: float | None = None,
) -> alt.Chart | alt.LayerChart:
    """A case's predictions over one parameter (df: x, series, value), with a dashed rule at the chosen x."""
    ensure_theme()
    if df.schema["x"].is_numeric():
        x_enc = alt.X("x:Q", title=x_title, scale=alt.Scale(type="log") if log_x else alt.Undefined)
    else:
        x_enc = alt.X("x:N", title=x_title, sort=None)
    base = alt.Chart(df)
    if mark == "bar":
        layer = base.mark_bar().encode(
            x=x_enc,
            y=alt.Y("value:Q", title=y_title),
            color=alt.Color("series:N", title=None),
            xOffset="series:N" if df["series"].n_unique() > 1 else alt.Undefined,
        )
    else:
        layer = base.mark_line(point=True).encode(
            x=x_enc, y=alt.Y("value:Q", title=y_title), color=alt.Color("series:N", title=None)
        )
    chart = layer.encode(
        tooltip=[
            alt.Tooltip("series:N"),
            alt.Tooltip("x", title=x_title),
            alt.Tooltip("value:Q", format=".4g", title=y_title),
        ]
    )
    if at is not None:
        rule = (
            alt.Chart(pl.DataFrame({"x": [float(at)]}))
            .mark_rule(strokeDash=[4, 4], color="#6b7280")
            .encode(x="x:Q")
        )
        chart = alt.layer(chart, rule)
    return chart.properties(title=title, height=320)


def utilisation_lines(h: pl.DataFrame) -> alt.Chart:
    """NVML utilisation of each GPU over the session (the Live page): seconds_ago, util_gpu_pct, gpu."""
    return (
        alt.Chart(h)
        .mark_line()
        .encode(
            x=alt.X("seconds_ago:Q", title="time [s, 0 = now]"),
            y=alt.Y(
                "util_gpu_pct:Q",
                title="GPU busy [%] (NVML utilisation)",
                scale=alt.Scale(domain=[0, 100]),
            ),
            color=alt.Color("gpu:N", title="GPU"),
        )
        .properties(title="Utilisation over this session", height=MIN_HEIGHT)
    )


# ---- distributed jobs (the Ranks page)
# ------------------------------------------------------------------


def rank_heatmap(cells: pl.DataFrame, value_title: str, title: str) -> alt.Chart:
    """Ranks x iterations (cells: rank, step, value, straggler (bool)); stragglers outlined."""
    ensure_theme()
    base = alt.Chart(cells).encode(
        x=alt.X("step:O", title="iteration (step number)"),
        y=alt.Y("rank:O", title="rank", sort="ascending"),
    )
    heat = base.mark_rect().encode(
        color=alt.Color("value:Q", title=value_title, scale=alt.Scale(scheme="viridis")),
        tooltip=[
            alt.Tooltip("rank:O"),
            alt.Tooltip("step:O", title="iteration"),
            alt.Tooltip("value:Q", format=",.3f", title=value_title),
            alt.Tooltip("straggler:N"),
        ],
    )
    marks = base.transform_filter(alt.datum.straggler).mark_rect(
        fill=None, stroke="#dc2626", strokeWidth=2
    )
    n = cells["rank"].n_unique()
    return alt.layer(heat, marks).properties(
        title=title, height=max(MIN_HEIGHT, n * (14 if n > 16 else 24))
    )


def histogram_bars(bins: pl.DataFrame, x_title: str, title: str) -> alt.Chart:
    """Pre-binned counts (bins: lo, hi, count) as bars."""
    ensure_theme()
    return (
        alt.Chart(bins)
        .mark_bar()
        .encode(
            x=alt.X("lo:Q", bin="binned", title=x_title),
            x2="hi:Q",
            y=alt.Y("count:Q", title="iterations"),
            tooltip=[
                alt.Tooltip("lo:Q", format=",.3f", title="from"),
                alt.Tooltip("hi:Q", format=",.3f", title="to"),
                "count:Q",
            ],
        )
        .properties(title=title, height=MIN_HEIGHT)
    )


def history_lines(
    df: pl.DataFrame,
    *,
    y: str,
    y_title: str,
    color: str,
    color_title: str,
    title: str,
    log_y: bool = False,
) -> alt.Chart:
    """A quantity over store time (df: when (datetime), y, color, run_id, label) with points."""
    ensure_theme()
    return (
        alt.Chart(df)
        .mark_line(point=True)
        .encode(
            x=alt.X(
                "when:T",
                title="stored (UTC)",
                axis=alt.Axis(format="%Y-%m-%d %H:%M", labelAngle=-30),
            ),
            y=alt.Y(
                f"{y}:Q", title=y_title, scale=alt.Scale(type="log") if log_y else alt.Undefined
            ),
            color=alt.Color(f"{color}:N", title=color_title),
            tooltip=[
                alt.Tooltip("when:T", format="%Y-%m-%d %H:%M"),
                "run_id:N",
                alt.Tooltip(f"{y}:Q", format=",.4g"),
                f"{color}:N",
                "label:N",
            ],
        )
        .properties(title=title, height=max(MIN_HEIGHT, 280))
    )


def step_bars(steps: pl.DataFrame) -> alt.LayerChart:
    """Time per step (steps: step, gpu_ms, busy_ms, phase) as bars coloured by phase, with the GPU's
    busy time in each step as a tick: how long each iteration or token took on the GPU and how much
    of it the GPU worked."""
    ensure_theme()
    base = alt.Chart(steps).encode(x=alt.X("step:O", title="step (iteration or token)"))
    bars = base.mark_bar().encode(
        y=alt.Y("gpu_ms:Q", title="time per step [ms] (first to last GPU op it launched)"),
        color=alt.Color(
            "phase:N",
            title="phase",
            scale=alt.Scale(
                domain=["steady", "warm-up", "cut short", "no GPU work"],
                range=[MEASURED_COLOR, "#e4a33a", "#9a9a9a", "#cccccc"],
            ),
        ),
        tooltip=[
            "step:O",
            "phase:N",
            alt.Tooltip("gpu_ms:Q", format=",.3f", title="step time [ms]"),
            alt.Tooltip("busy_ms:Q", format=",.3f", title="GPU busy [ms]"),
            alt.Tooltip("host_ms:Q", format=",.3f", title="host range [ms]"),
            "launches:Q",
            "kernels:Q",
            "reasons:N",
        ],
    )
    ticks = base.mark_tick(color="#222222", thickness=2).encode(y=alt.Y("busy_ms:Q"))
    return (bars + ticks).properties(
        title="Time per step (bar) and GPU busy time in it (tick)", height=MIN_HEIGHT
    )
