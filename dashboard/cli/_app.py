"""The Typer application object, shared options and output helpers; each command module registers on `app`."""
from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

app = typer.Typer(
    name="kernelscope",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,          # plain Click output: a usage error is the usage line and one "Error:" line
    help="Kernelscope: GPU kernel measurements next to what the hardware and the textbook predict.",
)


@app.callback()
def _root() -> None:
    """Kernelscope: GPU kernel measurements next to what the hardware and the textbook predict."""


class Format(str, Enum):
    table = "table"
    json = "json"
    csv = "csv"


class ListFormat(str, Enum):
    table = "table"
    json = "json"


StoreOpt = Annotated[
    Optional[Path],
    typer.Option("--store", help="Run store folder (default: $KERNELSCOPE_STORE or ~/.kernelscope/store).",
                 envvar="KERNELSCOPE_STORE"),
]


GpuOpt = Annotated[
    Optional[str],
    typer.Option("--gpu", help="The GPU the file was recorded on, for files that do not name it (a `kernelscope gpus` "
                               "name, e.g. H200, T4); it also replaces the GPU a file names."),
]



MaxMBOpt = Annotated[
    Optional[int],
    typer.Option("--max-decompressed-mb", min=1, envvar="KERNELSCOPE_MAX_DECOMPRESSED_MB",
                 help="Largest artifact accepted, after decompression, in MB (default 4096)."),
]


def apply_limits(max_decompressed_mb: Optional[int]) -> None:
    """Set the artifact size limit for this process and the readers it starts (collectors.limits)."""
    import os

    from collectors.limits import ENV_ARTIFACT_MB
    if max_decompressed_mb:
        os.environ[ENV_ARTIFACT_MB] = str(max_decompressed_mb)


_cleaned: set = set()


def open_store(store: Optional[Path]):
    """The store (once per process: the temporary folders of interrupted ingests are removed first)."""
    from collectors.store import Store
    st = Store(store)
    if st.root not in _cleaned:
        _cleaned.add(st.root)
        st.housekeeping()
    return st


def open_source(store: Optional[Path], gpu: Optional[str] = None):
    from dashboard.source import Source
    return Source(open_store(store), gpu=gpu)


def load(path_or_run: str, store: Optional[Path], gpu: Optional[str] = None):
    """(a stored Run or a Parsed file, its name): a path is parsed in memory (nothing stored) and refused as
    ingest would refuse it (one that cannot be analysed included); anything else is looked up as a run id of the
    store (a run that cannot be read is `RunNotFound`)."""
    import os

    from collectors.errors import ArtifactError
    from collectors.ingest import parse_path
    p = Path(path_or_run)
    if p.exists():
        parsed = parse_path(p)
        open_source(store, gpu).check(parsed, path_or_run)
        return parsed, p.name
    if p.suffix or os.sep in path_or_run:
        raise ArtifactError(path_or_run, "no such file")
    run = open_source(store).get(path_or_run)
    return run, run.source_name


def _json_default(o):
    if isinstance(o, Path):
        return str(o)
    if hasattr(o, "item"):
        return o.item()
    if isinstance(o, (set, tuple)):
        return list(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def echo_json(obj) -> None:
    """JSON on stdout, written by orjson (NaN and infinities become null), indented two spaces."""
    import orjson
    data = orjson.dumps(obj, default=_json_default,
                        option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY)
    out = sys.stdout
    buf = getattr(out, "buffer", None)
    if buf is not None:
        out.flush()
        buf.write(data + b"\n")
        buf.flush()
    else:                                  # a captured stream without a byte buffer (tests)
        out.write(data.decode() + "\n")


def repo_root() -> Path:
    return Path(__file__).resolve().parents[2]
