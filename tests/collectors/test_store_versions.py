"""Derived data is computed when a run is read, so a model fix reaches stored runs; tables of an
older version (or the first store format) are re-derived from the kept artifact; listings count
items for every kind; typed errors end to end."""

from __future__ import annotations

import json
import shutil

import polars as pl
import pytest

from tests.conftest import H200_KERNELS, H200_TORCH, SAMPLES, store_snapshot

from collectors.schema import TABLE_VERSIONS  # noqa: E402

BENCH = SAMPLES / "h200" / "bench_suite" / "bench_nvidia-h200_06deee61.json.gz"


def _l2_row(src, run):
    r = src.bench(run).results
    return r.filter(
        (pl.col("case") == "tiling.traffic")
        & (pl.col("metric") == "l2_read_from_l1_bytes")
        & pl.col("params").str.contains('"kernel": "ks_matmul_64x64"')
    ).row(0, named=True)


def test_a_model_change_reaches_a_run_stored_before_it(store, monkeypatch):
    """The tile model predicts the 64x64 kernel's L2 reads from its input element size (2 bytes:
    BF16); with 4 bytes (a changed model constant) the same stored run shows the new prediction and
    verdict, without re-ingesting, and nothing stored changes."""
    from analyzers.cases import bench_verdicts
    from dashboard.core.source import Source

    run, _ = store.put_path(BENCH)
    before_files = store_snapshot(store.root)
    row = _l2_row(Source(store), run)
    assert row["predicted"] == 3072 * 2**20 and row["verdict"] == "agrees"
    monkeypatch.setattr(bench_verdicts, "TILE_INPUT_BYTES", 4)
    row = _l2_row(Source(store), run)
    assert row["predicted"] == 6144 * 2**20 and row["verdict"] != "agrees"
    assert store_snapshot(store.root) == before_files  # read, not re-ingested


def _as_format_1(run_dir, parsed, manifest):
    """Rewrite a run folder the way the first store format kept it: tables at the top, meta in the
    manifest, bench verdicts frozen into the results table."""
    for d in run_dir.glob("tables-v*"):
        shutil.rmtree(d)
    for name, df in parsed.tables.items():
        if name == "results":
            df = df.with_columns(
                predicted=pl.lit(1.0),
                predicted_unit=pl.lit("x"),
                verdict=pl.lit("frozen"),
                verdict_explanation=pl.lit("stored by an older kernelscope"),
            )
        df.write_parquet(run_dir / f"{name}.parquet")
    m = dict(manifest, format=1, tables=sorted(parsed.tables), meta={"gpu_name": "old meta"})
    (run_dir / "manifest.json").write_text(json.dumps(m))


def test_runs_of_the_first_store_format_are_re_derived_on_read(store):
    from collectors.ingest import parse_bytes
    from collectors.store import Store
    from dashboard.core.source import Source

    run, _ = store.put_path(BENCH)
    parsed = parse_bytes(BENCH.read_bytes(), BENCH.name)
    _as_format_1(run.path, parsed, run.manifest)
    old_files = store_snapshot(store.root)
    again = Store(store.root).get(run.run_id)
    # re-parsed
    assert again.meta["gpu_name"] == "NVIDIA H200" and again.meta["item_count"] == 1113
    res = Source(Store(store.root)).bench(again).results
    assert "frozen" not in set(res["verdict"].drop_nulls()) and "agrees" in set(res["verdict"])
    new_files = store_snapshot(store.root)
    # nothing stored changed
    assert {k: v for k, v in new_files.items() if k in old_files} == old_files
    # the new version beside
    assert any(f"/tables-v{TABLE_VERSIONS['bench']}/" in k for k in new_files)


def bump_table_version(monkeypatch, kind: str, version: int) -> None:
    """A newer parser output, declared as a format declares it: one field of its registry row."""
    import dataclasses

    from collectors import formats

    monkeypatch.setitem(
        formats.FORMATS, kind, dataclasses.replace(formats.FORMATS[kind], table_version=version)
    )


def test_a_newer_table_version_is_re_derived_once(store, monkeypatch):
    from collectors import schema

    run, _ = store.put_path(H200_KERNELS / "basic_raw.csv.gz")
    current = schema.TABLE_VERSIONS["ncu"]
    bump_table_version(monkeypatch, "ncu", 99)
    again = store.get(run.run_id)
    assert again.table("kernels").height == 9 and (run.path / "tables-v99" / "meta.json").is_file()
    # the older version is kept
    assert (run.path / f"tables-v{current}" / "kernels.parquet").is_file()


def test_runs_lists_the_item_count_of_every_kind(store, capsys, tmp_path):
    from dashboard.cli import main

    for p in (H200_KERNELS / "basic_raw.csv.gz", H200_TORCH / "ffn_M1_graph.json.gz", BENCH):
        store.put_path(p)
    from tests.support.nsys import two_process_export

    store.put_bytes(two_process_export(tmp_path), "two.sqlite")
    capsys.readouterr()
    assert main(["runs", "--format", "json", "--store", str(store.root)]) == 0
    rows = {r["kind"]: r for r in json.loads(capsys.readouterr().out)["runs"]}
    assert {k: (r["items"], r["item_label"]) for k, r in rows.items()} == {
        "ncu": (9, "profiled launches"),
        "kineto": (180, "kernels"),
        "nsys": (4, "kernels"),
        "bench": (1113, "results"),
    }
    assert main(["runs", "--store", str(store.root)]) == 0
    out = capsys.readouterr().out
    assert "180" in out and "1113" in out and "profiled launches" in out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["analyze", "0123456789abcdef"], "no run '0123456789abcdef' in this store"),
        (["analyze", "../../etc/passwd.json"], "no such file"),
        (["export", "kernels?run=/etc/passwd", "--html", "x.html"], "not a run id"),
        (["predict", "no.such.case"], "no textbook case 'no.such.case'"),
        (["predict", "tiling.traffic", "--gpu", "Voodoo 5"], "no GPU 'Voodoo 5'"),
        (["export", "claims?claim=nope", "--html", "x.html"], "no claim 'nope'"),
    ],
)
def test_user_errors_are_one_line_and_exit_1(store, capsys, argv, message, monkeypatch, tmp_path):
    from dashboard.cli import main

    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert main([*argv, "--store", str(store.root)] if argv[0] != "predict" else argv) == 1
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_a_bug_is_not_reported_as_a_user_error(store, capsys, monkeypatch):
    """An unexpected exception (here a KeyError raised inside an analysis) gives a short traceback
    and exit 70, never the one-line user-error format."""
    from dashboard.cli import core, main

    run, _ = store.put_path(H200_KERNELS / "basic_raw.csv.gz")

    def broken(*a, **k):
        raise KeyError("dram_bandwidth_gbps")

    monkeypatch.setattr(core, "report_for", broken)
    capsys.readouterr()
    assert main(["analyze", run.run_id, "--store", str(store.root)]) == 70
    err = capsys.readouterr().err
    assert "internal error" in err and "KeyError" in err and "core.py" in err
    assert not err.startswith("kernelscope: 'dram")


@pytest.mark.parametrize(
    "argv", [["nosuchcmd"], ["analyze", "--format", "xml", "x"], ["runs", "--bogus"]]
)
def test_command_line_mistakes_give_usage_and_exit_2(argv, capsys):
    from dashboard.cli import main

    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Usage:" in err and "Traceback" not in err


def test_a_gpu_given_at_ingest_survives_re_derivation(store, monkeypatch):
    """`ingest --gpu` is kept in the manifest, not in the derived tables: a newer table version keeps it."""
    from tests.conftest import REPO

    f = (
        REPO
        / "tests"
        / "corpus"
        / "physicell-fork"
        / "profile.old-details-layout.constructed.csv.gz"
    )
    run, _ = store.put_bytes(f.read_bytes(), f.name, gpu="NVIDIA Tesla V100 PCIe 16GB")
    assert (
        run.meta["gpu_name"] == "NVIDIA Tesla V100 PCIe 16GB"
        and run.meta["gpu_name_in_file"] is None
    )
    bump_table_version(monkeypatch, "ncu", 99)
    again = store.get(run.run_id)
    assert (
        again.meta["gpu_override"] == "NVIDIA Tesla V100 PCIe 16GB"
        and (run.path / "tables-v99").is_dir()
    )
    assert "gpu_override" not in json.loads((run.path / "tables-v99" / "meta.json").read_text())
