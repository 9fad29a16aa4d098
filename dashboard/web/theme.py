"""One look for the app and the exports: the altair theme and the colours.

Every chart goes through `CHART_THEME` (registered as the altair theme "kernelscope" and enabled on
import), and the app draws charts with `theme=None` so Streamlit does not restyle them: the HTML
export then looks the same as the page. (Numbers are formatted by analyzers.units; table columns are
dashboard.web.reports.report_blocks.Col.)
"""

from __future__ import annotations

import altair as alt

#: Kernelscope CJK: the bundled subset of Noto Sans CJK SC (dashboard/web/static/fonts, OFL), so Chinese
#: text renders where the machine has no CJK font (the app serves it, an HTML export embeds it)
FONT = "Source Sans Pro, Source Sans, Helvetica Neue, Arial, Kernelscope CJK, sans-serif"
# colour-blind-safe categorical palette (Okabe-Ito), then a neutral
PALETTE = [
    "#0072B2",
    "#E69F00",
    "#009E73",
    "#D55E00",
    "#CC79A7",
    "#56B4E9",
    "#F0E442",
    "#000000",
    "#999999",
]
SPEC_COLOR = "#B22222"  # spec-sheet peaks (dashed)
MEASURED_COLOR = "#2E7D32"  # measured ceilings (solid)
STATUS_COLORS = {
    "faster": "#009E73",
    "slower": "#D55E00",
    "unchanged": "#999999",
    "too noisy to judge": "#E69F00",
    "added": "#0072B2",
    "removed": "#CC79A7",
}


def _theme() -> dict:
    return {
        "config": {
            "font": FONT,
            "background": "white",
            "view": {"stroke": None, "continuousWidth": 560, "continuousHeight": 320},
            "title": {
                "anchor": "start",
                "fontSize": 15,
                "fontWeight": 600,
                "color": "#1f2937",
                "offset": 10,
            },
            "axis": {
                "labelFontSize": 12,
                "titleFontSize": 12,
                "titleFontWeight": 600,
                "titleColor": "#374151",
                "labelColor": "#374151",
                "gridColor": "#e5e7eb",
                "domainColor": "#9ca3af",
                "tickColor": "#9ca3af",
                "labelLimit": 220,
            },
            "legend": {
                "labelFontSize": 12,
                "titleFontSize": 12,
                "orient": "bottom",
                "labelLimit": 320,
            },
            "range": {"category": PALETTE},
            "bar": {"color": PALETTE[0]},
            "point": {"filled": True, "size": 70},
            "line": {"strokeWidth": 2},
        }
    }


def _dark_theme() -> dict:
    """The same look on Streamlit's dark theme (the OS's dark preference): a transparent background,
    light text and grid lines that read on #0e1117."""
    t = _theme()
    c = t["config"]
    c["background"] = "transparent"
    c["title"]["color"] = "#e6e8ec"
    c["axis"].update(
        {
            "titleColor": "#c9ced6",
            "labelColor": "#c9ced6",
            "gridColor": "#31333f",
            "domainColor": "#6b7280",
            "tickColor": "#6b7280",
        }
    )
    c["legend"].update({"labelColor": "#c9ced6", "titleColor": "#c9ced6"})
    c["range"] = {"category": [x if x != "#000000" else "#e6e8ec" for x in PALETTE]}
    c["header"] = {"labelColor": "#c9ced6", "titleColor": "#c9ced6"}
    return t


alt.theme.register("kernelscope", enable=True)(_theme)
alt.theme.register("kernelscope-dark", enable=False)(_dark_theme)
CHART_THEME = "kernelscope"
DARK_CHART_THEME = "kernelscope-dark"


def ensure_theme(dark: bool = False) -> None:
    """Enable the theme (tests or other code may have switched it); `dark`: the dark variant, for a
    page drawn on Streamlit's dark theme (the HTML export stays light)."""
    want = DARK_CHART_THEME if dark else CHART_THEME
    if alt.theme.active != want:
        alt.theme.enable(want)
