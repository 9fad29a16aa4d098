"""`--timings` (dashboard/cli/timings.py): the stage table a command prints on stderr, from the
stages the progress bar shows, with the reading's bytes and rate; stdout is unchanged."""

from __future__ import annotations

import gzip
import os
import re
import subprocess
import sys

from collectors.progress import Step
from dashboard.cli import timings
from tests.conftest import REPO

KS = [sys.executable, "-c", "import sys; from dashboard.cli import main; sys.exit(main())"]
SAMPLE = REPO / "sample_traces/h200/torch_ffn/ffn_M1_eager.json.gz"
ROW = re.compile(r"^(\S[\w -]*?)\s+(\d+\.\d\d)\s+(\d+\.\d\d)\s+([\d,]+)(?:\s+(.*))?$")


def test_the_flag_stands_anywhere_and_the_environment_turns_it_on(monkeypatch):
    monkeypatch.delenv(timings.ENV, raising=False)
    assert timings.wanted(["analyze", "--timings", "x.json"]) == (True, ["analyze", "x.json"])
    assert timings.wanted(["analyze", "x.json"]) == (False, ["analyze", "x.json"])
    monkeypatch.setenv(timings.ENV, "1")
    assert timings.wanted(["analyze", "x.json"])[0]


def test_stages_follow_the_reports_and_keep_the_bytes_read():
    clock = timings.Timings()
    for step in (
        Step("reading", 1e6, 3e6, "B"),
        Step("reading", 3e6, 3e6, "B"),
        Step("analysing"),
        Step("writing"),
    ):
        clock(step)
    stages = clock.finish()
    assert [s.name for s in stages] == ["start-up", "reading", "analysing", "writing", "whole"]
    assert stages[1].bytes == 3e6 and stages[2].bytes is None
    # the whole process: at least the stages' own CPU time, and a peak no lower than any stage's
    assert stages[-1].cpu_s >= sum(s.cpu_s for s in stages[1:-1])
    assert stages[-1].peak_mib >= max(s.peak_mib for s in stages[:-1])
    text = timings.render(stages)
    assert text.splitlines()[0].split() == [
        "stage",
        "wall",
        "s",
        "CPU",
        "s",
        "peak",
        "RSS",
        "MiB",
        "done",
    ]
    assert "3 MB" in text


def test_a_rate_is_given_only_over_enough_cpu_time():
    fast = timings.Stage("reading", 0.01, 0.01, 50.0, 216e3)
    slow = timings.Stage("reading", 1.0, 0.5, 50.0, 300e6)
    assert timings.render([fast]).splitlines()[1].endswith("216 kB")
    assert timings.render([slow]).splitlines()[1].endswith("300 MB: 600 MB/s of CPU")


def test_analyze_prints_the_table_on_stderr_and_the_same_json_on_stdout(tmp_path):
    trace = tmp_path / "ffn.json"  # plain JSON: the reader maps it and says how far it is
    trace.write_bytes(gzip.decompress(SAMPLE.read_bytes()))
    env = dict(os.environ, KERNELSCOPE_STORE=str(tmp_path / "store"), PYTHONPATH=str(REPO))
    env.pop(timings.ENV, None)
    env.pop("KERNELSCOPE_PROGRESS", None)
    run = lambda *extra: subprocess.run(  # noqa: E731
        [*KS, "analyze", str(trace), "--format", "json", *extra],
        capture_output=True,
        env=env,
        cwd=REPO,
        timeout=120,
    )
    plain, timed = run(), run("--timings")
    assert plain.returncode == timed.returncode == 0
    assert plain.stderr == b"" and timed.stdout == plain.stdout
    rows = [ROW.match(ln) for ln in timed.stderr.decode().splitlines()[1:]]
    assert all(rows), timed.stderr.decode()
    names = [m.group(1) for m in rows]
    assert names == ["start-up", "reading", "analysing", "writing", "whole"]
    size_kb = f"{trace.stat().st_size / 1e3:,.0f} kB"
    assert rows[1].group(5).startswith(size_kb), timed.stderr.decode()
    whole = rows[-1]
    assert float(whole.group(3)) >= sum(float(m.group(3)) for m in rows[1:-1]) - 0.02
