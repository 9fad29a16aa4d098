"""`kernelscope analyze FILE` reads of a raw page only the metrics its analysis uses
(collectors.ingest.parse_path with metrics="analysis", collectors.ncu_values.analysis_metric): the
kernel table, the metadata, the sections, the analysis and every refusal must be those of the whole
file, on every real raw page in the repository."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import polars as pl
import pytest

from collectors import validate as validate_mod
from collectors.errors import ArtifactError
from collectors.ingest import parse_path
from collectors.ncu_values import analysis_metric
from tests.conftest import REPO

RAW_PAGES = sorted(
    [*REPO.glob("sample_traces/**/*raw*.csv.gz"), *REPO.glob("tests/corpus/**/*raw*.csv*")]
)
IDENTITY_HEAD = (
    '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block '
    'Size","Grid Size","Device","CC"'
)


def _strings(df: pl.DataFrame) -> pl.DataFrame:
    return df.with_columns(
        pl.col(c).cast(pl.String) for c, t in df.schema.items() if t == pl.Categorical()
    )


def test_the_repository_has_raw_pages_of_several_sources():
    assert len(RAW_PAGES) >= 10
    assert any("corpus" in str(p) for p in RAW_PAGES) and any(
        "sample_traces" in str(p) for p in RAW_PAGES
    )


@pytest.mark.parametrize("path", RAW_PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_reading_the_analysis_metrics_gives_the_whole_files_kernels_meta_and_sections(path):
    whole = parse_path(path)
    part = parse_path(path, metrics="analysis")
    assert whole.partial_rows == {}
    assert part.partial_rows == {"metrics": whole.tables["metrics"].height}
    assert part.tables["kernels"].equals(whole.tables["kernels"])
    assert part.meta == whole.meta
    assert part.tables["metric_sections"].equals(whole.tables["metric_sections"])
    names = whole.tables["metrics"]["metric"].unique().cast(pl.String).to_list()
    kept = _strings(whole.tables["metrics"]).filter(
        pl.col("metric").is_in([m for m in names if analysis_metric(m)])
    )
    assert 0 < kept.height < whole.tables["metrics"].height
    assert _strings(part.tables["metrics"]).equals(kept)  # the same rows, in the same order


def test_analyze_of_the_file_equals_analyze_of_the_stored_run(tmp_path, capsys):
    """End to end: `analyze FILE` (read in part) and `analyze RUN` (the run ingest stored, read whole)."""
    from dashboard.cli import main

    path = REPO / "sample_traces/h200/chapter5_kernels/full_raw.csv.gz"
    store = str(tmp_path / "s")
    assert main(["analyze", str(path), "--format", "json", "--store", store]) == 0
    of_file = json.loads(capsys.readouterr().out)
    assert main(["ingest", str(path), "--store", store]) == 0
    capsys.readouterr()
    from collectors.store import Store

    rid = Store(Path(store)).runs()[0].run_id
    assert main(["analyze", rid, "--format", "json", "--store", store]) == 0
    of_run = json.loads(capsys.readouterr().out)
    assert of_file["kernels"] and of_file == of_run


def test_the_decimal_mark_is_told_from_every_metric_of_the_first_row():
    """The only sign of a decimal comma is in a metric the analysis does not read: the part read
    must still take "1,500" as 1.5 (a decimal comma) as the whole file does, not as 1,500 with a
    thousands separator."""
    text = (
        IDENTITY_HEAD + ',"gpu__time_duration.sum","sm__other_metric.sum"\n'
        '"","","","","","","","","","","","us",""\n'
        '"0","1","a","h","k(int)","1","7","(256, 1, 1)","(8, 1, '
        '1)","0","8.6","1,500","27.595.520"\n'
    )
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "eu.csv"
        p.write_text(text)
        whole, part = parse_path(p), parse_path(p, metrics="analysis")
    assert whole.tables["kernels"]["duration_ns"].to_list() == [1500.0]
    assert part.tables["kernels"]["duration_ns"].to_list() == [1500.0]
    assert part.tables["metrics"]["metric"].cast(pl.String).to_list() == ["gpu__time_duration.sum"]


def test_the_row_bound_is_that_of_the_whole_table(monkeypatch):
    """A raw page whose whole metrics table is over the bound is refused by `analyze` as by
    `ingest`, with the same message, though the part read is under it."""
    path = REPO / "sample_traces/h200/chapter5_kernels/full_raw.csv.gz"
    whole_rows = 9 * 2227
    monkeypatch.setattr(validate_mod, "MAX_ROWS", whole_rows - 1)
    said = []
    for metrics in ("all", "analysis"):
        with pytest.raises(ArtifactError) as e:
            parse_path(path, metrics=metrics)
        said.append(str(e.value))
    assert (
        said[0] == said[1]
        and f"metrics: {whole_rows:,} rows, more than the {whole_rows - 1:,}" in said[0]
    )
    monkeypatch.setattr(validate_mod, "MAX_ROWS", whole_rows)
    assert parse_path(path, metrics="analysis").partial_rows == {"metrics": whole_rows}


def test_other_quoting_read_in_part_gives_the_same_part(tmp_path):
    """CRLF line ends send every piece to polars' CSV reader: the part it reads is the same."""
    data = gzip.decompress(
        (REPO / "sample_traces/h200/chapter5_kernels/full_raw.csv.gz").read_bytes()
    )
    lf, crlf = tmp_path / "lf.csv", tmp_path / "crlf.csv"
    lf.write_bytes(data)
    crlf.write_bytes(data.replace(b"\n", b"\r\n"))
    a, b = parse_path(lf, metrics="analysis"), parse_path(crlf, metrics="analysis")
    assert b.tables["kernels"].equals(a.tables["kernels"]) and b.tables["metrics"].equals(
        a.tables["metrics"]
    )
    assert b.partial_rows == a.partial_rows


def test_a_page_without_any_analysed_metric_is_refused_alike(tmp_path):
    p = tmp_path / "none.csv"
    p.write_text(
        IDENTITY_HEAD + ',"sm__other_metric.sum"\n"","","","","","","","","","","",""\n'
        '"0","1","a","h","k","1","7","(32, 1, 1)","(1, 1, 1)","0","9.0","5"\n'
    )
    said = []
    for metrics in ("all", "analysis"):
        with pytest.raises(ArtifactError) as e:
            parse_path(p, metrics=metrics)
        said.append(str(e.value))
    assert said[0] == said[1] and "no kernel has a duration" in said[0]


def test_a_table_read_in_part_is_never_stored(tmp_path):
    from collectors.store import Store

    path = REPO / "sample_traces/h200/chapter5_kernels/full_raw.csv.gz"
    st = Store(tmp_path / "s")
    with pytest.raises(ValueError, match="never stored"):
        st.put_bytes(path.read_bytes(), path.name, parse_path(path, metrics="analysis"))
    assert st.runs() == []
    with pytest.raises(ValueError):
        parse_path(path, metrics="some")


def test_analyze_reads_the_analysis_metrics_only(monkeypatch, tmp_path, capsys):
    """The command asks for the part (the speed of `analyze` on a 10,000-kernel page rests on it)."""
    from collectors import ingest
    from dashboard.cli import main

    asked = []
    real = ingest.parse_path

    def spy(path, metrics="all"):
        asked.append(metrics)
        return real(path, metrics=metrics)

    monkeypatch.setattr(ingest, "parse_path", spy)
    path = REPO / "sample_traces/h200/chapter5_kernels/full_raw.csv.gz"
    assert main(["analyze", str(path), "--format", "json", "--store", str(tmp_path / "s")]) == 0
    assert asked == ["analysis"]


def test_a_parser_error_names_the_format_as_ingest_does(tmp_path):
    """An error of the reader itself (a launch ID past 32 bits) is refused in the same words whether
    the file is read from its path, whole or in part, or from its bytes (`ingest`, an upload)."""
    from collectors.ingest import parse_bytes

    data = gzip.decompress(
        (REPO / "sample_traces/h200/chapter5_kernels/basic_raw.csv.gz").read_bytes()
    )
    lines = data.split(b"\n")
    lines[2] = b'"99999999999"' + lines[2][lines[2].index(b",") :]
    p = tmp_path / "id_big.csv"
    p.write_bytes(b"\n".join(lines))
    said = []
    for read in (
        lambda: parse_path(p),
        lambda: parse_path(p, metrics="analysis"),
        lambda: parse_bytes(p.read_bytes(), p.name),
    ):
        with pytest.raises(ArtifactError) as e:
            read()
        said.append(e.value.problem)
    assert said[0] == said[1] == said[2] and said[0].startswith("could not be read as ncu:")
