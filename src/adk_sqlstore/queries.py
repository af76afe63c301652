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

from sqlalchemy import (
    ColumnElement,
    and_,
    delete,
    func,
    insert,
    literal,
    or_,
    select,
    tuple_,
    union_all,
    update,
)
from sqlalchemy.ext.asyncio import AsyncConnection

from .dialect import upsert
from .schema import (
    app_state,
    events,
    memories,
    memory_ingestions,
    memory_stats,
    session_state,
    sessions,
    user_state,
)

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
    "prune_batch",
    "prune_counts",
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
    incarnation: str


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


async def bump_revision(
    conn: AsyncConnection,
    *,
    app_name: str,
    user_id: str,
    session_id: str,
    expected_revision: int,
    expected_incarnation: str | None,
    update_time: float,
) -> int | None:
    """Add one to the session's revision if it still equals ``expected_revision``
    (and its incarnation ``expected_incarnation``, unless that is ``None``).

    Returns the new revision, or ``None`` when no row matched (stale or absent).
    On PostgreSQL the row stays locked until the transaction ends, so concurrent
    appenders queue here and then find the revision moved.
    """
    stmt = update(sessions).where(
        _session_key(app_name, user_id, session_id), sessions.c.revision == expected_revision
    )
    if expected_incarnation is not None:
        stmt = stmt.where(sessions.c.incarnation == expected_incarnation)
    result = await conn.execute(
        stmt.values(revision=sessions.c.revision + 1, update_time=update_time).returning(
            sessions.c.revision
        )
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
            _session_key(app_name, user_id, session_id)
        )
    )
    row = result.first()
    if row is None:
        return None
    return SessionRow(app_name, user_id, session_id, row.revision, row.update_time, row.incarnation)


async def lock_session(
    conn: AsyncConnection, *, app_name: str, user_id: str, session_id: str
) -> tuple[str, int] | None:
    """The stored (incarnation, revision) of a session, its row locked against appends
    and deletion until the transaction ends (PostgreSQL: FOR SHARE; SQLite: the
    caller's write transaction); ``None`` when the session does not exist."""
    result = await conn.execute(
        select(sessions.c.incarnation, sessions.c.revision)
        .where(_session_key(app_name, user_id, session_id))
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
    conn: AsyncConnection,
    *,
    app_name: str,
    user_id: str | None,
    user_ids: Iterable[str] | None = None,
) -> dict[str, dict[str, Any]]:
    """User state by user id: of one user, of the users in ``user_ids``, or of every
    user of the app (both ``None``)."""
    stmt = select(user_state.c.user_id, user_state.c.key, user_state.c.value).where(
        user_state.c.app_name == app_name
    )
    if user_id is not None:
        stmt = stmt.where(user_state.c.user_id == user_id)
    statements = [stmt]
    if user_ids is not None:
        wanted = sorted(user_ids)
        statements = [
            stmt.where(user_state.c.user_id.in_(wanted[start : start + _CHUNK]))
            for start in range(0, len(wanted), _CHUNK)
        ]
    users: dict[str, dict[str, Any]] = {}
    for statement in statements:
        for uid, key, value in (await conn.execute(statement)).all():
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
    conn: AsyncConnection,
    *,
    app_name: str,
    user_id: str | None,
    after: tuple[float, str, str] | None = None,
    limit: int | None = None,
) -> tuple[list[SessionRow], dict[tuple[str, str], dict[str, Any]]]:
    """Session rows ordered by (update_time, user_id, id), and their session state.

    Args:
        after: keyset pagination: only rows after this (update_time, user_id, id).
        limit: at most this many rows; their session state only is read.
    """
    stmt = select(
        sessions.c.user_id,
        sessions.c.id,
        sessions.c.revision,
        sessions.c.update_time,
        sessions.c.incarnation,
    ).where(sessions.c.app_name == app_name)
    if user_id is not None:
        stmt = stmt.where(sessions.c.user_id == user_id)
    if after is not None:
        stmt = stmt.where(tuple_(sessions.c.update_time, sessions.c.user_id, sessions.c.id) > after)
    stmt = stmt.order_by(sessions.c.update_time, sessions.c.user_id, sessions.c.id)
    if limit is not None:
        stmt = stmt.limit(limit)
    rows = [
        SessionRow(app_name, uid, sid, revision, update_time, incarnation)
        for uid, sid, revision, update_time, incarnation in (await conn.execute(stmt)).all()
    ]
    state_stmt = select(
        session_state.c.user_id,
        session_state.c.session_id,
        session_state.c.key,
        session_state.c.value,
    ).where(session_state.c.app_name == app_name)
    if user_id is not None:
        state_stmt = state_stmt.where(session_state.c.user_id == user_id)
    states: dict[tuple[str, str], dict[str, Any]] = {}
    if limit is None:
        chunks: list[Any] = [state_stmt]
    else:  # one page: the state of its sessions only
        pairs = [(row.user_id, row.id) for row in rows]
        chunks = [
            state_stmt.where(
                tuple_(session_state.c.user_id, session_state.c.session_id).in_(
                    pairs[start : start + _CHUNK]
                )
            )
            for start in range(0, len(pairs), _CHUNK)
        ]
    for chunk in chunks:
        for uid, sid, key, value in (await conn.execute(chunk)).all():
            states.setdefault((uid, sid), {})[key] = json.loads(value)
    return rows, states


async def delete_session(
    conn: AsyncConnection, *, app_name: str, user_id: str, session_id: str
) -> bool:
    """Delete a session with its events, session state and ingestion record (its
    memories stay: they are the user's); True if it existed."""
    for table in (events, session_state, memory_ingestions):
        await conn.execute(
            delete(table).where(
                table.c.app_name == app_name,
                table.c.user_id == user_id,
                table.c.session_id == session_id,
            )
        )
    result = await conn.execute(delete(sessions).where(_session_key(app_name, user_id, session_id)))
    return bool(result.rowcount)


# -- retention ------------------------------------------------------------------------

# Keys per IN list of (app_name, user_id, session_id): 3 bound parameters each.
_KEYS_PER_STATEMENT = 300


def _stale(cutoff: float, app_name: str | None) -> list[ColumnElement[bool]]:
    conditions = [sessions.c.update_time < cutoff]
    if app_name is not None:
        conditions.append(sessions.c.app_name == app_name)
    return conditions


def _pruned_tables(with_memories: bool) -> list[tuple[str, Any]]:
    tables = [
        ("events", events),
        ("session_state_keys", session_state),
        ("memory_ingestions", memory_ingestions),
    ]
    if with_memories:
        tables.append(("memories", memories))
    return tables


async def prune_counts(
    conn: AsyncConnection, *, cutoff: float, app_name: str | None, with_memories: bool
) -> dict[str, int]:
    """Rows :func:`prune_batch` would delete in all, by kind (``sessions``, ...)."""
    stale = (
        select(sessions.c.app_name, sessions.c.user_id, sessions.c.id)
        .where(*_stale(cutoff, app_name))
        .subquery()
    )
    counts = {
        "sessions": int((await conn.execute(select(func.count()).select_from(stale))).scalar_one())
    }
    for name, table in _pruned_tables(with_memories):
        joined = table.join(
            stale,
            and_(
                table.c.app_name == stale.c.app_name,
                table.c.user_id == stale.c.user_id,
                table.c.session_id == stale.c.id,
            ),
        )
        stmt = select(func.count()).select_from(joined)
        counts[name] = int((await conn.execute(stmt)).scalar_one())
    return counts


async def prune_batch(
    conn: AsyncConnection, *, cutoff: float, app_name: str | None, with_memories: bool, limit: int
) -> dict[str, int]:
    """Delete up to ``limit`` sessions last updated before ``cutoff`` (oldest first),
    with their events, session state and ingestion records, and with ``with_memories``
    their memories; returns rows deleted by kind. The sessions are locked while read
    (PostgreSQL: FOR UPDATE; SQLite: the caller's write transaction), so a session
    appended to meanwhile is either kept or its append fails; user and app state are
    never touched."""
    stmt = (
        select(sessions.c.app_name, sessions.c.user_id, sessions.c.id)
        .where(*_stale(cutoff, app_name))
        .order_by(sessions.c.update_time, sessions.c.app_name, sessions.c.user_id, sessions.c.id)
        .limit(limit)
        .with_for_update()
    )
    keys = [tuple(row) for row in (await conn.execute(stmt)).all()]
    counts = {"sessions": 0, **{name: 0 for name, _ in _pruned_tables(with_memories)}}
    for start in range(0, len(keys), _KEYS_PER_STATEMENT):
        chunk = keys[start : start + _KEYS_PER_STATEMENT]
        for name, table in _pruned_tables(with_memories):
            key = tuple_(table.c.app_name, table.c.user_id, table.c.session_id)
            result = await conn.execute(delete(table).where(key.in_(chunk)))
            counts[name] += int(result.rowcount)
        key = tuple_(sessions.c.app_name, sessions.c.user_id, sessions.c.id)
        result = await conn.execute(delete(sessions).where(key.in_(chunk)))
        counts["sessions"] += int(result.rowcount)
    return counts


# -- memory ---------------------------------------------------------------------------

_MEMORY_UPDATABLE = (
    "session_id",
    "event_id",
    "author",
    "timestamp",
    "content",
    "text",
    "token_count",
    "custom_metadata",
    "search_scope",
    "update_time",
)
_MEMORY_COMPARED = ("session_id", "event_id", "author", "timestamp", "content", "custom_metadata")


async def memory_ids_of_session(
    conn: AsyncConnection, *, app_name: str, user_id: str, session_id: str
) -> dict[str, int]:
    """Memory id to row key (``pk``) for the memories of one session."""
    result = await conn.execute(
        select(memories.c.id, memories.c.pk).where(
            memories.c.app_name == app_name,
            memories.c.user_id == user_id,
            memories.c.session_id == session_id,
        )
    )
    return {str(memory_id): int(pk) for memory_id, pk in result.all()}


async def delete_memories_by_pk(
    conn: AsyncConnection, *, app_name: str, user_id: str, pks: Sequence[int]
) -> int:
    """Delete memories of one user by row key; returns how many were deleted."""
    deleted = 0
    for start in range(0, len(pks), _CHUNK):
        result = await conn.execute(
            delete(memories).where(
                memories.c.app_name == app_name,
                memories.c.user_id == user_id,
                memories.c.pk.in_(pks[start : start + _CHUNK]),
            )
        )
        deleted += result.rowcount
    return deleted


async def upsert_memories(conn: AsyncConnection, rows: Sequence[dict[str, Any]]) -> None:
    """Insert memories, or update those whose ``(app_name, user_id, id)`` exists and
    whose content changed (unchanged rows are not rewritten, nor re-indexed)."""
    if not rows:
        return
    stmt = upsert(
        conn.dialect,
        memories,
        key=("app_name", "user_id", "id"),
        update=_MEMORY_UPDATABLE,
        only_if_changed=_MEMORY_COMPARED,
    )
    for chunk in _chunks(rows):
        await conn.execute(stmt, list(chunk))


async def record_ingestion(
    conn: AsyncConnection,
    *,
    app_name: str,
    user_id: str,
    session_id: str,
    revision: int | None,
    event_count: int,
    now: float,
) -> None:
    """Remember which revision of a session memory now holds."""
    stmt = upsert(
        conn.dialect,
        memory_ingestions,
        key=("app_name", "user_id", "session_id"),
        update=("revision", "event_count", "ingest_time"),
    )
    await conn.execute(
        stmt,
        {
            "app_name": app_name,
            "user_id": user_id,
            "session_id": session_id,
            "revision": revision,
            "event_count": event_count,
            "ingest_time": now,
        },
    )


def _idle_filter(cutoff: float, app_name: str | None) -> Any:
    i = memory_ingestions
    stmt = (
        select(sessions.c.app_name, sessions.c.user_id, sessions.c.id)
        .outerjoin(
            i,
            and_(
                i.c.app_name == sessions.c.app_name,
                i.c.user_id == sessions.c.user_id,
                i.c.session_id == sessions.c.id,
            ),
        )
        .where(
            sessions.c.update_time < cutoff,
            sessions.c.revision > 0,
            or_(i.c.revision.is_(None), i.c.revision < sessions.c.revision),
        )
    )
    if app_name is not None:
        stmt = stmt.where(sessions.c.app_name == app_name)
    return stmt


async def idle_sessions(
    conn: AsyncConnection,
    *,
    cutoff: float,
    app_name: str | None,
    after: tuple[str, str, str] | None,
    limit: int,
) -> list[tuple[str, str, str]]:
    """Sessions last updated before ``cutoff`` whose current revision memory does not
    hold yet, as (app_name, user_id, id), in key order after ``after`` (keyset
    pagination: memory use does not grow with the number of sessions)."""
    stmt = (
        _idle_filter(cutoff, app_name)
        .order_by(sessions.c.app_name, sessions.c.user_id, sessions.c.id)
        .limit(limit)
    )
    if after is not None:
        stmt = stmt.where(tuple_(sessions.c.app_name, sessions.c.user_id, sessions.c.id) > after)
    return [(a, u, s) for a, u, s in (await conn.execute(stmt)).all()]


async def count_idle_sessions(conn: AsyncConnection, *, cutoff: float, app_name: str | None) -> int:
    """How many sessions :func:`idle_sessions` would return in all."""
    stmt = select(func.count()).select_from(_idle_filter(cutoff, app_name).subquery())
    return int((await conn.execute(stmt)).scalar_one())


async def delete_memories(
    conn: AsyncConnection,
    *,
    app_name: str,
    user_id: str,
    session_id: str | None = None,
    memory_ids: Sequence[str] | None = None,
) -> int:
    """Delete a user's memories: all, one session's, or by id (both filters combine)."""
    conditions = [memories.c.app_name == app_name, memories.c.user_id == user_id]
    if session_id is not None:
        conditions.append(memories.c.session_id == session_id)
    if memory_ids is None:
        result = await conn.execute(delete(memories).where(*conditions))
        return int(result.rowcount)
    deleted = 0
    ids = list(memory_ids)
    for start in range(0, len(ids), _CHUNK):
        result = await conn.execute(
            delete(memories).where(*conditions, memories.c.id.in_(ids[start : start + _CHUNK]))
        )
        deleted += result.rowcount
    return deleted


async def forget_user(conn: AsyncConnection, *, app_name: str, user_id: str) -> dict[str, int]:
    """Delete everything stored for one user of one app; returns row counts by kind."""
    counts: dict[str, int] = {}
    for name, table in [
        ("events", events),
        ("session_state_keys", session_state),
        ("sessions", sessions),
        ("user_state_keys", user_state),
        ("memories", memories),
        ("memory_ingestions", memory_ingestions),
        ("memory_stats", memory_stats),
    ]:
        result = await conn.execute(
            delete(table).where(table.c.app_name == app_name, table.c.user_id == user_id)
        )
        counts[name] = int(result.rowcount)
    return counts


async def memory_counts(conn: AsyncConnection, *, app_name: str, user_id: str) -> int:
    """How many memories a user has."""
    result = await conn.execute(
        select(func.count())
        .select_from(memories)
        .where(memories.c.app_name == app_name, memories.c.user_id == user_id)
    )
    return int(result.scalar_one())
