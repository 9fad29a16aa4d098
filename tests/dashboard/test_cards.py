"""Metric cards (dashboard.web.render_html.cards_html): one HTML element per Metrics block in the app
(st.html) and in the exports, with what st.metric showed: label, value, help as a tooltip, the
change and its colour."""

from __future__ import annotations

from dashboard.web.render_html import CARDS_CSS, cards_html, render_html
from dashboard.web.reports.report_blocks import Metrics, Report
from tests.dashboard.helpers import parse_cards

ITEMS = [
    ("duration", "1.06 ms", "gpu__time_duration.sum", "-0.885 ms"),
    ("DRAM", "5.79 MB/s", "`dram__bytes` / duration", "+12.0 %"),
    ("FP32", "261 GFLOP/s", None),
    ("unchanged", "7.504 ms", "x", ""),
]


def _seen(b: Metrics):
    return [(c.label, c.value, c.help, c.delta, c.direction) for c in parse_cards(cards_html(b))]


def test_each_card_keeps_label_value_help_and_change():
    assert _seen(Metrics(ITEMS)) == [
        ("duration", "1.06 ms", "gpu__time_duration.sum", "-0.885 ms", "bad"),
        # help markdown rendered (<code>)
        ("DRAM", "5.79 MB/s", "dram__bytes / duration", "+12.0 %", "good"),
        ("FP32", "261 GFLOP/s", "", None, None),  # no help: no "?"
        ("unchanged", "7.504 ms", "x", None, None),
    ]  # an empty change draws nothing
    assert "<code>dram__bytes</code>" in cards_html(Metrics(ITEMS))


def test_lower_is_better_turns_the_colours_round():
    seen = _seen(Metrics(ITEMS, lower_is_better=True))
    assert [d for *_, d in seen[:2]] == ["good", "bad"]
    assert "↓ -0.885 ms" in cards_html(Metrics(ITEMS)) and "↑ +12.0 %" in cards_html(Metrics(ITEMS))


def test_rows_of_three_above_five_cards_else_one_row_each_at_least_190_px():
    """Cards wrap onto more rows rather than shrink below 190 px (a value is never clipped): at most
    three a row above five cards, else all in one row when the page is wide enough."""
    assert "minmax(max(190px, calc((100% - 32px) / 3)), 1fr)" in cards_html(
        Metrics([(str(i), "1", None) for i in range(6)])
    )
    assert "minmax(max(190px, calc((100% - 64px) / 5)), 1fr)" in cards_html(
        Metrics([(str(i), "1", None) for i in range(5)])
    )
    assert "minmax(max(190px, calc((100% - 0px) / 1)), 1fr)" in cards_html(
        Metrics([("a", "1", None)])
    )
    assert "auto-fit" in cards_html(Metrics([("a", "1", None)]))
    assert "overflow: hidden" not in CARDS_CSS.split(".ks-card .ks-v")[1].split("}")[0]


def test_what_a_profiled_program_named_is_escaped():
    evil = '<img src=x onerror="alert(1)">'
    out = cards_html(Metrics([(evil, evil, evil, evil)]))
    assert "<img" not in out and "&lt;img" in out
    assert _seen(Metrics([(evil, evil, evil, evil)])) == [(evil, evil, evil, evil, "good")]


def test_the_app_draws_one_element_per_block_with_its_styles():
    from streamlit.testing.v1 import AppTest

    def page():
        from dashboard.web.render_streamlit import render_streamlit
        from dashboard.web.reports.report_blocks import Metrics

        render_streamlit(
            [Metrics([("a", "1", "h", "+1"), ("b", "2", None)]), Metrics([("c", "3", None)])]
        )

    at = AppTest.from_function(page).run()
    bodies = [e.proto.body for e in at.get("html")]
    assert len(bodies) == 2 and not at.get("metric")
    assert all(b.startswith("<style>") and ".ks-q:hover .ks-tip" in b for b in bodies)
    assert [(c.label, c.value) for b in bodies for c in parse_cards(b)] == [
        ("a", "1"),
        ("b", "2"),
        ("c", "3"),
    ]


def test_the_export_has_the_cards_and_their_styles():
    out = render_html([Report("t", [Metrics(ITEMS)])])
    assert ".ks-q:hover .ks-tip" in out
    assert [c.label for c in parse_cards(out)] == ["duration", "DRAM", "FP32", "unchanged"]
