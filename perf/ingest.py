"""Ingest speed of an Nsight Compute raw-page CSV with 1,000 kernels x the full metric set.

The CSV is made by replicating the 9 kernel rows of the real H200 export
sample_traces/h200/chapter5_kernels/full_raw.csv.gz (auto-scaled units, thousands separators, 2,227
metrics per kernel) until there are 1,000 rows with distinct IDs. Measured: parse (kernel + metric
tables) and a full `Store.ingest_bytes` (parse + Parquet + atomic rename), best of 3 each.
Target (issue 2): under 2 s on the development machine.

    .venv/bin/python perf/ingest.py
"""
from __future__ import annotations

import csv
import gzip
import io
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from collectors.ingest import parse_bytes  # noqa: E402
from collectors.store import Store  # noqa: E402

N = 1000


def make_csv() -> bytes:
    rows = list(csv.reader(io.StringIO(gzip.decompress(
        (REPO / "sample_traces/h200/chapter5_kernels/full_raw.csv.gz").read_bytes()).decode())))
    header, units, body = rows[0], rows[1], rows[2:]
    out = io.StringIO()
    w = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n")
    w.writerow(header)
    w.writerow(units)
    for i in range(N):
        r = list(body[i % len(body)])
        r[0] = str(i)
        w.writerow(r)
    return out.getvalue().encode()


def best_of(fn, n=3) -> float:
    best = float("inf")
    for _ in range(n):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    data = make_csv()
    t_parse = best_of(lambda: parse_bytes(data, "bench_1000.csv"))
    p = parse_bytes(data, "bench_1000.csv")

    def ingest():
        with tempfile.TemporaryDirectory() as d:
            Store(d).ingest_bytes(data, "bench_1000.csv")

    t_ingest = best_of(ingest)
    res = {"kernels": p.table("kernels").height, "metrics_rows": p.table("metrics").height,
           "csv_mib": round(len(data) / 2**20, 1), "parse_s": round(t_parse, 3), "ingest_s": round(t_ingest, 3),
           "target_s": 2.0, "machine": f"{platform.machine()}, {platform.python_version()}"}
    (REPO / "perf/results").mkdir(exist_ok=True)
    (REPO / "perf/results/ingest.json").write_text(json.dumps(res, indent=1))
    print(f"{res['kernels']} kernels x {res['metrics_rows'] // res['kernels']} metrics, {res['csv_mib']} MiB CSV: "
          f"parse {res['parse_s']:.3f} s, parse + store {res['ingest_s']:.3f} s (target < 2 s)")


if __name__ == "__main__":
    main()
