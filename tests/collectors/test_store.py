"""Run store: content addressing, atomic writes, several processes at once, CLI listing."""

from __future__ import annotations

import json
import multiprocessing as mp
from pathlib import Path

from collectors.store import Store, run_id_for
from tests.conftest import H200_KERNELS, SAMPLES

SAMPLE = H200_KERNELS / "basic_raw.csv.gz"


def test_same_file_twice_is_one_run(store):
    r1, created1 = store.put_path(SAMPLE)
    r2, created2 = store.put_path(SAMPLE)
    assert created1 and not created2 and r1.run_id == r2.run_id == run_id_for(SAMPLE.read_bytes())
    assert [r.run_id for r in store.runs()] == [r1.run_id]
    assert r1.artifact_path.read_bytes() == SAMPLE.read_bytes()  # the original artifact is kept
    assert r1.table("kernels").height == 9 and r1.kind == "ncu"
    assert store.get(r1.run_id[:6]).run_id == r1.run_id


def _ingest(root: str) -> str:
    return Store(root).put_path(SAMPLE)[0].run_id


def test_several_processes_at_once(tmp_path):
    root = str(tmp_path / "s")
    with mp.get_context("spawn").Pool(4) as pool:
        ids = pool.map(_ingest, [root] * 8)
    assert len(set(ids)) == 1
    runs_dir = Path(root) / "runs"
    # no temporary folders left behind
    assert [p.name for p in runs_dir.iterdir()] == [ids[0]]
    assert Store(root).get(ids[0]).table("kernels").height == 9


def test_crash_mid_write_leaves_no_run(store, monkeypatch):
    import polars as pl
    import pytest

    from collectors.errors import StoreError

    def boom(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pl.DataFrame, "write_parquet", boom)
    with pytest.raises(StoreError, match="No space left on device"):
        store.put_path(SAMPLE)
    assert store.runs() == [] and list(store.runs_dir.iterdir()) == []


def test_cli_ingest_folder_runs_and_store_env(tmp_path, monkeypatch, capsys):
    from dashboard.cli import main

    monkeypatch.setenv("KERNELSCOPE_STORE", str(tmp_path / "env-store"))
    assert main(["ingest", str(H200_KERNELS)]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    # 2 reports + 6 CSV exports, sources skipped
    assert len(lines) == 8 and all("\tncu\t" in ln for ln in lines)
    assert main(["runs", "--format", "json"]) == 0
    runs = json.loads(capsys.readouterr().out)["runs"]
    assert len(runs) == 8 and {r["gpu_name"] for r in runs} == {
        "NVIDIA H200",
        "NVIDIA H200 (inferred)",
    }
    rid = runs[0]["run_id"]
    assert main(["analyze", rid, "--format", "json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["kernels"]) == 9
    assert main(["analyze", "deadbeefdeadbeef"]) == 1
    assert "no run" in capsys.readouterr().err


def test_dashboard_samples_listing_exists():
    listing = (SAMPLES / "dashboard_samples.txt").read_text().split()
    for line in listing:
        if not line.startswith("#") and "/" in line:
            assert (SAMPLES / line).is_file(), line


# ---- listing cached by change time
# ---------------------------------------------------------------------------
def _age(store, seconds=60):
    """Set the runs folder and every run folder back in time (as if nothing had changed for a while)."""
    import os
    import time

    t = time.time() - seconds
    for p in [*store.runs_dir.iterdir(), store.runs_dir]:
        os.utime(p, (t, t))


def test_listing_is_cached_until_the_store_changes(store):
    """An unchanged store is listed without reading a manifest again (the same Run objects come
    back); a new run changes the runs folder's stamp, the listing is read again, and the runs that
    did not change keep their Run."""
    from collectors import store as store_mod

    a, _ = store.put_path(SAMPLE)
    b, _ = store.put_path(SAMPLES / "h200" / "torch_ffn" / "ffn_M1_graph.json.gz")
    _age(store)
    first = store.runs()
    assert [r.run_id for r in first] == [b.run_id, a.run_id]
    assert first[0].info.item_count == 180
    # another Store object on the same folder
    second = Store(store.root).runs()
    assert all(x is y for x, y in zip(first, second))
    c, _ = store.put_path(SAMPLES / "h200" / "torch_ffn" / "ffn_M1_eager.json.gz")
    third = store.runs()
    assert [r.run_id for r in third] == [c.run_id, b.run_id, a.run_id]
    assert third[1] is first[0] and third[2] is first[1]
    assert store.get(a.run_id) is first[1]  # get() hands out the listed run too
    assert store_mod._stamp(store.runs_dir) is not None


def test_a_listing_read_right_after_a_change_is_read_again(store, monkeypatch):
    """File times are coarse: a change within the same tick leaves the stamp as it was. A listing
    read within RACY_S of the runs folder's last change is therefore not trusted, one read long
    after it is."""
    import time

    from collectors import store as store_mod

    store.put_path(SAMPLE)
    now = time.time_ns()
    # a stamp that never moves
    monkeypatch.setattr(store_mod, "_stamp", lambda p: (now, now, 1, 2))
    assert len(store.runs()) == 1
    store.put_path(SAMPLES / "h200" / "torch_ffn" / "ffn_M1_graph.json.gz")
    assert len(store.runs()) == 2  # the stamp is recent: read again
    old = now - 10**10
    monkeypatch.setattr(store_mod, "_stamp", lambda p: (old, old, 1, 2))
    # read once more (a new stamp), now settled
    assert len(store.runs()) == 2
    store.put_path(SAMPLES / "h200" / "torch_ffn" / "ffn_M1_eager.json.gz")
    assert len(store.runs()) == 2  # trusted: the cache is what answered


def test_unreadable_folders_come_from_the_cached_listing(store, monkeypatch):
    """A run folder with a garbage manifest (and a folder that is not a run id but holds a manifest)
    is left out of `runs()` and named by `unreadable()`; both answer from one listing, so a page
    that shows the runs and the damaged folders reads no manifest while the store is unchanged (the
    Runs page of 1,000 runs read them all on every rerun), and a new damaged folder shows once the
    store changes."""
    from collectors import store as store_mod

    a, _ = store.put_path(SAMPLE)
    b, _ = store.put_path(SAMPLES / "h200" / "torch_ffn" / "ffn_M1_graph.json.gz")
    (store.runs_dir / b.run_id / "manifest.json").write_text("{ not json")
    (store.runs_dir / "stray").mkdir()
    (store.runs_dir / "stray" / "manifest.json").write_text("{}")
    _age(store)
    assert [r.run_id for r in store.runs()] == [a.run_id]
    assert store.unreadable() == [
        (b.run_id, "its manifest.json cannot be read"),
        ("stray", "its manifest.json cannot be read"),
    ]
    reads = []
    real = store_mod._manifest_ok
    monkeypatch.setattr(
        store_mod, "_manifest_ok", lambda run: reads.append(run.path.name) or real(run)
    )
    assert [r.run_id for r in Store(store.root).runs()] == [a.run_id]
    # the cache answered both
    assert len(Store(store.root).unreadable()) == 2 and reads == []
    c, _ = store.put_path(SAMPLES / "h200" / "torch_ffn" / "ffn_M1_eager.json.gz")
    (store.runs_dir / c.run_id / "manifest.json").write_text("[]")
    import os
    import time

    # the changed folders settle; the others keep their stamps of above
    t = time.time() - 30
    for p in (store.runs_dir / c.run_id, store.runs_dir):
        os.utime(p, (t, t))
    assert [x for x, _ in store.unreadable()] == sorted([b.run_id, c.run_id]) + ["stray"]
    # only folders not listed before
    assert sorted(reads) == sorted([b.run_id, c.run_id, "stray"])
    assert [r.run_id for r in store.runs()] == [a.run_id]
