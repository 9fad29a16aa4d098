"""Steps of a trace (iterations, or tokens of a decode): what one costs, from the GPU work it
launched.

More: docs/architecture.md, *analyzers.steps*.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

import polars as pl


#: tried in order; the first that names any range of the rank is used (one capture group: the step
#: number)
STEP_PATTERNS = (
    r"^ProfilerStep#(\d+)$",
    r"(?i)^(?:train[ _-]?|decode[ _-]?)?(?:step|iteration|iter|token)[\s_#:=-]*(\d+)$",
)
WARMUP_FACTOR = 1.5
#: host time the PyTorch profiler adds per recorded ATen op or runtime call, and per record of
#: torch.compile's kernel launcher (a CPU op named triton_* around each compiled kernel's launch,
#: made in Python), ns. Calibrated on our H100 recordings (sample_traces/llm_workloads/h100: the
#: step in the trace minus the same program's step without the profiler, CUDA events): eager decode
#: 1.86 µs per event, training step 1.14, so 1.5 ± 0.4; the compiled decode's gap (1.37 ms per
#: token, 248 ATen/runtime events and 64 launcher records) less 1.5 µs per ATen/runtime event gives
#: 15.6 µs per launcher record. An estimate: ±35 % (PROFILER_TOLERANCE) covers the three programs
#: (the actual gap is 1.24x, 0.76x and 1.0x the estimate). `trace_steps(profiler_ns_per_event=...)`
#: (`analyze --profiler-event-us`) takes another calibration.
PROFILER_NS_PER_EVENT = 1_500.0
PROFILER_NS_PER_LAUNCHER_EVENT = 15_600.0
PROFILER_TOLERANCE = 0.35
_COMPILE = re.compile(
    r"(?i)(dynamo|inductor|aot_?autograd|compile_fx|_compile|compiled? "
    r"?fx|triton.*compile)"
)
_NOT_COMPILE = re.compile(r"(?i)(cache lookup|torch-compiled region|compiledfunction(backward)?$)")
_REGION = r"^(Torch-Compiled Region|CompiledFunction|TorchDynamo Cache Lookup)"
# a compiled region over 100 ms on the host is a compilation, not a call
COMPILE_MIN_NS = 100_000_000
_CAPTURE = (
    "cudaStreamBeginCapture",
    "cudaStreamEndCapture",
    "cudaGraphInstantiate",
    "cudaGraphInstantiateWithFlags",
    "cuGraphInstantiate",
    "hipStreamBeginCapture",
    "hipGraphInstantiate",
)
_MALLOC = re.compile(r"^(cudaMalloc|cuMemAlloc|cuMemCreate|hipMalloc)")
_LAUNCHES = ("launch", "graph_launch", "memcpy", "memset")
_GRAPH = ("cudaGraphLaunch", "cuGraphLaunch", "hipGraphLaunch")
STEP_COLUMNS = (
    "rank",
    "step",
    "name",
    "start_ns",
    "end_ns",
    "host_ns",
    "gpu_start_ns",
    "gpu_end_ns",
    "gpu_ns",
    "busy_ns",
    "busy_fraction",
    "period_ns",
    "launches",
    "graph_launches",
    "kernels",
    "other_ops",
    "events",
    "profiler_overhead_ns",
    "phase",
    "reasons",
)
SOURCES = {
    "pattern": "ranges matching --step",
    "ProfilerStep": "PyTorch ProfilerStep#N ranges",
    "annotation": "annotation / NVTX ranges named step, iteration or token N",
    "sequence": "a repeated kernel sequence",
    "graphs": "CUDA-graph replays (one step each)",
    None: "none found",
}


@dataclass
class TraceSteps:
    steps: pl.DataFrame  # STEP_COLUMNS, one row per (rank, step)
    # per rank: how, counts, steady median / p90, ...
    ranks: list[dict] = field(default_factory=list)
    profiler_ns_per_event: float = PROFILER_NS_PER_EVENT

    def rank(self, rank: int) -> dict | None:
        return next((r for r in self.ranks if r["rank"] == rank), None)

    @property
    def main(self) -> dict | None:
        """The summary of the first rank with steps (the run's headline)."""
        return next(
            (r for r in self.ranks if r["steady_count"]), self.ranks[0] if self.ranks else None
        )


def check_step_pattern(pattern: str) -> None:
    """A step pattern must be a valid regex with a group (the step number); ParameterError otherwise."""
    from analyzers.errors import ParameterError

    try:
        groups = re.compile(pattern).groups
        pl.Series(["x"]).str.extract(pattern, 1)
    except (re.error, pl.exceptions.ComputeError) as e:
        raise ParameterError(
            f"invalid step regex {pattern!r}: {(str(e).splitlines() or [''])[0]}"
        ) from None
    if groups < 1:
        raise ParameterError(
            f"step regex {pattern!r} needs a group that captures the step number, "
            f"e.g. 'step (\\d+)'"
        )


def primary_device(gpu_ops: pl.DataFrame) -> int | None:
    """The device with the most kernel time (ties: the lowest ordinal)."""
    k = gpu_ops.filter(pl.col("kind") == "kernel")
    if k.height == 0:
        k = gpu_ops
    if k.height == 0:
        return None
    t = (
        k.group_by("device")
        .agg(pl.col("duration_ns").sum())
        .sort(["duration_ns", "device"], descending=[True, False])
    )
    return t["device"][0]


def _empty_ranges() -> pl.DataFrame:
    return pl.DataFrame(
        schema={"step": pl.Int64, "name": pl.String, "start_ns": pl.Int64, "end_ns": pl.Int64}
    )


def _ranges(nvtx: pl.DataFrame, pattern: str | None) -> tuple[pl.DataFrame, str | None]:
    """Annotated step ranges of one rank: (step, name, start_ns, end_ns) and the source."""
    if nvtx is None or not nvtx.height:
        return _empty_ranges(), None
    if pattern:
        check_step_pattern(pattern)
    pats = (
        [(pattern, "pattern")]
        if pattern
        else [(STEP_PATTERNS[0], "ProfilerStep")] + [(p, "annotation") for p in STEP_PATTERNS[1:]]
    )
    names = nvtx.select("name", "start_ns", "end_ns").drop_nulls()
    for pat, how in pats:
        m = names.with_columns(
            pl.col("name").str.extract(pat, 1).cast(pl.Int64, strict=False).alias("step")
        ).filter(pl.col("step").is_not_null())
        if m.height:
            return (
                m.group_by("step")
                .agg(pl.col("name").first(), pl.col("start_ns").min(), pl.col("end_ns").max())
                .sort("start_ns")
            ), how
    return _empty_ranges(), None


def sequence_steps(
    kernels: pl.DataFrame,
    *,
    min_steps: int = 3,
    agree: float = 0.95,
    max_kernels: int = 5_000_000,
    anchor_name: str | None = None,
) -> tuple[pl.DataFrame, dict | None]:
    """Steps from a repeated kernel sequence (kernels of one device: name, start_ns, end_ns). A
    candidate anchor is a kernel that runs at least `min_steps` times; its period p (>= 2 kernels)
    is the distance between its runs that occurs most. Over the longest stretch where it runs
    exactly every p kernels, the names must repeat at that distance (S[i] == S[i + p]) at >= `agree`
    of the positions. The candidate covering the most kernels wins (ties: the shorter period, then
    the one that starts first). Each
    step runs from one start of the anchor to the next (GPU clock); the kernels before the stretch
    (a warm-up: compilation, autotuning) form one more step in front when there are at least p / 2
    of them. Returns the ranges and a description (anchor, period, agreement), or an empty frame and
    None."""
    n = kernels.height
    if n < 2 * min_steps or n > max_kernels:
        return _empty_ranges(), None
    # kernels of one device usually come in time order already: then no sorted copy is made
    k = kernels if kernels["start_ns"].is_sorted() else kernels.sort("start_ns")
    ids = k["name"].cast(pl.String).cast(pl.Categorical).to_physical().cast(pl.Int64)
    f = pl.DataFrame({"id": ids, "i": pl.int_range(n, eager=True)})
    # candidates: the kernels that run most often with a period of 2 or more, their occurrences read
    # one at a time (a million kernels are never a million Python integers)
    srt = f.sort("id", "i")
    srt = srt.with_columns(
        pl.when(pl.col("id") == pl.col("id").shift(1))
        .then(pl.col("i") - pl.col("i").shift(1))
        .alias("d")
    )
    stats = (
        srt.with_row_index("_r")
        .group_by("id", maintain_order=True)
        .agg(
            pl.len().alias("c"),
            pl.col("_r").first().alias("at"),
            pl.col("d").drop_nulls().mode().min().alias("p"),
        )
    )
    cands = stats.filter(
        (pl.col("c") >= min_steps) & (pl.col("p") >= 2) & (pl.col("p") <= n // min_steps)
    )
    if anchor_name is not None:
        code = (
            k["name"]
            .cast(pl.String)
            .cast(pl.Categorical)
            .to_physical()
            .cast(pl.Int64)
            .filter(k["name"].cast(pl.String) == anchor_name)
            .head(1)
            .to_list()
        )
        cands = cands.filter(pl.col("id").is_in(code))
    col = srt["i"]
    best = None
    tried: set[tuple[int, int, int]] = set()
    for anchor, c, at, _ in cands.iter_rows():
        occ = col.slice(at, c).to_list()
        d = [b - a for a, b in zip(occ, occ[1:])]
        p = Counter(d).most_common(1)[0][0]
        if p < 2:
            continue
        # the longest stretch of runs exactly p apart: (first, last) index
        run, cur = (0, 0), 0
        for j in range(1, len(occ)):
            if d[j - 1] != p:
                cur = j
            if j - cur > run[1] - run[0]:
                run = (cur, j)
        if run[1] - run[0] + 1 < min_steps:
            continue
        lo, hi = occ[run[0]], occ[run[1]]
        if (lo, hi, p) in tried:
            continue
        tried.add((lo, hi, p))
        covered = hi - lo
        # ties: the shorter period, then the anchor that runs first (never the order of the
        # names' categorical codes, which depends on what the process read before)
        if best is not None and (covered, -p, -lo) <= (best[0], -best[1], -best[3][0]):
            continue
        frac = (
            float((ids.slice(lo, hi - lo) == ids.slice(lo + p, hi - lo)).mean())
            if hi + p <= n
            else float((ids.slice(lo, n - p - lo) == ids.slice(lo + p, n - p - lo)).mean())
        )
        if frac >= agree:
            best = (covered, p, anchor, occ[run[0] : run[1] + 1], frac)
    if best is None:
        return _empty_ranges(), None
    _, period, anchor, occ, frac = best
    # GPU clock: a graph replay's kernels share one launch call
    t = k["start_ns"].to_list()
    starts = [t[i] for i in occ]
    ends = starts[1:] + [
        t[occ[-1] + period] if occ[-1] + period < n else int(k["end_ns"].max()) + 1
    ]
    names = [f"kernels {i}-{i + period - 1}" for i in occ]
    # what ran before the repeated sequence: one step in front
    if occ[0] >= period // 2:
        starts, ends, names = (
            [t[0]] + starts,
            [starts[0]] + ends,
            [f"kernels 0-{occ[0] - 1} (before the sequence)"] + names,
        )
    ranges = pl.DataFrame(
        {"step": list(range(len(starts))), "name": names, "start_ns": starts, "end_ns": ends},
        schema=_empty_ranges().schema,
    )
    return ranges, {
        "anchor": str(k["name"][occ[0]]),
        "period_kernels": int(period),
        "agreement": round(frac, 4),
        "before_first": int(occ[0]),
    }


def graph_steps(
    kernels: pl.DataFrame, *, min_steps: int = 3, share: float = 0.9
) -> tuple[pl.DataFrame, dict | None]:
    """Without annotated steps, a trace whose kernels (of one device) are mostly (>= `share`) graph
    replays has one step per replay: from its first kernel's start to the next replay's (GPU clock).
    Else an empty frame, None."""
    if not kernels.height:
        return _empty_ranges(), None
    g = kernels.filter(pl.col("launch_api").is_in(_GRAPH))
    if g.height < share * kernels.height:
        return _empty_ranges(), None
    firsts = (
        g.group_by("correlation")
        .agg(pl.col("start_ns").min())
        .sort("start_ns")["start_ns"]
        .to_list()
    )
    if len(firsts) < min_steps:
        return _empty_ranges(), None
    ends = firsts[1:] + [int(kernels["end_ns"].max()) + 1]
    ranges = pl.DataFrame(
        {
            "step": list(range(len(firsts))),
            "name": [f"graph replay {i}" for i in range(len(firsts))],
            "start_ns": firsts,
            "end_ns": ends,
        },
        schema=_empty_ranges().schema,
    )
    return ranges, {
        "graph_replays": len(firsts),
        "graph_kernel_share": round(g.height / kernels.height, 4),
    }


def _assign(t: pl.Series, ranges: pl.DataFrame) -> pl.Series:
    """Index of the range [start, end) holding each time (ranges sorted by start, not overlapping), null if none."""
    st = ranges["start_ns"].cast(pl.Int64)
    en = ranges["end_ns"].cast(pl.Int64)
    i = st.search_sorted(t.cast(pl.Int64), side="right").cast(pl.Int64) - 1
    i0 = i.clip(lower_bound=0)
    inside = (i >= 0) & (t.cast(pl.Int64) < en.gather(i0)) & t.is_not_null()
    return i0.zip_with(inside, pl.Series([None] * len(t), dtype=pl.Int64))


def _count_in(t: pl.Series, ranges: pl.DataFrame) -> pl.Series:
    """How many of the times t lie in each range [start, end) (ranges sorted, not overlapping): two
    binary searches of the sorted times per range."""
    ts = t.drop_nulls().cast(pl.Int64).sort()
    return ts.search_sorted(ranges["end_ns"].cast(pl.Int64), "left").cast(
        pl.Int64
    ) - ts.search_sorted(ranges["start_ns"].cast(pl.Int64), "left").cast(pl.Int64)


def _find(
    ops: pl.DataFrame, nvtx: pl.DataFrame, pattern: str | None
) -> tuple[pl.DataFrame, str | None, dict | None]:
    """One rank's step ranges (step, name, start_ns, end_ns), their source (SOURCES) and, for found ones, how."""
    ranges, how = _ranges(nvtx, pattern)
    seq = None
    if not ranges.height and not pattern:
        dev = primary_device(ops)
        # the columns the two searches read, then the device's kernels (a filter copies what it keeps)
        kk = ops.select(
            "kind",
            "device",
            "name",
            "start_ns",
            "end_ns",
            "api_start_ns",
            "launch_api",
            "correlation",
        )
        kk = (
            kk.filter((pl.col("kind") == "kernel") & (pl.col("device") == dev))
            if dev is not None
            else kk.head(0)
        )
        ranges, seq = graph_steps(kk)
        how = "graphs" if seq else None
        if not seq:
            ranges, seq = sequence_steps(kk.select("name", "start_ns", "end_ns", "api_start_ns"))
            how = "sequence" if seq else None
    return ranges, how, seq


def step_ranges(
    gpu_ops: pl.DataFrame, nvtx: pl.DataFrame | None, pattern: str | None = None
) -> pl.DataFrame:
    """Every rank's step ranges as the steps of `trace_steps` are found: rank, step, label,
    start_ns, end_ns, tid (the annotating thread; null for found steps), gpu_clock (the range is on
    the GPU clock: an op belongs to the step it starts in, not to the one its launch call started
    in)."""
    frames = []
    for rank in sorted(gpu_ops["rank"].unique().to_list()) if gpu_ops.height else []:
        nv = nvtx.filter(pl.col("rank") == rank) if nvtx is not None and nvtx.height else nvtx
        ranges, how, _ = _find(gpu_ops.filter(pl.col("rank") == rank), nv, pattern)
        if not ranges.height:
            continue
        tid = None
        if how in ("ProfilerStep", "annotation", "pattern") and nv is not None:
            t = nv.filter(pl.col("name").is_in(ranges["name"].to_list()))["tid"]
            tid = int(t.mode()[0]) if t.len() else None
        frames.append(
            ranges.select(
                pl.lit(rank, pl.Int32).alias("rank"),
                "step",
                pl.col("name").alias("label"),
                "start_ns",
                "end_ns",
                pl.lit(tid, pl.Int64).alias("tid"),
                pl.lit(how in ("graphs", "sequence")).alias("gpu_clock"),
            )
        )
    if not frames:
        return pl.DataFrame(
            schema={
                "rank": pl.Int32,
                "step": pl.Int64,
                "label": pl.String,
                "start_ns": pl.Int64,
                "end_ns": pl.Int64,
                "tid": pl.Int64,
                "gpu_clock": pl.Boolean,
            }
        )
    return pl.concat(frames).sort("start_ns")


def _rank_steps(
    rank: int,
    ops: pl.DataFrame,
    api: pl.DataFrame,
    cpu: pl.DataFrame,
    nvtx: pl.DataFrame,
    pattern: str | None,
    ns_per_event: float,
) -> tuple[pl.DataFrame, dict]:
    ranges, how, seq = _find(ops, nvtx, pattern)
    info = {
        "rank": int(rank),
        "source": how,
        "how": SOURCES[how],
        "sequence": seq,
        "step_count": ranges.height,
    }
    if not ranges.height:
        return pl.DataFrame(), {**info, "steady_count": 0, "warmup_count": 0}
    ranges = ranges.sort("start_ns")
    # each GPU op to the step whose host range holds its launch call (else its own start); steps
    # found from the kernel sequence are GPU-clock ranges, and an op belongs to the one it starts in
    gpu_clock = how in ("sequence", "graphs")
    key = (
        ops["start_ns"]
        if gpu_clock
        else ops.select(pl.coalesce("api_start_ns", "start_ns").alias("t"))["t"]
    )
    o = (
        ops.select("start_ns", "end_ns", "kind", "name", "launch_api", "correlation")
        .with_columns(_assign(key, ranges).alias("_i"))
        .filter(pl.col("_i").is_not_null())
    )
    # sorted: only the columns the busy time and the counts need (no copy of the names)
    g = (
        o.select("_i", "start_ns", "end_ns", (pl.col("kind") == "kernel").alias("_k"))
        .sort("_i", "start_ns")
        .with_columns(pl.col("end_ns").cum_max().shift(1).over("_i").alias("_pe"))
    )
    cover = (pl.col("end_ns") - pl.max_horizontal("start_ns", "_pe")).clip(lower_bound=0)
    per = g.group_by("_i").agg(
        pl.col("start_ns").min().alias("gpu_start_ns"),
        pl.col("end_ns").max().alias("gpu_end_ns"),
        cover.sum().alias("busy_ns"),
        pl.col("_k").sum().alias("kernels"),
        (~pl.col("_k")).sum().alias("other_ops"),
    )
    del g
    base = ranges.with_columns(pl.int_range(pl.len()).alias("_i"))
    s = base.join(per, on="_i", how="left").sort("_i")
    a = (
        api
        if api is not None and api.height
        else pl.DataFrame(schema={"kind": pl.String, "start_ns": pl.Int64, "name": pl.String})
    )
    # the host's side of each step: where its calls, CPU ops and one-time work are
    hranges = ranges
    n = ranges.height
    none = pl.Series([None] * n, dtype=pl.Int64)
    # launch calls: those of the step's ops; host range: from its first launch call to the next's
    if gpu_clock:
        calls = (
            o.filter(pl.col("launch_api").is_not_null())
            .group_by("_i")
            .agg(
                pl.col("correlation").n_unique().alias("l"),
                pl.col("correlation")
                .filter(pl.col("launch_api").is_in(_GRAPH))
                .n_unique()
                .alias("g"),
            )
        )
        hs = (
            ops.select(pl.col("api_start_ns"), pl.col("api_end_ns"))
            .with_columns(_assign(key, ranges).alias("_i"))
            .drop_nulls()
            .group_by("_i")
            .agg(pl.col("api_start_ns").min().alias("a"), pl.col("api_end_ns").max().alias("b"))
        )
        per_step = (
            base.select("_i")
            .join(calls, on="_i", how="left")
            .join(hs, on="_i", how="left")
            .sort("_i")
        )
        launches, graphs = per_step["l"].fill_null(0), per_step["g"].fill_null(0)
        starts = per_step["a"]
        ok = n > 0 and starts.null_count() == 0 and bool((starts.diff().drop_nulls() > 0).all())
        if ok:
            ends = pl.concat([starts.slice(1), per_step["b"].slice(n - 1, 1)])
            hranges = ranges.with_columns(
                starts.alias("start_ns").cast(pl.Int64), ends.alias("end_ns").cast(pl.Int64)
            )
            events, launcher = _events(a, cpu, hranges)
        else:
            events, launcher = none, none
    else:
        ok = True
        launches = _count_in(a.filter(pl.col("kind").is_in(_LAUNCHES))["start_ns"], ranges)
        graphs = _count_in(a.filter(pl.col("kind") == "graph_launch")["start_ns"], ranges)
        events, launcher = _events(a, cpu, ranges)
    s = s.with_columns(
        pl.Series("_hs", hranges["start_ns"], dtype=pl.Int64),
        pl.Series("_he", hranges["end_ns"], dtype=pl.Int64),
    )
    host = (pl.col("_he") - pl.col("_hs")) if ok else pl.lit(None, pl.Int64)
    s = s.with_columns(
        pl.lit(int(rank), pl.Int64).alias("rank"),
        host.alias("host_ns"),
        (pl.col("gpu_end_ns") - pl.col("gpu_start_ns")).alias("gpu_ns"),
        launches.cast(pl.Int64).alias("launches"),
        graphs.cast(pl.Int64).alias("graph_launches"),
        events.cast(pl.Int64).alias("events"),
        launcher.cast(pl.Int64).alias("_launcher"),
        pl.col("kernels").fill_null(0).cast(pl.Int64),
        pl.col("other_ops").fill_null(0).cast(pl.Int64),
    )
    s = s.with_columns(
        pl.when(pl.col("gpu_ns") > 0)
        .then(pl.col("busy_ns") / pl.col("gpu_ns"))
        .otherwise(None)
        .alias("busy_fraction"),
        (pl.col("gpu_start_ns").shift(-1) - pl.col("gpu_start_ns")).alias("period_ns"),
        (
            (pl.col("events") - pl.col("_launcher")) * ns_per_event
            + pl.col("_launcher") * PROFILER_NS_PER_LAUNCHER_EVENT
        )
        .round(0)
        .cast(pl.Int64)
        .alias("profiler_overhead_ns"),
    )
    phases, reasons = _phases(s, hranges, ops, a, cpu, o)
    s = s.with_columns(
        pl.Series("phase", phases, dtype=pl.String), pl.Series("reasons", reasons, dtype=pl.String)
    )
    s = s.select([pl.col(c) for c in STEP_COLUMNS])
    steady = s.filter(pl.col("phase") == "steady")
    gpu = steady["gpu_ns"].drop_nulls()
    info.update(
        _stats(steady, gpu),
        warmup_count=int((s["phase"] == "warm-up").sum()),
        warmup=[
            {
                "step": int(r["step"]),
                "gpu_ns": r["gpu_ns"],
                "host_ns": r["host_ns"],
                "reasons": r["reasons"],
            }
            for r in s.filter(pl.col("phase") == "warm-up").iter_rows(named=True)
        ],
        set_apart=[
            {"step": int(r["step"]), "phase": r["phase"], "reasons": r["reasons"]}
            for r in s.filter(~pl.col("phase").is_in(["steady", "warm-up"])).iter_rows(named=True)
        ],
    )
    return s, info


def _events(
    api: pl.DataFrame, cpu: pl.DataFrame | None, ranges: pl.DataFrame
) -> tuple[pl.Series, pl.Series]:
    """Per step: the host events the profiler recorded (runtime calls and CPU ops starting in its
    host range), and among them the Inductor launcher's (CPU ops named triton_*: a Python-level
    record per compiled kernel)."""
    none = pl.Series(dtype=pl.Int64)
    c = cpu if cpu is not None and cpu.height else None
    total = _count_in(api["start_ns"], ranges) + _count_in(
        c["start_ns"] if c is not None else none, ranges
    )
    launcher = _count_in(
        _named(c, lambda n: n.startswith("triton_"))["start_ns"] if c is not None else none, ranges
    )
    return total, launcher


def _named(df: pl.DataFrame, match) -> pl.DataFrame:
    """The rows of df whose name `match(name)` holds, the test run once per distinct name (a trace's
    600,000 CPU ops have a few hundred)."""
    names = df["name"].unique().drop_nulls()
    keep = [n for n in names.to_list() if match(n)]
    return df.filter(pl.col("name").is_in(keep)) if keep else df.head(0)


def _stats(steady: pl.DataFrame, gpu: pl.Series) -> dict:
    def med(c):
        x = steady[c].drop_nulls()
        return float(x.median()) if x.len() else None

    return {
        "steady_count": steady.height,
        "step_median_ns": float(gpu.median()) if gpu.len() else None,
        "step_p90_ns": float(gpu.quantile(0.9, "nearest")) if gpu.len() else None,
        "step_min_ns": float(gpu.min()) if gpu.len() else None,
        "step_max_ns": float(gpu.max()) if gpu.len() else None,
        "period_median_ns": med("period_ns"),
        "host_median_ns": med("host_ns"),
        "busy_median_ns": med("busy_ns"),
        "busy_fraction_median": med("busy_fraction"),
        "launches_median": med("launches"),
        "graph_launches_median": med("graph_launches"),
        "kernels_median": med("kernels"),
        "events_median": med("events"),
        "profiler_overhead_median_ns": med("profiler_overhead_ns"),
    }


def _phases(s: pl.DataFrame, ranges: pl.DataFrame, ops, api, cpu, o) -> tuple[list[str], list[str]]:
    """warm-up / steady / no GPU work / cut short per step, with the reasons (module docstring)."""
    n = s.height
    gpu = s["gpu_ns"].to_list()
    host = s["host_ns"].to_list()
    kern = s["kernels"].to_list()
    oth = s["other_ops"].to_list()
    reasons: list[list[str]] = [[] for _ in range(n)]
    later_host = sorted(h for h in host[n // 2 :] if h is not None) if n >= 3 else []
    ref_host_all = later_host[len(later_host) // 2] if later_host else None
    # one-time work on the host, per step
    if api is not None and api.height:
        cap = (
            _assign(api.filter(pl.col("name").is_in(_CAPTURE))["start_ns"], ranges)
            .drop_nulls()
            .unique()
            .to_list()
        )
        for i in cap:
            reasons[i].append("CUDA-graph capture")
        m = _named(api, _MALLOC.search)
        for i, c in zip(*_counts(_assign(m["start_ns"], ranges))):
            reasons[i].append(f"allocator growth ({c} cudaMalloc)")
    if cpu is not None and cpu.height:
        c = _named(cpu, lambda n: bool(_COMPILE.search(n)) and not _NOT_COMPILE.search(n))
        if c.height:
            c = (
                c.with_columns(_assign(c["start_ns"], ranges).alias("_i"))
                .drop_nulls("_i")
                .group_by("_i")
                .agg(pl.col("duration_ns").max().alias("d"))
            )
            for i, d in c.iter_rows():
                reasons[i].append(f"compilation ({d / 1e6:,.1f} ms on the host)")
        # a compiled region that lasts far longer than in the later steps compiled (Dynamo and
        # Inductor run inside it)
        r = _named(cpu, re.compile(_REGION).search)
        if r.height:
            r = (
                r.with_columns(_assign(r["start_ns"], ranges).alias("_i"))
                .drop_nulls("_i")
                .group_by("_i")
                .agg(pl.col("duration_ns").max().alias("d"))
                .sort("_i")
            )
            dd = dict(r.iter_rows())
            later = sorted(v for i, v in dd.items() if i >= n // 2) if n >= 3 else []
            ref = later[len(later) // 2] if later else None
            for i, d in dd.items():
                if any(x.startswith("compilation") for x in reasons[i]):
                    continue
                if (ref and d > 10 * ref and d > COMPILE_MIN_NS) or (
                    not ref and d > COMPILE_MIN_NS
                ):
                    reasons[i].append(
                        f"compilation ({d / 1e6:,.1f} ms in the compiled region on the host)"
                    )
                elif (
                    host[i] is not None
                    and host[i] > COMPILE_MIN_NS
                    and host[i] > 10 * (gpu[i] or 0)
                    and (not ref_host_all or host[i] > 10 * ref_host_all)
                ):
                    reasons[i].append(
                        f"compilation ({host[i] / 1e6:,.1f} ms on the host in a step that enters a "
                        "compiled region, most of it in no recorded op)"
                    )
    # kernels no later step runs
    names = (
        o.filter(pl.col("kind") == "kernel")
        .group_by("name")
        .agg(pl.col("_i").max().alias("last"), pl.col("_i").min().alias("first"))
    )
    lone = names.filter(pl.col("last") < n - 1).group_by("first").agg(pl.len().alias("c"))
    half = max(1, n // 2)
    for i, c in lone.iter_rows():
        if i < half and c >= 2:
            reasons[i].append(f"{c} kernels no later step runs (autotuning or one-time setup)")
    ref_idx = list(range(n // 2, n)) if n >= 3 else list(range(n))
    ref_gpu = sorted(gpu[i] for i in ref_idx if gpu[i] is not None)
    ref_host = sorted(host[i] for i in ref_idx if host[i] is not None)
    mg = ref_gpu[len(ref_gpu) // 2] if ref_gpu else None
    mh = ref_host[len(ref_host) // 2] if ref_host else None
    phase = ["steady"] * n
    for i in range(n):
        if kern[i] + oth[i] == 0:
            phase[i] = "no GPU work"
    leading = True
    # too few steps for a steady reference: only one-time work makes a warm-up step
    if n < 3:
        for i in range(n):
            if reasons[i] and phase[i] == "steady" and (i == 0 or phase[i - 1] == "warm-up"):
                phase[i] = "warm-up"
    for i in range(min(half, n - 1) if n >= 3 else 0):
        if phase[i] == "no GPU work":
            continue
        slow = []
        if mg and gpu[i] is not None and gpu[i] > WARMUP_FACTOR * mg:
            slow.append(f"GPU time {gpu[i] / mg:.1f}× the steady median")
        if mh and host[i] is not None and host[i] > WARMUP_FACTOR * mh and (not mg or host[i] > mg):
            # a slow host counts when it could hold the GPU up: its time beyond a steady step's GPU
            # time
            slow.append(f"host time {host[i] / mh:.1f}× the steady median")
        if leading and (slow or reasons[i]):
            phase[i] = "warm-up"
            reasons[i] = slow + reasons[i]
        else:
            leading = False
    if (
        n >= 2
        and phase[-1] == "steady"
        and mg
        and (gpu[-1] is None or gpu[-1] < mg / WARMUP_FACTOR)
    ):
        phase[-1] = "cut short"
        reasons[-1].append("the trace ends inside it (less GPU work than a steady step)")
    return phase, ["; ".join(r) for r in reasons]


def _counts(idx: pl.Series) -> tuple[list[int], list[int]]:
    c = idx.drop_nulls().value_counts()
    if not c.height:
        return [], []
    return c[c.columns[0]].to_list(), c["count"].to_list()


def trace_steps(
    gpu_ops: pl.DataFrame,
    api_calls: pl.DataFrame | None = None,
    cpu_ops: pl.DataFrame | None = None,
    nvtx: pl.DataFrame | None = None,
    *,
    pattern: str | None = None,
    profiler_ns_per_event: float | None = None,
) -> TraceSteps:
    """The steps of every rank of a trace (module docstring)."""
    c = PROFILER_NS_PER_EVENT if profiler_ns_per_event is None else float(profiler_ns_per_event)
    frames, infos = [], []
    for rank in sorted(gpu_ops["rank"].unique().to_list()) if gpu_ops.height else []:

        def of(df):
            return df.filter(pl.col("rank") == rank) if df is not None and df.height else df

        s, info = _rank_steps(rank, of(gpu_ops), of(api_calls), of(cpu_ops), of(nvtx), pattern, c)
        if s.height:
            frames.append(s)
        infos.append(info)
    steps = pl.concat(frames, how="vertical_relaxed") if frames else pl.DataFrame()
    return TraceSteps(steps, infos, c)


def warmup_note(steps, rank: int, window_ns: int | None) -> str:
    """When warm-up steps take a large part (>= 30 %) of a device's window, the window's shares are
    mostly theirs: the sentence that says so, with the steady steps' own GPU busy share."""
    info = steps.rank(rank) if steps is not None else None
    if not info or not info.get("warmup") or not window_ns or not info.get("steady_count"):
        return ""
    w = sum(x["gpu_ns"] or 0 for x in info["warmup"])
    if w < 0.3 * window_ns:
        return ""
    ids = ", ".join(str(x["step"]) for x in info["warmup"])
    return (
        f" Warm-up (step{'s' if len(info['warmup']) > 1 else ''} {ids}: {w / 1e6:,.1f} ms of the "
        f"{window_ns / 1e6:,.1f} ms window) weighs on these shares; in a steady step the GPU is "
        f"busy {(info['busy_fraction_median'] or 0):.1%} of it."
    )
