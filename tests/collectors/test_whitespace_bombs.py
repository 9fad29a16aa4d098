"""Issue 42: JSON padded with long runs of whitespace is read in memory bounded by its content, not its bytes
(collectors.decompress.JsonSqueezer), and the same events are read as from the file without the padding."""
from __future__ import annotations

import gzip
import resource
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest

from collectors.decompress import WS_RUN, JsonSqueezer, squeeze_json
from collectors.ingest import parse_path

REPO = Path(__file__).resolve().parents[2]
EAGER = REPO / "sample_traces" / "h200" / "torch_ffn" / "ffn_M1_eager.json.gz"


def _bomb(path: Path, mib: int) -> Path:
    z = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    spaces = b" " * (1 << 20)
    with open(path, "wb") as f:
        f.write(z.compress(b'{"traceEvents": ['))
        for _ in range(mib):
            f.write(z.compress(spaces))
        f.write(z.compress(b"]}") + z.flush())
    return path


@pytest.mark.parametrize("mib", [190, 1024])
def test_cli_refuses_a_gzipped_whitespace_bomb_quickly_in_little_memory(tmp_path, mib):
    bomb = _bomb(tmp_path / f"bomb{mib}.json.gz", mib)
    assert bomb.stat().st_size < 8 << 20
    exe = Path(sys.executable).with_name("kernelscope")
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t = time.perf_counter()
    out = subprocess.run([str(exe), "analyze", str(bomb), "--store", str(tmp_path / "s")], capture_output=True,
                         text=True, timeout=120)
    wall = time.perf_counter() - t
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    assert out.returncode == 1 and out.stderr.count("\n") == 1
    assert "an empty Chrome trace (no events)" in out.stderr and str(bomb) in out.stderr
    assert wall < 20, wall
    assert peak_mb < 400 or before / 1024 >= 400, peak_mb


def test_whitespace_between_real_events_reads_the_same_events(tmp_path):
    src = gzip.decompress(EAGER.read_bytes())
    i = src.index(b"},", src.index(b"traceEvents")) + 2
    padded = tmp_path / "padded.json.gz"
    padded.write_bytes(gzip.compress(src[:i] + b" \n\t" * (20 << 20) + src[i:], 1))
    a, b = parse_path(str(EAGER)), parse_path(str(padded))
    for t in ("gpu_ops", "api_calls", "cpu_ops"):
        assert a.table(t).equals(b.table(t)), t


def test_the_squeezer_keeps_short_runs_and_other_formats():
    s = JsonSqueezer()
    doc = b'{"a": "x  y",\n  "b": [1, 2]}'
    assert s(doc) == doc
    csv = b"ID,Kernel Name\n" + b" " * (2 * WS_RUN)
    assert JsonSqueezer()(csv) == csv                          # not JSON: passed as it is
    assert squeeze_json(b"[" + b" " * (3 * WS_RUN) + b"1]") == b"[ 1]"
    # a run cut by chunk boundaries keeps fewer than WS_RUN bytes, however many chunks it spans
    s = JsonSqueezer()
    out = s(b"[1," + b" " * 100) + b"".join(s(b" " * 10_000) for _ in range(50)) + s(b" 2]")
    assert out.startswith(b"[1,") and out.endswith(b"2]") and len(out) < WS_RUN + 10
    assert s.dropped > 400_000
