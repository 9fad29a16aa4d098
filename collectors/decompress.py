"""Containers: gzip input, decompressed in bounded steps: a corrupt, truncated or oversized stream is an ArtifactError.

`MAX_DECOMPRESSED_BYTES` caps the output (a gzip bomb is refused before it fills memory); callers that know a
tighter limit (the dashboard's upload cap) pass `limit`.
"""
from __future__ import annotations

import os
import zlib

from collectors.errors import ArtifactError

MAX_DECOMPRESSED_BYTES = int(os.environ.get("KERNELSCOPE_MAX_DECOMPRESSED_BYTES", 8 << 30))
_STEP = 16 << 20


def is_gzip(data: bytes) -> bool:
    return data[:2] == b"\x1f\x8b"


def is_tar(data: bytes) -> bool:
    """A POSIX (ustar) tar archive, as collectors.ingest.pack_rank_folder writes for a folder of rank traces."""
    return len(data) > 262 and data[257:262] == b"ustar"


def gunzip_if_needed(data: bytes, name: str, limit: int | None = None) -> tuple[bytes, str]:
    """(bytes, name without .gz): gzip data decompressed (at most `limit` bytes of output), anything else as is."""
    inner = name[:-3] if name.endswith(".gz") else name
    if not is_gzip(data):
        return data, inner
    cap = MAX_DECOMPRESSED_BYTES if limit is None else limit
    out = bytearray()
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        chunk = d.decompress(data, _STEP)
        while True:
            out += chunk
            if len(out) > cap:
                raise ArtifactError(name, f"decompresses to more than {_size(cap)} (the limit for one artifact)")
            if d.eof or not d.unconsumed_tail:
                break
            chunk = d.decompress(d.unconsumed_tail, _STEP)
        if not d.eof:
            raise ArtifactError(name, "truncated gzip file (the compressed stream ends early)")
    except zlib.error as e:
        raise ArtifactError(name, f"corrupt gzip file ({e})") from None
    return bytes(out), inner


def read_chunks(path, name: str, step: int = _STEP, limit: int | None = None):
    """The bytes of a file in chunks of about `step` bytes, decompressed on the way when it is gzip (at most
    `limit` bytes of output, as gunzip_if_needed), so that a large artifact need not be held whole in memory."""
    cap = MAX_DECOMPRESSED_BYTES if limit is None else limit
    with open(path, "rb") as f:
        first = f.read(step)
        if not is_gzip(first):
            while first:
                yield first
                first = f.read(step)
            return
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        total = 0
        data = first
        try:
            while True:
                chunk = d.decompress(data, step)
                while chunk:
                    total += len(chunk)
                    if total > cap:
                        raise ArtifactError(name, f"decompresses to more than {_size(cap)} (the limit for one "
                                                  "artifact)")
                    yield chunk
                    chunk = d.decompress(d.unconsumed_tail, step) if d.unconsumed_tail else b""
                if d.eof:
                    return
                data = f.read(step)
                if not data:
                    raise ArtifactError(name, "truncated gzip file (the compressed stream ends early)")
        except zlib.error as e:
            raise ArtifactError(name, f"corrupt gzip file ({e})") from None


def _size(n: int) -> str:
    for unit, s in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= s:
            return f"{n / s:g} {unit}"
    return f"{n} bytes"
