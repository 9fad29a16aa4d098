"""polars' pool in Kernelscope's processes (dashboard.threads): one CPU left to the Python thread, at most CAP threads,
a worker's share of its CPUs, and a POLARS_MAX_THREADS the user set kept everywhere."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from dashboard import execute, threads

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROBE = "import dashboard.cli, polars; print(polars.thread_pool_size())"


def _env(**kv) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in (threads.ENV, threads.MARK)}
    env.update(kv)
    env["PYTHONPATH"] = REPO
    return env


def _pool_of_cli(env: dict, cpus: set[int] | None = None) -> int:
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120,
                         preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None)
    assert out.returncode == 0, out.stderr
    return int(out.stdout.strip())


@pytest.mark.parametrize("n, want", [(1, 1), (2, 1), (3, 2), (4, 3), (5, 4), (16, 4), (128, 4)])
def test_default_leaves_a_cpu_to_python_and_stops_at_the_cap(n, want):
    assert threads.default_threads(n) == want


@pytest.mark.parametrize("n, workers, want", [(16, 16, 1), (16, 4, 3), (16, 2, 4), (2, 1, 1), (2, 8, 1), (8, 2, 3)])
def test_a_workers_share_is_the_default_of_its_part(n, workers, want):
    assert threads.share(n, workers) == want


def test_the_cli_sets_polars_pool_before_polars_starts_it():
    cpus = os.sched_getaffinity(0)
    if len(cpus) < 2:
        pytest.skip("one CPU: polars' own default is the same")
    # polars' own default would be one thread per CPU
    assert _pool_of_cli(_env()) == threads.default_threads(len(cpus)) < len(cpus)
    one = {min(cpus)}
    assert _pool_of_cli(_env(), one) == 1


def test_the_users_value_is_kept_by_the_cli_and_by_workers(monkeypatch):
    assert _pool_of_cli(_env(**{threads.ENV: "3"})) == 3
    monkeypatch.setenv(threads.ENV, "3")
    monkeypatch.delenv(threads.MARK, raising=False)
    assert threads.user_set()
    assert threads.choose(1) is None
    assert os.environ[threads.ENV] == "3"


def test_a_value_kernelscope_chose_is_chosen_again_by_a_worker(monkeypatch):
    monkeypatch.delenv(threads.ENV, raising=False)
    monkeypatch.delenv(threads.MARK, raising=False)
    assert threads.choose(4) == 4
    assert not threads.user_set()
    execute._pool_worker_init(1)          # what a spawned worker runs first
    assert os.environ[threads.ENV] == os.environ[threads.MARK] == "1"


@pytest.mark.parametrize("user", [None, "3"])
def test_pool_workers_get_their_share_or_the_users_value(monkeypatch, user):
    monkeypatch.delenv(threads.MARK, raising=False)
    if user is None:
        monkeypatch.delenv(threads.ENV, raising=False)
        threads.choose(threads.default_threads(threads.cores()))      # as the CLI does at its start
    else:
        monkeypatch.setenv(threads.ENV, user)
    ex = execute.PoolExecutor(workers=2)
    try:
        got = dict(ex.run(os.getenv, [threads.ENV, threads.MARK]))
    finally:
        ex.close()
    if user is None:
        want = str(threads.share(threads.cores(), 2))
        assert got == {0: want, 1: want}
    else:
        assert got == {0: "3", 1: None}
