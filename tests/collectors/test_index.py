"""The run index: rows that say what the stored tables say, atomic under eight concurrent writers
while compactions run, repaired by refresh (runs it lacks, runs re-derived, runs gone) and rebuilt
by reindex."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys

import polars as pl
import pytest

from collectors import index
from collectors.schema import TABLE_VERSIONS
from collectors.store import Store
from tests.conftest import H200_KERNELS, H200_TORCH, REPO, SAMPLES


def test_rows_say_what_the_tables_say(tmp_path):
    st = Store(tmp_path / "s")
    ncu, _ = st.put_path(H200_KERNELS / "full_raw_base.csv.gz")
    tr, _ = st.put_path(H200_TORCH / "ffn_M1024_eager.json.gz")
    bench, _ = st.put_path(next((SAMPLES / "h200x2" / "bench_suite").glob("bench_*.json.gz")))
    ix = st.index()
    runs = ix.runs.collect()
    assert set(runs["run_id"]) == {ncu.run_id, tr.run_id, bench.run_id}
    row = runs.filter(pl.col("run_id") == tr.run_id).row(0, named=True)
    assert (row["kind"], row["gpu_name"], row["item_count"], row["table_version"]) == (
        "kineto",
        tr.meta["gpu_name"],
        tr.meta["item_count"],
        TABLE_VERSIONS["kineto"],
    )
    k = ix.kernels.filter(pl.col("run_id") == ncu.run_id).collect()
    t = ncu.table("kernels")
    assert k["n"].sum() == t.height
    one = t.filter(pl.col("kernel_name") == "ks_colread4")["duration_ns"]
    assert k.filter(pl.col("name") == "ks_colread4")["median_ns"][0] == pytest.approx(one.median())
    g = tr.table("gpu_ops").filter(pl.col("kind") == "kernel")
    kt = ix.kernels.filter(pl.col("run_id") == tr.run_id).collect()
    assert kt["n"].sum() == g.height and kt["total_ns"].sum() == pytest.approx(
        g["duration_ns"].sum()
    )
    c = ix.ceilings.filter(pl.col("run_id") == bench.run_id).collect()
    assert sorted(c["metric"]) == sorted(bench.table("ceilings")["metric"])


WRITER = r"""
import sys
sys.path.insert(0, sys.argv[1])
from collectors.store import Store
st = Store(sys.argv[2])
for p in sys.argv[3:]:
    st.put_path(p)
"""


def test_eight_concurrent_writers_while_compactions_run(tmp_path):
    """8 processes ingest 6 distinct traces each into one store; a compaction runs every 3 segments.
    Every run ends whole and indexed exactly once, no temporary folder is left, and nothing needs to
    be re-indexed."""
    src = json.loads(gzip.open(H200_TORCH / "ffn_M1_eager.json.gz").read())
    files = []
    for i in range(48):
        src["traceName"] = f"copy {i}"
        p = tmp_path / "in" / f"job{i % 5}_{i}.json"
        p.parent.mkdir(exist_ok=True)
        p.write_text(json.dumps(src))
        files.append(str(p))
    root = tmp_path / "s"
    env = dict(os.environ, KERNELSCOPE_INDEX_COMPACT_AT="3")
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(REPO), str(root), *files[w::8]],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(8)
    ]
    errs = [p.communicate(timeout=300)[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * 8, errs
    st = Store(root)
    assert len(st.run_ids()) == 48
    assert not [p for p in (root / "runs").iterdir() if p.name.startswith(".")]
    # no temporary folder left
    assert not [p for p in (root / "index").rglob(".*") if p.name != ".lock"]
    df = index.collect(root, lambda ix: ix.runs.collect())
    assert df.height == 48 and df["run_id"].n_unique() == 48
    # compactions happened while the writers wrote
    assert index.stats(root)["base"] is not None
    assert st.refresh_index() == {"added": 0, "dropped": 0}


def test_refresh_adds_missing_reindexes_stale_and_drops_gone_runs(tmp_path):
    st = Store(tmp_path / "s")
    a, _ = st.put_path(H200_TORCH / "ffn_M1_eager.json.gz")
    b, _ = st.put_path(H200_TORCH / "ffn_M1_graph.json.gz")
    # a store written before the index existed
    shutil.rmtree(tmp_path / "s" / "index")
    assert st.refresh_index() == {"added": 2, "dropped": 0}
    # a indexed by a version with older tables
    stale = index.index_rows(a)
    stale["runs"] = stale["runs"].with_columns(pl.lit(1, pl.Int64).alias("table_version"))
    rb = index.index_rows(b)
    index.compact(st.root, full=True)
    index._new_base(st.root, {t: pl.concat([stale[t], rb[t]]) for t in index.TABLES})
    shutil.rmtree(b.path)  # a run removed by hand
    assert st.refresh_index() == {"added": 1, "dropped": 1}
    runs = index.collect(st.root, lambda ix: ix.runs.collect())
    assert (
        runs["run_id"].to_list() == [a.run_id]
        and runs["table_version"][0] == TABLE_VERSIONS["kineto"]
    )
    assert index.collect(st.root, lambda ix: ix.kernels.collect())["run_id"].unique().to_list() == [
        a.run_id
    ]


def test_an_index_of_another_format_is_rebuilt(tmp_path):
    st = Store(tmp_path / "s")
    st.put_path(H200_TORCH / "ffn_M1_eager.json.gz")
    index.compact(st.root, full=True)
    cur = index.index_dir(st.root) / "CURRENT"
    cur.write_text(cur.read_text().split()[0] + " 999\n")
    msgs = []
    st.refresh_index(log=msgs.append)
    assert (
        msgs and "rebuilding" in msgs[0] and index.stats(st.root)["version"] == index.INDEX_VERSION
    )
    assert index.collect(st.root, lambda ix: ix.runs.collect()).height == 1


def test_reindex_and_the_runs_command(tmp_path):
    from dashboard.cli import main

    s = str(tmp_path / "s")
    st = Store(s)
    ids = [
        st.put_path(H200_TORCH / f)[0].run_id
        for f in ("ffn_M1_eager.json.gz", "triton_add_x300.json.gz")
    ]
    shutil.rmtree(tmp_path / "s" / "index")
    assert main(["reindex", "--store", s]) == 0
    assert index.stats(st.root)["base"] is not None and index.stats(st.root)["segments"] == 0
    r = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from dashboard.cli import main; sys.exit(main())",
            "runs",
            "--format",
            "json",
            "--store",
            s,
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    rows = json.loads(r.stdout)["runs"]
    assert {x["run_id"] for x in rows} == set(ids)
    assert set(rows[0]) == {
        "run_id",
        "kind",
        "source_name",
        "gpu_name",
        "gpu",
        "items",
        "item_label",
        "created",
        "size_bytes",
        "warnings",
    }


def test_store_whose_index_cannot_be_written_still_lists_runs(tmp_path, capsys, monkeypatch):
    """(As root a folder cannot be made unwritable, so the write failure is the OS error itself.)"""
    from dashboard.cli import main

    st = Store(tmp_path / "s")
    rid = st.put_path(H200_TORCH / "ffn_M1_eager.json.gz")[0].run_id

    def refuse(self, log=None):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Store, "refresh_index", refuse)
    assert main(["runs", "--store", str(tmp_path / "s")]) == 0
    out = capsys.readouterr()
    assert rid in out.out and "the run index cannot be written (Permission denied)" in out.err


_LISTED_FROM = ("runs", "index/CURRENT", "index/parts", "index/segments", "settings.json")


def _age(root, *only: str, seconds: float = 10.0) -> None:
    """Move the modification time of what a listing is made from (listing_key; `only` those of
    _LISTED_FROM) `seconds` into the past, as if nothing had changed since: a listing is kept only
    when its inputs are older than RACY_S. (Their change times move, as any change moves them: age
    only what a step changed.)"""
    import time

    t = time.time() - seconds
    for rel in only or _LISTED_FROM:
        p = root / rel
        if p.exists():
            os.utime(p, (t, t))


def test_the_runs_listing_is_given_again_until_what_it_is_made_from_changes(
    tmp_path, capsys, monkeypatch
):
    """`runs` prints the listing it kept while the runs folder, the index, the settings and the code
    are as they were when it was made; each of them changing, or a change too recent to trust a file
    time, makes it list again; a damaged kept listing is replaced; each output format and --limit
    keeps its own."""
    from dashboard.cli import index as cli_index
    from dashboard.cli import main

    root = tmp_path / "s"
    st = Store(root)
    a = st.put_path(H200_TORCH / "ffn_M1_eager.json.gz")[0].run_id
    b = st.put_path(H200_TORCH / "triton_add_x300.json.gz")[0].run_id
    st.index()
    listed = []
    real = cli_index._list_runs

    def spy(*args):
        listed.append(args)
        return real(*args)

    monkeypatch.setattr(cli_index, "_list_runs", spy)

    def runs(*extra):
        assert main(["runs", "--store", str(root), *extra]) == 0
        return capsys.readouterr().out

    # inputs changed a moment ago: listed, nothing kept
    first = runs()
    assert a in first and b in first and len(listed) == 1
    assert not list((root / "index").glob(".runs-listing-*"))
    _age(root)
    assert runs() == first and len(listed) == 2  # listed and kept
    assert runs() == first and runs() == first and len(listed) == 2  # given again, not listed
    js = json.loads(runs("--format", "json"))["runs"]
    one = json.loads(runs("--format", "json", "--limit", "1"))["runs"]
    assert {r["run_id"] for r in js} == {a, b} and len(one) == 1 and len(listed) == 4
    assert json.loads(runs("--format", "json"))["runs"] == js and len(listed) == 4

    # a run stored (and its index segment)
    c = st.put_path(H200_KERNELS / "basic_raw.csv.gz")[0].run_id
    _age(root, "runs", "index/segments")
    assert c in runs() and len(listed) == 5
    _age(root, "index/segments", "index/parts", "index/CURRENT")
    assert c in runs() and len(listed) == 6
    assert runs() == runs() and len(listed) == 6
    st.index()
    assert main(["rm", b, "--store", str(root)]) == 0  # a run deleted
    capsys.readouterr()
    _age(root, "runs")
    out = runs()
    assert b not in out and a in out and c in out and len(listed) == 7
    _age(root, "index/segments", "index/parts", "index/CURRENT")  # its index rows dropped
    assert runs() == out and len(listed) == 8
    assert runs() == out and len(listed) == 8
    # a run folder taken away by other means: the index
    shutil.move(root / "runs" / c, tmp_path / c)
    # still lists it until `runs` refreshes it
    _age(root, "runs")
    assert c not in runs() and len(listed) == 9
    _age(root, "index/segments", "index/parts", "index/CURRENT")
    out = runs()
    assert c not in out and a in out and len(listed) == 10
    assert runs() == out and len(listed) == 10
    # the store's settings changed
    st.update_settings(lambda x: {**x, "excluded": []})
    _age(root, "settings.json")
    assert runs() == out and len(listed) == 11
    assert runs() == out and len(listed) == 11
    # a segment added or merged
    os.utime(root / "index" / "segments")
    _age(root, "index/segments")
    assert runs() == out and len(listed) == 12
    # the first part of merged segments
    (root / "index" / "parts").mkdir(exist_ok=True)
    _age(root, "index/parts")
    assert runs() == out and len(listed) == 13
    # a compaction's new base
    (root / "index" / "CURRENT").write_text((root / "index" / "CURRENT").read_text())
    _age(root, "index/CURRENT")
    assert runs() == out and len(listed) == 14
    assert runs() == out and len(listed) == 14
    monkeypatch.setattr(cli_index, "_code_stamp", lambda: "another version")
    assert runs() == out and len(listed) == 15  # the code changed
    assert runs() == out and len(listed) == 15
    kept = next((root / "index").glob(".runs-listing-table-all.json"))
    kept.write_text("{not json")
    assert runs() == out and len(listed) == 16 and json.loads(kept.read_text())["out"] == out
    (root / "index" / "segments").touch()  # just now: not trusted
    assert runs() == out and runs() == out and len(listed) == 18


def test_a_warm_runs_imports_neither_polars_nor_the_index(tmp_path):
    root = tmp_path / "s"
    st = Store(root)
    rid = st.put_path(H200_TORCH / "ffn_M1_eager.json.gz")[0].run_id
    st.index()
    _age(root)
    code = (
        "import sys; from dashboard.cli import main; rc = main(sys.argv[1:]); print(sorted(m for m "
        "in ('polars', 'numpy', 'collectors.index') if m in sys.modules), file=sys.stderr); "
        "sys.exit(rc)"
    )
    outs = [
        subprocess.run(
            [sys.executable, "-c", code, "runs", "--store", str(root)],
            capture_output=True,
            text=True,
            cwd=REPO,
        )
        for _ in range(2)
    ]
    assert outs[0].stdout == outs[1].stdout and rid in outs[1].stdout
    assert "polars" in outs[0].stderr and outs[1].stderr.strip() == "[]", (
        outs[0].stderr,
        outs[1].stderr,
    )
