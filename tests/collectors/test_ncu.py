"""Nsight Compute ingestion on the real H200 exports in sample_traces/h200/chapter5_kernels/."""

from __future__ import annotations

import math

import polars as pl
import pytest

from collectors.ingest import parse_bytes
from collectors.errors import ArtifactError
from collectors.ncu import ncu_to_base as to_base
from tests.conftest import H200_KERNELS
from dashboard.core.source import Source

FULL = [
    "full.ncu-rep.gz",
    "full_raw.csv.gz",
    "full_raw_base.csv.gz",
    "full_details.csv.gz",
    "full_details_base.csv.gz",
]
ALL = FULL + ["basic.ncu-rep.gz", "basic_raw.csv.gz"]
NAMES = [
    "ks_copy_u4",
    "ks_transpose16",
    "ks_transpose16_pad",
    "ks_transpose32",
    "ks_transpose32_pad",
    "ks_colread4",
    "ks_colread4",
    "ks_matmul_64x64",
    "ks_matmul_128x128",
]


def load(name):
    return parse_bytes((H200_KERNELS / name).read_bytes(), name)


@pytest.fixture(scope="module")
def parsed():
    return {n: load(n) for n in ALL}


@pytest.mark.parametrize("name", ALL)
def test_every_export_gives_the_nine_launches(parsed, name):
    p = parsed[name]
    k = p.table("kernels")
    assert k.schema == __import__("collectors.ncu", fromlist=["KERNEL_SCHEMA"]).KERNEL_SCHEMA
    assert k["short_name"].to_list() == NAMES
    assert k["id"].to_list() == list(range(9))
    assert p.meta["gpu_name"] == "NVIDIA H200"
    assert k["cc"].unique().to_list() == ["9.0"]
    assert k["block_x"].to_list()[:2] == [256, 16] and k["grid_x"].to_list()[7] == 192


def test_fixed_numbers_from_the_full_report(parsed):
    k = parsed["full_raw_base.csv.gz"].table("kernels")
    row = {c: k[c].to_list() for c in k.columns}
    assert row["duration_ns"][0] == 283680
    assert row["dram_read_bytes"][0] == 536_881_920
    assert row["dram_write_bytes"][0] == 514_216_960
    # shared-memory column read: stride 32 words -> every lane in one bank; stride 33 ->
    # conflict-free
    assert row["smem_ld_wavefronts"][5:7] == [276_824_064, 8_650_752]
    assert row["smem_ld_bank_conflicts"][5:7] == [268_173_312, 0]
    assert row["registers_per_thread"][7:9] == [40, 100]
    assert row["smem_config_bytes"][7:9] == [135_168, 135_168]


@pytest.mark.parametrize("name", FULL)
def test_formats_agree_with_base_units(parsed, name):
    """Auto-scaled units (ms, Gbyte, Kbyte/block...) converted to base units match --print-units base."""
    ref = parsed["full_raw_base.csv.gz"].table("kernels")
    k = parsed[name].table("kernels")
    # auto-scaled units print a fixed number of decimals in the chosen unit (raw page: 6, e.g.
    # 0.000006 Gbyte; details page with labels: 2, e.g. 1.07 Gbyte), so the error is bounded
    # relative to the column's scale
    assert k.height == ref.height > 0
    tol = {"full_raw.csv.gz": 1e-5, "full_details.csv.gz": 5e-3}.get(name, 1e-9)
    for col in [
        "duration_ns",
        "dram_read_bytes",
        "dram_write_bytes",
        "smem_ld_wavefronts",
        "smem_ld_bank_conflicts",
        "smem_config_bytes",
        "smem_static_bytes",
        "registers_per_thread",
        "theoretical_occupancy_pct",
        "achieved_occupancy_pct",
        "global_ld_sectors",
        "l2_read_sectors_from_l1",
    ]:
        scale = max(abs(v) for v in ref[col].to_list())
        for a, b in zip(k[col].to_list(), ref[col].to_list()):
            assert a is not None and b is not None, (col, name)
            # .ncu-rep has full precision where the base-unit CSV rounds percentages to 2 decimals
            assert math.isclose(a, b, abs_tol=tol * scale + 0.006), (col, a, b)


def test_every_metric_is_kept(parsed):
    m = parsed["full_raw_base.csv.gz"].table("metrics")
    assert m.filter(pl.col("id") == 0).height == 2227  # 2238 columns - 11 identity columns
    dn = m.filter((pl.col("id") == 0) & (pl.col("metric") == "device__attribute_display_name"))
    assert dn["text"].to_list() == ["NVIDIA H200"]
    assert (
        parsed["full_raw_base.csv.gz"].meta["device_attributes"]["reserved_shared_memory_per_block"]
        == 1024
    )


@pytest.mark.parametrize(
    "value,unit,expect,base",
    [
        (0.28368, "ms", 283680, "ns"),
        (283.68, "us", 283680, "ns"),
        (1.5, "Gbyte", 1.5e9, "byte"),
        (32.768, "Kbyte", 32768, "byte"),
        (1.088, "Kbyte/block", 1088, "byte/block"),
        (1.97, "Ghz", 1.97e9, "hz"),
        (2.5, "Tbyte/s", 2.5e12, "byte/s"),
        (3.0, "sector/us", 3e6, "sector/s"),
        (4.0, "%/Kbyte", 0.004, "%/byte"),
        (7.0, "inst/cycle", 7.0, "inst/cycle"),
        (5.0, "nsecond", 5.0, "ns"),
        (2.0, "msecond", 2e6, "ns"),
        (12.0, "", 12.0, ""),
    ],
)
def test_unit_conversion(value, unit, expect, base):
    v, u = to_base(value, unit)
    assert math.isclose(v, expect, rel_tol=1e-12) and u == base


def test_locale_with_decimal_comma_and_noise_lines():
    text = (
        '==PROF== Connected to process 1\n"ID","Process ID","Process Name","Host Name","Kernel '
        'Name","Context","Stream","Block Size","Grid '
        'Size","Device","CC","gpu__time_duration.sum","dram__bytes_read.sum"\n'
        '"","","","","","","","","","","","us","byte"\n'
        '"0","1","a","h","k(int)","1","7","(256, 1, 1)","(8, 1, '
        '1)","0","8.6","1,5","27.595.520"\n'
        "==PROF== Disconnected\n"
    )
    p = parse_bytes(text.encode(), "eu.csv")
    k = p.table("kernels")
    assert k["duration_ns"].to_list() == [1500.0]
    assert k["dram_read_bytes"].to_list() == [27_595_520.0]
    assert k["short_name"].to_list() == ["k"]


def test_na_values_are_null_not_zero():
    text = (
        '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block '
        'Size","Grid '
        'Size","Device","CC","gpu__time_duration.sum","dram__bytes_read.sum"\n"","","","","","","","","","","","ns","byte"\n'
        '"0","1","a","h","k","1","7","(32, 1, 1)","(1, 1, 1)","0","9.0","1,000","n/a"\n'
    )
    k = parse_bytes(text.encode(), "na.csv").table("kernels")
    assert k["duration_ns"].to_list() == [1000.0] and k["dram_read_bytes"].to_list() == [None]


def test_short_names():
    from collectors.ncu import short_name

    assert (
        short_name("void at::native::vectorized_elementwise_kernel<4, float>(int, float*)")
        == "vectorized_elementwise_kernel"
    )
    assert short_name("ks_copy_u4") == "ks_copy_u4"


# ---- broken inputs ---------------------------------------------------------------------------


def _bad_inputs():
    raw = (H200_KERNELS / "full_raw_base.csv.gz").read_bytes()
    import gzip

    text = gzip.decompress(raw)
    rep = gzip.decompress((H200_KERNELS / "basic.ncu-rep.gz").read_bytes())
    return {
        "truncated.csv": text[: len(text) * 2 // 3],
        "other.csv": b"name,value\nfoo,1\nbar,2\n",
        "random.ncu-rep": bytes(range(256)) * 400,
        "empty.csv": b"",
        "empty.ncu-rep": b"",
        "huge_line.csv": b"x" * (4 << 20),
        "truncated.ncu-rep": rep[: len(rep) // 2],
        "corrupt.csv.gz": raw[: len(raw) // 2],
        "binary.csv": b"\x00\x01\x02" * 1000,
        "header_only.csv": text.split(b"\n")[0] + b"\n",
    }


@pytest.mark.parametrize("name", sorted(_bad_inputs()))
def test_bad_input_gives_typed_error_and_leaves_store_unchanged(name, store, tmp_path):
    from tests.conftest import store_snapshot

    Source(store).ingest_path(H200_KERNELS / "basic_raw.csv.gz")
    before = store_snapshot(store.root)
    data = _bad_inputs()[name]
    with pytest.raises(ArtifactError) as ei:
        Source(store).ingest_bytes(data, name)
    assert ei.value.source == name and ei.value.problem
    assert store_snapshot(store.root) == before


@pytest.mark.parametrize("name", ["truncated.csv", "random.ncu-rep", "huge_line.csv"])
def test_cli_bad_input_is_one_line_and_exit_1(name, tmp_path, capsys):
    from dashboard.cli import main

    f = tmp_path / name
    f.write_bytes(_bad_inputs()[name])
    assert main(["ingest", str(f), "--store", str(tmp_path / "s")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"kernelscope: {f}") and "Traceback" not in err[0]
    assert not (tmp_path / "s" / "runs").exists() or not any((tmp_path / "s" / "runs").iterdir())


def test_raw_row_cut_at_a_field_names_the_row():
    """A raw-page row that ends early at a field boundary (fields missing, not garbled) is named by its number."""
    import gzip

    lines = gzip.decompress((H200_KERNELS / "full_raw_base.csv.gz").read_bytes()).split(b"\n")
    row = lines[4]  # header, units, then kernel rows 1, 2, 3
    lines[4] = row[: row.index(b'","', len(row) // 2) + 1]
    with pytest.raises(ArtifactError, match="kernel row 3 is incomplete"):
        parse_bytes(b"\n".join(lines), "cut.csv")
    lines[4] = row  # the control: the same file whole reads
    assert parse_bytes(b"\n".join(lines), "whole.csv").table("kernels").height == 9


def test_non_finite_values_of_other_metrics_are_text_and_kernel_metrics_stay_refusable():
    """ncu writes `nan` for an undefined derived metric: the raw reader keeps it (and any non-finite
    value of a metric no kernel column reads) as text, value null, batch by batch; a non-finite
    value of a metric a kernel column reads stays a number, so that the launch is refused
    (collectors.validate)."""
    import csv
    import gzip
    import io

    rows = list(
        csv.reader(
            io.StringIO(
                gzip.decompress((H200_KERNELS / "full_raw_base.csv.gz").read_bytes()).decode()
            )
        )
    )
    nan_col = rows[0].index("derived_tempMetric4")
    assert rows[2][nan_col] == "nan"  # as the real export writes it
    other = next(
        i
        for i, m in enumerate(rows[0])
        if m.startswith("sm__") and rows[3][i].replace(".", "").isdigit()
    )
    rows[3][other] = "inf"

    def parsed(rs):
        buf = io.StringIO()
        csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rs)
        return parse_bytes(buf.getvalue().encode(), "m.csv")

    m = parsed(rows).table("metrics")
    assert m.schema["text"] == pl.Categorical and m["value"].is_nan().sum() == 0
    got = m.filter(
        pl.col("metric").cast(pl.String).is_in(["derived_tempMetric4", rows[0][other]])
        & pl.col("text").is_not_null()
    ).select(pl.col("text").cast(pl.String), "value")
    assert (
        sorted(got["text"].unique().to_list()) == ["NaN", "inf"]
        and got["value"].null_count() == got.height
    )
    rows[3][rows[0].index("gpu__time_duration.sum")] = (
        "inf"  # a kernel column's metric: refused, naming the launch
    )
    with pytest.raises(ArtifactError, match="launch 1.*not a finite number"):
        parsed(rows)
