"""The same kernel in another run: a launch of a timeline (PyTorch profiler / Nsight Systems) found among the
launches of the store's Nsight Compute runs, so the Timeline page can open its counters.

Matching (a first step; a full join of ncu runs with timelines — order within an iteration, NVTX filters,
--launch-skip, a confidence per match — can replace `match_launches` without changing its callers):
    "same name and launch configuration"   the demangled name and grid and block dimensions are equal
    "same name"                            the demangled name is equal, the configuration differs or is unknown
A timeline's kernel name is compared after the same normalisation on both sides (whitespace collapsed).
"""
from __future__ import annotations

import re

import polars as pl

BASES = ("same name and launch configuration", "same name")


def _norm(name: str | None) -> str:
    return re.sub(r"\s+", " ", name or "").strip()


def match_launches(kernel: dict, ncu_kernels: pl.DataFrame) -> pl.DataFrame:
    """ncu launches (rows of an analysed kernels table, with `run_id`) matching one timeline kernel (a gpu_ops row:
    name, grid_x.., block_x..). Adds `basis` (BASES); best matches first, then by run and launch id."""
    if not ncu_kernels.height:
        return ncu_kernels.with_columns(pl.lit(None, pl.String).alias("basis"))
    name = _norm(kernel.get("name"))
    k = ncu_kernels.filter(pl.col("kernel_name").str.replace_all(r"\s+", " ").str.strip_chars() == name)
    dims = [kernel.get(f"{w}_{a}") for w in ("grid", "block") for a in "xyz"]
    if all(d is not None for d in dims):
        same = pl.all_horizontal([pl.col(f"{w}_{a}") == d for (w, a), d in
                                  zip([(w, a) for w in ("grid", "block") for a in "xyz"], dims)])
    else:
        same = pl.lit(False)
    return k.with_columns(pl.when(same).then(pl.lit(BASES[0])).otherwise(pl.lit(BASES[1])).alias("basis")) \
        .sort(pl.col("basis") != BASES[0], "run_id", "id")
