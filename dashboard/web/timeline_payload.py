"""The timeline component's data as bytes: what `analyzers.timeline_view.window` says to draw,
packed for the canvas renderer (dashboard/web/static/timeline.js), which the Streamlit page and the HTML
export both use.

Layout: b"KSTL", a little-endian uint32 header length, the header as UTF-8 JSON, then the arrays the
header lists (`arrays`: [name, dtype, length], dtype f8 / i4 / u1), each aligned to its element size
from the start of the array section. Names, kinds and source tables are sent once each and referred
to by index.

Kernel colouring: `color` ("bound" or "name") is what the page asked for; with `legend` (an ncu run
of the same program joined: the bound names, their meanings and the ncu run) the marks' `bound`
column (analyzers.join. kernel_bounds, null for marks that are not kernels) is sent as a u1 array
`bound`, an index into legend["names"] (255: none).
"""

from __future__ import annotations

import json
import struct

import numpy as np
import polars as pl

from analyzers.timeline_view import KINDS, TimelineTracks, Window

SRCS = ("gpu_ops", "api_calls", "cpu_ops", "nvtx")


def encode(
    tt: TimelineTracks,
    win: Window,
    marks: pl.DataFrame,
    *,
    selected: dict | None = None,
    font: str | None = None,
    legend: dict | None = None,
    color: str = "name",
) -> bytes:
    marks = marks.with_columns(pl.col("name").cast(pl.String))
    names = (
        pl.concat([marks["name"], marks["launch"]])
        .drop_nulls()
        .unique(maintain_order=True)
        .to_list()
        if "launch" in marks.columns
        else marks["name"].drop_nulls().unique(maintain_order=True).to_list()
    )
    index = {n: i for i, n in enumerate(names)}
    kinds = {k: i for i, k in enumerate(KINDS)}
    srcs = {s: i for i, s in enumerate(SRCS)}

    def ids(col: str, table: dict) -> np.ndarray:
        if col not in marks.columns:
            return np.full(marks.height, -1, dtype=np.int32)
        return np.array(
            [table.get(v, -1) if v is not None else -1 for v in marks[col].to_list()],
            dtype=np.int32,
        )

    def f8(col: str) -> np.ndarray:
        if col not in marks.columns:
            return np.full(marks.height, np.nan)
        return marks[col].cast(pl.Float64).fill_null(float("nan")).to_numpy().astype(np.float64)

    arrays = [
        ("start", "f8", f8("start_ns")),
        ("end", "f8", f8("end_ns")),
        ("busy", "f8", f8("busy_ns")),
        ("track", "i4", marks["track"].cast(pl.Int32).to_numpy()),
        ("depth", "i4", marks["depth"].cast(pl.Int32).to_numpy()),
        ("name", "i4", ids("name", index)),
        ("row", "i4", marks["row"].cast(pl.Int32).to_numpy()),
        ("count", "i4", marks["count"].cast(pl.Int32).to_numpy()),
        ("kind", "u1", ids("kind", kinds).astype(np.uint8)),
        ("src", "u1", ids("src", srcs).astype(np.uint8)),
        ("launch", "i4", ids("launch", index)),
        ("delay", "f8", f8("delay_ns")),
        ("link_start", "f8", f8("link_start_ns")),
        ("link_end", "f8", f8("link_end_ns")),
        (
            "link_track",
            "i4",
            marks["link_track"].cast(pl.Int32).to_numpy()
            if "link_track" in marks.columns
            else np.full(marks.height, -1, dtype=np.int32),
        ),
    ]
    if legend is not None and "bound" in marks.columns:
        bidx = {b: i for i, b in enumerate(legend["names"])}
        arrays.append(
            (
                "bound",
                "u1",
                np.array(
                    [bidx.get(b, 255) if b is not None else 255 for b in marks["bound"].to_list()],
                    dtype=np.uint8,
                ),
            )
        )
    head = {
        "t0": win.start_ns,
        "t1": win.end_ns,
        "end": tt.end_ns,
        "origin_ns": tt.origin_ns,
        "width": win.width_px,
        "detailed": win.detailed,
        "events": win.events_in_window,
        "marks": marks.height,
        "tracks": tt.tracks.select("track", "kind", "label", "group", "rows").to_dicts(),
        "names": names,
        "kinds": list(KINDS),
        "srcs": list(SRCS),
        "selected": selected,
        "font": font,
        "legend": legend,
        "color": color if legend is not None else "name",
        "arrays": [[n, dt, int(len(a))] for n, dt, a in arrays],
    }
    hb = json.dumps(head, separators=(",", ":"), allow_nan=False, default=str).encode()
    out = bytearray(b"KSTL" + struct.pack("<I", len(hb)) + hb)
    body = bytearray()
    for _, dt, a in arrays:
        size = {"f8": 8, "i4": 4, "u1": 1}[dt]
        body += b"\0" * ((-len(body)) % size)
        body += np.ascontiguousarray(a, dtype={"f8": "<f8", "i4": "<i4", "u1": "u1"}[dt]).tobytes()
    return bytes(out + body)
