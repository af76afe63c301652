"""Bring data over from ADK's ``DatabaseSessionService`` (extra ``adk``).

Reads a database written by ADK's ``DatabaseSessionService`` with its current schema
(``adk_internal_metadata.schema_version = 1``: events as JSON) and copies every session,
event, user state and app state into adk-sqlstore. The source is only read (an SQLite
source is opened read-only). Sessions are read in batches and each is written in one
transaction; a session that already exists in the target is left alone unless
``replace``, so running the import twice changes nothing. State keys that already
exist in the target are kept the same way.

ADK's older schema (``v0``) stores event actions as Python pickles; unpickling
untrusted data can run arbitrary code, so such a database is refused: migrate it with
ADK's own ``adk migrate session`` first.

Events are converted exactly as ADK's ``DatabaseSessionService`` does when it reads
them (its ``StorageEvent.to_event``), so a session read through
:mod:`adk_sqlstore.adk` afterwards equals the one ADK returns from the source.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import inspect, select, text, tuple_
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, create_async_engine

from .engine import normalize_url, redact_url
from .errors import MigrationError
from .models import GetSessionConfig

try:
    from google.adk.sessions import Session as AdkSession
    from google.adk.sessions.schemas.v1 import (
        StorageAppState,
        StorageEvent,
        StorageSession,
        StorageUserState,
    )
except ImportError as exc:  # pragma: no cover - exercised without google-adk
    raise ImportError(
        "importing from ADK's DatabaseSessionService needs google-adk; install it with:"
        " pip install 'adk-sqlstore[adk]'"
    ) from exc

from .adk import SqlSessionService

__all__ = ["ImportReport", "import_adk_database", "open_source", "source_schema_version"]

_BATCH = 200
_NO_EVENTS = GetSessionConfig(num_recent_events=0)


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
    """An engine on the ADK database, read-only for SQLite (nothing is written to it)."""
    parsed = normalize_url(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        parsed = parsed.set(
            database=f"file:{parsed.database}?mode=ro", query={**parsed.query, "uri": "true"}
        )
    return create_async_engine(parsed)


def _shown(url: URL) -> str:
    """The source URL as the user wrote it (without :func:`open_source`'s read-only
    form), password hidden."""
    database = url.database or ""
    if url.get_backend_name() == "sqlite" and database.startswith("file:"):
        return f"sqlite:///{database[len('file:') :].removesuffix('?mode=ro')}"
    return redact_url(url)


def _schema_version(conn: Any) -> str | None:
    inspector = inspect(conn)
    if inspector.has_table("adk_internal_metadata"):
        key = inspector.dialect.identifier_preparer.quote("key")
        row = conn.execute(
            text(f"SELECT value FROM adk_internal_metadata WHERE {key} = 'schema_version'")
        ).first()
        return None if row is None else str(row[0])
    if inspector.has_table("events"):
        columns = {c["name"] for c in inspector.get_columns("events")}
        if "actions" in columns and "event_data" not in columns:
            return "0"
    return None


async def source_schema_version(source: AsyncEngine) -> str:
    """The ADK schema version of the source.

    Raises:
        MigrationError: the source is ADK's pickled v0 schema (refused), another
            version, or not an ADK session database.
    """
    async with source.connect() as conn:
        version = await conn.run_sync(_schema_version)
    where = _shown(source.url)
    if version == "1":
        return version
    if version == "0":
        raise MigrationError(
            f"{where} uses ADK's old session schema (v0), which stores event actions as"
            " Python pickles; adk-sqlstore does not unpickle data (it can run arbitrary"
            " code). Migrate it with ADK's own `adk migrate session` first, then import."
        )
    if version is None:
        raise MigrationError(
            f"{where} is not a database of ADK's DatabaseSessionService (no"
            " adk_internal_metadata table)"
        )
    raise MigrationError(
        f"{where} has ADK session schema version {version!r}; this adk-sqlstore reads version 1"
    )


async def _session_keys(db: AsyncSession) -> AsyncIterator[tuple[str, str, str]]:
    """Every (app_name, user_id, id) of the source, in key order, in batches."""
    after: tuple[str, str, str] | None = None
    while True:
        stmt = (
            select(StorageSession.app_name, StorageSession.user_id, StorageSession.id)
            .order_by(StorageSession.app_name, StorageSession.user_id, StorageSession.id)
            .limit(_BATCH)
        )
        if after is not None:
            stmt = stmt.where(
                tuple_(StorageSession.app_name, StorageSession.user_id, StorageSession.id) > after
            )
        batch = [(a, u, s) for a, u, s in (await db.execute(stmt)).all()]
        for key in batch:
            yield key
        if len(batch) < _BATCH:
            return
        after = batch[-1]


async def _read_session(db: AsyncSession, key: tuple[str, str, str]) -> AdkSession | None:
    """One session as ADK's DatabaseSessionService returns it, with only its
    session-scoped state (user and app state are copied on their own)."""
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
    session: AdkSession = row.to_session(state=dict(row.state or {}), events=events)
    db.expunge_all()  # keep memory flat: rows of this session are not needed any more
    return session


async def import_adk_database(
    source: AsyncEngine,
    target: SqlSessionService,
    *,
    replace: bool = False,
    dry_run: bool = False,
    on_session: Callable[[AdkSession, bool], None] | None = None,
) -> ImportReport:
    """Copy an ADK ``DatabaseSessionService`` database into adk-sqlstore.

    Args:
        source: an engine on the ADK database (see :func:`open_source`).
        target: the adk-sqlstore ADK session service to copy into.
        replace: overwrite sessions and state keys the target already has.
        dry_run: read and count everything, write nothing.
        on_session: called after each session with it and whether it was written.

    Returns:
        What was copied (or would be, in a dry run).

    Raises:
        MigrationError: the source is not ADK's current session schema.
    """
    await source_schema_version(source)
    report = ImportReport()
    async with AsyncSession(source) as db:
        async for key in _session_keys(db):
            session = await _read_session(db, key)
            if session is None:
                continue
            if dry_run:
                exists = await target.core.get_session(
                    app_name=key[0], user_id=key[1], session_id=key[2], config=_NO_EVENTS
                )
                written = replace or exists is None
            else:
                written = await target.import_session(session, replace=replace)
            if written:
                report.sessions += 1
                report.events += len(session.events)
            else:
                report.skipped += 1
            if on_session is not None:
                on_session(session, written)
        app_rows = await db.stream_scalars(
            select(StorageAppState).execution_options(yield_per=_BATCH)
        )
        async for app_row in app_rows:
            state = dict(app_row.state or {})
            report.app_state_keys += (
                len(state)
                if dry_run
                else await target.core.import_state(
                    app_name=app_row.app_name, user_id=None, state=state, replace=replace
                )
            )
        user_rows = await db.stream_scalars(
            select(StorageUserState).execution_options(yield_per=_BATCH)
        )
        async for user_row in user_rows:
            state = dict(user_row.state or {})
            report.user_state_keys += (
                len(state)
                if dry_run
                else await target.core.import_state(
                    app_name=user_row.app_name,
                    user_id=user_row.user_id,
                    state=state,
                    replace=replace,
                )
            )
    return report
