"""A real local Ray cluster for tests: `ray start --head` on 127.0.0.1 (and extra worker nodes), on
free ports and in a private temporary folder, stopped by signalling the processes this test started
(never `ray stop`, which would stop every Ray instance of the machine)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

RAY = Path(sys.executable).with_name("ray")


def ray_available() -> bool:
    try:
        import ray  # noqa: F401
    except ImportError:
        return False
    return RAY.exists()


def _free_ports(n: int) -> list[int]:
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _port_plan() -> tuple[int, list[int]]:
    """A free range of 31 worker ports and six free single ports outside it. Drawn independently, a
    single port can fall inside the worker range and Ray refuses to start ("port number … is used by
    other components", a CI failure of 2026-12-06)."""
    for _ in range(50):
        (w,) = _free_ports(1)
        if w + 30 < 65536 and all(_bindable(p) for p in range(w, w + 31)):
            break
    singles = [p for p in _free_ports(24) if not w <= p <= w + 30]
    return w, singles[:7]


def _node_args(
    temp_dir: str,
    num_cpus: int,
    num_gpus: int,
    resources: str | None,
    plan: tuple[int, list[int]] | None = None,
) -> list[str]:
    w, singles = plan or _port_plan()
    nm, om, agent, grpc, rt, metrics = singles[:6]
    args = [
        "--block",
        "--node-ip-address=127.0.0.1",
        f"--node-manager-port={nm}",
        f"--object-manager-port={om}",
        f"--min-worker-port={w}",
        f"--max-worker-port={w + 30}",
        f"--dashboard-agent-listen-port={agent}",
        f"--dashboard-agent-grpc-port={grpc}",
        f"--runtime-env-agent-port={rt}",
        f"--metrics-export-port={metrics}",
        "--disable-usage-stats",
        f"--num-cpus={num_cpus}",
        f"--num-gpus={num_gpus}",
        "--object-store-memory=100000000",
    ]
    if resources:
        args.append(f"--resources={resources}")
    return args


class Node:
    def __init__(self, proc: subprocess.Popen, log: Path):
        self.proc = proc
        self.log = log

    def kill(self, sig=signal.SIGTERM) -> None:
        """Stop this node: SIGTERM to its `ray start --block` stops its processes; SIGKILL to the
        whole process group simulates a machine that disappears."""
        if self.proc.poll() is None:
            if sig == signal.SIGKILL:
                os.killpg(self.proc.pid, signal.SIGKILL)
            else:
                self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)


def _start(args: list[str], log: Path, env: dict) -> Node:
    f = open(log, "w")
    proc = subprocess.Popen(
        [str(RAY), "start", *args],
        stdout=f,
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
    )
    return Node(proc, log)


def _tail(path: Path, n: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError as e:
        return f"({e})"


def _diagnosis(tmp: str, nodes: list[Node], checker: str) -> str:
    """What to read when a node did not come up: the checker's output, each `ray start` log, and the
    tails of the raylet and GCS error logs of every session under the cluster's temporary folder."""
    parts = [f"checker: {checker.strip()[-2000:]}"]
    for node in nodes:
        parts.append(f"--- {node.log.name} (exit {node.proc.poll()}):\n{_tail(node.log)}")
    for err in sorted(Path(tmp).glob("session_*/logs/*.err")) + sorted(
        Path(tmp).glob("session_*/logs/raylet*.out")
    ):
        if err.stat().st_size:
            parts.append(f"--- {err.relative_to(tmp)}:\n{_tail(err, 15)}")
    return "\n".join(parts)


def _wait_nodes(
    address: str, n: int, env: dict, timeout: float = 60, node: Node | None = None
) -> tuple[bool, str]:
    """Whether the cluster at `address` has `n` live nodes within `timeout` s, and the checker's
    output. With `node`, first wait for its `ray start` to say the runtime started: if it exits
    instead (a port refused), the answer is no at once, not after the checker's minutes of retrying
    a GCS that is not there."""
    if node is not None:
        t = time.time()
        while "Ray runtime started" not in _tail(node.log, 400):
            if node.proc.poll() is not None:
                return (
                    False,
                    f"`ray start` exited with {node.proc.returncode} before the runtime started",
                )
            if time.time() - t > timeout:
                return False, f"`ray start` did not say the runtime started within {timeout:.0f} s"
            time.sleep(0.25)
    code = (
        "import ray, sys, time\nray.init(address=sys.argv[1], log_to_driver=False)\n"
        "t = time.time()\nwhile sum(1 for x in ray.nodes() if x['Alive']) < int(sys.argv[2]):\n"
        "    time.sleep(0.5)\n"
        "    if time.time() - t > float(sys.argv[3]):\n"
        '        sys.exit(f\'{sum(1 for x in ray.nodes() if x["Alive"])} of {sys.argv[2]} '
        "nodes alive')\n"
    )
    try:
        r = subprocess.run(
            [sys.executable, "-c", code, address, str(n), str(timeout)],
            timeout=timeout + 60,
            env=env,
            capture_output=True,
            text=True,
        )
    except subprocess.TimeoutExpired as e:
        return False, f"checker timed out: {e.stderr or ''}"
    return r.returncode == 0, r.stdout + r.stderr


@contextmanager
def ray_cluster(*, num_cpus: int = 2, num_gpus: int = 0, workers: tuple[dict, ...] = ()):
    """Yield (address, head Node, [worker Nodes]) of a running local cluster; everything is stopped after."""
    # short: Ray's socket paths must stay < 108 bytes
    tmp = tempfile.mkdtemp(prefix="ksray-", dir="/tmp")
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", RAY_ADDRESS="", PYTHONUNBUFFERED="1")
    nodes: list[Node] = []
    head = None
    try:
        # The head, like a worker, is started again on fresh ports (twice at most) when it does not
        # come up.
        for attempt in range(3):
            plan = _port_plan()
            port = plan[1][6]
            head = _start(
                [
                    "--head",
                    f"--port={port}",
                    "--include-dashboard=false",
                    f"--temp-dir={tmp}",
                    *_node_args(tmp, num_cpus, num_gpus, None, plan),
                ],
                Path(tmp) / f"head-{attempt}.log",
                env,
            )
            address = f"127.0.0.1:{port}"
            ok, out = _wait_nodes(address, 1, env, timeout=60, node=head)
            if ok:
                break
            diagnosis = _diagnosis(tmp, [head], out)
            head.kill(signal.SIGKILL)
        else:
            raise RuntimeError(f"the Ray head did not start in 3 attempts:\n{diagnosis}")
        for i, w in enumerate(workers):
            # A worker node that has not joined after 45 s is started again on fresh ports (twice at
            # most): a port taken between choosing it and binding it must not fail the suite; a
            # third failure is reported with every log that says why.
            for attempt in range(3):
                node = _start(
                    [
                        f"--address={address}",
                        *_node_args(
                            tmp, w.get("num_cpus", 1), w.get("num_gpus", 0), w.get("resources")
                        ),
                    ],
                    Path(tmp) / f"worker{i}-{attempt}.log",
                    env,
                )
                ok, out = _wait_nodes(address, 2 + i, env, timeout=45, node=node)
                if ok:
                    nodes.append(node)
                    break
                diagnosis = _diagnosis(tmp, [head, node], out)
                node.kill(signal.SIGKILL)
            else:
                raise RuntimeError(f"Ray worker node {i} did not join in 3 attempts:\n{diagnosis}")
        yield address, head, nodes
    finally:
        for n in nodes:
            n.kill()
        if head is not None:
            head.kill()
        time.sleep(0.5)
        shutil.rmtree(tmp, ignore_errors=True)
