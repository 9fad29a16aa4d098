"""Every error path of the command line, through the installed `kernelscope` program (a fresh
process each, as a user runs it): exit code, and what is printed — the usage line for a bad command
line (Typer/Click's own public handling), one line `kernelscope: …` for a user error, a short report
with exit 70 for a bug; never a Python traceback otherwise. These are the paths a dependency upgrade
broke once (typer 0.29 vendors click as typer._click)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import H200_KERNELS, REPO

EXE = str(Path(sys.executable).with_name("kernelscope"))


def run(
    *args: str, store: Path | None = None, env: dict | None = None
) -> subprocess.CompletedProcess:
    e = dict(os.environ, **(env or {}))
    e.pop("KERNELSCOPE_TOKEN", None)
    if store is not None:
        e["KERNELSCOPE_STORE"] = str(store)
    return subprocess.run(
        [EXE, *args], capture_output=True, text=True, env=e, cwd=REPO, timeout=120
    )


USAGE_ERRORS = [
    (["nosuchcmd"], "No such command 'nosuchcmd'"),
    (["ingets", "x"], "No such command 'ingets'"),
    # click: "No such option: --bogus" / "... '--bogus'."
    (["runs", "--bogus"], "--bogus"),
    (["analyze"], "Missing argument"),
    (["ingest"], "Missing argument"),
    (["runs", "--format", "xml"], "Invalid value for '--format'"),
    (["dashboard", "--port", "abc"], "Invalid value for '--port'"),
    (["dashboard", "--port", "70000"], "Invalid value for '--port'"),
    (["analyze", "x", "--max-decompressed-mb", "0"], "Invalid value for '--max-decompressed-mb'"),
    (["whatif", "x.json", "--kernel", "a"], "Missing option '--speedup'"),
    (["dashboard", "--host", "0.0.0.0"], "give an access token"),
    (["dashboard", "--token", "short"], "use at least 16"),
]


@pytest.mark.parametrize("argv,said", USAGE_ERRORS, ids=[" ".join(a) for a, _ in USAGE_ERRORS])
def test_a_bad_command_line_prints_the_usage_and_exits_2(argv, said, tmp_path):
    r = run(*argv, store=tmp_path / "s")
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr + r.stdout
    assert said in r.stderr and ("Usage: kernelscope" in r.stderr or "Error:" in r.stderr), r.stderr


def test_a_model_parameter_a_model_cannot_take_is_one_line_exit_2(tmp_path):
    r = run("predict", "tiling.traffic", "--set", "M=-1", store=tmp_path / "s")
    assert (
        r.returncode == 2 and r.stderr.count("\n") == 1 and r.stderr.startswith("kernelscope: ")
    ), r.stderr


USER_ERRORS = [
    (["analyze", "/no/such/file.csv"], "/no/such/file.csv: no such file"),
    (["ingest", "/no/such/file.ncu-rep"], "/no/such/file.ncu-rep: no such file"),
    (["analyze", "abcd"], "no run 'abcd' in this store"),
    # a folder when run from two levels below the root (then: no rank traces in it), else no such
    # file
    (["analyze", "../../etc"], ("no such file", "no rank traces")),
    (["analyze", "zzzz"], "not a run id"),
    (["export", "kernels?run=/etc/passwd", "--html", "/tmp/x.html"], "not a run id"),
    (["predict", "no.such.case"], "no.such.case"),
    (["predict", "tiling.traffic", "--gpu", "Voodoo 5"], "Voodoo 5"),
    (["ceilings", "--pin", "abcd"], "no run 'abcd'"),
]


@pytest.mark.parametrize("argv,said", USER_ERRORS, ids=[" ".join(a) for a, _ in USER_ERRORS])
def test_a_user_error_is_one_line_exit_1(argv, said, tmp_path):
    r = run(*argv, store=tmp_path / "s")
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.splitlines()
    alternatives = said if isinstance(said, tuple) else (said,)
    assert (
        len(lines) == 1
        and lines[0].startswith("kernelscope: ")
        and any(a in lines[0] for a in alternatives)
    ), r.stderr


def test_bad_files_are_one_line_each_and_the_others_are_ingested(tmp_path):
    bad = tmp_path / "random.ncu-rep"
    bad.write_bytes(os.urandom(5000))
    bomb = tmp_path / "bomb.json.gz"
    import zlib

    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    bomb.write_bytes(c.compress(b"\0" * (50 << 20)) + c.flush())
    r = run(
        "ingest",
        str(bad),
        str(H200_KERNELS / "basic_raw.csv.gz"),
        str(bomb),
        "--max-decompressed-mb",
        "10",
        store=tmp_path / "s",
    )
    assert r.returncode == 1
    lines = r.stderr.splitlines()
    assert len(lines) == 2 and lines[0].startswith(
        f"kernelscope: {bad}: not an Nsight Compute report"
    )
    assert lines[1].startswith(f"kernelscope: {bomb}: decompresses to more than 10 MB")
    assert r.stdout.count("\tncu\t") == 1


def test_a_bug_inside_a_command_exits_70_with_a_short_report(monkeypatch, capsys, tmp_path):
    from dashboard.cli import core, main

    monkeypatch.setattr(core, "ncu_report", lambda *a, **k: 1 / 0)
    rc = main(
        [
            "analyze",
            str(H200_KERNELS / "basic_raw.csv.gz"),
            "--format",
            "json",
            "--store",
            str(tmp_path / "s"),
        ]
    )
    err = capsys.readouterr().err
    assert (
        rc == 70
        and err.startswith("kernelscope: internal error (a bug")
        and "ZeroDivisionError" in err
    )
    assert len(err.splitlines()) <= 6
