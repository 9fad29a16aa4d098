"""Independent reference numbers for the compatibility corpus: standard library only (json, sqlite3,
csv, gzip, decimal), no Kernelscope code, so a bug in a Kernelscope parser cannot hide in its own
reference.

    python tests/corpus/reference.py FILE [FILE ...]      # one JSON object per file
    python tests/corpus/reference.py --manifest            # every manifest entry, compared with its `expected`

Definitions (the same quantities `kernelscope analyze` reports, computed the plain way):

Traces (Kineto JSON, nsys SQLite), per (rank, device):
  kernels              kernel events (Kineto cat kernel/Kernel; nsys CUPTI_ACTIVITY_KIND_KERNEL rows)
  kernels_with_launch  kernels whose correlation id appears on a CUDA/HIP API event of the same rank / process
                       (Kineto cats cuda_runtime, cuda_driver, Runtime; nsys RUNTIME and DRIVER tables)
  launch delay         max(0, kernel start - end of that API call) [ns]; the call that starts first when several
                       share the id; none for a graph launch (cuda/cu/hipGraphLaunch); median over kernels
  busy, window         |union of kernel, memcpy and memset intervals|, last end - first start [ns];
                       idle fraction = 1 - sum(busy) / sum(window)
  Kineto times are decimal µs: converted exactly to ns with decimal arithmetic.
Nsight Compute: launches and each launch's duration [ns] (gpu__time_duration.sum, or "Duration" in a details page's
  Speed Of Light section, in its unit); .ncu-rep through NVIDIA's ncu_report module when it is importable, which
  also gives the duration metric the report has (`gpu__time_duration.sum`, the bare 2019.x `gpu__time_duration`,
  or none) and, for the first three launches, the kernel name and the duration and DRAM byte metrics it carries.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
import sqlite3
import statistics
import sys
import tempfile
from decimal import ROUND_HALF_EVEN, Decimal

HERE = os.path.dirname(os.path.abspath(__file__))
GRAPH = {"cudaGraphLaunch", "cuGraphLaunch", "hipGraphLaunch"}
K_GPU = {
    "kernel": "kernel",
    "Kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "Memcpy": "memcpy",
    "gpu_memset": "memset",
    "Memset": "memset",
}
K_API = {"cuda_runtime", "cuda_driver", "Runtime"}


def read(path: str) -> bytes:
    with open(path, "rb") as f:
        data = f.read()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


def _ns(x) -> int:
    return int((Decimal(x) * 1000).quantize(Decimal(1), rounding=ROUND_HALF_EVEN))


def _union(iv: list[tuple[int, int]]) -> int:
    tot, cs, ce = 0, None, None
    for s, e in sorted(iv):
        if ce is None or s > ce:
            if ce is not None:
                tot += ce - cs
            cs, ce = s, e
        else:
            ce = max(ce, e)
    return tot + (ce - cs if ce is not None else 0)


def _summary(ops: list[dict]) -> dict:
    """ops: rank, device, kind, start, end, delay (None or ns), launched (bool)."""
    devices = {}
    for o in ops:
        devices.setdefault((o["rank"], o["device"]), []).append(o)
    busy = window = 0
    per = []
    for key in sorted(devices, key=lambda k: (k[0], -1 if k[1] is None else k[1])):
        d = devices[key]
        b = _union([(o["start"], o["end"]) for o in d])
        w = max(o["end"] for o in d) - min(o["start"] for o in d)
        busy, window = busy + b, window + w
        per.append({"rank": key[0], "device": key[1], "busy_ns": b, "window_ns": w})
    k = [o for o in ops if o["kind"] == "kernel"]
    delays = [o["delay"] for o in k if o["delay"] is not None]
    return {
        "kernels": len(k),
        "kernels_with_launch": sum(1 for o in k if o["launched"]),
        "launch_delay_median_ns": float(statistics.median(delays)) if delays else None,
        "busy_ns": busy,
        "window_ns": window,
        "idle_fraction": (1 - busy / window) if window else 0.0,
        "memcpy": sum(1 for o in ops if o["kind"] == "memcpy"),
        "memset": sum(1 for o in ops if o["kind"] == "memset"),
        "devices": per,
    }


# ------------------------------------------------------------------------------------------------
# Kineto
def kineto_ops(doc, rank_default: int = 0) -> list[dict]:
    events = doc if isinstance(doc, list) else doc.get("traceEvents", [])
    rank = rank_default
    if isinstance(doc, dict) and isinstance(doc.get("distributedInfo"), dict):
        r = doc["distributedInfo"].get("rank")
        rank = (
            int(r) if isinstance(r, int) or (isinstance(r, str) and r.isdigit()) else rank_default
        )
    calls = {}
    for e in events:
        if isinstance(e, dict) and e.get("ph") == "X" and e.get("cat") in K_API:
            c = (e.get("args") or {}).get("correlation")
            if c is None:
                continue
            start = _ns(e["ts"])
            if c not in calls or start < calls[c][0]:
                calls[c] = (start, start + _ns(e["dur"]), e.get("name"))
    ops = []
    for e in events:
        if not (isinstance(e, dict) and e.get("ph") == "X" and e.get("cat") in K_GPU):
            continue
        a = e.get("args") or {}
        start = _ns(e["ts"])
        call = calls.get(a.get("correlation"))
        delay = None
        if call is not None and call[2] not in GRAPH:
            delay = max(0, start - call[1])
        ops.append(
            {
                "rank": rank,
                "device": a.get("device", e.get("pid")),
                "kind": K_GPU[e["cat"]],
                "start": start,
                "end": start + _ns(e["dur"]),
                "delay": delay,
                "launched": call is not None,
                "name": e.get("name"),
            }
        )
    return ops


def kineto_reference(path: str) -> dict:
    data = read(path)
    if path.endswith(".kineto.tar") or os.path.isdir(path):
        return kineto_folder_reference(path)
    doc = json.loads(data, parse_float=Decimal)
    return _summary(kineto_ops(doc))


def kineto_folder_reference(folder: str) -> dict:
    ops = []
    for name in sorted(os.listdir(folder)):
        if name.endswith((".json", ".json.gz")):
            ops += kineto_ops(json.loads(read(os.path.join(folder, name)), parse_float=Decimal))
    return _summary(ops)


def kernel_table(path: str) -> dict[str, tuple[int, int]]:
    """Kineto: kernel name -> (calls, total duration ns), as a kernel summary table gives it."""
    out: dict[str, list[int]] = {}
    for o in kineto_ops(json.loads(read(path), parse_float=Decimal)):
        if o["kind"] == "kernel":
            t = out.setdefault(o["name"], [0, 0])
            t[0] += 1
            t[1] += o["end"] - o["start"]
    return {k: (v[0], v[1]) for k, v in out.items()}


# ------------------------------------------------------------------------------------------------
# nsys
def nsys_reference(path: str) -> dict:
    with tempfile.NamedTemporaryFile(suffix=".sqlite", delete=False) as tf:
        tf.write(read(path))
    try:
        con = sqlite3.connect(f"file:{tf.name}?mode=ro", uri=True)
        tables = {r[0] for r in con.execute("select name from sqlite_master where type='table'")}

        def cols(t):
            return {r[1] for r in con.execute(f"pragma table_info([{t}])")}

        names = (
            dict(con.execute("select id, value from StringIds")) if "StringIds" in tables else {}
        )
        calls = {}
        for t in ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_DRIVER"):
            if t in tables:
                for s, e, gtid, corr, nid in con.execute(
                    f"select start, end, globalTid, correlationId, nameId from {t}"
                ):
                    key = ((gtid >> 24) if gtid is not None else None, corr)
                    n = names.get(nid, "")
                    n = n[:-6] if len(n) > 6 and n[-6:-4] == "_v" else n
                    if key not in calls or s < calls[key][0]:
                        calls[key] = (s, e, n)
        procs = {k[0] for k in calls}
        ops = []
        for t, kind in (
            ("CUPTI_ACTIVITY_KIND_KERNEL", "kernel"),
            ("CUPTI_ACTIVITY_KIND_MEMCPY", "memcpy"),
            ("CUPTI_ACTIVITY_KIND_MEMSET", "memset"),
        ):
            if t not in tables:
                continue
            gp = "globalPid" if "globalPid" in cols(t) else "NULL"
            for s, e, dev, corr, gpid in con.execute(
                f"select start, end, deviceId, correlationId, {gp} from {t}"
            ):
                proc = (
                    (gpid >> 24)
                    if gpid is not None
                    else (next(iter(procs)) if len(procs) == 1 else None)
                )
                call = calls.get((proc, corr)) if proc is not None else None
                delay = max(0, s - call[1]) if call is not None and call[2] not in GRAPH else None
                ops.append(
                    {
                        "rank": proc,
                        "device": dev,
                        "kind": kind,
                        "start": s,
                        "end": e,
                        "delay": delay,
                        "launched": call is not None,
                    }
                )
        return _summary(ops)
    finally:
        os.unlink(tf.name)


# ------------------------------------------------------------------------------------------------
# ncu
#: "": ncu 2025 exporting a 2019.x report writes no units; its values are the report's own (ns for
#: durations)
_TO_NS = {
    "ns": 1,
    "nsecond": 1,
    "us": 1e3,
    "usecond": 1e3,
    "ms": 1e6,
    "msecond": 1e6,
    "s": 1e9,
    "second": 1e9,
    "": 1,
}


def ncu_csv_reference(path: str) -> dict:
    lines = read(path).decode("utf-8-sig").splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith('"ID",'))
    rows = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    hdr = rows[0]
    launches: dict[str, float | None] = {}
    if "Metric Name" in hdr:
        iid, iname, iunit, ival = (
            hdr.index(c) for c in ("ID", "Metric Name", "Metric Unit", "Metric Value")
        )
        for r in rows[1:]:
            if len(r) <= ival or not r[iid].strip().isdigit():
                continue
            launches.setdefault(r[iid], None)
            if (
                r[iname] in ("Duration", "gpu__time_duration.sum", "gpu__time_duration")
                and launches[r[iid]] is None
            ):
                launches[r[iid]] = float(r[ival].replace(",", "")) * _TO_NS[r[iunit]]
    else:
        iid = hdr.index("ID")
        idur = (
            hdr.index("gpu__time_duration.sum")
            if "gpu__time_duration.sum" in hdr
            else hdr.index("gpu__time_duration")
        )
        unit = rows[1][idur]
        for r in rows[2:]:
            if len(r) > idur and r[iid].strip().isdigit():
                launches[r[iid]] = float(r[idur].replace(",", "")) * _TO_NS[unit]
    return {"launches": len(launches), "durations_ns": list(launches.values())}


#: the duration metric: `.sum` since ncu 2020.x, the bare name in 2019.x reports; DRAM bytes under
#: both namings
_NCU_TIME = ("gpu__time_duration.sum", "gpu__time_duration")
_NCU_FIRST = _NCU_TIME + (
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "dram__read_bytes.sum",
    "dram__write_bytes.sum",
    "dram__read_bytes",
    "dram__write_bytes",
)


def _num(m):
    v = m.value()
    return float(v) if isinstance(v, (int, float)) and v == v else None


def ncu_rep_reference(path: str) -> dict | None:
    try:
        import ncu_report
    except ImportError:
        return None
    with tempfile.NamedTemporaryFile(suffix=".ncu-rep", delete=False) as tf:
        tf.write(read(path))
    try:
        ctx = ncu_report.load_report(tf.name)
        durations, first, seen = [], [], set()
        for i in range(ctx.num_ranges()):
            rng = ctx.range_by_idx(i)
            for j in range(rng.num_actions()):
                a = rng.action_by_idx(j)
                m = a.metric_by_name("gpu__time_duration.sum") or a.metric_by_name(
                    "gpu__time_duration"
                )  # 2019.x
                v = m.value() if m is not None else None
                durations.append(float(v) if v is not None and v == v else None)
                got = {
                    n: _num(a.metric_by_name(n))
                    for n in _NCU_FIRST
                    if a.metric_by_name(n) is not None
                }
                seen |= set(got)
                if len(first) < 3:
                    first.append({"kernel": a.name(), "metrics": got})
        return {
            "launches": len(durations),
            "durations_ns": durations,
            "duration_metric": next((n for n in _NCU_TIME if n in seen), None),
            "first_launches": first,
        }
    finally:
        os.unlink(tf.name)


def reference_for(path: str, fmt: str) -> dict | None:
    if fmt == "kineto":
        return kineto_folder_reference(path) if os.path.isdir(path) else kineto_reference(path)
    if fmt == "nsys-sqlite":
        return nsys_reference(path)
    if fmt == "ncu-rep":
        return ncu_rep_reference(path)
    if fmt.startswith("ncu-csv"):
        return ncu_csv_reference(path)
    return None


def main(argv: list[str]) -> int:
    if argv == ["--manifest"]:
        with open(os.path.join(HERE, "manifest.json")) as f:
            man = json.load(f)
        bad = 0
        for e in man["files"]:
            ref = reference_for(os.path.join(HERE, e["file"]), e["format"])
            want = (e.get("expected") or {}).get("reference")
            same = ref is None or want is None or {k: ref[k] for k in want} == want
            bad += not same
            print(f"{'ok ' if same else 'DIFF'} {e['file']}")
        return 1 if bad else 0
    for p in argv:
        fmt = (
            "nsys-sqlite"
            if ".sqlite" in p
            else "ncu-rep"
            if ".ncu-rep" in p or "cuprof-report" in p
            else "ncu-csv"
            if p.endswith((".csv", ".csv.gz", ".log"))
            else "kineto"
        )
        print(json.dumps({"file": p, "reference": reference_for(p, fmt)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
