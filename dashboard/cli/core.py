"""`kernelscope ingest | runs | analyze | gpus | dashboard`."""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from collectors.errors import ArtifactError
from dashboard.cli._app import Format, ListFormat, StoreOpt, app, echo_json, open_store, repo_root
from dashboard.cli.render import print_table, to_csv


@app.command()
def ingest(
    paths: Annotated[list[Path], typer.Argument(help="Files or folders (walked recursively).")],
    store: StoreOpt = None,
) -> int:
    """Parse artifacts (ncu .ncu-rep/CSV, PyTorch traces, nsys SQLite, bench results) into the run store
    and print one line per file: run id, kind, file. Bad files are reported and skipped; nothing of them
    is stored. Exit code 1 if any file failed."""
    from collectors.store import expand_paths
    st = open_store(store)
    failed = 0
    for p in expand_paths(paths):
        try:
            run, created = st.ingest_path(p)
        except ArtifactError as e:
            typer.echo(f"kernelscope: {e}", err=True)
            failed += 1
            continue
        typer.echo(f"{run.run_id}\t{run.kind}\t{p}\t{'new' if created else 'already stored'}")
    return 1 if failed else 0


@app.command()
def runs(store: StoreOpt = None,
         format: Annotated[ListFormat, typer.Option("--format", "-f")] = ListFormat.table) -> int:
    """List the runs in the store, newest first."""
    rows = [run_summary(r) for r in open_store(store).runs()]
    if format is ListFormat.json:
        echo_json({"runs": rows})
    else:
        print_table(rows, ["run_id", "kind", "source_name", "gpu_name", "items", "created"])
    return 0


def run_summary(run) -> dict:
    import datetime as dt
    m = run.manifest
    meta = m.get("meta", {})
    return {
        "run_id": m["run_id"], "kind": m["kind"], "source_name": m["source_name"],
        "gpu_name": meta.get("gpu_name"),
        "items": meta.get("kernel_count", meta.get("result_count")),
        "created": dt.datetime.fromtimestamp(m["created"], dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ"),
        "size_bytes": m.get("size_bytes"),
    }


def load_parsed(path_or_run: str, store: Optional[Path]):
    """A path is parsed in memory (nothing stored); anything else is looked up as a run id."""
    from collectors.artifact import parse_bytes
    p = Path(path_or_run)
    if p.is_dir():
        from collectors.kineto import pack_rank_folder
        packed = pack_rank_folder(p)
        if packed is None:
            raise ArtifactError(str(p), "a folder is analysed only when it holds PyTorch profiler traces of "
                                        "distinct ranks; ingest other folders with `kernelscope ingest`")
        data, name = packed
        return parse_bytes(data, name), name
    if p.is_file():
        try:
            data = p.read_bytes()
        except OSError as e:
            raise ArtifactError(str(p), f"cannot read file ({e.strerror})") from None
        return parse_bytes(data, p.name), p.name
    if p.suffix or os.sep in path_or_run:
        raise ArtifactError(path_or_run, "no such file")
    run = open_store(store).get(path_or_run)
    return run.as_parsed(), run.manifest["source_name"]


def ncu_report(parsed, source: str) -> dict:
    from analyzers.gpus import resolve_gpu
    from analyzers.kernels import KERNEL_REPORT_COLUMNS, analyze_kernels, kernel_report_rows, missing_quantities
    gpu = resolve_gpu(parsed.meta.get("gpu_name"), parsed.meta.get("device_attributes"))
    analyzed = analyze_kernels(parsed.table("kernels"), gpu)
    return {
        "source": source,
        "kind": "ncu",
        "gpu": {
            "name": gpu.name, "cc": f"{gpu.cc[0]}.{gpu.cc[1]}", "sm_count": gpu.sm_count,
            "dram_bandwidth_bytes_per_s": gpu.dram_bandwidth_bytes_per_s,
            "dram_bandwidth_source": gpu.source_of("dram_bandwidth_bytes_per_s"),
            "from_registry": gpu.from_registry,
        },
        "kernels": kernel_report_rows(analyzed),
        "missing": missing_quantities(analyzed),
        "units": KERNEL_REPORT_COLUMNS,
    }


NCU_TABLE = [
    ("id", "id", None), ("name", "kernel", None), ("duration_ns", "duration [µs]", 1e-3),
    ("dram_bandwidth_gbps", "DRAM [GB/s]", 1), ("dram_peak_fraction", "DRAM [% spec]", 100),
    ("achieved_occupancy_pct", "occ. achieved [%]", 1), ("theoretical_occupancy_pct", "occ. ncu [%]", 1),
    ("predicted_occupancy_pct", "occ. ours [%]", 1), ("occupancy_limiter", "limiter", None),
    ("smem_conflict_degree", "bank ways", 1), ("global_ld_sectors_per_request", "ld sectors/req", 1),
]


def report_for(parsed, source: str, store=None) -> tuple[dict, list[dict], list[tuple]]:
    """(JSON report, rows for table/csv, table columns) for any run kind."""
    if parsed.kind == "ncu":
        rep = ncu_report(parsed, source)
        return rep, rep["kernels"], NCU_TABLE
    if parsed.kind in ("kineto", "nsys"):
        from dashboard.cli import timeline
        from dashboard.pages import measured_launch_floor_ns
        floor = measured_launch_floor_ns(store, parsed.meta.get("gpu_name")) if store else None
        rep = timeline.report(parsed, launch_floor_ns=floor)
        rows = timeline.kernel_rows(rep)
        return rep, rows, timeline.TABLE_COLUMNS
    if parsed.kind == "bench":
        from dashboard.cli import bench
        rep = bench.report(parsed)
        return rep, rep["results"], bench.TABLE_COLUMNS
    raise ArtifactError(source, f"no analysis for runs of kind {parsed.kind!r}")


@app.command()
def analyze(
    path_or_run: Annotated[str, typer.Argument(help="An artifact file, or a run id (or unique prefix) in the store.")],
    store: StoreOpt = None,
    format: Annotated[Format, typer.Option("--format", "-f")] = Format.table,
) -> int:
    """Analyze one artifact or stored run: per-kernel duration, DRAM bandwidth and its fraction of the
    GPU's peak, occupancy (ncu's and ours, with the limiter), bank-conflict degree, coalescing; or, for
    traces, launch delays and GPU idle time; or, for bench runs, measurements next to predictions."""
    parsed, source = load_parsed(path_or_run, store)
    rep, rows, cols = report_for(parsed, source, open_store(store))
    if format is Format.json:
        echo_json(rep)
    elif format is Format.csv:
        typer.echo(to_csv(rows), nl=False)
    else:
        head = rep.get("gpu", {})
        if isinstance(head, dict) and head.get("name"):
            typer.echo(f"{source}: {parsed.kind}, GPU {head['name']}")
        print_table(rows, cols)
        for d in rep.get("summary", {}).get("devices", []):
            typer.echo(
                f"rank {d['rank']} device {d['device']}: {d['kernel_count']} kernels ({d['kernels_with_launch']} with "
                f"their launch call); GPU busy {d['gpu_busy_ns'] / 1e6:.3f} ms of a {d['gpu_window_ns'] / 1e6:.3f} ms "
                f"window (idle {100 * (d['gpu_idle_fraction'] or 0):.1f} %, union of op intervals); launch delay "
                f"median {d.get('launch_delay_median_us')} µs, p90 {d.get('launch_delay_p90_us')} µs (HTA definition); "
                f"{d.get('launch_verdict', '')}")
        for m in rep.get("missing", []):
            typer.echo(f"missing: {m['quantity']} (needs {', '.join(m['needs'])}; collect with {m['collect_with']})")
    return 0


@app.command()
def gpus(format: Annotated[ListFormat, typer.Option("--format", "-f")] = ListFormat.table) -> int:
    """The GPU spec registry: datasheet numbers with their sources."""
    from analyzers.gpus import gpu_rows
    rows = gpu_rows()
    if format is ListFormat.json:
        echo_json({"gpus": rows})
    else:
        print_table(rows, [
            ("name", "GPU", None), ("cc", "CC", None), ("sm_count", "SMs", None),
            ("dram_bandwidth_bytes_per_s", "DRAM [GB/s]", 1e-9), ("bf16_dense_flop_per_s", "BF16 dense [TFLOP/s]", 1e-12),
            ("fp32_flop_per_s", "FP32 [TFLOP/s]", 1e-12), ("l2_bytes", "L2 [MiB]", 1 / 2**20),
            ("smem_per_sm_bytes", "smem/SM [KiB]", 1 / 1024), ("max_threads_per_sm", "threads/SM", None),
            ("host_link", "host link", None),
        ])
        typer.echo("sources: spec sheets as listed in `kernelscope gpus --format json` (field `sources`)")
    return 0


@app.command()
def dashboard(
    host: Annotated[str, typer.Option(help="Address to bind. 127.0.0.1 (default) serves this machine only.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port.")] = 8501,
    store: StoreOpt = None,
    token: Annotated[Optional[str], typer.Option(envvar="KERNELSCOPE_TOKEN",
                                                 help="Access token; required with a non-loopback --host.")] = None,
    max_upload_mb: Annotated[int, typer.Option(help="Largest upload accepted in the browser, MB.")] = 200,
) -> int:
    """Start the dashboard (Streamlit) on the run store; on first start with an empty store it loads the
    bundled samples."""
    app_path = repo_root() / "dashboard" / "app.py"
    if not app_path.is_file():
        raise ArtifactError(str(app_path), "dashboard entry script not found (broken install?)")
    loopback = host in ("127.0.0.1", "localhost", "::1")
    if not loopback and not token:
        raise typer.BadParameter(f"--host {host} listens beyond this machine: give an access token with "
                                 "--token or KERNELSCOPE_TOKEN", param_hint="--host")
    env = dict(os.environ)
    st = open_store(store)
    env["KERNELSCOPE_STORE"] = str(st.root)
    if token:
        env["KERNELSCOPE_TOKEN"] = token
    cmd = [sys.executable, "-m", "streamlit", "run", str(app_path),
           "--server.address", host, "--server.port", str(port), "--server.headless", "true",
           "--server.maxUploadSize", str(max_upload_mb), "--browser.gatherUsageStats", "false", "--client.toolbarMode", "minimal"]
    typer.echo(f"Kernelscope dashboard on http://{host}:{port}  (store {st.root})", err=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, cmd, env)  # replace this process: a signal to it reaches Streamlit itself
    return 0  # reached only where execve is replaced (tests)
