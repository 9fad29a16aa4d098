"""Questions across many runs, from the run index's frames (collectors.index: runs, kernels,
ceilings; lazy or not):

- `kernel_history`: a kernel's duration in every run that has it, per GPU, oldest first;
- `ceiling_history`: each GPU's measured ceilings over time (bench runs), with the resource each one
  measures;
- `regressions`: for every source (the artifact's file name) and GPU, each run against the previous
  run of the same source on that GPU, kernel by kernel, classified with analyzers.compare's rule
  (median change against max(noise floor, k × the combined relative spread)); "slower" beyond it is
  a regression.

Times are ns; `created` is the run's store time (Unix seconds).
"""

from __future__ import annotations

import polars as pl

from analyzers.ceilings import classify_ceiling, gpu_labels
from analyzers.compare import NOISE_FLOOR, SPREAD_K, change_columns


def _lazy(df) -> pl.LazyFrame:
    return df if isinstance(df, pl.LazyFrame) else df.lazy()


def _check_regex(pattern: str) -> None:
    from analyzers.errors import ParameterError

    try:
        pl.Series(["x"]).str.contains(pattern)
    except pl.exceptions.ComputeError as e:
        raise ParameterError(
            f"invalid kernel regex {pattern!r}: {(str(e).splitlines() or [''])[0]}"
        ) from None


def kernel_history(
    kernels,
    pattern: str,
    *,
    gpu: str | None = None,
    source: str | None = None,
    last: int | None = None,
) -> pl.DataFrame:
    """Rows of the kernels whose name matches `pattern` (a regex, searched), oldest run first:
    created, run_id, gpu_name, source_name, name, config, n, median_ns, mean_ns, std_ns, min_ns,
    max_ns, total_ns. gpu / source keep one GPU name / source file; last keeps the newest `last`
    runs."""
    _check_regex(pattern)
    lf = _lazy(kernels).filter(pl.col("name").str.contains(pattern))
    if gpu:
        lf = lf.filter(pl.col("gpu_name") == gpu)
    if source:
        lf = lf.filter(pl.col("source_name") == source)
    df = lf.select(
        "created",
        "run_id",
        "gpu_name",
        "gpu_uuid",
        "source_name",
        "kind",
        "name",
        "config",
        "n",
        "median_ns",
        "mean_ns",
        "std_ns",
        "min_ns",
        "max_ns",
        "total_ns",
    ).collect()
    if last:
        keep = (
            df.select("run_id", "created").unique().sort("created", "run_id").tail(last)["run_id"]
        )
        df = df.filter(pl.col("run_id").is_in(keep.implode()))
    return df.sort("created", "run_id", "name", "config")


def ceiling_history(
    ceilings, *, gpu: str | None = None, resource: str | None = None
) -> pl.DataFrame:
    """Each measured ceiling of the bench runs, oldest first, with its resource (analyzers.ceilings)
    and a GPU label (the name, plus the UUID's start when several physical GPUs share it)."""
    lf = _lazy(ceilings)
    if gpu:
        lf = lf.filter(pl.col("gpu_name") == gpu)
    df = lf.select(
        "created", "run_id", "gpu_name", "gpu_uuid", "metric", "value", "unit", "cv", "source"
    ).collect()
    res = [
        classify_ceiling(m, u or "") for m, u in zip(df["metric"].to_list(), df["unit"].to_list())
    ]
    df = df.with_columns(pl.Series("resource", res, dtype=pl.String))
    labels = gpu_labels(df.select("run_id", "gpu_name", "gpu_uuid").unique().rows())
    df = df.with_columns(
        pl.col("run_id").replace_strict(labels, default=None, return_dtype=pl.String).alias("gpu")
    )
    if resource:
        df = df.filter(pl.col("resource") == resource)
    return df.sort("created", "run_id", "metric")


def regressions(
    kernels,
    *,
    source: str | None = None,
    gpu: str | None = None,
    noise_floor: float = NOISE_FLOOR,
    k: float = SPREAD_K,
    statuses: tuple[str, ...] | None = ("slower",),
) -> pl.DataFrame:
    """Each run against the previous run of the same source on the same GPU (by store time), per
    kernel (name, launch configuration): run_id, previous_run_id, created, median_ns_a (previous),
    median_ns_b (this run), n_a, n_b, change_pct, threshold_pct, status. statuses keeps those (None:
    every kernel)."""
    lf = _lazy(kernels)
    if source:
        lf = lf.filter(pl.col("source_name") == source)
    if gpu:
        lf = lf.filter(pl.col("gpu_name") == gpu)
    k_ = lf.select(
        "run_id",
        "created",
        "source_name",
        "gpu_name",
        "name",
        "config",
        "n",
        "median_ns",
        "std_ns",
        "total_ns",
    ).collect()
    runs = (
        k_.select("run_id", "created", "source_name", "gpu_name")
        .unique()
        .sort("source_name", "gpu_name", "created", "run_id")
        .with_columns(
            pl.col("run_id").shift(1).over("source_name", "gpu_name").alias("previous_run_id")
        )
        .filter(pl.col("previous_run_id").is_not_null())
    )
    key = ["name", "config"]
    b = k_.select(
        "run_id",
        *key,
        pl.col("n").alias("n_b"),
        pl.col("median_ns").alias("median_ns_b"),
        pl.col("std_ns").alias("spread_ns_b"),
        pl.col("total_ns").alias("total_ns_b"),
    )
    a = k_.select(
        pl.col("run_id").alias("previous_run_id"),
        *key,
        pl.col("n").alias("n_a"),
        pl.col("median_ns").alias("median_ns_a"),
        pl.col("std_ns").alias("spread_ns_a"),
        pl.col("total_ns").alias("total_ns_a"),
    )
    pairs = runs.join(b, on="run_id").join(a, on=["previous_run_id", *key], how="left")
    out = pairs.with_columns(*change_columns(noise_floor, k)).select(
        "source_name",
        "gpu_name",
        "created",
        "run_id",
        "previous_run_id",
        *key,
        "n_a",
        "n_b",
        "median_ns_a",
        "median_ns_b",
        "spread_ns_a",
        "spread_ns_b",
        "change_pct",
        "threshold_pct",
        "status",
    )
    if statuses:
        out = out.filter(pl.col("status").is_in(list(statuses)))
    return out.sort(
        "created",
        "run_id",
        pl.col("change_pct").abs(),
        descending=[True, False, True],
        nulls_last=True,
    )
