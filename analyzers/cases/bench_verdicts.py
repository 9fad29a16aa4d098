"""Bench results read with today's models: derived records and a prediction and verdict for every record.

`attach(results, gpu)` takes a bench run's results table (collectors.schema.BENCH_SCHEMA, as stored) and the
run's GPUSpec (None for a CPU-only run) and returns the table the CLI and the pages show:

- derived records are computed from the stored ones, with the analyzers' single functions (never stored, so a
  stored run always shows today's definitions): from Nsight Compute counter records the bank-conflict degree
  (analyzers.kernels.conflict_degree), wavefronts per request and DRAM bandwidth
  (analyzers.kernels.dram_bandwidth_gbps); from the launch parameters of the occupancy and tiling kernels the
  occupancy our calculator gives (analyzers.occupancy). Derived or calculated records an older kernelscope
  stored are dropped first;
- `predicted`, `predicted_unit`, `verdict`, `verdict_explanation`: the case's model (analyzers.cases) for this GPU
  at the record's parameters (`MAPPERS[case](metric, params) -> (prediction key, case parameters, unit)`), and
  its verdict (analyzers.cases.verdict). Records without a mapping keep them null. The occupancy case compares
  Nsight Compute's and the driver's occupancy with the calculator's for the same launch.
"""
from __future__ import annotations

import json

import polars as pl

from analyzers.gpus import GPUSpec
from analyzers.kernels import conflict_degree, dram_bandwidth_gbps

MIB = 1 << 20
#: the suite's tiled matmul (ks_matmul_*): BF16 inputs (2 bytes), staged in shared memory as FP32 (4 bytes)
TILE_INPUT_BYTES = 2
TILE_STAGE_BYTES = 4


def _tiling(metric, p):
    key = {"time": "time", "l2_read_from_l1_bytes": "l2_read_bytes", "dram_read_bytes": "dram_read_bytes",
           "calculated_occupancy": "occupancy", "theoretical_occupancy": "occupancy"}.get(metric)
    if key is None or "tile_m" not in p:
        return None
    cp = {"M": p["m"], "K": p["k"], "N": p["n"], "m": p["tile_m"], "n": p["tile_n"], "k": p["tile_k"],
          "elem": TILE_INPUT_BYTES,
          "stage": TILE_STAGE_BYTES, "acc": 0, "threads": 256}    # FP32 staged tiles, registers accumulate
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


def predict_rows(rows: list[dict], gpu: GPUSpec | None, calc_occ: dict[str, float]) -> list[dict]:
    """For each row (case, metric, value, params (dict), cv, source): {"predicted", "predicted_unit",
    "verdict", "verdict_explanation"}, all None where no model applies or it cannot be evaluated.
    calc_occ: JSON of an occupancy.sm launch's params -> the calculator's occupancy [%]."""
    from analyzers.cases import Measurement, evaluate, verdict
    from analyzers.cases.model import Prediction
    none = {"predicted": None, "predicted_unit": None, "verdict": None, "verdict_explanation": None}
    evals: dict = {}
    out = []
    for r in rows:
        res = dict(none)
        try:
            pr, unit = None, None
            if r["case"] == "occupancy.sm" and r["metric"] in ("theoretical_occupancy", "achieved_occupancy",
                                                              "driver_occupancy"):
                v = calc_occ.get(_key(_launch_params(r["params"])))
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


# ---------------------------------------------------------------------------------------------------
# Derived records
# ---------------------------------------------------------------------------------------------------

#: metrics an older kernelscope stored that are now derived on read
DERIVED_METRICS = ("bank_conflict_degree", "shared_wavefronts_per_request", "dram_bandwidth", "calculated_occupancy")
COUNTER_SOURCE = "ncu counter"
CALC_SOURCE = "calculated (analyzers.occupancy)"
_LAUNCH_KEYS = ("kernel", "regs_per_thread", "smem_static_bytes", "smem_dynamic_bytes", "block_size")


def _launch_params(p: dict) -> dict:
    return {k: p[k] for k in _LAUNCH_KEYS if k in p}


def _counter_derived(results: pl.DataFrame) -> pl.DataFrame:
    """Degree, wavefronts per request and DRAM bandwidth of each profiled kernel (one per case and params) from
    its counter records."""
    c = results.filter(pl.col("source") == COUNTER_SOURCE)
    if not c.height:
        return results.clear()
    wide = c.pivot(on="metric", index=["case", "params"], values="value", aggregate_function="first")
    for col in ("shared_ld_wavefronts", "shared_ld_bank_conflicts", "shared_ld_requests", "dram_read_bytes",
                "dram_write_bytes", "kernel_duration"):
        if col not in wide.columns:
            wide = wide.with_columns(pl.lit(None, pl.Float64).alias(col))
    wide = wide.with_columns(
        bank_conflict_degree=conflict_degree(pl.col("shared_ld_wavefronts"), pl.col("shared_ld_bank_conflicts")),
        shared_wavefronts_per_request=pl.when(pl.col("shared_ld_requests") > 0)
        .then(pl.col("shared_ld_wavefronts") / pl.col("shared_ld_requests")),
        # GB/s from seconds: (bytes) / (s x 1e9 ns/s) = bytes/ns; x 1e9 gives B/s, the record unit
        dram_bandwidth=dram_bandwidth_gbps(pl.col("dram_read_bytes"), pl.col("dram_write_bytes"),
                                           pl.col("kernel_duration") * 1e9) * 1e9,
    )
    units = {"bank_conflict_degree": "1", "shared_wavefronts_per_request": "1", "dram_bandwidth": "B/s"}
    notes = c.group_by("case", "params", maintain_order=True).agg(pl.col("notes").first())
    long = (wide.select("case", "params", *units).unpivot(index=["case", "params"], variable_name="metric",
                                                            value_name="value")
            .drop_nulls("value").join(notes, on=["case", "params"], how="left"))
    return long.select(
        "case", "metric", "value", pl.col("metric").replace_strict(units, return_dtype=pl.String).alias("unit"),
        "params", pl.lit(None, pl.Float64).alias("cv"), pl.lit(1, pl.Int64).alias("n"),
        pl.lit(COUNTER_SOURCE).alias("source"),
        pl.concat_str([pl.lit("derived from the counter records (analyzers.kernels); "), pl.col("notes").fill_null("")])
        .alias("notes"), pl.lit([], pl.List(pl.String)).alias("flags"))


def _calculated_occupancy(results: pl.DataFrame, gpu: GPUSpec | None) -> tuple[list[dict], dict[str, float]]:
    """The calculator's occupancy for each launch configuration the occupancy and tiling records name."""
    from analyzers.occupancy import occupancy
    rows, calc = [], {}
    if gpu is None:
        return rows, calc
    seen = set()
    for case, params in results.filter(pl.col("case").is_in(["occupancy.sm", "tiling.traffic"])) \
            .select("case", "params").unique(maintain_order=True).iter_rows():
        p = json.loads(params)
        if "regs_per_thread" not in p:
            continue
        lp = _launch_params(p)
        key = _key(lp)
        if (case, key) in seen:
            continue
        seen.add((case, key))
        try:
            r = occupancy(gpu, int(p.get("block_size", 256)), int(p["regs_per_thread"]),
                          int(p.get("smem_static_bytes", 0)), int(p.get("smem_dynamic_bytes", 0)))
        except ValueError:
            continue
        calc[key] = r.occupancy_pct
        rows.append({"case": case, "metric": "calculated_occupancy", "value": r.occupancy_pct, "unit": "%",
                     "params": json.dumps(lp if case == "occupancy.sm" else p, sort_keys=True), "cv": None, "n": 1,
                     "source": CALC_SOURCE, "notes": f"{r.blocks_per_sm} blocks/SM, limited by {', '.join(r.limiters)}",
                     "flags": []})
    return rows, calc


def attach(results: pl.DataFrame, gpu: GPUSpec | None) -> pl.DataFrame:
    """The stored results with today's derived records, predictions and verdicts (see the module docstring)."""
    stale = pl.col("metric").is_in(list(DERIVED_METRICS)) & pl.col("source").is_in([COUNTER_SOURCE, "calculated"])
    base = results.filter(~stale)
    derived = _counter_derived(base)
    calc_rows, calc = _calculated_occupancy(base, gpu)
    parts = [base, derived]
    if calc_rows:
        parts.append(pl.DataFrame(calc_rows, schema=base.schema))
    full = pl.concat([p.select(base.columns).cast(base.schema) for p in parts])
    rows = [{**r, "params": json.loads(r["params"])} for r in
            full.select("case", "metric", "value", "params", "cv", "source").to_dicts()]
    preds = predict_rows(rows, gpu, calc)
    extra = pl.DataFrame(preds, schema={"predicted": pl.Float64, "predicted_unit": pl.String, "verdict": pl.String,
                                        "verdict_explanation": pl.String})
    return pl.concat([full, extra], how="horizontal")


# ---------------------------------------------------------------------------------------------------
# Checks that need Nsight Compute counters
# ---------------------------------------------------------------------------------------------------

#: per case, the checks that need Nsight Compute counters (`kernelscope bench --ncu`): record metric -> what it checks
COUNTER_CHECKS = {
    "bank.column_read": {"bank_conflict_degree": "the bank-conflict degree at every stride (model: gcd(stride, 32))"},
    "transpose.tile": {"bank_conflict_degree": "the transposes' shared-memory read conflicts",
                       "dram_read_bytes": "the bytes the transposes read from DRAM"},
    "tiling.traffic": {"l2_read_from_l1_bytes": "the tile model's L2 read traffic",
                       "dram_read_bytes": "the tiles' DRAM reads", "theoretical_occupancy": "the tiles' occupancy"},
    "littles_law": {"achieved_occupancy": "the occupancy each bandwidth point ran at"},
    "occupancy.sm": {"theoretical_occupancy": "ncu's theoretical occupancy vs the calculator",
                     "achieved_occupancy": "the achieved occupancy under the calculator's bound"},
}


def skipped_checks(meta: dict, results: pl.DataFrame) -> list[dict]:
    """The counter-based checks a bench run could not make: for every case the run measured that has checks in
    COUNTER_CHECKS but no Nsight Compute counter record, {case, checks: [what it checks], reason} — the reason is
    the run's ncu status (not requested, not found, ERR_NVGPUCTRPERM ...). Event-timed results are unaffected."""
    ran = set(results["case"].unique().to_list())
    counted = set(results.filter(pl.col("source") == COUNTER_SOURCE)["case"].unique().to_list())
    ncu = meta.get("ncu") or {}
    options = meta.get("options") or {}
    if not ncu and not options.get("ncu"):
        reason = "Nsight Compute was not requested (kernelscope bench --ncu)"
    else:
        reason = f"Nsight Compute: {ncu.get('status') or 'no counters recorded'}"
        perm = [f for f in meta.get("failures") or [] if "ERR_NVGPUCTRPERM" in str(f.get("error"))]
        if perm:
            reason = "no permission to read the GPU's performance counters (ERR_NVGPUCTRPERM)"
    return [{"case": case, "checks": list(COUNTER_CHECKS[case].values()), "metrics": list(COUNTER_CHECKS[case]),
             "reason": reason} for case in COUNTER_CHECKS if case in ran and case not in counted]
