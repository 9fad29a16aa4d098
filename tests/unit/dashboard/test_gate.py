"""The gate in front of Streamlit (dashboard.web.gate), as plain ASGI: which Host headers pass, what a
request without the token gets, the rate limit, and that the redirect after login never leaves the
server."""

from __future__ import annotations

import asyncio

import pytest
from urllib.parse import quote

from dashboard.web.gate import (
    COOKIE,
    Gate,
    HostPolicy,
    RateLimiter,
    _safe_next,
    cookie_value,
    host_name,
)


@pytest.mark.parametrize(
    "host,ok",
    [
        ("127.0.0.1:8501", True),
        ("[::1]:8501", True),
        ("localhost:8501", True),
        ("10.1.2.3", True),
        ("dash.lab.example:8501", True),
        ("x.internal.example", True),
        ("evil.example:8501", False),
        ("127.0.0.1.evil.example", False),
        ("localhost.evil.example:8501", False),
        ("", False),
        ("a@127.0.0.1", False),
        ("127.0.0.1/x", False),
        ("127.0.0.1:99999", False),
        (None, False),
    ],
)
def test_host_policy(host, ok):
    p = HostPolicy(["dash.lab.example", "*.internal.example"], own_names=False)
    assert p.allows(host) is ok


def test_host_name_parsing():
    assert host_name("LocalHost.:80") == "localhost" and host_name("[::1]:8501") == "::1"
    assert host_name("evil.example:notaport") is None


class App:
    def __init__(self):
        self.calls = 0

    async def __call__(self, scope, receive, send):
        self.calls += 1
        if scope["type"] == "http":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"app"})


def call(
    gate,
    path="/",
    *,
    method="GET",
    host="127.0.0.1:8501",
    headers=(),
    kind="http",
    query=b"",
    body=b"",
    client="1.2.3.4",
):
    sent = []
    msgs = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive():
        return msgs.pop(0) if msgs else {"type": "http.disconnect"}

    async def send(m):
        sent.append(m)

    scope = {
        "type": kind,
        "path": path,
        "method": method,
        "query_string": query,
        "client": (client, 5555),
        "headers": [(b"host", host.encode()), *headers],
    }
    asyncio.run(gate(scope, receive, send))
    return sent


def status(sent):
    start = next((m for m in sent if m["type"] == "http.response.start"), None)
    return start["status"] if start else sent[0]["type"]


def test_without_a_token_only_the_host_is_checked():
    app = App()
    g = Gate(app, hosts=HostPolicy(own_names=False))
    assert status(call(g)) == 200 and app.calls == 1
    assert status(call(g, host="evil.example:8501")) == 403 and app.calls == 1
    assert call(g, kind="websocket", host="evil.example")[0]["type"] == "websocket.close"
    cross = call(g, kind="websocket", headers=[(b"origin", b"http://evil.example")])
    assert cross[0]["type"] == "websocket.close" and app.calls == 1


def test_with_a_token_nothing_reaches_streamlit_without_the_cookie():
    app = App()
    token = "a-long-enough-token"
    g = Gate(app, hosts=HostPolicy(own_names=False), token=token, max_upload_bytes=1000)
    assert status(call(g, "/kernels")) == 401  # the login form
    assert call(g, "/_stcore/stream", kind="websocket")[0] == {
        "type": "websocket.close",
        "code": 1008,
        "reason": "Access token required",
    }
    assert status(call(g, "/_stcore/upload_file/s/f", method="PUT")) == 401
    assert (
        status(
            call(
                g, "/_stcore/upload_file/s/f", method="PUT", headers=[(b"content-length", b"5000")]
            )
        )
        == 413
    )  # the cap, before anything else
    # only the health check passed
    assert status(call(g, "/_stcore/health")) == 200 and app.calls == 1
    good = [(b"cookie", f"{COOKIE}={cookie_value(token)}".encode())]
    assert status(call(g, "/kernels", headers=good)) == 200 and app.calls == 2
    assert cookie_value(token) != token and token not in cookie_value(token)
    sent = call(g, "/kernels", query=f"token={token}&run=ab".encode())
    start = sent[0]
    assert start["status"] == 303 and (b"location", b"/kernels?run=ab") in start["headers"]


def test_the_rate_limit_slows_wrong_tokens_per_client_and_never_refuses_the_right_one(monkeypatch):
    monkeypatch.setattr("dashboard.web.gate.TARPIT_S", 0.0)
    app = App()
    token = "a-long-enough-token"
    g = Gate(app, hosts=HostPolicy(own_names=False), token=token, limiter=RateLimiter(per_client=5))
    codes = [status(call(g, query=f"token=bad{i}".encode())) for i in range(6)]
    # this address is slowed
    assert codes == [401] * 5 + [429]
    # the right one still opens
    assert status(call(g, query=f"token={token}".encode())) == 303
    assert status(call(g, query=f"token={token}".encode(), client="5.6.7.8")) == 303
    form = f"token={token}&next=//evil.example/x".encode()
    sent = call(g, "/_ks/login", method="POST", body=form, client="9.9.9.9")
    # never off the server
    assert (b"location", b"/") in sent[0]["headers"]


def test_wrong_tokens_from_many_addresses_lock_nobody_out(monkeypatch):
    """Issue 42: five wrong tokens from each of ten addresses locked every new login out for a minute."""
    monkeypatch.setattr("dashboard.web.gate.TARPIT_S", 0.0)
    token = "a-long-enough-token"
    g = Gate(App(), hosts=HostPolicy(own_names=False), token=token)
    for a in range(10):
        for i in range(5):
            assert (
                status(
                    call(
                        g,
                        "/_ks/login",
                        method="POST",
                        body=f"token=bad{i}&next=/".encode(),
                        client=f"127.0.0.{a + 2}",
                    )
                )
                == 401
            )
    sent = call(
        g,
        "/_ks/login",
        method="POST",
        body=f"token={token}&next=/kernels".encode(),
        client="127.0.0.12",
    )
    assert sent[0]["status"] == 303 and (b"location", b"/kernels") in sent[0]["headers"]


def test_a_login_whose_next_holds_any_character_redirects():
    token = "a-long-enough-token"
    g = Gate(App(), hosts=HostPolicy(own_names=False), token=token)
    body = "token={}&next={}".format(token, quote("/kernels?run=ab&q=名前 ü")).encode()
    sent = call(g, "/_ks/login", method="POST", body=body)
    loc = dict(sent[0]["headers"])[b"location"]
    assert sent[0]["status"] == 303 and loc.startswith(b"/kernels?run=ab&q=%E5%90%8D")
    loc.decode("ascii")


def test_healthz_is_no_way_around_the_token():
    app = Html()
    g = Gate(app, hosts=HostPolicy(own_names=False), token="a-long-enough-token")
    sent = call(g, "/healthz")
    assert status(sent) == 401 and b"Streamlit" not in _body(sent) and not app.scopes
    # Streamlit's own health check passes
    assert status(call(g, "/_stcore/health")) == 200


@pytest.mark.parametrize(
    "nxt,out",
    [
        ("/kernels?run=ab", "/kernels?run=ab"),
        ("//evil.example", "/"),
        ("http://evil.example/", "/"),
        ("kernels", "/"),
        ("/a b", "/a%20b"),
    ],
)
def test_the_redirect_after_login_stays_on_the_server(nxt, out):
    assert _safe_next(nxt, "") == out


def test_under_a_sub_path_the_login_and_the_cookie_stay_under_it():
    """STREAMLIT_SERVER_BASE_URL_PATH=ks (behind a proxy at /ks/): the form posts to /ks/_ks/login,
    the cookie's path is /ks, the health check under the sub-path passes."""
    app = App()
    token = "a-long-enough-token"
    g = Gate(app, hosts=HostPolicy(own_names=False), token=token, base_path="ks")
    page = call(g, "/ks/kernels")
    assert status(page) == 401 and b'action="/ks/_ks/login"' in page[1]["body"]
    sent = call(g, "/ks/_ks/login", method="POST", body=f"token={token}&next=/ks/kernels".encode())
    headers = dict(sent[0]["headers"])
    assert (
        sent[0]["status"] == 303
        and headers[b"location"] == b"/ks/kernels"
        and b"Path=/ks;" in headers[b"set-cookie"]
    )
    assert status(call(g, "/ks/_stcore/health")) == 200


class Html:
    """Streamlit's answer to a page: its index.html (compressed when the browser accepts it)."""

    def __init__(self):
        self.scopes = []

    async def __call__(self, scope, receive, send):
        self.scopes.append(scope)
        gz = any(k == b"accept-encoding" and b"gzip" in v for k, v in scope["headers"])
        body = b"<html><head><title>Streamlit</title></head><body></body></html>"
        ctype = (
            b"application/javascript"
            if scope["path"].endswith(".js")
            else b"text/html; charset=utf-8"
        )
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", ctype),
                    (b"content-length", str(len(body)).encode()),
                    *([(b"content-encoding", b"gzip")] if gz else []),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body[:20], "more_body": True})
        await send({"type": "http.response.body", "body": body[20:]})


def _body(sent) -> bytes:
    return b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")


@pytest.mark.parametrize("base", ["", "ks"])
def test_a_page_names_its_server_so_the_frontend_probes_once(base):
    """Streamlit's frontend at /kernels first probes /kernels/_stcore/health (404), waits and
    retries at the root; the page's HTML gets the base URL, asked uncompressed, with its length
    right; assets pass untouched."""
    app = Html()
    gate = Gate(app, hosts=HostPolicy(), base_path=base)
    prefix = f"/{base}" if base else ""
    sent = call(
        gate, f"{prefix}/kernels", query=b"run=abc", headers=[(b"accept-encoding", b"gzip, br")]
    )
    body = _body(sent)
    assert body.startswith(
        b"<html><head><script>window.__streamlit=Object.assign({},window.__streamlit,"
        b'{BACKEND_BASE_URL:location.origin+"' + prefix.encode() + b'/"});</script><title>'
    )
    start = next(m for m in sent if m["type"] == "http.response.start")
    assert dict(start["headers"])[b"content-length"] == str(len(body)).encode()
    assert not any(k == b"accept-encoding" for k, _ in app.scopes[-1]["headers"])
    for path in (f"{prefix}/static/js/index.js", f"{prefix}/_stcore/health"):
        sent = call(gate, path, headers=[(b"accept-encoding", b"gzip")])
        assert b"__streamlit" not in _body(sent) and any(
            k == b"accept-encoding" for k, _ in app.scopes[-1]["headers"]
        )
    # with a token, only a logged-in browser reaches the page (and gets the line)
    gate = Gate(app, hosts=HostPolicy(), token="t" * 20, base_path=base)
    assert b"__streamlit" not in _body(call(gate, f"{prefix}/kernels"))
    ok = call(
        gate,
        f"{prefix}/kernels",
        headers=[(b"cookie", f"{COOKIE}={cookie_value('t' * 20)}".encode())],
    )
    assert b"BACKEND_BASE_URL" in _body(ok)
