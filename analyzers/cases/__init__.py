"""The textbook chapter "Operators and runtime" as executable models, per GPU, with verdicts and
claim checks.

What other code calls:
- `all_cases()`, `get_case(id)`, `CASE_IDS`: the catalog (ids of chapter5-cases.md);
  `Case.to_json()`.
- `evaluate(case_id, gpu=None, params=None) -> Evaluation`: predictions
  (`Evaluation.predictions[key]`: `Prediction(value, unit, label, kind, …)` in base units) for a GPU
  name/GPUSpec and parameter overrides (values or strings: "64", "2/3", "ln4"). KeyError: unknown
  case/GPU; CaseError (ValueError): bad parameter.
- `Measurement(value, unit, source, spread=None, quantity=KEY, gpu=None)` and `compare(evaluation,
  [measurements]) -> [Comparison]` / `verdict(prediction, measurement) -> Verdict`.
  `measurements_from_ncu(case_id, {metric: value})` turns Nsight Compute metrics into Measurements.
- `sweep(evaluation)`: chart rows {x, series, value, unit}.
- `figure_checks()`, `chapter_checks()`: the chapter's own figures reproduced / judged.
- `claims(measured=None)`: the second seed's claims with computed verdicts.
- `numerics`: the CPU-run experiments (non-associativity, segment-sum ULP, online softmax).
"""

from analyzers.cases.catalog import (
    CASE_IDS,
    Comparison,
    FigureCheck,
    all_cases,
    check_figure,
    compare,
    evaluate,
    figure_checks,
    get_case,
    measurements_from_ncu,
    sweep,
)
from analyzers.cases.checks import ChapterCheck, chapter_checks
from analyzers.cases.claims import CLAIM_VERDICTS, ClaimCheck, claims
from analyzers.cases.model import Case, CaseError, Evaluation, Figure, Measure, Param, Prediction
from analyzers.cases.s52_operator import bank_conflicts
from analyzers.units import fmt, to_base
from analyzers.cases.verdicts import VERDICT_KINDS, Measurement, Verdict, verdict

__all__ = [
    "CASE_IDS",
    "CLAIM_VERDICTS",
    "VERDICT_KINDS",
    "Case",
    "CaseError",
    "ChapterCheck",
    "ClaimCheck",
    "Comparison",
    "Evaluation",
    "Figure",
    "FigureCheck",
    "Measure",
    "Measurement",
    "Param",
    "Prediction",
    "Verdict",
    "all_cases",
    "bank_conflicts",
    "chapter_checks",
    "check_figure",
    "claims",
    "compare",
    "evaluate",
    "figure_checks",
    "fmt",
    "get_case",
    "measurements_from_ncu",
    "sweep",
    "to_base",
    "verdict",
]
