"""The HTA baseline for PyTorch profiler traces: what `kernelscope analyze TRACE --format json`
computes, done by Holistic Trace Analysis 0.5 (run with the python of a virtual environment that has
it; perf/traces.py does).

    HTA_DISABLE_NS_ROUNDING=1 /path/to/hta-venv/bin/python perf/hta_baseline.py TRACE_FOLDER

Loads the folder's traces (`TraceAnalysis(trace_dir=...)`), then computes the CUDA kernel launch
statistics (`get_cuda_kernel_launch_stats`), the temporal breakdown (`get_temporal_breakdown`) and
the idle-time breakdown (`get_idle_time_breakdown`), and prints one JSON line with what it found (so
a run that silently did nothing shows).
"""

from __future__ import annotations

import json
import logging
import sys
import warnings

warnings.filterwarnings("ignore")
logging.disable(logging.WARNING)


def main(trace_dir: str) -> dict:
    from hta.trace_analysis import TraceAnalysis

    a = TraceAnalysis(trace_dir=trace_dir)
    launch = a.get_cuda_kernel_launch_stats(visualize=False)
    temporal = a.get_temporal_breakdown(visualize=False)
    idle, _ = a.get_idle_time_breakdown(visualize=False)
    launched = sum(len(v) for v in launch.values()) if isinstance(launch, dict) else len(launch)
    return {
        "kernels_with_launch": int(launched),
        "temporal_rows": int(len(temporal)),
        "idle_rows": int(len(idle)),
        "idle_categories": sorted(str(c) for c in idle.get("idle_category", [])),
    }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
