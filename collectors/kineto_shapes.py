"""The input shapes of a PyTorch profiler trace's CPU ops: what `profile(record_shapes=True)` writes
into each `cpu_op` event ("Input Dims", "Input type"), keyed by the op's "External id" — the id a
kernel's launch carries, so a profiled kernel finds the aten op (`aten::mm`,
`aten::_cudnn_attention_forward`, an Inductor `triton_poi_fused_...` launcher) and the shapes it ran
on.

Read on demand, not at ingest: only the textbook's models on real kernels (analyzers.kernel_models,
when an Nsight Compute run is joined with a trace) need them, and the timeline tables stay as lean
as they are. The reader declares only these fields (msgspec skips the rest without building it); a
trace whose events it cannot decode that way is read with the standard library. A trace recorded
without `record_shapes` gives an empty table.
"""

from __future__ import annotations

import json
from typing import Optional

import msgspec
import polars as pl

from collectors.decompress import gunzip_if_needed, is_tar

SHAPES_SCHEMA = pl.Schema(
    {"external_id": pl.Int64, "op": pl.String, "input_dims": pl.String, "input_types": pl.String}
)


class _Args(msgspec.Struct, gc=False):
    external_id: Optional[int] = msgspec.field(default=None, name="External id")
    # empty: not recorded
    dims: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Input Dims")
    types: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Input type")


class _Event(msgspec.Struct, gc=False):
    cat: Optional[str] = None
    name: Optional[str] = None
    args: Optional[_Args] = None


class _Trace(msgspec.Struct, gc=False):
    traceEvents: list[_Event] = []  # noqa: N815 - the format's key


_DECODE = msgspec.json.Decoder(_Trace).decode


def op_shapes(data: bytes, name: str) -> pl.DataFrame:
    """One row per `cpu_op` event with input shapes: external_id, op (its name), input_dims and
    input_types (the JSON lists as written). Empty for a rank archive, a trace without shapes or one
    that is not a Kineto trace."""
    data, _ = gunzip_if_needed(data, name)
    if is_tar(data):
        return pl.DataFrame(schema=SHAPES_SCHEMA)
    rows: dict[int, tuple] = {}
    try:
        for e in _DECODE(data).traceEvents:
            a = e.args
            if e.cat == "cpu_op" and a is not None and len(a.dims) and a.external_id is not None:
                rows.setdefault(
                    a.external_id,
                    (
                        e.name,
                        bytes(a.dims).decode(),
                        bytes(a.types).decode() if len(a.types) else "[]",
                    ),
                )
    except (msgspec.DecodeError, msgspec.ValidationError):
        try:
            doc = json.loads(data)
        except ValueError:
            return pl.DataFrame(schema=SHAPES_SCHEMA)
        for e in doc.get("traceEvents", []) if isinstance(doc, dict) else []:
            a = e.get("args") if isinstance(e, dict) else None
            if (
                e.get("cat") == "cpu_op"
                and isinstance(a, dict)
                and "Input Dims" in a
                and isinstance(a.get("External id"), int)
            ):
                rows.setdefault(
                    a["External id"],
                    (
                        e.get("name"),
                        json.dumps(a["Input Dims"]),
                        json.dumps(a.get("Input type", [])),
                    ),
                )
    return pl.DataFrame(
        {
            "external_id": list(rows),
            "op": [r[0] for r in rows.values()],
            "input_dims": [r[1] for r in rows.values()],
            "input_types": [r[2] for r in rows.values()],
        },
        schema=SHAPES_SCHEMA,
    )
