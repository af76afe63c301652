"""``SqlMemoryService``: searchable long-term memory in the same database.

Follows ADK's ``BaseMemoryService`` (``add_session_to_memory``,
``add_events_to_memory``, ``add_memory``, ``search_memory``) and the write path of the
design notes (000, "Cross-Session Memory in ADK"):

* Ingestion is explicit: "the Runner ... never calls addSessionToMemory itself". Three
  triggers are provided: :meth:`SqlMemoryService.close_session` (explicit end),
  :meth:`SqlMemoryService.ingest_idle_sessions` (idle timeout, e.g. from cron) and
  :class:`MemoryCheckpoint` (every N appended events).
* Re-ingestion is an upsert keyed by session id and event id, in one transaction:
  "ingesting the same session twice yields one copy".
* "filter it at ingestion rather than at retrieval": the ingestion filter (card
  numbers masked by default) runs before anything reaches the memory table.
* "apply the app and user filter inside the query to the index, not after retrieving
  the top results": every search filters by ``(app_name, user_id)`` in its WHERE
  clause.

Search is BM25 over PostgreSQL full-text search (``tsvector``, GIN index) or SQLite
FTS5; any query term may match and results are ranked, ties going to the more recent
memory.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Self

from pydantic import BaseModel, ValidationError
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncEngine

from . import queries, telemetry
from .dialect import search_memories
from .errors import (
    AdkSqlStoreError,
    DatabaseUnavailableError,
    InvalidArgumentError,
    InvalidMemoryError,
    SessionNotFoundError,
)
from .models import Content, Event, MemoryEntry, Part, SearchMemoryResponse
from .redaction import Redactor, build_filter
from .sessions import SqlSessionService, write_completes
from .store import ClosedOnExit
from .text import indexed_text, search_scope, text_of, token_count, valid_unicode
from .validation import (
    check_age,
    check_argument,
    check_count,
    check_identifier,
    check_json_value,
    check_session,
    check_text_field,
    check_timestamp,
)

__all__ = ["IngestReport", "MemoryCheckpoint", "SqlMemoryService"]

logger = logging.getLogger(__name__)

_MEMORY_NAMESPACE = uuid.UUID("6f1c2d4e-8a9b-4c3d-9e2f-0a1b2c3d4e5f")


def memory_id(app_name: str, user_id: str, session_id: str | None, event_id: str) -> str:
    """The stable id of the memory made from one event (UUID5 of its address)."""
    return str(
        uuid.uuid5(
            _MEMORY_NAMESPACE, f"{app_name}\x00{user_id}\x00{session_id or ''}\x00{event_id}"
        )
    )


def _iso(timestamp: float) -> str:
    try:
        return datetime.fromtimestamp(timestamp, UTC).isoformat()
    except (OverflowError, OSError, ValueError):  # outside datetime's years 1-9999
        return str(timestamp)


def _epoch(value: str | None) -> float:
    """Seconds since the epoch from an ISO 8601 string (naive means UTC); now if None."""
    if not value:
        return time.time()
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except (ValueError, TypeError, AttributeError) as exc:
        raise InvalidMemoryError(f"memory timestamp {value!r} is not ISO 8601") from exc
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


def _as_models(items: object, model: type[Any], kind: str, plural: str) -> list[Any]:
    """``items`` as objects with ``model``'s attributes: ``model`` instances, objects of
    another class with the same fields (ADK's own), or dicts of them (validated).

    Raises:
        InvalidMemoryError: ``items`` is not a list, or naming the first item that is
            none of these.
    """
    if (
        isinstance(items, str | bytes | Mapping | BaseModel)
        or hasattr(items, "content")
        or not isinstance(items, Iterable)
    ):
        what = type(items).__name__ if items is not None else "None"
        raise InvalidMemoryError(f"{plural} must be a list of {plural}, not a {what}")
    converted = []
    for n, item in enumerate(items):
        if isinstance(item, Mapping):
            try:
                item = model.model_validate(item)
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(p) for p in first["loc"]) or kind
                raise InvalidMemoryError(
                    f"{kind} {n} is not a valid {model.__name__}: {where}: {first['msg']}"
                ) from None
        elif not hasattr(item, "content"):
            raise InvalidMemoryError(
                f"{kind} {n} is a {type(item).__name__}, not a {model.__name__} (or a dict of one)"
            )
        converted.append(item)
    return converted


def _check_metadata(custom_metadata: object) -> None:
    """Raise :class:`InvalidMemoryError` unless ``custom_metadata`` is ``None`` or a
    mapping."""
    if custom_metadata is not None and not isinstance(custom_metadata, Mapping):
        raise InvalidMemoryError(
            f"custom_metadata must be a dict, not {type(custom_metadata).__name__}"
        )


@dataclass
class IngestReport:
    """What an ingestion did.

    Attributes:
        sessions: sessions ingested.
        events: events stored or refreshed in memory (those carrying text).
        deleted: memories removed because their event left the session.
        failed: sessions that could not be ingested (see ``errors``).
        errors: one line per failed session: its address and the error.
    """

    sessions: int = 0
    events: int = 0
    deleted: int = 0
    failed: int = 0
    errors: list[str] = field(default_factory=list)


class SqlMemoryService(ClosedOnExit):
    """Long-term memory for ADK-style agents in PostgreSQL or SQLite.

    Create it with :meth:`from_url` or pass an engine (the same one the
    :class:`~adk_sqlstore.SqlSessionService` uses is fine; it is not closed here).

    Args:
        engine: an asyncio engine migrated to the current schema.
        redactors: extra ingestion filters applied after card masking: callables
            ``str -> str`` or regular expressions whose matches become ``[redacted]``.
        mask_card_numbers: mask Luhn-valid payment card numbers (default True).
        auto_migrate: as for :class:`~adk_sqlstore.SqlSessionService`.
        sessions: the session service used to reload sessions (by default one on
            ``engine``); its session model is the one :meth:`add_session_to_memory`
            understands.
    """

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        redactors: Iterable[Redactor] | None = None,
        mask_card_numbers: bool = True,
        auto_migrate: bool | None = None,
        sessions: SqlSessionService | None = None,
    ) -> None:
        if sessions is not None and sessions.engine is not engine:
            raise ValueError("sessions must run on the same engine as the memory service")
        self._sessions = sessions or SqlSessionService(engine, auto_migrate=auto_migrate)
        self._filter: Callable[[str], str] = build_filter(redactors, mask_cards=mask_card_numbers)
        self._owns_engine = False

    @classmethod
    def from_url(
        cls,
        url: str | URL | None = None,
        *,
        auto_migrate: bool | None = None,
        redactors: Iterable[Redactor] | None = None,
        mask_card_numbers: bool = True,
        **engine_kwargs: Any,
    ) -> Self:
        """Create a service with its own engine; the URL resolves as for
        :meth:`SqlSessionService.from_url`."""
        sessions = SqlSessionService.from_url(url, auto_migrate=auto_migrate, **engine_kwargs)
        service = cls(
            sessions.engine,
            redactors=redactors,
            mask_card_numbers=mask_card_numbers,
            sessions=sessions,
        )
        service._owns_engine = True
        return service

    @property
    def engine(self) -> AsyncEngine:
        """The engine this service runs on."""
        return self._sessions.engine

    @property
    def sessions(self) -> SqlSessionService:
        """A session service on the same engine (used to reload sessions)."""
        return self._sessions

    async def close(self) -> None:
        """Dispose of the engine if this service created it."""
        if self._owns_engine:
            await self._sessions.close()

    # -- building rows ------------------------------------------------------------

    def _row(
        self,
        *,
        app_name: str,
        user_id: str,
        memory_id: str,
        session_id: str | None,
        event_id: str | None,
        author: str | None,
        timestamp: float,
        text: str,
        role: str | None,
        custom_metadata: Mapping[str, Any] | None,
        now: float,
    ) -> dict[str, Any] | None:
        """A memory row from raw text, after the ingestion filter; None if no text.

        Raises:
            InvalidIdentifierError, InvalidEventError, InvalidStateError: an id, the
                author, the timestamp or the metadata cannot be stored.
        """
        check_identifier("memory id", memory_id)
        if event_id is not None:
            check_identifier("event id", event_id)
        if author is not None:
            check_text_field("memory author", author)
            author = self._filter(valid_unicode(author))  # it is stored and indexed too
        check_timestamp("memory timestamp", timestamp)
        metadata = dict(custom_metadata or {})
        check_json_value("custom_metadata", metadata, "memory field")
        filtered = self._filter(valid_unicode(text))
        if not filtered.strip():
            return None
        content = Content(role=role, parts=[Part(text=filtered)])
        indexed = indexed_text(author, filtered)
        return {
            "app_name": app_name,
            "user_id": user_id,
            "id": memory_id,
            "session_id": session_id,
            "event_id": event_id,
            "author": author,
            "timestamp": timestamp,
            "content": content.model_dump_json(exclude_none=True),
            "text": indexed,
            "token_count": token_count(indexed),
            "custom_metadata": json.dumps(metadata, ensure_ascii=False, allow_nan=False),
            "search_scope": search_scope(app_name, user_id),
            "update_time": now,
        }

    def _event_rows(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str | None,
        events: Iterable[Any],
        custom_metadata: Mapping[str, Any] | None,
        now: float,
    ) -> list[dict[str, Any]]:
        rows: dict[str, dict[str, Any]] = {}
        for event in events:
            if getattr(event, "partial", None):
                continue
            content = getattr(event, "content", None)
            mid = memory_id(app_name, user_id, session_id, event.id)
            row = self._row(
                app_name=app_name,
                user_id=user_id,
                memory_id=mid,
                session_id=session_id,
                event_id=event.id,
                author=event.author or None,
                timestamp=float(event.timestamp),
                text=text_of(content),
                role=getattr(content, "role", None),
                custom_metadata=custom_metadata,
                now=now,
            )
            rows.pop(mid, None)  # a repeated event id keeps its last version
            if row is not None:
                rows[mid] = row
        return list(rows.values())

    # -- writing ------------------------------------------------------------------

    @telemetry.traced("add_session_to_memory", rows=telemetry.counted)
    @write_completes
    async def add_session_to_memory(self, session: Any) -> IngestReport:
        """Store the session's events that carry text, one memory per event.

        Calling it again for the same session replaces that session's memories in one
        transaction: events gone from the session disappear, changed ones update,
        unchanged ones stay as they are. Ingesting a session twice, or ten times at
        checkpoints, yields exactly one copy. The session's revision is recorded, so
        :meth:`ingest_idle_sessions` skips it until it changes.

        A session object loaded with ``GetSessionConfig`` limits holds fewer events
        than it has revisions, and one loaded before later appends misses them; either
        is reloaded whole first (the second inside the write transaction), so that no
        stored event's memory is dropped.

        Args:
            session: a :class:`~adk_sqlstore.Session` (or ADK ``Session``); one not
                from this store is taken as holding the whole conversation.

        Returns:
            An :class:`IngestReport` for this one session.

        Raises:
            SessionNotFoundError: the session was loaded from this store and has been
                deleted (or deleted and created again) since; nothing is written, so a
                deleted or pruned session leaves no memories behind.
        """
        check_session(session)
        app_name = check_identifier("app_name", session.app_name)
        user_id = check_identifier("user_id", session.user_id)
        session_id = check_identifier("session_id", session.id)
        revision, incarnation = self._token_of(session)
        if revision is not None and len(session.events) < revision:
            whole = await self._sessions.get_session(
                app_name=app_name, user_id=user_id, session_id=session_id
            )
            if whole is not None:
                session, (revision, incarnation) = whole, self._token_of(whole)
        key = {"app_name": app_name, "user_id": user_id, "session_id": session_id}
        now = time.time()
        rows = self._event_rows(**key, events=session.events, custom_metadata=None, now=now)
        async with self._sessions._transaction(write=True) as conn:
            if incarnation is not None:
                stored = await queries.lock_session(conn, **key)
                if stored is None or stored[0] != incarnation:
                    raise SessionNotFoundError(
                        f"session {session_id!r} of app {app_name!r} and user {user_id!r}"
                        " was deleted since it was loaded; its memories are not written"
                    )
                if stored[1] != revision:  # the object is stale: ingest what is stored
                    whole = await self._sessions._read_session(conn, key)
                    assert whole is not None  # the row is locked
                    revision = self._token_of(whole)[0]
                    rows = self._event_rows(
                        **key, events=whole.events, custom_metadata=None, now=now
                    )
            keep = {row["id"] for row in rows}
            existing = await queries.memory_ids_of_session(
                conn, app_name=app_name, user_id=user_id, session_id=session_id
            )
            gone = [pk for mid, pk in existing.items() if mid not in keep]
            deleted = await queries.delete_memories_by_pk(
                conn, app_name=app_name, user_id=user_id, pks=gone
            )
            await queries.upsert_memories(conn, rows)
            await queries.record_ingestion(
                conn,
                app_name=app_name,
                user_id=user_id,
                session_id=session_id,
                revision=revision,
                event_count=len(rows),
                now=now,
            )
        return IngestReport(sessions=1, events=len(rows), deleted=deleted)

    def _token_of(self, session: Any) -> tuple[int | None, str | None]:
        """(revision, incarnation) a session object was loaded at from this store;
        ``None`` for what is unknown (a session from elsewhere)."""
        try:
            return self._sessions._token_of(session)
        except (AttributeError, TypeError, ValueError):
            return None, None

    @telemetry.traced("add_events_to_memory", rows=telemetry.counted)
    @write_completes
    async def add_events_to_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        events: Sequence[Any],
        session_id: str | None = None,
        custom_metadata: Mapping[str, Any] | None = None,
    ) -> int:
        """Add events incrementally (e.g. only the latest turn); idempotent on event id.

        Adding an event again updates its memory instead of copying it; an event that
        no longer carries text (after the ingestion filter) removes its memory.

        Args:
            session_id: the session the events belong to (``None`` if none).
            custom_metadata: stored with each memory and returned by searches.

        Returns:
            How many events carried text and were stored.
        """
        check_identifier("app_name", app_name)
        check_identifier("user_id", user_id)
        if session_id is not None:
            check_identifier("session_id", session_id)
        events = _as_models(events, Event, "event", "events")
        _check_metadata(custom_metadata)
        rows = self._event_rows(
            app_name=app_name,
            user_id=user_id,
            session_id=session_id,
            events=events,
            custom_metadata=custom_metadata,
            now=time.time(),
        )
        textless = {
            memory_id(app_name, user_id, session_id, e.id)
            for e in events
            if not getattr(e, "partial", None)
        } - {row["id"] for row in rows}
        async with self._sessions._transaction(write=True) as conn:
            if textless:
                await queries.delete_memories(
                    conn, app_name=app_name, user_id=user_id, memory_ids=sorted(textless)
                )
            await queries.upsert_memories(conn, rows)
        return len(rows)

    @telemetry.traced("add_memory", rows=telemetry.counted)
    @write_completes
    async def add_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        memories: Sequence[MemoryEntry | Any],
        custom_metadata: Mapping[str, Any] | None = None,
    ) -> list[str]:
        """Store distilled facts, searched like events.

        Each entry's text parts are filtered and stored; an entry without a timestamp
        gets the time of writing; an entry with an ``id`` replaces the memory with that
        id (so re-adding a fact does not copy it), one without gets a new id.

        Args:
            memories: ``MemoryEntry`` objects (``content``, ``author``, ``timestamp``
                as ISO 8601, ``custom_metadata``).
            custom_metadata: merged under each entry's own metadata.

        Returns:
            The ids of the stored memories, in order (entries without text are
            skipped).

        Raises:
            InvalidMemoryError: an entry is neither a ``MemoryEntry`` nor a dict of one,
                or its timestamp is not ISO 8601; nothing is written.
        """
        check_identifier("app_name", app_name)
        check_identifier("user_id", user_id)
        now = time.time()
        rows = []
        _check_metadata(custom_metadata)
        for entry in _as_models(memories, MemoryEntry, "memory", "memories"):
            metadata = {
                **(custom_metadata or {}),
                **(getattr(entry, "custom_metadata", None) or {}),
            }
            row = self._row(
                app_name=app_name,
                user_id=user_id,
                memory_id=entry.id or str(uuid.uuid4()),
                session_id=None,
                event_id=None,
                author=entry.author,
                timestamp=_epoch(entry.timestamp),
                text=text_of(entry.content),
                role=getattr(entry.content, "role", None),
                custom_metadata=metadata,
                now=now,
            )
            if row is not None:
                rows.append(row)
        async with self._sessions._transaction(write=True) as conn:
            await queries.upsert_memories(conn, rows)
        return [row["id"] for row in rows]

    # -- reading ------------------------------------------------------------------

    @telemetry.traced("search_memory", rows=telemetry.found)
    async def search_memory(
        self, *, app_name: str, user_id: str, query: str, limit: int = 10
    ) -> SearchMemoryResponse:
        """Search one user's memories with a natural-language query.

        Stop words are ignored, words are stemmed (English), any term may match, and
        memories are ranked by BM25 (which query terms a memory holds, its length,
        and each term's rarity among this user's memories, on both backends; a term
        counts once per memory); ties go to the more recent memory. The author and the
        first 100,000 characters of a memory's text are indexed (the whole text is
        stored and returned; words beyond that point are not found). Words are
        matched whole: a run of CJK characters is one word, so part of it does not
        match; SQLite ignores accents (``cafe`` finds ``café``), PostgreSQL does not.
        No input raises: search syntax, SQL, emoji, CJK and very long queries are all
        searched as plain words (a query over 10,000 characters is cut); an empty or
        all-stop-word query returns no memories. Only rows of ``(app_name, user_id)``
        are ever read.

        Returns:
            At most ``limit`` memories (at most 1,000), best first; each carries
            ``id``, ``content``, ``author``, ``timestamp`` (ISO 8601, UTC) and
            ``custom_metadata`` with the stored metadata plus ``session_id``,
            ``event_id`` and ``score`` (BM25, higher is better; comparable within one
            search only).
        """
        check_identifier("app_name", app_name)
        check_identifier("user_id", user_id)
        check_argument("query", query, str, "a str")
        check_count("limit", limit, least=1)
        async with self._sessions._transaction(write=False) as conn:
            rows = await search_memories(
                conn, app_name=app_name, user_id=user_id, query=query, limit=limit
            )
        memories = []
        for row, score in rows:
            metadata = json.loads(row.custom_metadata)
            metadata.update(session_id=row.session_id, event_id=row.event_id, score=score)
            memories.append(
                MemoryEntry(
                    id=row.id,
                    content=Content.model_validate_json(row.content),
                    author=row.author,
                    timestamp=_iso(row.timestamp),
                    custom_metadata=metadata,
                )
            )
        return SearchMemoryResponse(memories=memories)

    # -- forgetting ---------------------------------------------------------------

    @telemetry.traced("delete_memories", rows=telemetry.counted)
    @write_completes
    async def delete_memories(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str | None = None,
        memory_ids: Sequence[str] | None = None,
    ) -> int:
        """Delete one user's memories: those of ``session_id``, those with the given
        ids, both filters combined, or all of them when neither is given.

        Returns:
            How many memories were deleted.
        """
        check_identifier("app_name", app_name)
        check_identifier("user_id", user_id)
        if session_id is not None:
            check_identifier("session_id", session_id)
        if memory_ids is not None:
            if isinstance(memory_ids, str | bytes) or not isinstance(memory_ids, Iterable):
                raise InvalidArgumentError(
                    f"memory_ids must be a list of memory ids, not {memory_ids!r:.60}"
                )
            memory_ids = list(memory_ids)
        for memory_id in memory_ids or ():
            check_identifier("memory id", memory_id)
        async with self._sessions._transaction(write=True) as conn:
            return await queries.delete_memories(
                conn,
                app_name=app_name,
                user_id=user_id,
                session_id=session_id,
                memory_ids=memory_ids,
            )

    @telemetry.traced("forget_user", rows=telemetry.counted)
    async def forget_user(self, *, app_name: str, user_id: str) -> dict[str, int]:
        """Delete everything stored for one user of one app; see
        :meth:`SqlSessionService.forget_user`."""
        return await self._sessions.forget_user(app_name=app_name, user_id=user_id)

    # -- ingestion triggers -------------------------------------------------------

    @telemetry.traced("close_session", rows=telemetry.counted)
    async def close_session(self, *, app_name: str, user_id: str, session_id: str) -> IngestReport:
        """The explicit end of a conversation: reload the session whole and ingest it.

        Safe to retry (ingestion is an upsert). A session that does not exist ingests
        nothing.
        """
        session = await self._sessions.get_session(
            app_name=app_name, user_id=user_id, session_id=session_id
        )
        if session is None:
            return IngestReport()
        try:
            return await self.add_session_to_memory(session)
        except SessionNotFoundError:  # deleted between the load and the write
            return IngestReport()

    @telemetry.traced("count_idle_sessions", rows=telemetry.counted)
    async def count_idle_sessions(
        self, *, idle_for: timedelta = timedelta(minutes=30), app_name: str | None = None
    ) -> int:
        """How many sessions :meth:`ingest_idle_sessions` would ingest now."""
        cutoff = time.time() - check_age("idle_for", idle_for)
        if app_name is not None:
            check_identifier("app_name", app_name)
        async with self._sessions._transaction(write=False) as conn:
            return await queries.count_idle_sessions(conn, cutoff=cutoff, app_name=app_name)

    async def idle_sessions(
        self,
        *,
        idle_for: timedelta = timedelta(minutes=30),
        app_name: str | None = None,
        batch_size: int = 500,
    ) -> AsyncIterator[tuple[str, str, str]]:
        """Yield (app_name, user_id, session_id) of sessions idle for ``idle_for`` whose
        current revision memory does not hold, read in batches."""
        cutoff = time.time() - check_age("idle_for", idle_for)
        if app_name is not None:
            check_identifier("app_name", app_name)
        after: tuple[str, str, str] | None = None
        while True:
            async with self._sessions._transaction(write=False) as conn:
                batch = await queries.idle_sessions(
                    conn, cutoff=cutoff, app_name=app_name, after=after, limit=batch_size
                )
            for key in batch:
                yield key
            if len(batch) < batch_size:
                return
            after = batch[-1]

    @telemetry.traced("ingest_idle_sessions", rows=telemetry.counted)
    async def ingest_idle_sessions(
        self,
        idle_for: timedelta = timedelta(minutes=30),
        *,
        app_name: str | None = None,
        on_session: Callable[[IngestReport], None] | None = None,
    ) -> IngestReport:
        """Ingest every session last updated more than ``idle_for`` ago whose current
        revision has not been ingested yet (the idle-timeout trigger; run it from cron
        or a scheduler). Running it again does nothing new until sessions change.

        Sessions are streamed in batches, so memory use does not grow with their
        number. Each session is ingested in its own transaction; one that cannot be
        (e.g. it holds data that no longer reads back) is counted in ``failed``, logged,
        and skipped, so that it does not hold up the others. An unreachable database
        still raises :class:`~adk_sqlstore.errors.DatabaseUnavailableError`.

        Args:
            idle_for: how long a session must have been idle.
            app_name: only this app's sessions (default: every app).
            on_session: called after each session with its report (progress bars).

        Returns:
            The totals.
        """
        total = IngestReport()
        async for app, user, session_id in self.idle_sessions(idle_for=idle_for, app_name=app_name):
            try:
                report = await self.close_session(app_name=app, user_id=user, session_id=session_id)
            except DatabaseUnavailableError:
                raise
            except (AdkSqlStoreError, ValidationError, ValueError) as exc:
                logger.warning(
                    "memory ingestion of session %r (%s/%s) failed: %s", session_id, app, user, exc
                )
                report = IngestReport(
                    failed=1, errors=[f"{app}/{user}/{session_id}: {type(exc).__name__}: {exc}"]
                )
                total.failed += 1
                total.errors.extend(report.errors)
            total.sessions += report.sessions
            total.events += report.events
            total.deleted += report.deleted
            if on_session is not None:
                on_session(report)
        return total


class MemoryCheckpoint:
    """The periodic checkpoint trigger: ingest a session every ``every`` appended events.

    Pass it to :class:`~adk_sqlstore.SqlSessionService` (``memory_checkpoint=``).
    After each append that brings the session's revision to a multiple of ``every``,
    the session is reloaded whole and ingested (the append has already committed; a
    failed ingestion is logged, and the idle job catches up later).
    """

    def __init__(self, memory: SqlMemoryService, *, every: int) -> None:
        check_count("every", every, least=1)
        self.memory = memory
        self.every = every

    async def after_append(self, session: Any, revision: int) -> None:
        """Called by the session service after a committed append."""
        if revision % self.every:
            return
        try:
            await self.memory.close_session(
                app_name=session.app_name, user_id=session.user_id, session_id=session.id
            )
        except Exception:
            logger.warning(
                "memory checkpoint of session %r failed; the idle job will retry",
                session.id,
                exc_info=True,
            )
