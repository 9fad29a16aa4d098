"""`kernelscope bench`: run the microbenchmark suite on every visible GPU (one subprocess per GPU,
one after the other so that they do not disturb each other), store one run per GPU, print the run
ids. Without a GPU: say so in one line and run the CPU cases (numerics) only. With --ray [ADDRESS]:
one suite task per GPU of a Ray cluster (dashboard.core.fleet), one run per GPU into this store as each
finishes.
Start-up: imports that only some commands, pages or GPUs need sit inside the functions that use
them, so each command loads what it uses."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from typing import Annotated, Optional

import typer

from collectors.errors import InputError
from dashboard.cli._app import ListFormat, StoreOpt, app, echo_json, open_source, open_store
from dashboard.cli.render import print_table
from dashboard.core.fleet import missing_gpu_packages, run_suite, visible_gpu_count

_DONE = re.compile(r"\((\d+)/(\d+)\) (\S+): ")


def _store_doc(st, doc: dict, out_dir: Path) -> str:
    import json
    from collectors.bench.harness import result_file_name

    path = out_dir / result_file_name(doc["gpu"]["name"], doc["gpu"].get("uuid"))
    if path.exists():  # the CPU-case runs of a fleet share the name "CPU"
        path = path.with_name(
            f"{path.stem}_{doc['gpu'].get('host') or 'node'}_{doc['gpu'].get('index')}.json"
        )
    path.write_text(json.dumps(doc, indent=1, allow_nan=False))
    from dashboard.core.source import Source

    run, _ = Source(st).ingest_path(path)
    return run.run_id


def _run_gpu(index: int, args: list[str], out_dir: Path, n_cases: int) -> tuple[Path | None, str]:
    """Run the suite on GPU `index` (dashboard.core.fleet.run_suite) with a progress bar; (result file, log path)."""
    done = [0]
    with typer.progressbar(length=n_cases, label=f"GPU {index}") as bar:

        def on_line(line: str, _doc) -> None:
            m = _DONE.search(line)
            if m and int(m.group(1)) > done[0]:
                bar.update(int(m.group(1)) - done[0])
                done[0] = int(m.group(1))

        return run_suite(index, args, out_dir, on_line)


@app.command()
def bench(
    ncu: Annotated[
        bool,
        typer.Option(
            "--ncu",
            help="Rerun the suite's own kernels under Nsight Compute and attach the counters.",
        ),
    ] = False,
    cases: Annotated[
        Optional[str],
        typer.Option("--cases", help="Comma list of case ids or prefixes (default: all)."),
    ] = None,
    quick: Annotated[
        bool, typer.Option("--quick", help="Tiny sizes and few repetitions (a smoke test).")
    ] = False,
    store: StoreOpt = None,
    all_cpu: Annotated[
        bool,
        typer.Option(
            "--all-cpu",
            help="Run the CPU cases (numerics) too when "
            "GPUs are present; without a GPU they are all that runs.",
        ),
    ] = False,
    out: Annotated[
        Optional[Path],
        typer.Option(
            "--out", help="Folder for the result files and logs (default: a new temporary folder)."
        ),
    ] = None,
    ray: Annotated[
        Optional[str],
        typer.Option(
            "--ray",
            metavar="[ADDRESS]",
            help="Run the suite on every GPU of a Ray cluster "
            "(RAY_ADDRESS or a local `ray start --head` without a value, or HOST:PORT): one task "
            "per GPU, one run per GPU in this store.",
        ),
    ] = None,
) -> None:
    """Run the chapter's measurable cases on every visible GPU (or every GPU of a Ray cluster) and
    store one run per GPU; print the run ids."""
    from collectors.bench.cases import select_cases

    st = open_store(store)
    out_dir = Path(out) if out else Path(tempfile.mkdtemp(prefix="kernelscope-bench-"))
    out_dir.mkdir(parents=True, exist_ok=True)
    if ray is not None:
        try:
            select_cases(cases)
        except ValueError as e:
            raise typer.BadParameter(str(e), param_hint="--cases") from None
        args = [
            *(["--ncu"] if ncu else []),
            *(["--quick"] if quick else []),
            *(["--cases", cases] if cases else []),
        ]
        _fleet(st, ray, args, quick, out_dir)
        return
    n_gpus = visible_gpu_count()
    run_ids: list[str] = []
    failed = 0
    if n_gpus == 0:
        typer.echo(
            "kernelscope bench: no NVIDIA GPU visible here; running the CPU cases (numerics) only."
        )
    else:
        missing = missing_gpu_packages()
        if missing:
            typer.echo(
                f"kernelscope bench: the GPU suite needs {', '.join(missing)}; install the bench "
                "extra (pip install 'kernelscope[bench]')",
                err=True,
            )
            raise typer.Exit(1)
        try:
            selected = select_cases(cases)
        except ValueError as e:
            raise typer.BadParameter(str(e), param_hint="--cases") from None
        args = [
            *(["--ncu"] if ncu else []),
            *(["--quick"] if quick else []),
            *(["--cases", cases] if cases else []),
        ]
        for i in range(n_gpus):
            path, log = _run_gpu(i, args, out_dir, len(selected))
            if path is None:
                typer.echo(
                    f"kernelscope bench: GPU {i}: the suite wrote no result (log: {log})", err=True
                )
                failed += 1
                continue
            try:
                from dashboard.core.source import Source

                run, _ = Source(st).ingest_path(path)
            except InputError as e:
                typer.echo(f"kernelscope: {e} (log: {log})", err=True)
                failed += 1
                continue
            meta = run.meta
            nf = len(meta.get("failures", []))
            typer.echo(
                f"GPU {i}: {meta.get('gpu_name')}: {meta.get('result_count')} results, "
                f"{meta.get('ceiling_count')} ceilings, {nf} failures (log: {log})"
            )
            echo_skipped(open_source(store).bench(run).skipped)
            run_ids.append(run.run_id)
    if n_gpus == 0 or all_cpu:
        from collectors.bench.cpu_cases import run_cpu_cases

        doc = run_cpu_cases(quick=quick, log=lambda m: None)
        run_ids.append(_store_doc(st, doc, out_dir))
    for rid in run_ids:
        typer.echo(rid)
    if failed:
        raise typer.Exit(1)


def echo_skipped(skipped: list[dict]) -> None:
    """Say which counter-based checks a run could not make (and why), once per reason."""
    if not skipped:
        return
    typer.echo(
        f"  not measured: {skipped[0]['reason']}; event-timed results are complete. Checks "
        f"skipped: " + "; ".join(f"{s['case']} ({', '.join(s['checks'])})" for s in skipped)
    )


def _fleet(st, address: str, args: list[str], quick: bool, out_dir: Path) -> None:
    """`kernelscope bench --ray`: stream progress, store each GPU's run as it arrives, report lost nodes."""
    from dashboard.core.fleet import fleet_bench

    def on_event(ev: dict) -> None:
        if ev["kind"] == "started":
            typer.echo(f"{ev['key']}: started on {ev.get('host')}")
        elif ev["kind"] == "case":
            typer.echo(f"{ev['key']}: {ev['line']}")

    stored: list[str] = []
    problems: list[str] = []

    def on_result(res) -> None:
        key = res.slot.key
        if res.doc is None:
            problems.append(f"{key}: {res.status}, no results ({res.error})")
            typer.echo(
                f"kernelscope bench: {key}: {res.status}, no case finished ({res.error})", err=True
            )
            return
        try:
            rid = _store_doc(st, res.doc, out_dir)
        except InputError as e:
            problems.append(f"{key}: {e}")
            typer.echo(f"kernelscope: {e}", err=True)
            return
        stored.append(rid)
        n = len(res.doc.get("results") or [])
        if res.status == "done":
            typer.echo(f"{key}: {res.doc['gpu'].get('name')}: {n} results, run {rid}")
        else:
            problems.append(f"{key}: {res.status} after {len(res.doc.get('cases') or {})} case(s)")
            typer.echo(
                f"kernelscope bench: {key}: {res.status} mid-suite ({res.error}); the {n} results "
                f"of the cases it finished are stored as partial run {rid}",
                err=True,
            )

    results = fleet_bench(address, args=args, quick=quick, on_event=on_event, on_result=on_result)
    done = sum(1 for r in results if r.status == "done")
    typer.echo(
        f"fleet: {done} of {len(results)} GPUs finished"
        + (" (partial: " + "; ".join(problems) + ")" if problems else "")
    )
    for rid in stored:
        typer.echo(rid)
    if problems:
        raise typer.Exit(1)


# ---- `kernelscope analyze RUN` for bench runs (called from core.report_for)
# ------------------------

TABLE_COLUMNS = [
    ("case", "case", None),
    ("metric", "metric", None),
    ("value", "value", None),
    ("unit", "unit", None),
    ("params", "params", None),
    ("predicted", "predicted", None),
    ("verdict", "verdict", None),
    ("cv", "cv", None),
    ("source", "source", None),
]


def _record_rows(df) -> list[dict]:
    import json

    rows = []
    for r in df.to_dicts():
        r["params"] = json.loads(r["params"]) if r.get("params") else {}
        if "predicted" in r:
            v, u, k = r.pop("predicted"), r.pop("predicted_unit"), r.pop("predicted_kind", None)
            r["predicted"] = None if v is None else {"value": v, "unit": u, "kind": k}
        rows.append(r)
    return rows


def report(ba) -> dict:
    """JSON report of a bench analysis (dashboard.core.source.BenchAnalysis): GPU, versions, ceilings,
    results with today's derived records, predictions and verdicts (analyzers.cases.bench_verdicts),
    failures."""
    m = ba.meta
    gpu = m.get("gpu", {})
    return {
        "kind": "bench",
        "gpu": {
            k: gpu.get(k)
            for k in (
                "name",
                "uuid",
                "index",
                "cc",
                "sm_count",
                "l2_bytes",
                "memory_bytes",
                "max_sm_clock_mhz",
                "power_limit_w",
            )
        },
        "versions": m.get("versions", {}),
        "started": m.get("started"),
        "finished": m.get("finished"),
        "partial": m.get("partial"),
        "ncu": m.get("ncu"),
        "ceilings": _record_rows(ba.ceilings),
        "results": _record_rows(ba.results),
        "failures": m.get("failures", []),
        "skipped_checks": ba.skipped,
    }


@app.command()
def ceilings(
    store: StoreOpt = None,
    gpu: Annotated[Optional[str], typer.Option("--gpu", help="Only this GPU model.")] = None,
    pin: Annotated[
        Optional[str],
        typer.Option("--pin", help="Use only this bench run's ceilings for its GPU model."),
    ] = None,
    exclude: Annotated[
        Optional[str], typer.Option("--exclude", help="Never use this bench run's ceilings.")
    ] = None,
    clear: Annotated[
        Optional[str], typer.Option("--clear", help="Undo --pin / --exclude for this run.")
    ] = None,
    format: Annotated[ListFormat, typer.Option("--format", "-f")] = ListFormat.table,
) -> None:
    """Every ceiling measured by the store's bench runs with its status: trusted (physically
    plausible for the GPU model it was measured on, and used), rejected (with the reason), excluded,
    or not pinned. --pin RUN makes a run the only source of its GPU model's ceilings; --exclude RUN
    sets a run aside (the choice is kept in the store, for the dashboard too)."""
    import polars as pl

    from analyzers.ceilings import model_of

    src = open_source(store)
    for rid in (pin, exclude, clear):
        if rid:
            src.get_kind(rid, ("bench",), "a bench run")
    if pin or exclude or clear:

        def change(s: dict) -> dict:
            c = s.setdefault("ceilings", {})
            pinned = dict(c["pinned"]) if isinstance(c.get("pinned"), dict) else {}
            excluded = [x for x in (c.get("excluded") or []) if isinstance(x, str)]
            for rid in (clear, pin, exclude):
                if not rid:
                    continue
                run = src.get(rid)
                model = model_of(run.meta.get("gpu_name"))
                if rid == clear:
                    excluded = [x for x in excluded if x != run.run_id]
                    pinned = {k: v for k, v in pinned.items() if v != run.run_id}
                elif rid == pin:
                    pinned[model] = run.run_id
                    excluded = [x for x in excluded if x != run.run_id]
                else:
                    excluded = sorted(set(excluded) | {run.run_id})
                    pinned = {k: v for k, v in pinned.items() if v != run.run_id}
            c["pinned"], c["excluded"] = pinned, excluded
            return s

        src.store.update_settings(change)
        src = open_source(store)
    judged = src.ceilings()
    if gpu:
        judged = judged.filter(pl.col("model") == model_of(gpu))
    rows = judged.to_dicts()
    if format is ListFormat.json:
        pinned, excluded = src.ceiling_choices()
        echo_json({"ceilings": rows, "pinned": pinned, "excluded": sorted(excluded)})
        return
    print_table(
        rows,
        [
            ("model", "GPU model", None),
            ("ceiling", "ceiling", None),
            ("value", "value", None),
            ("unit", "unit", None),
            ("status", "status", None),
            ("throttled", "throttled", None),
            ("run_id", "run", None),
            ("host", "host", None),
            ("reason", "why", None),
        ],
    )
