"""End to end in a real headless Chromium (Debian's /usr/bin/chromium driven by Playwright, no
browser download), against `kernelscope dashboard` on a temporary store of the real H200 samples:

- upload an ncu report; on its Kernels page a row click selects the launch and a header click sorts,
  both into the URL; the page's shared link in a fresh browser context shows the same selection and
  sort; the offline download;
- source hot spots of a real report with Source Counters (the stride-32 column read's LDS
  instructions);
- the metric baseline of two real reports (basic and full) on the Compare page;
- the Timeline: zoom with the mouse wheel (the server refines the window, the URL follows) and a
  click on a kernel that opens its detail and the same kernel's Nsight Compute counters; with an ncu
  run of the same program (the H200 training step), kernels drawn in the colour of their ncu bound
  (the legend's), a click opening the matched launch, and the switch to colours by name;
- token mode: a deep link survives the login, a reload and a new tab; a fresh browser must log in;
- every page (and each section with charts) at 1,440 × 900: every chart has a non-empty plot area.
"""

from __future__ import annotations

import io
import os
import re
import time
from pathlib import Path

import pytest

from dashboard.web import pages as registry
from tests.conftest import H200_TORCH, SAMPLES
from tests.dashboard.helpers import BASIC, FULL

from tests.support.e2e_browser import CHROMIUM, ARGS, SHOTS, DRAWN, _free_port, _start, _stop  # noqa: F401
from dashboard.core.source import Source

IDLE = "[data-test-script-state='notRunning']"
TENSOR = SAMPLES / "h200" / "tensor_kernels" / "tensor_raw_base.csv.gz"
M1024 = H200_TORCH / "ffn_M1024_eager.json.gz"
STEP = SAMPLES / "h200" / "train_step"
TOKEN = "e2e-token-0123456789abcdef"

# skipped where chromium is absent, except in CI (CI=true), whose .ci/run installs it: there it must
# run
pytestmark = [
    pytest.mark.skipif(
        not CHROMIUM.exists() and not os.environ.get("CI"),
        reason="needs Debian's chromium at /usr/bin/chromium (apt-get install chromium)",
    ),
]


def _to_timeline(page) -> None:
    """The timeline sits below the page's story (verdict, steps, integrity): scroll it into view, so
    that the mouse, aimed in viewport coordinates, lands on its canvas."""
    page.locator(".ks-tl canvas").scroll_into_view_if_needed()
    page.wait_for_timeout(200)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    pytest.importorskip("ncu_report")
    from collectors.store import Store

    tmp = tmp_path_factory.mktemp("e2e")
    store = Store(tmp / "store")
    ids = {
        k: Source(store).ingest_path(p)[0].run_id
        for k, p in [
            ("basic", BASIC),
            ("tensor", TENSOR),
            ("m1024", M1024),
            ("step_ncu", STEP / "train_step_ncu_nvtx.ncu-rep.gz"),
            ("step_trace", STEP / "train_step_trace.json.gz"),
        ]
    }  # the full report is uploaded
    # measured ceilings, two GPUs
    for bench in sorted(SAMPLES.glob("h200*/bench_suite/bench_*.json.gz")):
        Source(store).ingest_path(bench)
    proc, url = _start(store.root, tmp)
    yield url, store, ids
    _stop(proc)


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="needs the e2e extra (pip install playwright)"
    )
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield b, sync_api
        b.close()


def _new_page(b, width=1440, height=900):
    return b.new_context(viewport={"width": width, "height": height}).new_page()


def _drawn(page, timeout=90_000, need=None):
    page.wait_for_function(DRAWN, arg=need, timeout=timeout, polling=100)


def expect(locator):
    """Playwright's retrying assertions (imported here: the module loads without the e2e extra)."""
    from playwright.sync_api import expect as _expect

    return _expect(locator)


def _full_run(server):
    url, store, ids = server
    # uploaded by the first test; here, or stored now
    return Source(store).ingest_path(FULL)[0].run_id


LARGE_REPORT = (
    SAMPLES / "llm_workloads" / "h100_schedule" / "decode_compile_token8.ncu-rep.gz"
)  # 11 MB, 122 launches
#: every text the page's progress bars show, recorded as it changes (a MutationObserver, set before
#: the upload)
RECORD_PROGRESS = """() => {
  window.__stages = [];
  const grab = () => document.querySelectorAll('[data-testid=stProgress]').forEach(e => {
    const t = e.innerText.trim();
    if (t && window.__stages[window.__stages.length - 1] !== t) window.__stages.push(t);
  });
  new MutationObserver(grab).observe(document.body, {subtree: true, childList: true, characterData: true});
}"""


def test_uploading_a_large_report_shows_its_stages_before_the_result(server, browser):
    """Issue 43: an 11 MB real `.ncu-rep` (122 launches) says what is happening while it is read —
    received, inflating, reading launch k of 122 (relayed from the child process that reads it),
    analysing, storing — and only then the result."""
    url, store, _ = server
    b, _ = browser
    page = _new_page(b)
    page.goto(f"{url}/upload")
    page.wait_for_selector(IDLE, timeout=90_000)
    page.evaluate(RECORD_PROGRESS)
    page.locator("input[type=file]").set_input_files(str(LARGE_REPORT))
    ok = page.locator("[data-testid=stAlertContentSuccess]")
    ok.wait_for(timeout=240_000)
    seen = page.evaluate("window.__stages")
    stages = {t.split(": ", 1)[1].split(" ")[0] for t in seen if ": " in t}
    # Streamlit may draw two quick stages in one frame (received and inflating): three of them at
    # least
    assert len(stages & {"received", "inflating", "reading", "analysing", "storing"}) >= 3, seen
    assert "reading" in stages, seen
    launches = [t for t in seen if "reading launch" in t]
    assert len(launches) >= 3 and launches[-1].endswith("reading launch 122 of 122"), launches
    assert "decode_compile_token8.ncu-rep.gz" in ok.inner_text()
    page.context.close()


def test_upload_row_click_sort_and_shared_link(server, browser):
    url, store, _ = server
    b, sync_api = browser
    page = _new_page(b)
    page.goto(f"{url}/upload")
    page.wait_for_selector(IDLE, timeout=90_000)
    page.locator("input[type=file]").set_input_files(str(FULL))
    ok = page.locator("[data-testid=stAlertContentSuccess]")
    ok.wait_for(timeout=90_000)
    assert "full.ncu-rep.gz" in ok.inner_text() and "new" in ok.inner_text()
    run_id = _full_run(server)
    link = ok.get_by_role("link", name="open")
    if link.get_attribute("target") == "_blank":  # markdown links open a new tab
        with page.context.expect_page() as opened:
            link.click()
        page = opened.value
    else:
        link.click()
    page.wait_for_url(f"**/kernels?run={run_id}*", timeout=60_000)
    _drawn(page)
    # one row per kernel first (the two column-read launches are one kernel), then every launch, one
    # click away
    expect(page.locator(".ks-table").first.locator("tbody tr")).to_have_count(8, timeout=60_000)
    page.locator("[data-testid=stButtonGroup] button", has_text="Launches").first.click()
    page.wait_for_url("**by=launch*", timeout=60_000)
    _drawn(page)
    expect(page.locator(".ks-table").first.locator("tbody tr")).to_have_count(9, timeout=60_000)
    # rows take the keyboard: Tab to a row, the arrow keys move, Enter selects it into the URL
    page.locator(".ks-table tr[data-id='1']").focus()
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")
    page.wait_for_url("**kernel=2*", timeout=60_000)
    _drawn(page)
    # a click on a row selects the launch and writes it into the URL; the detail follows
    page.locator(".ks-table tr[data-id='7']").click()
    page.wait_for_url("**kernel=7*", timeout=60_000)
    page.get_by_text("Launch 7: ks_matmul_64x64").wait_for(timeout=60_000)
    # a click on a header sorts by it (a number: longest first), into the URL; again: the other way
    # round
    page.locator(".ks-table th[data-key='duration_ns']").click()
    page.wait_for_url("**sort=duration_ns&desc=1*", timeout=60_000)
    _drawn(page)
    page.wait_for_function(
        "() => document.querySelector('.ks-table tbody tr').dataset.id === '7'", timeout=60_000
    )
    page.locator(".ks-table th[data-key='duration_ns']").click()
    page.wait_for_function(
        "() => location.search.includes('sort=duration_ns') && !location.search.includes('desc')",
        timeout=60_000,
    )
    _drawn(page)
    page.wait_for_function(
        "() => document.querySelector('.ks-table tbody tr').dataset.id === '6'", timeout=60_000
    )
    shared = page.locator("[data-testid=stSidebar] .ks-share input").input_value().strip()
    assert (
        shared.startswith(f"{url}/kernels?") and f"run={run_id}" in shared and "kernel=7" in shared
    )
    assert "sort=duration_ns" in shared and "desc" not in shared
    # the sidebar's offline copy: one HTML file, nothing loaded from the network
    with page.expect_download(timeout=90_000) as dl:
        page.get_by_role("button", name="Download HTML (offline copy)").click()
    html = Path(dl.value.path()).read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>") and "ks_matmul_64x64" in html and "vegaEmbed" in html
    assert not re.search(r"<script[^>]+src=", html) and dl.value.suggested_filename.endswith(
        ".html"
    )
    # a teammate opens the link in a fresh browser context: same run, same selected row, same sort
    other = _new_page(b)
    other.goto(shared)
    _drawn(other)
    other.get_by_text("Launch 7: ks_matmul_64x64").wait_for(timeout=60_000)
    assert other.locator(".ks-table tr.sel").get_attribute("data-id") == "7"
    assert (
        other.locator(".ks-table tbody tr").first.get_attribute("data-id") == "6"
    )  # shortest first
    assert "▲" in other.locator(".ks-table th[data-key='duration_ns']").inner_text()
    other.context.close()
    page.context.close()


def test_source_hot_spots_of_a_real_report(server, browser):
    url, _, _ = server
    b, _ = browser
    run_id = _full_run(server)
    page = _new_page(b)
    # the launch detail points at its source; the Source hot spots section reads it
    page.goto(f"{url}/kernels?run={run_id}&kernel=5")
    _drawn(page, need=".ks-table tbody tr")
    link = page.get_by_role("link", name="Source hot spots").first
    link.wait_for(timeout=60_000)
    assert "show=source" in link.get_attribute("href")
    page.goto(f"{url}/kernels?run={run_id}&kernel=5&show=source")
    _drawn(page, need=".ks-table tbody tr")
    table = page.locator(".ks-table").filter(has_text="SASS instruction").first
    rows = table.locator("tbody tr")
    # the table mounts after the page's script ends
    expect(rows).to_have_count(25, timeout=60_000)
    text = table.inner_text()
    # the column read waits on shared memory
    assert "LDS" in text and "MIO throttle" in text
    reasons = page.locator(".ks-table").filter(has_text="stall reason").first
    # the biggest, first
    assert reasons.locator("tbody tr").first.inner_text().startswith("MIO throttle")
    page.goto(f"{url}/kernels?run={run_id}&kernel=5&show=charts")
    _drawn(page)
    chart = page.locator("[data-testid=stVegaLiteChart]").filter(has_text="Where the warps waited")
    expect(chart).to_have_count(1, timeout=60_000)
    assert chart.bounding_box()["height"] > 200
    page.context.close()


def test_metric_baseline_of_two_real_reports(server, browser):
    url, _, ids = server
    b, _ = browser
    run_id = _full_run(server)
    page = _new_page(b)
    page.goto(f"{url}/compare?a={ids['basic']}&b={run_id}&pair=5")
    _drawn(page)
    page.get_by_text("Metrics: launch 5 of A vs launch 5 of B").wait_for(timeout=60_000)
    assert page.get_by_text("shared metrics", exact=False).count() >= 1
    page.get_by_label("Filter metrics").fill("dram__cycles_active")
    page.get_by_label("Filter metrics").press("Enter")
    page.wait_for_url("**mq=dram__cycles_active*", timeout=60_000)
    _drawn(page)
    # the filtered table replaces the whole one once the rerun is drawn: wait for it rather than
    # read it at once
    page.wait_for_function(
        """() => { const t = Array.from(document.querySelectorAll('.ks-table'))
        .filter(t => t.textContent.includes('noise threshold')).pop();
      const rows = t ? Array.from(t.querySelectorAll('tbody tr')) : [];
      return rows.length >= 1 && rows.every(r => r.textContent.includes('dram__cycles_active')); }""",
        timeout=60_000,
    )
    diff = page.locator(".ks-table").filter(has_text="noise threshold").last
    rows = diff.locator("tbody tr")
    assert rows.count() >= 1 and all(
        "dram__cycles_active" in rows.nth(i).inner_text() for i in range(rows.count())
    )
    page.context.close()


def test_timeline_zoom_and_click_through_to_kernel_and_ncu_data(server, browser):
    import polars as pl

    url, store, ids = server
    b, _ = browser
    run = store.get(ids["m1024"])
    g = run.table("gpu_ops").with_row_index("r")
    origin = min(
        run.table(t)["start_ns"].min()
        for t in ("gpu_ops", "api_calls", "cpu_ops", "nvtx")
        if run.table(t).height
    )  # times on the canvas: after the first event
    nv = (
        g.filter(pl.col("name").str.starts_with("nvjet"))
        .sort("launch_delay_ns", descending=True)
        .row(0, named=True)
    )
    page = _new_page(b)
    page.goto(f"{url}/timeline?run={run.run_id}")
    _drawn(page, need=".ks-tl[data-paints]")
    _to_timeline(page)
    tl = page.locator(".ks-tl")
    whole = tl.get_attribute("data-window")
    canvas = page.locator(".ks-tl canvas")
    box = canvas.bounding_box()
    # the plain wheel scrolls the page, never the timeline (Perfetto's habit)
    page.mouse.move(box["x"] + 190 + (box["width"] - 190) * 0.7, box["y"] + 50)
    before = tl.get_attribute("data-view")
    page.mouse.wheel(0, 120)
    page.wait_for_timeout(300)
    assert tl.get_attribute("data-view") == before
    box = canvas.bounding_box()
    page.mouse.move(box["x"] + 190 + (box["width"] - 190) * 0.7, box["y"] + 50)
    # zoom: ctrl+wheel redraws at once, then the server answers for the new window and the URL
    # follows
    page.keyboard.down("Control")
    for _ in range(4):
        page.mouse.wheel(0, -300)
    page.keyboard.up("Control")
    page.wait_for_function(
        "(w) => { const t = document.querySelector('.ks-tl'); return t.dataset.window !== w && "
        "t.dataset.view === t.dataset.window; }",
        arg=whole,
        timeout=60_000,
    )
    page.wait_for_url("**t0=*", timeout=60_000)
    zoomed = tl.get_attribute("data-window")
    t0, t1 = (float(x) for x in zoomed.split(","))
    assert 0 < t1 - t0 < float(whole.split(",")[1]) / 2
    # zooming out stops at the whole trace, never beyond its start or end
    tl.focus()
    for _ in range(12):
        page.keyboard.press("s")
    v0, v1 = (float(x) for x in tl.get_attribute("data-view").split(","))
    assert v0 == 0 and v1 <= float(whole.split(",")[1]) + 1
    # open a window around one matmul kernel and click it: its detail, its launch call, its ncu
    # counters
    s, e = nv["start_ns"] - origin, nv["end_ns"] - origin
    w0, w1 = s - (e - s), e + (e - s)
    page.goto(f"{url}/timeline?run={run.run_id}&t0={w0:.0f}&t1={w1:.0f}")
    _drawn(page, need=".ks-tl[data-paints]")
    _to_timeline(page)
    box = page.locator(".ks-tl canvas").bounding_box()
    x = box["x"] + 190 + (box["width"] - 190) * ((s + e) / 2 - w0) / (w1 - w0)
    page.mouse.move(x - 5, box["y"] + 26 + 18 + 8)
    page.mouse.move(x, box["y"] + 26 + 18 + 8)
    tip = page.locator(".ks-tl-tip")
    tip.wait_for(state="visible", timeout=30_000)
    assert "nvjet" in tip.inner_text() and "launch call: cuLaunchKernelEx" in tip.inner_text()
    page.mouse.click(x, box["y"] + 26 + 18 + 8)
    page.wait_for_url(f"**op=gpu_ops%3A{nv['r']}*", timeout=60_000)
    page.get_by_text("Selected:").first.wait_for(timeout=60_000)
    page.get_by_text("Its Nsight Compute counters").wait_for(timeout=60_000)
    opener = page.get_by_role("link", name=re.compile("Open launch 0 of"))
    assert f"kernels?run={ids['tensor']}&kernel=0" in opener.get_attribute("href")
    assert "tensor_raw_base.csv.gz" in opener.inner_text()
    page.context.close()


#: a gpu_ops row's mark on the timeline canvas: where it is drawn (CSS px in the canvas) and its
#: fill colour there
MARK = """(row) => {
  const st = document.querySelector('.ks-tl').parentNode.__ksTimeline, {head, arr} = st.payload;
  const g = head.srcs.indexOf('gpu_ops');
  let i = -1;
  for (let j = 0; j < arr.row.length; j++) if (arr.row[j] === row && arr.src[j] === g) { i = j; break; }
  if (i < 0) return null;
  const r = st.rows.find(r => r.marks.includes(i)), w = st.canvas.clientWidth, v = st.view;
  const x = 190 + ((arr.start[i] + arr.end[i]) / 2 - v.t0) / (v.t1 - v.t0) * (w - 190), y = r.y + 1.5;
  const dpr = window.devicePixelRatio || 1;
  const p = st.canvas.getContext('2d').getImageData(Math.round(x * dpr), Math.round(y * dpr), 1, 1).data;
  return {x, y: r.y + 8, rgb: [p[0], p[1], p[2]]};
}"""
SWATCH = """(b) => { const s = document.querySelector(`.ks-tl-legend li[data-bound="${b}"] .ks-sw`);
  return s ? getComputedStyle(s).backgroundColor.match(/\\d+/g).slice(0, 3).map(Number) : null; }"""


def test_timeline_colours_kernels_by_their_ncu_bound_and_opens_the_launch(server, browser):
    """The training step's trace with the ncu run of its step 6 in the store: the optimizer's
    DRAM-bound kernel is drawn in the legend's DRAM colour, a backward kernel (not profiled) in the
    not-profiled colour; a click opens the kernel's detail with its matched ncu launch; the name
    button recolours it and goes into the URL."""
    import polars as pl

    url, store, ids = server
    b, _ = browser
    run = store.get(ids["step_trace"])
    g = run.table("gpu_ops").with_row_index("r")
    origin = min(
        run.table(t)["start_ns"].min()
        for t in ("gpu_ops", "api_calls", "cpu_ops", "nvtx")
        if run.table(t).height
    )
    k = g.filter(
        pl.col("name").str.contains("multi_tensor_apply") & (pl.col("grid_x") == 261)
    ).sort("start_ns")
    assert k.height == 5
    # step 6 of 4..8, the one ncu profiled
    opt = k.row(2, named=True)
    s, e = opt["start_ns"] - origin, opt["end_ns"] - origin
    page = _new_page(b)
    page.goto(f"{url}/timeline?run={run.run_id}&t0={s - (e - s):.0f}&t1={e + (e - s):.0f}")
    _drawn(page, need=".ks-tl[data-paints]")
    _to_timeline(page)
    tl = page.locator(".ks-tl")
    assert tl.get_attribute("data-color") == "bound"
    legend = page.locator(".ks-tl-legend")
    # folded: the colours only
    assert legend.is_visible() and "DRAM bandwidth" in legend.inner_text()
    # unfolded: what they mean
    legend.locator("summary").click()
    assert "train_step_ncu_nvtx.ncu-rep.gz" in legend.inner_text()
    assert "DRAM bandwidth" in legend.inner_text() and "not profiled" in legend.inner_text()
    mark = page.evaluate(MARK, int(opt["r"]))
    # the fill is the legend's DRAM colour
    assert mark and mark["rgb"] == page.evaluate(SWATCH, "dram")
    # a backward kernel of the same step: never in ncu's NVTX range, drawn in the not-profiled
    # colour
    back = (
        g.filter(
            pl.col("name").str.contains("(?i)backward")
            & (pl.col("start_ns") > opt["start_ns"] - 50_000_000)
        )
        .sort("start_ns")
        .row(0, named=True)
    )
    bs, be = back["start_ns"] - origin, back["end_ns"] - origin
    page.goto(f"{url}/timeline?run={run.run_id}&t0={bs - (be - bs):.0f}&t1={be + (be - bs):.0f}")
    _drawn(page, need=".ks-tl[data-paints]")
    _to_timeline(page)
    assert page.evaluate(MARK, int(back["r"]))["rgb"] == page.evaluate(SWATCH, "not profiled")
    # the click on the DRAM-bound kernel opens its detail and its matched ncu launch (launch 11 of
    # the report)
    page.goto(f"{url}/timeline?run={run.run_id}&t0={s - (e - s):.0f}&t1={e + (e - s):.0f}")
    _drawn(page, need=".ks-tl[data-paints]")
    _to_timeline(page)
    box = page.locator(".ks-tl canvas").bounding_box()
    mark = page.evaluate(MARK, int(opt["r"]))
    page.mouse.move(box["x"] + mark["x"] - 4, box["y"] + mark["y"])
    page.mouse.move(box["x"] + mark["x"], box["y"] + mark["y"])
    tip = page.locator(".ks-tl-tip")
    tip.wait_for(state="visible", timeout=30_000)
    assert "bound (ncu): DRAM" in tip.inner_text()
    page.mouse.click(box["x"] + mark["x"], box["y"] + mark["y"])
    page.wait_for_url(f"**op=gpu_ops%3A{opt['r']}*", timeout=60_000)
    page.get_by_text("Its Nsight Compute counters").wait_for(timeout=60_000)
    opener = page.get_by_role("link", name=re.compile("Open launch 11 of"))
    assert f"kernels?run={ids['step_ncu']}&kernel=11" in opener.get_attribute("href")
    assert "the join" in page.get_by_text("matched by the join").first.inner_text()
    # colours by name: at once on the canvas, then in the URL; the legend goes
    page.mouse.move(box["x"] + 5, box["y"] + 5)
    page.locator(".ks-tl-color button[data-c=name]").click()
    page.wait_for_url("**color=name*", timeout=60_000)
    assert not legend.is_visible() and tl.get_attribute("data-color") == "name"
    assert page.evaluate(MARK, int(opt["r"]))["rgb"] != page.evaluate(
        "() => [213, 94, 0]"
    )  # no longer DRAM's vermillion
    page.context.close()


def test_token_deep_link_survives_login_reload_and_new_tab(tmp_path_factory, browser):
    pytest.importorskip("ncu_report")
    from collectors.store import Store

    tmp = tmp_path_factory.mktemp("e2e_token")
    store = Store(tmp / "store")
    rid = Source(store).ingest_path(FULL)[0].run_id
    proc, url = _start(store.root, tmp, KERNELSCOPE_TOKEN=TOKEN)
    b, _ = browser
    try:
        ctx = b.new_context(viewport={"width": 1440, "height": 900})
        page = ctx.new_page()
        deep = f"{url}/kernels?run={rid}&kernel=7&cols=memory"
        # the gate in front of Streamlit asks first (dashboard/web/gate.py)
        page.goto(deep)
        box = page.get_by_label("Access token")
        box.wait_for(timeout=90_000)
        box.fill(TOKEN)
        box.press("Enter")
        page.get_by_text("Launch 7: ks_matmul_64x64").wait_for(timeout=90_000)
        assert page.url == deep and page.locator("h1").first.inner_text() == "Kernels"
        page.reload()
        page.get_by_text("Launch 7: ks_matmul_64x64").wait_for(timeout=90_000)
        assert page.get_by_label("Access token").count() == 0
        tab = ctx.new_page()
        tab.goto(f"{url}/compare")
        tab.wait_for_selector("h1:has-text('Compare')", timeout=90_000)
        fresh = b.new_context().new_page()
        fresh.goto(deep)
        fresh.get_by_label("Access token").wait_for(timeout=90_000)
        fresh.context.close()
        ctx.close()
    finally:
        _stop(proc)


#: every page of the page registry, some with more than one view (query parameters)
VIEWS_OF = {
    "kernels": ["kernel=5", "kernel=7&show=charts"],
    "compare": ["pair=5"],
    "timeline": ["", "show=delays", "show=idle"],
}
PAGES = [(slug, q) for slug in registry.PAGES for q in VIEWS_OF.get(slug, [""])]


def _ink(png: bytes) -> float:
    """Share of pixels that are not (near) white in a screenshot."""
    from PIL import Image

    im = Image.open(io.BytesIO(png)).convert("L")
    hist = im.histogram()
    return 1.0 - sum(hist[245:]) / sum(hist)


def test_every_page_draws_every_chart(server, browser):
    url, _, ids = server
    b, _ = browser
    run_id = _full_run(server)
    SHOTS.mkdir(parents=True, exist_ok=True)
    page = _new_page(b)
    seen = 0
    for name, q in PAGES:
        q = q.replace("kernel=", f"run={run_id}&kernel=") if name == "kernels" else q
        q = f"a={ids['basic']}&b={run_id}&" + q if name == "compare" else q
        q = f"run={ids['m1024']}&" + q if name in ("timeline", "ranks") else q
        page.goto(f"{url}/{name}" + (f"?{q}" if q else ""))
        _drawn(
            page,
            need={"timeline": ".ks-tl[data-paints]", "kernels": ".ks-table tbody tr"}.get(name),
        )
        shot = SHOTS / f"{name}{'-' + re.sub(r'[^a-z0-9]+', '_', q) if q else ''}.png"
        page.screenshot(path=str(shot), full_page=True)
        charts = page.locator("[data-testid=stVegaLiteChart]")
        for i in range(charts.count()):
            c = charts.nth(i)
            c.scroll_into_view_if_needed()
            box = c.bounding_box()
            assert box and box["height"] >= 150 and box["width"] >= 300, (name, q, i, box)
            ink = _ink(c.screenshot())
            # axes, marks: not an empty plot
            assert ink > 0.02, (name, q, i, ink)
            seen += 1
        for i in range(page.locator(".ks-tl canvas").count()):
            assert _ink(page.locator(".ks-tl canvas").nth(i).screenshot()) > 0.02, (name, q)
        if name == "gpus":  # a long table comes with 50 rows and a button for the rest
            foot = page.locator(".ks-foot").first
            n = int(re.search(r"of ([\d,]+)", foot.inner_text()).group(1).replace(",", ""))
            box = foot.locator("xpath=..")
            assert n > 50 and box.locator("tbody tr").count() == 50
            foot.get_by_role("button", name="Show all rows").click()
            page.wait_for_function(
                "(n) => Array.from(document.querySelectorAll('.ks-table'))"
                ".some(t => t.querySelectorAll('tbody tr').length === n)",
                arg=n,
                timeout=60_000,
            )
        # Chinese text renders with the bundled CJK font (no CJK font on this machine)
        if name == "claims":
            page.get_by_text("纯Triton", exact=False).first.scroll_into_view_if_needed()
            page.wait_for_function(
                "() => Array.from(document.fonts).some(f => f.family.includes('Kernelscope CJK') "
                "&& f.status === 'loaded')",
                timeout=30_000,
            )
    assert seen >= 10
    page.context.close()


def _idle(page) -> None:
    page.wait_for_selector(IDLE, timeout=90_000)


def test_token_login_in_a_browser_then_the_app(tmp_path, browser):
    """On a tokened server the browser first gets kernelscope's login form (no Streamlit at all);
    the right token opens the app and is gone from the address bar; a second browser without the
    cookie gets the form again."""
    from tests.dashboard.server import running_dashboard

    token = "browser-token-1234"
    b, _ = browser
    with running_dashboard(tmp_path, tmp_path / "store", token=token) as srv:
        ctx = b.new_context()
        page = ctx.new_page()
        page.goto(f"{srv.url}/runs?kind=ncu")
        assert page.locator("input[name=token]").count() == 1 and "Streamlit" not in page.content()
        page.fill("input[name=token]", "wrong-token")
        page.click("button[type=submit]")
        page.get_by_text("Wrong token.").wait_for(timeout=10_000)
        page.fill("input[name=token]", token)
        page.click("button[type=submit]")
        page.wait_for_url("**/runs?kind=ncu", timeout=30_000)
        _idle(page)
        page.locator("h1", has_text="Runs").wait_for(timeout=30_000)
        assert token not in page.url
        fresh = b.new_context()
        other = fresh.new_page()
        other.goto(f"{srv.url}/runs")
        assert other.locator("input[name=token]").count() == 1
        fresh.close()
        ctx.close()


def _rss_mib(pid: int) -> float:
    total = 0.0
    pids = [pid]
    try:
        pids += [int(x) for x in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        pass
    for p in pids:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) / 1024
        except OSError:
            pass
    return total


def test_four_whitespace_bombs_uploaded_at_once_cost_no_memory(tmp_path, browser):
    """Issue 42: a 194 KB gzip of `{"traceEvents": [` + 190 MiB of spaces + `]}` took the server
    from 100 MB to 809 MB, four at once to 2.18 GB. Four distinct copies uploaded at the same
    moment: each refused in one line, and the server's memory stays within 300 MB of its start."""
    import gzip as gz

    bombs = []
    for i in range(4):
        p = tmp_path / f"bomb{i}.json.gz"
        with gz.GzipFile(p, "wb", compresslevel=9, mtime=i) as f:
            f.write(b'{"traceEvents": [')
            for _ in range(190):
                f.write(b" " * (1 << 20))
            f.write(b"]}")
        bombs.append(p)
    assert all(190_000 < p.stat().st_size < 200_000 for p in bombs)
    store = tmp_path / "store"
    proc, url = _start(store, tmp_path)
    try:
        b, _ = browser
        pages = []
        for _ in bombs:
            page = _new_page(b)
            page.goto(f"{url}/upload")
            page.wait_for_selector(IDLE, timeout=90_000)
            pages.append(page)
        import threading

        start = _rss_mib(proc.pid)
        peak, stop = [start], threading.Event()

        # the peak, not what is left after the parses
        def sample():
            while not stop.is_set():
                peak[0] = max(peak[0], _rss_mib(proc.pid))
                time.sleep(0.02)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        for page, p in zip(pages, bombs):
            page.locator("input[type=file]").set_input_files(str(p))
        try:
            for page in pages:
                err = page.locator("[data-testid=stAlertContentError]")
                err.wait_for(timeout=120_000)
                assert (
                    "an empty Chrome trace" in err.inner_text()
                    and "Nothing was stored" in err.inner_text()
                )
        finally:
            stop.set()
            sampler.join()
        assert peak[0] - start < 300, (start, peak[0])
        assert not (store / "runs").exists() or not any((store / "runs").iterdir())
        for page in pages:
            page.context.close()
    finally:
        _stop(proc)
