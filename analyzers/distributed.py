"""One rank of a distributed job reduced to a small summary: iterations, their time breakdown, collectives.

`rank_summary(gpu_ops, nvtx, rank=r)` runs where the rank's trace is parsed (a worker process or a Ray task) and
returns a `RankSummary` of a few small frames; `analyzers.stragglers.combine` puts the summaries of all ranks
together (stragglers, iteration-time distribution, collectives across ranks). Nothing here needs another rank.

Definitions (per rank, on its primary device: the device with the most kernel time; times in ns):

- iteration  an annotation range whose name matches the step pattern (PyTorch's `ProfilerStep#N`, or NVTX /
             record_function ranges named `step N`, `iteration N`, ...); N aligns iterations across ranks. Its
             window is the range itself on the rank's own clock, so no clock alignment between hosts is needed.
             Without such ranges the rank's whole GPU window is one iteration (step -1).
- within a window [a, b), with U(x) the union of the intervals of x clipped to the window:
    compute_ns          |U(kernels that are not collectives)|
    comm_ns             |U(collective kernels)|                      (collective: name matches `nccl`, as HTA)
    exposed_comm_ns     |U(all kernels)| - |U(compute kernels)|      communication not overlapped with compute
    overlapped_comm_ns  comm_ns - exposed_comm_ns                    = |U(collectives) ∩ U(compute)|
    memcpy_ns           |U(all GPU ops)| - |U(all kernels)|          copies and memsets not under a kernel
    host_wait_ns        idle time in gaps the host caused: the first op after the gap was launched after the GPU
                        had gone idle (its launch call started after the gap began), or no op followed
    idle_ns             the rest of the idle time (work was submitted but waited: events, other streams)
  compute + exposed_comm + memcpy + host_wait + idle = b - a exactly.
- own_ns = step_ns - exposed_comm_ns: the time the rank spent on its own work. In a job that synchronises in
  collectives the other ranks wait inside their collective kernels for the one with the largest own time.
- collective instances: the collective kernels of each iteration, numbered per kind in start order (the k-th
  all_reduce of step N); the same number on every rank is the same collective (ranks run the same sequence in
  a process group), which analyzers.stragglers uses to find who the others waited for, without clocks.
- collectives: each collective kernel by kind (the profiler's 'Collective name', else the kernel's name) and
  message size (max(in, out) elements x the dtype's size, when PyTorch >= 2.1 recorded them); a kernel's exposed
  time is its duration not covered by compute kernels (collectives overlapping each other each count).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from analyzers.timeline import COMM_PATTERN, TimelineSummary, kernel_summary, summarize

#: tried in order; the first that names any range of the rank is used (one capture group: the step number)
STEP_PATTERNS = (r"^ProfilerStep#(\d+)$", r"(?i)^(?:train[ _-]?)?(?:step|iteration|iter)[\s_#:=-]*(\d+)$")
WHOLE_TRACE_STEP = -1
COMPONENTS = ("compute_ns", "exposed_comm_ns", "memcpy_ns", "host_wait_ns", "idle_ns")
CAUSES = {"compute_ns": "compute", "exposed_comm_ns": "exposed communication", "memcpy_ns": "memcpy",
          "host_wait_ns": "host/launch", "idle_ns": "idle"}
STEP_COLUMNS = ("rank", "step", "name", "start_ns", "end_ns", "step_ns", "compute_ns", "comm_ns", "exposed_comm_ns",
                "overlapped_comm_ns", "memcpy_ns", "host_wait_ns", "idle_ns", "own_ns", "kernel_count",
                "comm_kernel_count")
STEP_SCHEMA = pl.Schema({c: (pl.String if c == "name" else pl.Int64) for c in STEP_COLUMNS})
EVENT_SCHEMA = pl.Schema({"rank": pl.Int64, "step": pl.Int64, "kind": pl.String, "occurrence": pl.Int64,
                          "start_ns": pl.Int64, "duration_ns": pl.Int64})
COLLECTIVE_SCHEMA = pl.Schema({
    "rank": pl.Int64, "kind": pl.String, "size_bucket_bytes": pl.Int64, "size_min_bytes": pl.Int64,
    "size_max_bytes": pl.Int64, "count": pl.Int64, "total_ns": pl.Int64, "exposed_ns": pl.Int64,
    "overlapped_ns": pl.Int64, "median_ns": pl.Float64, "bytes_total": pl.Int64, "sized_count": pl.Int64})

#: bytes per element of the dtypes PyTorch writes in a collective's 'dtype' arg
DTYPE_BYTES = {"float": 4, "float32": 4, "double": 8, "float64": 8, "half": 2, "float16": 2, "bfloat16": 2,
               "long": 8, "int64": 8, "int": 4, "int32": 4, "short": 2, "int16": 2, "char": 1, "int8": 1, "byte": 1,
               "uint8": 1, "bool": 1, "float8_e4m3fn": 1, "float8_e5m2": 1, "float8_e4m3fnuz": 1,
               "float8_e5m2fnuz": 1, "complexfloat": 8, "complexdouble": 16, "uint16": 2, "uint32": 4, "uint64": 8}
_KERNEL_KIND = re.compile(r"(?i)nccl(?:Dev)?Kernel_([A-Za-z]+)")
_KINDS = (("allreduce", "all_reduce"), ("allgather", "all_gather"), ("reducescatter", "reduce_scatter"),
          ("alltoall", "all_to_all"), ("sendrecv", "send_recv"), ("broadcast", "broadcast"), ("reduce", "reduce"),
          ("send", "send"), ("recv", "recv"), ("gather", "gather"), ("scatter", "scatter"), ("barrier", "barrier"))
_LO, _HI = -(1 << 61), 1 << 61          # open ends of the first and last gap (int64 sums stay exact)


def collective_kind(collective: str | None, kernel_name: str) -> str:
    """The canonical kind of a collective: from the profiler's 'Collective name' when recorded (allreduce,
    _allgather_base, reduce_scatter_tensor_coalesced ... -> all_reduce, all_gather, reduce_scatter), else from
    the NCCL kernel's name (ncclKernel_AllReduce_RING_LL_Sum_float -> all_reduce, ncclDevKernel_SendRecv ->
    send_recv); "nccl (other)" when neither says."""
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
# Interval arithmetic on sorted, disjoint unions (numpy, int64 ns)
# --------------------------------------------------------------------------------------------------
def merge(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of [start, end) intervals as sorted disjoint (S, E)."""
    if len(starts) == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    o = np.argsort(starts, kind="stable")
    s, e = starts[o], ends[o]
    run_max = np.maximum.accumulate(e)
    new = np.empty(len(s), bool)
    new[0] = True
    new[1:] = s[1:] > run_max[:-1]
    idx = np.flatnonzero(new)
    last = np.append(idx[1:] - 1, len(s) - 1)
    return s[idx], run_max[last]


def covered(S: np.ndarray, E: np.ndarray, a, b) -> np.ndarray:
    """|union ∩ [a, b)| for each window (a, b arrays), from prefix sums: O((n + windows) log n)."""
    a = np.asarray(a, np.int64)
    b = np.asarray(b, np.int64)
    if len(S) == 0:
        return np.zeros(np.broadcast(a, b).shape, np.int64)
    cum = np.concatenate(([0], np.cumsum(E - S)))

    def upto(t):
        k = np.searchsorted(S, t, side="right")          # intervals starting at or before t
        j = np.maximum(k - 1, 0)
        part = np.minimum(t, E[j]) - S[j]
        return np.where(k > 0, cum[j] + part, 0)
    return np.maximum(upto(b) - upto(a), 0)


# --------------------------------------------------------------------------------------------------
# One rank
# --------------------------------------------------------------------------------------------------
@dataclass
class RankSummary:
    """What travels from a rank's worker to the driver (a few kB to a few hundred kB)."""
    rank: int
    source: str
    primary_device: int | None
    step_pattern: str | None       # the pattern that found the iterations (None: the whole trace is one)
    steps: pl.DataFrame            # STEP_SCHEMA, one row per iteration
    totals: dict                   # the same components over the rank's whole GPU window, + overlap fraction
    collectives: pl.DataFrame      # COLLECTIVE_SCHEMA
    devices: pl.DataFrame          # analyzers.timeline.summarize(...).devices of the rank
    top_kernels: pl.DataFrame      # name, count, total_ns, min_ns, max_ns (the rank's 50 longest by total)
    events: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=EVENT_SCHEMA))  # collective instances
    gpu_name: str | None = None
    meta: dict = field(default_factory=dict)   # world size, counts, worker time and peak memory


def check_step_pattern(pattern: str) -> None:
    """A step pattern must be a valid regex with a group (the step number); ParameterError otherwise."""
    from analyzers.errors import ParameterError
    try:
        groups = re.compile(pattern).groups
        pl.Series(["x"]).str.extract(pattern, 1)
    except (re.error, pl.exceptions.ComputeError) as e:
        raise ParameterError(f"invalid step regex {pattern!r}: {(str(e).splitlines() or [''])[0]}") from None
    if groups < 1:
        raise ParameterError(f"step regex {pattern!r} needs a group that captures the step number, e.g. 'step (\\d+)'")


def find_steps(nvtx: pl.DataFrame, pattern: str | None = None) -> tuple[pl.DataFrame, str | None]:
    """(step, name, start_ns, end_ns) of the iteration ranges and the pattern used. A step annotated several
    times (nested ranges of the same name) spans its outermost range."""
    if pattern:
        check_step_pattern(pattern)
    patterns = (pattern,) if pattern else STEP_PATTERNS
    names = nvtx.select("name", "start_ns", "end_ns").drop_nulls()
    for pat in patterns:
        m = (names.with_columns(pl.col("name").str.extract(pat, 1).cast(pl.Int64, strict=False).alias("_n"))
             .filter(pl.col("_n").is_not_null()))              # a group that is not a number names no step
        if m.height:
            steps = (m.rename({"_n": "step"})
                     .group_by("step").agg(pl.col("name").first(), pl.col("start_ns").min(), pl.col("end_ns").max())
                     .sort("step"))
            return steps, pat
    return pl.DataFrame(schema={"step": pl.Int64, "name": pl.String, "start_ns": pl.Int64, "end_ns": pl.Int64}), None


def _int_series(name: str, values: np.ndarray) -> pl.Series:
    """An Int64 Series of a numpy array's values by way of a list: polars' Series from a numpy array imports numpy.ma
    the first time (about 15 ms of a short command); the arrays here are one value per iteration."""
    return pl.Series(name, values.tolist(), dtype=pl.Int64)


def _host_gaps(ops: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Idle gaps of the device (between its merged busy intervals, and before the first / after the last op)
    that the host caused: the op after the gap was launched after the gap began, or no op followed."""
    if ops.height == 0:
        return np.array([_LO], np.int64), np.array([_HI], np.int64)
    o = ops.select("start_ns", "end_ns", "api_start_ns").sort("start_ns", "api_start_ns", nulls_last=True)
    s = o["start_ns"].to_numpy().astype(np.int64)
    e = o["end_ns"].to_numpy().astype(np.int64)
    api = o["api_start_ns"].fill_null(_LO).to_numpy().astype(np.int64)
    prev_end = np.maximum.accumulate(e)
    gap_start = np.concatenate(([_LO], prev_end[:-1]))
    opens = np.concatenate(([True], s[1:] > prev_end[:-1]))
    host = opens & ((api > gap_start) | (gap_start == _LO))
    gs = gap_start[host]
    ge = s[host]
    return np.append(gs, prev_end[-1]), np.append(ge, _HI)


def _comm_mask(ops: pl.DataFrame) -> pl.Series:
    """Which ops are collective kernels (one regex pass over the names: about 10 ms for 174,000 kernels, done
    once per rank)."""
    return (ops["kind"] == "kernel") & ops["name"].str.contains(COMM_PATTERN)


def _unions(ops: pl.DataFrame, comm: pl.Series) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    k = ops["kind"] == "kernel"
    s = ops["start_ns"].to_numpy().astype(np.int64)
    e = ops["end_ns"].to_numpy().astype(np.int64)
    km, cm = k.to_numpy(), comm.to_numpy()
    return {"all": merge(s, e), "kernel": merge(s[km], e[km]), "compute": merge(s[km & ~cm], e[km & ~cm]),
            "comm": merge(s[cm], e[cm]), "host": _host_gaps(ops)}


def _breakdown(u: dict, a: np.ndarray, b: np.ndarray) -> dict[str, np.ndarray]:
    cov = {k: covered(*u[k], a, b) for k in ("all", "kernel", "compute", "comm", "host")}
    win = b - a
    idle_total = win - cov["all"]
    host = np.minimum(cov["host"], idle_total)
    exposed = cov["kernel"] - cov["compute"]
    return {"step_ns": win, "compute_ns": cov["compute"], "comm_ns": cov["comm"], "exposed_comm_ns": exposed,
            "overlapped_comm_ns": cov["comm"] - exposed, "memcpy_ns": cov["all"] - cov["kernel"],
            "host_wait_ns": host, "idle_ns": idle_total - host, "own_ns": win - exposed}


def _comm_kernels(ops: pl.DataFrame, comm: pl.Series) -> pl.DataFrame:
    """The collective kernels of the ops (comm: _comm_mask), in start order, with their canonical kind (named once
    per distinct collective name and kernel name)."""
    c = ops.filter(comm).sort("start_ns")
    pairs = c.select(pl.col("collective").cast(pl.String).fill_null(""), pl.col("name").cast(pl.String).fill_null(""))
    uniq = pairs.unique()
    kinds = uniq.with_columns(pl.Series("_kind", [collective_kind(x, n) for x, n in uniq.iter_rows()], dtype=pl.String))
    return c.with_columns(pairs.join(kinds, on=["collective", "name"], how="left", maintain_order="left")["_kind"])


def _events(c: pl.DataFrame, steps: pl.DataFrame, rank: int) -> pl.DataFrame:
    """Collective instances: each collective kernel that starts inside an iteration, with its occurrence number
    among the iteration's collectives of its kind."""
    if c.height == 0 or steps.height == 0:
        return pl.DataFrame(schema=EVENT_SCHEMA)
    st = steps.sort("start_ns")
    s = c["start_ns"].to_numpy().astype(np.int64)
    a = st["start_ns"].to_numpy().astype(np.int64)
    b = st["end_ns"].to_numpy().astype(np.int64)
    i = np.searchsorted(a, s, side="right") - 1
    inside = (i >= 0) & (s < b[np.maximum(i, 0)])
    ev = pl.DataFrame({"step": st["step"].to_numpy()[np.maximum(i, 0)][inside], "kind": c["_kind"].filter(inside),
                       "start_ns": s[inside], "duration_ns": c["duration_ns"].filter(inside)})
    return (ev.with_columns(pl.int_range(pl.len()).over("step", "kind").alias("occurrence"),
                            pl.lit(rank, pl.Int64).alias("rank"))
            .select(list(EVENT_SCHEMA)).cast(dict(EVENT_SCHEMA)))


def _collectives(c: pl.DataFrame, u: dict, rank: int) -> pl.DataFrame:
    if c.height == 0:
        return pl.DataFrame(schema=COLLECTIVE_SCHEMA)
    # message size: max(in, out) elements x the dtype's bytes; its bucket computed once per distinct size
    per = pl.col("comm_dtype").cast(pl.String).fill_null("").str.to_lowercase().replace_strict(
        DTYPE_BYTES, default=None, return_dtype=pl.Int64)
    sizes = c.select((pl.max_horizontal("comm_in_nelems", "comm_out_nelems").cast(pl.Int64) * per)
                     .alias("size_bytes"))["size_bytes"]
    buckets = {x: size_bucket(x) for x in sizes.unique().drop_nulls().to_list()}
    s = c["start_ns"].to_numpy().astype(np.int64)
    e = c["end_ns"].to_numpy().astype(np.int64)
    under = covered(*u["compute"], s, e)
    k = pl.DataFrame({"kind": c["_kind"], "size_bytes": sizes,
                      "size_bucket_bytes": sizes.replace_strict(buckets, default=None, return_dtype=pl.Int64),
                      "duration_ns": e - s, "exposed_ns": (e - s) - under})
    return (k.group_by("kind", "size_bucket_bytes")
            .agg(pl.col("size_bytes").min().alias("size_min_bytes"), pl.col("size_bytes").max().alias("size_max_bytes"),
                 pl.len().cast(pl.Int64).alias("count"), pl.col("duration_ns").sum().alias("total_ns"),
                 pl.col("exposed_ns").sum().alias("exposed_ns"),
                 (pl.col("duration_ns") - pl.col("exposed_ns")).sum().alias("overlapped_ns"),
                 pl.col("duration_ns").median().cast(pl.Float64).alias("median_ns"),
                 pl.col("size_bytes").sum().alias("bytes_total"),
                 pl.col("size_bytes").is_not_null().sum().cast(pl.Int64).alias("sized_count"))
            .with_columns(pl.lit(rank, pl.Int64).alias("rank"))
            .select(list(COLLECTIVE_SCHEMA)).cast(dict(COLLECTIVE_SCHEMA)).sort("kind", "size_bucket_bytes"))


def primary_device(gpu_ops: pl.DataFrame) -> int | None:
    """The device with the most kernel time (ties: the lowest ordinal)."""
    k = gpu_ops.filter(pl.col("kind") == "kernel")
    if k.height == 0:
        k = gpu_ops
    if k.height == 0:
        return None
    t = k.group_by("device").agg(pl.col("duration_ns").sum()).sort(["duration_ns", "device"],
                                                                   descending=[True, False])
    return t["device"][0]


def rank_summary(gpu_ops: pl.DataFrame, nvtx: pl.DataFrame, *, rank: int, source: str = "",
                 step_pattern: str | None = None, gpu_name: str | None = None,
                 launch_floor_ns: float | None = None, meta: dict | None = None,
                 summary: TimelineSummary | None = None) -> RankSummary:
    """Reduce one rank's tables (already filtered to the rank) to its RankSummary (module docstring). `summary`:
    analyzers.timeline.summarize of the trace the rank belongs to (with the same launch floor), when the caller has
    it: its device rows of this rank are the rank's (they are computed per device), and, when it holds this rank
    only, its kernel summary too; else both are computed here."""
    dev = primary_device(gpu_ops)
    ops = gpu_ops.filter(pl.col("device") == dev) if dev is not None else gpu_ops
    comm_mask = _comm_mask(ops)
    u = _unions(ops, comm_mask)
    steps, used = find_steps(nvtx, step_pattern)
    if steps.height == 0 and ops.height:
        steps = pl.DataFrame({"step": [WHOLE_TRACE_STEP], "name": ["whole trace"],
                              "start_ns": [int(ops["start_ns"].min())], "end_ns": [int(ops["end_ns"].max())]})
    a = steps["start_ns"].to_numpy().astype(np.int64)
    b = steps["end_ns"].to_numpy().astype(np.int64)
    parts = _breakdown(u, a, b)
    k = ops.filter(pl.col("kind") == "kernel")
    ks = np.sort(k["start_ns"].to_numpy().astype(np.int64))
    cs = np.sort(ops.filter(comm_mask)["start_ns"].to_numpy().astype(np.int64))
    count = lambda x: np.searchsorted(x, b, "left") - np.searchsorted(x, a, "left")  # noqa: E731
    step_frame = steps.with_columns(
        pl.lit(rank, pl.Int64).alias("rank"), *[_int_series(c, v) for c, v in parts.items()],
        _int_series("kernel_count", count(ks)), _int_series("comm_kernel_count", count(cs)),
    ).select(list(STEP_SCHEMA)).cast(dict(STEP_SCHEMA))

    if ops.height:
        w0, w1 = np.array([ops["start_ns"].min()], np.int64), np.array([ops["end_ns"].max()], np.int64)
        t = {c: int(v[0]) for c, v in _breakdown(u, w0, w1).items()}
        t["window_ns"] = t.pop("step_ns")
    else:
        t = {c: 0 for c in ("window_ns", "compute_ns", "comm_ns", "exposed_comm_ns", "overlapped_comm_ns",
                            "memcpy_ns", "host_wait_ns", "idle_ns", "own_ns")}
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
    return RankSummary(rank=int(rank), source=source, primary_device=None if dev is None else int(dev),
                       step_pattern=used, steps=step_frame, totals=t, collectives=_collectives(comm, u, rank),
                       devices=devices, top_kernels=top, gpu_name=gpu_name, meta=dict(meta or {}),
                       events=_events(comm, steps, rank))
