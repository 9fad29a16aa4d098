"""The microbenchmark suite on every GPU of a Ray cluster (`kernelscope bench --ray [ADDRESS]`), and
the per-GPU suite run that `kernelscope bench` uses on one host.

    run_suite(index, args, out_dir, on_line)    one GPU: `python -m collectors.bench.run --device index ...` in a
                                                subprocess, progress lines handed to on_line; -> (result file, log)
    fleet_bench(address, ...)                   one Ray task per GPU of the cluster -> [SlotResult]

More: docs/architecture.md, *dashboard.core.fleet*.
Start-up: imports that only some commands, pages or GPUs need sit inside the functions that use
them, so each command loads what it uses.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

PROGRESS = re.compile(r"\((\d+)/(\d+)\) (\S+): ")
SUITE_TIMEOUT_S = 20 * 60
POLL_S = 0.1


def repo_root() -> Path:
    return Path(__file__).resolve().parents[2]


def run_suite(index: int, args: list[str], out_dir: Path, on_line=None) -> tuple[Path | None, str]:
    """Run the GPU suite on device `index` in a subprocess (the path `kernelscope bench` runs on
    every GPU); each output line is passed to on_line(line, doc_path). -> (the result file or None,
    the log path)."""
    gdir = Path(out_dir) / f"gpu{index}"
    gdir.mkdir(parents=True, exist_ok=True)
    log_path = gdir / "bench.log"
    cmd = [
        sys.executable,
        "-u",
        "-m",
        "collectors.bench.run",
        "--out",
        str(gdir),
        "--device",
        str(index),
        *args,
    ]
    env = dict(
        os.environ,
        PYTHONUNBUFFERED="1",
        PYTHONPATH=os.pathsep.join([str(repo_root()), os.environ.get("PYTHONPATH", "")]).rstrip(
            os.pathsep
        ),
    )
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            encoding="utf-8",
            errors="replace",
            env=env,
            cwd=repo_root(),
        )
        for line in proc.stdout:
            log.write(line)
            if on_line:
                files = sorted(gdir.glob("bench_*.json"))
                on_line(line, files[-1] if files else None)
        proc.wait(timeout=SUITE_TIMEOUT_S)
    files = sorted(gdir.glob("bench_*.json"))
    return (files[-1] if files else None), str(log_path)


# --------------------------------------------------------------------------------------------------
# One task per GPU of a Ray cluster
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Slot:
    """GPU `index` of `gpus` on a node."""

    node_id: str
    node_ip: str
    index: int
    gpus: int

    @property
    def key(self) -> str:
        return f"{self.node_ip}/{self.node_id[:8]} GPU {self.index}"


@dataclass
class SlotResult:
    slot: Slot
    status: str  # "done" | "lost" | "failed"
    doc: dict | None  # the bench document (partial: "finished" null) or None
    error: str | None = None
    events: list = field(default_factory=list)


def cluster_slots(ray) -> list[Slot]:
    """One Slot per GPU of every alive node (its `GPU` resource), nodes in a stable order."""
    out = []
    for n in sorted(
        (n for n in ray.nodes() if n.get("Alive")),
        key=lambda n: (n["NodeManagerAddress"], n["NodeID"]),
    ):
        g = int(n.get("Resources", {}).get("GPU", 0))
        out += [Slot(n["NodeID"], n["NodeManagerAddress"], k, g) for k in range(g)]
    return out


def visible_gpu_count() -> int:
    """GPUs a CUDA program here would see: CUDA_VISIBLE_DEVICES when set, else NVML's count."""
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
    try:
        import pynvml

        pynvml.nvmlInit()
        n = pynvml.nvmlDeviceGetCount()
        pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - no driver, no NVML, no GPU: all mean "no GPU here"
        return 0
    if cvd is not None:
        ids = [x for x in cvd.split(",") if x.strip() and x.strip() != "-1"]
        return min(len(ids), n)
    return n


def missing_gpu_packages() -> list[str]:
    import importlib.util

    return [m for m in ("torch", "triton", "cupy") if importlib.util.find_spec(m) is None]


def _gpu_suite_possible() -> bool:
    return visible_gpu_count() > 0 and not missing_gpu_packages()


def suite_task(job: dict) -> dict:
    """Runs on the node: the suite for one GPU, progress and snapshots through job["queue"]. Returns the document."""
    q, slot = job["queue"], job["slot"]
    host = socket.gethostname()

    def put(kind: str, **kw) -> None:
        q.put({"key": slot.key, "kind": kind, "t": time.time(), **kw})

    put("started", host=host)
    if _gpu_suite_possible() and not job.get("cpu_only"):

        def on_line(line: str, doc_path):
            m = PROGRESS.search(line)
            if m and " ..." not in line:
                snap = None
                if doc_path is not None:
                    try:
                        snap = json.loads(Path(doc_path).read_text())
                    except (OSError, ValueError):
                        snap = None
                put(
                    "case",
                    done=int(m.group(1)),
                    total=int(m.group(2)),
                    case=m.group(3),
                    line=line.strip(),
                    doc=snap,
                )

        out = Path(tempfile.mkdtemp(prefix="kernelscope-fleet-"))
        path, log = run_suite(slot.index, job.get("args", []), out, on_line)
        if path is None:
            raise RuntimeError(f"the suite wrote no result on {host} GPU {slot.index} (log: {log})")
        doc = json.loads(path.read_text())
    else:
        from collectors.bench.cpu_cases import CPU_CASES, run_cpu_cases

        total = len(CPU_CASES)

        def on_case(d: dict) -> None:
            done = len(d["cases"])
            case = list(d["cases"])[-1]
            put(
                "case",
                done=done,
                total=total,
                case=case,
                line=f"({done}/{total}) {case}: "
                f"{d['cases'][case]['status']} (CPU cases: no usable GPU on this node)",
                doc=json.loads(json.dumps(d)),
            )

        doc = run_cpu_cases(quick=job.get("quick", False), log=lambda m: None, on_case=on_case)
        doc["gpu"]["index"] = slot.index
    doc["gpu"]["host"] = host
    doc.setdefault("options", {})["fleet"] = {
        "node_id": slot.node_id,
        "node_ip": slot.node_ip,
        "slot": slot.index,
        "node_gpus": slot.gpus,
    }
    put("finished")
    return doc


def fleet_bench(
    address: str | None,
    *,
    args: list[str] | None = None,
    quick: bool = False,
    cpu_only: bool = False,
    on_event=None,
    on_result=None,
) -> list[SlotResult]:
    """Run suite_task on every GPU of the cluster. on_event(event) for each progress event as it
    arrives; on_result(SlotResult) as each GPU finishes or is lost. Raises RayUnavailable /
    ValueError (no GPU)."""
    from dashboard.core.execute import connect_ray

    ray = connect_ray(address)
    from ray.util.queue import Queue
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    slots = cluster_slots(ray)
    if not slots:
        ray.shutdown()
        raise ValueError(
            f"the Ray cluster at {address} declares no GPU (start its nodes with --num-gpus)"
        )
    here = ray.get_runtime_context().get_node_id()
    queue = Queue(
        actor_options={
            "num_cpus": 0,
            "scheduling_strategy": NodeAffinitySchedulingStrategy(here, soft=False),
        }
    )
    remote = ray.remote(suite_task)
    refs = {}
    for s in slots:
        job = {
            "slot": s,
            "queue": queue,
            "args": list(args or []),
            "quick": quick,
            "cpu_only": cpu_only,
        }
        ref = remote.options(
            num_gpus=s.gpus,
            num_cpus=1,
            max_retries=0,
            scheduling_strategy=NodeAffinitySchedulingStrategy(s.node_id, soft=False),
        ).remote(job)
        refs[ref] = s
    latest: dict[str, dict] = {}
    events: dict[str, list] = {s.key: [] for s in slots}
    results: list[SlotResult] = []

    def drain() -> None:
        while True:
            try:
                batch = queue.get_nowait_batch(max(1, queue.qsize()))
            except Exception:  # noqa: BLE001 - ray.util.queue.Empty, or nothing left
                return
            if not batch:
                return
            for ev in batch:
                if ev.get("doc") is not None:
                    latest[ev["key"]] = ev["doc"]
                ev = {k: v for k, v in ev.items() if k != "doc"}
                events.setdefault(ev["key"], []).append(ev)
                if on_event:
                    on_event(ev)

    pending = list(refs)
    try:
        while pending:
            ready, pending = ray.wait(pending, num_returns=1, timeout=POLL_S)
            drain()
            for r in ready:
                s = refs[r]
                try:
                    res = SlotResult(s, "done", ray.get(r))
                # any exception: a lost node (NodeDiedError, WorkerCrashedError, unschedulable) or a
                # failed suite
                except Exception as e:
                    lost = type(e).__name__ in (
                        "NodeDiedError",
                        "WorkerCrashedError",
                        "TaskUnschedulableError",
                        "ActorDiedError",
                        "OwnerDiedError",
                        "ObjectLostError",
                        "RaySystemError",
                        "LocalRayletDiedError",
                    )
                    first = (str(e).strip().splitlines() or [type(e).__name__])[-1][:300]
                    doc = latest.get(s.key)
                    if doc is not None:
                        doc = dict(doc, finished=None)
                        doc["failures"] = list(doc.get("failures") or []) + [
                            {
                                "case": "fleet",
                                "error": f"{'node lost mid-suite' if lost else 'suite failed'} on "
                                f"{s.node_ip} ({type(e).__name__}): {first}",
                            }
                        ]
                        doc.setdefault("gpu", {})["index"] = s.index
                        doc.setdefault("options", {})["fleet"] = {
                            "node_id": s.node_id,
                            "node_ip": s.node_ip,
                            "slot": s.index,
                            "node_gpus": s.gpus,
                        }
                    res = SlotResult(
                        s, "lost" if lost else "failed", doc, f"{type(e).__name__}: {first}"
                    )
                drain()
                res.events = events.get(s.key, [])
                results.append(res)
                if on_result:
                    on_result(res)
        drain()
    finally:
        for r in pending:
            ray.cancel(r, force=True)
        ray.shutdown()
    return results
