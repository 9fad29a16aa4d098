"""perf/measure.write_results keeps every run: each run of a perf script is added to
perf/results/<name>.json under a key of its own and to <name>.md under a heading, and the runs
recorded before it stay as they were."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

PERF = Path(__file__).resolve().parents[1] / "perf"


@pytest.fixture()
def measure(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("_ks_perf_measure", PERF / "measure.py")
    mod = importlib.util.module_from_spec(spec)
    # its dataclasses look their module up there
    monkeypatch.setitem(sys.modules, spec.name, mod)
    spec.loader.exec_module(mod)
    monkeypatch.setattr(mod, "REPO", tmp_path)
    monkeypatch.setattr(mod, "RESULTS", tmp_path / "perf" / "results")
    return mod


def _doc(measure, date="2026-12-03 22:23 UTC", value=1.0) -> dict:
    m = measure.machine()
    m["date"] = date
    return {"machine": m, "value": value}


def test_each_run_is_added_and_the_earlier_ones_stay(measure):
    header = ["what", "value"]
    first = measure.write_results(
        "traces", _doc(measure, value=1.0), [["a", "1.00 s"]], header, ["note one"]
    )
    second = measure.write_results(
        "traces", _doc(measure, value=2.0), [["a", "2.00 s"]], header, ["note two"]
    )
    third = measure.write_results(
        "traces", _doc(measure, "2026-12-04 01:05 UTC", 3.0), [["a", "3.00 s"]], header, []
    )
    runs = json.loads((measure.RESULTS / "traces.json").read_text())
    assert list(runs) == ["run_20261203_2223", "run_20261203_2223_2", "run_20261204_0105"]
    assert [r["value"] for r in runs.values()] == [1.0, 2.0, 3.0]
    md = (measure.RESULTS / "traces.md").read_text()
    for key, row in (
        ("run_20261203_2223", "| a | 1.00 s |"),
        ("run_20261203_2223_2", "| a | 2.00 s |"),
        ("run_20261204_0105", "| a | 3.00 s |"),
    ):
        assert f"### {key}: `" in md and row in md
    assert md.index("1.00 s") < md.index("2.00 s") < md.index("3.00 s")
    # what a script prints is its own run only
    assert "1.00 s" in first and "2.00 s" not in first
    assert "2.00 s" in second and "1.00 s" not in second and "note two" in second
    assert "run_20261204_0105" in third and "perf/results/traces.json" in third


def test_a_file_in_the_older_layout_keeps_its_keys(measure):
    measure.RESULTS.mkdir(parents=True)
    old = {
        "machine": {"date": "2026-12-01 07:37 UTC"},
        "kineto": {"x": 1},
        "kineto_2026_12_03_1956": {"y": 2},
    }
    (measure.RESULTS / "traces.json").write_text(json.dumps(old))
    (measure.RESULTS / "traces.md").write_text("| old | table |\n")
    measure.write_results("traces", _doc(measure), [["new", "row"]], ["a", "b"], [])
    runs = json.loads((measure.RESULTS / "traces.json").read_text())
    assert {k: runs[k] for k in old} == old and "run_20261203_2223" in runs
    md = (measure.RESULTS / "traces.md").read_text()
    assert md.startswith("| old | table |\n") and "| new | row |" in md


def test_a_results_file_that_is_not_an_object_is_left_alone(measure):
    measure.RESULTS.mkdir(parents=True)
    for text in ("[1, 2]", "not json"):
        (measure.RESULTS / "ingest.json").write_text(text)
        measure.write_results("ingest", _doc(measure), [["a", "b"]], ["x", "y"], [])
        assert (measure.RESULTS / "ingest.json").read_text() == text
        beside = measure.RESULTS / "ingest.run_20261203_2223.json"
        assert "run_20261203_2223" in json.loads(beside.read_text())
        beside.unlink()


def test_the_run_names_its_command_and_commit(measure):
    m = measure.machine()
    assert m["command"].startswith("python ") and "commit" in m  # None outside a git checkout
    text = measure.write_results("uploads", _doc(measure), [["a", "b"]], ["x", "y"], [])
    assert text.startswith("### run_20261203_2223: `python ")


def test_the_results_files_do_not_make_the_checkout_dirty(measure):
    import subprocess

    repo = measure.REPO
    git = [
        "git",
        "-C",
        str(repo),
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@t",
        "-c",
        "commit.gpgsign=false",
    ]
    (repo / "perf" / "results").mkdir(parents=True)
    (repo / "perf" / "results" / "traces.md").write_text("old\n")
    (repo / "code.py").write_text("x = 1\n")
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "c"], check=True)
    head = subprocess.run(
        [*git, "rev-parse", "--short=7", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    assert measure.commit() == head
    # what the scripts write
    (repo / "perf" / "results" / "traces.md").write_text("old\nnew run\n")
    assert measure.commit() == head
    (repo / "code.py").write_text("x = 2\n")
    assert measure.commit() == head + "-dirty"
