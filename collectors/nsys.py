"""Nsight Systems SQLite export (`nsys export --type sqlite`) -> the normalized timeline tables.

The tables and their schemas are the timeline tables of `collectors.schema` (gpu_ops, api_calls,
cpu_ops, nvtx), so the timeline analyzers treat both sources alike. Source tables (formats.md §4;
all optional, exports are lazy): CUPTI_ACTIVITY_KIND_KERNEL / _MEMCPY / _MEMSET -> gpu_ops;
CUPTI_ACTIVITY_KIND_RUNTIME (+ _DRIVER) -> api_calls; NVTX_EVENTS ranges -> nvtx; StringIds for
names; TARGET_INFO_GPU, META_DATA_EXPORT, TARGET_INFO_SESSION_START_TIME, PROCESSES -> meta. Columns
that an older or trimmed schema lacks read as null.

More: docs/architecture.md, *collectors.nsys*.
Start-up: imports that only some commands, pages or GPUs need sit inside the functions that use
them, so each command loads what it uses.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import tempfile
import time
from pathlib import Path

import polars as pl

from collectors.errors import ArtifactError
from collectors.limits import MAX_ROWS, sqlite_seconds
from collectors.launches import api_kind_columns, link_launches, op_counts
from collectors.trace_notes import trace_notes
from collectors.schema import (
    API_CALLS_SCHEMA,
    CPU_OPS_SCHEMA,
    GPU_RAW_SCHEMA,
    NVTX_SCHEMA,
    Parsed,
    conform,
    empty,
    finish_meta,
)

_MEMCPY_KIND = {
    0: "Unknown",
    1: "HtoD",
    2: "DtoH",
    3: "HtoA",
    4: "AtoH",
    5: "AtoA",
    6: "AtoD",
    7: "DtoA",
    8: "DtoD",
    9: "HtoH",
    10: "PtoP",
    11: "UVM HtoD",
    12: "UVM DtoH",
    13: "UVM DtoD",
}
_MEM_KIND = {
    0: "Pageable",
    1: "Pinned",
    2: "Device",
    3: "Array",
    4: "Managed",
    5: "Device Static",
    6: "Managed Static",
    7: "Unknown",
}
_NSYS_MARKERS = (
    "StringIds",
    "META_DATA_EXPORT",
    "TARGET_INFO_SESSION_START_TIME",
    "ANALYSIS_DETAILS",
)
#: tables this reader queries (besides CUPTI_ACTIVITY_KIND_*)
_READ_TABLES = {
    "StringIds",
    "StringTable",
    "META_DATA_EXPORT",
    "TARGET_INFO_SESSION_START_TIME",
    "TARGET_INFO_GPU",
    "NVTX_EVENTS",
    "PROCESSES",
}


def _tables(con, name: str = "") -> set[str]:
    """The export's real tables. Views and virtual tables are not tables nsys writes: one under a
    name this reader uses is refused (a view runs as long as its author wants), so are its tables
    with generated columns (computed on every read) and tables above MAX_ROWS rows."""
    out = set()
    for tname, ttype, sql in con.execute(
        "SELECT name, type, sql FROM sqlite_master WHERE type IN ('table', 'view')"
    ):
        virtual = ttype == "table" and (sql or "").lstrip().upper().startswith("CREATE VIRTUAL")
        if ttype == "view" or virtual:
            if tname in _READ_TABLES or tname.startswith("CUPTI_ACTIVITY_KIND_"):
                raise ArtifactError(
                    name,
                    f"{tname} is a {'virtual table' if virtual else 'view'}, not a table: not an "
                    "export nsys writes",
                )
            continue
        out.add(tname)
    for tname in sorted(
        out & (_READ_TABLES | {t for t in out if t.startswith("CUPTI_ACTIVITY_KIND_")})
    ):
        if any(r[6] for r in con.execute(f"PRAGMA table_xinfo([{tname}])") if len(r) > 6):
            raise ArtifactError(name, f"{tname} has generated columns: not an export nsys writes")
        n = con.execute(f"SELECT count(*) FROM [{tname}]").fetchone()[0]
        if n > MAX_ROWS:
            raise ArtifactError(
                name, f"{tname} has {n:,} rows, more than the {MAX_ROWS:,} one run may hold"
            )
    return out


def _columns(con, table: str) -> set[str]:
    return {r[1] for r in con.execute(f"PRAGMA table_info([{table}])")}


class _Reader:
    """An export opened read-only: sqlite3 for the schema and small tables, ADBC (Arrow) for the large ones."""

    BATCH_ROWS = 131_072

    def __init__(self, path: str, name: str):
        self.path, self.name = path, name
        self.con = sqlite3.connect(_uri(path), uri=True)
        self._adbc = None
        # set by _open: sqlite3's queries stop there, the Arrow reads after it
        self.deadline = float("inf")

    def _in_time(self) -> None:
        if time.monotonic() > self.deadline:
            raise sqlite3.OperationalError("interrupted")

    def execute(self, sql: str, *args):
        return self.con.execute(sql, *args)

    def _adbc_connection(self):
        if self._adbc is None:
            # the driver's low-level API: Arrow streams straight into polars, no pyarrow import
            try:
                import adbc_driver_manager
                import adbc_driver_sqlite

                db = adbc_driver_sqlite.connect(_uri(self.path))
                self._adbc = (db, adbc_driver_manager.AdbcConnection(db))
            except ImportError:
                self._adbc = False
        return self._adbc

    def frame(self, sql: str, columns: list[str]) -> pl.DataFrame:
        """The rows of a query as a polars frame, typed by SQLite's values (a column of NULLs reads as Int64)."""
        ad = self._adbc_connection()
        if ad:
            import adbc_driver_manager

            try:
                st = adbc_driver_manager.AdbcStatement(ad[1])
                try:
                    st.set_options(**{"adbc.sqlite.query.batch_rows": str(self.BATCH_ROWS)})
                    st.set_sql_query(sql)
                    stream, _ = st.execute_query()
                    df = pl.DataFrame(stream)
                finally:
                    st.close()
            except adbc_driver_manager.Error as e:
                raise sqlite3.DatabaseError(str(e).splitlines()[0]) from None
            self._in_time()
            return (
                df.rename(dict(zip(df.columns, columns)))
                if df.width == len(columns)
                else pl.DataFrame({a: [] for a in columns}, schema={a: pl.Int64 for a in columns})
            )
        rows = self.con.execute(sql).fetchall()
        return (
            pl.DataFrame(rows, schema=columns, orient="row", infer_schema_length=None)
            if rows
            else pl.DataFrame({a: [] for a in columns}, schema={a: pl.Int64 for a in columns})
        )

    def close(self) -> None:
        if self._adbc:
            self._adbc[1].close()
            self._adbc[0].close()
        self.con.close()


def _uri(path: str) -> str:
    from urllib.parse import quote

    return f"file:{quote(os.path.abspath(path))}?mode=ro&immutable=1"


def _select(
    con: _Reader,
    table: str,
    wanted: dict[str, str],
    required: tuple[str, ...],
    name: str,
    where: str = "",
) -> pl.DataFrame:
    """SELECT the wanted columns (alias -> column name); a missing optional column reads as NULL, a
    missing required one is an error. The rows come back as Arrow columns (no Python object per
    row)."""
    have = _columns(con, table)
    lacking = [c for c in required if c not in have]
    if lacking:
        raise ArtifactError(
            name, f"{table} lacks columns {lacking}: not an Nsight Systems export this reader knows"
        )
    exprs = {}
    for alias, col in wanted.items():
        # (SQL expression over {placeholders}, columns it needs): COALESCE over those present
        if isinstance(col, tuple):
            fmt, need = col
            present = [c for c in need if c in have]
            exprs[alias] = fmt(present) if present else "NULL"
        else:
            exprs[alias] = f"[{col}]" if col in have else "NULL"
    sql = (
        "SELECT "
        + ", ".join(f"{e} AS [{a}]" for a, e in exprs.items())
        + f" FROM [{table}] {where}"
    )
    return con.frame(sql, list(wanted))


def _strings(con, tables: set[str]) -> pl.DataFrame:
    if "StringIds" not in tables:
        return pl.DataFrame({"id": [], "value": []}, schema={"id": pl.Int64, "value": pl.String})
    rows = con.execute("SELECT id, value FROM StringIds").fetchall()
    return pl.DataFrame(rows, schema={"id": pl.Int64, "value": pl.String}, orient="row")


def _name(df: pl.DataFrame, strings: pl.DataFrame, id_cols: list[str], out: str) -> pl.DataFrame:
    """Resolve StringIds ids: the first of id_cols that resolves gives the name. The names are
    gathered from the strings table by position (rows share its text: a million kernels do not hold
    a million copies of a name)."""
    ids = strings["id"]
    # dense ids, as nsys writes them
    if ids.len() and ids.min() >= 0 and ids.max() < 4 * ids.len() + 1024:
        lookup = pl.Series(out, [None] * (int(ids.max()) + 1), dtype=pl.String).scatter(
            ids, strings["value"]
        )
        n = lookup.len()
        names = [
            lookup.gather(
                df.select(
                    pl.when(pl.col(c).is_between(0, n - 1)).then(pl.col(c)).cast(pl.Int64)
                ).to_series()
            )
            for c in id_cols
        ]
        return df.with_columns(
            pl.coalesce(names).alias(out) if len(names) > 1 else names[0].alias(out)
        )
    parts = []
    for c in id_cols:
        s = strings.rename({"id": c, "value": f"__{c}"})
        df = df.with_columns(pl.col(c).cast(pl.Int64)).join(s, on=c, how="left")
        parts.append(f"__{c}")
    return df.with_columns(pl.coalesce(parts).alias(out)).drop(parts)


_INT = pl.Int64
_P = 1 << 24  # globalTid = (process key << 24) | tid


def _gpu_frames(con, tables: set[str], strings: pl.DataFrame, name: str) -> list[pl.DataFrame]:
    frames = []
    if "CUPTI_ACTIVITY_KIND_KERNEL" in tables:
        k = _select(
            con,
            "CUPTI_ACTIVITY_KIND_KERNEL",
            {
                "start_ns": "start",
                "end_ns": "end",
                "device": "deviceId",
                "stream": "streamId",
                "correlation": "correlationId",
                "gpid": "globalPid",
                # the demangled name, else the short one, else the mangled one
                "name_id": (
                    lambda cs: (
                        f"COALESCE({', '.join(f'[{c}]' for c in cs)})"
                        if len(cs) > 1
                        else f"[{cs[0]}]"
                    ),
                    ["demangledName", "shortName", "mangledName"],
                ),
                "registers_per_thread": "registersPerThread",
                "grid_x": "gridX",
                "grid_y": "gridY",
                "grid_z": "gridZ",
                "block_x": "blockX",
                "block_y": "blockY",
                "block_z": "blockZ",
                "shared_memory_bytes": (
                    lambda cs: " + ".join(f"[{c}]" for c in cs) if len(cs) == 2 else "NULL",
                    ["staticSharedMemory", "dynamicSharedMemory"],
                ),
            },
            ("start", "end", "deviceId", "streamId", "correlationId"),
            name,
        )
        k = _name(k, strings, ["name_id"], "name")
        k = k.with_columns(
            pl.lit("kernel").alias("kind"),
            pl.col("shared_memory_bytes").cast(_INT),
            pl.lit(None, _INT).alias("bytes"),
            pl.lit(None, pl.String).alias("copy_kind"),
        )
        frames.append(k)
    if "CUPTI_ACTIVITY_KIND_MEMCPY" in tables:
        m = _select(
            con,
            "CUPTI_ACTIVITY_KIND_MEMCPY",
            {
                "start_ns": "start",
                "end_ns": "end",
                "device": "deviceId",
                "stream": "streamId",
                "correlation": "correlationId",
                "gpid": "globalPid",
                "bytes": "bytes",
                "copy": "copyKind",
                "src": "srcKind",
                "dst": "dstKind",
            },
            ("start", "end", "deviceId", "streamId"),
            name,
        )
        ck = (
            pl.col("copy")
            .cast(_INT)
            .replace_strict(_MEMCPY_KIND, default="Unknown", return_dtype=pl.String)
        )
        mk = lambda c: (
            pl.col(c)
            .cast(_INT)
            .replace_strict(_MEM_KIND, default="Unknown", return_dtype=pl.String)
        )  # noqa: E731
        m = m.with_columns(pl.lit("memcpy").alias("kind"), ck.alias("copy_kind")).with_columns(
            pl.format("Memcpy {} ({} -> {})", pl.col("copy_kind"), mk("src"), mk("dst")).alias(
                "name"
            )
        )
        frames.append(m)
    if "CUPTI_ACTIVITY_KIND_MEMSET" in tables:
        s = _select(
            con,
            "CUPTI_ACTIVITY_KIND_MEMSET",
            {
                "start_ns": "start",
                "end_ns": "end",
                "device": "deviceId",
                "stream": "streamId",
                "correlation": "correlationId",
                "gpid": "globalPid",
                "bytes": "bytes",
                "mem": "memKind",
            },
            ("start", "end", "deviceId", "streamId"),
            name,
        )
        s = s.with_columns(
            pl.lit("memset").alias("kind"),
            pl.lit(None, pl.String).alias("copy_kind"),
            pl.format(
                "Memset ({})",
                pl.col("mem")
                .cast(_INT)
                .replace_strict(_MEM_KIND, default="Unknown", return_dtype=pl.String),
            ).alias("name"),
        )
        frames.append(s)
    out = []
    for f in frames:
        f = f.with_columns(
            [
                pl.lit(None, _INT).alias(c)
                for c in GPU_RAW_SCHEMA
                if c not in f.columns and c not in ("rank", "pid")
            ]
        )
        out.append(
            f.with_columns(
                pl.col("gpid").cast(_INT),
                pl.col("start_ns").cast(_INT),
                pl.col("end_ns").cast(_INT),
            )
        )
    return out


def _api_frame(con, tables: set[str], strings: pl.DataFrame, name: str) -> pl.DataFrame:
    parts = []
    for t in ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_DRIVER"):
        if t in tables:
            a = _select(
                con,
                t,
                {
                    "start_ns": "start",
                    "end_ns": "end",
                    "gtid": "globalTid",
                    "correlation": "correlationId",
                    "name_id": "nameId",
                },
                ("start", "end", "globalTid", "nameId"),
                name,
            )
            parts.append(a.with_columns(pl.all().cast(_INT)))
    if not parts:
        return pl.DataFrame(
            schema={
                "start_ns": _INT,
                "end_ns": _INT,
                "gtid": _INT,
                "correlation": _INT,
                "name": pl.String,
            }
        )
    a = pl.concat(parts)
    # names without the _vNNNN version suffix, stripped once per string id, not per call
    used = a["name_id"].unique().drop_nulls()
    names = strings.filter(pl.col("id").is_in(used.implode())).with_columns(
        pl.col("value").str.replace(r"_v\d+$", "")
    )
    a = _name(a, names, ["name_id"], "name")
    return a.with_columns(pl.col("name").fill_null("<unknown>"))


def _nvtx_frame(con, tables: set[str], strings: pl.DataFrame, name: str) -> pl.DataFrame:
    if "NVTX_EVENTS" not in tables:
        return pl.DataFrame(
            schema={"start_ns": _INT, "end_ns": _INT, "gtid": _INT, "name": pl.String}
        )
    n = _select(
        con,
        "NVTX_EVENTS",
        {
            "start_ns": "start",
            "end_ns": "end",
            "gtid": "globalTid",
            "text": "text",
            "text_id": "textId",
        },
        ("start",),
        name,
        where="WHERE [end] IS NOT NULL AND [end] >= [start]"
        if "end" in _columns(con, "NVTX_EVENTS")
        else "WHERE 0",
    )
    n = n.with_columns(
        pl.col("start_ns").cast(_INT),
        pl.col("end_ns").cast(_INT),
        pl.col("gtid").cast(_INT),
        pl.col("text").cast(pl.String),
    )
    n = _name(n, strings, ["text_id"], "__t")
    return n.with_columns(pl.coalesce("text", "__t").fill_null("").alias("name")).drop(
        "text", "__t", "text_id"
    )


def _meta(con, tables: set[str], name: str) -> dict:
    meta: dict = {
        "source_format": "nsys",
        "trace_name": name,
        "clock": "nsys session clock ns",
        "devices": [],
    }
    # the second is the name before nsys 2022.4
    for table in ("META_DATA_EXPORT", "EXPORT_META_DATA"):
        if table in tables and {"name", "value"} <= _columns(con, table):
            kv = dict(con.execute(f"SELECT name, value FROM {table}").fetchall())
            for k, out in (
                ("EXPORT_SCHEMA_VERSION", "schema_version"),
                ("EXPORT_PRODUCT_VERSION", "nsys_version"),
            ):
                if k in kv:
                    meta[out] = kv[k]
            break
    if "TARGET_INFO_SESSION_START_TIME" in tables:
        cols = _columns(con, "TARGET_INFO_SESSION_START_TIME")
        if {"utcEpochNs", "systemClockNs"} <= cols:
            row = con.execute(
                "SELECT utcEpochNs, systemClockNs FROM TARGET_INFO_SESSION_START_TIME"
            ).fetchone()
            if row and row[0] is not None and row[1] is not None:
                meta["utc_offset_ns"] = int(row[0]) - int(row[1])
    if "TARGET_INFO_GPU" in tables:
        cols = _columns(con, "TARGET_INFO_GPU")
        want = {
            "id": "device",
            "name": "name",
            "smCount": "sm_count",
            "totalMemory": "total_memory_bytes",
            "computeMajor": "cc_major",
            "computeMinor": "cc_minor",
            "l2CacheSize": "l2_bytes",
            "clockRate": "clock_hz",
            "maxShmemPerBlockOptin": "smem_per_block_optin_bytes",
            "maxShmemPerSm": "smem_per_sm_bytes",
            "busLocation": "bus_location",
        }
        sel = [c for c in want if c in cols]
        if sel:
            for row in con.execute(
                f"SELECT {', '.join(f'[{c}]' for c in sel)} FROM TARGET_INFO_GPU"
            ):
                meta["devices"].append({want[c]: v for c, v in zip(sel, row)})
    return meta


def _open(path: str, name: str) -> _Reader:
    try:
        with open(path, "rb") as f:
            head = f.read(16)
    except OSError as e:
        raise ArtifactError(name, f"cannot read file ({e.strerror})") from None
    if head != b"SQLite format 3\x00":
        raise ArtifactError(name, "not an SQLite database")
    try:
        con = _Reader(path, name)
    except sqlite3.DatabaseError as e:
        raise ArtifactError(name, f"corrupt or truncated SQLite database ({e})") from None
    # all queries together stop at the time limit; no writes; untrusted schema functions off; one
    # value bounded
    deadline = con.deadline = time.monotonic() + sqlite_seconds()
    con.con.set_progress_handler(lambda: 1 if time.monotonic() > deadline else 0, 20_000)
    try:
        con.execute("PRAGMA query_only = ON")
        con.execute("PRAGMA trusted_schema = OFF")
        con.con.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, 1 << 30)
        con.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError as e:
        con.close()
        raise ArtifactError(name, f"corrupt or truncated SQLite database ({e})") from None
    return con


def parse(data: bytes, name: str) -> Parsed:
    """An Nsight Systems SQLite export (bytes) -> Parsed(kind="nsys") with the timeline tables."""
    if not data.startswith(b"SQLite format 3\x00"):
        raise ArtifactError(name, "not an SQLite database")
    with tempfile.TemporaryDirectory(prefix="ks-nsys-") as tmp:
        path = os.path.join(tmp, "export.sqlite")
        try:
            Path(path).write_bytes(data)
        except OSError as e:
            raise ArtifactError(
                name, f"cannot write a temporary copy to read it ({e.strerror})"
            ) from None
        return parse_file(path, name)


def parse_file(path, name: str) -> Parsed:
    """An Nsight Systems SQLite export read where it lies (read-only) -> Parsed(kind="nsys")."""
    con = _open(str(path), name)
    try:
        return _parse(con, name)
    except sqlite3.OperationalError as e:
        if "interrupted" in str(e):
            raise ArtifactError(
                name,
                f"its queries took longer than {sqlite_seconds():g} s (the limit for one export; "
                "KERNELSCOPE_SQLITE_SECONDS raises it)",
            ) from None
        raise ArtifactError(
            name, f"corrupt SQLite database or unexpected nsys schema ({e})"
        ) from None
    except sqlite3.DatabaseError as e:
        raise ArtifactError(
            name, f"corrupt SQLite database or unexpected nsys schema ({e})"
        ) from None
    finally:
        con.close()


def _parse(con: _Reader, name: str) -> Parsed:
    tables = _tables(con, name)
    if "StringTable" in tables and "StringIds" not in tables:
        raise ArtifactError(
            name,
            "a legacy nvprof database, not an Nsight Systems export (nsys export --type sqlite)",
        )
    if not any(t in tables for t in _NSYS_MARKERS) and not any(
        t.startswith("CUPTI_ACTIVITY_KIND_") for t in tables
    ):
        raise ArtifactError(
            name,
            "an SQLite database without Nsight Systems tables (StringIds, META_DATA_EXPORT, "
            "CUPTI_ACTIVITY_KIND_*): not an nsys export",
        )
    strings = _strings(con, tables)
    gpu_parts = _gpu_frames(con, tables, strings, name)
    api = _api_frame(con, tables, strings, name)
    nvtx = _nvtx_frame(con, tables, strings, name)
    lacks: list[str] = []
    gpu_parts = _own_process(gpu_parts, api, lacks)

    # process keys -> rank (processes with GPU ops first) and pid
    gpu_keys = sorted(
        {int(k) for f in gpu_parts for k in (f["gpid"] // _P).drop_nulls().unique().to_list()}
    )
    other = sorted(
        {int(k) for f in (api, nvtx) for k in (f["gtid"] // _P).drop_nulls().unique().to_list()}
        - set(gpu_keys)
    )
    ranks = {k: i for i, k in enumerate(gpu_keys + other)}
    rank_of = lambda col: (pl.col(col) // _P).replace_strict(
        ranks, default=None, return_dtype=pl.Int32
    )  # noqa: E731
    pid_of = lambda col: (pl.col(col) // _P) % _P  # noqa: E731

    if gpu_parts:
        g = pl.concat(
            [
                f.with_columns(rank_of("gpid").alias("rank"), pid_of("gpid").alias("pid"))
                for f in gpu_parts
            ],
            how="diagonal_relaxed",
        )
        gpu_parts.clear()
        g = g.with_columns((pl.col("end_ns") - pl.col("start_ns")).alias("duration_ns"))
        gpu_raw = conform(g, GPU_RAW_SCHEMA, "gpu_ops")
        del g
        # the order link_launches wants, made here so that the unsorted frame is released before the
        # join runs
        gpu_raw = gpu_raw.sort("rank", "device", "stream", "start_ns", maintain_order=True)
    else:
        gpu_raw = empty(GPU_RAW_SCHEMA)

    if api.height:
        api = api.with_columns(
            rank_of("gtid").alias("rank"),
            pid_of("gtid").alias("pid"),
            (pl.col("gtid") % _P).alias("tid"),
            (pl.col("end_ns") - pl.col("start_ns")).alias("duration_ns"),
            pl.lit(None, _INT).alias("external_id"),
        )
        api = conform(
            pl.concat([api, api_kind_columns(api["name"])], how="horizontal"),
            API_CALLS_SCHEMA,
            "api_calls",
        )
        # exports usually list the calls in time order already
        if not api["start_ns"].is_sorted():
            api = api.sort("start_ns")
    else:
        api = empty(API_CALLS_SCHEMA)
    if nvtx.height:
        nvtx = conform(
            nvtx.with_columns(
                rank_of("gtid").alias("rank"),
                pid_of("gtid").alias("pid"),
                (pl.col("gtid") % _P).alias("tid"),
                (pl.col("end_ns") - pl.col("start_ns")).alias("duration_ns"),
            ),
            NVTX_SCHEMA,
            "nvtx",
        ).sort("start_ns")
    else:
        nvtx = empty(NVTX_SCHEMA)
    cpu = empty(CPU_OPS_SCHEMA)
    gpu = link_launches(gpu_raw, api, cpu)

    meta = _meta(con, tables, name)
    meta["gpu_name"] = _gpu_name(meta["devices"], gpu)
    if "TARGET_INFO_GPU" not in tables:
        lacks.append("the GPU table (TARGET_INFO_GPU): the GPU is not named; give --gpu NAME")
    meta["ranks"] = list(range(max(len(gpu_keys), 1 if gpu.height else 0)))
    meta["processes"] = [{"rank": ranks[k], "pid": k % _P} for k in gpu_keys]
    meta["source_tables"] = sorted(
        t for t in tables if t.startswith(("CUPTI_ACTIVITY_KIND_", "NVTX_EVENTS"))
    )
    n_k, n_kl, n_mc, n_ms = op_counts(gpu)
    meta["counts"] = {
        "gpu_ops": gpu.height,
        "kernels": n_k,
        "kernels_with_launch": n_kl,
        "memcpy": n_mc,
        "memset": n_ms,
        "api_calls": api.height,
        "cpu_ops": 0,
        "nvtx": nvtx.height,
    }
    meta["item_count"] = n_k
    if gpu.height:
        meta["window_ns"] = [int(gpu["start_ns"].min()), int(gpu["end_ns"].max())]
    tabs = {"gpu_ops": gpu, "api_calls": api, "cpu_ops": cpu, "nvtx": nvtx}
    meta["warnings"], meta["lacks"] = trace_notes(tabs, meta, lacks)
    return Parsed(
        "nsys",
        {"gpu_ops": gpu, "api_calls": api, "cpu_ops": cpu, "nvtx": nvtx},
        finish_meta("nsys", meta),
    )


def _own_process(
    parts: list[pl.DataFrame], api: pl.DataFrame, lacks: list[str]
) -> list[pl.DataFrame]:
    """GPU ops of an export whose tables lack globalPid: attributed to the one process that made API
    calls; with several processes their correlation ids (per process) cannot be told apart, so they
    are not joined."""
    lacking = [f for f in parts if f["gpid"].null_count() == f.height and f.height]
    if not lacking:
        return parts
    keys = (api["gtid"] // _P).drop_nulls().unique().to_list() if api.height else []
    if len(keys) <= 1:
        key = keys[0] * _P if keys else 0
        lacks.append(
            "globalPid in the GPU activity tables: GPU ops are attributed to the export's "
            "only process"
        )
        return [f.with_columns(pl.col("gpid").fill_null(key)) for f in parts]
    lacks.append(
        f"globalPid in the GPU activity tables of a {len(keys)}-process export: correlation ids "
        "are per process, so GPU ops cannot be matched to their launch calls (no launch delays)"
    )
    ids = {id(f) for f in lacking}
    return [
        f.with_columns(pl.col("gpid").fill_null(0), pl.lit(None, _INT).alias("correlation"))
        if id(f) in ids
        else f
        for f in parts
    ]


def _gpu_name(devices: list[dict], gpu: pl.DataFrame) -> str | None:
    """The name of the GPU the kernels ran on (the device with most ops, by TARGET_INFO_GPU id), else the first."""
    names = {d.get("device"): d.get("name") for d in devices if d.get("name")}
    if not names:
        return None
    if gpu.height:
        used = gpu["device"].drop_nulls().mode().sort().to_list()
        if used and used[0] in names:
            return names[used[0]]
    return next(iter(names.values()))


def export_command(report: str, out: str | None = None) -> str:
    out = out or (report.rsplit(".", 1)[0] + ".sqlite")
    return f"nsys export --type sqlite --force-overwrite true -o {out} {report}"


def parse_report(data: bytes, name: str) -> Parsed:
    """A .nsys-rep: exported with `nsys export --type sqlite` when nsys is on PATH, else an
    ArtifactError that gives the command to run."""
    nsys = shutil.which("nsys")
    base = Path(name).name
    if not nsys:
        raise ArtifactError(
            name,
            "an Nsight Systems report must be exported to SQLite first (nsys is not on PATH "
            f"here): run `{export_command(base)}` and ingest the .sqlite file",
        )
    with tempfile.TemporaryDirectory(prefix="ks-nsys-") as tmp:
        rep = os.path.join(tmp, "report.nsys-rep")
        out = os.path.join(tmp, "report.sqlite")
        Path(rep).write_bytes(data)
        try:
            r = subprocess.run(
                [nsys, "export", "--type", "sqlite", "--force-overwrite", "true", "-o", out, rep],
                capture_output=True,
                text=True,
                timeout=600,
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            raise ArtifactError(
                name, f"nsys export failed ({e}); run `{export_command(base)}` yourself"
            ) from None
        if r.returncode != 0 or not os.path.exists(out):
            tail = (r.stderr or r.stdout or "").strip().splitlines()[-1:] or [""]
            raise ArtifactError(
                name,
                f"nsys export failed (exit {r.returncode}: {tail[0]}); "
                f"run `{export_command(base)}` yourself",
            )
        parsed = parse_file(out, name)
    parsed.meta["exported_from"] = "nsys-rep"
    return parsed
