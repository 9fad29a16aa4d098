"""polars' pool in Kernelscope's processes (dashboard.core.threads): a thread per CPU, at most CAP
threads, a worker's share of the CPUs, and a POLARS_MAX_THREADS the user set kept everywhere."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from dashboard.core import execute, threads

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROBE = "import dashboard.cli, polars; print(polars.thread_pool_size())"
#: the same with a cap of one thread: a pool of one shows that the CLI's choice, not polars' own
#: default (a thread per CPU), took effect, also on a machine with no more CPUs than the cap
CAPPED = "import dashboard.core.threads as t; t.CAP = 1; " + PROBE


def _env(**kv) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in (threads.ENV, threads.MARK)}
    env.update(kv)
    env["PYTHONPATH"] = REPO
    return env


def _pool_of_cli(env: dict, cpus: set[int] | None = None, probe: str = PROBE) -> int:
    out = subprocess.run(
        [sys.executable, "-c", probe],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None,
    )
    assert out.returncode == 0, out.stderr
    return int(out.stdout.strip())


@pytest.mark.parametrize("n, want", [(1, 1), (2, 2), (3, 3), (4, 4), (5, 4), (16, 4), (128, 4)])
def test_default_is_a_thread_per_cpu_up_to_the_cap(n, want):
    assert threads.default_threads(n) == want


@pytest.mark.parametrize(
    "n, workers, want", [(16, 16, 1), (16, 4, 4), (16, 8, 2), (2, 1, 2), (2, 8, 1), (6, 4, 1)]
)
def test_a_workers_share_is_the_default_of_its_part(n, workers, want):
    assert threads.share(n, workers) == want


def test_the_cli_sets_polars_pool_before_polars_starts_it():
    cpus = os.sched_getaffinity(0)
    assert _pool_of_cli(_env()) == threads.default_threads(len(cpus))
    assert _pool_of_cli(_env(), {min(cpus)}) == 1
    assert _pool_of_cli(_env(), probe=CAPPED) == 1


def test_the_users_value_is_kept_by_the_cli_and_by_workers(monkeypatch):
    assert _pool_of_cli(_env(**{threads.ENV: "3"})) == 3
    assert _pool_of_cli(_env(**{threads.ENV: "3"}), probe=CAPPED) == 3
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
    execute._pool_worker_init(1)  # what a spawned worker runs first
    assert os.environ[threads.ENV] == os.environ[threads.MARK] == "1"


@pytest.mark.parametrize("user", [None, "3"])
def test_pool_workers_get_their_share_or_the_users_value(monkeypatch, user):
    monkeypatch.delenv(threads.MARK, raising=False)
    if user is None:
        monkeypatch.delenv(threads.ENV, raising=False)
        threads.choose(threads.default_threads(threads.cores()))  # as the CLI does at its start
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
