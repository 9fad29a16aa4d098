"""Plain-text tables and CSV for the command line."""
from __future__ import annotations

import csv
import io
import math

import typer


def _fmt(v, scale) -> str:
    if v is None:
        return "—"
    if isinstance(v, float) and not math.isfinite(v):
        return "—"
    if scale is not None and isinstance(v, (int, float)) and not isinstance(v, bool):
        x = v * scale
        if abs(x) >= 100 or float(x).is_integer():
            return f"{x:,.0f}"
        if abs(x) >= 1:
            return f"{x:,.2f}"
        return f"{x:.3g}"
    if isinstance(v, float):
        return f"{v:.4g}"
    s = str(v)
    return s if len(s) <= 60 else s[:57] + "..."


def print_table(rows: list[dict], cols) -> None:
    """cols: keys, or (key, header, scale) tuples; scale multiplies numbers for display (e.g. 1e-3 ns -> µs)."""
    spec = [(c, c, None) if isinstance(c, str) else c for c in cols]
    table = [[h for _, h, _ in spec]] + [[_fmt(r.get(k), s) for k, _, s in spec] for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(spec))]
    for n, row in enumerate(table):
        typer.echo("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
        if n == 0:
            typer.echo("  ".join("-" * w for w in widths))
    if not rows:
        typer.echo("(none)")


def to_csv(rows: list[dict]) -> str:
    if not rows:
        return ""
    buf = io.StringIO()
    keys = list(rows[0])
    w = csv.DictWriter(buf, fieldnames=keys, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in keys})
    return buf.getvalue()
