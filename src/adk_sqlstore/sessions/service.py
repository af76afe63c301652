"""``SqlSessionService``: the public API of sessions, each method one transaction
(the work is in the other modules of :mod:`adk_sqlstore.sessions`)."""

from __future__ import annotations

import warnings
from collections.abc import AsyncIterator, Callable, Mapping
from datetime import timedelta
from typing import Any, Generic, Self, cast

from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncEngine

from .. import telemetry
from ..models import GetSessionConfigLike, SessionLike
from ..sql import sessions as sql
from ..sql.users import lock_user
from ..store import OnStore, Store, retry_conflicts, write_completes
from ..validation import (
    DEFAULT_MAX_EVENT_BYTES,
    DEFAULT_MAX_STATE_VALUE_BYTES,
    MAX_ROWS,
    check_count,
    check_identifier,
    check_not_called_by_adk,
)
from .appending import AfterAppend, Appender
from .codec import (
    CORE_MODELS,
    EventT,
    ListT,
    SessionCodec,
    SessionModels,
    SessionT,
    decode_page_token,
    parse_config,
)
from .creating import create_session
from .importing import import_session, import_state
from .reading import list_page, read_session, session_key
from .retention import PruneReport, forget_user, prune

__all__ = ["SqlSessionService"]


class SqlSessionService(OnStore, Generic[SessionT, EventT, ListT]):
    """Sessions, events and scoped state in a SQL database.

    Create it with :meth:`from_url` (it then owns and closes its store) or pass a
    :class:`~adk_sqlstore.Store` (or an engine, wrapped in one) you manage. Use it as
    an async context manager, or call :meth:`close`.

    The schema is managed by Alembic: the first call checks that the database is at the
    revision this version needs (or upgrades it, with ``auto_migrate``), else raises
    :class:`~adk_sqlstore.errors.SchemaNotMigratedError`. Identifiers (``app_name``,
    ``user_id``, session and event ids) are non-empty strings of at most 255 UTF-8
    bytes without NUL; every method refuses others with
    :class:`~adk_sqlstore.errors.InvalidIdentifierError` before touching the database.

    Args:
        store: the database (:class:`~adk_sqlstore.Store`, or an ``AsyncEngine``).
        models: the session, event and list models read and written (default: this
            library's; :mod:`adk_sqlstore.adk` passes ADK's).
        auto_migrate: as for :class:`~adk_sqlstore.Store` (only with an engine).
        after_append: called after each committed append, e.g.
            :class:`~adk_sqlstore.IngestEvery` (ingest into memory every N events).
        memory_checkpoint: the former name of ``after_append`` (deprecated).
        max_event_bytes: the largest event accepted, in UTF-8 bytes of its stored JSON
            (default 8 MiB); a bigger one raises ``InvalidEventError``.
        max_state_value_bytes: the largest state value accepted, in UTF-8 bytes of its
            JSON (default 1 MiB); a bigger one raises ``InvalidStateError``.
    """

    def __init__(
        self,
        store: Store | AsyncEngine,
        *,
        models: SessionModels[SessionT, EventT, ListT] | None = None,
        auto_migrate: bool | None = None,
        after_append: AfterAppend | None = None,
        memory_checkpoint: AfterAppend | None = None,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
        max_state_value_bytes: int = DEFAULT_MAX_STATE_VALUE_BYTES,
    ) -> None:
        if memory_checkpoint is not None:
            warnings.warn(
                "memory_checkpoint= is deprecated: use after_append=IngestEvery(...)",
                DeprecationWarning,
                stacklevel=2,
            )
            after_append = after_append or memory_checkpoint
        chosen = models if models is not None else CORE_MODELS
        self._models = cast(SessionModels[SessionT, EventT, ListT], chosen)
        self._codec = SessionCodec(
            self._models,
            max_event_bytes=max_event_bytes,
            max_state_value_bytes=max_state_value_bytes,
        )
        self._use_store(Store.of(store, auto_migrate=auto_migrate), owns=False)
        self._appender = Appender(self._store, self._codec, after_append)

    @classmethod
    def from_url(
        cls,
        url: str | URL | None = None,
        *,
        models: SessionModels[SessionT, EventT, ListT] | None = None,
        auto_migrate: bool | None = None,
        after_append: AfterAppend | None = None,
        memory_checkpoint: AfterAppend | None = None,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
        max_state_value_bytes: int = DEFAULT_MAX_STATE_VALUE_BYTES,
        **settings: Any,
    ) -> Self:
        """A service on a store of its own (:meth:`adk_sqlstore.Store.from_url`: the URL,
        ``auto_migrate`` and connection ``settings`` are as there), closed with it.

        Raises:
            ConfigurationError: the URL or a setting is invalid, or the driver is not
                installed (a ``ValueError``; the message hides the password).
        """
        store = Store.from_url(url, auto_migrate=auto_migrate, **settings)
        service = cls(
            store,
            models=models,
            after_append=after_append,
            memory_checkpoint=memory_checkpoint,
            max_event_bytes=max_event_bytes,
            max_state_value_bytes=max_state_value_bytes,
        )
        service._use_store(store, owns=True)
        return service

    @property
    def models(self) -> SessionModels[SessionT, EventT, ListT]:
        """The session, event and list models this service reads and writes."""
        return self._models

    @property
    def auto_migrate(self) -> bool:
        """Whether the store upgrades the schema by itself on first use."""
        return self._store.auto_migrate

    async def ensure_schema(self) -> None:
        """Check (or migrate) the schema now rather than at the first call; see
        :meth:`adk_sqlstore.Store.ensure_schema`."""
        await self._store.ensure_schema()

    # -- sessions -----------------------------------------------------------------------

    @telemetry.traced("create_session", rows=telemetry.one)
    @write_completes
    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: Mapping[str, Any] | None = None,
        session_id: str | None = None,
    ) -> SessionT:
        """Create a session, seeding its state: ``user:`` and ``app:`` keys go to the
        user and app scopes (overwriting what was there), ``temp:`` keys are dropped,
        the rest is session state.

        Args:
            app_name: the application.
            user_id: the user; a security boundary, from your authentication.
            state: initial state (JSON values).
            session_id: the id to use; a UUID4 string is generated when ``None``.

        Returns:
            The session with its merged state, no events, revision 0 and
            ``last_update_time`` now (seconds since the epoch, UTC).

        Raises:
            AlreadyExistsError: the id is taken for this app and user, also when two
                creates race.
            InvalidIdentifierError, InvalidStateError: nothing is written.
            TypeError: called by ADK itself (pass ADK the adk_sqlstore.adk class).
        """
        check_not_called_by_adk("SqlSessionService")
        row, state_now = await create_session(
            self._store,
            self._codec,
            app_name=app_name,
            user_id=user_id,
            state=state,
            session_id=session_id,
        )
        return self._models.build_session(row, state_now, [])

    @telemetry.traced("get_session", rows=telemetry.events_of)
    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfigLike | Mapping[str, Any] | None = None,
    ) -> SessionT | None:
        """Load a session with its merged state and events (oldest first), all from one
        snapshot.

        Args:
            config: ``num_recent_events`` returns only the newest N events (0 returns
                none; the query reads N rows whatever the history length);
                ``after_timestamp`` only events with ``timestamp >= after_timestamp``
                (seconds since the epoch); both combine. ADK's ``GetSessionConfig``
                and a dict of the same fields work too.

        Returns:
            The session, or ``None`` when it does not exist for this app and user (an
            id of another user or app is never returned). State is the whole fold
            whatever ``config`` limits.

        Raises:
            InvalidArgumentError: ``config`` is not a config.
            TypeError: called by ADK itself (pass ADK the adk_sqlstore.adk class).
        """
        check_not_called_by_adk("SqlSessionService")
        key = session_key(app_name, user_id, session_id)
        checked = parse_config(config)
        async with self._store.autocommit() as conn:
            return await read_session(conn, key, self._codec, checked)

    @telemetry.traced("list_sessions", rows=telemetry.listed)
    async def list_sessions(
        self,
        *,
        app_name: str,
        user_id: str | None = None,
        limit: int | None = None,
        page_token: str | None = None,
    ) -> ListT:
        """List sessions without their events, oldest ``last_update_time`` first (ties:
        by ``user_id``, then session id), each with its merged state and revision.

        Without ``limit`` every session is returned (ADK's call); with it, one page, and
        ``next_page_token`` fetches the next (keyset pagination: pages stay right while
        sessions are added; a session updated meanwhile may show up again later).

        Args:
            user_id: one user's sessions; ``None`` lists every user of the app.
            limit: the most sessions to return (1 or more), or ``None``.
            page_token: ``next_page_token`` of the previous page.

        Raises:
            InvalidArgumentError: ``limit`` is not a positive whole number, or
                ``page_token`` is not one this method made.
        """
        check_identifier("app_name", app_name)
        if user_id is not None:
            check_identifier("user_id", user_id)
        if limit is not None:  # a limit past what a LIMIT takes is all of them
            limit = min(check_count("limit", limit, least=1), MAX_ROWS)
        after = decode_page_token(page_token) if page_token is not None else None
        async with self._store.autocommit() as conn:
            return await list_page(
                conn, self._models, app_name=app_name, user_id=user_id, limit=limit, after=after
            )

    async def iter_sessions(
        self, *, app_name: str, user_id: str | None = None, page_size: int = 500
    ) -> AsyncIterator[SessionT]:
        """Every session of :meth:`list_sessions`, read ``page_size`` at a time, so that
        memory use does not grow with their number."""
        token: str | None = None
        while True:
            page: Any = await self.list_sessions(
                app_name=app_name, user_id=user_id, limit=page_size, page_token=token
            )
            for session in page.sessions:
                yield session
            token = page.next_page_token
            if token is None:
                return

    @telemetry.traced("delete_session")
    @write_completes
    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        """Delete a session with its events and session state (no-op if absent).

        User and app state stay: they belong to the user and the app. Memories made
        from the session stay too (use ``SqlMemoryService.delete_memories``). An
        append or ingestion of the session under way commits first; one that comes
        later fails with ``SessionNotFoundError``.
        """
        key = session_key(app_name, user_id, session_id)

        async def delete() -> None:
            async with self._store.transaction(write=True) as conn:
                await lock_user(conn, app_name=app_name, user_id=user_id, mode="exclusive")
                await sql.delete_session(conn, **key)

        await retry_conflicts(delete)

    @telemetry.traced("get_user_state", rows=len)
    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        """The user's state: keys without the ``user:`` prefix (``{}`` when none)."""
        check_identifier("app_name", app_name)
        check_identifier("user_id", user_id)
        async with self._store.transaction(write=False) as conn:
            users = await sql.load_user_states(conn, app_name=app_name, user_id=user_id)
        return users.get(user_id, {})

    @telemetry.traced("get_app_state", rows=len)
    async def get_app_state(self, *, app_name: str) -> dict[str, Any]:
        """The app's state: keys without the ``app:`` prefix (``{}`` when none)."""
        check_identifier("app_name", app_name)
        async with self._store.transaction(write=False) as conn:
            return await sql.load_app_state(conn, app_name=app_name)

    # -- appends ------------------------------------------------------------------------

    @telemetry.traced("append_event", rows=telemetry.one)
    async def append_event(self, session: SessionT, event: EventT | Mapping[str, Any]) -> EventT:
        """Append ``event`` to ``session`` in storage, then to the session object, as
        ADK's ``BaseSessionService.append_event`` does (the rules:
        :mod:`adk_sqlstore.sessions.appending`): a partial event is not stored;
        ``temp:`` keys reach ``session.state`` only; the rest of the delta is written
        key by key with the event in one transaction; ``session.last_update_time``
        becomes ``event.timestamp``. Appends through one session object take turns.

        The event is checked first: it must read back equal to itself, so values JSON
        cannot carry exactly (NaN, sets, tuples, datetimes, objects, ...) are refused
        rather than stored changed.

        An event the session already holds, equal (same id, same fields, as stored) is
        not stored again: the call returns it and changes nothing, the session object
        included, as ADK's ``InMemorySessionService`` does. A retry after a lost reply,
        or a copy of the event through another copy of the session, is then no error.

        Returns:
            The event as stored (without ``temp:`` keys in its delta).

        Raises:
            StaleSessionError: another writer appended since ``session`` was loaded, or
                it was deleted and created again since; nothing was written. Reload
                and retry.
            SessionNotFoundError: the session was deleted (or never stored).
            InvalidEventError: an event with the same id and other content exists in
                the session, the event cannot be stored exactly, or its timestamp is not
                seconds between the years 1 and 9999.
            InvalidStateError: a non-``temp:`` delta value is not JSON.
            asyncio.CancelledError: the call was cancelled. The write is not
                interrupted: it commits or fails first (bounded by the database's lock
                wait), so the event may be stored: reload to know.
        """
        return await self._appender.append(session, event)

    # -- retention ----------------------------------------------------------------------

    @telemetry.traced("forget_user", rows=telemetry.counted)
    @write_completes
    async def forget_user(self, *, app_name: str, user_id: str) -> dict[str, int]:
        """Delete everything stored for one user of one app, in one transaction.

        From the design notes (000): "Deletion has to reach every copy: the user: map,
        every stored session, the memory index and any extracted facts." Removes the
        user's sessions, events, session and user state, memories with their index
        entries, and artifacts with their bytes; app state and other users' rows stay.
        Then the copies the database keeps are purged
        (:func:`adk_sqlstore.sql.maintenance.purge_deleted_text`): SQLite's index is
        merged, freed pages zeroed and write-ahead log emptied (beside a reader of an
        older snapshot: after that read, at the next write or close, with a warning);
        PostgreSQL's statistics are refreshed so ``pg_stats`` holds nothing of the user
        (a table left empty keeps its old ones unless the role is a superuser: a warning
        names it). Deleted rows stay in PostgreSQL's table files until (auto)VACUUM.

        Beside other writers of the user: it waits for those under way (the user lock,
        ``docs/architecture.md`` "Locks") and holds off new ones until it commits, so
        everything the user had when it began is deleted, and a write racing it to
        anything the user had (an append, an ingestion, a delete) either commits before
        it (and is deleted) or fails with ``SessionNotFoundError`` or
        ``StaleSessionError``; a write making something new for the user (a session, a
        fact, an artifact) may commit after it, whole. Run again whole if the database
        ends it to break a deadlock (with another application's transaction).

        Returns:
            Rows deleted by kind: ``sessions``, ``events``, ``session_state_keys``,
            ``user_state_keys``, ``memories``, ``memory_ingestions``, ``memory_stats``,
            ``artifact_versions``, ``artifact_chunks``, ``artifact_contents``.

        Raises:
            ConcurrencyConflictError: the database ended it to break a deadlock each of
                the 10 times it ran; nothing was deleted.
        """
        return await forget_user(self._store, app_name=app_name, user_id=user_id)

    @telemetry.traced("prune", rows=telemetry.counted)
    async def prune(
        self,
        *,
        older_than: timedelta | float,
        app_name: str | None = None,
        with_memories: bool = False,
        dry_run: bool = False,
        batch_size: int = 1000,
        on_batch: Callable[[PruneReport], None] | None = None,
    ) -> PruneReport:
        """Delete sessions not updated for ``older_than`` (a retention policy), oldest
        first, with their events, session state and memory ingestion records,
        ``batch_size`` sessions per transaction (an interrupted prune leaves whole
        sessions). User and app state are never touched; memories made from the
        sessions stay unless ``with_memories``. A session appended to meanwhile is
        either kept or its append fails with ``SessionNotFoundError``. Generated facts
        whose time to live has ended (``MemoryGenerator(ttl=...)``) are deleted too,
        with their revisions, whatever the sessions' age.

        Args:
            older_than: age as a ``timedelta`` or in seconds (0 or more).
            app_name: only this app's sessions; every app when ``None``.
            with_memories: also delete the memories ingested from the deleted sessions
                (facts added with ``add_memory`` have no session and stay).
            dry_run: count what would be deleted, delete nothing.
            batch_size: sessions per transaction (1 to 100,000).
            on_batch: called after each committed batch with that batch's counts.

        Returns:
            The rows deleted (or, with ``dry_run``, that would be) and the cutoff.

        Raises:
            InvalidArgumentError, InvalidIdentifierError: an argument is out of range.
            DatabaseUnavailableError: the database failed; committed batches stay.
            ConcurrencyConflictError: a batch kept losing races with another
                application's transactions (run again 10 times); committed batches stay.
        """
        return await prune(
            self._store,
            older_than=older_than,
            app_name=app_name,
            with_memories=with_memories,
            dry_run=dry_run,
            batch_size=batch_size,
            on_batch=on_batch,
        )

    # -- bulk copy ----------------------------------------------------------------------

    @telemetry.traced("import_session", rows=telemetry.counted)
    @write_completes
    async def import_session(self, session: SessionLike, *, replace: bool = False) -> bool:
        """Store a whole session (events and state) as it is, in one transaction: for
        sessions from elsewhere (ADK session JSON, another store).

        Events keep their ids, timestamps and order; ``session.state`` is split by
        scope: un-prefixed keys become session state, ``user:`` and ``app:`` keys go to
        the user and app state where the store does not have them yet (a dump's copy is
        older than the store's; ``replace`` overwrites them), ``temp:`` keys are
        dropped. The stored revision is the number of events; ``last_update_time`` is
        kept (0 means: the newest event's timestamp, else now).

        Args:
            session: a :class:`Session` (or ADK ``Session``).
            replace: delete an existing session with the same id first, and overwrite
                the store's ``user:`` and ``app:`` keys; otherwise an existing session is
                left untouched.

        Returns:
            True if the session was written, False if it existed and was kept.

        Raises:
            InvalidStateError, InvalidEventError, InvalidIdentifierError: the session
                cannot be stored; nothing was written.
        """
        return await import_session(self._store, self._codec, session, replace=replace)

    @telemetry.traced("import_state", rows=telemetry.counted)
    @write_completes
    async def import_state(
        self,
        *,
        app_name: str,
        user_id: str | None,
        state: Mapping[str, Any],
        replace: bool = False,
    ) -> int:
        """Write app state (``user_id=None``) or one user's state, keys without prefix,
        in one transaction. Keys the store already has are kept unless ``replace``.

        Returns:
            How many keys were written.

        Raises:
            InvalidStateError, InvalidIdentifierError: nothing was written.
        """
        return await import_state(
            self._store,
            self._codec,
            app_name=app_name,
            user_id=user_id,
            state=state,
            replace=replace,
        )
