"""`kernelscope runs | reindex | query`: the run index (collectors.index) and cross-run questions on it
(analyzers.history). Every listing reads the index's Parquet files, never every run.
Start-up: imports that only some commands, pages or GPUs need sit inside the functions that use
them, so each command loads what it uses."""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import json
import os
import sys
import time
from contextlib import redirect_stdout
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from dashboard.cli._app import Format, ListFormat, StoreOpt, app, echo_json, open_store
from dashboard.cli.render import print_frame, print_table, to_csv

if TYPE_CHECKING:
    import polars as pl

query_app = typer.Typer(
    no_args_is_help=True,
    rich_markup_mode=None,
    help="Cross-run questions from the run index: a kernel over runs and GPUs, "
    "ceilings over time, regressions between consecutive runs of the same source.",
)
app.add_typer(query_app, name="query")


def _log(msg: str) -> None:
    typer.echo(f"kernelscope: {msg}", err=True)


def _index(store):
    """The store's index, refreshed (runs it lacks are indexed now); None when it cannot be written."""
    st = open_store(store)
    try:
        return st, st.index(log=_log)
    except OSError as e:
        _log(f"the run index cannot be written ({e.strerror or e}); reading every run instead")
        return st, None


TABLE_ROWS = 200  # rows a plain-text query table shows (JSON and CSV carry all)


def _out(df: pl.DataFrame, cols, format, key: str, newest_first: bool = False) -> None:
    """A query's frame as JSON, CSV or a table (the newest TABLE_ROWS rows); `created` as UTC text."""
    import polars as pl

    if "created" in df.columns:
        df = df.with_columns(
            pl.from_epoch("created", time_unit="s").dt.strftime("%Y-%m-%d %H:%M:%SZ")
        )
    if format in (Format.json, ListFormat.json):
        echo_json({key: df.to_dicts()})
    elif format is Format.csv:
        sys.stdout.write(to_csv(df.to_dicts()))
    else:
        shown = df.head(TABLE_ROWS) if newest_first else df.tail(TABLE_ROWS)
        print_table(shown.to_dicts(), cols)
        if df.height > TABLE_ROWS:
            typer.echo(
                f"... {df.height - TABLE_ROWS} older rows not shown; --format json or csv lists all"
            )


# `runs` prints again the listing it printed last while nothing it is made from has changed
# (listing_key): a warm `kernelscope runs` then imports neither polars nor the index. Over 1,000
# runs it took 0.26-0.34 s, of which importing polars 0.23-0.30 s on a 2-core machine; with the
# listing kept, about 0.1 s.
#: the kept listings, one per output variant, beside the index (a dot file: the index's readers skip
#: it)
LISTING_FILE = ".runs-listing-{}.json"
_CODE_DIRS = ("collectors", "analyzers", "dashboard")


def _code_stamp() -> str:
    """The path, size and modification time of every module of this package: another version of the
    code (an upgrade, an edit of a checkout) never gives a listing that it did not make."""
    base = Path(__file__).resolve().parents[2]
    seen = []
    for d in _CODE_DIRS:
        for dirpath, dirnames, files in os.walk(base / d):
            dirnames[:] = sorted(x for x in dirnames if x != "__pycache__")
            for f in sorted(files):
                if f.endswith(".py"):
                    st = os.stat(os.path.join(dirpath, f))
                    seen.append(
                        (
                            os.path.relpath(os.path.join(dirpath, f), base),
                            st.st_size,
                            st.st_mtime_ns,
                        )
                    )
    return hashlib.sha256(repr(seen).encode()).hexdigest()


def listing_key(root: Path) -> list | None:
    """What the listing of the store at root is made from: the stamps (collectors.freshness) of the
    runs folder (a run stored or deleted), of the index's CURRENT, parts and segments (an ingest's
    segment, a compaction, a reindex), of the store's settings, and the code. None when the store
    has no runs folder or when any of them changed within RACY_S seconds (a file time too recent to
    tell a later change from this one)."""
    from collectors.freshness import settled, stamp

    ix = root / "index"
    stamps = [
        stamp(p)
        for p in (
            root / "runs",
            ix / "CURRENT",
            ix / "parts",
            ix / "segments",
            root / "settings.json",
        )
    ]
    now = time.time_ns()
    if stamps[0] is None or not all(settled(s, now) for s in stamps if s is not None):
        return None
    return [list(s) if s is not None else None for s in stamps] + [_code_stamp()]


def _kept(root: Path, variant: str, key: list) -> str | None:
    try:
        doc = json.loads(
            (root / "index" / LISTING_FILE.format(variant)).read_text(encoding="utf-8")
        )
    except (OSError, ValueError):
        return None
    return (
        doc.get("out")
        if isinstance(doc, dict) and doc.get("key") == key and isinstance(doc.get("out"), str)
        else None
    )


def _keep(root: Path, variant: str, key: list, out: str) -> None:
    """Write the listing beside the index, atomically (a temporary file renamed over the old one); a
    store that cannot be written keeps none."""
    import tempfile

    ix = root / "index"
    try:
        fd, tmp = tempfile.mkstemp(prefix=".runs-listing-", suffix=".tmp", dir=ix)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump({"key": key, "out": out}, f)
            try:  # readable by whoever may read the index
                os.chmod(tmp, os.stat(ix / "CURRENT").st_mode & 0o666)
            except OSError:
                pass
            os.replace(tmp, ix / LISTING_FILE.format(variant))
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError:
        pass


def _emit(out: str) -> None:
    """The listing on stdout, as UTF-8 bytes where stdout has a byte buffer (as echo_json writes JSON)."""
    buf = getattr(sys.stdout, "buffer", None)
    if buf is None:
        sys.stdout.write(out)
        return
    sys.stdout.flush()
    buf.write(out.encode("utf-8"))
    buf.flush()


@app.command()
def runs(
    store: StoreOpt = None,
    format: Annotated[ListFormat, typer.Option("--format", "-f")] = ListFormat.table,
    limit: Annotated[
        Optional[int], typer.Option("--limit", min=1, help="Only the newest N runs.")
    ] = None,
) -> None:
    """List the runs in the store, newest first: id, kind, file, GPU, item count (launches, kernels
    or results), warnings. Read from the run index (kernelscope reindex rebuilds it)."""
    from collectors.freshness import default_store_dir

    root = Path(store).expanduser() if store else default_store_dir()
    variant = f"{format.value}-{limit or 'all'}"
    key = listing_key(root)
    if key is not None and (out := _kept(root, variant, key)) is not None:
        _emit(out)
        return
    buf = io.StringIO()
    with redirect_stdout(buf):
        indexed = _list_runs(store, format, limit)
    out = buf.getvalue()
    _emit(out)
    # nothing changed while it was listed
    if indexed and key is not None and listing_key(root) == key:
        _keep(root, variant, key, out)


def _list_runs(store, format: ListFormat, limit: Optional[int]) -> bool:
    """The listing of `runs` on stdout; whether it came from the index."""
    import polars as pl

    from collectors import index as run_index
    from dashboard.cli._app import open_source

    st, ix = _index(store)
    if ix is not None:

        def q(i):
            lf = i.runs.sort(["created", "run_id"], descending=True)
            return (lf.head(limit) if limit else lf).collect()

        df = run_index.collect(st.root, q)
        # a run whose file names no GPU: the identified one (Source.gpu_label), computed when listed
        unnamed = df.filter(pl.col("gpu_name").is_null() & pl.col("kind").is_in(["ncu", "bench"]))[
            "run_id"
        ].to_list()
        # (the analyzers load only when needed)
        src = open_source(store) if unnamed else None
        labels = {r: src.gpu_label(st.get(r)) for r in unnamed}
        df = df.select(
            "run_id",
            "kind",
            "source_name",
            pl.coalesce(
                pl.col("gpu_name"),
                pl.col("run_id").replace_strict(labels, default=None, return_dtype=pl.String),
            ).alias("gpu_name"),
            pl.col("item_count").alias("items"),
            "item_label",
            pl.from_epoch("created", time_unit="s")
            .dt.strftime("%Y-%m-%d %H:%M:%SZ")
            .alias("created"),
            "size_bytes",
            pl.col("warnings").fill_null([]),
        )
    else:
        rows = []
        src = open_source(store)
        for r in st.runs()[:limit]:
            info = r.info
            rows.append(
                {
                    "run_id": info.run_id,
                    "kind": info.kind,
                    "source_name": info.source_name,
                    "gpu_name": src.gpu_label(r),
                    "items": info.item_count,
                    "item_label": info.item_label,
                    "created": dt.datetime.fromtimestamp(info.created, dt.timezone.utc).strftime(
                        "%Y-%m-%d %H:%M:%SZ"
                    ),
                    "size_bytes": info.size_bytes,
                    "warnings": list(info.warnings),
                }
            )
        df = pl.DataFrame(
            rows,
            schema={
                "run_id": pl.String,
                "kind": pl.String,
                "source_name": pl.String,
                "gpu_name": pl.String,
                "items": pl.Int64,
                "item_label": pl.String,
                "created": pl.String,
                "size_bytes": pl.Int64,
                "warnings": pl.List(pl.String),
            },
        )
    # one name per GPU model: the file's with the registry's
    from analyzers.gpu_compare import gpu_label

    df = df.with_columns(
        pl.col("gpu_name").map_elements(gpu_label, return_dtype=pl.String).alias("gpu")
    )
    if format is ListFormat.json:
        echo_json({"runs": df.to_dicts()})
        return ix is not None
    df = df.with_columns(pl.col("warnings").list.len().replace(0, None).alias("warn"))
    print_frame(
        df,
        [
            ("run_id", "run_id"),
            ("kind", "kind"),
            ("source_name", "source_name"),
            ("gpu", "gpu"),
            ("items", "items"),
            ("item_label", "item_label"),
            ("created", "created"),
            ("warn", "warnings"),
        ],
    )
    for rid, ws in df.filter(pl.col("warn").is_not_null()).select("run_id", "warnings").iter_rows():
        for w in ws:
            typer.echo(f"{rid}: warning: {w}")
    return ix is not None


@app.command()
def reindex(store: StoreOpt = None) -> None:
    """Rebuild the run index from every stored run (ingest keeps it up to date; this repairs or refreshes it)."""
    st = open_store(store)
    n = st.reindex()
    typer.echo(f"indexed {n} runs in {st.root / 'index'}")


@query_app.command("kernel")
def query_kernel(
    pattern: Annotated[str, typer.Argument(help="Regex searched in kernel names.")],
    gpu: Annotated[
        Optional[str], typer.Option("--gpu", help="Only runs on this GPU (its name as stored).")
    ] = None,
    source: Annotated[
        Optional[str], typer.Option("--source", help="Only runs of this file name.")
    ] = None,
    last: Annotated[
        Optional[int], typer.Option("--last", min=1, help="Only the newest N runs.")
    ] = None,
    store: StoreOpt = None,
    format: Annotated[Format, typer.Option("--format", "-f")] = Format.table,
) -> None:
    """A kernel's duration over runs and GPUs (per run: launches, median, mean, spread, min, max;
    ns), oldest first. Nsight Compute runs count profiled launches, traces every kernel."""
    from analyzers.history import kernel_history
    from collectors import index as run_index

    st, _ = _index(store)
    df = run_index.collect(
        st.root, lambda ix: kernel_history(ix.kernels, pattern, gpu=gpu, source=source, last=last)
    )
    _out(
        df.drop("gpu_uuid"),
        [
            ("created", "stored", None),
            ("run_id", "run", None),
            ("gpu_name", "GPU", None),
            ("source_name", "file", None),
            ("name", "kernel", None),
            ("n", "n", None),
            ("median_ns", "median [µs]", 1e-3),
            ("std_ns", "std [µs]", 1e-3),
            ("min_ns", "min [µs]", 1e-3),
            ("max_ns", "max [µs]", 1e-3),
        ],
        format,
        "kernels",
    )


@query_app.command("ceilings")
def query_ceilings(
    gpu: Annotated[
        Optional[str], typer.Option("--gpu", help="Only this GPU (its name as stored).")
    ] = None,
    resource: Annotated[
        Optional[str],
        typer.Option("--resource", help="dram, l2, smem, bf16, fp32, h2d, launch or graph."),
    ] = None,
    store: StoreOpt = None,
    format: Annotated[Format, typer.Option("--format", "-f")] = Format.table,
) -> None:
    """Measured ceilings over time per GPU (kernelscope bench runs), oldest first, in base units (B/s, FLOP/s, s)."""
    from analyzers.history import ceiling_history
    from collectors import index as run_index

    st, _ = _index(store)
    df = run_index.collect(
        st.root, lambda ix: ceiling_history(ix.ceilings, gpu=gpu, resource=resource)
    )
    _out(
        df.drop("gpu_uuid"),
        [
            ("created", "stored", None),
            ("run_id", "run", None),
            ("gpu", "GPU", None),
            ("resource", "resource", None),
            ("metric", "ceiling", None),
            ("value", "value", None),
            ("unit", "unit", None),
            ("cv", "cv", None),
        ],
        format,
        "ceilings",
    )


@query_app.command("regressions")
def query_regressions(
    source: Annotated[
        Optional[str], typer.Option("--source", help="Only runs of this file name.")
    ] = None,
    gpu: Annotated[Optional[str], typer.Option("--gpu", help="Only runs on this GPU.")] = None,
    noise: Annotated[
        float, typer.Option("--noise", min=0.0, help="Noise floor, % (a change must exceed it).")
    ] = 5.0,
    all_: Annotated[
        bool, typer.Option("--all", help="Every kernel, not only the slower ones.")
    ] = False,
    store: StoreOpt = None,
    format: Annotated[Format, typer.Option("--format", "-f")] = Format.table,
) -> None:
    """Kernels slower than in the previous run of the same source on the same GPU: change of the
    median beyond max(noise floor, 2 × the combined relative spread), as the Compare page classifies
    it."""
    from analyzers.history import regressions
    from collectors import index as run_index

    st, _ = _index(store)
    df = run_index.collect(
        st.root,
        lambda ix: regressions(
            ix.kernels,
            source=source,
            gpu=gpu,
            noise_floor=noise / 100,
            statuses=None if all_ else ("slower",),
        ),
    )
    _out(
        df,
        [
            ("created", "stored", None),
            ("source_name", "file", None),
            ("gpu_name", "GPU", None),
            ("previous_run_id", "previous run", None),
            ("run_id", "run", None),
            ("name", "kernel", None),
            ("median_ns_a", "before [µs]", 1e-3),
            ("median_ns_b", "after [µs]", 1e-3),
            ("change_pct", "change [%]", 1),
            ("threshold_pct", "threshold [%]", 1),
            ("status", "status", None),
        ],
        format,
        "regressions",
        newest_first=True,
    )
