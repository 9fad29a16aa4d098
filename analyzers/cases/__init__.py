"""The textbook chapter "Operators and runtime" as executable models, per GPU, with verdicts and
claim checks.

More: docs/architecture.md, *analyzers.cases.__init__*.
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
