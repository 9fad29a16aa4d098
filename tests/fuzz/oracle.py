"""What a mutant must do to pass: run every command that reads a file or a run on it, each in a
forked process, and judge the outcome.

    Harness(workdir).check(mutant) -> Outcome(status, detail, seconds, commands)

In a worker process (tests.fuzz.worker; a signal, a hang or a crash costs a restart, never the
harness), with imports paid once: `kernelscope ingest FILE` into the harness's store; then
  - refused (exit 1): exactly one line on stderr, `kernelscope: FILE: problem`, nothing else;
    `analyze FILE` must refuse the same way; the store must be unchanged (every path, size and
    modification time);
  - accepted (exit 0): `analyze RUN`, `analyze FILE` (JSON and table), `runs`, `gpus`, `ceilings`,
    for traces
    `whatif FILE` and `analyze RUN --compat hta`, `join` with a bundled run of the other kind,
    `export RUN --html`,
    must exit 0 with one JSON document on stdout and nothing on stderr; the numbers they
    print must be physically possible or flagged (`absurdities`); every dashboard page built for the
    run (and
    Compare against a bundled run, the export of its page to HTML) must build without an exception.
Statuses: accepted, refused, and the failures traceback (exit 70 or a Python traceback anywhere),
signal (the
child died of one), hang (over the time limit), multi_line (a refusal of more or less than one
line), store_changed
(a refusal that changed the store), absurd (an unflagged impossible number), page_error, bad_exit.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import sys
import time
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path

FAILURES = (
    "traceback",
    "signal",
    "hang",
    "multi_line",
    "store_changed",
    "absurd",
    "page_error",
    "bad_exit",
)


@dataclass
class Outcome:
    status: str
    detail: str = ""
    seconds: float = 0.0
    commands: list = field(default_factory=list)


def store_listing(root: Path) -> dict[str, tuple[int, int]]:
    out = {}
    if root.exists():
        for p in root.rglob("*"):
            try:
                st = p.lstat()
            except OSError:
                continue
            out[str(p.relative_to(root))] = (st.st_size, st.st_mtime_ns) if p.is_file() else (-1, 0)
    return out


def _make_base(base: Path) -> None:
    from collectors.store import Store
    from dashboard.core.source import Source
    from tests.conftest import SAMPLES

    src = Source(Store(base))
    k = SAMPLES / "h200" / "chapter5_kernels"
    for p in (
        k / "basic_raw.csv.gz",
        SAMPLES / "h200" / "torch_ffn" / "ffn_M1_eager.json.gz",
        *sorted(SAMPLES.glob("h200/bench_suite/bench_*.json.gz")),
    ):
        src.ingest_path(p)


def run_command(argv: list[str]) -> dict:
    from dashboard.cli import main

    out, err = io.StringIO(), io.StringIO()
    t = time.monotonic()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            rc = main(argv)
        # main never lets one escape; if it does, that is a bug to report
        except SystemExit as e:
            rc = f"SystemExit({e.code})"
    return {
        "argv": argv,
        "rc": rc,
        "stdout": out.getvalue(),
        "stderr": err.getvalue(),
        "seconds": round(time.monotonic() - t, 3),
    }


# ---------------------------------------------------------------------------------------------------
# What cannot be: numbers of a successful analysis that are impossible unless flagged


def absurdities(kind: str, rep: dict) -> list[str]:
    out: list[str] = []
    if kind == "ncu":
        flagged = {f["id"] for f in rep.get("flagged", [])}
        peak = (rep.get("gpu") or {}).get("dram_bandwidth_bytes_per_s")
        for k in rep.get("kernels", []):
            kid = k.get("id")
            for key in (
                "duration_ns",
                "dram_read_bytes",
                "dram_write_bytes",
                "dram_bandwidth_gbps",
                "lost_ns",
                "flop_fp32",
                "flop_tensor",
                "smem_wavefronts",
            ):
                v = k.get(key)
                if v is not None and v < 0:
                    out.append(f"launch {kid}: {key} = {v}")
            for key in (
                "achieved_occupancy_pct",
                "theoretical_occupancy_pct",
                "predicted_occupancy_pct",
            ):
                v = k.get(key)
                if v is not None and not 0 <= v <= 101:
                    out.append(f"launch {kid}: {key} = {v}")
            if kid in flagged:
                continue
            bw = k.get("dram_bandwidth_gbps")
            if bw is not None and peak and bw * 1e9 > 1.25 * peak:
                out.append(f"launch {kid}: DRAM {bw} GB/s unflagged above the spec peak")
            for key, lim in (
                ("dram_peak_fraction", 1.25),
                ("dram_measured_fraction", 1.5),
                ("tensor_peak_fraction", 1.25),
            ):
                v = k.get(key)
                if v is not None and v > lim:
                    out.append(f"launch {kid}: {key} = {v} unflagged")
            deg = k.get("smem_conflict_degree")
            if deg is not None and not 0 <= deg <= 32.5:
                out.append(f"launch {kid}: bank-conflict degree {deg} unflagged")
            lost, dur = k.get("lost_ns"), k.get("duration_ns")
            if lost is not None and dur is not None and lost > dur * 1.001 + 1:
                out.append(f"launch {kid}: estimated loss {lost} ns above its duration {dur} ns")
        for name, c in (rep.get("measured_ceilings") or {}).items():
            if c.get("value") is not None and c["value"] <= 0:
                out.append(f"measured ceiling {name} = {c['value']}")
    elif kind in ("kineto", "nsys"):
        devices = (rep.get("summary") or {}).get("devices") or rep.get("devices") or []
        for d in devices:
            busy, window, idle = (
                d.get("gpu_busy_ns"),
                d.get("gpu_window_ns"),
                d.get("gpu_idle_fraction"),
            )
            if busy is not None and busy < 0:
                out.append(f"device {d.get('device')}: busy {busy} ns")
            if busy is not None and window is not None and busy > window:
                out.append(f"device {d.get('device')}: busy {busy} ns > window {window} ns")
            if idle is not None and not -1e-9 <= idle <= 1 + 1e-9:
                out.append(f"device {d.get('device')}: idle fraction {idle}")
            for key in ("launch_delay_median_us", "launch_delay_p90_us"):
                if d.get(key) is not None and d[key] < 0:
                    out.append(f"device {d.get('device')}: {key} {d[key]}")
        for k in rep.get("kernels", []):
            for key in ("duration_ns", "launch_delay_ns", "count", "total_ns"):
                v = k.get(key)
                if isinstance(v, (int, float)) and v < 0:
                    out.append(f"kernel {k.get('name')!r}: {key} = {v}")
    elif kind == "bench":
        for r in rep.get("results", []):
            v, unit = r.get("value"), r.get("unit")
            if (
                v is not None
                and unit in ("s", "B", "B/s", "FLOP", "FLOP/s", "count", "%")
                and v < 0
            ):
                out.append(f"{r.get('case')}/{r.get('metric')} = {v} {unit}")
    return out


# ---------------------------------------------------------------------------------------------------


class Harness:
    """A store holding the bundled samples (ncu, trace, bench runs) that mutants join, and a worker
    process that runs the commands (tests.fuzz.worker): one mutant at a time, restarted after a
    crash, a hang or N mutants.

    A worker rather than a fork per mutant: polars keeps a thread pool, and a forked child of a
    threaded process can deadlock in it; the worker imports everything once and takes mutants over a
    pipe."""

    def __init__(
        self, workdir: Path, timeout_s: float = 120.0, pages: bool = True, reset_every: int = 40
    ):
        self.work = Path(workdir)
        self.work.mkdir(parents=True, exist_ok=True)
        self.timeout_s = timeout_s
        self.pages = pages
        self.reset_every = reset_every
        self.base = self.work / "base_store"
        self.store = self.work / "store"
        self.n = 0
        self.proc = None
        if not (self.base / "runs").is_dir():
            _make_base(self.base)
        self._reset()

    def _reset(self) -> None:
        shutil.rmtree(self.store, ignore_errors=True)
        shutil.copytree(self.base, self.store)
        self.other = {}
        for p in sorted((self.store / "runs").iterdir()):
            m = json.loads((p / "manifest.json").read_text())
            self.other.setdefault(m["kind"], m["run_id"])

    def _start(self) -> None:
        import subprocess

        self.stop()
        root = Path(__file__).resolve().parents[2]
        env = dict(
            os.environ,
            PYTHONPATH=os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]).rstrip(
                os.pathsep
            ),
        )
        self.log = self.work / "worker.log"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.fuzz.worker", str(self.log)],
            cwd=root,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.served = 0

    def stop(self) -> None:
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
            self.proc = None

    def check(self, mutant) -> Outcome:
        import select

        self.n += 1
        if self.n % self.reset_every == 0:
            self._reset()
        if self.proc is None or self.proc.poll() is not None or self.served >= 150:
            self._start()
        case = self.work / "case"
        shutil.rmtree(case, ignore_errors=True)
        case.mkdir()
        path = case / mutant.name
        path.write_bytes(mutant.data)
        before = store_listing(self.store)
        task = {
            "path": str(path),
            "fmt": mutant.fmt,
            "store": str(self.store),
            "pages": self.pages,
            "other": self.other,
        }
        t = time.monotonic()
        self.served += 1
        try:
            self.proc.stdin.write((json.dumps(task) + "\n").encode())
            self.proc.stdin.flush()
        except BrokenPipeError:
            self.stop()
            return Outcome("signal", "the worker was gone", 0.0)
        line = b""
        while True:
            left = self.timeout_s - (time.monotonic() - t)
            if left <= 0:
                self.stop()
                return Outcome("hang", f"over {self.timeout_s:g} s", time.monotonic() - t)
            ready, _, _ = select.select([self.proc.stdout], [], [], min(left, 1.0))
            if ready:
                line = self.proc.stdout.readline()
                break
            if self.proc.poll() is not None:
                break
        secs = time.monotonic() - t
        if not line:
            rc = self.proc.wait()
            self.proc = None
            if rc < 0:
                return Outcome("signal", signal.Signals(-rc).name, secs)
            return Outcome(
                "traceback",
                f"the worker exited {rc}: "
                f"{self.log.read_text()[-800:] if self.log.exists() else ''}",
                secs,
            )
        res = json.loads(line)
        if "harness_error" in res:
            return Outcome("traceback", res["harness_error"][-1500:], secs)
        out = self._judge(res, mutant, before, secs)
        out.commands = [
            {k: c[k] for k in ("argv", "rc", "seconds")} for c in res.get("commands", [])
        ]
        return out

    # ---- in the parent
    # --------------------------------------------------------------------------------
    def _judge(self, res: dict, mutant, before: dict, secs: float) -> Outcome:
        cmds = res["commands"]
        for c in cmds:
            if (
                c["rc"] == 70
                or "Traceback" in c["stderr"]
                or "Traceback" in c["stdout"]
                or isinstance(c["rc"], str)
            ):
                return Outcome(
                    "traceback",
                    f"{' '.join(c['argv'][:2])}: rc {c['rc']}: {c['stderr'][-800:]}",
                    secs,
                )
        ing = cmds[0]
        if ing["rc"] == 1:
            if res.get("noise", "").strip():
                return Outcome(
                    "multi_line",
                    f"output outside the command's streams: {res['noise'][-300:]!r}",
                    secs,
                )
            for c in cmds:
                lines = c["stderr"].splitlines()
                if (
                    c["rc"] != 1
                    or len(lines) != 1
                    or not lines[0].startswith("kernelscope: ")
                    or c["stdout"].strip()
                ):
                    return Outcome(
                        "multi_line",
                        f"{' '.join(c['argv'][:1])}: rc {c['rc']}, stderr {c['stderr']!r:.600}, "
                        f"stdout {c['stdout']!r:.200}",
                        secs,
                    )
                if mutant.name not in lines[0]:
                    return Outcome(
                        "multi_line", f"the refusal does not name the file: {lines[0]!r}", secs
                    )
            after = store_listing(self.store)
            if after != before:
                changed = sorted(set(after.items()) ^ set(before.items()))[:3]
                return Outcome("store_changed", f"{changed}", secs)
            return Outcome("refused", ing["stderr"].strip()[:300], secs)
        if ing["rc"] != 0:
            return Outcome("bad_exit", f"ingest exit {ing['rc']}: {ing['stderr'][-300:]}", secs)
        for c in cmds[1:]:
            if c["rc"] != 0 or c["stderr"].strip():
                return Outcome(
                    "bad_exit",
                    f"{' '.join(map(str, c['argv'][:2]))}: rc {c['rc']}: {c['stderr'][-500:]}",
                    secs,
                )
        if res["absurd"]:
            return Outcome("absurd", "; ".join(res["absurd"][:3]), secs)
        if res["pages"]:
            return Outcome("page_error", "; ".join(res["pages"][:3]), secs)
        return Outcome("accepted", f"run {res.get('run_id')} ({res.get('kind')})", secs)
