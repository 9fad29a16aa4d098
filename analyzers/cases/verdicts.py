"""Verdicts: a prediction next to a measurement, in one readable sentence.

kinds:
- "agrees": within the tolerance stated by the prediction (widened by the measurement's spread), or on
  the right side of a bound;
- "differs-explained": outside it, but a known reason stated by the model applies (e.g. the L2 absorbs
  re-reads, so DRAM bytes < tile-model traffic; the data fit in L2, so the time beats the DRAM bound);
- "differs-unexplained": outside it and no known reason applies;
- "implausible": beyond a physical limit of the GPU (above its peak, or faster than even the L2 allows).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from analyzers.cases.model import Prediction
from analyzers.units import fmt, to_base

VERDICT_KINDS = ("agrees", "differs-explained", "differs-unexplained", "implausible")


@dataclass(frozen=True)
class Measurement:
    """A measured value: `unit` may be any unit of units.py (ms, GB/s, MiB …); `spread` (same unit) is the
    measurement's uncertainty (e.g. the standard deviation or half the IQR) when known. `quantity` names
    the prediction it measures (e.g. "l2_read_bytes"); `source` says where it comes from (ncu metric,
    microbenchmark run, trace, chapter)."""
    value: float
    unit: str
    source: str
    spread: float | None = None
    quantity: str | None = None
    gpu: str | None = None
    params: dict[str, Any] = field(default_factory=dict)

    def base(self) -> tuple[float, str]:
        return to_base(self.value, self.unit)

    def base_spread(self) -> float:
        return 0.0 if self.spread is None else abs(to_base(self.spread, self.unit)[0])

    def to_json(self) -> dict:
        return {"value": self.value, "unit": self.unit, "source": self.source, "spread": self.spread,
                "quantity": self.quantity, "gpu": self.gpu, "params": self.params or None}


@dataclass(frozen=True)
class Verdict:
    kind: str
    explanation: str
    ratio: float | None = None      # measured / predicted

    def to_json(self) -> dict:
        r = self.ratio if self.ratio is None or math.isfinite(self.ratio) else None
        return {"verdict": self.kind, "explanation": self.explanation, "ratio": r}


def verdict(prediction: Prediction, measurement: Measurement) -> Verdict:
    """Compare one measurement with one prediction. Raises ValueError when the units do not match
    (a time cannot be compared with a byte count) or the prediction is not a number."""
    if not prediction.numeric or prediction.value is None:
        raise ValueError(f"{prediction.label} is not a number; nothing to compare")
    m, unit = measurement.base()
    if unit != prediction.unit:
        raise ValueError(f"measurement in {measurement.unit!r} cannot be compared with "
                         f"{prediction.label} in {prediction.unit!r}")
    p = float(prediction.value)
    spread = measurement.base_spread()
    u = prediction.unit
    label = prediction.label
    ms, ps = fmt(m, u), fmt(p, u)
    src = f" ({measurement.source})" if measurement.source else ""

    if prediction.max_physical is not None and m - spread > prediction.max_physical * (1 + 1e-9):
        return Verdict("implausible",
                       f"{label}: measured {ms}{src} exceeds {prediction.physical or 'the physical limit'} "
                       f"({fmt(prediction.max_physical, u)}), which the hardware cannot do; check units and "
                       f"what was counted.", _ratio(m, p))
    if prediction.min_physical is not None and m + spread < prediction.min_physical * (1 - 1e-9):
        return Verdict("implausible",
                       f"{label}: measured {ms}{src} is below {prediction.physical or 'the physical limit'} "
                       f"({fmt(prediction.min_physical, u)}), which the hardware cannot do; check units and "
                       f"what was counted.", _ratio(m, p))
    if prediction.kind == "info":
        return Verdict("agrees", f"{label}: measured {ms}{src}; the model gives {ps} for information only.",
                       _ratio(m, p))

    ratio = _ratio(m, p)
    tol = prediction.rel_tol
    band = tol * abs(p) + spread
    kind = prediction.kind
    if kind in ("estimate", "exact"):
        ok = abs(m - p) <= band
        why = f"within the ±{tol:.0%} tolerance" + (" and the measurement's spread" if spread else "")
    elif kind == "lower_bound":
        ok = m >= p - band
        why = f"at or above the model's lower bound ({_times(ratio)} the bound)"
    elif kind == "upper_bound":
        ok = m <= p + band
        why = f"at or below the model's upper bound ({_times(ratio)} the bound)"
    elif kind == "range":
        lo, hi = prediction.lo, prediction.hi
        ok = (lo is None or m >= lo - spread) and (hi is None or m <= hi + spread)
        why = f"inside the model's range {fmt(lo, u)} … {fmt(hi, u)}"
    else:  # pragma: no cover - guarded by the catalog tests
        raise ValueError(f"unknown prediction kind {kind!r}")
    if ok:
        return Verdict("agrees", f"{label}: measured {ms}{src} vs predicted {ps}, {why}.", ratio)

    for ex in prediction.explanations:
        if ratio is not None and ex.lo <= ratio <= ex.hi:
            return Verdict("differs-explained",
                           f"{label}: measured {ms}{src} is {_times(ratio)} the predicted {ps}; {ex.text}.",
                           ratio)
    side = "range" if kind == "range" else ("bound" if kind.endswith("bound") else f"±{tol:.0%} tolerance")
    return Verdict("differs-unexplained",
                   f"{label}: measured {ms}{src} is {_times(ratio)} the predicted {ps}, outside the {side}, "
                   f"and no known reason applies; check the parameters, the clocks and what was measured.",
                   ratio)


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
