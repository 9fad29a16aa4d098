"""One rank of a distributed job reduced to a small summary: iterations, their time breakdown,
collectives.

`rank_summary(gpu_ops, nvtx, rank=r)` runs where the rank's trace is parsed (a worker process or a
Ray task) and returns a `RankSummary` of a few small frames; `analyzers.stragglers.combine` puts the
summaries of all ranks together (stragglers, iteration-time distribution, collectives across ranks).
Nothing here needs another rank.

More: docs/architecture.md, *analyzers.distributed*.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass, field

import polars as pl

from analyzers.steps import STEP_PATTERNS, check_step_pattern, primary_device  # noqa: F401
from analyzers.timeline import COMM_PATTERN, TimelineSummary, kernel_summary, summarize

WHOLE_TRACE_STEP = -1
COMPONENTS = ("compute_ns", "exposed_comm_ns", "memcpy_ns", "host_wait_ns", "idle_ns")
CAUSES = {
    "compute_ns": "compute",
    "exposed_comm_ns": "exposed communication",
    "memcpy_ns": "memcpy",
    "host_wait_ns": "host/launch",
    "idle_ns": "idle",
}
STEP_COLUMNS = (
    "rank",
    "step",
    "name",
    "start_ns",
    "end_ns",
    "step_ns",
    "compute_ns",
    "comm_ns",
    "exposed_comm_ns",
    "overlapped_comm_ns",
    "memcpy_ns",
    "host_wait_ns",
    "idle_ns",
    "own_ns",
    "kernel_count",
    "comm_kernel_count",
)
STEP_SCHEMA = pl.Schema({c: (pl.String if c == "name" else pl.Int64) for c in STEP_COLUMNS})
EVENT_SCHEMA = pl.Schema(
    {
        "rank": pl.Int64,
        "step": pl.Int64,
        "kind": pl.String,
        "occurrence": pl.Int64,
        "start_ns": pl.Int64,
        "duration_ns": pl.Int64,
    }
)
COLLECTIVE_SCHEMA = pl.Schema(
    {
        "rank": pl.Int64,
        "kind": pl.String,
        "size_bucket_bytes": pl.Int64,
        "size_min_bytes": pl.Int64,
        "size_max_bytes": pl.Int64,
        "count": pl.Int64,
        "total_ns": pl.Int64,
        "exposed_ns": pl.Int64,
        "overlapped_ns": pl.Int64,
        "median_ns": pl.Float64,
        "bytes_total": pl.Int64,
        "sized_count": pl.Int64,
    }
)

#: bytes per element of the dtypes PyTorch writes in a collective's 'dtype' arg
DTYPE_BYTES = {
    "float": 4,
    "float32": 4,
    "double": 8,
    "float64": 8,
    "half": 2,
    "float16": 2,
    "bfloat16": 2,
    "long": 8,
    "int64": 8,
    "int": 4,
    "int32": 4,
    "short": 2,
    "int16": 2,
    "char": 1,
    "int8": 1,
    "byte": 1,
    "uint8": 1,
    "bool": 1,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "float8_e4m3fnuz": 1,
    "float8_e5m2fnuz": 1,
    "complexfloat": 8,
    "complexdouble": 16,
    "uint16": 2,
    "uint32": 4,
    "uint64": 8,
}
_KERNEL_KIND = re.compile(r"(?i)nccl(?:Dev)?Kernel_([A-Za-z]+)")
_KINDS = (
    ("allreduce", "all_reduce"),
    ("allgather", "all_gather"),
    ("reducescatter", "reduce_scatter"),
    ("alltoall", "all_to_all"),
    ("sendrecv", "send_recv"),
    ("broadcast", "broadcast"),
    ("reduce", "reduce"),
    ("send", "send"),
    ("recv", "recv"),
    ("gather", "gather"),
    ("scatter", "scatter"),
    ("barrier", "barrier"),
)
# open ends of the first and last gap (int64 sums stay exact)
_LO, _HI = -(1 << 61), 1 << 61


def collective_kind(collective: str | None, kernel_name: str) -> str:
    """The canonical kind of a collective: from the profiler's 'Collective name' when recorded
    (allreduce, _allgather_base, reduce_scatter_tensor_coalesced ... -> all_reduce, all_gather,
    reduce_scatter), else from the NCCL kernel's name (ncclKernel_AllReduce_RING_LL_Sum_float ->
    all_reduce, ncclDevKernel_SendRecv -> send_recv); "nccl (other)" when neither says."""
    for text in (collective, (_KERNEL_KIND.search(kernel_name or "") or [None, None])[1]):
        if not text:
            continue
        s = re.sub(r"[^a-z]", "", text.lower())
        for key, kind in _KINDS:
            if s.startswith(key):
                return kind
    return "nccl (other)"


def size_bucket(nbytes: int | None) -> int | None:
    """The power of two at or above a message size (0 for an empty message); None when the size is unknown."""
    if nbytes is None:
        return None
    return 0 if nbytes <= 0 else 1 << int(nbytes - 1).bit_length()


# --------------------------------------------------------------------------------------------------
# Interval arithmetic on sorted, disjoint unions (Int64 Series, ns)
# --------------------------------------------------------------------------------------------------
#: up to this many intervals or windows, the arithmetic runs on Python lists: a polars call costs
#: 10-150 µs, more than the whole computation on a few thousand values. Above it, polars. Both give
#: the same integers (tests/analyzers/test_stragglers_stats.py checks both against the numpy code
#: they replaced).
SMALL = 4096
_EMPTY = pl.Series(dtype=pl.Int64)


def _ints(x) -> pl.Series:
    """x (a Series, a sequence of integers or one integer) as an Int64 Series."""
    if isinstance(x, pl.Series):
        return x.cast(pl.Int64)
    return pl.Series([x] if isinstance(x, int) else [int(v) for v in x], dtype=pl.Int64)


def merge(starts: pl.Series, ends: pl.Series) -> tuple[pl.Series, pl.Series]:
    """The union of [start, end) intervals as sorted disjoint (S, E): the intervals in start order
    (ties in their given order), a new run wherever a start lies after the running maximum of the
    ends before it."""
    n = len(starts)
    if n == 0:
        return _EMPTY, _EMPTY
    if n <= SMALL:
        sl, el = _ints(starts).to_list(), _ints(ends).to_list()
        S, E, run = [], [], None
        for i in sorted(range(n), key=sl.__getitem__):  # a stable sort
            if run is None or sl[i] > run:
                if run is not None:
                    E.append(run)
                S.append(sl[i])
            run = el[i] if run is None else max(run, el[i])
        E.append(run)
        return pl.Series("s", S, dtype=pl.Int64), pl.Series("e", E, dtype=pl.Int64)
    d = pl.DataFrame({"s": _ints(starts), "e": _ints(ends)}).sort("s", maintain_order=True)
    s, m = d["s"], d["e"].cum_max()
    new = (s > m.shift(1)).fill_null(True)
    return s.filter(new), m.filter(new.shift(-1).fill_null(True)).alias("e")


def covered(S: pl.Series, E: pl.Series, a, b) -> pl.Series:
    """|union ∩ [a, b)| for each window (a, b: Series or sequences of equal length), from prefix sums:
    O((n + windows) log n)."""
    return _coverage({"covered": (S, E)}, _ints(a), _ints(b))["covered"]


def _coverage(
    unions: dict[str, tuple[pl.Series, pl.Series]], a: pl.Series, b: pl.Series
) -> dict[str, pl.Series]:
    """`covered` of each union over the same windows [a, b): on lists when both are small, else in one query."""
    out, large = {}, []
    for name, (S, E) in unions.items():
        if len(S) <= SMALL and len(a) <= SMALL:
            out[name] = pl.Series(
                name,
                _covered_lists(S.to_list(), E.to_list(), a.to_list(), b.to_list()),
                dtype=pl.Int64,
            )
        else:
            large.append(_covered(S, E, name))
    if large:
        out.update(pl.DataFrame({"a": a, "b": b}).select(large).to_dict())
    return {name: out[name] for name in unions}


def _covered_lists(S: list[int], E: list[int], a: list[int], b: list[int]) -> list[int]:
    cum = [0]
    for s, e in zip(S, E):
        cum.append(cum[-1] + e - s)

    def upto(t: int) -> int:
        k = bisect_right(S, t)  # intervals starting at or before t
        return cum[k - 1] + min(t, E[k - 1]) - S[k - 1] if k else 0

    return [max(upto(y) - upto(x), 0) for x, y in zip(a, b)]


def _covered(S: pl.Series, E: pl.Series, name: str) -> pl.Expr:
    """`covered` of the union (S, E) as an expression over the window columns a and b."""
    if len(S) == 0:
        return (pl.col("a") * 0).alias(name)
    cum = pl.concat([pl.Series([0], dtype=pl.Int64), (E - S).cum_sum()])

    def upto(t: pl.Expr) -> pl.Expr:
        # intervals starting at or before t
        k = pl.lit(S).search_sorted(t, side="right").cast(pl.Int64)
        j = (k - 1).clip(lower_bound=0)
        return (
            pl.when(k > 0)
            .then(
                pl.lit(cum).gather(j)
                + pl.min_horizontal(t, pl.lit(E).gather(j))
                - pl.lit(S).gather(j)
            )
            .otherwise(0)
        )

    return (upto(pl.col("b")) - upto(pl.col("a"))).clip(lower_bound=0).alias(name)


# --------------------------------------------------------------------------------------------------
# One rank
# --------------------------------------------------------------------------------------------------
@dataclass
class RankSummary:
    """What travels from a rank's worker to the driver (a few kB to a few hundred kB)."""

    rank: int
    source: str
    primary_device: int | None
    # the pattern that found the iterations (None: the whole trace is one)
    step_pattern: str | None
    steps: pl.DataFrame  # STEP_SCHEMA, one row per iteration
    # the same components over the rank's whole GPU window, + overlap fraction
    totals: dict
    collectives: pl.DataFrame  # COLLECTIVE_SCHEMA
    devices: pl.DataFrame  # analyzers.timeline.summarize(...).devices of the rank
    # name, count, total_ns, min_ns, max_ns (the rank's 50 longest by total)
    top_kernels: pl.DataFrame
    # collective instances
    events: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=EVENT_SCHEMA))
    gpu_name: str | None = None
    meta: dict = field(default_factory=dict)  # world size, counts, worker time and peak memory


def find_steps(nvtx: pl.DataFrame, pattern: str | None = None) -> tuple[pl.DataFrame, str | None]:
    """(step, name, start_ns, end_ns) of the iteration ranges and the pattern used. A step annotated
    several times (nested ranges of the same name) spans its outermost range."""
    if pattern:
        check_step_pattern(pattern)
    patterns = (pattern,) if pattern else STEP_PATTERNS
    names = nvtx.select("name", "start_ns", "end_ns").drop_nulls()
    for pat in patterns:
        m = names.with_columns(
            pl.col("name").str.extract(pat, 1).cast(pl.Int64, strict=False).alias("_n")
        ).filter(pl.col("_n").is_not_null())  # a group that is not a number names no step
        if m.height:
            steps = (
                m.rename({"_n": "step"})
                .group_by("step")
                .agg(pl.col("name").first(), pl.col("start_ns").min(), pl.col("end_ns").max())
                .sort("step")
            )
            return steps, pat
    return pl.DataFrame(
        schema={"step": pl.Int64, "name": pl.String, "start_ns": pl.Int64, "end_ns": pl.Int64}
    ), None


def _host_gaps(ops: pl.DataFrame) -> tuple[pl.Series, pl.Series]:
    """Idle gaps of the device (between its merged busy intervals, and before the first / after the
    last op) that the host caused: the op after the gap was launched after the gap began, or no op
    followed."""
    if ops.height == 0:
        return _ints([_LO]), _ints([_HI])
    o = ops.select(
        pl.col("start_ns").cast(pl.Int64).alias("s"),
        pl.col("end_ns").cast(pl.Int64).alias("e"),
        pl.col("api_start_ns").cast(pl.Int64).alias("api"),
    ).sort("s", "api", nulls_last=True)
    if o.height <= SMALL:
        # run: the latest end so far (the gap before op i starts there)
        gs, ge, run = [], [], None
        for s, e, api in o.iter_rows():
            gap_start = _LO if run is None else run
            if (run is None or s > run) and (
                (api if api is not None else _LO) > gap_start or gap_start == _LO
            ):
                gs.append(gap_start)
                ge.append(s)
            run = e if run is None else max(run, e)
        return _ints(gs + [run]), _ints(ge + [_HI])
    s, prev_end, api = o["s"], o["e"].cum_max(), o["api"].fill_null(_LO)
    gap_start = prev_end.shift(1, fill_value=_LO)
    host = (s > prev_end.shift(1)).fill_null(True) & ((api > gap_start) | (gap_start == _LO))
    return (
        pl.concat([gap_start.filter(host), _ints([prev_end[-1]])]),
        pl.concat([s.filter(host), _ints([_HI])]),
    )


def _comm_mask(ops: pl.DataFrame) -> pl.Series:
    """Which ops are collective kernels (one regex pass over the names: about 10 ms for 174,000
    kernels, done once per rank)."""
    return (ops["kind"] == "kernel") & ops["name"].str.contains(COMM_PATTERN)


def _unions(ops: pl.DataFrame, comm: pl.Series) -> dict[str, tuple[pl.Series, pl.Series]]:
    k = ops["kind"] == "kernel"
    s, e = ops["start_ns"].cast(pl.Int64), ops["end_ns"].cast(pl.Int64)
    compute = k & ~comm
    every = merge(s, e)
    # the same ops give the same union: one copy of it (a trace of kernels only and no collective,
    # the usual single-GPU run, has one union where it would have three)
    kernel = every if k.null_count() == 0 and k.all() else merge(s.filter(k), e.filter(k))
    no_comm = comm.null_count() == 0 and not comm.any()
    return {
        "all": every,
        "kernel": kernel,
        "compute": kernel if no_comm else merge(s.filter(compute), e.filter(compute)),
        "comm": merge(s.filter(comm), e.filter(comm)),
        "host": _host_gaps(ops),
    }


def _breakdown(u: dict, a: pl.Series, b: pl.Series) -> dict[str, pl.Series]:
    cov = _coverage({k: u[k] for k in ("all", "kernel", "compute", "comm", "host")}, a, b)
    win = b - a
    idle_total = win - cov["all"]
    host = cov["host"].zip_with(cov["host"] <= idle_total, idle_total)  # the smaller of the two
    exposed = cov["kernel"] - cov["compute"]
    return {
        "step_ns": win,
        "compute_ns": cov["compute"],
        "comm_ns": cov["comm"],
        "exposed_comm_ns": exposed,
        "overlapped_comm_ns": cov["comm"] - exposed,
        "memcpy_ns": cov["all"] - cov["kernel"],
        "host_wait_ns": host,
        "idle_ns": idle_total - host,
        "own_ns": win - exposed,
    }


def _comm_kernels(ops: pl.DataFrame, comm: pl.Series) -> pl.DataFrame:
    """The collective kernels of the ops (comm: _comm_mask), in start order, with their canonical
    kind (named once per distinct collective name and kernel name)."""
    c = ops.filter(comm).sort("start_ns")
    pairs = c.select(
        pl.col("collective").cast(pl.String).fill_null(""),
        pl.col("name").cast(pl.String).fill_null(""),
    )
    uniq = pairs.unique()
    kinds = uniq.with_columns(
        pl.Series("_kind", [collective_kind(x, n) for x, n in uniq.iter_rows()], dtype=pl.String)
    )
    return c.with_columns(
        pairs.join(kinds, on=["collective", "name"], how="left", maintain_order="left")["_kind"]
    )


def _events(c: pl.DataFrame, steps: pl.DataFrame, rank: int) -> pl.DataFrame:
    """Collective instances: each collective kernel that starts inside an iteration, with its
    occurrence number among the iteration's collectives of its kind."""
    if c.height == 0 or steps.height == 0:
        return pl.DataFrame(schema=EVENT_SCHEMA)
    st = steps.sort("start_ns")
    s = c["start_ns"].cast(pl.Int64)
    i = st["start_ns"].cast(pl.Int64).search_sorted(s, side="right").cast(pl.Int64) - 1
    i0 = i.clip(lower_bound=0)
    inside = (i >= 0) & (s < st["end_ns"].cast(pl.Int64).gather(i0))
    ev = pl.DataFrame(
        {
            "step": st["step"].gather(i0).filter(inside),
            "kind": c["_kind"].filter(inside),
            "start_ns": s.filter(inside),
            "duration_ns": c["duration_ns"].filter(inside),
        }
    )
    return (
        ev.with_columns(
            pl.int_range(pl.len()).over("step", "kind").alias("occurrence"),
            pl.lit(rank, pl.Int64).alias("rank"),
        )
        .select(list(EVENT_SCHEMA))
        .cast(dict(EVENT_SCHEMA))
    )


def _collectives(c: pl.DataFrame, u: dict, rank: int) -> pl.DataFrame:
    if c.height == 0:
        return pl.DataFrame(schema=COLLECTIVE_SCHEMA)
    # message size: max(in, out) elements x the dtype's bytes; its bucket computed once per distinct
    # size
    per = (
        pl.col("comm_dtype")
        .cast(pl.String)
        .fill_null("")
        .str.to_lowercase()
        .replace_strict(DTYPE_BYTES, default=None, return_dtype=pl.Int64)
    )
    sizes = c.select(
        (pl.max_horizontal("comm_in_nelems", "comm_out_nelems").cast(pl.Int64) * per).alias(
            "size_bytes"
        )
    )["size_bytes"]
    buckets = {x: size_bucket(x) for x in sizes.unique().drop_nulls().to_list()}
    s, e = c["start_ns"].cast(pl.Int64), c["end_ns"].cast(pl.Int64)
    under = covered(*u["compute"], s, e)
    k = pl.DataFrame(
        {
            "kind": c["_kind"],
            "size_bytes": sizes,
            "size_bucket_bytes": sizes.replace_strict(buckets, default=None, return_dtype=pl.Int64),
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
        .select(list(COLLECTIVE_SCHEMA))
        .cast(dict(COLLECTIVE_SCHEMA))
        .sort("kind", "size_bucket_bytes")
    )


def rank_summary(
    gpu_ops: pl.DataFrame,
    nvtx: pl.DataFrame,
    *,
    rank: int,
    source: str = "",
    step_pattern: str | None = None,
    gpu_name: str | None = None,
    launch_floor_ns: float | None = None,
    meta: dict | None = None,
    summary: TimelineSummary | None = None,
) -> RankSummary:
    """Reduce one rank's tables (already filtered to the rank) to its RankSummary (module
    docstring). `summary`: analyzers.timeline.summarize of the trace the rank belongs to (with the
    same launch floor), when the caller has it: its device rows of this rank are the rank's (they
    are computed per device), and, when it holds this rank only, its kernel summary too; else both
    are computed here."""
    dev = primary_device(gpu_ops)
    ops = gpu_ops.filter(pl.col("device") == dev) if dev is not None else gpu_ops
    comm_mask = _comm_mask(ops)
    u = _unions(ops, comm_mask)
    steps, used = find_steps(nvtx, step_pattern)
    if steps.height == 0 and ops.height:
        steps = pl.DataFrame(
            {
                "step": [WHOLE_TRACE_STEP],
                "name": ["whole trace"],
                "start_ns": [int(ops["start_ns"].min())],
                "end_ns": [int(ops["end_ns"].max())],
            }
        )
    a, b = steps["start_ns"].cast(pl.Int64), steps["end_ns"].cast(pl.Int64)
    parts = _breakdown(u, a, b)
    k = ops.filter(pl.col("kind") == "kernel")
    ks = k["start_ns"].cast(pl.Int64).sort()
    cs = ops["start_ns"].filter(comm_mask).cast(pl.Int64).sort()

    def count(x: pl.Series) -> pl.Series:
        """How many of the sorted starts x lie in each iteration's [a, b)."""
        return x.search_sorted(b, "left").cast(pl.Int64) - x.search_sorted(a, "left").cast(pl.Int64)

    step_frame = (
        steps.with_columns(
            pl.lit(rank, pl.Int64).alias("rank"),
            *[v.alias(c) for c, v in parts.items()],
            count(ks).alias("kernel_count"),
            count(cs).alias("comm_kernel_count"),
        )
        .select(list(STEP_SCHEMA))
        .cast(dict(STEP_SCHEMA))
    )

    if ops.height:
        t = {
            c: int(v[0])
            for c, v in _breakdown(
                u, _ints(ops["start_ns"].min()), _ints(ops["end_ns"].max())
            ).items()
        }
        t["window_ns"] = t.pop("step_ns")
    else:
        t = {
            c: 0
            for c in (
                "window_ns",
                "compute_ns",
                "comm_ns",
                "exposed_comm_ns",
                "overlapped_comm_ns",
                "memcpy_ns",
                "host_wait_ns",
                "idle_ns",
                "own_ns",
            )
        }
    t["overlap_fraction"] = t["overlapped_comm_ns"] / t["comm_ns"] if t["comm_ns"] else None
    t["kernel_count"] = k.height
    t["comm_kernel_count"] = int(len(cs))

    if summary is None:
        summary = summarize(gpu_ops, launch_floor_ns=launch_floor_ns)
    devices = summary.devices
    if not devices.select((pl.col("rank") == rank).all()).item():
        devices = devices.filter(pl.col("rank") == rank)
        top = kernel_summary(gpu_ops, share=False)
    else:
        top = summary.kernels
    top = top.head(50).select("name", "count", "total_ns", "min_ns", "max_ns")
    comm = _comm_kernels(ops, comm_mask)
    return RankSummary(
        rank=int(rank),
        source=source,
        primary_device=None if dev is None else int(dev),
        step_pattern=used,
        steps=step_frame,
        totals=t,
        collectives=_collectives(comm, u, rank),
        devices=devices,
        top_kernels=top,
        gpu_name=gpu_name,
        meta=dict(meta or {}),
        events=_events(comm, steps, rank),
    )
