"""The dashboard's front door: an ASGI middleware that runs before Streamlit on every HTTP request
and websocket.

    Gate(app, hosts=HostPolicy(...), token=..., max_upload_bytes=...)

More: docs/architecture.md, *dashboard.web.gate*.
"""

from __future__ import annotations

import asyncio
import fnmatch
import hashlib
import hmac
import html
import ipaddress
import socket
import threading
import time
from collections import deque
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

COOKIE = "ks_auth"
LOGIN_PATH = "/_ks/login"
# Streamlit's own health endpoint: the only path without the token
HEALTH_PATHS = ("/_stcore/health",)
TARPIT_S = 0.5
UPLOAD_PREFIX = "/_stcore/upload_file"
MAX_LOGIN_BODY = 4096
#: paths that are not a page (Streamlit's endpoints and assets): served as they are
ASSET_PREFIXES = (
    "/_stcore/",
    "/static/",
    "/media/",
    "/component/",
    "/app/static/",
    "/_ks/",
    "/favicon",
)


def cookie_value(token: str) -> str:
    """The access cookie's value: an HMAC of the token (the token itself never leaves the login request)."""
    return hmac.new(token.encode(), b"kernelscope-dashboard-access-v1", hashlib.sha256).hexdigest()


def token_ok(given: str | None, token: str) -> bool:
    """Constant-time comparison of UTF-8 bytes."""
    return bool(given) and hmac.compare_digest(given.encode(), token.encode())


# ---------------------------------------------------------------------------------------------------


def host_name(host_header: str | None) -> str | None:
    """The host name of a Host header without port and brackets, lower-case; None when malformed."""
    if not host_header:
        return None
    try:
        parts = urlsplit(f"//{host_header}")
        name = parts.hostname
        _ = parts.port
    except ValueError:
        return None
    if not name or parts.username or parts.password or parts.path or parts.query or parts.fragment:
        return None
    return name.lower().rstrip(".")


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name.split("%")[0])
        return True
    except ValueError:
        return False


class HostPolicy:
    """Which Host headers a request may carry: IP literals, localhost, this machine's names, and
    `extra` (exact names or `*.domain` wildcards)."""

    def __init__(self, extra: list[str] | tuple[str, ...] = (), own_names: bool = True):
        names = {"localhost"}
        if own_names:
            for n in (socket.gethostname(), socket.getfqdn()):
                if n:
                    names.add(n.lower().rstrip("."))
        self.names = names
        self.patterns = [e.strip().lower().rstrip(".") for e in extra if e and e.strip()]

    def allows(self, host_header: str | None) -> bool:
        name = host_name(host_header)
        if name is None:
            return False
        if name in self.names or _is_ip(name) or name.endswith(".localhost"):
            return True
        for p in self.patterns:
            if p == "*" or name == p or (p.startswith("*.") and fnmatch.fnmatchcase(name, p)):
                return True
        return False


class RateLimiter:
    """Failed token attempts per client address in a sliding window; an address with `per_client`
    failures is limited for `block_s` after the last of them. Only that address, and only its wrong
    attempts (Gate)."""

    def __init__(
        self,
        per_client: int = 5,
        window_s: float = 60.0,
        block_s: float = 60.0,
        max_clients: int = 10_000,
    ):
        self.per_client, self.window, self.block, self.max_clients = (
            per_client,
            window_s,
            block_s,
            max_clients,
        )
        self.fails: dict[str, deque] = {}
        self.blocked: dict[str, float] = {}
        self.lock = threading.Lock()

    def _trim(self, q: deque, now: float) -> None:
        while q and now - q[0] > self.window:
            q.popleft()

    def retry_after(self, client: str) -> float:
        """Seconds until this client's wrong attempts are answered normally again (0: now)."""
        now = time.monotonic()
        with self.lock:
            return max(0.0, self.blocked.get(client, 0.0) - now)

    def failure(self, client: str) -> None:
        now = time.monotonic()
        with self.lock:
            q = self.fails.setdefault(client, deque())
            q.append(now)
            self._trim(q, now)
            if len(q) >= self.per_client:
                self.blocked[client] = now + self.block
            if len(self.fails) > self.max_clients:  # forget idle clients
                for k in [k for k, v in self.fails.items() if not v or now - v[-1] > self.window]:
                    del self.fails[k]
                    if self.blocked.get(k, 0.0) < now:
                        self.blocked.pop(k, None)


# ---------------------------------------------------------------------------------------------------


def _headers(scope) -> dict[bytes, bytes]:
    out: dict[bytes, bytes] = {}
    for k, v in scope.get("headers") or []:
        out.setdefault(k.lower(), v)
    return out


def _cookies(raw: bytes | None) -> dict[str, str]:
    out = {}
    for part in (raw or b"").decode("latin-1").split(";"):
        k, _, v = part.strip().partition("=")
        if k:
            out.setdefault(k, v)
    return out


async def _respond(
    send,
    status: int,
    body: str,
    *,
    content_type: str = "text/plain; charset=utf-8",
    headers: list[tuple[bytes, bytes]] = (),
) -> None:
    data = body.encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", content_type.encode()),
                (b"content-length", str(len(data)).encode()),
                (b"cache-control", b"no-store"),
                (b"x-content-type-options", b"nosniff"),
                (b"connection", b"close"),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": data})


LOGIN_PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>Kernelscope</title>
<meta name="viewport" content="width=device-width,initial-scale=1">
<style>body{{font-family:system-ui,sans-serif;max-width:28rem;margin:4rem auto;padding:0 1rem;color:#222}}
input{{font-size:1rem;padding:.4rem;width:100%;box-sizing:border-box;margin:.5rem 0}}
button{{font-size:1rem;padding:.4rem 1rem}} .err{{color:#b00020}}</style></head><body>
<h1>Kernelscope</h1><p>This server needs an access token (ask whoever started it).</p>{message}
<form method="post" action="{action}"><input type="hidden" name="next" value="{next}">
<label>Access token <input type="password" name="token" autocomplete="current-password" autofocus></label>
<button type="submit">Open</button></form></body></html>"""


class Gate:
    def __init__(
        self,
        app,
        *,
        hosts: HostPolicy,
        token: str | None = None,
        max_upload_bytes: int | None = None,
        limiter: RateLimiter | None = None,
        base_path: str = "",
    ):
        self.app = app
        self.hosts = hosts
        self.token = token or None
        self.cookie = cookie_value(token) if token else None
        self.max_upload = max_upload_bytes
        self.limiter = limiter or RateLimiter()
        self.base = "/" + base_path.strip("/") if base_path.strip("/") else ""

    async def __call__(self, scope, receive, send):
        kind = scope.get("type")
        if kind not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        h = _headers(scope)
        host = h.get(b"host", b"").decode("latin-1")
        if not self.hosts.allows(host):
            return await self._refuse(
                scope,
                receive,
                send,
                403,
                "Host not allowed: open the dashboard by this server's own name or address, or "
                "start it with --allowed-host NAME",
            )
        if kind == "websocket" or scope.get("method") in ("PUT", "POST", "DELETE"):
            origin = h.get(b"origin")
            if origin is not None and host_name(
                urlsplit(origin.decode("latin-1")).netloc
            ) != host_name(host):
                return await self._refuse(scope, receive, send, 403, "Cross-origin request refused")
        path = scope.get("path", "")
        rel = path[len(self.base) :] if self.base and path.startswith(self.base) else path
        if kind == "http" and rel.startswith(UPLOAD_PREFIX) and self.max_upload is not None:
            try:
                n = int(h.get(b"content-length", b"0"))
            except ValueError:
                n = 0
            if n > self.max_upload:
                return await _respond(
                    send,
                    413,
                    f"Upload of {n / 1e6:,.1f} MB is above this server's cap of "
                    f"{self.max_upload / 1e6:,.0f} MB",
                )
        if self.token is None or rel in HEALTH_PATHS:
            return await self._pass(scope, receive, send, rel)
        client = (scope.get("client") or ("?",))[0] or "?"
        if kind == "http" and rel == LOGIN_PATH and scope.get("method") == "POST":
            return await self._login(scope, receive, send, client)
        if hmac.compare_digest(
            _cookies(h.get(b"cookie")).get(COOKIE, "").encode(), self.cookie.encode()
        ):
            return await self._pass(scope, receive, send, rel)
        if kind == "http" and scope.get("method") in ("GET", "HEAD"):
            q = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
            given = next((v for k, v in q if k == "token"), None)
            if given is not None:
                if token_ok(given, self.token):
                    rest = urlencode([(k, v) for k, v in q if k != "token"])
                    return await self._grant(send, path + (f"?{rest}" if rest else ""))
                wait = self.limiter.retry_after(client)
                self.limiter.failure(client)
                if wait:
                    return await self._too_many(send, wait)
                return await self._login_page(send, path, q, "Wrong token.")
            if not rel.startswith(("/_stcore/", "/static/", "/media/", "/component/")):
                return await self._login_page(send, path, q, "")
        return await self._refuse(scope, receive, send, 401, "Access token required")

    async def _pass(self, scope, receive, send, rel: str) -> None:
        """On to Streamlit; a page's HTML (a GET of anything but an asset or endpoint) with the base-URL line."""
        if (
            scope["type"] != "http"
            or scope.get("method") != "GET"
            or rel.startswith(ASSET_PREFIXES)
        ):
            return await self.app(scope, receive, send)
        # uncompressed, to add one line (the page's HTML is a few KB)
        scope = {
            **scope,
            "headers": [
                (k, v) for k, v in scope.get("headers") or [] if k.lower() != b"accept-encoding"
            ],
        }
        line = (
            "<script>window.__streamlit=Object.assign({},window.__streamlit,{BACKEND_BASE_URL:location.origin+"
            f'"{self.base}/"}});</script>'
        ).encode()
        start: dict = {}
        body: list[bytes] = []

        async def inject(m):
            if m["type"] == "http.response.start":
                hs = {k.lower(): v for k, v in m.get("headers") or []}
                if (
                    m.get("status") != 200
                    or not hs.get(b"content-type", b"").startswith(b"text/html")
                    or hs.get(b"content-encoding", b"identity") != b"identity"
                ):
                    start["pass"] = True
                    return await send(m)
                start["m"] = m
                return None
            if start.get("pass") or m["type"] != "http.response.body":
                return await send(m)
            body.append(m.get("body", b""))
            if m.get("more_body"):
                return None
            html_ = b"".join(body).replace(b"<head>", b"<head>" + line, 1)
            st = start["m"]
            await send(
                {
                    **st,
                    "headers": [
                        (k, v) for k, v in st.get("headers") or [] if k.lower() != b"content-length"
                    ]
                    + [(b"content-length", str(len(html_)).encode())],
                }
            )
            await send({"type": "http.response.body", "body": html_})

        return await self.app(scope, receive, inject)

    # ---- responses
    # --------------------------------------------------------------------------------
    async def _refuse(self, scope, receive, send, status: int, text: str) -> None:
        if scope["type"] == "websocket":
            # closing before accepting: the server answers the handshake with 403 and no session is
            # created
            await send({"type": "websocket.close", "code": 1008, "reason": text[:120]})
            return
        await _respond(send, status, text + "\n")

    async def _too_many(self, send, wait: float) -> None:
        await asyncio.sleep(TARPIT_S)  # slows guessing from this address
        await _respond(
            send,
            429,
            f"Too many wrong tokens: try again in {wait:.0f} s\n",
            headers=[(b"retry-after", str(int(wait) + 1).encode())],
        )

    async def _grant(self, send, location: str) -> None:
        cookie = f"{COOKIE}={self.cookie}; Path={self.base or '/'}; HttpOnly; SameSite=Lax"
        await _respond(
            send,
            303,
            "",
            headers=[
                (b"location", _safe_next(location, self.base).encode("ascii")),
                (b"set-cookie", cookie.encode()),
            ],
        )

    async def _login_page(self, send, path: str, q, message: str) -> None:
        rest = urlencode([(k, v) for k, v in q if k != "token"])
        nxt = path + (f"?{rest}" if rest else "")
        page = LOGIN_PAGE.format(
            message=f'<p class="err">{html.escape(message)}</p>' if message else "",
            action=html.escape(self.base + LOGIN_PATH),
            next=html.escape(nxt),
        )
        await _respond(send, 401, page, content_type="text/html; charset=utf-8")

    async def _login(self, scope, receive, send, client: str) -> None:
        body = b""
        while True:
            msg = await receive()
            if msg["type"] == "http.disconnect":
                return
            body += msg.get("body", b"")
            if len(body) > MAX_LOGIN_BODY:
                return await _respond(send, 413, "Login form too large\n")
            if not msg.get("more_body"):
                break
        form = dict(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))
        nxt = form.get("next") or self.base or "/"
        if token_ok(form.get("token"), self.token):
            return await self._grant(send, nxt)
        wait = self.limiter.retry_after(client)
        self.limiter.failure(client)
        if wait:
            return await self._too_many(send, wait)
        path, _, query = nxt.partition("?")
        await self._login_page(send, path, parse_qsl(query), "Wrong token.")


def _safe_next(location: str, base: str) -> str:
    """Only a path on this server (never another site): '//evil' or 'http://…' become the base path."""
    parts = urlsplit(location)
    if parts.scheme or parts.netloc or not location.startswith("/") or location.startswith("//"):
        return base or "/"
    # the whole target percent-encoded (UTF-8): a header carries ASCII only, whatever the query
    # holds
    return quote(parts.path, safe="/%:@-._~!$&'()*+,;=") + (
        f"?{quote(parts.query, safe='/%:@-._~!$&()*+,;=?')}" if parts.query else ""
    )
