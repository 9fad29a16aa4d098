"""Containers: gzip input, inflated as a stream with a cap: a corrupt, truncated or oversized stream
is an ArtifactError.

The output is written in bounded steps into a spooled temporary file (in memory up to `SPOOL_BYTES`,
then an unnamed file on disk that disappears with the process), so a gzip bomb is refused when its
output passes the cap (collectors.limits.max_artifact_bytes, or `limit`) having held at most one
step in memory; an accepted stream is read back into one bytes object of its exact size (no second
copy). `read_chunks` streams a file's bytes (decompressed on the way, within the same cap) for
readers that need not hold an artifact whole; `mapped` gives a plain file's bytes as a private
memory map, so such a reader can use the page cache's pages in place.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import re
import stat
import tempfile
import zlib

from collectors import progress
from collectors.errors import ArtifactError
from collectors.limits import max_artifact_bytes, size_text

_STEP = 8 << 20  # output per step
_IN_STEP = 1 << 20  # input per step
SPOOL_BYTES = 64 << 20


#: a run of this many bytes of whitespace (or more) in a JSON document is read as one space (see
#: JsonSqueezer)
WS_RUN = 4096
_WS = b" \t\r\n"
_WS_RUN_RE = re.compile(rb"[ \t\r\n]{%d,}" % WS_RUN)
_LEAD_WS = re.compile(rb"[ \t\r\n]*")
_NOT_WS = bytes(0 if c in _WS else 1 for c in range(256))  # whitespace -> 0, anything else -> 1
_ZEROS = b"\x00" * WS_RUN


def _has_run(chunk) -> bool:
    """Whether a chunk holds a run of WS_RUN whitespace bytes: one translate and one find, about 0.5
    ms per MB (the regex alone takes 9 ms)."""
    return (
        _ZEROS in bytes(chunk).translate(_NOT_WS)
        if not isinstance(chunk, bytes)
        else _ZEROS in chunk.translate(_NOT_WS)
    )


class JsonSqueezer:
    """Shortens every run of WS_RUN or more bytes of whitespace in a JSON document, also across the
    chunks of a stream, to one space (a run cut by a chunk boundary to at most WS_RUN - 1), so that
    a document padded with gigabytes of whitespace costs the memory of its content, not of its
    bytes. Whitespace between JSON tokens means nothing; inside a string JSON allows only raw
    spaces, and no profiler writes a string of thousands of them. A stream is squeezed only when its
    first byte that is not whitespace is `{` or `[` (JSON); any other stream (CSV, SQLite, an Nsight
    Compute report) passes unchanged. `dropped`: the bytes left out."""

    def __init__(self):
        self.active: bool | None = None
        self.run = 0  # whitespace at the end of what was passed on
        self.dropped = 0

    def __call__(self, chunk: bytes) -> bytes:
        if self.active is False or not chunk:
            return chunk
        lead = _LEAD_WS.match(chunk).end()
        if self.active is None and lead < len(chunk):
            self.active = chunk[lead : lead + 1] in (b"{", b"[")
            if not self.active:
                return chunk
        keep = min(lead, max(0, WS_RUN - 1 - self.run))
        if lead == len(chunk):  # all whitespace: the run goes on
            self.run += keep
            self.dropped += lead - keep
            return chunk[:keep] if keep < lead else chunk
        body = chunk[lead:] if keep < lead else chunk
        if _has_run(body):
            n = len(body)
            body = _WS_RUN_RE.sub(b" ", body)
            self.dropped += n - len(body)
        if keep < lead:
            self.dropped += lead - keep
            body = chunk[:keep] + body
        tail = body[-WS_RUN:]
        self.run = len(tail) - len(tail.rstrip(_WS))
        return body


def squeeze_json(data: bytes) -> bytes:
    """A whole document through JsonSqueezer (unchanged, not copied, when it has no long whitespace run)."""
    # in pieces (overlapping by a run): no copy of the whole document
    step = 8 << 20
    if not any(_has_run(data[i : i + step + WS_RUN]) for i in range(0, max(1, len(data)), step)):
        return data
    return JsonSqueezer()(data)


def is_gzip(data: bytes) -> bool:
    return data[:2] == b"\x1f\x8b"


def is_tar(data: bytes) -> bool:
    """A POSIX (ustar) tar archive, as collectors.ingest.pack_rank_folder writes for a folder of rank traces."""
    return len(data) > 262 and data[257:262] == b"ustar"


def too_large(name: str, cap: int, what: str = "decompresses to") -> ArtifactError:
    return ArtifactError(
        name,
        f"{what} more than {size_text(cap)}, the limit for one artifact (raise it with "
        "--max-decompressed-mb; in the dashboard: kernelscope dashboard --max-decompressed-mb)",
    )


def gunzip_if_needed(data: bytes, name: str, limit: int | None = None) -> tuple[bytes, str]:
    """(bytes, name without .gz): gzip data inflated (at most `limit` bytes of output), anything
    else as is. Concatenated gzip members are read as gzip(1) does; anything after the last member
    must be empty."""
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
        out.write(squeeze(chunk))  # a JSON document's long whitespace runs never reach memory

    squeeze = JsonSqueezer()

    with tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES, prefix="ks-gunzip-") as out:
        pos = 0
        try:
            # one gzip member per pass (gzip(1) concatenates)
            while pos < len(view):
                d = zlib.decompressobj(16 + zlib.MAX_WBITS)
                while pos < len(view) and not d.eof:
                    piece = view[pos : pos + _IN_STEP]
                    pos += len(piece)
                    put(d.decompress(piece, _STEP))
                    while d.unconsumed_tail and not d.eof:
                        put(d.decompress(d.unconsumed_tail, _STEP))
                while not d.eof:  # input exhausted: what zlib still holds
                    chunk = d.decompress(b"", _STEP)
                    if not chunk:
                        raise ArtifactError(
                            name, "truncated gzip file (the compressed stream ends early)"
                        )
                    put(chunk)
                pos -= len(d.unused_data)
                rest = view[pos:]
                if rest and not is_gzip(rest[:2].tobytes()):
                    if bytes(rest).strip(b"\x00"):
                        raise ArtifactError(
                            name, "corrupt gzip file (data after the end of the compressed stream)"
                        )
                    break
        except zlib.error as e:
            raise ArtifactError(name, f"corrupt gzip file ({e})") from None
        except MemoryError:
            raise ArtifactError(name, "too large to decompress in this process's memory") from None
        except OSError as e:
            raise ArtifactError(
                name, f"cannot decompress: no room for the temporary output ({e.strerror})"
            ) from None
        out.seek(0)
        raw = out.read()
    return raw, inner


def read_chunks(path, name: str, step: int = _STEP, limit: int | None = None):
    """The bytes of a file in chunks of about `step` bytes, decompressed on the way when it is gzip
    (at most `limit` bytes of output, collectors.limits.max_artifact_bytes by default; concatenated
    members read as gzip(1) does), so that a large artifact need not be held whole in memory; a JSON
    document's long whitespace runs shortened (JsonSqueezer: the cap still counts every byte)."""
    squeeze = JsonSqueezer()
    for chunk in _read_chunks(path, name, step, limit):
        out = squeeze(chunk)
        if out:
            yield out


def _read_chunks(path, name: str, step: int, limit: int | None):
    cap = max_artifact_bytes() if limit is None else limit
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        first = f.read(step)
        if not is_gzip(first):
            total = 0
            while first:
                total += len(first)
                if total > cap:
                    raise too_large(name, cap, "is")
                progress.report("reading", f.tell(), size, "B")
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
                    # compressed bytes: the file's own size
                    progress.report("reading", f.tell(), size, "B")
                    yield chunk
                    chunk = d.decompress(d.unconsumed_tail, step) if d.unconsumed_tail else b""
                if d.eof:
                    rest = d.unused_data + f.read(step)
                    if not rest:
                        return
                    if not is_gzip(rest):
                        if rest.strip(b"\x00") or f.read(1):
                            raise ArtifactError(
                                name,
                                "corrupt gzip file (data after the end of the compressed stream)",
                            )
                        return
                    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
                    data = rest
                    continue
                data = f.read(step)
                if not data:
                    raise ArtifactError(
                        name, "truncated gzip file (the compressed stream ends early)"
                    )
        except zlib.error as e:
            raise ArtifactError(name, f"corrupt gzip file ({e})") from None


@contextlib.contextmanager
def mapped(path, name: str, limit: int | None = None):
    """A plain (not gzip) regular file as a private copy-on-write memory map (what the reader writes
    into it stays in this process), or None where it is not mapped (gzip, empty, not a regular file,
    no mmap): a reader then takes `read_chunks`. A file over the cap
    (collectors.limits.max_artifact_bytes, or `limit`) raises the error read_chunks raises. The file
    must not shrink while mapped (reading a page past its new end kills the process), as a trace
    being analysed does not."""
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
            # a view of it still held (by an exception's traceback): freed with it
            except BufferError:
                pass
