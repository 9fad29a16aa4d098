"""The Timeline page's zoomable view and the detail of a clicked event.

`timeline_block(src, view, width)` is the data of the canvas timeline for the view's window (level
of detail by analyzers.timeline_view.window, launch calls joined by .with_launches, packed by
dashboard.web.timeline_payload); `event_detail(src, view)` the selected event's fields, its launch call,
and its Nsight Compute counters when the same kernel is among the store's ncu runs
(analyzers.kernel_link).
"""

from __future__ import annotations

import polars as pl

from analyzers.timeline import LAUNCH_DELAY_CUTOFF_NS
from analyzers.timeline_view import window, with_launches
from analyzers.units import fmt_bytes, fmt_ns, fmt_pct, fmt_rate
from dashboard.web.reports.report_blocks import (
    Col,
    Heading,
    Metrics,
    Table,
    Text,
    Timeline,
    code,
    num,
    text,
)
from dashboard.core.source import Source
from dashboard.web.theme import FONT
from dashboard.web.timeline_payload import SRCS, encode
from analyzers.join import (
    BOUNDS,
    bound_meanings,
    kernel_bounds,
    kernel_key,
    signature,
    trace_signature,
)
from dashboard.web.reports import join_blocks

DEFAULT_WIDTH = 1100


def selected(view) -> dict | None:
    """The clicked event of the URL (?op=gpu_ops:12) as {src, row}."""
    if not view.op:
        return None
    srcname, _, row = view.op.partition(":")
    return {"src": srcname, "row": int(row)} if srcname in SRCS and row.isdigit() else None


def _table(src: Source, run, name: str):
    """A trace table as stored (the rows the timeline's events point at), from the Source's cache:
    the timeline and an event's detail never wait for the trace's summary."""
    return src.table(run.run_id, name) if hasattr(run, "run_id") else run.table(name)


def timeline_block(src: Source, view, width: int | None = None) -> Timeline:
    tt = src.timeline_tracks(view.run)
    t0 = view.t0 if view.t0 is not None else 0.0
    t1 = view.t1 if view.t1 is not None else float(tt.end_ns)
    win = window(tt, t0, t1, width or DEFAULT_WIDTH)
    gpu_ops = _table(src, view.run, "gpu_ops")
    marks = with_launches(tt, gpu_ops, win.marks)
    marks, legend = _with_bounds(src, view, gpu_ops, marks)
    color = view.color or ("bound" if legend else "name")
    payload = encode(tt, win, marks, selected=selected(view), font=FONT, legend=legend, color=color)
    return Timeline(
        "timeline",
        payload,
        caption=(
            "Tracks per rank: CUDA streams (kernels, copies, memsets), NVTX / annotation ranges "
            "and CPU threads (CUDA API calls and CPU ops, nested). Ctrl/⌘+wheel or W/S zooms (the "
            "wheel alone scrolls the page), drag, shift+wheel or A/D pans, a click opens an "
            "event's detail below (a kernel's arrow points from its launch call). Times are "
            "relative to the trace's first event. Narrow events are merged per pixel column when a "
            "window holds more than 20,000 (zoom in for single events)."
            + (
                " Kernels are coloured by the bound of their matched launch in the Nsight Compute "
                f"run {code(legend['ncu_source'])} ({legend['ncu_run']}) of the same program, or "
                "by name (the colour buttons, ?color=bound|name); the legend says what each bound "
                "means."
                if legend
                else ""
            )
        ),
    )


def _with_bounds(
    src: Source, view, gpu_ops: pl.DataFrame, marks: pl.DataFrame
) -> tuple[pl.DataFrame, dict | None]:
    """The marks with each kernel's ncu-derived bound (analyzers.join.kernel_bounds over the join of
    the ncu run of the same program that dashboard.web.reports.join_blocks picks: ?ncu=RUN, else found)
    and the legend; (marks, None) when no ncu run is joined. A single kernel is judged by its own
    name, grid and block, a merged mark by name."""

    if not hasattr(view.run, "run_id"):
        return marks, None
    ncu_run, res = join_blocks.ncu_for(src, view.run, view.ncu, [])
    if ncu_run is None or res is None:
        return marks, None
    dims = [f"{w}_{a}" for w in ("grid", "block") for a in "xyz"]
    m = marks.with_row_index("_i")
    k = m.filter(pl.col("kind") == "kernel").select(
        "_i", pl.col("name").cast(pl.String), "src", "row"
    )
    single = k.filter((pl.col("src") == "gpu_ops") & (pl.col("row") >= 0))
    got = gpu_ops.select(*dims)[single["row"].to_list()].with_columns(pl.Series("_i", single["_i"]))
    kernels = k.join(got, on="_i", how="left", maintain_order="left").select(
        "_i", "name", *[pl.col(c).cast(pl.Int64) for c in dims]
    )
    b = pl.DataFrame(
        {"_i": kernels["_i"], "bound": kernel_bounds(res, kernels)},
        schema={"_i": pl.UInt32, "bound": pl.String},
    )
    marks = m.join(b, on="_i", how="left", maintain_order="left").drop("_i")
    legend = {
        "names": list(BOUNDS),
        "meanings": bound_meanings(),
        "ncu_run": ncu_run.run_id,
        "ncu_source": ncu_run.source_name,
        "source": "the Nsight Compute counters of the kernel's matched launch (its busiest "
        "resource, or latency; launch: a kernel shorter than its launch call)",
    }
    return marks, legend


def _dim(row: dict, what: str) -> str:
    vals = [row.get(f"{what}_{a}") for a in "xyz"]
    return "—" if any(v is None for v in vals) else "(" + ", ".join(str(int(v)) for v in vals) + ")"


def event_detail(src: Source, view) -> list:
    sel = selected(view)
    if sel is None:
        return [Text("Click an event on the timeline to see its detail here.", "caption")]
    table = _table(src, view.run, sel["src"])
    if not 0 <= sel["row"] < table.height:
        return [Text(f"No event {code(view.op)} in this run.", "warning")]
    row = table.row(sel["row"], named=True)
    origin = src.timeline_tracks(view.run).origin_ns
    out: list = [Heading(f"Selected: {code(row['name'])}", 3)]
    where = (
        f"rank {row.get('rank')} · GPU {row.get('device')} · stream {row.get('stream')}"
        if sel["src"] == "gpu_ops"
        else f"rank {row.get('rank')} · thread {row.get('tid')}"
    )
    items = [
        ("duration", fmt_ns(row["duration_ns"]), "end − start"),
        ("starts at", fmt_ns(row["start_ns"] - origin), "after the trace's first event"),
        ("where", where, None),
    ]
    if sel["src"] == "gpu_ops":
        delay = row.get("launch_delay_ns")
        items += [
            (
                "launch call",
                row.get("launch_api") or "not in the trace",
                "the CUDA API call with the same correlation id",
            ),
            ("launch call duration", fmt_ns(row.get("api_duration_ns")), None),
            (
                "launch delay",
                fmt_ns(delay)
                + (" (over 100 µs)" if delay and delay > LAUNCH_DELAY_CUTOFF_NS else ""),
                "max(0, start − end of its launch call) (HTA's definition)",
            ),
            (
                "queue",
                fmt_ns(row.get("queue_ns")),
                "start − end of the launch call; — when it started before the call returned "
                "(Nsight Systems' Queue Dur)",
            ),
        ]
        if row.get("kind") == "kernel":
            items += [
                ("grid × block", f"{_dim(row, 'grid')} × {_dim(row, 'block')}", None),
                (
                    "registers / shared memory",
                    f"{row.get('registers_per_thread') or '—'} / "
                    f"{fmt_bytes(row.get('shared_memory_bytes'))}",
                    "per thread / per block",
                ),
                ("CPU op", row.get("op_name") or "—", "the aten op that issued it (External id)"),
            ]
        else:
            items += [("bytes", fmt_bytes(row.get("bytes")), row.get("copy_kind"))]
    out.append(Metrics(items))
    out.append(Text(f"Full name: {code(row['name'])}", "caption"))
    if sel["src"] == "gpu_ops" and row.get("kind") == "kernel":
        out += ncu_blocks(src, view, row)
    return out


def _joined(src: Source, view, row: dict) -> pl.DataFrame | None:
    """The launches the join of an ncu run of the same program (analyzers.join via
    dashboard.web.reports.join_blocks) matched to this kernel, as analysed rows with run_id, source_name
    and basis; None when no join covers it."""

    ncu_run, res = join_blocks.ncu_for(src, view.run, view.ncu, [])
    if ncu_run is None or res is None:
        return None
    sig, key = signature(row["name"]), kernel_key(row)
    # its own configuration (grid, block) first: the launch its colour on the timeline comes from
    ms = sorted(
        (m for m in res.matched if trace_signature(m) == sig),
        key=lambda m: (m.trace_key != key, m.ncu_id),
    )
    if not ms:
        return None
    order = {m.ncu_id: i for i, m in enumerate(ms)}
    k = (
        src.ncu(ncu_run)
        .kernels.filter(pl.col("id").is_in(list(order)))
        .sort(pl.col("id").replace_strict(order, return_dtype=pl.Int64))
    )
    conf = {
        m.ncu_id: f"the join ({m.confidence}: "
        f"{'name, configuration and order' if m.confidence == 'high' else 'name and order'})"
        for m in ms
    }
    return k.with_columns(
        pl.lit(ncu_run.run_id).alias("run_id"),
        pl.lit(ncu_run.source_name).alias("source_name"),
        pl.col("id").replace_strict(conf, return_dtype=pl.String).alias("basis"),
    )


def ncu_blocks(src: Source, view, row: dict) -> list:
    """The same kernel in the store's Nsight Compute runs: its counters, and a link to its Kernels
    page. The join with an ncu run of the same program comes first; else any ncu run that profiled
    the kernel (analyzers.kernel_link)."""
    hits = _joined(src, view, row)
    if hits is None or not hits.height:
        hits = src.ncu_launches_of(row)
    out: list = [Heading("Its Nsight Compute counters", 3)]
    if not hits.height:
        return out + [
            Text(
                "This kernel is not in any Nsight Compute run of the store (matched by its name "
                "with template arguments). Profile it with `ncu --kernel-name regex:NAME "
                "--launch-count 1 -o r ./app` and upload the report to see its counters here.",
                "caption",
            )
        ]
    first = hits.row(0, named=True)
    out.append(
        Text(
            f"[Open launch {first['id']} of {code(first['source_name'])} on the Kernels "
            f"page](kernels?run={first['run_id']}&kernel={first['id']}) — matched by "
            f"{first['basis']}."
        )
    )
    out.append(
        Metrics(
            [
                (
                    "duration (ncu)",
                    fmt_ns(first.get("duration_ns")),
                    "gpu__time_duration.sum, one replayed launch",
                ),
                (
                    "DRAM",
                    fmt_rate((first.get("dram_bandwidth_gbps") or 0) * 1e9, "B/s")
                    if first.get("dram_bandwidth_gbps") is not None
                    else "—",
                    f"{fmt_pct((first.get('dram_peak_fraction') or 0) * 100) if first.get('dram_peak_fraction') is not None else '—'} of the spec peak",
                ),
                (
                    "occupancy achieved",
                    fmt_pct(first.get("achieved_occupancy_pct")),
                    "sm__warps_active.avg.pct_of_peak_sustained_active",
                ),
                (
                    "biggest finding",
                    first.get("top_finding") or "—",
                    f"est. {fmt_ns(first.get('lost_ns'))} lost",
                ),
            ]
        )
    )
    shown = hits.head(20).select(
        pl.format("kernels?run={}&kernel={}", "run_id", "id").alias("open"),
        "source_name",
        "run_id",
        "id",
        "basis",
        (pl.col("duration_ns") / 1e3).alias("duration_us"),
    )
    out.append(
        Table(
            "ncu_matches",
            shown,
            {
                "open": Col("open", kind="link", link_text="open"),
                "source_name": text("ncu report"),
                "run_id": text("run"),
                "id": num("launch id"),
                "basis": text(
                    "matched by",
                    "analyzers.join (same program: order in the step), else analyzers.kernel_link "
                    "(name, then grid and block)",
                ),
                "duration_us": num("duration", "µs", "%.2f", "gpu__time_duration.sum"),
            },
            caption="Launches of the same kernel in the store's Nsight Compute runs; the counters "
            "above are the first one's. A launch profiled by ncu is replayed in isolation, so its "
            "duration can differ from the timeline's.",
            static=True,
        )
    )
    return out
