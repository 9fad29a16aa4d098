"""How many threads polars' pool gets in a Kernelscope command, and in the workers it starts.

polars reads POLARS_MAX_THREADS once, when it is imported, and by default starts one pool thread per
CPU. A Kernelscope command calls polars hundreds of times on tables of 10^3-10^6 rows, and each call
gives the pool too little work for many threads: after each call the idle threads also wait actively
for a while, on CPUs the Python thread could use. Measured with `kernelscope analyze --format json`
in alternated fresh processes, the JSON identical for every pool size
(docs/findings-kineto-reader.md, "polars' pool"):

- with 16 CPUs, four pool threads instead of sixteen took 16-35 % less CPU on the 304 MB Kineto
  trace, the 10,000-kernel Nsight Compute page and a 216 KB trace, in less wall time, and eight
  threads were no faster than four; on the 1,000,000-kernel Nsight Systems export 16 % less CPU and
  954 instead of 1,098 MiB at its peak, for 10 % more wall time;
- with 2 CPUs, one thread instead of two took 5-10 % less CPU on the Kineto trace but 20 % more wall
  time on the Nsight Systems export (its joins and sorts run in parallel): both are kept.

Hence DEFAULT: a thread per CPU, at most CAP. A POLARS_MAX_THREADS the user set is always kept.
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
