"""Nsight Compute raw-page CSV of many kernels as users run it: `kernelscope analyze X.csv --format
json` and `kernelscope ingest X.csv`, each in a fresh process, wall and CPU time and peak memory
(perf/measure.py).

The CSV is made by replicating the 9 kernel rows of the real H200 export
sample_traces/h200/chapter5_kernels/full_raw.csv.gz (auto-scaled units, thousands separators, 2,227
metrics per kernel) until there are --kernels rows (default 10,000) with distinct IDs; it is written
to a temporary folder and removed. Targets (issue 14): analyze < 5 s and < 1 GiB. Results:
perf/results/ingest.json and the table perf/results/ingest.md that the README quotes.

Baseline, alternated with both in every round: pandas' C reader on the same file
(`pandas.read_csv(X, skiprows=[1], thousands=",")`: every field parsed to a number or a string in
one pass, nothing more: no units, no long form, no checks, no analysis, no output). It is what a
user without Kernelscope would run first, and it shows how fast this machine is at this hour: the
ratio is ours over it. Left out, with a note, where pandas is not installed.

    .venv/bin/python perf/ingest.py [--kernels 10000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import csv
import gzip
import importlib.util
import io
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure import REPO, Tool, compare, fmt_spread, machine, write_results  # noqa: E402

SAMPLE = REPO / "sample_traces/h200/chapter5_kernels/full_raw.csv.gz"
KS = str(Path(sys.executable).with_name("kernelscope"))
N = 1000  # the Kernels page's large report in perf/dashboard.py
BASELINE = "pandas read_csv"


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
        doc["input"] = {
            "kernels": args.kernels,
            "metrics_per_kernel": 2227,
            "bytes": path.stat().st_size,
        }
        print(
            f"ncu raw CSV: {args.kernels:,} kernels x 2,227 metrics, "
            f"{path.stat().st_size / 2**20:,.0f} MiB",
            flush=True,
        )
        store, empty = work / "store", work / "empty"
        tools = [
            Tool(
                "kernelscope analyze",
                [KS, "analyze", str(path), "--format", "json", "--store", str(empty)],
                stdout=str(work / "out.json"),
            ),
            Tool(
                "kernelscope ingest",
                [KS, "ingest", str(path), "--store", str(store)],
                setup=lambda: shutil.rmtree(store, ignore_errors=True),
            ),
        ]
        have_pandas = importlib.util.find_spec("pandas") is not None
        if have_pandas:
            tools.append(
                Tool(
                    BASELINE,
                    [
                        sys.executable,
                        "-c",
                        "import sys, pandas; pandas.read_csv(sys.argv[1], skiprows=[1], "
                        "thousands=',', low_memory=False)",
                        str(path),
                    ],
                )
            )
        res = compare(tools, args.rounds)
        doc["results"] = res
    finally:
        shutil.rmtree(work, ignore_errors=True)
    label = f"ncu raw CSV, {args.kernels:,} kernels × 2,227 metrics ({doc['input']['bytes'] / 2**20:,.0f} MiB)"
    base = res.get(BASELINE)
    rows = []
    for tool, target in (("kernelscope analyze", "< 5 s, < 1 GiB"), ("kernelscope ingest", "—")):
        r = res[tool]
        ratio = (
            "—"
            if base is None
            else (
                f"{r['cpu_s']['median'] / base['cpu_s']['median']:.2f}× its CPU, "
                f"{r['wall_s']['median'] / base['wall_s']['median']:.2f}× its wall"
            )
        )
        rows.append(
            [
                f"{label}: `{tool.split()[1]}`",
                fmt_spread(r, "cpu_s", "s"),
                fmt_spread(r, "wall_s", "s"),
                f"{r['maxrss_mib']['median']:,.0f} MiB",
                ratio,
                target,
            ]
        )
    if base is not None:
        rows.append(
            [
                "baseline: `pandas.read_csv` of the same file (numbers only)",
                fmt_spread(base, "cpu_s", "s"),
                fmt_spread(base, "wall_s", "s"),
                f"{base['maxrss_mib']['median']:,.0f} MiB",
                "—",
                "—",
            ]
        )
    notes = [f"Each command in a fresh process, {args.rounds} rounds alternated (perf/ingest.py)."]
    if base is None:
        notes.append("pandas is not installed here: no baseline in this run.")
    text = write_results(
        "ingest",
        doc,
        rows,
        [
            "input and command",
            "CPU, median (min–max)",
            "wall, median (min–max)",
            "peak RSS",
            "ratio to the baseline",
            "target",
        ],
        notes,
    )
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
