"""The command line's progress (dashboard/cli/progress.py, collectors/progress.py): on a terminal —
a pseudo-terminal here — `kernelscope ingest` of a real `.ncu-rep` says each stage (inflating,
reading launch k of n from the child process that reads the report, analysing, storing) on one
stderr line that is cleared at the end; piped, stderr stays empty and stdout is unchanged."""

from __future__ import annotations

import os
import pty
import subprocess
import sys

import pytest

from tests.conftest import H200_KERNELS, REPO

pytest.importorskip("ncu_report")
KS = [sys.executable, "-c", "import sys; from dashboard.cli import main; sys.exit(main())"]
REPORT = H200_KERNELS / "full.ncu-rep.gz"


def _env(tmp_path):
    env = dict(os.environ, KERNELSCOPE_STORE=str(tmp_path / "store"), PYTHONPATH=str(REPO))
    env.pop("KERNELSCOPE_PROGRESS", None)
    return env


def test_a_terminal_sees_every_stage_and_a_clean_line_at_the_end(tmp_path):
    main, sub = pty.openpty()
    proc = subprocess.Popen(
        [*KS, "ingest", str(REPORT)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=sub,
        env=_env(tmp_path),
        cwd=REPO,
    )
    os.close(sub)
    seen = b""
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    out = proc.stdout.read().decode()
    assert proc.wait(timeout=120) == 0
    os.close(main)
    text = seen.decode(errors="replace")
    lines = [ln for ln in text.split("\r\x1b[2K") if ln]
    stages = [ln.split(" [")[0] for ln in lines]
    assert stages[0] == "inflating 4 MB" or stages[0].startswith("inflating")
    assert any(s.startswith("reading full.ncu-rep") for s in stages)
    launches = [s for s in stages if s.startswith("reading launch ")]
    assert (
        launches and launches[-1] == "reading launch 9 of 9"
    )  # relayed from the reader's child process
    assert stages.index("analysing") < stages.index("storing")
    # the line is cleared: the shell prompt is clean
    assert text.endswith("\r\x1b[2K")
    assert out.split("\t")[1:2] == ["ncu"] and out.rstrip().endswith("new")


def test_piped_there_is_no_progress_at_all(tmp_path):
    r = subprocess.run(
        [*KS, "ingest", str(REPORT)],
        capture_output=True,
        text=True,
        env=_env(tmp_path),
        cwd=REPO,
        timeout=120,
    )
    assert r.returncode == 0 and r.stderr == "" and r.stdout.rstrip().endswith("new")
