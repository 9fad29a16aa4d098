"""The dashboard's server process: Streamlit's ASGI app (`st.App`, public API) behind
dashboard.web.gate.Gate.

More: docs/architecture.md, *dashboard.web.serve*.
"""

from __future__ import annotations

import argparse
import logging
import os
import secrets
import sys
import traceback
from pathlib import Path

import streamlit as st
from starlette.middleware import Middleware

from dashboard.web.gate import Gate, HostPolicy

log = logging.getLogger("kernelscope.dashboard")
APP = Path(__file__).resolve().parent / "app.py"


def error_id() -> str:
    return secrets.token_hex(4)


def on_script_error(exc: Exception) -> bool:
    """An exception escaped a page: log it with a short id and show only the id (and what to do)."""
    eid = error_id()
    print(
        f"kernelscope dashboard: error {eid}:\n" + "".join(traceback.format_exception(exc)),
        file=sys.stderr,
        flush=True,
    )
    try:
        st.error(
            f"This page hit an internal error (error id `{eid}`). The server's log has the details "
            "under that id; the other pages and runs are unaffected."
        )
    except Exception:  # noqa: BLE001 - nothing more can be shown; the log has it
        pass
    return True


def build_app(*, token: str | None, allowed_hosts: list[str], max_upload_mb: int) -> st.App:
    gate = Middleware(
        Gate,
        hosts=HostPolicy(allowed_hosts),
        token=token,
        max_upload_bytes=int(max_upload_mb * 1e6),
        base_path=os.environ.get("STREAMLIT_SERVER_BASE_URL_PATH", ""),
    )
    return st.App(str(APP), middleware=[gate], on_script_error=on_script_error)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m dashboard.web.serve")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8501)
    ap.add_argument("--allowed-host", action="append", default=[])
    ap.add_argument("--max-upload-mb", type=int, default=200)
    args = ap.parse_args(argv)
    token = os.environ.get("KERNELSCOPE_TOKEN") or None
    extra = args.allowed_host + [
        h for h in os.environ.get("KERNELSCOPE_ALLOWED_HOSTS", "").split(",") if h.strip()
    ]
    os.environ["KERNELSCOPE_GATE"] = "asgi" if token else ""
    from collectors.store import Store

    # leftovers of interrupted ingests
    Store(os.environ.get("KERNELSCOPE_STORE") or None).housekeeping()
    app = build_app(token=token, allowed_hosts=extra, max_upload_mb=args.max_upload_mb)
    # `streamlit run` reads it; App.run not
    base = os.environ.get("STREAMLIT_SERVER_BASE_URL_PATH", "").strip("/")
    app.run(
        config={
            **({"server.baseUrlPath": base} if base else {}),
            "server.address": args.host,
            "server.port": args.port,
            "server.headless": True,
            "server.maxUploadSize": args.max_upload_mb,
            "server.enableXsrfProtection": True,
            "server.enableCORS": True,
            "server.fileWatcherType": "none",
            "server.runOnSave": False,
            # dashboard/web/static: the bundled CJK font (.streamlit/config.toml)
            "server.enableStaticServing": True,
            "browser.gatherUsageStats": False,
            "client.toolbarMode": "minimal",
            "client.showErrorDetails": "none",
        }
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
