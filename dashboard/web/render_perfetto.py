"""A trace run as a Chrome trace (JSON Trace Event Format) that https://ui.perfetto.dev and
chrome://tracing open.

Written from the run's normalized tables, so Nsight Systems exports (which Perfetto cannot read)
open too: one process per rank and GPU ("rank R · GPU D"), one thread per CUDA stream: kernels,
memcpy, memset ("X" events with their launch call, delay, grid and block in args); one process per
host process, one thread per host thread: CUDA API calls and CPU ops ("X" events); NVTX ranges on
their thread, in a process of their own per rank ("rank R · NVTX"); launch call -> GPU op arrows:
flow events ("s" at the call, "f" bound to the op's start), one per correlation. Times are
microseconds after the trace's first event (the format's unit), with ns precision kept as decimals.
"""

from __future__ import annotations

import orjson
import polars as pl

GPU_PID = 1_000_000
NVTX_PID = 2_000_000


def chrome_trace(
    gpu_ops: pl.DataFrame,
    api_calls: pl.DataFrame,
    cpu_ops: pl.DataFrame,
    nvtx: pl.DataFrame,
    *,
    name: str = "trace",
    gpu_name: str | None = None,
) -> bytes:
    starts = [df["start_ns"].min() for df in (gpu_ops, api_calls, cpu_ops, nvtx) if df.height]
    t0 = min(int(x) for x in starts if x is not None) if starts else 0

    def us(col: str) -> pl.Expr:
        return ((pl.col(col) - t0) / 1e3).round(3)

    events: list[dict] = []
    meta: dict[tuple, str] = {}
    g = gpu_ops.with_columns(
        (GPU_PID + pl.col("rank").cast(pl.Int64) * 1000 + pl.col("device").cast(pl.Int64)).alias(
            "_pid"
        ),
        pl.col("stream").cast(pl.Int64).alias("_tid"),
        us("start_ns").alias("_ts"),
        (pl.col("duration_ns") / 1e3).round(3).alias("_dur"),
    )
    for r in g.select("_pid", "rank", "device").unique().iter_rows():
        meta[("p", r[0])] = f"rank {r[1]} · GPU {r[2]}" + (f" ({gpu_name})" if gpu_name else "")
    for r in g.select("_pid", "_tid").unique().iter_rows():
        meta[("t", r[0], r[1])] = f"stream {r[1]}"
    for r in g.iter_rows(named=True):
        args = {
            "correlation": r["correlation"],
            "launch call": r["launch_api"],
            "launch delay [us]": None
            if r["launch_delay_ns"] is None
            else r["launch_delay_ns"] / 1e3,
            "CPU op": r["op_name"],
        }
        if r["kind"] == "kernel":
            args.update(
                {
                    "grid": [r["grid_x"], r["grid_y"], r["grid_z"]],
                    "block": [r["block_x"], r["block_y"], r["block_z"]],
                    "registers per thread": r["registers_per_thread"],
                    "shared memory [B]": r["shared_memory_bytes"],
                }
            )
        else:
            args.update({"bytes": r["bytes"], "copy kind": r["copy_kind"]})
        events.append(
            {
                "ph": "X",
                "name": r["name"],
                "cat": r["kind"],
                "pid": r["_pid"],
                "tid": r["_tid"],
                "ts": r["_ts"],
                "dur": r["_dur"],
                "args": {k: v for k, v in args.items() if v is not None},
            }
        )
        if r["api_start_ns"] is not None and r["correlation"] is not None:
            fid = f"{r['rank']}:{r['pid']}:{r['correlation']}"
            events.append(
                {
                    "ph": "s",
                    "id": fid,
                    "name": "launch",
                    "cat": "ac2g",
                    "pid": _host_pid(r["rank"], r["pid"]),
                    "tid": r["api_tid"],
                    "ts": round((r["api_start_ns"] - t0) / 1e3, 3),
                }
            )
            events.append(
                {
                    "ph": "f",
                    "bp": "e",
                    "id": fid,
                    "name": "launch",
                    "cat": "ac2g",
                    "pid": r["_pid"],
                    "tid": r["_tid"],
                    "ts": r["_ts"],
                }
            )
    for df, cat in ((api_calls, "cuda_api"), (cpu_ops, "cpu_op")):
        h = df.with_columns(
            us("start_ns").alias("_ts"), (pl.col("duration_ns") / 1e3).round(3).alias("_dur")
        )
        for r in h.iter_rows(named=True):
            pid = _host_pid(r["rank"], r["pid"])
            meta.setdefault(("p", pid), f"rank {r['rank']} · process {r['pid']}")
            meta.setdefault(("t", pid, r["tid"]), f"thread {r['tid']}")
            ev = {
                "ph": "X",
                "name": r["name"],
                "cat": cat,
                "pid": pid,
                "tid": r["tid"],
                "ts": r["_ts"],
                "dur": r["_dur"],
            }
            if cat == "cuda_api" and r.get("correlation") is not None:
                ev["args"] = {"correlation": r["correlation"]}
            events.append(ev)
    n = nvtx.with_columns(
        us("start_ns").alias("_ts"), (pl.col("duration_ns") / 1e3).round(3).alias("_dur")
    )
    for r in n.iter_rows(named=True):
        pid = NVTX_PID + int(r["rank"] or 0)
        meta.setdefault(("p", pid), f"rank {r['rank']} · NVTX")
        meta.setdefault(("t", pid, r["tid"]), f"thread {r['tid']}")
        events.append(
            {
                "ph": "X",
                "name": r["name"],
                "cat": "nvtx",
                "pid": pid,
                "tid": r["tid"],
                "ts": r["_ts"],
                "dur": r["_dur"],
            }
        )
    for key, label in meta.items():
        if key[0] == "p":
            events.append(
                {"ph": "M", "name": "process_name", "pid": key[1], "args": {"name": label}}
            )
        else:
            events.append(
                {
                    "ph": "M",
                    "name": "thread_name",
                    "pid": key[1],
                    "tid": key[2],
                    "args": {"name": label},
                }
            )
    doc = {
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": {
            "source": f"Kernelscope export of {name}",
            "time zero": "the trace's first event",
        },
    }
    return orjson.dumps(doc)


def _host_pid(rank, pid) -> int:
    return int(rank or 0) * 10_000_000 + int(pid or 0)
