"""Command line: `kernelscope COMMAND`. One module per command group, each a thin layer: parse the
arguments, ask `dashboard.core.source.Source` (or the analyzers) for the analysis, render it as a table,
JSON or CSV.

More: docs/architecture.md, *dashboard.cli.__init__*.
Start-up: imports that only some commands, pages or GPUs need sit inside the functions that use
them, so each command loads what it uses.
"""

from __future__ import annotations

import gc
import os
import re
import sys
import traceback
import warnings

# numpy's OpenBLAS starts a thread per core when numpy is imported, and they spin while waiting:
# about 0.1 CPU s per command on 2 cores (more on more), for commands that do no linear algebra. Set
# before anything imports numpy.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
# polars' pool: a thread per CPU, at most four (dashboard.core.threads says why); set before anything
# imports polars, and never over a POLARS_MAX_THREADS the user set
from dashboard.core import threads as _threads  # noqa: E402

_threads.choose(_threads.default_threads(_threads.cores()))
_GC_ON = gc.isenabled()
# while Typer and the CLI's own modules are imported (load_commands)
gc.disable()

from analyzers.errors import AnalysisError, ParameterError  # noqa: E402
from collectors.errors import InputError  # noqa: E402
from dashboard.cli._app import app  # noqa: E402

gc.freeze()
if _GC_ON:
    gc.enable()

#: the module (dashboard.cli.<module>) that registers each command on `app` when it is imported. A
#: command line that names one of them imports only that module (a tenth of a short command's time
#: went to importing all nine: Bench's fleet code, the index's, the cases' ...); anything else
#: (--help, no command, an unknown name) imports them all. tests/test_layout.py checks this table
#: against what the modules register.
COMMAND_MODULES = {
    "ingest": "core",
    "analyze": "core",
    "gpus": "core",
    "dashboard": "core",
    "rm": "core",
    "runs": "index",
    "reindex": "index",
    "query": "index",
    "cases": "cases",
    "predict": "cases",
    "claims": "cases",
    "ceilings": "bench",
    "whatif": "timeline",
    "export": "export",
    "compare": "compare",
    "hotspots": "hotspots",
    "bench": "bench",
    "join": "join",
}
#: in the order their commands are listed by --help
MODULES = ("core", "index", "cases", "timeline", "export", "compare", "hotspots", "bench", "join")


def load_commands(name: str | None = None):
    """`app` with the command `name` registered (its module imported), or with every command when
    name is None or not a command. The cyclic GC's passes over the objects that importing Typer's
    commands creates (none of them garbage) cost about 1 % of a short command: it is paused
    meanwhile, and what exists then is left out of later passes (gc.freeze). No command module
    imports polars at its top: a warm `runs` prints its kept listing without it
    (dashboard.cli.index)."""
    import importlib

    mods = [COMMAND_MODULES[name]] if name in COMMAND_MODULES else MODULES
    missing = [m for m in mods if f"{__name__}.{m}" not in sys.modules]
    if missing:
        on = gc.isenabled()
        gc.disable()
        try:
            for m in missing:
                importlib.import_module(f"{__name__}.{m}")
            gc.freeze()
        finally:
            if on:
                gc.enable()
    return app


EXIT_USER_ERROR = 1
EXIT_USAGE = 2
EXIT_BUG = 70  # EX_SOFTWARE (sysexits.h): an internal error


#: what may follow `--ray` as its address: auto, local, ray://..., HOST:PORT
_RAY_ADDRESS = re.compile(r"^(auto|local|ray://\S+|[\w.\-\[\]:]+:\d+)$")


def ray_argv(argv: list[str]) -> list[str]:
    """`--ray [ADDRESS]`: an option whose value is optional (Click's own optional values are not
    reachable through Typer). `--ray` followed by nothing, another option or something that is not
    an address (a path) means `--ray auto`."""
    out = []
    for i, a in enumerate(argv):
        out.append(a)
        if a == "--ray":
            nxt = argv[i + 1] if i + 1 < len(argv) else None
            if nxt is None or not _RAY_ADDRESS.match(nxt):
                out.append("auto")
    return out


def main(argv: list[str] | None = None) -> int:
    with warnings.catch_warnings():
        # a library's warning (polars, pyarrow) is not a message for the user: a refusal stays one
        # line
        warnings.simplefilter("ignore")
        return _main(argv)


def app_for(argv: list[str]):
    """The Typer app with only the command that argv names, when it names one: Typer builds a Click
    command (the signature of every parameter inspected) for each registered command before it runs
    any, about 40 ms for all of them, a tenth of a short command's time. Anything else (no command,
    an option first, an unknown name, --help before the command) gets the whole app, so the listings
    and the usage errors stay Typer's own."""
    import copy

    from typer.main import get_command_name

    name = argv[0] if argv else ""
    if name not in COMMAND_MODULES:
        return load_commands()
    load_commands(name)
    cmds = [
        c
        for c in app.registered_commands
        if (c.name or get_command_name(c.callback.__name__)) == name
    ]
    groups = [g for g in app.registered_groups if g.name == name]
    if len(cmds) + len(groups) != 1:
        return load_commands()
    one = copy.copy(app)
    one.registered_commands, one.registered_groups = cmds, groups
    return one


def _main(argv: list[str] | None) -> int:
    argv = ray_argv(list(sys.argv[1:] if argv is None else argv))
    # anywhere on the line: refusals also name the exception behind them
    if "--debug" in argv:
        argv = [a for a in argv if a != "--debug"]
        os.environ["KERNELSCOPE_DEBUG"] = "1"
    from dashboard.cli import timings

    timed, argv = timings.wanted(argv)
    clock = timings.Timings() if timed else None
    try:
        from dashboard.cli.progress import shown

        # a progress line on stderr when it is a terminal; nothing when piped
        with shown(also=clock):
            app_for(argv)(args=argv, prog_name="kernelscope", standalone_mode=True)
    except SystemExit as e:
        code = e.code
        if code is None:
            return 0
        if isinstance(code, int):
            return code
        print(code, file=sys.stderr)
        return 1
    # a value the command line gave that a model cannot take
    except ParameterError as e:
        print(f"kernelscope: {e}", file=sys.stderr)
        return EXIT_USAGE
    except (InputError, AnalysisError) as e:
        print(f"kernelscope: {e}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        print("kernelscope: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # noqa: BLE001 - a bug: say so, with where it happened
        tb = traceback.extract_tb(e.__traceback__)[-4:]
        print(
            "kernelscope: internal error (a bug, please report it with the lines below):",
            file=sys.stderr,
        )
        for fr in tb:
            print(f"  {fr.filename}:{fr.lineno} in {fr.name}", file=sys.stderr)
        print(f"  {type(e).__name__}: {e}", file=sys.stderr)
        return EXIT_BUG
    finally:
        if clock is not None:
            sys.stdout.flush()
            print(timings.render(clock.finish()), file=sys.stderr)
    return 0


#: libraries that drive a GPU: a process that loaded one gets the normal exit (their own exit hooks,
#: and those of a profiler that runs the command, such as nsys flushing its last CUDA activity
#: records, are left to run)
GPU_MODULES = ("torch", "cupy", "triton", "jax", "cuda", "pycuda", "numba", "tensorflow")


def _children_alive() -> bool:
    mp = sys.modules.get("multiprocessing")
    return bool(mp is not None and mp.active_children())


def exit_now(code: int) -> None:
    """End the process with `code` without Python's own teardown when nothing depends on it.

    After a command that imported polars, the interpreter's teardown (every module cleared, polars'
    and numpy's objects freed one by one) took 0.08-0.17 s on a 2-core host, a quarter of a short
    `analyze`. It is skipped when it can only cost time: the standard streams are flushed, the
    atexit handlers run (temporary folders, logging), no other Python thread and no child process is
    alive, no GPU library is loaded (GPU_MODULES) and nothing is injected (a CUDA profiler, or a
    library preloaded by one such as nsys's OS runtime tracing, which may write at exit). Anything
    else (a stream that cannot be flushed, such as a closed pipe, a thread still working, a
    `kernelscope bench` run) gets the normal exit, unchanged."""
    import atexit
    import threading

    try:
        if (
            threading.active_count() == 1
            and not _children_alive()
            and not any(m in sys.modules for m in GPU_MODULES)
            and not os.environ.get("CUDA_INJECTION64_PATH")
            and not os.environ.get("LD_PRELOAD")
        ):
            sys.stdout.flush()
            sys.stderr.flush()
            # what Python's exit runs first; the handlers are removed as they run
            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    # any exception: the normal exit below reports what it reports (a closed pipe, say)
    except Exception:
        pass
    sys.exit(code)


def _the_program(caller) -> bool:
    """Whether entry() was called as the program itself: from the top level of the main module of
    the `kernelscope` console script, with no profiler, tracer or interactive prompt to hand back
    to. A caller that runs the CLI in its own process (cProfile, a debugger, a script catching
    SystemExit) gets SystemExit, as from sys.exit."""
    if sys.getprofile() is not None or sys.gettrace() is not None or sys.flags.inspect:
        return False
    if caller.f_code.co_name != "<module>" or caller.f_globals.get("__name__") != "__main__":
        return False
    return os.path.basename(caller.f_code.co_filename).lower() in (
        "kernelscope",
        "kernelscope.exe",
        "kernelscope-script.py",
    )


def entry() -> None:
    code = main()
    if _the_program(sys._getframe(1)):
        exit_now(code)
    sys.exit(code)


if __name__ == "__main__":
    entry()
