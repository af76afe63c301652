"""Checks applied before anything is written: identifiers and JSON state values.

A state value is stored as JSON text and must come back exactly (``==`` and the same
types). Only JSON's own types pass: ``None``, ``bool``, ``int`` (any size), finite
``float``, ``str``, ``list`` and ``dict`` with ``str`` keys. NaN and infinities,
tuples, sets, bytes, datetimes, pydantic models and other objects are rejected with
:class:`~adk_sqlstore.errors.InvalidStateError` naming the state key, as are strings
with lone surrogates (not encodable as UTF-8) and nesting deeper than
:data:`MAX_JSON_DEPTH` (100) levels. Convert such values yourself (``model_dump()``, ISO
strings) before putting them in state. State keys are non-empty strings of at most
:data:`MAX_STATE_KEY_BYTES` (1,024) UTF-8 bytes; identifiers (app_name, user_id,
session and event ids) at most :data:`MAX_IDENTIFIER_BYTES` (255).
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from .errors import (
    InvalidArgumentError,
    InvalidEventError,
    InvalidIdentifierError,
    InvalidStateError,
)

__all__ = [
    "DEFAULT_MAX_EVENT_BYTES",
    "DEFAULT_MAX_STATE_VALUE_BYTES",
    "MAX_IDENTIFIER_BYTES",
    "MAX_JSON_DEPTH",
    "MAX_ROWS",
    "MAX_STATE_KEY_BYTES",
    "check_age",
    "check_argument",
    "check_count",
    "check_event_fields",
    "check_identifier",
    "check_json_value",
    "check_not_called_by_adk",
    "check_session",
    "check_size_limit",
    "check_state_delta",
    "check_state_key",
    "check_text_field",
    "check_timestamp",
    "dump_json_value",
    "json_size",
]

DEFAULT_MAX_EVENT_BYTES = 8 * 1024 * 1024
"""Largest event accepted by default, in UTF-8 bytes of its stored JSON (8 MiB: room
for an inline image or document part; ``max_event_bytes`` changes it)."""

DEFAULT_MAX_STATE_VALUE_BYTES = 1024 * 1024
"""Largest state value accepted by default, in UTF-8 bytes of its JSON (1 MiB: state is
read on every turn; ``max_state_value_bytes`` changes it)."""

MAX_IDENTIFIER_BYTES = 255
"""Longest app_name, user_id, session id or event id, in UTF-8 bytes."""

MAX_STATE_KEY_BYTES = 1024
"""Longest state key, in UTF-8 bytes of the key as given (prefix included). Keys are
part of the tables' primary keys; PostgreSQL's btree indexes take at most about 2,700
bytes per row, so longer keys would fail there and not on SQLite: refused on both."""

MAX_ROWS = 2**62
"""The most rows a LIMIT is given: every database takes it (a signed 64-bit integer,
with room for the one more row a page reads); a bigger ``limit`` means all rows."""

MAX_JSON_DEPTH = 100
"""Deepest nesting of lists and dicts accepted in a state value (a list in a dict is two
levels)."""

MAX_INT_DIGITS = 4000
"""Most decimal digits of an integer in a state value (Python converts at most 4,300)."""
_MAX_INT_BITS = int(MAX_INT_DIGITS * 3.3219280948873626) - 1

MIN_TIMESTAMP = -62135596800.0
"""0001-01-01T00:00:00Z in seconds since the epoch: the earliest event timestamp."""
MAX_TIMESTAMP = 253402300799.0
"""9999-12-31T23:59:59Z: the latest event timestamp (a millisecond epoch is far beyond)."""


def check_identifier(kind: str, value: object) -> str:
    """Return ``value`` if it can be stored verbatim as an identifier.

    An identifier is a non-empty ``str`` of at most :data:`MAX_IDENTIFIER_BYTES`
    UTF-8 bytes without NUL characters or lone surrogates. Whitespace, path and SQL
    characters are allowed and stored as given.

    Raises:
        InvalidIdentifierError: naming ``kind`` (e.g. ``"user_id"``) and the reason.
    """
    if not isinstance(value, str):
        raise InvalidIdentifierError(f"{kind} must be a str, not {type(value).__name__}")
    if not value:
        raise InvalidIdentifierError(f"{kind} must not be empty")
    if "\x00" in value:
        raise InvalidIdentifierError(f"{kind} must not contain NUL (U+0000) characters")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise InvalidIdentifierError(
            f"{kind} contains a lone surrogate and cannot be encoded as UTF-8"
        ) from exc
    if size > MAX_IDENTIFIER_BYTES:
        raise InvalidIdentifierError(
            f"{kind} is {size} bytes long; the limit is {MAX_IDENTIFIER_BYTES} UTF-8 bytes"
        )
    return value


def _fail(key: str, what: str, kind: str = "state key") -> InvalidStateError:
    return InvalidStateError(f"{kind} {key!r}: {what}", key=key)


def _check_str(key: str, text: str, where: str, kind: str = "state key") -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise _fail(key, f"{where} contains a lone surrogate (not valid Unicode)", kind) from None


_SCOPE_PREFIXES = ("app:", "user:", "temp:")


def check_state_key(key: object) -> str:
    """Return ``key`` if it can be a state key: a ``str``, not empty (nor only a scope
    prefix such as ``"user:"``), without NUL or lone surrogates, of at most
    :data:`MAX_STATE_KEY_BYTES` UTF-8 bytes.

    Raises:
        InvalidStateError: naming the key (cut short when long) and the rule.
    """
    if not isinstance(key, str):
        raise InvalidStateError(f"state keys must be str, not {type(key).__name__}", key=repr(key))
    if not key:
        raise _fail(key, "the key is empty")
    if key in _SCOPE_PREFIXES:
        raise _fail(key, "the key is only a scope prefix: it names nothing")
    if "\x00" in key:
        raise _fail(key, "the key contains NUL (U+0000)")
    _check_str(key, key, "the key")
    size = json_size(key)
    if size > MAX_STATE_KEY_BYTES:
        shown = key[:40] + "..."
        raise InvalidStateError(
            f"state key {shown!r} is {size:,} bytes long; the limit is {MAX_STATE_KEY_BYTES:,}"
            " UTF-8 bytes (MAX_STATE_KEY_BYTES)",
            key=key,
        )
    return key


def check_json_value(key: str, value: Any, kind: str = "state key") -> None:
    """Raise :class:`InvalidStateError` naming ``key`` unless ``value`` is exact JSON.

    ``kind`` names what ``key`` is in the message (a state key, a metadata key).
    """
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if item is None or isinstance(item, bool):
            continue
        if isinstance(item, int):
            if item.bit_length() > _MAX_INT_BITS:
                raise _fail(key, f"an integer has more than {MAX_INT_DIGITS} digits", kind)
            continue
        if isinstance(item, float):
            if not math.isfinite(item):
                raise _fail(
                    key, f"{item!r} is not a JSON number (NaN and infinities are not)", kind
                )
            continue
        if isinstance(item, str):
            _check_str(key, item, "a string", kind)
            continue
        if isinstance(item, list | dict):
            if depth >= MAX_JSON_DEPTH:
                raise _fail(key, f"the value is nested deeper than {MAX_JSON_DEPTH} levels", kind)
            if isinstance(item, dict):
                for k, v in item.items():
                    if not isinstance(k, str):
                        raise _fail(
                            key,
                            f"a dict key {k!r} is a {type(k).__name__}; JSON object keys are"
                            " strings",
                            kind,
                        )
                    _check_str(key, k, "a dict key", kind)
                    stack.append((v, depth + 1))
            else:
                stack.extend((v, depth + 1) for v in item)
            continue
        raise _fail(
            key,
            f"a {type(item).__name__} is not JSON (use str, int, float, bool, None, list"
            " or dict with str keys; convert datetimes to ISO strings and models with"
            " model_dump())",
            kind,
        )


def check_text_field(kind: str, value: object) -> str:
    """Return ``value`` if it is a ``str`` storable as text: no NUL, no lone surrogate.

    Raises:
        InvalidEventError: naming ``kind``.
    """
    if not isinstance(value, str):
        raise InvalidEventError(f"{kind} must be a str, not {type(value).__name__}")
    if "\x00" in value:
        raise InvalidEventError(f"{kind} must not contain NUL (U+0000)")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidEventError(f"{kind} contains a lone surrogate") from None
    return value


def check_timestamp(kind: str, value: object) -> float:
    """Return ``value`` as a float if it is a finite time between the years 1 and 9999.

    Raises:
        InvalidEventError: naming ``kind`` (e.g. a millisecond epoch passed as seconds).
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidEventError(f"{kind} must be a number of seconds, not {type(value).__name__}")
    stamp = float(value)
    if not math.isfinite(stamp) or not MIN_TIMESTAMP <= stamp <= MAX_TIMESTAMP:
        raise InvalidEventError(
            f"{kind} {value!r} is not a time between the years 1 and 9999 in seconds since the"
            " epoch (milliseconds passed as seconds?)"
        )
    return stamp


def check_event_fields(event: Any) -> None:
    """Check the fields an event is stored and looked up by: ``id`` (an identifier),
    ``invocation_id`` and ``author`` (text) and ``timestamp``.

    Raises:
        InvalidIdentifierError, InvalidEventError: naming the field.
    """
    check_identifier("event id", event.id)
    check_text_field("event invocation_id", event.invocation_id or "")
    check_text_field("event author", event.author or "")
    check_timestamp("event timestamp", event.timestamp)


def check_state_delta(delta: object) -> Mapping[str, Any]:
    """Check a state delta (or initial state): a mapping whose every key follows
    :func:`check_state_key` (``temp:`` keys too, though they are never stored) and
    whose every value that is stored (all but ``temp:`` keys') is exact JSON.

    Returns:
        ``delta`` (``{}`` for ``None``).

    Raises:
        InvalidStateError: ``delta`` is not a mapping, or for the first key or value
            that cannot be stored exactly.
    """
    if delta is None:
        return {}
    if not isinstance(delta, Mapping):
        raise InvalidStateError(
            f"state must be a dict of keys to values, not {type(delta).__name__}", key=""
        )
    for key, value in delta.items():
        check_state_key(key)
        if not key.startswith("temp:"):
            check_json_value(key, value)
    return delta


def check_argument(kind: str, value: object, wanted: type | tuple[type, ...], what: str) -> Any:
    """``value`` if it is a ``wanted`` (never a bool where a number is wanted).

    Raises:
        InvalidArgumentError: naming ``kind`` and ``what`` it must be.
    """
    if not isinstance(value, wanted) or (isinstance(value, bool) and bool not in _tuple(wanted)):
        raise InvalidArgumentError(f"{kind} must be {what}, not {value!r:.80}")
    return value


def _tuple(wanted: type | tuple[type, ...]) -> tuple[type, ...]:
    return wanted if isinstance(wanted, tuple) else (wanted,)


def check_count(kind: str, value: object, *, least: int, most: int | None = None) -> int:
    """``value`` if it is a whole number from ``least`` to ``most``.

    Raises:
        InvalidArgumentError: naming ``kind``.
    """
    check_argument(kind, value, int, "a whole number")
    assert isinstance(value, int)
    if value < least or (most is not None and value > most):
        wanted = f"from {least:,} to {most:,}" if most is not None else f"{least:,} or more"
        raise InvalidArgumentError(f"{kind} must be a whole number {wanted}, not {value!r}")
    return value


def check_age(kind: str, value: object) -> float:
    """An age (a ``timedelta`` or seconds) as finite seconds of 0 or more.

    Raises:
        InvalidArgumentError: naming ``kind``.
    """
    seconds = value.total_seconds() if isinstance(value, timedelta) else value
    try:
        if isinstance(seconds, bool) or not isinstance(seconds, int | float):
            raise TypeError
        seconds = float(seconds)
    except (TypeError, OverflowError):
        seconds = math.nan
    if not 0 <= seconds < math.inf:
        raise InvalidArgumentError(
            f"{kind} must be a finite age (a timedelta, or seconds) of 0 or more, not {value!r}"
        )
    return seconds


def check_session(value: object) -> Any:
    """``value`` if it is a session object (of this store or ADK's): it has an app_name,
    a user_id, an id, events and state.

    Raises:
        InvalidArgumentError: it is not.
    """
    if not all(hasattr(value, name) for name in ("app_name", "user_id", "id", "events", "state")):
        raise InvalidArgumentError(
            f"session must be a Session (app_name, user_id, id, events, state), not"
            f" {type(value).__name__}"
        )
    return value


def json_size(text: str) -> int:
    """UTF-8 bytes of ``text`` (without encoding it when it is surely small)."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def check_size_limit(kind: str, limit: object) -> int:
    """``limit`` if it is a positive int, else ``ValueError`` naming ``kind``."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"{kind} must be a positive number of bytes, not {limit!r}")
    return limit


def dump_json_value(value: Any) -> str:
    """Encode a value already accepted by :func:`check_json_value` as compact JSON text.

    ``U+0000`` and other control characters are escaped, so the text is storable in a
    PostgreSQL ``text`` column; other characters are kept as they are.
    """
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def check_not_called_by_adk(service: str) -> None:
    """Refuse a call that comes straight from ADK (``google.adk``) into a core service:
    the core services return this library's models, and ADK's Runner needs its own
    (the classes of :mod:`adk_sqlstore.adk`, which call the core ones themselves).

    Raises:
        TypeError: naming the class ADK needs (``service`` is the core class's name).
    """
    frame = sys._getframe(1)
    while frame is not None:
        module = str(frame.f_globals.get("__name__", ""))
        if module.startswith("adk_sqlstore.adk."):
            return  # through the ADK classes
        if not module.startswith("adk_sqlstore."):
            break
        frame = frame.f_back  # type: ignore[assignment]
    if frame is not None and str(frame.f_globals.get("__name__", "")).startswith("google.adk."):
        raise TypeError(
            f"adk_sqlstore.{service} is the core service, which ADK cannot use: give ADK's"
            f" Runner the ADK class, from adk_sqlstore.adk import {service}"
        )
