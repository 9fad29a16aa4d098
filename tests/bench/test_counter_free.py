"""Without permission to read the GPU's performance counters (ERR_NVGPUCTRPERM): a log or export
that carries the error is explained in one line, and a bench run completes with event timing and
says which checks it skipped.

The project's H200 machine lets every user read the counters, so no real refused run can be recorded
there; the messages below are NVIDIA's own, as Nsight Compute prints them (the wording users report
in public issues, e.g. deepseek-ai/DeepGEMM#46, HazyResearch/ThunderKittens#73)."""

from __future__ import annotations

import json
import time

import pytest

from tests.support.bench_fakes import _fake_ncu
from tests.conftest import store_snapshot
from dashboard.core.source import Source

NCU_LOG = (
    "==PROF== Connected to process 9012 (/usr/local/bin/my-benchmark)\n"
    "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU "
    "Performance Counters on the target device 0. For instructions on enabling permissions and to "
    "get more information see https://developer.nvidia.com/ERR_NVGPUCTRPERM\n"
    "==PROF== Disconnected from process 9012\n"
)


@pytest.mark.parametrize(
    "name, text",
    [
        ("ncu.log", NCU_LOG),
        # `ncu --csv ... > r.csv`
        ("r.csv", NCU_LOG + "==WARNING== No kernels were profiled.\n"),
        ("profile.txt", "some program output\n" + NCU_LOG),
    ],
)
def test_a_permission_error_is_explained_in_one_line(store, capsys, tmp_path, name, text):
    from dashboard.cli import main

    p = tmp_path / name
    p.write_text(text)
    before = store_snapshot(store.root)
    capsys.readouterr()
    assert main(["ingest", str(p), "--store", str(store.root)]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith(f"kernelscope: {p}: ")
    assert "ERR_NVGPUCTRPERM" in err and "NVreg_RestrictProfilingToAdminUsers=0" in err
    assert "kernelscope bench` without --ncu" in err
    assert (
        main(["analyze", str(p)]) == 1
        and "NVreg_RestrictProfilingToAdminUsers" in capsys.readouterr().err
    )
    assert store_snapshot(store.root) == before


def _bench_doc(tmp_path, monkeypatch, forbidden: bool) -> dict:
    """A bench document whose event-timed results are real-looking records of two counter cases,
    with the --ncu stage run against a stand-in ncu that either answers ERR_NVGPUCTRPERM or returns
    the recorded H200 report."""
    from collectors.bench import ncu_rerun
    from collectors.bench.harness import make_record

    monkeypatch.setattr(ncu_rerun, "find_ncu", lambda: _fake_ncu(tmp_path))
    if forbidden:
        monkeypatch.setenv("FAKE_NCU_PERM", "1")
    doc = {
        "kernelscope_bench": 1,
        "gpu": {"name": "NVIDIA H200", "uuid": "GPU-x"},
        "versions": {},
        "started": "2026-12-01T00:00:00Z",
        "finished": "2026-12-01T00:01:00Z",
        "options": {"ncu": True},
        "ceilings": [],
        "failures": [],
        "results": [
            make_record(
                "bank.column_read",
                "time",
                1.06e-3,
                "s",
                {"stride_words": 32, "width_bytes": 4},
                source="event timing",
                cv=0.002,
                n=50,
            ),
            make_record(
                "transpose.tile",
                "time",
                2.6e-4,
                "s",
                {"n": 8192, "tile": 16, "padded": False},
                source="event timing",
                cv=0.003,
                n=50,
            ),
        ],
    }
    ncu_rerun.run_stage(
        doc,
        ["transpose.tile", "bank.column_read"],
        device=0,
        quick=True,
        out_dir=tmp_path,
        file_stem="b",
        deadline=time.monotonic() + 120,
        save=lambda: None,
        log=lambda m: None,
    )
    return doc


def test_bench_without_counter_permission_completes_and_says_what_it_skipped(
    store, tmp_path, monkeypatch, capsys
):
    from dashboard.cli import main

    doc = _bench_doc(tmp_path, monkeypatch, forbidden=True)
    assert doc["ncu"]["status"] == "counters forbidden (ERR_NVGPUCTRPERM)"
    # timings kept, no counters
    assert [r["source"] for r in doc["results"]] == ["event timing", "event timing"]
    run, _ = Source(store).ingest_bytes(json.dumps(doc).encode(), "bench_forbidden.json")
    ba = Source(store).bench(run)
    assert {s["case"] for s in ba.skipped} == {"bank.column_read", "transpose.tile"}
    assert all("ERR_NVGPUCTRPERM" in s["reason"] for s in ba.skipped)
    times = ba.results.filter(ba.results["metric"] == "time")
    assert times.height == 2 and times["verdict"].null_count() < 2  # event timing still judged
    capsys.readouterr()
    assert main(["analyze", run.run_id, "--store", str(store.root)]) == 0
    out = capsys.readouterr().out
    assert (
        "not measured: no permission to read the GPU's performance counters (ERR_NVGPUCTRPERM)"
        in out
    )
    assert "bank.column_read (the bank-conflict degree at every stride" in out
    assert main(["analyze", run.run_id, "--format", "json", "--store", str(store.root)]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert {s["case"] for s in rep["skipped_checks"]} == {"bank.column_read", "transpose.tile"}


def test_with_counters_nothing_is_skipped(store, tmp_path, monkeypatch):
    pytest.importorskip("ncu_report")

    doc = _bench_doc(tmp_path, monkeypatch, forbidden=False)
    run, _ = Source(store).ingest_bytes(json.dumps(doc).encode(), "bench_ok.json")
    assert Source(store).bench(run).skipped == []


def test_without_ncu_requested_the_reason_says_so(store):
    from collectors.bench.harness import make_record

    doc = {
        "kernelscope_bench": 1,
        "gpu": {"name": "NVIDIA H200"},
        "versions": {},
        "ceilings": [],
        "failures": [],
        "results": [
            make_record(
                "occupancy.sm",
                "time",
                1e-4,
                "s",
                {"kernel": "ks_occ_r8"},
                source="event timing",
                cv=0.001,
                n=20,
            )
        ],
    }
    run, _ = Source(store).ingest_bytes(json.dumps(doc).encode(), "bench_plain.json")
    (s,) = Source(store).bench(run).skipped
    assert s["case"] == "occupancy.sm" and s["reason"].startswith(
        "Nsight Compute was not requested"
    )
