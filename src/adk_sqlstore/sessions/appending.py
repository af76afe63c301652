"""Appending an event: ADK's append semantics, one transaction, optimistic concurrency.

Follows ``google.adk.sessions.BaseSessionService.append_event``: a partial event is not
stored; ``temp:`` keys reach the session object only; the rest of the delta is split by
scope and written key by key with the event, in one transaction (one round trip:
:mod:`adk_sqlstore.sql.hot_paths`), guarded by the revision the caller loaded. The
caller's session object changes only after the commit. An event the session holds
already, equal by value, is a re-delivery (a retry after a lost reply): it is returned
and nothing changes, as in ADK's ``InMemorySessionService``; another event under its id
is :class:`~adk_sqlstore.errors.InvalidEventError`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol

from sqlalchemy.ext.asyncio import AsyncConnection

from ..errors import InvalidEventError, SessionNotFoundError, StaleSessionError
from ..models import SessionLike
from ..sql.citus import on_citus
from ..sql.hot_paths import AppendRow, append_row
from ..sql.sessions import load_event_data, load_session
from ..state import drop_temp, split_delta
from ..store import Store, finish_before_cancel
from ..validation import check_session, check_state_delta
from .codec import EventT, ListT, SessionCodec, SessionT, Token
from .reading import SessionKey, session_key

__all__ = ["AfterAppend", "Appender"]


class AfterAppend(Protocol):
    """Called after each committed append (e.g. :class:`adk_sqlstore.IngestEvery`)."""

    async def after_append(self, session: SessionLike, revision: int) -> None:
        """``session`` now holds the appended event; ``revision`` is its new revision."""


@dataclass
class _AppendLock:
    """The in-process lock of one session object and how many tasks use it."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0


class Appender(Generic[SessionT, EventT, ListT]):
    """Appends events for a session service (see the module docstring)."""

    def __init__(
        self,
        store: Store,
        codec: SessionCodec[SessionT, EventT, ListT],
        after_append: AfterAppend | None = None,
    ) -> None:
        self._store = store
        self._codec = codec
        self._after_append = after_append
        self._locks: dict[int, _AppendLock] = {}

    async def append(self, session: SessionT, event: EventT | Mapping[str, Any]) -> EventT:
        """Store ``event`` after ``session``'s revision, then update ``session``; see
        :meth:`adk_sqlstore.SqlSessionService.append_event`."""
        check_session(session)
        checked = self._codec.coerce_event(event)
        if checked.partial:
            return checked
        async with self._appending(session):
            return await finish_before_cancel(self._append(session, checked))

    @asynccontextmanager
    async def _appending(self, session: SessionT) -> AsyncIterator[None]:
        """Hold the in-process lock of this session object (created on first use,
        dropped when no task holds or awaits it): appends through one object take
        turns, each on the object as the previous one left it."""
        entry = self._locks.setdefault(id(session), _AppendLock())
        entry.users += 1
        try:
            async with entry.lock:
                yield
        finally:
            entry.users -= 1
            if not entry.users:
                del self._locks[id(session)]

    async def _append(self, session: SessionT, event: EventT) -> EventT:
        delta: dict[str, Any] = dict(check_state_delta(event.actions.state_delta))
        stored_delta = drop_temp(delta)
        stored_event = event
        if len(stored_delta) != len(delta):
            actions = event.actions.model_copy(update={"state_delta": stored_delta})
            stored_event = event.model_copy(update={"actions": actions})
        token = self._codec.models.token_of(session)
        key = session_key(session.app_name, session.user_id, session.id)
        row = self._row(key, session, stored_event, stored_delta, token)

        revision: int | None
        try:
            revision = await self._write(row, key, token)
        except (_EventIdTaken, StaleSessionError) as exc:
            stored = await self._stored_as(key, row)
            if stored is None and isinstance(exc, StaleSessionError):
                raise
            if not stored:  # another event holds the id (current or stale copy alike)
                raise InvalidEventError(_taken(row, key)) from None
            revision = None  # delivered before: a retry, or through another copy
        # Committed (or delivered before): the caller's event as an append leaves it.
        if len(stored_delta) != len(delta):
            event.actions.state_delta = stored_delta
        if revision is None:
            return event  # nothing else changes, the session object included
        models = self._codec.models
        models.apply_append(session, event, delta)
        models.set_token(session, Token(revision, token.incarnation))
        if self._after_append is not None:
            await self._after_append.after_append(session, revision)
        return event

    async def _write(self, row: AppendRow, key: SessionKey, token: Token) -> int:
        """The append's transaction; the session's new revision.

        Raises:
            _EventIdTaken: the session holds an event with this id.
            StaleSessionError, SessionNotFoundError: as ``append_event`` says.
        """

        def duplicate() -> InvalidEventError:
            return _EventIdTaken(_taken(row, key))

        # On Citus an app: key is written on every node: the call of the append function
        # then runs on the coordinator, in a transaction, rather than delegated to the
        # user's worker (which would open one to every node itself: 3x slower).
        opened = (
            self._store.transaction(write=True, on_duplicate=duplicate)
            if row.app_state and on_citus(self._store.engine)
            else self._store.autocommit(on_duplicate=duplicate)
        )
        async with opened as conn:
            revision = await append_row(conn, row)
            if revision is None:
                raise await _stale_or_missing(conn, key, row.expected_revision, token.incarnation)
        return revision

    async def _stored_as(self, key: SessionKey, row: AppendRow) -> bool | None:
        """Whether the session's event with the appended event's id equals it, as
        stored (``None``: the session holds no such event). Values are compared, not
        JSON text: key order may differ, and NaN is stored as ADK stores it."""
        async with self._store.autocommit() as conn:
            stored = await load_event_data(conn, **key, event_id=row.event_id)
        if stored is None:
            return None
        before, now = self._codec.decode_events([stored, row.data])
        return bool(before == now)

    def _row(
        self,
        key: SessionKey,
        session: SessionT,
        event: EventT,
        delta: dict[str, Any],
        token: Token,
    ) -> AppendRow:
        """What the append writes (checked and encoded: nothing is written on error)."""
        data = self._codec.encode_event(event)
        state = self._codec.encode_state(split_delta(delta))
        # An object this store did not make is as new as the events it holds.
        expected = token.revision if token.revision is not None else len(session.events)
        return AppendRow(
            **key,
            expected_revision=expected,
            expected_incarnation=token.incarnation,
            update_time=float(event.timestamp),
            event_id=event.id,
            invocation_id=event.invocation_id or "",
            author=event.author or "",
            timestamp=float(event.timestamp),
            data=data,
            session_state=sorted(state.session.items()),
            user_state=sorted(state.user.items()),
            app_state=sorted(state.app.items()),
            now=time.time(),
        )


def _taken(row: AppendRow, key: SessionKey) -> str:
    return (
        f"event id {row.event_id!r} already exists in session {key['session_id']!r} with"
        " other content; an event is stored once"
    )


class _EventIdTaken(InvalidEventError):
    """The session holds an event with the appended event's id (an equal one is a
    re-delivery, not an error)."""


async def _stale_or_missing(
    conn: AsyncConnection, key: SessionKey, expected: int, incarnation: str | None
) -> Exception:
    """The error for an append whose revision guard matched no row."""
    row = await load_session(conn, **key)
    if row is None:
        return SessionNotFoundError(
            f"session {key['session_id']!r} of app {key['app_name']!r} and user"
            f" {key['user_id']!r} does not exist (deleted?)"
        )
    if incarnation is not None and row.incarnation != incarnation:
        why = "was deleted and created again since it was loaded"
    else:
        why = (
            f"was modified in storage since it was loaded (loaded revision {expected},"
            f" stored revision {row.revision})"
        )
    return StaleSessionError(
        f"session {key['session_id']!r} {why}; reload it with get_session and retry",
        expected_revision=expected,
        stored_revision=row.revision,
    )
