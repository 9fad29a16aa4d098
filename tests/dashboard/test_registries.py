"""A new format and a new page through their registries alone (collectors.formats, dashboard.web.pages):
one `register` call each, nothing else edited, and the file is recognised, parsed, checked, stored,
listed and exported, and the page is served by the app and opened by a link to a run of the new
kind."""

from __future__ import annotations

import gzip
import os

import pytest

from collectors import formats
from collectors.errors import ArtifactError
from dashboard.web import pages
from tests.conftest import REPO
from tests.support import fake_plugin
from dashboard.core.source import Source

WIDGETS = fake_plugin.MAGIC + b"120\n80\n1000\n"


@pytest.fixture
def registered(monkeypatch, tmp_path):
    monkeypatch.setitem(
        formats.FORMATS,
        "widgets",
        formats.Format(
            "widgets",
            "widget profiler",
            "tests.support.fake_plugin:parse",
            1,
            "widgets",
            check="tests.support.fake_plugin:check",
            by_content=fake_plugin.sniff,
            content_order=5,
        ),
    )
    view = tmp_path / "widgets_view.py"
    view.write_text(fake_plugin.VIEW)
    monkeypatch.setitem(
        pages.PAGES,
        "widgets",
        pages.Page(
            "widgets",
            "Widgets",
            "Analyse",
            str(view),
            ":material/widgets:",
            "tests.support.fake_plugin",
            run_kinds=("widgets",),
        ),
    )
    monkeypatch.setenv("KERNELSCOPE_STORE", str(tmp_path / "store"))
    monkeypatch.setenv("KERNELSCOPE_LOAD_SAMPLES", "0")
    return view


def test_a_registered_format_is_recognised_parsed_checked_and_stored(registered, tmp_path):
    from collectors.ingest import parse_bytes
    from collectors.schema import ITEM_LABELS, KINDS, TABLE_VERSIONS
    from collectors.store import Store

    parsed = parse_bytes(gzip.compress(WIDGETS), "run.wdg.gz")
    assert parsed.kind == "widgets" and parsed.table("widgets")["duration_ns"].sum() == 1200
    assert (
        "widgets" in KINDS
        and TABLE_VERSIONS["widgets"] == 1
        and ITEM_LABELS["widgets"] == "widgets"
    )
    with pytest.raises(
        ArtifactError,
        match=r"bad\.wdg: widgets: duration_ns -5 of widget 1 is "
        r"negative",
    ):
        parse_bytes(fake_plugin.MAGIC + b"3\n-5\n", "bad.wdg")
    store = Store(tmp_path / "store")
    run, new = Source(store).ingest_bytes(WIDGETS, "run.wdg")
    assert new and run.kind == "widgets" and (run.path / "tables-v1").is_dir()
    info = next(r.info for r in store.runs() if r.run_id == run.run_id)
    assert info.item_count == 3 and info.item_label == "widgets"


def test_a_registered_page_is_exported_and_opened_for_its_kind(registered, tmp_path):
    from collectors.store import Store
    from dashboard.web.reports import build_target, export_html

    store = Store(tmp_path / "store")
    run, _ = Source(store).ingest_bytes(WIDGETS, "run.wdg")
    src = Source(store)
    # a run id opens the page of its kind
    rep, shown, _ = build_target(src, run.run_id)
    assert shown == f"widgets?run={run.run_id}" and rep.title == "Widgets"
    assert "3 widgets, 1,200 ns in all" in export_html(src, f"/widgets?run={run.run_id}")


def test_a_registered_page_is_served_by_the_app(registered, tmp_path):
    from streamlit.testing.v1 import AppTest

    from collectors.store import Store

    run, _ = Source(Store(tmp_path / "store")).ingest_bytes(WIDGETS, "run.wdg")
    at = AppTest.from_file(str(REPO / "dashboard" / "web" / "app.py"), default_timeout=60)
    at.run()
    at.switch_page(os.path.relpath(registered, REPO / "dashboard" / "web"))
    at.query_params["run"] = run.run_id
    at.run()
    assert not at.exception, at.exception[0].stack_trace if at.exception else ""
    assert [t.value for t in at.title] == ["Widgets"]
    assert any("3 widgets, 1,200 ns in all" in m.value for m in at.markdown)
