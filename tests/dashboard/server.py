"""A real dashboard server for tests, and a websocket client that speaks Streamlit's protocol.

    with running_dashboard(store, token=..., host=...) as srv:     # `kernelscope dashboard` on a free port
        srv.url, srv.pid, srv.rss()                                  # the server process (after exec) and its RSS
        page = open_page(srv, "kernels", "run=/etc")                 # one script run over the websocket
        page.texts, page.alerts, page.exceptions                     # what the browser would draw

`open_page` connects to /_stcore/stream with the `websockets` client (as the browser does:
subprotocol "streamlit"), sends a rerun request for the page and query string, and collects the
ForwardMsg deltas until the script finishes: every element's text, alerts (error / warning / info /
success) and exception elements (whose presence means a stack trace would reach the browser).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Server:
    url: str
    port: int
    proc: subprocess.Popen
    store: Path
    log: Path

    @property
    def pid(self) -> int:
        return self.proc.pid  # `kernelscope dashboard` execs the server: the same process

    def rss(self) -> int:
        """Resident memory of the server process and its children now, bytes."""
        return _rss_tree(self.pid)

    def alive(self) -> bool:
        return self.proc.poll() is None


def _rss_tree(pid: int) -> int:
    total = 0
    pids = [pid]
    try:
        out = subprocess.run(
            ["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True
        ).stdout
        pids += [int(x) for x in out.split()]
    except OSError:
        pass
    for p in pids:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
        except OSError:
            pass
    return total


def peak_rss(pid: int) -> int:
    """VmHWM of one process (its peak resident memory), bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


@contextlib.contextmanager
def running_dashboard(
    tmp: Path,
    store: Path,
    *,
    token: str | None = None,
    host: str = "127.0.0.1",
    extra: list[str] = (),
    env: dict | None = None,
):
    port = free_port()
    log = tmp / f"dashboard-{port}.log"
    e = dict(
        os.environ,
        KERNELSCOPE_SAMPLES=str(tmp / "no_samples"),
        KERNELSCOPE_FAKE_NVML="1",
        **(env or {}),
    )
    e.pop("KERNELSCOPE_TOKEN", None)
    if token:
        e["KERNELSCOPE_TOKEN"] = token
    exe = Path(sys.executable).with_name("kernelscope")
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                str(exe),
                "dashboard",
                "--host",
                host,
                "--port",
                str(port),
                "--store",
                str(store),
                *extra,
            ],
            env=e,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    srv = Server(url, port, proc, store, log)
    deadline = time.time() + 90
    try:
        while True:
            try:
                if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read() == b"ok":
                    break
            except (OSError, urllib.error.URLError):
                pass
            if proc.poll() is not None or time.time() > deadline:
                raise RuntimeError(
                    f"dashboard did not start: {log.read_text(errors='replace')[-2000:]}"
                )
            time.sleep(0.3)
        yield srv
    finally:
        stop(proc)


def stop(proc: subprocess.Popen) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        deadline = time.time() + 5
        while time.time() < deadline:
            proc.poll()
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)


# ---------------------------------------------------------------------------------------------------
# Streamlit's websocket protocol


@dataclass
class Page:
    texts: list[str] = field(default_factory=list)
    alerts: list[tuple[str, str]] = field(default_factory=list)  # (format, body)
    exceptions: list[str] = field(default_factory=list)
    finished: bool = False
    session_id: str = ""

    def text(self) -> str:
        return "\n".join(self.texts + [b for _, b in self.alerts] + self.exceptions)


_ALERT = {0: "unused", 1: "error", 2: "warning", 3: "info", 4: "success"}


def _element_texts(el, page: Page) -> None:
    kind = el.WhichOneof("type")
    if kind == "alert":
        page.alerts.append((_ALERT.get(el.alert.format, str(el.alert.format)), el.alert.body))
    elif kind == "exception":
        page.exceptions.append(
            f"{el.exception.type}: {el.exception.message} {' '.join(el.exception.stack_trace)}"
        )
    elif kind == "markdown":
        page.texts.append(el.markdown.body)
    elif kind == "heading":
        page.texts.append(el.heading.body)
    elif kind == "code":
        page.texts.append(el.code.code_text)
    elif kind == "text":
        page.texts.append(el.text.body)
    elif kind in ("arrow_data_frame", "arrow_table"):
        page.texts.append(f"<{kind}>")


def open_page(
    srv: Server,
    page_name: str = "",
    query: str = "",
    *,
    host: str | None = None,
    origin: str | None = None,
    cookie: str | None = None,
    timeout: float = 60.0,
) -> Page:
    """One script run of a page over the websocket, as a browser would do it; what it drew."""
    from websockets.sync.client import connect
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    headers = {}
    if origin:
        headers["Origin"] = origin
    if cookie:
        headers["Cookie"] = cookie
    page = Page()
    # the Host header is the URI's
    sock = socket.create_connection(("127.0.0.1", srv.port), timeout=timeout)
    with connect(
        f"ws://{host or f'127.0.0.1:{srv.port}'}/_stcore/stream",
        sock=sock,
        subprotocols=["streamlit"],
        additional_headers=headers,
        open_timeout=timeout,
        max_size=None,
    ) as ws:
        msg = BackMsg()
        msg.rerun_script.query_string = query
        msg.rerun_script.page_name = page_name
        ws.send(msg.SerializeToString())
        deadline = time.time() + timeout
        while time.time() < deadline:
            raw = ws.recv(timeout=max(0.1, deadline - time.time()))
            if isinstance(raw, str):
                continue
            fm = ForwardMsg()
            fm.ParseFromString(raw)
            t = fm.WhichOneof("type")
            if t == "new_session":
                page.session_id = fm.new_session.initialize.session_id
            elif t == "delta" and fm.delta.WhichOneof("type") == "new_element":
                _element_texts(fm.delta.new_element, page)
            elif t == "script_finished":
                page.finished = True
                # FINISHED_SUCCESSFULLY, FINISHED_EARLY_FOR_RERUN... keep reading
                if fm.script_finished in (0, 3):
                    break
                break
    return page


def http(
    srv: Server,
    path: str,
    *,
    method: str = "GET",
    host: str | None = None,
    data: bytes | None = None,
    headers: dict | None = None,
) -> tuple[int, bytes, dict]:
    """(status, body, headers) of one HTTP request to the server (no redirects followed)."""

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *a, **k):
            return None

    opener = urllib.request.build_opener(NoRedirect)
    req = urllib.request.Request(
        f"{srv.url}{path}", data=data, method=method, headers=headers or {}
    )
    if host:
        req.add_unredirected_header("Host", host)
    try:
        with opener.open(req, timeout=60) as r:
            return r.status, r.read(), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read(), dict(e.headers)


def _recv_until(ws, page: Page, want: str | None, timeout: float):
    """Read ForwardMsgs into `page` until one of type `want` arrives (returned) or the script finishes."""
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    deadline = time.time() + timeout
    widgets = {}
    while time.time() < deadline:
        raw = ws.recv(timeout=max(0.1, deadline - time.time()))
        if isinstance(raw, str):
            continue
        fm = ForwardMsg()
        fm.ParseFromString(raw)
        t = fm.WhichOneof("type")
        if t == "new_session":
            page.session_id = fm.new_session.initialize.session_id
        elif t == "delta" and fm.delta.WhichOneof("type") == "new_element":
            el = fm.delta.new_element
            if el.WhichOneof("type") == "file_uploader":
                widgets["file_uploader"] = el.file_uploader.id
            _element_texts(el, page)
        if want and t == want:
            return fm, widgets
        if t == "script_finished":
            page.finished = True
            if want is None:
                return fm, widgets
    raise TimeoutError(f"no {want or 'script_finished'} within {timeout} s")


def upload_files(
    srv: Server, files: list[tuple[str, bytes]], *, cookie: str = "", timeout: float = 300.0
) -> Page:
    """Upload files on the Upload page as the browser does: the page's file uploader, upload URLs
    from the server (BackMsg file_urls_request), one multipart PUT per file with the XSRF token,
    then a rerun with the uploader's new state. Returns what the page drew after the files were
    processed."""
    import uuid

    from streamlit.proto.BackMsg_pb2 import BackMsg
    from websockets.sync.client import connect

    status, _, headers = http(
        srv, "/_stcore/health", headers={"Cookie": cookie} if cookie else None
    )
    set_cookie = headers.get("set-cookie") or headers.get("Set-Cookie") or ""
    xsrf = next(
        (
            p.split("=", 1)[1]
            for p in set_cookie.replace(",", ";").split(";")
            if p.strip().startswith("_streamlit_xsrf=")
        ),
        "",
    )
    cookies = "; ".join(c for c in (cookie, f"_streamlit_xsrf={xsrf}" if xsrf else "") if c)
    page = Page()
    with connect(
        f"ws://127.0.0.1:{srv.port}/_stcore/stream",
        subprotocols=["streamlit", xsrf or "x"],
        additional_headers={"Cookie": cookies} if cookies else {},
        open_timeout=60,
        max_size=None,
    ) as ws:
        msg = BackMsg()
        msg.rerun_script.page_name = "upload"
        ws.send(msg.SerializeToString())
        _, widgets = _recv_until(ws, page, None, 60)
        uploader = widgets["file_uploader"]
        req = BackMsg()
        req.file_urls_request.request_id = uuid.uuid4().hex
        req.file_urls_request.session_id = page.session_id
        req.file_urls_request.file_names.extend(n for n, _ in files)
        ws.send(req.SerializeToString())
        fm, _ = _recv_until(ws, Page(), "file_urls_response", 60)
        urls = list(fm.file_urls_response.file_urls)
        rerun = BackMsg()
        rerun.rerun_script.page_name = "upload"
        w = rerun.rerun_script.widget_states.widgets.add()
        w.id = uploader
        for (name, data), u in zip(files, urls):
            boundary = uuid.uuid4().hex
            body = (
                (
                    f'--{boundary}\r\nContent-Disposition: form-data; name="file"; '
                    f'filename="{name}"\r\n'
                    f"Content-Type: application/octet-stream\r\n\r\n"
                ).encode()
                + data
                + f"\r\n--{boundary}--\r\n".encode()
            )
            path = (
                u.upload_url
                if u.upload_url.startswith("/")
                else "/" + u.upload_url.split("/", 3)[-1]
            )
            st_, resp, _ = http(
                srv,
                path,
                method="PUT",
                data=body,
                headers={
                    "Content-Type": f"multipart/form-data; boundary={boundary}",
                    "X-Xsrftoken": xsrf,
                    "Cookie": cookies,
                },
            )
            if st_ not in (200, 204):
                raise RuntimeError(f"upload of {name} answered {st_}: {resp[:200]!r}")
            info = w.file_uploader_state_value.uploaded_file_info.add()
            info.name, info.size, info.file_id = name, len(data), u.file_id
            info.file_urls.CopyFrom(u)
        page = Page(session_id=page.session_id)
        ws.send(rerun.SerializeToString())
        _recv_until(ws, page, None, timeout)
    return page
