"""Nsight Compute values and the raw page: units to base units, numbers as ncu prints them, and the raw-page CSV
(`ncu --page raw --csv`) read in batches of rows into the compact long metric table (collectors.schema.METRIC_SCHEMA).
Used by collectors.ncu, which reads every Nsight Compute format."""
from __future__ import annotations

import io
import re

import polars as pl

from collectors.errors import ArtifactError
from collectors.schema import NCU_ALTERNATE_METRICS, NCU_METRIC_COLUMNS


IDENTITY = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream",
            "Block Size", "Grid Size", "Device", "CC"]

# ---------------------------------------------------------------------------------------------
# units

from collectors.ncu_rep import ncu_to_base  # noqa: E402,F401  one definition, importable without polars


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


RAW_BATCH_BYTES = 4 << 20    # rows read at a time: 8 MiB pieces raised the peak of 10,000 kernels by 70 MiB
#: the metrics collectors.ncu._build reads besides the kernel columns' (GPU facts: SM count, memory clock)
FACT_METRICS = ("launch__sm_count", "dram__cycles_elapsed.avg.per_second")
#: every metric _build reads: a non-finite value of these stays a number, so that collectors.validate refuses the
#: launch it lands in; any other non-finite value becomes text as the batch is read (what validate would make of it,
#: without rewriting a 22-million-row table afterwards)
BUILD_METRICS = frozenset(NCU_METRIC_COLUMNS.values()) | frozenset(NCU_ALTERNATE_METRICS.values()) | frozenset(
    FACT_METRICS)


#: a line of ncu's own output (==PROF==, ==WARNING== ...) or a blank line (no truncation)
_NOISE = re.compile(rb"\n(?:==|\r?\n)")


def _raw_batches(chunks, name: str):
    """The kernel rows of a raw page, given as a stream of byte chunks, in pieces of about RAW_BATCH_BYTES cut after
    a newline (ncu writes no newline inside a field); ==PROF== and other noise lines and blank lines dropped."""
    buf = bytearray()
    done = False
    while not done:
        nxt = next(chunks, None)
        if nxt is None:
            done = True
        else:
            buf += nxt
            if len(buf) < RAW_BATCH_BYTES:
                continue
        cut = len(buf) if done else buf.rfind(b"\n") + 1
        if cut <= 0:
            continue
        piece = bytes(buf[:cut])
        del buf[:cut]
        if _NOISE.search(piece) or piece[:1] in (b"=", b"\n", b"\r"):      # one scan of the piece
            piece = b"\n".join(ln for ln in piece.split(b"\n") if ln.strip() and not ln.startswith(b"=="))
        if piece.strip():
            yield piece


def _byte_chunks(data, start: int):
    view = memoryview(data)
    for i in range(start, len(view), RAW_BATCH_BYTES):
        yield view[i:i + RAW_BATCH_BYTES]


def _long_batch(wide: pl.DataFrame, metric_cols: list[str], metrics: pl.Series, units: pl.Series,
                factors: pl.Series, dc: bool, keep_text: pl.Series) -> pl.DataFrame:
    """One batch of raw-page rows -> long form (id, metric, value, text, unit), metric-major as `unpivot` orders it:
    the values of every metric column are put end to end and parsed by one vectorised expression (thousands
    separators, unit factor), names, units and factors are gathered from one series each (no string per value), and
    a text is kept only where a value is not a number and not n/a, or is not finite in a metric that `keep_text`
    marks (one boolean per metric column)."""
    import numpy as np
    n, m = wide.height, len(metric_cols)
    which = pl.Series(np.repeat(np.arange(m, dtype=np.uint32), n))
    ids = wide["ID"].str.strip_chars().cast(pl.Int32)
    df = pl.DataFrame({"id": ids.gather(pl.Series(np.tile(np.arange(n, dtype=np.uint32), m))),
                       "metric": metrics.gather(which),
                       "raw": pl.concat([wide.get_column(c) for c in metric_cols], rechunk=True),
                       "f": factors.gather(which), "unit": units.gather(which)})
    raw = df.get_column("raw")
    if dc:                 # decimal comma: "1.234" is a thousand, every value goes through the separators
        value, slow = pl.Series("value", [], dtype=pl.Float64), pl.int_range(0, raw.len(), dtype=pl.UInt32, eager=True)
    else:                  # plain numbers cast at once; those with separators, spaces or text afterwards
        value = raw.cast(pl.Float64, strict=False)
        slow = (value.is_null() & raw.is_not_null()).arg_true()
    text = pl.repeat(None, raw.len(), dtype=pl.Categorical(), eager=True)
    if slow.len():
        sub = raw.gather(slow).str.strip_chars()
        fixed = (sub.str.replace_all(".", "", literal=True).str.replace_all(",", ".", literal=True) if dc
                 else sub.str.replace_all(",", "", literal=True)).cast(pl.Float64, strict=False)
        value = fixed if dc else value.scatter(slow, fixed)
        is_text = fixed.is_null() & ~sub.is_in(list(_NA))
        if is_text.any():
            text = text.scatter(slow.filter(is_text), raw.gather(slow.filter(is_text)).cast(pl.Categorical()))
    value = value * df.get_column("f")
    bad = (value.is_not_null() & ~value.is_finite() & keep_text.gather(which)).arg_true()
    if bad.len():          # ncu's `nan` of an undefined derived metric: its text (as collectors.validate makes it)
        text = text.scatter(bad, value.gather(bad).cast(pl.String))
        value = value.scatter(bad, None)
    return df.select("id", "metric", value.alias("value"), text.alias("text"), "unit")


def _parse_raw(data, header: list[str], units: list[str], body_start: int, name: str):
    """Wide raw page -> (identity dicts, long metric frame). Read in batches of rows, each vectorised with polars
    (thousands separators, unit scaling, n/a column-wise) and turned into the compact long form at once, so the
    text of every value never exists as strings all together (10,000 kernels x 2,227 metrics = 22 M values)."""
    if len(units) != len(header) or any(units[: len(IDENTITY)]):
        raise ArtifactError(name, "raw-page CSV: the second row is not the units row (truncated or edited file?)")
    if len(set(header)) != len(header):
        raise ArtifactError(name, "raw-page CSV header repeats a column name")
    metric_cols = header[len(IDENTITY):]
    metrics = pl.Series("metric", metric_cols, dtype=pl.Categorical())
    base = [ncu_to_base(1.0, u) for u in units[len(IDENTITY):]]
    factors = pl.Series("f", [f for f, _ in base], dtype=pl.Float64)
    units_cat = pl.Series("unit", [u for _, u in base], dtype=pl.Categorical())
    keep_text = pl.Series([not (m in BUILD_METRICS or m.startswith("device__attribute_")) for m in metric_cols],
                          dtype=pl.Boolean)
    idents, parts, dc, row0 = [], [], None, 0
    chunks = _byte_chunks(data, body_start) if isinstance(data, (bytes, bytearray, memoryview)) else data
    for piece in _raw_batches(iter(chunks), name):
        try:
            wide = pl.read_csv(io.BytesIO(piece), has_header=False, new_columns=header, infer_schema=False,
                               quote_char='"')
        except pl.exceptions.PolarsError as e:
            raise ArtifactError(name, f"raw-page CSV rows do not match its header (truncated file?): "
                                      f"{str(e).splitlines()[0]}") from None
        if wide.width != len(header):
            raise ArtifactError(name, f"raw-page CSV rows have {wide.width} fields, its header {len(header)}")
        short = (wide.select(pl.any_horizontal(pl.all().is_null()).arg_true())
                 if any(wide.null_count().row(0)) else ())
        if len(short):
            raise ArtifactError(name, f"raw-page CSV kernel row {row0 + short.item(0, 0) + 1} is incomplete "
                                      "(truncated file?)")
        row0 += wide.height
        if not wide["ID"].str.strip_chars().str.contains(r"^\d+$").all():
            raise ArtifactError(name, "raw-page CSV has a row whose ID is not a number")
        if dc is None:
            sample = [v for v in wide.head(3).select(metric_cols).row(0)] if metric_cols else []
            dc = _detect_decimal_comma([v for v in sample if v])
        idents += wide.select(IDENTITY).to_dicts()
        parts.append(_long_batch(wide, metric_cols, metrics, units_cat, factors, dc, keep_text))
        del wide
    if not parts:
        raise ArtifactError(name, "raw-page CSV has no kernel rows")
    long = pl.concat(parts, rechunk=False)
    parts.clear()
    return idents, long
