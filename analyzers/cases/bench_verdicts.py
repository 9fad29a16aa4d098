"""Bench results read with today's models: derived records and a prediction and verdict for every
record.

More: docs/architecture.md, *analyzers.cases.bench_verdicts*.
Start-up: imports that only some commands, pages or GPUs need sit inside the functions that use
them, so each command loads what it uses.
"""

from __future__ import annotations

import json

import polars as pl

from analyzers.gpus import GPUSpec
from analyzers.kernels import conflict_degree, dram_bandwidth_gbps

MIB = 1 << 20
#: the suite's tiled matmuls: BF16 inputs (2 bytes); the FP32 kernels (ks_matmul_*) stage them in
#: shared memory as FP32 (4 bytes) with the accumulator in registers; the tensor-core kernels
#: (ks_mma_*) stage BF16 and keep the chapter's FP32 accumulator tile in shared memory (S = 2mk +
#: 2kn + 4mn)
TILE_INPUT_BYTES = 2
TILE_STAGE_BYTES = 4
#: params a timing record gains from its byte / FLOP accounting (the same kernel's counter records
#: lack them)
_ACCOUNTING = ("bytes", "flop")
#: the thread patch (rows x cols per thread) of the FP32 kernels ks_matmul_<m>x<n>
FP32_PATCH = {(64, 64): (4, 4), (64, 128): (4, 8), (128, 128): (8, 8)}


def _tiling(metric, p, sib):
    key = {
        "time": "time",
        "l2_read_from_l1_bytes": "l2_read_bytes",
        "dram_read_bytes": "dram_read_bytes",
        "theoretical_occupancy": "occupancy",
        "time_ratio_vs_64x64": "time_ratio_vs_ref",
    }.get(metric)
    if key is None or "tile_m" not in p:
        return None
    tensor = p.get("engine", "fp32") == "tensor" or str(p.get("kernel", "")).startswith("ks_mma")
    cp = {
        "M": p["m"],
        "K": p["k"],
        "N": p["n"],
        "m": p["tile_m"],
        "n": p["tile_n"],
        "k": p["tile_k"],
        "elem": TILE_INPUT_BYTES,
        "threads": 256,
    }
    if tensor:
        cp.update(engine="tensor", stage=2, acc=4)
    else:
        tm, tn = FP32_PATCH.get((p["tile_m"], p["tile_n"]), (0, 0))
        cp.update(engine="fp32", stage=TILE_STAGE_BYTES, acc=0, tm=tm, tn=tn)
    if "regs_per_thread" in p:
        cp["regs"] = p["regs_per_thread"]
    elif key in ("occupancy", "time", "time_ratio_vs_ref"):
        return None
    if key == "time_ratio_vs_ref":
        cp.update(ref_m=p["ref_tile_m"], ref_n=p["ref_tile_n"], ref_regs=p["ref_regs_per_thread"])
        if not tensor:
            cp["ref_tm"], cp["ref_tn"] = FP32_PATCH.get((p["ref_tile_m"], p["ref_tile_n"]), (0, 0))
    return key, cp, {"time": "s", "occupancy": "%", "time_ratio_vs_ref": "×"}.get(key, "B")


def _bank(metric, p, sib):
    if "stride_words" in p and metric == "bank_conflict_degree":
        return "degree", {"stride": p["stride_words"], "width": p["width_bytes"]}, "way"
    if "stride_words" in p and metric == "time":
        return "time", {"stride": p["stride_words"], "width": p["width_bytes"]}, "s"
    if metric == "time_ratio_unpadded_padded":
        return "time_ratio_vs_free", {"stride": 32, "width": p["width_bytes"]}, "×"
    return None


def _transpose(metric, p, sib):
    key = {
        "time": "time",
        "bank_conflict_degree": "read_degree",
        "speedup_vs_tile16": "speedup_vs_ref",
    }.get(metric)
    if key is None or "tile" not in p:
        return None
    cp = {"n": p["n"], "t": p["tile"], "pad": 1 if p["padded"] else 0}
    if p.get("block_threads"):
        cp["rows"] = p["block_threads"] // p["tile"]
    if key == "speedup_vs_ref":
        cp.update(ref_t=p["ref_tile"], ref_rows=p["ref_block_threads"] // p["ref_tile"])
        return key, cp, "×"
    return key, cp, "s" if key == "time" else "way"


def _rmsnorm(metric, p, sib):
    if metric != "time":
        return None
    return "time", {"rows": p["rows"], "hidden": p["hidden"], "s": p["segments"]}, "s"


def _fusion(metric, p, sib):
    if metric != "time":
        return None
    key = "unfused_time" if p["impl"].startswith("unfused") else "fused_time"
    # the suite flushes the L2 before each repetition when the working set could stay cached (< 4 x
    # L2)
    return key, {"M": p["m"], "F": p["f"], "flushed": 1}, "s"


def _flash(metric, p, sib):
    if metric != "time":
        return None
    key = "standard_time" if p["backend"] == "math" else "flash_time"
    return key, {"L": p["length"], "d": p["head_dim"], "causal": 1 if p.get("causal") else 0}, "s"


def _graph(metric, p, sib):
    fused = not p["activation"].startswith("unfused")
    mode = p["mode"]
    pre = "fused_" if fused else ""
    cp = {"calls": 1, "hidden": p.get("hidden", 4096), "intermediate": p.get("intermediate", 12288)}
    if metric == "kernels_per_ffn":
        return f"{pre}{mode}_kernels", cp, "count"
    if metric == "time_per_ffn":
        return f"{pre}{mode}_time", cp, "s"
    if metric == "host_launches_per_ffn" and mode == "eager":
        return f"{pre}eager_submissions", cp, "count"
    return None


def _littles(metric, p, sib):
    if metric != "bandwidth":
        return None
    return (
        "achieved_bandwidth",
        {"occ": p["occupancy_pct"], "bytes_per_thread": 16 * p["unroll"]},
        "B/s",
    )


def _h2d(metric, p, sib):
    cp = {"size": p["total_bytes"] / MIB, "k": p["chunks"]}
    if metric == "copy_time":
        return ("pinned_time" if p["memory"] == "pinned" else "pageable_time"), cp, "s"
    if metric == "staged_copy_time":
        return "staged_time", {**cp, "bounce": p["bounce_bytes"] / MIB}, "s"
    return None


def _timing(metric, p, sib):
    key = {
        "event_time": "event_time",
        "host_clock_async_call": "host_clock_async",
        "host_clock_until_result": "host_clock_until_result",
    }.get(metric)
    return None if key is None else (key, {"n": p["n_elements"], "flushed": 0}, "s")


def _launch(metric, p, sib):
    if metric != "back_to_back_time_per_launch":
        return None
    if p.get("launcher", "").startswith("C++"):
        return "cxx_launch_time", {}, "s"
    submit = sib.get("host_submit_time_per_launch")
    return None if submit is None else ("back_to_back_time", {"t_submit": submit * 1e6}, "s")


def _occupancy(metric, p, sib):
    if metric != "time" or "regs_per_thread" not in p or "flop" not in p:
        return None
    cp = {
        "tile": 0,
        "smem_extra": p.get("smem_dynamic_bytes", 0) + p.get("smem_static_bytes", 0),
        "regs": p["regs_per_thread"],
        "threads": p.get("block_size", 256),
        "gflop": p["flop"] / 1e9,
        "chains": int(str(p["kernel"]).split("_r")[-1]),
    }
    if p.get("grid"):
        # older runs: the case's default, the suite's full-run grid
        cp["blocks"] = p["grid"]
    return "fma_time", cp, "s"


def _compile(metric, p, sib):
    if metric != "steady_call_time":
        return None
    key = {
        "eager": "steady_eager_time",
        "triton": "steady_triton_time",
        "torch.compile": "steady_compiled_time",
    }.get(p.get("impl"))
    return None if key is None else (key, {"M": p["m"], "F": p["f"]}, "s")


def _fp(metric, p, sib):
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
    "tiling.traffic": _tiling,
    "bank.column_read": _bank,
    "transpose.tile": _transpose,
    "rmsnorm.split": _rmsnorm,
    "fusion.activation_chain": _fusion,
    "flash.attention_traffic": _flash,
    "graph.replay": _graph,
    "littles_law": _littles,
    "h2d.chunked_copy": _h2d,
    "launch.overhead": _launch,
    "fp.non_associativity": _fp,
    "timing.positions": _timing,
    "occupancy.sm": _occupancy,
    "compile.amortization": _compile,
}
GPU_FREE_CASES = {"fp.non_associativity"}  # their models do not depend on the GPU
#: timed cases: their time records are judged against a predicted time (an estimate with terms and a
#: tolerance)
TIMED_CASES = (
    "h2d.chunked_copy",
    "timing.positions",
    "launch.overhead",
    "littles_law",
    "occupancy.sm",
    "tiling.traffic",
    "bank.column_read",
    "transpose.tile",
    "rmsnorm.split",
    "fusion.activation_chain",
    "flash.attention_traffic",
    "graph.replay",
    "compile.amortization",
)


def _key(params: dict) -> str:
    return json.dumps(params, sort_keys=True)


def kernel_key(case: str, params: dict) -> str:
    """Records of one kernel configuration: the case and its params without the byte / FLOP accounting."""
    return case + "|" + _key({k: v for k, v in params.items() if k not in _ACCOUNTING})


def predict_rows(
    rows: list[dict], gpu: GPUSpec | None, calc_occ: dict[str, float], ceilings: dict | None = None
) -> list[dict]:
    """For each row (case, metric, value, params (dict), cv, source): {"predicted",
    "predicted_unit", "verdict", "verdict_explanation"}, all None where no model applies or it
    cannot be evaluated. calc_occ: JSON of an occupancy.sm launch's params -> the calculator's
    occupancy [%]. ceilings: the GPU's measured ceilings (resource -> Ceiling), which replace the
    spec-derived rates of the models."""
    from analyzers.cases import Measurement, evaluate, verdict
    from analyzers.cases.counters import NCU_COUNTERS
    from analyzers.cases.model import Prediction

    none = {
        "predicted": None,
        "predicted_unit": None,
        "predicted_kind": None,
        "verdict": None,
        "verdict_explanation": None,
    }
    siblings: dict[str, dict[str, float]] = {}
    counters: dict[str, dict[str, float]] = {}
    for r in rows:
        k = kernel_key(r["case"], r["params"])
        siblings.setdefault(k, {}).setdefault(r["metric"], r["value"])
        if r["source"] == COUNTER_SOURCE and r["metric"] in NCU_COUNTERS:
            counters.setdefault(k, {})[r["metric"]] = r["value"]
    evals: dict = {}
    out = []
    for r in rows:
        res = dict(none)
        k = kernel_key(r["case"], r["params"])
        try:
            pr, unit = None, None
            if r["case"] == "occupancy.sm" and r["metric"] in (
                "theoretical_occupancy",
                "achieved_occupancy",
                "driver_occupancy",
            ):
                v = calc_occ.get(_key(_launch_params(r["params"])))
                if v is not None:
                    kind = "upper_bound" if r["metric"] == "achieved_occupancy" else "exact"
                    pr = Prediction(
                        "occupancy",
                        "occupancy calculated by analyzers.occupancy",
                        v,
                        "%",
                        "resident warps / max warps",
                        kind=kind,
                        rel_tol=0.01,
                    )
                    unit = "%"
            elif r["case"] in MAPPERS and (gpu is not None or r["case"] in GPU_FREE_CASES):
                m = MAPPERS[r["case"]](r["metric"], r["params"], siblings.get(k, {}))
                if m is not None:
                    key, cparams, unit = m
                    ek = (r["case"], _key(cparams))
                    if ek not in evals:
                        evals[ek] = evaluate(r["case"], gpu, cparams, ceilings=ceilings)
                    pr = evals[ek].predictions.get(key)
            if pr is not None and pr.numeric:
                spread = abs(r["cv"] * r["value"]) if r.get("cv") else None
                v = verdict(
                    pr,
                    Measurement(
                        r["value"],
                        unit,
                        r["source"],
                        spread=spread,
                        quantity=pr.key,
                        counters=counters.get(k, {}),
                    ),
                )
                res = {
                    "predicted": float(pr.value),
                    "predicted_unit": pr.unit,
                    "predicted_kind": pr.kind,
                    "verdict": v.kind,
                    "verdict_explanation": v.explanation,
                }
        # any exception: a model that cannot answer leaves this row without a verdict
        except Exception as e:
            res = dict(none, verdict_explanation=f"no prediction: {type(e).__name__}: {e}")
        out.append(res)
    return out


# ---------------------------------------------------------------------------------------------------
# Derived records
# ---------------------------------------------------------------------------------------------------

#: metrics an older kernelscope stored that are now derived on read
DERIVED_METRICS = (
    "bank_conflict_degree",
    "shared_wavefronts_per_request",
    "dram_bandwidth",
    "calculated_occupancy",
    "time_ratio_vs_64x64",
    "speedup_vs_tile16",
)
RATIO_SOURCE = "event timing"
COUNTER_SOURCE = "ncu counter"
CALC_SOURCE = "calculated (analyzers.occupancy)"
_LAUNCH_KEYS = (
    "kernel",
    "regs_per_thread",
    "smem_static_bytes",
    "smem_dynamic_bytes",
    "block_size",
)


def _launch_params(p: dict) -> dict:
    return {k: p[k] for k in _LAUNCH_KEYS if k in p}


def _counter_derived(results: pl.DataFrame) -> pl.DataFrame:
    """Degree, wavefronts per request and DRAM bandwidth of each profiled kernel (one per case and
    params) from its counter records."""
    c = results.filter(pl.col("source") == COUNTER_SOURCE)
    if not c.height:
        return results.clear()
    wide = c.pivot(
        on="metric", index=["case", "params"], values="value", aggregate_function="first"
    )
    for col in (
        "shared_ld_wavefronts",
        "shared_ld_bank_conflicts",
        "shared_ld_requests",
        "dram_read_bytes",
        "dram_write_bytes",
        "kernel_duration",
    ):
        if col not in wide.columns:
            wide = wide.with_columns(pl.lit(None, pl.Float64).alias(col))
    wide = wide.with_columns(
        bank_conflict_degree=conflict_degree(
            pl.col("shared_ld_wavefronts"), pl.col("shared_ld_bank_conflicts")
        ),
        shared_wavefronts_per_request=pl.when(pl.col("shared_ld_requests") > 0).then(
            pl.col("shared_ld_wavefronts") / pl.col("shared_ld_requests")
        ),
        # GB/s from seconds: (bytes) / (s x 1e9 ns/s) = bytes/ns; x 1e9 gives B/s, the record unit
        dram_bandwidth=dram_bandwidth_gbps(
            pl.col("dram_read_bytes"), pl.col("dram_write_bytes"), pl.col("kernel_duration") * 1e9
        )
        * 1e9,
    )
    units = {
        "bank_conflict_degree": "1",
        "shared_wavefronts_per_request": "1",
        "dram_bandwidth": "B/s",
    }
    notes = c.group_by("case", "params", maintain_order=True).agg(pl.col("notes").first())
    long = (
        wide.select("case", "params", *units)
        .unpivot(index=["case", "params"], variable_name="metric", value_name="value")
        .drop_nulls("value")
        .join(notes, on=["case", "params"], how="left")
    )
    return long.select(
        "case",
        "metric",
        "value",
        pl.col("metric").replace_strict(units, return_dtype=pl.String).alias("unit"),
        "params",
        pl.lit(None, pl.Float64).alias("cv"),
        pl.lit(1, pl.Int64).alias("n"),
        pl.lit(COUNTER_SOURCE).alias("source"),
        pl.concat_str(
            [
                pl.lit("derived from the counter records (analyzers.kernels); "),
                pl.col("notes").fill_null(""),
            ]
        ).alias("notes"),
        pl.lit([], pl.List(pl.String)).alias("flags"),
    )


def _calculated_occupancy(
    results: pl.DataFrame, gpu: GPUSpec | None
) -> tuple[list[dict], dict[str, float]]:
    """The calculator's occupancy for each launch configuration the occupancy and tiling records name."""
    from analyzers.occupancy import occupancy

    rows, calc = [], {}
    if gpu is None:
        return rows, calc
    seen = set()
    for case, params in (
        results.filter(pl.col("case").is_in(["occupancy.sm", "tiling.traffic"]))
        .select("case", "params")
        .unique(maintain_order=True)
        .iter_rows()
    ):
        p = json.loads(params)
        if "regs_per_thread" not in p:
            continue
        lp = _launch_params(p)
        key = _key(lp)
        if (case, key) in seen:
            continue
        seen.add((case, key))
        try:
            r = occupancy(
                gpu,
                int(p.get("block_size", 256)),
                int(p["regs_per_thread"]),
                int(p.get("smem_static_bytes", 0)),
                int(p.get("smem_dynamic_bytes", 0)),
            )
        except ValueError:
            continue
        calc[key] = r.occupancy_pct
        rows.append(
            {
                "case": case,
                "metric": "calculated_occupancy",
                "value": r.occupancy_pct,
                "unit": "%",
                "params": json.dumps(lp if case == "occupancy.sm" else p, sort_keys=True),
                "cv": None,
                "n": 1,
                "source": CALC_SOURCE,
                "notes": f"{r.blocks_per_sm} blocks/SM, limited by {', '.join(r.limiters)}",
                "flags": [],
            }
        )
    return rows, calc


def _ratio(rows: list[dict], num: dict, den: dict, metric: str, params: dict, note: str) -> None:
    cvs = [x for x in (num["cv"], den["cv"]) if x is not None]
    rows.append(
        {
            "case": num["case"],
            "metric": metric,
            "value": num["value"] / den["value"],
            "unit": "1",
            "params": json.dumps(params, sort_keys=True),
            "cv": (sum(c * c for c in cvs) ** 0.5) if cvs else None,
            "n": 1,
            "source": RATIO_SOURCE,
            "notes": "derived from two event-timed records on read: " + note,
            "flags": [],
        }
    )


def _claim_ratios(results: pl.DataFrame) -> list[dict]:
    """The time ratios the chapter's timing claims are about, from pairs of event-timed records of
    one run: tiling.traffic `time_ratio_vs_64x64` = T(tile) ÷ T(64×64) of the same engine ('half the
    traffic can be slower' holds when > 1); transpose.tile `speedup_vs_tile16` = T(16×16 tile) ÷
    T(tile) at the same threads per block and padding (the chapter: 32×32 is 2.7× faster than
    16×16)."""
    t = results.filter(
        (pl.col("metric") == "time")
        & (pl.col("source") == RATIO_SOURCE)
        & pl.col("case").is_in(["tiling.traffic", "transpose.tile"])
    )
    recs = [{**r, "p": json.loads(r["params"])} for r in t.to_dicts()]
    out: list[dict] = []
    for engine in ("ks_matmul", "ks_mma"):
        tiles = [
            r
            for r in recs
            if r["case"] == "tiling.traffic" and str(r["p"].get("kernel", "")).startswith(engine)
        ]
        ref = next((r for r in tiles if (r["p"]["tile_m"], r["p"]["tile_n"]) == (64, 64)), None)
        for r in tiles:
            if ref is None or r is ref or "regs_per_thread" not in ref["p"]:
                continue
            p = {k: v for k, v in r["p"].items() if k not in _ACCOUNTING}
            p.update(ref_tile_m=64, ref_tile_n=64, ref_regs_per_thread=ref["p"]["regs_per_thread"])
            _ratio(
                out,
                r,
                ref,
                "time_ratio_vs_64x64",
                p,
                f"time of {r['p']['kernel']} ÷ time of {ref['p']['kernel']} (> 1: the tile with "
                "less traffic is slower, the chapter's 'half the traffic can be slower')",
            )
    tr = [r for r in recs if r["case"] == "transpose.tile"]
    for r in tr:
        group = "block_threads" in r["p"]  # equal block size (256 threads) vs block = tile
        ref = next(
            (
                x
                for x in tr
                if x["p"]["tile"] == 16
                and x["p"]["padded"] == r["p"]["padded"]
                and ("block_threads" in x["p"]) == group
            ),
            None,
        )
        if ref is None or r["p"]["tile"] == 16:
            continue
        p = {k: v for k, v in r["p"].items() if k not in _ACCOUNTING}
        p.update(ref_tile=16, ref_block_threads=ref["p"].get("block_threads", 256))
        _ratio(
            out,
            ref,
            r,
            "speedup_vs_tile16",
            p,
            f"time of {ref['p']['kernel']} ÷ time of {r['p']['kernel']} (the chapter, on an RTX "
            "PRO 6000: 32×32 2.7× faster than 16×16)",
        )
    return out


def attach(
    results: pl.DataFrame, gpu: GPUSpec | None, ceilings: dict | None = None
) -> pl.DataFrame:
    """The stored results with today's derived records, predictions and verdicts (see the module
    docstring); `ceilings`: the GPU's measured ceilings (resource -> analyzers.ceilings.Ceiling) for
    the models' rates."""
    stale = pl.col("metric").is_in(list(DERIVED_METRICS)) & pl.col("source").is_in(
        [COUNTER_SOURCE, "calculated", CALC_SOURCE, RATIO_SOURCE]
    )
    base = results.filter(~stale)
    derived = _counter_derived(base)
    calc_rows, calc = _calculated_occupancy(base, gpu)
    parts = [base, derived]
    ratio_rows = _claim_ratios(base)
    for extra_rows in (calc_rows, ratio_rows):
        if extra_rows:
            parts.append(pl.DataFrame(extra_rows, schema=base.schema))
    full = pl.concat([p.select(base.columns).cast(base.schema) for p in parts])
    rows = [
        {**r, "params": json.loads(r["params"])}
        for r in full.select("case", "metric", "value", "params", "cv", "source").to_dicts()
    ]
    preds = predict_rows(rows, gpu, calc, ceilings)
    extra = pl.DataFrame(
        preds,
        schema={
            "predicted": pl.Float64,
            "predicted_unit": pl.String,
            "predicted_kind": pl.String,
            "verdict": pl.String,
            "verdict_explanation": pl.String,
        },
    )
    return pl.concat([full, extra], how="horizontal")


# ---------------------------------------------------------------------------------------------------
# Checks that need Nsight Compute counters
# ---------------------------------------------------------------------------------------------------

#: per case, the checks that need Nsight Compute counters (`kernelscope bench --ncu`): record metric
#: -> what it checks
COUNTER_CHECKS = {
    "bank.column_read": {
        "bank_conflict_degree": "the bank-conflict degree at every stride (model: gcd(stride, 32))"
    },
    "transpose.tile": {
        "bank_conflict_degree": "the transposes' shared-memory read conflicts",
        "dram_read_bytes": "the bytes the transposes read from DRAM",
    },
    "tiling.traffic": {
        "l2_read_from_l1_bytes": "the tile model's L2 read traffic",
        "dram_read_bytes": "the tiles' DRAM reads",
        "theoretical_occupancy": "the tiles' occupancy",
    },
    "littles_law": {"achieved_occupancy": "the occupancy each bandwidth point ran at"},
    "occupancy.sm": {
        "theoretical_occupancy": "ncu's theoretical occupancy vs the calculator",
        "achieved_occupancy": "the achieved occupancy under the calculator's bound",
    },
}


def skipped_checks(meta: dict, results: pl.DataFrame) -> list[dict]:
    """The counter-based checks a bench run could not make: for every case the run measured that has
    checks in COUNTER_CHECKS but no Nsight Compute counter record, {case, checks: [what it checks],
    reason} — the reason is the run's ncu status (not requested, not found, ERR_NVGPUCTRPERM ...).
    Event-timed results are unaffected."""
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
    return [
        {
            "case": case,
            "checks": list(COUNTER_CHECKS[case].values()),
            "metrics": list(COUNTER_CHECKS[case]),
            "reason": reason,
        }
        for case in COUNTER_CHECKS
        if case in ran and case not in counted
    ]
