"""Builds collectors/ncu_labels.json: (section, body item label, metric label) -> metric name.

Input: two details-page exports of the same report, one with labels (ncu's default) and one with
`--print-metric-name name`, e.g. those recorded in sample_traces/h200/chapter5_kernels/: python
tools/make_ncu_labels.py full_details.csv.gz full_details_base.csv.gz Rows are paired by position; a
label that maps to two different names in the same section is dropped.
"""

import csv, gzip, io, json, sys
from pathlib import Path


def rows(p):
    data = Path(p).read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return list(csv.reader(io.StringIO(data.decode())))


lab, nam = rows(sys.argv[1]), rows(sys.argv[2])
h = lab[0]
i_sec, i_body, i_name = h.index("Section Name"), h.index("Body Item Label"), h.index("Metric Name")
seen: dict[tuple, set] = {}
for a, b in zip(lab[1:], nam[1:]):
    if len(a) <= i_name + 2 or len(b) <= i_name + 2 or a[0] != b[0] or not a[0].isdigit():
        continue
    if "__" in a[i_name]:
        continue
    seen.setdefault((a[i_sec], a[i_body], a[i_name]), set()).add(b[i_name])
out = {"\x1f".join(k): sorted(v)[0] for k, v in sorted(seen.items()) if len(v) == 1}
Path(__file__).resolve().parents[1].joinpath("collectors", "ncu_labels.json").write_text(
    json.dumps(out, indent=0, sort_keys=True)
)
print(f"{len(out)} labels")
