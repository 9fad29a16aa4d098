"""The textbook's models on a stored Nsight Compute run (analyzers.kernel_models), with what the
application core adds: the trace of the same program that the Kernels page joins
(dashboard.web.reports.join_blocks, or the one named), that trace's op shapes read from its kept
artifact (collectors.kineto_shapes), and the cache. The CLI (`analyze --trace`), the Kernels page
and the export all call `models_for`, so each shows the one result.
"""

from __future__ import annotations

import polars as pl

from analyzers.kernel_models import ModelResult, model_launches
from collectors.kineto_shapes import SHAPES_SCHEMA, op_shapes
from collectors.schema import Parsed
from collectors.store import Run
from dashboard.core.source import Source


def shapes_of(
    src: Source, trace: Run | Parsed | None, data: bytes | None = None, name: str = ""
) -> pl.DataFrame:
    """The op shapes of a PyTorch profiler trace: from `data` when given (a file on the command
    line), else from a stored run's artifact (cached); empty for an Nsight Systems export or a file
    parsed in memory."""
    if data is not None:
        return op_shapes(data, name)
    if not isinstance(trace, Run) or trace.kind != "kineto":
        return pl.DataFrame(schema=SHAPES_SCHEMA)

    def make():
        try:
            return op_shapes(
                trace.artifact_path.read_bytes(), trace.manifest.get("source_name", "")
            )
        except OSError:
            return pl.DataFrame(schema=SHAPES_SCHEMA)

    return src._cached(("op_shapes", trace.run_id), make)


def models_for(
    src: Source,
    ncu_run: Run | Parsed,
    trace: Run | Parsed | None = None,
    joined=None,
    shapes: pl.DataFrame | None = None,
) -> ModelResult:
    """Every launch of an ncu run with the chapter's model: with a joined trace (and its shapes) when one is given."""
    a = src.ncu(ncu_run)
    if trace is not None and joined is None:
        joined = src.join(ncu_run, trace)
    if trace is not None and shapes is None:
        shapes = shapes_of(src, trace)

    def make():
        return model_launches(a.kernels, a.gpu, a.measured, joined, shapes)

    if isinstance(ncu_run, Run) and (trace is None or isinstance(trace, Run)):
        return src._cached(
            (
                "models",
                ncu_run.run_id,
                getattr(trace, "run_id", None),
                src.gpu,
                src._ceilings_key(),
            ),
            make,
        )
    return make()


def report_section(result: ModelResult, kernels: pl.DataFrame) -> tuple[pl.DataFrame, dict]:
    """(the CLI's kernel rows with the model's columns, the JSON's "models" section: roofs,
    coverage, every launch's model, the chains, the summary with its sentence)."""
    from analyzers.kernel_models import launch_frame, summary

    cols = (
        launch_frame(result)
        .with_columns((pl.col("model_meas_ns") / pl.col("model_pred_ns")).alias("model_ratio"))
        .drop("model_meas_ns", "model_win_ns")
    )
    d = result.as_dict()
    d["summary"] = summary(result)
    return kernels.join(cols, on="id", how="left"), d
