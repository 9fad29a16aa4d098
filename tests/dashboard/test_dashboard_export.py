"""The offline HTML export: one self-contained file, the same tables and charts as the page, names
escaped; `kernelscope export URL_OR_RUN --html FILE`."""

from __future__ import annotations

import re
from html import escape

import polars as pl
import pytest

from tests.dashboard.helpers import FULL, make_store
from dashboard.core.source import Source

pytest.importorskip("ncu_report")
EVIL = '</script><script>alert("x")</script><img src=x onerror=alert(1)>'


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    from collectors.ingest import parse_bytes
    from collectors.store import Store

    root = tmp_path_factory.mktemp("export") / "store"
    ids = make_store(root)
    # a run whose kernel names are hostile: every name must come out escaped
    parsed = parse_bytes(FULL.read_bytes(), FULL.name)
    k = parsed.tables["kernels"]
    parsed.tables["kernels"] = k.with_columns(
        short_name=pl.when(pl.col("id") == 5).then(pl.lit(EVIL)).otherwise(pl.col("short_name")),
        kernel_name=pl.when(pl.col("id") == 5)
        .then(pl.lit(EVIL + " `tick` **bold**"))
        .otherwise(pl.col("kernel_name")),
    )
    ids["evil"] = Store(root).put_bytes(b"evil report", "evil<b>.ncu-rep", parsed=parsed)[0].run_id
    return root, ids


def _scripts(html: str) -> list[str]:
    return re.findall(r"<script\b[^>]*>", html, flags=re.I)


def test_export_is_one_offline_file_with_tables_and_charts(env):
    from collectors.store import Store
    from dashboard.web.reports import export_html
    from dashboard.web.reports import build

    root, ids = env
    src = Source(Store(root))
    html = export_html(
        src, f"http://gpu-server:8501/kernels?run={ids['full']}&kernel=5&token=hunter2"
    )
    assert "hunter2" not in html
    # no script loaded from anywhere
    assert all("src=" not in s for s in _scripts(html))
    assert not re.search(
        r"<(script|link|img|iframe)[^>]+(src|href)\s*=\s*[\"']?https?:", html, flags=re.I
    )
    rep = build(src, "kernels", {"run": ids["full"], "kernel": "5"})
    charts = rep.charts()
    assert {"roofline", "instruction_roofline", "bandwidth", "occupancy", "stall_reasons"} <= set(
        charts
    )
    assert "vegaEmbed" in html and html.count('<div class="chart"') == len(charts)
    # the same tables as the page: every table's header row is there
    for t in rep.tables().values():
        assert all(f">{escape(c.header)}</th>" in html for c in t.cols.values()), t.name
    assert "31.9-way shared-memory bank conflicts" in html
    # no case recognised
    copy = export_html(src, f"http://gpu-server:8501/kernels?run={ids['full']}&kernel=0")
    # links point at the server
    assert '<a href="http://gpu-server:8501/cases">Textbook cases</a>' in copy


def test_export_escapes_kernel_and_file_names(env):
    from collectors.store import Store
    from dashboard.web.reports import export_html

    root, ids = env
    from dashboard.web.reports import build

    html = export_html(Source(Store(root)), f"kernels?run={ids['evil']}&kernel=5")
    n_charts = len(
        build(Source(Store(root)), "kernels", {"run": ids["evil"], "kernel": "5"}).charts()
    )
    # HTML outside the script elements
    outside = re.sub(r"<script>.*?</script>", "", html, flags=re.S)
    assert EVIL not in outside and "<img src=x" not in outside and "<script>alert" not in outside
    # shown, as text, in the tables
    assert "&lt;/script&gt;&lt;script&gt;alert(&quot;x&quot;)" in html
    assert "evil&lt;b&gt;.ncu-rep" in html
    # the only script elements are ours: the Vega bundle and one vegaEmbed call per chart; inside
    # them no name can close the element ("</" is escaped in the JSON)
    bodies = re.findall(r"<script>(.*?)</script>", html, flags=re.S)
    assert len(bodies) == 1 + n_charts and "<script" not in outside
    for body in bodies[1:]:
        assert body.startswith("vegaEmbed(") and "</" not in body


def test_export_run_id_and_errors(env, tmp_path):
    from dashboard.cli import main

    root, ids = env
    out = tmp_path / "k.html"
    assert main(["export", ids["full"][:8], "--html", str(out), "--store", str(root)]) == 0
    text = out.read_text()
    assert text.startswith("<!DOCTYPE html>") and "Kernels" in text
    assert (
        main(["export", "http://h:1/timeline?run=x", "--html", str(out), "--store", str(root)]) == 1
    )
    assert main(["export", "ffffffffffff", "--html", str(out), "--store", str(root)]) == 1
    assert (
        main(
            [
                "export",
                f"compare?a={ids['basic']}&b={ids['full']}",
                "--html",
                str(out),
                "--store",
                str(root),
            ]
        )
        == 0
    )
    assert "Per-kernel change" in out.read_text()
    assert main(["export", "gpus", "--html", str(out), "--store", str(root)]) == 0
    assert "Measured ceilings vs spec" in out.read_text()


def test_markdown_subset_escapes():
    from dashboard.web.render_html import md_to_html
    from dashboard.web.reports.report_blocks import code

    assert (
        md_to_html("**a** <b> `x<y` [Runs](runs)")
        == "<p><strong>a</strong> &lt;b&gt; <code>x&lt;y</code> Runs</p>"
    )
    assert (
        md_to_html("[Runs](runs?kind=ncu)", base_url="http://s:1/")
        == '<p><a href="http://s:1/runs?kind=ncu">Runs</a></p>'
    )
    assert md_to_html("[x](javascript:alert)", base_url="http://s:1/") == "<p>x</p>"
    assert md_to_html(code("a`b*c*")) == "<p><code>a`b*c*</code></p>"
