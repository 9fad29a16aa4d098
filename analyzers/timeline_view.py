"""The zoomable timeline of a trace: its tracks, and what to draw of them in a time window (level of
detail).

More: docs/architecture.md, *analyzers.timeline_view*.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

KIND_CODES = {"kernel": 0, "memcpy": 1, "memset": 2, "api": 3, "cpu_op": 4, "nvtx": 5}
KINDS = tuple(KIND_CODES)
MAX_EVENTS = 20_000
MIN_PX = 1.0


@dataclass
class TimelineTracks:
    origin_ns: int  # the trace's first event: times below are relative to it
    end_ns: int  # the last event's end (relative)
    # track, kind (gpu|cpu|nvtx), label, group, rank, device, stream, pid, tid, rows
    tracks: pl.DataFrame
    # track, depth, start_ns, end_ns, name, kind, src, row (sorted by start)
    events: pl.DataFrame


def _depths(track: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Nesting level of each event within its track (events sorted by track, start, longest first):
    the events of the track that started before it minus those that ended at or before its start."""
    depth = np.zeros(len(track), dtype=np.int32)
    if not len(track):
        return depth
    bounds = np.flatnonzero(np.diff(track)) + 1
    for lo, hi in zip(np.r_[0, bounds], np.r_[bounds, len(track)]):
        s, e = start[lo:hi], end[lo:hi]
        ended = np.searchsorted(np.sort(e), s, side="right")
        depth[lo:hi] = np.maximum(np.arange(hi - lo) - ended, 0)
    return depth


SRC_TABLES = ("gpu_ops", "api_calls", "cpu_ops", "nvtx")
KIND_ENUM = pl.Enum(list(KINDS))
SRC_ENUM = pl.Enum(list(SRC_TABLES))
_TRACK_KINDS = {
    "gpu": (0, ("rank", "device", "stream")),
    "nvtx": (1, ("rank", "pid", "tid")),
    "cpu": (2, ("rank", "pid", "tid")),
}


def build_tracks(
    gpu_ops: pl.DataFrame, api_calls: pl.DataFrame, cpu_ops: pl.DataFrame, nvtx: pl.DataFrame
) -> TimelineTracks:
    """Every event of a trace on its track (module docstring). Each table is put on its tracks by
    its own few integer key columns (no string keys over a million rows); only host-thread events
    are sorted for nesting."""
    parts = []  # (track kind, events with their key columns)
    for df, src, kind, tkind in (
        (gpu_ops, "gpu_ops", None, "gpu"),
        (api_calls, "api_calls", "api", "cpu"),
        (cpu_ops, "cpu_ops", "cpu_op", "cpu"),
        (nvtx, "nvtx", "nvtx", "nvtx"),
    ):
        key = list(_TRACK_KINDS[tkind][1])
        if not df.height:
            continue
        parts.append(
            (
                tkind,
                df.with_row_index("row")
                .select(
                    *[pl.col(c).cast(pl.Int64) for c in key],
                    "start_ns",
                    "end_ns",
                    pl.col("name").cast(pl.Categorical),
                    (pl.col("kind") if kind is None else pl.lit(kind))
                    .cast(KIND_ENUM)
                    .alias("kind"),
                    pl.lit(src, SRC_ENUM).alias("src"),
                    pl.col("row").cast(pl.Int64),
                )
                .filter(pl.col("start_ns").is_not_null() & pl.col("end_ns").is_not_null()),
            )
        )
    parts = [(t, p) for t, p in parts if p.height]
    if not parts:
        return TimelineTracks(
            0, 0, pl.DataFrame(schema=TRACK_SCHEMA), pl.DataFrame(schema=EVENT_SCHEMA)
        )
    origin = min(int(p["start_ns"].min()) for _, p in parts)
    # the tracks: the unique keys of each kind, ordered by rank, then streams, NVTX, host threads
    key_frames = []
    for tkind, (order, key) in _TRACK_KINDS.items():
        ks = [p.select(key) for t, p in parts if t == tkind]
        if ks:
            k = pl.concat(ks).unique()
            key_frames.append(
                k.with_columns(
                    [
                        pl.lit(None, pl.Int64).alias(c)
                        for c in ("device", "stream", "pid", "tid")
                        if c not in k.columns
                    ]
                ).with_columns(pl.lit(tkind).alias("tkind"), pl.lit(order, pl.Int8).alias("_o"))
            )
    cols = ["tkind", "rank", "device", "stream", "pid", "tid", "_o"]
    keys = (
        pl.concat([k.select(cols) for k in key_frames])
        .sort("rank", "_o", "device", "stream", "pid", "tid", nulls_last=True)
        .with_row_index("track")
        .with_columns(pl.col("track").cast(pl.Int32))
    )
    out = []
    for tkind, p in parts:
        key = list(_TRACK_KINDS[tkind][1])
        tk = keys.filter(pl.col("tkind") == tkind).select("track", *key)
        p = p.join(tk, on=key, how="left", nulls_equal=True).select(
            "track",
            (pl.col("start_ns") - origin).alias("start_ns"),
            (pl.max_horizontal("start_ns", "end_ns") - origin).alias("end_ns"),
            "name",
            "kind",
            "src",
            "row",
        )
        # a stream runs its ops in order: a slight overlap is clock skew, not nesting
        if tkind == "gpu":
            p = p.with_columns(pl.lit(0, pl.Int32).alias("depth"))
        out.append((tkind, p))
    host = [p for t, p in out if t != "gpu"]
    events = [p for t, p in out if t == "gpu"]
    if host:
        h = pl.concat(host).sort("track", "start_ns", "end_ns", descending=[False, False, True])
        depth = _depths(h["track"].to_numpy(), h["start_ns"].to_numpy(), h["end_ns"].to_numpy())
        events.append(h.with_columns(pl.Series("depth", depth, dtype=pl.Int32)))
    ev = pl.concat(
        [
            e.select("track", "depth", "start_ns", "end_ns", "name", "kind", "src", "row")
            for e in events
        ]
    ).sort("start_ns")
    rows = ev.group_by("track").agg((pl.col("depth").max() + 1).alias("rows"))
    tracks = (
        keys.join(rows, on="track", how="left")
        .with_columns(
            pl.when(pl.col("tkind") == "gpu")
            .then(pl.format("GPU {} · stream {}", "device", "stream"))
            .when(pl.col("tkind") == "nvtx")
            .then(pl.format("NVTX · thread {}", "tid"))
            .otherwise(pl.format("CPU thread {}", "tid"))
            .alias("label"),
            pl.format("rank {}", "rank").alias("group"),
        )
        .select(
            "track",
            pl.col("tkind").alias("kind"),
            "label",
            "group",
            "rank",
            "device",
            "stream",
            "pid",
            "tid",
            pl.col("rows").cast(pl.Int32),
        )
        .sort("track")
    )
    return TimelineTracks(origin, int(ev["end_ns"].max()), tracks, ev)


TRACK_SCHEMA = pl.Schema(
    {
        "track": pl.Int32,
        "kind": pl.String,
        "label": pl.String,
        "group": pl.String,
        "rank": pl.Int64,
        "device": pl.Int64,
        "stream": pl.Int64,
        "pid": pl.Int64,
        "tid": pl.Int64,
        "rows": pl.Int32,
    }
)
EVENT_SCHEMA = pl.Schema(
    {
        "track": pl.Int32,
        "depth": pl.Int32,
        "start_ns": pl.Int64,
        "end_ns": pl.Int64,
        "name": pl.Categorical(),
        "kind": KIND_ENUM,
        "src": SRC_ENUM,
        "row": pl.Int64,
    }
)


@dataclass
class Window:
    start_ns: float
    end_ns: float
    width_px: int
    detailed: bool  # every event in the window is its own mark
    events_in_window: int
    # track, depth, start_ns, end_ns, name, kind, src, row (-1: merged), count,
    marks: pl.DataFrame
    # busy_ns (the events' time inside the mark)


def window(
    tt: TimelineTracks,
    start_ns: float,
    end_ns: float,
    width_px: int = 1200,
    *,
    max_events: int = MAX_EVENTS,
    min_px: float = MIN_PX,
) -> Window:
    """What to draw of the trace between start_ns and end_ns (relative times) at width_px (module docstring)."""
    start_ns, end_ns = float(start_ns), float(end_ns)
    if not end_ns > start_ns:
        end_ns = start_ns + 1.0
    width_px = max(50, int(width_px))
    ev = tt.events
    hi = int(ev["start_ns"].search_sorted(int(np.ceil(end_ns)), side="right")) if ev.height else 0
    vis = ev.slice(0, hi).filter(pl.col("end_ns") >= start_ns)
    base = vis.with_columns(
        pl.lit(1, pl.UInt32).alias("count"),
        (
            pl.min_horizontal(pl.col("end_ns"), pl.lit(end_ns))
            - pl.max_horizontal(pl.col("start_ns"), pl.lit(start_ns))
        ).alias("busy_ns"),
    )
    if vis.height <= max_events:
        return Window(
            start_ns,
            end_ns,
            width_px,
            True,
            vis.height,
            base.with_columns(pl.col("start_ns", "end_ns", "busy_ns").cast(pl.Float64)),
        )
    px = (end_ns - start_ns) / width_px
    wide = base.filter((pl.col("end_ns") - pl.col("start_ns")) >= min_px * px)
    narrow = base.filter((pl.col("end_ns") - pl.col("start_ns")) < min_px * px).with_columns(
        ((pl.col("start_ns") - start_ns) / px)
        .floor()
        .clip(0, width_px - 1)
        .cast(pl.Int32)
        .alias("_bin"),
        (pl.col("end_ns") - pl.col("start_ns")).alias("_d"),
    )
    merged = (
        narrow.group_by("track", "depth", "_bin")
        .agg(
            pl.len().cast(pl.UInt32).alias("count"),
            pl.col("busy_ns").sum(),
            pl.col("name").sort_by("_d").last(),
            pl.col("kind").sort_by("_d").last(),
            pl.col("src").sort_by("_d").last(),
            pl.col("row").first(),
        )
        .with_columns(
            (start_ns + pl.col("_bin") * px).alias("start_ns"),
            (start_ns + (pl.col("_bin") + 1) * px).alias("end_ns"),
            pl.when(pl.col("count") == 1).then(pl.col("row")).otherwise(-1).alias("row"),
        )
    )
    cols = [
        "track",
        "depth",
        "start_ns",
        "end_ns",
        "name",
        "kind",
        "src",
        "row",
        "count",
        "busy_ns",
    ]
    marks = pl.concat(
        [
            wide.select(
                [
                    pl.col(c).cast(pl.Float64)
                    if c in ("start_ns", "end_ns", "busy_ns")
                    else pl.col(c)
                    for c in cols
                ]
            ),
            merged.select(
                [
                    pl.col(c).cast(pl.Float64)
                    if c in ("start_ns", "end_ns", "busy_ns")
                    else pl.col(c)
                    for c in cols
                ]
            ),
        ]
    )
    return Window(start_ns, end_ns, width_px, False, vis.height, marks)


def with_launches(tt: TimelineTracks, gpu_ops: pl.DataFrame, marks: pl.DataFrame) -> pl.DataFrame:
    """The marks with, for single GPU ops, their launch call (launch, link_start_ns, link_end_ns
    relative to the trace's origin, link_track: the CPU-thread track that made it, -1 when the call
    is not in the trace) and the launch delay (delay_ns, analyzers.timeline's definition; null
    without a launch call)."""
    rows = marks.filter((pl.col("src") == "gpu_ops") & (pl.col("row") >= 0))["row"].unique().sort()
    # only the rows drawn (a window of a million-event trace draws a few thousand): gathered, not
    # joined
    g = (
        gpu_ops[rows.to_list()]
        .with_columns(pl.Series("row", rows, dtype=pl.Int64))
        .select(
            pl.col("row").cast(pl.Int64),
            pl.col("launch_api").alias("launch"),
            (pl.col("api_start_ns") - tt.origin_ns).cast(pl.Float64).alias("link_start_ns"),
            (pl.col("api_end_ns") - tt.origin_ns).cast(pl.Float64).alias("link_end_ns"),
            pl.col("launch_delay_ns").cast(pl.Float64).alias("delay_ns"),
            pl.col("rank").cast(pl.Int64),
            pl.col("pid").cast(pl.Int64),
            pl.col("api_tid").cast(pl.Int64).alias("tid"),
        )
    )
    cpu = tt.tracks.filter(pl.col("kind") == "cpu").select(
        "rank", "pid", "tid", pl.col("track").alias("link_track")
    )
    g = (
        g.join(cpu, on=["rank", "pid", "tid"], how="left")
        .drop("rank", "pid", "tid")
        .with_columns(pl.lit("gpu_ops", SRC_ENUM).alias("src"))
    )
    out = marks.join(g, on=["src", "row"], how="left", maintain_order="left")
    return out.with_columns(pl.col("link_track").fill_null(-1).cast(pl.Int32))
