"""Bring data over from ADK's SQL session services (extra ``adk``).

Reads either of the two SQL layouts ADK 2.13 writes and copies every session, event,
user state and app state into adk-sqlstore:

* ``DatabaseSessionService`` with its current schema (``adk_internal_metadata.schema_version
  = 1``: events as JSON), on PostgreSQL, MySQL, MariaDB or SQLite;
* ``SqliteSessionService``, which ADK uses for ``sqlite:///...`` session URLs and for
  ``adk web``'s default ``<agents>/<agent>/.adk/session.db``: an SQLite file whose
  ``sessions``, ``events``, ``app_states`` and ``user_states`` tables hold state and
  events as JSON text and times as epoch seconds.

The layout is detected from the source's tables and columns. The source is only read
(an SQLite source is opened read-only). Sessions are read in batches and each is
written in one transaction; a session that already exists in the target is left alone
unless ``replace``, so running the import twice changes nothing. State keys that
already exist in the target are kept the same way.

ADK's older ``DatabaseSessionService`` schema (``v0``) stores event actions as Python
pickles; unpickling untrusted data can run arbitrary code, so such a database is
refused: migrate it with ADK's own ``adk migrate session`` first.

Sessions are read exactly as ADK's own service for the layout reads them (its
``StorageEvent.to_event``, or ``SqliteSessionService.get_session``: events in
``timestamp`` then ``rowid`` order, each ``Event.model_validate_json(event_data)``), so
a session read through :mod:`adk_sqlstore.adk` afterwards equals the one ADK returns
from the source.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, ClassVar
from urllib.parse import quote, unquote

from sqlalchemy import Select, inspect, select
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, create_async_engine

from ..drivers import mysql_options, postgres_options
from ..errors import MigrationError
from ..models import GetSessionConfig
from ..sql.adk_source import (
    SQLITE_APP_STATES,
    SQLITE_EVENTS,
    SQLITE_SESSION,
    SQLITE_SESSION_KEYS,
    SQLITE_USER_STATES,
    count_keys,
    keys_after,
    schema_version,
)
from ..url_display import redact_url
from ..urls import normalize_url, split_settings
from ._google import AdkEvent, AdkSession
from .sessions import SqlSessionService

try:
    from google.adk.sessions.schemas.v1 import (
        StorageAppState,
        StorageEvent,
        StorageSession,
        StorageUserState,
    )
except ImportError as exc:  # pragma: no cover - exercised without google-adk
    raise ImportError(
        "importing from ADK's session databases needs google-adk; install it with:"
        " pip install 'adk-sqlstore[adk]'"
    ) from exc

__all__ = [
    "ImportReport",
    "count_sessions",
    "import_adk_database",
    "open_source",
    "source_layout",
]

_BATCH = 200
_NO_EVENTS = GetSessionConfig(num_recent_events=0)

_Key = tuple[str, str, str]


@dataclass
class ImportReport:
    """Counts of what an import copied (or, in a dry run, would copy).

    Attributes:
        sessions: sessions written.
        skipped: sessions left alone because the target already had them.
        events: events written.
        user_state_keys, app_state_keys: state keys written.
    """

    sessions: int = 0
    skipped: int = 0
    events: int = 0
    user_state_keys: int = 0
    app_state_keys: int = 0


def open_source(url: str) -> AsyncEngine:
    """An engine on the ADK database, read-only for SQLite (nothing is written to it).

    The URL takes the same spellings and connection settings as the store's
    (``?pgbouncer=true`` behind a pooler, ``?search_path=...`` for a schema).

    Raises:
        ValueError: the URL or a setting is invalid.
    """
    parsed, settings = split_settings(normalize_url(url))
    kwargs: dict[str, Any] = {}
    if parsed.get_backend_name() == "postgresql":
        postgres_options(settings, kwargs)
    if parsed.get_backend_name() == "mysql":
        mysql_options(settings, kwargs)
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        # An SQLite URI filename: "?", "#" and "%" in the path must be escaped, or the
        # path is cut short there (and mode=ro lost).
        path = quote(parsed.database or "", safe="/")
        parsed = parsed.set(database=f"file:{path}?mode=ro", query={**parsed.query, "uri": "true"})
    return create_async_engine(parsed, **kwargs)


def _shown(url: URL) -> str:
    """The source URL as the user wrote it (without :func:`open_source`'s read-only
    form), password hidden."""
    database = url.database or ""
    if url.get_backend_name() == "sqlite" and database.startswith("file:"):
        return f"sqlite:///{unquote(database[len('file:') :].removesuffix('?mode=ro'))}"
    return redact_url(url)


# -- the two layouts -----------------------------------------------------------------------


class _Reader(ABC):
    """How one of ADK's layouts is read: the sessions' key columns (read in key-order
    batches), the app and user state rows, and one session as ADK's service returns
    it, with only its session-scoped state (user and app state are copied on their own).
    """

    name: ClassVar[str]
    keys: ClassVar[tuple[Any, Any, Any]]  # app_name, user_id, id of the sessions table
    app_states: ClassVar[Select[Any]]  # rows (app_name, state)
    user_states: ClassVar[Select[Any]]  # rows (app_name, user_id, state)

    @abstractmethod
    def state(self, value: Any) -> dict[str, Any]:
        """A state column's value as a dict."""

    @abstractmethod
    async def session(self, db: AsyncSession, key: _Key) -> AdkSession | None:
        """The session ``key``, None if it is gone."""


class _DatabaseReader(_Reader):
    """``DatabaseSessionService``, schema v1, through ADK's own ORM models."""

    name = "DatabaseSessionService"
    keys = (StorageSession.app_name, StorageSession.user_id, StorageSession.id)
    app_states = select(StorageAppState.app_name, StorageAppState.state)
    user_states = select(
        StorageUserState.app_name, StorageUserState.user_id, StorageUserState.state
    )

    def state(self, value: Any) -> dict[str, Any]:
        return dict(value or {})

    async def session(self, db: AsyncSession, key: _Key) -> AdkSession | None:
        app_name, user_id, session_id = key
        row = await db.get(StorageSession, key)
        if row is None:
            return None
        stmt = (
            select(StorageEvent)
            .where(
                StorageEvent.app_name == app_name,
                StorageEvent.user_id == user_id,
                StorageEvent.session_id == session_id,
            )
            .order_by(StorageEvent.timestamp, StorageEvent.id)
        )
        events = [e.to_event() for e in (await db.execute(stmt)).scalars()]
        session: AdkSession = row.to_session(state=self.state(row.state), events=events)
        db.expunge_all()  # keep memory flat: rows of this session are not needed any more
        return session


class _SqliteReader(_Reader):
    """``SqliteSessionService``: JSON text columns, read with SQL as ADK reads them."""

    name = "SqliteSessionService"
    keys = SQLITE_SESSION_KEYS
    app_states = SQLITE_APP_STATES
    user_states = SQLITE_USER_STATES

    def state(self, value: Any) -> dict[str, Any]:
        state = json.loads(value)
        if not isinstance(state, dict):
            raise MigrationError(f"a stored state is not a JSON object: {value[:80]!r}")
        return state

    async def session(self, db: AsyncSession, key: _Key) -> AdkSession | None:
        app_name, user_id, session_id = key
        params = {"app": app_name, "user": user_id, "id": session_id}
        row = (await db.execute(SQLITE_SESSION, params)).first()
        if row is None:
            return None
        events = [
            AdkEvent.model_validate_json(data)
            for data in (await db.execute(SQLITE_EVENTS, params)).scalars()
        ]
        return AdkSession(
            app_name=app_name,
            user_id=user_id,
            id=session_id,
            state=self.state(row.state),
            events=events,
            last_update_time=row.update_time,
        )


# The columns the SqliteSessionService layout is recognised by (ADK's CREATE TABLEs).
_SQLITE_LAYOUT = {
    "sessions": {"app_name", "user_id", "id", "state", "create_time", "update_time"},
    "events": {"id", "app_name", "user_id", "session_id", "timestamp", "event_data"},
    "app_states": {"app_name", "state", "update_time"},
    "user_states": {"app_name", "user_id", "state", "update_time"},
}


def _layout(conn: Any) -> str | None:
    """``"sqlite"`` for the SqliteSessionService layout, else DatabaseSessionService's
    schema version (``"0"`` for the pickled one), else None."""
    inspector = inspect(conn)
    tables = set(inspector.get_table_names())
    if "adk_internal_metadata" in tables:
        return schema_version(conn)
    columns = {
        t: {c["name"] for c in inspector.get_columns(t)} for t in tables & _SQLITE_LAYOUT.keys()
    }
    events = columns.get("events", set())
    if "actions" in events and "event_data" not in events:
        return "0"
    if conn.dialect.name == "sqlite" and all(
        wanted <= columns.get(name, set()) for name, wanted in _SQLITE_LAYOUT.items()
    ):
        return "sqlite"
    return None


async def _reader(source: AsyncEngine) -> _Reader:
    async with source.connect() as conn:
        layout = await conn.run_sync(_layout)
    where = _shown(source.url)
    if layout == "1":
        return _DatabaseReader()
    if layout == "sqlite":
        return _SqliteReader()
    if layout == "0":
        raise MigrationError(
            f"{where} uses ADK's old session schema (v0), which stores event actions as"
            " Python pickles; adk-sqlstore does not unpickle data (it can run arbitrary"
            " code). Migrate it with ADK's own `adk migrate session` first, then import."
        )
    if layout is None:
        raise MigrationError(
            f"{where} is not a session database of ADK: adk-sqlstore reads the one of"
            " DatabaseSessionService (schema v1, with an adk_internal_metadata table) and"
            " the SQLite file of SqliteSessionService (tables sessions, events with"
            " event_data, app_states and user_states)"
        )
    raise MigrationError(
        f"{where} has ADK session schema version {layout!r}; this adk-sqlstore reads"
        " DatabaseSessionService's version 1 (or SqliteSessionService's SQLite file)"
    )


async def source_layout(source: AsyncEngine) -> str:
    """Which of ADK's session services wrote the source: ``"DatabaseSessionService"``
    (schema v1) or ``"SqliteSessionService"``.

    Raises:
        MigrationError: the source is ADK's pickled v0 schema (refused), another
            schema version, or not an ADK session database.
    """
    return (await _reader(source)).name


# -- shared batching and writing -----------------------------------------------------------


async def _session_keys(db: AsyncSession, reader: _Reader) -> AsyncIterator[_Key]:
    """Every (app_name, user_id, id) of the source, in key order, in batches."""
    after: _Key | None = None
    while True:
        stmt = keys_after(reader.keys, after, _BATCH)
        batch = [(a, u, s) for a, u, s in (await db.execute(stmt)).all()]
        for key in batch:
            yield key
        if len(batch) < _BATCH:
            return
        after = batch[-1]


async def count_sessions(source: AsyncEngine) -> int:
    """How many sessions the source holds (for a progress bar).

    Raises:
        MigrationError: as for :func:`import_adk_database`.
    """
    reader = await _reader(source)
    async with AsyncSession(source) as db:
        return int((await db.execute(count_keys(reader.keys))).scalar_one())


async def import_adk_database(
    source: AsyncEngine,
    target: SqlSessionService | None,
    *,
    replace: bool = False,
    dry_run: bool = False,
    on_session: Callable[[AdkSession, bool], None] | None = None,
) -> ImportReport:
    """Copy a database of ADK's ``DatabaseSessionService`` (schema v1) or
    ``SqliteSessionService`` into adk-sqlstore; the layout is detected.

    Args:
        source: an engine on the ADK database (see :func:`open_source`).
        target: the adk-sqlstore ADK session service to copy into; ``None`` in a dry
            run means a target that holds nothing yet (a database not created or not
            migrated: a dry run never creates or migrates it).
        replace: overwrite sessions and state keys the target already has.
        dry_run: read and count everything, write nothing.
        on_session: called after each session with it and whether it was written.

    Returns:
        What was copied (or would be, in a dry run).

    Raises:
        MigrationError: the source is neither of the layouts read (see
            :func:`source_layout`).
    """
    if target is None and not dry_run:
        raise ValueError("an import that is not a dry run needs a target")
    reader = await _reader(source)
    report = ImportReport()
    writing = None if dry_run else target
    async with AsyncSession(source) as db:
        async for key in _session_keys(db, reader):
            session = await reader.session(db, key)
            if session is None:
                continue
            if writing is not None:
                written = await writing.import_session(session, replace=replace)
            else:
                written = replace or not await _exists(target, key)
            if written:
                report.sessions += 1
                report.events += len(session.events)
            else:
                report.skipped += 1
            if on_session is not None:
                on_session(session, written)
        await _copy_state(db, reader, writing, report, replace=replace)
    return report


async def _exists(target: SqlSessionService | None, key: _Key) -> bool:
    """Whether the target holds the session ``key`` (``None``: a target holding nothing)."""
    if target is None:
        return False
    found = await target.core.get_session(
        app_name=key[0], user_id=key[1], session_id=key[2], config=_NO_EVENTS
    )
    return found is not None


async def _copy_state(
    db: AsyncSession,
    reader: _Reader,
    target: SqlSessionService | None,
    report: ImportReport,
    *,
    replace: bool,
) -> None:
    """Copy (``target`` None: count) the app and user state rows, in batches."""
    for stmt in (reader.app_states, reader.user_states):
        async for row in await db.stream(stmt.execution_options(yield_per=_BATCH)):
            values = row._mapping  # SQLAlchemy's public name for a row's mapping view
            user_id = values.get("user_id")  # None: an app state row
            state = reader.state(values["state"])
            keys = (
                len(state)
                if target is None
                else await target.core.import_state(
                    app_name=values["app_name"], user_id=user_id, state=state, replace=replace
                )
            )
            if user_id is None:
                report.app_state_keys += keys
            else:
                report.user_state_keys += keys
