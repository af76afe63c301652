"""OpenTelemetry spans for the store's public calls (when ``opentelemetry-api`` is
installed; ADK installs it).

Every public call of :class:`~adk_sqlstore.SqlSessionService` and
:class:`~adk_sqlstore.SqlMemoryService` (and so of the ADK classes, which call them)
makes one span, named ``adk_sqlstore.<operation>``, kind CLIENT, in the current
context: under ADK's own spans (``invocation``, ``call_llm``, ``execute_tool``) when
ADK's Runner makes the call. Attributes, following OpenTelemetry's database semantic
conventions where they have a name:

- ``db.system.name`` (and the older ``db.system``): ``postgresql``, ``mysql`` (MySQL
  and MariaDB alike: which one is known only once a connection is made, and every
  span of a store must say the same) or ``sqlite``;
- ``db.operation.name``: the method, e.g. ``append_event``, ``search_memory``;
- ``db.response.returned_rows``: what the call returned or wrote (events loaded,
  sessions listed, memories found or stored, rows deleted);
- ``adk_sqlstore.app_name``;
- ``enduser.id`` (the user_id) and ``adk_sqlstore.session_id`` only after
  :func:`record_identifiers` ``(True)``: user ids and content stay out of telemetry
  unless the application opts in. Text (state values, messages, queries) is never
  recorded;
- ``adk_sqlstore.generation.retries``: model calls of memory generation made again
  after a transient failure (HTTP 429 or 5xx, a reset connection), when there were
  any (:func:`add_count`).

A failing call's span has status ERROR, ``error.type`` (the exception's class, e.g.
``adk_sqlstore.errors.StaleSessionError``) and an ``exception`` event with
``exception.type`` only: exception messages name sessions, users, keys and sometimes
the values refused, so they are never recorded. A public call made by another
(``ingest_session`` loading the session and ingesting it; the ADK classes calling the
core ones) adds no span of its own: one call, one span. The duration is the span's
own. Without ``opentelemetry-api`` nothing is recorded and nothing is imported; while
no tracer provider is set (OpenTelemetry's default, whose spans record nothing), no
span is started at all (the call costs no span's work), until one is.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine
from contextvars import ContextVar
from typing import Any, Concatenate, ParamSpec, TypeVar

try:
    from opentelemetry import trace
except ImportError:  # pragma: no cover - exercised without opentelemetry-api
    trace = None  # type: ignore[assignment]

__all__ = [
    "add_count",
    "counted",
    "events_of",
    "found",
    "listed",
    "one",
    "record_identifiers",
    "traced",
]

P = ParamSpec("P")
S = TypeVar("S")
T = TypeVar("T")

_tracer = trace.get_tracer("adk_sqlstore") if trace is not None else None
_record_identifiers = False
# Set while a traced call runs, so that the public calls it makes add no spans.
_in_call: ContextVar[bool] = ContextVar("adk_sqlstore_in_call", default=False)
# The span of the traced call running, with the counts add_count gave it.
_counted: ContextVar[tuple[Any, dict[str, int]] | None] = ContextVar(
    "adk_sqlstore_counted", default=None
)


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
            # A public call made by a traced one: no span of its own; and none while
            # spans would record nothing.
            if _in_call.get() or not _recording():
                return await method(self, *args, **kwargs)
            outer = _in_call.set(True)
            try:
                with _tracer.start_as_current_span(
                    f"adk_sqlstore.{operation}",
                    kind=trace.SpanKind.CLIENT,
                    record_exception=False,  # the message may name users or values
                    set_status_on_exception=False,
                ) as span:
                    _describe(span, operation, self, args, kwargs)
                    counts = _counted.set((span, {}))
                    try:
                        result = await method(self, *args, **kwargs)
                    except BaseException as exc:
                        _record_failure(span, exc)
                        raise
                    finally:
                        _counted.reset(counts)
                    count = rows(result) if rows is not None else None
                    if count is not None:
                        span.set_attribute("db.response.returned_rows", count)
                    return result
            finally:
                _in_call.reset(outer)

        return wrapper

    return decorate


def add_count(attribute: str, count: int = 1) -> None:
    """Add ``count`` to the integer ``attribute`` of the span of the public call
    running (e.g. ``adk_sqlstore.generation.retries``); nothing outside a traced call,
    or while no tracer provider is set."""
    counted = _counted.get()
    if counted is None:
        return
    span, counts = counted
    counts[attribute] = counts.get(attribute, 0) + count
    span.set_attribute(attribute, counts[attribute])


def _recording() -> bool:
    """Whether a tracer provider is set (else OpenTelemetry's proxy or no-op provider
    makes spans that record nothing)."""
    provider = trace.get_tracer_provider()
    return not isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider)


def _describe(span: Any, operation: str, service: Any, args: Any, kwargs: Any) -> None:
    """Set the attributes known before the call: the database, the operation, the app
    and (when :func:`record_identifiers` is on) the user and session ids, which come
    as keywords or on a session passed first."""
    system = service.engine.dialect.name
    span.set_attribute("db.system.name", system)
    span.set_attribute("db.system", system)
    span.set_attribute("db.operation.name", operation)
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


def _record_failure(span: Any, exc: BaseException) -> None:
    """Status ERROR and the exception's type (``error.type``, an ``exception`` event),
    never its message."""
    error_type = f"{type(exc).__module__}.{type(exc).__qualname__}"
    span.set_attribute("error.type", error_type)
    span.add_event("exception", {"exception.type": error_type})
    span.set_status(trace.Status(trace.StatusCode.ERROR, type(exc).__name__))


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
