"""Shared setup of the dashboard tests: a store with real samples and two bench runs, and AppTest helpers."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.conftest import H200_KERNELS, H200_TORCH, REPO
from dashboard.core.source import Source

APP = str(REPO / "dashboard" / "web" / "app.py")
FULL = H200_KERNELS / "full.ncu-rep.gz"
BASIC = H200_KERNELS / "basic.ncu-rep.gz"


def _rec(case, metric, value, unit, params=None, cv=0.004):
    return {
        "case": case,
        "metric": metric,
        "value": value,
        "unit": unit,
        "params": params or {},
        "cv": cv,
        "n": 20,
        "source": "event timing",
        "notes": None,
        "flags": [],
    }


def bench_doc(gpu: str, scale: float) -> bytes:
    """A bench result document in the format collectors.bench.results reads (numbers are made up,
    scaled per GPU, so the normalisation to each GPU's own peak is visible)."""
    doc = {
        "kernelscope_bench": 1,
        "gpu": {"name": gpu, "uuid": f"GPU-{gpu}"},
        "versions": {"driver": "580"},
        "started": "2026-11-29T00:00:00Z",
        "finished": "2026-11-29T00:10:00Z",
        "failures": [],
        "ceilings": [
            _rec("ceiling", "dram_copy_bandwidth", 4.3e12 * scale, "B/s"),
            _rec("ceiling", "fp32_flop_rate", 60e12 * scale, "FLOP/s"),
            _rec("ceiling", "bf16_dense_flop_rate", 750e12 * scale, "FLOP/s"),
            _rec("ceiling", "h2d_pinned_bandwidth", 55e9, "B/s"),
            _rec("ceiling", "launch_back_to_back", 2.1e-6, "s"),
        ],
        "results": [
            _rec("bank.column_read", "duration", 1.0e-3 / scale, "s", {"stride": 32}),
            _rec("bank.column_read", "duration", 0.05e-3 / scale, "s", {"stride": 33}),
            _rec("littles_law", "bandwidth", 3.9e12 * scale, "B/s", {"occ": 50}),
        ],
    }
    return json.dumps(doc).encode()


def make_store(root: Path) -> dict[str, str]:
    """Ingest the samples (two ncu reports, two traces) and bench runs of two GPUs; returns name -> run id."""
    from collectors.store import Store

    s = Store(root)
    ids = {}
    for key, p in [
        ("basic", BASIC),
        ("full", FULL),
        ("m1_eager", H200_TORCH / "ffn_M1_eager.json.gz"),
        ("m1_graph", H200_TORCH / "ffn_M1_graph.json.gz"),
    ]:
        ids[key] = Source(s).ingest_path(p)[0].run_id
    ids["bench_h200"] = (
        Source(s).ingest_bytes(bench_doc("NVIDIA H200", 1.0), "bench_h200.json")[0].run_id
    )
    ids["bench_h100"] = (
        Source(s).ingest_bytes(bench_doc("NVIDIA H100 80GB HBM3", 0.7), "bench_h100.json")[0].run_id
    )
    return ids


def copy_store(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def walk(node):
    children = getattr(node, "children", None)
    if isinstance(children, dict):
        for c in children.values():
            yield c
            yield from walk(c)


def vega_specs(at) -> list[dict]:
    return [json.loads(e.proto.spec) for e in walk(at._tree) if e.type == "vega_lite_chart"]


def open_page(page: str | None, **params):
    """AppTest of the app, switched to views/<page>.py with query parameters, after one run."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    if page:
        at.switch_page(f"views/{page}.py")
        for k, v in params.items():
            at.query_params[k] = v
        at.run()
    return at


def texts(at) -> str:
    """Every markdown, caption, alert and heading text of the page, joined."""
    parts = []
    for el in walk(at._tree):
        v = getattr(el, "value", None)
        if el.type in (
            "markdown",
            "caption",
            "title",
            "subheader",
            "header",
            "info",
            "warning",
            "error",
            "success",
            "alert",
        ) and isinstance(v, str):
            parts.append(v)
        body = getattr(getattr(el, "proto", None), "body", None)
        if isinstance(body, str) and el.type not in ("markdown",):
            parts.append(body)
    return "\n".join(parts)


def table_data(at) -> list[dict]:
    """The data of every table on the page (dashboard.web.components.table: the HTML table component), in page order."""
    out = []
    for e in walk(at._tree):
        if e.type == "bidi_component" and e.proto.component_name == "kernelscope.table":
            kind = e.proto.WhichOneof("data")
            out.append(json.loads(e.proto.json if kind == "json" else e.proto.mixed.json))
    return out


def all_rows(at):
    """Rerun the page with every long table sent whole (what its "Show all rows" button asks for;
    the keys are render_streamlit's table-<name> and the Kernels page's kernels_table)."""
    parts = [t for t in table_data(at) if t.get("total", 0) > len(t["rows"])]
    for t in parts:
        at.session_state[f"table-{t['name']}:all"] = True
    at.session_state["kernels_table:all"] = True
    return at.run() if parts else at


def frames(at) -> list:
    """The page's tables as polars frames of their raw values (columns named as the report's frame names them)."""
    import polars as pl

    return [
        pl.DataFrame(t["raw"], strict=False) if t["raw"] else pl.DataFrame() for t in table_data(at)
    ]


def dataframes(at) -> list:
    """The same as pandas frames (what AppTest's `at.dataframe[i].value` gave for Streamlit's data grid)."""
    return [f.to_pandas() for f in frames(at)]


def shown(at, name: str):
    """The table `name` as shown: a pandas frame with the column headers and the formatted cells."""
    import pandas as pd

    t = next(t for t in table_data(at) if t.get("name") == name)
    return pd.DataFrame(t["rows"], columns=[c["header"] for c in t["columns"]])


def share_link(at) -> str:
    """The link in the sidebar's share box."""
    return component_data(at, "kernelscope.share")["link"]


def component_data(at, name: str) -> dict:
    """The data a components-v2 component (dashboard.web.components) was given, e.g. "kernelscope.table"."""
    for e in walk(at._tree):
        if e.type == "bidi_component" and e.proto.component_name == name:
            kind = e.proto.WhichOneof("data")
            if kind == "json":
                return json.loads(e.proto.json)
            if kind == "mixed":
                return json.loads(e.proto.mixed.json)
            if kind == "bytes":
                return {"bytes": bytes(e.proto.bytes)}
    raise LookupError(f"no component {name!r} on the page")


def decode_timeline(payload: bytes) -> tuple[dict, dict]:
    """The canvas payload (dashboard.web.timeline_payload) read back as the JavaScript reads it."""
    import struct

    import numpy as np

    assert payload[:4] == b"KSTL"
    n = struct.unpack("<I", payload[4:8])[0]
    head = json.loads(payload[8 : 8 + n])
    body, off, arrays = payload[8 + n :], 0, {}
    for name, dt, cnt in head["arrays"]:
        size = {"f8": 8, "i4": 4, "u1": 1}[dt]
        off += (-off) % size
        arrays[name] = np.frombuffer(
            body, dtype={"f8": "<f8", "i4": "<i4", "u1": "u1"}[dt], count=cnt, offset=off
        )
        off += cnt * size
    return head, arrays


class Card:
    """One metric card of a page (dashboard.web.render_html.cards_html), as the page shows it."""

    def __init__(self):
        self.label = self.value = self.help = ""
        self.delta = None  # the change as shown, None when the card has none
        self.direction = None  # "good" or "bad": the change's colour

    def __repr__(self):
        return f"Card({self.label!r}: {self.value!r}, delta={self.delta!r})"


def parse_cards(html_text: str) -> list[Card]:
    """The cards in an HTML text (an st.html element's body or an export)."""
    from html.parser import HTMLParser

    class P(HTMLParser):
        def __init__(self):
            super().__init__(convert_charrefs=True)
            self.cards: list[Card] = []
            self.field = None  # the card field whose text comes next
            self.depth = 0  # element depth inside that field

        def handle_starttag(self, tag, attrs):
            cls = (dict(attrs).get("class") or "").split()
            if self.field:
                self.depth += 1
                return
            if "ks-card" in cls:
                self.cards.append(Card())
            elif self.cards and {"ks-lt", "ks-v", "ks-d", "ks-tip"} & set(cls):
                self.field = next(c for c in cls if c in ("ks-lt", "ks-v", "ks-d", "ks-tip"))
                self.depth = 0
                if self.field == "ks-d":
                    self.cards[-1].delta = ""
                    self.cards[-1].direction = "good" if "good" in cls else "bad"

        def handle_endtag(self, tag):
            if self.field:
                if self.depth == 0:
                    self.field = None
                else:
                    self.depth -= 1

        def handle_data(self, data):
            if not self.field:
                return
            c = self.cards[-1]
            attr = {"ks-lt": "label", "ks-v": "value", "ks-d": "delta", "ks-tip": "help"}[
                self.field
            ]
            setattr(c, attr, (getattr(c, attr) or "") + data)

    p = P()
    p.feed(html_text)
    for c in p.cards:
        if c.delta:
            c.delta = c.delta.lstrip("↑↓ ")
    return p.cards


def cards(at) -> list[Card]:
    """Every metric card of an AppTest page, in page order."""
    out = []
    for el in walk(at._tree):
        body = getattr(getattr(el, "proto", None), "body", None)
        if el.type == "html" and isinstance(body, str):
            out += parse_cards(body)
    return out
