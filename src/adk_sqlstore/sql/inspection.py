"""Statements of the memory inspector (:mod:`adk_sqlstore.inspector`): what its pages
show, one page of rows at a time.

Every statement but :func:`apps` names ``app_name`` in its ``WHERE``, and every one of
a user's rows names ``(app_name, user_id)`` too: a page of one user reads nothing of
another. Lists are read a page at a time by keyset (``after``: the last row's key of
the page before), never by offset and never whole, so that a page costs the same on
a user of ten memories and of a hundred thousand. Times are seconds since the epoch,
UTC.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, exists, func, literal, or_, select
from sqlalchemy.ext.asyncio import AsyncConnection

from ..schema import (
    app_state,
    artifacts,
    events,
    fact_revisions,
    fact_sources,
    facts,
    memories,
    memory_stats,
    sessions,
    user_state,
    users,
)

__all__ = [
    "AppCounts",
    "UserCounts",
    "activity",
    "app_counts",
    "apps",
    "artifact_versions",
    "event_page",
    "event_position",
    "fact_page",
    "facts_of_session",
    "generation_source",
    "memory_page",
    "revisions_from_session",
    "session_page",
    "session_row",
    "state_deltas",
    "states",
    "user_counts",
    "user_page",
]

DAY = 86400.0


@dataclass(frozen=True)
class AppCounts:
    """An app's users, sessions, memories and current facts, and its last activity
    (the newest session's ``update_time``; ``None``: no session)."""

    app_name: str
    users: int
    sessions: int
    memories: int
    facts: int
    last_activity: float | None


@dataclass(frozen=True)
class UserCounts:
    """A user's sessions, memories and current facts, and last activity."""

    user_id: str
    sessions: int
    memories: int
    facts: int
    last_activity: float | None


def _current(now: float) -> Any:
    return and_(
        facts.c.invalid_at.is_(None),
        facts.c.invalidate_time.is_(None),
        or_(facts.c.expire_at.is_(None), facts.c.expire_at > now),
    )


async def apps(conn: AsyncConnection, *, after: str | None, limit: int) -> list[str]:
    """App names (of the users table: every app that holds anything), in order, after
    ``after``."""
    stmt = select(users.c.app_name).distinct().order_by(users.c.app_name).limit(limit)
    if after is not None:
        stmt = stmt.where(users.c.app_name > after)
    return [r[0] for r in (await conn.execute(stmt)).all()]


async def app_counts(conn: AsyncConnection, *, app_name: str, now: float) -> AppCounts:
    """The counts of one app (each read by the app's key prefix)."""
    on = users.c.app_name == app_name
    user_count = select(func.count()).select_from(users).where(on)
    session_count = select(func.count(), func.max(sessions.c.update_time)).where(
        sessions.c.app_name == app_name
    )
    memory_count = select(func.coalesce(func.sum(memory_stats.c.doc_count), 0)).where(
        memory_stats.c.app_name == app_name
    )
    fact_count = (
        select(func.count()).select_from(facts).where(facts.c.app_name == app_name, _current(now))
    )
    n_users = (await conn.execute(user_count)).scalar_one()
    n_sessions, last = (await conn.execute(session_count)).one()
    n_memories = (await conn.execute(memory_count)).scalar_one()
    n_facts = (await conn.execute(fact_count)).scalar_one()
    return AppCounts(app_name, n_users, n_sessions, int(n_memories), n_facts, last)


async def activity(
    conn: AsyncConnection, *, app_name: str, user_id: str | None, since: float
) -> dict[int, int]:
    """Events per day (day number since the epoch, UTC: event count) since ``since``,
    of an app or of one of its users."""
    day = func.floor(events.c.timestamp / DAY)
    stmt = select(day, func.count()).where(
        events.c.app_name == app_name, events.c.timestamp >= since
    )
    if user_id is not None:
        stmt = stmt.where(events.c.user_id == user_id)
    rows = (await conn.execute(stmt.group_by(day))).all()
    return {int(d): int(n) for d, n in rows}


async def user_page(
    conn: AsyncConnection, *, app_name: str, prefix: str, after: str | None, limit: int
) -> list[str]:
    """User ids of the app starting with ``prefix``, in order, after ``after``."""
    stmt = select(users.c.user_id).where(users.c.app_name == app_name)
    if prefix:
        stmt = stmt.where(users.c.user_id >= prefix, users.c.user_id < prefix + "\U0010ffff")
    if after is not None:
        stmt = stmt.where(users.c.user_id > after)
    stmt = stmt.order_by(users.c.user_id).limit(limit)
    return [r[0] for r in (await conn.execute(stmt)).all()]


async def user_counts(
    conn: AsyncConnection, *, app_name: str, user_ids: Sequence[str], now: float
) -> dict[str, UserCounts]:
    """The counts of some users of an app (``{}`` for none; unknown ids are left out)."""
    if not user_ids:
        return {}
    out: dict[str, UserCounts] = {}
    for user_id in user_ids:
        key_s = and_(sessions.c.app_name == app_name, sessions.c.user_id == user_id)
        n_sessions, last = (
            await conn.execute(select(func.count(), func.max(sessions.c.update_time)).where(key_s))
        ).one()
        n_memories = (
            await conn.execute(
                select(memory_stats.c.doc_count).where(
                    memory_stats.c.app_name == app_name, memory_stats.c.user_id == user_id
                )
            )
        ).scalar()
        n_facts = (
            await conn.execute(
                select(func.count())
                .select_from(facts)
                .where(facts.c.app_name == app_name, facts.c.user_id == user_id, _current(now))
            )
        ).scalar_one()
        out[user_id] = UserCounts(user_id, n_sessions, int(n_memories or 0), n_facts, last)
    return out


async def session_page(
    conn: AsyncConnection,
    *,
    app_name: str,
    user_id: str,
    after: tuple[float, str] | None,
    limit: int,
) -> list[Any]:
    """A user's sessions, the most recently updated first (rows: ``id``,
    ``create_time``, ``update_time``, ``revision``), after the key ``(update_time,
    id)`` of the page before."""
    c = sessions.c
    stmt = select(c.id, c.create_time, c.update_time, c.revision).where(
        c.app_name == app_name, c.user_id == user_id
    )
    if after is not None:
        stmt = stmt.where(
            or_(c.update_time < after[0], and_(c.update_time == after[0], c.id > after[1]))
        )
    stmt = stmt.order_by(c.update_time.desc(), c.id).limit(limit)
    return list((await conn.execute(stmt)).all())


async def session_row(
    conn: AsyncConnection, *, app_name: str, user_id: str, session_id: str
) -> Any | None:
    """One session's row (``id``, ``create_time``, ``update_time``, ``revision``), or
    ``None``."""
    c = sessions.c
    stmt = select(c.id, c.create_time, c.update_time, c.revision, c.incarnation).where(
        c.app_name == app_name, c.user_id == user_id, c.id == session_id
    )
    return (await conn.execute(stmt)).first()


async def event_page(
    conn: AsyncConnection,
    *,
    app_name: str,
    user_id: str,
    session_id: str,
    after: int,
    limit: int,
) -> list[tuple[int, dict[str, Any]]]:
    """A session's events in append order after position ``after`` (``seq``, from 1):
    ``(seq, event as stored)``."""
    c = events.c
    stmt = (
        select(c.seq, c.data)
        .where(c.app_name == app_name, c.user_id == user_id, c.session_id == session_id)
        .where(c.seq > after)
        .order_by(c.seq)
        .limit(limit)
    )
    return [(int(seq), json.loads(data)) for seq, data in (await conn.execute(stmt)).all()]


async def event_position(
    conn: AsyncConnection, *, app_name: str, user_id: str, session_id: str, event_id: str
) -> int | None:
    """The position (``seq``) of an event of a session, by its id; ``None``: none."""
    c = events.c
    stmt = select(c.seq).where(
        c.app_name == app_name, c.user_id == user_id, c.session_id == session_id, c.id == event_id
    )
    found = (await conn.execute(stmt)).scalar()
    return None if found is None else int(found)


async def state_deltas(
    conn: AsyncConnection, *, app_name: str, user_id: str, session_id: str, through: int
) -> list[dict[str, Any]]:
    """The ``actions.state_delta`` of a session's events up to position ``through``,
    in order: only the events whose stored JSON holds a delta that is not empty are
    read (the store writes events as compact JSON)."""
    c = events.c
    stmt = (
        select(c.data)
        .where(c.app_name == app_name, c.user_id == user_id, c.session_id == session_id)
        .where(c.seq <= through, c.data.contains('"state_delta":{"', autoescape=True))
        .order_by(c.seq)
    )
    out = []
    for (data,) in (await conn.execute(stmt)).all():
        delta = (json.loads(data).get("actions") or {}).get("state_delta")
        if isinstance(delta, dict) and delta:
            out.append(delta)
    return out


async def states(
    conn: AsyncConnection, *, app_name: str, user_id: str, limit: int
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The user's state and the app's state (keys un-prefixed, values decoded), at
    most ``limit`` keys of each, in key order."""
    out = []
    for table, where in (
        (user_state, and_(user_state.c.app_name == app_name, user_state.c.user_id == user_id)),
        (app_state, app_state.c.app_name == app_name),
    ):
        stmt = select(table.c.key, table.c.value).where(where).order_by(table.c.key).limit(limit)
        out.append({k: json.loads(v) for k, v in (await conn.execute(stmt)).all()})
    return out[0], out[1]


async def fact_page(
    conn: AsyncConnection,
    *,
    app_name: str,
    user_id: str,
    now: float,
    history: bool,
    topic: str | None,
    after: tuple[float, str] | None,
    limit: int,
) -> list[Any]:
    """A user's facts (current; with ``history`` all), the most recently changed
    first, optionally under one topic, after the key ``(update_time, id)``."""
    c = facts.c
    stmt = select(facts).where(c.app_name == app_name, c.user_id == user_id)
    if not history:
        stmt = stmt.where(_current(now))
    if topic:
        stmt = stmt.where(c.topics.contains(json.dumps(topic), autoescape=True))
    if after is not None:
        stmt = stmt.where(
            or_(c.update_time < after[0], and_(c.update_time == after[0], c.id > after[1]))
        )
    stmt = stmt.order_by(c.update_time.desc(), c.id).limit(limit)
    rows = list((await conn.execute(stmt)).all())
    if topic:  # contains() matched the JSON text: keep those really under it
        rows = [r for r in rows if topic in json.loads(r.topics)]
    return rows


async def memory_page(
    conn: AsyncConnection,
    *,
    app_name: str,
    user_id: str,
    kind: str | None,
    session_id: str | None,
    after: int | None,
    limit: int,
) -> list[Any]:
    """A user's memories, the most recently stored first (by ``pk``), of ``kind``
    (``"facts"``: generated facts' memories; ``"turns"``: the rest; ``None``: both),
    optionally of one session, after ``pk`` ``after``."""
    m = memories.c
    stmt = select(
        m.pk, m.id, m.session_id, m.event_id, m.author, m.timestamp, m.text, m.custom_metadata
    ).where(m.app_name == app_name, m.user_id == user_id)
    if session_id is not None:
        stmt = stmt.where(m.session_id == session_id)
    if kind is not None:
        is_fact = exists(
            select(literal(1)).where(
                facts.c.app_name == m.app_name, facts.c.user_id == m.user_id, facts.c.id == m.id
            )
        )
        stmt = stmt.where(is_fact if kind == "facts" else ~is_fact)
    if after is not None:
        stmt = stmt.where(m.pk < after)
    stmt = stmt.order_by(m.pk.desc()).limit(limit)
    return list((await conn.execute(stmt)).all())


async def facts_of_session(
    conn: AsyncConnection, *, app_name: str, user_id: str, session_id: str, limit: int
) -> list[Any]:
    """Facts whose text comes from a session (current or not), newest change first."""
    c = facts.c
    stmt = (
        select(facts)
        .where(c.app_name == app_name, c.user_id == user_id, c.session_id == session_id)
        .order_by(c.update_time.desc(), c.id)
        .limit(limit)
    )
    return list((await conn.execute(stmt)).all())


async def generation_source(
    conn: AsyncConnection, *, app_name: str, user_id: str, session_id: str
) -> Any | None:
    """The session's generation watermark row (``sqlstore_fact_sources``), or ``None``."""
    c = fact_sources.c
    stmt = select(fact_sources).where(
        c.app_name == app_name, c.user_id == user_id, c.session_id == session_id
    )
    return (await conn.execute(stmt)).first()


async def artifact_versions(
    conn: AsyncConnection,
    *,
    app_name: str,
    user_id: str,
    session_id: str | None,
    after: tuple[str, str, int] | None,
    limit: int,
) -> list[Any]:
    """A user's artifact versions (of one session, ``""`` for the user's own; ``None``:
    all), by ``(session_id, filename, version)`` after ``after``: ``session_id``,
    ``filename``, ``version``, ``mime_type``, ``size``, ``create_time``."""
    c = artifacts.c
    stmt = select(c.session_id, c.filename, c.version, c.mime_type, c.size, c.create_time).where(
        c.app_name == app_name, c.user_id == user_id
    )
    if session_id is not None:
        stmt = stmt.where(c.session_id == session_id)
    if after is not None:
        s, f, v = after
        stmt = stmt.where(
            or_(
                c.session_id > s,
                and_(c.session_id == s, c.filename > f),
                and_(c.session_id == s, c.filename == f, c.version > v),
            )
        )
    stmt = stmt.order_by(c.session_id, c.filename, c.version).limit(limit)
    return list((await conn.execute(stmt)).all())


async def revisions_from_session(
    conn: AsyncConnection, *, app_name: str, user_id: str, session_id: str, limit: int
) -> list[Any]:
    """Fact revisions made from a session's events, newest first."""
    c = fact_revisions.c
    stmt = (
        select(fact_revisions)
        .where(c.app_name == app_name, c.user_id == user_id, c.session_id == session_id)
        .order_by(c.create_time.desc(), c.fact_id, c.revision)
        .limit(limit)
    )
    return list((await conn.execute(stmt)).all())
