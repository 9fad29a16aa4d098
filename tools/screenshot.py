"""Takes screenshots of a running dashboard with Playwright and Debian's chromium (no browser
download).

    python tools/screenshot.py http://127.0.0.1:8501/kernels?run=RUN docs/kernels.png
"""

import sys

from playwright.sync_api import sync_playwright

url, out = sys.argv[1], sys.argv[2]
with sync_playwright() as p:
    b = p.chromium.launch(
        executable_path="/usr/bin/chromium",
        args=[
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
        ],
    )
    page = b.new_page(viewport={"width": 1500, "height": 1100})
    page.goto(url)
    page.wait_for_selector("[data-test-script-state='notRunning']", timeout=60000)
    page.wait_for_timeout(2500)
    page.screenshot(path=out, full_page=False)
    b.close()
