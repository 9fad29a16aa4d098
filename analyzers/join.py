"""One kernel, every view: the launches of an Nsight Compute run matched to the kernels of a
timeline (PyTorch profiler or Nsight Systems) of the same program.

More: docs/architecture.md, *analyzers.join*.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

import polars as pl

_ANON = re.compile(r"\(anonymous namespace\)|<unnamed>")
_STEP = re.compile(r"(?i)^(?:ProfilerStep#|step[_ #:-]?)(\d+)$")
#: ncu measures a launch alone and replays it; its duration may differ from the traced one by this
#: much on top of the trace's own spread (clock ramp-up, the cache state --cache-control leaves)
NCU_TOLERANCE = 0.10


def base_name(name: str) -> str:
    """`void at::native::(anonymous namespace)::cunn_SoftMaxForwardReg<float, ...>(float*, ...)` ->
    `at::native::{anon}::cunn_SoftMaxForwardReg` (ncu's `<unnamed>` gives the same)."""
    s = _ANON.sub("{anon}", name or "").strip()
    if s.startswith("void "):
        s = s[5:]
    depth = 0
    for i, ch in enumerate(s):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch in "<(" and depth == 0:
            return s[:i].strip()
    return s.strip()


_NCU_LAMBDA = re.compile(r"\[lambda\(([^()]*)\) \(instance (\d+)\)\]")
_CAST = re.compile(
    r"\((?:unsigned |signed )?(?:int|long "
    r"long|long|short|char|bool|unsigned)\)(-?\d+)"
)
_INT_SUFFIX = re.compile(r"\b(\d+)(?:ull|ul|ll|u|l)\b", re.I)
_BOOL = {"false": "0", "true": "1"}
_WEST_CONST = re.compile(r"\bconst\s+([A-Za-z_][\w:]*)\s*([*&])")


def signature(name: str) -> str:
    """The kernel's name with its template arguments, written one way whatever tool demangled it:
    ncu's `[lambda() (instance 2)]`, `(int)8`, `(bool)0`, `(unsigned long)2` and `<unnamed>` are the
    profilers' `{lambda()#2}`, `8`, `false`, `2ul` and `(anonymous namespace)`, and `const T *` is
    `T const*`; spaces and the parameter list are dropped."""
    s = _ANON.sub("{anon}", name or "")
    s = _NCU_LAMBDA.sub(r"{lambda(\1)#\2}", s)
    s = _CAST.sub(r"\1", s)
    s = _INT_SUFFIX.sub(r"\1", s)
    s = re.sub(r"\b(false|true)\b", lambda m: _BOOL[m.group(1)], s)
    # `const float *` (ncu) = `float const*` (the profilers)
    s = _WEST_CONST.sub(r"\1 const\2", s)
    s = re.sub(r"\s+", "", s)
    if s.startswith("void"):
        s = s[4:]
    # drop the parameter list: the last top-level "(...)" that ends the name
    depth, cut = 0, len(s)
    for i, ch in enumerate(s):
        if ch in "<({[":
            if ch == "(" and depth == 0:
                cut = i
            depth += 1
        elif ch in ">)}]":
            depth -= 1
    return s[:cut] if cut < len(s) and s.endswith(")") else s


def _per_name(col: pl.Series, f) -> pl.Series:
    """f of each name, computed once per distinct name (a trace repeats a few hundred names a million times)."""
    names = col.cast(pl.String)
    u = names.unique().drop_nulls().to_list()
    table = pl.DataFrame(
        {"_n": u, "_v": [f(x) for x in u]}, schema={"_n": pl.String, "_v": pl.String}
    )
    return (
        pl.DataFrame({"_n": names})
        .join(table, on="_n", how="left", maintain_order="left")["_v"]
        .fill_null(f(""))
    )


def _key_cols(df: pl.DataFrame, name_col: str) -> pl.DataFrame:
    return df.with_columns(
        _per_name(df[name_col], base_name).alias("base"),
        _per_name(df[name_col], signature).alias("sig"),
        pl.format("({},{},{})", "grid_x", "grid_y", "grid_z").alias("grid"),
        pl.format("({},{},{})", "block_x", "block_y", "block_z").alias("block"),
    ).with_columns(pl.concat_str(["sig", "grid", "block"], separator=" ").alias("key"))


def _coarse(df: pl.DataFrame) -> pl.DataFrame:
    """Keys of the function's own name (the base name without its namespaces), grid and block."""
    short = pl.col("base").str.replace(r"^.*::", "")
    return df.with_columns(short.alias("base")).with_columns(
        pl.concat_str(["base", "grid", "block"], separator=" ").alias("key")
    )


def steps_of(nvtx: pl.DataFrame) -> pl.DataFrame:
    """The trace's steps: annotation ranges named ProfilerStep#N or step_N (rank, step, start_ns, end_ns)."""
    if not nvtx.height:
        return pl.DataFrame(
            schema={
                "rank": pl.Int32,
                "step": pl.Int64,
                "label": pl.String,
                "start_ns": pl.Int64,
                "end_ns": pl.Int64,
                "tid": pl.Int64,
            }
        )
    rows = []
    for r in nvtx.iter_rows(named=True):
        m = _STEP.match((r["name"] or "").strip())
        if m:
            rows.append(
                {
                    "rank": r["rank"],
                    "step": int(m.group(1)),
                    "label": r["name"],
                    "start_ns": r["start_ns"],
                    "end_ns": r["end_ns"],
                    "tid": r["tid"],
                }
            )
    return (
        pl.DataFrame(
            rows,
            schema={
                "rank": pl.Int32,
                "step": pl.Int64,
                "label": pl.String,
                "start_ns": pl.Int64,
                "end_ns": pl.Int64,
                "tid": pl.Int64,
            },
        )
        .unique(["rank", "step"])
        .sort("start_ns")
    )


def trace_kernels(
    gpu_ops: pl.DataFrame, nvtx: pl.DataFrame, step_pattern: str | None = None
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(kernels with key, step and position within the step, steps). The steps are the trace's as
    analyzers.steps finds them (`step_pattern`, ProfilerStep#N, step / iteration / token ranges,
    graph replays, a repeated kernel sequence); a kernel belongs to the step its launch call started
    in (on the GPU clock for found steps: the one it starts in). Kernels outside every step are
    dropped when steps exist; without steps the whole trace is step 0."""
    from analyzers.steps import step_ranges

    k = _key_cols(gpu_ops.filter(pl.col("kind") == "kernel"), "name")
    st = step_ranges(gpu_ops, nvtx, step_pattern)
    gpu_clock = bool(st.height and st["gpu_clock"].any())
    k = k.with_columns(
        (pl.col("start_ns") if gpu_clock else pl.coalesce("api_start_ns", "start_ns")).alias("_at")
    )
    st = st.drop("gpu_clock")
    if st.height:
        k = k.sort("_at").join_asof(
            st.select(
                "rank",
                "step",
                "label",
                pl.col("start_ns").alias("_s"),
                pl.col("end_ns").alias("_e"),
                pl.col("tid").alias("step_tid"),
            ).sort("_s"),
            left_on="_at",
            right_on="_s",
            by="rank",
            strategy="backward",
            check_sortedness=False,
        )
        k = k.filter(pl.col("step").is_not_null() & (pl.col("_at") < pl.col("_e"))).drop("_s", "_e")
    else:
        k = k.with_columns(
            pl.lit(0, pl.Int64).alias("step"),
            pl.lit("whole trace").alias("label"),
            pl.lit(None, pl.Int64).alias("step_tid"),
        )
        st = pl.DataFrame(
            {
                "rank": [0],
                "step": [0],
                "label": ["whole trace"],
                "start_ns": [int(k["start_ns"].min() or 0)],
                "end_ns": [int(k["end_ns"].max() or 0)],
                "tid": [None],
            },
            schema=steps_of(nvtx.clear()).schema,
        )
    k = k.sort("step", "_at").with_columns(pl.int_range(pl.len()).over("step").alias("pos"))
    # the n-th launch of its key within the step: two launches of one kernel with one configuration
    # (two GEMMs of the same tile shape) keep their own durations
    k = k.with_columns(pl.int_range(pl.len()).over("step", "key").alias("occ"))
    return k, st


def _contiguous_window(
    ncu_keys: list[str], k: pl.DataFrame, hint: int | None = None
) -> tuple[list[tuple[int, int]], int] | None:
    """Where the ncu launches appear as consecutive launches of the trace (all steps in launch
    order), matching at least 90 % of them in place: (index pairs into k's rows, the step of the
    first match); else None. Among equally good places (identical steps), the one in the hinted step
    wins, else the first."""
    keys = k["key"].to_list()
    steps = k["step"].to_list()
    n = len(ncu_keys)
    if n < 2 or len(keys) < n:
        return None
    # the matches of every offset at once: each ncu launch votes for the offsets that put it on a
    # trace launch of the same key (about a hundred thousand votes on a decode's 16 tokens, instead
    # of 5 million comparisons)
    last = len(keys) - n
    where: dict[str, list[int]] = {}
    for j, key in enumerate(keys):
        where.setdefault(key, []).append(j)
    votes = [0] * (last + 1)
    for i, key in enumerate(ncu_keys):
        for j in where.get(key, ()):
            if i <= j <= last + i:
                votes[j - i] += 1
    best, best_off = (0, False), None
    for off, hits in enumerate(votes):
        score = (hits, steps[off] == hint)
        if score > best:
            best, best_off = score, off
    if best_off is None or best[0] < 0.9 * n:
        return None
    pairs = [(i, best_off + i) for i in range(n) if keys[best_off + i] == ncu_keys[i]]
    return pairs, int(k["step"][best_off])


def _lcs(a: list[str], b: list[str]) -> list[tuple[int, int]]:
    """Index pairs of a longest common subsequence of two key lists (dynamic programming, O(len a x len b))."""
    n, m = len(a), len(b)
    dp = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            dp[i][j] = dp[i + 1][j + 1] + 1 if a[i] == b[j] else max(dp[i + 1][j], dp[i][j + 1])
    out, i, j = [], 0, 0
    while i < n and j < m:
        if a[i] == b[j]:
            out.append((i, j))
            i += 1
            j += 1
        elif dp[i + 1][j] >= dp[i][j + 1]:
            i += 1
        else:
            j += 1
    return out


@dataclass
class JoinedKernel:
    ncu_id: int
    name: str
    base: str
    signature: str
    grid: str
    block: str
    confidence: str  # high | medium
    step: int
    position: int  # position of the kernel in the step's launch order
    count_per_step: float  # launches of this key per step (median over steps)
    # this launch's time / its step's GPU busy time (median over the steps)
    share_of_step_gpu_time: float
    launch_delay_median_ns: float | None
    trace_duration_median_ns: float
    trace_duration_p10_ns: float
    trace_duration_p90_ns: float
    trace_samples: int
    ncu_duration_ns: float | None
    durations_agree: bool | None
    duration_note: str
    top_finding: str | None
    lost_ns: float | None  # per launch (analyzers.findings)
    # lost_ns x the step's launches of this key per profiled launch of it
    lost_per_step_ns: float | None
    # the ncu-derived bound: dram, fp32, tensor, smem, latency; or launch
    bound: str | None
    trace_key: str = ""  # the trace kernel's key (signature grid block) it was matched to
    # the trace kernel's "External id": the CPU op that launched it
    external_id: int | None = None
    op_name: str | None = None  # that op (aten::mm ...), as the timeline links it


@dataclass
class JoinResult:
    window_step: int | None
    window_label: str | None
    steps: int
    step_gpu_busy_median_ns: float
    matched: list[JoinedKernel] = field(default_factory=list)
    unmatched_ncu: list[dict] = field(default_factory=list)  # {ncu_id, name, reason}
    # {name, position, reason} of the window step
    unmatched_trace: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        d = asdict(self)
        d["matched"] = sorted(d["matched"], key=lambda r: -(r["lost_per_step_ns"] or 0))
        return d


def durations_agree(
    ncu_ns: float | None, p10: float, p90: float, median: float
) -> tuple[bool | None, str]:
    """ncu's duration agrees with the trace when it lies within the trace's spread over the steps
    (p10..p90), widened by NCU_TOLERANCE of the median for the replay (ncu runs the launch alone,
    with its own cache state)."""
    if ncu_ns is None:
        return None, "ncu has no duration for this launch"
    lo, hi = p10 - NCU_TOLERANCE * median, p90 + NCU_TOLERANCE * median
    if lo <= ncu_ns <= hi:
        return (
            True,
            f"within the trace's spread ({p10 / 1e3:.1f}–{p90 / 1e3:.1f} µs, ±{NCU_TOLERANCE:.0%})",
        )
    side = "longer" if ncu_ns > hi else "shorter"
    return False, (
        f"ncu's {ncu_ns / 1e3:.1f} µs is {side} than the trace's {p10 / 1e3:.1f}–{p90 / 1e3:.1f} "
        "µs: ncu replays the launch alone (clocks not locked with --clock-control none, caches as "
        "--cache-control leaves them), the traced launch ran among its neighbours"
    )


def join(
    ncu_kernels: pl.DataFrame,
    gpu_ops: pl.DataFrame,
    nvtx: pl.DataFrame,
    *,
    nvtx_hint: str | None = None,
    step_pattern: str | None = None,
) -> JoinResult:
    """Match an ncu run's launches (analyzers.ncu_run.NcuAnalysis.kernels: id, kernel_name, grid_*,
    block_*, duration_ns, top_finding, lost_ns, bound) to a timeline's kernels (gpu_ops with launch
    columns, nvtx for the steps). `nvtx_hint`: the NVTX range ncu was filtered on, if known
    ("step_6"), breaks ties between steps."""
    k, steps = trace_kernels(gpu_ops, nvtx, step_pattern)
    # the file's own demangled name (collectors.kernel_names keeps it as raw_name beside the
    # canonical kernel_name, which drops the namespaces this join's base names keep)
    n = _key_cols(
        ncu_kernels.sort("id"), "raw_name" if "raw_name" in ncu_kernels.columns else "kernel_name"
    )
    res = JoinResult(None, None, steps.height, 0.0)
    if not k.height or not n.height:
        res.notes.append(
            "nothing to join: "
            + (
                "the trace has no kernels in its steps"
                if not k.height
                else "the ncu run has no launches"
            )
        )
        return res

    def found(a: pl.DataFrame, b: pl.DataFrame) -> float:
        return float(a["key"].is_in(b["key"].drop_nulls().implode()).fill_null(False).mean() or 0.0)

    if found(n, k) < 0.5 and found(_coarse(n), _coarse(k)) > found(n, k):
        # ncu's CSV pages demangle differently (`at::index_elementwise_kernel<..., const T1&>`, the
        # profilers `at::native::index_elementwise_kernel<..., concrete types>`): keyed by the
        # function's own name, grid and block, the launch order aligns them
        n, k = _coarse(n), _coarse(k)
        res.notes.append(
            "kernel names differ in their namespaces and template arguments between the two files "
            "(an ncu CSV export): matched by function name, grid, block and launch order"
        )
    ncu_keys = n["key"].to_list()
    if nvtx_hint is None and "nvtx_range" in n.columns and n["nvtx_range"].drop_nulls().len():
        nvtx_hint = n["nvtx_range"].drop_nulls().mode()[0]
    hint = None
    if nvtx_hint and (m := re.search(r"(\d+)", nvtx_hint)):
        hint = int(m.group(1))
    window = _contiguous_window(ncu_keys, k, hint)
    contiguous = window is not None
    # a --launch-skip/--launch-count window, or a whole step: consecutive launches
    if contiguous:
        pairs_global, step = window
        res.notes.append(
            f"the ncu launches are consecutive launches of the trace (NVTX range {nvtx_hint})"
            if nvtx_hint
            else "the ncu launches are consecutive launches of the trace (a "
            "--launch-skip/--launch-count window)"
        )
        trace_rows = k.to_dicts()
        pairs = pairs_global
    # an NVTX window (or a name filter): the longest common subsequence per step
    else:
        best = None
        for st_ in steps["step"].to_list():
            sk = k.filter(pl.col("step") == st_)
            pr = _lcs(ncu_keys, sk["key"].to_list())
            score = (len(pr), st_ == hint, -(pr[-1][1] - pr[0][1]) if pr else 0)
            if best is None or score > best[0]:
                best = (score, st_, pr, sk)
        _, step, pairs, sk = best
        trace_rows = sk.to_dicts()
    res.window_step = step
    res.window_label = (
        k.filter(pl.col("step") == step)["label"][0]
        if k.filter(pl.col("step") == step).height
        else None
    )
    if steps.height > 1:
        res.notes.append(
            f"matched to {res.window_label}; every step of the trace gives the per-step figures"
        )

    # per key over every step: launches per step, kernel time per step, durations, launch delays
    busy = _busy_per_step(k)
    res.step_gpu_busy_median_ns = float(busy["busy_ns"].median())
    per_step = k.group_by("key", "step").agg(pl.len().alias("n"))
    by_key = per_step.group_by("key").agg(pl.col("n").median().alias("count_per_step"))
    # each launch's share of its step's GPU busy time (the n-th launch of its key), median over the
    # steps
    shares = (
        k.join(busy, on="step")
        .with_columns((pl.col("duration_ns") / pl.col("busy_ns")).alias("_share"))
        .group_by("key", "occ")
        .agg(pl.col("_share").median().alias("share"))
    )
    stats = k.group_by("key", "occ").agg(
        pl.col("duration_ns").median().alias("med"),
        pl.col("duration_ns").quantile(0.1, "linear").alias("p10"),
        pl.col("duration_ns").quantile(0.9, "linear").alias("p90"),
        pl.len().alias("samples"),
        pl.col("launch_delay_ns").median().alias("delay"),
        # a graph replay is one launch call for all its kernels: none of them is "shorter than its
        # launch call"
        (
            (pl.col("duration_ns") < pl.col("api_duration_ns"))
            & ~pl.col("launch_api")
            .fill_null("")
            .is_in(["cudaGraphLaunch", "cuGraphLaunch", "hipGraphLaunch"])
        )
        .mean()
        .alias("short_share"),
    )
    info = {
        (r["key"], r["occ"]): r
        for r in stats.join(by_key, on="key").join(shares, on=["key", "occ"]).iter_rows(named=True)
    }

    ncu_rows = n.to_dicts()
    matched_ncu, matched_trace = {}, {}
    for i, j in pairs:
        matched_ncu[i], matched_trace[j] = j, "high"
    # a second pass: same base name at the next free position in order, configuration differing
    free_trace = [j for j in range(len(trace_rows)) if j not in matched_trace]
    for i, r in enumerate(ncu_rows):
        if i in matched_ncu:
            continue
        lo = max([matched_ncu[x] for x in matched_ncu if x < i], default=-1)
        for j in free_trace:
            if j > lo and trace_rows[j]["base"] == r["base"] and j not in matched_trace:
                matched_ncu[i], matched_trace[j] = j, "medium"
                break
    for i, r in enumerate(ncu_rows):
        if i not in matched_ncu:
            same_base = k.filter(pl.col("base") == r["base"])
            if not same_base.height:
                why = "no kernel of this name in the trace"
            elif not same_base.filter(pl.col("key") == r["key"]).height:
                cfg = same_base.select("grid", "block").unique().head(3).rows()
                why = f"the trace runs it with another launch configuration ({', '.join(' x '.join(c) for c in cfg)})"
            else:
                why = "more launches of it in the ncu window than in the trace's step"
            res.unmatched_ncu.append({"ncu_id": r["id"], "name": r["kernel_name"], "reason": why})
            continue
        t = trace_rows[matched_ncu[i]]
        inf = info[(t["key"], t["occ"])]
        in_window = sum(1 for x in ncu_rows if x["key"] == t["key"])
        # launches of the step this one stands for
        per_step = float(inf["count_per_step"]) / max(1, in_window)
        agree, note = durations_agree(r.get("duration_ns"), inf["p10"], inf["p90"], inf["med"])
        bound = r.get("bound")
        if inf["short_share"] is not None and inf["short_share"] >= 0.5:
            bound = "launch"  # the kernel is shorter than its launch call: the host sets the pace
        lost = r.get("lost_ns")
        res.matched.append(
            JoinedKernel(
                ncu_id=r["id"],
                name=r["kernel_name"],
                base=r["base"],
                signature=r["sig"],
                grid=r["grid"],
                block=r["block"],
                confidence=matched_trace[matched_ncu[i]],
                step=step,
                position=t["pos"],
                count_per_step=float(inf["count_per_step"]),
                share_of_step_gpu_time=float(inf["share"]),
                launch_delay_median_ns=None if inf["delay"] is None else float(inf["delay"]),
                trace_duration_median_ns=float(inf["med"]),
                trace_duration_p10_ns=float(inf["p10"]),
                trace_duration_p90_ns=float(inf["p90"]),
                trace_samples=int(inf["samples"]),
                ncu_duration_ns=r.get("duration_ns"),
                durations_agree=agree,
                duration_note=note,
                top_finding=r.get("top_finding"),
                lost_ns=lost,
                lost_per_step_ns=None if lost is None else lost * per_step,
                bound=bound,
                trace_key=t["key"],
                external_id=t.get("external_id"),
                op_name=t.get("op_name"),
            )
        )
    first = min(matched_ncu.values(), default=0)
    last = max(matched_ncu.values(), default=-1)
    main_tid = steps.filter(pl.col("step") == step)["tid"].to_list()[:1]
    window_steps = {trace_rows[j]["step"] for j in matched_trace} or {step}
    for j, t in enumerate(trace_rows):
        if j in matched_trace or t["step"] not in window_steps:
            continue
        if (
            not contiguous
            and main_tid
            and main_tid[0] is not None
            and t.get("api_tid") is not None
            and t["api_tid"] != main_tid[0]
        ):
            why = (
                f"launched from another host thread (tid {t['api_tid']}; the step runs on tid "
                f"{main_tid[0]}): ncu's NVTX push/pop ranges belong to one thread — filter on a "
                "start/end range (torch.cuda.nvtx.range_start/range_end) to profile the whole step"
            )
        elif j < first:
            why = "launched before the first profiled launch (outside ncu's window: --launch-skip or the NVTX range)"
        elif j > last:
            why = "launched after the last profiled launch (outside ncu's window: --launch-count or the NVTX range)"
        else:
            why = "not profiled inside the window (ncu's --kernel-name filter, or a launch ncu could not profile)"
        res.unmatched_trace.append({"name": t["name"], "position": t["pos"], "reason": why})
    if res.unmatched_trace:
        total = sum(1 for t in trace_rows if t["step"] in window_steps)
        res.notes.append(
            f"{len(res.unmatched_trace)} of the window's {total} kernels "
            f"({', '.join(str(s_) for s_ in sorted(window_steps))}) are not in the "
            f"ncu run (reasons listed)"
        )
    return res


def _busy_per_step(k: pl.DataFrame) -> pl.DataFrame:
    """GPU busy time per step: the union of its kernels' intervals (overlaps once)."""
    s = k.select("step", "start_ns", "end_ns").sort("step", "start_ns")
    prev = pl.col("end_ns").cum_max().shift(1).over("step")
    s = s.with_columns(
        ((pl.col("start_ns") > prev) | prev.is_null())
        .cast(pl.Int64)
        .cum_sum()
        .over("step")
        .alias("iv")
    )
    return (
        s.group_by("step", "iv")
        .agg(pl.col("start_ns").min(), pl.col("end_ns").max())
        .group_by("step")
        .agg((pl.col("end_ns") - pl.col("start_ns")).sum().alias("busy_ns"))
    )


#: what a timeline kernel is coloured by when an ncu run of the same program is joined: the bound of
#: its matched launches (analyzers.findings.bound_of, or "launch" from this join), "no counters"
#: when the report lacks the counters of every bound, "not profiled" when no launch of it was
#: matched
BOUNDS = ("dram", "fp32", "tensor", "smem", "latency", "launch", "no counters", "not profiled")


def bound_meanings() -> dict[str, str]:
    """What each of BOUNDS means and where it comes from, for legends and tables."""
    from analyzers.findings import AT_BOUND

    at = f"at least {AT_BOUND * 100:.0f} % of the launch's ncu duration and the largest of the throughput bounds"
    return {
        "dram": f"t_dram = DRAM bytes read + written / DRAM peak is {at}",
        "fp32": f"t_fp32 = FP32 FLOP (fadd + fmul + 2 × ffma) / FP32 peak is {at}",
        "tensor": f"t_tensor = tensor FLOP / tensor peak is {at}",
        "smem": f"t_smem = shared-memory wavefronts / (SMs × clock) is {at}",
        "latency": f"no throughput bound reaches {AT_BOUND * 100:.0f} % of the duration (too "
        f"little in flight)",
        "launch": "in this trace the kernel is shorter than its launch call (most of its "
        "launches), so the host sets the pace whatever its counters say",
        "no counters": "profiled, but the report lacks the counters of the throughput bounds (e.g. "
        "--set basic)",
        "not profiled": "no launch of this kernel (name, grid and block) was matched in the Nsight "
        "Compute run",
    }


def kernel_key(row: dict) -> str:
    """The join's key of one trace kernel (a gpu_ops row: name, grid_x..z, block_x..z): signature, grid, block."""
    g, b = (
        f"({row.get(w + '_x')},{row.get(w + '_y')},{row.get(w + '_z')})" for w in ("grid", "block")
    )
    return f"{signature(row.get('name') or '')} {g} {b}"


def trace_signature(m: JoinedKernel) -> str:
    """The signature of the trace kernel a launch was matched to (the ncu name's for a result without it)."""
    return m.trace_key.rsplit(" ", 2)[0] if m.trace_key else m.signature


def _mode(values: list[str]) -> str:
    # the most common; ties: the first (lowest ncu launch id)
    return max(values, key=values.count)


def bounds_by_signature(res: JoinResult) -> list[dict]:
    """Per kernel signature of the trace: the bound of its matched launches ("varies" when they
    differ), the most common one (`mode`), and its first profiled launch id; in ncu launch order."""
    by: dict[str, list[JoinedKernel]] = {}
    for m in sorted(res.matched, key=lambda m: m.ncu_id):
        by.setdefault(trace_signature(m), []).append(m)
    out = []
    for sig, ms in by.items():
        bs = [m.bound or "no counters" for m in ms]
        out.append(
            {
                "signature": sig,
                "bound": bs[0] if len(set(bs)) == 1 else "varies",
                "mode": _mode(bs),
                "ncu_id": ms[0].ncu_id,
            }
        )
    return out


def kernel_bounds(res: JoinResult | None, kernels: pl.DataFrame) -> list[str]:
    """The bound (one of BOUNDS) of each row of `kernels` (name, grid_x..z, block_x..z; a null grid:
    a mark that stands for several kernels, judged by its name): the most common bound of the
    matched ncu launches with the same key (signature, grid, block) — any configuration of the
    signature when the grid is null — else "not profiled"."""
    if not kernels.height:
        return []
    if res is None or not res.matched:
        return ["not profiled"] * kernels.height
    by_key: dict[str, list[str]] = {}
    for m in sorted(res.matched, key=lambda m: m.ncu_id):
        by_key.setdefault(m.trace_key, []).append(m.bound or "no counters")
    key_bound = {k: _mode(v) for k, v in by_key.items()}
    sig_bound = {r["signature"]: r["mode"] for r in bounds_by_signature(res)}
    k = _key_cols(kernels, "name")
    out = []
    for key, sig, gx in zip(k["key"].to_list(), k["sig"].to_list(), k["grid_x"].to_list()):
        b = sig_bound.get(sig) if gx is None else key_bound.get(key)
        out.append(b or "not profiled")
    return out


def name_overlap(ncu_kernels: pl.DataFrame, gpu_ops: pl.DataFrame) -> float:
    """The share of an ncu run's launches whose function (base_name) the trace runs at all: a cheap
    upper bound on the share `join` can match (every match, high or medium, needs the same base
    name), to skip unrelated runs without joining them."""
    if not ncu_kernels.height:
        return 0.0
    col = "raw_name" if "raw_name" in ncu_kernels.columns else "kernel_name"
    trace = {
        base_name(x)
        for x in gpu_ops.filter(pl.col("kind") == "kernel")["name"]
        .cast(pl.String)
        .unique()
        .drop_nulls()
        .to_list()
    }
    ncu = _per_name(ncu_kernels[col], base_name).to_list()
    full = sum(1 for b in ncu if b in trace) / len(ncu)
    # an ncu CSV export names kernels without some namespaces (`at::index_elementwise_kernel`): join
    # falls back to the function's own name then (_coarse), so the bound does too
    short = {b.rsplit("::", 1)[-1] for b in trace}
    return max(full, sum(1 for b in ncu if b.rsplit("::", 1)[-1] in short) / len(ncu))
