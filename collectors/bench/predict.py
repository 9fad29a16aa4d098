"""Predictions and verdicts for bench results: each measured record next to its case's model.

`MAPPERS[case](metric, params) -> (prediction key, case parameters, measurement unit) | None` says which
prediction of `analyzers.cases.evaluate(case, gpu, parameters)` a record measures; the verdict comes
from `analyzers.cases.verdict`. Records without a mapping keep predicted/verdict null. The occupancy
case compares Nsight Compute's occupancy with the run's own calculated occupancy (analyzers.occupancy)
for the same launch.
"""
from __future__ import annotations

import json

MIB = 1 << 20


def _tiling(metric, p):
    key = {"time": "time", "l2_read_from_l1_bytes": "l2_read_bytes", "dram_read_bytes": "dram_read_bytes",
           "calculated_occupancy": "occupancy", "theoretical_occupancy": "occupancy"}.get(metric)
    if key is None or "tile_m" not in p:
        return None
    cp = {"M": p["m"], "K": p["k"], "N": p["n"], "m": p["tile_m"], "n": p["tile_n"], "k": p["tile_k"],
          "stage": 4, "acc": 0, "threads": 256}          # the kernel stages FP32 tiles, accumulates in registers
    if key == "occupancy":
        if "regs_per_thread" not in p:
            return None
        cp["regs"] = p["regs_per_thread"]
    return key, cp, {"time": "s", "occupancy": "%"}.get(key, "B")


def _bank(metric, p):
    if "stride_words" in p and metric == "bank_conflict_degree":
        return "degree", {"stride": p["stride_words"], "width": p["width_bytes"]}, "way"
    if metric == "time_ratio_unpadded_padded":
        return "time_ratio_vs_free", {"stride": 32, "width": p["width_bytes"]}, "×"
    return None


def _transpose(metric, p):
    key = {"time": "time", "bank_conflict_degree": "read_degree"}.get(metric)
    if key is None or "tile" not in p:
        return None
    return key, {"n": p["n"], "t": p["tile"], "pad": 1 if p["padded"] else 0}, "s" if key == "time" else "way"


def _rmsnorm(metric, p):
    if metric != "time":
        return None
    return "time", {"rows": p["rows"], "hidden": p["hidden"], "s": p["segments"]}, "s"


def _fusion(metric, p):
    if metric != "time":
        return None
    return ("unfused_time" if p["impl"].startswith("unfused") else "fused_time"), {"M": p["m"], "F": p["f"]}, "s"


def _flash(metric, p):
    if metric != "time":
        return None
    key = "standard_time" if p["backend"] == "math" else "flash_time"
    return key, {"L": p["length"], "d": p["head_dim"], "causal": 1 if p.get("causal") else 0}, "s"


def _graph(metric, p):
    fused = not p["activation"].startswith("unfused")
    mode = p["mode"]
    pre = "fused_" if fused else ""
    if metric == "kernels_per_ffn":
        return f"{pre}{mode}_kernels", {"calls": 1}, "count"
    if metric == "time_per_ffn":
        return f"{pre}{mode}_time", {"calls": 1}, "s"
    if metric == "host_launches_per_ffn" and mode == "eager":
        return f"{pre}eager_submissions", {"calls": 1}, "count"
    return None


def _littles(metric, p):
    if metric != "bandwidth":
        return None
    return "achieved_bandwidth", {"occ": p["occupancy_pct"], "bytes_per_thread": 16 * p["unroll"]}, "B/s"


def _h2d(metric, p):
    pinned = p["memory"] == "pinned"
    cp = {"size": p["total_bytes"] / MIB, "k": p["chunks"]}
    if metric == "copy_bandwidth":
        return ("pinned_bandwidth" if pinned else "pageable_bandwidth"), cp, "B/s"
    if metric == "copy_time":
        return ("serial_time" if pinned else "pageable_time"), cp, "s"
    return None


def _launch(metric, p):
    if metric == "back_to_back_time_per_launch":
        return "launch_floor", {}, "s"
    return None


def _fp(metric, p):
    if metric in ("left_grouping", "right_grouping"):
        return metric.split("_")[0], {}, ""
    if metric == "median_ulp":
        s = p["segments"]
        cp = {"rows": p["rows"], "length": p["length"]}
        if s == 1:
            return "ulp_one_segment", cp, "ULP"
        return "ulp_segments", {**cp, "segments": s}, "ULP"
    return None


MAPPERS = {
    "tiling.traffic": _tiling, "bank.column_read": _bank, "transpose.tile": _transpose, "rmsnorm.split": _rmsnorm,
    "fusion.activation_chain": _fusion, "flash.attention_traffic": _flash, "graph.replay": _graph,
    "littles_law": _littles, "h2d.chunked_copy": _h2d, "launch.overhead": _launch, "fp.non_associativity": _fp,
}
GPU_FREE_CASES = {"fp.non_associativity"}    # their models do not depend on the GPU


def _key(params: dict) -> str:
    return json.dumps(params, sort_keys=True)


def predict_rows(rows: list[dict], gpu_name: str | None, gpu_attributes: dict | None) -> list[dict]:
    """For each row (case, metric, value, params (dict), cv, source): {"predicted", "predicted_unit",
    "verdict", "verdict_explanation"}, all None where no model applies or it cannot be evaluated."""
    from analyzers.cases import Measurement, evaluate, verdict
    from analyzers.cases.model import Prediction
    try:
        from analyzers.gpus import resolve_gpu
        gpu = resolve_gpu(gpu_name, gpu_attributes or {})
    except Exception:  # noqa: BLE001 - unknown GPU (or the CPU): only GPU-free cases get predictions
        gpu = None
    none = {"predicted": None, "predicted_unit": None, "verdict": None, "verdict_explanation": None}
    evals: dict = {}
    calc_occ = {_key({k: v for k, v in r["params"].items() if k != "bytes"}): r["value"]
                for r in rows if r["case"] == "occupancy.sm" and r["metric"] == "calculated_occupancy"}
    out = []
    for r in rows:
        res = dict(none)
        try:
            pr, unit = None, None
            if r["case"] == "occupancy.sm" and r["metric"] in ("theoretical_occupancy", "achieved_occupancy",
                                                              "driver_occupancy"):
                v = calc_occ.get(_key(r["params"]))
                if v is not None:
                    kind = "upper_bound" if r["metric"] == "achieved_occupancy" else "exact"
                    pr = Prediction("occupancy", "occupancy calculated by analyzers.occupancy", v, "%",
                                    "resident warps / max warps", kind=kind, rel_tol=0.01)
                    unit = "%"
            elif r["case"] in MAPPERS and (gpu is not None or r["case"] in GPU_FREE_CASES):
                m = MAPPERS[r["case"]](r["metric"], r["params"])
                if m is not None:
                    key, cparams, unit = m
                    ek = (r["case"], _key(cparams))
                    if ek not in evals:
                        evals[ek] = evaluate(r["case"], gpu, cparams)
                    pr = evals[ek].predictions.get(key)
            if pr is not None and pr.numeric:
                spread = abs(r["cv"] * r["value"]) if r.get("cv") else None
                v = verdict(pr, Measurement(r["value"], unit, r["source"], spread=spread, quantity=pr.key))
                res = {"predicted": float(pr.value), "predicted_unit": pr.unit, "verdict": v.kind,
                       "verdict_explanation": v.explanation}
        except Exception as e:  # noqa: BLE001 - a model that cannot answer leaves this row without a verdict
            res = dict(none, verdict_explanation=f"no prediction: {type(e).__name__}: {e}")
        out.append(res)
    return out
