"""The catalog of an Nsight Compute launch's quantities: one row per quantity, the one place its
label, unit, display format, formula, column groups and the counters it needs are declared.

`key` is the column of analyzers.ncu_run.NcuAnalysis.kernels and the key of `kernelscope analyze
--format json`; `base_unit` is that column's unit (the JSON `units`); `unit` and `scale` are how a
person reads it (shown = value × scale, in `unit`; `units.convert(1, base_unit, unit) == scale`);
the Kernels page's columns (its URL `?sort=` values) are the same keys, holding the same values:
its table scales what it shows (`scale`), so a column never holds one unit under another's name; the
one exception is `kernel`, the name shortened for the table (`page_key`). URLs shared before carry
the old page keys (`?sort=duration_us`): OLD_PAGE_KEYS reads them. The command line's table, the
JSON units, the page's columns and groups, the HTML export and the missing-counter advice all read
this table. Adding a quantity: its schema column, its formula in analyzers/, one row here.
TIMELINE_QUANTITIES does the same for a trace's statistics per device (the Timeline page's tables).
"""

from __future__ import annotations

from dataclasses import dataclass

from analyzers.definitions import DEFINITIONS

#: how to collect what a quantity needs (the Nsight Compute options)
FULL_MWA_CHART = "--set full (or --section MemoryWorkloadAnalysis_Chart)"
FULL_MWA_TABLES = "--set full (or --section MemoryWorkloadAnalysis_Tables)"
OCCUPANCY = "--section Occupancy (in every set)"
TENSOR_ROOFLINE = "--set full (or --section SpeedOfLight_HierarchicalTensorRooflineChart)"


@dataclass(frozen=True)
class Quantity:
    key: str  # analysis column = JSON key
    label: str  # what a person reads: page column, CLI header, export
    unit: str = ""  # the unit shown (analyzers.units spelling)
    base_unit: str = ""  # the analysis column's unit (JSON `units`)
    scale: float | None = None  # shown = value × scale
    fmt: str | None = None  # printf format on the page and in the export
    help: str = ""  # formula and source
    page_key: str | None = None  # the page's column, only where it shows another value (`kernel`)
    text: bool = False  # a word, not a number
    needs: tuple[str, ...] = ()  # the ncu counters it needs
    collect_with: str | None = None  # the ncu option that collects them
    missing_label: str | None = None  # how the "missing" advice names it
    on_page: bool = True  # a column of the Kernels page

    @property
    def column(self) -> str:
        return self.page_key or self.key

    @property
    def header(self) -> str:
        return f"{self.label} [{self.unit}]" if self.unit else self.label


_DRAM = ("dram__bytes_read.sum", "dram__bytes_write.sum", "gpu__time_duration.sum")
_SMEM = (
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
)
_WAYS = "wavefronts / (wavefronts − conflicts)"

QUANTITIES: tuple[Quantity, ...] = (
    Quantity("id", "launch id", help="the launch's position in the report (ncu's ID)"),
    Quantity(
        "name",
        "kernel",
        text=True,
        page_key="kernel",
        help="function name with its template arguments (hover for the full demangled name)",
    ),
    Quantity("raw_name", "name as in the file", text=True, on_page=False),
    Quantity(
        "duration_ns",
        "duration",
        "µs",
        "ns",
        1e-3,
        "%.2f",
        "gpu__time_duration.sum (ncu counter)",
    ),
    Quantity(
        "dram_read_bytes",
        "DRAM read",
        "B",
        "B",
        help="dram__bytes_read.sum (ncu counter)",
        on_page=False,
    ),
    Quantity(
        "dram_write_bytes",
        "DRAM written",
        "B",
        "B",
        help="dram__bytes_write.sum (ncu counter)",
        on_page=False,
    ),
    Quantity(
        "dram_bandwidth_gbps",
        "DRAM",
        "GB/s",
        "GB/s",
        1,
        "%.0f",
        "(dram__bytes_read.sum + dram__bytes_write.sum) / duration",
        needs=_DRAM,
        collect_with=FULL_MWA_CHART,
        missing_label="DRAM traffic and bandwidth",
    ),
    Quantity(
        "dram_peak_fraction",
        "DRAM of spec",
        "%",
        "fraction",
        100,
        "%.1f",
        "achieved / the spec-sheet peak",
    ),
    Quantity(
        "dram_measured_fraction",
        "DRAM of measured",
        "%",
        "fraction",
        100,
        "%.1f",
        "achieved / the measured copy ceiling (bench run)",
    ),
    Quantity(
        "achieved_occupancy_pct",
        "occ. achieved",
        "%",
        "%",
        1,
        "%.1f",
        "sm__warps_active.avg.pct_of_peak_sustained_active",
        needs=("sm__warps_active.avg.pct_of_peak_sustained_active",),
        collect_with=OCCUPANCY,
        missing_label="achieved occupancy",
    ),
    Quantity(
        "theoretical_occupancy_pct",
        "occ. ncu",
        "%",
        "%",
        1,
        "%.1f",
        "theoretical occupancy by Nsight Compute: sm__maximum_warps_per_active_cycle_pct",
        needs=("sm__maximum_warps_per_active_cycle_pct",),
        collect_with=OCCUPANCY,
        missing_label="ncu's theoretical occupancy",
    ),
    Quantity(
        "predicted_occupancy_pct",
        "occ. ours",
        "%",
        "%",
        1,
        "%.1f",
        "theoretical occupancy by the CUDA occupancy rules, analyzers/occupancy.py",
    ),
    Quantity(
        "occupancy_limiter",
        "limiter (ours)",
        text=True,
        help="the resource that limits resident blocks (analyzers/occupancy.py)",
    ),
    Quantity(
        "smem_wavefronts",
        "shared wavefronts",
        "count",
        "count",
        on_page=False,
        help="l1tex__data_pipe_lsu_wavefronts_mem_shared_op_{ld,st}.sum",
    ),
    Quantity(
        "smem_bank_conflicts",
        "shared bank conflicts",
        "count",
        "count",
        on_page=False,
        help="l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_{ld,st}.sum",
    ),
    Quantity(
        "smem_conflict_degree",
        "bank ways, all",
        "ways",
        "ways",
        1,
        "%.2f",
        _WAYS,
        needs=_SMEM,
        collect_with=FULL_MWA_TABLES,
        missing_label="shared-memory bank conflicts",
    ),
    Quantity("smem_ld_conflict_degree", "bank ways, loads", "ways", "ways", 1, "%.2f", _WAYS),
    Quantity("smem_st_conflict_degree", "bank ways, stores", "ways", "ways", 1, "%.2f", _WAYS),
    Quantity(
        "global_ld_sectors_per_request",
        "ld sectors/req",
        "sectors",
        "sectors",
        1,
        "%.1f",
        "l1tex__t_sectors / l1tex__t_requests (global loads)",
        needs=(
            "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
            "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
        ),
        collect_with=FULL_MWA_TABLES,
        missing_label="global-load coalescing (sectors per request)",
    ),
    Quantity(
        "global_ld_ideal_sectors_per_request",
        "ideal sectors/request",
        "sectors",
        "sectors",
        1,
        "%.0f",
        "from the bytes used per sector",
    ),
    Quantity(
        "global_ld_coalescing_ratio",
        "coalescing ratio",
        "×",
        "×",
        1,
        "%.2f",
        "sectors per request / ideal (1 = coalesced)",
    ),
    Quantity(
        "l2_read_from_l1_bytes",
        "L2 reads from L1",
        "B",
        "B",
        on_page=False,
        help="lts__t_sectors_srcunit_tex_op_read.sum × 32 B",
        needs=("lts__t_sectors_srcunit_tex_op_read.sum",),
        collect_with=FULL_MWA_TABLES,
        missing_label="L2 reads from L1",
    ),
    Quantity("l2_bytes", "L2 traffic", "B", "B", on_page=False, help="lts__t_sectors.sum × 32 B"),
    Quantity(
        "flop_fp32",
        "FP32 work",
        "FLOP",
        "FLOP",
        on_page=False,
        help="fadd + fmul + 2·ffma thread instructions",
    ),
    Quantity(
        "fp32_tflops",
        "FP32",
        "TFLOP/s",
        "TFLOP/s",
        1,
        "%.2f",
        "(fadd + fmul + 2·ffma) thread instructions / duration",
    ),
    Quantity(
        "flop_tensor",
        "tensor work",
        "FLOP",
        "FLOP",
        on_page=False,
        help="sm__ops_path_tensor_src_{bf16,fp16,tf32,fp8,fp64}.sum",
        needs=(
            "sm__ops_path_tensor_src_bf16_dst_fp32.sum",
            "sm__ops_path_tensor_src_fp16.sum",
            "sm__ops_path_tensor_src_tf32_dst_fp32.sum",
        ),
        collect_with=TENSOR_ROOFLINE,
        missing_label="tensor-core FLOP",
    ),
    Quantity(
        "tensor_tflops",
        "tensor",
        "TFLOP/s",
        "TFLOP/s",
        1,
        "%.1f",
        "sm__ops_path_tensor_src_{bf16,fp16,tf32,fp8,fp64}.sum / duration",
    ),
    Quantity(
        "tensor_type", "tensor type", text=True, help="the source type with the most tensor FLOP"
    ),
    Quantity(
        "tensor_peak_fraction",
        "tensor of spec",
        "%",
        "fraction",
        100,
        "%.1f",
        "tensor FLOP / duration / the spec dense BF16 peak × type rate (TF32 ½, FP8 2)",
    ),
    Quantity(
        "arithmetic_intensity",
        "arith. intensity",
        "FLOP/B",
        "FLOP/B",
        1,
        "%.2f",
        "(FP32 + tensor FLOP) / DRAM bytes",
    ),
    Quantity(
        "top_finding",
        "biggest finding",
        text=True,
        help="analyzers/findings.py; details in the launch's view",
    ),
    Quantity("top_finding_key", "biggest finding's rule", text=True, on_page=False),
    Quantity(
        "lost_ns",
        "est. lost",
        "µs",
        "ns",
        1e-3,
        "%.1f",
        "time the biggest finding is estimated to cost",
    ),
    Quantity(
        "lost_share",
        "est. lost, share",
        "%",
        "fraction",
        100,
        on_page=False,
        help="the estimated loss / the launch's duration",
    ),
    Quantity(
        "registers_per_thread",
        "registers/thread",
        "registers",
        "registers",
        1,
        help="launch__registers_per_thread",
    ),
    Quantity("block_size", "block", "threads", "threads", 1, help="launch__block_size"),
    Quantity("grid_size", "grid", "blocks", "blocks", 1, help="launch__grid_size"),
    Quantity(
        "sm_throughput_pct",
        "SM throughput",
        "%",
        "%",
        1,
        "%.0f",
        "sm__throughput.avg.pct_of_peak_sustained_elapsed: % of peak, Nsight Compute's Speed of "
        "Light, compute side (the busiest SM pipeline or unit)",
    ),
    Quantity(
        "dram_throughput_pct",
        "DRAM throughput",
        "%",
        "%",
        1,
        "%.0f",
        "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed: % of peak, Nsight Compute's Speed "
        "of Light, DRAM side",
    ),
    Quantity(
        "flags",
        "implausible",
        text=True,
        on_page=False,
        help="what is physically implausible for this GPU (analyzers.plausibility)",
    ),
)

BY_KEY: dict[str, Quantity] = {q.key: q for q in QUANTITIES}
#: the Kernels page's keys before they were the analysis's (URLs shared then still open): old -> new
OLD_PAGE_KEYS: dict[str, str] = {
    "duration_us": "duration_ns",
    "dram_gbps": "dram_bandwidth_gbps",
    "dram_pct_spec": "dram_peak_fraction",
    "dram_pct_measured": "dram_measured_fraction",
    "tensor_pct_spec": "tensor_peak_fraction",
    "ai": "arithmetic_intensity",
    "lost_us": "lost_ns",
    "sm_pct": "sm_throughput_pct",
    "mem_pct": "dram_throughput_pct",
    "total_us": "total_ns",
    "share_pct": "share",
    "pred_us": "model_pred_ns",
    "win_us": "model_win_ns",
}
BY_COLUMN: dict[str, Quantity] = {q.column: q for q in QUANTITIES}

#: the per-launch JSON of `kernelscope analyze --format json`: every quantity, in catalog order
JSON_KEYS: tuple[str, ...] = tuple(q.key for q in QUANTITIES)
#: the command line's table of an Nsight Compute run, in order
CLI_KEYS: tuple[str, ...] = (
    "id",
    "name",
    "duration_ns",
    "dram_bandwidth_gbps",
    "dram_peak_fraction",
    "achieved_occupancy_pct",
    "theoretical_occupancy_pct",
    "predicted_occupancy_pct",
    "occupancy_limiter",
    "smem_conflict_degree",
    "global_ld_sectors_per_request",
    "top_finding",
    "lost_ns",
)


def json_units() -> dict[str, str]:
    """key -> the analysis column's unit: the JSON's `units`."""
    return {q.key: q.base_unit for q in QUANTITIES}


def cli_columns() -> list[tuple[str, str, float | None]]:
    """(key, header, scale) of the command line's table."""
    return [(k, BY_KEY[k].header, BY_KEY[k].scale) for k in CLI_KEYS]


def requirements() -> dict[str, tuple[tuple[str, ...], str]]:
    """key -> (the ncu counters it needs, the option that collects them), for the quantities that name them."""
    return {q.key: (q.needs, q.collect_with) for q in QUANTITIES if q.needs and q.collect_with}


def missing_label(key: str) -> str:
    q = BY_KEY.get(key)
    return (q.missing_label or q.label) if q else key


# ---- the timeline's statistics per device (analyzers.timeline.summarize: TimelineSummary.devices)
#: the Timeline page's device tables read these rows: label, unit and scale, format and the
#: definition (analyzers.definitions), under the summary frame's own keys
TIMELINE_QUANTITIES: tuple[Quantity, ...] = (
    Quantity("rank", "rank"),
    Quantity("device", "device"),
    Quantity("verdict", "launch-bound?", text=True, help=DEFINITIONS["launch_bound"]),
    Quantity("kernel_count", "kernels", help="kernels on this device in the trace"),
    Quantity(
        "kernels_with_launch",
        "kernels with their launch call",
        help=DEFINITIONS["launch_calls"],
    ),
    Quantity("busy_ns", "busy", "ms", "ns", 1e-6, "%.3f", DEFINITIONS["gpu_busy"]),
    Quantity(
        "window_ns",
        "GPU window",
        "ms",
        "ns",
        1e-6,
        "%.3f",
        "last GPU op end − first GPU op start on this device",
    ),
    Quantity(
        "idle_fraction",
        "idle of window",
        "%",
        "fraction",
        100,
        "%.1f",
        DEFINITIONS["gpu_idle_fraction"],
    ),
    Quantity(
        "short_kernel_share",
        "launch calls longer than their GPU work",
        "%",
        "fraction",
        100,
        "%.1f",
        DEFINITIONS["launch_calls"],
    ),
    Quantity(
        "host_wait_fraction",
        "waiting for the host, of window",
        "%",
        "fraction",
        100,
        "%.1f",
        DEFINITIONS["device_idle"],
    ),
    Quantity("kernels_per_s", "kernels/s", fmt="%.0f", help="kernels / GPU window"),
    Quantity(
        "launch_delay_median_ns", "median", "µs", "ns", 1e-3, "%.2f", DEFINITIONS["launch_delay"]
    ),
    Quantity("launch_delay_p90_ns", "p90", "µs", "ns", 1e-3, "%.2f", DEFINITIONS["launch_delay"]),
    Quantity("launch_delay_max_ns", "max", "µs", "ns", 1e-3, "%.1f", DEFINITIONS["launch_delay"]),
    Quantity("queue_count", "with queue time", help=DEFINITIONS["queue"]),
    Quantity("queue_median_ns", "queue median", "µs", "ns", 1e-3, "%.2f", DEFINITIONS["queue"]),
    Quantity("delay_outliers", "delay > 100 µs", help="HTA's launch_delay_cutoff"),
    Quantity("op_count", "GPU ops", help="kernels, copies and memsets on this device"),
    Quantity("launch_call_count", "launch calls", help=DEFINITIONS["launch_calls"]),
    Quantity("graph_launch_count", "graph launches", help=DEFINITIONS["launch_calls"]),
    Quantity("graph_kernel_count", "graph kernels", help=DEFINITIONS["launch_calls"]),
    Quantity(
        "launch_latency_median_ns",
        "launch latency median",
        "µs",
        "ns",
        1e-3,
        "%.2f",
        DEFINITIONS["launch_calls"],
    ),
    Quantity(
        "launch_latency_p90_ns",
        "launch latency p90",
        "µs",
        "ns",
        1e-3,
        "%.2f",
        DEFINITIONS["launch_calls"],
    ),
    Quantity(
        "queued_share",
        "queued behind GPU work",
        "%",
        "fraction",
        100,
        "%.1f",
        DEFINITIONS["launch_calls"],
    ),
    Quantity(
        "host_wait_ns", "waiting for the host", "ms", "ns", 1e-6, "%.3f", DEFINITIONS["device_idle"]
    ),
    Quantity(
        "kernel_wait_ns",
        "between kernels",
        "ms",
        "ns",
        1e-6,
        "%.3f",
        DEFINITIONS["device_idle"],
    ),
    Quantity("other_idle_ns", "other idle", "ms", "ns", 1e-6, "%.3f", DEFINITIONS["device_idle"]),
    Quantity("bound", "bound by", text=True, help="analyzers.bound.bound_verdict"),
    Quantity("bound_evidence", "evidence", text=True, help="analyzers.bound.bound_verdict"),
    Quantity(
        "run_ns",
        "rank's run",
        "ms",
        "ns",
        1e-6,
        "%.3f",
        "first to last host call or GPU op of the rank (analyzers.bound.run_spans)",
    ),
)
TIMELINE_BY_KEY: dict[str, Quantity] = {q.key: q for q in TIMELINE_QUANTITIES}

#: `kernelscope analyze TRACE --format json`, `summary.devices`: (JSON key, the summary column of
#: TIMELINE_QUANTITIES it holds, how): "int" a count or ns as an integer, "int0" the same with 0 for
#: none, "frac" a fraction rounded to 6 digits, "us" ns shown in µs (3 digits), "raw" as it is. The
#: keys are those scripts already read (`gpu_busy_ns`, `launch_delay_p90_us`); their units
#: (`trace_json_units`) come from the catalog.
TRACE_DEVICE_JSON: tuple[tuple[str, str, str], ...] = (
    ("rank", "rank", "raw"),
    ("device", "device", "raw"),
    ("kernel_count", "kernel_count", "int"),
    ("kernels_with_launch", "kernels_with_launch", "int"),
    ("gpu_op_count", "op_count", "int"),
    ("gpu_busy_ns", "busy_ns", "int"),
    ("gpu_window_ns", "window_ns", "int"),
    ("gpu_idle_fraction", "idle_fraction", "frac"),
    ("launch_delay_median_us", "launch_delay_median_ns", "us"),
    ("launch_delay_p90_us", "launch_delay_p90_ns", "us"),
    ("launch_call_count", "launch_call_count", "int"),
    ("graph_launch_count", "graph_launch_count", "int"),
    ("graph_kernel_count", "graph_kernel_count", "int"),
    ("launch_latency_median_us", "launch_latency_median_ns", "us"),
    ("launch_latency_p90_us", "launch_latency_p90_ns", "us"),
    ("queued_share", "queued_share", "frac"),
    ("short_call_share", "short_kernel_share", "frac"),
    ("host_wait_ns", "host_wait_ns", "int0"),
    ("kernel_wait_ns", "kernel_wait_ns", "int0"),
    ("other_idle_ns", "other_idle_ns", "int0"),
    ("host_wait_fraction", "host_wait_fraction", "frac"),
    ("launch_verdict", "verdict", "raw"),
    ("bound", "bound", "raw"),
    ("bound_evidence", "bound_evidence", "raw"),
    ("run_ns", "run_ns", "raw"),
)
#: the whole run's keys in `summary` that hold a device statistic summed or taken over the devices
#: (analyzers.timeline.summarize: RUN_SUMMARY_KEYS), with the device column whose unit they share
TRACE_RUN_JSON: dict[str, str] = {
    "kernel_count": "kernel_count",
    "kernels_with_launch": "kernels_with_launch",
    "gpu_op_count": "op_count",
    "gpu_busy_ns": "busy_ns",
    "gpu_window_ns": "window_ns",
    "gpu_idle_fraction": "idle_fraction",
    "launch_delay_median_us": "launch_delay_median_ns",
    "launch_delay_p90_us": "launch_delay_p90_ns",
    "launch_call_count": "launch_call_count",
    "graph_launch_count": "graph_launch_count",
    "graph_kernel_count": "graph_kernel_count",
    "launch_latency_median_us": "launch_latency_median_ns",
    "delay_outliers": "delay_outliers",
    "run_ns": "run_ns",
}
#: the other keys of the run's `summary`, which no device column holds: their units
TRACE_RUN_OWN_UNITS: dict[str, str] = {
    "memcpy_count": "count",
    "memset_count": "count",
    "wall_window_ns": "ns",
    "device_count": "count",
    "launch_floor_ns": "ns",
    "step_median_ns": "ns",
    "step_p90_ns": "ns",
    "gpu_name": "text",
    "slowest_rank": "",
    "abstains": "text",
}


def _json_unit(json_key: str, column: str) -> str:
    q = TIMELINE_BY_KEY[column]
    if q.text:
        return "text"
    if json_key.endswith("_us"):
        return "µs"
    return q.base_unit or ("count" if column not in ("rank", "device") else "")


def trace_json_units() -> dict[str, dict[str, str]]:
    """The JSON `units` of a trace's report: for `summary` and `summary.devices` / `devices`, each
    key's unit (analyzers.units spelling), from TIMELINE_QUANTITIES."""
    run = {k: _json_unit(k, c) for k, c in TRACE_RUN_JSON.items()}
    run.update(TRACE_RUN_OWN_UNITS)
    return {
        "summary": run,
        "devices": {k: _json_unit(k, c) for k, c, _ in TRACE_DEVICE_JSON},
        "kernels": dict(TRACE_KERNEL_UNITS),
    }


#: `kernels` of a trace's report, one row per kernel (collectors.schema.GPU_OPS_SCHEMA columns)
TRACE_KERNEL_UNITS: dict[str, str] = {
    "name": "text",
    "rank": "",
    "device": "",
    "stream": "",
    "start_ns": "ns",
    "end_ns": "ns",
    "duration_ns": "ns",
    "launch_api": "text",
    "correlation": "",
    "launch_delay_us": "µs",
    "queue_us": "µs",
    "op_name": "text",
    "graph_launch_correlation": "",
    "graph_position": "",
}
