"""How the command line ends (dashboard.cli.exit_now): without Python's teardown when nothing depends on it, with it
otherwise, and in both cases with the command's exit code, its whole output and the atexit handlers run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import H200_TORCH, REPO

EXE = str(Path(sys.executable).with_name("kernelscope"))

#: a child that imports the CLI, registers an atexit handler and an object whose finaliser only Python's teardown
#: runs (a module global), optionally starts a thread, then ends through exit_now(CODE)
CHILD = textwrap.dedent("""
    import atexit, sys, threading, time, types
    from pathlib import Path
    from dashboard.cli import exit_now
    out = Path(sys.argv[1])
    class Marker:
        def __init__(self):
            self.write = (out / "teardown").write_text     # bound now: module globals may be gone at teardown
        def __del__(self):
            self.write("ran")
    # in a module made after dashboard.cli's gc.freeze(): the objects made before it are left out of the collections
    # that the teardown's finalisers rely on
    sys.modules["keep"] = types.ModuleType("keep")
    sys.modules["keep"].KEEP = Marker()
    atexit.register(lambda: (out / "atexit").write_text("ran"))
    if sys.argv[3] == "library":              # a GPU library loaded (a stand-in of that name)
        sys.modules["torch"] = types.ModuleType("torch")
    if sys.argv[3] == "preload":              # as a profiler's injection sets it (read when exiting)
        import os
        os.environ["LD_PRELOAD"] = "libprofiler-stand-in.so"
    if sys.argv[3] == "thread":
        def work():
            time.sleep(0.3)
            (out / "thread").write_text("done")
        threading.Thread(target=work).start()
    print("x" * 200_000)                      # more than a pipe holds: it must all arrive
    exit_now(int(sys.argv[2]))
""")


def _child(tmp_path: Path, code: int, mode: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path), str(code), mode],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=120,
    )


def test_a_finished_command_skips_the_teardown_but_not_its_exit_code_output_or_atexit(tmp_path):
    r = _child(tmp_path, 3, "alone")
    assert r.returncode == 3, r.stderr
    assert r.stdout == "x" * 200_000 + "\n"
    assert (tmp_path / "atexit").read_text() == "ran"
    assert not (
        tmp_path / "teardown"
    ).exists()  # Python's teardown (module globals finalised) was skipped


def test_a_thread_still_working_gets_the_normal_exit(tmp_path):
    r = _child(tmp_path, 0, "thread")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "thread").read_text() == "done"  # the exit waited for it
    assert (tmp_path / "atexit").read_text() == "ran"
    assert (tmp_path / "teardown").read_text() == "ran"  # the normal teardown ran


@pytest.mark.parametrize("fmt", ["json", "csv"])
def test_analyze_output_through_a_pipe_is_whole(fmt, tmp_path):
    """The installed program, its output read from a pipe: the same bytes as the in-process command gives."""
    from typer.testing import CliRunner

    from dashboard.cli import app_for

    trace = str(H200_TORCH / "ffn_M1_eager.json.gz")
    argv = ["analyze", trace, "--format", fmt, "--store", str(tmp_path / "s")]
    r = subprocess.run(
        [EXE, *argv], capture_output=True, env=dict(os.environ), cwd=REPO, timeout=120
    )
    assert r.returncode == 0, r.stderr
    inproc = CliRunner().invoke(app_for(argv), argv)
    assert inproc.exit_code == 0, inproc.output
    assert r.stdout.decode() == inproc.stdout
    if fmt == "json":
        assert json.loads(r.stdout)["kind"] == "kineto"


@pytest.mark.parametrize(
    "mode", ["library", "preload"]
)  # (an id "gpu" would read as the gpu marker)
def test_a_process_with_a_gpu_library_or_an_injected_profiler_gets_the_normal_exit(mode, tmp_path):
    """Its own exit hooks, and a profiler's (nsys flushing CUDA activity at exit), must run."""
    r = _child(tmp_path, 4, mode)
    assert r.returncode == 4, r.stderr
    assert r.stdout == "x" * 200_000 + "\n"
    assert (tmp_path / "teardown").read_text() == "ran"


def test_the_program_skips_the_teardown(tmp_path):
    """`kernelscope` as users run it takes the quick exit: with `python -v`, Python's teardown would list every
    module it clears ("# cleanup ...")."""
    trace = str(H200_TORCH / "ffn_M1_eager.json.gz")
    r = subprocess.run(
        [
            sys.executable,
            "-v",
            EXE,
            "analyze",
            trace,
            "--format",
            "json",
            "--store",
            str(tmp_path / "s"),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert r.returncode == 0 and json.loads(r.stdout)["kind"] == "kineto"
    assert "# cleanup" not in r.stderr


def test_a_caller_of_entry_in_its_own_process_gets_control_back(tmp_path):
    """A script that runs the CLI in its own process, and a profiler around the program, get SystemExit as from
    sys.exit: the script goes on, the profile is written."""
    script = tmp_path / "caller.py"
    script.write_text(
        textwrap.dedent("""
        import sys
        sys.argv = ["kernelscope", "gpus", "--format", "json"]
        from dashboard.cli import entry
        try:
            entry()
        except SystemExit as e:
            print("control back", e.code)
        print("after")
    """)
    )
    env = dict(os.environ, PYTHONPATH=str(REPO))
    r = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-2:] == ["control back 0", "after"]
    prof = tmp_path / "p.prof"
    r = subprocess.run(
        [sys.executable, "-m", "cProfile", "-o", str(prof), EXE, "gpus", "--format", "json"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert prof.stat().st_size > 0
