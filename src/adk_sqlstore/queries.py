"""Every SQL statement of the session store, in one place.

Functions take an open connection (inside the caller's transaction) and plain values,
and return plain values. Nothing here validates, builds models or decides what an
outcome means; :mod:`adk_sqlstore.sessions` does that. Every statement filters by
``(app_name, user_id)`` itself.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, and_, delete, insert, literal, select, union_all, update
from sqlalchemy.ext.asyncio import AsyncConnection

from .dialect import upsert
from .schema import app_state, events, session_state, sessions, user_state

__all__ = [
    "ScopeStates",
    "SessionRow",
    "bump_revision",
    "delete_session",
    "insert_event",
    "insert_session",
    "list_sessions",
    "load_app_state",
    "load_events",
    "load_session",
    "load_states",
    "load_user_states",
    "session_revision",
    "write_state",
]

# Rows per multi-row INSERT: far below SQLite's 32,766 bound parameters.
_CHUNK = 500


@dataclass
class SessionRow:
    app_name: str
    user_id: str
    id: str
    revision: int
    update_time: float


@dataclass
class ScopeStates:
    """Decoded state of the three scopes, un-prefixed keys."""

    app: dict[str, Any]
    user: dict[str, Any]
    session: dict[str, Any]


def _session_key(app_name: str, user_id: str, session_id: str) -> ColumnElement[bool]:
    return and_(
        sessions.c.app_name == app_name,
        sessions.c.user_id == user_id,
        sessions.c.id == session_id,
    )


def _chunks(rows: Sequence[dict[str, Any]]) -> Iterable[Sequence[dict[str, Any]]]:
    for start in range(0, len(rows), _CHUNK):
        yield rows[start : start + _CHUNK]


async def insert_session(
    conn: AsyncConnection,
    *,
    app_name: str,
    user_id: str,
    session_id: str,
    create_time: float,
    update_time: float,
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
        )
    )


async def bump_revision(
    conn: AsyncConnection,
    *,
    app_name: str,
    user_id: str,
    session_id: str,
    expected_revision: int,
    update_time: float,
) -> int | None:
    """Add one to the session's revision if it still equals ``expected_revision``.

    Returns the new revision, or ``None`` when no row matched (stale or absent).
    On PostgreSQL the row stays locked until the transaction ends, so concurrent
    appenders queue here and then find the revision moved.
    """
    result = await conn.execute(
        update(sessions)
        .where(
            _session_key(app_name, user_id, session_id),
            sessions.c.revision == expected_revision,
        )
        .values(revision=sessions.c.revision + 1, update_time=update_time)
        .returning(sessions.c.revision)
    )
    revision: int | None = result.scalar_one_or_none()
    return revision


async def session_revision(
    conn: AsyncConnection, *, app_name: str, user_id: str, session_id: str
) -> int | None:
    """The stored revision, or ``None`` when the session does not exist."""
    result = await conn.execute(
        select(sessions.c.revision).where(_session_key(app_name, user_id, session_id))
    )
    revision: int | None = result.scalar_one_or_none()
    return revision


async def insert_event(
    conn: AsyncConnection,
    *,
    app_name: str,
    user_id: str,
    session_id: str,
    seq: int,
    event_id: str,
    invocation_id: str,
    author: str,
    timestamp: float,
    data: str,
) -> None:
    """Insert one event; raises ``IntegrityError`` if its id is taken in the session."""
    await conn.execute(
        insert(events).values(
            app_name=app_name,
            user_id=user_id,
            session_id=session_id,
            seq=seq,
            id=event_id,
            invocation_id=invocation_id,
            author=author,
            timestamp=timestamp,
            data=data,
        )
    )


async def insert_events(conn: AsyncConnection, rows: Sequence[dict[str, Any]]) -> None:
    """Insert many event rows (columns of ``sqlstore_events``) in batches."""
    for chunk in _chunks(rows):
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
        for chunk in _chunks(rows):
            await conn.execute(
                upsert(
                    dialect,
                    session_state,
                    chunk,
                    key=("app_name", "user_id", "session_id", "key"),
                    update=("value",),
                )
            )
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
        for chunk in _chunks(rows):
            await conn.execute(
                upsert(
                    dialect,
                    user_state,
                    chunk,
                    key=("app_name", "user_id", "key"),
                    update=("value", "update_time"),
                )
            )
    if app:
        rows = [
            {"app_name": app_name, "key": k, "value": app[k], "update_time": now}
            for k in sorted(app)
        ]
        for chunk in _chunks(rows):
            await conn.execute(
                upsert(
                    dialect,
                    app_state,
                    chunk,
                    key=("app_name", "key"),
                    update=("value", "update_time"),
                )
            )


async def load_session(
    conn: AsyncConnection, *, app_name: str, user_id: str, session_id: str
) -> SessionRow | None:
    """The session row, or ``None``."""
    result = await conn.execute(
        select(sessions.c.revision, sessions.c.update_time).where(
            _session_key(app_name, user_id, session_id)
        )
    )
    row = result.first()
    if row is None:
        return None
    return SessionRow(app_name, user_id, session_id, row.revision, row.update_time)


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


async def load_events(
    conn: AsyncConnection,
    *,
    app_name: str,
    user_id: str,
    session_id: str,
    num_recent_events: int | None = None,
    after_timestamp: float | None = None,
) -> list[str]:
    """The events' JSON texts in append order (oldest first).

    Args:
        num_recent_events: keep only the newest N (the query reads N rows, not the
            whole history).
        after_timestamp: keep only events with ``timestamp >= after_timestamp``.
    """
    stmt = select(events.c.data).where(
        events.c.app_name == app_name,
        events.c.user_id == user_id,
        events.c.session_id == session_id,
    )
    if after_timestamp is not None:
        stmt = stmt.where(events.c.timestamp >= after_timestamp)
    if num_recent_events is None:
        rows = (await conn.execute(stmt.order_by(events.c.seq))).scalars().all()
        return list(rows)
    stmt = stmt.order_by(events.c.seq.desc()).limit(num_recent_events)
    rows = (await conn.execute(stmt)).scalars().all()
    return list(reversed(rows))


async def list_sessions(
    conn: AsyncConnection, *, app_name: str, user_id: str | None
) -> tuple[list[SessionRow], dict[tuple[str, str], dict[str, Any]]]:
    """Session rows ordered by (update_time, user_id, id), and their session state."""
    stmt = select(
        sessions.c.user_id, sessions.c.id, sessions.c.revision, sessions.c.update_time
    ).where(sessions.c.app_name == app_name)
    state_stmt = select(
        session_state.c.user_id,
        session_state.c.session_id,
        session_state.c.key,
        session_state.c.value,
    ).where(session_state.c.app_name == app_name)
    if user_id is not None:
        stmt = stmt.where(sessions.c.user_id == user_id)
        state_stmt = state_stmt.where(session_state.c.user_id == user_id)
    stmt = stmt.order_by(sessions.c.update_time, sessions.c.user_id, sessions.c.id)
    rows = [
        SessionRow(app_name, uid, sid, revision, update_time)
        for uid, sid, revision, update_time in (await conn.execute(stmt)).all()
    ]
    states: dict[tuple[str, str], dict[str, Any]] = {}
    for uid, sid, key, value in (await conn.execute(state_stmt)).all():
        states.setdefault((uid, sid), {})[key] = json.loads(value)
    return rows, states


async def delete_session(
    conn: AsyncConnection, *, app_name: str, user_id: str, session_id: str
) -> bool:
    """Delete a session with its events and session state; True if it existed."""
    for table in (events, session_state):
        await conn.execute(
            delete(table).where(
                table.c.app_name == app_name,
                table.c.user_id == user_id,
                table.c.session_id == session_id,
            )
        )
    result = await conn.execute(delete(sessions).where(_session_key(app_name, user_id, session_id)))
    return bool(result.rowcount)
