"""The raw page's two readers: rows as ncu quotes them are split at '","'
(collectors.ncu_values._split_rows), any other quoting goes through polars' CSV reader. Both must
give the same tables, on the real H200 exports and on generated rows whose fields hold quotes,
commas and '","' of their own."""

from __future__ import annotations

import csv
import gzip
import io

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collectors import ncu_values
from collectors.errors import ArtifactError
from collectors.ingest import parse_bytes
from tests.conftest import H200_KERNELS


_SPLIT = ncu_values._split_rows


def _rows(name: str) -> list[list[str]]:
    return list(
        csv.reader(io.StringIO(gzip.decompress((H200_KERNELS / name).read_bytes()).decode()))
    )


def _write(rows, quoting=csv.QUOTE_ALL, end="\n") -> bytes:
    buf = io.StringIO()
    csv.writer(buf, quoting=quoting, lineterminator=end).writerows(rows)
    return buf.getvalue().encode()


def _parse(data: bytes, monkeypatch, *, split: bool, used: list | None = None):
    """(kernels, metrics, which reader took each batch) with the split allowed or not."""
    used = [] if used is None else used

    def spy(piece, width):
        r = _SPLIT(piece, width) if split else None
        used.append("split" if r is not None else "csv reader")
        return r

    monkeypatch.setattr(ncu_values, "_split_rows", spy)
    p = parse_bytes(data, "r.csv")
    metrics = p.table("metrics").with_columns(pl.col("metric", "text", "unit").cast(pl.String))
    return p.table("kernels"), metrics, used


@pytest.mark.parametrize("name", ["full_raw.csv.gz", "full_raw_base.csv.gz", "basic_raw.csv.gz"])
def test_ncus_quoting_is_split_and_gives_what_the_csv_reader_gives(name, monkeypatch):
    data = gzip.decompress((H200_KERNELS / name).read_bytes())
    k1, m1, used = _parse(data, monkeypatch, split=True)
    assert used == ["split"]  # the real export takes the split
    k2, m2, used = _parse(data, monkeypatch, split=False)
    assert used == ["csv reader"]
    assert k1.equals(k2) and m1.equals(m2)
    assert m1.height == 9 * (len(_rows(name)[0]) - len(ncu_values.IDENTITY))
    # launch by launch in the header's order, as a report's metrics are
    assert m1["id"].to_list() == sorted(m1["id"].to_list())
    assert (
        m1.filter(pl.col("id") == 0)["metric"].to_list()
        == _rows(name)[0][len(ncu_values.IDENTITY) :]
    )


@pytest.mark.parametrize(
    "how", ["minimal quoting", "CRLF", "a quote in a kernel name", "',' in a kernel name"]
)
def test_other_quoting_goes_to_the_csv_reader_with_the_same_result(how, monkeypatch):
    rows = _rows("full_raw.csv.gz")
    ref_k, ref_m, _ = _parse(_write(rows), monkeypatch, split=True)
    name_col = rows[0].index("Kernel Name")
    if how == "minimal quoting":
        data = _write(rows, csv.QUOTE_MINIMAL)
    elif how == "CRLF":
        data = _write(rows, end="\r\n")
    else:
        rows[3][name_col] = (
            'k<"a">(int)' if how == "a quote in a kernel name" else 'k<"x","y">(int)'
        )
        data = _write(rows)
    k, m, used = _parse(data, monkeypatch, split=True)
    assert used == ["csv reader"]
    assert m.equals(ref_m)
    if how in ("minimal quoting", "CRLF"):
        assert k.equals(ref_k)
    else:
        assert k["raw_name"][1] == rows[3][name_col]
        assert k.drop("kernel_name", "raw_name", "short_name", "kernel_key").equals(
            ref_k.drop("kernel_name", "raw_name", "short_name", "kernel_key")
        )


_TEXT = st.lists(st.sampled_from(list('ab ,"<>()') + ['","']), max_size=8).map("".join)
_VALUE = st.one_of(
    st.sampled_from(
        ["", "n/a", "nan", "inf", "1,234.5", " 7 ", "12,345,678", "no data", '","', '"']
    ),
    st.floats(allow_nan=False, allow_infinity=False, width=32).map(repr),
    _TEXT,
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_any_fields_split_or_read_give_the_same_tables(data, monkeypatch):
    """Generated raw pages, QUOTE_ALL as ncu writes them, whose identity and metric fields may hold
    quotes, commas, '","' and text: the split is taken only where it is exact, and the tables equal
    the CSV reader's."""
    head = ncu_values.IDENTITY + [
        "gpu__time_duration.sum",
        "dram__bytes_read.sum",
        "sm__x.sum",
        "lts__y.avg",
    ]
    units = [""] * len(ncu_values.IDENTITY) + ["ns", "byte", "", "%"]
    n = data.draw(st.integers(1, 5))
    body = []
    for i in range(n):
        ident = [
            str(i),
            "1",
            data.draw(_TEXT),
            "h",
            data.draw(_TEXT),
            "1",
            "7",
            "(32, 1, 1)",
            "(4, 1, 1)",
            "0",
            "9.0",
        ]
        body.append(ident + [str(1000 + i)] + [data.draw(_VALUE) for _ in range(3)])
    raw = _write([head, units, *body])

    def outcome(split):
        used: list[str] = []
        try:
            k, m, _ = _parse(raw, monkeypatch, split=split, used=used)
            return (k, m), used
        # a launch refused (a non-finite duration): refused alike
        except ArtifactError as e:
            return str(e), used

    (got, used1), (want, _) = outcome(True), outcome(False)
    if isinstance(want, str):
        assert got == want
    else:
        assert got[0].equals(want[0]) and got[1].equals(want[1])
    assert used1 == (["split"] if '"' not in "".join("".join(r) for r in body) else ["csv reader"])


def test_metric_count_of_a_raw_page_is_counted_from_its_rows(monkeypatch):
    """metric_count (the most metric rows of one launch) of a raw page comes from the header and the
    rows; it is what counting the metric table gives, also where two rows share a launch ID."""
    from collectors import ncu
    from collectors.ncu import _most_per_launch

    rows = _rows("full_raw.csv.gz")
    width = len(rows[0]) - len(ncu_values.IDENTITY)
    p = parse_bytes(_write(rows), "r.csv")
    assert p.meta["metric_count"] == width == _most_per_launch(p.table("metrics")["id"])
    # two rows with one ID (validate refuses it after the count)
    rows[4][0] = rows[3][0]
    p = ncu.parse(_write(rows), "r.csv")
    assert p.meta["metric_count"] == 2 * width == _most_per_launch(p.table("metrics")["id"])
    with pytest.raises(ArtifactError, match="launch id 1 appears 2 times"):
        parse_bytes(_write(rows), "r.csv")
