"""The run index: every stored run's metadata, per-kernel summaries and measured ceilings in a few
Parquet files, so cross-run questions (`kernelscope runs`, `kernelscope query`, the History page)
never open every run.

More: docs/architecture.md, *collectors.index*.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from collectors.schema import ITEM_LABELS, TABLE_VERSIONS

INDEX_VERSION = 1
#: segments that trigger a compaction (KERNELSCOPE_INDEX_COMPACT_AT overrides it)
COMPACT_AT = int(os.environ.get("KERNELSCOPE_INDEX_COMPACT_AT", "16"))
TABLES = ("runs", "kernels", "ceilings")
RUN_SCHEMA = pl.Schema(
    {
        "run_id": pl.String,
        "kind": pl.String,
        "source_name": pl.String,
        "size_bytes": pl.Int64,
        "created": pl.Float64,
        "gpu_name": pl.String,
        "gpu_uuid": pl.String,
        "host": pl.String,
        "item_count": pl.Int64,
        "item_label": pl.String,
        "warnings": pl.List(pl.String),
        "rank_count": pl.Int64,
        "partial": pl.Boolean,
        "table_version": pl.Int64,
        "indexed_at": pl.Int64,
    }
)
_RUN_COLS = ("run_id", "kind", "source_name", "gpu_name", "gpu_uuid", "created")
KERNEL_ROW_SCHEMA = pl.Schema(
    {
        "run_id": pl.String,
        "kind": pl.String,
        "source_name": pl.String,
        "gpu_name": pl.String,
        "gpu_uuid": pl.String,
        "created": pl.Float64,
        "name": pl.String,
        "config": pl.String,
        "n": pl.Int64,
        "total_ns": pl.Float64,
        "median_ns": pl.Float64,
        "mean_ns": pl.Float64,
        "std_ns": pl.Float64,
        "min_ns": pl.Float64,
        "max_ns": pl.Float64,
        "indexed_at": pl.Int64,
    }
)
CEILING_ROW_SCHEMA = pl.Schema(
    {
        "run_id": pl.String,
        "kind": pl.String,
        "source_name": pl.String,
        "gpu_name": pl.String,
        "gpu_uuid": pl.String,
        "created": pl.Float64,
        "metric": pl.String,
        "value": pl.Float64,
        "unit": pl.String,
        "cv": pl.Float64,
        "source": pl.String,
        "params": pl.String,
        "indexed_at": pl.Int64,
    }
)
SCHEMAS = {"runs": RUN_SCHEMA, "kernels": KERNEL_ROW_SCHEMA, "ceilings": CEILING_ROW_SCHEMA}


def index_dir(root: Path) -> Path:
    return Path(root) / "index"


# --------------------------------------------------------------------------------------------------
# What one run contributes
# --------------------------------------------------------------------------------------------------
def _config(lf: pl.LazyFrame, cols: list[str]) -> pl.Expr:
    return (
        pl.when(pl.col("grid_x").is_not_null())
        .then(pl.format("grid ({},{},{}) block ({},{},{})", *cols))
        .otherwise(pl.lit("—"))
    )


def _kernel_stats(lf: pl.LazyFrame, name_col: str) -> pl.LazyFrame:
    cfg = ["grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z"]
    d = pl.col("duration_ns").cast(pl.Float64)
    return (
        lf.select(
            pl.col(name_col).cast(pl.String).alias("name"),
            _config(lf, cfg).alias("config"),
            pl.col("duration_ns"),
        )
        .filter(pl.col("duration_ns").is_not_null())
        .group_by("name", "config")
        .agg(
            pl.len().cast(pl.Int64).alias("n"),
            d.sum().alias("total_ns"),
            d.median().alias("median_ns"),
            d.mean().alias("mean_ns"),
            d.std(ddof=0).fill_null(0.0).alias("std_ns"),
            d.min().alias("min_ns"),
            d.max().alias("max_ns"),
        )
    )


def index_rows(run) -> dict[str, pl.DataFrame]:
    """The index rows of one stored run (collectors.store.Run): {"runs", "kernels", "ceilings"}."""
    m, meta = run.manifest, run.meta
    now = time.time_ns()
    gpu = meta.get("gpu") if isinstance(meta.get("gpu"), dict) else {}
    row = {
        "run_id": m["run_id"],
        "kind": m["kind"],
        "source_name": m["source_name"],
        "size_bytes": int(m.get("size_bytes") or 0),
        "created": float(m.get("created") or 0),
        "gpu_name": meta.get("gpu_name"),
        "gpu_uuid": meta.get("gpu_uuid"),
        "host": gpu.get("host"),
        "item_count": meta.get("item_count"),
        "item_label": ITEM_LABELS.get(m["kind"], "items"),
        "warnings": [str(w) for w in meta.get("warnings") or []],
        "rank_count": len(meta.get("ranks") or []) or None,
        "partial": meta.get("partial"),
        "table_version": TABLE_VERSIONS.get(m["kind"]),
        "indexed_at": now,
    }
    runs = pl.DataFrame([row], schema=RUN_SCHEMA)
    ident = [pl.lit(row[c], RUN_SCHEMA[c]).alias(c) for c in _RUN_COLS]
    tables = set(run.tables)
    if m["kind"] == "ncu" and "kernels" in tables:
        k = _kernel_stats(run.scan("kernels"), "kernel_name")
    elif "gpu_ops" in tables:
        k = _kernel_stats(run.scan("gpu_ops").filter(pl.col("kind") == "kernel"), "name")
    else:
        k = None
    kernels = (
        k.with_columns(*ident, pl.lit(now, pl.Int64).alias("indexed_at"))
        .select(list(KERNEL_ROW_SCHEMA))
        .collect()
        .cast(dict(KERNEL_ROW_SCHEMA))
        if k is not None
        else pl.DataFrame(schema=KERNEL_ROW_SCHEMA)
    )
    if m["kind"] == "bench" and "ceilings" in tables:
        c = run.table("ceilings")
        ceilings = (
            c.select(
                "metric",
                pl.col("value").cast(pl.Float64),
                "unit",
                pl.col("cv").cast(pl.Float64),
                "source",
                "params",
            )
            .with_columns(*ident, pl.lit(now, pl.Int64).alias("indexed_at"))
            .select(list(CEILING_ROW_SCHEMA))
            .cast(dict(CEILING_ROW_SCHEMA))
        )
    else:
        ceilings = pl.DataFrame(schema=CEILING_ROW_SCHEMA)
    return {"runs": runs, "kernels": kernels.sort("name", "config"), "ceilings": ceilings}


# --------------------------------------------------------------------------------------------------
# Writing: segments (one per ingest) and compaction into a base
# --------------------------------------------------------------------------------------------------
def _write_folder(parent: Path, name: str, frames: dict[str, pl.DataFrame]) -> Path:
    """Write the frames into parent/name atomically (a temporary folder renamed into place)."""
    parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=parent))
    try:
        for t in TABLES:
            frames[t].write_parquet(tmp / f"{t}.parquet", statistics=True)
        os.rename(tmp, parent / name)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return parent / name


def _listing(d: Path) -> list[Path]:
    try:
        return sorted(
            p for p in (Path(e.path) for e in os.scandir(d)) if not p.name.startswith(".")
        )
    except FileNotFoundError:
        return []


def _segments(root: Path) -> list[Path]:
    return _listing(index_dir(root) / "segments")


def _parts(root: Path) -> list[Path]:
    return _listing(index_dir(root) / "parts")


def add_runs(root: Path, runs: list) -> None:
    """Index stored runs as one new segment, then compact if the segments have piled up."""
    if not runs:
        return
    rows = [index_rows(r) for r in runs]
    frames = {t: pl.concat([x[t] for x in rows]) for t in TABLES}
    name = f"{rows[0]['runs']['run_id'][0]}-{time.time_ns()}-{os.getpid()}"
    _write_folder(index_dir(root) / "segments", name, frames)
    if len(_segments(root)) > COMPACT_AT:
        compact(root, wait=False)


class _Lock:
    """An exclusive flock on index/.lock (blocking or not)."""

    def __init__(self, root: Path, wait: bool):
        self.path = index_dir(root) / ".lock"
        self.wait = wait
        self.fd = None

    def __enter__(self) -> bool:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | (0 if self.wait else fcntl.LOCK_NB))
            return True
        except BlockingIOError:
            return False

    def __exit__(self, *exc) -> None:
        if self.fd is not None:
            os.close(self.fd)  # releases the lock


def _current(root: Path) -> tuple[Path | None, int | None]:
    try:
        name, version = (index_dir(root) / "CURRENT").read_text().split()
        return index_dir(root) / name, int(version)
    except (FileNotFoundError, ValueError):
        return None, None


def _set_current(root: Path, base: Path) -> None:
    tmp = index_dir(root) / f".CURRENT-{os.getpid()}-{time.time_ns()}"
    tmp.write_text(f"{base.name} {INDEX_VERSION}\n")
    os.replace(tmp, index_dir(root) / "CURRENT")


def _new_base(root: Path, frames: dict[str, pl.DataFrame]) -> Path:
    cur, _ = _current(root)
    gen = int(cur.name.split("-")[1]) + 1 if cur is not None else 1
    base = _write_folder(index_dir(root), f"base-{gen:06d}", frames)
    _set_current(root, base)
    # keep the previous base for readers still on it
    for old in index_dir(root).glob("base-*"):
        if old not in (base, cur):
            shutil.rmtree(old, ignore_errors=True)
    return base


def compact(root: Path, *, wait: bool = True, keep=None, full: bool = False) -> bool:
    """Merge the segments into one part; when the parts have piled up too (or full, or keep), merge
    the base, the parts and the segments into a new base: each run's newest row, only the run ids
    `keep(run_ids)` returns when given. An ingest so rewrites the whole base once per COMPACT_AT²
    runs. False when another process is compacting and wait is False."""
    with _Lock(root, wait) as got:
        if not got:
            return False
        segs = _segments(root)
        parts = _parts(root)
        if full or keep is not None or len(parts) >= COMPACT_AT:
            frames = _read_files(root, parts + segs, with_base=True)
            if keep is not None:
                alive = keep(frames["runs"]["run_id"].to_list())
                frames = {
                    t: f.filter(pl.col("run_id").is_in(list(alive))) for t, f in frames.items()
                }
            _new_base(root, frames)
            gone = parts + segs
        elif segs:
            _write_folder(
                index_dir(root) / "parts",
                f"{time.time_ns()}-{os.getpid()}",
                _read_files(root, segs, with_base=False),
            )
            gone = segs
        else:
            return True
        for d in gone:
            shutil.rmtree(d, ignore_errors=True)
    return True


def rebuild(root: Path, runs: list) -> int:
    """Index every run afresh into a new base (under the lock; concurrent ingests add segments meanwhile)."""
    with _Lock(root, True):
        gone = _parts(root) + _segments(root)
        rows = [index_rows(r) for r in runs]
        frames = (
            {t: pl.concat([x[t] for x in rows]) for t in TABLES}
            if rows
            else {t: pl.DataFrame(schema=s) for t, s in SCHEMAS.items()}
        )
        _new_base(root, frames)
        for d in gone:
            shutil.rmtree(d, ignore_errors=True)
    return len(rows)


# --------------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------------
def _dirs(root: Path, extra: list[Path] | None = None, *, with_base: bool = True) -> list[Path]:
    base, version = _current(root)
    head = [base] if with_base and base is not None and version == INDEX_VERSION else []
    return head + (_parts(root) + _segments(root) if extra is None else extra)


def _scan(dirs: list[Path], table: str) -> pl.LazyFrame:
    """One table over the folders, each row with the folder it came from (_dir)."""
    schema = SCHEMAS[table]
    if not dirs:
        return pl.LazyFrame(schema=schema | {"_dir": pl.String})
    return pl.scan_parquet(
        [d / f"{table}.parquet" for d in dirs], schema=schema, include_file_paths="_dir"
    ).with_columns(pl.col("_dir").str.replace(r"/[^/]+$", ""))


def _dedupe(frames: dict[str, pl.LazyFrame]) -> dict[str, pl.LazyFrame]:
    """Each run's newest row, from one folder only (a reader that lists a folder a compaction is
    about to delete sees the same run twice: once is kept), and that folder's kernel and ceiling
    rows."""
    runs = frames["runs"].sort("indexed_at", "_dir").unique("run_id", keep="last")
    keys = runs.select("run_id", "_dir")
    return {
        "runs": runs.drop("_dir"),
        **{
            t: frames[t].join(keys, on=["run_id", "_dir"], how="semi").drop("_dir")
            for t in ("kernels", "ceilings")
        },
    }


def _read_files(root: Path, dirs: list[Path], *, with_base: bool) -> dict[str, pl.DataFrame]:
    d = _dirs(root, dirs, with_base=with_base)
    lazy = _dedupe({t: _scan(d, t) for t in TABLES})
    return {t: lazy[t].collect() for t in TABLES}


@dataclass
class Index:
    """The index of a store, as lazy frames (newest row per run); collect through `Index.collect`."""

    root: Path
    runs: pl.LazyFrame
    kernels: pl.LazyFrame
    ceilings: pl.LazyFrame
    version: int | None


def open_index(root: Path) -> Index:
    d = _dirs(root)
    lazy = _dedupe({t: _scan(d, t) for t in TABLES})
    return Index(Path(root), lazy["runs"], lazy["kernels"], lazy["ceilings"], _current(root)[1])


def memory_index(root: Path, runs: list) -> Index:
    """The index of runs built in memory (a store that cannot be written)."""
    rows = [index_rows(r) for r in runs]
    frames = {
        t: (pl.concat([x[t] for x in rows]) if rows else pl.DataFrame(schema=SCHEMAS[t])).lazy()
        for t in TABLES
    }
    return Index(Path(root), frames["runs"], frames["kernels"], frames["ceilings"], None)


def collect(root: Path, query, attempts: int = 4):
    """query(Index) -> anything collected; read again when a compaction removed a file under the reader."""
    for i in range(attempts):
        try:
            return query(open_index(root))
        except (FileNotFoundError, pl.exceptions.ComputeError) as e:
            if i == attempts - 1 or (
                isinstance(e, pl.exceptions.ComputeError) and "No such file" not in str(e)
            ):
                raise
            time.sleep(0.05 * (i + 1))


def indexed(root: Path) -> tuple[set[str], set[str]]:
    """(every indexed run id, those indexed with another table version than today's)."""
    df = collect(
        root,
        lambda ix: ix.runs.select(
            "run_id",
            (
                pl.col("table_version")
                != pl.col("kind").replace_strict(
                    dict(TABLE_VERSIONS), default=None, return_dtype=pl.Int64
                )
            )
            .fill_null(True)
            .alias("stale"),
        ).collect(),
    )
    return set(df["run_id"].to_list()), set(df.filter(pl.col("stale"))["run_id"].to_list())


def stats(root: Path) -> dict:
    base, version = _current(root)
    return {
        "base": base.name if base else None,
        "version": version,
        "parts": len(_parts(root)),
        "segments": len(_segments(root)),
    }
