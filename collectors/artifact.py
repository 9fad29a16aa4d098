"""What a parser returns, and how an input is recognised.

Every parser takes the artifact's bytes and its file name (so the CLI, a folder walk and the upload
widget share one code path) and returns `Parsed`: its kind, its normalized tables (polars, base units)
and a small JSON-serialisable `meta` (GPU name, device attributes, tool versions...).
"""
from __future__ import annotations

import gzip
import zlib
from dataclasses import dataclass, field
from typing import Callable

import polars as pl

from collectors.errors import ArtifactError

MAX_DECOMPRESSED_BYTES = 8 << 30  # refuse gzip bombs


@dataclass
class Parsed:
    kind: str                                   # "ncu", "kineto", "nsys", "bench"
    tables: dict[str, pl.DataFrame]
    meta: dict = field(default_factory=dict)

    def table(self, name: str) -> pl.DataFrame:
        return self.tables[name]


def gunzip_if_needed(data: bytes, name: str) -> tuple[bytes, str]:
    """Return (bytes, name without .gz); raise ArtifactError for a corrupt or truncated gzip stream."""
    if data[:2] != b"\x1f\x8b":
        return data, name[:-3] if name.endswith(".gz") else name
    try:
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        out = d.decompress(data, MAX_DECOMPRESSED_BYTES)
        if d.unconsumed_tail:
            raise ArtifactError(name, f"decompresses to more than {MAX_DECOMPRESSED_BYTES >> 30} GiB")
        if not d.eof:
            raise ArtifactError(name, "truncated gzip file (the compressed stream ends early)")
    except (zlib.error, gzip.BadGzipFile, EOFError) as e:
        raise ArtifactError(name, f"corrupt gzip file ({e})") from None
    return out, name[:-3] if name.endswith(".gz") else name


def _is_sqlite(head: bytes) -> bool:
    return head.startswith(b"SQLite format 3\x00")


def _is_kineto_tar(head: bytes, lname: str) -> bool:
    if len(head) < 263 or head[257:262] != b"ustar":
        return False
    first = head[:100].split(b"\0", 1)[0].lower()
    return lname.endswith(".kineto.tar") or first.endswith((b".json", b".json.gz"))


def detect_kind(data: bytes, name: str) -> str:
    """Recognise an (already decompressed) artifact from its content first, its name second."""
    head = data[:4096]
    lname = name.lower()
    if not data:
        raise ArtifactError(name, "empty file")
    if lname.endswith(".ncu-rep"):
        return "ncu"
    if lname.endswith(".nsys-rep") or lname.endswith(".qdrep"):
        return "nsys-rep"
    if _is_sqlite(head):
        return "nsys"
    if _is_kineto_tar(head, lname):
        return "kineto"  # a folder of rank traces packed by collectors.kineto.pack_rank_folder
    stripped = head.lstrip()
    if stripped[:1] in (b"{", b"["):
        if b'"kernelscope_bench"' in data[:65536]:
            return "bench"
        return "kineto"
    text = head.decode("utf-8", errors="replace")
    if '"Kernel Name"' in text or "==PROF==" in text or lname.endswith(".csv"):
        return "ncu"
    raise ArtifactError(
        name,
        "not a recognised artifact: expected an Nsight Compute report (.ncu-rep) or CSV export, "
        "a PyTorch profiler trace (.json/.json.gz), an Nsight Systems SQLite export, or a kernelscope bench result",
    )


def _parser(kind: str, name: str) -> Callable[[bytes, str], Parsed]:
    if kind == "ncu":
        from collectors import ncu
        return ncu.parse
    if kind == "kineto":
        from collectors import kineto
        return kineto.parse
    if kind == "nsys":
        from collectors import nsys
        return nsys.parse
    if kind == "nsys-rep":
        from collectors import nsys
        return nsys.parse_report
    if kind == "bench":
        from collectors.bench import results
        return results.parse
    raise ArtifactError(name, f"no parser for artifact kind {kind!r}")


def parse_bytes(data: bytes, name: str) -> Parsed:
    """Decompress if needed, recognise and parse. Raises ArtifactError on any bad input."""
    raw, inner = gunzip_if_needed(data, name)
    kind = detect_kind(raw, inner)
    try:
        return _parser(kind, name)(raw, name)
    except ArtifactError:
        raise
    except (ValueError, KeyError, TypeError, IndexError, UnicodeDecodeError, pl.exceptions.PolarsError) as e:
        raise ArtifactError(name, f"could not be read as {kind}: {type(e).__name__}: {e}") from None
