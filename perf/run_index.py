"""The run index over 10,000 stored runs: `kernelscope runs` and cross-run queries against the
store's API in a loop, with the store filled by 8 concurrent writers (ingest must stay atomic: every
run whole, indexed exactly once).

The runs are real artifacts made distinct: the H200 PyTorch trace
sample_traces/h200/torch_ffn/ffn_M1_eager.json.gz (120 kernels) with every kernel's duration scaled
by the run's factor (a random walk per CI job, with a 15 % step up now and then: regressions to
find) and its GPU renamed per job's machine (H200, H100, A100, L40S), and the H200 bench documents
of sample_traces/h200x2/bench_suite with their ceilings scaled by a little noise (9 in 10 runs are
traces, 1 in 10 bench runs). Each run is stored under its job's file name (ci_job_NNN.json), so
consecutive runs of the same source can be compared.

Timed, each a fresh process (median of --repeat), against the baselines in the same run:
  runs         `kernelscope runs` (table) and `--format json`      vs Store.runs() + each run's info (the old listing)
  kernel       `kernelscope query kernel nvjet_sm90_tst_64x8`         vs reading every trace run's kernels and filtering
  regressions  `kernelscope query regressions`
  ceilings     `kernelscope query ceilings --resource dram`

    .venv/bin/python perf/run_index.py [--runs 10000] [--writers 8] [--workdir DIR] [--repeat 3]

Results: a table on stdout and perf/results/run_index.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TRACE = REPO / "sample_traces/h200/torch_ffn/ffn_M1_eager.json.gz"
BENCH = sorted((REPO / "sample_traces/h200x2/bench_suite").glob("bench_*.json.gz"))
GPUS = ["NVIDIA H200", "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB", "NVIDIA L40S"]
JOBS = 100
KS = [sys.executable, "-c", "import sys; from dashboard.cli import main; sys.exit(main())"]

WRITER = r"""
import gzip, json, random, sys, time
sys.path.insert(0, sys.argv[1])
from collectors.store import Store
root, w, writers, n, jobs = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
trace = json.loads(gzip.open(sys.argv[7]).read())
bench = [json.loads(gzip.open(p).read()) for p in sys.argv[8:]]
gpus = ["NVIDIA H200", "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB", "NVIDIA L40S"]
st = Store(root)
mine = [i for i in range(n) if i % writers == w]
factor = {}
rng = random.Random(w)
t0 = time.perf_counter()
for i in mine:
    job = i % jobs
    f = factor.get(job, 1.0) * (1.15 if rng.random() < 0.03 else rng.uniform(0.99, 1.01))
    factor[job] = f
    if i % 10 == 9:
        doc = json.loads(json.dumps(bench[job % len(bench)]))
        doc["gpu"]["uuid"] = f"GPU-{job:08x}-perf"
        for c in doc["ceilings"]:
            c["value"] = c["value"] * rng.uniform(0.98, 1.02)
        doc["started"] = f"run {i}"
        data, name = json.dumps(doc).encode(), f"bench_job{job:03d}.json"
    else:
        t = json.loads(json.dumps(trace))
        for d in t.get("deviceProperties", []):
            d["name"] = gpus[job % len(gpus)]
        t["traceName"] = f"run {i}"
        for e in t["traceEvents"]:
            if e.get("cat") == "kernel":
                e["dur"] = round(e["dur"] * f, 3)
        data, name = json.dumps(t).encode(), f"ci_job_{job:03d}.json"
    st.put_bytes(data, name)
print(json.dumps({"writer": w, "runs": len(mine), "seconds": time.perf_counter() - t0}))
"""

OLD_RUNS = r"""
import sys, time
sys.path.insert(0, sys.argv[1])
from collectors.store import Store
rows = [r.info for r in Store(sys.argv[2]).runs()]
print(len(rows))
"""

OLD_KERNEL = r"""
import sys, polars as pl
sys.path.insert(0, sys.argv[1])
from collectors.store import Store
out = []
for r in Store(sys.argv[2]).runs():
    if r.kind in ("kineto", "nsys"):
        g = r.table("gpu_ops").filter(pl.col("name").str.contains(sys.argv[3]))
        out.append((r.run_id, r.manifest["created"], g["duration_ns"].median()))
print(len(out))
"""


# as a user's Python runs the commands: compiled modules cached (see perf/measure.py)
USER_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def timed(cmd: list[str], repeat: int) -> dict:
    """Median wall seconds of `repeat` fresh processes, and their CPU seconds (user + system: less
    sensitive to the other processes of a shared machine)."""
    walls, cpus = [], []
    for _ in range(repeat):
        c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        r = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env=USER_ENV)
        walls.append(time.perf_counter() - t)
        c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(c1.ru_utime + c1.ru_stime - c0.ru_utime - c0.ru_stime)
        if r.returncode:
            raise SystemExit(f"{cmd}: {r.stderr[-3000:]}")
    return {
        "median_s": statistics.median(walls),
        "min_s": min(walls),
        "all_s": walls,
        "median_cpu_s": statistics.median(cpus),
        "stdout_lines": len(r.stdout.splitlines()),
    }


def fill(root: Path, n: int, writers: int) -> dict:
    t = time.perf_counter()
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                WRITER,
                str(REPO),
                str(root),
                str(w),
                str(writers),
                str(n),
                str(JOBS),
                str(TRACE),
                *map(str, BENCH),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        for w in range(writers)
    ]
    outs = [json.loads(p.communicate()[0].strip().splitlines()[-1]) for p in procs]
    if any(p.returncode for p in procs):
        raise SystemExit("a writer failed")
    return {"seconds": time.perf_counter() - t, "writers": outs}


def check(root: Path, n: int) -> dict:
    """Atomicity: every run folder whole, no temporary folder left, each run indexed exactly once."""
    sys.path.insert(0, str(REPO))
    from collectors import index as run_index
    from collectors.store import Store

    st = Store(root)
    runs_dir = root / "runs"
    tmp_left = [p.name for p in runs_dir.iterdir() if p.name.startswith(".")]
    ids = st.run_ids()
    complete = all(
        (runs_dir / r / "artifact").is_dir() and any((runs_dir / r).glob("tables-v*/meta.json"))
        for r in ids
    )
    before = run_index.stats(root)
    df = run_index.collect(root, lambda ix: ix.runs.select("run_id").collect())
    refresh = st.refresh_index()
    return {
        "run_folders": len(ids),
        "expected": n,
        "temporary_folders_left": len(tmp_left),
        "all_complete": complete,
        "indexed_rows": df.height,
        "indexed_distinct": df["run_id"].n_unique(),
        "missing_from_index_before_refresh": refresh["added"],
        "index_before": before,
        "index_segment_dirs_left": len([p for p in (root / "index" / "segments").glob(".*")]),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10_000)
    ap.add_argument("--writers", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--workdir", type=Path, default=Path(tempfile.gettempdir()) / "kernelscope-perf-index"
    )
    ap.add_argument("--skip-baselines", action="store_true")
    args = ap.parse_args()
    root = args.workdir / f"store_{args.runs}"
    res: dict = {
        "runs": args.runs,
        "writers": args.writers,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}",
        "load_before": os.getloadavg(),
    }
    if not (root / "runs").is_dir() or len(list((root / "runs").iterdir())) < args.runs:
        res["fill"] = fill(root, args.runs, args.writers)
        print(
            f"filled {root} with {args.writers} concurrent writers in "
            f"{res['fill']['seconds']:.0f} s",
            flush=True,
        )
    res["atomicity"] = check(root, args.runs)
    print(f"atomicity: {res['atomicity']}", flush=True)
    s = ["--store", str(root)]
    res["runs_table"] = timed([*KS, "runs", *s], args.repeat)
    res["runs_json"] = timed([*KS, "runs", "--format", "json", *s], args.repeat)
    res["query_kernel"] = timed(
        [*KS, "query", "kernel", "nvjet_sm90_tst_64x8", "--format", "json", *s], args.repeat
    )
    res["query_regressions"] = timed(
        [*KS, "query", "regressions", "--format", "json", *s], args.repeat
    )
    res["query_ceilings"] = timed(
        [*KS, "query", "ceilings", "--resource", "dram", "--format", "json", *s], args.repeat
    )
    res["cli_startup"] = timed([*KS, "--help"], args.repeat)
    if not args.skip_baselines:
        res["baseline_runs_store_api"] = timed(
            [sys.executable, "-c", OLD_RUNS, str(REPO), str(root)], 1
        )
        res["baseline_kernel_store_api"] = timed(
            [sys.executable, "-c", OLD_KERNEL, str(REPO), str(root), "nvjet_sm90_tst_64x8"], 1
        )
    res["load_after"] = os.getloadavg()
    for k, v in res.items():
        if isinstance(v, dict) and "median_s" in v:
            print(
                f"  {k:28s} {v['median_s']:7.2f} s wall, {v['median_cpu_s']:6.2f} s CPU  "
                f"(runs: {', '.join(f'{x:.2f}' for x in v['all_s'])})"
            )
    res["below_1_s"] = {
        k: {"median": res[k]["median_s"] < 1.0, "cpu": res[k]["median_cpu_s"] < 1.0}
        for k in ("runs_table", "runs_json", "query_kernel")
    }
    print(
        f"below 1 s: {res['below_1_s']}; load average {res['load_before'][0]:.1f} -> "
        f"{res['load_after'][0]:.1f}"
    )
    out = REPO / "perf" / "results" / "run_index.json"
    out.write_text(json.dumps(res, indent=1) + "\n")
    print(f"written {out}")


if __name__ == "__main__":
    main()
