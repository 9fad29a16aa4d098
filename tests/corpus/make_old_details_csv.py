"""Construct a details-page CSV in the layout of Nsight Compute 2019.5-2021.1 from a public report
of that era.

    python tests/corpus/make_old_details_csv.py REPORT OUT.csv     (needs NVIDIA's ncu_report module)

Why: no public details CSV of those versions with a license that allows redistribution was found.
One real export exists (AndrewXu22/optimal_unified_memory,
rodinia_3.1/cuda/cfd/kernel-level-measurement/nsight_cfd_097K.log, 2020, V100, no license file: not
redistributed); this script writes its layout with the numbers of
tests/corpus/physicell-fork/profile.nsight-cuprof-report.gz (Nsight Compute 2019.x/2020.1, V100,
BSD-3-Clause):

- header "ID","Process ID","Process Name","Host Name","Kernel Name","Kernel
  Time","Context","Stream","Section Name", "Metric Name","Metric Unit","Metric Value": no Block Size
  / Grid Size / Device / CC columns, no rule columns;
- sections "GPU Speed Of Light" (not yet "... Throughput"), "Launch Statistics", "Occupancy", with
  that era's labels ("Memory Frequency", "SOL FB", "Memory [%]", "SM [%]", "Duration") and units
  ("nsecond", "cycle/second", "%", "byte", "byte/block", "register/thread", "block", "warp");
- numbers without thousands separators, percentages with two decimals.
Identity columns the report does not carry (process id and name, host, kernel time) are left empty.
Only metrics
the report has are written. The values are the report's, converted to the unit written, so the test
can check that
the CSV and the report give the same durations.
"""

from __future__ import annotations

import csv
import gzip
import io
import os
import sys
import tempfile

HEADER = [
    "ID",
    "Process ID",
    "Process Name",
    "Host Name",
    "Kernel Name",
    "Kernel Time",
    "Context",
    "Stream",
    "Section Name",
    "Metric Name",
    "Metric Unit",
    "Metric Value",
]
# (section, label, unit written, metric, scale from the report's base unit, format)
ROWS = [
    (
        "GPU Speed Of Light",
        "Memory Frequency",
        "cycle/second",
        "dram__cycles_elapsed.avg.per_second",
        1,
        "{:.2f}",
    ),
    (
        "GPU Speed Of Light",
        "SOL FB",
        "%",
        "dram__throughput.avg.pct_of_peak_sustained_elapsed",
        1,
        "{:.2f}",
    ),
    ("GPU Speed Of Light", "Elapsed Cycles", "cycle", "gpc__cycles_elapsed.max", 1, "{:.0f}"),
    (
        "GPU Speed Of Light",
        "SM Frequency",
        "cycle/second",
        "gpc__cycles_elapsed.avg.per_second",
        1,
        "{:.2f}",
    ),
    (
        "GPU Speed Of Light",
        "Memory [%]",
        "%",
        "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
        1,
        "{:.2f}",
    ),
    ("GPU Speed Of Light", "Duration", "nsecond", "gpu__time_duration.sum", 1, "{:.0f}"),
    (
        "GPU Speed Of Light",
        "SOL L2",
        "%",
        "lts__throughput.avg.pct_of_peak_sustained_elapsed",
        1,
        "{:.2f}",
    ),
    ("GPU Speed Of Light", "SM Active Cycles", "cycle", "sm__cycles_active.avg", 1, "{:.2f}"),
    (
        "GPU Speed Of Light",
        "SM [%]",
        "%",
        "sm__throughput.avg.pct_of_peak_sustained_elapsed",
        1,
        "{:.2f}",
    ),
    (
        "GPU Speed Of Light",
        "SOL TEX",
        "%",
        "l1tex__throughput.avg.pct_of_peak_sustained_active",
        1,
        "{:.2f}",
    ),
    ("Launch Statistics", "Block Size", "", "launch__block_size", 1, "{:.0f}"),
    ("Launch Statistics", "Grid Size", "", "launch__grid_size", 1, "{:.0f}"),
    (
        "Launch Statistics",
        "Registers Per Thread",
        "register/thread",
        "launch__registers_per_thread",
        1,
        "{:.0f}",
    ),
    (
        "Launch Statistics",
        "Shared Memory Configuration Size",
        "byte",
        "launch__shared_mem_config_size",
        1,
        "{:.0f}",
    ),
    (
        "Launch Statistics",
        "Dynamic Shared Memory Per Block",
        "byte/block",
        "launch__shared_mem_per_block_dynamic",
        1,
        "{:.0f}",
    ),
    (
        "Launch Statistics",
        "Static Shared Memory Per Block",
        "byte/block",
        "launch__shared_mem_per_block_static",
        1,
        "{:.0f}",
    ),
    ("Launch Statistics", "Threads", "thread", "launch__thread_count", 1, "{:.0f}"),
    ("Launch Statistics", "Waves Per SM", "", "launch__waves_per_multiprocessor", 1, "{:.2f}"),
    ("Occupancy", "Block Limit SM", "block", "launch__occupancy_limit_blocks", 1, "{:.0f}"),
    (
        "Occupancy",
        "Block Limit Registers",
        "block",
        "launch__occupancy_limit_registers",
        1,
        "{:.0f}",
    ),
    (
        "Occupancy",
        "Block Limit Shared Mem",
        "block",
        "launch__occupancy_limit_shared_mem",
        1,
        "{:.0f}",
    ),
    ("Occupancy", "Block Limit Warps", "block", "launch__occupancy_limit_warps", 1, "{:.0f}"),
    (
        "Occupancy",
        "Achieved Active Warps Per SM",
        "warp",
        "sm__warps_active.avg.per_cycle_active",
        1,
        "{:.2f}",
    ),
    (
        "Occupancy",
        "Achieved Occupancy",
        "%",
        "sm__warps_active.avg.pct_of_peak_sustained_active",
        1,
        "{:.2f}",
    ),
    (
        "Occupancy",
        "Theoretical Active Warps per SM",
        "warp/cycle",
        "sm__maximum_warps_avg_per_active_cycle",
        1,
        "{:.0f}",
    ),
    (
        "Occupancy",
        "Theoretical Occupancy",
        "%",
        "sm__maximum_warps_per_active_cycle_pct",
        1,
        "{:.2f}",
    ),
]


def rows_of(report_path: str) -> list[list[str]]:
    import ncu_report

    ctx = ncu_report.load_report(report_path)
    out = [HEADER]
    n = 0
    for ri in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(ri)
        for ai in range(rng.num_actions()):
            act = rng.action_by_idx(ai)

            def val(metric):
                m = act.metric_by_name(metric)
                v = m.value() if m is not None else None
                return None if v is None or isinstance(v, str) else float(v)

            ctx_id, stream = val("launch__context_id"), val("launch__stream_id")
            ident = [
                str(n),
                "",
                "",
                "",
                act.name(ncu_report.IAction.NameBase_DEMANGLED),
                "",
                "" if ctx_id is None else f"{ctx_id:.0f}",
                "" if stream is None else f"{stream:.0f}",
            ]
            for section, label, unit, metric, scale, fmt in ROWS:
                v = val(metric)
                if v is not None:
                    out.append(ident + [section, label, unit, fmt.format(v * scale)])
            n += 1
    return out


def main(argv: list[str]) -> int:
    src, dst = argv
    with open(src, "rb") as f:
        data = f.read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    with tempfile.NamedTemporaryFile(suffix=".ncu-rep", delete=False) as tf:
        tf.write(data)
    try:
        rows = rows_of(tf.name)
    finally:
        os.unlink(tf.name)
    buf = io.StringIO()
    csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
    with open(dst, "w", newline="") as f:
        f.write(buf.getvalue())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
