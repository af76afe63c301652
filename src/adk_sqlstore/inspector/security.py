"""The inspector's safety: the access token, CSRF tokens, the response headers that
make every page inert content, and the check of where it may listen.

- **Token.** With a token, every request needs it: ``Authorization: Bearer TOKEN``,
  or the cookie the sign-in form sets (``HttpOnly``, ``SameSite=Strict``). Tokens are
  compared in constant time (:func:`hmac.compare_digest`).
- **CSRF.** Each browser gets a random CSRF cookie; every form that changes anything
  carries the same value in a hidden field, and a POST whose field does not match
  (or whose ``Origin`` is another site's) is refused with 403.
- **Headers.** A Content-Security-Policy that allows no inline script or style and
  nothing from another origin, ``X-Content-Type-Options: nosniff``, no framing, no
  referrer sent to another site (ids are in URLs), no caching.
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
import socket
from typing import Any

from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = [
    "CSP",
    "CSRF_COOKIE",
    "TOKEN_COOKIE",
    "SecurityHeaders",
    "csrf_token",
    "is_loopback",
    "request_token",
    "same_token",
    "valid_csrf",
    "valid_origin",
]

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self';"
    " form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
"""No inline script, no inline style, nothing from elsewhere, never in a frame."""

TOKEN_COOKIE = "adk_sqlstore_inspector_token"
CSRF_COOKIE = "adk_sqlstore_inspector_csrf"

_HEADERS = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "same-origin",  # no-referrer makes a form POST's Origin "null"
    "cache-control": "no-store",
    "cross-origin-opener-policy": "same-origin",
}


class SecurityHeaders:
    """ASGI middleware: the headers above on every response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in _HEADERS.items():
                    headers[name] = value
            await send(message)

        await self.app(scope, receive, send_with_headers)


def same_token(given: str | None, expected: str) -> bool:
    """Whether ``given`` is ``expected``, compared in constant time."""
    if given is None:
        return False
    return hmac.compare_digest(given.encode("utf-8", "replace"), expected.encode())


def request_token(request: Request) -> str | None:
    """The token a request carries: its bearer token, else its cookie."""
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer" and value:
        return value.strip()
    return request.cookies.get(TOKEN_COOKIE)


def csrf_token(request: Request) -> tuple[str, bool]:
    """The browser's CSRF token, and whether it is new (then set the cookie)."""
    found = request.cookies.get(CSRF_COOKIE)
    if found and len(found) == 43:
        return found, False
    return secrets.token_urlsafe(32), True


def valid_csrf(request: Request, form: Any) -> bool:
    """Whether a form's ``csrf`` field matches the browser's CSRF cookie."""
    cookie = request.cookies.get(CSRF_COOKIE)
    field = form.get("csrf")
    if not cookie or not isinstance(field, str):
        return False
    return hmac.compare_digest(cookie.encode(), field.encode("utf-8", "replace"))


def valid_origin(request: Request) -> bool:
    """Whether a POST comes from this site: its ``Origin`` (if any, else ``Referer``)
    names the host it was sent to."""
    origin = request.headers.get("origin") or request.headers.get("referer")
    if not origin or origin == "null":
        return origin is None
    host = request.headers.get("host", "")
    rest = origin.split("://", 1)[-1]
    return rest.split("/", 1)[0] == host


def is_loopback(host: str) -> bool:
    """Whether listening on ``host`` reaches only this machine (``127.0.0.1``,
    ``::1``, ``localhost``, or a name every address of which is a loopback one)."""
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    return bool(infos) and all(ipaddress.ip_address(i[4][0]).is_loopback for i in infos)
