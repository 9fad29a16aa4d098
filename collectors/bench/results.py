"""Parser of a `kernelscope bench` result document (the JSON written by collectors.bench.run).

    parse(data, name) -> Parsed(kind="bench", tables={"results", "ceilings"}, meta={...})

Each record becomes one row (collectors.schema.BENCH_SCHEMA); `params` stays a JSON string (its keys
differ by case). Predictions and verdicts are not stored: analyzers.cases.bench_verdicts computes
them when a run is read, so a model fix reaches every stored run.
"""

from __future__ import annotations

import json

import orjson
import polars as pl

from collectors.bench.harness import validate_record
from collectors.errors import ArtifactError
from collectors.limits import MAX_JSON_DEPTH, MAX_ROWS
from collectors.schema import BENCH_SCHEMA, Parsed, finish_meta

FORMAT_VERSION = 1


def _depth(v, limit: int) -> int:
    """Nesting depth of a JSON value, iteratively (no recursion), stopping past `limit`."""
    depth, stack = 0, [(v, 1)]
    while stack:
        x, d = stack.pop()
        if isinstance(x, (dict, list)):
            depth = max(depth, d)
            if depth > limit:
                return depth
            stack.extend((y, d + 1) for y in (x.values() if isinstance(x, dict) else x))
    return depth


def _rows(records: list, name: str, key: str) -> list[dict]:
    if not isinstance(records, list):
        raise ArtifactError(name, f"bench result: {key!r} must be a list of records")
    if len(records) > MAX_ROWS:
        raise ArtifactError(name, f"bench result: {len(records):,} {key}, more than {MAX_ROWS:,}")
    rows = []
    for i, r in enumerate(records):
        if isinstance(r, dict) and _depth(r.get("params"), MAX_JSON_DEPTH) > MAX_JSON_DEPTH:
            raise ArtifactError(
                name, f"bench result: {key}[{i}]: params nested deeper than {MAX_JSON_DEPTH} levels"
            )
        n = r.get("n") if isinstance(r, dict) else None
        if isinstance(n, int) and not isinstance(n, bool) and n >= 1 << 63:
            raise ArtifactError(
                name, f"bench result: {key}[{i}]: n = {n} is not a repetition count"
            )
        try:
            validate_record(r)
        except ValueError as e:
            raise ArtifactError(name, f"bench result: {key}[{i}]: {e}") from None
        rows.append(
            {
                "case": r["case"],
                "metric": r["metric"],
                "value": float(r["value"]),
                "unit": r["unit"],
                "params": json.dumps(r["params"], sort_keys=True),
                "cv": r["cv"],
                "n": r["n"],
                "source": r["source"],
                "notes": r["notes"],
                "flags": list(r.get("flags") or []),
            }
        )
    return rows


def parse(data: bytes, name: str) -> Parsed:
    """Validate and normalise one bench document; ArtifactError for bad JSON or a missing/ill-typed key."""
    try:
        # stops at 1,024 levels of nesting; numbers beyond a double are refused
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as e:
        raise ArtifactError(name, f"bench result is not valid JSON ({e})") from None
    if _depth(doc, MAX_JSON_DEPTH) > MAX_JSON_DEPTH:
        raise ArtifactError(name, f"bench result nested deeper than {MAX_JSON_DEPTH} levels")
    if not isinstance(doc, dict) or "kernelscope_bench" not in doc:
        raise ArtifactError(name, 'not a kernelscope bench result (no "kernelscope_bench" key)')
    if doc["kernelscope_bench"] != FORMAT_VERSION:
        raise ArtifactError(
            name,
            f"bench result format {doc['kernelscope_bench']!r} is not supported (this version "
            f"reads {FORMAT_VERSION})",
        )
    for key in ("gpu", "versions", "ceilings", "results"):
        if key not in doc:
            raise ArtifactError(name, f"bench result lacks {key!r}")
    gpu = doc["gpu"]
    if not isinstance(gpu, dict) or not isinstance(gpu.get("name"), str) or not gpu["name"].strip():
        raise ArtifactError(name, "bench result: 'gpu' must be an object with a 'name'")
    if len(gpu["name"]) > 200:
        raise ArtifactError(name, f"bench result: a GPU name of {len(gpu['name']):,} characters")
    if gpu.get("uuid") is not None and not isinstance(gpu.get("uuid"), str):
        raise ArtifactError(name, "bench result: 'gpu.uuid' must be a string")
    for key in ("attributes", "properties"):
        if key in gpu and not (
            isinstance(gpu[key], dict)
            and all(isinstance(v, (int, float, str, bool)) or v is None for v in gpu[key].values())
        ):
            raise ArtifactError(
                name, f"bench result: 'gpu.{key}' must be an object of plain values"
            )
    if not isinstance(doc["versions"], dict):
        raise ArtifactError(name, "bench result: 'versions' must be an object")
    for key in ("started", "finished"):
        if doc.get(key) is not None and not isinstance(doc.get(key), str):
            raise ArtifactError(name, f"bench result: {key!r} must be a time stamp (text) or null")
    for key in ("options", "cases", "ncu"):
        if doc.get(key) is not None and not isinstance(doc.get(key), dict):
            raise ArtifactError(name, f"bench result: {key!r} must be an object")
    failures = doc.get("failures", [])
    if not isinstance(failures, list) or not all(
        isinstance(f, dict) and "case" in f and "error" in f for f in failures
    ):
        raise ArtifactError(name, "bench result: 'failures' must be a list of {case, error}")
    ceilings = pl.DataFrame(_rows(doc["ceilings"], name, "ceilings"), schema=BENCH_SCHEMA)
    results = pl.DataFrame(_rows(doc["results"], name, "results"), schema=BENCH_SCHEMA)
    meta = {
        "gpu_name": gpu["name"],
        "gpu_uuid": gpu.get("uuid"),
        "gpu": gpu,
        "host": doc.get("host") if isinstance(doc.get("host"), dict) else None,
        "versions": doc["versions"],
        "failures": failures,
        "started": doc.get("started"),
        "finished": doc.get("finished"),
        "partial": doc.get("finished") is None,
        "options": doc.get("options", {}),
        "suite": doc.get("suite", 1),
        "ncu": doc.get("ncu"),
        "cases": doc.get("cases", {}),
        "result_count": results.height,
        "ceiling_count": ceilings.height,
        "item_count": results.height,
        "source_format": "bench",
    }
    return Parsed(
        kind="bench",
        tables={"results": results, "ceilings": ceilings},
        meta=finish_meta("bench", meta),
    )
