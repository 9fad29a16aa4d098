"""Plain-text tables and CSV for the command line (numbers formatted by analyzers.units.fmt_cell)."""

from __future__ import annotations

import csv
import io

import typer

from analyzers.units import fmt_cell


def _is_frame(rows) -> bool:
    return type(rows).__name__ == "DataFrame" and type(rows).__module__.startswith("polars")


def _rows(rows):
    """A dashboard.cli._app.Rows view as a DataFrame; anything else as it is."""
    return rows.collect() if hasattr(rows, "collect") and hasattr(rows, "index") else rows


def print_table(rows, cols) -> None:
    """rows: dicts or a polars DataFrame; cols: keys, or (key, header, scale) tuples; scale
    multiplies numbers for display (e.g. 1e-3 ns -> µs)."""
    spec = [(c, c, None) if isinstance(c, str) else c for c in cols]
    rows = _rows(rows)
    if _is_frame(rows):
        have = [k for k, _, _ in spec if k in rows.columns]
        body = (
            [
                [fmt_cell(r.get(k), s) for k, _, s in spec]
                for r in rows.select(have).iter_rows(named=True)
            ]
            if have
            else [[""] * len(spec)] * rows.height
        )
        empty = rows.height == 0
    else:
        body = [[fmt_cell(r.get(k), s) for k, _, s in spec] for r in rows]
        empty = not rows
    table = [[h for _, h, _ in spec]] + body
    widths = [max(len(row[i]) for row in table) for i in range(len(spec))]
    lines = []
    for n, row in enumerate(table):
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    if empty:
        lines.append("(none)")
    typer.echo("\n".join(lines))


def to_csv(rows) -> str:
    """CSV of dicts (the first row's keys) or of a polars DataFrame (its columns; nulls, NaN and infinities empty)."""
    rows = _rows(rows)
    if _is_frame(rows):
        if rows.height == 0:
            return ""
        import polars as pl

        floats = [c for c, t in rows.schema.items() if t.is_float()]
        if floats:
            rows = rows.with_columns(
                pl.when(pl.col(c).is_finite()).then(pl.col(c)).alias(c) for c in floats
            )
        lists = [c for c, t in rows.schema.items() if isinstance(t, pl.List)]
        # a list of texts (a launch's plausibility flags) as one cell
        if lists:
            rows = rows.with_columns(
                pl.col(c).cast(pl.List(pl.String)).list.join("; ") for c in lists
            )
        return rows.write_csv()
    if not rows:
        return ""
    buf = io.StringIO()
    keys = list(rows[0])
    w = csv.DictWriter(buf, fieldnames=keys, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in keys})
    return buf.getvalue()


def print_frame(df, cols) -> None:
    """A plain-text table of a polars frame whose cells are shown as they are (strings, integers),
    formatted by polars rather than cell by cell: a listing of 10,000 runs in a few milliseconds.
    cols: (key, header)."""
    import polars as pl

    keys = [k for k, _ in cols]
    heads = [h for _, h in cols]
    if df.height == 0:
        typer.echo("  ".join(heads) + "\n" + "  ".join("-" * len(h) for h in heads) + "\n(none)")
        return
    s = df.select([pl.col(k).cast(pl.String).fill_null("—").alias(k) for k in keys])
    widths = [max(len(h), int(s[k].str.len_chars().max() or 0)) for k, h in zip(keys, heads)]
    line = pl.concat_str(
        [pl.col(k).str.pad_end(w) for k, w in zip(keys, widths)], separator="  "
    ).str.strip_chars_end()
    body = s.select(line.alias("l"))["l"]
    out = [
        "  ".join(h.ljust(w) for h, w in zip(heads, widths)).rstrip(),
        "  ".join("-" * w for w in widths),
    ]
    typer.echo("\n".join(out) + "\n" + "\n".join(body.to_list()))
