"""Textbook cases (?case=ID&gpu=NAME&<param>=VALUE…&meas=QUANTITY:VALUE:UNIT): one case of the
chapter "Operators and runtime" for any GPU and parameters: predictions with units and formulas, the
case's tables and chart, the same parameters on every GPU, the chapter's own figures checked, and
measured vs predicted with a verdict (the store's ncu and bench measurements, and values typed into
the URL)."""

from __future__ import annotations

import functools
import math

from dataclasses import dataclass, field
from typing import Any

import polars as pl

from analyzers.errors import UnknownName
from analyzers.gpus import GPUSpec, all_gpus, find_gpu
from dashboard.web import charts
from dashboard.web.reports.report_blocks import Chart, Heading, Report, Table, Text, code, text
from dashboard.web.reports.run_links import param_list, plain_cols
from dashboard.core.source import Source
from analyzers.cases import (
    CASE_IDS,
    CaseError,
    Measurement,
    compare,
    evaluate,
    figure_checks,
    get_case,
    sweep,
    to_base,
)
from analyzers.cases.checks import chapter_checks
from analyzers.units import fmt, scale_for

DEFAULT_CASE = "tiling.traffic"


def param_text(v) -> str:
    """A case parameter value as written in the URL."""
    if isinstance(v, tuple):
        return ",".join(format(x, ".10g") for x in v)
    if isinstance(v, float):
        return format(v, ".10g")
    return str(v)


@dataclass
class CaseView:
    case: Any  # analyzers.cases.Case
    gpu: GPUSpec
    # parameter -> value (the URL's, else the default; the page: its widgets')
    values: dict
    # parameter -> default on this GPU (its measured ceiling where the store has one)
    defaults: dict
    problems: list[str] = field(default_factory=list)
    # the GPU's measured ceilings (analyzers.ceilings.best_ceilings)
    ceilings: dict = field(default_factory=dict)

    def changed(self) -> dict[str, str]:
        """Parameters that differ from their default, as written in the URL."""
        return {
            k: param_text(v)
            for k, v in self.values.items()
            if param_text(v) != param_text(self.defaults[k])
        }

    def overrides(self) -> dict:
        return {
            k: v for k, v in self.values.items() if param_text(v) != param_text(self.defaults[k])
        }


def resolve(
    params: dict,
    case_id: str | None = None,
    gpu_name: str | None = None,
    ceilings: dict | None = None,
) -> CaseView:
    """?case=ID&gpu=NAME&<param>=VALUE…; case_id and gpu_name (the page's choices) replace the
    URL's. Values in the URL apply only to the case it names; a bad value falls back to the default,
    with a problem noted. A rate parameter's default is the GPU's measured ceiling when `ceilings`
    has it."""

    case = get_case(case_id or params.get("case") or DEFAULT_CASE)
    gpu = find_gpu(gpu_name or params.get("gpu") or "") or case.gpu()
    values, defaults, problems = {}, {}, []
    ceilings = dict(ceilings or {})
    for p in case.params:
        c = ceilings.get(p.ceiling) if p.ceiling else None
        try:
            defaults[p.name] = (
                p.parse(float(c.value) * p.ceiling_scale) if c is not None else p.default_for(gpu)
            )
        except CaseError:
            defaults[p.name] = p.default
        values[p.name] = defaults[p.name]
        raw = params.get(p.name) if params.get("case") == case.id else None
        if raw is not None:
            try:
                values[p.name] = p.parse(raw)
            except CaseError as e:
                problems.append(f"{e} — using the default.")
    return CaseView(case, gpu, values, defaults, problems, ceilings)


def case_intro(view: CaseView) -> list:
    case, gpu = view.case, view.gpu
    specs = {
        "sm_count": ("SMs", ""),
        "dram_bandwidth_bytes_per_s": ("DRAM", "B/s"),
        "bf16_dense_flop_per_s": ("BF16 dense", "FLOP/s"),
        "smem_per_sm_bytes": ("smem/SM", "B"),
        "l2_bytes": ("L2", "B"),
    }
    return [
        Text(f"**{case.title}** · {case.section}"),
        Text(
            f"{gpu.name} (CC {gpu.cc[0]}.{gpu.cc[1]}): "
            + " · ".join(
                f"{label} {fmt(getattr(gpu, f), u) if u else getattr(gpu, f)}"
                for f, (label, u) in specs.items()
                if getattr(gpu, f) is not None
            )
            + " — registry; sources in the GPUs page / "
            "`kernelscope gpus`.",
            "caption",
        ),
        Text(case.summary),
    ]


def case_params_table(view: CaseView) -> Table:
    """The parameters with their values (the page shows them as inputs)."""
    rows = [
        {
            "parameter": p.name,
            "value": param_text(view.values[p.name]),
            "unit": "" if p.unit == "count" else p.unit,
            "default": param_text(view.defaults[p.name]),
            "about": p.description
            + ("" if p.from_chapter else " (assumption: the chapter gives no value)")
            + (f" Default: {p.gpu_default_text}." if p.gpu_default else ""),
        }
        for p in view.case.params
    ]
    frame = pl.DataFrame(
        rows, schema={c: pl.String for c in ("parameter", "value", "unit", "default", "about")}
    )
    return Table("case_params", frame, {c: text(c) for c in frame.columns}, static=True)


def case_predictions(view: CaseView) -> tuple[Any, list]:
    """(evaluation, blocks): the predictions on the GPU, the case's tables and its chart. The
    evaluation is None for a case without a model, and when the parameters are impossible (the
    blocks then say why)."""

    case, gpu = view.case, view.gpu
    if not case.runnable:
        return None, [
            Text(
                f"No runnable model: {case.no_model_reason}. The chapter's figures and the "
                "reasoning are below.",
                "info",
            )
        ]
    try:
        ev = evaluate(case, gpu, view.overrides(), ceilings=view.ceilings)
    except CaseError as e:
        return None, [Text(str(e), "error")]
    preds = pl.DataFrame(
        [
            {
                "quantity": k,
                "value": p.display,
                "kind": p.kind,
                "tolerance": p.tolerance_text,
                "what": p.label,
                "formula": p.formula,
            }
            for k, p in ev.predictions.items()
        ],
        schema={
            c: pl.String for c in ("quantity", "value", "kind", "tolerance", "what", "formula")
        },
    )
    out: list = [
        Heading(f"Predicted on {gpu.name}"),
        Table(
            "predictions",
            preds,
            {
                "quantity": text("quantity"),
                "value": text("value", "the model's prediction with its unit"),
                "kind": text("kind"),
                "tolerance": text("tolerance", "when a measurement agrees"),
                "what": text("what"),
                "formula": text("formula", "how the model computes it"),
            },
        ),
    ]
    measured = {
        k: v.split(": ", 1)[1]
        for k, v in (getattr(ev.params, "sources", {}) or {}).items()
        if v.startswith("measured ceiling")
    }
    if measured:
        out.append(
            Text(
                "Rates from the store's measured ceilings of this GPU: "
                + "; ".join(f"{code(k)} ← {v}" for k, v in measured.items())
                + ". Others: the spec with the stated "
                "derating.",
                "caption",
            )
        )
    terms = [
        {
            "quantity": k,
            "term": t.name,
            "value": t.to_json()["display"],
            "formula": t.formula,
            "source": t.source,
        }
        for k, p in ev.predictions.items()
        for t in p.terms
    ]
    if terms:
        tf = pl.DataFrame(
            terms, schema={c: pl.String for c in ("quantity", "term", "value", "formula", "source")}
        )
        out += [
            Text(
                "What each predicted time is made of (the largest term of a max() sets it):",
                "caption",
            ),
            Table("prediction_terms", tf, {c: text(c) for c in tf.columns}),
        ]
    for name, rows in ev.tables.items():
        df = pl.DataFrame(rows, infer_schema_length=None)
        out += [
            Text(name.replace("_", " "), "caption"),
            Table(f"case_table_{name}", df, plain_cols(df)),
        ]
    rows = sweep(ev)
    if rows:
        div, shown = scale_for(max(abs(r["value"]) for r in rows), rows[0]["unit"])
        numeric_x = all(isinstance(r["x"], (int, float)) for r in rows)
        df = pl.DataFrame(
            [
                {
                    "x": float(r["x"]) if numeric_x else str(r["x"]),
                    "series": r["series"],
                    "value": r["value"] / div,
                }
                for r in rows
            ]
        )
        ch = case.chart
        x_name = ch.x if ch else "x"
        x_unit = next((p.unit for p in case.params if p.name == x_name), "")
        x_title = f"{x_name} [{x_unit}]" if x_unit and x_unit != "count" else x_name
        at = ev.params.get(ch.x) if ch and numeric_x else None
        out.append(
            Chart(
                "case_sweep",
                charts.case_sweep(
                    df,
                    x_title=x_title,
                    y_title=f"value [{shown}]" if shown else "value",
                    title=(ch.title if ch else case.title) + f" — {gpu.name}",
                    mark=ch.mark if ch else "bar",
                    log_x=bool(ch and ch.log_x),
                    at=at if isinstance(at, (int, float)) else None,
                ),
            )
        )
    return ev, out


def case_other_gpus(view: CaseView, ev) -> list:
    """The same parameters on every GPU of the registry: the predictions that depend on the GPU."""
    changed = view.changed()
    fixed = {
        k: v for k, v in view.values.items() if not view.case.param(k).gpu_default or k in changed
    }
    evs = {}
    for g in all_gpus():
        try:
            evs[g.name] = evaluate(view.case, g, fixed)
        except CaseError as e:
            evs[g.name] = str(e)
    keys = [
        k
        for k in ev.predictions
        if len({(e.predictions[k].display if not isinstance(e, str) else e) for e in evs.values()})
        > 1
    ]
    if not keys:
        return [Text("None of this case's predictions depend on the GPU.")]
    df = pl.DataFrame(
        [
            {
                "GPU": n,
                **(
                    {k: e.predictions[k].display for k in keys}
                    if not isinstance(e, str)
                    else {keys[0]: e}
                ),
            }
            for n, e in evs.items()
        ],
        infer_schema_length=None,
    )
    return [Table("case_gpus", df, {c: text(c) for c in df.columns})]


def case_figures(case) -> list:
    """The chapter's own figures, each reproduced by the model where it has one (computed once per
    case: the catalog and its models do not change while the server runs)."""
    return list(_figures(case.id))


def case_chapter_checks(case) -> list:
    return list(_chapter_checks(case.id))


@functools.lru_cache(maxsize=64)
def _figures(case_id: str) -> tuple:
    case = get_case(case_id)
    if not case.figures:
        return ()
    checks = {id(c.figure): c for c in figure_checks(case.id)}
    df = pl.DataFrame(
        [
            {
                "figure": f.text,
                "quoted for": (f.gpu or "—").replace("NVIDIA ", ""),
                "kind": "measured" if f.measured else "computed",
                "model": checks[id(f)].to_json()["model_display"] if id(f) in checks else "—",
                "check": checks[id(f)].verdict.kind if id(f) in checks else "(no model)",
                "explanation": checks[id(f)].verdict.explanation if id(f) in checks else "",
                "source": f.source,
            }
            for f in case.figures
        ]
    )
    return (
        Heading("The chapter's figures"),
        Table("case_figures", df, {c: text(c) for c in df.columns}),
    )


@functools.lru_cache(maxsize=64)
def _chapter_checks(case_id: str) -> tuple:
    return tuple(
        Text(f"**{c.verdict}** — {c.title}: {c.explanation}") for c in chapter_checks(case_id)
    )


def url_measurements(raw: list[str], gpu_name: str) -> tuple[list, list[str]]:
    """Measurements typed on the page, kept in the URL as meas=QUANTITY:VALUE:UNIT: (measurements, unreadable)."""
    out, bad = [], []
    for item in raw:
        parts = item.split(":")
        try:
            key, value, unit = parts[0], float(parts[1]), ":".join(parts[2:])
            if not math.isfinite(value):
                raise ValueError("not a finite number")
            to_base(value, unit)
            out.append(Measurement(value, unit, "entered on this page", quantity=key, gpu=gpu_name))
        except (IndexError, ValueError):
            bad.append(item)
    return out, bad


def case_measured(view: CaseView, ev, measurements: list, bad: list[str], bench_rows=None) -> list:
    """Measured vs predicted: the store's bench results of the case on this GPU, each judged at its
    own parameters (`bench_rows`: Source.case_bench_rows), then every other measurement of a
    predicted quantity (Nsight Compute launches recognised by their counters whose own launch
    predicts what the page's parameters do, values typed on the page) judged at the page's
    parameters."""

    out: list = [Heading("Measured vs predicted")]
    if view.case.measurements:
        out.append(
            Text(
                "Measurements that can confirm this case: "
                + "; ".join(
                    f"{m.kind} `{m.name}`" + (f" → {m.quantity}" if m.quantity else "")
                    for m in view.case.measurements
                ),
                "caption",
            )
        )
    if ev is None:
        return out
    out += [
        Text(f"Ignored measurement {code(b)} in the URL (expected QUANTITY:VALUE:UNIT).", "warning")
        for b in bad
    ]
    if bench_rows is not None and bench_rows.height:
        df = pl.DataFrame(
            [
                {
                    "metric": r["metric"],
                    "parameters": r["params"] if isinstance(r["params"], str) else str(r["params"]),
                    "predicted": fmt(r["predicted"], r["predicted_unit"]),
                    "measured": fmt(r["value"], r["predicted_unit"]),
                    "source": f"bench run {r['run_id']} ({r['source']})",
                    "verdict": r["verdict"],
                    "explanation": r["verdict_explanation"],
                }
                for r in bench_rows.iter_rows(named=True)
            ],
            schema={
                c: pl.String
                for c in (
                    "metric",
                    "parameters",
                    "predicted",
                    "measured",
                    "source",
                    "verdict",
                    "explanation",
                )
            },
        )
        out += [
            Text(
                "The store's microbenchmark results, each judged at its own parameters with its "
                "run's measured ceilings:",
                "caption",
            ),
            Table(
                "case_bench",
                df,
                {
                    "metric": text("metric"),
                    "parameters": text("parameters"),
                    "predicted": text("predicted (model, that run's parameters)"),
                    "measured": text("measured"),
                    "source": text("source"),
                    "verdict": text("verdict"),
                    "explanation": text("why"),
                },
            ),
        ]
    comps = []
    for m in measurements:
        try:
            comps += compare(ev, [m])
        except (LookupError, ValueError) as e:
            out.append(
                Text(f"{m.quantity} = {m.value} {m.unit}: {e.args[0] if e.args else e}", "warning")
            )
    if not comps:
        return out + (
            []
            if bench_rows is not None and bench_rows.height
            else [Text("No measurements for this case and GPU yet.")]
        )
    df = pl.DataFrame(
        [
            {
                "quantity": c.quantity,
                "predicted": c.prediction.display,
                "measured": c.to_json()["measured_display"],
                "source": c.measurement.source,
                "verdict": c.verdict.kind,
                "explanation": c.verdict.explanation,
            }
            for c in comps
        ]
    )
    return out + [
        Table(
            "case_measured",
            df,
            {
                "quantity": text("quantity"),
                "predicted": text("predicted (model, this GPU)"),
                "measured": text("measured"),
                "source": text("source"),
                "verdict": text("verdict"),
                "explanation": text("why"),
            },
        )
    ]


def build(src: Source, params: dict) -> Report:
    """The Textbook cases page of a URL. An export does not fall back: an unknown case or GPU is an error."""
    if params.get("case") and params["case"] not in CASE_IDS:
        raise UnknownName("textbook case", params["case"], "`kernelscope cases` lists them")
    if params.get("gpu") and find_gpu(params["gpu"]) is None:
        raise UnknownName("GPU", params["gpu"], "`kernelscope gpus` lists the registry")
    view = resolve(params)
    view = resolve(params, ceilings=src.best_ceilings(view.gpu.name))
    rep = Report("Textbook cases", subtitle=f"Case {code(view.case.id)} on {view.gpu.name}")
    rep.add(*[Text(p, "warning") for p in view.problems], *case_intro(view))
    if view.case.params:
        rep.add(Heading("Parameters"), case_params_table(view))
    ev, blocks = case_predictions(view)
    rep.add(*blocks)
    if view.case.runnable and ev is None:  # impossible parameters: the error, nothing else
        return rep
    if ev is not None:
        rep.add(
            Heading("Same parameters on every GPU of the registry", 3), *case_other_gpus(view, ev)
        )
    rep.add(*case_figures(view.case))
    checks = case_chapter_checks(view.case)
    if checks:
        rep.add(Heading("Consistency checks on the chapter", 3), *checks)
    typed, bad = url_measurements(
        param_list(params.get("meas")) if params.get("case") == view.case.id else [], view.gpu.name
    )
    return rep.add(
        *case_measured(
            view,
            ev,
            src.case_measurements(view.case.id, view.gpu.name, view.values) + typed,
            bad,
            src.case_bench_rows(view.case.id, view.gpu.name),
        )
    )
