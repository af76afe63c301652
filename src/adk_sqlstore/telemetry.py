"""OpenTelemetry spans for the store's public calls (when ``opentelemetry-api`` is
installed; ADK installs it).

Every public call of :class:`~adk_sqlstore.SqlSessionService` and
:class:`~adk_sqlstore.SqlMemoryService` (and so of the ADK classes, which call them)
makes one span, named ``adk_sqlstore.<operation>``, kind CLIENT, in the current
context: under ADK's own spans (``invocation``, ``call_llm``, ``execute_tool``) when
ADK's Runner makes the call. Attributes, following OpenTelemetry's database semantic
conventions where they have a name:

- ``db.system.name`` (and the older ``db.system``): ``postgresql`` or ``sqlite``;
- ``db.operation.name``: the method, e.g. ``append_event``, ``search_memory``;
- ``db.response.returned_rows``: what the call returned or wrote (events loaded,
  sessions listed, memories found or stored, rows deleted);
- ``adk_sqlstore.app_name``;
- ``enduser.id`` (the user_id) and ``adk_sqlstore.session_id`` only after
  :func:`record_identifiers` ``(True)``: user ids and content stay out of telemetry
  unless the application opts in. Text (state values, messages, queries) is never
  recorded.

A failing call's span records the exception and has status ERROR. The duration is the
span's own. Without ``opentelemetry-api`` nothing is recorded and nothing is imported.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, TypeVar

try:
    from opentelemetry import trace
except ImportError:  # pragma: no cover - exercised without opentelemetry-api
    trace = None  # type: ignore[assignment]

__all__ = ["record_identifiers", "traced"]

P = ParamSpec("P")
S = TypeVar("S")
T = TypeVar("T")

_tracer = trace.get_tracer("adk_sqlstore") if trace is not None else None
_record_identifiers = False


def record_identifiers(enabled: bool) -> None:
    """Whether spans carry the user id (``enduser.id``) and session id; off by default,
    because a user id is personal data. Applies to every service of the process."""
    global _record_identifiers
    _record_identifiers = bool(enabled)


def traced(
    operation: str, rows: Callable[[Any], int | None] | None = None
) -> Callable[
    [Callable[Concatenate[S, P], Coroutine[Any, Any, T]]],
    Callable[Concatenate[S, P], Coroutine[Any, Any, T]],
]:
    """Decorate a public async method of a service (``self`` has ``engine``) so that each
    call makes one span; ``rows`` turns the result into ``db.response.returned_rows``."""

    def decorate(
        method: Callable[Concatenate[S, P], Coroutine[Any, Any, T]],
    ) -> Callable[Concatenate[S, P], Coroutine[Any, Any, T]]:
        if _tracer is None:
            return method

        @functools.wraps(method)
        async def wrapper(self: S, /, *args: P.args, **kwargs: P.kwargs) -> T:
            assert _tracer is not None
            system = getattr(self, "engine").dialect.name  # noqa: B009 - S is any service
            with _tracer.start_as_current_span(
                f"adk_sqlstore.{operation}", kind=trace.SpanKind.CLIENT
            ) as span:
                span.set_attribute("db.system.name", system)
                span.set_attribute("db.system", system)
                span.set_attribute("db.operation.name", operation)
                # Identifiers come as keywords, or on a session passed first.
                first = args[0] if args else None
                app_name = kwargs.get("app_name", getattr(first, "app_name", None))
                if isinstance(app_name, str):
                    span.set_attribute("adk_sqlstore.app_name", app_name)
                if _record_identifiers:
                    user_id = kwargs.get("user_id", getattr(first, "user_id", None))
                    session_id = kwargs.get("session_id", getattr(first, "id", None))
                    if isinstance(user_id, str):
                        span.set_attribute("enduser.id", user_id)
                    if isinstance(session_id, str):
                        span.set_attribute("adk_sqlstore.session_id", session_id)
                result = await method(self, *args, **kwargs)
                count = rows(result) if rows is not None else None
                if count is not None:
                    span.set_attribute("db.response.returned_rows", count)
                return result

        return wrapper

    return decorate


def events_of(session: Any) -> int | None:
    """Rows of a loaded session: its events (``None`` when absent)."""
    return None if session is None else len(session.events)


def listed(response: Any) -> int:
    return len(response.sessions)


def found(response: Any) -> int:
    return len(response.memories)


def counted(value: Any) -> int | None:
    """An int result as it is; a dict of counts (forget_user) summed; a report's
    ``sessions`` or ``events``."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, dict):
        return sum(v for v in value.values() if isinstance(v, int))
    if isinstance(value, list):
        return len(value)
    for name in ("events", "sessions"):
        if isinstance(getattr(value, name, None), int):
            return int(getattr(value, name))
    return None


def one(_: Any) -> int:
    return 1
