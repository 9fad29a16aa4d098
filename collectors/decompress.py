"""Containers: gzip input, inflated as a stream with a cap: a corrupt, truncated or oversized stream is an ArtifactError.

The output is written in bounded steps into a spooled temporary file (in memory up to `SPOOL_BYTES`, then an
unnamed file on disk that disappears with the process), so a gzip bomb is refused when its output passes the cap
(collectors.limits.max_artifact_bytes, or `limit`) having held at most one step in memory; an accepted stream is
read back into one bytes object of its exact size (no second copy). `read_chunks` streams a file's bytes
(decompressed on the way, within the same cap) for readers that need not hold an artifact whole; `mapped` gives a
plain file's bytes as a private memory map, so such a reader can use the page cache's pages in place.
"""
from __future__ import annotations

import contextlib
import mmap
import os
import stat
import tempfile
import zlib

from collectors.errors import ArtifactError
from collectors.limits import max_artifact_bytes, size_text

_STEP = 8 << 20          # output per step
_IN_STEP = 1 << 20       # input per step
SPOOL_BYTES = 64 << 20


def is_gzip(data: bytes) -> bool:
    return data[:2] == b"\x1f\x8b"


def is_tar(data: bytes) -> bool:
    """A POSIX (ustar) tar archive, as collectors.ingest.pack_rank_folder writes for a folder of rank traces."""
    return len(data) > 262 and data[257:262] == b"ustar"


def too_large(name: str, cap: int, what: str = "decompresses to") -> ArtifactError:
    return ArtifactError(name, f"{what} more than {size_text(cap)}, the limit for one artifact (raise it with "
                               "--max-decompressed-mb; in the dashboard: kernelscope dashboard --max-decompressed-mb)")


def gunzip_if_needed(data: bytes, name: str, limit: int | None = None) -> tuple[bytes, str]:
    """(bytes, name without .gz): gzip data inflated (at most `limit` bytes of output), anything else as is.
    Concatenated gzip members are read as gzip(1) does; anything after the last member must be empty."""
    inner = name[:-3] if name.lower().endswith(".gz") else name
    if not is_gzip(data):
        return data, inner
    cap = max_artifact_bytes() if limit is None else limit
    view = memoryview(data)
    total = 0

    def put(chunk: bytes) -> None:
        nonlocal total
        total += len(chunk)
        if total > cap:
            raise too_large(name, cap)
        out.write(chunk)

    with tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES, prefix="ks-gunzip-") as out:
        pos = 0
        try:
            while pos < len(view):                        # one gzip member per pass (gzip(1) concatenates)
                d = zlib.decompressobj(16 + zlib.MAX_WBITS)
                while pos < len(view) and not d.eof:
                    piece = view[pos:pos + _IN_STEP]
                    pos += len(piece)
                    put(d.decompress(piece, _STEP))
                    while d.unconsumed_tail and not d.eof:
                        put(d.decompress(d.unconsumed_tail, _STEP))
                while not d.eof:                          # input exhausted: what zlib still holds
                    chunk = d.decompress(b"", _STEP)
                    if not chunk:
                        raise ArtifactError(name, "truncated gzip file (the compressed stream ends early)")
                    put(chunk)
                pos -= len(d.unused_data)
                rest = view[pos:]
                if rest and not is_gzip(rest[:2].tobytes()):
                    if bytes(rest).strip(b"\x00"):
                        raise ArtifactError(name, "corrupt gzip file (data after the end of the compressed stream)")
                    break
        except zlib.error as e:
            raise ArtifactError(name, f"corrupt gzip file ({e})") from None
        except MemoryError:
            raise ArtifactError(name, "too large to decompress in this process's memory") from None
        except OSError as e:
            raise ArtifactError(name, f"cannot decompress: no room for the temporary output ({e.strerror})") from None
        out.seek(0)
        raw = out.read()
    return raw, inner


def read_chunks(path, name: str, step: int = _STEP, limit: int | None = None):
    """The bytes of a file in chunks of about `step` bytes, decompressed on the way when it is gzip (at most
    `limit` bytes of output, collectors.limits.max_artifact_bytes by default; concatenated members read as gzip(1)
    does), so that a large artifact need not be held whole in memory."""
    cap = max_artifact_bytes() if limit is None else limit
    with open(path, "rb") as f:
        first = f.read(step)
        if not is_gzip(first):
            total = 0
            while first:
                total += len(first)
                if total > cap:
                    raise too_large(name, cap, "is")
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
                        raise too_large(name, cap)
                    yield chunk
                    chunk = d.decompress(d.unconsumed_tail, step) if d.unconsumed_tail else b""
                if d.eof:
                    rest = d.unused_data + f.read(step)
                    if not rest:
                        return
                    if not is_gzip(rest):
                        if rest.strip(b"\x00") or f.read(1):
                            raise ArtifactError(name, "corrupt gzip file (data after the end of the compressed "
                                                      "stream)")
                        return
                    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
                    data = rest
                    continue
                data = f.read(step)
                if not data:
                    raise ArtifactError(name, "truncated gzip file (the compressed stream ends early)")
        except zlib.error as e:
            raise ArtifactError(name, f"corrupt gzip file ({e})") from None


@contextlib.contextmanager
def mapped(path, name: str, limit: int | None = None):
    """A plain (not gzip) regular file as a private copy-on-write memory map (what the reader writes into it stays
    in this process), or None where it is not mapped (gzip, empty, not a regular file, no mmap): a reader then
    takes `read_chunks`. A file over the cap (collectors.limits.max_artifact_bytes, or `limit`) raises the error
    read_chunks raises. The file must not shrink while mapped (reading a page past its new end kills the process),
    as a trace being analysed does not."""
    cap = max_artifact_bytes() if limit is None else limit
    mm = None
    with open(path, "rb") as f:
        st = os.fstat(f.fileno())
        if stat.S_ISREG(st.st_mode) and st.st_size > 0 and not is_gzip(f.read(2)):
            if st.st_size > cap:
                raise too_large(name, cap, "is")
            try:
                mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
            except (OSError, ValueError):
                mm = None
    try:
        yield mm
    finally:
        if mm is not None:
            try:
                mm.close()
            except BufferError:              # a view of it still held (by an exception's traceback): freed with it
                pass
