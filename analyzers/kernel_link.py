"""The same kernel in another run: a launch of a timeline (PyTorch profiler / Nsight Systems) found
among the launches of the store's Nsight Compute runs, so the Timeline page can open its counters.

More: docs/architecture.md, *analyzers.kernel_link*.
"""

from __future__ import annotations

import polars as pl

from analyzers.join import signature

BASES = ("same name and launch configuration", "same name")


def match_launches(kernel: dict, ncu_kernels: pl.DataFrame) -> pl.DataFrame:
    """ncu launches (rows of an analysed kernels table, with `run_id`) matching one timeline kernel
    (a gpu_ops row: name, grid_x.., block_x..). Adds `basis` (BASES); best matches first, then by
    run and launch id."""
    if not ncu_kernels.height:
        return ncu_kernels.with_columns(pl.lit(None, pl.String).alias("basis"))
    want = signature(kernel.get("name") or "")
    col = "raw_name" if "raw_name" in ncu_kernels.columns else "kernel_name"
    sigs = ncu_kernels[col].map_elements(signature, return_dtype=pl.String)
    k = ncu_kernels.filter(sigs == want)
    dims = [kernel.get(f"{w}_{a}") for w in ("grid", "block") for a in "xyz"]
    if all(d is not None for d in dims):
        same = pl.all_horizontal(
            [
                pl.col(f"{w}_{a}") == d
                for (w, a), d in zip([(w, a) for w in ("grid", "block") for a in "xyz"], dims)
            ]
        )
    else:
        same = pl.lit(False)
    return k.with_columns(
        pl.when(same).then(pl.lit(BASES[0])).otherwise(pl.lit(BASES[1])).alias("basis")
    ).sort(pl.col("basis") != BASES[0], "run_id", "id")
