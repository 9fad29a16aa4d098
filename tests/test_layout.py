"""Architecture rules that a test keeps: imports flow one way; help on every command."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module.split(".")[0])
    return out


@pytest.mark.parametrize("pkg", ["collectors", "analyzers"])
def test_nothing_outside_dashboard_imports_streamlit_or_altair(pkg):
    bad = {str(p.relative_to(REPO)): _imports(p) & {"streamlit", "altair", "dashboard"}
           for p in (REPO / pkg).rglob("*.py")}
    assert {k: v for k, v in bad.items() if v} == {}


def test_analyzers_do_not_import_collectors_io():
    bad = {str(p.relative_to(REPO)): _imports(p) & {"collectors"} for p in (REPO / "analyzers").rglob("*.py")}
    assert {k: v for k, v in bad.items() if v} == {}


def test_help_on_every_command(capsys):
    from dashboard.cli import main
    from dashboard.cli._app import app
    import typer.main
    cmd = typer.main.get_command(app)
    assert {"ingest", "runs", "analyze", "gpus", "dashboard"} <= set(cmd.commands)
    for name in cmd.commands:
        assert main([name, "--help"]) == 0
        assert "Usage" in capsys.readouterr().out
