"""Parser of a `kernelscope bench` result document (the JSON written by collectors.bench.run).

    parse(data, name) -> Parsed(kind="bench", tables={"results", "ceilings"}, meta={...})

Each record becomes one row; `params` stays a JSON string (its keys differ by case). Results get
`predicted`, `predicted_unit` and `verdict` from `attach_predictions`.
"""
from __future__ import annotations

import json

import polars as pl

from collectors.artifact import Parsed
from collectors.bench.harness import validate_record
from collectors.errors import ArtifactError

FORMAT_VERSION = 1

CEILINGS_SCHEMA = pl.Schema({
    "case": pl.String, "metric": pl.String, "value": pl.Float64, "unit": pl.String, "params": pl.String,
    "cv": pl.Float64, "n": pl.Int64, "source": pl.String, "notes": pl.String, "flags": pl.List(pl.String),
})
RESULTS_SCHEMA = pl.Schema({
    **CEILINGS_SCHEMA,
    "predicted": pl.Float64, "predicted_unit": pl.String, "verdict": pl.String, "verdict_explanation": pl.String,
})


def _rows(records: list, name: str, key: str) -> list[dict]:
    if not isinstance(records, list):
        raise ArtifactError(name, f"bench result: {key!r} must be a list of records")
    rows = []
    for i, r in enumerate(records):
        try:
            validate_record(r)
        except ValueError as e:
            raise ArtifactError(name, f"bench result: {key}[{i}]: {e}") from None
        rows.append({"case": r["case"], "metric": r["metric"], "value": float(r["value"]), "unit": r["unit"],
                     "params": json.dumps(r["params"], sort_keys=True), "cv": r["cv"], "n": r["n"],
                     "source": r["source"], "notes": r["notes"], "flags": list(r.get("flags") or [])})
    return rows


def attach_predictions(results: pl.DataFrame, meta: dict) -> pl.DataFrame:
    """Add `predicted` (base units), `predicted_unit`, `verdict` and `verdict_explanation` to each result
    row: the case's model (analyzers.cases) evaluated for this GPU (analyzers.gpus.resolve_gpu of the
    run's name and device attributes) at the record's parameters, and its verdict. The mapping from a
    record to a prediction is collectors.bench.predict.MAPPERS; rows without one stay null."""
    from collectors.bench.predict import predict_rows
    rows = [{**r, "params": json.loads(r["params"])} for r in
            results.select("case", "metric", "value", "params", "cv", "source").to_dicts()]
    preds = predict_rows(rows, meta.get("gpu_name"), (meta.get("gpu") or {}).get("attributes"))
    extra = pl.DataFrame(preds, schema={"predicted": pl.Float64, "predicted_unit": pl.String, "verdict": pl.String,
                                        "verdict_explanation": pl.String})
    return pl.concat([results, extra], how="horizontal")


def parse(data: bytes, name: str) -> Parsed:
    """Validate and normalise one bench document; ArtifactError for bad JSON or a missing/ill-typed key."""
    try:
        doc = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ArtifactError(name, f"bench result is not valid JSON ({e})") from None
    if not isinstance(doc, dict) or "kernelscope_bench" not in doc:
        raise ArtifactError(name, "not a kernelscope bench result (no \"kernelscope_bench\" key)")
    if doc["kernelscope_bench"] != FORMAT_VERSION:
        raise ArtifactError(name, f"bench result format {doc['kernelscope_bench']!r} is not supported "
                                  f"(this version reads {FORMAT_VERSION})")
    for key in ("gpu", "versions", "ceilings", "results"):
        if key not in doc:
            raise ArtifactError(name, f"bench result lacks {key!r}")
    gpu = doc["gpu"]
    if not isinstance(gpu, dict) or not isinstance(gpu.get("name"), str) or not gpu["name"]:
        raise ArtifactError(name, "bench result: 'gpu' must be an object with a 'name'")
    if not isinstance(doc["versions"], dict):
        raise ArtifactError(name, "bench result: 'versions' must be an object")
    failures = doc.get("failures", [])
    if not isinstance(failures, list) or not all(isinstance(f, dict) and "case" in f and "error" in f for f in failures):
        raise ArtifactError(name, "bench result: 'failures' must be a list of {case, error}")
    ceilings = pl.DataFrame(_rows(doc["ceilings"], name, "ceilings"), schema=CEILINGS_SCHEMA)
    base = pl.DataFrame(_rows(doc["results"], name, "results"), schema=CEILINGS_SCHEMA)
    meta = {
        "gpu_name": gpu["name"],
        "gpu_uuid": gpu.get("uuid"),
        "gpu": gpu,
        "versions": doc["versions"],
        "failures": failures,
        "started": doc.get("started"),
        "finished": doc.get("finished"),
        "partial": doc.get("finished") is None,
        "options": doc.get("options", {}),
        "ncu": doc.get("ncu"),
        "cases": doc.get("cases", {}),
        "result_count": base.height,
        "ceiling_count": ceilings.height,
    }
    results = attach_predictions(base, meta).select(list(RESULTS_SCHEMA))
    if results.schema != RESULTS_SCHEMA:
        raise AssertionError(f"attach_predictions changed the results schema: {results.schema}")
    return Parsed(kind="bench", tables={"results": results, "ceilings": ceilings}, meta=meta)
