"""One declaration per quantity (analyzers.quantities): each Nsight Compute launch quantity's label
and unit are the catalog's in the command line's table, the JSON's `units`, the Kernels page's
columns (every column group) and the HTML export — on the bundled H200 report."""

from __future__ import annotations

import html as htm
import re

import polars as pl
import pytest

from analyzers.quantities import (
    BY_COLUMN,
    BY_KEY,
    CLI_KEYS,
    OLD_PAGE_KEYS,
    QUANTITIES,
    json_units,
)
from analyzers.units import convert
from tests.conftest import H200_KERNELS
from tests.dashboard.helpers import component_data, open_page
from tests.support.single_source import _cli, _export
from dashboard.core.source import Source

pytest.importorskip("ncu_report")


def test_every_unit_is_the_unit_tables_and_the_scale_is_the_conversion():
    for q in QUANTITIES:
        if q.text or not q.unit:
            continue
        assert convert(1.0, q.base_unit, q.unit) == pytest.approx(q.scale or 1.0), q.key
    # no two quantities share a page column
    assert len({q.column for q in QUANTITIES}) == len(QUANTITIES)
    # the timeline's statistics per device: units from the unit table, keys of the summary frame
    from analyzers.quantities import TIMELINE_QUANTITIES
    from analyzers.timeline import DEVICE_SUMMARY_COLUMNS

    for q in TIMELINE_QUANTITIES:
        assert q.key in DEVICE_SUMMARY_COLUMNS, q.key
        if q.unit and not q.text:
            assert convert(1.0, q.base_unit, q.unit) == pytest.approx(q.scale or 1.0), q.key


def test_the_pages_keys_are_the_analysis_keys_and_old_links_still_sort(env):
    """Each column of the Kernels page is the analysis's key holding the analysis's value (the
    column scales what it shows), but for the shortened name; a link with an old key sorts the same."""
    from collectors.store import Store
    from dashboard.web.reports.kernels import KERNEL_COLS, display_frame, resolve

    assert [q.key for q in QUANTITIES if q.column != q.key] == ["name"]
    root, run = env
    src = Source(Store(root))
    a = src.ncu(src.store.get(run))
    frame = display_frame(a)
    for q in QUANTITIES:
        if q.on_page and q.key != "name" and q.key in a.kernels.columns:
            want = a.kernels[q.key]
            if q.key == "tensor_peak_fraction":  # shown only for launches that used tensor cores
                want = a.kernels.select(
                    pl.when(pl.col("tensor_type").is_not_null()).then(pl.col(q.key))
                ).to_series()
            assert frame[q.key].to_list() == want.to_list(), q.key
            assert KERNEL_COLS[q.key].scale == (None if q.scale == 1 else q.scale), q.key
    for old, new in OLD_PAGE_KEYS.items():
        view = resolve(src, {"run": run, "sort": old, "by": "launch"})
        assert view.sort == new and not view.problems, (old, view.problems)
    # the measurement that flips it: a key that never was one is refused, and said
    view = resolve(src, {"run": run, "sort": "dram_gbps_typo", "by": "launch"})
    assert view.sort == "id" and view.problems


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    from collectors.store import Store

    root = tmp_path_factory.mktemp("catalog") / "store"
    return root, Source(Store(root)).ingest_path(H200_KERNELS / "full.ncu-rep.gz")[0].run_id


@pytest.fixture
def env(store, monkeypatch, tmp_path):
    from dashboard.web import data

    monkeypatch.setenv("KERNELSCOPE_STORE", str(store[0]))
    monkeypatch.setenv("KERNELSCOPE_SAMPLES", str(tmp_path / "none"))
    data.clear_caches()
    yield store
    data.clear_caches()


def test_cli_table_and_json_units_come_from_the_catalog(env, capsys):
    from dashboard.cli import main

    root, run = env
    rep = _cli(capsys, "analyze", run, "--format", "json", "--store", str(root))
    assert rep["units"] == json_units()
    assert set(rep["units"]) <= set(rep["kernels"][0])
    assert main(["analyze", run, "--store", str(root)]) == 0
    header = capsys.readouterr().out.splitlines()
    line = next(ln for ln in header if ln.startswith("launch id  "))
    cells = [c for c in re.split(r"\s{2,}", line.strip()) if c]
    assert cells[: len(CLI_KEYS)] == [BY_KEY[k].header for k in CLI_KEYS]


def test_page_and_export_headers_come_from_the_catalog(env):
    from dashboard.web.reports.kernels import COLUMN_GROUPS

    root, run = env
    seen = set()
    for group in COLUMN_GROUPS:
        at = open_page("kernels", run=run, cols=group, by="launch")
        assert not at.exception
        cols = component_data(at, "kernelscope.table")["columns"]
        html = _export(root, f"kernels?run={run}&cols={group}&by=launch")
        heads = [
            htm.unescape(re.sub(r"<[^>]+>", "", h))
            for t in re.findall(r"<table>(.*?)</table>", html, re.S)
            for h in re.findall(r"<th[^>]*>(.*?)</th>", t, re.S)
        ]
        for c in cols:
            q = BY_COLUMN.get(c["key"])
            if q is None:
                # not a launch quantity (the textbook model's columns, a flag)
                continue
            assert c["header"] == q.header, (group, c["key"])
            assert q.header in heads, (group, q.header)
            seen.add(q.key)
    on_page = {q.key for q in QUANTITIES if q.on_page}
    # shown only with a measured DRAM ceiling in the store
    assert on_page - seen <= {"dram_measured_fraction"}
