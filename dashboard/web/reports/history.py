"""History (?kernel=REGEX&gpu=NAME&source=FILE&resource=dram&noise=5): questions across the store's
runs, from the run index (collectors.index) — a kernel's duration over runs and GPUs, each GPU's
measured ceilings over time, and regressions between consecutive runs of the same source. The
numbers are analyzers.history's, the same functions `kernelscope query` prints.
"""

from __future__ import annotations

import math

import polars as pl

from analyzers import history
from analyzers.ceilings import RESOURCES
from analyzers.compare import NOISE_FLOOR
from analyzers.errors import ParameterError
from dashboard.web import charts
from dashboard.web.reports.report_blocks import (
    Chart,
    Col,
    Heading,
    Report,
    Table,
    Text,
    code,
    num,
    text,
)
from dashboard.web.reports.run_links import link
from dashboard.web.pages import PAGE_FOR_KIND
from dashboard.core.source import Source

MAX_ROWS = 500
RESOURCE_LABELS = {k: v[1] for k, v in RESOURCES.items()}
UNIT_SCALE = {"B/s": (1e-9, "GB/s"), "FLOP/s": (1e-12, "TFLOP/s"), "s": (1e6, "µs")}


def _when(df: pl.DataFrame) -> pl.DataFrame:
    return df.with_columns(pl.from_epoch(pl.col("created"), time_unit="s").alias("when"))


def params_of(params: dict, *, strict: bool) -> dict:
    raw = params.get("noise")
    try:
        noise = float(raw) if raw not in (None, "") else 100 * NOISE_FLOOR
    except ValueError:
        noise = math.nan
    if not (math.isfinite(noise) and 0 <= noise < 1000):
        if strict:
            raise ParameterError(f"noise must be a percentage >= 0, got {raw!r}")
        noise = 100 * NOISE_FLOOR
    res = params.get("resource") or "dram"
    if res not in RESOURCES:
        if strict:
            raise ParameterError(f"resource must be one of {', '.join(RESOURCES)}, got {res!r}")
        res = "dram"
    return {
        "kernel": params.get("kernel") or "",
        "gpu": params.get("gpu") or None,
        "source": params.get("source") or None,
        "resource": res,
        "noise": noise,
    }


def kernel_blocks(src: Source, p: dict) -> list:
    if not p["kernel"]:
        return [
            Text("Give a kernel name regex to follow its duration across runs and GPUs.", "info")
        ]
    df = src.history(
        lambda ix: history.kernel_history(ix.kernels, p["kernel"], gpu=p["gpu"], source=p["source"])
    )
    if df.height == 0:
        return [Text(f"No run has a kernel matching {code(p['kernel'])}.", "info")]
    pts = _when(df).with_columns(
        (pl.col("median_ns") / 1e3).alias("median_us"),
        pl.col("config").alias("label"),
        pl.format(
            "{} · {}", pl.col("gpu_name").fill_null("unknown GPU"), pl.col("name").str.slice(0, 48)
        ).alias("series"),
    )
    chart = charts.history_lines(
        pts.select("when", "run_id", "median_us", "series", "label"),
        y="median_us",
        y_title="median duration [µs] (per run)",
        color="series",
        color_title="GPU · kernel",
        title=f"Kernels matching /{p['kernel']}/ over runs",
    )
    rows = (
        df.sort("created", descending=True)
        .head(MAX_ROWS)
        .select(
            pl.from_epoch("created", time_unit="s").dt.strftime("%Y-%m-%d %H:%M").alias("stored"),
            pl.struct("run_id", "kind")
            .map_elements(
                lambda r: link(PAGE_FOR_KIND.get(r["kind"], "runs"), run=r["run_id"]),
                return_dtype=pl.String,
            )
            .alias("open"),
            "run_id",
            "gpu_name",
            "source_name",
            pl.col("name").str.slice(0, 120).alias("kernel"),
            "config",
            "n",
            *[
                (pl.col(c) / 1e3).alias(c.replace("_ns", "_us"))
                for c in ("median_ns", "std_ns", "min_ns", "max_ns")
            ],
        )
    )
    return [
        Chart(
            "kernel_history",
            chart,
            "Nsight Compute runs: each profiled launch; traces: every kernel.",
        ),
        Table(
            "kernel_history",
            rows,
            {
                "stored": text("stored (UTC)"),
                "open": Col("open", kind="link", link_text="run"),
                "run_id": text("run id"),
                "gpu_name": text("GPU"),
                "source_name": text("file"),
                "kernel": text("kernel"),
                "config": text("launch configuration"),
                "n": num("launches"),
                "median_us": num("median", "µs", "%.2f"),
                "std_us": num("std", "µs", "%.2f"),
                "min_us": num("min", "µs", "%.2f"),
                "max_us": num("max", "µs", "%.2f"),
            },
            height=320,
        ),
    ]


def ceiling_blocks(src: Source, p: dict) -> list:
    df = src.history(lambda ix: history.ceiling_history(ix.ceilings, gpu=p["gpu"]))
    if df.height == 0:
        return [Text("No `kernelscope bench` runs in the store yet: no measured ceilings.", "info")]
    out = []
    sel = df.filter(pl.col("resource") == p["resource"])
    if sel.height:
        unit = sel["unit"][0]
        scale, shown = UNIT_SCALE.get(unit, (1.0, unit))
        pts = _when(sel).with_columns(
            (pl.col("value") * scale).alias("v"), pl.col("metric").alias("label")
        )
        out.append(
            Chart(
                "ceiling_history",
                charts.history_lines(
                    pts.select("when", "run_id", "v", "gpu", "label"),
                    y="v",
                    y_title=f"{RESOURCES[p['resource']][1]} [{shown}]",
                    color="gpu",
                    color_title="GPU",
                    title=f"Measured {RESOURCES[p['resource']][1]} over time, per GPU",
                ),
                "Each point: a ceiling of one bench run (its best method per metric).",
            )
        )
    rows = (
        df.sort("created", descending=True)
        .head(MAX_ROWS)
        .select(
            pl.from_epoch("created", time_unit="s").dt.strftime("%Y-%m-%d %H:%M").alias("stored"),
            "run_id",
            "gpu",
            "resource",
            "metric",
            "value",
            "unit",
            "cv",
        )
    )
    out.append(
        Table(
            "ceiling_history",
            rows,
            {
                "stored": text("stored (UTC)"),
                "run_id": text("run id"),
                "gpu": text("GPU"),
                "resource": text("resource"),
                "metric": text("ceiling"),
                "value": num("value", "unit at the right", "%.4g"),
                "unit": text("unit"),
                "cv": num("cv", "", "%.4f", "coefficient of variation of the repetitions"),
            },
            height=300,
        )
    )
    return out


def regression_blocks(src: Source, p: dict) -> list:
    df = src.history(
        lambda ix: history.regressions(
            ix.kernels, source=p["source"], gpu=p["gpu"], noise_floor=p["noise"] / 100
        )
    )
    if df.height == 0:
        return [
            Text(
                "No kernel is slower than in the previous run of the same file on the same GPU "
                f"(noise floor {p['noise']:g} %).",
                "success",
            )
        ]
    rows = df.head(MAX_ROWS).select(
        pl.from_epoch("created", time_unit="s").dt.strftime("%Y-%m-%d %H:%M").alias("stored"),
        "source_name",
        "gpu_name",
        "previous_run_id",
        "run_id",
        pl.col("name").str.slice(0, 120).alias("kernel"),
        "config",
        (pl.col("median_ns_a") / 1e3).alias("before_us"),
        (pl.col("median_ns_b") / 1e3).alias("after_us"),
        "change_pct",
        "threshold_pct",
    )
    return [
        Table(
            "regressions",
            rows,
            {
                "stored": text("stored (UTC)"),
                "source_name": text("file"),
                "gpu_name": text("GPU"),
                "previous_run_id": text("previous run"),
                "run_id": text("run"),
                "kernel": text("kernel"),
                "config": text("launch configuration"),
                "before_us": num("before", "µs", "%.2f", "median, previous run"),
                "after_us": num("after", "µs", "%.2f", "median, this run"),
                "change_pct": num("change", "%", "%+.1f"),
                "threshold_pct": num(
                    "threshold", "%", "%.1f", "max(noise floor, 2 × combined relative spread)"
                ),
            },
            caption="Consecutive runs of the same file on the same GPU (by store time), kernels "
            "matched by name and launch configuration; slower beyond the threshold, as on the "
            "Compare page.",
            height=320,
        )
    ]


def build(src: Source, params: dict) -> Report:
    p = params_of(params, strict=True)
    return report(src, p)


def report(src: Source, p: dict) -> Report:
    rep = Report(
        "History",
        subtitle="questions across the store's runs (from the run index)"
        + (f" · GPU {code(p['gpu'])}" if p["gpu"] else "")
        + (f" · file {code(p['source'])}" if p["source"] else ""),
    )
    rep.add(Heading("A kernel over runs and GPUs"), *kernel_blocks(src, p))
    rep.add(Heading("Measured ceilings over time"), *ceiling_blocks(src, p))
    rep.add(
        Heading("Regressions between consecutive runs of the same file"), *regression_blocks(src, p)
    )
    return rep
