"""Multi-rank analysis of 64 rank traces of >= 20 MB each: driver peak memory and time with the
process pool, on a local Ray cluster, against running every rank in the driver process (serial) and
against the old way of reading a rank folder as one run (all ranks' tables in one process), in the
same run.

The traces are built from the real 8-rank DLRM NCCL traces of facebookresearch/param
(tests/corpus/param/dlrm_8rank, MIT): each rank's events are replicated, copy k shifted by k periods
(one period covers every rank's events, so the ranks stay aligned) with fresh correlation / External
/ flow ids and its ProfilerStep renumbered k, until the JSON is >= --mb MiB; ranks 8..63 repeat
ranks 0..7 under their own distributedInfo.rank. Every copy keeps the original's NCCL send/recv and
all-reduce kernels, so the collectives still synchronise.

Timed (each a fresh process, `kernelscope analyze DIR --format json`, the user-facing command):
  pool     the default: one task per rank on a process pool (2 workers here)
  ray      --ray on a local cluster started here (`ray start --head` on 127.0.0.1, 2 CPUs)
  serial   the same tasks run one after the other inside the driver (dashboard.core.execute.SerialExecutor)
  whole    the old path for a rank folder: every rank parsed into one run's tables in one process, then the
           same multi-rank analysis (on --whole-ranks 8 and 16 ranks: it holds every rank's tables at once)
Reported: wall seconds, the driver's peak RSS (its own ru_maxrss), the largest worker's peak, and whether the
numbers (ranks, iterations, collectives) are identical across pool, ray and serial.

    .venv/bin/python perf/multirank.py [--ranks 64] [--mb 20] [--workdir DIR] [--skip-ray]
        [--serial-ranks N] [--hta-python PY --hta-ranks 4 8] [--results NAME]

The lab-server run of issue 43 (64 ranks of >= 300 MiB, >= 19 GiB; on a 16-core machine):

    python3 perf/multirank.py --mb 300 --skip-ray --whole-ranks --serial-ranks 8 \
        --hta-python python3 --hta-ranks 2 4 --results multirank_19gb.json

--serial-ranks N: the serial baseline runs on a folder of the first N ranks (links to the same
files), beside the pool on that folder; the per-rank numbers that depend on one rank alone are
also compared with the big folder's. --hta-python: HTA 0.5 (perf/hta_baseline.py) on folders of
the first K ranks for each K in --hta-ranks, each with --hta-timeout seconds; the peak memory of
a baseline is the largest sum of RSS over its process tree (HTA parses ranks in parallel
processes), sampled every 0.1 s.

Results: a table on stdout and perf/results/multirank.json (or --results). Needs about ranks x mb
MiB of disk in --workdir; the folder is built by one process per base rank (orjson when present).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SOURCE = REPO / "tests" / "corpus" / "param" / "dlrm_8rank"
ID_STRIDE = 10_000_000


def _load(p: Path) -> dict:
    return json.loads(gzip.open(p).read())


def _dumps():
    try:
        import orjson

        return lambda e: orjson.dumps(e).decode()
    except ImportError:
        return json.dumps


def _body(job: tuple[Path, float, float]) -> bytes:
    """One base rank's events replicated until the JSON is >= mb MiB (see the module's docstring)."""
    path, mb, period = job
    d = _load(path)
    dumps = _dumps()
    one = sum(len(dumps(e)) + 4 for e in d["traceEvents"])
    copies = max(1, int(mb * 2**20 / one) + 1)
    parts = []
    for k in range(copies):
        for e in d["traceEvents"]:
            e = dict(e)
            if "ts" in e and e.get("ph") != "M":
                e["ts"] = e["ts"] + k * period
            if e.get("ph") in ("s", "f") and "id" in e:
                e["id"] = e["id"] + k * ID_STRIDE
            if isinstance(e.get("args"), dict):
                a = dict(e["args"])
                for key in ("correlation", "External id"):
                    if isinstance(a.get(key), int):
                        a[key] += k * ID_STRIDE
                e["args"] = a
            if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith(
                "ProfilerStep#"
            ):
                e["name"] = f"ProfilerStep#{k}"
            parts.append(dumps(e))
    return ("[\n  " + ",\n  ".join(parts) + "\n]").encode()


def build(workdir: Path, ranks: int, mb: float) -> Path:
    """The rank folder (cached in workdir when it is already complete)."""
    out = workdir / f"dlrm_{ranks}ranks_{mb:g}mb"
    done = out / ".complete"
    if done.exists():
        return out
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    paths = sorted(SOURCE.glob("*.json.gz"))
    bases = [_load(p) for p in paths]
    lo = min(e["ts"] for d in bases for e in d["traceEvents"] if "ts" in e)
    hi = max(e["ts"] + e.get("dur", 0) for d in bases for e in d["traceEvents"] if "ts" in e)
    period = (hi - lo) + 1000.0  # µs
    jobs = [(p, mb, period) for p in paths]
    with ProcessPoolExecutor(min(len(jobs), os.cpu_count() or 1)) as pool:
        bodies = list(pool.map(_body, jobs))
    for r in range(ranks):
        base = bases[r % len(bases)]
        top = {k: v for k, v in base.items() if k != "traceEvents"}
        top["distributedInfo"] = dict(top.get("distributedInfo") or {}, rank=r, world_size=ranks)
        head = json.dumps(top)[:-1].encode() + b', "traceEvents": '
        (out / f"rank{r:03d}.pt.trace.json").write_bytes(head + bodies[r % len(bases)] + b"}\n")
    done.write_text("ok")
    return out


def subset(workdir: Path, folder: Path, n: int, name: str) -> Path:
    """A folder of links to the first n rank traces of folder."""
    sub = workdir / f"{name}_{n}"
    shutil.rmtree(sub, ignore_errors=True)
    sub.mkdir()
    for p in sorted(folder.glob("*.json"))[:n]:
        os.symlink(p, sub / p.name)
    return sub


WRAP = r"""
import json, os, resource, subprocess, sys, threading, time


def tree_rss(root):
    kids, rss = {}, {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                f = open(f"/proc/{d}/stat").read().rsplit(")", 1)[1].split()
                kids.setdefault(int(f[1]), []).append(int(d))
                rss[int(d)] = int(f[21]) * os.sysconf("SC_PAGE_SIZE")
            except (OSError, IndexError, ValueError):
                pass
    todo, total = [root], 0
    while todo:
        p = todo.pop()
        total += rss.get(p, 0)
        todo += kids.get(p, [])
    return total


timeout = float(os.environ.get("WRAP_TIMEOUT") or 0) or None
t = time.perf_counter()
proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                        start_new_session=True)
peak = [0]
def sample():
    while proc.poll() is None:
        peak[0] = max(peak[0], tree_rss(proc.pid))
        time.sleep(0.1)
threading.Thread(target=sample, daemon=True).start()
try:
    out, err = proc.communicate(timeout=timeout)
    rc = proc.returncode
except subprocess.TimeoutExpired:
    import signal
    os.killpg(proc.pid, signal.SIGKILL)
    out, err = proc.communicate()
    rc = "timeout"
wall = time.perf_counter() - t
ch = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"rc": rc, "wall_s": wall, "cpu_s": ch.ru_utime + ch.ru_stime,
                  "max_descendant_rss_bytes": ch.ru_maxrss * 1024, "tree_peak_rss_bytes": peak[0],
                  "stdout": out.decode()[-20_000_000:], "stderr": err.decode()[-4000:]}))
"""

SERIAL = r"""
import json, sys
sys.path.insert(0, sys.argv[2])
from dashboard.core import execute, ranks
from dashboard.cli import ranks as cli_ranks
mr, info = ranks.analyze_sources(ranks.path_sources(sys.argv[1]), execute.SerialExecutor())
print(json.dumps(cli_ranks.folder_report(mr, info, sys.argv[1]), default=str))
"""

WHOLE = r"""
import json, resource, sys, time
sys.path.insert(0, sys.argv[2])
t = time.perf_counter()
from collectors.ingest import parse_path
from analyzers.timeline import summarize
from dashboard.core import ranks
from analyzers.stragglers import combine
p = parse_path(sys.argv[1])                         # the folder as one run: a tar of every rank, parsed at once
s = summarize(p.tables["gpu_ops"])
mr = combine(ranks._summaries(p, sys.argv[1], None, {}))
print(json.dumps({"wall_s": time.perf_counter() - t, "ranks": mr.ranks.height,
                  "driver_peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""


def run(cmd: list[str], timeout: float | None = None) -> dict:
    env = {**os.environ, "WRAP_TIMEOUT": str(timeout or "")}
    r = subprocess.run(
        [sys.executable, "-c", WRAP, *cmd], capture_output=True, text=True, cwd=REPO, env=env
    )
    if r.returncode:
        raise SystemExit(r.stderr)
    return json.loads(r.stdout)


def numbers(rep: dict) -> str:
    keep = {
        k: rep[k]
        for k in (
            "ranks",
            "iterations",
            "collectives",
            "rank_collectives",
            "iteration_times",
            "collective_instances",
        )
    }
    keep["ranks"] = [
        {k: v for k, v in r.items() if not k.startswith("worker_")} for r in keep["ranks"]
    ]
    return json.dumps(keep, sort_keys=True)


def analyze(folder: Path, extra: list[str]) -> dict:
    ks = [sys.executable, "-c", "import sys; from dashboard.cli import main; sys.exit(main())"]
    res = run(
        [
            *ks,
            "analyze",
            str(folder),
            "--format",
            "json",
            "--store",
            str(folder.parent / "store"),
            *extra,
        ]
    )
    if res["rc"]:
        raise SystemExit(res["stderr"])
    rep = json.loads(res["stdout"])
    ex = rep["execution"]
    return {
        "wall_s": res["wall_s"],
        "cpu_s": res["cpu_s"],
        "driver_peak_rss_bytes": ex["driver_peak_rss_bytes"],
        "max_descendant_rss_bytes": res["max_descendant_rss_bytes"],
        "worker_peak_rss_bytes": max(r["worker_peak_rss_bytes"] or 0 for r in rep["ranks"]),
        "tree_peak_rss_bytes": res["tree_peak_rss_bytes"],
        "executor": ex["executor"],
        "workers": ex["workers"],
        "_numbers": numbers(rep),
        "_rep": rep,
    }


# per-rank numbers that depend on that rank's trace alone (the rest compare a rank with the others)
OWN = (
    "rank", "gpu_name", "device", "iterations", "step_median_ns", "step_mean_ns", "step_max_ns",
    "own_median_ns", "window_ns", "compute_ns", "comm_ns", "exposed_comm_ns", "overlapped_comm_ns",
    "memcpy_ns", "host_wait_ns", "idle_ns", "overlap_fraction", "kernel_count", "comm_kernel_count",
)  # fmt: skip


def own_rows(rep: dict) -> dict:
    return {r["rank"]: {k: r.get(k) for k in OWN} for r in rep["ranks"]}


def hta(python: str, folder: Path, timeout: float) -> dict:
    env_note = "HTA_DISABLE_NS_ROUNDING=1"
    os.environ["HTA_DISABLE_NS_ROUNDING"] = "1"
    res = run([python, str(REPO / "perf" / "hta_baseline.py"), str(folder)], timeout=timeout)
    out = {k: res[k] for k in ("rc", "wall_s", "cpu_s", "tree_peak_rss_bytes")}
    out["max_process_rss_bytes"] = res["max_descendant_rss_bytes"]
    out["env"] = env_note
    if res["rc"] == 0:
        out["found"] = json.loads(res["stdout"].strip().splitlines()[-1])
    else:
        out["stderr_tail"] = res["stderr"][-600:]
    return out


def gib(b: float) -> str:
    return f"{b / 2**30:.2f} GiB"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--mb", type=float, default=20.0, help="MiB of JSON per rank (at least)")
    ap.add_argument(
        "--whole-ranks",
        type=int,
        nargs="*",
        default=[8, 16],
        help="rank counts for the one-process baseline (it holds every rank's tables at once)",
    )
    ap.add_argument(
        "--workdir", type=Path, default=Path(tempfile.gettempdir()) / "kernelscope-perf-multirank"
    )
    ap.add_argument("--skip-ray", action="store_true")
    ap.add_argument("--serial-ranks", type=int, default=0, help="serial baseline on the first N")
    ap.add_argument("--hta-python", help="a python with HolisticTraceAnalysis 0.5")
    ap.add_argument("--hta-ranks", type=int, nargs="*", default=[])
    ap.add_argument("--hta-timeout", type=float, default=300.0)
    ap.add_argument("--results", default="multirank.json", help="file name in perf/results/")
    args = ap.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    folder = build(args.workdir, args.ranks, args.mb)
    sizes = [p.stat().st_size for p in folder.glob("*.json")]
    build_s = time.perf_counter() - t
    print(
        f"{len(sizes)} rank traces in {folder}, {min(sizes) / 2**20:.1f}-{max(sizes) / 2**20:.1f} MiB "
        f"each, {sum(sizes) / 2**30:.2f} GiB ({build_s:.0f} s to build or reuse)",
        flush=True,
    )
    for p in sorted(folder.glob("*.json")):  # every mode reads the files from the page cache
        with open(p, "rb") as f:
            while f.read(1 << 24):
                pass
    load0 = os.getloadavg()
    results: dict = {
        "ranks": len(sizes),
        "rank_mib_min": min(sizes) / 2**20,
        "total_gib": sum(sizes) / 2**30,
        "total_bytes": sum(sizes),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "build_s": build_s,
        "load_before": load0,
    }
    results["pool"] = analyze(folder, [])
    pool = results["pool"]
    print(
        f"  {pool['executor']} ({pool['workers']} workers): {pool['wall_s']:.1f} s wall, "
        f"{pool['cpu_s']:.0f} CPU s, driver peak {pool['driver_peak_rss_bytes'] / 2**20:.0f} MiB, "
        f"largest worker {pool['worker_peak_rss_bytes'] / 2**20:.0f} MiB, "
        f"all processes {gib(pool['tree_peak_rss_bytes'])}",
        flush=True,
    )
    if not args.skip_ray:
        sys.path.insert(0, str(REPO))
        from tests.ray_helpers import ray_cluster

        with ray_cluster(num_cpus=2) as (address, _, _):
            results["ray"] = analyze(folder, ["--ray", address])
        print(
            f"  ray:    {results['ray']['wall_s']:.1f} s, driver peak "
            f"{results['ray']['driver_peak_rss_bytes'] / 2**20:.0f} MiB",
            flush=True,
        )
    n = args.serial_ranks or len(sizes)
    small = folder if n >= len(sizes) else subset(args.workdir, folder, n, "serial")
    res = run([sys.executable, "-c", SERIAL, str(small), str(REPO)])
    rep = json.loads(res["stdout"])
    results["serial"] = {
        "ranks": n,
        "wall_s": res["wall_s"],
        "cpu_s": res["cpu_s"],
        "driver_peak_rss_bytes": rep["execution"]["driver_peak_rss_bytes"],
        "_numbers": numbers(rep),
        "_own": own_rows(rep),
    }
    print(
        f"  serial ({n} ranks): {results['serial']['wall_s']:.1f} s, driver peak "
        f"{results['serial']['driver_peak_rss_bytes'] / 2**20:.0f} MiB",
        flush=True,
    )
    if small is not folder:
        results["pool_small"] = analyze(small, [])
        print(f"  pool ({n} ranks): {results['pool_small']['wall_s']:.1f} s", flush=True)
    results["whole"] = []
    for k in args.whole_ranks:
        res = run(
            [sys.executable, "-c", WHOLE, str(subset(args.workdir, folder, k, "whole")), str(REPO)]
        )
        w = {**json.loads(res["stdout"].strip().splitlines()[-1]), "ranks_used": k}
        results["whole"].append(w)
        print(
            f"  whole ({k} ranks): {w['wall_s']:.1f} s, peak {w['driver_peak_rss_bytes'] / 2**20:.0f} MiB",
            flush=True,
        )
    results["hta"] = []
    for k in args.hta_ranks if args.hta_python else []:
        sub = subset(args.workdir, folder, k, "hta")
        ours = analyze(sub, [])
        h = {"ranks": k, "hta": hta(args.hta_python, sub, args.hta_timeout)}
        h["kernelscope"] = {key: ours[key] for key in ("wall_s", "cpu_s", "tree_peak_rss_bytes")}
        results["hta"].append(h)
        print(
            f"  HTA ({k} ranks): rc {h['hta']['rc']}, {h['hta']['wall_s']:.1f} s wall, "
            f"{h['hta']['cpu_s']:.0f} CPU s, all processes {gib(h['hta']['tree_peak_rss_bytes'])}; "
            f"kernelscope {ours['wall_s']:.1f} s, {ours['cpu_s']:.0f} CPU s, "
            f"{gib(ours['tree_peak_rss_bytes'])}",
            flush=True,
        )
    results["load_after"] = os.getloadavg()

    ref = pool["_numbers"]
    same = {k: results[k]["_numbers"] == ref for k in ("ray",) if k in results}
    if small is folder:
        same["serial"] = results["serial"]["_numbers"] == ref
    else:
        same["serial_vs_pool_same_folder"] = (
            results["serial"]["_numbers"] == results["pool_small"]["_numbers"]
        )
        big = own_rows(pool["_rep"])
        same["per_rank_own_numbers_vs_big_folder"] = all(
            big[r] == row for r, row in results["serial"]["_own"].items()
        )
    results["same_numbers"] = same
    rep = pool["_rep"]
    its = rep["iterations"]
    results["analysis"] = {
        "iterations": len(its),
        "stragglers": sorted({i["straggler_rank"] for i in its if i["straggler_rank"] is not None}),
        "causes": sorted({i["cause"] for i in its if i["cause"]}),
        "iteration_median_ns": rep["iteration_times"]["job"].get("median_ns"),
    }
    for k in ("pool", "ray", "serial", "pool_small"):
        for drop in ("_numbers", "_rep", "_own"):
            results.get(k, {}).pop(drop, None)
    results["driver_peak_below_2_gib"] = {
        k: results[k]["driver_peak_rss_bytes"] < 2 * 2**30 for k in ("pool", "ray") if k in results
    }
    results["worker_peak_below_1_gib"] = pool["worker_peak_rss_bytes"] < 2**30
    print(
        f"\nsame numbers: {same}; driver peak < 2 GiB: {results['driver_peak_below_2_gib']}; "
        f"each worker < 1 GiB: {results['worker_peak_below_1_gib']}; "
        f"load average {load0[0]:.1f} -> {results['load_after'][0]:.1f}"
    )
    print(f"analysis: {results['analysis']}")
    out = REPO / "perf" / "results" / args.results
    out.write_text(json.dumps(results, indent=1) + "\n")
    print(f"written {out}")


if __name__ == "__main__":
    main()
