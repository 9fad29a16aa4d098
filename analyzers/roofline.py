"""Hierarchical rooflines of one Nsight Compute run: every launch at each memory level (L1/shared,
L2, DRAM), against that level's bandwidth roof and the compute roofs.

More: docs/architecture.md, *analyzers.roofline*.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from analyzers.ceilings import Ceiling
from analyzers.gpus import GPUSpec

LEVELS = ("L1/shared", "L2", "DRAM")
L1_BYTES_PER_SM_CYCLE = 128.0
WARP_ISSUE_PER_SM_CYCLE = 4.0
SECTOR = 32.0
WAVEFRONT = 128.0


@dataclass
class Roofline:
    kind: str  # "flop" | "inst"
    points: pl.DataFrame  # launch, kernel, level, intensity, rate, duration_us, work
    # label, kind ("memory"|"compute"), level, value (B/s or FLOP/s / inst/s), measured
    roofs: list[dict]
    not_drawn: list[int] = field(default_factory=list)
    unit: str = "FLOP"  # "FLOP" | "warp instructions"


def level_bytes(k: pl.DataFrame) -> pl.DataFrame:
    """bytes_l1 (L1/shared), bytes_l2, bytes_dram per launch (null where a level is not counted)."""
    l1 = (pl.col("global_ld_sectors") + pl.col("global_st_sectors").fill_null(0)) * SECTOR + (
        pl.col("smem_ld_wavefronts").fill_null(0) + pl.col("smem_st_wavefronts").fill_null(0)
    ) * WAVEFRONT
    return k.with_columns(
        l1.alias("bytes_l1"),
        (pl.col("l2_sectors") * SECTOR).alias("bytes_l2"),
        pl.col("dram_bytes").alias("bytes_dram"),
    )


def _median(k: pl.DataFrame, col: str) -> float | None:
    if col not in k.columns:
        return None
    v = k[col].drop_nulls()
    return float(v.median()) if v.len() else None


def memory_roofs(k: pl.DataFrame, gpu: GPUSpec, measured: dict[str, Ceiling]) -> list[dict]:
    roofs = []
    clk = _median(k, "sm_clock_hz")
    if clk and gpu.sm_count:
        roofs.append(
            {
                "label": "L1/shared · SMs × 128 B/cycle",
                "kind": "memory",
                "level": "L1/shared",
                "value": gpu.sm_count * L1_BYTES_PER_SM_CYCLE * clk,
                "measured": False,
            }
        )
    l2_peak, l2_clk = _median(k, "l2_peak_bytes_per_cycle"), _median(k, "l2_clock_hz")
    if l2_peak and l2_clk:
        roofs.append(
            {
                "label": "L2 · ncu peak",
                "kind": "memory",
                "level": "L2",
                "value": l2_peak * l2_clk,
                "measured": False,
            }
        )
    elif measured.get("l2"):
        roofs.append(
            {
                "label": "L2 · measured",
                "kind": "memory",
                "level": "L2",
                "value": measured["l2"].value,
                "measured": True,
            }
        )
    if gpu.dram_bandwidth_bytes_per_s:
        roofs.append(
            {
                "label": "DRAM · spec sheet",
                "kind": "memory",
                "level": "DRAM",
                "value": gpu.dram_bandwidth_bytes_per_s,
                "measured": False,
            }
        )
    if measured.get("dram"):
        roofs.append(
            {
                "label": "DRAM · measured",
                "kind": "memory",
                "level": "DRAM",
                "value": measured["dram"].value,
                "measured": True,
            }
        )
    return roofs


def _points(k: pl.DataFrame, work: str, rate: pl.Expr, label: pl.Expr) -> pl.DataFrame:
    frames = []
    for level, col in zip(LEVELS, ("bytes_l1", "bytes_l2", "bytes_dram")):
        frames.append(
            k.filter((pl.col(work) > 0) & (pl.col(col) > 0) & (pl.col("duration_ns") > 0)).select(
                pl.col("id").cast(pl.String).alias("launch"),
                pl.col("display_name").alias("kernel"),
                pl.lit(level).alias("level"),
                (pl.col(work) / pl.col(col)).alias("intensity"),
                rate.alias("rate"),
                (pl.col("duration_ns") / 1e3).alias("duration_us"),
                label.alias("work"),
            )
        )
    return pl.concat(frames) if frames else pl.DataFrame()


def flop_roofline(k: pl.DataFrame, gpu: GPUSpec, measured: dict[str, Ceiling]) -> Roofline:
    """The hierarchical FLOP roofline (module docstring)."""
    k = level_bytes(k)
    work = (
        pl.when(pl.col("flop_tensor").fill_null(0) > pl.col("flop_fp32").fill_null(0))
        .then(pl.lit("tensor ") + pl.col("tensor_type").fill_null("").str.to_uppercase())
        .otherwise(pl.lit("FP32"))
    )
    pts = _points(k, "flop_total", pl.col("flop_total") / pl.col("duration_ns") * 1e9, work)
    roofs = memory_roofs(k, gpu, measured)
    if gpu.fp32_flop_per_s:
        roofs.append(
            {
                "label": "FP32 · spec sheet",
                "kind": "compute",
                "level": None,
                "value": gpu.fp32_flop_per_s,
                "measured": False,
            }
        )
    if measured.get("fp32"):
        roofs.append(
            {
                "label": "FP32 · measured",
                "kind": "compute",
                "level": None,
                "value": measured["fp32"].value,
                "measured": True,
            }
        )
    if pts.height and pts.filter(pl.col("work") != "FP32").height:
        if gpu.bf16_dense_flop_per_s:
            roofs.append(
                {
                    "label": "BF16 tensor · spec sheet",
                    "kind": "compute",
                    "level": None,
                    "value": gpu.bf16_dense_flop_per_s,
                    "measured": False,
                }
            )
        if measured.get("bf16"):
            roofs.append(
                {
                    "label": "BF16 tensor · measured",
                    "kind": "compute",
                    "level": None,
                    "value": measured["bf16"].value,
                    "measured": True,
                }
            )
    drawn = set(pts["launch"].to_list()) if pts.height else set()
    return Roofline(
        "flop", pts, roofs, [i for i in k["id"].to_list() if str(i) not in drawn], "FLOP"
    )


def instruction_roofline(k: pl.DataFrame, gpu: GPUSpec, measured: dict[str, Ceiling]) -> Roofline:
    """The hierarchical instruction roofline (module docstring): every launch with instructions counted."""
    k = level_bytes(k)
    work = (
        pl.when(pl.col("flop_total").fill_null(0) > 0)
        .then(pl.lit("does FLOP"))
        .otherwise(pl.lit("no FLOP"))
    )
    pts = (
        _points(k, "inst_executed", pl.col("inst_executed") / pl.col("duration_ns") * 1e9, work)
        if "inst_executed" in k.columns
        else pl.DataFrame()
    )
    roofs = memory_roofs(k, gpu, measured)
    clk = _median(k, "sm_clock_hz")
    if clk and gpu.sm_count:
        roofs.append(
            {
                "label": "issue rate · SMs × 4 warp-inst/cycle",
                "kind": "compute",
                "level": None,
                "value": gpu.sm_count * WARP_ISSUE_PER_SM_CYCLE * clk,
                "measured": False,
            }
        )
    drawn = set(pts["launch"].to_list()) if pts.height else set()
    return Roofline(
        "inst",
        pts,
        roofs,
        [i for i in k["id"].to_list() if str(i) not in drawn],
        "warp instructions",
    )
