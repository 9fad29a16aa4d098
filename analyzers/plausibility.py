"""Physical plausibility of a profiled launch against the GPU it ran on: what a counter, a unit row
or the GPU's identification got wrong is flagged where it is shown, never silently turned into a
finding.

    launch_flags(analyzed, gpu) -> frame (id, flags: list of one-line texts)

More: docs/architecture.md, *analyzers.plausibility*.
"""

from __future__ import annotations

import polars as pl

from analyzers.gpus import GPUSpec

#: how far above a spec peak a measured rate may read before it is flagged (counter noise, boost
#: clocks)
TOLERANCE = 1.10
FLAGS_SCHEMA = pl.Schema({"id": pl.Int64, "flags": pl.List(pl.String)})


def _v(r: dict, k: str):
    v = r.get(k)
    return v if isinstance(v, (int, float)) and v == v else None


#: the columns of an analyzed launch that one_launch reads (a missing one reads as None)
INPUTS = (
    "dram_bandwidth_gbps",
    "fp32_tflops",
    "tensor_peak_fraction",
    "block_size",
    "registers_per_thread",
    "smem_static_bytes",
    "smem_dynamic_bytes",
    "duration_ns",
    "dram_bytes",
    "smem_conflict_degree",
    "global_ld_sectors_per_request",
)


def launch_flags(analyzed: pl.DataFrame, gpu: GPUSpec) -> pl.DataFrame:
    rows = []
    have = set(analyzed.columns)
    for r in analyzed.select([c for c in ("id", *INPUTS) if c in have]).iter_rows(named=True):
        rows.append({"id": r["id"], "flags": one_launch(r, gpu)})
    return pl.DataFrame(rows, schema=FLAGS_SCHEMA)


def one_launch(r: dict, gpu: GPUSpec) -> list[str]:
    out: list[str] = []
    bw = _v(r, "dram_bandwidth_gbps")
    if (
        bw is not None
        and gpu.dram_bandwidth_bytes_per_s
        and bw * 1e9 > gpu.dram_bandwidth_bytes_per_s * TOLERANCE
    ):
        out.append(
            f"DRAM bandwidth {bw:,.0f} GB/s is {bw * 1e9 / gpu.dram_bandwidth_bytes_per_s:.3g}× "
            f"{gpu.name}'s spec peak of {gpu.dram_bandwidth_bytes_per_s / 1e9:,.0f} GB/s: "
            "counters, units or the GPU's identification are wrong"
        )
    fp32 = _v(r, "fp32_tflops")
    if fp32 is not None and gpu.fp32_flop_per_s and fp32 * 1e12 > gpu.fp32_flop_per_s * TOLERANCE:
        out.append(
            f"FP32 rate {fp32:,.1f} TFLOP/s is above {gpu.name}'s spec peak of "
            f"{gpu.fp32_flop_per_s / 1e12:,.1f} TFLOP/s"
        )
    tf = _v(r, "tensor_peak_fraction")
    if tf is not None and tf > TOLERANCE:
        out.append(f"tensor-core rate is {tf:.3g}× {gpu.name}'s spec peak for its types")
    bs = _v(r, "block_size")
    if bs is not None and gpu.max_threads_per_block and bs > gpu.max_threads_per_block:
        out.append(f"{bs:.0f} threads per block, above {gpu.name}'s {gpu.max_threads_per_block}")
    regs = _v(r, "registers_per_thread")
    if regs is not None and gpu.max_regs_per_thread and regs > gpu.max_regs_per_thread:
        out.append(f"{regs:.0f} registers per thread, above {gpu.name}'s {gpu.max_regs_per_thread}")
    if (
        regs is not None
        and bs is not None
        and gpu.max_regs_per_block
        and regs * bs > gpu.max_regs_per_block
    ):
        out.append(
            f"{regs:.0f} registers × {bs:.0f} threads = {regs * bs:,.0f} registers per block, "
            f"above {gpu.name}'s {gpu.max_regs_per_block:,}"
        )
    smem = (_v(r, "smem_static_bytes") or 0) + (_v(r, "smem_dynamic_bytes") or 0)
    if gpu.smem_per_block_optin_bytes and smem > gpu.smem_per_block_optin_bytes:
        out.append(
            f"{smem:,.0f} bytes of shared memory per block, above {gpu.name}'s "
            f"{gpu.smem_per_block_optin_bytes:,}"
        )
    dur, dram = _v(r, "duration_ns"), _v(r, "dram_bytes")
    if dur == 0 and dram:
        out.append(f"{dram:,.0f} bytes of DRAM traffic in a duration of 0 ns")
    deg = _v(r, "smem_conflict_degree")
    if deg is not None and deg > 32.5:
        out.append(f"bank-conflict degree {deg:.3g} ways: above 32, the number of banks")
    spr = _v(r, "global_ld_sectors_per_request")
    if spr is not None and spr > 32.5:
        out.append(f"{spr:.3g} sectors per load request: above 32 (one per thread of a warp)")
    return out
