"""Reference numbers from Holistic Trace Analysis (HTA) for the multi-rank traces of the corpus
(tests/corpus: param/dlrm_8rank and hta/multirank_128), under the names param_dlrm_8rank and
hta_sampled_2rank.

Run with HTA in its own environment (its pins never touch the project's), from the repository root:

    python3 -m venv /tmp/hta-venv && /tmp/hta-venv/bin/pip install holistictraceanalysis==0.5.0
    /tmp/hta-venv/bin/python tests/data/multirank/make_hta_reference.py >
    tests/data/multirank/hta_reference.json

For each trace set: HTA's profiler steps (it leaves out the last one), get_comm_comp_overlap (per
rank, % of the communication time overlapped with compute), get_temporal_breakdown (per rank, µs)
and get_potential_stragglers(num_candidates=1) over those steps.
tests/analyzers/test_multirank_real.py compares them with analyzers.distributed /
analyzers.stragglers.
"""

import json
import shutil
import sys
import tempfile
from pathlib import Path

from hta.trace_analysis import TraceAnalysis

CORPUS = Path(__file__).resolve().parents[2] / "corpus"
SETS = {
    "param_dlrm_8rank": CORPUS / "param" / "dlrm_8rank",
    "hta_sampled_2rank": CORPUS / "hta" / "multirank_128",
}
out = {"tool": "HolisticTraceAnalysis", "version": None, "sets": {}}
try:
    from importlib.metadata import version

    out["version"] = version("HolisticTraceAnalysis")
except Exception:  # noqa: BLE001
    pass
for name, folder in SETS.items():
    with tempfile.TemporaryDirectory() as tmp:
        for p in sorted(folder.glob("*.json.gz")):
            shutil.copy(p, tmp)
        ta = TraceAnalysis(trace_dir=tmp)
        steps = [int(s) for s in ta.get_profiler_steps()]
        ov = ta.get_comm_comp_overlap(visualize=False)
        tb = ta.get_temporal_breakdown(visualize=False)
        res = {
            "profiler_steps": steps,
            "comm_comp_overlap_pctg": {
                int(r): float(v) for r, v in zip(ov["rank"], ov["comp_comm_overlap_pctg"])
            },
            "temporal_breakdown_us": [
                {k: (int(v) if k == "rank" else float(v)) for k, v in row.items()}
                for row in tb.to_dict(orient="records")
            ],
            "potential_stragglers": [
                int(x) for x in ta.get_potential_stragglers(profiler_steps=steps, num_candidates=1)
            ],
        }
        out["sets"][name] = res
json.dump(out, sys.stdout, indent=1)
print()
