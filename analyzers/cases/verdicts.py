"""Verdicts: a prediction next to a measurement, in one readable sentence.

More: docs/architecture.md, *analyzers.cases.verdicts*.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

from analyzers.cases.model import Prediction
from analyzers.units import fmt, to_base

VERDICT_KINDS = ("agrees", "differs-explained", "differs-unexplained", "implausible")


@dataclass(frozen=True)
class Measurement:
    """A measured value: `unit` may be any unit of units.py (ms, GB/s, MiB …); `spread` (same unit)
    is the measurement's uncertainty (e.g. the standard deviation or half the IQR) when known.
    `quantity` names the prediction it measures (e.g. "l2_read_bytes"); `source` says where it comes
    from (ncu metric, microbenchmark run, trace, chapter). `counters`: other values measured on the
    same kernel or run (names of analyzers.cases.counters, base units), which a prediction's
    mechanisms read."""

    value: float
    unit: str
    source: str
    spread: float | None = None
    quantity: str | None = None
    gpu: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    counters: Mapping[str, float] = field(default_factory=dict)

    def base(self) -> tuple[float, str]:
        return to_base(self.value, self.unit)

    def base_spread(self) -> float:
        return 0.0 if self.spread is None else abs(to_base(self.spread, self.unit)[0])

    def to_json(self) -> dict:
        return {
            "value": self.value,
            "unit": self.unit,
            "source": self.source,
            "spread": self.spread,
            "quantity": self.quantity,
            "gpu": self.gpu,
            "params": self.params or None,
            "counters": dict(self.counters) or None,
        }


@dataclass(frozen=True)
class Verdict:
    kind: str
    explanation: str
    ratio: float | None = None  # measured / predicted
    mechanism: str | None = None  # the mechanism that explains the difference
    accounted: float | None = None  # share of the gap (measured − predicted) it accounts for

    def to_json(self) -> dict:
        r = self.ratio if self.ratio is None or math.isfinite(self.ratio) else None
        return {
            "verdict": self.kind,
            "explanation": self.explanation,
            "ratio": r,
            "mechanism": self.mechanism,
            "accounted": self.accounted,
        }


def verdict(prediction: Prediction, measurement: Measurement) -> Verdict:
    """Compare one measurement with one prediction. Raises ValueError when the units do not match (a
    time cannot be compared with a byte count), the prediction is not a number, or it is for
    information."""
    if not prediction.numeric or prediction.value is None:
        raise ValueError(f"{prediction.label} is not a number; nothing to compare")
    if prediction.kind == "info":
        raise ValueError(
            f"{prediction.label} ({prediction.key}) is shown for information only; a model "
            "quantity with a tolerance or a bound is needed for a verdict"
        )
    m, unit = measurement.base()
    if unit != prediction.unit:
        raise ValueError(
            f"measurement in {measurement.unit!r} cannot be compared with "
            f"{prediction.label} in {prediction.unit!r}"
        )
    p = float(prediction.value)
    spread = measurement.base_spread()
    u = prediction.unit
    label = prediction.label
    ms, ps = fmt(m, u), fmt(p, u)
    src = f" ({measurement.source})" if measurement.source else ""
    ratio = _ratio(m, p)

    if prediction.max_physical is not None and m - spread > prediction.max_physical * (1 + 1e-9):
        return Verdict(
            "implausible",
            f"{label}: measured {ms}{src} exceeds {prediction.physical or 'the physical limit'} "
            f"({fmt(prediction.max_physical, u)}), which the hardware cannot do; check units and "
            "what was counted.",
            ratio,
        )
    if prediction.min_physical is not None and m + spread < prediction.min_physical * (1 - 1e-9):
        return Verdict(
            "implausible",
            f"{label}: measured {ms}{src} is below {prediction.physical or 'the physical limit'} "
            f"({fmt(prediction.min_physical, u)}), which the hardware cannot do; check units and "
            "what was counted.",
            ratio,
        )

    tol = prediction.rel_tol
    band = tol * abs(p) + spread
    kind = prediction.kind
    f = prediction.bound_factor
    if kind in ("estimate", "exact"):
        ok = abs(m - p) <= band
        why = f"within the ±{tol:.0%} tolerance" + (
            " and the measurement's spread" if spread else ""
        )
        side = f"±{tol:.0%} tolerance"
    elif kind == "lower_bound":
        ok = p - band <= m <= p * f + spread
        why = (
            f"at or above the model's lower bound and within {f:g}× it ({_times(ratio)} the bound)"
        )
        side = (
            "bound"
            if m < p - band
            else f"{f:g}× band above the bound (a bound says nothing this far from it)"
        )
    elif kind == "upper_bound":
        ok = p / f - spread <= m <= p + band
        why = f"at or below the model's upper bound and within 1/{f:g} of it ({_times(ratio)} the bound)"
        side = (
            "bound"
            if m > p + band
            else f"band down to 1/{f:g} of the bound (a bound says nothing this far from it)"
        )
    elif kind == "range":
        lo, hi = prediction.lo, prediction.hi
        ok = (lo is None or m >= lo - spread) and (hi is None or m <= hi + spread)
        why = f"inside the model's range {fmt(lo, u)} … {fmt(hi, u)}"
        side = "range"
    else:  # pragma: no cover - guarded by the catalog tests
        raise ValueError(f"unknown prediction kind {kind!r}")
    if ok:
        return Verdict("agrees", f"{label}: measured {ms}{src} vs predicted {ps}, {why}.", ratio)

    partial, missing = [], []
    for mech in prediction.mechanisms:
        lacking = [n for n in mech.needs if measurement.counters.get(n) is None]
        if lacking:
            missing.append(f"{mech.name} (needs {', '.join(lacking)})")
            continue
        try:
            q = mech.predict(measurement.counters)
        except (ZeroDivisionError, ValueError):
            q = None
        if q is None or not math.isfinite(q):
            continue
        share = (q - p) / (m - p) if m != p else None
        with_it = f"with it the model gives {fmt(q, u)}"
        if abs(m - q) <= mech.tol * abs(q) + spread:
            acc = f", {share:.0%} of the gap" if share is not None else ""
            return Verdict(
                "differs-explained",
                f"{label}: measured {ms}{src} is {_times(ratio)} the predicted {ps}; {mech.name}, "
                f"computed from the measurement's counters ({', '.join(mech.needs)}), accounts for "
                f"it: {with_it}{acc} (within ±{mech.tol:.0%}).",
                ratio,
                mech.name,
                share,
            )
        partial.append(
            f"{mech.name} would give {fmt(q, u)}"
            + (f" ({share:.0%} of the gap)" if share is not None else "")
        )
    for ex in prediction.explanations:
        if ratio is not None and ex.lo <= ratio <= ex.hi:
            return Verdict(
                "differs-explained",
                f"{label}: measured {ms}{src} is {_times(ratio)} the predicted {ps}; {ex.text} "
                f"(the model allows {ex.lo:.3g}–{ex.hi:.3g}× for it).",
                ratio,
                ex.text,
            )
    tail = ""
    near = [f"{ex.text} would need {ex.lo:.3g}–{ex.hi:.3g}×" for ex in prediction.explanations]
    if near:
        tail += " Does not apply: " + "; ".join(near) + "."
    if partial:
        tail += " Not enough: " + "; ".join(partial) + "."
    if missing:
        tail += " Not measured: " + "; ".join(missing) + "."
    return Verdict(
        "differs-unexplained",
        f"{label}: measured {ms}{src} is {_times(ratio)} the predicted {ps}, outside the {side}, "
        "and no known reason applies; check the parameters, the clocks and what was measured."
        + tail,
        ratio,
    )


def _ratio(m: float, p: float) -> float | None:
    if p == 0:
        return None if m == 0 else math.inf
    return m / p


def _times(r: float | None) -> str:
    if r is None:
        return "n/a×"
    if not math.isfinite(r):
        return "∞×"
    return f"{r:.3g}×"
