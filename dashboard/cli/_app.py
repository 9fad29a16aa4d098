"""The Typer application object, shared options and output helpers; each command module registers on `app`.
Start-up: imports that only some commands, pages or GPUs need sit inside the functions that use
them, so each command loads what it uses."""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

app = typer.Typer(
    name="kernelscope",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # plain Click output: a usage error is the usage line and one "Error:" line
    rich_markup_mode=None,
    help="Kernelscope: GPU kernel measurements next to what the hardware and the textbook predict.",
)


@app.callback()
def _root() -> None:
    """Kernelscope: GPU kernel measurements next to what the hardware and the textbook predict."""


class Format(str, Enum):
    table = "table"
    json = "json"
    csv = "csv"


class ListFormat(str, Enum):
    table = "table"
    json = "json"


StoreOpt = Annotated[
    Optional[Path],
    typer.Option(
        "--store",
        help="Run store folder (default: $KERNELSCOPE_STORE or ~/.kernelscope/store).",
        envvar="KERNELSCOPE_STORE",
    ),
]


GpuOpt = Annotated[
    Optional[str],
    typer.Option(
        "--gpu",
        help="The GPU the file was recorded on, for files that do not name it (a "
        "`kernelscope gpus` name, e.g. H200, T4); it also replaces the GPU a file names.",
    ),
]


MaxMBOpt = Annotated[
    Optional[int],
    typer.Option(
        "--max-decompressed-mb",
        min=1,
        envvar="KERNELSCOPE_MAX_DECOMPRESSED_MB",
        help="Largest artifact accepted, after decompression, in MB (default 4096).",
    ),
]


def apply_limits(max_decompressed_mb: Optional[int]) -> None:
    """Set the artifact size limit for this process and the readers it starts (collectors.limits)."""
    import os

    from collectors.limits import ENV_ARTIFACT_MB

    if max_decompressed_mb:
        os.environ[ENV_ARTIFACT_MB] = str(max_decompressed_mb)


_cleaned: set = set()


def open_store(store: Optional[Path]):
    """The store (once per process: the temporary folders of interrupted ingests are removed first)."""
    from collectors.store import Store

    st = Store(store)
    if st.root not in _cleaned:
        _cleaned.add(st.root)
        st.housekeeping()
    return st


def open_source(store: Optional[Path], gpu: Optional[str] = None, keep_parsed: bool = False):
    from dashboard.core.source import Source

    return Source(open_store(store), gpu=gpu, keep_parsed=keep_parsed)


def load(
    path_or_run: str,
    store: Optional[Path],
    gpu: Optional[str] = None,
    src=None,
    metrics: str = "all",
):
    """(a stored Run or a Parsed file, its name): a path is parsed in memory (nothing stored) and
    refused as ingest would refuse it (one that cannot be analysed included); anything else is
    looked up as a run id of the store (a run that cannot be read is `RunNotFound`). `src`: the
    Source that checks the file (one made with keep_parsed keeps the analysis it computed, so the
    command reports it without computing it again). metrics: collectors.ingest.parse_path's
    ("analysis": a raw ncu page's metrics table holds only what the analysis reads, for a command
    that shows nothing else)."""
    import os

    from collectors import progress
    from collectors.errors import ArtifactError
    from collectors.ingest import parse_path

    p = Path(path_or_run)
    if p.exists():
        parsed = parse_path(p, metrics=metrics)
        progress.report("analysing")
        (src or open_source(store, gpu)).check(parsed, path_or_run)
        return parsed, p.name
    if p.suffix or os.sep in path_or_run:
        raise ArtifactError(path_or_run, "no such file")
    run = open_source(store).get(path_or_run)
    return run, run.source_name


def _json_default(o):
    if isinstance(o, Path):
        return str(o)
    if hasattr(o, "item"):
        return o.item()
    if isinstance(o, (set, tuple)):
        return list(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


_TABLE_MARK = "\x00kernelscope-table-"
#: rows of a table's first chunk of JSON; the later chunks hold as many rows as make about
#: TABLE_CHUNK_BYTES by the first one's size (at most 16 times as many). Chunks of about a megabyte
#: stay in the CPU's caches through the copies polars and Python make of them (polars' buffer, the
#: bytes object, the separators put in, the write) and reuse the memory of the one before: for
#: 174,240 kernel rows of 500 bytes, 114,000 page faults in all instead of 151,000 with 20,000-row
#: chunks, and about 10 % less CPU time for the whole `analyze --format json`
#: (docs/findings-kineto-reader.md).
TABLE_CHUNK_ROWS = 2_000
TABLE_CHUNK_BYTES = 1 << 20


class Rows:
    """Rows of a polars DataFrame picked and ordered by an index, with the output columns computed
    block by block: a large table is written without a reordered copy of it ever existing whole. A
    slice is cut from the block that holds it (BLOCK_ROWS rows gathered by one polars query): one
    query per chunk written cost 0.7 ms each, 60 ms for 174,240 kernel rows in 84 chunks, against 10
    ms for gathering them all."""

    BLOCK_ROWS = 32_768

    def __init__(self, frame, index, columns: list):
        self.frame, self.index, self.columns = frame, index, columns
        self._block = (0, None)  # (offset, the rows gathered from there)

    @property
    def height(self) -> int:
        return self.index.len()

    def gather(self, offset: int, length: int):
        return self.frame[self.index.slice(offset, length)].select(self.columns)

    def slice(self, offset: int, length: int):
        start, block = self._block
        end = min(offset + length, self.height)
        if block is None or offset < start or end > start + block.height:
            start, block = offset, self.gather(offset, max(length, self.BLOCK_ROWS))
            self._block = (start, block)
        return block.slice(offset - start, end - offset)

    def collect(self):
        return self.gather(0, self.height)


def _is_frame(o) -> bool:
    return (
        isinstance(o, Rows)
        or type(o).__name__ == "DataFrame"
        and type(o).__module__.startswith("polars")
    )


def _mark_tables(obj, tables: list, mark: str):
    """obj with every polars DataFrame (at any depth of dicts and lists) replaced by a marker string."""
    if _is_frame(obj):
        tables.append(obj)
        return f"{mark}{len(tables) - 1}"
    if isinstance(obj, dict):
        return {k: _mark_tables(v, tables, mark) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_mark_tables(v, tables, mark) for v in obj]
    return obj


def _write_table(write, df, indent: bytes) -> None:
    """A DataFrame as a JSON array of row objects, one row per line, written in chunks of about
    TABLE_CHUNK_BYTES by polars (NaN and infinities become null), so a table of millions of rows is
    never a list of dicts in Python."""
    import io

    if df.height == 0:
        write(b"[]")
        return
    write(b"[\n" + indent + b"  ")
    sep = b",\n" + indent + b"  "
    off, n = 0, TABLE_CHUNK_ROWS
    while off < df.height:
        buf = io.BytesIO()
        df.slice(off, n).write_ndjson(buf)
        rows = buf.getvalue().replace(b"\n", sep)  # JSON strings hold no raw newline
        del buf
        # the later chunks' rows, for about TABLE_CHUNK_BYTES
        if off == 0:
            off, n = n, max(n, min(16 * n, n * TABLE_CHUNK_BYTES // len(rows)))
        else:
            off += n
        write(memoryview(rows)[: len(rows) - len(sep)] if off >= df.height else rows)
    write(b"\n" + indent + b"]")


def echo_json(obj) -> None:
    """JSON on stdout, written by orjson (NaN and infinities become null), indented two spaces.
    polars DataFrames in obj are written as arrays of row objects, one row per line, streamed in
    chunks (`_write_table`)."""
    import orjson
    import secrets

    tables: list = []
    mark_text = (
        f"{_TABLE_MARK}{secrets.token_hex(6)}-"  # a fresh marker: no value of obj can hold it
    )
    marked = _mark_tables(obj, tables, mark_text)
    data = orjson.dumps(
        marked,
        default=_json_default,
        option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY,
    )
    out = sys.stdout
    buf = getattr(out, "buffer", None)
    if buf is not None:
        out.flush()
        write = buf.write
    else:  # a captured stream without a byte buffer (tests)

        def write(b) -> None:
            out.write(bytes(b).decode())

    if tables:
        # the marker as orjson escapes it, without the closing quote
        mark = orjson.dumps(mark_text)[:-1]
        pos = 0
        while True:
            at = data.find(mark, pos)
            if at < 0:
                break
            end = data.index(b'"', at + len(mark))
            i = int(data[at + len(mark) : end])
            line = data[data.rfind(b"\n", 0, at) + 1 : at]
            indent = line[: len(line) - len(line.lstrip(b" "))]
            write(data[pos:at])
            _write_table(write, tables[i], indent)
            pos = end + 1
        data = data[pos:]
    write(data + b"\n")
    if buf is not None:
        buf.flush()


def repo_root() -> Path:
    return Path(__file__).resolve().parents[2]
