"""Nsight Systems SQLite exports built from the documented schema, for the tests."""

from __future__ import annotations

import sqlite3


def build_nsys(
    tmp_path,
    *,
    kernels=(),
    runtime=(),
    memcpy=(),
    memset=(),
    nvtx=(),
    old_schema=False,
    gpu_info=True,
    extra_tables=(),
) -> bytes:
    """A small nsys-style SQLite export. kernels: (start, end, device, stream, corr, pid, name);
    runtime: (start, end, pid, tid, corr, name); memcpy: (start, end, device, stream, corr, pid,
    bytes, kind); memset: (start, end, device, stream, corr, pid, bytes); nvtx: (start, end, pid,
    tid, text)."""
    path = tmp_path / "synthetic.sqlite"
    path.unlink(missing_ok=True)
    con = sqlite3.connect(path)
    strings: dict[str, int] = {}

    def sid(s):
        return strings.setdefault(s, len(strings) + 1)

    c = con.cursor()
    c.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL)")
    c.execute("CREATE TABLE META_DATA_EXPORT (name TEXT, value TEXT)")
    c.execute(
        "INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_SCHEMA_VERSION', ?)",
        ("2.0.0" if old_schema else "3.25.0",),
    )
    kcols = (
        "start, end, deviceId, contextId, streamId, correlationId, globalPid, demangledName, "
        "shortName, mangledName, registersPerThread, gridX, gridY, gridZ, blockX, blockY, blockZ, "
        "staticSharedMemory, dynamicSharedMemory"
    )
    if old_schema:  # an older export: no mangledName / dynamicSharedMemory
        kcols = ", ".join(
            x for x in kcols.split(", ") if x not in ("mangledName", "dynamicSharedMemory")
        )
    else:  # a newer export adds columns the reader does not know
        kcols += ", greenContextId, tensorSizeMinusOneElements"
    c.execute(f"CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL ({kcols})")
    for s, e, dev, st, corr, pid, name in kernels:
        row = {
            "start": s,
            "end": e,
            "deviceId": dev,
            "contextId": 1,
            "streamId": st,
            "correlationId": corr,
            "globalPid": gpid(pid),
            "demangledName": sid(name),
            "shortName": sid(name.split("<")[0]),
            "mangledName": sid("_Z" + name),
            "registersPerThread": 32,
            "gridX": 8,
            "gridY": 1,
            "gridZ": 1,
            "blockX": 256,
            "blockY": 1,
            "blockZ": 1,
            "staticSharedMemory": 1024,
            "dynamicSharedMemory": 2048,
            "greenContextId": 0,
            "tensorSizeMinusOneElements": "[]",
        }
        cols = [x.strip() for x in kcols.split(",")]
        c.execute(
            f"INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES ({','.join('?' * len(cols))})",
            [row[x] for x in cols],
        )
    c.execute(
        "CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start, end, eventClass, globalTid, "
        "correlationId, nameId, returnValue, callchainId)"
    )
    for s, e, pid, tid, corr, name in runtime:
        c.execute(
            "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?,?,0,?,?,?,0,NULL)",
            (s, e, gtid(pid, tid), corr, sid(name)),
        )
    if memcpy:
        c.execute(
            "CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start, end, deviceId, contextId, streamId, "
            "correlationId, globalPid, bytes, copyKind, srcKind, dstKind)"
        )
        for s, e, dev, st, corr, pid, nbytes, kind in memcpy:
            c.execute(
                "INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (?,?,?,1,?,?,?,?,?,1,2)",
                (s, e, dev, st, corr, gpid(pid), nbytes, kind),
            )
    if memset:
        c.execute(
            "CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start, end, deviceId, contextId, streamId, "
            "correlationId, globalPid, value, bytes, memKind)"
        )
        for s, e, dev, st, corr, pid, nbytes in memset:
            c.execute(
                "INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET VALUES (?,?,?,1,?,?,?,0,?,2)",
                (s, e, dev, st, corr, gpid(pid), nbytes),
            )
    if nvtx:
        c.execute(
            "CREATE TABLE NVTX_EVENTS (start, end, eventType, rangeId, category, color, text, "
            "globalTid, endGlobalTid, textId, domainId)"
        )
        for s, e, pid, tid, text in nvtx:
            # alternate between inline text and a StringIds reference, as nsys does
            inline = len(text) % 2 == 0
            c.execute(
                "INSERT INTO NVTX_EVENTS VALUES (?,?,59,NULL,NULL,NULL,?,?,NULL,?,0)",
                (s, e, text if inline else None, gtid(pid, tid), None if inline else sid(text)),
            )
        c.execute(
            "INSERT INTO NVTX_EVENTS VALUES (5, NULL, 34, NULL, NULL, NULL, 'a mark', ?, "
            "NULL, NULL, 0)",
            (gtid(nvtx[0][2], nvtx[0][3]),),
        )
    if gpu_info:
        c.execute(
            "CREATE TABLE TARGET_INFO_GPU (vmId, id, name, busLocation, smCount, totalMemory, "
            "computeMajor, computeMinor, l2CacheSize)"
        )
        c.execute(
            "INSERT INTO TARGET_INFO_GPU VALUES (0, 0, 'NVIDIA H200', '0000:19:00.0', 132, "
            "150109880320, 9, 0, 62914560)"
        )
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
        # launch call outside the export window
        (9_000, 9_500, 0, 7, 7, 100, "relu_kernel"),
        (1_200, 2_200, 1, 13, 5, 200, "gemm_kernel<float>"),  # same correlation id 5, other process
    ]
    runtime = [
        (100, 800, 100, 101, 5, "cudaLaunchKernel_v7000"),
        # call ends after its kernel started: queue null
        (900, 3_700, 100, 101, 6, "cuLaunchKernelEx"),
        (500, 1_100, 200, 201, 5, "cudaLaunchKernelExC_v11060"),
        (4_000, 9_600, 100, 101, 99, "cudaDeviceSynchronize_v3020"),
        (300, 400, 100, 101, 8, "cudaMemcpyAsync_v3020"),
        (450, 480, 200, 201, 9, "cudaMemsetAsync_v3020"),
    ]
    memcpy = [(600, 900, 0, 7, 8, 100, 1 << 20, 1)]
    memset = [(700, 720, 1, 13, 9, 200, 4096)]
    nvtx = [(0, 10_000, 100, 101, "step"), (50, 5_000, 200, 201, "forward")]
    return build_nsys(
        tmp_path, kernels=kernels, runtime=runtime, memcpy=memcpy, memset=memset, nvtx=nvtx, **kw
    )


def gtid(pid: int, tid: int) -> int:
    """globalTid as nsys writes it: (process key << 24) | tid, with the process key's low 24 bits = pid."""
    return ((0x1000000 + pid) * P) + tid


def gpid(pid: int) -> int:
    return (0x1000000 + pid) * P


P = 1 << 24
