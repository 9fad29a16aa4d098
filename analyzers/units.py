"""Units: the one unit table, conversions, and every number formatter the CLI, the pages and the
exports use.

Tables and predictions carry base units: B (bytes), s or ns (in column names: `_ns`), FLOP, B/s,
FLOP/s, FLOP/B, % (percent), × (ratio), count, way (bank-conflict degree), ULP, "" (dimensionless)
and "text" (a word, not a number). Measurements may come in any listed unit. "MiB" = 2^20 B, "MB" =
10^6 B, "GB/s" = 10^9 B/s (the datasheet convention).

More: docs/architecture.md, *analyzers.units*.
"""

from __future__ import annotations

import math

# unit spelling -> (factor to the base unit, base unit)
_UNITS: dict[str, tuple[float, str]] = {
    "s": (1.0, "s"),
    "ms": (1e-3, "s"),
    "us": (1e-6, "s"),
    "µs": (1e-6, "s"),
    "μs": (1e-6, "s"),
    "ns": (1e-9, "s"),
    "B": (1.0, "B"),
    "byte": (1.0, "B"),
    "bytes": (1.0, "B"),
    "KiB": (2.0**10, "B"),
    "MiB": (2.0**20, "B"),
    "GiB": (2.0**30, "B"),
    "TiB": (2.0**40, "B"),
    "KB": (1e3, "B"),
    "kB": (1e3, "B"),
    "MB": (1e6, "B"),
    "GB": (1e9, "B"),
    "TB": (1e12, "B"),
    "B/s": (1.0, "B/s"),
    "KB/s": (1e3, "B/s"),
    "MB/s": (1e6, "B/s"),
    "GB/s": (1e9, "B/s"),
    "TB/s": (1e12, "B/s"),
    "MiB/s": (2.0**20, "B/s"),
    "GiB/s": (2.0**30, "B/s"),
    "FLOP": (1.0, "FLOP"),
    "MFLOP": (1e6, "FLOP"),
    "GFLOP": (1e9, "FLOP"),
    "TFLOP": (1e12, "FLOP"),
    "FLOP/s": (1.0, "FLOP/s"),
    "GFLOP/s": (1e9, "FLOP/s"),
    "TFLOP/s": (1e12, "FLOP/s"),
    "PFLOP/s": (1e15, "FLOP/s"),
    "GFLOPS": (1e9, "FLOP/s"),
    "TFLOPS": (1e12, "FLOP/s"),
    "FLOP/B": (1.0, "FLOP/B"),
    "%": (1.0, "%"),
    "fraction": (100.0, "%"),
    "×": (1.0, "×"),
    "x": (1.0, "×"),
    "ratio": (1.0, "×"),
    "count": (1.0, "count"),
    "way": (1.0, "way"),
    "ways": (1.0, "way"),
    "ULP": (1.0, "ULP"),
    "": (1.0, ""),
    # counts of a launch's things (analyzers.quantities): sectors per request, registers per thread,
    # a block's threads, a grid's blocks
    "sectors": (1.0, "count"),
    "registers": (1.0, "count"),
    "threads": (1.0, "count"),
    "blocks": (1.0, "count"),
    "text": (1.0, "text"),
}

BASE_UNITS = frozenset(base for _, base in _UNITS.values())


def to_base(value: float, unit: str) -> tuple[float, str]:
    """(value in the base unit, base unit). Raises ValueError for an unknown unit."""
    try:
        factor, base = _UNITS[unit]
    except KeyError:
        raise ValueError(
            f"unknown unit {unit!r}; known: {', '.join(sorted(k for k in _UNITS if k))}"
        ) from None
    return float(value) * factor, base


def convert(value: float, unit: str, to_unit: str) -> float:
    """`value` in `unit` expressed in `to_unit` (same dimension), e.g. convert(1, 'MiB', 'KiB') == 1024."""
    v, base = to_base(value, unit)
    f, base2 = _UNITS.get(to_unit, (None, None))
    if f is None or base2 != base:
        raise ValueError(f"cannot convert {unit!r} to {to_unit!r}")
    return v / f


def dimension(unit: str) -> str:
    return to_base(1.0, unit)[1]


def _pick(value: float, steps: list[tuple[float, str]]) -> tuple[float, str]:
    a = abs(value)
    for factor, name in steps:
        if a >= factor * 0.9995:
            return value / factor, name
    factor, name = steps[-1]
    return value / factor, name


_SCALES: dict[str, list[tuple[float, str]]] = {
    "B": [(2.0**40, "TiB"), (2.0**30, "GiB"), (2.0**20, "MiB"), (2.0**10, "KiB"), (1.0, "B")],
    "s": [(1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns")],
    "B/s": [(1e12, "TB/s"), (1e9, "GB/s"), (1e6, "MB/s"), (1.0, "B/s")],
    "FLOP/s": [(1e15, "PFLOP/s"), (1e12, "TFLOP/s"), (1e9, "GFLOP/s"), (1.0, "FLOP/s")],
    "FLOP": [(1e12, "TFLOP"), (1e9, "GFLOP"), (1e6, "MFLOP"), (1.0, "FLOP")],
}


def _num(v: float) -> str:
    if v == 0:
        return "0"
    if float(v).is_integer() and abs(v) < 1e7:
        return f"{int(v)}"
    s = f"{v:.4g}"
    if "e" in s:
        return s
    return s


def fmt(value, unit: str) -> str:
    """Readable text for a value in a base unit: fmt(3246391296, 'B') == '3096 MiB'."""
    if value is None:
        return "n/a"
    if unit == "text" or isinstance(value, str):
        return str(value)
    if isinstance(value, float) and math.isinf(value):
        return "never" if value > 0 else "-inf"
    if isinstance(value, float) and math.isnan(value):
        return "n/a"
    if unit == "B" and 2.0**30 <= abs(value) < 16 * 2.0**30 and not (value / 2.0**30).is_integer():
        return (
            f"{_num(round(value / 2.0**20, 10))} MiB"  # the chapter writes 3096 MiB, not 3.02 GiB
        )
    if unit in _SCALES:
        v, u = _pick(float(value), _SCALES[unit])
        return f"{_num(round(v, 10))} {u}"
    if unit == "%":
        return f"{value:.3g} %" if abs(value) < 100 else f"{value:.4g} %"
    if unit in ("×",):
        return f"{value:.3g}×"
    if unit == "count":
        return _num(value)
    if unit == "way":
        return f"{_num(value)}-way"
    if unit == "":
        return f"{value:.10g}"
    return f"{_num(value)} {unit}"


def scale_for(max_abs: float, unit: str) -> tuple[float, str]:
    """(divisor, display unit) to plot values of `unit` whose largest magnitude is `max_abs`:
    scale_for(3.2e9, 'B') == (2**20, 'MiB')."""
    if unit == "B" and 2.0**30 <= max_abs < 16 * 2.0**30:
        return 2.0**20, "MiB"
    if unit in _SCALES:
        for factor, name in _SCALES[unit]:
            if max_abs >= factor * 0.9995:
                return factor, name
        return _SCALES[unit][-1]
    return 1.0, unit


# ---------------------------------------------------------------------------------------------------
# Display formatting (3 significant digits, "—" for a missing value)
# ---------------------------------------------------------------------------------------------------

MISSING = "—"


def number_of(row: dict, key: str) -> float | None:
    """row[key] as a finite float; None when absent, null, a bool, NaN or infinite."""
    v = row.get(key)
    if v is None or isinstance(v, bool):
        return None
    v = float(v)
    return v if math.isfinite(v) else None


def missing(x) -> bool:
    return x is None or (isinstance(x, float) and not math.isfinite(x))


def sig3(x: float, digits: int = 3) -> str:
    """Three significant digits, thousands separators, no exponent for ordinary sizes."""
    if x == 0:
        return "0"
    mag = math.floor(math.log10(abs(x)))
    decimals = max(0, digits - 1 - mag)
    return f"{x:,.{decimals}f}"


def fmt_ns(ns) -> str:
    """A duration in ns as ns, µs, ms or s."""
    if missing(ns):
        return MISSING
    a = abs(ns)
    for scale, unit in ((1e9, "s"), (1e6, "ms"), (1e3, "µs")):
        if a >= scale:
            return f"{sig3(ns / scale)} {unit}"
    return f"{sig3(ns)} ns"


def fmt_bytes(b) -> str:
    """A size in bytes with binary prefixes (KiB, MiB, GiB)."""
    if missing(b):
        return MISSING
    a = abs(b)
    for scale, unit in ((2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
        if a >= scale:
            return f"{sig3(b / scale)} {unit}"
    return f"{b:,.0f} B"


def fmt_rate(x, unit: str) -> str:
    """A rate in base units per second (B/s, FLOP/s) with decimal prefixes: GB/s, TB/s, TFLOP/s."""
    if missing(x):
        return MISSING
    base = unit.removesuffix("/s")
    a = abs(x)
    for scale, p in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if a >= scale:
            return f"{sig3(x / scale)} {p}{base}/s"
    return f"{sig3(x)} {base}/s"


def fmt_pct(x, digits: int = 1) -> str:
    """x in percent (already x100)."""
    return MISSING if missing(x) else f"{x:.{digits}f} %"


def fmt_short(x, unit: str) -> str:
    """A value in a base unit (s, ns, B, B/s, FLOP/s, FLOP, %, count) formatted for reading."""
    if missing(x):
        return MISSING
    if unit == "s":
        return fmt_ns(x * 1e9)
    if unit == "ns":
        return fmt_ns(x)
    if unit == "fraction":
        return fmt_pct(100 * x)
    if unit == "1/s":
        return f"{x:,.0f} /s"
    if unit in ("B", "bytes"):
        return fmt_bytes(x)
    if unit.endswith("/s"):
        return fmt_rate(x, unit)
    if unit == "%":
        return fmt_pct(x)
    if unit in ("FLOP",):
        return fmt_rate(x, "FLOP/s").removesuffix("/s")
    if unit in ("", "1", "count"):
        return sig3(x) if isinstance(x, float) and not float(x).is_integer() else f"{x:,.0f}"
    return f"{sig3(x)} {unit}"


def fmt_cell(v, scale: float | None = None) -> str:
    """A command-line table cell: a number times `scale` (e.g. 1e-3: ns -> µs), else the value as text."""
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return MISSING
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
