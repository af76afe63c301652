"""Statements on sessions, events and the three state scopes (SQLAlchemy Core).

State is stored one key per row, values as JSON text, so that writers of different
keys never overwrite each other; :mod:`adk_sqlstore.state` splits and merges scopes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, and_, delete, insert, literal, select, text, union_all
from sqlalchemy.ext.asyncio import AsyncConnection

from ..errors import ConcurrencyConflictError
from ..schema import (
    app_state,
    events,
    fact_sources,
    memory_ingestions,
    session_state,
    sessions,
    user_state,
)
from .citus import on_citus
from .constructs import chunks, upsert
from .users import lock_user, pg_user_lock

__all__ = [
    "ScopeStates",
    "SessionRow",
    "delete_ingestion_record",
    "delete_session",
    "insert_events",
    "insert_new_session",
    "insert_session",
    "load_app_state",
    "load_event_data",
    "load_session",
    "load_states",
    "load_user_states",
    "lock_session",
    "session_key",
    "session_revision",
    "write_state",
]


@dataclass
class SessionRow:
    """A stored session's row: its address, ``revision`` (appends so far),
    ``update_time`` (seconds since the epoch, UTC) and ``incarnation`` (which creation
    of the address it is)."""

    app_name: str
    user_id: str
    id: str
    revision: int
    update_time: float
    incarnation: str


@dataclass
class ScopeStates:
    """Decoded state of the three scopes, un-prefixed keys."""

    app: dict[str, Any]
    user: dict[str, Any]
    session: dict[str, Any]


def session_key(app_name: str, user_id: str, session_id: str) -> ColumnElement[bool]:
    return and_(
        sessions.c.app_name == app_name,
        sessions.c.user_id == user_id,
        sessions.c.id == session_id,
    )


_PG_LOCK, _PG_HELD = pg_user_lock("share", create=True)
_PG_LOCKED_INSERT = text(
    f"WITH {_PG_LOCK}\nINSERT INTO sqlstore_sessions"
    " (app_name, user_id, id, revision, create_time, update_time, incarnation)"
    " SELECT :app_name, :user_id, :session_id, 0, :now, :now, :incarnation"
    f" WHERE {_PG_HELD}"
)


async def insert_new_session(
    conn: AsyncConnection,
    *,
    app_name: str,
    user_id: str,
    session_id: str,
    now: float,
    incarnation: str,
) -> None:
    """Take the user lock (``"share"``, the user's row made if absent: :mod:`.users`)
    and insert a new session row (revision 0, created and updated ``now``): on
    PostgreSQL one statement, elsewhere (Citus included) two.

    Raises:
        sqlalchemy.exc.IntegrityError: the session exists.
        ConcurrencyConflictError: the user was forgotten while this waited for the
            user lock (PostgreSQL; nothing was written: run it again).
    """
    params: dict[str, Any] = {"app_name": app_name, "user_id": user_id, "session_id": session_id}
    if conn.dialect.name == "postgresql" and not on_citus(conn):
        result = await conn.execute(
            _PG_LOCKED_INSERT, {**params, "now": now, "incarnation": incarnation}
        )
        if result.rowcount != 1:
            raise ConcurrencyConflictError(
                f"user {user_id!r} of app {app_name!r} was forgotten while session"
                f" {session_id!r} waited to be created; nothing was written"
            )
        return
    await lock_user(conn, app_name=app_name, user_id=user_id, mode="share", create=True, now=now)
    await insert_session(conn, **params, create_time=now, update_time=now, incarnation=incarnation)


async def insert_session(
    conn: AsyncConnection,
    *,
    app_name: str,
    user_id: str,
    session_id: str,
    create_time: float,
    update_time: float,
    incarnation: str,
    revision: int = 0,
) -> None:
    """Insert a session row; raises ``sqlalchemy.exc.IntegrityError`` if it exists."""
    await conn.execute(
        insert(sessions).values(
            app_name=app_name,
            user_id=user_id,
            id=session_id,
            revision=revision,
            create_time=create_time,
            update_time=update_time,
            incarnation=incarnation,
        )
    )


async def session_revision(
    conn: AsyncConnection, *, app_name: str, user_id: str, session_id: str
) -> int | None:
    """The stored revision, or ``None`` when the session does not exist."""
    result = await conn.execute(
        select(sessions.c.revision).where(session_key(app_name, user_id, session_id))
    )
    revision: int | None = result.scalar_one_or_none()
    return revision


async def insert_events(conn: AsyncConnection, rows: Sequence[dict[str, Any]]) -> None:
    """Insert many event rows (columns of ``sqlstore_events``) in batches."""
    for chunk in chunks(rows):
        await conn.execute(insert(events), list(chunk))


async def write_state(
    conn: AsyncConnection,
    *,
    app_name: str,
    user_id: str,
    session_id: str,
    app: Mapping[str, str],
    user: Mapping[str, str],
    session: Mapping[str, str],
    now: float,
) -> None:
    """Upsert state keys, each value already encoded as JSON text.

    One key is one row, so writers of different keys never overwrite each other.
    Keys are written in sorted order, session then user then app, so that two
    transactions touching the same rows lock them in the same order.
    """
    dialect = conn.dialect
    rows: list[dict[str, Any]]
    if session:
        rows = [
            {
                "app_name": app_name,
                "user_id": user_id,
                "session_id": session_id,
                "key": k,
                "value": session[k],
            }
            for k in sorted(session)
        ]
        stmt = upsert(
            dialect,
            session_state,
            key=("app_name", "user_id", "session_id", "key"),
            update=("value",),
        )
        await conn.execute(stmt, rows)
    if user:
        rows = [
            {
                "app_name": app_name,
                "user_id": user_id,
                "key": k,
                "value": user[k],
                "update_time": now,
            }
            for k in sorted(user)
        ]
        stmt = upsert(
            dialect, user_state, key=("app_name", "user_id", "key"), update=("value", "update_time")
        )
        await conn.execute(stmt, rows)
    if app:
        rows = [
            {"app_name": app_name, "key": k, "value": app[k], "update_time": now}
            for k in sorted(app)
        ]
        stmt = upsert(dialect, app_state, key=("app_name", "key"), update=("value", "update_time"))
        await conn.execute(stmt, rows)


async def load_session(
    conn: AsyncConnection, *, app_name: str, user_id: str, session_id: str
) -> SessionRow | None:
    """The session row, or ``None``."""
    result = await conn.execute(
        select(sessions.c.revision, sessions.c.update_time, sessions.c.incarnation).where(
            session_key(app_name, user_id, session_id)
        )
    )
    row = result.first()
    if row is None:
        return None
    return SessionRow(app_name, user_id, session_id, row.revision, row.update_time, row.incarnation)


async def load_event_data(
    conn: AsyncConnection, *, app_name: str, user_id: str, session_id: str, event_id: str
) -> str | None:
    """The stored JSON of the session's event ``event_id``, or ``None``."""
    result = await conn.execute(
        select(events.c.data).where(
            _of_session(events, app_name, user_id, session_id), events.c.id == event_id
        )
    )
    return result.scalar_one_or_none()


async def lock_session(
    conn: AsyncConnection, *, app_name: str, user_id: str, session_id: str
) -> tuple[str, int] | None:
    """The stored (incarnation, revision) of a session, its row locked against appends
    and deletion until the transaction ends (PostgreSQL: FOR SHARE; SQLite: the
    caller's write transaction); ``None`` when the session does not exist."""
    result = await conn.execute(
        select(sessions.c.incarnation, sessions.c.revision)
        .where(session_key(app_name, user_id, session_id))
        .with_for_update(read=True)
    )
    row = result.first()
    return None if row is None else (str(row.incarnation), int(row.revision))


async def load_states(
    conn: AsyncConnection, *, app_name: str, user_id: str, session_id: str
) -> ScopeStates:
    """App, user and session state in one round trip."""
    stmt = union_all(
        select(literal(0).label("scope"), app_state.c.key, app_state.c.value).where(
            app_state.c.app_name == app_name
        ),
        select(literal(1).label("scope"), user_state.c.key, user_state.c.value).where(
            user_state.c.app_name == app_name, user_state.c.user_id == user_id
        ),
        select(literal(2).label("scope"), session_state.c.key, session_state.c.value).where(
            session_state.c.app_name == app_name,
            session_state.c.user_id == user_id,
            session_state.c.session_id == session_id,
        ),
    )
    states = ScopeStates({}, {}, {})
    scopes = (states.app, states.user, states.session)
    for scope, key, value in (await conn.execute(stmt)).all():
        scopes[scope][key] = json.loads(value)
    return states


async def load_app_state(conn: AsyncConnection, *, app_name: str) -> dict[str, Any]:
    """The app's state, un-prefixed keys."""
    stmt = select(app_state.c.key, app_state.c.value).where(app_state.c.app_name == app_name)
    return {key: json.loads(value) for key, value in (await conn.execute(stmt)).all()}


async def load_user_states(
    conn: AsyncConnection, *, app_name: str, user_id: str | None
) -> dict[str, dict[str, Any]]:
    """User state by user id: of one user, or of every user of the app (``None``)."""
    stmt = select(user_state.c.user_id, user_state.c.key, user_state.c.value).where(
        user_state.c.app_name == app_name
    )
    if user_id is not None:
        stmt = stmt.where(user_state.c.user_id == user_id)
    users: dict[str, dict[str, Any]] = {}
    for uid, key, value in (await conn.execute(stmt)).all():
        users.setdefault(uid, {})[key] = json.loads(value)
    return users


async def delete_session(
    conn: AsyncConnection,
    *,
    app_name: str,
    user_id: str,
    session_id: str,
    ingestion_record: bool = True,
) -> bool:
    """Delete a session with its events, session state and (``ingestion_record``) its
    memory ingestion record (its memories stay: they are the user's); True if it
    existed. The session row is locked first (lock order: the session, then its rows),
    so that an append or an ingestion of it under way commits first or then finds it
    gone; the caller holds the user lock (``"exclusive"``: the ingestion record is a
    memory table's, and comes after user and app state in the lock order: a caller
    that writes those next deletes it last, :func:`delete_ingestion_record`)."""
    where = session_key(app_name, user_id, session_id)
    await conn.execute(select(sessions.c.revision).where(where).with_for_update())
    for table in (events, session_state):
        await conn.execute(delete(table).where(_of_session(table, app_name, user_id, session_id)))
    result = await conn.execute(delete(sessions).where(where))
    if ingestion_record:
        await delete_ingestion_record(
            conn, app_name=app_name, user_id=user_id, session_id=session_id
        )
    return bool(result.rowcount)


async def delete_ingestion_record(
    conn: AsyncConnection, *, app_name: str, user_id: str, session_id: str
) -> None:
    """Forget which revision of a session memory holds, and how far generation went
    (the session was deleted or replaced: the idle job ingests a session of that id
    again, and its generation starts from its first event, its failed attempts
    forgotten)."""
    for table in (memory_ingestions, fact_sources):
        await conn.execute(delete(table).where(_of_session(table, app_name, user_id, session_id)))


def _of_session(table: Any, app_name: str, user_id: str, session_id: str) -> Any:
    return and_(
        table.c.app_name == app_name,
        table.c.user_id == user_id,
        table.c.session_id == session_id,
    )
