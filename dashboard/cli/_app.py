"""The Typer application object; each command module registers itself on it."""
from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

app = typer.Typer(
    name="kernelscope",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
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


def open_store(store: Optional[Path]):
    from collectors.store import Store
    return Store(store)


def echo_json(obj) -> None:
    import json
    typer.echo(json.dumps(obj, indent=1, default=_json_default, allow_nan=False))


def _json_default(o):
    import math
    if isinstance(o, float) and not math.isfinite(o):
        return None
    if isinstance(o, Path):
        return str(o)
    if hasattr(o, "item"):
        return o.item()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def repo_root() -> Path:
    return Path(__file__).resolve().parents[2]

