"""Every page on the project's recorded real workloads, in headless Chromium at 1,440 × 900 and 900
× 900, as a user sees it (issue 37): the LLM decode (eager, CUDA graph, torch.compile), the training
step and the two-stream program traced on an H100 (sample_traces/llm_workloads/h100), Nsight
Compute's report of one token of the compiled decode, the H200 training step's report, and the
microbenchmark runs.

For each page and width:
- no table cell breaks a word across lines (names stay on one line, shortened with an ellipsis;
  sentences wrap at spaces);
- every table shows at least 8 rows, or all of them;
- no metric card and no table is clipped (scrollWidth ≤ clientWidth), and the page does not overflow
  sideways;
- the run pages' summary is inside the first viewport: the Timeline's verdict and time per step, the
  Kernels page's kernel time and what can be won, Home's story of the newest traces, and (issue 38)
  the GPU × GPU summary with the DRAM ratio on the Compare page of the H100 and H200 bench runs.
"""

from __future__ import annotations


import pytest

from tests.conftest import SAMPLES
from tests.support.e2e_browser import ARGS, CHROMIUM, DRAWN, SHOTS, _start, _stop
from dashboard.core.source import Source

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists() and not __import__("os").environ.get("CI"),
    reason="needs Debian's chromium at /usr/bin/chromium (apt-get install chromium)",
)

LLM = SAMPLES / "llm_workloads"
TRACES = ("decode_eager", "decode_graph", "decode_compile", "train_step", "two_streams")
WIDTHS = (1440, 900)

#: what a user would trip over, measured in the page (see the module docstring)
LAYOUT = r"""() => {
  const out = {short: [], broken: [], clipped: [], overflow: 0};
  for (const box of document.querySelectorAll('.ks-table')) {
    const rows = [...box.querySelectorAll('tbody tr')];
    if (!rows.length || !box.checkVisibility() || !box.clientWidth) continue;  // folded away: not on screen
    const b = box.getBoundingClientRect();
    const vis = rows.filter(r => { const q = r.getBoundingClientRect(); return q.top >= b.top - 1 && q.bottom <= b.bottom + 1; }).length;
    if (vis < Math.min(8, rows.length)) out.short.push([rows.length, vis, (box.innerText || '').slice(0, 50)]);
    if (box.scrollWidth > box.clientWidth + 1) out.clipped.push('table: ' + (box.innerText || '').slice(0, 50));
    for (const tr of rows.slice(0, 40)) for (const td of tr.querySelectorAll('td')) {
      const node = td.firstChild;
      if (!node || node.nodeType !== 3) continue;
      // a word: letters without a space or a hyphen (a compound may break after its hyphen, as in print)
      const text = node.textContent, re = /[^\s\-\u2010-\u2014\/]{4,}/g;
      let m;
      while ((m = re.exec(text))) {
        const r = document.createRange();
        r.setStart(node, m.index); r.setEnd(node, m.index + m[0].length);
        const lines = new Set([...r.getClientRects()].filter(q => q.width > 0).map(q => Math.round(q.top)));
        if (lines.size > 1) { out.broken.push(m[0].slice(0, 40)); break; }
      }
    }
  }
  for (const el of document.querySelectorAll('.ks-card .ks-v')) {
    if (el.scrollWidth > el.clientWidth + 1) out.clipped.push('card: ' + el.innerText.slice(0, 40));
  }
  const main = document.querySelector('[data-testid="stMain"]') || document.scrollingElement;
  out.overflow = main.scrollWidth - main.clientWidth;
  return out;
}"""

#: the summary a page must show in its first viewport: (CSS selector, text it contains)
FIRST_SCREEN = {
    "timeline": [(".ks-card", "time per step"), ("[data-testid=stAlert]", "(rank ")],
    "kernels": [(".ks-card", "kernel time"), (".ks-card", "can be won")],
    # issue 44: how far the run is from the textbook's models, in the first screen
    "kernels-textbook": [
        (".ks-card", "to win vs the textbook"),
        ("[data-testid=stAlert]", "Against the textbook: 100%"),
    ],
    "home": [("h3, h2, p, div", "Where the time goes in the newest traces")],
    # issue 38: the GPU × GPU summary with the DRAM ratio leads the Compare page of two bench runs
    "compare-gpus": [("[data-testid=stAlert]", "H200 / H100 SXM: DRAM 1.40× (spec 1.43×)")],
}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    pytest.importorskip("ncu_report")
    from collectors.store import Store

    tmp = tmp_path_factory.mktemp("layout")
    store = Store(tmp / "store")
    ids = {
        name: Source(store).ingest_path(LLM / "h100" / f"{name}.json.gz")[0].run_id
        for name in TRACES
    }
    ids["decode_ncu"] = (
        Source(store)
        .ingest_path(LLM / "h100_schedule" / "decode_compile_token8.ncu-rep.gz")[0]
        .run_id
    )
    ids["step_ncu"] = (
        Source(store)
        .ingest_path(SAMPLES / "h200" / "train_step" / "train_step_ncu_nvtx.ncu-rep.gz")[0]
        .run_id
    )
    # the eager CSV's trace (joined)
    Source(store).ingest_path(LLM / "h100_schedule" / "decode_eager.json.gz")
    ids["eager_ncu"] = (
        Source(store).ingest_path(LLM / "h100_ncu" / "decode_eager_token8_raw.csv.gz")[0].run_id
    )
    ids["graph_ncu"] = (
        Source(store).ingest_path(LLM / "h100_ncu" / "decode_graph_token8_raw.csv.gz")[0].run_id
    )
    for bench in sorted(SAMPLES.glob("h*/bench_suite/bench_*.json.gz")):
        rid = Source(store).ingest_path(bench)[0].run_id
        # the first run of each GPU folder (h100, h200)
        ids.setdefault("bench_" + bench.parts[-3], rid)
    proc, url = _start(store.root, tmp)
    yield url, ids
    _stop(proc)


def _pages(ids: dict) -> list[tuple[str, str]]:
    out = [
        ("home", "/"),
        ("runs", "/runs"),
        ("upload", "/upload"),
        ("gpus", "/gpus"),
        ("cases", "/cases"),
        ("claims", "/claims"),
        ("history", "/history"),
        ("live", "/live"),
    ]
    out += [("timeline", f"/timeline?run={ids[n]}") for n in TRACES]
    out += [
        ("kernels", f"/kernels?run={ids['decode_ncu']}"),
        ("kernels", f"/kernels?run={ids['decode_ncu']}&by=launch"),
        ("kernels", f"/kernels?run={ids['step_ncu']}"),
        ("kernels-textbook", f"/kernels?run={ids['eager_ncu']}"),
        ("kernels", f"/kernels?run={ids['eager_ncu']}&cols=textbook&by=launch"),
        ("kernels", f"/kernels?run={ids['graph_ncu']}"),
        ("kernels-charts", f"/kernels?run={ids['decode_ncu']}&show=charts"),
        ("compare", f"/compare?a={ids['decode_eager']}&b={ids['decode_graph']}"),
        ("compare", f"/compare?a={ids['decode_eager']}&b={ids['decode_compile']}"),
        ("ranks", f"/ranks?run={ids['train_step']}"),
        ("compare-gpus", f"/compare?a={ids['bench_h100']}&b={ids['bench_h200']}"),
    ]
    return out


def test_every_page_of_the_app_is_checked_on_the_real_workloads():
    """The list above covers every page of the page registry (a new page joins the check)."""
    from dashboard.web.pages import PAGES

    ids = dict.fromkeys(["decode_ncu", "step_ncu", "eager_ncu", "graph_ncu", "bench_h100"], 0)
    ids |= dict.fromkeys(TRACES, 0) | {"bench_h200": 0}
    covered = {path.split("?")[0].strip("/") or "home" for _, path in _pages(ids)}
    assert set(PAGES) <= covered, set(PAGES) - covered


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="needs the e2e extra (pip install playwright)"
    )
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield b
        b.close()


#: after a page is drawn: its fonts loaded and two frames laid out (table.js sizes its boxes)
SETTLED = """() => document.fonts.ready.then(() => new Promise(r =>
  requestAnimationFrame(() => requestAnimationFrame(() => r(true)))))"""


def test_every_page_on_real_workloads_holds_its_layout(server, browser):
    """Both widths in one test: one server and one ingest of the recorded workloads (15 s)."""
    url, ids = server
    problems = []
    for width in WIDTHS:
        problems += _check_width(url, ids, browser, width)
    assert not problems, "\n".join(problems)


def _check_width(url: str, ids: dict, browser, width: int) -> list[str]:
    ctx = browser.new_context(viewport={"width": width, "height": 900})
    page = ctx.new_page()
    problems = []
    for kind, path in _pages(ids):
        page.goto(url + path)
        try:
            page.wait_for_function(DRAWN, arg=None, timeout=120_000)
        except Exception:  # noqa: BLE001 - said below as a problem of this page
            problems.append(f"{path} @{width}: not drawn in 120 s")
            continue
        page.evaluate(SETTLED)
        r = page.evaluate(LAYOUT)
        if r["short"]:
            problems.append(
                f"{path} @{width}: tables showing fewer than min(8, all) rows: {r['short'][:2]}"
            )
        if r["broken"]:
            problems.append(f"{path} @{width}: words broken across lines: {r['broken'][:3]}")
        if r["clipped"]:
            problems.append(f"{path} @{width}: clipped: {r['clipped'][:3]}")
        if r["overflow"] > 4:
            problems.append(f"{path} @{width}: the page overflows sideways by {r['overflow']} px")
        for sel, text in FIRST_SCREEN.get(kind, []):
            el = page.locator(sel, has_text=text).first
            box = el.bounding_box() if el.count() else None
            if box is None or box["y"] + min(box["height"], 60) > 900:
                problems.append(f"{path} @{width}: {text!r} is not in the first screen ({box})")
        if problems and problems[-1].startswith(path):
            SHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SHOTS / f"layout_{kind}_{width}.png"), full_page=True)
    ctx.close()
    return problems
