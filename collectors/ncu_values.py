"""Nsight Compute values and the raw page: units to base units, numbers as ncu prints them, and the
raw-page CSV (`ncu --page raw --csv`) read in batches of rows into the compact long metric table
(collectors.schema.METRIC_SCHEMA). Used by collectors.ncu, which reads every Nsight Compute format.
Start-up: imports that only some commands, pages or GPUs need sit inside the functions that use
them, so each command loads what it uses."""

from __future__ import annotations

import io
import re

import polars as pl

from collectors.errors import ArtifactError
from collectors.schema import NCU_ALTERNATE_METRICS, NCU_METRIC_COLUMNS


IDENTITY = [
    "ID",
    "Process ID",
    "Process Name",
    "Host Name",
    "Kernel Name",
    "Context",
    "Stream",
    "Block Size",
    "Grid Size",
    "Device",
    "CC",
]

# ---------------------------------------------------------------------------------------------
# units

# ,F401  one definition, importable without polars
from collectors.ncu_rep import ncu_to_base


_NA = {"", "n/a", "N/A", "nan", "NaN", "-"}


def _detect_decimal_comma(samples: list[str]) -> bool:
    """True for exports written in a locale with ',' as decimal point ("27.595.520" or "1,5")."""
    for s in samples:
        if re.fullmatch(r"-?\d{1,3}(\.\d{3}){2,}(,\d+)?", s) or re.fullmatch(r"-?\d+,\d{1,2}", s):
            return True
    return False


def _number(s: str, decimal_comma: bool) -> float | None:
    s = s.strip()
    if s in _NA:
        return None
    if decimal_comma:
        s = s.replace(".", "").replace(",", ".")
    else:
        s = s.replace(",", "")
    try:
        return float(s)
    except ValueError:
        return None


# rows read at a time: 8 MiB pieces raised the peak of 10,000 kernels by 70 MiB
RAW_BATCH_BYTES = 4 << 20
#: the metrics collectors.ncu._build reads besides the kernel columns' (GPU facts: SM count, memory
#: clock)
FACT_METRICS = ("launch__sm_count", "dram__cycles_elapsed.avg.per_second")
#: every metric _build reads: a non-finite value of these stays a number, so that
#: collectors.validate refuses the launch it lands in; any other non-finite value becomes text as
#: the batch is read (what validate would make of it, without rewriting a 22-million-row table
#: afterwards)
BUILD_METRICS = (
    frozenset(NCU_METRIC_COLUMNS.values())
    | frozenset(m for alts in NCU_ALTERNATE_METRICS.values() for m in alts)
    | frozenset(FACT_METRICS)
)


def analysis_metric(name: str) -> bool:
    """Whether the analysis reads this metric: one of BUILD_METRICS or a device attribute
    (collectors.ncu._build's GPU identity). `kernelscope analyze FILE` reads only these of a raw
    page (`keep=analysis_metric`): 220 of the 2,227 columns of an H200 export; the kernel table, the
    metadata and the sections are those of the whole file."""
    return name in BUILD_METRICS or name.startswith("device__attribute_")


#: a line of ncu's own output (==PROF==, ==WARNING== ...) or a blank line (no truncation)
_NOISE = re.compile(rb"\n(?:==|\r?\n)")


def _raw_batches(chunks, name: str):
    """The kernel rows of a raw page, given as a stream of byte chunks, in pieces of about
    RAW_BATCH_BYTES cut after a newline (ncu writes no newline inside a field); ==PROF== and other
    noise lines and blank lines dropped. Each piece is one copy of its chunks (bytes)."""
    carry, parts, size = b"", [], 0
    done = False
    while not done:
        nxt = next(chunks, None)
        if nxt is None:
            done = True
        else:
            parts.append(nxt)
            size += len(nxt)
            if size < RAW_BATCH_BYTES:
                continue
        buf = b"".join([carry, *parts])
        parts, size = [], 0
        cut = len(buf) if done else buf.rfind(b"\n") + 1
        if cut <= 0:
            carry = buf
            continue
        piece, carry = (buf, b"") if cut == len(buf) else (buf[:cut], buf[cut:])
        del buf
        if _NOISE.search(piece) or piece[:1] in (b"=", b"\n", b"\r"):  # one scan of the piece
            piece = b"\n".join(
                ln for ln in piece.split(b"\n") if ln.strip() and not ln.startswith(b"==")
            )
        if piece and not piece.isspace():  # (strip() would copy the piece)
            yield piece


def _byte_chunks(data, start: int):
    view = memoryview(data)
    for i in range(start, len(view), RAW_BATCH_BYTES):
        yield view[i : i + RAW_BATCH_BYTES]


def _split_rows(piece: bytes, width: int) -> pl.Series | None:
    """The fields of each row of a piece as one list of strings per row, by splitting every line at
    '","', when that is exact: each line starts and ends with a quote, splits into `width` fields,
    and the piece holds no other quote (2 x width per row), so that no field is unquoted or holds an
    escaped quote or a '","' of its own. This is what ncu writes. None otherwise: the CSV reader
    takes the piece."""
    if b"\r" in piece:
        return None
    try:
        lines = pl.Series(piece.rstrip(b"\n").decode().split("\n"))
    except UnicodeDecodeError:
        return None
    if (
        piece.count(b'"') != 2 * width * lines.len()
        or not (lines.str.starts_with('"') & lines.str.ends_with('"')).all()
    ):
        return None
    rows = lines.str.slice(1, lines.str.len_bytes() - 2).str.split('","')
    return rows if (rows.list.len() == width).all() else None


class _Tiles:
    """The per-metric series (name, unit, unit factor, whether a non-finite value becomes text)
    repeated launch by launch for the rows of a batch, with the row each value belongs to (`row`):
    built once for the most rows seen and sliced for fewer (row by row, the repetition for n rows is
    the start of the one for more)."""

    def __init__(self, metric_cols: list[str], units: list[str]):
        base = [ncu_to_base(1.0, u) for u in units]
        self.m = len(metric_cols)
        self.cols = pl.DataFrame(
            {
                "metric": pl.Series(metric_cols, dtype=pl.Categorical()),
                "f": pl.Series([f for f, _ in base], dtype=pl.Float64),
                "unit": pl.Series([u for _, u in base], dtype=pl.Categorical()),
                "keep_text": pl.Series(
                    [
                        not (c in BUILD_METRICS or c.startswith("device__attribute_"))
                        for c in metric_cols
                    ],
                    dtype=pl.Boolean,
                ),
            }
        )
        self.tiled = self.cols.clear().with_columns(row=pl.lit(0, pl.UInt32))

    def rows(self, n: int) -> pl.DataFrame:
        # one read: another thread may replace it (with fewer rows)
        tiled = self.tiled
        if tiled.height < n * self.m:
            i = pl.int_range(0, n * self.m, dtype=pl.UInt32)
            tiled = self.tiled = self.cols.select(pl.all().gather(i % self.m)).with_columns(
                row=i // self.m
            )
        return tiled.slice(0, n * self.m)


def _long_batch(ids: pl.Series, raw: pl.Series, tiles: _Tiles, dc: bool) -> pl.DataFrame:
    """One batch of raw-page rows -> long form (id, metric, value, text, unit), launch by launch in
    the header's metric order (as a report's metrics are): `raw` holds the metric fields of every
    row end to end. The values are parsed by one vectorised expression (thousands separators, unit
    factor), names, units and factors come from `tiles` (no string per value), and a text is kept
    only where a value is not a number and not n/a, or is not finite in a metric whose `keep_text`
    is set."""
    import math

    per = tiles.rows(ids.len())
    # decimal comma: "1.234" is a thousand, every value goes through the separators
    if dc:
        value, slow = (
            pl.Series("value", [], dtype=pl.Float64),
            pl.int_range(0, raw.len(), dtype=pl.UInt32, eager=True),
        )
    # plain numbers cast at once; those with separators, spaces or text afterwards
    else:
        value = raw.cast(pl.Float64, strict=False)
        slow = (value.is_null() & raw.is_not_null()).arg_true()
    text = pl.repeat(None, raw.len(), dtype=pl.Categorical(), eager=True)
    if slow.len():
        sub = raw.gather(slow)
        # thousands separators first; surrounding spaces only where that is not enough
        if not dc:
            fixed = sub.str.replace_all(",", "", literal=True).cast(pl.Float64, strict=False)
            if fixed.null_count():
                sub = sub.str.strip_chars()
                fixed = sub.str.replace_all(",", "", literal=True).cast(pl.Float64, strict=False)
            value = value.scatter(slow, fixed)
        else:
            sub = sub.str.strip_chars()
            fixed = (
                sub.str.replace_all(".", "", literal=True)
                .str.replace_all(",", ".", literal=True)
                .cast(pl.Float64, strict=False)
            )
            value = fixed
        if fixed.null_count():
            is_text = fixed.is_null() & ~sub.is_in(list(_NA))
            if is_text.any():
                text = text.scatter(
                    slow.filter(is_text), raw.gather(slow.filter(is_text)).cast(pl.Categorical())
                )
    value = value * per.get_column("f")
    # a NaN or infinity somewhere (or a sum past the largest float: checked)
    if not math.isfinite(value.sum()):
        bad = (value.is_not_null() & ~value.is_finite() & per.get_column("keep_text")).arg_true()
        # ncu's `nan` of an undefined derived metric: its text (as collectors.validate makes it)
        if bad.len():
            text = text.scatter(bad, value.gather(bad).cast(pl.String))
            value = value.scatter(bad, None)
    return pl.DataFrame(
        {
            "id": ids.gather(per.get_column("row")),
            "metric": per.get_column("metric"),
            "value": value,
            "text": text,
            "unit": per.get_column("unit"),
        }
    )


class _Incomplete(Exception):
    """A row of a piece that ends early: its index in the piece (the row number in the file needs
    the rows of the pieces before it)."""


def _wide_rows(piece: bytes, header: list[str], name: str) -> pl.DataFrame:
    """A piece read by polars' CSV reader (any quoting), one string column per header field, an
    empty field an empty string however it is quoted; refused when a row is short or long."""

    def short_row() -> None:
        import csv

        widths = (len(r) for r in csv.reader(io.StringIO(piece.decode("utf-8", errors="replace"))))
        short = next((i for i, w in enumerate(widths) if w < len(header)), None)
        if short is not None:
            raise _Incomplete(short)

    try:
        wide = pl.read_csv(
            io.BytesIO(piece),
            has_header=False,
            new_columns=header,
            infer_schema=False,
            quote_char='"',
        )
    except pl.exceptions.PolarsError as e:
        short_row()  # a piece whose first row is short
        raise ArtifactError(
            name,
            f"raw-page CSV rows do not match its header (truncated file?): "
            f"{str(e).splitlines()[0]}",
        ) from None
    if wide.width != len(header):
        raise ArtifactError(
            name, f"raw-page CSV rows have {wide.width} fields, its header {len(header)}"
        )
    # an empty unquoted field, or a row that ends early: count its fields
    if any(wide.null_count().row(0)):
        short_row()
        wide = wide.fill_null("")  # as a quoted empty field reads
    return wide


def _piece_fields(
    piece: bytes,
    header: list[str],
    split: bool,
    name: str,
    kept: list[int] | None = None,
    first: bool = False,
) -> tuple[pl.DataFrame, pl.Series, list[str] | None]:
    """(identity columns, the metric fields of every row end to end, row by row, the first row's
    metric fields when `first` is set) of one piece of a raw page. kept: the positions (among the
    metric columns) of the metrics to read, None for all; every row is split and checked whole
    either way."""
    k = len(IDENTITY)
    rows = _split_rows(piece, len(header)) if split else None
    # ncu's own quoting: every row split at once, one list of fields per row
    if rows is not None:
        head = pl.DataFrame(rows.list.head(k).to_list(), schema=IDENTITY, orient="row")
        row0 = rows[0].to_list()[k:] if first else None
        if kept == []:  # (an empty list explodes to a null per row)
            raw = pl.Series("raw", [], dtype=pl.String)
        else:
            raw = (
                rows.list.slice(k) if kept is None else rows.list.gather([k + i for i in kept])
            ).explode()
    else:
        wide = _wide_rows(piece, header, name)
        head = wide.select(IDENTITY)
        row0 = list(wide.row(0)[k:]) if first else None
        cols = header[k:] if kept is None else [header[k + i] for i in kept]
        raw = (
            pl.concat([wide.get_column(c) for c in cols], rechunk=True)
            if cols
            else pl.Series("raw", [], dtype=pl.String)
        )
        if wide.height > 1:  # column by column -> row by row
            n, m = wide.height, len(cols)
            i = pl.int_range(0, n * m, dtype=pl.UInt32, eager=True)
            raw = raw.gather(i % m * n + i // m)
    if not head["ID"].str.strip_chars().str.contains(r"^\d+$").all():
        raise ArtifactError(name, "raw-page CSV has a row whose ID is not a number")
    return head, raw, row0


#: pieces of a raw page read at once, one per thread (polars releases the GIL): on 2 cores the
#: 10,000-kernel page took 0.72x the wall time of one thread, for 0-9 % more CPU time and about 15
#: MiB more memory (alternated runs)
RAW_THREADS = 2


def _parse_raw(data, header: list[str], units: list[str], body_start: int, name: str, keep=None):
    """Wide raw page -> (identity dicts, long metric frame, the metric names: every launch has
    each). Read in pieces of rows, each vectorised with polars (thousands separators, unit scaling,
    n/a) and turned into the compact long form at once, so the text of every value never exists as
    strings all together (10,000 kernels x 2,227 metrics = 22 M values). The first piece decides the
    decimal mark (from every metric of its first row); the others are read RAW_THREADS at a time, in
    order. keep: a predicate on metric names; only the metrics it accepts are put in the long frame
    (None: all), the rows are split and checked whole all the same."""
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor

    if len(units) != len(header) or any(units[: len(IDENTITY)]):
        raise ArtifactError(
            name, "raw-page CSV: the second row is not the units row (truncated or edited file?)"
        )
    if len(set(header)) != len(header):
        raise ArtifactError(name, "raw-page CSV header repeats a column name")
    metric_cols = header[len(IDENTITY) :]
    kept = None if keep is None else [i for i, c in enumerate(metric_cols) if keep(c)]
    metric_units = units[len(IDENTITY) :]
    tiles = (
        _Tiles(metric_cols, metric_units)
        if kept is None
        else _Tiles([metric_cols[i] for i in kept], [metric_units[i] for i in kept])
    )
    split = header[: len(IDENTITY)] == IDENTITY
    idents, parts, row0 = [], [], 0
    dc: list[bool] = []

    def read(piece: bytes):
        head, raw, row0 = _piece_fields(piece, header, split, name, kept, first=not dc)
        if not dc:  # the first piece, read before any other starts
            dc.append(_detect_decimal_comma([v for v in row0 if v]))
        return head, _long_batch(head["ID"].str.strip_chars().cast(pl.Int32), raw, tiles, dc[0])

    def take(future) -> None:
        nonlocal row0
        try:
            head, part = future.result()
        except _Incomplete as e:
            raise ArtifactError(
                name,
                f"raw-page CSV kernel row {row0 + e.args[0] + 1} is incomplete (truncated file?)",
            ) from None
        row0 += head.height
        idents.extend(head.to_dicts())
        parts.append(part)

    chunks = (
        _byte_chunks(data, body_start) if isinstance(data, (bytes, bytearray, memoryview)) else data
    )
    with ThreadPoolExecutor(RAW_THREADS) as pool:
        pending: deque = deque()
        for piece in _raw_batches(iter(chunks), name):
            pending.append(pool.submit(read, piece))
            del piece
            if not dc:
                take(pending.popleft())
            while len(pending) > RAW_THREADS:
                take(pending.popleft())
        while pending:
            take(pending.popleft())
    if not parts:
        raise ArtifactError(name, "raw-page CSV has no kernel rows")
    long = pl.concat(parts, rechunk=False)
    parts.clear()
    return idents, long, metric_cols
