"""The store plus the analyses, for every surface (command line, Streamlit pages, HTML export); no
Streamlit here.

More: docs/architecture.md, *dashboard.core.source*.
Start-up: imports that only some commands, pages or GPUs need sit inside the functions that use
them, so each command loads what it uses.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import polars as pl

from analyzers import ceilings
from analyzers.errors import AnalysisError
from analyzers.gpu_compare import gpu_label
from analyzers.gpu_identify import Evidence, Identified, identify_gpu
from analyzers.gpus import GPUSpec, find_gpu, get_gpu
from collectors import progress
from collectors.errors import ArtifactError, InputError, RunNotFound
from collectors.ingest import companion_warnings, parse_bytes, read_path
from collectors.schema import TRACE_KINDS, Parsed
from collectors.store import Run, Store, with_gpu_override

if TYPE_CHECKING:
    from analyzers.compare import CompareResult
    from analyzers.ncu_run import NcuAnalysis
    from analyzers.timeline import TimelineSummary
    from analyzers.timeline_view import TimelineTracks


@dataclass
class TraceAnalysis:
    kind: str
    meta: dict
    gpu_ops: pl.DataFrame
    api_calls: pl.DataFrame
    summary: TimelineSummary


@dataclass
class BenchAnalysis:
    meta: dict
    gpu: GPUSpec | None
    # BENCH_SCHEMA + derived records + predicted, predicted_unit, verdict, ...
    results: pl.DataFrame
    ceilings: pl.DataFrame  # the run's ceilings table as stored
    failures: list = field(default_factory=list)
    # counter-based checks not made (analyzers...skipped_checks)
    skipped: list = field(default_factory=list)


def _cc(value) -> tuple[int, int] | None:
    try:
        major, _, minor = str(value).partition(".")
        return (int(major), int(minor or 0)) if value not in (None, "") else None
    except ValueError:
        return None


def evidence_for(meta: dict) -> Evidence:
    """What a run's metadata says about its GPU (ncu: name, device attributes, CC column, SM count,
    memory clock; traces: the first device description; bench: the device attributes)."""
    attrs = meta.get("device_attributes") or (meta.get("gpu") or {}).get("attributes") or {}
    name = meta.get("gpu_name_in_file", meta.get("gpu_name"))
    dev = (
        next((d for d in meta.get("devices") or [] if d.get("name") == name), None)
        or next(iter(meta.get("devices") or []), None)
        or {}
    )
    cc = _cc(meta.get("cc"))
    if cc is None and dev.get("cc_major") is not None:
        cc = (int(dev["cc_major"]), int(dev.get("cc_minor") or 0))
    source = meta.get("gpu_name_source") or {
        "kineto": "deviceProperties",
        "nsys": "TARGET_INFO_GPU",
        "bench": "the device",
        "ncu-rep": "device attributes",
        "csv-raw": "device attributes",
    }.get(meta.get("source_format"))
    return Evidence(
        name=name,
        name_source=source,
        attributes=attrs,
        cc=cc,
        sm_count=meta.get("sm_count") or dev.get("sm_count"),
        memory_bytes=dev.get("total_memory_bytes"),
        memory_clock_hz=meta.get("memory_clock_hz"),
    )


def identify(meta: dict, gpu: str | None = None) -> Identified:
    """The GPU of a run (analyzers.gpu_identify.identify_gpu); `gpu` (the --gpu of this command)
    beats the one the run was stored with."""
    return identify_gpu(evidence_for(meta), gpu or meta.get("gpu_override"))


def gpu_for(meta: dict, gpu: str | None = None) -> GPUSpec:
    """The GPUSpec of a run's device (see `identify`)."""
    return identify(meta, gpu).spec


class Source:
    def __init__(
        self,
        store: Store,
        cache_entries: int = 32,
        *,
        gpu: str | None = None,
        keep_parsed: bool = False,
    ):
        # keep_parsed: Parsed files' analyses cached (the CLI)
        self.store, self._keep_parsed = store, keep_parsed
        self.root = str(store.root)
        self.gpu = get_gpu(gpu).name if gpu else None  # UnknownName for a name the registry lacks
        self._cache: OrderedDict = OrderedDict()
        self._max = cache_entries
        self._lock = threading.Lock()
        self._broken: dict[str, str] = {}

    # ---- runs ------------------------------------------------------------------------------------
    def runs(self, kinds: tuple[str, ...] | None = None) -> list[Run]:
        """The store's readable runs, newest first (of `kinds`). A run whose tables cannot be read
        (or re-derived from its artifact) is left out and listed by `broken()`, so one bad run never
        takes a page down."""
        out = []
        for r in self.store.runs():
            if kinds and r.kind not in kinds:
                continue
            if self._readable(r):
                out.append(r)
        return out

    def _readable(self, run: Run) -> bool:
        try:
            run.meta
            return True
        except (InputError, OSError, ValueError, KeyError) as e:
            with self._lock:
                self._broken[run.run_id] = str(e)
            return False

    def broken(self) -> list[tuple[str, str]]:
        """(run id, problem) of the runs left out of `runs()` (damaged folders, artifacts that no longer read)."""
        self.runs()
        with self._lock:
            out = sorted(self._broken.items())
        return out + [(rid, p) for rid, p in self.store.unreadable()]

    def get(self, run_id: str) -> Run:
        """A readable run by id or unique prefix; RunNotFound (one line) for anything else, also for
        a run whose tables cannot be read."""
        run = self.store.get(run_id)
        try:
            run.meta
        except (InputError, OSError, ValueError, KeyError) as e:
            raise RunNotFound(run.run_id, f"cannot be read ({e})") from None
        return run

    def delete(self, run_id: str) -> Run:
        """Delete a run from the store (collectors.store.Store.delete) and forget its cached analyses."""
        run = self.store.delete(run_id)
        with self._lock:
            # the run may sit in any key (comparisons, the store's ceilings)
            self._cache.clear()
        return run

    def get_kind(self, run_id: str, kinds: tuple[str, ...], what: str) -> Run:
        """A run of one of `kinds`; RunNotFound naming what was expected otherwise."""
        run = self.get(run_id)
        if run.kind not in kinds:
            raise RunNotFound(
                run.run_id,
                f"a {run.kind} run, not {what}",
                message=f"run {run.run_id} is a {run.kind} run, not {what}",
            )
        return run

    def table(self, run_id: str, name: str) -> pl.DataFrame:
        run = self.get(run_id)
        return self._cached(("table", run.run_id, name), lambda: run.table(name))

    def launch_metrics(self, run_id: str, launch_id: int) -> pl.DataFrame:
        """Every ncu metric of one launch (long form: id, metric, value, text, unit, section; names
        and texts as strings, the stored table keeps them categorical; section: the Nsight Compute
        section that shows it)."""

        def make():
            from analyzers.compare import launch_metric_rows

            run = self.get(run_id)
            return launch_metric_rows(self.table(run_id, "metrics"), [launch_id], _sections(run))

        return self._cached(("launch", run_id, launch_id), make)

    # ---- cache -----------------------------------------------------------------------------------
    def _cached_for(self, run, key: tuple, make):
        """_cached by run id; a Parsed file anew, or (keep_parsed) by identity: the entry holds it (no id reuse)."""
        if not isinstance(run, Parsed):
            return self._cached((key[0], run.run_id, *key[1:]), make)
        return (
            self._cached(("parsed", id(run), *key), lambda: (run, make()))[1]
            if self._keep_parsed
            else make()
        )

    def _cached(self, key, make):
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key]
        value = make()
        with self._lock:
            self._cache[key] = value
            while len(self._cache) > self._max:
                self._cache.popitem(last=False)
        return value

    def bench_runs(self) -> list[Run]:
        return self.runs(("bench",))

    def _bench_key(self) -> tuple[str, ...]:
        return tuple(r.run_id for r in self.bench_runs())

    # ---- measured ceilings -----------------------------------------------------------------------
    def ceiling_choices(self) -> tuple[dict[str, str], frozenset[str]]:
        """(GPU model -> pinned run id, excluded run ids) from the store's settings (`kernelscope ceilings`)."""
        c = self.store.settings().get("ceilings") or {}
        pinned = c.get("pinned") if isinstance(c.get("pinned"), dict) else {}
        excluded = c.get("excluded") if isinstance(c.get("excluded"), list) else []
        return ({str(k): str(v) for k, v in pinned.items()}, frozenset(str(x) for x in excluded))

    def _ceilings_key(self) -> tuple:
        return self._bench_key() + (self.store.settings_stamp(),)

    def ceilings(self) -> pl.DataFrame:
        """Every measured ceiling of the store's bench runs, newest run first, judged
        (analyzers.ceilings. JUDGED_SCHEMA: status trusted / rejected / excluded / not pinned, with
        the reason)."""

        def make():
            runs = self.bench_runs()
            labels = ceilings.gpu_labels(
                [(r.run_id, r.meta.get("gpu_name"), r.meta.get("gpu_uuid")) for r in runs]
            )
            frames = [
                ceilings.ceilings_frame(
                    r.table("ceilings"),
                    run_id=r.run_id,
                    gpu_name=r.meta.get("gpu_name"),
                    gpu_label=labels[r.run_id],
                    host=(r.meta.get("host") or {}).get("id"),
                )
                for r in runs
                if "ceilings" in r.tables
            ]
            frame = pl.concat(frames) if frames else pl.DataFrame(schema=ceilings.CEILING_SCHEMA)
            return ceilings.judge_ceilings(frame, *self.ceiling_choices())

        return self._cached(("ceilings", self._ceilings_key()), make)

    def ceiling_records(self) -> list[dict]:
        """The trusted ceiling records of the bench runs (newest first) with run_id and gpu_name, for the claims."""
        trusted = {
            (r["run_id"], r["ceiling"])
            for r in self.ceilings().filter(pl.col("status") == "trusted").iter_rows(named=True)
        }
        out = []
        for r in self.bench_runs():
            if "ceilings" in r.tables:
                for row in r.table("ceilings").iter_rows(named=True):
                    if (r.run_id, row["metric"]) in trusted:
                        out.append({**row, "run_id": r.run_id, "gpu_name": r.meta.get("gpu_name")})
        return out

    def best_ceilings(self, gpu_name: str, host: str | None = None) -> dict[str, ceilings.Ceiling]:
        return ceilings.best_ceilings(self.ceilings(), gpu_name, host)

    def launch_floor_ns(self, gpu_name: str | None) -> float | None:
        return ceilings.launch_floor_ns(self.ceilings(), gpu_name)

    # ---- analyses
    # ----------------------------------------------------------------------------------
    def _resolve(self, run: Run | Parsed | str) -> Run | Parsed:
        return self.get(run) if isinstance(run, str) else run

    def meta(self, run: Run | Parsed) -> dict:
        """A run's metadata as this Source reads it (with its `gpu` applied)."""
        return with_gpu_override(run.meta, self.gpu)

    def identify(self, run: Run | Parsed | str) -> Identified:
        """The GPU of a run and how it was identified (UnknownName when nothing identifies it)."""
        run = self._resolve(run)
        return identify(run.meta, self.gpu)

    def gpu_label(self, run: Run | Parsed) -> str | None:
        """The GPU as listings show it: the name the file (or --gpu) gives, else the identified one
        marked "(inferred)" or "unknown GPU (CC x.y ...)", else None."""
        meta = self.meta(run)
        if meta.get("gpu_name"):
            return gpu_label(meta["gpu_name"])
        if run.kind not in ("ncu", "bench"):
            return None
        try:
            ident = identify(run.meta, self.gpu)
        except AnalysisError:
            return None
        return f"{ident.spec.name} (inferred)" if ident.inferred else ident.spec.name

    def ncu(self, run: Run | Parsed | str) -> NcuAnalysis:
        run = self._resolve(run)

        def make():
            # imported by the kind that needs it: `analyze` stays quick
            from analyzers.ncu_run import analyze_ncu

            ident = identify(run.meta, self.gpu)
            gpu = ident.spec
            return analyze_ncu(
                run.table("kernels"),
                gpu,
                self.best_ceilings(gpu.name),
                gpu_how=ident.how,
                gpu_warning=ident.warning,
            )

        return self._cached_for(run, ("ncu", self.gpu, self._ceilings_key()), make)

    def trace(
        self,
        run: Run | Parsed | str,
        step_pattern: str | None = None,
        profiler_ns: float | None = None,
    ):
        # the regex naming the steps (default: found), the profiler's cost per event
        run = self._resolve(run)

        def make():
            from analyzers.timeline import summarize

            g, api, meta = run.table("gpu_ops"), run.table("api_calls"), self.meta(run)
            return TraceAnalysis(
                run.kind,
                meta,
                g,
                api,
                summarize(
                    g,
                    api,
                    launch_floor_ns=self.launch_floor_ns(meta.get("gpu_name")),
                    cpu_ops=run.table("cpu_ops"),
                    nvtx=run.table("nvtx"),
                    step_pattern=step_pattern,
                    profiler_ns_per_event=profiler_ns,
                ),
            )

        return self._cached_for(
            run, ("trace", self.gpu, self._ceilings_key(), step_pattern, profiler_ns), make
        )

    def source_hotspots(self, run: Run | str, launch_id: int):
        """Source hot spots of one launch (analyzers.source_hotspots), None without source-level data."""
        run = self._resolve(run)

        def make():
            if "sass" not in run.tables:
                return None
            from analyzers.source_hotspots import source_hotspots

            return source_hotspots(
                self._sass_with_text(run, launch_id),
                self.table(run.run_id, "source_metrics"),
                self.table(run.run_id, "source_files"),
                launch_id,
            )

        return self._cached(("hotspots", run.run_id, launch_id), make)

    def _sass_with_text(self, run: Run, launch_id: int) -> pl.DataFrame:
        """The run's `sass` table with one launch's SASS text and source lines, read from the kept .ncu-rep
        when ingest left them out (collectors.ncu.source_text); without them (a reader failure) its addresses
        stay, ranked by their counters, with no text and no line."""
        sass = self.table(run.run_id, "sass")
        mine = sass.filter(pl.col("id") == launch_id)
        if not mine.height or mine["sass"].null_count() < mine.height:
            return sass
        rest = sass.filter(pl.col("id") != launch_id)
        name = run.manifest.get("source_name", "report.ncu-rep")
        try:
            from collectors.decompress import gunzip_if_needed
            from collectors.ncu import with_source_text

            raw, inner = gunzip_if_needed(run.artifact_path.read_bytes(), name)
            if inner.lower().endswith((".ncu-rep", ".nsight-cuprof-report")):
                return with_source_text(sass, raw, inner, launch_id)
        except (ArtifactError, OSError):
            pass
        return pl.concat([rest, mine.with_columns(pl.lit(None, pl.Int64).alias("line"))])

    def trace_devices(self, run: Run | str) -> list[tuple[int, int]]:
        """The (rank, device) pairs of a trace's GPU ops, sorted: without computing its summary."""
        run = self._resolve(run)
        g = self.table(run.run_id, "gpu_ops")
        return [tuple(r) for r in g.select("rank", "device").unique().sort("rank", "device").rows()]

    def timeline_tracks(self, run: Run | Parsed | str) -> TimelineTracks:
        """Every event of a trace on its track (analyzers.timeline_view.build_tracks), for the zoomable view."""
        from analyzers.timeline_view import build_tracks

        run = self._resolve(run)
        if isinstance(run, Parsed):
            return build_tracks(
                run.table("gpu_ops"),
                run.table("api_calls"),
                run.table("cpu_ops"),
                run.table("nvtx"),
            )
        # cached: the trace's analysis reads them too
        t = lambda name: self.table(run.run_id, name)
        return self._cached(
            ("tracks", run.run_id),
            lambda: build_tracks(t("gpu_ops"), t("api_calls"), t("cpu_ops"), t("nvtx")),
        )

    def ncu_launches_of(self, kernel: dict) -> pl.DataFrame:
        """Launches of the store's Nsight Compute runs that run the same kernel as a timeline's GPU
        op (analyzers.kernel_link.match_launches): their analysed rows with run_id, source_name and
        basis."""
        frames = []
        for r in self.runs(("ncu",)):
            try:
                k = self.ncu(r).kernels
            except Exception:  # noqa: BLE001 - one unreadable run must not hide the others' matches
                continue
            frames.append(
                k.with_columns(
                    pl.lit(r.run_id).alias("run_id"), pl.lit(r.source_name).alias("source_name")
                )
            )
        from analyzers.kernel_link import match_launches

        return (
            match_launches(kernel, pl.concat(frames, how="diagonal_relaxed"))
            if frames
            else pl.DataFrame()
        )

    def run_ceilings(
        self, run: Run | Parsed, gpu_name: str | None = None
    ) -> dict[str, ceilings.Ceiling]:
        """The measured ceilings a bench run's predictions use: the store's best for its GPU
        (`gpu_name`, else the run's; host-side ones from the run's host), overridden by the run's
        own (same host, same session)."""
        name = gpu_name or run.meta.get("gpu_name")
        host = (run.meta.get("host") or {}).get(
            "id"
        ) or f"host of run {getattr(run, 'run_id', None) or 'this file'}"
        own = ceilings.best_ceilings(
            ceilings.ceilings_frame(
                run.table("ceilings") if "ceilings" in run.tables else pl.DataFrame(),
                run_id=getattr(run, "run_id", None) or "this file",
                gpu_name=name,
                host=host,
            ),
            name or "unknown GPU",
        )
        return {**(self.best_ceilings(name, host) if name else {}), **own}

    def multirank(
        self,
        run: Run | Parsed | str,
        *,
        executor=None,
        step_pattern: str | None = None,
        threshold: float | None = None,
        summary=None,
    ):
        """The cross-rank view of a trace run (analyzers.stragglers.MultiRank): per rank and
        iteration, the straggler and its cause, collectives. A stored run of many ranks is reduced
        rank by rank on `executor` (default: in this process when small, else a process pool), each
        task reading its rank from the store; a Parsed file in this process. `summary`: the run's
        trace(run).summary when the caller has it (not computed again)."""
        from analyzers.stragglers import STRAGGLER_THRESHOLD, combine
        from dashboard.core import execute, ranks

        run = self._resolve(run)
        thr = STRAGGLER_THRESHOLD if threshold is None else threshold

        def in_process(parsed):
            floors = {
                parsed.meta.get("gpu_name"): self.launch_floor_ns(parsed.meta.get("gpu_name"))
            }
            return combine(
                ranks._summaries(
                    parsed,
                    getattr(run, "source_name", "trace"),
                    step_pattern,
                    floors,
                    summary=summary,
                ),
                threshold=thr,
            )

        if isinstance(run, Parsed):
            return in_process(run)

        def make():
            n = len(run.meta.get("ranks") or [0])
            ex = executor or execute.make_executor(total_bytes=run.info.size_bytes, tasks=n)
            if isinstance(ex, execute.SerialExecutor):
                return in_process(
                    Parsed(
                        run.kind,
                        {t: self.table(run.run_id, t) for t in ("gpu_ops", "nvtx")},
                        run.meta,
                    )
                )
            floors = {g: self.launch_floor_ns(g) for g in {run.meta.get("gpu_name")}}
            return ranks.analyze_sources(
                ranks.run_sources(run), ex, step_pattern=step_pattern, threshold=thr, floors=floors
            )[0]

        if executor is not None:
            return make()
        return self._cached(("multirank", run.run_id, step_pattern, thr, self._bench_key()), make)

    def bench(self, run: Run | Parsed | str) -> BenchAnalysis:
        run = self._resolve(run)

        def make():
            # the case catalog: bench runs only
            from analyzers.cases.bench_verdicts import attach, skipped_checks

            try:
                gpu = gpu_for(run.meta, self.gpu)
            except LookupError:
                # a CPU-only run, or a GPU neither the registry nor the file describes
                gpu = None
            res = attach(
                run.table("results"), gpu, self.run_ceilings(run, gpu.name if gpu else None)
            )
            return BenchAnalysis(
                run.meta,
                gpu,
                res,
                run.table("ceilings"),
                list(run.meta.get("failures") or []),
                skipped_checks(run.meta, res),
            )

        return self._cached_for(run, ("bench", self.gpu, self._bench_key()), make)

    def bench_results(self) -> pl.DataFrame:
        """Every bench result of the store (with verdicts) and its run's GPU: gpu_name, gpu (label), run_id."""

        def make():
            runs = self.bench_runs()
            labels = ceilings.gpu_labels(
                [(r.run_id, r.meta.get("gpu_name"), r.meta.get("gpu_uuid")) for r in runs]
            )
            frames = [
                self.bench(r).results.with_columns(
                    gpu_name=pl.lit(r.meta.get("gpu_name") or "unknown GPU"),
                    gpu=pl.lit(labels[r.run_id]),
                    run_id=pl.lit(r.run_id),
                )
                for r in runs
            ]
            return (
                pl.concat(frames, how="diagonal_relaxed")
                if frames
                else pl.DataFrame(
                    schema={
                        "case": pl.String,
                        "metric": pl.String,
                        "value": pl.Float64,
                        "unit": pl.String,
                        "params": pl.String,
                        "cv": pl.Float64,
                        "source": pl.String,
                        "predicted": pl.Float64,
                        "predicted_unit": pl.String,
                        "verdict": pl.String,
                        "gpu_name": pl.String,
                        "gpu": pl.String,
                        "run_id": pl.String,
                    }
                )
            )

        return self._cached(("bench_results", self._bench_key()), make)

    def join(
        self,
        ncu_run: Run | Parsed | str,
        trace_run: Run | Parsed | str,
        step_pattern: str | None = None,
    ):
        """analyzers.join.join of an ncu run with a timeline of the same program (cached); step_pattern: as steps."""
        from analyzers.join import join

        a, t = self._resolve(ncu_run), self._resolve(trace_run)
        if a.kind != "ncu":
            raise RunNotFound(
                getattr(a, "run_id", "?"),
                f"a {a.kind} run, not an Nsight Compute run",
                message=f"{getattr(a, 'run_id', 'the first run')} is a {a.kind} run, "
                "not an Nsight Compute run",
            )
        if t.kind not in TRACE_KINDS:
            raise RunNotFound(
                getattr(t, "run_id", "?"),
                f"a {t.kind} run, not a timeline",
                message=f"{getattr(t, 'run_id', 'the second run')} is a {t.kind} "
                "run, not a PyTorch profiler trace or Nsight Systems export",
            )

        def make():  # stored tables: no wait for the trace's summary
            return join(
                self.ncu(a).kernels,
                *[
                    t.table(n) if isinstance(t, Parsed) else self.table(t.run_id, n)
                    for n in ("gpu_ops", "nvtx")
                ],
                step_pattern=step_pattern,
            )

        return (
            make()
            if isinstance(a, Parsed) or isinstance(t, Parsed)
            else self._cached(
                ("join", a.run_id, t.run_id, self.gpu, self._bench_key(), step_pattern), make
            )
        )

    def analysis(self, run: Run | Parsed | str):
        """The analysis of any run, by kind."""
        run = self._resolve(run)
        if run.kind == "ncu":
            return self.ncu(run)
        if run.kind in TRACE_KINDS:
            return self.trace(run)
        if run.kind == "bench":
            return self.bench(run)
        raise RunNotFound(getattr(run, "run_id", "?"), f"has an unknown kind {run.kind!r}")

    # ---- ingest: parse, check that it can be analysed, store
    # ------------------------------------------
    def check(self, parsed: Parsed, name: str, gpu: str | None = None) -> None:
        """ArtifactError (naming the file) unless `analyze` can analyse this parsed file: the one
        check that keeps ingest and analyze in agreement (an ncu run needs an identified GPU; every
        kind is analysed once), so no stored run can break the analyses or the pages. Any exception
        of the analysis refuses the file. A kind registered by a plug-in (collectors.formats) that
        the core has no analysis for is checked by its format's own `check` when parsed, and its
        page reads its tables."""
        if parsed.kind not in ("ncu", "bench", *TRACE_KINDS):
            return
        probe = (
            self
            if self._keep_parsed and not gpu
            else Source(self.store, cache_entries=1, gpu=gpu or self.gpu)
        )
        try:
            probe.analysis(parsed)
        except InputError:
            raise
        except AnalysisError as e:
            raise ArtifactError(name, str(e)) from None
        # any exception: whatever the analysis cannot take is refused, never stored
        except Exception as e:
            first = " ".join((str(e).splitlines() or [""])[0].split())[:160]
            raise ArtifactError(
                name, f"cannot be analysed ({type(e).__name__}: {first}); nothing was stored"
            ) from None

    def ingest_bytes(
        self, data: bytes, name: str, gpu: str | None = None, path: str | None = None
    ) -> tuple[Run, bool]:
        """Parse, check (`check`), store: (run, created); a stored file is returned as stored.
        `path`: where it lies (a console log beside it: collectors.ncu_log)."""
        gpu = get_gpu(gpu).name if gpu else self.gpu
        from collectors.store import run_id_for

        rid = run_id_for(data)
        if rid in self.store:
            return self.store.get(rid), False
        parsed = parse_bytes(data, name)
        progress.report("analysing")
        self.check(parsed, name, gpu)
        progress.report("storing")
        return self.store.put_bytes(
            data,
            name,
            parsed,
            gpu=gpu,
            companion=companion_warnings(parsed, path) if path else None,
        )

    def ingest_path(self, path, gpu: str | None = None) -> tuple[Run, bool]:
        """A file, or a folder of rank traces (one run); errors name the path as given."""
        data, name = read_path(path)
        try:
            return self.ingest_bytes(data, name, gpu, path=str(path))
        except ArtifactError as e:
            raise ArtifactError(str(path), e.problem) from None

    # ---- baselines
    # ----------------------------------------------------------------------------------
    def compare(
        self, a: Run | Parsed | str, b: Run | Parsed | str, noise_floor: float | None = None
    ) -> CompareResult:
        """Run B against run A (analyzers.compare.compare_ncu / compare_traces): what `kernelscope
        compare` prints and the Compare page shows. Both runs must be Nsight Compute runs, or both
        traces. noise_floor: None is analyzers.compare.NOISE_FLOOR."""
        from analyzers.baseline import trace_values
        from analyzers.compare import NOISE_FLOOR, compare_ncu, compare_traces

        noise_floor = NOISE_FLOOR if noise_floor is None else noise_floor
        a, b = self._resolve(a), self._resolve(b)

        def make():
            if a.kind == "ncu" and b.kind == "ncu":
                extra = lambda r: self.ncu(r).kernels.with_columns(  # noqa: E731
                    dram_pct=pl.col("dram_peak_fraction") * 100,
                    fp32_pct=pl.col("fp32_peak_fraction") * 100,
                )
                return compare_ncu(
                    extra(a),
                    extra(b),
                    a.table("metrics"),
                    b.table("metrics"),
                    noise_floor=noise_floor,
                    extra=("dram_pct", "fp32_pct"),
                    sections_a=_sections(a),
                    sections_b=_sections(b),
                )
            if a.kind in TRACE_KINDS and b.kind in TRACE_KINDS:
                ta, tb = self.trace(a), self.trace(b)
                return compare_traces(
                    ta.gpu_ops,
                    tb.gpu_ops,
                    trace_values(ta.summary, ta.gpu_ops),
                    trace_values(tb.summary, tb.gpu_ops),
                    noise_floor=noise_floor,
                )
            raise RunNotFound(
                getattr(b, "run_id", "?"),
                "not comparable",
                message=(
                    f"cannot compare a {a.kind} run (A) with a {b.kind} run (B): Nsight Compute "
                    "runs compare with Nsight Compute runs, traces with traces"
                ),
            )

        if isinstance(a, Parsed) or isinstance(b, Parsed):
            return make()
        return self._cached(("compare", a.run_id, b.run_id, noise_floor, self._bench_key()), make)

    def related_run(self, b: Run) -> Run | None:
        """The newest other run of B's kind that shares at least half of its kernels
        (analyzers.baseline .relatedness): the run a comparison with B defaults to; None when there
        is none (unrelated runs are never compared by default)."""
        from analyzers.baseline import relatedness

        kinds = TRACE_KINDS if b.kind in TRACE_KINDS else (b.kind,)
        names = self._kernel_names(b)
        for r in self.runs(kinds):
            if r.run_id != b.run_id and relatedness(self._kernel_names(r), names)["related"]:
                return r
        return None

    def _kernel_names(self, run: Run) -> list[str]:
        def make():
            if run.kind == "ncu":
                return self.table(run.run_id, "kernels")["kernel_name"].unique().to_list()
            if run.kind in TRACE_KINDS:
                g = self.table(run.run_id, "gpu_ops")
                return g.filter(pl.col("kind") == "kernel")["name"].unique().to_list()
            return (
                self.table(run.run_id, "results")["case"].unique().to_list()
                if "results" in run.tables
                else []
            )

        return self._cached(("names", run.run_id), make)

    # ---- the run index: cross-run questions
    # ----------------------------------------------------------
    def history(self, query):
        """query(collectors.index.Index) -> its result, on the store's run index (refreshed first; built in memory
        when the store cannot be written)."""
        from collectors import index as run_index

        try:
            self.store.refresh_index()
        except OSError:
            return query(run_index.memory_index(self.store.root, self.runs()))
        return run_index.collect(self.store.root, query)

    # ---- textbook cases and claims
    # -------------------------------------------------------------------
    def case_measurements(self, case_id: str, gpu_name: str, params: dict | None = None) -> list:
        """Stored measurements of a textbook case on one GPU at `params` (None: the chapter's): ncu
        launches that run the case by their counters (analyzers.cases.kernel_match) and whose own
        configuration predicts the same value (never judged against another configuration's
        prediction). Bench results: case_bench_rows."""
        from analyzers.cases import evaluate
        from analyzers.cases.kernel_match import kernel_comparisons

        try:
            page = evaluate(case_id, gpu_name, params or None)
        except (LookupError, ValueError):
            return []
        keys = set(page.predictions)

        # the launch's own configuration predicts what the page's does
        def same_prediction(c) -> bool:
            a, b = c.prediction, page.predictions.get(c.quantity)
            if b is None or not a.numeric or not b.numeric or a.value is None or b.value is None:
                return False
            return abs(a.value - b.value) <= 1e-9 * max(abs(a.value), abs(b.value), 1.0)

        out = []
        for run in self.runs(("ncu",)):
            if not _same_gpu(run.meta.get("gpu_name"), gpu_name):
                continue
            a = self.ncu(run)
            metrics = self.table(run.run_id, "metrics").drop_nulls("value")
            for row in a.kernels.iter_rows(named=True):
                mk = metrics.filter(pl.col("id") == row["id"])
                src = f"ncu run {run.run_id}, launch {row['id']} ({row['display_name']})"
                for kc in kernel_comparisons(
                    row, dict(zip(mk["metric"].to_list(), mk["value"].to_list())), a.gpu, source=src
                ):
                    if kc.case_id != case_id:
                        continue
                    out += [
                        c.measurement
                        for c in kc.comparisons
                        if c.quantity in keys and same_prediction(c)
                    ]
        return out

    def case_bench_rows(self, case_id: str, gpu_name: str) -> pl.DataFrame:
        """The store's bench results of a textbook case on one GPU that have a prediction: each
        judged at its own parameters with the run's measured ceilings (the same verdict the bench
        run shows)."""
        res = self.bench_results()
        if not res.height or "predicted" not in res.columns:
            return res
        res = res.filter((pl.col("case") == case_id) & pl.col("predicted").is_not_null())
        return (
            res.filter(
                pl.col("gpu_name").map_elements(
                    lambda n: _same_gpu(n, gpu_name), return_dtype=pl.Boolean
                )
            )
            if res.height
            else res
        )

    def claim_measurements(self) -> dict:
        from analyzers.cases.claims import claim_measurements

        return self._cached(
            ("claims", self._ceilings_key()), lambda: claim_measurements(self.ceiling_records())
        )


def _sections(run: Run | Parsed) -> pl.DataFrame | None:
    """A ncu run's metric_sections table (None for runs stored before it existed: no section known)."""
    return run.table("metric_sections") if "metric_sections" in run.tables else None


def _same_gpu(name, gpu_name) -> bool:
    want = find_gpu(gpu_name)
    return bool(name) and (name == gpu_name or (want is not None and find_gpu(name) is want))


def params_json(v) -> str:
    return v if isinstance(v, str) else json.dumps(v, sort_keys=True)
