"""GPU-op frames built from rows, for the timeline analyzers' tests."""

from __future__ import annotations

import polars as pl
from collectors.schema import GPU_OPS_SCHEMA


def ops(rows, **defaults) -> pl.DataFrame:
    """gpu_ops rows from dicts with start_ns, end_ns (+ optional stream, name, kind, api_start_ns, api_end_ns)."""
    out = []
    for r in rows:
        d = {c: None for c in GPU_OPS_SCHEMA}
        d.update(rank=0, device=0, stream=7, kind="kernel", name="k")
        d.update(defaults)
        d.update(r)
        d["duration_ns"] = d["end_ns"] - d["start_ns"]
        if d["api_end_ns"] is not None:
            d["launch_api"] = d["launch_api"] or "cudaLaunchKernel"
            d["api_duration_ns"] = d["api_end_ns"] - d["api_start_ns"]
            lag = d["start_ns"] - d["api_end_ns"]
            d["launch_delay_ns"], d["queue_ns"] = max(0, lag), (lag if lag >= 0 else None)
        out.append(d)
    return pl.DataFrame(out, schema=GPU_OPS_SCHEMA)
