"""On a real local Ray cluster (`ray start --head` on 127.0.0.1 plus a second node, each declaring
GPUs; no GPU needed): multi-rank analysis with --ray gives the numbers of the process pool;
`kernelscope bench --ray` runs one suite task per declared GPU (the suite's CPU cases on these
GPU-less nodes), streams progress and stores one run per GPU; a node killed mid-suite is reported as
lost, the cases it finished are stored as a partial run, and the other GPUs' runs are kept. Skipped
where Ray is not installed (./ks and CI install it)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.ray_helpers import ray_available, ray_cluster

pytestmark = pytest.mark.skipif(
    not ray_available(), reason="Ray is not installed (pip install 'kernelscope[ray]')"
)
REPO = Path(__file__).resolve().parents[2]
DLRM = REPO / "tests" / "corpus" / "param" / "dlrm_8rank"
KS = [sys.executable, "-c", "import sys; from dashboard.cli import main; sys.exit(main())"]


@pytest.fixture(scope="module")
def cluster():
    with ray_cluster(num_cpus=2, num_gpus=1, workers=({"num_cpus": 1, "num_gpus": 2},)) as c:
        yield c


def ks(*args, timeout=300):
    return subprocess.run([*KS, *args], capture_output=True, text=True, timeout=timeout, cwd=REPO)


def _numbers(rep: dict) -> dict:
    """The analysis, without how it ran (executor, worker times and memory)."""
    rep = dict(rep)
    rep.pop("execution")
    rep["ranks"] = [
        {k: v for k, v in r.items() if not k.startswith("worker_")} for r in rep["ranks"]
    ]
    return rep


def test_analyze_on_ray_gives_the_numbers_of_the_pool_and_of_one_process(cluster, tmp_path):
    address, _, _ = cluster
    out = {}
    for name, extra in (("ray", ["--ray", address]), ("pool", ["--workers", "2"]), ("serial", [])):
        r = ks("analyze", str(DLRM), "--format", "json", "--store", str(tmp_path / "s"), *extra)
        assert r.returncode == 0, r.stderr[-2000:]
        out[name] = json.loads(r.stdout)
    assert out["ray"]["execution"]["executor"] == "ray" and out["ray"]["execution"]["nodes"] == 2
    assert out["pool"]["execution"]["executor"] == "pool"
    assert _numbers(out["ray"]) == _numbers(out["pool"]) == _numbers(out["serial"])
    assert out["ray"]["iterations"][0]["straggler_rank"] == 7


def test_no_cluster_at_the_address_is_one_line_and_exit_1(tmp_path):
    r = ks("analyze", str(DLRM), "--ray", "127.0.0.1:9", "--store", str(tmp_path / "s"), timeout=60)
    assert r.returncode == 1
    assert r.stderr.strip().splitlines() == [
        "kernelscope: no Ray cluster at 127.0.0.1:9 (127.0.0.1:9 does not answer); start one with "
        "`ray start --head` or give --ray HOST:PORT"
    ]


def test_fleet_bench_runs_one_task_per_declared_gpu_and_streams_progress(cluster, tmp_path):
    address, _, _ = cluster
    r = ks(
        "bench", "--ray", address, "--quick", "--store", str(tmp_path / "s"), "--out", str(tmp_path)
    )
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    lines = r.stdout.splitlines()
    # 1 GPU on the head, 2 on the worker node
    assert sum(": started on " in x for x in lines) == 3
    assert sum("(2/2) fp.non_associativity: ok" in x for x in lines) == 3
    assert "fleet: 3 of 3 GPUs finished" in lines
    from collectors.store import Store

    runs = Store(tmp_path / "s").runs()
    assert len(runs) == 3 and {r.kind for r in runs} == {"bench"}
    slots = sorted(
        (r.meta["options"]["fleet"]["node_gpus"], r.meta["options"]["fleet"]["slot"]) for r in runs
    )
    assert slots == [(1, 0), (2, 0), (2, 1)]
    assert all(r.meta["result_count"] == 62 and not r.meta["partial"] for r in runs)
    # the per-case progress came while the suite ran: case lines before the result line of the same
    # GPU
    for key in {x.split(": ")[0] for x in lines if ": started on " in x}:
        own = [i for i, x in enumerate(lines) if x.startswith(key + ":")]
        assert "(1/2)" in lines[own[1]] and "results, run" in lines[own[-1]]


def test_a_node_killed_mid_suite_is_a_partial_run_and_the_other_gpus_are_kept(cluster, tmp_path):
    """Runs last in this module: it kills the worker node (SIGKILL to its whole process group) as
    soon as one of its GPUs reports a finished case. That GPU's reported cases are stored as a
    partial run (or its whole run, if it returned first), the node's other GPU (waiting for the
    node's GPUs) is lost, the head's GPU is kept."""
    import ray

    from collectors.store import Store
    from dashboard.cli.bench import _store_doc
    from dashboard.core.fleet import fleet_bench

    address, _, workers = cluster
    ray.init(address=address, log_to_driver=False)
    worker_id = next(
        n["NodeID"] for n in ray.nodes() if n["Alive"] and n["Resources"].get("GPU") == 2
    )
    ray.shutdown()
    killed = threading.Event()

    def on_event(ev):
        if ev["kind"] == "case" and worker_id[:8] in ev["key"] and not killed.is_set():
            killed.set()
            workers[0].kill(signal.SIGKILL)

    results = fleet_bench(address, quick=False, on_event=on_event)
    assert killed.is_set()
    by = {(r.slot.node_id, r.slot.index): r for r in results}
    assert len(by) == 3
    head = [r for r in results if r.slot.node_id != worker_id]
    assert [r.status for r in head] == ["done"] and head[0].doc["finished"] is not None
    lost = [r for r in results if r.slot.node_id == worker_id and r.status != "done"]
    assert lost and all(r.status == "lost" for r in lost), [(r.status, r.error) for r in results]
    st = Store(tmp_path / "s")
    ids = [_store_doc(st, r.doc, tmp_path) for r in results if r.doc is not None]
    runs = {rid: st.get(rid) for rid in ids}
    partial = [r for r in runs.values() if r.meta["partial"]]
    complete = [r for r in runs.values() if not r.meta["partial"]]
    assert len(complete) == len(results) - len(lost)  # every finished GPU is stored whole
    # the GPU whose suite was running when the node went
    running = [r for r in lost if r.doc is not None]
    # (the other waited for the node's GPUs: no result)
    assert len(running) <= 1 and len(partial) == len(running)
    for p in partial:
        assert p.meta["cases"] and p.meta["finished"] is None
        assert p.meta["result_count"] == sum(c["records"] for c in p.meta["cases"].values())
        assert any("node lost mid-suite" in f["error"] for f in p.meta["failures"])
