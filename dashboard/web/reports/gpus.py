"""GPUs (?gpu=NAME,NAME): spec sheets next to the ceilings `kernelscope bench` measured on each GPU,
the bench runs, and the same cases on several GPUs, each normalised to its own peak."""

from __future__ import annotations

import json

import polars as pl

from analyzers.ceilings import HOST_RESOURCES, RESOURCES, result_peak, spec_peak
from analyzers.gpu_compare import compare_gpus
from analyzers.gpus import find_gpu
from analyzers.units import fmt_bytes, fmt_short
from dashboard.web import charts
from dashboard.web.reports.report_blocks import Chart, Heading, Report, Table, Text, code, num, text
from dashboard.web.reports.run_links import gpu_table, link, runs_table
from dashboard.core.source import Source


def _gpu_list(raw) -> list[str]:
    if not raw:
        return []
    items = raw if isinstance(raw, list) else str(raw).split(",")
    return [s.strip() for s in items if s.strip()]


def params_text(params: dict) -> str:
    """A bench record's parameters for reading: "bytes 64 MiB · chunks 4 · memory pinned" (sizes in
    binary units, lists and nested values as compact JSON), not the raw JSON that wrapped a table's
    rows onto five lines."""
    out = []
    for k, v in params.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            shown = v if isinstance(v, str) else json.dumps(v, separators=(",", ":"))
        elif "bytes" in k and v >= 1024:
            shown = fmt_bytes(v)
        else:
            shown = f"{v:,}" if isinstance(v, int) else f"{v:g}"
        out.append(f"{k} {shown}")
    return " · ".join(out)


def build(src: Source, params: dict) -> Report:
    rep = Report("GPUs", subtitle="Spec sheets next to what microbenchmarks measured on each GPU.")
    rep.add(Heading("Spec sheet and measured ceilings"), gpu_table(src))
    judged = src.ceilings()
    ceil = judged.filter(pl.col("status") == "trusted")
    bench_runs = src.bench_runs()
    if not bench_runs:
        rep.add(
            Text(
                "No microbenchmark runs in the store: run `kernelscope bench` on a GPU "
                "machine (it stores one "
                "run per GPU) or ingest its result files; measured ceilings then appear here, "
                "in the roofline "
                'and in every "% of peak".',
                "info",
            )
        )
        return rep
    if ceil.height:
        # the best of each GPU's runs per ceiling (highest rate, lowest cost), with how many runs
        # measured it host-side figures (launch submit, host memcpy, the host link) stay apart per
        # host (HOST_RESOURCES)
        best = (
            ceil.with_columns(
                key=pl.when(pl.col("unit") == "s")
                .then(-pl.col("value"))
                .otherwise(pl.col("value")),
                on_host=pl.when(pl.col("resource").is_in(list(HOST_RESOURCES))).then(
                    pl.col("host")
                ),
            )
            .sort("key", descending=True)
            .group_by("gpu", "ceiling", "on_host", maintain_order=True)
            .agg(pl.all().exclude("key").first(), pl.len().alias("runs"))
            .sort("gpu", "resource", "ceiling")
        )
        rows = []
        for r in best.iter_rows(named=True):
            g = find_gpu(r["gpu_name"])
            sp = spec_peak(g, r["resource"])
            rows.append(
                {
                    **r,
                    "resource_label": RESOURCES.get(r["resource"], (None, "—"))[1],
                    "shown": fmt_short(r["value"], r["unit"]),
                    "spec": fmt_short(sp, r["unit"]) if sp else "—",
                    "pct_of_spec": r["value"] / sp * 100 if sp and r["unit"] != "s" else None,
                    "cv_pct": r["cv"] * 100 if r["cv"] is not None else None,
                    "open": link("gpus", gpu=r["gpu"]),
                }
            )
        cf = pl.DataFrame(rows, infer_schema_length=None)
        rep.add(
            Heading("Measured ceilings vs spec"),
            Table(
                "ceilings",
                cf,
                {
                    "gpu": text("GPU"),
                    "resource_label": text("resource"),
                    "ceiling": text("measurement"),
                    "shown": text("measured"),
                    "spec": text("spec sheet"),
                    "pct_of_spec": num(
                        "measured of spec",
                        "%",
                        "%.1f",
                        "measured / the GPU's own spec-sheet figure",
                    ),
                    "cv_pct": num("spread (cv)", "%", "%.2f", "std / mean over the repetitions"),
                    "source": text("how measured"),
                    "on_host": text(
                        "host",
                        "the host a host-side figure belongs to (launch submit, host memcpy, the "
                        "host link: used per host, never the best over hosts); a run recorded "
                        "before hosts were stored is its own host",
                    ),
                    "runs": num("runs", help="bench runs of this GPU that measured it"),
                    "run_id": text("best run"),
                },
                caption="The best trusted value of each GPU's bench runs "
                "(physically plausible for the GPU model it was measured on; `kernelscope "
                "ceilings` lists every ceiling, pins a run or excludes one).",
            ),
        )
        fr = (
            cf.filter(pl.col("pct_of_spec").is_not_null())
            .select(
                pl.col("resource_label").alias("resource"),
                "gpu",
                pl.col("pct_of_spec").alias("pct"),
            )
            .group_by("resource", "gpu", maintain_order=True)
            .agg(pl.col("pct").max())
        )
        if fr.height:
            rep.add(
                Chart(
                    "ceilings_vs_spec",
                    charts.fraction_bars(
                        fr,
                        x="resource",
                        x_title="resource",
                        group="gpu",
                        group_title="GPU",
                        title="Best measured ceiling as a share of each GPU's own spec-sheet peak",
                        value_title="measured / spec [%]",
                    ),
                )
            )
    unused = judged.filter(pl.col("status") != "trusted")
    if unused.height:
        rows = [
            {**r, "shown": fmt_short(r["value"], r["unit"]) if r["value"] is not None else "—"}
            for r in unused.iter_rows(named=True)
        ]
        rep.add(
            Heading("Measured ceilings not used"),
            Text(
                f"{unused.height} measured ceiling(s) of the store's bench runs are not used for "
                "any % of peak, roofline or finding: rejected as physically implausible for their "
                "GPU model, or set aside by `kernelscope ceilings --pin / --exclude`.",
                "warning",
            ),
            Table(
                "ceilings_unused",
                pl.DataFrame(rows, schema_overrides={"shown": pl.String}, infer_schema_length=None),
                {
                    "gpu": text("GPU"),
                    "ceiling": text("measurement"),
                    "shown": text("measured"),
                    "status": text("status"),
                    "reason": text("why"),
                    "run_id": text("run"),
                },
            ),
        )
    rep.add(Heading("Bench runs"), runs_table(bench_runs, "bench_runs"))
    rep.add(
        *bench_compare_blocks(
            src, [r.run_id for r in bench_runs], wanted=_gpu_list(params.get("gpu"))
        )
    )
    return rep


#: the GPU × GPU table's columns (analyzers.gpu_compare rows)
PAIR_COLS = {
    "case": text("case"),
    "metric": text("metric"),
    "params": text("parameters"),
    "unit": text("unit"),
    "a_predicted": num(
        "A predicted", help="the case's model for GPU A's specs and measured ceilings"
    ),
    "a_measured": num("A measured", help="kernelscope bench on GPU A (event timing)"),
    "a_verdict": text("A verdict"),
    "b_predicted": num(
        "B predicted", help="the case's model for GPU B's specs and measured ceilings"
    ),
    "b_measured": num("B measured", help="kernelscope bench on GPU B (event timing)"),
    "b_verdict": text("B verdict"),
    "speedup": num("B over A", "×", "%.2f", "a time's A / B, a rate's B / A (> 1: B is faster)"),
    "predicted_speedup": num("predicted", "×", "%.2f", "the same ratio of the two predictions"),
    "ratio_verdict": text("ratio", "agrees when measured / predicted speed-up is within ±15 %"),
    "a_pct": num(
        "A of its ceiling",
        "%",
        "%.1f",
        "a rate / the spec peak of the resource that bounds it on A",
    ),
    "b_pct": num(
        "B of its ceiling",
        "%",
        "%.1f",
        "a rate / the spec peak of the resource that bounds it on B",
    ),
    "peak": text("bounding resource"),
}


def gpu_pair_blocks(src: Source, a_run: str, b_run: str) -> list:
    """Two bench runs, GPU × GPU (analyzers.gpu_compare): the summary first, the ceilings side by
    side, then per case and quantity each GPU's prediction, measurement and verdict with the ratio
    between them."""
    r = compare_gpus(src.bench_results(), src.ceilings(), a_run, b_run)
    out: list = [
        Heading(f"GPU × GPU: B = {code(r['b'])} against A = {code(r['a'])}"),
        Text(r["summary"], "info"),
    ]
    if r["ceilings"]:
        ceil = pl.DataFrame(
            [
                {
                    **c,
                    "a_shown": fmt_short(c["a"], c["unit"]),
                    "b_shown": fmt_short(c["b"], c["unit"]),
                    "throttled": ", ".join(
                        x for x, t in (("A", c["a_throttled"]), ("B", c["b_throttled"])) if t
                    )
                    or None,
                }
                for c in r["ceilings"]
            ]
        )
        out.append(
            Table(
                "gpu_pair_ceilings",
                ceil,
                {
                    "name": text("resource"),
                    "a_shown": text("A measured"),
                    "b_shown": text("B measured"),
                    "ratio": num("B over A", "×", "%.2f", "rates B / A; costs A / B"),
                    "spec_ratio": num("spec sheets", "×", "%.2f", "B's datasheet peak / A's"),
                    "throttled": text(
                        "throttled",
                        "measured while NVML reported a clock-event (throttle) reason: a lower "
                        "bound of the resource, kept apart",
                    ),
                },
                static=True,
            )
        )
    rows = r["rows"].sort(["case", "metric"])
    out.append(
        Table(
            "gpu_pair",
            rows,
            PAIR_COLS,
            caption=f"{rows.height} case results measured on "
            "both GPUs; each rate is a fraction of the ceiling that bounds it on its own GPU (a "
            "shared-memory column read or an unpadded transpose: shared memory; host copies: the "
            "host link).",
        )
    )
    return out


def bench_compare_blocks(src: Source, run_ids: list[str], wanted: list[str] | None = None) -> list:
    """The same bench cases across GPUs (one column per GPU), normalised to each GPU's own spec peak."""
    res = src.bench_results().filter(pl.col("run_id").is_in(run_ids))
    if wanted:
        res = res.filter(pl.col("gpu").is_in(wanted))
    gpus = res["gpu"].unique(maintain_order=True).to_list()
    out: list = [Heading("Same cases across GPUs" if len(gpus) > 1 else "Bench results")]
    if not res.height:
        return out + [
            Text(
                "No bench results to show"
                + (f" for {', '.join(code(g) for g in wanted)}" if wanted else "")
                + ".",
                "caption",
            )
        ]
    rows = []
    for r in res.iter_rows(named=True):
        try:
            params = json.loads(r["params"]) if r["params"] else {}
        except ValueError:
            params = {}
        peak, peak_name = result_peak(
            find_gpu(r["gpu_name"]),
            r["case"],
            r["metric"],
            r["unit"] or "",
            params if isinstance(params, dict) else {},
        )
        rows.append(
            {
                "case": r["case"],
                "metric": r["metric"],
                "gpu": r["gpu"],
                "params": params_text(params)
                if isinstance(params, dict) and params
                else (r["params"] or ""),
                "value": r["value"],
                "unit": r["unit"] or "",
                "shown": fmt_short(r["value"], r["unit"] or ""),
                "pct": r["value"] / peak * 100 if peak and r["value"] is not None else None,
                "peak": peak_name,
                "cv_pct": r["cv"] * 100 if r["cv"] is not None else None,
                "predicted": _predicted_text(r),
                "verdict": r["verdict"],
            }
        )
    df = pl.DataFrame(rows, infer_schema_length=None)
    if len(gpus) > 1:
        wide = df.pivot(
            on="gpu",
            index=["case", "metric", "params", "unit"],
            values=["shown", "pct"],
            aggregate_function="first",
        )
        cols = {"case": text("case"), "metric": text("metric"), "params": text("parameters")}
        for g in gpus:
            if f"shown_{g}" in wide.columns:
                cols[f"shown_{g}"] = text(f"{g}")
            if f"pct_{g}" in wide.columns:
                cols[f"pct_{g}"] = num(
                    f"{g} of own peak", "%", "%.1f", "value / that GPU's spec peak"
                )
        out.append(
            Table(
                "bench_across_gpus",
                wide,
                cols,
                caption="Rates as a share of each GPU's "
                "own spec-sheet peak (DRAM for B/s, host link for host copies, BF16 dense for "
                "matrix work, else FP32).",
            )
        )
        fr = (
            df.filter(pl.col("pct").is_not_null())
            .with_columns(label=pl.concat_str([pl.col("case"), pl.lit(" · "), pl.col("metric")]))
            .group_by("label", "gpu")
            .agg(pl.col("pct").max())
        )
        if fr.height:
            out.append(
                Chart(
                    "bench_across_gpus_chart",
                    charts.fraction_bars(
                        fr.sort("label"),
                        x="label",
                        x_title="case · metric (best over parameters)",
                        group="gpu",
                        group_title="GPU",
                        title="Same cases, each GPU against its own peak",
                    ),
                )
            )
    else:
        out.append(
            Table(
                "bench_results",
                df,
                {
                    "case": text("case"),
                    "metric": text("metric"),
                    "params": text("parameters"),
                    "shown": text("measured"),
                    "pct": num("of spec peak", "%", "%.1f", "value / the GPU's spec peak"),
                    "peak": text("peak used"),
                    "cv_pct": num("spread (cv)", "%", "%.2f"),
                    "predicted": text(
                        "predicted",
                        "the case's model at this record's parameters, with the run's measured "
                        "ceilings; a bound says so",
                    ),
                    "verdict": text("verdict"),
                },
            )
        )
    return out


def _predicted_text(r: dict) -> str:
    v = r.get("predicted")
    if v is None:
        return ""
    kind = r.get("predicted_kind") or ""
    tag = {
        "lower_bound": " (lower bound)",
        "upper_bound": " (upper bound)",
        "range": " (range)",
    }.get(kind, "")
    return fmt_short(v, r.get("predicted_unit") or "") + tag
