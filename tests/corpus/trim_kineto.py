"""Trim a Chrome-trace JSON (PyTorch profiler / Kineto, or any Chrome trace) to a time window,
keeping it valid and self-consistent, so a large public trace can live in the corpus at a fraction
of its size.

    python tests/corpus/trim_kineto.py IN OUT --window-ms W [--skip-ms S]

Kept:
- every top-level key (deviceProperties, distributedInfo, baseTimeNanoseconds, schemaVersion ...),
  and the shape: a bare event list stays a bare list;
- metadata events (ph "M") and the "Trace" span;
- timed events (ph "X" complete, "i"/"I" instant) that lie entirely inside [t0 + S, t0 + S + W],
  where t0 is the start of the first GPU op (cat kernel / gpu_memcpy / gpu_memset, or PyTorch <=
  1.9's Kernel / Memcpy / Memset; the first timed event when there is none);
- the launch call of every kept GPU op (the CUDA runtime / driver event with its correlation id),
  also when it started before the window, so kept ops keep their launch;
- flow events ("s" / "f") whose id is the correlation id of a kept GPU op.
Nothing is edited: kept events are written as they were read (json.loads / json.dumps round trip).
The output is
gzip with mtime 0 and no file name, so the same input and window give the same bytes.

The corpus manifest (tests/corpus/manifest.json) records the command for each trimmed file; the
expected numbers of a trimmed file are computed on the trimmed file (tests/corpus/reference.py),
never carried over from the original. tests/collectors/test_corpus_formats.py tests the trimmer's
promises on a real trace.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import sys

GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset"}
API_CATS = {"cuda_runtime", "cuda_driver", "Runtime"}


def _load(data: bytes):
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return json.loads(data)


def _corr(e: dict):
    a = e.get("args")
    return a.get("correlation") if isinstance(a, dict) else None


def trim(doc, window_us: float, skip_us: float = 0.0):
    """The trimmed document (same shape as `doc`: a dict with traceEvents, or a bare list)."""
    events = doc if isinstance(doc, list) else doc.get("traceEvents", [])
    timed = [
        e
        for e in events
        if isinstance(e, dict)
        and e.get("ph") in ("X", "i", "I")
        and isinstance(e.get("ts"), (int, float))
    ]
    gpu_ts = [e["ts"] for e in timed if e.get("cat") in GPU_CATS and e.get("ph") == "X"]
    t0 = min(gpu_ts) if gpu_ts else min((e["ts"] for e in timed), default=0)
    lo, hi = t0 + skip_us, t0 + skip_us + window_us

    def inside(e: dict) -> bool:
        ts = e["ts"]
        end = ts + (e.get("dur") or 0) if e.get("ph") == "X" else ts
        return lo <= ts and end <= hi

    kept_corr = {_corr(e) for e in timed if e.get("cat") in GPU_CATS and inside(e)} - {None}
    out = []
    for e in events:
        if not isinstance(e, dict):
            continue
        ph, cat = e.get("ph"), e.get("cat")
        if ph == "M" or cat == "Trace":
            out.append(e)
        elif ph in ("s", "f"):
            if e.get("id") in kept_corr:
                out.append(e)
        elif ph in ("X", "i", "I") and isinstance(e.get("ts"), (int, float)):
            if cat in GPU_CATS:
                if inside(e):
                    out.append(e)
            elif inside(e) or (cat in API_CATS and _corr(e) in kept_corr):
                out.append(e)
    if isinstance(doc, list):
        return out
    trimmed = dict(doc)
    trimmed["traceEvents"] = out
    return trimmed


def dump_gzip(doc) -> bytes:
    """JSON as gzip, reproducibly (mtime 0, no name in the header)."""
    raw = json.dumps(doc).encode()
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", compresslevel=9, fileobj=buf, mtime=0) as f:
        f.write(raw)
    return buf.getvalue()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--window-ms", type=float, required=True, help="length of the kept window [ms]")
    ap.add_argument(
        "--skip-ms", type=float, default=0.0, help="start of the window after the first GPU op [ms]"
    )
    a = ap.parse_args(argv)
    with open(a.src, "rb") as f:
        doc = _load(f.read())
    out = trim(doc, a.window_ms * 1000.0, a.skip_ms * 1000.0)
    with open(a.dst, "wb") as f:
        f.write(dump_gzip(out))
    n_in = len(doc if isinstance(doc, list) else doc.get("traceEvents", []))
    n_out = len(out if isinstance(out, list) else out["traceEvents"])
    print(f"{a.src}: kept {n_out:,} of {n_in:,} events -> {a.dst}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
