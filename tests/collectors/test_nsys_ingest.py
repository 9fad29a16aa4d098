"""Nsight Systems SQLite ingestion: small exports built from the documented schema, the real 2-GPU
exports in ../shared/data/nsys, and broken files."""

from __future__ import annotations

import sqlite3

import polars as pl
import pytest

from collectors import nsys
from collectors import schema as schemas
from collectors.ingest import parse_bytes
from collectors.errors import ArtifactError
from tests.conftest import SHARED_NSYS, store_snapshot
from tests.support.nsys import P, build_nsys, gpid, gtid, two_process_export  # noqa: F401
from dashboard.core.source import Source


# ----------------------------------------------------------------------------------------------
# synthetic exports
@pytest.mark.parametrize("old_schema", [False, True])
def test_synthetic_export_tables(tmp_path, old_schema):
    p = parse_bytes(two_process_export(tmp_path, old_schema=old_schema), "two.sqlite")
    assert p.kind == "nsys" and p.meta["schema_version"] == ("2.0.0" if old_schema else "3.25.0")
    g = p.tables["gpu_ops"]
    for t, schema in schemas.TIMELINE_SCHEMAS.items():
        assert dict(p.tables[t].schema) == dict(schema), t
    k = g.filter(pl.col("kind") == "kernel").sort("rank", "start_ns")
    assert k.select("rank", "pid", "device", "stream", "name", "launch_api").rows() == [
        (0, 100, 0, 7, "gemm_kernel<float>", "cudaLaunchKernel"),
        (0, 100, 0, 7, "relu_kernel", "cuLaunchKernelEx"),
        (0, 100, 0, 7, "relu_kernel", None),
        (1, 200, 1, 13, "gemm_kernel<float>", "cudaLaunchKernelExC"),
    ]
    assert k["launch_delay_ns"].to_list() == [200, 0, None, 100]
    assert k["queue_ns"].to_list() == [200, None, None, 100]
    assert k["api_tid"].to_list() == [101, 101, None, 201]
    assert k["shared_memory_bytes"].to_list() == ([None] * 4 if old_schema else [3072] * 4)
    assert k["grid_x"].to_list() == [8] * 4
    m = g.filter(pl.col("kind") == "memcpy").row(0, named=True)
    assert (m["name"], m["copy_kind"], m["bytes"], m["launch_api"]) == (
        "Memcpy HtoD (Pinned -> Device)",
        "HtoD",
        1 << 20,
        "cudaMemcpyAsync",
    )
    s = g.filter(pl.col("kind") == "memset").row(0, named=True)
    assert (s["name"], s["rank"], s["launch_api"]) == ("Memset (Device)", 1, "cudaMemsetAsync")
    api = p.tables["api_calls"]
    assert set(api["name"]) == {
        "cudaLaunchKernel",
        "cuLaunchKernelEx",
        "cudaLaunchKernelExC",
        "cudaDeviceSynchronize",
        "cudaMemcpyAsync",
        "cudaMemsetAsync",
    }
    assert api.filter(pl.col("blocking"))["name"].to_list() == ["cudaDeviceSynchronize"]
    assert sorted(p.tables["nvtx"].select("rank", "tid", "name").rows()) == [
        (0, 101, "step"),
        (1, 201, "forward"),
    ]
    assert p.meta["gpu_name"] == "NVIDIA H200" and p.meta["devices"][0]["sm_count"] == 132
    assert p.meta["ranks"] == [0, 1] and p.meta["counts"]["kernels_with_launch"] == 3


def test_lazy_export_with_only_kernels_and_no_gpu_info(tmp_path):
    data = build_nsys(tmp_path, kernels=[(10, 20, 0, 7, 1, 5, "k")], gpu_info=False)
    p = nsys.parse(data, "lazy.sqlite")
    assert p.tables["gpu_ops"].height == 1 and p.tables["gpu_ops"]["launch_api"].to_list() == [None]
    assert p.tables["nvtx"].height == 0 and p.meta["gpu_name"] is None


# ----------------------------------------------------------------------------------------------
# broken input
def _not_nsys(tmp_path) -> bytes:
    path = tmp_path / "other.sqlite"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE users (id INTEGER, name TEXT)")
    con.execute("INSERT INTO users VALUES (1, 'a')")
    con.commit()
    con.close()
    return path.read_bytes()


def _nvprof(tmp_path) -> bytes:
    path = tmp_path / "nvprof.sqlite"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE StringTable (_id_ INTEGER PRIMARY KEY, value TEXT)")
    con.execute("CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (_id_ INTEGER, start, end)")
    con.commit()
    con.close()
    return path.read_bytes()


@pytest.mark.parametrize(
    "case, msg",
    [
        ("not_nsys", "not an nsys export"),
        ("nvprof", "legacy nvprof"),
        ("truncated", "SQLite"),
        ("kernel_table_without_start", "lacks columns"),
    ],
)
def test_bad_sqlite_raises_and_leaves_store_unchanged(tmp_path, store, case, msg):
    if case == "not_nsys":
        data = _not_nsys(tmp_path)
    elif case == "nvprof":
        data = _nvprof(tmp_path)
    elif case == "truncated":
        data = two_process_export(tmp_path)
        data = data[: len(data) // 2]
    else:
        path = tmp_path / "bad.sqlite"
        con = sqlite3.connect(path)
        con.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT)")
        con.execute("CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (deviceId, streamId)")
        con.commit()
        con.close()
        data = path.read_bytes()
    Source(store).ingest_bytes(two_process_export(tmp_path), "good.sqlite")
    before = store_snapshot(store.root)
    with pytest.raises(ArtifactError) as ei:
        Source(store).ingest_bytes(data, f"{case}.sqlite")
    assert ei.value.source == f"{case}.sqlite" and msg in ei.value.problem
    assert store_snapshot(store.root) == before


def test_nsys_rep_without_nsys_gives_the_command(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(ArtifactError) as ei:
        parse_bytes(b"\x00binary report", "run1.nsys-rep")
    assert "nsys export --type sqlite" in ei.value.problem and "run1.nsys-rep" in ei.value.problem


# ----------------------------------------------------------------------------------------------
# real exports
REAL = {  # file: (kernels, kernels with launch call, memcpy, memset, nvtx ranges)
    "h100_2gpu_1s.sqlite": (3442, 1632, 904, 22, 16782),
    "mfu_2gpu_before.sqlite": (4010, 3986, 1020, 269, 19118),
    "mfu_2gpu_after.sqlite": (3587, 3577, 904, 242, 17113),
}


@pytest.mark.shared_data
@pytest.mark.parametrize("fname", list(REAL))
def test_real_exports(fname):
    data = (SHARED_NSYS / fname).read_bytes()
    p = parse_bytes(data, fname)
    c = p.meta["counts"]
    assert (c["kernels"], c["kernels_with_launch"], c["memcpy"], c["memset"], c["nvtx"]) == REAL[
        fname
    ]
    assert p.meta["ranks"] == [0, 1] and p.meta["schema_version"] == "3.25.0"
    g = p.tables["gpu_ops"]
    assert sorted(g.select("rank", "device").unique().rows()) == [(0, 0), (1, 1)]
    # NVIDIA's own join (formats.md §4.3), run on the SQLite itself, agrees with ours
    con = sqlite3.connect(":memory:")
    con.deserialize(data)
    con.execute("CREATE INDEX rt_corr ON CUPTI_ACTIVITY_KIND_RUNTIME (correlationId)")
    n = con.execute(
        "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k WHERE EXISTS (SELECT 1 FROM "
        "CUPTI_ACTIVITY_KIND_RUNTIME r WHERE r.correlationId = k.correlationId "
        "AND (r.globalTid & -16777216) = k.globalPid)"
    ).fetchone()[0]
    assert n == c["kernels_with_launch"]
    # joining by correlation id alone (ignoring the process) would wrongly match more in the h100
    # export
    loose = con.execute(
        "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k WHERE EXISTS (SELECT 1 FROM "
        "CUPTI_ACTIVITY_KIND_RUNTIME r WHERE r.correlationId = k.correlationId)"
    ).fetchone()[0]
    assert loose >= n
    assert g.filter(pl.col("launch_api").is_not_null())["launch_delay_ns"].min() >= 0
