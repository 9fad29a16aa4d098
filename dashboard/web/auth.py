"""The access token of lab-server mode, and the signed cookie that keeps a browser logged in.

A browser that gave the token gets a session cookie (no expiry date: it ends with the browser
session, and is sent on reload and from new tabs) holding `issued.nonce.signature`, where signature
= HMAC-SHA256(token, "kernelscope-session|issued|nonce"). The server checks the signature with its
token (so a new token logs everyone out) and refuses a cookie older than MAX_AGE_S. No Streamlit
here: dashboard/web/app.py sets and reads the cookie.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import time

COOKIE = "kernelscope_session"
MIN_TOKEN = 16
MAX_AGE_S = 7 * 24 * 3600


def token_ok(given: str | None, token: str) -> bool:
    """Constant-time comparison of UTF-8 bytes (str compare_digest refuses non-ASCII input)."""
    return (
        bool(given)
        and len(token) >= MIN_TOKEN
        and hmac.compare_digest(given.encode(), token.encode())
    )


def _sign(token: str, issued: str, nonce: str) -> str:
    return hmac.new(
        token.encode(), f"kernelscope-session|{issued}|{nonce}".encode(), hashlib.sha256
    ).hexdigest()


def make_cookie(token: str, now: float | None = None) -> str:
    issued = str(int(now if now is not None else time.time()))
    nonce = secrets.token_hex(8)
    return f"{issued}.{nonce}.{_sign(token, issued, nonce)}"


def cookie_ok(value: str | None, token: str, now: float | None = None) -> bool:
    """The cookie was signed with this token and is younger than MAX_AGE_S."""
    if not value or len(token) < MIN_TOKEN:
        return False
    parts = value.split(".")
    if len(parts) != 3 or not parts[0].isdigit():
        return False
    issued, nonce, sig = parts
    age = (now if now is not None else time.time()) - int(issued)
    return 0 <= age <= MAX_AGE_S and hmac.compare_digest(sig, _sign(token, issued, nonce))


def cookie_script(value: str) -> str:
    """A script that stores the cookie for this site's path (a session cookie; Secure over https)."""
    return (
        "<script>(function(){var v=" + json.dumps(value) + ";var "
        "p=location.pathname.replace(/[^/]*$/,'')||'/';document.cookie='"
        + COOKIE
        + "='+v+'; path='+p+'; SameSite=Strict'+"
        "(location.protocol==='https:'?'; Secure':'');})();</script>"
    )
