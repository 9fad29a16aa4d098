"""The fuzzing suite's seeds: the real recordings of sample_traces/ (decompressed; the mutants are
gzipped again where the seed was), by format.

    seeds()  -> {format: [Seed]}     formats: ncu-rep, ncu-csv, kineto, nsys, bench

Nsight Systems exports are not bundled (they are large and not ours to ship): the `nsys` seeds are
the real H200 PyTorch traces' kernels, copies and launch calls written into the documented nsys
SQLite schema (the same builder the nsys tests use), plus the real 2-GPU exports of
../shared/data/nsys where that folder exists. The compatibility corpus of tests/corpus (real files
of every vintage other projects published, with their licenses) adds seeds of every format;
KERNELSCOPE_FUZZ_CORPUS names another folder instead.
"""

from __future__ import annotations

import gzip
import io
import os
import sqlite3
import tarfile
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from tests.conftest import SAMPLES, SHARED_NSYS

H200 = SAMPLES / "h200"
CORPUS = SAMPLES.parent / "tests" / "corpus"


@dataclass(frozen=True)
class Seed:
    fmt: str  # ncu-rep, ncu-csv, kineto, nsys, bench
    # the file name the mutant is given (its suffix decides .ncu-rep vs CSV, .gz)
    name: str
    data: bytes  # decompressed content
    # the real file was gzipped: mutants are gzipped again (and the gzip layer mutated)
    gz: bool


def _gunzip(p: Path) -> bytes:
    raw = p.read_bytes()
    return gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw


def _bench_reports() -> list[Seed]:
    """The small .ncu-rep files the bench suite recorded with --ncu (inside ncu_reports.tar.gz)."""
    out = []
    tar = H200 / "bench_suite" / "ncu_reports.tar.gz"
    if not tar.is_file():
        return out
    with tarfile.open(tar, "r:gz") as tf:
        for m in sorted(tf.getmembers(), key=lambda m: m.size):
            if m.name.endswith(".ncu-rep") and m.size < 500_000:
                out.append(Seed("ncu-rep", Path(m.name).name, tf.extractfile(m).read(), False))
    return out


def nsys_from_trace(trace: Path) -> bytes:
    """A real PyTorch trace's GPU ops and launch calls written into the nsys SQLite schema."""
    from collectors.ingest import parse_path
    from tests.support.nsys import build_nsys

    p = parse_path(trace)
    g, a = p.table("gpu_ops"), p.table("api_calls")
    pid = 4242
    kernels = [
        (r["start_ns"], r["end_ns"], r["device"], r["stream"], r["correlation"], pid, r["name"])
        for r in g.filter(g["kind"] == "kernel").iter_rows(named=True)
    ]
    memcpy = [
        (
            r["start_ns"],
            r["end_ns"],
            r["device"],
            r["stream"],
            r["correlation"],
            pid,
            r["bytes"] or 0,
            1,
        )
        for r in g.filter(g["kind"] == "memcpy").iter_rows(named=True)
    ]
    runtime = [
        (r["start_ns"], r["end_ns"], pid, r["tid"] or 1, r["correlation"], r["name"])
        for r in a.iter_rows(named=True)
        if r["correlation"] is not None
    ]
    with tempfile.TemporaryDirectory() as d:
        return build_nsys(
            Path(d),
            kernels=kernels,
            runtime=runtime,
            memcpy=memcpy,
            nvtx=[(kernels[0][0], kernels[-1][1], pid, 1, "step")] if kernels else (),
        )


@lru_cache(maxsize=1)
def seeds() -> dict[str, list[Seed]]:
    k = H200 / "chapter5_kernels"
    out: dict[str, list[Seed]] = {
        "ncu-rep": [Seed("ncu-rep", "basic.ncu-rep", _gunzip(k / "basic.ncu-rep.gz"), True)]
        + _bench_reports(),
        "ncu-csv": [
            Seed("ncu-csv", p.name[:-3], _gunzip(p), True) for p in sorted(k.glob("*.csv.gz"))
        ]
        + [
            Seed(
                "ncu-csv",
                "tensor_raw_base.csv",
                _gunzip(H200 / "tensor_kernels" / "tensor_raw_base.csv.gz"),
                True,
            )
        ],
        "kineto": [
            Seed("kineto", p.name[:-3], _gunzip(p), True)
            for p in sorted((H200 / "torch_ffn").glob("*.json.gz"))
        ],
        "bench": [
            Seed("bench", p.name[:-3], _gunzip(p), True)
            for p in sorted(SAMPLES.glob("h200*/bench_suite/bench_*.json.gz"))
        ],
    }
    out["nsys"] = [
        Seed(
            "nsys",
            "ffn_M1024.sqlite",
            nsys_from_trace(H200 / "torch_ffn" / "ffn_M1024_eager.json.gz"),
            False,
        ),
        Seed(
            "nsys",
            "triton_add.sqlite",
            nsys_from_trace(H200 / "torch_ffn" / "triton_add_x300.json.gz"),
            False,
        ),
    ]
    if SHARED_NSYS.is_dir():
        out["nsys"] += [
            Seed("nsys", p.name, p.read_bytes(), False)
            for p in sorted(SHARED_NSYS.glob("*.sqlite"))
            if p.stat().st_size < 8_000_000
        ]
    corpus = os.environ.get("KERNELSCOPE_FUZZ_CORPUS") or str(CORPUS)
    if corpus and Path(corpus).is_dir():
        from collectors.ingest import detect_kind

        for p in sorted(Path(corpus).rglob("*")):
            if not p.is_file() or p.stat().st_size > 20_000_000:
                continue
            if (
                p.suffix in (".py", ".md", ".json")
                and "trace" not in p.name
                or p.name in ("LICENSE", "manifest.json")
            ):
                continue
            try:
                raw = _gunzip(p)
            except (OSError, EOFError, gzip.BadGzipFile):
                continue
            if len(raw) > 8_000_000:
                continue
            name = p.name[:-3] if p.name.endswith(".gz") else p.name
            try:
                kind = detect_kind(raw, name)
            except Exception:  # noqa: BLE001 - not an artifact
                continue
            fmt = {"ncu": "ncu-rep" if raw[:4] == b"NVR\x00" else "ncu-csv"}.get(kind, kind)
            if fmt == "ncu-rep" and not name.endswith(".ncu-rep"):
                name += ".ncu-rep"
            if fmt in out:
                out[fmt].append(Seed(fmt, name, raw, p.name.endswith(".gz")))
    return out


def sqlite_bytes(con: sqlite3.Connection) -> bytes:
    return con.serialize()


def gz(data: bytes) -> bytes:
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0, compresslevel=1) as f:
        f.write(data)
    return buf.getvalue()
