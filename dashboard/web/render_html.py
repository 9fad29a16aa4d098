"""The HTML renderer of a Report: one self-contained, offline file with the same tables and charts
as the app.

The charts are Vega-Lite specs drawn by vega-embed, whose JavaScript is written into the file once
(from vl-convert's bundle, the `export` extra): no CDN, no network. Everything a user or a profiled
program named is HTML-escaped; specs are embedded as JSON with "</" escaped so no string can close
the script element.

    html = render_html([report], source="kernels?run=1f87&kernel=5")
Start-up: imports that only some commands, pages or GPUs need sit inside the functions that use
them, so each command loads what it uses.
"""

from __future__ import annotations

import base64
import datetime as dt
import functools
import html
import json
import re

from dashboard.web.reports.report_blocks import (
    Chart,
    Heading,
    Metrics,
    Report,
    Table,
    Text,
    Timeline,
    safe_link,
)
from dashboard.web.theme import FONT, ensure_theme

KIND_LABELS = {"info": "ℹ", "warning": "⚠", "error": "✖", "success": "✔"}

CSS = f"""
body {{ font-family: {FONT}; color: #1f2937; margin: 24px auto; max-width: 1280px; padding: 0 16px; }}
h1 {{ font-size: 26px; margin: 0 0 4px; }} h2 {{ font-size: 20px; margin: 28px 0 8px; }}
h3 {{ font-size: 16px; margin: 20px 0 6px; }}
.sub {{ color: #4b5563; margin-bottom: 4px; }} .meta {{ color: #6b7280; font-size: 12px; margin-bottom: 18px; }}
.caption {{ color: #6b7280; font-size: 13px; }}
.box {{ padding: 8px 12px; border-radius: 6px; margin: 8px 0; }}
.info {{ background: #eff6ff; }} .warning {{ background: #fffbeb; }} .error {{ background: #fef2f2; }}
.success {{ background: #ecfdf5; }}
table {{ border-collapse: collapse; font-size: 13px; margin: 6px 0 4px; }}
th, td {{ border-bottom: 1px solid #e5e7eb; padding: 4px 8px; text-align: left; vertical-align: top; }}
th {{ background: #f9fafb; font-weight: 600; position: sticky; top: 0; }}
td.n {{ text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }}
.scroll {{ max-height: 480px; overflow: auto; border: 1px solid #e5e7eb; }} .wide {{ overflow-x: auto; }}
blockquote {{ border-left: 3px solid #d1d5db; margin: 8px 0; padding: 2px 12px; color: #374151; }}
.chart {{ width: 100%; margin: 8px 0; }}
code {{ background: #f3f4f6; padding: 0 3px; border-radius: 3px; font-size: 90%; }}
"""

#: metric cards (cards_html), in the app and in the exports. Scoped to .ks-cards: in the app the
#: rules are part of the page. Colours that work on Streamlit's light and dark themes (text
#: inherits; the help is a dark tooltip).
CARDS_CSS = """
.ks-cards { display: grid; gap: 0 16px; margin: 0 0 16px; }
.ks-card { min-width: 0; padding: 4px 0; }
.ks-card .ks-l { display: flex; align-items: center; gap: 6px; font-size: 14px; }
.ks-card .ks-lt, .ks-q .ks-qm { opacity: .75; }
.ks-card .ks-v { font-size: clamp(24px, 2.4vw, 36px); line-height: 1.2; padding-bottom: 4px; white-space: normal;
  overflow-wrap: normal; }
.ks-card .ks-d { display: inline-block; font-size: 14px; padding: 0 7px; border-radius: 8px; }
.ks-card .ks-d.good { color: #158237; background: rgba(33, 195, 84, .1); }
.ks-card .ks-d.bad { color: #e0252a; background: rgba(255, 43, 43, .09); }
.ks-q { position: relative; display: inline-flex; cursor: help; }
.ks-q .ks-qm { display: inline-flex; align-items: center; justify-content: center; width: 14px; height: 14px;
  border: 1px solid currentColor; border-radius: 50%; font-size: 10px; }
.ks-q .ks-tip { display: none; position: absolute; z-index: 1000; left: -8px; top: 20px; width: max-content;
  max-width: 320px; padding: 8px 10px; border-radius: 6px; background: #262730; color: #fafafa; font-size: 13px;
  font-weight: 400; line-height: 1.4; white-space: normal; box-shadow: 0 2px 8px rgba(0, 0, 0, .25); }
.ks-q .ks-tip p { margin: 0 0 4px; } .ks-q .ks-tip p:last-child { margin: 0; }
.ks-q .ks-tip code { background: rgba(255, 255, 255, .12); color: inherit; }
.ks-q:hover .ks-tip, .ks-q:focus .ks-tip { display: block; }
@media (max-width: 640px) { .ks-cards { grid-template-columns: 1fr !important; } }
@media (prefers-color-scheme: dark) { .ks-card .ks-d.good { color: #3dd56d; } .ks-card .ks-d.bad { color: #ff6c6c; } }
"""


def cards_html(b: Metrics) -> str:
    """A Metrics block as one HTML grid of cards: label (its help as a tooltip on the "?", also when
    focused), the value, and the change coloured as st.metric colours it (a change written with a
    leading "-" or "−" is down; down is good where lower is better). As many cards a row as fit at
    190 px or more each (at most three when there are more than five); a value never clipped: a card
    too narrow for it wraps it at its spaces. Everything is escaped; the help's markdown is rendered
    (md_to_html)."""
    per_row = 3 if len(b.items) > 5 else max(1, len(b.items))
    cards = []
    for label, value, help_, *delta in b.items:
        d = delta[0] if delta else None
        tip = (
            '<span class="ks-q" tabindex="0" role="note" '
            f'aria-label="{html.escape(_plain(help_))}"><span class="ks-qm">?</span><span '
            f'class="ks-tip">{md_to_html(help_)}</span></span>'
            if help_
            else ""
        )
        change = ""
        if d:
            down = str(d).startswith(("-", "−"))
            good = down == b.lower_is_better
            change = f'<div class="ks-d {"good" if good else "bad"}">{"↓" if down else "↑"} {html.escape(str(d))}</div>'
        cards.append(
            '<div class="ks-card"><div class="ks-l"><span '
            f'class="ks-lt">{html.escape(str(label))}</span>{tip}</div><div '
            f'class="ks-v">{html.escape(str(value))}</div>{change}</div>'
        )
    return (
        f'<div class="ks-cards" style="grid-template-columns: repeat(auto-fit, '
        f"minmax(max(190px, "
        f'calc((100% - {16 * (per_row - 1)}px) / {per_row})), 1fr))">' + "".join(cards) + "</div>"
    )


def _plain(md: str) -> str:
    """The help's text without markdown marks, for a screen reader's label."""
    return re.sub(r"[`*_]", "", str(md))


@functools.lru_cache(maxsize=1)
def vega_bundle() -> str | None:
    """vega + vega-lite + vega-embed as one script (vl-convert's bundle, matching altair's
    Vega-Lite); None if vl-convert is not installed."""
    try:
        import vl_convert as vlc
    except ImportError:
        return None
    from altair.utils._importers import vl_version_for_vl_convert

    return vlc.javascript_bundle(vl_version=vl_version_for_vl_convert())


# ---- a small markdown subset -> HTML, escaping everything
# ----------------------------------------------

_CODE = re.compile(r"(`+)(.+?)\1", re.S)
_LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")


def md_to_html(md: str, base_url: str | None = None) -> str:
    """`code`, **bold**, *em* / _em_, [text](link), paragraphs and "> " quotes; all text escaped.
    Relative links get `base_url` in front, or become plain text when there is none (an offline file
    has no server)."""
    out, pos = [], 0
    for m in _CODE.finditer(md):
        out.append(_inline(md[pos : m.start()], base_url))
        body = m.group(2)
        if body.startswith(" ") and body.endswith(" ") and body.strip():
            body = body[1:-1]
        out.append(f"<code>{html.escape(body)}</code>")
        pos = m.end()
    out.append(_inline(md[pos:], base_url))
    joined = "".join(out)
    paras = [p for p in re.split(r"\n\s*\n", joined) if p.strip()]
    return "".join(
        f"<blockquote>{p.strip()[5:]}</blockquote>"
        if p.strip().startswith("&gt; ")
        else f"<p>{p.strip().replace(chr(10), '<br>')}</p>"
        for p in paras
    )


def _inline(s: str, base_url: str | None) -> str:
    s = html.escape(s, quote=True)

    def link(m):
        label, url = m.group(1), html.unescape(m.group(2))
        if re.match(r"https?://", url):
            return f'<a href="{html.escape(url)}">{label}</a>'
        if base_url and re.fullmatch(r"[A-Za-z0-9_\-/]*(\?[^\s\"'<>]*)?", url):
            return (
                f'<a href="{html.escape(base_url.rstrip("/") + "/" + url.lstrip("/"))}">{label}</a>'
            )
        return label

    s = _LINK.sub(link, s)
    s = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", s, flags=re.S)
    s = re.sub(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])", r"<em>\1</em>", s)
    s = re.sub(r"(?<![\w])_(?!\s)(.+?)(?<!\s)_(?![\w])", r"<em>\1</em>", s)
    return s


# ---- blocks -> HTML
# ----------------------------------------------------------------------------------


def _table_html(t: Table, base_url: str | None) -> str:
    cols = [c for c in t.cols if c in t.frame.columns]
    head = "".join(
        f'<th title="{html.escape(t.cols[c].help or "")}">{html.escape(t.cols[c].header)}</th>'
        for c in cols
    )
    body = []
    for row in t.frame.select(cols).iter_rows():
        cells = []
        for c, v in zip(cols, row):
            spec = t.cols[c]
            shown = spec.format(v)
            if spec.kind == "link" and v:
                label = html.escape(spec.link_text or str(v))
                if base_url and safe_link(v) and not re.match(r"(?i)^https?://", str(v)):
                    href = base_url.rstrip("/") + "/" + str(v).lstrip("/")
                    cells.append(f'<td><a href="{html.escape(href)}">{label}</a></td>')
                else:
                    cells.append(f"<td>{html.escape(str(v))}</td>")
            elif spec.kind == "number":
                cells.append(f'<td class="n">{html.escape(shown)}</td>')
            else:
                cells.append(f"<td>{html.escape(shown)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    cls = ' class="scroll"' if t.frame.height > 25 else ' class="wide"'
    cap = f'<div class="caption">{md_to_html(t.caption, base_url)}</div>' if t.caption else ""
    return f"<div{cls}><table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table></div>{cap}"


def _json_for_script(obj) -> str:
    """JSON safe inside <script>: no "</" (cannot close the element), no HTML comment openers, no U+2028/9."""
    s = json.dumps(obj, allow_nan=False, default=str)
    return (
        s.replace("</", "<\\/")
        .replace("<!--", "<\\!--")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def _spec(chart) -> dict:
    ensure_theme()
    spec = chart.to_dict()
    if "facet" in spec or {"row", "column", "facet"} & set(spec.get("encoding", {})):
        # a grid of views keeps its own size: Vega-Lite cannot fit it to the page (Streamlit
        # neither)
        return spec
    spec["width"] = "container"
    spec.setdefault("autosize", {"type": "fit-x", "contains": "padding"})
    return spec


@functools.lru_cache(maxsize=1)
def _timeline_js() -> str:
    """The page's canvas timeline (dashboard/web/static/timeline.js) as a classic script defining ksTimeline."""
    from pathlib import Path

    static = Path(__file__).parent / "static"
    js = (static / "timeline.js").read_text(encoding="utf-8")
    return js.replace(
        "export default function(component)", "window.ksTimeline = function(component)"
    ), (static / "timeline.css").read_text(encoding="utf-8")


def timeline_html(b: Timeline, div: str) -> str:
    """The timeline, drawn offline by the same canvas code as the app, on the window the page showed
    (zoom and pan work on that data; there is no server to ask for finer detail)."""
    js, css = _timeline_js()
    js = js.replace("</script", "<\\/script")
    data = base64.b64encode(b.payload).decode()
    return (
        f'<style>{css}</style><div id="{div}"></div><script>{js}\n'
        f'(function(){{var b=atob("{data}"),u=new Uint8Array(b.length);for(var '
        f"i=0;i<b.length;i++)"
        f'u[i]=b.charCodeAt(i);window.ksTimeline({{data:u,parentElement:document.getElementById("{div}")}});'
        f"}})();</script>"
    )


def report_html(
    rep: Report, *, base_url: str | None = None, n0: int = 0, has_js: bool = True
) -> tuple[str, int]:
    parts = [f"<h1>{md_to_html(rep.title)[3:-4]}</h1>"]
    if rep.subtitle:
        parts.append(f'<div class="sub">{md_to_html(rep.subtitle)[3:-4]}</div>')
    n = n0
    for b in rep.blocks:
        if isinstance(b, Text):
            inner = md_to_html(b.md, base_url)
            if b.kind == "markdown":
                parts.append(inner)
            elif b.kind == "caption":
                parts.append(f'<div class="caption">{inner}</div>')
            else:
                parts.append(
                    f'<div class="box {b.kind}">{KIND_LABELS.get(b.kind, "")} {inner}</div>'
                )
        elif isinstance(b, Heading):
            tag = "h2" if b.level <= 2 else "h3"
            parts.append(f"<{tag}>{md_to_html(b.text)[3:-4]}</{tag}>")
        elif isinstance(b, Table):
            parts.append(_table_html(b, base_url))
        elif isinstance(b, Metrics):
            parts.append(cards_html(b))
        elif isinstance(b, Timeline):
            n += 1
            parts.append(timeline_html(b, f"tl{n}"))
            if b.caption:
                parts.append(f'<div class="caption">{md_to_html(b.caption, base_url)}</div>')
        elif isinstance(b, Chart):
            n += 1
            div = f"vis{n}"
            if has_js:
                parts.append(
                    f'<div class="chart" id="{div}"></div><script>vegaEmbed("#{div}", '
                    f'{_json_for_script(_spec(b.chart))}, {{"actions": false, "renderer": '
                    f'"svg"}})'
                    f'.catch(function(e){{document.getElementById("{div}").textContent = '
                    f"String(e);}});</script>"
                )
            else:
                parts.append(
                    '<div class="box warning">Chart left out: install the export extra '
                    "(<code>pip install 'kernelscope[export]'</code>) to include "
                    "charts.</div>"
                )
            if b.caption:
                parts.append(f'<div class="caption">{md_to_html(b.caption, base_url)}</div>')
    return "\n".join(parts), n


_CJK = re.compile(r"[\u3000-\u303f\u3400-\u9fff\uff00-\uffef]")


@functools.lru_cache(maxsize=1)
def _cjk_font_face() -> str:
    """@font-face of the bundled CJK subset (dashboard/web/static/fonts, SIL OFL 1.1), embedded as data."""
    from pathlib import Path

    font = Path(__file__).parent / "static" / "fonts" / "KernelscopeCJK-Regular.woff2"
    data = base64.b64encode(font.read_bytes()).decode()
    return (
        "@font-face { font-family: 'Kernelscope CJK'; src: url(data:font/woff2;base64,"
        + data
        + ") format('woff2'); unicode-range: U+3000-303F, U+3400-9FFF, U+FF00-FFEF; }"
    )


def render_html(
    reports: list[Report], *, source: str | None = None, base_url: str | None = None
) -> str:
    """One HTML document for the reports (normally one page)."""
    bundle = vega_bundle()
    has_charts = any(isinstance(b, Chart) for r in reports for b in r.blocks)
    body, n = [], 0
    for rep in reports:
        h, n = report_html(rep, base_url=base_url, n0=n, has_js=bundle is not None)
        body.append(h)
    when = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    meta = f"Exported from Kernelscope on {when}" + (f" · {html.escape(source)}" if source else "")
    title = html.escape(" · ".join(r.title for r in reports))
    css = CSS + CARDS_CSS + (_cjk_font_face() if any(_CJK.search(part) for part in body) else "")
    script = ""
    if has_charts and bundle is not None:
        script = "<script>\n" + bundle.replace("</script", "<\\/script") + "\n</script>"
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{title} — Kernelscope</title><style>{css}</style>{script}</head>\n"
        f'<body><div class="meta">{meta}</div>\n' + "\n".join(body) + "\n</body></html>\n"
    )
