"""Checks after parsing: what no real profiler writes is refused before it reaches the store.

    validate(parsed, name)   raises ArtifactError naming the first problem (the table, the row, the value); returns
                             the Parsed otherwise

More: docs/architecture.md, *collectors.validate*.
"""

from __future__ import annotations

import json
import math

import polars as pl

from collectors.errors import ArtifactError
from collectors.formats import FORMATS, resolve
from collectors.limits import LONG_STRING_COLUMNS, MAX_ROWS, MAX_STRING_CHARS
from collectors.schema import Parsed

TIME_BOUND_NS = 1 << 62
MAX_THREADS_PER_BLOCK = 1024
MAX_BLOCK = {"x": 1024, "y": 1024, "z": 64}
MAX_GRID = {"x": (1 << 31) - 1, "y": 65535, "z": 65535}
MAX_REGISTERS = 255
MAX_SMEM_PER_BLOCK = 256 * 1024
#: upper bounds of a single GPU's measurement per bench unit (far above any GPU: they catch bogus
#: values only)
BENCH_BOUNDS = {
    "B/s": 1e15,
    "FLOP/s": 1e17,
    "s": 1e6,
    "B": 1e15,
    "FLOP": 1e21,
    "count": 1e18,
    "%": 1e6,
}
NONNEGATIVE_UNITS = {"s", "B", "B/s", "FLOP", "FLOP/s", "count", "%"}


def validate(parsed: Parsed, name: str) -> Parsed:
    for tname, df in parsed.tables.items():
        # a table read in part: the whole one's rows
        rows = parsed.partial_rows.get(tname, df.height)
        if rows > MAX_ROWS:
            raise ArtifactError(
                name, f"{tname}: {rows:,} rows, more than the {MAX_ROWS:,} one run may hold"
            )
        # every metric of an ncu report, long form: a non-finite value is kept as text
        if tname == "metrics":
            parsed.tables[tname] = df = _finite_or_text(df, parsed.meta)
        _finite(df, tname, name)
        _strings(df, tname, name)
    fmt = FORMATS.get(parsed.kind)
    if fmt is not None and fmt.check is not None:
        resolve(fmt.check)(parsed, name)
    return parsed


# ---------------------------------------------------------------------------------------------------


def _any_bad(df: pl.DataFrame, bad: list[pl.Expr]) -> bool:
    """Whether any row of df is flagged by any of the expressions (nulls: not flagged), in one
    polars query: the checks below then run one by one only when something is wrong, to name the
    first problem. (A query costs about 0.3-0.6 ms however small the table: the 20-odd checks of a
    timeline took a tenth of a short `analyze`.)"""
    return bool(bad) and bool(
        df.select(pl.any_horizontal([b.fill_null(False).any() for b in bad])).item()
    )


def _out_of(col: str, lo=None, hi=None) -> pl.Expr:
    """The rows _range(df, ..., col, lo, hi) refuses."""
    c, bad = pl.col(col), pl.lit(False)
    if lo is not None:
        bad = bad | (c < lo)
    if hi is not None:
        bad = bad | (c > hi)
    return bad


def _first(df: pl.DataFrame, bad: pl.Expr, label: str = "id") -> dict | None:
    hit = df.filter(bad.fill_null(False))
    return hit.row(0, named=True) if hit.height else None


def _where(row: dict, tname: str) -> str:
    if tname == "kernels" and row.get("id") is not None:
        return f"launch {row['id']}" + (
            f" ({_short(row.get('kernel_name'))})" if row.get("kernel_name") else ""
        )
    if "case" in row:
        return f"{tname} record {row.get('case')}/{row.get('metric')}"
    nm = row.get("name")
    return f"{tname} row" + (f" ({_short(nm)})" if nm else "")


def _short(s, n: int = 60) -> str:
    s = str(s)
    return s if len(s) <= n else s[: n - 1] + "…"


def _finite(df: pl.DataFrame, tname: str, name: str) -> None:
    if not df.height:
        return
    floats = [c for c, t in df.schema.items() if t in (pl.Float64, pl.Float32)]
    if not _any_bad(df, [~pl.col(c).is_finite() for c in floats]):
        return
    for c, t in df.schema.items():
        if t in (pl.Float64, pl.Float32):
            row = _first(df, ~pl.col(c).is_finite())
            if row is not None:
                raise ArtifactError(
                    name, f"{_where(row, tname)}: {c} is {row[c]} (not a finite number)"
                )


def _finite_or_text(df: pl.DataFrame, meta: dict) -> pl.DataFrame:
    """Non-finite values of the long metric table become text, shown as written and used by no
    analysis (ncu itself writes `nan` for an undefined derived metric, e.g. derived_tempMetric4 in
    the bundled H200 export; the raw-CSV reader already turns those of metrics no kernel column
    reads into text, batch by batch). Only the bad values are converted; text stays categorical."""
    value = df["value"]
    idx = (value.is_not_null() & ~value.is_finite()).arg_true()
    if not idx.len():
        return df
    return df.with_columns(
        df["text"].scatter(idx, value.gather(idx).cast(pl.String)), value.scatter(idx, None)
    )


def _strings(df: pl.DataFrame, tname: str, name: str) -> None:
    texts = [c for c, t in df.schema.items() if t == pl.String]
    if not texts or not df.height:
        return
    # the longest value of each column in bytes, from the string views' lengths alone (no more
    # characters than bytes); a column at a time, so one column's lengths exist at once (all of a
    # 1.2 M-kernel table's together were 45 MiB at the peak of reading it)
    for c in texts:
        nbytes = df[c].str.len_bytes().max()
        limit = LONG_STRING_COLUMNS.get((tname, c), MAX_STRING_CHARS)
        if (nbytes or 0) <= limit:
            continue
        longest = df[c].str.len_chars().max()
        if longest is not None and longest > limit:
            raise ArtifactError(
                name, f"{tname}: a {c} of {longest:,} characters (the limit is {limit:,})"
            )


def _range(
    df: pl.DataFrame, tname: str, name: str, col: str, lo=None, hi=None, what: str = ""
) -> None:
    if col not in df.columns or not df.height:
        return
    row = _first(df, _out_of(col, lo, hi))
    if row is not None:
        v = row[col]
        v = int(v) if isinstance(v, float) and v.is_integer() and abs(v) < 1e18 else v
        raise ArtifactError(name, f"{_where(row, tname)}: {col} = {v} {what}".rstrip())


# ---------------------------------------------------------------------------------------------------
# Nsight Compute


def check_ncu(parsed: Parsed, name: str) -> None:
    k = parsed.tables["kernels"]
    if k["id"].null_count():
        raise ArtifactError(name, f"{k['id'].null_count()} launch(es) without a numeric id")
    dup = k.filter(pl.col("id").is_duplicated())
    if dup.height:
        raise ArtifactError(name, f"launch id {dup['id'][0]} appears {dup.height} times")
    for col in k.columns:
        if k.schema[col] in (pl.Float64, pl.Int64) and col not in (
            "id",
            "process_id",
            "context",
            "stream",
            "device",
        ):
            _range(
                k,
                "kernels",
                name,
                col,
                lo=0,
                what="(negative: no counter or launch parameter can be)",
            )
    for col in (c for c in k.columns if c.endswith("_pct")):
        if "occupancy" in col:
            _range(k, "kernels", name, col, hi=101.0, what="% (occupancy above 100 %)")
        # ncu's hit rates and throughputs may pass 100 % by a little (101.24 % on the H200)
        else:
            _range(k, "kernels", name, col, hi=200.0, what="% (far above 100 %)")
    for ax in "xyz":
        _range(
            k,
            "kernels",
            name,
            f"block_{ax}",
            1,
            MAX_BLOCK[ax],
            f"(CUDA allows 1..{MAX_BLOCK[ax]:,})",
        )
        _range(
            k, "kernels", name, f"grid_{ax}", 1, MAX_GRID[ax], f"(CUDA allows 1..{MAX_GRID[ax]:,})"
        )
    _range(
        k,
        "kernels",
        name,
        "block_size",
        1,
        MAX_THREADS_PER_BLOCK,
        "threads (CUDA allows 1..1,024 per block)",
    )
    threads = pl.col("block_x") * pl.col("block_y") * pl.col("block_z")
    row = _first(k, threads > MAX_THREADS_PER_BLOCK)
    if row is not None:
        raise ArtifactError(
            name,
            f"{_where(row, 'kernels')}: block {row['block_x']}×{row['block_y']}×{row['block_z']} "
            "has more than 1,024 threads",
        )
    row = _first(
        k,
        pl.col("block_size").is_not_null()
        & threads.is_not_null()
        & (pl.col("block_size") != threads),
    )
    if row is not None:
        raise ArtifactError(
            name,
            f"{_where(row, 'kernels')}: launch__block_size {row['block_size']:g} is not the block "
            f"dimensions' product {row['block_x']}×{row['block_y']}×{row['block_z']}",
        )
    grid = pl.col("grid_x").cast(pl.Float64) * pl.col("grid_y") * pl.col("grid_z")
    row = _first(
        k, pl.col("grid_size").is_not_null() & grid.is_not_null() & (pl.col("grid_size") != grid)
    )
    if row is not None:
        raise ArtifactError(
            name,
            f"{_where(row, 'kernels')}: launch__grid_size {row['grid_size']:g} is not the grid "
            f"dimensions' product {row['grid_x']}×{row['grid_y']}×{row['grid_z']}",
        )
    _range(
        k, "kernels", name, "registers_per_thread", 0, MAX_REGISTERS, "(CUDA allows at most 255)"
    )
    attrs = parsed.meta.get("device_attributes") or {}
    limit = attrs.get("max_shared_memory_per_block_optin")
    limit = (
        limit
        if isinstance(limit, (int, float)) and 0 < limit <= MAX_SMEM_PER_BLOCK
        else MAX_SMEM_PER_BLOCK
    )
    smem = pl.sum_horizontal(
        pl.col("smem_static_bytes").fill_null(0), pl.col("smem_dynamic_bytes").fill_null(0)
    )
    row = _first(k, smem > limit)
    if row is not None:
        raise ArtifactError(
            name,
            f"{_where(row, 'kernels')}: "
            f"{(row['smem_static_bytes'] or 0) + (row['smem_dynamic_bytes'] or 0):,.0f} bytes of "
            f"shared memory per block, above the device's {limit:,.0f}",
        )
    _range(
        k,
        "kernels",
        name,
        "smem_config_bytes",
        hi=MAX_SMEM_PER_BLOCK + 4096,
        what="bytes of shared-memory configuration (no GPU has more than 256 KiB per SM)",
    )
    _range(
        k, "kernels", name, "duration_ns", hi=float(TIME_BOUND_NS), what="ns (beyond any real run)"
    )
    m = parsed.tables.get("metrics")
    if m is not None and m.height:
        if m["id"].null_count():
            raise ArtifactError(name, "a metric row without a launch id")


# ---------------------------------------------------------------------------------------------------
# Timelines (Kineto, nsys)

_TIME_COLUMNS = {
    "gpu_ops": ("start_ns", "end_ns", "device", "rank", "stream", "kind", "name"),
    "api_calls": ("start_ns", "end_ns", "rank"),
}  # a null refused (check_timeline)
_GPU_RANGES = [
    ("device", 0, 1 << 20, "(not a device ordinal)"),
    *[
        (f"{dim}_{ax}", 0, most[ax], f"(CUDA allows 1..{most[ax]:,})")
        for ax in "xyz"
        for dim, most in (("block", MAX_BLOCK), ("grid", MAX_GRID))
    ],
    ("registers_per_thread", 0, MAX_REGISTERS, "(CUDA allows at most 255)"),
    ("shared_memory_bytes", 0, MAX_SMEM_PER_BLOCK, "bytes per block (above any GPU)"),
    ("bytes", 0, None, "(a negative size)"),
]


def _timeline_sound(parsed: Parsed) -> bool:
    """True when check_timeline's checks all pass (one query per table); False when one of them may not."""
    g, a = parsed.tables.get("gpu_ops"), parsed.tables.get("api_calls")
    if a is not None and a.height and g is None:
        return False
    for tname in ("gpu_ops", "api_calls", "cpu_ops", "nvtx"):
        df = parsed.tables.get(tname)
        if df is None or not df.height:
            continue
        cols = set(df.columns)
        if not {"start_ns", "end_ns", *_TIME_COLUMNS.get(tname, ())} <= cols:
            return False  # check_timeline says which is missing
        bad = [
            _out_of(c, -TIME_BOUND_NS, TIME_BOUND_NS) for c in ("start_ns", "end_ns") if c in cols
        ]
        bad.append(pl.col("end_ns") < pl.col("start_ns"))
        if "duration_ns" in cols:
            bad.append(_out_of("duration_ns", lo=0))
        bad += [pl.col(c).is_null() for c in _TIME_COLUMNS.get(tname, ())]
        if tname == "gpu_ops" and a is not None and a.height:
            bad += [_out_of(c, lo, hi) for c, lo, hi, _ in _GPU_RANGES if c in cols]
        if _any_bad(df, bad):
            return False
    return True


def _dedupe_gpu_ops(parsed: Parsed) -> None:
    """Remove GPU op records that appear more than once (same rank, device, stream, times and
    correlation id: one stream cannot run two ops at once, so the second is the same op written
    twice), with a warning in the run's metadata. The ops come sorted by (rank, device, stream,
    start) from the launch join, so a repeat is next to its original: one comparison with the
    previous row, no hashing of a million rows."""
    g = parsed.tables.get("gpu_ops")
    if g is None or g.height < 2:
        return
    # integer columns only: one stream cannot hold two ops with the same times, so these make the
    # same record
    key = [
        c
        for c in ("rank", "device", "stream", "start_ns", "end_ns", "correlation")
        if c in g.columns
    ]
    same = pl.all_horizontal(
        [pl.col(c).eq_missing(pl.col(c).shift(1)).fill_null(False) for c in key]
    ) & (pl.int_range(pl.len()) > 0)
    dup = g.select(same.alias("d"))["d"]
    n = int(dup.sum())
    if not n:
        return
    parsed.tables["gpu_ops"] = g.filter(~dup)
    meta = parsed.meta
    meta.setdefault("warnings", []).append(
        f"{n:,} GPU op records appeared more than once (the same stream, times, name and "
        "correlation id) and are counted once"
    )
    from collectors.launches import op_counts

    k, kl, mc, ms = op_counts(parsed.tables["gpu_ops"])
    if isinstance(meta.get("counts"), dict):
        meta["counts"].update(
            gpu_ops=parsed.tables["gpu_ops"].height,
            kernels=k,
            kernels_with_launch=kl,
            memcpy=mc,
            memset=ms,
        )
    if "item_count" in meta:
        meta["item_count"] = k


def check_timeline(parsed: Parsed, name: str) -> None:
    _dedupe_gpu_ops(parsed)
    if _timeline_sound(parsed):
        return
    for tname in ("gpu_ops", "api_calls", "cpu_ops", "nvtx"):
        df = parsed.tables.get(tname)
        if df is None or not df.height:
            continue
        for col in ("start_ns", "end_ns"):
            if col in df.columns:
                _range(
                    df,
                    tname,
                    name,
                    col,
                    -TIME_BOUND_NS,
                    TIME_BOUND_NS,
                    "ns (beyond any real clock)",
                )
        row = _first(df, pl.col("end_ns") < pl.col("start_ns"))
        if row is not None:
            raise ArtifactError(
                name,
                f"{_where(row, tname)} ends before it starts ({row['start_ns']} → {row['end_ns']} "
                "ns)",
            )
        if "duration_ns" in df.columns:
            _range(df, tname, name, "duration_ns", lo=0, what="ns (a negative duration)")
    g = parsed.tables.get("gpu_ops")
    if g is not None and g.height:
        for col, what in (
            ("start_ns", "a start time"),
            ("end_ns", "an end time"),
            ("device", "a device id"),
            ("rank", "a process (rank)"),
            ("stream", "a stream"),
            ("kind", "a kind"),
            ("name", "a name"),
        ):
            n = g[col].null_count()
            if n:
                raise ArtifactError(
                    name,
                    f"{n:,} GPU op(s) without {what} (a trace this reader cannot place on a GPU's "
                    "timeline)",
                )
    a = parsed.tables.get("api_calls")
    if a is not None and a.height:
        for col, what in (
            ("start_ns", "a start time"),
            ("end_ns", "an end time"),
            ("rank", "a process (rank)"),
        ):
            n = a[col].null_count()
            if n:
                raise ArtifactError(name, f"{n:,} API call(s) without {what}")
        for col, lo, hi, what in _GPU_RANGES:
            _range(g, "gpu_ops", name, col, lo, hi, what)


# ---------------------------------------------------------------------------------------------------
# Bench results

#: a bench result's parameters: every number finite and not negative, none above PARAM_MAX; these
#: keys have the CUDA limits of every architecture (a block's threads, registers, shared memory) or
#: a percentage's
PARAM_MAX = 1e18
PARAM_LIMITS = {
    "regs_per_thread": 255,
    "block_size": 1024,
    "block_threads": 1024,
    "blocks_per_sm": 2048,
    "warps_per_sm": 64,
    "smem_static_bytes": 256 * 1024,
    "smem_dynamic_bytes": 256 * 1024,
    "occupancy_pct": 101,
    "width_bytes": 1024,
}
BYTES_MAX = 1e15


def _param_problem(key: str, v) -> str | None:
    """What is wrong with one parameter value (None: nothing). Nested objects are checked value by value."""
    if isinstance(v, dict):
        for k, x in v.items():
            p = _param_problem(f"{key}.{k}", x)
            if p:
                return p
        return None
    if isinstance(v, list):
        for x in v:
            p = _param_problem(key, x)
            if p:
                return p
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    if not math.isfinite(v):
        return f"parameter {key} = {v} is not a finite number"
    if v < 0:
        return f"parameter {key} = {v:g} is negative (a size, count or setting of a measurement cannot be)"
    leaf = key.rsplit(".", 1)[-1]
    hi = PARAM_LIMITS.get(
        leaf, BYTES_MAX if leaf == "bytes" or leaf.endswith("_bytes") else PARAM_MAX
    )
    if v > hi:
        return f"parameter {key} = {v:g} is above {hi:g}, out of range for any GPU"
    return None


def _bench_params(df: pl.DataFrame, tname: str, name: str) -> None:
    if "params" not in df.columns:
        return
    for text in df["params"].drop_nulls().unique().to_list():
        try:
            params = json.loads(text)
        except (ValueError, RecursionError):
            raise ArtifactError(
                name, f"{tname}: a result's parameters are not a JSON object ({text[:60]!r})"
            ) from None
        if not isinstance(params, dict):
            raise ArtifactError(
                name, f"{tname}: a result's parameters are not an object ({text[:60]!r})"
            )
        for k, v in params.items():
            p = _param_problem(k, v)
            if p:
                row = _first(df, pl.col("params") == text)
                raise ArtifactError(name, f"{_where(row, tname)}: {p}")


def check_bench(parsed: Parsed, name: str) -> None:
    for tname in ("results", "ceilings"):
        df = parsed.tables.get(tname)
        if df is None or not df.height:
            continue
        _bench_params(df, tname, name)
        unit = pl.col("unit")
        row = _first(df, unit.is_in(list(NONNEGATIVE_UNITS)) & (pl.col("value") < 0))
        if row is not None:
            raise ArtifactError(
                name,
                f"{_where(row, tname)}: {row['value']:g} {row['unit']} (a measurement of this unit "
                "cannot be negative)",
            )
        for u, hi in BENCH_BOUNDS.items():
            row = _first(df, (unit == u) & (pl.col("value") > hi))
            if row is not None:
                raise ArtifactError(
                    name,
                    f"{_where(row, tname)}: {row['value']:g} {u} is beyond what any single GPU can "
                    "measure",
                )
        row = _first(
            df, (unit == "%") & pl.col("metric").str.contains("occupancy") & (pl.col("value") > 101)
        )
        if row is not None:
            raise ArtifactError(
                name, f"{_where(row, tname)}: {row['value']:g} % occupancy (above 100 %)"
            )
        if tname == "ceilings":
            row = _first(df, unit.is_in(["B/s", "FLOP/s", "s"]) & (pl.col("value") <= 0))
            if row is not None:
                raise ArtifactError(
                    name, f"{_where(row, tname)}: a ceiling of {row['value']:g} {row['unit']}"
                )
