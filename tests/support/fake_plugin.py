"""A format and a page that exist only in tests, added through the registries alone
(collectors.formats, dashboard.web.pages): a "widget profiler" whose files start with b"WIDGETS 1" and
hold one duration (ns) per line."""

from __future__ import annotations

import polars as pl

from collectors.errors import ArtifactError
from collectors.schema import Parsed
from dashboard.web.reports.report_blocks import Report, Text

MAGIC = b"WIDGETS 1\n"


def sniff(head: bytes, data: bytes, lname: str) -> bool:
    return head.startswith(MAGIC)


def parse(data: bytes, name: str) -> Parsed:
    values = [int(x) for x in data[len(MAGIC) :].split()]
    df = pl.DataFrame(
        {"widget": list(range(len(values))), "duration_ns": values},
        schema={"widget": pl.Int64, "duration_ns": pl.Int64},
    )
    return Parsed(
        "widgets", {"widgets": df}, {"source_format": "widgets", "item_count": len(values)}
    )


def check(parsed: Parsed, name: str) -> None:
    bad = parsed.table("widgets").filter(pl.col("duration_ns") < 0)
    if bad.height:
        raise ArtifactError(
            name,
            f"widgets: duration_ns {bad['duration_ns'][0]} of widget {bad['widget'][0]} is negative",
        )


def build(src, params: dict) -> Report:
    """The widget page: the run's widgets and their total time."""
    run = (
        src.get_kind(params["run"], ("widgets",), "a widget profile") if params.get("run") else None
    )
    rep = Report("Widgets")
    if run is None:
        return rep.add(Text("No widget profile chosen."))
    df = run.table("widgets")
    return rep.add(Text(f"{df.height} widgets, {df['duration_ns'].sum():,} ns in all"))


VIEW = """import streamlit as st

from dashboard.web import store_access
from dashboard.web.render_streamlit import render_streamlit
from tests.support.fake_plugin import build

st.title("Widgets")
render_streamlit(build(store_access.source(), dict(st.query_params)))
"""
