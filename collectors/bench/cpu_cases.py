"""The CPU cases of `kernelscope bench` (numerics, run with numpy through analyzers.cases.numerics).

`run_cpu_cases(quick)` returns a bench document (same format as the GPU suite's, "gpu" = the CPU) so
the result is stored and shown like any other bench run.
Start-up: imports that only some commands, pages or GPUs need sit inside the functions that use
them, so each command loads what it uses.
"""

from __future__ import annotations

import datetime as dt
import platform
import random
import time

from collectors.bench.harness import make_record

SEGMENTS = (1, 2, 4, 8, 16, 32, 64)


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def fp_non_associativity(quick: bool, seed: int) -> list[dict]:
    """(1 + 2^-24) + 2^-24 vs 1 + (2^-24 + 2^-24) in FP32, and the ULP error of FP32 sums of squares
    of random BF16 rows of 4096 summed in s segments (distribution over rows), s = 1..64."""
    from analyzers.cases import numerics as nm

    case = "fp.non_associativity"
    na = nm.non_associativity()
    recs = [
        make_record(
            case,
            f"{k}_grouping" if k in ("left", "right") else k,
            float(v),
            "1",
            {},
            source="cpu computation",
            n=1,
            notes="numpy float32",
        )
        for k, v in na.items()
        if k in ("left", "right", "difference")
    ]
    rows = 64 if quick else 1000
    errs = nm.segment_sum_ulp(rows=rows, length=4096, segment_counts=SEGMENTS, seed=seed)
    for st in nm.ulp_stats(errs):
        params = {"segments": st.segments, "rows": rows, "length": 4096}
        for metric, v in st.to_row().items():
            if metric == "segments":
                continue
            recs.append(
                make_record(
                    case,
                    metric,
                    float(v),
                    "1",
                    params,
                    source="cpu computation",
                    n=rows,
                    notes="signed error in FP32 ULPs of the float64 reference; "
                    "rows from random_bf16_rows",
                )
            )
    return recs


def online_softmax_step(quick: bool, seed: int) -> list[dict]:
    """The running (m, l, u) state over a random stream of (score, value) pairs, against the float64
    direct softmax-weighted sum."""
    from analyzers.cases import numerics as nm

    rng = random.Random(seed)
    n = 64 if quick else 4096
    scores = [rng.gauss(0.0, 3.0) for _ in range(n)]
    values = [rng.gauss(0.0, 1.0) for _ in range(n)]
    online = nm.online_softmax(scores, values)[-1].out
    direct = nm.direct_softmax(scores, values)
    params = {"length": n}
    return [
        make_record(
            "online_softmax.step",
            "online_output",
            online,
            "1",
            params,
            source="cpu computation",
            n=1,
        ),
        make_record(
            "online_softmax.step",
            "direct_output",
            direct,
            "1",
            params,
            source="cpu computation",
            n=1,
        ),
        make_record(
            "online_softmax.step",
            "abs_error",
            abs(online - direct),
            "1",
            params,
            source="cpu computation",
            n=1,
            notes="|online - direct| (float64)",
        ),
    ]


CPU_CASES = {
    "online_softmax.step": online_softmax_step,
    "fp.non_associativity": fp_non_associativity,
}


def run_cpu_cases(quick: bool = False, log=print, on_case=None) -> dict:
    """Run every CPU case (each in its own try/except) and return the bench document. on_case(doc)
    is called after each case with the document so far ("finished" still null), as the GPU suite
    rewrites its file."""
    import numpy as np

    seed = random.randrange(1 << 31)
    doc = {
        "kernelscope_bench": 1,
        "gpu": {
            "name": "CPU",
            "kind": "cpu",
            "processor": platform.processor() or platform.machine(),
            "uuid": None,
            "index": None,
        },
        "versions": {
            "python": platform.python_version(),
            "numpy": np.__version__,
            "platform": platform.platform(),
        },
        "started": _now(),
        "finished": None,
        "options": {"quick": quick, "seed": seed, "cpu_only": True},
        "ceilings": [],
        "results": [],
        "failures": [],
        "cases": {},
    }
    for case_id, fn in CPU_CASES.items():
        t0 = time.monotonic()
        try:
            recs = fn(quick, seed)
            doc["results"].extend(recs)
            status = "ok"
        except Exception as e:  # noqa: BLE001 - a failing case is reported and the others still run
            recs = []
            status = "failed"
            doc["failures"].append({"case": case_id, "error": f"{type(e).__name__}: {e}"})
        doc["cases"][case_id] = {
            "status": status,
            "seconds": round(time.monotonic() - t0, 3),
            "records": len(recs),
        }
        log(f"{case_id}: {status}, {len(recs)} records")
        if on_case is not None:
            on_case(doc)
    doc["finished"] = _now()
    return doc
