"""Trace ingestion speed and peak memory: Kernelscope vs HTA on a large Kineto trace, and an nsys SQLite
export of one million kernels.

Kineto: the real H200 trace sample_traces/h200/torch_ffn/ffn_M1_eager.json.gz (706 events, 120 kernels
launched with cuLaunchKernelEx / cudaLaunchKernel / cudaLaunchKernelExC) is replicated, each copy shifted
in time and given fresh correlation ids, External ids and flow ids, until the JSON is about --mb MB
(default 400), each event spread over several lines as Kineto writes them. Both tools then do, each in its own fresh process: load the trace, compute the kernel
launch statistics, and the idle-time breakdown per stream; the time of that work (imports excluded)
and the process's peak resident memory (ru_maxrss of the process and of any children it waited for)
are reported. HTA: `TraceAnalysis(trace_dir=...)`, `get_cuda_kernel_launch_stats(visualize=False)`,
`get_idle_time_breakdown(visualize=False)`. Ours: `collectors.kineto.parse`, `analyzers.timeline
.launch_stats`, `.idle_categories`, `.utilization`. Targets (issue 4): >= 5x faster, <= half the peak memory.

nsys: the real export ../shared/data/nsys/mfu_2gpu_before.sqlite (4,010 kernels) with its kernel,
runtime, memcpy and memset rows replicated (times shifted, correlation ids offset) to 1,000,000 kernels;
timed: `collectors.nsys.parse` + the same analyses.

HTA is installed in its own virtual environment so its pins never touch the project's:

    python3 -m venv /tmp/hta-venv && /tmp/hta-venv/bin/pip install holistictraceanalysis==0.5.0
    .venv/bin/python perf/trace_ingest.py --hta-python /tmp/hta-venv/bin/python [--mb 400]

Results: a table on stdout and perf/results/trace_ingest.json. Needs about 4x --mb of free disk in
--workdir (default: a temporary folder) and, for HTA, several GB of memory.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "sample_traces/h200/torch_ffn/ffn_M1_eager.json.gz"
NSYS_SAMPLE = REPO.parent / "shared/data/nsys/mfu_2gpu_before.sqlite"

# --------------------------------------------------------------------------------------------------------------
# workers (run in a fresh process each; print one JSON line)
# --------------------------------------------------------------------------------------------------------------
OURS_KINETO = r"""
import json, resource, sys, time
sys.path.insert(0, sys.argv[2])
from collectors import kineto
from analyzers import timeline as T
t = time.perf_counter()
data = open(sys.argv[1], "rb").read()
p = kineto.parse(data, "big.json")
del data
g = p.tables["gpu_ops"]
t_load = time.perf_counter() - t
ls = T.launch_stats(g)
ic = T.idle_categories(g)
u = T.utilization(g)
el = time.perf_counter() - t
me = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
ch = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(json.dumps({"seconds": el, "load_seconds": t_load, "maxrss_kib": me + ch, "kernels": int((g["kind"] == "kernel").sum()),
                  "kernels_with_launch": int(ls["with_launch"].sum()), "idle_rows": ic.height}))
"""

HTA_KINETO = r"""
import json, logging, resource, sys, time, warnings
warnings.filterwarnings("ignore")
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
t = time.perf_counter()
a = TraceAnalysis(trace_dir=sys.argv[1])
t_load = time.perf_counter() - t
ls = a.get_cuda_kernel_launch_stats(visualize=False)
ic, _ = a.get_idle_time_breakdown(visualize=False)
el = time.perf_counter() - t
me = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
ch = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
n = sum(len(v) for v in ls.values()) if isinstance(ls, dict) else len(ls)
print(json.dumps({"seconds": el, "load_seconds": t_load, "maxrss_kib": me + ch, "kernels_with_launch": n,
                  "idle_rows": len(ic)}))
"""

OURS_NSYS = r"""
import json, resource, sys, time
sys.path.insert(0, sys.argv[2])
from collectors import nsys
from analyzers import timeline as T
t = time.perf_counter()
data = open(sys.argv[1], "rb").read()
p = nsys.parse(data, "big.sqlite")
del data
g = p.tables["gpu_ops"]
t_load = time.perf_counter() - t
ls = T.launch_stats(g)
ic = T.idle_categories(g)
u = T.utilization(g)
el = time.perf_counter() - t
me = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"seconds": el, "load_seconds": t_load, "maxrss_kib": me, "kernels": int((g["kind"] == "kernel").sum()),
                  "kernels_with_launch": int((g["launch_api"].is_not_null() & (g["kind"] == "kernel")).sum())}))
"""


def run_worker(python: str, code: str, *args: str, timeout: int = 3600) -> dict:
    t = time.perf_counter()
    r = subprocess.run([python, "-c", code, *args], capture_output=True, text=True, timeout=timeout,
                       env=dict(os.environ, PYTHONWARNINGS="ignore"))
    wall = time.perf_counter() - t
    if r.returncode != 0:
        raise RuntimeError(f"worker failed ({r.returncode}):\n{r.stderr[-3000:]}")
    out = json.loads(r.stdout.strip().splitlines()[-1])
    out["process_wall_seconds"] = wall
    return out


# --------------------------------------------------------------------------------------------------------------
# building the inputs
# --------------------------------------------------------------------------------------------------------------
def build_kineto(path: Path, target_mb: float, copies: int | None = None) -> dict:
    """Replicate the sample trace until the file holds about target_mb MB (or `copies` times). Returns facts
    about it."""
    try:  # events written over several lines each, as Kineto writes them
        import orjson
        dumps = lambda o: orjson.dumps(o, option=orjson.OPT_INDENT_2)  # noqa: E731
    except ImportError:  # pragma: no cover
        dumps = lambda o: json.dumps(o, indent=2).encode()  # noqa: E731
    doc = json.loads(gzip.decompress(SAMPLE.read_bytes()))
    events = [e for e in doc["traceEvents"] if e.get("ph") in ("X", "s", "f")]
    meta_events = [e for e in doc["traceEvents"] if e.get("ph") not in ("X", "s", "f")]
    ts = [e["ts"] for e in events if "ts" in e]
    span = max(e["ts"] + e.get("dur", 0) for e in events) - min(ts) + 100.0   # µs between copies
    corr = [e.get("args", {}).get("correlation") for e in events] + [e.get("id") for e in events]
    corr_step = max(c for c in corr if isinstance(c, int)) + 1
    ext = [e.get("args", {}).get("External id") for e in events]
    ext_step = max([x for x in ext if isinstance(x, int)] or [0]) + 1
    one = sum(len(dumps(e)) + 4 for e in events)
    copies = copies or max(1, int(target_mb * 1e6 / one))
    head = {k: v for k, v in doc.items() if k != "traceEvents" and k != "traceName"}
    head["distributedInfo"] = {"backend": "nccl", "rank": 0, "world_size": 1}
    kernels = 0
    with open(path, "wb") as f:
        f.write(dumps(head)[:-1] + b',\n  "traceEvents": [\n')
        first = True
        for e in meta_events:
            f.write((b"" if first else b",\n") + b"  " + dumps(e))
            first = False
        for c in range(copies):
            dt, dc, dx = c * span, c * corr_step, c * ext_step
            chunk = []
            for e in events:
                e2 = dict(e)
                if "ts" in e2:
                    e2["ts"] = round(e["ts"] + dt, 3)
                if e2.get("ph") in ("s", "f") and isinstance(e2.get("id"), int):
                    e2["id"] = e["id"] + dc
                a = e.get("args")
                if a:
                    a2 = dict(a)
                    if isinstance(a2.get("correlation"), int):
                        a2["correlation"] += dc
                    if isinstance(a2.get("External id"), int):
                        a2["External id"] += dx
                    e2["args"] = a2
                if e2.get("cat") == "kernel":
                    kernels += 1
                chunk.append(b"  " + dumps(e2))
            f.write(b",\n" + b",\n".join(chunk))
        f.write(b'\n  ],\n  "traceName": "replicated"\n}\n')
    return {"copies": copies, "events": copies * len(events) + len(meta_events), "kernels": kernels,
            "bytes": path.stat().st_size}


def build_nsys(path: Path, kernels: int) -> dict:
    shutil.copyfile(NSYS_SAMPLE, path)
    con = sqlite3.connect(path)
    n0 = con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    t0, t1 = con.execute("SELECT min(start), max(end) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()
    cmax = max(con.execute(f"SELECT max(correlationId) FROM {t}").fetchone()[0] or 0
               for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_MEMCPY",
                         "CUPTI_ACTIVITY_KIND_MEMSET"))
    span = (t1 - t0) + 1_000_000
    copies = -(-kernels // n0)
    tables = ["CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_MEMCPY",
              "CUPTI_ACTIVITY_KIND_MEMSET"]
    for t in tables:
        cols = [r[1] for r in con.execute(f"PRAGMA table_info({t})")]
        con.execute(f"CREATE TEMP TABLE base_{t} AS SELECT * FROM {t}")
        sel = ", ".join(
            f"start + :dt" if c == "start" else f"end + :dt" if c == "end" else
            f"correlationId + :dc" if c == "correlationId" else c for c in cols)
        for k in range(1, copies):
            con.execute(f"INSERT INTO {t} ({', '.join(cols)}) SELECT {sel} FROM base_{t}",
                        {"dt": k * span, "dc": k * (cmax + 1)})
    # trim to exactly `kernels` kernels
    con.execute("DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE rowid > ?", (kernels,))
    con.commit()
    n = con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    con.execute("VACUUM")
    con.close()
    return {"kernels": n, "copies": copies, "bytes": path.stat().st_size}


# --------------------------------------------------------------------------------------------------------------
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=400, help="size of the replicated Kineto trace, MB")
    ap.add_argument("--nsys-kernels", type=int, default=1_000_000)
    ap.add_argument("--hta-python", default=os.environ.get("HTA_PYTHON", "/tmp/hta-venv/bin/python"),
                    help="python of a venv with holistictraceanalysis==0.5.0 (skipped when missing)")
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--skip-hta", action="store_true")
    ap.add_argument("--skip-nsys", action="store_true")
    ap.add_argument("--out", default=str(REPO / "perf/results/trace_ingest.json"))
    args = ap.parse_args(argv)

    work = Path(args.workdir or tempfile.mkdtemp(prefix="ks-trace-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    results: dict = {"machine": {"python": platform.python_version(), "platform": platform.platform(),
                                 "cpus": os.cpu_count()}}
    try:
        tdir = work / "kineto"
        tdir.mkdir(exist_ok=True)
        trace = tdir / "rank0.pt.trace.json"
        t = time.perf_counter()
        facts = build_kineto(trace, args.mb)
        facts["build_seconds"] = time.perf_counter() - t
        results["kineto_input"] = facts
        print(f"kineto trace: {facts['bytes'] / 1e6:,.0f} MB, {facts['events']:,} events, {facts['kernels']:,} kernels "
              f"({facts['copies']} copies of {SAMPLE.name})", flush=True)
        ours = run_worker(sys.executable, OURS_KINETO, str(trace), str(REPO))
        results["kineto_ours"] = ours
        print(f"  kernelscope: {ours['seconds']:.1f} s, peak {ours['maxrss_kib'] / 2**20:.2f} GiB", flush=True)
        hta = None
        if not args.skip_hta and Path(args.hta_python).exists():
            hta = run_worker(args.hta_python, HTA_KINETO, str(tdir))
            results["kineto_hta"] = hta
            print(f"  HTA 0.5.0:   {hta['seconds']:.1f} s, peak {hta['maxrss_kib'] / 2**20:.2f} GiB", flush=True)
        else:
            print("  HTA skipped (no --hta-python)", flush=True)
        if hta:
            results["kineto_speedup"] = hta["seconds"] / ours["seconds"]
            results["kineto_memory_ratio"] = ours["maxrss_kib"] / hta["maxrss_kib"]
            results["kineto_targets_met"] = results["kineto_speedup"] >= 5 and results["kineto_memory_ratio"] <= 0.5
        trace.unlink()

        if not args.skip_nsys and NSYS_SAMPLE.is_file():
            db = work / "big.sqlite"
            t = time.perf_counter()
            nf = build_nsys(db, args.nsys_kernels)
            nf["build_seconds"] = time.perf_counter() - t
            results["nsys_input"] = nf
            print(f"nsys export: {nf['bytes'] / 1e6:,.0f} MB, {nf['kernels']:,} kernels", flush=True)
            nr = run_worker(sys.executable, OURS_NSYS, str(db), str(REPO))
            results["nsys_ours"] = nr
            print(f"  kernelscope: {nr['seconds']:.1f} s, peak {nr['maxrss_kib'] / 2**20:.2f} GiB", flush=True)
            db.unlink()
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)

    print()
    print(f"{'input':<34} {'tool':<12} {'load+stats+idle [s]':>20} {'peak RSS [GiB]':>15}")
    k = results["kineto_input"]
    label = f"Kineto {k['bytes'] / 1e6:,.0f} MB, {k['kernels']:,} kernels"
    for key, tool in (("kineto_ours", "kernelscope"), ("kineto_hta", "HTA 0.5.0")):
        if key in results:
            r = results[key]
            print(f"{label:<34} {tool:<12} {r['seconds']:>20.2f} {r['maxrss_kib'] / 2**20:>15.2f}")
    if "nsys_ours" in results:
        r = results["nsys_ours"]
        print(f"{'nsys SQLite, ' + format(results['nsys_input']['kernels'], ',') + ' kernels':<34} {'kernelscope':<12} "
              f"{r['seconds']:>20.2f} {r['maxrss_kib'] / 2**20:>15.2f}")
    if "kineto_speedup" in results:
        print(f"speedup vs HTA {results['kineto_speedup']:.1f}x (target >= 5x), "
              f"memory {results['kineto_memory_ratio']:.2f} of HTA's (target <= 0.5)")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
