"""The catalog of textbook cases (ids of ../shared/reference/chapter5-cases.md) and the functions
the CLI, the dashboard and the microbenchmarks call:

- `all_cases()`, `get_case(case_id)`;
- `evaluate(case_id, gpu=None, params=None) -> Evaluation` (gpu: name or GPUSpec; params: name ->
  value, strings allowed);
- `compare(evaluation, measurements) -> list[Comparison]` (each measurement names its `quantity`);
- `measurements_from_ncu(case_id, metrics)`: Nsight Compute metric values -> Measurements;
- `sweep(evaluation) -> rows` for the case's chart;
- `figure_checks()`: every chapter figure reproduced by its model, or (measured figures) judged by a
  verdict.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from analyzers.cases import (
    s51_submission,
    s52_operator,
    s53_fusion,
    s54_compilers,
    s55_runtime,
    s56_request,
)
from analyzers.errors import UnknownName
from analyzers.cases.model import Case, CaseError, Evaluation, Figure, Prediction, run_model
from analyzers.units import convert, fmt, to_base
from analyzers.cases.verdicts import Measurement, Verdict, verdict
from analyzers.gpus import GPUSpec

_ALL: tuple[Case, ...] = (
    s51_submission.CASES
    + s52_operator.CASES
    + s53_fusion.CASES
    + s54_compilers.CASES
    + s55_runtime.CASES
    + s56_request.CASES
)

CASE_IDS: tuple[str, ...] = tuple(c.id for c in _ALL)
_BY_ID = {c.id: c for c in _ALL}
assert len(_BY_ID) == len(_ALL), "duplicate case id"


def all_cases() -> list[Case]:
    return list(_ALL)


def get_case(case_id: str) -> Case:
    try:
        return _BY_ID[case_id]
    except (KeyError, TypeError):
        raise UnknownName("textbook case", case_id, "known: " + ", ".join(CASE_IDS)) from None


def evaluate(
    case_id: str | Case,
    gpu: str | GPUSpec | None = None,
    params: Mapping[str, Any] | None = None,
    ceilings: Mapping[str, Any] | None = None,
) -> Evaluation:
    """Evaluate a case's model for a GPU (default: the GPU the chapter quoted it for, else the H200)
    with parameter overrides. `ceilings` (resource -> analyzers.ceilings.Ceiling: the GPU's measured
    ceilings, looked up by the caller) replace the spec-derived defaults of the rate parameters that
    name one. Unknown case or GPU → KeyError; bad parameters → CaseError (a ValueError)."""
    case = case_id if isinstance(case_id, Case) else get_case(case_id)
    g = case.gpu(gpu)
    p = case.resolve(g, params, ceilings)
    return run_model(case, g, p)


# ------------------------------------------------------------------------------------------------
# Measurements and verdicts
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Comparison:
    quantity: str
    prediction: Prediction
    measurement: Measurement
    verdict: Verdict

    def to_json(self) -> dict:
        return {
            "quantity": self.quantity,
            "predicted": {
                "value": self.prediction.value,
                "unit": self.prediction.unit,
                "display": self.prediction.display,
            },
            "measured": self.measurement.to_json(),
            "measured_display": fmt(self.measurement.base()[0], self.prediction.unit),
            **self.verdict.to_json(),
        }


def compare(evaluation: Evaluation, measurements: Iterable[Measurement]) -> list[Comparison]:
    """A verdict for each measurement whose `quantity` the evaluation predicts (others raise KeyError)."""
    out = []
    for m in measurements:
        if not m.quantity:
            raise ValueError(f"measurement {m.value} {m.unit} from {m.source!r} names no quantity")
        pr = evaluation[m.quantity]
        out.append(Comparison(m.quantity, pr, m, verdict(pr, m)))
    return out


def measurements_from_ncu(
    case_id: str, metrics: Mapping[str, float], source: str = "ncu", gpu: str | None = None
) -> list[Measurement]:
    """Measurements for a case from Nsight Compute metric values (metric name -> value in base
    units, as `--print-units base` exports). Metrics written as 'a + b' are summed; bank-conflict
    degrees are derived from the wavefront and conflict counters. Every measurement carries the
    launch's other counters (analyzers.cases.counters), which the predictions' mechanisms read."""
    from analyzers.cases.counters import from_ncu

    case = get_case(case_id)
    counters = from_ncu(metrics)
    out = []
    for spec in case.measurements:
        if spec.kind != "ncu" or not spec.quantity:
            continue
        names = [n.strip() for n in spec.name.split(" + ")]
        if "÷" in spec.name or any(n not in metrics for n in names):
            continue
        value = sum(float(metrics[n]) for n in names) * spec.factor
        unit = (
            "%"
            if spec.name.endswith("_pct") or "pct_of_peak" in spec.name
            else ("count" if spec.name.startswith("launch__occupancy_limit") else "B")
        )
        out.append(
            Measurement(
                value,
                unit,
                f"{source}: {spec.name}",
                quantity=spec.quantity,
                gpu=gpu,
                counters=counters,
            )
        )
    wf = metrics.get("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum")
    cf = metrics.get("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum")
    if wf and cf is not None and case_id in ("bank.column_read", "transpose.tile"):
        from analyzers.kernels import conflict_degree_of

        q = "degree" if case_id == "bank.column_read" else "read_degree"
        out = [m for m in out if m.quantity != q]
        d = conflict_degree_of(wf, cf)
        if d is not None:
            out.append(
                Measurement(
                    d,
                    "way",
                    f"{source}: wavefronts ÷ (wavefronts − bank conflicts)",
                    quantity=q,
                    gpu=gpu,
                    counters=counters,
                )
            )
    return out


# ------------------------------------------------------------------------------------------------
# Chart data
# ------------------------------------------------------------------------------------------------


def sweep(evaluation: Evaluation) -> list[dict]:
    """Rows {x, series, value, unit} for the case's chart, around the evaluated parameters.
    Points whose parameters are invalid (e.g. a tile larger than the matrix) are left out."""
    case, gpu, p = evaluation.case, evaluation.gpu, evaluation.params
    if case.chart_data is not None:
        return case.chart_data(p, gpu)
    if case.chart is None:
        return []
    ch = case.chart
    values = sorted(set(ch.values) | ({p[ch.x]} if isinstance(p[ch.x], (int, float)) else set()))
    rows = []
    for v in values:
        over = dict(p)
        over[ch.x] = v
        for name in ch.link:
            over[name] = v
        try:
            ev = evaluate(case, gpu, over)
        except CaseError:
            continue
        for key in ch.y:
            q = ev.predictions.get(key)
            if q is None or not q.numeric or q.value is None or not math.isfinite(q.value):
                continue
            rows.append({"x": v, "series": q.label, "value": q.value, "unit": q.unit})
    return rows


# ------------------------------------------------------------------------------------------------
# The chapter's own figures
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FigureCheck:
    case: str
    figure: Figure
    gpu: str
    model_value: Any
    unit: str
    verdict: Verdict

    def to_json(self) -> dict:
        return {
            "case": self.case,
            "figure": self.figure.to_json(),
            "gpu": self.gpu,
            "model_value": self.model_value
            if not isinstance(self.model_value, float) or math.isfinite(self.model_value)
            else None,
            "model_display": fmt(self.model_value, self.unit),
            **self.verdict.to_json(),
        }


#: the check of a chapter figure that only restates the model's inputs (not counted as reproduced)
RESTATES = "restates-inputs"


def restated_inputs(case: Case, fig: Figure) -> str | None:
    """Why a chapter figure cannot check its model, or None. Found by perturbing every numeric
    parameter: the figure restates its inputs when its quantity depends on a parameter whose default
    was solved from a chapter figure (`Param.back_solved`), or when it equals one parameter or the
    plain sum of parameters (unit coefficients, no GPU term: the chapter's '40 = 20 + 20', a '3 µs'
    submission that is the `submit` parameter itself)."""
    ev = evaluate(case, fig.gpu, fig.params)
    base = ev[fig.key].value
    if not isinstance(base, (int, float)) or not math.isfinite(base):
        return None
    deps = []
    for par in case.params:
        v = ev.params[par.name]
        if par.type not in ("int", "float") or isinstance(v, bool):
            continue
        bumped = v * 1.25 + (1 if v == 0 else 0)
        try:
            bumped = par.parse(int(round(bumped)) if par.type == "int" else bumped)
            other = (
                evaluate(case, ev.gpu, {**dict(ev.params), par.name: bumped})
                .predictions[fig.key]
                .value
            )
        except (CaseError, ValueError, KeyError):
            continue
        if isinstance(other, (int, float)) and other != base:
            deps.append((par, v, bumped, other))
    solved = [par.name for par, *_ in deps if par.back_solved]
    if solved:
        return (
            f"its quantity depends on {', '.join(solved)}, whose default was solved from the "
            "chapter's own figures, so reproducing it is circular"
        )
    if deps and all(
        math.isclose(other - base, to_base(b - v, par.unit)[0], rel_tol=1e-9, abs_tol=1e-15)
        for par, v, b, other in deps
    ):
        total = sum(to_base(v, par.unit)[0] for par, v, *_ in deps)
        if math.isclose(total, base, rel_tol=1e-9, abs_tol=1e-15):
            names = " + ".join(par.name for par, *_ in deps)
            return f"it is {'the parameter ' if len(deps) == 1 else ''}{names} itself, an input of the model, not a result"
    return None


def check_figure(case: Case, fig: Figure) -> FigureCheck | None:
    """Reproduce (or, for a measured figure, judge) one chapter figure with the case's model, at the
    parameters and on the GPU the chapter quoted it for. None for narrative figures. A computed
    figure that only restates the model's inputs (`restated_inputs`) gets the check RESTATES, not
    "agrees"."""
    if fig.key is None or not case.runnable or fig.value is None:
        return None
    ev = evaluate(case, fig.gpu, fig.params)
    pr = ev[fig.key]
    value, unit = fig.base_value(), to_base(1, fig.unit)[1]
    if unit != pr.unit:
        raise AssertionError(
            f"{case.id}: figure {fig.text!r} in {fig.unit} vs prediction in {pr.unit}"
        )
    circular = None if fig.measured else restated_inputs(case, fig)
    if fig.measured:
        v = verdict(
            pr,
            Measurement(fig.value, fig.unit, f"chapter, {ev.gpu.name}" if fig.gpu else "chapter"),
        )
    elif circular:
        v = Verdict(
            RESTATES,
            f"the chapter's {_in_unit(fig.value, fig.unit, fig.unit)} ({fig.text}) is not "
            f"reproduced by the model: {circular}.",
            None,
        )
    else:
        ok = math.isclose(pr.value, value, rel_tol=fig.tol, abs_tol=1e-12)
        shown = (
            f"the model gives {_in_unit(pr.value, pr.unit, fig.unit)} for the chapter's "
            f"{_in_unit(fig.value, fig.unit, fig.unit)} ({fig.text})"
        )
        v = Verdict(
            "agrees" if ok else "differs-unexplained",
            shown
            + (
                f", within the figure's rounding ({fig.tol:.1%})."
                if ok
                else f", outside the figure's rounding ({fig.tol:.1%})."
            ),
            pr.value / value if value else None,
        )
    return FigureCheck(case.id, fig, ev.gpu.name, pr.value, pr.unit, v)


def _in_unit(value: float, unit: str, shown_unit: str) -> str:
    """`value` (in `unit`) written in the figure's own unit, e.g. 2.4e6 B as '2.4 MB'."""
    v = convert(value, unit, shown_unit) if unit != shown_unit else value
    if shown_unit in ("", "count"):
        return f"{v:.6g}"
    return f"{v:.4g} {shown_unit}"


def figure_checks(case_id: str | None = None) -> list[FigureCheck]:
    cases = [get_case(case_id)] if case_id else all_cases()
    out = []
    for c in cases:
        for f in c.figures:
            chk = check_figure(c, f)
            if chk is not None:
                out.append(chk)
    return out
