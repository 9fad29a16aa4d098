"""Issue 41's record script (sample_traces/multi_gpu/record.py) on the CPU, where torch is installed
(the CI has none: skipped there). Two processes under torchrun with gloo, the ddp jobs: each writes
both ranks' traces with a ProfilerStep per step and distributedInfo, summary.json names the planted
rank, and `kernelscope analyze FOLDER` reads each job as two ranks. The GPU recording itself, and
the straggler verdict on it, wait for a machine with two or more GPUs (the folder's README)."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import SAMPLES

SCRIPT = SAMPLES / "multi_gpu" / "record.py"
KERNELSCOPE = str(Path(sys.executable).with_name("kernelscope"))


def test_the_record_script_writes_every_ranks_trace_with_its_steps(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("numpy")  # all_gather_object pickles through numpy
    out = tmp_path / "rec"
    r = subprocess.run(
        [sys.executable, str(SCRIPT), str(out), "--cpu", "--quick"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["ranks"] == 2 and summary["planted_rank"] == 1
    assert sorted(summary["jobs"]) == ["ddp_balanced", "ddp_compute", "ddp_host"]
    for job, timing in summary["jobs"].items():
        assert [x["rank"] for x in timing["ranks"]] == [0, 1], job
        for rank in (0, 1):
            doc = json.loads(gzip.decompress((out / job / f"rank{rank}.json.gz").read_bytes()))
            assert doc["distributedInfo"]["rank"] == rank
            assert doc["distributedInfo"]["world_size"] == 2
            steps = {e["name"] for e in doc["traceEvents"] if "ProfilerStep#" in e.get("name", "")}
            assert steps == {f"ProfilerStep#{i}" for i in range(2, 10)}, (job, rank, steps)
        rep = subprocess.run(
            [KERNELSCOPE, "analyze", str(out / job), "--format", "json"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert rep.returncode == 0, rep.stderr[-2000:]
        doc = json.loads(rep.stdout)
        assert doc["summary"]["rank_count"] == 2
        assert [x["rank"] for x in doc["ranks"]] == [0, 1]
