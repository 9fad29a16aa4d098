"""Input in, parsed run out: the one path from a file, a folder of rank traces or uploaded bytes to
`Parsed`.

    read_path(path)          -> (bytes, name)    a file's bytes, or a folder of rank traces packed as one tar
    parse_bytes(data, name)  -> Parsed           decompress, recognise the kind from the content, parse
    parse_path(path)         -> Parsed           both
    expand_paths(paths)      -> [Path]           files and folders (walked) as `kernelscope ingest` takes them

The command line, the run store and the dashboard's upload all go through these, so they accept and
refuse exactly the same inputs. Every refusal is an ArtifactError naming the file and the problem.
"""

from __future__ import annotations

import io
import os
import re
import sqlite3
import tarfile
import zlib
from pathlib import Path
from typing import Callable

import polars as pl

from collectors import formats, progress
from collectors.decompress import gunzip_if_needed, too_large
from collectors.errors import ArtifactError
from collectors.limits import max_artifact_bytes
from collectors.schema import Parsed, finish_meta
from collectors.validate import validate

#: file suffixes beside samples that are sources and notes, not artifacts (skipped when a folder is
#: walked)
SKIP_SUFFIXES = {".cu", ".cuh", ".py", ".pyc", ".sh", ".md", ".txt"}
SKIP_NAMES = {"record_summary.json", "expected.json", "LICENSE", "manifest.json"}
# Python's compiled sources, beside the sources the walk skips
SKIP_DIRS = {"__pycache__"}


def detect_kind(data: bytes, name: str) -> str:
    """Recognise an (already decompressed) artifact from its name's telling suffix, else its content
    (collectors.formats: the registry's rules, in order)."""
    if not data:
        raise ArtifactError(name, "empty file")
    fmt = formats.detect(data, name)
    if fmt is None:
        raise ArtifactError(
            name,
            "not a recognised artifact: expected an Nsight Compute report (.ncu-rep) or CSV "
            "export, a PyTorch profiler trace (.json/.json.gz), an Nsight Systems SQLite export, "
            "or a kernelscope bench result",
        )
    return fmt.kind


def _parser(kind: str, name: str) -> Callable[[bytes, str], Parsed]:
    # resolved on first use, so that reading one format loads one parser (and the ncu reader only
    # when needed)
    fmt = formats.FORMATS.get(kind)
    if fmt is None:
        raise ArtifactError(name, f"no parser for artifact kind {kind!r}")
    return formats.resolve(fmt.parser)


#: what a parser may raise on input it does not expect: a refusal of the file, never a crash of the
#: caller
READ_ERRORS = (
    ValueError,
    KeyError,
    TypeError,
    IndexError,
    UnicodeDecodeError,
    OverflowError,
    RecursionError,
    AttributeError,
    pl.exceptions.PolarsError,
    sqlite3.Error,
    tarfile.TarError,
    zlib.error,
    EOFError,
)


def read_problem(e: BaseException, kind: str) -> str:
    """An exception raised while reading a file as `kind`, said as the problem with the file in user
    words (the exception's class only with KERNELSCOPE_DEBUG=1, `kernelscope --debug`)."""
    first = " ".join((str(e).splitlines() or [""])[0].split())[:160]
    col = re.search(r"column ['`\"]([^'`\"]{1,60})['`\"]", first)
    where = f" in column {col.group(1)!r}" if col else ""
    if isinstance(e, RecursionError):
        what = "nesting too deep: more levels of arrays or objects than any profiler writes"
    elif isinstance(e, OverflowError):
        digits = max((len(m) for m in re.findall(r"\d+", str(e))), default=0)
        what = (
            "a number out of range"
            + (f" ({digits} digits)" if digits > 18 else "")
            + f"{where}: more than a 64-bit value holds"
        )
    elif isinstance(e, UnicodeDecodeError):
        what = f"text that is not UTF-8 (byte 0x{e.object[e.start]:02x} at offset {e.start:,})"
    elif re.search(r"e\+?(1[89]|[2-9]\d|\d{3,})\b", first) or "too large" in first:
        what = f"a number out of range{where}: more than a 64-bit value holds"
    elif (
        isinstance(e, pl.exceptions.PolarsError)
        or "conversion" in first
        or "could not append" in first
    ):
        what = f"a value of the wrong type{where} (text where a number belongs, or a list where a value does)"
    elif isinstance(e, KeyError):
        what = f"a required field is missing ({first})"
    elif isinstance(e, sqlite3.Error):
        what = f"not a readable SQLite database ({first})"
    elif isinstance(e, (tarfile.TarError, zlib.error, EOFError)):
        what = f"a corrupt or truncated archive ({first})"
    else:
        what = (
            f"a value of an unexpected type or shape ({first})"
            if first
            else "a value of an unexpected type or shape"
        )
    if os.environ.get("KERNELSCOPE_DEBUG") == "1":
        what += f" [{type(e).__name__}: {first}]"
    return f"could not be read as {kind}: {what}"


def parse_bytes(data: bytes, name: str) -> Parsed:
    """Decompress if needed, recognise, parse and validate (collectors.validate). Raises
    ArtifactError on any bad input, in one line; within collectors.limits' bounds of size, rows,
    depth and time."""
    cap = max_artifact_bytes()
    if len(data) > cap:
        raise too_large(name, cap, "is")
    if data[:2] == b"\x1f\x8b":
        progress.report("inflating", len(data), None, "B")
    raw, inner = gunzip_if_needed(data, name)
    kind = detect_kind(raw, inner)
    progress.report(f"reading {Path(inner).name}", len(raw), None, "B")
    try:
        parsed = _parser(kind, name)(raw, name)
        finish_meta(parsed.kind, parsed.meta)
        return validate(parsed, name)
    except ArtifactError:
        raise
    except MemoryError:
        raise ArtifactError(name, f"too large to read as {kind} in this process's memory") from None
    except READ_ERRORS as e:
        raise ArtifactError(name, read_problem(e, kind)) from None


def read_path(path: str | os.PathLike) -> tuple[bytes, str]:
    """(bytes, name) of a file, or of a folder of Kineto rank traces packed as one deterministic tar."""
    p = Path(path)
    if p.is_dir():
        packed = pack_rank_folder(p)
        if packed is None:
            raise ArtifactError(
                str(p),
                "a folder is one run only when it holds PyTorch profiler traces of distinct ranks "
                "(other folders: `kernelscope ingest FOLDER` ingests each file)",
            )
        return packed
    if not p.exists():
        raise ArtifactError(str(p), "no such file or folder")
    try:
        if not p.is_file():
            raise ArtifactError(str(p), "not a regular file")
        cap = max_artifact_bytes()
        if p.stat().st_size > cap:
            raise too_large(str(p), cap, "is")
        return p.read_bytes(), p.name
    except OSError as e:
        raise ArtifactError(str(p), f"cannot read file ({e.strerror})") from None


def parse_path(path: str | os.PathLike, metrics: str = "all") -> Parsed:
    """A file or a rank folder, parsed in memory (nothing is stored); errors name the path as given.
    A PyTorch profiler trace file and an Nsight Compute raw-page CSV are read as streams
    (collectors.kineto.parse_file, collectors.ncu.parse_file), an Nsight Systems export where it
    lies (collectors.nsys.parse_file): none is held whole in memory. Whichever way it is read, the
    same bounds and checks apply as in parse_bytes (collectors.limits, collectors.validate), so
    `analyze FILE` refuses what `ingest FILE` refuses.

    metrics="analysis": of an Nsight Compute raw page, only the metrics the analysis reads are put
    in the metrics table (collectors.ncu_values.analysis_metric; the rows are still split and
    checked whole, and the row bound is that of the whole table): the same kernels, metadata and
    refusals, for `kernelscope analyze`, which shows no other metric. Such a Parsed is never stored
    (collectors.store)."""
    if metrics not in ("all", "analysis"):
        raise ValueError(f"metrics={metrics!r}: 'all' or 'analysis'")
    p = Path(path)
    kind = "artifact"
    try:
        if p.is_file():
            cap = max_artifact_bytes()
            if p.stat().st_size > cap:
                raise too_large(p.name, cap, "is")
            streamed = _streamed_parser(p, partial=metrics == "analysis")
            if streamed is not None:
                kind, read = streamed  # named in a refusal as parse_bytes names it
                parsed = read(p, p.name)
                finish_meta(parsed.kind, parsed.meta)
                return with_companion_log(validate(parsed, p.name), p)
        data, name = read_path(path)
        return with_companion_log(parse_bytes(data, name), p)
    except ArtifactError as e:
        raise ArtifactError(str(path), e.problem) from None
    except MemoryError:
        raise ArtifactError(
            str(path),
            "too large to read in this process's memory"
            if kind == "artifact"
            else f"too large to read as {kind} in this process's memory",
        ) from None
    except OSError as e:
        raise ArtifactError(str(path), f"cannot read file ({e.strerror or e})") from None
    except READ_ERRORS as e:
        raise ArtifactError(str(path), read_problem(e, kind)) from None


def companion_warnings(parsed: Parsed, path: str | os.PathLike) -> list[str]:
    """The warnings of the Nsight Compute console log saved beside a report (collectors.ncu_log):
    fewer launches than asked for, launches begun but missing, ncu's errors. [] for other kinds or
    without a log."""
    if parsed.kind != "ncu":
        return []
    from collectors.ncu_log import log_warnings, sibling_log

    log = sibling_log(path)
    if log is None:
        return []
    try:
        text = log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    ids = parsed.table("kernels")["id"].to_list()
    return [
        f"{w} ({log.name})" if log.name not in w else w for w in log_warnings(text, ids, log.name)
    ]


def with_companion_log(parsed: Parsed, path: str | os.PathLike) -> Parsed:
    """The parsed report with its console log's warnings (companion_warnings) among its own."""
    extra = companion_warnings(parsed, path)
    if extra:
        parsed.meta["warnings"] = [*(parsed.meta.get("warnings") or []), *extra]
    return parsed


def _streamed_parser(p: Path, partial: bool = False) -> tuple[str, Callable] | None:
    """(kind, the parser that reads file p from its path) for a format read as a stream (the
    registry's `streamed`, when its `stream_if` holds for the file); None for the others. partial:
    the format's partial reader (`streamed_partial`: an ncu raw page's analysis metrics only) where
    it has one."""
    from collectors.decompress import read_chunks

    try:
        head = next(read_chunks(p, p.name, step=1 << 16), b"")
    except OSError:
        return None
    inner = p.name[:-3] if p.name.endswith(".gz") else p.name
    fmt = formats.detect(head, inner) if head else None
    if fmt is None or fmt.streamed is None:
        return None
    if fmt.stream_if is not None and not fmt.stream_if(head, inner.lower(), is_gzip_file(p)):
        return None
    ref = fmt.streamed_partial if partial and fmt.streamed_partial else fmt.streamed
    return fmt.kind, formats.resolve(ref)


def is_gzip_file(p: Path) -> bool:
    with open(p, "rb") as f:
        return f.read(2) == b"\x1f\x8b"


def expand_paths(paths: list[str | os.PathLike]) -> list[Path]:
    """Files as given; folders walked recursively (sorted), skipping hidden files, sources/notes and
    Python's __pycache__. A folder that holds only Kineto traces of distinct ranks is returned
    itself, as one run."""

    def walk(d: Path) -> list[Path]:
        if pack_rank_folder(d, check_only=True) is not None:
            return [d]
        found: list[Path] = []
        for q in sorted(d.iterdir()):
            if q.name.startswith(".") or q.name in SKIP_DIRS:
                continue
            if q.is_dir():
                found.extend(walk(q))
            elif q.is_file() and q.suffix.lower() not in SKIP_SUFFIXES and q.name not in SKIP_NAMES:
                found.append(q)
        return found

    out: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            out.extend(walk(p))
        elif p.exists():
            out.append(p)
        else:
            raise ArtifactError(str(p), "no such file or folder")
    return out


# ---------------------------------------------------------------------------------------------------
# A folder of rank traces = one run
# ---------------------------------------------------------------------------------------------------


def _peek_rank(path: Path) -> int | None:
    """distributedInfo.rank of a Kineto trace, reading only its beginning; None if absent / not a trace."""
    try:
        with open(path, "rb") as f:
            head = f.read(1 << 20)
    except OSError:
        return None
    if head[:2] == b"\x1f\x8b":
        try:
            head = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(head, 1 << 20)
        except zlib.error:
            return None
    if (
        not head.lstrip()[:1] == b"{"
        or b'"traceEvents"' not in head
        and b'"schemaVersion"' not in head
    ):
        return None
    m = re.search(rb'"distributedInfo"\s*:\s*\{[^{}]*?"rank"\s*:\s*(\d+)', head)
    return int(m.group(1)) if m else None


def rank_files(folder: Path) -> list[Path] | None:
    """The rank trace files of a folder that holds only Kineto traces of distinct ranks (>= 2), else
    None. Hidden files, sources / notes (.py, .md, ...) and __pycache__ are ignored; a subfolder or
    any other file -> None."""
    folder = Path(folder)
    if not folder.is_dir():
        return None
    files = []
    for p in sorted(folder.iterdir()):
        if p.name.startswith(".") or p.name in SKIP_DIRS:
            continue
        if p.is_dir():
            return None
        if p.suffix.lower() in SKIP_SUFFIXES or p.name in SKIP_NAMES:
            continue
        if not (p.name.lower().endswith(".json") or p.name.lower().endswith(".json.gz")):
            return None
        files.append(p)
    if len(files) < 2:
        return None
    ranks = [_peek_rank(p) for p in files]
    if any(r is None for r in ranks) or len(set(ranks)) != len(ranks):
        return None
    return files


def pack_rank_folder(folder: Path, *, check_only: bool = False) -> tuple[bytes, str] | None:
    """A folder of Kineto traces of distinct ranks -> (tar bytes, "<folder>.kineto.tar"), else None.

    The tar is deterministic (sorted names, zero mtimes, owner 0, mode 0644), so the same folder is
    the same run id. check_only: only say whether it is such a folder (returns (b"", name) without
    reading)."""
    files = rank_files(folder)
    if files is None:
        return None
    name = f"{Path(folder).name}.kineto.tar"
    if check_only:
        return b"", name
    cap = max_artifact_bytes()
    if sum(p.stat().st_size for p in files) > cap:
        raise too_large(str(folder), cap, "holds")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tf:
        for p in files:
            data = p.read_bytes()
            info = tarfile.TarInfo(p.name)
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue(), name
