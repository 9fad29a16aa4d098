"""`kernelscope ingest | runs | analyze | gpus | dashboard`.
Start-up: imports that only some commands, pages or GPUs need sit inside the functions that use
them, so each command loads what it uses."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from enum import Enum
from typing import Annotated, Optional

import typer

from analyzers.errors import AnalysisError
from analyzers.quantities import cli_columns, json_units
from collectors import progress
from collectors.errors import ArtifactError, InputError, StoreError
from collectors.formats import TRACE_KINDS
from dashboard.cli._app import (
    Format,
    GpuOpt,
    ListFormat,
    MaxMBOpt,
    StoreOpt,
    app,
    apply_limits,
    echo_json,
    load,
    open_source,
    open_store,
    repo_root,
)
from dashboard.cli.render import print_table, to_csv


@app.command()
def ingest(
    paths: Annotated[list[Path], typer.Argument(help="Files or folders (walked recursively).")],
    store: StoreOpt = None,
    gpu: GpuOpt = None,
    max_decompressed_mb: MaxMBOpt = None,
) -> None:
    """Parse artifacts (ncu .ncu-rep/CSV, PyTorch traces, nsys SQLite, bench results) into the run
    store and print one line per file: run id, kind, file. A file is stored only if `kernelscope
    analyze` can analyse it (an Nsight Compute export whose GPU cannot be identified needs --gpu);
    bad files are reported and skipped, nothing of them is stored. Warnings a run is stored with
    follow its line. Exit code 1 if any file failed."""
    from collectors.ingest import expand_paths

    apply_limits(max_decompressed_mb)
    src = open_source(store, gpu)
    failed = 0
    for p in expand_paths(paths):
        try:
            run, created = src.ingest_path(p)
        # a full disk: this file is not stored, the next ones are tried
        except StoreError as e:
            typer.echo(f"kernelscope: {p}: not stored: {e.problem}", err=True)
            failed += 1
            continue
        except InputError as e:
            typer.echo(f"kernelscope: {e}", err=True)
            failed += 1
            continue
        typer.echo(f"{run.run_id}\t{run.kind}\t{p}\t{'new' if created else 'already stored'}")
        stored_gpu = run.manifest.get("gpu_override")
        if not created and src.gpu and stored_gpu != src.gpu:
            typer.echo(
                f"kernelscope: {p}: already stored "
                f"{'with GPU ' + stored_gpu if stored_gpu else 'without --gpu'}; --gpu {src.gpu} "
                f"applies to `analyze {run.run_id} --gpu ...` only (a run is its file's content)",
                err=True,
            )
        if created:
            for w in run.meta.get("warnings") or []:
                typer.echo(f"  warning: {w}", err=True)
    if failed:
        raise typer.Exit(1)


class Compat(str, Enum):
    hta = "hta"


@app.command()
def rm(
    run_ids: Annotated[list[str], typer.Argument(help="Run ids (or unique prefixes) to delete.")],
    store: StoreOpt = None,
) -> None:
    """Delete runs from the store: each run's folder is renamed out of the store's listing in one
    step, then removed (nothing is left half-deleted). Prints one line per run; exit code 1 if any
    id is unknown."""
    from collectors.errors import RunNotFound

    st = open_store(store)
    failed = 0
    for rid in run_ids:
        try:
            run = st.delete(rid)
        except RunNotFound as e:
            typer.echo(f"kernelscope: {e}", err=True)
            failed += 1
            continue
        typer.echo(f"{run.run_id}\t{run.kind}\t{run.source_name}\tdeleted")
    if failed:
        raise typer.Exit(1)


# ---- Nsight Compute
# -------------------------------------------------------------------------------------

#: keys of the per-kernel JSON (`kernelscope analyze --format json`) with their units, and the
#: table's columns: the quantity catalog's (analyzers.quantities); values come from
#: analyzers.ncu_run.NcuAnalysis.kernels unchanged
NCU_COLUMNS: dict[str, str] = json_units()
NCU_TABLE = cli_columns()

#: the textbook model's columns of the table (analyzers.kernel_models): the launch carrying an op's
#: model has them
MODEL_TABLE = [
    ("model_class", "class", None),
    ("model_pred_ns", "model [µs]", 1e-3),
    ("model_ratio", "meas/model", 1),
    ("model_verdict", "vs textbook", None),
]


def ncu_report(a, source: str) -> dict:
    """The JSON of an ncu analysis (analyzers.ncu_run.NcuAnalysis); `kernels` is a polars DataFrame
    (echo_json writes it row by row, NaN and infinities as null)."""
    gpu = a.gpu
    rows = a.kernels.rename({"kernel_name": "name"}).select(list(NCU_COLUMNS))
    return {
        "source": source,
        "kind": "ncu",
        "gpu": {
            "name": gpu.name,
            "cc": f"{gpu.cc[0]}.{gpu.cc[1]}" if gpu.cc else None,
            "sm_count": gpu.sm_count,
            "dram_bandwidth_bytes_per_s": gpu.dram_bandwidth_bytes_per_s,
            "dram_bandwidth_source": gpu.source_of("dram_bandwidth_bytes_per_s"),
            "from_registry": gpu.from_registry,
            "identified": a.gpu_how,
        },
        "measured_ceilings": {
            k: {"value": c.value, "source": c.source} for k, c in a.measured.items()
        },
        "kernels": rows,
        "missing": a.missing,
        "units": NCU_COLUMNS,
        "flagged": a.flagged,
    }


def report_for(
    src,
    run,
    source: str,
    *,
    executor=None,
    step: str | None = None,
    threshold: float | None = None,
    profiler_ns: float | None = None,
    trace=None,
    trace_shapes=None,
) -> tuple[dict, list[dict], list[tuple]]:
    """(JSON report, rows for table/csv, table columns) for any run kind; every report carries the
    run's `warnings` and what its file `lacks` (collectors: the format or version does not provide
    it). A file whose GPU cannot be identified is an ArtifactError naming it (as `ingest` says it).
    Trace runs also get the multi-rank sections (ranks, iterations, collectives, iteration_times),
    reduced on `executor` for stored runs."""
    if run.kind == "ncu":
        try:
            a = src.ncu(run)
        except AnalysisError as e:
            raise ArtifactError(source, str(e)) from None
        rep, cols = ncu_report(a, source), NCU_TABLE + MODEL_TABLE
        from dashboard.core.textbook import models_for, report_section

        models = models_for(src, run, trace, shapes=trace_shapes)
        rep["kernels"], rep["models"] = report_section(models, rep["kernels"])
        rows = rep["kernels"]
        warnings = list(run.meta.get("warnings") or []) + ([a.gpu_warning] if a.gpu_warning else [])
    elif run.kind in TRACE_KINDS:
        from dashboard.cli import ranks, timeline

        if step:
            from analyzers.steps import check_step_pattern

            try:
                check_step_pattern(step)
            except AnalysisError as e:
                raise typer.BadParameter(str(e)) from None
        tr = src.trace(run, step, profiler_ns)
        rep = timeline.report(tr)
        rep.update(
            ranks.sections(
                src.multirank(
                    run,
                    executor=executor,
                    step_pattern=step,
                    threshold=threshold,
                    summary=tr.summary,
                )
            )
        )
        rows, cols = rep["kernels"], timeline.TABLE_COLUMNS
        warnings = list(run.meta.get("warnings") or [])
    elif run.kind == "bench":
        from dashboard.cli import bench

        rep = bench.report(src.bench(run))
        rows, cols = rep["results"], bench.TABLE_COLUMNS
        warnings = list(run.meta.get("warnings") or [])
        # the ceilings this run measured, as the store judges them (trusted / rejected, measured
        # while throttled)
        judged = src.ceilings()
        rid = getattr(run, "run_id", None)
        rep["ceiling_status"] = (
            [
                {
                    k: r.get(k)
                    for k in (
                        "ceiling",
                        "resource",
                        "value",
                        "unit",
                        "cv",
                        "status",
                        "throttled",
                        "reason",
                    )
                }
                for r in judged.filter(judged["run_id"] == rid).to_dicts()
            ]
            if rid
            else []
        )
    else:
        raise ArtifactError(source, f"no analysis for runs of kind {run.kind!r}")
    rep["warnings"] = warnings
    rep["lacks"] = list(run.meta.get("lacks") or [])
    if run.kind == "ncu":
        rep["precision"] = run.meta.get("precision") or {"exact": None, "rounded": [], "note": None}
    return rep, rows, cols


RayOpt = Annotated[
    Optional[str],
    typer.Option(
        "--ray",
        metavar="[ADDRESS]",
        help="Run the per-rank tasks on a Ray cluster: the one of RAY_ADDRESS or a local `ray "
        "start --head` (no value), HOST:PORT, or 'local' for a private instance (needs the ray "
        "extra).",
    ),
]
WorkersOpt = Annotated[
    Optional[int],
    typer.Option(
        "--workers",
        min=1,
        help="Worker processes for the per-rank tasks (default: one per core for large inputs).",
    ),
]
StepOpt = Annotated[
    Optional[str],
    typer.Option(
        "--step",
        metavar="REGEX",
        help="Regex naming the "
        "iteration ranges, one group = the step number (default: ProfilerStep#N, then 'step N').",
    ),
]
ThresholdOpt = Annotated[
    float,
    typer.Option(
        "--straggler-threshold",
        min=0.0,
        help="A rank is a "
        "straggler when it is later than the median by more than this fraction of the median step.",
    ),
]


def analyze_ranks(
    target: str,
    store,
    format: Format,
    ray: Optional[str],
    workers: Optional[int],
    step: Optional[str],
    threshold: float,
) -> None:
    """`kernelscope analyze FOLDER_OR_GLOB`: one task per rank trace on a process pool or Ray,
    summaries only back here (dashboard.core.ranks)."""
    from dashboard.core import execute, ranks
    from dashboard.cli import ranks as cli_ranks

    src = open_source(store)
    sources = ranks.path_sources(target)
    total = sum(os.path.getsize(s.path) for s in sources)
    ex = execute.make_executor(ray=ray, workers=workers, total_bytes=total, tasks=len(sources))
    floors = {
        c["gpu_name"]: src.launch_floor_ns(c["gpu_name"])
        for c in src.ceilings().select("gpu_name").unique().to_dicts()
    }
    mr, info = ranks.analyze_sources(
        sources,
        ex,
        step_pattern=step,
        threshold=threshold,
        floors=floors,
        on_done=cli_ranks.progress(),
    )
    rep = cli_ranks.folder_report(mr, info, target)
    if format is Format.json:
        echo_json(rep)
    elif format is Format.csv:
        sys.stdout.write(to_csv(cli_ranks.csv_rows(rep)))
    else:
        typer.echo(
            f"{target}: {rep['summary']['rank_count']} ranks, {rep['summary']['iteration_count']} "
            "iterations"
            + (
                f", GPU {', '.join(rep['summary']['gpu_names'])}"
                if rep["summary"]["gpu_names"]
                else ""
            )
        )
        cli_ranks.print_tables(rep)
    cli_ranks.echo_execution(info)
    if info.failures:
        raise typer.Exit(1)


@app.command()
def analyze(
    path_or_run: Annotated[
        str,
        typer.Argument(
            help="An artifact file, a folder or glob of rank "
            "traces, or a run id (or unique prefix) in the store."
        ),
    ],
    store: StoreOpt = None,
    format: Annotated[Format, typer.Option("--format", "-f")] = Format.table,
    gpu: GpuOpt = None,
    max_decompressed_mb: MaxMBOpt = None,
    compat: Annotated[
        Optional[Compat],
        typer.Option(
            "--compat",
            help="Also give a trace's launch and idle statistics as another tool defines "
            "them (hta: Holistic Trace Analysis), next to Kernelscope's, with the difference.",
        ),
    ] = None,
    ray: RayOpt = None,
    workers: WorkersOpt = None,
    step: StepOpt = None,
    straggler_threshold: ThresholdOpt = 0.02,
    profiler_event_us: Annotated[
        Optional[float],
        typer.Option(
            "--profiler-event-us",
            min=0.0,
            help="Host time the profiler adds per recorded CPU op or "
            "runtime call, in µs, to estimate its overhead per step (default: our calibration, "
            "analyzers.steps.PROFILER_NS_PER_EVENT).",
        ),
    ] = None,
    trace: Annotated[
        Optional[str],
        typer.Option(
            "--trace",
            help="For an Nsight Compute report: a PyTorch profiler trace (file or run id) "
            "of the same program, recorded with record_shapes=True. Its launches are joined to the "
            "report's and its aten ops' shapes give the textbook models' parameters (M, N, K; rows "
            "× width; minimum traffic).",
        ),
    ] = None,
) -> None:
    """Analyze one artifact or stored run: per-kernel duration, DRAM bandwidth and its fraction of
    the GPU's peak, occupancy (ncu's and ours, with the limiter), bank-conflict degree, coalescing,
    the biggest finding; or, for traces, launch delays and GPU idle time, and per rank and iteration
    the straggler and its cause; or, for bench runs, measurements next to predictions. A folder or
    glob of rank traces (Kineto or nsys) is analysed rank by rank in parallel (--workers, --ray).
    Measured ceilings of the store's bench runs are used as in the dashboard. Warnings and what the
    file lacks (its format or version does not record it) are printed after the table."""
    apply_limits(max_decompressed_mb)
    from dashboard.core.ranks import is_multi_rank_target

    if is_multi_rank_target(path_or_run):
        analyze_ranks(path_or_run, store, format, ray, workers, step, straggler_threshold)
        return
    # the file's check computes the analysis reported
    src = open_source(store, gpu, keep_parsed=True)
    # the report shows no other metric
    run, source = load(path_or_run, store, gpu, src=src, metrics="analysis")
    executor = None
    from collectors.store import Run

    if (ray is not None or workers) and isinstance(run, Run) and run.kind in TRACE_KINDS:
        from dashboard.core import execute

        executor = execute.make_executor(ray=ray, workers=workers, mode="pool", tasks=2)
    trace_run, shapes = None, None
    if trace is not None:
        if run.kind != "ncu":
            raise typer.BadParameter(
                f"--trace joins a trace to an Nsight Compute report; {source} is a {run.kind} run"
            )
        trace_run, trace_name = load(trace, store, gpu, src=src)
        if trace_run.kind not in TRACE_KINDS:
            raise typer.BadParameter(
                f"--trace {trace}: a {trace_run.kind} run, not a PyTorch profiler trace"
            )
        if Path(trace).exists():
            from dashboard.core.textbook import shapes_of

            shapes = shapes_of(src, None, Path(trace).read_bytes(), trace_name)
    rep, rows, cols = report_for(
        src,
        run,
        source,
        executor=executor,
        step=step,
        threshold=straggler_threshold,
        profiler_ns=None if profiler_event_us is None else profiler_event_us * 1e3,
        trace=trace_run,
        trace_shapes=shapes,
    )
    if compat is not None:
        if run.kind not in TRACE_KINDS:
            raise typer.BadParameter(
                f"--compat {compat.value} compares trace statistics; {source} is a {run.kind} run"
            )
        from analyzers.hta_compat import compare

        rep["compat"] = {
            "hta": compare(run.table("gpu_ops"), int(run.meta.get("base_time_ns") or 0)),
            "definitions": "analyzers/hta_compat.py (README: Numbers next to HTA and TraceLens)",
        }
    progress.report("writing")
    if format is Format.json:
        echo_json(rep)
    elif format is Format.csv:
        sys.stdout.write(to_csv(rows))
    else:
        head = rep.get("gpu", {})
        if isinstance(head, dict) and head.get("name"):
            typer.echo(f"{source}: {run.kind}, GPU {head.get('identified') or head['name']}")
        elif run.kind in TRACE_KINDS:
            typer.echo(
                f"{source}: {run.kind}, GPU "
                f"{src.meta(run).get('gpu_name') or 'not named in the file'}"
            )
        if rep.get("ceiling_status"):
            typer.echo(
                "measured ceilings (status: how the store uses them; throttled: measured while "
                "NVML reported a clock-event reason, a lower bound):"
            )
            print_table(
                rep["ceiling_status"],
                [
                    ("ceiling", "ceiling", None),
                    ("value", "value", None),
                    ("unit", "unit", None),
                    ("cv", "cv", None),
                    ("status", "status", None),
                    ("throttled", "throttled", None),
                    ("reason", "why", None),
                ],
            )
            typer.echo("")
        print_table(rows, cols)
        if rep.get("models"):
            echo_models(rep["models"])
        for d in rep.get("summary", {}).get("devices", []):
            graph = (
                f", {d['graph_launch_count']:,} of them graph launches running "
                f"{d['graph_kernel_count']:,} kernels"
                if d.get("graph_launch_count")
                else ""
            )
            lat = d.get("launch_latency_median_us")
            typer.echo(
                f"rank {d['rank']} device {d['device']}: {d['kernel_count']} kernels "
                f"({d['kernels_with_launch']} with their launch call); "
                f"{d.get('launch_call_count', 0):,} launch calls{graph}; GPU busy "
                f"{d['gpu_busy_ns'] / 1e6:.3f} ms of a {d['gpu_window_ns'] / 1e6:.3f} ms window "
                f"(idle {100 * (d['gpu_idle_fraction'] or 0):.1f} %, union of op intervals); "
                + (
                    "launch latency (start − max(call end, stream free)) median "
                    f"{lat:g} µs, {100 * (d.get('queued_share') or 0):.0f} % of kernels queued "
                    f"behind earlier GPU work; "
                    if lat is not None
                    else "no kernel launched by a call of its own; "
                )
                + f"{d.get('bound', '')}: {d.get('bound_evidence', '')}"
            )
        from dashboard.cli.timeline import integrity_lines, step_lines

        for line in step_lines(rep) + integrity_lines(rep):
            typer.echo(line)
        for m in rep.get("missing", []):
            typer.echo(
                f"missing: {m['quantity']} (needs {', '.join(m['needs'])}; collect with "
                f"{m['collect_with']})"
            )
        for f in rep.get("flagged", []):
            typer.echo(f"FLAGGED launch {f['id']} ({f['name']}): {'; '.join(f['flags'])}")
        if rep.get("skipped_checks"):
            from dashboard.cli.bench import echo_skipped

            echo_skipped(rep["skipped_checks"])
        for c in (rep.get("compat") or {}).get("hta", []):
            _print_hta(c)
        for w in rep["warnings"]:
            typer.echo(f"warning: {w}")
        for x in rep["lacks"]:
            typer.echo(f"the file lacks {x}")
        if (rep.get("precision") or {}).get("note"):
            typer.echo(f"precision: {rep['precision']['note']}")


def echo_models(models: dict) -> None:
    """The textbook's models after the table: the sentence, the works with the most to win, the fusable chains."""
    s = models["summary"]
    typer.echo(f"textbook: {s['sentence']}")
    for t in s["top"]:
        typer.echo(
            f"  to win {t['win_ns'] / 1e3:,.1f} µs: {t['ops']} × {t['class']} "
            f"({t['op'] or 'no op'}; {t['params']}), measured {t['measured_ns'] / 1e3:,.1f} µs "
            f"against a model of {t['predicted_ns'] / 1e3:,.1f} µs"
        )
    for c in models["chains"]:
        typer.echo(
            f"  fusable chain {' -> '.join(c['ops'])} (launches "
            f"{', '.join(map(str, c['launches']))}): {c['measured_ns'] / 1e3:.1f} µs now, "
            f"{c['fused_predicted_ns'] / 1e3:.1f} µs fused (model)"
        )
    r = models["roofs"]
    typer.echo(
        f"  model: t = n·t0 + max(bytes / DRAM, FLOP / peak); DRAM {(r['dram'] or 0) / 1e12:.2f} "
        f"TB/s ({r['dram_src']}), t0 {r['floor_ns'] / 1e3:.2f} µs ({r['floor_src']})"
    )
    for n in models["notes"]:
        typer.echo(f"  note: {n}")


def _print_hta(c: dict) -> None:
    h, k, d = c["hta"], c["kernelscope"], c["difference"]
    left = ", ".join(f"{n} {why}" for why, n in d["kernels_left_out_by_hta"].items() if n) or "none"
    typer.echo(
        f"rank {c['rank']} as HTA computes it: {h['kernels_with_launch']} kernels joined to "
        f"cudaLaunchKernel/ExC ({h['ops_with_launch']} ops with memcpy/memset), launch delay "
        f"median {_fmt(h['launch_delay_median_us'])} µs (whole µs), idle {_fmt(h['idle_time_us'])} "
        f"of {_fmt(h['kernel_time_us'])} µs (fraction {_fmt(h['idle_fraction'])})"
    )
    typer.echo(
        f"rank {c['rank']} Kernelscope: {k['kernels_with_launch']} of {k['kernels']} kernels with "
        f"their launch call, launch delay median {_fmt(k['launch_delay_median_us'])} µs (ns "
        f"resolution), idle fraction {_fmt(k['idle_fraction'])}"
    )
    typer.echo(
        f"rank {c['rank']} difference: kernels HTA leaves out: {left}; on HTA's ops (those kernels "
        "and the memcpy/memset of cudaMemcpyAsync/cudaMemsetAsync) at ns resolution the median is "
        f"{_fmt(d['hta_definition_at_ns_launch_delay_median_us'])} µs (rounding to whole µs: "
        f"{_fmt(d['rounding_effect_on_median_us'], signed=True)} µs); idle fraction HTA - "
        f"Kernelscope {_fmt(d['idle_fraction_hta_minus_kernelscope'], signed=True)} (HTA rounds "
        "each op inward to whole µs, which adds up to 2 µs of idle per op of a ns-resolution "
        "trace)"
    )


def _fmt(x, signed: bool = False) -> str:
    if x is None:
        return "—"
    return f"{x:+.6g}" if signed else f"{x:.6g}"


@app.command()
def gpus(
    format: Annotated[ListFormat, typer.Option("--format", "-f")] = ListFormat.table,
    store: StoreOpt = None,
) -> None:
    """The GPU spec registry: datasheet numbers with their sources, and the best ceilings
    `kernelscope bench` measured on each GPU in the store (analyzers.ceilings.best_ceilings)."""
    from analyzers.gpus import gpu_rows

    src = open_source(store)
    rows = gpu_rows()
    for r in rows:
        r["measured"] = {
            k: {"value": c.value, "source": c.source}
            for k, c in src.best_ceilings(r["name"]).items()
        }
        r["dram_measured_bytes_per_s"] = (r["measured"].get("dram") or {}).get("value")
    if format is ListFormat.json:
        echo_json({"gpus": rows})
    else:
        print_table(
            rows,
            [
                ("name", "GPU", None),
                ("cc", "CC", None),
                ("sm_count", "SMs", None),
                ("dram_bandwidth_bytes_per_s", "DRAM [GB/s]", 1e-9),
                ("dram_measured_bytes_per_s", "measured [GB/s]", 1e-9),
                ("bf16_dense_flop_per_s", "BF16 dense [TFLOP/s]", 1e-12),
                ("fp32_flop_per_s", "FP32 [TFLOP/s]", 1e-12),
                ("l2_bytes", "L2 [MiB]", 1 / 2**20),
                ("smem_per_sm_bytes", "smem/SM [KiB]", 1 / 1024),
                ("max_threads_per_sm", "threads/SM", None),
                ("host_link", "host link", None),
            ],
        )
        typer.echo(
            "sources: spec sheets as listed in `kernelscope gpus --format json` (field `sources`); "
            "measured: the best ceiling of the store's bench runs"
        )


@app.command()
def dashboard(
    host: Annotated[
        str, typer.Option(help="Address to bind. 127.0.0.1 (default) serves this machine only.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port.", min=1, max=65535)] = 8501,
    store: StoreOpt = None,
    token: Annotated[
        Optional[str],
        typer.Option(
            envvar="KERNELSCOPE_TOKEN", help="Access token; required with a non-loopback --host."
        ),
    ] = None,
    max_upload_mb: Annotated[
        int, typer.Option(help="Largest upload accepted in the browser, MB.", min=1)
    ] = 200,
    max_decompressed_mb: Annotated[
        Optional[int],
        typer.Option(
            help="Largest artifact after decompression, MB (default: the upload cap).", min=1
        ),
    ] = None,
    allowed_host: Annotated[
        Optional[list[str]],
        typer.Option(
            "--allowed-host",
            help="A host name the dashboard is reached by (besides IP addresses, "
            "localhost and this machine's name), e.g. a reverse proxy's; repeatable, *.example.com "
            "allowed.",
        ),
    ] = None,
    samples: Annotated[
        Optional[bool],
        typer.Option(
            "--samples/--no-samples",
            help="Load the bundled H200 samples into an empty store (default: only into the "
            "default store ~/.kernelscope/store, never into one given by --store or "
            "KERNELSCOPE_STORE).",
        ),
    ] = None,
) -> None:
    """Start the dashboard (Streamlit behind kernelscope's gate: Host check, access token, upload
    cap) on the run store. An empty default store gets the bundled samples on first start; a store
    you name (--store, KERNELSCOPE_STORE) gets them only with --samples."""
    serve = repo_root() / "dashboard" / "web" / "serve.py"
    if not serve.is_file():
        raise ArtifactError(str(serve), "dashboard server module not found (broken install?)")
    loopback = host in ("127.0.0.1", "localhost", "::1")
    if not loopback and not token:
        raise typer.BadParameter(
            f"--host {host} listens beyond this machine: give an access token with --token or "
            "KERNELSCOPE_TOKEN",
            param_hint="--host",
        )
    # characters of an access token (the app refuses shorter ones)
    from dashboard.web.auth import MIN_TOKEN

    if token is not None and len(token) < MIN_TOKEN:
        raise typer.BadParameter(
            f"the access token has {len(token)} characters; use at least {MIN_TOKEN} (e.g. openssl "
            "rand -hex 16)",
            param_hint="--token",
        )
    env = dict(os.environ)
    st = open_store(store)
    env["KERNELSCOPE_STORE"] = str(st.root.resolve())
    env["KERNELSCOPE_MAX_DECOMPRESSED_MB"] = str(max_decompressed_mb or max_upload_mb)
    env["KERNELSCOPE_MAX_UPLOAD_MB"] = str(max_upload_mb)
    env["KERNELSCOPE_LOAD_SAMPLES"] = (
        "1" if (samples if samples is not None else store is None) else "0"
    )
    env.pop("KERNELSCOPE_TOKEN", None)
    if token:
        env["KERNELSCOPE_TOKEN"] = token
    env["PYTHONPATH"] = os.pathsep.join([str(repo_root()), env.get("PYTHONPATH", "")]).rstrip(
        os.pathsep
    )
    cmd = [
        sys.executable,
        "-m",
        "dashboard.web.serve",
        "--host",
        host,
        "--port",
        str(port),
        "--max-upload-mb",
        str(max_upload_mb),
    ]
    for h in allowed_host or []:
        cmd += ["--allowed-host", h]
    typer.echo(f"Kernelscope dashboard on http://{host}:{port}  (store {st.root})", err=True)
    sys.stdout.flush()
    sys.stderr.flush()
    # Streamlit reads .streamlit/config.toml here (static files, the CJK font)
    os.chdir(repo_root())
    # replace this process: a signal to it reaches the server itself
    os.execve(sys.executable, cmd, env)
