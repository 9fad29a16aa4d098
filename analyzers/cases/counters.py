"""The counters a prediction's mechanisms read (`Measurement.counters`), with the Nsight Compute
metric each comes from and the factor to the base unit. The bench suite records them under the same
names (collectors.bench.ncu_rerun.COUNTERS; a test keeps the two tables equal); `from_ncu` turns the
metrics of any Nsight Compute report into them.
"""

from __future__ import annotations

from typing import Mapping

#: counter name -> (Nsight Compute metric, factor to the base unit, base unit)
NCU_COUNTERS: dict[str, tuple[str, float, str]] = {
    "kernel_duration": ("gpu__time_duration.sum", 1e-9, "s"),
    "dram_read_bytes": ("dram__bytes_read.sum", 1, "B"),
    "dram_write_bytes": ("dram__bytes_write.sum", 1, "B"),
    "l2_read_from_l1_bytes": ("lts__t_sectors_srcunit_tex_op_read.sum", 32, "B"),  # sectors x 32 B
    "shared_ld_wavefronts": ("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum", 1, "count"),
    "shared_ld_bank_conflicts": (
        "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
        1,
        "count",
    ),
    "shared_ld_requests": ("smsp__sass_inst_executed_op_shared_ld.sum", 1, "count"),
    "achieved_occupancy": ("sm__warps_active.avg.pct_of_peak_sustained_active", 1, "%"),
    "theoretical_occupancy": ("sm__maximum_warps_per_active_cycle_pct", 1, "%"),
    "occupancy_limit_registers": ("launch__occupancy_limit_registers", 1, "count"),
    "occupancy_limit_shared_mem": ("launch__occupancy_limit_shared_mem", 1, "count"),
    "occupancy_limit_warps": ("launch__occupancy_limit_warps", 1, "count"),
    "occupancy_limit_blocks": ("launch__occupancy_limit_blocks", 1, "count"),
    "registers_per_thread": ("launch__registers_per_thread", 1, "count"),
    "smem_config_bytes": ("launch__shared_mem_config_size", 1, "B"),
    "warp_instructions": ("smsp__inst_executed.sum", 1, "count"),
    "sm_clock": ("gpc__cycles_elapsed.avg.per_second", 1, "Hz"),
    "l1_hit_rate": ("l1tex__t_sector_hit_rate.pct", 1, "%"),
}


def from_ncu(metrics: Mapping[str, float]) -> dict[str, float]:
    """Counters (base units) from Nsight Compute metric values as `--print-units base` exports them;
    metrics that are missing are left out."""
    out = {}
    for name, (metric, factor, _) in NCU_COUNTERS.items():
        v = metrics.get(metric)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            out[name] = float(v) * factor
    return out
