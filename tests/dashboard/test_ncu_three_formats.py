"""One report, three formats: the H200 `.ncu-rep` of sample_traces/h200/chapter5_kernels and its raw-page and
details-page CSV exports (ncu's default auto-scaled units and --print-units base) give the same kernel names and
the same numbers, to the precision each export printed, and Compare shows every kernel unchanged."""
from __future__ import annotations

import csv
import gzip
import io
import re

import pytest

from analyzers.compare import compare_runs, totals
from collectors import ncu
from collectors.schema import NCU_METRIC_COLUMNS
from collectors.store import Store
from dashboard.reports.compare import launches
from dashboard.source import Source
from tests.conftest import H200_KERNELS

REPORT = "full.ncu-rep.gz"
EXPORTS = ["full_raw.csv.gz", "full_raw_base.csv.gz", "full_details.csv.gz", "full_details_base.csv.gz"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    src = Source(Store(tmp_path_factory.mktemp("three") / "s"))
    return src, {f: src.ingest_path(H200_KERNELS / f)[0] for f in [REPORT, *EXPORTS]}


def _printed(f: str) -> dict[tuple[int, str], tuple[float, float]]:
    """(launch id, metric) -> (value in base units, half a unit of the last printed digit in base units), read
    from the export's text: the precision each number was printed with."""
    text = gzip.decompress((H200_KERNELS / f).read_bytes()).decode()
    rows = list(csv.reader(io.StringIO(text)))
    out = {}

    def put(kid, metric, raw, unit):
        raw = raw.strip()
        if not re.fullmatch(r"-?[\d,]+(\.\d+)?", raw):
            return
        decimals = len(raw.split(".")[1]) if "." in raw else 0
        value, _ = ncu.ncu_to_base(float(raw.replace(",", "")), unit)
        half, _ = ncu.ncu_to_base(0.5 * 10 ** -decimals, unit)
        out[(kid, metric)] = (value, half)
    hdr = rows[0]
    if "Metric Name" in hdr:
        i = {c: hdr.index(c) for c in ("ID", "Section Name", "Body Item Label", "Metric Name", "Metric Unit",
                                       "Metric Value")}
        for r in rows[1:]:
            if len(r) <= i["Metric Value"] or not r[0].isdigit():
                continue
            name = r[i["Metric Name"]]
            if "__" not in name:
                name = ncu._metric_of_label(r[i["Section Name"]], r[i["Body Item Label"]], name)
            if (int(r[0]), name) not in out:
                put(int(r[0]), name, r[i["Metric Value"]], r[i["Metric Unit"]])
    else:
        units = rows[1]
        for r in rows[2:]:
            for c, (name, raw) in enumerate(zip(hdr, r)):
                if c >= len(ncu.IDENTITY):
                    put(int(r[0]), name, raw, units[c])
    return out


def test_same_names_in_all_three_formats(runs):
    src, r = runs
    ref = src.ncu(r[REPORT]).kernels
    for f in EXPORTS:
        k = src.ncu(r[f]).kernels
        assert k["kernel_name"].to_list() == ref["kernel_name"].to_list(), f
        assert k["short_name"].to_list() == ref["short_name"].to_list(), f
        assert k["kernel_key"].to_list() == ref["kernel_key"].to_list(), f
        assert src.ncu(r[f]).gpu.name == "NVIDIA H200"


@pytest.mark.parametrize("f", EXPORTS)
def test_same_numbers_to_the_printed_precision(runs, f):
    """Every kernel-table value of an export equals the report's within half a unit of the digit the export
    printed (base-unit exports: exactly for integers such as the duration in ns)."""
    src, r = runs
    ref = {row["id"]: row for row in r[REPORT].table("kernels").iter_rows(named=True)}
    got = {row["id"]: row for row in r[f].table("kernels").iter_rows(named=True)}
    printed = _printed(f)
    checked = 0
    for kid, row in got.items():
        for col, metric in NCU_METRIC_COLUMNS.items():
            a, b = row[col], ref[kid][col]
            if a is None or b is None:
                continue
            v, half = printed.get((kid, metric), (a, 0.0))
            assert abs(a - b) <= half * (1 + 1e-9) + 1e-9 * abs(b), (f, kid, col, a, b, half)
            checked += 1
    assert checked > 100
    if f.endswith("_base.csv.gz"):   # durations are whole ns in base units: equal
        assert [got[k]["duration_ns"] for k in sorted(got)] == [ref[k]["duration_ns"] for k in sorted(ref)]


@pytest.mark.parametrize("f", EXPORTS)
def test_compare_shows_every_kernel_unchanged(runs, f):
    src, r = runs
    a, per_launch = launches(src, r[REPORT])
    b, _ = launches(src, r[f])
    cmp = compare_runs(a, b, per_launch=per_launch)
    t = totals(cmp)
    assert t["counts"] == {"slower": 0, "faster": 0, "unchanged": 9, "added": 0, "removed": 0}, cmp


def test_compare_matches_the_same_kernel_named_by_two_demanglers():
    """The canonical name joins names that differ only in the demangler's spelling (formats: ncu CLI export vs
    the ncu-report wheel vs CUPTI), so Compare does not show them as one kernel removed and one added."""
    import polars as pl
    from collectors.kernel_names import canonical_name
    a = pl.DataFrame({"name": [canonical_name("void at::native::(anonymous namespace)::k<(int)8, true>(float *)")],
                      "config": ["grid (1,1,1) block (128,1,1)"], "duration_ns": [1000.0]})
    b = pl.DataFrame({"name": [canonical_name("void at::<unnamed>::k<8, 1>(T1)")],
                      "config": ["grid (1,1,1) block (128,1,1)"], "duration_ns": [1010.0]})
    assert totals(compare_runs(a, b, per_launch=True))["counts"]["unchanged"] == 1
