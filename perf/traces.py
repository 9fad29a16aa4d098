"""Timeline analysis as users run it: `kernelscope analyze TRACE --format json` and `kernelscope
ingest TRACE` on a large PyTorch profiler trace next to HTA 0.5, on an Nsight Systems export of one
million kernels next to plain SQL, and on a small trace.

    python3 -m venv /tmp/hta-venv && /tmp/hta-venv/bin/pip install HolisticTraceAnalysis==0.5.0
    .venv/bin/python perf/traces.py --hta-python /tmp/hta-venv/bin/python [--mb 300] [--rounds 3]

Inputs, built from real recordings in a temporary folder (nothing generated is kept):
- Kineto: the H200 trace sample_traces/h200/torch_ffn/ffn_M1_eager.json.gz (706 events, 120 kernels
  launched by cuLaunchKernelEx / cudaLaunchKernel / cudaLaunchKernelExC) replicated in Kineto's own
  text layout, each copy shifted in time with fresh correlation ids, External ids and flow ids,
  until the file holds --mb MB;
- nsys: the real 2-GPU export ../shared/data/nsys/mfu_2gpu_before.sqlite (4,010 kernels; the tests'
  synthetic builder where that folder is absent) with its kernel, runtime, memcpy and memset rows
  replicated to --nsys-kernels kernels (times shifted, correlation ids offset);
- small: the real trace ffn_M1_eager.json.gz itself (12 KB compressed, 216 KB of JSON);
- big: the Kineto replication at --big-mb MB (2,080: about 2 GiB), for memory: the peak of its
  reading and of the whole command against the memory its tables hold once read (measured in a
  fresh process that frees each table in turn, with the allocators returning pages at once).

`analyze` runs with `--timings`, so each run also says what its reading stage (the file to the
joined timeline tables) took in CPU time and peak memory: the Kineto rows give it beside the
whole command.

Tools, each in a fresh process per run, alternated within every round (perf/measure.py):
`kernelscope analyze ... --format json` (its output written to a file), HTA (perf/hta_baseline.py:
load + launch statistics + temporal and idle breakdown, HTA_DISABLE_NS_ROUNDING=1), the plain SQL
baseline (perf/nsys_sql_baseline.py, whose numbers must equal ours: it is checked), `kernelscope
ingest` into an empty store, and for the small trace the same Python importing polars (the floor of
a command built on it, on this machine at this hour; `analyze` no longer imports numpy). Results:
perf/results/traces.json and the table perf/results/traces.md that the README quotes.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure import REPO, Tool, compare, fmt_spread, machine, write_results  # noqa: E402

SAMPLE = REPO / "sample_traces/h200/torch_ffn/ffn_M1_eager.json.gz"
NSYS_SAMPLE = REPO.parent / "shared/data/nsys/mfu_2gpu_before.sqlite"
KS = str(Path(sys.executable).with_name("kernelscope"))
_NUM = re.compile(rb'("ts": |"id": |"correlation": |"External id": )(\d+(?:\.\d+)?)')
_STAGE_ROW = re.compile(r"^(\S[\w -]*?)\s+(\d+\.\d\d)\s+(\d+\.\d\d)\s+([\d,]+)")


def stages(stderr: str) -> dict[str, dict]:
    """The `--timings` table a command printed on stderr (dashboard/cli/timings.py) -> {stage:
    {wall_s, cpu_s, peak_mib}}."""
    out = {}
    for line in stderr.splitlines():
        m = _STAGE_ROW.match(line)
        if m:
            out[m.group(1)] = {
                "wall_s": float(m.group(2)),
                "cpu_s": float(m.group(3)),
                "peak_mib": float(m.group(4).replace(",", "")),
            }
    return out


def stage_stats(res: dict, stage: str) -> dict:
    """Median, min and max of one `--timings` stage over a tool's samples (compare()'s result)."""
    rows = [stages(s["stderr_tail"])[stage] for s in res["samples"]]
    return {
        k: {
            "median": statistics.median(r[k] for r in rows),
            "min": min(r[k] for r in rows),
            "max": max(r[k] for r in rows),
        }
        for k in ("wall_s", "cpu_s", "peak_mib")
    }


#: run in a fresh process by table_memory(): reads a trace as `analyze` does, then frees its tables one
#: by one; jemalloc (polars) and glibc return freed pages at once, so each RSS drop is what that table
#: held resident
_TABLE_MEMORY = r"""
import ctypes, gc, json, sys
from collectors.ingest import parse_path
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20
def settled():
    gc.collect(); ctypes.CDLL("libc.so.6").malloc_trim(0)
    return rss()
p = parse_path(sys.argv[1], metrics="analysis")
tables, p = dict(p.tables), None
est = {k: t.estimated_size() / 2**20 for k, t in tables.items()}
freed = {}
for k in list(tables):
    before = settled()
    del tables[k]
    freed[k] = before - settled()
print(json.dumps({"resident_mib": freed, "polars_estimate_mib": est}))
"""


def table_memory(trace: Path) -> dict:
    """The memory the trace's timeline tables hold once read: {"resident_mib": {table: MiB},
    "polars_estimate_mib": {...}}. polars' estimated_size counts a string column by the length of its
    text; the 16-byte view each string has (and each null) is not in it."""
    import subprocess

    env = dict(
        os.environ, PYTHONPATH=str(REPO), _RJEM_MALLOC_CONF="dirty_decay_ms:0,muzzy_decay_ms:0"
    )
    out = subprocess.run(
        [sys.executable, "-c", _TABLE_MEMORY, str(trace)],
        capture_output=True,
        env=env,
        check=True,
        timeout=3600,
    )
    return json.loads(out.stdout)


# --------------------------------------------------------------------------------------------------------------
# inputs
# --------------------------------------------------------------------------------------------------------------
def build_kineto(path: Path, target_mb: float, copies: int | None = None) -> dict:
    """Replicate the sample's events in Kineto's own layout (the recorded text, numbers shifted per
    copy), until the file holds about target_mb MB (or `copies` times)."""
    text = gzip.decompress(SAMPLE.read_bytes())
    m = re.search(rb'"traceEvents"\s*:\s*\[', text)
    close = text.rindex(b"]")
    head, body, tail = text[: m.end()], text[m.end() : close], text[close:]
    sep = b"},\n  {"
    events = body.strip()[1:-1].split(sep)  # each event's text without its outer braces
    meta = [e for e in events if b'"ph": "M"' in e and b'"pid": "' not in e]
    # profiler spans: once, at the end
    spans = [e for e in events if b'"pid": "' in e or b'"pid": ""' in e]
    body_ev = [e for e in events if e not in meta and e not in spans]
    ts = [float(x) for x in re.findall(rb'"ts": (\d+\.\d+)', b"".join(body_ev))]
    durs = [float(x) for x in re.findall(rb'"dur": (\d+\.\d+)', b"".join(body_ev))]
    span = max(ts) + max(durs) - min(ts) + 100.0  # µs between copies
    ids = [int(x) for x in re.findall(rb'"(?:id|correlation)": (\d+)', b"".join(body_ev))]
    ext = [int(x) for x in re.findall(rb'"External id": (\d+)', b"".join(body_ev))]
    corr_step, ext_step = max(ids) + 1, max(ext) + 1
    # per event: text pieces and the numbers between them
    templates = []
    for e in body_ev:
        parts, nums, pos = [], [], 0
        for mm in _NUM.finditer(e):
            parts.append(e[pos : mm.end(1)])
            nums.append((mm.group(1), mm.group(2)))
            pos = mm.end(2)
        parts.append(e[pos:])
        templates.append((parts, nums))
    one = sum(len(e) + len(sep) for e in body_ev)
    copies = copies or max(1, int(target_mb * 1e6 / one))
    head = head.replace(
        b"{", b'{\n  "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1},', 1
    )
    kernels = 0
    with open(path, "wb") as f:
        f.write(head + b"\n  {" + sep.join(meta))
        for c in range(copies):
            dt, dc, dx = c * span, c * corr_step, c * ext_step
            out = []
            for parts, nums in templates:
                pieces = [parts[0]]
                for (key, raw), nxt in zip(nums, parts[1:]):
                    if key == b'"ts": ':
                        v = b"%.3f" % (float(raw) + dt)
                    elif key == b'"External id": ':
                        v = b"%d" % (int(raw) + dx)
                    else:
                        v = b"%d" % (int(raw) + dc)
                    pieces += [v, nxt]
                out.append(b"".join(pieces))
            f.write(sep + sep.join(out))
            kernels += sum(1 for e in body_ev if b'"cat": "kernel"' in e)
        f.write(sep + sep.join(spans) + b"}\n  " + tail)
    return {
        "copies": copies,
        "events": copies * len(body_ev) + len(meta) + len(spans),
        "kernels": kernels,
        "bytes": path.stat().st_size,
    }


def build_nsys(path: Path, kernels: int) -> dict:
    """The real export's rows replicated (times shifted, correlation ids offset) to `kernels` kernels."""
    if NSYS_SAMPLE.is_file():
        shutil.copyfile(NSYS_SAMPLE, path)
        source = NSYS_SAMPLE.name
    # the tests' synthetic builder (documented schema)
    else:
        sys.path.insert(0, str(REPO))
        from tests.collectors.test_nsys_ingest import two_process_export

        path.write_bytes(two_process_export(path.parent))
        source = "tests' synthetic two-process export"
    path.chmod(0o644)
    con = sqlite3.connect(path)
    have = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    tables = [
        t
        for t in (
            "CUPTI_ACTIVITY_KIND_KERNEL",
            "CUPTI_ACTIVITY_KIND_RUNTIME",
            "CUPTI_ACTIVITY_KIND_MEMCPY",
            "CUPTI_ACTIVITY_KIND_MEMSET",
        )
        if t in have
    ]
    n0 = con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    t0 = min(con.execute(f"SELECT min(start) FROM {t}").fetchone()[0] or 0 for t in tables)
    t1 = max(con.execute(f"SELECT max([end]) FROM {t}").fetchone()[0] or 0 for t in tables)
    cmax = max(
        con.execute(f"SELECT max(correlationId) FROM {t}").fetchone()[0] or 0 for t in tables
    )
    span = (t1 - t0) + 1_000_000
    copies = -(-kernels // n0)
    for t in tables:
        cols = [r[1] for r in con.execute(f"PRAGMA table_info({t})")]
        con.execute(f"CREATE TEMP TABLE base_{t} AS SELECT * FROM {t}")
        sel = ", ".join(
            "start + :dt"
            if c == "start"
            else "[end] + :dt"
            if c == "end"
            else "correlationId + :dc"
            if c == "correlationId"
            else f"[{c}]"
            for c in cols
        )
        for k in range(1, copies):
            con.execute(
                f"INSERT INTO {t} ({', '.join(f'[{c}]' for c in cols)}) SELECT {sel} FROM base_{t}",
                {"dt": k * span, "dc": k * (cmax + 1)},
            )
    con.execute("DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE rowid > ?", (kernels,))
    con.commit()
    n = con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    con.execute("VACUUM")
    con.close()
    return {"kernels": n, "copies": copies, "bytes": path.stat().st_size, "source": source}


# --------------------------------------------------------------------------------------------------------------
# checks
# --------------------------------------------------------------------------------------------------------------
def nsys_identical(ours_json: Path, sql_json: Path) -> list[str]:
    """Differences between `kernelscope analyze --format json` and the SQL baseline (empty:
    identical). Our JSON gives delays in µs rounded to 3 decimals and idle fractions to 6: the SQL
    values are compared so rounded."""
    a = json.loads(ours_json.read_bytes())["summary"]
    b = json.loads(sql_json.read_bytes())
    us = lambda ns: None if ns is None else round(ns / 1e3, 3)  # noqa: E731
    diffs = []

    def check(where, ours, sql):
        if ours != sql:
            diffs.append(f"{where}: kernelscope {ours!r}, SQL {sql!r}")

    for k in ("kernel_count", "kernels_with_launch", "gpu_busy_ns", "gpu_window_ns"):
        check(f"run {k}", a[k], b["run"][k])
    check("run idle fraction", a["gpu_idle_fraction"], round(b["run"]["gpu_idle_fraction"], 6))
    check(
        "run launch delay median [µs]",
        a["launch_delay_median_us"],
        us(b["run"]["launch_delay_median_ns"]),
    )
    check(
        "run launch delay p90 [µs]", a["launch_delay_p90_us"], us(b["run"]["launch_delay_p90_ns"])
    )
    check("device count", len(a["devices"]), len(b["devices"]))
    for x, y in zip(a["devices"], b["devices"]):
        w = f"rank {x['rank']} device {x['device']}"
        check(f"{w} device", x["device"], y["device"])
        for k, kk in (
            ("kernel_count", "kernel_count"),
            ("kernels_with_launch", "kernels_with_launch"),
            ("gpu_busy_ns", "busy_ns"),
            ("gpu_window_ns", "window_ns"),
        ):
            check(f"{w} {k}", x[k], y[kk])
        check(f"{w} idle fraction", x["gpu_idle_fraction"], round(y["idle_fraction"], 6))
        check(
            f"{w} launch delay median", x["launch_delay_median_us"], us(y["launch_delay_median_ns"])
        )
        check(f"{w} launch delay p90", x["launch_delay_p90_us"], us(y["launch_delay_p90_ns"]))
    return diffs


# --------------------------------------------------------------------------------------------------------------
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--mb", type=float, default=300, help="size of the replicated Kineto trace, MB (>= 290)"
    )
    ap.add_argument(
        "--big-mb", type=float, default=2080, help="size of the large Kineto trace (--only big), MB"
    )
    ap.add_argument("--nsys-kernels", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument(
        "--hta-python", default=os.environ.get("HTA_PYTHON", "/tmp/hta-venv/bin/python")
    )
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--only", choices=["kineto", "big", "nsys", "small"], action="append")
    args = ap.parse_args(argv)
    only = set(args.only or ["kineto", "big", "nsys", "small"])
    work = Path(args.workdir or tempfile.mkdtemp(prefix="ks-perf-traces-"))
    work.mkdir(parents=True, exist_ok=True)
    doc: dict = {"machine": machine(), "rounds": args.rounds}
    rows, notes = [], []
    store = work / "store"
    empty = work / "empty-store"

    def fresh_store():
        shutil.rmtree(store, ignore_errors=True)

    try:
        if "kineto" in only:
            tdir = work / "kineto"
            tdir.mkdir(exist_ok=True)
            trace = tdir / "rank0.pt.trace.json"
            t = time.perf_counter()
            facts = build_kineto(trace, args.mb)
            facts["build_s"] = round(time.perf_counter() - t, 1)
            doc["kineto_input"] = facts
            print(
                f"Kineto trace: {facts['bytes'] / 1e6:,.0f} MB, {facts['events']:,} events, "
                f"{facts['kernels']:,} kernels ({facts['copies']} copies of {SAMPLE.name})",
                flush=True,
            )
            tools = [
                Tool(
                    "kernelscope analyze",
                    [
                        KS,
                        "analyze",
                        str(trace),
                        "--format",
                        "json",
                        "--store",
                        str(empty),
                        "--timings",
                    ],
                    stdout=str(work / "kineto.json"),
                )
            ]
            if Path(args.hta_python).exists():
                tools.append(
                    Tool(
                        "HTA 0.5",
                        [args.hta_python, str(REPO / "perf/hta_baseline.py"), str(tdir)],
                        env={"HTA_DISABLE_NS_ROUNDING": "1"},
                        stdout=str(work / "hta.json"),
                    )
                )
            else:
                print(f"  HTA skipped: no {args.hta_python}", flush=True)
            res = compare(tools, args.rounds)
            res["kernelscope ingest"] = compare(
                [
                    Tool(
                        "kernelscope ingest",
                        [KS, "ingest", str(trace), "--store", str(store)],
                        setup=fresh_store,
                    )
                ],
                args.rounds,
            )["kernelscope ingest"]
            doc["kineto"] = res
            ours = json.loads((work / "kineto.json").read_bytes())["summary"]
            doc["kineto_ours_counts"] = {
                k: ours[k] for k in ("kernel_count", "kernels_with_launch")
            }
            label = f"Kineto {facts['bytes'] / 1e6:,.0f} MB, {facts['kernels']:,} kernels"
            a = res["kernelscope analyze"]
            if "HTA 0.5" in res:
                h = res["HTA 0.5"]
                doc["kineto_hta_counts"] = json.loads((work / "hta.json").read_bytes())
                cpu_ratio = h["cpu_s"]["median"] / a["cpu_s"]["median"]
                mem_ratio = a["maxrss_mib"]["median"] / h["maxrss_mib"]["median"]
                # the two tools alternate within a round: each round's own ratio cancels the
                # machine's slower and faster minutes, which the ratio of the medians does not
                paired = sorted(
                    hs["cpu_s"] / as_["cpu_s"] for hs, as_ in zip(h["samples"], a["samples"])
                )
                doc["kineto_ratios"] = {
                    "cpu_speedup": cpu_ratio,
                    "memory_ratio": mem_ratio,
                    "wall_speedup": h["wall_s"]["median"] / a["wall_s"]["median"],
                    "cpu_speedup_per_round": paired,
                }
                rows.append(
                    [
                        f"{label}: `analyze --format json`",
                        fmt_spread(a, "cpu_s", "s"),
                        fmt_spread(a, "wall_s", "s"),
                        f"{a['maxrss_mib']['median']:,.0f} MiB",
                        f"HTA 0.5: {fmt_spread(h, 'cpu_s', 's')} CPU, "
                        f"{h['maxrss_mib']['median']:,.0f} MiB",
                        f"{cpu_ratio:.1f}× less CPU (per round {statistics.median(paired):.1f}×, "
                        f"{paired[0]:.1f}–{paired[-1]:.1f}×), {mem_ratio:.2f}× the memory",
                        "≥ 10×, ≤ 0.4×",
                    ]
                )
                notes.append(
                    f"HTA matched {doc['kineto_hta_counts']['kernels_with_launch']:,} kernels to "
                    f"their launch call, kernelscope {ours['kernels_with_launch']:,} of "
                    f"{ours['kernel_count']:,}."
                )
            else:
                rows.append(
                    [
                        f"{label}: `analyze --format json`",
                        fmt_spread(a, "cpu_s", "s"),
                        fmt_spread(a, "wall_s", "s"),
                        f"{a['maxrss_mib']['median']:,.0f} MiB",
                        "—",
                        "—",
                        "—",
                    ]
                )
            # the reading stage of the same runs (`--timings`): file -> joined timeline tables
            rd = stage_stats(a, "reading")
            doc["kineto_reading"] = rd
            mb = facts["bytes"] / 1e6
            rows.append(
                [
                    f"{label}: its reading (`analyze --timings`, stage `reading`)",
                    fmt_spread(rd, "cpu_s", "s"),
                    fmt_spread(rd, "wall_s", "s"),
                    f"{rd['peak_mib']['median']:,.0f} MiB",
                    "—",
                    f"{mb / rd['cpu_s']['median']:,.0f} MB/s of CPU "
                    f"({mb / rd['cpu_s']['max']:,.0f}–{mb / rd['cpu_s']['min']:,.0f})",
                    "≥ 300 MB/s",
                ]
            )
            i = res["kernelscope ingest"]
            rows.append(
                [
                    f"{label}: `ingest`",
                    fmt_spread(i, "cpu_s", "s"),
                    fmt_spread(i, "wall_s", "s"),
                    f"{i['maxrss_mib']['median']:,.0f} MiB",
                    "—",
                    "—",
                    "—",
                ]
            )
            shutil.rmtree(tdir, ignore_errors=True)

        if "big" in only:
            # a trace of --big-mb (2 GiB by default): its reading's peak memory against the memory
            # its tables hold
            tdir = work / "big"
            tdir.mkdir(exist_ok=True)
            trace = tdir / "rank0.pt.trace.json"
            t = time.perf_counter()
            facts = build_kineto(trace, args.big_mb)
            facts["build_s"] = round(time.perf_counter() - t, 1)
            doc["big_input"] = facts
            print(
                f"large Kineto trace: {facts['bytes'] / 1e6:,.0f} MB, {facts['events']:,} events, "
                f"{facts['kernels']:,} kernels",
                flush=True,
            )
            tm = table_memory(trace)
            doc["big_tables"] = tm
            held = sum(tm["resident_mib"].values())
            est = sum(tm["polars_estimate_mib"].values())
            res = compare(
                [
                    Tool(
                        "kernelscope analyze",
                        [KS, "analyze", str(trace), "--format", "json", "--store", str(empty)]
                        + ["--timings"],
                    )
                ],
                args.rounds,
            )
            a = res["kernelscope analyze"]
            rd = stage_stats(a, "reading")
            doc["big"] = res
            doc["big_reading"] = rd
            label = f"Kineto {facts['bytes'] / 1e6:,.0f} MB, {facts['kernels']:,} kernels"
            file_mib = facts["bytes"] / 2**20
            for what, peak, cpu, wall in (
                ("its reading (stage `reading`)", rd["peak_mib"], rd["cpu_s"], rd["wall_s"]),
                ("`analyze --format json`", a["maxrss_mib"], a["cpu_s"], a["wall_s"]),
            ):
                p = peak["median"]
                rows.append(
                    [
                        f"{label}: {what}",
                        fmt_spread({"x": cpu}, "x", "s"),
                        fmt_spread({"x": wall}, "x", "s"),
                        f"{p:,.0f} MiB",
                        f"tables: {held:,.0f} MiB resident ({est:,.0f} by polars' estimate); "
                        f"file {file_mib:,.0f} MiB",
                        f"{p / held:.2f}× the tables ({p / est:.2f}× the estimate), "
                        f"{p / file_mib:.2f}× the file",
                        "≤ 1.5× the tables, < the file",
                    ]
                )
            notes.append(
                f"Tables of the {facts['bytes'] / 1e6:,.0f} MB trace, resident MiB (each table freed "
                "in turn, the allocators returning pages at once): "
                + ", ".join(f"{k} {v:,.0f}" for k, v in tm["resident_mib"].items())
                + "; polars' estimated_size: "
                + ", ".join(f"{k} {v:,.0f}" for k, v in tm["polars_estimate_mib"].items())
                + " (it counts a string column by its text, not the 16-byte view of each row)."
            )
            shutil.rmtree(tdir, ignore_errors=True)

        if "nsys" in only:
            db = work / "big.sqlite"
            t = time.perf_counter()
            nf = build_nsys(db, args.nsys_kernels)
            nf["build_s"] = round(time.perf_counter() - t, 1)
            doc["nsys_input"] = nf
            print(
                f"nsys export: {nf['bytes'] / 1e6:,.0f} MB, {nf['kernels']:,} kernels "
                f"({nf['source']})",
                flush=True,
            )
            res = compare(
                [
                    Tool(
                        "kernelscope analyze",
                        [KS, "analyze", str(db), "--format", "json", "--store", str(empty)],
                        stdout=str(work / "nsys.json"),
                    ),
                    Tool(
                        "SQL baseline",
                        [sys.executable, str(REPO / "perf/nsys_sql_baseline.py"), str(db)],
                        stdout=str(work / "sql.json"),
                    ),
                ],
                args.rounds,
            )
            res["kernelscope ingest"] = compare(
                [
                    Tool(
                        "kernelscope ingest",
                        [KS, "ingest", str(db), "--store", str(store)],
                        setup=fresh_store,
                    )
                ],
                args.rounds,
            )["kernelscope ingest"]
            doc["nsys"] = res
            diffs = nsys_identical(work / "nsys.json", work / "sql.json")
            doc["nsys_identical"] = not diffs
            doc["nsys_differences"] = diffs
            a, q = res["kernelscope analyze"], res["SQL baseline"]
            ratio = q["cpu_s"]["median"] / a["cpu_s"]["median"]
            doc["nsys_ratios"] = {
                "cpu_speedup": ratio,
                "wall_speedup": q["wall_s"]["median"] / a["wall_s"]["median"],
            }
            label = f"nsys SQLite {nf['bytes'] / 1e6:,.0f} MB, {nf['kernels']:,} kernels"
            rows.append(
                [
                    f"{label}: `analyze --format json`",
                    fmt_spread(a, "cpu_s", "s"),
                    fmt_spread(a, "wall_s", "s"),
                    f"{a['maxrss_mib']['median']:,.0f} MiB",
                    f"plain SQL: {fmt_spread(q, 'cpu_s', 's')} CPU, "
                    f"{q['maxrss_mib']['median']:,.0f} MiB",
                    f"{ratio:.2f}× less CPU; results {'identical' if not diffs else 'DIFFER'}",
                    "≥ 1×, < 1 GiB, identical",
                ]
            )
            i = res["kernelscope ingest"]
            rows.append(
                [
                    f"{label}: `ingest`",
                    fmt_spread(i, "cpu_s", "s"),
                    fmt_spread(i, "wall_s", "s"),
                    f"{i['maxrss_mib']['median']:,.0f} MiB",
                    "—",
                    "—",
                    "—",
                ]
            )
            for d in diffs:
                print("  DIFFERENCE:", d, flush=True)
            db.unlink()

        if "small" in only:
            # the baseline: the same interpreter importing the library the analysis runs on, and
            # nothing else (the floor of any polars-based command on this machine at this hour)
            floor = "python: import polars"
            res = compare(
                [
                    Tool(
                        "kernelscope analyze",
                        [KS, "analyze", str(SAMPLE), "--format", "json", "--store", str(empty)],
                    ),
                    Tool(floor, [sys.executable, "-c", "import polars"]),
                ],
                max(args.rounds, 5),
            )
            doc["small"] = res
            a, f = res["kernelscope analyze"], res[floor]
            rows.append(
                [
                    f"small trace ({SAMPLE.name}, 216 KB of JSON): `analyze --format json`",
                    fmt_spread(a, "cpu_s", "s"),
                    fmt_spread(a, "wall_s", "s"),
                    f"{a['maxrss_mib']['median']:,.0f} MiB",
                    f"{floor}: {f['wall_s']['median']:.2f} "
                    f"({f['wall_s']['min']:.2f}–{f['wall_s']['max']:.2f}) s wall",
                    f"{a['wall_s']['median'] - f['wall_s']['median']:.2f} s over it",
                    "< 0.5 s wall",
                ]
            )
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)

    text = write_results(
        "traces",
        doc,
        rows,
        [
            "input and command",
            "CPU, median (min–max)",
            "wall, median (min–max)",
            "peak RSS",
            "baseline",
            "ratio",
            "target",
        ],
        [
            f"Each tool in a fresh process, {args.rounds} rounds, the tools alternated within each "
            "round (perf/traces.py)."
        ]
        + notes,
    )
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
