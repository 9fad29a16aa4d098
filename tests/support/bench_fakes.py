"""A fake ncu command line for the bench suite's ncu stage (replays a recorded report)."""

from __future__ import annotations

import sys
from tests.conftest import H200_KERNELS


_FAKE_NCU = r"""#!{python}
import gzip, json, os, shutil, sys
a = sys.argv[1:]
if a == ["--version"]:
    print("Version 2025.3.1.0 (fake)"); sys.exit(0)
if os.environ.get("FAKE_NCU_PERM"):
    print("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters")
    sys.exit(1)
out = a[a.index("-o") + 1]
manifest = a[a.index("--out") + 1]
case = a[a.index("--ncu-child") + 1]
with gzip.open({report!r}, "rb") as f, open(out, "wb") as g:
    shutil.copyfileobj(f, g)
names = ["ks_copy_u4", "ks_transpose16", "ks_transpose16_pad", "ks_transpose32", "ks_transpose32_pad",
         "ks_colread4", "ks_colread4", "ks_matmul_64x64", "ks_matmul_128x128"]
with open(manifest, "w") as f:
    for i, n in enumerate(names):
        f.write(json.dumps({{"case": case, "kernel": n, "params": {{"kernel": n, "i": i}}, "notes": "fake"}}) + "\n")
print("==PROF== Disconnected")
"""


def _fake_ncu(tmp_path):
    import stat

    (tmp_path / "bin").mkdir(exist_ok=True)
    p = tmp_path / "bin" / "ncu"
    p.write_text(
        _FAKE_NCU.format(python=sys.executable, report=str(H200_KERNELS / "full.ncu-rep.gz"))
    )
    p.chmod(p.stat().st_mode | stat.S_IEXEC)
    return str(p)
