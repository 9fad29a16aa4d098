"""The normalized data model: what every parser returns, the tables' declared schemas, typed run
metadata.

Every parser returns `Parsed(kind, tables, meta)`: polars tables in base units with the unit in each
column name (`duration_ns`, `dram_read_bytes`), each checked against its schema here (`conform`),
and a small JSON metadata dict whose common keys are declared in `CommonMeta` and checked by
`finish_meta`. After this boundary the code trusts the columns.

More: docs/architecture.md, *collectors.schema*.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypedDict

import polars as pl

# version of each kind's tables, the kinds, the timeline kinds, what an item count counts: the
# format registry's
# re-exported
from collectors.formats import ITEM_LABELS, KINDS, TABLE_VERSIONS, TRACE_KINDS  # noqa: F401


# ---------------------------------------------------------------------------------------------------
# Metadata
# ---------------------------------------------------------------------------------------------------


class CommonMeta(TypedDict, total=False):
    """Keys every run's metadata has (finish_meta checks them); kind-specific keys are listed per parser."""

    source_format: str  # "ncu-rep", "csv-raw", "csv-details", "kineto", "nsys", "bench"
    gpu_name: str | None  # the GPU as the file names it (None when it names none)
    item_count: int  # launches (ncu), kernels (traces) or results (bench)
    # problems the file has that do not stop its analysis (shown with the run)
    warnings: list[str]
    # what the file's format / version does not provide, with the consequence
    lacks: list[str]
    # the GPU given with --gpu (kept in the store's manifest, applied on read)
    gpu_override: str | None


class NcuMeta(CommonMeta, total=False):
    cc: str | None
    # where gpu_name comes from ("device attributes", "NUMA Affinity section")
    gpu_name_source: str | None
    sm_count: int | None  # device attribute or "# SMs" (launch__sm_count)
    # device attribute memory_clock_rate, or the measured DRAM frequency
    memory_clock_hz: float | None
    lacks: list[str]  # what this export does not provide, each with its consequence
    device_attributes: dict  # ncu device__attribute_* without the prefix
    kernel_count: int
    metric_count: int


class TraceMeta(CommonMeta, total=False):
    trace_name: str
    ranks: list[int]
    devices: list[dict]  # per device: name, cc, sm_count, ... as the trace gives them
    # gpu_ops, kernels, kernels_with_launch, memcpy, memset, api_calls, cpu_ops, nvtx
    counts: dict
    window_ns: list[int]
    clock: str


class BenchMeta(CommonMeta, total=False):
    gpu_uuid: str | None
    gpu: dict
    versions: dict
    failures: list[dict]
    partial: bool
    result_count: int
    ceiling_count: int


def finish_meta(kind: str, meta: dict) -> dict:
    """Check the common keys of a parser's metadata (a missing one is a parser bug) and fill the optional ones."""
    if kind not in TABLE_VERSIONS:
        raise AssertionError(f"unknown run kind {kind!r}")
    for key in ("source_format", "item_count"):
        if key not in meta:
            raise AssertionError(f"{kind} parser left out meta[{key!r}]")
    meta["item_count"] = int(meta["item_count"])
    meta.setdefault("gpu_name", None)
    meta.setdefault("warnings", [])
    meta.setdefault("lacks", [])
    return meta


@dataclass
class Parsed:
    """A parsed artifact: its kind, its normalized tables (polars, base units) and its metadata.
    partial_rows: the tables a reader read only part of (`kernelscope analyze` reads the metrics its
    analysis uses), each with the rows the whole table has (for collectors.validate's bounds); such
    a Parsed is analysed, never stored."""

    kind: str
    tables: dict[str, pl.DataFrame]
    meta: dict = field(default_factory=dict)
    partial_rows: dict[str, int] = field(default_factory=dict)

    def table(self, name: str) -> pl.DataFrame:
        return self.tables[name]


@dataclass(frozen=True)
class RunInfo:
    """What a listing shows of a stored run (`kernelscope runs`, the Runs page): the same fields for every kind."""

    run_id: str
    kind: str
    source_name: str
    size_bytes: int
    created: float
    gpu_name: str | None
    gpu_uuid: str | None
    item_count: int | None
    item_label: str
    warnings: tuple[str, ...]


# ---------------------------------------------------------------------------------------------------
# Nsight Compute: the kernels table (one row per profiled launch) and every metric in long form
# ---------------------------------------------------------------------------------------------------

#: column of the kernels table -> the ncu metric it holds (values in base units)
NCU_METRIC_COLUMNS: dict[str, str] = {
    "duration_ns": "gpu__time_duration.sum",
    "dram_read_bytes": "dram__bytes_read.sum",
    "dram_write_bytes": "dram__bytes_write.sum",
    "dram_throughput_pct": "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
    "dram_peak_bytes_per_cycle": "dram__bytes.sum.peak_sustained",
    "dram_clock_hz": "dram__cycles_elapsed.avg.per_second",
    "sm_clock_hz": "gpc__cycles_elapsed.avg.per_second",
    "sm_throughput_pct": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "l2_sectors": "lts__t_sectors.sum",
    "l2_read_sectors_from_l1": "lts__t_sectors_srcunit_tex_op_read.sum",
    "l2_hit_rate_pct": "lts__t_sector_hit_rate.pct",
    "l1_hit_rate_pct": "l1tex__t_sector_hit_rate.pct",
    "registers_per_thread": "launch__registers_per_thread",
    "block_size": "launch__block_size",
    "grid_size": "launch__grid_size",
    "smem_static_bytes": "launch__shared_mem_per_block_static",
    "smem_dynamic_bytes": "launch__shared_mem_per_block_dynamic",
    "smem_driver_bytes": "launch__shared_mem_per_block_driver",
    "smem_config_bytes": "launch__shared_mem_config_size",
    "barrier_count": "launch__barrier_count",
    "waves_per_sm": "launch__waves_per_multiprocessor",
    "achieved_occupancy_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "theoretical_occupancy_pct": "sm__maximum_warps_per_active_cycle_pct",
    "ncu_limit_registers_blocks": "launch__occupancy_limit_registers",
    "ncu_limit_shared_mem_blocks": "launch__occupancy_limit_shared_mem",
    "ncu_limit_warps_blocks": "launch__occupancy_limit_warps",
    "ncu_limit_blocks_blocks": "launch__occupancy_limit_blocks",
    "ncu_limit_barriers_blocks": "launch__occupancy_limit_barriers",
    "smem_ld_wavefronts": "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
    "smem_ld_bank_conflicts": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "smem_st_wavefronts": "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
    "smem_st_bank_conflicts": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
    "smem_ld_requests": "smsp__sass_inst_executed_op_shared_ld.sum",
    "smem_st_requests": "smsp__sass_inst_executed_op_shared_st.sum",
    "smem_ldsm_requests": "smsp__inst_executed_op_ldsm.sum",
    "global_ld_sectors": "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
    "global_ld_requests": "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
    "global_st_sectors": "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
    "global_st_requests": "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
    "global_ld_bytes_per_sector": "smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.ratio",
    "global_st_bytes_per_sector": "smsp__sass_average_data_bytes_per_sector_mem_global_op_st.ratio",
    "fadd_per_cycle": "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum.per_cycle_elapsed",
    "fmul_per_cycle": "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum.per_cycle_elapsed",
    "ffma_per_cycle": "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum.per_cycle_elapsed",
    "smsp_clock_hz": "smsp__cycles_elapsed.avg.per_second",
    # tensor-core FLOP by source type ("ops" are FLOP: a cuBLAS BF16 4096^3 matmul counts exactly 2
    # x 4096^3, sample_traces/h200/tensor_kernels); FP8 counted dense (sparsity off)
    "tensor_flop_bf16": "sm__ops_path_tensor_src_bf16_dst_fp32.sum",
    "tensor_flop_fp16": "sm__ops_path_tensor_src_fp16.sum",
    "tensor_flop_tf32": "sm__ops_path_tensor_src_tf32_dst_fp32.sum",
    "tensor_flop_fp8": "sm__ops_path_tensor_src_fp8_sparsity_off.sum",
    "tensor_flop_fp64": "sm__ops_path_tensor_src_fp64.sum",
    # warp instructions (the instruction roofline) and the L2's peak (the hierarchical roofline's L2
    # roof)
    "inst_executed": "smsp__inst_executed.sum",
    "l2_peak_bytes_per_cycle": "derived__lts__lts2xbar_bytes.sum.peak_sustained",
    "l2_clock_hz": "lts__cycles_elapsed.avg.per_second",
}
#: older ncu names of the same metrics (read when the newer one is absent): ncu 2019.x-2020.1
#: reports name the duration and the DRAM bytes without rollup suffixes (gpu__time_duration,
#: dram__read_bytes, dram__write_bytes; tests/corpus/pmkid-brute-force); what a version truly lacks
#: stays missing
NCU_ALTERNATE_METRICS = {
    "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed": (
        "dram__throughput.avg.pct_of_peak_sustained_elapsed",
        "fbpa__sol_pct",
    ),
    "sm__warps_active.avg.pct_of_peak_sustained_active": (
        "sm__active_warps_avg_per_active_cycle_pct",
    ),
    "dram__cycles_elapsed.avg.per_second": ("dram__frequency",),
    "gpc__cycles_elapsed.avg.per_second": ("gpc__frequency",),
    "lts__t_sector_hit_rate.pct": ("lts__request_total_sectors_hitrate_pct",),
    "gpu__time_duration.sum": ("gpu__time_duration",),
    "dram__bytes_read.sum": ("dram__read_bytes",),
    "dram__bytes_write.sum": ("dram__write_bytes",),
}

KERNEL_SCHEMA = pl.Schema(
    {
        "id": pl.Int64,  # ncu's launch ID within the report
        # canonical name (collectors.kernel_names): the same from .ncu-rep and CSVs
        "kernel_name": pl.String,
        "raw_name": pl.String,  # the name as the file gives it (demangled)
        # display label: the function name, or the canonical name where that is
        "short_name": pl.String,
        # shared by two kernels of the run
        "kernel_key": pl.String,  # stable key: hash of canonical name + launch configuration
        "process_id": pl.Int64,
        "process_name": pl.String,
        "device": pl.Int64,
        "context": pl.Int64,
        "stream": pl.Int64,
        "cc": pl.String,
        # the NVTX ranges the launch was profiled in (ncu --nvtx; .ncu-rep only)
        "nvtx_range": pl.String,
        "block_x": pl.Int64,
        "block_y": pl.Int64,
        "block_z": pl.Int64,
        "grid_x": pl.Int64,
        "grid_y": pl.Int64,
        "grid_z": pl.Int64,
    }
    | {col: pl.Float64 for col in NCU_METRIC_COLUMNS}
)
#: every metric of every launch, long form: metric names, units and texts are categorical (a few
#: thousand distinct names, tens of units), values numeric; 10,000 launches x 2,227 metrics take ~24
#: bytes per value
METRIC_SCHEMA = pl.Schema(
    {
        "id": pl.Int32,
        "metric": pl.Categorical(),
        "value": pl.Float64,
        "text": pl.Categorical(),
        "unit": pl.Categorical(),
    }
)


def conform_metrics(df: pl.DataFrame) -> pl.DataFrame:
    """A metrics table in METRIC_SCHEMA's order and types (an Enum of metric names reads as Categorical)."""
    return df.select([pl.col(c).cast(t) for c, t in METRIC_SCHEMA.items()])


#: the Nsight Compute section that shows each metric (one row per metric name; a metric no section
#: names is absent): from the report's own sections, a details page's Section Name column, or for
#: the raw page ncu's label table
METRIC_SECTION_SCHEMA = pl.Schema({"metric": pl.String, "section": pl.String})
#: `.ncu-rep` only: the SASS of each profiled launch, one row per instruction address
#: (collectors.ncu_source)
SASS_SCHEMA = pl.Schema(
    {
        "id": pl.Int64,
        "address": pl.Int64,
        "offset": pl.Int64,
        "sass": pl.String,
        "file": pl.String,
        "line": pl.Int64,
    }
)  # file/line: null without nvcc -lineinfo
#: the Source Counters: every PC-correlated metric (inst_executed, smsp__pcsamp_*, ...) per launch
#: and address
SOURCE_METRIC_SCHEMA = pl.Schema(
    {"id": pl.Int64, "address": pl.Int64, "metric": pl.String, "value": pl.Float64}
)
#: CUDA source files the report holds (content empty unless recorded with ncu --import-source yes)
SOURCE_FILES_SCHEMA = pl.Schema({"file": pl.String, "content": pl.String})


# ---------------------------------------------------------------------------------------------------
# Timelines (PyTorch profiler and Nsight Systems): all times Int64 ns on the trace's own clock
# ---------------------------------------------------------------------------------------------------

GPU_OPS_SCHEMA = pl.Schema(
    {
        # Kineto: distributedInfo.rank (0 when absent); nsys: process index
        "rank": pl.Int32,
        "pid": pl.Int64,  # OS pid of the process that launched the op
        "device": pl.Int32,  # CUDA device ordinal as the process saw it
        "stream": pl.Int64,
        "kind": pl.String,  # "kernel" | "memcpy" | "memset"
        "name": pl.String,
        "start_ns": pl.Int64,
        "end_ns": pl.Int64,
        "duration_ns": pl.Int64,
        "correlation": pl.Int64,  # CUPTI correlation id (per process)
        # name of the API call with the same correlation id (null: not in trace)
        "launch_api": pl.String,
        "api_tid": pl.Int64,
        "api_start_ns": pl.Int64,
        "api_end_ns": pl.Int64,
        "api_duration_ns": pl.Int64,
        "launch_delay_ns": pl.Int64,  # max(0, start_ns - api_end_ns)
        "queue_ns": pl.Int64,  # start_ns - api_end_ns, null when negative
        "graph_launch_correlation": pl.Int64,
        "external_id": pl.Int64,  # Kineto "External id" (op id of the issuing CPU op)
        "op_name": pl.String,  # the CPU op (aten::mm ...) joined by External id
        "grid_x": pl.Int32,
        "grid_y": pl.Int32,
        "grid_z": pl.Int32,
        "block_x": pl.Int32,
        "block_y": pl.Int32,
        "block_z": pl.Int32,
        "registers_per_thread": pl.Int32,
        "shared_memory_bytes": pl.Int64,  # static + dynamic shared memory per block
        "bytes": pl.Int64,  # memcpy / memset size
        "copy_kind": pl.String,  # HtoD, DtoH, DtoD, HtoH, PtoP ... (memcpy only)
        # collective kernels (NCCL / RCCL) as PyTorch >= 2.1 records them in the kernel's args; null
        # when not recorded
        "collective": pl.String,  # 'Collective name': allreduce, _allgather_base, send, ...
        "comm_in_nelems": pl.Int64,  # 'In msg nelems'
        "comm_out_nelems": pl.Int64,  # 'Out msg nelems'
        "comm_dtype": pl.String,  # 'dtype': Float, BFloat16, ...
        "comm_group_size": pl.Int64,  # 'Group size': ranks in the process group
    }
)

#: the columns a parser provides before collectors.launches.link_launches adds the launch / op
#: columns
GPU_RAW_COLUMNS = (
    "rank",
    "pid",
    "device",
    "stream",
    "kind",
    "name",
    "start_ns",
    "end_ns",
    "duration_ns",
    "correlation",
    "external_id",
    "grid_x",
    "grid_y",
    "grid_z",
    "block_x",
    "block_y",
    "block_z",
    "registers_per_thread",
    "shared_memory_bytes",
    "bytes",
    "copy_kind",
    "collective",
    "comm_in_nelems",
    "comm_out_nelems",
    "comm_dtype",
    "comm_group_size",
)
GPU_RAW_SCHEMA = pl.Schema({c: GPU_OPS_SCHEMA[c] for c in GPU_RAW_COLUMNS})

API_CALLS_SCHEMA = pl.Schema(
    {
        "rank": pl.Int32,
        "pid": pl.Int64,
        "tid": pl.Int64,
        "name": pl.String,  # without nsys' _vNNNN suffix
        "kind": pl.String,  # launch | graph_launch | memcpy | memset | sync | other
        "blocking": pl.Boolean,  # the host waits for GPU work (synchronize calls, cudaMemcpy)
        "start_ns": pl.Int64,
        "end_ns": pl.Int64,
        "duration_ns": pl.Int64,
        "correlation": pl.Int64,
        "external_id": pl.Int64,
    }
)

CPU_OPS_SCHEMA = pl.Schema(
    {
        "rank": pl.Int32,
        "pid": pl.Int64,
        "tid": pl.Int64,
        "name": pl.String,
        "start_ns": pl.Int64,
        "end_ns": pl.Int64,
        "duration_ns": pl.Int64,
        "external_id": pl.Int64,
    }
)

NVTX_SCHEMA = pl.Schema(
    {
        "rank": pl.Int32,
        "pid": pl.Int64,
        "tid": pl.Int64,
        "name": pl.String,
        "start_ns": pl.Int64,
        "end_ns": pl.Int64,
        "duration_ns": pl.Int64,
    }
)

TIMELINE_SCHEMAS: dict[str, pl.Schema] = {
    "gpu_ops": GPU_OPS_SCHEMA,
    "api_calls": API_CALLS_SCHEMA,
    "cpu_ops": CPU_OPS_SCHEMA,
    "nvtx": NVTX_SCHEMA,
}


# ---------------------------------------------------------------------------------------------------
# Bench results (kernelscope bench): measured ceilings and case results, one row per record
# ---------------------------------------------------------------------------------------------------

BENCH_SCHEMA = pl.Schema(
    {
        "case": pl.String,
        "metric": pl.String,
        "value": pl.Float64,
        "unit": pl.String,
        "params": pl.String,
        "cv": pl.Float64,
        "n": pl.Int64,
        "source": pl.String,
        "notes": pl.String,
        "flags": pl.List(pl.String),
    }
)


def conform(
    df: pl.DataFrame, schema: pl.Schema, table: str, *, keep_categorical: bool = False
) -> pl.DataFrame:
    """The table's columns in schema order and types; raises ValueError naming a missing column.
    keep_categorical: leave Categorical string columns as they are (intermediate frames: repeated
    kernel names then cost one copy each until the final conform)."""
    missing = [c for c in schema if c not in df.columns]
    if missing:
        raise ValueError(f"table {table!r} lacks columns {missing}")
    return df.select(
        [
            pl.col(c)
            if keep_categorical and df.schema[c] == pl.Categorical and t == pl.String
            else pl.col(c).cast(t, strict=True)
            for c, t in schema.items()
        ]
    )


def sorted_by(df: pl.DataFrame, column: str) -> pl.DataFrame:
    """df sorted by one column; df itself when it already is (a trace's events usually come in time
    order), so no copy of the table is made."""
    if df.height < 2 or df[column].is_sorted():
        return df
    return df.sort(column)


def empty(schema: pl.Schema) -> pl.DataFrame:
    return pl.DataFrame(schema=schema)
