"""`--timings` (or KERNELSCOPE_TIMINGS=1): where a command's time and memory went, by stage, on stderr
after the command's own output.

The stages are the ones the progress bar shows (collectors.progress.report: "reading", "analysing",
"writing", ...), so the table needs no timing code in the readers or analyses. Before the first stage
is "start-up": the interpreter, the imports and the argument parsing, from the process's own start.

    stage        wall s   CPU s   peak RSS MiB   done
    start-up       0.24    0.24             48
    reading        0.71    0.70            233   294 MB: 420 MB/s of CPU
    analysing      0.63    0.62            301
    writing        0.29    0.29            305
    whole          1.87    1.85            305

CPU is user + system time (os.times) of the process, all its threads, and its children once they
have ended (a child still running when a stage ends counts in a later one); wall is the monotonic
clock; peak RSS the process's own high-water mark so far (ru_maxrss; a child's memory is not in it)
at the stage's end. perf/measure.py takes the same quantities for the whole command.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field

from collectors.progress import Step

#: the environment variable that turns the table on, as --timings does
ENV = "KERNELSCOPE_TIMINGS"


def wanted(argv: list[str]) -> tuple[bool, list[str]]:
    """(whether timings were asked for, argv without --timings): the flag may stand anywhere on the
    line, like --debug."""
    on = "--timings" in argv or os.environ.get(ENV) == "1"
    return on, [a for a in argv if a != "--timings"]


def _cpu() -> float:
    """User + system time of this process and of its children that have ended (the `.ncu-rep`
    reader's process, rank workers once their pool is shut down)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _peak_mib() -> float | None:
    try:
        import resource

        # Linux reports KiB, macOS bytes
        kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return kib / 1024 / (1024 if sys.platform == "darwin" else 1)
    except (ImportError, OSError):
        return None


def _since_start() -> float | None:
    """Seconds since this process started (Linux: /proc), or None."""
    try:
        with open("/proc/self/stat", "rb") as f:
            start_ticks = int(f.read().rsplit(b")", 1)[1].split()[19])
        with open("/proc/uptime") as f:
            up = float(f.read().split()[0])
        return max(0.0, up - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return None


@dataclass
class Stage:
    name: str
    wall_s: float
    cpu_s: float
    peak_mib: float | None
    bytes: float | None = None  # the most bytes the stage said it had done (unit "B")


@dataclass
class Timings:
    """A progress sink that keeps, per stage, its wall and CPU time and the peak RSS at its end."""

    stages: list[Stage] = field(default_factory=list)
    stage: str | None = None
    t0: float = 0.0
    c0: float = 0.0
    done_bytes: float | None = None

    def __post_init__(self) -> None:
        now = time.monotonic()
        up = _since_start()
        # start-up: from the process's start (CPU: all of it so far) to the first stage
        self.start_wall = now - (up if up is not None else 0.0)
        self.stage, self.t0, self.c0 = "start-up", self.start_wall, 0.0

    def __call__(self, step: Step) -> None:
        if step.stage != self.stage:
            self._close()
            self.stage, self.t0, self.c0 = step.stage, time.monotonic(), _cpu()
        if step.unit == "B" and step.done is not None:
            self.done_bytes = max(self.done_bytes or 0.0, float(step.done))

    def _close(self) -> None:
        if self.stage is None:
            return
        self.stages.append(
            Stage(
                self.stage,
                time.monotonic() - self.t0,
                _cpu() - self.c0,
                _peak_mib(),
                self.done_bytes,
            )
        )
        self.stage, self.done_bytes = None, None

    def finish(self) -> list[Stage]:
        """Close the last stage; the stages in order, then "whole" (the process so far)."""
        self._close()
        whole = Stage("whole", time.monotonic() - self.start_wall, _cpu(), _peak_mib())
        return [*self.stages, whole]


def render(stages: list[Stage]) -> str:
    """The table printed on stderr (the module's docstring shows one)."""
    width = max(12, *(len(s.name) for s in stages)) + 1
    lines = [f"{'stage':<{width}} {'wall s':>7} {'CPU s':>7} {'peak RSS MiB':>13}   done"]
    for s in stages:
        peak = f"{s.peak_mib:,.0f}" if s.peak_mib is not None else "-"
        done = ""
        if s.bytes:
            done = f"{s.bytes / 1e6:,.0f} MB" if s.bytes >= 1e6 else f"{s.bytes / 1e3:,.0f} kB"
            # a rate over a few ms of CPU says nothing
            if s.cpu_s >= 0.05:
                done += f": {s.bytes / 1e6 / s.cpu_s:,.0f} MB/s of CPU"
        lines.append(
            f"{s.name:<{width}} {s.wall_s:>7.2f} {s.cpu_s:>7.2f} {peak:>13}   {done}".rstrip()
        )
    return "\n".join(lines)
