"""End to end in a real headless Chromium (Debian's /usr/bin/chromium driven by Playwright, no browser download):
`kernelscope dashboard` on a free port with an empty temporary store; upload the sample ncu report; open the
kernels page from the upload's link; change the view; follow the page's shared link in a fresh browser context
(a teammate's browser) and see the same view."""
from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.dashboard.helpers import FULL

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]
IDLE = "[data-test-script-state='notRunning']"

# skipped where chromium is absent, except in CI (CI=true), whose .ci/run installs it: there it must run
pytestmark = [
    pytest.mark.skipif(not CHROMIUM.exists() and not os.environ.get("CI"),
                       reason="needs Debian's chromium at /usr/bin/chromium (apt-get install chromium)"),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    pytest.importorskip("ncu_report")
    tmp = tmp_path_factory.mktemp("e2e")
    port = _free_port()
    env = dict(os.environ, KERNELSCOPE_SAMPLES=str(tmp / "no_samples"), KERNELSCOPE_FAKE_NVML="1")
    env.pop("KERNELSCOPE_TOKEN", None)
    exe = Path(sys.executable).with_name("kernelscope")
    proc = subprocess.Popen([str(exe), "dashboard", "--port", str(port), "--store", str(tmp / "store")],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while True:
        try:
            if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read() == b"ok":
                break
        except OSError:
            pass
        if proc.poll() is not None or time.time() > deadline:
            _stop(proc)
            pytest.fail(f"dashboard did not start: {proc.stdout.read().decode(errors='replace')[-2000:]}")
        time.sleep(0.3)
    yield url, tmp / "store"
    _stop(proc)


def _stop(proc: subprocess.Popen) -> None:
    """Stop the launcher and the streamlit server it started: their own process group, SIGTERM, then SIGKILL."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        deadline = time.time() + 5
        while time.time() < deadline:
            proc.poll()                      # reap the launcher so that it does not linger as a zombie
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)


def _idle(page, timeout=60_000):
    page.wait_for_selector(IDLE, timeout=timeout)


def test_upload_kernels_and_shared_link(server):
    sync_api = pytest.importorskip("playwright.sync_api", reason="needs the e2e extra (pip install playwright)")
    url, store = server
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
            page = ctx.new_page()
            page.goto(f"{url}/upload")
            _idle(page)
            page.locator("input[type=file]").set_input_files(str(FULL))
            ok = page.locator("[data-testid=stAlertContentSuccess]")
            ok.wait_for(timeout=60_000)
            assert "full.ncu-rep.gz" in ok.inner_text() and "new" in ok.inner_text()
            run_id = next((store / "runs").iterdir()).name
            link = ok.get_by_role("link", name="open")
            if link.get_attribute("target") == "_blank":          # markdown links open a new tab
                with ctx.expect_page() as opened:
                    link.click()
                page = opened.value
            else:
                link.click()
            page.wait_for_url(f"**/kernels?run={run_id}*", timeout=30_000)
            _idle(page)
            page.get_by_text("Launch 0: ks_copy_u4").wait_for(timeout=30_000)
            # change the view: filter the metrics; the URL follows
            box = page.get_by_label("Filter metrics")
            box.fill("dram__bytes_read")
            box.press("Enter")
            page.wait_for_url("**q=dram__bytes_read*", timeout=30_000)
            _idle(page)
            shared = page.locator("[data-testid=stSidebar] [data-testid=stCode] code").inner_text().strip()
            assert shared.startswith(f"{url}/kernels?") and f"run={run_id}" in shared and "q=dram__bytes_read" in shared
            caption = page.get_by_text("metrics matching").first.inner_text()
            title = page.locator("h1").first.inner_text()
            # the sidebar's offline copy: one HTML file, nothing loaded from the network
            with page.expect_download(timeout=60_000) as dl:
                page.get_by_role("button", name="Download HTML (offline copy)").click()
            html = Path(dl.value.path()).read_text(encoding="utf-8")
            assert html.startswith("<!DOCTYPE html>") and "ks_copy_u4" in html and "vegaEmbed" in html
            assert not re.search(r"<script[^>]+src=", html) and dl.value.suggested_filename.endswith(".html")

            # a teammate opens the link in a fresh browser context: same page, same run, same filter
            other = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
            other.goto(shared)
            _idle(other)
            other.get_by_text("Launch 0: ks_copy_u4").wait_for(timeout=30_000)
            assert other.locator("h1").first.inner_text() == title == "Kernels"
            sync_api.expect(other.get_by_label("Filter metrics")).to_have_value("dram__bytes_read", timeout=30_000)
            sync_api.expect(other.get_by_text("metrics matching").first).to_have_text(caption, timeout=30_000)
            assert run_id in other.url
        finally:
            browser.close()


def test_token_login_in_a_browser_then_the_app(tmp_path):
    """On a tokened server the browser first gets kernelscope's login form (no Streamlit at all); the right token
    opens the app and is gone from the address bar; a second browser without the cookie gets the form again."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="needs the e2e extra (pip install playwright)")
    from tests.dashboard.server import running_dashboard
    token = "browser-token-1234"
    with running_dashboard(tmp_path, tmp_path / "store", token=token) as srv, sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            page = browser.new_context().new_page()
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
            fresh = browser.new_context().new_page()
            fresh.goto(f"{srv.url}/runs")
            assert fresh.locator("input[name=token]").count() == 1
        finally:
            browser.close()
