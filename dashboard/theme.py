"""One look for the app and the exports: an altair theme, number formatting with units, column specs.

Every chart goes through `CHART_THEME` (registered as the altair theme "kernelscope" and enabled on import),
and the app draws charts with `theme=None` so Streamlit does not restyle them: the HTML export then looks
the same as the page. Tables carry their unit in every column label ("duration [µs]").
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import altair as alt

FONT = "Source Sans Pro, Helvetica Neue, Arial, sans-serif"
# colour-blind-safe categorical palette (Okabe-Ito), then a neutral
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000", "#999999"]
SPEC_COLOR = "#B22222"       # spec-sheet peaks (dashed)
MEASURED_COLOR = "#2E7D32"   # measured ceilings (solid)
STATUS_COLORS = {"faster": "#009E73", "slower": "#D55E00", "unchanged": "#999999", "added": "#0072B2",
                 "removed": "#CC79A7"}


def _theme() -> dict:
    return {
        "config": {
            "font": FONT,
            "background": "white",
            "view": {"stroke": None, "continuousWidth": 560, "continuousHeight": 320},
            "title": {"anchor": "start", "fontSize": 15, "fontWeight": 600, "color": "#1f2937", "offset": 10},
            "axis": {"labelFontSize": 12, "titleFontSize": 12, "titleFontWeight": 600, "titleColor": "#374151",
                     "labelColor": "#374151", "gridColor": "#e5e7eb", "domainColor": "#9ca3af",
                     "tickColor": "#9ca3af", "labelLimit": 220},
            "legend": {"labelFontSize": 12, "titleFontSize": 12, "orient": "bottom", "labelLimit": 320},
            "range": {"category": PALETTE},
            "bar": {"color": PALETTE[0]},
            "point": {"filled": True, "size": 70},
            "line": {"strokeWidth": 2},
        }
    }


alt.theme.register("kernelscope", enable=True)(_theme)
CHART_THEME = "kernelscope"


def ensure_theme() -> None:
    """Enable the theme (tests or other code may have switched it)."""
    if alt.theme.active != CHART_THEME:
        alt.theme.enable(CHART_THEME)


# ---- numbers for reading ---------------------------------------------------------------------------

def _num(x: float, digits: int = 3) -> str:
    """Three significant digits, thousands separators, no exponent for ordinary sizes."""
    if x == 0:
        return "0"
    mag = math.floor(math.log10(abs(x)))
    decimals = max(0, digits - 1 - mag)
    return f"{x:,.{decimals}f}"


def _missing(x) -> bool:
    return x is None or (isinstance(x, float) and not math.isfinite(x))


def fmt_ns(ns) -> str:
    """A duration in ns as ns, µs, ms or s."""
    if _missing(ns):
        return "—"
    a = abs(ns)
    for scale, unit in ((1e9, "s"), (1e6, "ms"), (1e3, "µs")):
        if a >= scale:
            return f"{_num(ns / scale)} {unit}"
    return f"{_num(ns)} ns"


def fmt_bytes(b) -> str:
    """A size in bytes with binary prefixes (KiB, MiB, GiB)."""
    if _missing(b):
        return "—"
    a = abs(b)
    for scale, unit in ((2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
        if a >= scale:
            return f"{_num(b / scale)} {unit}"
    return f"{b:,.0f} B"


def fmt_rate(x, unit: str) -> str:
    """A rate in base units per second (B/s, FLOP/s) with decimal prefixes: GB/s, TB/s, TFLOP/s."""
    if _missing(x):
        return "—"
    base = unit.removesuffix("/s")
    a = abs(x)
    for scale, p in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if a >= scale:
            return f"{_num(x / scale)} {p}{base}/s"
    return f"{_num(x)} {base}/s"


def fmt_pct(x, digits: int = 1) -> str:
    """x in percent (already ×100)."""
    return "—" if _missing(x) else f"{x:.{digits}f} %"


def fmt_value(x, unit: str) -> str:
    """A value in a base unit (s, ns, B, B/s, FLOP/s, FLOP, %, count) formatted for reading."""
    if _missing(x):
        return "—"
    if unit == "s":
        return fmt_ns(x * 1e9)
    if unit == "ns":
        return fmt_ns(x)
    if unit in ("B", "bytes"):
        return fmt_bytes(x)
    if unit.endswith("/s"):
        return fmt_rate(x, unit)
    if unit == "%":
        return fmt_pct(x)
    if unit in ("FLOP",):
        return fmt_rate(x, "FLOP/s").removesuffix("/s")
    if unit in ("", "1", "count"):
        return _num(x) if isinstance(x, float) and not float(x).is_integer() else f"{x:,.0f}"
    return f"{_num(x)} {unit}"


# ---- table columns ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Col:
    """How one table column is shown: label and unit (label "duration", unit "µs" -> "duration [µs]"),
    printf format for numbers, a help text naming the source, kind "number" | "text" | "link"."""
    label: str
    unit: str = ""
    fmt: str | None = None
    help: str | None = None
    kind: str = "number"
    link_text: str | None = None   # for kind "link": the text shown instead of the URL (regex or text)

    @property
    def header(self) -> str:
        return f"{self.label} [{self.unit}]" if self.unit else self.label

    def format(self, v) -> str:
        if _missing(v):
            return "—"
        if self.kind != "number" or not isinstance(v, (int, float)) or isinstance(v, bool):
            return str(v)
        if self.fmt:
            try:
                return _commas(self.fmt % v)
            except (TypeError, ValueError):
                return str(v)
        return f"{v:,}" if isinstance(v, int) else _num(v)


def _commas(s: str) -> str:
    """Thousands separators for a formatted number ("12345.67" -> "12,345.67")."""
    head, dot, tail = s.partition(".")
    sign = "-" if head.startswith("-") else ""
    digits = head.lstrip("-")
    if not digits.isdigit():
        return s
    return f"{sign}{int(digits):,}{dot}{tail}"


def text(label: str, help: str | None = None) -> Col:
    return Col(label, kind="text", help=help)


def num(label: str, unit: str = "", fmt: str | None = None, help: str | None = None) -> Col:
    return Col(label, unit, fmt, help)
