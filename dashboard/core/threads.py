"""How many threads polars' pool gets in a Kernelscope command, and in the workers it starts.

More: docs/architecture.md, *dashboard.core.threads*.
"""

from __future__ import annotations

import os

ENV = "POLARS_MAX_THREADS"
#: the value Kernelscope chose for ENV in this process or a parent: a child may choose again (a
#: worker's share), while a value without this mark is the user's and stays
MARK = "KERNELSCOPE_POLARS_THREADS"
CAP = 4


def cores() -> int:
    """CPUs this process may run on (its affinity mask: taskset, cpusets)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def default_threads(n_cores: int) -> int:
    """Pool threads for a process that has n_cores CPUs to itself."""
    return max(1, min(CAP, n_cores))


def share(n_cores: int, workers: int) -> int:
    """Pool threads for each of `workers` processes that share n_cores CPUs: default_threads of its part."""
    return default_threads(n_cores // max(1, workers))


def user_set() -> bool:
    cur = os.environ.get(ENV)
    return cur is not None and os.environ.get(MARK) != cur


def choose(threads: int) -> int | None:
    """Set polars' pool size for this process (and the processes it starts) to `threads`, unless the
    user set POLARS_MAX_THREADS. Takes effect only where polars is not imported yet. Returns the
    size chosen, None when the user's value stands."""
    if user_set():
        return None
    os.environ[ENV] = os.environ[MARK] = str(int(threads))
    return int(threads)
