"""`kernelscope compare A B`: run B against run A, as the Compare page shows it
(dashboard.core.source.Source.compare: analyzers.compare and analyzers.baseline)."""

from __future__ import annotations

import math
from typing import Annotated, Optional

import typer

from dashboard.cli._app import ListFormat, StoreOpt, app, echo_json, load, open_source
from dashboard.cli.render import print_table


def _rows(df) -> list[dict]:
    out = df.to_dicts()
    for r in out:
        for k, v in r.items():
            if isinstance(v, float) and not math.isfinite(v):
                r[k] = None
    return out


def compare_report(r, a_name: str, b_name: str) -> dict:
    """The JSON of a CompareResult: kernels, totals, relatedness, and every matched pair's metrics
    (ncu) or the traces' statistics."""
    out = {
        "a": a_name,
        "b": b_name,
        "kind": r.kind,
        "noise_floor": r.noise_floor,
        "related": r.related,
        "totals": r.totals,
        "kernels": _rows(r.kernels.drop([c for c in ("id_a", "id_b") if c in r.kernels.columns])),
    }
    if r.kind == "ncu":
        out["pairs"] = [
            {**p, "metrics": _rows(r.metrics[i].drop("moved"))} for i, p in enumerate(r.pairs)
        ]
    else:
        out["stats"] = _rows(r.stats)
        out["story"] = list(r.story)
    out["units"] = {
        "median_ns_a": "ns",
        "median_ns_b": "ns",
        "change_pct": "%",
        "threshold_pct": "%",
        "metrics.a": "the metric's unit (base units)",
        "stats.a": "the stat's unit",
    }
    return out


@app.command()
def compare(
    a: Annotated[str, typer.Argument(help="Run A (before): a run id or an artifact file.")],
    b: Annotated[str, typer.Argument(help="Run B (after): a run id or an artifact file.")],
    format: Annotated[
        ListFormat, typer.Option("--format", help="Output format.")
    ] = ListFormat.table,
    noise: Annotated[float, typer.Option("--noise", help="Noise floor in percent.")] = 5.0,
    pair: Annotated[
        Optional[int],
        typer.Option(
            "--pair",
            help="ncu runs: show this matched launch "
            "pair's metrics (index; default: every pair's most-moved).",
        ),
    ] = None,
    top: Annotated[
        int, typer.Option("--top", help="Table output: metrics shown per pair (most moved first).")
    ] = 12,
    store: StoreOpt = None,
) -> None:
    """Compare run B with run A: two Nsight Compute runs launch by launch and metric by metric
    (every shared metric, grouped by section, the ones that moved most first), two traces by run
    time, busy and idle time and launch statistics and per kernel; every row with its noise
    threshold ("too noisy to judge" when the measurements cannot resolve a change). Runs that share
    less than half of their kernels are flagged."""
    if not (math.isfinite(noise) and 0 <= noise <= 100):
        raise typer.BadParameter("--noise must be a percentage between 0 and 100")
    ra, na = load(a, store)
    rb, nb = load(b, store)
    if ra.kind == "bench" and rb.kind == "bench":
        _gpu_pair(open_source(store), ra, rb, format)
        return
    r = open_source(store).compare(ra, rb, noise / 100)
    rep = compare_report(r, na, nb)
    if format is ListFormat.json:
        echo_json(rep)
        return
    rel = r.related
    typer.echo(f"A = {na}  B = {nb}  ({r.kind}; noise floor {noise:g} %)")
    typer.echo(
        f"kernel names shared: {rel['shared']} ({rel['a_only']} only in A, {rel['b_only']} "
        f"only in B)"
        + ("" if rel["related"] else "  WARNING: unrelated runs (less than half shared)")
    )
    if r.kind == "trace":
        for line in r.story:
            typer.echo(line)
        print_table(
            rep["stats"],
            [
                ("label", "statistic", None),
                ("a_display", "A", None),
                ("b_display", "B", None),
                ("change_pct", "change [%]", 1),
                ("threshold_pct", "noise [%]", 1),
                ("status", "verdict", None),
            ],
        )
    print_table(
        rep["kernels"],
        [
            ("status", "status", None),
            ("name", "kernel", None),
            ("config", "config", None),
            ("median_ns_a", "A [µs]", 1e-3),
            ("median_ns_b", "B [µs]", 1e-3),
            ("change_pct", "change [%]", 1),
            ("threshold_pct", "noise [%]", 1),
        ],
    )
    if r.kind == "ncu":
        idx = [pair] if pair is not None else range(len(r.pairs))
        for i in idx:
            if not 0 <= i < len(r.pairs):
                raise typer.BadParameter(
                    f"--pair {i}: the runs have {len(r.pairs)} matched launch pairs"
                )
            p = rep["pairs"][i]
            rows = [m for m in p["metrics"] if m["status"] != "unchanged"][:top]
            typer.echo(
                f"\npair {i}: A launch {p['a_id']} vs B launch {p['b_id']} ({p['name'][:80]}): "
                f"{len(p['metrics'])} shared metrics, "
                f"{sum(m['status'] != 'unchanged' for m in p['metrics'])} moved"
            )
            if rows:
                print_table(
                    rows,
                    [
                        ("section", "section", None),
                        ("metric", "metric", None),
                        ("a", "A", None),
                        ("b", "B", None),
                        ("change_pct", "change [%]", 1),
                        ("threshold_pct", "noise [%]", 1),
                        ("status", "verdict", None),
                    ],
                )


def _gpu_pair(src, ra, rb, format: ListFormat) -> None:
    """Two bench runs, GPU × GPU: the same result as the Compare page (analyzers.gpu_compare)."""
    from analyzers.gpu_compare import compare_gpus

    r = compare_gpus(src.bench_results(), src.ceilings(), ra.run_id, rb.run_id)
    rows = r["rows"].sort(["case", "metric"]).to_dicts()
    if format is ListFormat.json:
        echo_json(
            {
                "kind": "gpus",
                "a": r["a"],
                "b": r["b"],
                "run_a": r["run_a"],
                "run_b": r["run_b"],
                "summary": r["summary"],
                "ceilings": r["ceilings"],
                "rows": rows,
            }
        )
        return
    typer.echo(f"A = {r['a']} ({r['run_a']})  B = {r['b']} ({r['run_b']})")
    typer.echo(r["summary"])
    print_table(
        r["ceilings"],
        [
            ("label", "ceiling", None),
            ("a", "A", None),
            ("b", "B", None),
            ("ratio", "B/A [x]", 1),
            ("spec_ratio", "spec [x]", 1),
            ("unit", "unit", None),
        ],
    )
    print_table(
        rows,
        [
            ("case", "case", None),
            ("metric", "metric", None),
            ("params", "parameters", None),
            ("a_predicted", "A pred", None),
            ("a_measured", "A meas", None),
            ("a_verdict", "A", None),
            ("b_predicted", "B pred", None),
            ("b_measured", "B meas", None),
            ("b_verdict", "B", None),
            ("speedup", "B/A [x]", 1),
            ("predicted_speedup", "pred [x]", 1),
            ("ratio_verdict", "ratio", None),
        ],
    )
