"""Page builders: URL query parameters + the run store -> a `Report` (tables, charts, text).

More: docs/architecture.md, *dashboard.web.reports.__init__*.
"""

from __future__ import annotations

import importlib
from urllib.parse import parse_qsl, urlencode, urlsplit

from analyzers.errors import UnknownName
from dashboard.web.reports.report_blocks import Report
from dashboard.web.reports.run_links import REPEATABLE
from dashboard.web.pages import EXPORTABLE, PAGE_FOR_KIND, PAGES
from dashboard.core.source import Source


def build(src: Source, page: str, params: dict) -> Report:
    """The report of an exportable page for its query parameters."""
    if page not in EXPORTABLE:
        raise UnknownName("exportable page", page, "exportable: " + ", ".join(EXPORTABLE))
    return importlib.import_module(PAGES[page].report).build(src, params)


def parse_target(src: Source, target: str) -> tuple[str, dict, str | None]:
    """(page, params, base_url) from a dashboard URL ("http://host:8501/kernels?run=…",
    "/kernels?run=…", "kernels?run=…") or a run id (or unique prefix), which opens the page for its
    kind. Every run a link names must be in the store (RunNotFound otherwise)."""
    t = target.strip()
    if "?" in t or "/" in t or t in EXPORTABLE or t.startswith("http"):
        parts = urlsplit(t)
        path = [p for p in parts.path.split("/") if p]
        page = path[-1] if path else "home"
        base = None
        if parts.scheme and parts.netloc:
            prefix = "/".join(path[:-1])
            base = f"{parts.scheme}://{parts.netloc}/" + (prefix + "/" if prefix else "")
        params: dict = {}
        for k, v in parse_qsl(parts.query, keep_blank_values=False):
            if k in REPEATABLE:
                params.setdefault(k, []).append(v)
            else:
                params[k] = v
        params.pop("token", None)
        if page not in EXPORTABLE:
            raise UnknownName("exportable page", page, "exportable: " + ", ".join(EXPORTABLE))
        for key in ("run", "a", "b"):  # the app falls back to the newest run; an export must not
            if key in params:
                src.get(params[key])
        return page, params, base
    run = src.get(t)
    page = PAGE_FOR_KIND.get(run.kind)
    if page not in EXPORTABLE:
        raise UnknownName("exportable page", page, f"run {run.run_id} is a {run.kind} run")
    return page, {"run": run.run_id}, None


def build_target(src: Source, target: str) -> tuple[Report, str, str | None]:
    """(report, the link it shows, base URL for relative links) of a dashboard URL or a run id."""
    page, params, base = parse_target(src, target)
    rep = build(src, page, params)
    shown = f"{base or ''}{page}" + (f"?{urlencode(params, doseq=True)}" if params else "")
    return rep, shown, base


def export_html(src: Source, target: str) -> str:
    """The offline HTML file of a dashboard URL or a run id: the page's report through dashboard.web.render_html."""
    from dashboard.web.render_html import render_html

    rep, shown, base = build_target(src, target)
    return render_html([rep], source=shown, base_url=base)
