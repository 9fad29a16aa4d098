"""Chromium and a dashboard server for the end-to-end tests: launch arguments, the drawn-page check, start and stop."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest


CHROMIUM = Path("/usr/bin/chromium")


ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


SHOTS = Path(os.environ.get("KERNELSCOPE_E2E_SHOTS", "/tmp/kernelscope-e2e-shots"))


#: the page is drawn: script finished, no skeleton, every chart has its SVG/canvas, components
#: painted, and the elements the caller names (a CSS selector) are there: a component mounts after
#: the script's state goes idle
DRAWN = """(need) => {
  if (need && !document.querySelector(need)) return false;
  const idle = document.querySelector("[data-test-script-state='notRunning']");
  if (!idle || !document.querySelector('h1') || document.querySelector('[data-testid=stSkeleton]')) return false;
  for (const c of document.querySelectorAll('[data-testid=stVegaLiteChart]')) {
    const g = c.querySelector('svg, canvas');
    if (!g || g.getBoundingClientRect().height < 10) return false;
  }
  for (const t of document.querySelectorAll('.ks-tl')) if (!t.dataset.paints) return false;
  for (const t of document.querySelectorAll('.ks-table')) if (!t.querySelector('tbody tr')) return false;
  return true;
}"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(store: Path, tmp: Path, **env_extra) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    env = dict(
        os.environ,
        KERNELSCOPE_SAMPLES=str(tmp / "no_samples"),
        KERNELSCOPE_FAKE_NVML="1",
        **env_extra,
    )
    if "KERNELSCOPE_TOKEN" not in env_extra:
        env.pop("KERNELSCOPE_TOKEN", None)
    exe = Path(sys.executable).with_name("kernelscope")
    proc = subprocess.Popen(
        [str(exe), "dashboard", "--port", str(port), "--store", str(store)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 90
    while True:
        try:
            if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read() == b"ok":
                return proc, url
        except OSError:
            pass
        if proc.poll() is not None or time.time() > deadline:
            _stop(proc)
            pytest.fail(
                f"dashboard did not start: {proc.stdout.read().decode(errors='replace')[-2000:]}"
            )
        time.sleep(0.3)


def _stop(proc: subprocess.Popen) -> None:
    """Stop the launcher and the streamlit server it started: their own process group, SIGTERM, then SIGKILL."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        deadline = time.time() + 5
        while time.time() < deadline:
            # reap the launcher so that it does not linger as a zombie
            proc.poll()
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)
