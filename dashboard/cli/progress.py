"""The command line's progress bar: on a terminal, one line on stderr that says the stage, how far
it is (launches, bytes, ranks) and an estimate of the time left; nothing at all when stderr is not a
terminal (a pipe, a file, CI), so piped output and logs stay as they were. KERNELSCOPE_PROGRESS=0
turns it off, =1 forces it on.

The stages are said by the code doing the work (collectors.progress.report); this module only draws
them."""

from __future__ import annotations

import os
import sys
import time
from contextlib import contextmanager
from typing import Iterator, TextIO

from collectors.progress import Step, reporting

WIDTH = 24  # characters of the bar itself
EVERY_S = 0.1  # at most ten redraws a second


class Bar:
    def __init__(self, stream: TextIO, every_s: float = EVERY_S):
        self.stream, self.every_s = stream, every_s
        self.last_draw = 0.0
        self.stage: str | None = None
        self.stage_started = time.monotonic()
        self.drawn = False
        self.last_line = ""

    def __call__(self, step: Step) -> None:
        now = time.monotonic()
        if step.stage != self.stage:
            self.stage, self.stage_started = step.stage, now
        elif now - self.last_draw < self.every_s and step.fraction != 1.0:
            return
        self.last_draw = now
        line = step.text()
        frac = step.fraction
        if frac is not None:
            fill = int(round(WIDTH * frac))
            line += f" [{'#' * fill}{'.' * (WIDTH - fill)}] {100 * frac:3.0f} %"
            took = now - self.stage_started
            if 0.02 < frac < 1.0 and took > 0.5:
                line += f", about {took * (1 - frac) / frac:.0f} s left"
        line = line[: _columns(self.stream) - 1]
        if line == self.last_line:
            return
        self.last_line = line
        self.stream.write("\r\x1b[2K" + line)
        self.stream.flush()
        self.drawn = True

    def close(self) -> None:
        if self.drawn:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()


def _columns(stream: TextIO) -> int:
    try:
        # a pseudo-terminal may say 0
        return os.get_terminal_size(stream.fileno()).columns or 100
    except (OSError, ValueError, AttributeError):
        return 100


def wanted(stream: TextIO) -> bool:
    flag = os.environ.get("KERNELSCOPE_PROGRESS")
    if flag in ("0", "1"):
        return flag == "1"
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


@contextmanager
def shown(stream: TextIO | None = None, also=None) -> Iterator[None]:
    """Draw every progress report made inside the block, when `stream` (stderr) is a terminal;
    `also`: another sink that receives every report as well (dashboard.cli.timings)."""
    stream = stream or sys.stderr
    bar = Bar(stream) if wanted(stream) else None
    if bar is None and also is None:
        yield
        return
    if bar is None or also is None:
        sink = bar or also
    else:

        def sink(step: Step) -> None:
            also(step)
            bar(step)

    with reporting(sink):
        try:
            yield
        finally:
            if bar is not None:
                bar.close()
