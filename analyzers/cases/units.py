"""Units for the textbook cases: predictions carry base units; measurements may come in any listed unit.

Base units: B (bytes), s, FLOP, B/s, FLOP/s, FLOP/B, % (percent), × (ratio), count, way (bank-conflict
degree), ULP, "" (dimensionless number) and "text" (a word, not a number). "MiB" = 2^20 B, "MB" = 10^6 B,
"GB/s" = 10^9 B/s (datasheet convention).
"""
from __future__ import annotations

import math

# unit spelling -> (factor to the base unit, base unit)
_UNITS: dict[str, tuple[float, str]] = {
    "s": (1.0, "s"), "ms": (1e-3, "s"), "us": (1e-6, "s"), "µs": (1e-6, "s"), "μs": (1e-6, "s"),
    "ns": (1e-9, "s"),
    "B": (1.0, "B"), "byte": (1.0, "B"), "bytes": (1.0, "B"),
    "KiB": (2.0 ** 10, "B"), "MiB": (2.0 ** 20, "B"), "GiB": (2.0 ** 30, "B"), "TiB": (2.0 ** 40, "B"),
    "KB": (1e3, "B"), "kB": (1e3, "B"), "MB": (1e6, "B"), "GB": (1e9, "B"), "TB": (1e12, "B"),
    "B/s": (1.0, "B/s"), "KB/s": (1e3, "B/s"), "MB/s": (1e6, "B/s"), "GB/s": (1e9, "B/s"),
    "TB/s": (1e12, "B/s"), "MiB/s": (2.0 ** 20, "B/s"), "GiB/s": (2.0 ** 30, "B/s"),
    "FLOP": (1.0, "FLOP"), "MFLOP": (1e6, "FLOP"), "GFLOP": (1e9, "FLOP"), "TFLOP": (1e12, "FLOP"),
    "FLOP/s": (1.0, "FLOP/s"), "GFLOP/s": (1e9, "FLOP/s"), "TFLOP/s": (1e12, "FLOP/s"),
    "PFLOP/s": (1e15, "FLOP/s"), "GFLOPS": (1e9, "FLOP/s"), "TFLOPS": (1e12, "FLOP/s"),
    "FLOP/B": (1.0, "FLOP/B"),
    "%": (1.0, "%"), "fraction": (100.0, "%"),
    "×": (1.0, "×"), "x": (1.0, "×"), "ratio": (1.0, "×"),
    "count": (1.0, "count"), "way": (1.0, "way"), "ULP": (1.0, "ULP"), "": (1.0, ""),
    "text": (1.0, "text"),
}

BASE_UNITS = frozenset(base for _, base in _UNITS.values())


def to_base(value: float, unit: str) -> tuple[float, str]:
    """(value in the base unit, base unit). Raises ValueError for an unknown unit."""
    try:
        factor, base = _UNITS[unit]
    except KeyError:
        raise ValueError(f"unknown unit {unit!r}; known: {', '.join(sorted(k for k in _UNITS if k))}") from None
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
    "B": [(2.0 ** 40, "TiB"), (2.0 ** 30, "GiB"), (2.0 ** 20, "MiB"), (2.0 ** 10, "KiB"), (1.0, "B")],
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
    if unit == "B" and 2.0 ** 30 <= abs(value) < 16 * 2.0 ** 30 and not (value / 2.0 ** 30).is_integer():
        return f"{_num(round(value / 2.0 ** 20, 10))} MiB"      # the chapter writes 3096 MiB, not 3.02 GiB
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
    if unit == "B" and 2.0 ** 30 <= max_abs < 16 * 2.0 ** 30:
        return 2.0 ** 20, "MiB"
    if unit in _SCALES:
        for factor, name in _SCALES[unit]:
            if max_abs >= factor * 0.9995:
                return factor, name
        return _SCALES[unit][-1]
    return 1.0, unit
