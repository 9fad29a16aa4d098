"""`kernelscope cases | predict | claims`: the textbook's predictions, per GPU, and the seed's claims.
Start-up: imports that only some commands, pages or GPUs need sit inside the functions that use
them, so each command loads what it uses."""

from __future__ import annotations

import re
import textwrap
from typing import Annotated, Optional

import typer

from analyzers.errors import ParameterError

from dashboard.cli._app import ListFormat, StoreOpt, app, echo_json, open_source
from dashboard.cli.render import print_table

_MEASURED = re.compile(r"^\s*([A-Za-z_][\w]*)\s*=\s*([-+0-9.eE]+)\s*(.*?)\s*$")


def _bad(e: Exception) -> ParameterError:
    return ParameterError(e.args[0] if e.args else str(e))


def parse_sets(sets: list[str] | None) -> dict[str, str]:
    """['M=2048', 'n=128'] -> {'M': '2048', 'n': '128'}."""
    out: dict[str, str] = {}
    for item in sets or []:
        name, sep, value = item.partition("=")
        if not sep or not name.strip() or not value.strip():
            raise ParameterError(f"--set {item!r}: expected NAME=VALUE")
        out[name.strip()] = value.strip()
    return out


def parse_measured(items: list[str] | None, gpu: str):
    """['time=6.37ms', 'l2_read_bytes=3006 MiB'] -> Measurements (quantity, value, unit)."""
    from analyzers.cases import Measurement, to_base

    out = []
    for item in items or []:
        m = _MEASURED.match(item)
        if not m:
            raise ParameterError(
                f"--measured {item!r}: expected QUANTITY=VALUE[UNIT], e.g. time=6.37ms"
            )
        key, value, unit = m.group(1), float(m.group(2)), m.group(3)
        try:
            to_base(value, unit)
        except ValueError as e:
            raise _bad(e) from None
        out.append(Measurement(value, unit, "command line", quantity=key, gpu=gpu))
    return out


@app.command()
def cases(
    format: Annotated[ListFormat, typer.Option("--format", "-f")] = ListFormat.table,
    checks: Annotated[
        bool,
        typer.Option(
            "--checks", help="Show the consistency checks on the chapter's own figures instead."
        ),
    ] = False,
) -> None:
    """List the textbook cases (chapter "Operators and runtime"): id, section, title, the GPU the
    chapter quoted it for, and whether it has a runnable model."""
    from analyzers.cases import all_cases, chapter_checks

    if checks:
        rows = [c.to_json() for c in chapter_checks()]
        if format is ListFormat.json:
            echo_json({"checks": rows})
        else:
            for r in rows:
                typer.echo(f"{r['case']}  [{r['verdict']}]  {r['title']}")
                typer.echo(textwrap.indent(textwrap.fill(r["explanation"], 100), "    "))
        return
    cs = all_cases()
    if format is ListFormat.json:
        echo_json({"cases": [c.to_json() for c in cs]})
        return
    rows = [
        {
            "id": c.id,
            "section": c.section,
            "gpu": c.gpu().name.replace("NVIDIA ", ""),
            "model": "yes" if c.runnable else "narrative",
            "title": c.title,
        }
        for c in cs
    ]
    print_table(rows, ["id", "section", "model", "gpu", "title"])


@app.command()
def predict(
    case_id: Annotated[
        str, typer.Argument(metavar="CASE_ID", help="A case id (see `kernelscope cases`).")
    ],
    gpu: Annotated[
        Optional[str],
        typer.Option(
            "--gpu",
            help="GPU name (default: the GPU the chapter quoted the case for, else NVIDIA H200).",
        ),
    ] = None,
    set_: Annotated[
        Optional[list[str]], typer.Option("--set", help="Parameter NAME=VALUE (repeatable).")
    ] = None,
    measured: Annotated[
        Optional[list[str]],
        typer.Option(
            "--measured",
            help="A measurement QUANTITY=VALUE[UNIT] to judge against the prediction "
            "(repeatable), e.g. time=6.37ms.",
        ),
    ] = None,
    format: Annotated[ListFormat, typer.Option("--format", "-f")] = ListFormat.table,
    store: StoreOpt = None,
) -> None:
    """Evaluate one case's model for a GPU and parameters: predicted quantities with units (a
    predicted time lists its terms and tolerance; rates come from the GPU's measured ceilings in the
    store, else the spec with a stated derating), the chapter's figures (reproduced by the model,
    judged when the chapter measured them, or marked when they only restate the model's inputs) and
    the measurements that can confirm it."""
    from analyzers.cases import CaseError, compare, evaluate, figure_checks, get_case

    case = get_case(case_id)  # UnknownName -> one line, exit 1
    try:
        g = case.gpu(gpu)
        ceilings = open_source(store).best_ceilings(g.name)
        ev = evaluate(case, g, parse_sets(set_), ceilings=ceilings)
        comps = compare(ev, parse_measured(measured, ev.gpu.name)) if measured else []
    except (CaseError, ValueError) as e:
        raise _bad(e) from None
    figs = figure_checks(case.id)
    if format is ListFormat.json:
        d = ev.to_json()
        d["chapter_figures"] = [_figure_json(case, f, figs) for f in case.figures]
        d["measurements"] = [m.to_json() for m in case.measurements]
        d["comparisons"] = [c.to_json() for c in comps]
        echo_json(d)
        return
    _print_evaluation(ev, figs, comps)


def _figure_json(case, fig, checks) -> dict:
    d = fig.to_json()
    for c in checks:
        if c.figure is fig:
            d.update(
                {
                    "model_value": c.to_json()["model_value"],
                    "model_display": c.to_json()["model_display"],
                    "check": c.verdict.kind,
                    "check_explanation": c.verdict.explanation,
                }
            )
    return d


def _print_evaluation(ev, figs, comps) -> None:
    case = ev.case
    typer.echo(f"{case.id} — {case.title} ({case.section})")
    chapter_gpu = case.gpu().name
    typer.echo(
        f"GPU: {ev.gpu.name}"
        + (" (the chapter's)" if ev.gpu.name == chapter_gpu and case.default_gpu else "")
    )
    units = {p.name: p.unit for p in case.params}
    if ev.params:
        typer.echo(
            "parameters: "
            + ", ".join(
                f"{k}={_pv(v)}{'' if units[k] in ('', 'count') else ' ' + units[k]}"
                for k, v in ev.params.items()
            )
        )
        measured = {
            k: v
            for k, v in (getattr(ev.params, "sources", {}) or {}).items()
            if v.startswith("measured ceiling")
        }
        if measured:
            typer.echo(
                "from the store's measured ceilings: "
                + "; ".join(f"{k} ← {v.split(': ', 1)[1]}" for k, v in measured.items())
            )
    if not case.runnable:
        typer.echo("\nno runnable model: " + case.no_model_reason)
        typer.echo(textwrap.fill(case.summary, 100))
    else:
        typer.echo("")
        rows = [
            {
                "quantity": k,
                "value": p.display,
                "kind": p.kind,
                "tolerance": p.tolerance_text,
                "label": p.label,
                "source": f"model: {p.formula}" if p.formula else "model",
            }
            for k, p in ev.predictions.items()
        ]
        print_table(rows, ["quantity", "value", "kind", "tolerance", "label", "source"])
        for k, p in ev.predictions.items():
            if p.terms:
                typer.echo(f"\n{k} = {p.display} ({p.tolerance_text}), terms:")
                for t in p.terms:
                    typer.echo(
                        f"  {t.name:<34} {t.to_json()['display']:>10}  {t.formula}"
                        + (f"  [{t.source}]" if t.source else "")
                    )
    for name, table in ev.tables.items():
        typer.echo(f"\n{name}:")
        if table:
            print_table(table, list(table[0]))
    if case.figures:
        typer.echo("\nchapter figures:")
        by_fig = {id(c.figure): c for c in figs}
        for f in case.figures:
            c = by_fig.get(id(f))
            where = f" [{f.gpu.replace('NVIDIA ', '')}]" if f.gpu else ""
            tail = f"  → {c.verdict.kind}: model {c.to_json()['model_display']}" if c else ""
            typer.echo(f"  {f.text}{where}{tail}")
    if case.measurements:
        typer.echo("\nconfirmed by:")
        for m in case.measurements:
            typer.echo(
                f"  {m.kind}: {m.name}" + (f" → {m.quantity}" if m.quantity else "") + f" ({m.how})"
            )
    if comps:
        typer.echo("\nmeasured vs predicted:")
        for c in comps:
            typer.echo(f"  [{c.verdict.kind}] {c.verdict.explanation}")


def _pv(v) -> str:
    if isinstance(v, tuple):
        return ",".join(f"{x:g}" for x in v)
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


@app.command()
def claims(
    format: Annotated[ListFormat, typer.Option("--format", "-f")] = ListFormat.table,
) -> None:
    """Check the claims of the second seed (the "whitepaper") with generic checks (units, physical
    peaks, code that can run, internal consistency, checkable citations) against the GPU registry,
    the case models and cited evidence: above-peak, unit-error, refuted, self-contradictory,
    implausible, unverifiable or plausible."""
    from analyzers.cases import claims as all_claims

    cs = all_claims()
    if format is ListFormat.json:
        echo_json({"claims": [c.to_json() for c in cs]})
        return
    print_table(
        [
            {
                "id": c.id,
                "gpu": c.gpu.replace("NVIDIA ", ""),
                "verdict": c.verdict,
                "claimed": c.claimed,
            }
            for c in cs
        ],
        ["id", "verdict", "gpu", "claimed"],
    )
    for c in cs:
        typer.echo(f"\n{c.id} [{c.verdict}] — {c.gloss} ({c.where})")
        for f in c.findings:
            typer.echo(
                textwrap.indent(textwrap.fill(f"{f.check} [{f.verdict}]: {f.text}", 100), "    ")
            )
