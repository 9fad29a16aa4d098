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
    from dashboard.web import store_access

    monkeypatch.setenv("KERNELSCOPE_STORE", str(store[0]))
    monkeypatch.setenv("KERNELSCOPE_SAMPLES", str(tmp_path / "none"))
    store_access.clear_caches()
    yield store
    store_access.clear_caches()


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


def test_a_traces_json_units_and_device_rows_come_from_the_timeline_catalog(capsys, tmp_path):
    """`kernelscope analyze TRACE --format json` on the eager LLM decode: every key of `summary`,
    `summary.devices` and `kernels` has its unit in `units`, spelled as analyzers.units spells it;
    each device key holds its catalog column (TIMELINE_QUANTITIES) in that unit; the run's keys
    share their device column's unit."""
    from analyzers.quantities import (
        TIMELINE_BY_KEY,
        TRACE_DEVICE_JSON,
        TRACE_RUN_JSON,
        trace_json_units,
    )
    from analyzers.units import BASE_UNITS, to_base
    from collectors.store import Store
    from tests.conftest import SAMPLES

    trace = SAMPLES / "llm_workloads" / "h100" / "decode_eager.json.gz"
    rep = _cli(capsys, "analyze", str(trace), "--format", "json", "--store", str(tmp_path / "s"))
    units = rep["units"]
    assert units == trace_json_units()
    assert set(rep["summary"]) - {"devices"} == set(units["summary"])
    assert set(rep["devices"][0]) == set(units["devices"]) == set(rep["summary"]["devices"][0])
    assert set(rep["kernels"][0]) == set(units["kernels"])
    for section in units.values():
        for unit in section.values():
            assert unit in ("text", "") or to_base(1.0, unit)[1] in BASE_UNITS, unit
    # each device value is the summary column's, in the JSON key's unit
    src = Source(Store(tmp_path / "s2"))
    row = src.trace(src.ingest_path(trace)[0]).summary.devices.row(0, named=True)
    for key, col, _ in TRACE_DEVICE_JSON:
        q = TIMELINE_BY_KEY[col]
        got, want = rep["devices"][0][key], row[col]
        if q.text or got is None or want is None or col in ("rank", "device"):
            continue
        unit = units["devices"][key]
        assert unit == ("µs" if key.endswith("_us") else q.base_unit or "count"), key
        if unit == "µs":
            assert got == pytest.approx(convert(want, q.base_unit, "µs"), abs=1e-3), key
        else:
            assert got == pytest.approx(want, abs=1e-6), key
    # the run's keys that sum or take a device statistic share its unit
    device_key = {c: k for k, c, _ in TRACE_DEVICE_JSON}
    for key, col in TRACE_RUN_JSON.items():
        if col in device_key:
            assert units["summary"][key] == units["devices"][device_key[col]], key
