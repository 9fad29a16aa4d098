"""Nsight Compute raw-page CSV of many kernels as users run it: `kernelscope analyze X.csv --format json` and
`kernelscope ingest X.csv`, each in a fresh process, wall and CPU time and peak memory (perf/measure.py).

The CSV is made by replicating the 9 kernel rows of the real H200 export
sample_traces/h200/chapter5_kernels/full_raw.csv.gz (auto-scaled units, thousands separators, 2,227 metrics per
kernel) until there are --kernels rows (default 10,000) with distinct IDs; it is written to a temporary folder and
removed. Targets (issue 14): analyze < 5 s and < 1 GiB. Results: perf/results/ingest.json and the table
perf/results/ingest.md that the README quotes.

    .venv/bin/python perf/ingest.py [--kernels 10000] [--rounds 3]
"""
from __future__ import annotations

import argparse
import csv
import gzip
import io
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure import REPO, Tool, compare, fmt_spread, machine, write_results  # noqa: E402

SAMPLE = REPO / "sample_traces/h200/chapter5_kernels/full_raw.csv.gz"
KS = str(Path(sys.executable).with_name("kernelscope"))
N = 1000     # the Kernels page's large report in perf/dashboard.py


def make_csv(n: int = N) -> bytes:
    rows = list(csv.reader(io.StringIO(gzip.decompress(SAMPLE.read_bytes()).decode())))
    header, units, body = rows[0], rows[1], rows[2:]
    out = io.StringIO()
    w = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n")
    w.writerow(header)
    w.writerow(units)
    for i in range(n):
        r = list(body[i % len(body)])
        r[0] = str(i)
        w.writerow(r)
    return out.getvalue().encode()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="ks-perf-ncu-"))
    doc: dict = {"machine": machine(), "rounds": args.rounds}
    try:
        path = work / f"raw_{args.kernels}.csv"
        path.write_bytes(make_csv(args.kernels))
        doc["input"] = {"kernels": args.kernels, "metrics_per_kernel": 2227, "bytes": path.stat().st_size}
        print(f"ncu raw CSV: {args.kernels:,} kernels x 2,227 metrics, {path.stat().st_size / 2**20:,.0f} MiB",
              flush=True)
        store, empty = work / "store", work / "empty"
        res = compare([
            Tool("kernelscope analyze", [KS, "analyze", str(path), "--format", "json", "--store", str(empty)],
                 stdout=str(work / "out.json")),
            Tool("kernelscope ingest", [KS, "ingest", str(path), "--store", str(store)],
                 setup=lambda: shutil.rmtree(store, ignore_errors=True)),
        ], args.rounds)
        doc["results"] = res
    finally:
        shutil.rmtree(work, ignore_errors=True)
    label = f"ncu raw CSV, {args.kernels:,} kernels × 2,227 metrics ({doc['input']['bytes'] / 2**20:,.0f} MiB)"
    rows = []
    for tool, target in (("kernelscope analyze", "< 5 s, < 1 GiB"), ("kernelscope ingest", "—")):
        r = res[tool]
        rows.append([f"{label}: `{tool.split()[1]}`", fmt_spread(r, "cpu_s", "s"), fmt_spread(r, "wall_s", "s"),
                     f"{r['maxrss_mib']['median']:,.0f} MiB", target])
    path = write_results("ingest", doc, rows, ["input and command", "CPU, median (min–max)", "wall, median (min–max)",
                                               "peak RSS", "target"],
                         [f"Each command in a fresh process, {args.rounds} rounds alternated (perf/ingest.py)."])
    print(path.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
