"""Nsight Systems SQLite ingestion: small exports built from the documented schema, the real 2-GPU
exports in ../shared/data/nsys, and broken files."""
from __future__ import annotations

import sqlite3

import polars as pl
import pytest

from collectors import nsys
from collectors import schema as S
from collectors.ingest import parse_bytes
from collectors.errors import ArtifactError
from tests.conftest import SHARED_NSYS, store_snapshot

P = 1 << 24


def gtid(pid: int, tid: int) -> int:
    """globalTid as nsys writes it: (process key << 24) | tid, with the process key's low 24 bits = pid."""
    return ((0x1000000 + pid) * P) + tid


def gpid(pid: int) -> int:
    return (0x1000000 + pid) * P


def build_nsys(tmp_path, *, kernels=(), runtime=(), memcpy=(), memset=(), nvtx=(), old_schema=False,
               gpu_info=True, extra_tables=()) -> bytes:
    """A small nsys-style SQLite export. kernels: (start, end, device, stream, corr, pid, name);
    runtime: (start, end, pid, tid, corr, name); memcpy: (start, end, device, stream, corr, pid, bytes, kind);
    memset: (start, end, device, stream, corr, pid, bytes); nvtx: (start, end, pid, tid, text)."""
    path = tmp_path / "synthetic.sqlite"
    path.unlink(missing_ok=True)
    con = sqlite3.connect(path)
    strings: dict[str, int] = {}

    def sid(s):
        return strings.setdefault(s, len(strings) + 1)

    c = con.cursor()
    c.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL)")
    c.execute("CREATE TABLE META_DATA_EXPORT (name TEXT, value TEXT)")
    c.execute("INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_SCHEMA_VERSION', ?)", ("2.0.0" if old_schema else "3.25.0",))
    kcols = "start, end, deviceId, contextId, streamId, correlationId, globalPid, demangledName, shortName, " \
            "mangledName, registersPerThread, gridX, gridY, gridZ, blockX, blockY, blockZ, staticSharedMemory, " \
            "dynamicSharedMemory"
    if old_schema:   # an older export: no mangledName / dynamicSharedMemory
        kcols = ", ".join(x for x in kcols.split(", ") if x not in ("mangledName", "dynamicSharedMemory"))
    else:            # a newer export adds columns the reader does not know
        kcols += ", greenContextId, tensorSizeMinusOneElements"
    c.execute(f"CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL ({kcols})")
    for (s, e, dev, st, corr, pid, name) in kernels:
        row = {"start": s, "end": e, "deviceId": dev, "contextId": 1, "streamId": st, "correlationId": corr,
               "globalPid": gpid(pid), "demangledName": sid(name), "shortName": sid(name.split("<")[0]),
               "mangledName": sid("_Z" + name), "registersPerThread": 32, "gridX": 8, "gridY": 1, "gridZ": 1,
               "blockX": 256, "blockY": 1, "blockZ": 1, "staticSharedMemory": 1024, "dynamicSharedMemory": 2048,
               "greenContextId": 0, "tensorSizeMinusOneElements": "[]"}
        cols = [x.strip() for x in kcols.split(",")]
        c.execute(f"INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES ({','.join('?' * len(cols))})",
                  [row[x] for x in cols])
    c.execute("CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start, end, eventClass, globalTid, correlationId, nameId, "
              "returnValue, callchainId)")
    for (s, e, pid, tid, corr, name) in runtime:
        c.execute("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?,?,0,?,?,?,0,NULL)",
                  (s, e, gtid(pid, tid), corr, sid(name)))
    if memcpy:
        c.execute("CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start, end, deviceId, contextId, streamId, correlationId, "
                  "globalPid, bytes, copyKind, srcKind, dstKind)")
        for (s, e, dev, st, corr, pid, nbytes, kind) in memcpy:
            c.execute("INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (?,?,?,1,?,?,?,?,?,1,2)",
                      (s, e, dev, st, corr, gpid(pid), nbytes, kind))
    if memset:
        c.execute("CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start, end, deviceId, contextId, streamId, correlationId, "
                  "globalPid, value, bytes, memKind)")
        for (s, e, dev, st, corr, pid, nbytes) in memset:
            c.execute("INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET VALUES (?,?,?,1,?,?,?,0,?,2)",
                      (s, e, dev, st, corr, gpid(pid), nbytes))
    if nvtx:
        c.execute("CREATE TABLE NVTX_EVENTS (start, end, eventType, rangeId, category, color, text, globalTid, "
                  "endGlobalTid, textId, domainId)")
        for (s, e, pid, tid, text) in nvtx:
            # alternate between inline text and a StringIds reference, as nsys does
            inline = len(text) % 2 == 0
            c.execute("INSERT INTO NVTX_EVENTS VALUES (?,?,59,NULL,NULL,NULL,?,?,NULL,?,0)",
                      (s, e, text if inline else None, gtid(pid, tid), None if inline else sid(text)))
        c.execute("INSERT INTO NVTX_EVENTS VALUES (5, NULL, 34, NULL, NULL, NULL, 'a mark', ?, NULL, NULL, 0)",
                  (gtid(nvtx[0][2], nvtx[0][3]),))
    if gpu_info:
        c.execute("CREATE TABLE TARGET_INFO_GPU (vmId, id, name, busLocation, smCount, totalMemory, computeMajor, "
                  "computeMinor, l2CacheSize)")
        c.execute("INSERT INTO TARGET_INFO_GPU VALUES (0, 0, 'NVIDIA H200', '0000:19:00.0', 132, 150109880320, 9, 0, "
                  "62914560)")
    for t in extra_tables:
        c.execute(t)
    c.executemany("INSERT INTO StringIds VALUES (?, ?)", [(i, s) for s, i in strings.items()])
    con.commit()
    con.close()
    return path.read_bytes()


def two_process_export(tmp_path, **kw) -> bytes:
    """Two processes (pids 100, 200) on devices 0 and 1 whose correlation ids collide (they are per process)."""
    kernels = [
        (1_000, 3_000, 0, 7, 5, 100, "gemm_kernel<float>"),
        (3_500, 4_000, 0, 7, 6, 100, "relu_kernel"),
        (9_000, 9_500, 0, 7, 7, 100, "relu_kernel"),          # launch call outside the export window
        (1_200, 2_200, 1, 13, 5, 200, "gemm_kernel<float>"),  # same correlation id 5, other process
    ]
    runtime = [
        (100, 800, 100, 101, 5, "cudaLaunchKernel_v7000"),
        (900, 3_700, 100, 101, 6, "cuLaunchKernelEx"),        # call ends after its kernel started: queue null
        (500, 1_100, 200, 201, 5, "cudaLaunchKernelExC_v11060"),
        (4_000, 9_600, 100, 101, 99, "cudaDeviceSynchronize_v3020"),
        (300, 400, 100, 101, 8, "cudaMemcpyAsync_v3020"),
        (450, 480, 200, 201, 9, "cudaMemsetAsync_v3020"),
    ]
    memcpy = [(600, 900, 0, 7, 8, 100, 1 << 20, 1)]
    memset = [(700, 720, 1, 13, 9, 200, 4096)]
    nvtx = [(0, 10_000, 100, 101, "step"), (50, 5_000, 200, 201, "forward")]
    return build_nsys(tmp_path, kernels=kernels, runtime=runtime, memcpy=memcpy, memset=memset, nvtx=nvtx, **kw)


# ---------------------------------------------------------------------------------------------- synthetic exports
@pytest.mark.parametrize("old_schema", [False, True])
def test_synthetic_export_tables(tmp_path, old_schema):
    p = parse_bytes(two_process_export(tmp_path, old_schema=old_schema), "two.sqlite")
    assert p.kind == "nsys" and p.meta["schema_version"] == ("2.0.0" if old_schema else "3.25.0")
    g = p.tables["gpu_ops"]
    for t, schema in S.TIMELINE_SCHEMAS.items():
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
        "Memcpy HtoD (Pinned -> Device)", "HtoD", 1 << 20, "cudaMemcpyAsync")
    s = g.filter(pl.col("kind") == "memset").row(0, named=True)
    assert (s["name"], s["rank"], s["launch_api"]) == ("Memset (Device)", 1, "cudaMemsetAsync")
    api = p.tables["api_calls"]
    assert set(api["name"]) == {"cudaLaunchKernel", "cuLaunchKernelEx", "cudaLaunchKernelExC",
                                "cudaDeviceSynchronize", "cudaMemcpyAsync", "cudaMemsetAsync"}
    assert api.filter(pl.col("blocking"))["name"].to_list() == ["cudaDeviceSynchronize"]
    assert sorted(p.tables["nvtx"].select("rank", "tid", "name").rows()) == [(0, 101, "step"), (1, 201, "forward")]
    assert p.meta["gpu_name"] == "NVIDIA H200" and p.meta["devices"][0]["sm_count"] == 132
    assert p.meta["ranks"] == [0, 1] and p.meta["counts"]["kernels_with_launch"] == 3


def test_lazy_export_with_only_kernels_and_no_gpu_info(tmp_path):
    data = build_nsys(tmp_path, kernels=[(10, 20, 0, 7, 1, 5, "k")], gpu_info=False)
    p = nsys.parse(data, "lazy.sqlite")
    assert p.tables["gpu_ops"].height == 1 and p.tables["gpu_ops"]["launch_api"].to_list() == [None]
    assert p.tables["nvtx"].height == 0 and p.meta["gpu_name"] is None


# ---------------------------------------------------------------------------------------------- broken input
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


@pytest.mark.parametrize("case, msg", [
    ("not_nsys", "not an nsys export"),
    ("nvprof", "legacy nvprof"),
    ("truncated", "SQLite"),
    ("kernel_table_without_start", "lacks columns"),
])
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
    store.ingest_bytes(two_process_export(tmp_path), "good.sqlite")
    before = store_snapshot(store.root)
    with pytest.raises(ArtifactError) as ei:
        store.ingest_bytes(data, f"{case}.sqlite")
    assert ei.value.source == f"{case}.sqlite" and msg in ei.value.problem
    assert store_snapshot(store.root) == before


def test_nsys_rep_without_nsys_gives_the_command(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(ArtifactError) as ei:
        parse_bytes(b"\x00binary report", "run1.nsys-rep")
    assert "nsys export --type sqlite" in ei.value.problem and "run1.nsys-rep" in ei.value.problem


# ---------------------------------------------------------------------------------------------- real exports
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
    assert (c["kernels"], c["kernels_with_launch"], c["memcpy"], c["memset"], c["nvtx"]) == REAL[fname]
    assert p.meta["ranks"] == [0, 1] and p.meta["schema_version"] == "3.25.0"
    g = p.tables["gpu_ops"]
    assert sorted(g.select("rank", "device").unique().rows()) == [(0, 0), (1, 1)]
    # NVIDIA's own join (formats.md §4.3), run on the SQLite itself, agrees with ours
    con = sqlite3.connect(":memory:")
    con.deserialize(data)
    con.execute("CREATE INDEX rt_corr ON CUPTI_ACTIVITY_KIND_RUNTIME (correlationId)")
    n = con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k WHERE EXISTS (SELECT 1 FROM "
                    "CUPTI_ACTIVITY_KIND_RUNTIME r WHERE r.correlationId = k.correlationId "
                    "AND (r.globalTid & -16777216) = k.globalPid)").fetchone()[0]
    assert n == c["kernels_with_launch"]
    # joining by correlation id alone (ignoring the process) would wrongly match more in the h100 export
    loose = con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k WHERE EXISTS (SELECT 1 FROM "
                        "CUPTI_ACTIVITY_KIND_RUNTIME r WHERE r.correlationId = k.correlationId)").fetchone()[0]
    assert loose >= n
    assert g.filter(pl.col("launch_api").is_not_null())["launch_delay_ns"].min() >= 0
