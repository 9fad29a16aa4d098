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
  serial   the same tasks run one after the other inside the driver (dashboard.execute.SerialExecutor)
  whole    the old path for a rank folder: every rank parsed into one run's tables in one process, then the
           same multi-rank analysis (on --whole-ranks 8 and 16 ranks: it holds every rank's tables at once)
Reported: wall seconds, the driver's peak RSS (its own ru_maxrss), the largest worker's peak, and whether the
numbers (ranks, iterations, collectives) are identical across pool, ray and serial.

    .venv/bin/python perf/multirank.py [--ranks 64] [--mb 20] [--workdir DIR] [--skip-ray]

Results: a table on stdout and perf/results/multirank.json. Needs about ranks x mb MiB of disk in
--workdir.
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
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SOURCE = REPO / "tests" / "corpus" / "param" / "dlrm_8rank"
ID_STRIDE = 10_000_000


def _load(p: Path) -> dict:
    return json.loads(gzip.open(p).read())


def build(workdir: Path, ranks: int, mb: float) -> Path:
    """The rank folder (cached in workdir when it is already complete)."""
    out = workdir / f"dlrm_{ranks}ranks_{mb:g}mb"
    done = out / ".complete"
    if done.exists():
        return out
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    bases = [_load(p) for p in sorted(SOURCE.glob("*.json.gz"))]
    lo = min(e["ts"] for d in bases for e in d["traceEvents"] if "ts" in e)
    hi = max(e["ts"] + e.get("dur", 0) for d in bases for e in d["traceEvents"] if "ts" in e)
    period = (hi - lo) + 1000.0  # µs
    bodies = []
    for d in bases:
        one = sum(len(json.dumps(e)) + 4 for e in d["traceEvents"])
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
                parts.append(json.dumps(e))
        bodies.append(("[\n  " + ",\n  ".join(parts) + "\n]").encode())
    for r in range(ranks):
        base = bases[r % len(bases)]
        top = {k: v for k, v in base.items() if k != "traceEvents"}
        top["distributedInfo"] = dict(top.get("distributedInfo") or {}, rank=r, world_size=ranks)
        head = json.dumps(top)[:-1].encode() + b', "traceEvents": '
        (out / f"rank{r:03d}.pt.trace.json").write_bytes(head + bodies[r % len(bases)] + b"}\n")
    done.write_text("ok")
    return out


WRAP = r"""
import json, resource, subprocess, sys, time
t = time.perf_counter()
r = subprocess.run(sys.argv[1:], capture_output=True)
wall = time.perf_counter() - t
ch = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"rc": r.returncode, "wall_s": wall, "cpu_s": ch.ru_utime + ch.ru_stime,
                  "max_descendant_rss_bytes": ch.ru_maxrss * 1024, "stdout": r.stdout.decode()[-20_000_000:],
                  "stderr": r.stderr.decode()[-4000:]}))
"""

SERIAL = r"""
import json, sys
sys.path.insert(0, sys.argv[2])
from dashboard import execute, ranks
from dashboard.cli import ranks as R
mr, info = ranks.analyze_sources(ranks.path_sources(sys.argv[1]), execute.SerialExecutor())
print(json.dumps(R.folder_report(mr, info, sys.argv[1]), default=str))
"""

WHOLE = r"""
import json, resource, sys, time
sys.path.insert(0, sys.argv[2])
t = time.perf_counter()
from collectors.ingest import parse_path
from analyzers.timeline import summarize
from dashboard import ranks
from analyzers.stragglers import combine
p = parse_path(sys.argv[1])                         # the folder as one run: a tar of every rank, parsed at once
s = summarize(p.tables["gpu_ops"])
mr = combine(ranks._summaries(p, sys.argv[1], None, {}))
print(json.dumps({"wall_s": time.perf_counter() - t, "ranks": mr.ranks.height,
                  "driver_peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""


def run(cmd: list[str]) -> dict:
    r = subprocess.run([sys.executable, "-c", WRAP, *cmd], capture_output=True, text=True, cwd=REPO)
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
        "executor": ex["executor"],
        "workers": ex["workers"],
        "_numbers": numbers(rep),
        "_rep": rep,
    }


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
    args = ap.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    folder = build(args.workdir, args.ranks, args.mb)
    sizes = [p.stat().st_size for p in folder.glob("*.json")]
    print(
        f"{len(sizes)} rank traces in {folder}, {min(sizes) / 2**20:.1f}-{max(sizes) / 2**20:.1f} MiB each, "
        f"{sum(sizes) / 2**30:.2f} GiB ({time.perf_counter() - t:.0f} s to build or reuse)",
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
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "load_before": load0,
    }
    results["pool"] = analyze(folder, [])
    print(
        f"  {results['pool']['executor']} ({results['pool']['workers']} workers): {results['pool']['wall_s']:.1f} s, driver peak {results['pool']['driver_peak_rss_bytes'] / 2**20:.0f} MiB",
        flush=True,
    )
    if not args.skip_ray:
        sys.path.insert(0, str(REPO))
        from tests.ray_helpers import ray_cluster

        with ray_cluster(num_cpus=2) as (address, _, _):
            results["ray"] = analyze(folder, ["--ray", address])
        print(
            f"  ray:    {results['ray']['wall_s']:.1f} s, driver peak {results['ray']['driver_peak_rss_bytes'] / 2**20:.0f} MiB",
            flush=True,
        )
    res = run([sys.executable, "-c", SERIAL, str(folder), str(REPO)])
    rep = json.loads(res["stdout"])
    results["serial"] = {
        "wall_s": res["wall_s"],
        "cpu_s": res["cpu_s"],
        "driver_peak_rss_bytes": rep["execution"]["driver_peak_rss_bytes"],
        "_numbers": numbers(rep),
    }
    print(
        f"  serial: {results['serial']['wall_s']:.1f} s, driver peak "
        f"{results['serial']['driver_peak_rss_bytes'] / 2**20:.0f} MiB",
        flush=True,
    )
    results["whole"] = []
    for n in args.whole_ranks:
        sub = args.workdir / f"whole_{n}"
        shutil.rmtree(sub, ignore_errors=True)
        sub.mkdir()
        for p in sorted(folder.glob("*.json"))[:n]:
            os.symlink(p, sub / p.name)
        res = run([sys.executable, "-c", WHOLE, str(sub), str(REPO)])
        w = {**json.loads(res["stdout"].strip().splitlines()[-1]), "ranks_used": n}
        results["whole"].append(w)
        print(
            f"  whole ({n} ranks): {w['wall_s']:.1f} s, peak {w['driver_peak_rss_bytes'] / 2**20:.0f} MiB",
            flush=True,
        )
    results["load_after"] = os.getloadavg()

    ref = results["pool"]["_numbers"]
    results["same_numbers"] = {
        k: results[k]["_numbers"] == ref for k in ("ray", "serial") if k in results
    }
    rep = results["pool"]["_rep"]
    its = rep["iterations"]
    results["analysis"] = {
        "iterations": len(its),
        "stragglers": sorted({i["straggler_rank"] for i in its if i["straggler_rank"] is not None}),
        "causes": sorted({i["cause"] for i in its if i["cause"]}),
        "iteration_median_ns": rep["iteration_times"]["job"].get("median_ns"),
    }
    for k in ("pool", "ray", "serial"):
        if k in results:
            results[k].pop("_numbers", None)
            results[k].pop("_rep", None)
    results["driver_peak_below_1_gib"] = {
        k: results[k]["driver_peak_rss_bytes"] < 2**30 for k in ("pool", "ray") if k in results
    }
    print(
        f"\nsame numbers as the pool: {results['same_numbers']}; driver peak < 1 GiB: "
        f"{results['driver_peak_below_1_gib']}; load average {load0[0]:.1f} -> {results['load_after'][0]:.1f}"
    )
    print(f"analysis: {results['analysis']}")
    out = REPO / "perf" / "results" / "multirank.json"
    out.write_text(json.dumps(results, indent=1) + "\n")
    print(f"written {out}")


if __name__ == "__main__":
    main()
