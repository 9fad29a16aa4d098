"""Progress of long work: the code doing it says where it is, whoever asked shows it.

    report(stage, done, total, unit)    said by a reader, the store, the analysis ("reading launch", 12, 89, "launches")
    with reporting(sink): ...           sink(Step) receives every report made inside the block (this thread/context)

Nothing is shown unless a caller installed a sink: the command line draws a bar on a terminal
(dashboard.cli.progress), the Upload page a progress bar with the stage. A reader in a child process
(collectors.sandbox) reports through a small file its parent polls, so a `.ncu-rep` read in
isolation still says which launch it is on. Reports are cheap (a context-variable lookup when nobody
listens); readers make them per chunk or per launch, not per row.
"""

from __future__ import annotations

import contextvars
import os
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator


@dataclass(frozen=True)
class Step:
    # "inflating", "reading", "reading launch", "analysing", "storing", ...
    stage: str
    done: float | None = None
    total: float | None = None
    unit: str = ""  # "B", "launches", "ranks", ""

    def text(self) -> str:
        """The step in words: "reading launch 12 of 89", "inflating 40 of 120 MB", "storing"."""
        if self.done is None:
            return self.stage
        if self.unit == "B":  # MB, or kB for a file under a megabyte
            scale, unit = (1e6, "MB") if (self.total or self.done) >= 1e6 else (1e3, "kB")
            tot = f" of {self.total / scale:,.0f} {unit}" if self.total else f" {unit}"
            return f"{self.stage} {self.done / scale:,.0f}{tot}"
        tot = f" of {self.total:,.0f}" if self.total else ""
        unit = f" {self.unit}" if self.unit and self.unit not in self.stage else ""
        return f"{self.stage} {self.done:,.0f}{tot}{unit}"

    @property
    def fraction(self) -> float | None:
        return min(1.0, self.done / self.total) if self.done is not None and self.total else None


_SINK: contextvars.ContextVar[Callable[[Step], None] | None] = contextvars.ContextVar(
    "ks_progress", default=None
)


def report(
    stage: str, done: float | None = None, total: float | None = None, unit: str = ""
) -> None:
    sink = _SINK.get()
    if sink is not None:
        sink(Step(stage, done, total, unit))


def listening() -> bool:
    return _SINK.get() is not None


@contextmanager
def reporting(sink: Callable[[Step], None] | None) -> Iterator[None]:
    token = _SINK.set(sink)
    try:
        yield
    finally:
        _SINK.reset(token)


# ---- across a process boundary (collectors.sandbox)
# --------------------------------------------------------

#: the environment variable naming the file a child process writes its progress to
CHILD_FILE = "KS_PROGRESS_FILE"


def child_sink(path: str, every_s: float = 0.1) -> Callable[[Step], None]:
    """A sink for a child process: the latest step written to `path` (atomically), at most every `every_s` s."""
    last = [0.0]

    def sink(step: Step) -> None:
        now = time.monotonic()
        if now - last[0] < every_s and step.done != step.total:
            return
        last[0] = now
        tmp = f"{path}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(
                f"{step.stage}\t{step.done if step.done is not None else ''}\t"
                f"{step.total if step.total is not None else ''}\t{step.unit}"
            )
        os.replace(tmp, path)

    return sink


def read_child(path: str) -> Step | None:
    """The step a child last wrote, or None (not yet written, or half a line)."""
    try:
        with open(path, encoding="utf-8") as f:
            stage, done, total, unit = f.read().split("\t")
    except (OSError, ValueError):
        return None
    return Step(stage, float(done) if done else None, float(total) if total else None, unit)
