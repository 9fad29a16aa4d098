"""Mutations of real files, by format: what a broken exporter, a cut transfer or an attacker could
hand over.

    mutate(rng, seed) -> Mutant(name, data, ops)

`rng` is a random.Random (in the CI subset hypothesis supplies it, `st.randoms()`, so a failing
mutant shrinks to its fewest and simplest operations; the long run seeds one per mutant, so mutant i
is reproducible from i). One to three operations are applied: mostly structure-aware ones for the
seed's format (Nsight Compute report blocks, CSV cells and units, trace events, SQLite tables, views
and values, bench records and ceilings), sometimes plain byte edits; a gzipped seed is gzipped again
and sometimes its compressed stream is damaged too.
"""

from __future__ import annotations

import csv
import io
import json
import random
import sqlite3
import tempfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from tests.fuzz.seeds import Seed, gz

#: values a hostile or broken file puts where a number belongs
HOSTILE_NUMBERS = [
    "inf",
    "-inf",
    "nan",
    "NaN",
    "-1",
    "0",
    "1e308",
    "-1e308",
    "1" * 400,
    "",
    "n/a",
    "-0",
    "1e-320",
    "9223372036854775808",
    "18446744073709551616",
    "0x10",
    "1,000,000,000,000",
    "+5",
    " 7 ",
    "1e30",
    "-1e30",
    "2147483648",
    "65536",
    "1025",
    "256",
    "1.5",
    "١٢",
    "\u00a0",
    "true",
    "null",
]
HOSTILE_TEXT = [
    "",
    "x" * 70_000,
    "<script>alert(1)</script>",
    "../../etc/passwd",
    "\x00\x01",
    "名前",
    'a"b,c\nd',
    "%s%n",
    "{}",
    "[]",
]
JSON_VALUES = [
    -1,
    0,
    -1.5,
    1e308,
    -1e308,
    1e30,
    1e-30,
    10**400,
    2**63,
    -(2**63) - 1,
    None,
    True,
    "",
    "1",
    [],
    {},
    "x" * 70_000,
    [[[[[]]]]],
    {"a": {"b": {"c": {}}}},
]


@dataclass
class Mutant:
    name: str
    data: bytes
    fmt: str
    ops: list[str] = field(default_factory=list)


def mutate(rng: random.Random, seed: Seed) -> Mutant:
    data = seed.data
    ops: list[str] = []
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        structured = STRUCTURED.get(seed.fmt)
        if structured and rng.random() < 0.75:
            data, op = structured(rng, data)
        else:
            data, op = byte_op(rng, data)
        ops.append(op)
    name = seed.name
    if seed.gz:
        data = gz(data)
        name += ".gz"
        if rng.random() < 0.08:
            data, op = gzip_op(rng, data)
            ops.append(op)
    return Mutant(name, data, seed.fmt, ops)


# ---------------------------------------------------------------------------------------------------
# bytes


def byte_op(rng: random.Random, d: bytes) -> tuple[bytes, str]:
    n = len(d)
    if n == 0:
        return b"\x00", "empty->nul"
    pos = rng.randrange(n)
    ln = rng.choice((1, 2, 4, 16, 256, 4096))
    kind = rng.choice(
        ("flip", "set", "delete", "insert", "dup", "truncate", "zero", "junk", "line_cut")
    )
    if kind == "flip":
        b = bytearray(d)
        for _ in range(rng.choice((1, 3, 10))):
            i = rng.randrange(n)
            b[i] ^= 1 << rng.randrange(8)
        return bytes(b), f"flip@{pos}"
    if kind == "set":
        b = bytearray(d)
        b[pos] = rng.choice(
            (0, 0xFF, 0x7F, 0x80, ord("9"), ord("-"), ord('"'), ord(","), ord("\n"))
        )
        return bytes(b), f"set@{pos}"
    if kind == "delete":
        return d[:pos] + d[pos + ln :], f"delete@{pos}+{ln}"
    if kind == "insert":
        return d[:pos] + rng.choice(
            (b"\x00" * ln, b"\xff" * ln, b"9" * ln, b'"' * ln, b"\n" * ln)
        ) + d[pos:], f"insert@{pos}+{ln}"
    if kind == "dup":
        return d[: pos + ln] + d[pos : pos + ln] + d[pos + ln :], f"dup@{pos}+{ln}"
    if kind == "truncate":
        return d[:pos], f"truncate@{pos}"
    if kind == "zero":
        return d[:pos] + b"\x00" * min(ln, n - pos) + d[pos + ln :], f"zero@{pos}+{ln}"
    if kind == "junk":
        return d + rng.choice((b"\n", b"\n\n", b"garbage", b"\x00" * 64, b",,,\n")), "append"
    nl = d.rfind(b"\n", 0, pos)
    return d[: nl + 1] if nl >= 0 else d[:pos], f"cut_at_line@{nl + 1}"


def gzip_op(rng: random.Random, d: bytes) -> tuple[bytes, str]:
    kind = rng.choice(("truncate", "flip", "trailer", "bomb"))
    if kind == "truncate":
        p = rng.randrange(2, len(d))
        return d[:p], f"gz_truncate@{p}"
    if kind == "flip":
        b = bytearray(d)
        i = rng.randrange(10, len(d))
        b[i] ^= 0xFF
        return bytes(b), f"gz_flip@{i}"
    if kind == "trailer":
        return d + rng.choice((b"junk", b"\x1f\x8b", b"\x00" * 8)), "gz_trailer"
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    size = rng.choice((1, 64)) << 20
    return c.compress(b"\x00" * size) + c.flush(), f"gz_bomb_{size >> 20}MiB"


# ---------------------------------------------------------------------------------------------------
# Nsight Compute report blocks


def _blocks(d: bytes) -> list[bytes]:
    out, off = [], 4
    while off + 4 <= len(d):
        n = int.from_bytes(d[off : off + 4], "little")
        out.append(d[off : off + 4 + n])
        off += 4 + n
    return out


def ncu_rep_op(rng: random.Random, d: bytes) -> tuple[bytes, str]:
    if d[:4] != b"NVR\x00":
        return byte_op(rng, d)
    bl = _blocks(d)
    if len(bl) < 3:
        return byte_op(rng, d)
    i = rng.randrange(len(bl))
    kind = rng.choice(
        ("delete", "dup", "swap", "cut", "payload_flip", "size_field", "pair_delete", "pair_dup")
    )
    head = d[:4]
    if kind == "delete":
        return head + b"".join(bl[:i] + bl[i + 1 :]), f"block_delete{i}"
    if kind == "dup":
        return head + b"".join(bl[: i + 1] + [bl[i]] + bl[i + 1 :]), f"block_dup{i}"
    if kind == "swap" and i + 1 < len(bl):
        return head + b"".join(bl[:i] + [bl[i + 1], bl[i]] + bl[i + 2 :]), f"block_swap{i}"
    if kind == "cut":
        return head + b"".join(bl[: i + 1]), f"block_cut_after{i}"
    if kind in ("pair_delete", "pair_dup") and i + 1 < len(bl):
        if kind == "pair_delete":
            return head + b"".join(bl[:i] + bl[i + 2 :]), f"pair_delete{i}"
        return head + b"".join(bl[: i + 2] + bl[i : i + 2] + bl[i + 2 :]), f"pair_dup{i}"
    if kind == "size_field":
        b = bytearray(bl[i])
        b[rng.randrange(4)] ^= 1 << rng.randrange(8)
        return head + b"".join(bl[:i] + [bytes(b)] + bl[i + 1 :]), f"block_size_flip{i}"
    b = bytearray(bl[i])
    if len(b) > 4:
        for _ in range(rng.choice((1, 4, 32))):
            j = rng.randrange(4, len(b))
            b[j] = rng.randrange(256)
    return head + b"".join(bl[:i] + [bytes(b)] + bl[i + 1 :]), f"payload_flip{i}"


# ---------------------------------------------------------------------------------------------------
# CSV exports of Nsight Compute


def _csv_rows(d: bytes) -> tuple[list[str], list[list[str]], int] | None:
    try:
        text = d.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None
    lines = text.split("\n")
    h = next(
        (i for i, ln in enumerate(lines) if '"Kernel Name"' in ln or "Kernel Name" in ln), None
    )
    if h is None:
        return None
    rows = list(csv.reader(lines[h:]))
    return lines[:h], rows, h


def _csv_join(pre: list[str], rows: list[list[str]]) -> bytes:
    buf = io.StringIO()
    w = csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\n")
    for r in rows:
        if r:
            w.writerow(r)
    return ("\n".join(pre) + ("\n" if pre else "") + buf.getvalue()).encode()


def ncu_csv_op(rng: random.Random, d: bytes) -> tuple[bytes, str]:
    parsed = _csv_rows(d)
    if parsed is None:
        return byte_op(rng, d)
    pre, rows, _ = parsed
    rows = [r for r in rows if r]
    if len(rows) < 3:
        return byte_op(rng, d)
    header = rows[0]
    long_form = "Metric Value" in header
    kind = rng.choice(
        (
            "cell",
            "cell",
            "cell",
            "unit",
            "drop_col",
            "dup_row",
            "blank_tail",
            "drop_units",
            "header",
            "launch_cell",
            "id",
        )
    )
    if long_form and kind in ("unit", "drop_units"):
        kind = "cell"
    r = rng.randrange(1 if long_form else 2, len(rows))
    if kind == "launch_cell" and not long_form:
        wanted = [
            c
            for c in (
                "launch__block_size",
                "launch__registers_per_thread",
                "launch__shared_mem_per_block_static",
                "gpu__time_duration.sum",
                "dram__bytes_read.sum",
                "launch__grid_size",
                "sm__warps_active.avg.pct_of_peak_sustained_active",
                "launch__block_dim_x",
            )
            if c in header
        ]
        if wanted:
            c = header.index(rng.choice(wanted))
            v = rng.choice(HOSTILE_NUMBERS)
            rows[r][c] = v
            return _csv_join(pre, rows), f"launch_cell[{r},{header[c]}]={v[:12]!r}"
    if kind == "launch_cell" and long_form:
        mi, vi = header.index("Metric Name"), header.index("Metric Value")
        cands = [
            i
            for i, row in enumerate(rows)
            if len(row) > vi
            and row[mi]
            in (
                "Block Size",
                "Registers Per Thread",
                "Duration",
                "Grid Size",
                "Static Shared Memory Per Block",
                "Achieved Occupancy",
                "gpu__time_duration.sum",
                "launch__block_size",
                "launch__registers_per_thread",
            )
        ]
        if cands:
            i = rng.choice(cands)
            v = rng.choice(HOSTILE_NUMBERS)
            rows[i][vi] = v
            return _csv_join(pre, rows), f"detail_value[{rows[i][mi]}]={v[:12]!r}"
    if kind in ("cell", "launch_cell"):
        c = rng.randrange(len(rows[r]))
        v = rng.choice(HOSTILE_NUMBERS + HOSTILE_TEXT)
        rows[r][c] = v
        return _csv_join(pre, rows), f"cell[{r},{c}]={v[:12]!r}"
    if kind == "unit":
        c = rng.randrange(len(rows[1]))
        v = rng.choice(("Tbyte/s", "byte", "usecond", "%", "", "Gbyte", "bogus", "ms/ns", "PB/ps"))
        rows[1][c] = v
        return _csv_join(pre, rows), f"unit[{c}]={v!r}"
    if kind == "drop_col":
        c = rng.randrange(len(header))
        return _csv_join(pre, [row[:c] + row[c + 1 :] for row in rows]), f"drop_col{c}"
    if kind == "dup_row":
        return _csv_join(pre, rows[: r + 1] + [rows[r]] + rows[r + 1 :]), f"dup_row{r}"
    if kind == "blank_tail":
        return d + b"\n" * rng.choice((1, 2, 5)), "blank_tail"
    if kind == "drop_units":
        return _csv_join(pre, rows[:1] + rows[2:]), "drop_units_row"
    if kind == "id":
        i = header.index("ID") if "ID" in header else 0
        v = rng.choice(
            ("1" * 400, "-1", "0", "x", "", "9223372036854775808", rows[1 if long_form else 2][i])
        )
        rows[r][i] = v
        return _csv_join(pre, rows), f"id[{r}]={v[:12]!r}"
    c = rng.randrange(len(header))
    v = rng.choice(("ID", "Kernel Name", "", "gpu__time_duration.sum", "x" * 300))
    rows[0][c] = v
    return _csv_join(pre, rows), f"header[{c}]={v[:12]!r}"


# ---------------------------------------------------------------------------------------------------
# PyTorch profiler traces


def kineto_op(rng: random.Random, d: bytes) -> tuple[bytes, str]:
    try:
        doc = json.loads(d)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return byte_op(rng, d)
    events = doc.get("traceEvents") if isinstance(doc, dict) else None
    if not isinstance(events, list) or not events:
        return byte_op(rng, d)
    kind = rng.choice(
        (
            "field",
            "field",
            "field",
            "args",
            "delete",
            "dup",
            "top",
            "nest",
            "reverse",
            "gpu_field",
            "whitespace",
            "overlap",
            "repeat",
        )
    )
    gpu = [
        i
        for i, e in enumerate(events)
        if isinstance(e, dict) and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
    ]
    # a long run of whitespace between two events, or around the array
    if kind == "whitespace":
        n = rng.choice((5000, 70_000, 1 << 20, 8 << 20))
        ws = bytes(rng.choice(b" \t\n\r") for _ in range(64)) * (n // 64)
        raw = json.dumps(doc).encode()
        at = rng.choice(
            [raw.index(b"[") + 1, raw.rindex(b"]"), raw.find(b"}, {") + 2 if b"}, {" in raw else 1]
        )
        return raw[:at] + ws + raw[at:], f"whitespace{n}@{at}"
    if kind in ("overlap", "repeat") and gpu:
        i = rng.choice(gpu)
        e = events[i]
        if kind == "repeat":  # the same record written many times
            n = rng.choice((1, 49, 500))
            events[i + 1 : i + 1] = [json.loads(json.dumps(e)) for _ in range(n)]
            return json.dumps(doc, allow_nan=True).encode(), f"repeat_event{i}x{n}"
        # started far earlier: it overlaps its stream's earlier ops
        if isinstance(e.get("ts"), (int, float)):
            shift = rng.choice((1.0, 1e3, 1e6, 1e9))
            e["ts"] -= shift
            if isinstance(e.get("dur"), (int, float)):
                e["dur"] += shift
            return json.dumps(doc, allow_nan=True).encode(), f"overlap_event{i}-{shift:g}us"
    i = rng.choice(gpu) if (kind in ("gpu_field", "args") and gpu) else rng.randrange(len(events))
    e = events[i] if isinstance(events[i], dict) else {}
    if kind in ("field", "gpu_field"):
        key = rng.choice(("ts", "dur", "ph", "name", "cat", "pid", "tid", "args"))
        v = rng.choice(
            JSON_VALUES
            + [
                -e.get("dur", 1) if isinstance(e.get("dur"), (int, float)) else -5,
                (e.get("ts") or 0) - 10**12 if isinstance(e.get("ts"), (int, float)) else 0,
            ]
        )
        if rng.random() < 0.1:
            e.pop(key, None)
            op = f"event{i}.del({key})"
        else:
            e[key] = v
            op = f"event{i}.{key}={str(v)[:12]!r}"
    elif kind == "args":
        args = e.setdefault("args", {}) if isinstance(e.get("args", {}), dict) else {}
        key = rng.choice(
            (
                "device",
                "stream",
                "correlation",
                "External id",
                "grid",
                "block",
                "registers per thread",
                "shared memory",
                "bytes",
            )
        )
        v = rng.choice(
            JSON_VALUES + [[0, 0, 0], [2**31, 1, 1], [1025, 1, 1], [-1, 1, 1], 256, 300000]
        )
        args[key] = v
        op = f"event{i}.args.{key}={str(v)[:12]!r}"
    elif kind == "delete":
        del events[i]
        op = f"delete_event{i}"
    elif kind == "dup":
        events.insert(i, json.loads(json.dumps(e)))
        op = f"dup_event{i}"
    elif kind == "top":
        key = rng.choice(
            (
                "baseTimeNanoseconds",
                "distributedInfo",
                "deviceProperties",
                "traceEvents",
                "schemaVersion",
            )
        )
        v = rng.choice(JSON_VALUES)
        doc[key] = v
        op = f"top.{key}={str(v)[:12]!r}"
    elif kind == "nest":
        depth = rng.choice((100, 1000, 5000))
        e["args"] = (
            json.loads("[" * min(depth, 900) + "]" * min(depth, 900)) if depth < 1000 else None
        )
        raw = json.dumps(doc).encode()
        if depth >= 1000:
            raw = raw.replace(b'"args": null', b'"args": ' + b"[" * depth + b"]" * depth, 1)
        return raw, f"nest{depth}"
    else:
        e["ts"], e["dur"] = (e.get("ts") or 0) + (e.get("dur") or 0), -(e.get("dur") or 1)
        op = f"reverse_event{i}"
    return json.dumps(doc, allow_nan=True).encode(), op


# ---------------------------------------------------------------------------------------------------
# Nsight Systems SQLite

_NSYS_TABLES = (
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "StringIds",
    "TARGET_INFO_GPU",
    "NVTX_EVENTS",
    "META_DATA_EXPORT",
)


def nsys_op(rng: random.Random, d: bytes) -> tuple[bytes, str]:
    if not d.startswith(b"SQLite format 3\x00"):
        return byte_op(rng, d)
    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / "m.sqlite"
        p.write_bytes(d)
        try:
            con = sqlite3.connect(p)
            tables = {
                r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")
            }
            present = [t for t in _NSYS_TABLES if t in tables]
            if not present:
                con.close()
                return byte_op(rng, d)
            t = rng.choice(present)
            cols = [r[1] for r in con.execute(f"PRAGMA table_info([{t}])")]
            kind = rng.choice(
                (
                    "value",
                    "value",
                    "value",
                    "null",
                    "view",
                    "recursive_view",
                    "drop_col",
                    "swap_times",
                    "drop_table",
                    "huge_rows",
                    "virtual",
                )
            )
            op = kind
            if kind in ("value", "null") and cols:
                c = rng.choice(
                    [
                        c
                        for c in cols
                        if c
                        in (
                            "start",
                            "end",
                            "deviceId",
                            "streamId",
                            "correlationId",
                            "globalPid",
                            "globalTid",
                            "gridX",
                            "blockX",
                            "registersPerThread",
                            "staticSharedMemory",
                            "bytes",
                            "demangledName",
                            "value",
                            "smCount",
                            "nameId",
                        )
                    ]
                    or cols
                )
                v = (
                    None
                    if kind == "null"
                    else rng.choice(
                        [
                            -1,
                            0,
                            2**63 - 1,
                            -(2**63),
                            1e308,
                            "x",
                            "",
                            10**15,
                            b"\x00blob",
                            2**40,
                            -(10**12),
                        ]
                    )
                )
                where = rng.choice(("", " WHERE rowid = (SELECT min(rowid) FROM [%s])" % t))
                con.execute(f"UPDATE [{t}] SET [{c}] = ?{where}", (v,))
                op = f"{t}.{c}={str(v)[:12]!r}{' all' if not where else ''}"
            elif kind == "view" or kind == "recursive_view":
                con.execute(f"ALTER TABLE [{t}] RENAME TO [{t}_real]")
                body = f"SELECT * FROM [{t}_real]"
                if kind == "recursive_view":
                    body = (
                        f"WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) "
                        f"SELECT [{t}_real].* FROM [{t}_real], r"
                    )
                con.execute(f"CREATE VIEW [{t}] AS {body}")
                op = f"{kind}:{t}"
            elif kind == "drop_col" and len(cols) > 1:
                c = rng.choice(cols)
                con.execute(f"ALTER TABLE [{t}] DROP COLUMN [{c}]")
                op = f"drop_col:{t}.{c}"
            elif kind == "swap_times" and {"start", "end"} <= set(cols):
                con.execute(f"UPDATE [{t}] SET start = end, end = start")
                op = f"swap_times:{t}"
            elif kind == "drop_table":
                con.execute(f"DROP TABLE [{t}]")
                op = f"drop_table:{t}"
            elif kind == "huge_rows" and cols:
                con.execute(f"INSERT INTO [{t}] SELECT * FROM [{t}] LIMIT 1")
                op = f"dup_row:{t}"
            elif kind == "virtual":
                con.execute(f"ALTER TABLE [{t}] RENAME TO [{t}_real]")
                try:
                    con.execute(f"CREATE VIRTUAL TABLE [{t}] USING fts4(a)")
                except sqlite3.OperationalError:
                    con.execute(f"CREATE VIEW [{t}] AS SELECT * FROM [{t}_real]")
                op = f"virtual:{t}"
            con.commit()
            con.close()
        except sqlite3.Error as e:
            return byte_op(rng, d)[0], f"sqlite_error({e})"
        return p.read_bytes(), op


# ---------------------------------------------------------------------------------------------------
# kernelscope bench results


def bench_op(rng: random.Random, d: bytes) -> tuple[bytes, str]:
    try:
        doc = json.loads(d)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return byte_op(rng, d)
    if not isinstance(doc, dict):
        return byte_op(rng, d)
    kind = rng.choice(
        ("ceiling", "ceiling", "result", "result", "top", "nest", "gpu", "bigint", "param")
    )
    if kind == "param":  # a result's launch parameters: negative, huge, not numbers
        recs = doc.get("results")
        if isinstance(recs, list) and recs and isinstance(recs[0], dict):
            i = rng.randrange(len(recs))
            params = recs[i].get("params") if isinstance(recs[i].get("params"), dict) else {}
            key = rng.choice(
                (
                    "smem_static_bytes",
                    "occupancy_pct",
                    "blocks_per_sm",
                    "regs_per_thread",
                    "bytes",
                    "m",
                    "stride_words",
                    "new_param",
                )
            )
            v = rng.choice([-9.22e18, 1e308, -1e30, -1, 2**70, 1e16, "x", None, [1, -1], {"a": -5}])
            params[key] = v
            recs[i]["params"] = params
            return json.dumps(
                doc, allow_nan=True
            ).encode(), f"results[{i}].params.{key}={str(v)[:12]!r}"
        kind = "top"
    if kind in ("ceiling", "result"):
        key = "ceilings" if kind == "ceiling" else "results"
        recs = doc.get(key)
        if not isinstance(recs, list) or not recs:
            return byte_op(rng, d)
        i = rng.randrange(len(recs))
        field_ = rng.choice(
            ("value", "value", "value", "unit", "cv", "n", "params", "metric", "case", "flags")
        )
        v = rng.choice(JSON_VALUES + [1e-3, 1e18, 4.8e12 * 1e18, -4.3e12, 0.5])
        recs[i][field_] = v
        op = f"{key}[{i}].{field_}={str(v)[:14]!r}"
    elif kind == "top":
        k = rng.choice(
            ("kernelscope_bench", "gpu", "versions", "ceilings", "results", "failures", "finished")
        )
        v = rng.choice(JSON_VALUES)
        doc[k] = v
        op = f"top.{k}={str(v)[:12]!r}"
    elif kind == "gpu":
        g = doc.get("gpu") if isinstance(doc.get("gpu"), dict) else {}
        k = rng.choice(("name", "uuid", "attributes", "sm_count"))
        v = rng.choice(JSON_VALUES + ["NVIDIA H100 80GB HBM3", "Tesla T4", "x" * 5000])
        g[k] = v
        doc["gpu"] = g
        op = f"gpu.{k}={str(v)[:12]!r}"
    elif kind == "nest":
        depth = rng.choice((70, 900, 1100, 5000))
        raw = json.dumps(doc).encode()
        raw = raw.replace(
            b'"params": {', b'"params": {"deep": ' + b"[" * depth + b"]" * depth + b", ", 1
        )
        return raw, f"nest{depth}"
    else:
        raw = json.dumps(doc).encode()
        raw = raw.replace(b'"n": ', b'"n": ' + b"9" * 400 + b" + 0 * ", 1).replace(
            b" + 0 * ", b', "x": ', 1
        )
        return raw, "bigint"
    return json.dumps(doc, allow_nan=True).encode(), op


STRUCTURED = {
    "ncu-rep": ncu_rep_op,
    "ncu-csv": ncu_csv_op,
    "kineto": kineto_op,
    "nsys": nsys_op,
    "bench": bench_op,
}
