"""Timing the commands users run: each tool in a fresh process, wall and CPU time and peak memory
per run, the tools alternated within every round, medians and spread over the rounds, and a Markdown
table for the README.

    from measure import Tool, compare, machine, write_results

`write_results(name, ...)` adds each run to perf/results/<name>.json (under a key of its own,
"run_YYYYMMDD_HHMM") and to perf/results/<name>.md (a heading with the run's key, command line and
commit, then its table), keeping the runs before it.

A `Tool` is a command line (and where its standard output goes). `compare(tools, rounds)` runs every
tool once per round, in an order that rotates from round to round (A B, B A, ... so that neither
tool always runs on a warm or a cold machine), and returns per tool the samples and their medians.
CPU time is user + system time of the process (os.wait4 in a small launcher process that forks the
command), peak memory the largest resident set of the command (ru_maxrss); wall time from the fork
to the command's exit.
"""

from __future__ import annotations

import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "perf" / "results"


@dataclass
class Tool:
    name: str
    argv: list[str]
    env: dict = field(default_factory=dict)
    # a file for the command's standard output (default: discarded)
    stdout: str | None = None
    cwd: str | None = None
    setup: object = None  # called before each run, not timed (e.g. empty a store)


# The command runs as the child of a small launcher process, which reports the child's own resource
# use. Measured directly from this script, a child's peak memory would include this script's (the
# child shares it until it execs the command: Python starts children with vfork, and a process keeps
# its peak across exec).
_LAUNCHER = r"""
import json, os, sys, time
out, argv = sys.argv[1], sys.argv[2:]
t0 = time.perf_counter()
pid = os.fork()
if pid == 0:
    try:
        os.execvp(argv[0], argv)
    finally:
        os._exit(127)
_, status, ru = os.wait4(pid, 0)
wall = time.perf_counter() - t0
with open(out, "w") as f:
    json.dump({"rc": os.waitstatus_to_exitcode(status), "wall_s": wall, "user_s": ru.ru_utime, "sys_s": ru.ru_stime,
               "maxrss_kib": ru.ru_maxrss}, f)
"""


def run_once(tool: Tool, timeout: float = 3600) -> dict:
    """One run of the tool in a fresh process: wall_s, cpu_s (user + sys), maxrss_mib (the command's
    own peak resident memory), through the launcher above."""
    import tempfile

    if tool.setup:
        tool.setup()
    out = open(tool.stdout, "wb") if tool.stdout else subprocess.DEVNULL
    env = dict(os.environ, **tool.env)
    # as a user's Python runs it: compiled modules cached (a shell that sets PYTHONDONTWRITEBYTECODE
    # would make every run compile the modules that have no .pyc yet, about 0.1 s per command)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    fd, report = tempfile.mkstemp(prefix="ks-perf-", suffix=".json")
    os.close(fd)
    ticks = cpu_ticks()
    try:
        p = subprocess.run(
            [sys.executable, "-c", _LAUNCHER, report, *tool.argv],
            stdout=out,
            stderr=subprocess.PIPE,
            env=env,
            cwd=tool.cwd,
            timeout=timeout,
        )
        ru = json.loads(Path(report).read_text() or "{}")
    finally:
        if tool.stdout:
            out.close()
        os.unlink(report)
    err = p.stderr.decode(errors="replace")
    if p.returncode != 0 or ru.get("rc") != 0:
        raise RuntimeError(
            f"{tool.name} failed (exit {ru.get('rc', p.returncode)}): "
            f"{' '.join(tool.argv)}\n"
            f"{err[-3000:]}"
        )
    return {
        "wall_s": ru["wall_s"],
        "cpu_s": ru["user_s"] + ru["sys_s"],
        "user_s": ru["user_s"],
        "sys_s": ru["sys_s"],
        "maxrss_mib": ru["maxrss_kib"] / 1024,
        "steal_pct": steal_pct(ticks, cpu_ticks()),
        "stderr_tail": err[-2000:],
    }


def cpu_ticks() -> tuple[int, int] | None:
    """(steal, total) clock ticks of all CPUs since boot (/proc/stat's first line), None where there
    is none. Steal is the time a virtual machine's CPUs were ready to run but the hypervisor ran
    something else: a shared cloud host slows every command by it, and a command on all cores more
    than one on a single core."""
    try:
        f = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    except OSError:
        return None
    if len(f) < 9 or f[0] != "cpu":
        return None
    # user nice system idle iowait irq softirq steal (guest is within user)
    v = [int(x) for x in f[1:9]]
    return v[7], sum(v)


def steal_pct(a: tuple[int, int] | None, b: tuple[int, int] | None) -> float | None:
    """The share of all CPUs' time between two cpu_ticks() readings that the hypervisor took, in %."""
    if a is None or b is None or b[1] <= a[1]:
        return None
    return round(100 * (b[0] - a[0]) / (b[1] - a[1]), 1)


def stats(samples: list[dict]) -> dict:
    out = {"n": len(samples)}
    for k in ("wall_s", "cpu_s", "maxrss_mib"):
        v = [s[k] for s in samples]
        out[k] = {"median": statistics.median(v), "min": min(v), "max": max(v)}
    steal = [s["steal_pct"] for s in samples if s.get("steal_pct") is not None]
    if steal:
        out["steal_pct"] = {
            "median": statistics.median(steal),
            "min": min(steal),
            "max": max(steal),
        }
    return out


def compare(tools: list[Tool], rounds: int, log=print) -> dict:
    """Every tool once per round, the order rotated each round; per tool its samples and stats."""
    samples: dict[str, list[dict]] = {t.name: [] for t in tools}
    for r in range(rounds):
        order = tools[r % len(tools) :] + tools[: r % len(tools)]
        for t in order:
            s = run_once(t)
            s["round"] = r
            samples[t.name].append(s)
            steal = "" if s["steal_pct"] is None else f"  steal {s['steal_pct']:4.1f} %"
            log(
                f"  round {r + 1}/{rounds} {t.name:<28} wall {s['wall_s']:7.2f} s  cpu "
                f"{s['cpu_s']:7.2f} s  peak {s['maxrss_mib']:8.0f} MiB{steal}"
            )
    return {name: {"samples": v, **stats(v)} for name, v in samples.items()}


def loadavg() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def machine() -> dict:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = 0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem = int(line.split()[1]) * 1024
    except OSError:
        pass
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "memory_gib": round(mem / 2**30, 1),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "loadavg_start": loadavg(),
        "cpu_ticks_start": cpu_ticks(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "commit": commit(),
        "command": " ".join(["python", _script(), *sys.argv[1:]]),
    }


def _script() -> str:
    """This script's path from the repository's root (perf/traces.py), or as it was given."""
    p = Path(sys.argv[0]).resolve() if sys.argv and sys.argv[0] else None
    try:
        return str(p.relative_to(REPO)) if p else "python"
    except ValueError:
        return sys.argv[0]


def commit() -> str | None:
    """The checkout's commit, with "-dirty" when a tracked file outside perf/results differs from it
    (the results files are what these scripts write), or None outside a git checkout."""
    try:
        head = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short=7", "HEAD"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        changed = subprocess.run(
            [
                "git",
                "-C",
                str(REPO),
                "status",
                "--porcelain",
                "--untracked-files=no",
                "--",
                ".",
                ":(exclude)perf/results",
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if head.returncode or not head.stdout.strip():
        return None
    return head.stdout.strip() + ("-dirty" if changed.stdout.strip() else "")


def fmt_spread(st: dict, key: str, unit: str, nd: int = 2) -> str:
    """ "median (min–max) unit" of one stat."""
    s = st[key]
    return f"{s['median']:.{nd}f} ({s['min']:.{nd}f}–{s['max']:.{nd}f}) {unit}"


def write_results(
    name: str, doc: dict, table: list[list[str]], header: list[str], notes: list[str]
) -> str:
    """Add this run to perf/results/<name>.json (under its key, "run_YYYYMMDD_HHMM" of its start)
    and to perf/results/<name>.md (a heading naming the key, the command line and the commit, then
    the table the README quotes, with the machine). Earlier runs stay in both files; a file that is
    not a JSON object is left as it is and this run written beside it (<name>.<key>.json). Returns
    this run's Markdown, with the files it went to."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    m = doc["machine"]
    m["loadavg_end"] = loadavg()
    m["steal_pct"] = steal_pct(m.pop("cpu_ticks_start", None), cpu_ticks())
    d = re.findall(r"\d+", m["date"])  # "2026-12-03 22:23 UTC" -> run_20261203_2223
    key = f"run_{''.join(d[:3])}_{''.join(d[3:5])}"
    jpath = RESULTS / f"{name}.json"
    runs: dict = {}
    if jpath.exists():
        try:
            runs = json.loads(jpath.read_text())
        except ValueError:
            runs = None
        if not isinstance(runs, dict):
            jpath, runs = RESULTS / f"{name}.{key}.json", {}
    base, n = key, 2
    while key in runs:
        key, n = f"{base}_{n}", n + 1
    runs[key] = doc
    jpath.write_text(json.dumps(runs, indent=1, default=str) + "\n")
    lines = [
        f"### {key}: `{m.get('command') or name}` on {m.get('commit') or 'an unknown commit'}",
        "",
        f"| {' | '.join(header)} |",
        f"|{'|'.join('---' for _ in header)}|",
    ]
    lines += [f"| {' | '.join(row)} |" for row in table]
    lines += [
        "",
        f"Machine: {m['cpus']} CPUs ({m['cpu_model']}), {m['memory_gib']} GiB, Python "
        f"{m['python']}; load average {m['loadavg_start']} at the start, {m['loadavg_end']} at the "
        f"end; {m['date']}."
        + (
            ""
            if m["steal_pct"] is None
            else f" CPU time taken by the hypervisor (steal) "
            f"over the whole run: {m['steal_pct']} % of all CPUs' time."
        ),
    ]
    lines += notes
    path = RESULTS / f"{name}.md"
    before = path.read_text().rstrip("\n") + "\n\n\n" if path.exists() else ""
    path.write_text(before + "\n".join(lines) + "\n")
    return (
        "\n".join(lines)
        + f"\n\n(added to {path.relative_to(REPO)} and, as {key}, {jpath.relative_to(REPO)})\n"
    )
