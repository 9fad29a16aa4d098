"""Multi-rank analysis of a distributed job: one task per rank source, run where the data is,
summaries back.

    sources = path_sources("traces/")            # a folder, or a glob ('traces/rank*.json.gz'), of rank traces
    sources = run_sources(run)                   # the ranks of a stored multi-rank run
    mr, info = analyze_sources(sources, executor)   # analyzers.stragglers.MultiRank + how it ran

More: docs/architecture.md, *dashboard.core.ranks*.
Start-up: imports that only some commands, pages or GPUs need sit inside the functions that use
them, so each command loads what it uses.
"""

from __future__ import annotations

import glob
import os
import re
import resource
import time
from dataclasses import dataclass, field
from pathlib import Path

from typing import TYPE_CHECKING

# numpy comes with analyzers.stragglers: `analyze` of one file asks is_multi_rank_target only
if TYPE_CHECKING:
    from analyzers.stragglers import MultiRank
from collectors.errors import ArtifactError
from collectors.formats import TRACE_KINDS

TRACE_SUFFIXES = (".json", ".json.gz", ".sqlite", ".nsys-rep", ".qdrep")
_SKIP = {"manifest.json", "record_summary.json", "expected.json"}
_GLOB = re.compile(r"[*?\[]")


@dataclass(frozen=True)
class RankSource:
    # a trace file on a path every worker can read, or a stored run's folder
    path: str
    rank: int | None = None  # stored runs: the rank to read
    stored: bool = False

    @property
    def label(self) -> str:
        return f"{Path(self.path).name} rank {self.rank}" if self.stored else self.path


@dataclass
class RankFailure:
    source: str
    problem: str


@dataclass
class Execution:
    """How a multi-rank analysis ran (shown with its result)."""

    executor: dict
    tasks: int
    wall_s: float
    cpu_s: float  # the driver's own CPU time
    driver_peak_rss_bytes: int
    failures: list[RankFailure] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def is_multi_rank_target(target: str) -> bool:
    """A folder or a glob pattern (a single file is analysed as one trace)."""
    return bool(_GLOB.search(target)) or Path(target).is_dir()


def _is_trace(p: Path) -> bool:
    n = p.name.lower()
    return p.is_file() and not n.startswith(".") and n not in _SKIP and n.endswith(TRACE_SUFFIXES)


def path_sources(target: str) -> list[RankSource]:
    """The rank trace files of a folder (walked recursively) or a glob pattern (`**` allowed),
    sorted. ArtifactError when there are none."""
    if _GLOB.search(target):
        files = sorted(Path(p) for p in glob.glob(os.path.expanduser(target), recursive=True))
    else:
        root = Path(target)
        if not root.is_dir():
            raise ArtifactError(target, "no such folder")
        files = sorted(
            p
            for p in root.rglob("*")
            if not any(part.startswith(".") for part in p.relative_to(root).parts)
        )
    files = [p for p in files if _is_trace(p)]
    if not files:
        raise ArtifactError(
            target,
            "no rank traces (PyTorch profiler .json/.json.gz, Nsight Systems .sqlite/.nsys-rep)",
        )
    return [RankSource(str(p)) for p in files]


def run_sources(run) -> list[RankSource]:
    """One source per rank of a stored trace run (each task reads its rank's rows from the store)."""
    ranks = run.meta.get("ranks") or [0]
    return [RankSource(str(run.path), int(r), stored=True) for r in ranks]


def _peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _summaries(
    parsed, source: str, step_pattern: str | None, floors: dict, ranks=None, summary=None
) -> list:
    """The RankSummary of each rank of a parsed trace (`ranks`: those only). `summary`: the trace's
    analyzers.timeline.summarize, when the caller has it (used where its launch floor is the
    rank's)."""
    import polars as pl

    from analyzers.distributed import rank_summary

    g, nv = parsed.tables["gpu_ops"], parsed.tables["nvtx"]
    meta = parsed.meta
    present = sorted(g["rank"].drop_nulls().unique().to_list())
    want = ranks if ranks is not None else (present or sorted(set(meta.get("ranks") or [])))
    # every op is of the one rank: no filtering
    one = g["rank"].null_count() == 0 and len(present) <= 1
    gpu = meta.get("gpu_name")
    if summary is not None and summary.launch_floor_ns != floors.get(gpu):
        summary = None
    common = {
        k: meta.get(k) for k in ("world_size", "distributed_backend", "trace_name", "event_count")
    }
    # distributedInfo
    common["rank_declared"] = parsed.kind == "kineto" and meta.get("world_size") is not None
    # a rank archive's members
    names = {t.get("rank"): t.get("trace_name") for t in meta.get("rank_traces") or []}
    out = []
    for r in want:
        mine = one and present == [r]
        out.append(
            rank_summary(
                g if mine else g.filter(pl.col("rank") == r),
                nv
                if mine and nv["rank"].null_count() == 0 and set(nv["rank"].unique()) <= {r}
                else nv.filter(pl.col("rank") == r),
                rank=int(r),
                source=names.get(r) or source,
                step_pattern=step_pattern,
                gpu_name=gpu,
                launch_floor_ns=floors.get(gpu),
                meta=dict(common),
                summary=summary,
            )
        )
    return out


def rank_task(job: dict) -> dict:
    """One task (runs in a worker): parse a rank file or read a stored run's rank, reduce it. Never raises for
    a bad input: {"summaries": [...], "error": None | "one line", "source", "seconds", "peak_rss_bytes"}."""
    t0 = time.perf_counter()
    src: RankSource = job["source"]
    out = {"source": src.label, "summaries": [], "error": None}
    try:
        if src.stored:
            from collectors.schema import Parsed
            from collectors.store import Run
            import polars as pl

            run = Run(Path(src.path))
            tables = {
                t: run.scan(t).filter(pl.col("rank") == src.rank).collect()
                for t in ("gpu_ops", "nvtx")
            }
            out["summaries"] = _summaries(
                Parsed(run.kind, tables, run.meta),
                src.label,
                job.get("step_pattern"),
                job.get("floors") or {},
                ranks=[src.rank],
            )
        else:
            from collectors.ingest import parse_bytes, read_path

            data, name = read_path(src.path)
            try:
                parsed = parse_bytes(data, name)
            except ArtifactError as e:
                raise ArtifactError(src.path, e.problem) from None
            del data
            if parsed.kind not in TRACE_KINDS:
                raise ArtifactError(
                    src.path,
                    f"a {parsed.kind} artifact, not a PyTorch profiler trace or an Nsight Systems "
                    "export",
                )
            out["summaries"] = _summaries(
                parsed, src.path, job.get("step_pattern"), job.get("floors") or {}
            )
    except ArtifactError as e:
        out["error"] = e.problem
    except (OSError, MemoryError) as e:
        out["error"] = f"{type(e).__name__}: {e}"
    elapsed = time.perf_counter() - t0
    peak = _peak_rss_bytes()
    for s in out["summaries"]:
        s.meta.update(seconds=elapsed, peak_rss_bytes=peak)
    out["seconds"], out["peak_rss_bytes"] = elapsed, peak
    return out


_NUM = re.compile(r"(?i)rank[_-]?(\d+)|(\d+)(?!.*\d)")


def _renumber(results: list[dict], notes: list[str]) -> None:
    """Files of one rank each whose ranks collide and none of which declares its rank (nsys exports:
    each process is rank 0 of its own file; Kineto traces without distributedInfo): take the rank
    from the file name (rank_3, worker3), else from the file order."""
    summaries = [s for r in results for s in r["summaries"]]
    ranks = [s.rank for s in summaries]
    if (
        len(set(ranks)) == len(ranks)
        or any(len(r["summaries"]) != 1 for r in results if r["summaries"])
        or any(s.meta.get("rank_declared") for s in summaries)
    ):
        # ranks the traces declare (distributedInfo) are never renumbered
        return
    nums = []
    for s in summaries:
        m = _NUM.search(Path(s.source).name.split(".")[0]) or _NUM.search(Path(s.source).name)
        nums.append(int(m.group(1) or m.group(2)) if m else None)
    if None in nums or len(set(nums)) != len(nums):
        nums = list(range(len(summaries)))
        notes.append("several files name the same rank; ranks numbered in file order")
    else:
        notes.append("several files name the same rank; ranks taken from the file names")
    for s, n in zip(summaries, nums):
        s.rank = n
        s.steps = s.steps.with_columns(rank=n)
        s.collectives = s.collectives.with_columns(rank=n)
        s.events = s.events.with_columns(rank=n)
        if s.devices.height:
            s.devices = s.devices.with_columns(rank=n)


def analyze_sources(
    sources: list[RankSource],
    executor,
    *,
    step_pattern: str | None = None,
    threshold: float | None = None,
    floors: dict | None = None,
    on_done=None,
) -> tuple[MultiRank, Execution]:
    """Run rank_task over the sources on the executor and combine the summaries. on_done(done,
    total, label) is called as each task completes. threshold: the straggler threshold
    (analyzers.stragglers.STRAGGLER_THRESHOLD when None). ArtifactError when no rank could be read
    or ranks repeat."""
    from analyzers.stragglers import STRAGGLER_THRESHOLD, combine
    from dashboard.core.execute import Timer

    timer = Timer()
    jobs = [{"source": s, "step_pattern": step_pattern, "floors": floors or {}} for s in sources]
    results: list[dict | None] = [None] * len(jobs)
    failures: list[RankFailure] = []
    done = 0
    try:
        for i, res in executor.run(rank_task, jobs):
            done += 1
            if isinstance(res, BaseException):
                failures.append(
                    RankFailure(
                        sources[i].label,
                        f"the task failed: {type(res).__name__}: "
                        f"{(str(res).splitlines() or [''])[0]}",
                    )
                )
            elif res["error"]:
                failures.append(RankFailure(sources[i].label, res["error"]))
            else:
                results[i] = res
            if on_done:
                on_done(done, len(jobs), sources[i].label)
        info = executor.describe()
    finally:
        executor.close()
    ok = [r for r in results if r is not None]
    if not ok:
        raise ArtifactError(
            ", ".join(s.label for s in sources[:3]) + (" ..." if len(sources) > 3 else ""),
            "no rank could be analysed: " + "; ".join(f.problem for f in failures[:3]),
        )
    notes: list[str] = []
    _renumber(ok, notes)
    try:
        mr = combine(
            [s for r in ok for s in r["summaries"]],
            threshold=STRAGGLER_THRESHOLD if threshold is None else threshold,
        )
    except ValueError as e:
        raise ArtifactError(
            sources[0].path if len(sources) == 1 else str(Path(sources[0].path).parent), str(e)
        ) from None
    wall, cpu = timer.seconds()
    return mr, Execution(
        executor=info,
        tasks=len(jobs),
        wall_s=wall,
        cpu_s=cpu,
        driver_peak_rss_bytes=_peak_rss_bytes(),
        failures=failures,
        notes=notes,
    )
