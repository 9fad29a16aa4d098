"""The CLI's JSON and an exported page's table rows, read back for the same-number checks."""

from __future__ import annotations

import html as htm
import json
import re


def _cli(capsys, *argv) -> dict:
    from dashboard.cli import main

    capsys.readouterr()
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def _export(root, target: str) -> str:
    from collectors.store import Store
    from dashboard.web.reports import export_html
    from dashboard.core.source import Source

    return export_html(Source(Store(root)), target)


def _html_rows(page: str, table_headers: list[str]) -> list[list[str]]:
    """The rows of the first HTML table whose header row starts with these headers."""
    for t in re.findall(r"<table>(.*?)</table>", page, re.S):
        heads = [
            htm.unescape(re.sub(r"<[^>]+>", "", h))
            for h in re.findall(r"<th[^>]*>(.*?)</th>", t, re.S)
        ]
        if heads[: len(table_headers)] == table_headers:
            return [
                [
                    htm.unescape(re.sub(r"<[^>]+>", "", c))
                    for c in re.findall(r"<td[^>]*>(.*?)</td>", r, re.S)
                ]
                for r in re.findall(r"<tr>(.*?)</tr>", t, re.S)
                if "<td" in r
            ]
    raise AssertionError(f"no table with headers {table_headers}")
