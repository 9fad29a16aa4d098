"""Two GPUs side by side on the microbenchmark suite (issue 38): per case and quantity, each GPU's
prediction (from its own specs and measured ceilings), its measurement and verdict, and the ratio
between the GPUs next to the ratio the predictions give; first, a summary of what differs (the
measured ceilings' ratios next to the spec sheets').

More: docs/architecture.md, *analyzers.gpu_compare*.
"""

from __future__ import annotations

import json

import polars as pl

from analyzers.ceilings import RESOURCES, bounding_resource, result_peak, smem_spec_peak, spec_peak
from analyzers.gpus import find_gpu

#: how far the measured ratio between two GPUs may stray from the predicted one and still agree
RATIO_TOLERANCE = 0.15
#: the chapter's cases whose time is set by DRAM traffic (their time rows are judged against the
#: DRAM ratio)
DRAM_CASES = (
    "littles_law",
    "rmsnorm.split",
    "fusion.activation_chain",
    "flash.attention_traffic",
    "occupancy.sm",
    "transpose.tile",
)
#: rates and costs of the summary: resource -> (label, higher is better)
SUMMARY_RESOURCES = {
    "dram": ("DRAM", True),
    "smem": ("shared memory", True),
    "l2": ("L2", True),
    "bf16": ("BF16 tensor", True),
    "fp32": ("FP32", True),
    "h2d": ("host link", True),
    "launch": ("launch", False),
}


def _speedup(a, b, unit: str):
    if a is None or b is None or not a or not b:
        return None
    return a / b if unit == "s" else b / a


def _params(s) -> dict:
    try:
        v = json.loads(s) if s else {}
        return v if isinstance(v, dict) else {}
    except (TypeError, ValueError):
        return {}


def gpu_label(gpu_name: str | None) -> str:
    """One name per GPU model: the file's name with the registry's, "NVIDIA H100 80GB HBM3 (H100 SXM)"."""
    g = find_gpu(gpu_name or "")
    if g is None or not gpu_name:
        return gpu_name or "unknown GPU"
    short = g.name.removeprefix("NVIDIA ")
    return gpu_name if short in gpu_name else f"{gpu_name} ({short})"


def compare_gpus(results: pl.DataFrame, ceilings: pl.DataFrame, run_a: str, run_b: str) -> dict:
    """The two bench runs side by side (module docstring): {"a", "b" (GPU labels), "rows" (per case,
    metric and parameters), "ceilings" (per resource: A, B, ratio, spec ratio, throttled), "summary"
    (one sentence)}."""
    keys = ["case", "metric", "params", "unit"]
    cols = [*keys, "value", "predicted", "verdict", "gpu_name", "flags"]
    a = (
        results.filter(pl.col("run_id") == run_a)
        .select(cols)
        .unique(keys, keep="first", maintain_order=True)
    )
    b = (
        results.filter(pl.col("run_id") == run_b)
        .select(cols)
        .unique(keys, keep="first", maintain_order=True)
    )
    ga = a["gpu_name"][0] if a.height else None
    gb = b["gpu_name"][0] if b.height else None
    spec_a, spec_b = find_gpu(ga or ""), find_gpu(gb or "")
    j = a.join(b, on=keys, how="inner", suffix="_b").filter(pl.col("case") != "ceiling")
    rows = []
    for r in j.iter_rows(named=True):
        unit = r["unit"] or ""
        p = _params(r["params"])
        res = bounding_resource(r["case"], r["metric"], unit, p)
        if res is None and unit == "s" and r["case"] in DRAM_CASES:
            # a time bound by the same resource
            res = bounding_resource(r["case"], r["metric"], "B/s", p)
        pa, _ = result_peak(spec_a, r["case"], r["metric"], unit, p)
        pb, peak_name = result_peak(spec_b, r["case"], r["metric"], unit, p)
        peak_name = peak_name or (RESOURCES.get(res, (None, ""))[1] if res else "")
        s = _speedup(r["value"], r["value_b"], unit)
        ps = _speedup(r["predicted"], r["predicted_b"], unit)
        rows.append(
            {
                "case": r["case"],
                "metric": r["metric"],
                "params": r["params"] or "",
                "unit": unit,
                "a_predicted": r["predicted"],
                "a_measured": r["value"],
                "a_verdict": r["verdict"],
                "b_predicted": r["predicted_b"],
                "b_measured": r["value_b"],
                "b_verdict": r["verdict_b"],
                "a_pct": r["value"] / pa * 100 if pa and r["value"] is not None else None,
                "b_pct": r["value_b"] / pb * 100 if pb and r["value_b"] is not None else None,
                "bound": res,
                "peak": peak_name if res else "",
                "speedup": s,
                "predicted_speedup": ps,
                "ratio_verdict": None
                if s is None or ps is None
                else ("agrees" if abs(s / ps - 1) <= RATIO_TOLERANCE else "differs"),
            }
        )
    frame = pl.DataFrame(
        rows,
        schema={
            "case": pl.String,
            "metric": pl.String,
            "params": pl.String,
            "unit": pl.String,
            "a_predicted": pl.Float64,
            "a_measured": pl.Float64,
            "a_verdict": pl.String,
            "b_predicted": pl.Float64,
            "b_measured": pl.Float64,
            "b_verdict": pl.String,
            "a_pct": pl.Float64,
            "b_pct": pl.Float64,
            "bound": pl.String,
            "peak": pl.String,
            "speedup": pl.Float64,
            "predicted_speedup": pl.Float64,
            "ratio_verdict": pl.String,
        },
    )
    ceil = _ceilings(ceilings, run_a, run_b, spec_a, spec_b)
    la, lb = gpu_label(ga), gpu_label(gb)
    return {
        "a": la,
        "b": lb,
        "run_a": run_a,
        "run_b": run_b,
        "rows": frame,
        "ceilings": ceil,
        "summary": _summary(la, lb, spec_a, spec_b, frame, ceil),
    }


def _ceilings(ceilings: pl.DataFrame, run_a: str, run_b: str, spec_a, spec_b) -> list[dict]:
    out = []
    if ceilings is None or not ceilings.height:
        return out
    ok = ceilings.filter(pl.col("status") == "trusted")
    for res, (label, higher) in SUMMARY_RESOURCES.items():
        vals = {}
        for key, run in (("a", run_a), ("b", run_b)):
            c = ok.filter((pl.col("run_id") == run) & (pl.col("resource") == res))
            if c.height:
                c = c.sort("value", descending=higher).row(0, named=True)
                vals[key] = c
        if len(vals) < 2:
            continue
        va, vb = vals["a"]["value"], vals["b"]["value"]
        sa = smem_spec_peak(spec_a) if res == "smem" else spec_peak(spec_a, res)
        sb = smem_spec_peak(spec_b) if res == "smem" else spec_peak(spec_b, res)
        out.append(
            {
                "resource": res,
                "label": label,
                "unit": vals["a"]["unit"],
                "a": va,
                "b": vb,
                "ratio": (vb / va if higher else va / vb) if va and vb else None,
                "spec_ratio": (sb / sa) if sa and sb else None,
                "a_throttled": bool(vals["a"].get("throttled")),
                "b_throttled": bool(vals["b"].get("throttled")),
                "name": RESOURCES.get(res, (None, label))[1],
            }
        )
    return out


def _summary(la: str, lb: str, spec_a, spec_b, rows: pl.DataFrame, ceil: list[dict]) -> str:
    """The headline: "B / A: DRAM 1.41× (spec 1.43×), memory-bound cases 1.06–1.38× faster, BF16 1.00× …"."""
    name = lambda s, fallback: s.name.removeprefix("NVIDIA ") if s else fallback  # noqa: E731
    parts = []
    for c in ceil:
        if c["resource"] in ("dram", "bf16", "fp32", "smem") and c["ratio"]:
            spec = f" (spec {c['spec_ratio']:.2f}×)" if c["spec_ratio"] else ""
            thr = (
                " — throttled on "
                + " and ".join(
                    x for x, t in (("A", c["a_throttled"]), ("B", c["b_throttled"])) if t
                )
                if (c["a_throttled"] or c["b_throttled"])
                else ""
            )
            parts.append(f"{c['label']} {c['ratio']:.2f}×{spec}{thr}")
    # the cases the models predict to follow DRAM (predicted speed-up above 1.1 where the DRAM ratio
    # is): their measured range; a latency-bound variant of the same case (few bytes in flight) is
    # left out by its prediction
    launch = next((c for c in ceil if c["resource"] == "launch"), None)
    if launch and launch["a"] and launch["b"]:
        parts.append(
            f"a launch costs {launch['a'] * 1e6:.2f} µs on A's host and {launch['b'] * 1e6:.2f} µs "
            "on B's (a host property: small kernels follow it, not DRAM)"
        )
    mem = rows.filter(
        (pl.col("bound") == "dram")
        & pl.col("speedup").is_not_null()
        & (pl.col("unit") == "s")
        & ((pl.col("predicted_speedup") - 1).abs() > 0.1)
    )
    if mem.height:
        lo, hi = mem["speedup"].min(), mem["speedup"].max()
        parts.append(
            f"DRAM-bound cases {lo:.2f}–{hi:.2f}× faster"
            if lo >= 1
            else f"DRAM-bound cases {lo:.2f}–{hi:.2f}× the speed"
        )
    judged = rows.filter(pl.col("ratio_verdict").is_not_null())
    if judged.height:
        parts.append(
            f"the predicted ratio holds for {int((judged['ratio_verdict'] == 'agrees').sum())} of "
            f"{judged.height} cases (±{RATIO_TOLERANCE:.0%})"
        )
    head = f"{name(spec_b, lb)} / {name(spec_a, la)}"
    return head + ": " + ("; ".join(parts) if parts else "no case measured on both") + "."
