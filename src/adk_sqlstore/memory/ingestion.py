"""Ingestion: turning a session into memories, and the triggers that do it.

Ingestion is explicit, as in the design notes (000): "the Runner ... never calls
addSessionToMemory itself". Re-ingestion is an upsert keyed by session id and event
id, in one transaction: "ingesting the same session twice yields one copy". The
triggers: the explicit end of a conversation
(:meth:`~adk_sqlstore.SqlMemoryService.ingest_session`), the idle timeout
(:meth:`~adk_sqlstore.SqlMemoryService.ingest_idle_sessions`, e.g. from cron) and a
checkpoint every N appended events (:class:`IngestEvery`).
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncConnection

from ..errors import AdkSqlStoreError, DatabaseUnavailableError, SessionNotFoundError
from ..generation.generator import GenerationReport
from ..models import EventLike, SessionLike
from ..sessions.codec import SessionCodec, Token
from ..sessions.reading import SessionKey, read_session, session_key
from ..sql import memory as sql
from ..sql.ingest import SessionMemories, one_round_trip, replace_session_memories
from ..sql.sessions import lock_session
from ..sql.users import lock_user
from ..store import Store, retry_conflicts
from ..validation import check_count, check_identifier, check_session
from .hybrid import HybridMemory
from .rows import MemoryRows
from .vectors import Prepared

__all__ = [
    "IngestEvery",
    "IngestReport",
    "MemoryCheckpoint",
    "SessionIngester",
    "idle_sessions",
    "ingest_each",
    "ingest_session",
]

logger = logging.getLogger(__name__)


@dataclass
class IngestReport:
    """What an ingestion did.

    Attributes:
        sessions: sessions ingested.
        events: events stored or refreshed in memory (those carrying text).
        deleted: memories removed because their event left the session.
        failed: sessions that could not be ingested (see ``errors``).
        errors: one line per failed session: its address and the error.
        generation: what memory generation did after the ingestion (``None``
            without a generator).
    """

    sessions: int = 0
    events: int = 0
    deleted: int = 0
    failed: int = 0
    errors: list[str] = field(default_factory=list)
    generation: GenerationReport | None = None

    def add(self, other: IngestReport) -> None:
        """Add another report's counts and errors to this one."""
        self.sessions += other.sessions
        self.events += other.events
        self.deleted += other.deleted
        self.failed += other.failed
        self.errors.extend(other.errors)
        if other.generation is not None:
            if self.generation is None:
                self.generation = GenerationReport()
            self.generation.add(other.generation)


async def ingest_session(
    store: Store,
    codec: SessionCodec[Any, Any, Any],
    rows: MemoryRows,
    session: SessionLike,
    hybrid: HybridMemory | None = None,
) -> IngestReport:
    """Replace the memories of ``session`` with one per event carrying text, in one
    transaction under the user lock (run again whole if it loses a race); see
    :meth:`adk_sqlstore.SqlMemoryService.add_session_to_memory`.
    Without ``hybrid`` that transaction is one round trip
    (:func:`~adk_sqlstore.sql.ingest.replace_session_memories`) unless the session
    changed since it was loaded; with ``hybrid``, the memories are embedded before the
    transaction opens."""
    check_session(session)
    key = session_key(session.app_name, session.user_id, session.id)
    token = codec.models.token_of(session)
    events: list[EventLike] = list(session.events)
    if token.revision is not None and len(events) < token.revision:  # not all loaded
        async with store.autocommit() as conn:
            whole = await read_session(conn, key, codec)
        if whole is not None:
            token, events = codec.models.token_of(whole), list(whole.events)
    now = time.time()
    memory_rows = rows.from_events(**key, events=events, custom_metadata=None, now=now)
    prepared = None if hybrid is None else await hybrid.prepare(memory_rows)
    ingestion = _Ingestion(store, codec, rows, hybrid, key, token, memory_rows, now)
    return await retry_conflicts(lambda: ingestion.write(prepared))


@dataclass
class _Ingestion:
    """One session's ingestion, as it is written (and written again after a lost
    race): its memory rows, from the session object given."""

    store: Store
    codec: SessionCodec[Any, Any, Any]
    rows: MemoryRows
    hybrid: HybridMemory | None
    key: SessionKey
    token: Token
    memory_rows: list[dict[str, Any]]
    now: float

    async def write(self, prepared: Prepared | None) -> IngestReport:
        """The round trip where it can be, else the transaction."""
        key, token = self.key, self.token
        if self.hybrid is None and one_round_trip(
            self.store.engine, len(self.memory_rows), replacing=True
        ):
            write = SessionMemories(
                **key,
                incarnation=token.incarnation,
                revision=token.revision,
                rows=self.memory_rows,
                now=self.now,
            )
            async with self.store.autocommit() as conn:
                deleted = await replace_session_memories(conn, write)
            if deleted is not None:
                return IngestReport(sessions=1, events=len(self.memory_rows), deleted=deleted)
            # the session changed or went since it was loaded (or the user was being
            # forgotten): as below, in a transaction
        return await self._transaction(prepared)

    async def _transaction(self, prepared: Prepared | None) -> IngestReport:
        key, token = self.key, self.token
        revision, memory_rows = token.revision, self.memory_rows
        async with self.store.transaction(write=True) as conn:
            await lock_user(
                conn,
                app_name=key["app_name"],
                user_id=key["user_id"],
                mode="exclusive",
                create=token.incarnation is None,
                now=self.now,
            )
            if token.incarnation is not None:
                stored = await lock_session(conn, **key)
                if stored is None or stored[0] != token.incarnation:
                    raise SessionNotFoundError(
                        f"session {key['session_id']!r} of app {key['app_name']!r} and user"
                        f" {key['user_id']!r} was deleted since it was loaded; its memories"
                        " are not written"
                    )
                if stored[1] != revision:  # the object is stale: ingest what is stored
                    whole = await read_session(conn, key, self.codec)
                    assert whole is not None  # the row is locked
                    revision = self.codec.models.token_of(whole).revision
                    memory_rows = self.rows.from_events(
                        **key, events=whole.events, custom_metadata=None, now=self.now
                    )
            deleted = await _replace_memories(conn, key, memory_rows)
            if self.hybrid is not None:
                await self.hybrid.write(conn, prepared, key["app_name"], key["user_id"])
            await sql.record_ingestion(
                conn, **key, revision=revision, event_count=len(memory_rows), now=self.now
            )
        return IngestReport(sessions=1, events=len(memory_rows), deleted=deleted)


async def _replace_memories(
    conn: AsyncConnection, key: SessionKey, rows: list[dict[str, Any]]
) -> int:
    """Upsert ``rows`` as the session's memories and delete its others; how many were
    deleted."""
    keep = {row["id"] for row in rows}
    existing = await sql.memory_ids_of_session(conn, **key)
    gone = [pk for mid, pk in existing.items() if mid not in keep]
    deleted = await sql.delete_memories_by_pk(
        conn, app_name=key["app_name"], user_id=key["user_id"], pks=gone
    )
    await sql.upsert_memories(conn, rows)
    return deleted


async def idle_sessions(
    store: Store, *, cutoff: float, app_name: str | None, batch_size: int = 500
) -> AsyncIterator[tuple[str, str, str]]:
    """(app_name, user_id, session_id) of the sessions last updated before ``cutoff``
    (seconds since the epoch) whose current revision memory does not hold, read in
    batches (memory use does not grow with their number)."""
    if app_name is not None:
        check_identifier("app_name", app_name)
    after: tuple[str, str, str] | None = None
    while True:
        async with store.transaction(write=False) as conn:
            batch = await sql.idle_sessions(
                conn, cutoff=cutoff, app_name=app_name, after=after, limit=batch_size
            )
        for key in batch:
            yield key
        if len(batch) < batch_size:
            return
        after = batch[-1]


async def ingest_each(
    keys: AsyncIterator[tuple[str, str, str]],
    ingest: Callable[[str, str, str], Awaitable[IngestReport]],
    on_session: Callable[[IngestReport], None] | None,
) -> IngestReport:
    """Ingest each session of ``keys``, each in its own transaction; one that cannot be
    (e.g. it holds data that no longer reads back) is counted in ``failed``, logged,
    and skipped. An unreachable database still raises
    :class:`~adk_sqlstore.errors.DatabaseUnavailableError`."""
    total = IngestReport()
    async for app, user, session_id in keys:
        try:
            report = await ingest(app, user, session_id)
        except DatabaseUnavailableError:
            raise
        except (AdkSqlStoreError, ValidationError, ValueError) as exc:
            logger.warning(
                "memory ingestion of session %r (%s/%s) failed: %s", session_id, app, user, exc
            )
            report = IngestReport(
                failed=1, errors=[f"{app}/{user}/{session_id}: {type(exc).__name__}: {exc}"]
            )
        total.add(report)
        if on_session is not None:
            on_session(report)
    return total


class SessionIngester(Protocol):
    """What :class:`IngestEvery` calls: a memory service."""

    async def ingest_session(self, *, app_name: str, user_id: str, session_id: str) -> Any:
        """Reload the session whole and ingest it."""


class IngestEvery:
    """The checkpoint trigger: ingest a session every ``every`` appended events.

    Pass it to a session service (``after_append=IngestEvery(memory, every=20)``).
    After each append that brings the session's revision to a multiple of ``every``,
    the session is reloaded whole and ingested (the append has already committed; a
    failed ingestion is logged, and the idle job catches up later).

    Args:
        memory: the memory service to ingest with.
        every: appended events between ingestions (1 or more).

    Raises:
        InvalidArgumentError: ``every`` is not a whole number of 1 or more.
    """

    def __init__(self, memory: SessionIngester, *, every: int) -> None:
        check_count("every", every, least=1)
        self.memory = memory
        self.every = every

    async def after_append(self, session: SessionLike, revision: int) -> None:
        """Called by the session service after a committed append."""
        if revision % self.every:
            return
        try:
            await self.memory.ingest_session(
                app_name=session.app_name, user_id=session.user_id, session_id=session.id
            )
        except Exception:
            logger.warning(
                "memory checkpoint of session %r failed; the idle job will retry",
                session.id,
                exc_info=True,
            )


class MemoryCheckpoint(IngestEvery):
    """The former name of :class:`IngestEvery` (deprecated)."""

    def __init__(self, memory: SessionIngester, *, every: int) -> None:
        warnings.warn(
            "MemoryCheckpoint is deprecated: use IngestEvery", DeprecationWarning, stacklevel=2
        )
        super().__init__(memory, every=every)
