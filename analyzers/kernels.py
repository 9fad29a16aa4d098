"""Per-kernel analyzers over the normalized Nsight Compute kernel table (collectors.ncu.KERNEL_SCHEMA).

Pure functions: a table and a GPUSpec in, a table out. Formulas are in each function's docstring.
A quantity whose counters a report lacks comes out null (never zero); `missing_quantities` says which
counters are missing and which ncu option collects them.
"""
from __future__ import annotations

import math

import polars as pl

from analyzers.gpus import GPUSpec
from analyzers.occupancy import occupancy

SECTOR_BYTES = 32  # an L1/L2 sector (Kernel Profiling Guide)

# quantity -> (counters it needs, the ncu option that collects them)
REQUIREMENTS: dict[str, tuple[tuple[str, ...], str]] = {
    "dram_bandwidth_gbps": (("dram__bytes_read.sum", "dram__bytes_write.sum", "gpu__time_duration.sum"),
                            "--set full (or --section MemoryWorkloadAnalysis_Chart)"),
    "smem_conflict_degree": (("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
                              "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
                              "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
                              "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"),
                             "--set full (or --section MemoryWorkloadAnalysis_Tables)"),
    "global_ld_sectors_per_request": (("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
                                       "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"),
                                      "--set full (or --section MemoryWorkloadAnalysis_Tables)"),
    "achieved_occupancy_pct": (("sm__warps_active.avg.pct_of_peak_sustained_active",),
                               "--section Occupancy (in every set)"),
    "theoretical_occupancy_pct": (("sm__maximum_warps_per_active_cycle_pct",), "--section Occupancy (in every set)"),
    "l2_read_from_l1_bytes": (("lts__t_sectors_srcunit_tex_op_read.sum",),
                              "--set full (or --section MemoryWorkloadAnalysis_Tables)"),
}


def _ratio(num: pl.Expr, den: pl.Expr) -> pl.Expr:
    return pl.when(den > 0).then(num / den).otherwise(None)


def memory_metrics(k: pl.DataFrame, gpu: GPUSpec) -> pl.DataFrame:
    """DRAM, L2 and L1 traffic of each launch.

    dram_bandwidth_gbps = (dram__bytes_read.sum + dram__bytes_write.sum) / gpu__time_duration.sum  [bytes/ns = GB/s]
    dram_peak_fraction  = achieved / the GPU's spec-sheet peak (GPUSpec.dram_bandwidth_bytes_per_s)
    dram_counter_peak_gbps = dram__bytes.sum.peak_sustained [B/cycle] x dram__cycles_elapsed.avg.per_second
                          (the peak Nsight Compute's roofline uses; from counters)
    l2_bytes = lts__t_sectors.sum x 32 B;  l2_read_from_l1_bytes = lts__t_sectors_srcunit_tex_op_read.sum x 32 B
    flop_fp32 = (fadd + fmul + 2 x ffma thread instructions per cycle) x SMSP cycles/s x duration
    """
    spec = gpu.dram_bandwidth_bytes_per_s
    bw = _ratio(pl.col("dram_read_bytes") + pl.col("dram_write_bytes"), pl.col("duration_ns"))
    return k.with_columns(
        dram_bytes=pl.col("dram_read_bytes") + pl.col("dram_write_bytes"),
        dram_bandwidth_gbps=bw,
        dram_peak_fraction=(bw * 1e9 / spec) if spec else pl.lit(None, pl.Float64),
        dram_counter_peak_gbps=pl.col("dram_peak_bytes_per_cycle") * pl.col("dram_clock_hz") / 1e9,
        l2_bytes=pl.col("l2_sectors") * SECTOR_BYTES,
        l2_read_from_l1_bytes=pl.col("l2_read_sectors_from_l1") * SECTOR_BYTES,
        l1_global_ld_bytes=pl.col("global_ld_sectors") * SECTOR_BYTES,
        flop_fp32=(pl.col("fadd_per_cycle") + pl.col("fmul_per_cycle") + 2 * pl.col("ffma_per_cycle"))
        * pl.col("smsp_clock_hz") * pl.col("duration_ns") * 1e-9,
    )


def bank_conflicts(k: pl.DataFrame) -> pl.DataFrame:
    """Shared-memory bank conflicts from the L1 data-pipe counters, for loads, stores and both.

    A conflict is a wavefront beyond the minimum the instruction needs, so
        ideal wavefronts = wavefronts - conflicts
        degree (average ways) = wavefronts / ideal wavefronts     (1 = conflict-free; 32 = every lane serialised)
        n-way per request (ncu's rule) = wavefronts / shared-memory instructions
    """
    def deg(w: pl.Expr, c: pl.Expr) -> pl.Expr:
        return _ratio(w, w - c)

    w = pl.col("smem_ld_wavefronts") + pl.col("smem_st_wavefronts")
    c = pl.col("smem_ld_bank_conflicts") + pl.col("smem_st_bank_conflicts")
    return k.with_columns(
        smem_ld_conflict_degree=deg(pl.col("smem_ld_wavefronts"), pl.col("smem_ld_bank_conflicts")),
        smem_st_conflict_degree=deg(pl.col("smem_st_wavefronts"), pl.col("smem_st_bank_conflicts")),
        smem_wavefronts=w,
        smem_bank_conflicts=c,
        smem_conflict_degree=deg(w, c),
        smem_ld_wavefronts_per_request=_ratio(pl.col("smem_ld_wavefronts"),
                                              pl.col("smem_ld_requests") + pl.col("smem_ldsm_requests").fill_null(0)),
    )


def coalescing(k: pl.DataFrame) -> pl.DataFrame:
    """Global-load coalescing.

    sectors per request = l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum / l1tex__t_requests_..._op_ld.sum
    bytes used per sector = smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.ratio (32 = all used)
    ideal sectors per request = ceil(sectors/request x bytes used per sector / 32): the sectors a warp's
        requested bytes would need if they were contiguous (4 for 4-byte accesses, 16 for 16-byte ones)
    coalescing_ratio = sectors per request / ideal (1 = fully coalesced; 8 = eight times the sectors needed)
    """
    spr = _ratio(pl.col("global_ld_sectors"), pl.col("global_ld_requests"))
    ideal = (spr * pl.col("global_ld_bytes_per_sector") / SECTOR_BYTES).ceil().clip(lower_bound=1)
    return k.with_columns(
        global_ld_sectors_per_request=spr,
        global_ld_ideal_sectors_per_request=ideal,
        global_ld_coalescing_ratio=_ratio(spr, ideal),
        global_st_sectors_per_request=_ratio(pl.col("global_st_sectors"), pl.col("global_st_requests")),
    )


def occupancy_metrics(k: pl.DataFrame, gpu: GPUSpec) -> pl.DataFrame:
    """Theoretical occupancy from our calculator (analyzers.occupancy, the CUDA occupancy rules) for each
    launch's block size, registers, static + dynamic shared memory and the shared-memory configuration the
    driver chose (launch__shared_mem_config_size), next to ncu's own theoretical and achieved occupancy."""
    preds, lims, blocks = [], [], []
    for r in k.select("block_size", "registers_per_thread", "smem_static_bytes", "smem_dynamic_bytes",
                      "smem_config_bytes", "barrier_count").iter_rows(named=True):
        if r["block_size"] is None or r["registers_per_thread"] is None:
            preds.append(None); lims.append(None); blocks.append(None)
            continue
        res = occupancy(
            gpu, int(r["block_size"]), int(r["registers_per_thread"]),
            int(r["smem_static_bytes"] or 0), int(r["smem_dynamic_bytes"] or 0),
            smem_config_bytes=int(r["smem_config_bytes"]) if r["smem_config_bytes"] else None,
            barriers_per_block=int(r["barrier_count"]) if r["barrier_count"] is not None else 1,
        )
        preds.append(res.occupancy_pct); lims.append("+".join(res.limiters)); blocks.append(res.blocks_per_sm)
    return k.with_columns(
        predicted_occupancy_pct=pl.Series(preds, dtype=pl.Float64),
        occupancy_limiter=pl.Series(lims, dtype=pl.String),
        predicted_blocks_per_sm=pl.Series(blocks, dtype=pl.Int64),
    )


def analyze_kernels(k: pl.DataFrame, gpu: GPUSpec) -> pl.DataFrame:
    """All per-kernel analyzers in one table."""
    return occupancy_metrics(coalescing(bank_conflicts(memory_metrics(k, gpu))), gpu)


def missing_quantities(analyzed: pl.DataFrame) -> list[dict]:
    """Quantities that no launch of the report has, with the counters they need and how to collect them."""
    out = []
    for q, (metrics, how) in REQUIREMENTS.items():
        if q in analyzed.columns and analyzed[q].null_count() == analyzed.height:
            out.append({"quantity": q, "needs": list(metrics), "collect_with": f"ncu {how}"})
    return out


# columns of the per-kernel JSON (`kernelscope analyze --format json`), with units for tables
KERNEL_REPORT_COLUMNS: dict[str, str] = {
    "id": "", "name": "", "duration_ns": "ns", "dram_read_bytes": "bytes", "dram_write_bytes": "bytes",
    "dram_bandwidth_gbps": "GB/s", "dram_peak_fraction": "fraction of spec peak",
    "achieved_occupancy_pct": "%", "theoretical_occupancy_pct": "% (ncu)", "predicted_occupancy_pct": "% (ours)",
    "occupancy_limiter": "", "smem_wavefronts": "wavefronts", "smem_bank_conflicts": "wavefronts",
    "smem_conflict_degree": "ways", "smem_ld_conflict_degree": "ways", "smem_st_conflict_degree": "ways",
    "global_ld_sectors_per_request": "sectors/request", "global_ld_ideal_sectors_per_request": "sectors/request",
    "l2_read_from_l1_bytes": "bytes", "l2_bytes": "bytes", "flop_fp32": "FLOP",
    "registers_per_thread": "registers", "block_size": "threads", "grid_size": "blocks",
}


def kernel_report_rows(analyzed: pl.DataFrame) -> list[dict]:
    rows = analyzed.rename({"kernel_name": "name"}).select(list(KERNEL_REPORT_COLUMNS)).to_dicts()
    for r in rows:
        for key, v in r.items():
            if isinstance(v, float) and not math.isfinite(v):
                r[key] = None
    return rows
