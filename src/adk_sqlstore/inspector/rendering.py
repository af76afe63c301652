"""How the inspector's pages are made: the Jinja environment (every value escaped),
links under wherever the app is mounted, cursors, and the shown form of stored text.

Stored text is user or model content: it is always escaped, cut to a length a page
can hold (:data:`SHOWN_CHARS`), and its bidirectional controls (which could make one
piece of text look like another) are shown as visible marks, never applied.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup, escape
from starlette.requests import Request
from starlette.responses import HTMLResponse

from ..errors import InvalidArgumentError
from ..validation import check_identifier

__all__ = [
    "PAGE_SIZE",
    "SHOWN_CHARS",
    "USER_SCOPE",
    "Raw",
    "decode_cursor",
    "encode_cursor",
    "environment",
    "iso",
    "link",
    "marked",
    "path_ids",
    "path_text",
    "render",
    "shown",
    "when",
]

PAGE_SIZE = 50
"""Rows per page of every list."""

SHOWN_CHARS = 2000
"""The most characters of one stored text a page shows (the rest is counted)."""

_FOLDER = Path(__file__).parent
_BIDI = {
    chr(c): f"U+{c:04X}"
    for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C)
}


_BIDI_RE = re.compile("[" + "".join(_BIDI) + "]")
_BIDI_SHOWN = {ch: f'<span class="ctl">[{mark}]</span>' for ch, mark in _BIDI.items()}


def when(seconds: float | None) -> str:
    """Seconds since the epoch as ``YYYY-MM-DD HH:MM:SS`` UTC (``-`` for none)."""
    if seconds is None or not math.isfinite(seconds):
        return "-"
    try:
        return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%S")
    except (OverflowError, OSError, ValueError):
        return "-"


def iso(value: str | None) -> str:
    """An ISO 8601 time the public API returns (``Fact``, ``FactRevision``) as
    :func:`when` shows times (``-`` for none)."""
    if not value:
        return "-"
    try:
        return when(datetime.fromisoformat(value).timestamp())
    except ValueError:
        return value


def shown(text: Any, limit: int = SHOWN_CHARS) -> Markup:
    """Stored text as safe markup: escaped, at most ``limit`` characters (then how many
    more there are), bidirectional controls shown as marks."""
    value = text if isinstance(text, str) else json.dumps(text, ensure_ascii=False, default=str)
    rest = len(value) - limit
    if rest > 0:
        value = value[:limit]
    escaped = str(escape(str(value)))  # whole (even markup), then the controls
    out = [Markup(_BIDI_RE.sub(lambda m: _BIDI_SHOWN[m.group()], escaped))]
    if rest > 0:
        out.append(Markup('<span class="more"> … {:,} more characters</span>').format(rest))
    return Markup("").join(out)


def marked(text: Any) -> str:
    """Stored text for where no markup can go (a page's title, a text box): its
    bidirectional controls replaced by visible marks (``[U+202E]``), never applied;
    escaped by the template as any value."""
    value = text if isinstance(text, str) else str(text)
    return "".join(f"[{_BIDI[ch]}]" if ch in _BIDI else ch for ch in value)


class Raw(str):
    """A path segment :func:`link` writes as it is (a marker such as
    :data:`USER_SCOPE`, which no encoded id can equal)."""


USER_SCOPE = Raw("~")
"""The artifact path segment of the user's own artifacts (no session)."""


def _segment(part: Any) -> str:
    """An id as one path segment: ``~`` and ``/`` written ``~7E`` and ``~2F`` first
    (a server decodes ``%2F`` before routing, so an id with ``/`` would not route)."""
    if isinstance(part, Raw):
        return quote(str(part), safe="~")
    return quote(str(part).replace("~", "~7E").replace("/", "~2F"), safe="")


def path_ids(request: Request, *names: str) -> list[str]:
    """The ids of a page's path (as :func:`link` wrote them), each checked as the
    store checks ids.

    Raises:
        InvalidIdentifierError: an id the store would refuse (a 400 page).
    """
    out = []
    for name in names:
        value = str(request.path_params[name]).replace("~2F", "/").replace("~7E", "~")
        check_identifier(_ID_NAMES.get(name, name), value)
        out.append(value)
    return out


_ID_NAMES = {"app": "app_name", "user": "user_id", "session": "session_id", "scope": "session_id"}


def path_text(request: Request, name: str) -> str:
    """A path part that is not an id (an artifact's filename), as :func:`link` wrote
    it."""
    return str(request.path_params[name]).replace("~2F", "/").replace("~7E", "~")


def link(request: Request, *parts: str, **query: Any) -> str:
    """The URL of a page of this app, however it is mounted: ``parts`` as path
    segments (:func:`_segment`), ``query`` (``None`` values left out) as the query
    string."""
    base = request.scope.get("root_path", "").rstrip("/")
    path = "/".join(_segment(p) for p in parts)
    url = f"{base}/{path}"
    params = {k: v for k, v in query.items() if v is not None and v is not False}
    return f"{url}?{urlencode(params)}" if params else url


def encode_cursor(key: Any) -> str:
    """A page's last key as an opaque cursor (URL-safe)."""
    raw = json.dumps(key, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str | None, shape: tuple[type, ...]) -> Any:
    """The key of a cursor of :func:`encode_cursor` (``None`` for none), checked to be
    a list of values of ``shape`` (a single value when ``shape`` has one type).

    Raises:
        InvalidArgumentError: not a cursor this app made.
    """
    if cursor is None or cursor == "":
        return None
    try:
        if len(cursor) > 4096:
            raise ValueError("too long")
        key = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        values = key if len(shape) > 1 else [key]
        if not isinstance(values, list) or len(values) != len(shape):
            raise ValueError("wrong shape")
        for value, kind in zip(values, shape, strict=True):
            if kind is float and isinstance(value, int) and not isinstance(value, bool):
                continue
            if not isinstance(value, kind) or isinstance(value, bool):
                raise ValueError("wrong type")
            _check_storable(value)
        return tuple(values) if len(shape) > 1 else values[0]
    except (ValueError, TypeError, binascii.Error, UnicodeDecodeError) as error:
        raise InvalidArgumentError(f"not a page cursor of this inspector: {error}") from None


def _check_storable(value: Any) -> None:
    """Raises ValueError for a cursor value no database takes as a parameter: an
    integer beyond 64 bits, NaN or an infinity, a text with NUL or a lone surrogate."""
    if isinstance(value, int) and not -(2**63) <= value < 2**63:
        raise ValueError("number out of range")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("not a finite number")
    if isinstance(value, str):
        if "\x00" in value:
            raise ValueError("NUL in text")
        value.encode()  # UnicodeEncodeError (a ValueError) for a lone surrogate


def environment() -> Environment:
    """The pages' Jinja environment: templates of the package, everything escaped."""
    env = Environment(
        loader=FileSystemLoader(_FOLDER / "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(when=when, shown=shown, marked=marked, iso=iso)
    env.policies["json.dumps_kwargs"] = {"sort_keys": True, "ensure_ascii": False}
    env.globals.update(PAGE_SIZE=PAGE_SIZE, USER_SCOPE=USER_SCOPE)
    return env


def render(
    request: Request, env: Environment, template: str, status: int = 200, **values: Any
) -> HTMLResponse:
    """A page: ``template`` with ``values``, the request, ``link`` and the CSRF token."""
    context = request.state.context
    values.setdefault("title", "")
    html = env.get_template(template).render(
        request=request,
        link=lambda *parts, **query: link(request, *parts, **query),
        csrf=request.state.csrf,
        write=context.write,
        operator=context.operator,
        **values,
    )
    response = HTMLResponse(html, status_code=status)
    if request.state.csrf_new:
        response.set_cookie(
            "adk_sqlstore_inspector_csrf",
            request.state.csrf,
            httponly=True,
            samesite="strict",
            path=request.scope.get("root_path", "") or "/",
        )
    return response
