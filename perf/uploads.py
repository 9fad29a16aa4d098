"""The dashboard server's memory across `.ncu-rep` uploads, as users upload them: `kernelscope
dashboard` on an empty store, the Upload page in Debian's headless chromium (Playwright), one report
after another.

    .venv/bin/python perf/uploads.py [--uploads 50]

Each upload is the bundled H200 report sample_traces/h200/chapter5_kernels/full.ncu-rep.gz (9
launches x 2,227 metrics) compressed again with its own gzip header time, so that every upload is a
distinct artifact that the server parses and stores (the same bytes twice would be recognised as one
run and not parsed again). The resident memory (VmRSS) of the server process is read after the first
upload and after the last; the target (issue 14) is a growth of at most 200 MiB. Results:
perf/results/uploads.json and perf/results/uploads.md.
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure import REPO, machine, write_results  # noqa: E402

REPORT = REPO / "sample_traces/h200/chapter5_kernels/full.ncu-rep.gz"
CHROMIUM = "/usr/bin/chromium"


def rss_mib(pid: int) -> float:
    """VmRSS of the process and its children (the report reader may run in a child process)."""
    total = 0.0
    pids = [pid]
    try:
        pids += [int(x) for x in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        pass
    for p in pids:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) / 1024
        except OSError:
            pass
    return total


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--uploads", type=int, default=50)
    args = ap.parse_args(argv)
    from playwright.sync_api import sync_playwright

    facts = machine()  # the load average at the start
    tmp = Path(tempfile.mkdtemp(prefix="ks-perf-uploads-"))
    raw = gzip.decompress(REPORT.read_bytes())
    files = []
    for i in range(args.uploads):
        f = tmp / f"upload_{i:03d}.ncu-rep.gz"
        f.write_bytes(gzip.compress(raw, mtime=i + 1))
        files.append(f)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, KERNELSCOPE_SAMPLES=str(tmp / "no_samples"), KERNELSCOPE_FAKE_NVML="1")
    env.pop("KERNELSCOPE_TOKEN", None)
    exe = Path(sys.executable).with_name("kernelscope")
    proc = subprocess.Popen(
        [str(exe), "dashboard", "--port", str(port), "--store", str(tmp / "store")],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    samples = []
    try:
        for _ in range(300):
            try:
                if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read() == b"ok":
                    break
            except OSError:
                time.sleep(0.3)
        start_rss = rss_mib(proc.pid)
        with sync_playwright() as p:
            b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
            page = b.new_page(viewport={"width": 1400, "height": 1000})
            for i, f in enumerate(files):
                page.goto(f"{url}/upload")
                page.wait_for_selector("[data-test-script-state='notRunning'] h1", timeout=120_000)
                page.locator("input[type=file]").set_input_files(str(f))
                page.locator("[data-testid=stAlertContentSuccess]").wait_for(timeout=300_000)
                samples.append({"upload": i + 1, "rss_mib": round(rss_mib(proc.pid), 1)})
                print(
                    f"  upload {i + 1:>3}: server RSS {samples[-1]['rss_mib']:,.0f} MiB", flush=True
                )
            b.close()
        runs = len(list((tmp / "store" / "runs").iterdir()))
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(10)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(proc.pid, signal.SIGKILL)
        shutil.rmtree(tmp, ignore_errors=True)
    first, last = samples[0]["rss_mib"], samples[-1]["rss_mib"]
    doc = {
        "machine": facts,
        "uploads": args.uploads,
        "runs_stored": runs,
        "server_start_rss_mib": start_rss,
        "samples": samples,
        "growth_mib": last - first,
    }
    text = write_results(
        "uploads",
        doc,
        [
            [
                f"server RSS after the 1st and the {args.uploads}th `.ncu-rep` upload",
                f"{first:,.0f} MiB",
                f"{last:,.0f} MiB",
                f"{last - first:+,.0f} MiB",
                "≤ +200 MiB",
            ]
        ],
        ["what", "after the first", "after the last", "growth", "target"],
        [f"{runs} runs stored; server RSS at start {start_rss:,.0f} MiB (perf/uploads.py)."],
    )
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
