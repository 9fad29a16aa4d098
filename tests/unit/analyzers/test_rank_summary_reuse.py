"""A rank's summary computed with the trace's own `summarize` result handed in (what `kernelscope
analyze TRACE` does, so the per-device numbers are not computed twice) equals the summary computed
from the rank's ops alone, and the collectives table (kinds named once per distinct name, sizes
column-wise) equals the row-by-row computation it replaced, on real traces: a single-rank trace with
NCCL kernels and collective sizes, an 8-rank DLRM job as one rank archive, and the real 2-GPU Nsight
Systems export where ../shared/data has it."""

from __future__ import annotations

import io
import tarfile

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from analyzers import distributed
from analyzers.timeline import summarize
from collectors.ingest import parse_bytes, parse_path
from tests.conftest import SHARED_NSYS
from tests.support.corpus_paths import CORPUS, DLRM, NCCL_ARGS


def _archive(folder) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for f in sorted(folder.glob("*.json.gz")):
            tf.add(str(f), arcname=f.name)
    return buf.getvalue()


def _cases():
    yield "single rank, NCCL sizes", lambda: parse_path(NCCL_ARGS)
    yield (
        "single rank, B200 NCCL",
        lambda: parse_path(CORPUS / "tracelens" / "b200_eager_nccl_rank0_2026-01.json.gz"),
    )
    yield "8-rank archive", lambda: parse_bytes(_archive(DLRM), "dlrm.kineto.tar")
    nsys = SHARED_NSYS / "mfu_2gpu_before.sqlite"
    if nsys.is_file():
        yield "nsys 2 GPUs", lambda: parse_path(nsys)


def _old_collectives(c: pl.DataFrame, u: dict, rank: int) -> pl.DataFrame:
    """The row-by-row computation of analyzers.distributed._collectives before it went column-wise."""
    import numpy as np

    if c.height == 0:
        return pl.DataFrame(schema=distributed.COLLECTIVE_SCHEMA)
    kinds = [
        distributed.collective_kind(x, n)
        for x, n in zip(c["collective"].to_list(), c["name"].to_list())
    ]
    per = [distributed.DTYPE_BYTES.get((d or "").lower()) for d in c["comm_dtype"].to_list()]
    sizes = []
    for i_n, o_n, b in zip(c["comm_in_nelems"].to_list(), c["comm_out_nelems"].to_list(), per):
        n = max([x for x in (i_n, o_n) if x is not None], default=None)
        sizes.append(None if n is None or b is None else int(n) * b)
    s = c["start_ns"].to_numpy().astype(np.int64)
    e = c["end_ns"].to_numpy().astype(np.int64)
    under = distributed.covered(*u["compute"], s, e)
    k = pl.DataFrame(
        {
            "kind": kinds,
            "size_bytes": pl.Series(sizes, dtype=pl.Int64),
            "size_bucket_bytes": pl.Series(
                [distributed.size_bucket(x) for x in sizes], dtype=pl.Int64
            ),
            "duration_ns": e - s,
            "exposed_ns": (e - s) - under,
        }
    )
    return (
        k.group_by("kind", "size_bucket_bytes")
        .agg(
            pl.col("size_bytes").min().alias("size_min_bytes"),
            pl.col("size_bytes").max().alias("size_max_bytes"),
            pl.len().cast(pl.Int64).alias("count"),
            pl.col("duration_ns").sum().alias("total_ns"),
            pl.col("exposed_ns").sum().alias("exposed_ns"),
            (pl.col("duration_ns") - pl.col("exposed_ns")).sum().alias("overlapped_ns"),
            pl.col("duration_ns").median().cast(pl.Float64).alias("median_ns"),
            pl.col("size_bytes").sum().alias("bytes_total"),
            pl.col("size_bytes").is_not_null().sum().cast(pl.Int64).alias("sized_count"),
        )
        .with_columns(pl.lit(rank, pl.Int64).alias("rank"))
        .select(list(distributed.COLLECTIVE_SCHEMA))
        .cast(dict(distributed.COLLECTIVE_SCHEMA))
        .sort("kind", "size_bucket_bytes")
    )


@pytest.mark.parametrize("label,load", list(_cases()), ids=[c[0] for c in _cases()])
def test_rank_summary_with_the_trace_summary_equals_its_own(label, load):
    p = load()
    g, nv = p.tables["gpu_ops"], p.tables["nvtx"]
    whole = summarize(g, launch_floor_ns=2500.0)
    ranks = sorted(g["rank"].unique().to_list())
    comm_seen = 0
    for r in ranks:
        gr, nr = g.filter(pl.col("rank") == r), nv.filter(pl.col("rank") == r)
        own = distributed.rank_summary(gr, nr, rank=r, launch_floor_ns=2500.0)
        reused = distributed.rank_summary(gr, nr, rank=r, launch_floor_ns=2500.0, summary=whole)
        for f in ("steps", "collectives", "devices", "top_kernels", "events"):
            assert_frame_equal(getattr(own, f), getattr(reused, f)), (label, r, f)
        assert own.totals == reused.totals
        assert own.devices.height >= 1
        # the devices a rank keeps are exactly its rows of the whole trace's summary
        assert_frame_equal(reused.devices, whole.devices.filter(pl.col("rank") == r))
        # the column-wise collectives equal the row-by-row computation they replaced
        ops = gr.filter(pl.col("device") == distributed.primary_device(gr))
        mask = distributed._comm_mask(ops)
        comm = distributed._comm_kernels(ops, mask)
        comm_seen += comm.height
        u = distributed._unions(ops, mask)
        assert_frame_equal(distributed._collectives(comm, u, r), _old_collectives(comm, u, r))
        assert comm["_kind"].to_list() == [
            distributed.collective_kind(x, n)
            for x, n in zip(comm["collective"].to_list(), comm["name"].to_list())
        ]
    assert comm_seen > 0, f"{label}: no collective kernels, the comparison would be empty"
