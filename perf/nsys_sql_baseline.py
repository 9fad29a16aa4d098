"""The plain SQL baseline for Nsight Systems exports: the numbers `kernelscope analyze
EXPORT.sqlite` reports per device and for the run, computed by SQLite alone (Python's sqlite3, no
other library).

    python3 perf/nsys_sql_baseline.py EXPORT.sqlite        # prints one JSON object

Per (process, device), processes and devices in id order (kernelscope's rank is the process's index
in that order): the kernel count, the kernels whose launch call is in the export (the runtime or
driver call with the same correlationId in the same process, the earliest-starting one when both
record it), the launch delay max(0, kernel start - launch call end) at its median and p90 (nearest
rank, over kernels with their launch call), GPU busy time (the length of the union of kernel, memcpy
and memset intervals: a running maximum of the end over the intervals sorted by start, a window
function), the window (last end - first start) and the idle fraction 1 - busy / window; for the run,
the same counts, busy and window summed over devices, and the launch-delay median / p90 over every
kernel.
"""

from __future__ import annotations

import json
import sqlite3
import sys

P = 1 << 24  # globalPid / globalTid: process key = id >> 24


def _tables(con) -> set[str]:
    return {
        r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")
    }


def _pick(rows, n: int) -> tuple[float | None, int | None]:
    """(median, p90 nearest-rank) from the rows (i, value) holding positions (n-1)//2, n//2, round((n-1)*0.9)."""
    if not n:
        return None, None
    v = dict(rows)
    return (v[(n - 1) // 2] + v[n // 2]) / 2, v[int((n - 1) * 0.9 + 0.5)]


def baseline(path: str) -> dict:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    have = _tables(con)
    api = [
        f"SELECT globalTid >> 24 AS p, correlationId AS c, start AS s, [end] AS e FROM {t}"
        for t in ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_DRIVER")
        if t in have
    ]
    con.execute(
        "CREATE TEMP TABLE launch AS SELECT p, c, e FROM (SELECT p, c, e, ROW_NUMBER() OVER "
        f"(PARTITION BY p, c ORDER BY s) AS rn FROM ({' UNION ALL '.join(api)}) WHERE c IS NOT "
        "NULL) WHERE rn = 1"
    )
    con.execute("CREATE INDEX temp.launch_pc ON launch (p, c)")
    con.execute(
        "CREATE TEMP TABLE kd AS SELECT k.globalPid >> 24 AS p, k.deviceId AS d, "
        "MAX(0, k.start - l.e) AS delay FROM CUPTI_ACTIVITY_KIND_KERNEL AS k "
        "LEFT JOIN launch AS l ON l.p = k.globalPid >> 24 AND l.c = k.correlationId"
    )
    counts = {
        (p, d): (n, w)
        for p, d, n, w in con.execute("SELECT p, d, COUNT(*), COUNT(delay) FROM kd GROUP BY p, d")
    }
    quant = {}
    for p, d, i, n, v in con.execute(
        "SELECT p, d, i, n, delay FROM (SELECT p, d, delay, ROW_NUMBER() OVER (PARTITION BY p, d "
        "ORDER BY delay) - 1 AS i, COUNT(*) OVER (PARTITION BY p, d) AS n FROM kd WHERE delay IS "
        "NOT NULL) WHERE i = (n - 1) / 2 OR i = n / 2 OR i = CAST((n - 1) * 0.9 + 0.5 AS INTEGER)"
    ):
        quant.setdefault((p, d), (n, []))[1].append((i, v))
    ops = " UNION ALL ".join(
        f"SELECT globalPid >> 24 AS p, deviceId AS d, start AS s, [end] AS e FROM {t}"
        for t in (
            "CUPTI_ACTIVITY_KIND_KERNEL",
            "CUPTI_ACTIVITY_KIND_MEMCPY",
            "CUPTI_ACTIVITY_KIND_MEMSET",
        )
        if t in have
    )
    busy = {
        (p, d): (b, w0, w1)
        for p, d, b, w0, w1 in con.execute(
            "SELECT p, d, SUM(MAX(0, e - MAX(s, COALESCE(m, s)))), MIN(s), MAX(e) FROM (SELECT p, "
            "d, s, e, MAX(e) OVER (PARTITION BY p, d ORDER BY s ROWS BETWEEN UNBOUNDED PRECEDING "
            f"AND 1 PRECEDING) AS m FROM ({ops})) GROUP BY p, d"
        )
    }
    devices = []
    for p, d in sorted(busy):
        n, w = counts.get((p, d), (0, 0))
        med, p90 = _pick(quant[(p, d)][1], quant[(p, d)][0]) if (p, d) in quant else (None, None)
        b, w0, w1 = busy[(p, d)]
        window = w1 - w0
        devices.append(
            {
                "process": p,
                "pid": p % P,
                "device": d,
                "kernel_count": n,
                "kernels_with_launch": w,
                "launch_delay_median_ns": med,
                "launch_delay_p90_ns": p90,
                "busy_ns": b,
                "window_ns": window,
                "idle_fraction": 1.0 - b / window if window else 0.0,
            }
        )
    n_all, w_all = con.execute("SELECT COUNT(*), COUNT(delay) FROM kd").fetchone()
    rows = con.execute(
        "SELECT i, delay FROM (SELECT delay, ROW_NUMBER() OVER (ORDER BY delay) - 1 AS i FROM kd "
        "WHERE delay IS NOT NULL) WHERE i = (:n - 1) / 2 OR i = :n / 2 OR i = CAST((:n - 1) * 0.9 "
        "+ 0.5 AS INTEGER)",
        {"n": w_all},
    ).fetchall()
    med, p90 = _pick(rows, w_all)
    busy_all = sum(x["busy_ns"] for x in devices)
    window_all = sum(x["window_ns"] for x in devices)
    con.close()
    return {
        "devices": devices,
        "run": {
            "kernel_count": n_all,
            "kernels_with_launch": w_all,
            "launch_delay_median_ns": med,
            "launch_delay_p90_ns": p90,
            "gpu_busy_ns": busy_all,
            "gpu_window_ns": window_all,
            "gpu_idle_fraction": 1.0 - busy_all / window_all if window_all else 0.0,
        },
    }


if __name__ == "__main__":
    print(json.dumps(baseline(sys.argv[1])))
