"""Where the per-rank (or per-GPU) tasks run: in this process, on a local process pool, or on a Ray
cluster.

    ex = make_executor(ray=None | "auto" | "local" | "HOST:PORT", workers=None, mode="auto")
    for index, result in ex.run(fn, items):      # results as they complete; an exception is returned, not raised
        ...
    ex.close()

More: docs/architecture.md, *dashboard.core.execute*.
Start-up: imports that only some commands, pages or GPUs need sit inside the functions that use
them, so each command loads what it uses.
"""

from __future__ import annotations

import os
import socket
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterator

from collectors.errors import InputError
from dashboard.core import threads as threads_mod

#: inputs below this many bytes are analysed in this process ("auto")
SERIAL_BELOW_BYTES = 64 << 20


class RayUnavailable(InputError):
    """Ray is not installed, or no cluster answers at the address."""


def _cores() -> int:
    return threads_mod.cores()


def _pool_worker_init(threads: int) -> None:
    # runs before the task's modules (and polars) are imported in the spawned worker; a
    # POLARS_MAX_THREADS the user set is kept (dashboard.core.threads)
    threads_mod.choose(threads)


class SerialExecutor:
    name = "serial"

    def __init__(self):
        self.workers = 1

    def run(self, fn: Callable, items: list) -> Iterator[tuple[int, object]]:
        for i, item in enumerate(items):
            try:
                yield i, fn(item)
            except Exception as e:  # noqa: BLE001 - handed to the caller like a pool's failure
                yield i, e

    def describe(self) -> dict:
        return {"executor": self.name, "workers": 1}

    def close(self) -> None:
        pass


class PoolExecutor:
    name = "pool"

    def __init__(self, workers: int | None = None):
        self.workers = max(1, workers or _cores())
        self._pool = None

    def run(self, fn: Callable, items: list) -> Iterator[tuple[int, object]]:
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor, as_completed

        threads = threads_mod.share(_cores(), self.workers)
        self._pool = ProcessPoolExecutor(
            max_workers=min(self.workers, max(1, len(items))),
            mp_context=mp.get_context("spawn"),
            initializer=_pool_worker_init,
            initargs=(threads,),
        )
        futures = {self._pool.submit(fn, item): i for i, item in enumerate(items)}
        for f in as_completed(futures):
            try:
                yield futures[f], f.result()
            # any exception: a crashed worker (BrokenProcessPool) or a task's error
            except Exception as e:
                yield futures[f], e

    def describe(self) -> dict:
        return {"executor": self.name, "workers": self.workers}

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


def import_ray():
    try:
        import ray
    except ImportError:
        raise RayUnavailable(
            "--ray needs Ray: pip install 'kernelscope[ray]' (./ks installs it)"
        ) from None
    return ray


def resolve_ray_address(address: str | None) -> str | None:
    """ "auto" -> RAY_ADDRESS, else the cluster a local `ray start` recorded (None when there is none)."""
    if address not in (None, "", "auto"):
        return address
    env = os.environ.get("RAY_ADDRESS")
    if env:
        return env
    try:
        return Path(tempfile.gettempdir(), "ray", "ray_current_cluster").read_text().strip() or None
    except OSError:
        return None


def _reachable(address: str, timeout: float = 3.0) -> bool:
    """A TCP connection to the GCS port succeeds (ray.init would otherwise retry for minutes)."""
    if address.startswith("ray://"):
        address = address[len("ray://") :]
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection(
            (host.strip("[]") or "127.0.0.1", int(port)), timeout=timeout
        ):
            return True
    except (OSError, ValueError):
        return False


def connect_ray(address: str | None):
    """ray.init on the address ("auto", "local" or HOST:PORT); RayUnavailable when nothing answers."""
    ray = import_ray()
    if ray.is_initialized():
        return ray
    kw = dict(ignore_reinit_error=True, log_to_driver=False, configure_logging=False)
    target = None if address == "local" else resolve_ray_address(address)
    if address != "local" and (target is None or not _reachable(target)):
        where = (
            "RAY_ADDRESS or a local `ray start --head`"
            if address in (None, "", "auto")
            else address
        )
        raise RayUnavailable(
            f"no Ray cluster at {where}"
            + (f" ({target} does not answer)" if target else "")
            + "; start one with `ray start --head` or give --ray HOST:PORT"
        )
    try:
        if address == "local":
            ray.init(include_dashboard=False, **kw)
        else:
            ray.init(address=target, **kw)
    except (ConnectionError, RuntimeError, ValueError) as e:
        first = (str(e).splitlines() or [""])[0]
        where = "RAY_ADDRESS or a local `ray start --head`" if address == "auto" else address
        raise RayUnavailable(
            f"no Ray cluster at {where} ({first}); start one with `ray start --head` or give --ray "
            "HOST:PORT"
        ) from None
    return ray


class RayExecutor:
    name = "ray"

    def __init__(self, address: str | None = "auto"):
        self.address = address or "auto"
        self.ray = connect_ray(self.address)
        self.workers = int(self.ray.cluster_resources().get("CPU", 1))
        self._refs: list = []

    def run(self, fn: Callable, items: list) -> Iterator[tuple[int, object]]:
        ray = self.ray
        remote = ray.remote(num_cpus=1, max_retries=1)(fn)
        refs = [remote.remote(item) for item in items]
        self._refs = refs
        index = {r: i for i, r in enumerate(refs)}
        pending = list(refs)
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            for r in ready:
                try:
                    yield index[r], ray.get(r)
                # any exception: a task's error or a lost node (ray.exceptions.*)
                except Exception as e:
                    yield index[r], e

    def describe(self) -> dict:
        ctx = self.ray.get_runtime_context()
        return {
            "executor": self.name,
            "workers": self.workers,
            "address": self.address,
            "nodes": sum(1 for n in self.ray.nodes() if n.get("Alive")),
            "job": ctx.get_job_id(),
        }

    def close(self) -> None:
        for r in self._refs:
            try:
                self.ray.cancel(r)
            except Exception:  # noqa: BLE001 - finished or already gone
                pass
        self._refs = []
        self.ray.shutdown()


def make_executor(
    *,
    ray: str | None = None,
    workers: int | None = None,
    mode: str = "auto",
    total_bytes: int = 0,
    tasks: int = 1,
):
    """The executor for a job: Ray when an address is given; else serial for small inputs or one
    task (mode "auto"), a process pool otherwise; mode "serial" / "pool" force one."""
    if ray is not None:
        return RayExecutor(ray)
    if mode == "serial" or (
        mode == "auto" and (tasks <= 1 or total_bytes < SERIAL_BELOW_BYTES) and not workers
    ):
        return SerialExecutor()
    return PoolExecutor(workers)


class Timer:
    """Wall and CPU seconds of the calling process since creation."""

    def __init__(self):
        self.t0 = time.perf_counter()
        self.c0 = time.process_time()

    def seconds(self) -> tuple[float, float]:
        return time.perf_counter() - self.t0, time.process_time() - self.c0
