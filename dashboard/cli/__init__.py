"""Command line: `kernelscope COMMAND`. One module per command group; `main(argv) -> int` maps typed
errors to exit codes and one-line messages (never a traceback for bad input)."""
from __future__ import annotations

import sys

import click
import typer

from collectors.errors import ArtifactError
from dashboard.cli._app import app

# command modules register themselves on `app`
from dashboard.cli import core  # noqa: E402,F401  ingest, runs, analyze, gpus, dashboard
from dashboard.cli import cases  # noqa: E402,F401  cases, predict, claims
from dashboard.cli import timeline  # noqa: E402,F401  whatif
from dashboard.cli import export  # noqa: E402,F401  export
from dashboard.cli import bench  # noqa: E402,F401  bench


def main(argv: list[str] | None = None) -> int:
    try:
        rv = app(args=argv, standalone_mode=False, prog_name="kernelscope")
        return rv if isinstance(rv, int) else 0
    except ArtifactError as e:
        typer.echo(f"kernelscope: {e}", err=True)
        return 1
    except (KeyError, LookupError) as e:
        msg = e.args[0] if e.args else str(e)
        typer.echo(f"kernelscope: {msg}", err=True)
        return 1
    except click.exceptions.Exit as e:
        return e.exit_code
    except click.exceptions.Abort:
        typer.echo("kernelscope: aborted", err=True)
        return 130
    except click.ClickException as e:
        e.show()
        return e.exit_code
    except typer.BadParameter as e:  # pragma: no cover - ClickException subclass
        typer.echo(f"kernelscope: {e}", err=True)
        return 2


def entry() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry()
