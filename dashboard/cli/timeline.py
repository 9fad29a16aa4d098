"""Timeline commands (`kernelscope whatif`) and the report that `kernelscope analyze` prints for
PyTorch profiler (kind "kineto") and Nsight Systems (kind "nsys") runs.

`report(parsed)` -> dict with `summary` (whole run + `devices`), `devices`, `kernels` (one row per kernel),
`launch`, `idle_categories`, `temporal`, `launch_bound`, `top_kernels` and the `definitions` used.
Times are ns unless the key says `_us`.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Optional

import polars as pl
import typer

from analyzers.timeline import DEFINITIONS
from dashboard.cli._app import ListFormat, StoreOpt, app, echo_json, open_store

TIMELINE_KINDS = ("kineto", "nsys")


# columns of the per-kernel table (`kernelscope analyze TRACE` without --format json): (key, header, scale)
TABLE_COLUMNS = [
    ("rank", "rank", None), ("device", "dev", None), ("stream", "stream", None), ("name", "kernel", None),
    ("duration_ns", "duration [µs]", 1e-3), ("launch_api", "launch call", None),
    ("launch_delay_us", "launch delay [µs]", 1), ("queue_us", "queue [µs]", 1), ("op_name", "CPU op", None),
]


def _r(x, nd=3):
    if x is None:
        return None
    x = float(x)
    return None if not math.isfinite(x) else round(x, nd)


def _summary_row(u: dict) -> dict:
    return {
        "kernel_count": int(u["kernel_count"]),
        "kernels_with_launch": int(u["kernels_with_launch"]),
        "gpu_op_count": int(u["op_count"]),
        "gpu_busy_ns": int(u["busy_ns"]),
        "gpu_window_ns": int(u["window_ns"]),
        "gpu_idle_fraction": _r(u["idle_fraction"], 6),
    }


def report(parsed, *, launch_floor_ns: float | None = None, max_kernels: int | None = None) -> dict:
    """The timeline report of a parsed Kineto / nsys run (see the module docstring)."""
    from analyzers import timeline as T

    if parsed.kind not in TIMELINE_KINDS:
        raise ValueError(f"not a timeline run (kind {parsed.kind!r})")
    g = parsed.tables["gpu_ops"]
    k = T.kernels(g)
    util = T.utilization(g)
    lstats = T.launch_stats(g)
    lb = T.launch_bound(g, launch_floor_ns=launch_floor_ns)
    devices = []
    for u in util.iter_rows(named=True):
        row = {"rank": u["rank"], "device": u["device"], **_summary_row(u)}
        st = lstats.filter((pl.col("rank") == u["rank"]) & (pl.col("device") == u["device"]))
        if st.height:
            s0 = st.row(0, named=True)
            row["launch_delay_median_us"] = _r(s0["launch_delay_median_ns"] / 1e3 if s0["launch_delay_median_ns"]
                                               is not None else None)
            row["launch_delay_p90_us"] = _r(s0["launch_delay_p90_ns"] / 1e3 if s0["launch_delay_p90_ns"]
                                            is not None else None)
        b = lb.filter((pl.col("rank") == u["rank"]) & (pl.col("device") == u["device"]))
        if b.height:
            row["launch_verdict"] = b["verdict"][0]
        devices.append(row)
    busy = int(util["busy_ns"].sum()) if util.height else 0
    window = int(util["window_ns"].sum()) if util.height else 0
    d = k["launch_delay_ns"].drop_nulls()
    summary = {
        "kernel_count": k.height,
        "kernels_with_launch": int(k["launch_api"].is_not_null().sum()),
        "gpu_op_count": g.height,
        "memcpy_count": int((g["kind"] == "memcpy").sum()),
        "memset_count": int((g["kind"] == "memset").sum()),
        "gpu_busy_ns": busy,
        "gpu_window_ns": window,
        "gpu_idle_fraction": _r(1.0 - busy / window, 6) if window else 0.0,
        "wall_window_ns": int(g["end_ns"].max() - g["start_ns"].min()) if g.height else 0,
        "launch_delay_median_us": _r(d.median() / 1e3) if d.len() else None,
        "launch_delay_p90_us": _r(d.quantile(0.9, "nearest") / 1e3) if d.len() else None,
        "device_count": len(devices),
        "gpu_name": parsed.meta.get("gpu_name"),
        "devices": devices,
    }
    kern = k.sort("rank", "device", "start_ns")
    if max_kernels is not None:
        kern = kern.head(max_kernels)
    kernels_out = kern.select(
        "name", "rank", "device", "stream", "start_ns", "end_ns", "duration_ns", "launch_api", "correlation",
        (pl.col("launch_delay_ns") / 1e3).round(3).alias("launch_delay_us"),
        (pl.col("queue_ns") / 1e3).round(3).alias("queue_us"),
        "op_name", "graph_launch_correlation",
    ).to_dicts()

    def rows(df: pl.DataFrame) -> list[dict]:
        return [{c: (_r(v, 6) if isinstance(v, float) else v) for c, v in r.items()} for r in df.to_dicts()]

    return {
        "kind": parsed.kind,
        "gpu": {"name": parsed.meta.get("gpu_name")},
        "gpu_name": parsed.meta.get("gpu_name"),
        "summary": summary,
        "devices": devices,
        "launch": rows(lstats),
        "idle_categories": rows(T.idle_categories(g)),
        "temporal": rows(T.temporal_breakdown(g)),
        "launch_bound": rows(lb),
        "top_kernels": rows(T.kernel_summary(g).head(20)),
        "definitions": DEFINITIONS,
        "kernels": kernels_out,
    }


def kernel_rows(rep: dict) -> list[dict]:
    """The per-kernel rows of a report (for table / CSV output)."""
    return list(rep.get("kernels", []))


# --------------------------------------------------------------------------------------------------
# kernelscope whatif
# --------------------------------------------------------------------------------------------------
def load_trace(trace: str, store_dir: Optional[Path] = None):
    """A path (file or rank folder; parsed, not stored) or a run id in the store -> Parsed."""
    from collectors.artifact import parse_bytes
    from collectors.errors import ArtifactError
    from collectors.kineto import pack_rank_folder

    p = Path(trace)
    if p.is_dir():
        packed = pack_rank_folder(p)
        if packed is None:
            raise ArtifactError(str(p), "a folder is one run only when it holds Kineto traces of distinct ranks")
        return parse_bytes(packed[0], packed[1])
    if p.is_file():
        try:
            data = p.read_bytes()
        except OSError as e:
            raise ArtifactError(str(p), f"cannot read file ({e.strerror})") from None
        return parse_bytes(data, p.name)
    return open_store(store_dir).get(trace).as_parsed()


@app.command("whatif")
def whatif_cmd(
    trace: Annotated[str, typer.Argument(help="A PyTorch profiler trace / nsys SQLite export (path) or a run id.")],
    kernel: Annotated[str, typer.Option("--kernel", help="Regex searched in kernel names.")],
    speedup: Annotated[float, typer.Option("--speedup", help="How many times faster the matched kernels run.")],
    format: Annotated[ListFormat, typer.Option("--format", help="Output format.")] = ListFormat.table,
    store: StoreOpt = None,
) -> None:
    """Predict the run time if kernels matching --kernel ran --speedup times faster: a replay of the trace's
    own dependencies (launch calls, stream order, synchronisations) next to the plain Amdahl estimate."""
    from analyzers.timeline import what_if

    if not (math.isfinite(speedup) and speedup > 0):
        raise typer.BadParameter(f"--speedup must be a finite number > 0, got {speedup:g}")
    parsed = load_trace(trace, store)
    if parsed.kind not in TIMELINE_KINDS:
        raise typer.BadParameter(f"{trace} is a {parsed.kind} run; whatif needs a PyTorch profiler trace or an "
                                 "Nsight Systems export")
    try:
        w = what_if(parsed.tables["gpu_ops"], parsed.tables["api_calls"], kernel, speedup)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    out = w.as_dict()
    out["saved_ns"] = w.run_ns - w.predicted_ns
    out["amdahl_saved_ns"] = w.run_ns - w.amdahl_ns
    out["definitions"] = {"whatif": DEFINITIONS["whatif"]}
    if format == ListFormat.json:
        echo_json(out)
        return
    ms = lambda ns: f"{ns / 1e6:,.3f} ms"  # noqa: E731
    typer.echo(f"kernels matching /{kernel}/: {w.matched_kernels} "
               f"({ms(w.matched_kernel_ns)} of kernel time, f = {w.fraction:.1%} of the run)")
    typer.echo(f"measured run time                 {ms(w.run_ns)}")
    typer.echo(f"what-if (trace dependencies), {speedup:g}x  {ms(w.predicted_ns)}   "
               f"speedup {w.speedup_whatif:.3f}x  saves {ms(out['saved_ns'])}")
    typer.echo(f"Amdahl, {speedup:g}x                      {ms(w.amdahl_ns)}   "
               f"speedup {w.speedup_amdahl:.3f}x  saves {ms(out['amdahl_saved_ns'])}")
    if len(w.ranks) > 1:
        for r in w.ranks:
            typer.echo(f"  rank {r['rank']}: {ms(r['run_ns'])} -> {ms(r['predicted_ns'])} (Amdahl {ms(r['amdahl_ns'])})")

