"""Building blocks of a textbook case: parameters, predictions, chapter figures, measurements,
evaluation.

A `Case` is data plus one pure function `model(p, gpu) -> list[Prediction]`: `p` holds the parameter
values (attribute access: `p.M`), `gpu` is an `analyzers.gpus.GPUSpec`. Predictions are in base
units (see `units.py`). Narrative cases have `model=None` and say why.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from analyzers.errors import ParameterError
from analyzers.gpus import GPUSpec, get_gpu
from analyzers.units import fmt, to_base

DEFAULT_GPU = "NVIDIA H200"
#: GPUSpec fields the case models read (shown with their sources next to every evaluation)
GPU_FIELDS = (
    "sm_count",
    "dram_bandwidth_bytes_per_s",
    "bf16_dense_flop_per_s",
    "fp32_flop_per_s",
    "l2_bytes",
    "smem_per_sm_bytes",
    "smem_per_block_optin_bytes",
    "reserved_smem_per_block_bytes",
    "max_threads_per_sm",
    "max_blocks_per_sm",
    "regs_per_sm",
    "host_link_bytes_per_s",
    "boost_clock_mhz",
)

ParamValue = Any  # int | float | str | tuple[float, ...]


class CaseError(ParameterError):
    """A bad parameter or an impossible configuration for a case (one readable line)."""


# ------------------------------------------------------------------------------------------------
# Parameters
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Param:
    """One input of a case. Values are given in `unit` (µs, MiB, …), never silently rescaled.

    `default` is the chapter's value; `from_chapter=False` marks an assumption where the chapter
    gives none. `gpu_default(gpu)` (if set) gives the default from the GPU spec instead (e.g. its
    opt-in shared memory); the chapter's own value then appears in the case's figures.

    `ceiling` names the measured ceiling (analyzers.ceilings resource: "dram", "bf16", "launch",
    ...) that replaces the spec-derived default when the caller passes the GPU's measured ceilings
    to `evaluate` (value in base units × `ceiling_scale` = the parameter's unit).
    `back_solved=True`: the default was solved from one of the chapter's own figures, so that figure
    cannot check the model (see catalog.check_figure).
    """

    name: str
    unit: str
    default: ParamValue
    description: str
    type: str = "float"  # "int" | "float" | "choice" | "floats"
    min: float | None = None  # inclusive
    max: float | None = None  # inclusive
    choices: tuple = ()
    from_chapter: bool = True
    gpu_default: Callable[[GPUSpec], ParamValue] | None = None
    gpu_default_text: str = ""
    positive: bool = False  # strictly > 0
    ceiling: str | None = None
    ceiling_scale: float = 1.0
    back_solved: bool = False
    default_source: str = ""  # where a default that is not the chapter's comes from

    def default_for(self, gpu: GPUSpec) -> ParamValue:
        if self.gpu_default is not None:
            v = self.gpu_default(gpu)
            if v is None:
                raise CaseError(
                    f"{gpu.name} has no value for parameter {self.name!r} "
                    f"({self.gpu_default_text}); set it with {self.name}=VALUE"
                )
            return self.parse(v)
        return self.default

    def parse(self, raw: ParamValue) -> ParamValue:
        """Parse and check one value (strings from the command line or the URL allowed)."""
        name = self.name
        if self.type == "choice":
            opts = {str(c): c for c in self.choices}
            if str(raw) not in opts:
                raise CaseError(
                    f"parameter {name}={raw!r}: must be one of {', '.join(map(str, self.choices))}"
                )
            return opts[str(raw)]
        if self.type == "floats":
            items = raw.split(",") if isinstance(raw, str) else list(raw)
            vals = tuple(_number(x, name) for x in items if str(x).strip() != "")
            if not vals:
                raise CaseError(f"parameter {name}: needs at least one number")
            return vals
        v = _number(raw, name)
        if self.type == "int":
            if not float(v).is_integer():
                raise CaseError(f"parameter {name}={raw!r}: must be a whole number")
            v = int(v)
        u = f" {self.unit}" if self.unit not in ("", "count") else ""
        if self.positive and v <= 0:
            raise CaseError(f"parameter {name}={raw!r}: must be > 0{u}")
        if self.min is not None and v < self.min:
            raise CaseError(f"parameter {name}={raw!r}: must be >= {self.min:g}{u}")
        if self.max is not None and v > self.max:
            raise CaseError(f"parameter {name}={raw!r}: must be <= {self.max:g}{u}")
        return v

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "unit": self.unit,
            "default": _jsonable(self.default),
            "type": self.type,
            "description": self.description,
            "from_chapter": self.from_chapter,
            "gpu_default": self.gpu_default_text or None,
            "min": self.min,
            "max": self.max,
            "choices": list(self.choices) or None,
            "measured_ceiling": self.ceiling,
            "back_solved": self.back_solved,
        }


def _number(raw, name: str) -> float:
    """A number from text: '64', '1.29', '2/3', 'ln4' / 'ln(4)' (natural log), '2^-24'."""
    if isinstance(raw, bool):
        raise CaseError(f"parameter {name}={raw!r}: not a number")
    if isinstance(raw, (int, float)):
        v = float(raw)
    else:
        s = str(raw).strip().replace(" ", "")
        try:
            if s.lower().startswith("ln"):
                v = math.log(float(s[2:].strip("()")))
            elif "/" in s:
                a, b = s.split("/", 1)
                v = float(a) / float(b)
            elif "^" in s:
                a, b = s.split("^", 1)
                v = float(a) ** float(b)
            else:
                v = float(s)
        except (ValueError, ZeroDivisionError, OverflowError):
            raise CaseError(f"parameter {name}={raw!r}: not a number") from None
    if not math.isfinite(v):
        raise CaseError(f"parameter {name}={raw!r}: must be finite")
    return int(v) if isinstance(raw, int) else v


class Params(dict):
    """Parameter values with attribute access (`p.M`); `sources` says where each value came from."""

    sources: dict = {}

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


# ------------------------------------------------------------------------------------------------
# Predictions
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Explanation:
    """A known reason why a measurement may differ, stated by the model without counters: applies
    when lo <= measured/predicted <= hi. The range must be narrow (hi/lo <= 3, lo > 0: the catalog
    tests check it) and `why` says where its edges come from."""

    text: str
    lo: float
    hi: float
    why: str = ""


@dataclass(frozen=True)
class Mechanism:
    """A named mechanism that can account for a measurement's distance from the prediction, computed
    from the measurement's own counters (`Measurement.counters`, names of analyzers.cases.counters).
    `predict(counters)` gives the prediction with the mechanism accounted for (the prediction's base
    unit; None when the counters do not allow it); the verdict says "differs-explained" only when
    the measurement is within `tol` (relative) of it, and says how much of the gap it accounts for.
    `why` justifies the formula."""

    name: str
    needs: tuple[str, ...]
    predict: Callable[[Mapping[str, float]], float | None]
    tol: float = 0.15
    why: str = ""


@dataclass(frozen=True)
class Term:
    """One term of a predicted time (or rate): its value in `unit`, how it is computed, and where
    its inputs come from (the GPU's measured ceiling, the spec with a stated derating, a parameter,
    the occupancy calculator)."""

    name: str
    value: float
    unit: str
    formula: str = ""
    source: str = ""

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "value": _jsonable(self.value),
            "unit": self.unit,
            "display": fmt(self.value, self.unit),
            "formula": self.formula,
            "source": self.source,
        }


@dataclass(frozen=True)
class Prediction:
    """A predicted quantity in a base unit.

    kind: "estimate" (agrees within ±rel_tol), "exact" (counts, ±rel_tol), "lower_bound" (agrees
    from the bound up to `bound_factor` × the bound: far above it the bound says nothing and the
    verdict is not "agrees"), "upper_bound" (agrees from bound / bound_factor up to the bound),
    "range" (agrees inside [lo, hi]), "info" (shown, never compared). `max_physical`/`min_physical`:
    a measurement beyond them is physically impossible on this GPU (`physical` says which limit).
    `terms`: what a predicted time is made of (shown next to it); `mechanisms`: named mechanisms
    computed from a measurement's counters; `explanations`: narrow stated ranges.
    """

    key: str
    label: str
    value: Any
    unit: str
    formula: str = ""
    kind: str = "estimate"
    rel_tol: float = 0.10
    lo: float | None = None
    hi: float | None = None
    max_physical: float | None = None
    min_physical: float | None = None
    physical: str = ""
    explanations: tuple[Explanation, ...] = ()
    mechanisms: tuple[Mechanism, ...] = ()
    terms: tuple[Term, ...] = ()
    bound_factor: float = 2.0

    @property
    def display(self) -> str:
        if self.kind == "range":
            return f"{fmt(self.value, self.unit)} ({fmt(self.lo, self.unit)} … {fmt(self.hi, self.unit)})"
        return fmt(self.value, self.unit)

    @property
    def tolerance_text(self) -> str:
        """The agreement band in words: '±20 %', 'bound … 2× bound', 'range'."""
        if self.kind in ("estimate", "exact"):
            return "exact" if self.rel_tol == 0 else f"±{100 * self.rel_tol:.3g} %"
        if self.kind == "lower_bound":
            return f"lower bound: agrees up to {self.bound_factor:g}× it"
        if self.kind == "upper_bound":
            return f"upper bound: agrees down to 1/{self.bound_factor:g} of it"
        if self.kind == "range":
            return "inside the range"
        return "for information"

    @property
    def numeric(self) -> bool:
        return isinstance(self.value, (int, float)) and not isinstance(self.value, bool)

    def to_json(self) -> dict:
        d = {
            "value": _jsonable(self.value),
            "unit": self.unit,
            "display": self.display,
            "label": self.label,
            "kind": self.kind,
            "formula": self.formula,
            "tolerance": self.tolerance_text,
        }
        if self.kind in ("estimate", "exact"):
            d["rel_tol"] = self.rel_tol
        if self.kind.endswith("bound"):
            d["bound_factor"] = self.bound_factor
        if self.kind == "range":
            d["lo"], d["hi"] = _jsonable(self.lo), _jsonable(self.hi)
        if self.max_physical is not None:
            d["max_physical"] = _jsonable(self.max_physical)
        if self.min_physical is not None:
            d["min_physical"] = _jsonable(self.min_physical)
        if self.terms:
            d["terms"] = [t.to_json() for t in self.terms]
        if self.mechanisms:
            d["mechanisms"] = [
                {"name": m.name, "needs": list(m.needs), "tol": m.tol} for m in self.mechanisms
            ]
        return d


def pred(key: str, label: str, value, unit: str, formula: str = "", **kw) -> Prediction:
    if unit == "text":
        kw.setdefault("kind", "info")  # a word is shown, never compared
    return Prediction(key=key, label=label, value=value, unit=unit, formula=formula, **kw)


# ------------------------------------------------------------------------------------------------
# Chapter figures and confirming measurements
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Figure:
    """A number the chapter quotes. `key` names the prediction it corresponds to (None: narrative
    only); `params` are the parameter values it was quoted at (on top of the defaults); `gpu` the
    GPU it was quoted for. `measured=True`: the chapter measured it (checked with a verdict);
    otherwise the model must reproduce it within `tol` (relative)."""

    text: str
    value: float | None = None
    unit: str = ""
    key: str | None = None
    gpu: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    measured: bool = False
    tol: float = 0.01
    source: str = "chapter"

    def base_value(self) -> float | None:
        if self.value is None:
            return None
        return to_base(self.value, self.unit)[0]

    def to_json(self) -> dict:
        return {
            "text": self.text,
            "value": self.value,
            "unit": self.unit,
            "quantity": self.key,
            "gpu": self.gpu,
            "params": dict(self.params),
            "measured": self.measured,
            "source": self.source,
        }


@dataclass(frozen=True)
class Measure:
    """A measurement that can confirm a prediction: kind "ncu" (metric name), "bench"
    (microbenchmark case id and metric), or "trace" (a trace statistic). `factor` converts the raw
    value to the quantity's base unit (e.g. 32 B per L2 sector)."""

    kind: str
    name: str
    quantity: str | None
    how: str
    factor: float = 1.0

    def to_json(self) -> dict:
        return {
            "kind": self.kind,
            "name": self.name,
            "quantity": self.quantity,
            "how": self.how,
            "factor": self.factor,
        }


@dataclass(frozen=True)
class Chart:
    """A sweep for the dashboard: evaluate the model at each `values` of parameter `x` (and of the
    `link` parameters), plot the `y` predictions (one unit)."""

    x: str
    values: tuple
    y: tuple[str, ...]
    link: tuple[str, ...] = ()
    title: str = ""
    log_x: bool = False
    mark: str = "line"


# ------------------------------------------------------------------------------------------------
# Cases and their evaluation
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    id: str
    title: str
    section: str  # "5.2" and the chapter's example/figure numbers
    summary: str  # the reasoning, in a few sentences
    params: tuple[Param, ...] = ()
    model: Callable[[Params, GPUSpec], list[Prediction]] | None = None
    figures: tuple[Figure, ...] = ()
    measurements: tuple[Measure, ...] = ()
    default_gpu: str | None = None  # the GPU the chapter quoted the case for
    chart: Chart | None = None
    # custom rows {x, series, value, unit}
    chart_data: Callable[[Params, GPUSpec], list[dict]] | None = None
    tables: Callable[[Params, GPUSpec], dict[str, list[dict]]] | None = None
    validate: Callable[[Params, GPUSpec], None] | None = None
    no_model_reason: str = ""

    @property
    def runnable(self) -> bool:
        return self.model is not None

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        known = ", ".join(p.name for p in self.params) or "none"
        raise CaseError(f"unknown parameter {name!r} for case {self.id} (known: {known})")

    def gpu(self, gpu: str | GPUSpec | None = None) -> GPUSpec:
        if isinstance(gpu, GPUSpec):
            return gpu
        return get_gpu(gpu or self.default_gpu or DEFAULT_GPU)

    def resolve(
        self,
        gpu: GPUSpec,
        overrides: Mapping[str, Any] | None = None,
        ceilings: Mapping[str, Any] | None = None,
    ) -> Params:
        """Parameter values: the overrides, else the GPU's measured ceiling for a parameter that
        names one (when `ceilings` has it: resource -> object with `value` in base units and
        `source`), else the default. Where each value came from is in `Params.sources`."""
        overrides = dict(overrides or {})
        for name in overrides:
            self.param(name)  # unknown names raise
        p = Params()
        sources = {}
        for par in self.params:
            c = (ceilings or {}).get(par.ceiling) if par.ceiling else None
            if name_in(par.name, overrides):
                p[par.name] = par.parse(overrides[par.name])
                sources[par.name] = "set"
            elif c is not None and getattr(c, "value", None) is not None:
                p[par.name] = par.parse(float(c.value) * par.ceiling_scale)
                sources[par.name] = f"measured ceiling: {c.source}"
            else:
                p[par.name] = par.default_for(gpu)
                sources[par.name] = (
                    (par.gpu_default_text or "the GPU spec")
                    if par.gpu_default is not None
                    else (
                        "the chapter"
                        if par.from_chapter
                        else f"default: {par.default_source}"
                        if par.default_source
                        else "assumption (the chapter gives none)"
                    )
                )
        if self.validate is not None:
            self.validate(p, gpu)
        p.sources = sources
        return p

    def to_json(self) -> dict:
        return {
            "id": self.id,
            "title": self.title,
            "section": self.section,
            "summary": self.summary,
            "runnable": self.runnable,
            "no_model_reason": self.no_model_reason or None,
            "default_gpu": self.gpu().name,
            "params": [p.to_json() for p in self.params],
            "chapter_figures": [f.to_json() for f in self.figures],
            "measurements": [m.to_json() for m in self.measurements],
        }


def name_in(name: str, mapping: Mapping) -> bool:
    return name in mapping and mapping[name] is not None


@dataclass
class Evaluation:
    case: Case
    gpu: GPUSpec
    params: Params
    predictions: dict[str, Prediction]
    tables: dict[str, list[dict]] = field(default_factory=dict)

    def __getitem__(self, key: str) -> Prediction:
        try:
            return self.predictions[key]
        except KeyError:
            raise KeyError(
                f"case {self.case.id} predicts no {key!r} (it predicts: "
                f"{', '.join(self.predictions)})"
            ) from None

    def value(self, key: str):
        return self[key].value

    def gpu_specs(self) -> dict[str, dict]:
        """The GPU spec fields the models read, each with its value and registry source."""
        return {
            f: {"value": _jsonable(getattr(self.gpu, f)), "source": self.gpu.source_of(f)}
            for f in GPU_FIELDS
            if getattr(self.gpu, f, None) is not None
        }

    def to_json(self) -> dict:
        return {
            "case": self.case.id,
            "title": self.case.title,
            "section": self.case.section,
            "gpu": self.gpu.name,
            "gpu_specs": self.gpu_specs(),
            "runnable": self.case.runnable,
            "params": {k: _jsonable(v) for k, v in self.params.items()},
            "param_sources": dict(getattr(self.params, "sources", {}) or {}),
            "param_units": {p.name: p.unit for p in self.case.params},
            "predictions": {k: p.to_json() for k, p in self.predictions.items()},
            "tables": {
                k: [{c: _jsonable(v) for c, v in row.items()} for row in rows]
                for k, rows in self.tables.items()
            },
            "summary": self.case.summary,
            "no_model_reason": self.case.no_model_reason or None,
        }


def run_model(case: Case, gpu: GPUSpec, p: Params) -> Evaluation:
    preds: dict[str, Prediction] = {}
    if case.model is not None:
        for q in case.model(p, gpu):
            if q.key in preds:
                raise AssertionError(f"{case.id}: duplicate prediction {q.key}")
            preds[q.key] = q
    tables = case.tables(p, gpu) if case.tables is not None else {}
    return Evaluation(case=case, gpu=gpu, params=p, predictions=preds, tables=tables)


def _jsonable(v):
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, tuple):
        return [_jsonable(x) for x in v]
    if hasattr(v, "item") and not isinstance(v, (str, bytes)):
        return v.item()
    return v


# ------------------------------------------------------------------------------------------------
# Small helpers shared by the case modules
# ------------------------------------------------------------------------------------------------

KIB = 1024
MIB = 1024**2
GIB = 1024**3
US = 1e-6
MS = 1e-3


def need(gpu: GPUSpec, field_name: str) -> float:
    """A GPU spec field that the model needs; a clear error when the registry lacks it."""
    v = getattr(gpu, field_name)
    if v is None:
        raise CaseError(f"{gpu.name} has no {field_name} in the GPU registry; this case needs it")
    return v


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def pipeline_time(n: int, t_m: float, t_c: float, slots: int = 2) -> float:
    """Time for n blocks through a move stage (t_m each) and a compute stage (t_c each) with `slots`
    buffers: slots = 1 is serial, n·(t_m + t_c); with slots >= 2 it is simulated event by event
    (move i starts when move i-1 is done and slot i-slots has been consumed; compute i starts when
    move i and compute i-1 are done). For slots = 2 this is T = t_m + (n-1)·max(t_m, t_c) + t_c."""
    if n <= 0:
        return 0.0
    if slots <= 1:
        return n * (t_m + t_c)
    move_end: list[float] = []
    comp_end: list[float] = []
    for i in range(n):
        start = move_end[i - 1] if i else 0.0
        if i >= slots:
            start = max(start, comp_end[i - slots])
        move_end.append(start + t_m)
        c_start = max(move_end[i], comp_end[i - 1] if i else 0.0)
        comp_end.append(c_start + t_c)
    return comp_end[-1]


def check_tile(tile: int, name: str, size: int, size_name: str) -> None:
    if tile > size:
        raise CaseError(f"tile {name}={tile} is larger than the matrix ({size_name}={size})")


def percent(x: float) -> float:
    return 100.0 * x


Number = float | int
Rows = Sequence[Mapping[str, Any]]
