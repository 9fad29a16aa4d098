"""Architecture rules a test keeps: imports flow one way (no cycles, function-level imports
included), Streamlit and altair stay in the Streamlit and chart modules (the core never reaches
Streamlit, even through another module), modules stay small, help on every command, `analyze` loads
no page code, every page is in the page registry and every format parser in the format registry,
ruff finds nothing, and no test imports another."""

from __future__ import annotations

import ast
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("collectors", "analyzers", "dashboard")
#: modules allowed to import streamlit: the app, its pages, their helpers and the Streamlit renderer
STREAMLIT_MODULES = (
    "dashboard.web.app",
    "dashboard.web.store_access",
    "dashboard.web.widgets",
    "dashboard.web.render_streamlit",
    "dashboard.web.components",
    "dashboard.web.serve",
)
#: modules allowed to import altair: the chart builders, the theme, the HTML renderer (its Vega
#: bundle)
ALTAIR_MODULES = ("dashboard.web.charts", "dashboard.web.theme", "dashboard.web.render_html")
#: the one import from collectors into analyzers code: the CPU cases of the bench suite run the
#: numerics experiments (pure functions that the textbook models also use); everything derived is
#: computed on read
ALLOWED_COLLECTOR_TO_ANALYZER = {("collectors.bench.cpu_cases", "analyzers.cases.numerics")}
#: lines of a module as ruff format lays it out at 100 columns (600 at the density before the
#: formatter)
MAX_LINES = 1100
#: declarative case catalogs (data: parameters, figures and small models per case) may be longer
CATALOGS = {
    "analyzers.cases.s51_submission",
    "analyzers.cases.s52_operator",
    "analyzers.cases.s53_fusion",
    "analyzers.cases.s54_compilers",
    "analyzers.cases.s55_runtime",
    "analyzers.cases.s56_request",
}


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for p in (REPO / pkg).rglob("*.py"):
            rel = p.relative_to(REPO).with_suffix("")
            parts = list(rel.parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = p
    return out


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """Every project module (or external top-level package) this module imports, at any level of nesting."""
    tree = ast.parse(path.read_text(), str(path))
    pkg = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            names = [a.name for a in node.names]
            subs = [f"{mod}.{n}" for n in names if f"{mod}.{n}" in MODULES]
            # `from dashboard.web.reports import kernels` imports that module
            out.update(subs)
            if len(subs) < len(names):  # ... and `from X import name` imports X itself
                out.add(mod)
    return out


def _project(mods: set[str]) -> set[str]:
    """The imported names that are project modules (a package import counts as its __init__)."""
    return {m for m in mods if m in MODULES}


GRAPH = {name: _project(_imports(name, path)) for name, path in MODULES.items()}
RAW = {name: _imports(name, path) for name, path in MODULES.items()}


def test_no_import_cycle_anywhere():
    """Depth-first search over the graph of every import (module level and inside functions)."""
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for n in sorted(GRAPH[m]):
            if state.get(n) == 1:
                cycles.append(stack[stack.index(n) :] + [n])
            elif n not in state:
                visit(n)
        stack.pop()
        state[m] = 2

    for m in sorted(GRAPH):
        if m not in state:
            visit(m)
    assert cycles == []


def test_the_cycle_check_sees_function_level_imports(tmp_path):
    """The walker finds an import inside a function (the kind that hid the old artifact <-> parser cycle)."""
    p = tmp_path / "m.py"
    p.write_text("def f():\n    from collectors import ncu\n    return ncu\n")
    assert "collectors.ncu" in _imports("collectors.m", p)


def _violations(src_prefix: str, dst_prefixes: tuple[str, ...], allowed=frozenset()) -> dict:
    bad = {}
    for m, deps in GRAPH.items():
        if m == src_prefix or m.startswith(src_prefix + "."):
            hit = {d for d in deps if d.split(".")[0] in dst_prefixes and (m, d) not in allowed}
            if hit:
                bad[m] = sorted(hit)
    return bad


def test_collectors_import_neither_dashboard_nor_analyzers():
    assert (
        _violations("collectors", ("dashboard", "analyzers"), ALLOWED_COLLECTOR_TO_ANALYZER) == {}
    )


def test_analyzers_import_neither_collectors_nor_dashboard():
    assert _violations("analyzers", ("collectors", "dashboard")) == {}


def test_cli_imports_no_page_or_view_modules():
    """The command line renders analyses; it never loads a Streamlit page, the Streamlit renderer or
    the app's caches. The page builders (dashboard.web.reports) are for `kernelscope export` only."""
    forbidden = (
        "dashboard.web.views",
        "dashboard.web.render_streamlit",
        "dashboard.web.widgets",
        "dashboard.web.store_access",
        "dashboard.web.app",
    )
    bad = {
        m: sorted(d for d in deps if d.startswith(forbidden))
        for m, deps in GRAPH.items()
        if m.startswith("dashboard.cli")
    }
    assert {m: d for m, d in bad.items() if d} == {}
    reports = {
        m
        for m, deps in GRAPH.items()
        if m.startswith("dashboard.cli")
        and any(d.startswith("dashboard.web.reports") for d in deps)
    }
    assert reports == {"dashboard.cli.export"}


def test_streamlit_and_altair_only_in_their_modules():
    bad = {}
    for m, deps in RAW.items():
        tops = {d.split(".")[0] for d in deps}
        if "streamlit" in tops and not (
            m in STREAMLIT_MODULES or m.startswith("dashboard.web.views")
        ):
            bad[m] = "streamlit"
        if "altair" in tops and m not in ALTAIR_MODULES:
            bad[m] = "altair"
    assert bad == {}


def test_no_module_over_1100_lines_and_no_builder_in_views():
    long = {
        m: n
        for m, p in MODULES.items()
        if (n := len(p.read_text().splitlines())) > MAX_LINES and m not in CATALOGS
    }
    assert long == {}
    # views draw the reports of dashboard.web.reports and add widgets; they compute nothing
    for m in MODULES:
        # (the registries give them the options of their pickers)
        if m.startswith("dashboard.web.views"):
            assert not any(
                d.startswith("analyzers.") and d not in ("analyzers.cases", "analyzers.gpus")
                for d in GRAPH[m]
            ), m
            assert not any(
                d.startswith("collectors.")
                and d not in ("collectors.errors", "collectors.schema", "collectors.progress")
                for d in GRAPH[m]
            ), m


def test_help_on_every_command(capsys):
    from dashboard.cli import load_commands, main
    import typer.main

    cmd = typer.main.get_command(load_commands())
    assert {"ingest", "runs", "analyze", "gpus", "dashboard", "export", "predict", "bench"} <= set(
        cmd.commands
    )
    for name in cmd.commands:
        assert main([name, "--help"]) == 0
        assert "Usage" in capsys.readouterr().out


def test_analyze_loads_no_dashboard_page_code_altair_or_streamlit(tmp_path):
    """`kernelscope analyze TRACE` imports the analyzers and its own command module, not the pages
    (nor altair, nor streamlit), nor the other commands' modules (but for the timeline report it
    prints), nor numpy.ma (which np.median and polars' Series from a numpy array import)."""
    trace = REPO / "sample_traces" / "h200" / "torch_ffn" / "ffn_M1_eager.json.gz"
    others = [
        f"dashboard.cli.{m}"
        for m in ("index", "cases", "export", "compare", "hotspots", "bench", "join")
    ]
    code = (
        "import sys\nfrom dashboard.cli import main\n"
        f"rc = main(['analyze', {str(trace)!r}, '--format', 'json', '--store', "
        f"{str(tmp_path / 's')!r}])\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('altair', 'streamlit')\n"
        "             or m.startswith(('dashboard.web.reports', 'dashboard.web.views', "
        "'dashboard.render'))\n"
        f"             or m in {others!r} or m == 'numpy.ma')\n"
        "print('LOADED', bad, file=sys.stderr); sys.exit(rc)\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert "LOADED []" in r.stderr


@pytest.mark.parametrize("report", ["full_raw.csv.gz", "full_details.csv.gz", "full.ncu-rep.gz"])
def test_analyze_of_an_ncu_report_imports_no_numpy(tmp_path, report):
    """An ncu report needs no numpy (0.12-0.17 s of every such `analyze` on a 2-vCPU host): neither
    the raw-page reader, nor the count of metrics per launch of the other formats, nor the kernel
    analysis, nor `analyze`'s check whether its argument names many ranks (dashboard.core.ranks, whose
    straggler analysis uses numpy, imports it only when it runs)."""
    if report.endswith(".ncu-rep.gz"):
        pytest.importorskip("ncu_report")
    raw = REPO / "sample_traces" / "h200" / "chapter5_kernels" / report
    code = (
        "import sys\nfrom dashboard.cli import main\n"
        f"rc = main(['analyze', {str(raw)!r}, '--format', 'json', '--store', "
        f"{str(tmp_path / 's')!r}])\n"
        "print('LOADED', sorted(m for m in sys.modules if m.split('.')[0] == 'numpy')[:3], "
        "file=sys.stderr)\n"
        "sys.exit(rc)\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert "LOADED []" in r.stderr


def test_each_command_is_registered_by_the_module_the_cli_imports_for_it():
    """dashboard.cli.COMMAND_MODULES (which module a command line imports) against what each module
    registers on the app when imported, in a fresh interpreter."""
    code = (
        "import importlib, json\nfrom typer.main import get_command_name\n"
        "from dashboard.cli import MODULES\nfrom dashboard.cli._app import app\n"
        "seen, out = set(), {}\n"
        "for m in MODULES:\n"
        "    importlib.import_module('dashboard.cli.' + m)\n"
        "    names = {c.name or get_command_name(c.callback.__name__) for c in "
        "app.registered_commands}\n"
        "    names |= {g.name for g in app.registered_groups}\n"
        "    out.update({n: m for n in names - seen}); seen |= names\n"
        "print(json.dumps(out))\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120
    )
    assert r.returncode == 0, r.stderr[-2000:]
    from dashboard.cli import COMMAND_MODULES

    assert json.loads(r.stdout) == COMMAND_MODULES


def _parser_modules() -> set[str]:
    from collectors.formats import FORMATS

    return {f.parser.split(":")[0] for f in FORMATS.values()}


@pytest.mark.parametrize("mod", sorted(_parser_modules()))
def test_one_format_per_parser_no_imports_between_them(mod):
    assert not (GRAPH[mod] & (_parser_modules() - {mod}))


def test_ruff_finds_no_errors():
    """`ruff check` (pyproject's [tool.ruff]: syntax errors, undefined names, unused imports and
    variables) on the product, its tests and the perf scripts; --no-cache: nothing written into the
    checkout."""
    import shutil

    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff comes with the test extra (pip install -e '.[test]')")
    r = subprocess.run(
        [
            ruff,
            "check",
            "--no-cache",
            "--output-format",
            "concise",
            "analyzers",
            "collectors",
            "dashboard",
            "tests",
            "perf",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stdout + r.stderr


def test_no_test_module_imports_another():
    """Shared builders and fixtures live in tests/support/ (or conftest.py,
    tests/dashboard/helpers.py); a test module (test_*.py) is never imported by another file, so
    each runs, moves and fails on its own."""
    bad = []
    for f in sorted((REPO / "tests").rglob("*.py")):
        if ".venv" in f.parts or "corpus" in f.parts:
            continue
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            if any(n.startswith("tests.") and n.split(".")[-1].startswith("test_") for n in names):
                bad.append(f"{f.relative_to(REPO)}:{node.lineno}")
    assert not bad, "test modules imported by other files: " + ", ".join(bad)


#: the files that may store a run without the core's check (collectors.store.Store.put_bytes /
#: put_path): the store itself, the core's one ingest entry point, and the store's own tests
PUT_CALLERS = {
    "collectors/store.py",
    "dashboard/core/source.py",
    "tests/collectors/test_store.py",
    "tests/collectors/test_store_versions.py",
    "tests/collectors/test_index.py",
    "tests/collectors/test_ncu_analysis_read.py",
    "tests/dashboard/test_dashboard_export.py",  # a crafted parse with a hostile name
    "perf/run_index.py",  # times the store's index
}


def test_one_ingest_entry_point():
    """The store stores, the core judges: every command, page, script and test ingests through
    dashboard.core.source.Source.ingest_bytes / ingest_path (parse, check that it can be analysed,
    store); only PUT_CALLERS reach the store's unchecked writer."""
    bad = []
    for f in sorted([*REPO.glob("*/**/*.py")]):
        rel = f.relative_to(REPO).as_posix()
        if (
            rel.startswith((".venv/", "tests/corpus/", "tests/test_layout.py"))
            or rel in PUT_CALLERS
        ):
            continue
        text = f.read_text(encoding="utf-8", errors="replace")
        bad += [f"{rel}:{m}" for m in re.findall(r"\.put_(?:bytes|path)\(", text)]
    assert not bad, "unchecked stores outside the store's own tests: " + ", ".join(bad)
    # and the old name of the store's writer is gone (one name per door)
    assert "def ingest_" not in (REPO / "collectors" / "store.py").read_text()


def test_a_module_that_imports_inside_functions_says_why_once():
    """Imports sit at the top of a module unless start-up needs them later; a module that keeps
    three or more inside its functions says so once, in its docstring ("Start-up: ...")."""
    silent = []
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        inner = sum(
            isinstance(x, (ast.Import, ast.ImportFrom))
            for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            for stmt in node.body
            for x in ast.walk(stmt)
        )
        if inner >= 3 and "start-up" not in (ast.get_docstring(tree) or "").lower():
            silent.append(f"{name} ({inner})")
    assert not silent, "function-level imports without the module saying why: " + ", ".join(silent)


#: what never needs Streamlit: the application core (dashboard.core: what the command line, the
#: pages and the server all call), the CLI, the page builders and the page registry
CORE_PREFIXES = (
    "analyzers.",
    "collectors.",
    "dashboard.core.",
    "dashboard.cli.",
    "dashboard.web.reports.",
)
CORE_MODULES = ("dashboard.web.pages",)


def test_the_core_imports_neither_the_web_app_nor_the_cli():
    """dashboard.core is the floor the web app and the command line stand on: no arrow back up."""
    bad = {
        m: sorted(d for d in GRAPH[m] if d.startswith(("dashboard.web", "dashboard.cli")))
        for m in MODULES
        if m.startswith("dashboard.core")
    }
    assert {m: v for m, v in bad.items() if v} == {}


def _closure(name: str) -> set[str]:
    seen, todo = set(), [name]
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        todo.extend(GRAPH.get(m, ()))
    return seen


def test_no_module_of_the_core_imports_streamlit_even_through_another():
    bad = {}
    for m in MODULES:
        if not (m.startswith(CORE_PREFIXES) or m in CORE_MODULES):
            continue
        via = sorted(
            d for d in _closure(m) if "streamlit" in {x.split(".")[0] for x in RAW.get(d, ())}
        )
        if via:
            bad[m] = via
    assert bad == {}


def test_every_page_is_in_the_page_registry_and_the_app_draws_only_those():
    from dashboard.web import pages

    views = {
        p.name
        for p in (REPO / "dashboard" / "web" / "views").glob("*.py")
        if p.name != "__init__.py"
    }
    assert views == {p.view for p in pages.PAGES.values()}
    app = (REPO / "dashboard" / "web" / "app.py").read_text()
    assert app.count("st.Page(") == 1 and "registry.sections()" in app
    for p in pages.PAGES.values():
        if p.report:
            assert importlib.util.find_spec(p.report) is not None, p.slug


def test_every_format_parser_is_in_the_format_registry():
    """A module of collectors/ with a `parse(data, name)` reader is a format's parser: the registry
    must name it (else the format is unreachable from ingest, upload and the store)."""
    from collectors import formats

    named = {f.parser.split(":")[0] for f in formats.FORMATS.values()}
    parsers = {
        m
        for m, p in MODULES.items()
        if m.startswith("collectors.")
        and re.search(r"^def parse\(data: bytes, name: str", p.read_text(), re.M)
    }
    assert parsers and parsers <= named, parsers - named
    for f in formats.FORMATS.values():
        for ref in (f.parser, f.streamed, f.streamed_partial, f.check):
            if ref:
                assert callable(formats.resolve(ref)), ref


#: what a unit test (tests/unit/) never uses: a process, the Streamlit test runner, the run store, a
#: browser, Ray
UNIT_FORBIDDEN = (
    "subprocess",
    "streamlit",
    "collectors.store",
    "dashboard.core.source",
    "dashboard.web.store_access",
    "playwright",
    "ray",
    "tests.ray_helpers",
    "tests.support.e2e_browser",
)


def test_the_unit_layer_stays_in_memory():
    """tests/unit/ is what `./ks test --fast` runs in well under a minute: no subprocess, AppTest,
    run store, browser or Ray cluster there (those tests live beside it, by package)."""
    bad = {}
    for p in sorted((REPO / "tests" / "unit").rglob("test_*.py")):
        mods = _imports(p.stem, p)
        hits = sorted(
            m for m in mods if any(m == f or m.startswith(f + ".") for f in UNIT_FORBIDDEN)
        )
        if hits:
            bad[str(p.relative_to(REPO))] = hits
    assert bad == {}
    assert len(list((REPO / "tests" / "unit").rglob("test_*.py"))) >= 10


#: what `ruff format` and the long-line rule cover: the product, its tests, the perf scripts and the
#: tools
FORMATTED = ("analyzers", "collectors", "dashboard", "tests", "perf", "tools", "hatch_build.py")


def _ruff():
    import shutil

    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff comes with the test extra (pip install -e '.[test]')")
    return ruff


def test_ruff_format_leaves_everything_as_it_is():
    """`ruff format --check` at pyproject's 100 columns (its version pinned in constraints.txt, as
    `./ks` installs it): a formatted tree, so a diff shows what changed, not how it was typed."""
    r = subprocess.run(
        [_ruff(), "format", "--check", "--no-cache", *FORMATTED],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]


def test_under_two_percent_of_lines_are_over_100_characters():
    """What the formatter cannot fold (a long URL, a docstring's first line, a table in a comment) stays rare."""
    total = long = 0
    for top in FORMATTED:
        paths = [REPO / top] if top.endswith(".py") else sorted((REPO / top).rglob("*.py"))
        for p in paths:
            if "tests/corpus/" in p.as_posix() and "/src/" in p.as_posix():
                continue
            lines = p.read_text(errors="replace").splitlines()
            total += len(lines)
            long += sum(1 for ln in lines if len(ln) > 100)
    assert total > 10_000 and long / total < 0.02, f"{long} of {total} lines over 100 characters"
