"""What a page shows, as data: titled blocks of text, tables and charts.

The page builders (`dashboard.web.reports.<page>`) return a `Report`; the app draws it with
`dashboard.web.render_streamlit`, the export (`dashboard.web.render_html`) writes the same blocks into one
offline HTML file. So an exported page has the same tables and charts as the page in the browser.

Text blocks are a small markdown subset: `**bold**`, `` `code` `` and [links](url). Anything a user
or a profiled program named (kernel names, file names) goes into them only through `code()`, which
the export escapes and Streamlit shows literally.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from analyzers.units import missing, sig3


_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:")


def safe_link(v):
    """A link column's value as a link target: an http(s) URL or a path on this server; anything
    else (javascript:, data:, another scheme, a scheme-relative //host, control characters) is None,
    shown as no link."""
    if v is None:
        return None
    s = str(v).strip()
    if re.match(r"(?i)^https?://", s):
        return s
    if _SCHEME.match(s) or s.startswith("//") or re.search(r"[\x00-\x1f]", s):
        return None
    return s


@dataclass
class Text:
    md: str
    kind: str = "markdown"  # markdown | caption | info | warning | error | success


@dataclass
class Heading:
    text: str
    level: int = 2  # 2 = subheader, 3 = smaller


@dataclass
class Table:
    name: str
    frame: pl.DataFrame
    cols: dict[str, Col]
    caption: str | None = None
    height: int | None = None
    # a few rows, drawn as a plain table (cheaper in the browser than a data grid)
    static: bool = False
    # the id column of an interactive table (rows select, headers sort; see cells())
    select: str | None = None
    sort: str | None = None  # the column it is sorted by, and the direction
    desc: bool = False
    selected: object = None  # the selected row's id
    full: str | None = None  # a column whose full text shows when hovering the "kernel" cell

    def cells(self, limit: int | None = None) -> dict:
        """The table as the HTML table component (dashboard/web/static/table.js) draws it: headers with
        units and help, every cell already formatted (the same text as the export), link columns as
        links, the id of each row when rows are selectable, and the raw values by column (JSON-safe;
        for tests and tools). With `limit`, only the first `limit` rows (and down to the selected
        one) are sent; `total` says how many the table has."""
        cols = [c for c in self.cols if c in self.frame.columns]
        frame = self.frame
        total = frame.height
        if limit is not None and total > limit:
            upto = limit
            if self.select and self.selected is not None:
                at = [str(x) for x in frame[self.select].to_list()]
                upto = max(
                    limit, at.index(str(self.selected)) + 1 if str(self.selected) in at else 0
                )
            frame = frame.head(upto)
        rows = [
            [
                safe_link(v) if self.cols[c].kind == "link" else self.cols[c].format(v)
                for c, v in zip(cols, r)
            ]
            for r in frame.select(cols).iter_rows()
        ]
        kinds = {
            c: column_class(c, self.cols[c], [row[i] for row in rows]) for i, c in enumerate(cols)
        }
        titles: dict[str, list] = {}
        for i, c in enumerate(cols):
            if kinds[c] == "name":
                full = [row[i] for row in rows]
                short = [shorten(v) for v in full]
                if short != full:
                    titles[c] = full
                    for row, v in zip(rows, short):
                        row[i] = v
        return {
            "columns": [
                {
                    "key": c,
                    "header": self.cols[c].header,
                    "help": self.cols[c].help or "",
                    "num": self.cols[c].kind == "number",
                    "full": c == "kernel" and bool(self.full),
                    "cls": kinds[c],
                    "link": self.cols[c].kind == "link",
                    "link_text": self.cols[c].link_text or "",
                }
                for c in cols
            ],
            "rows": rows,
            "titles": titles,
            "ids": [str(x) for x in frame[self.select].to_list()] if self.select else [],
            "full": frame[self.full].to_list() if self.full and self.full in frame.columns else [],
            "sort": self.sort,
            "desc": self.desc,
            "selected": None if self.selected is None else str(self.selected),
            "height": self.height or (460 if total > 12 else None),
            "name": self.name,
            "total": total,
            "raw": {c: [_json_safe(v) for v in frame[c].to_list()] for c in cols},
        }


#: the longest name a table cell shows; a longer one keeps its head and its tail (where kernels that
#: share a prefix differ: `…_where_0`, `…, 4, 1, 0>`) around an ellipsis, with the full name on
#: hover
NAME_CHARS = 56
#: column keys that hold a name (kernel, file, GPU, case): one line, shortened, the full text on
#: hover
NAME_KEYS = re.compile(
    r"(^|_)(kernel|name|names|source|file|signature|case|op|metric|sass|where|trace)(_|$)",
    re.IGNORECASE,
)
#: a text column whose longest cell is at most this long stays on one line (a verdict, a date);
#: longer text wraps at its spaces
SHORT_TEXT = 24
#: a text column whose longest cell is longer than this gets a wider minimum (table.css td.pw)
LONG_TEXT = 72


def shorten(v: str, n: int = NAME_CHARS) -> str:
    """A long name as a table shows it: head … tail, about n characters; short names unchanged."""
    v = str(v)
    if len(v) <= n:
        return v
    tail = max(12, n // 3)
    return v[: n - tail - 1].rstrip() + "…" + v[-tail:].lstrip()


def column_class(key: str, col: "Col", cells: list) -> str:
    """How a column's cells lay out (dashboard/web/static/table.css): "num" (right-aligned, one line),
    "name" (one line, shortened with an ellipsis, the full text on hover), "prose" (wrapped at
    spaces, never inside a word, with a minimum width: sentences, GPU names), "prose-wide" (the same
    with a wider minimum: long texts) or "" (short text on one line)."""
    if col.kind == "number":
        return "num"
    if col.kind == "link":
        return ""
    # GPU names wrap at their spaces: "NVIDIA H100 SXM" and "… PCIe" differ at the end
    if "gpu" in key.lower():
        return "prose"
    if NAME_KEYS.search(key):
        return "name"
    longest = max((len(str(v)) for v in cells), default=0)
    if longest > LONG_TEXT:
        return "prose-wide"  # a long text (a bench record's parameters): room for a few words more a line
    return "prose" if longest > SHORT_TEXT else ""


@dataclass
class Chart:
    name: str
    chart: Any  # an altair chart
    caption: str | None = None


@dataclass
class Timeline:
    """The zoomable timeline (dashboard/web/static/timeline.js) with its data (dashboard.web.timeline_payload)."""

    name: str
    payload: bytes
    caption: str | None = None


@dataclass
class Metrics:
    # (label, value as shown, help) or (label, value, help, change as shown)
    items: list[tuple]
    lower_is_better: bool = False  # colour of the changes: a negative change is good (durations)


@dataclass
class Report:
    title: str
    blocks: list = field(default_factory=list)
    subtitle: str | None = None

    def add(self, *blocks) -> "Report":
        self.blocks.extend(b for b in blocks if b is not None)
        return self

    def tables(self) -> dict[str, Table]:
        return {b.name: b for b in self.blocks if isinstance(b, Table)}

    def charts(self) -> dict[str, Chart]:
        return {b.name: b for b in self.blocks if isinstance(b, Chart)}


def _json_safe(v):
    """A cell value JSON can carry (NaN and infinities as null)."""
    if isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))):
        return None
    return v if v is None or isinstance(v, (int, float, str, bool)) else str(v)


def code(s) -> str:
    """Inline code span for any user-provided text (kernel or file names): shown literally in both renderers."""
    s = str(s).replace("\n", " ")
    ticks = "`"
    while ticks in s:
        ticks += "`"
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return f"{ticks}{pad}{s}{pad}{ticks}"


# ---------------------------------------------------------------------------------------------------
# Table columns
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Col:
    """How one table column is shown: label and unit (label "duration", unit "µs" -> "duration [µs]"),
    printf format for numbers, a help text naming the source, kind "number" | "text" | "link"."""

    label: str
    unit: str = ""
    fmt: str | None = None
    help: str | None = None
    kind: str = "number"
    # for kind "link": the text shown instead of the URL (regex or text)
    link_text: str | None = None
    # shown = value × scale (a column kept in the analysis's unit, shown in `unit`: ns as µs)
    scale: float | None = None

    @property
    def header(self) -> str:
        return f"{self.label} [{self.unit}]" if self.unit else self.label

    def format(self, v) -> str:
        if missing(v):
            return "—"
        if self.kind != "number" or not isinstance(v, (int, float)) or isinstance(v, bool):
            return str(v)
        if self.scale is not None:
            v = v * self.scale
        if self.fmt:
            try:
                return _commas(self.fmt % v)
            except (TypeError, ValueError):
                return str(v)
        return f"{v:,}" if isinstance(v, int) else sig3(v)


def _commas(s: str) -> str:
    """Thousands separators for a formatted number ("12345.67" -> "12,345.67")."""
    head, dot, tail = s.partition(".")
    sign = "-" if head.startswith("-") else ""
    digits = head.lstrip("-")
    if not digits.isdigit():
        return s
    return f"{sign}{int(digits):,}{dot}{tail}"


def col_of(q) -> Col:
    """A column from a quantity catalog's row (analyzers.quantities): its label, unit, format, help
    and scale."""
    if q.text:
        return text(q.label, q.help or None)
    return num(q.label, q.unit, q.fmt, q.help or None, None if q.scale in (None, 1) else q.scale)


def text(label: str, help: str | None = None) -> Col:
    return Col(label, kind="text", help=help)


def num(
    label: str,
    unit: str = "",
    fmt: str | None = None,
    help: str | None = None,
    scale: float | None = None,
) -> Col:
    return Col(label, unit, fmt, help, scale=scale)
