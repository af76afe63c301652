"""Statements of memory generation: facts, their revisions, the per-session watermark
and the per-user lease (tables of migration 0012, :mod:`adk_sqlstore.schema`).

Every statement names ``(app_name, user_id)`` in its ``WHERE`` (or its row, for an
insert). Writers hold the user lock in ``"exclusive"`` mode (:mod:`.users`): one
writer of a user's facts at a time on every backend, so reads followed by writes in
one transaction need no upsert syntax of their own.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, delete, insert, or_, select, tuple_, update
from sqlalchemy.ext.asyncio import AsyncConnection

from ..schema import fact_leases, fact_revisions, fact_sources, facts, memories, sessions
from .constructs import chunks

__all__ = [
    "FactRow",
    "Revision",
    "Source",
    "added_memories",
    "all_revisions",
    "all_sources",
    "current_facts",
    "delete_facts",
    "fact_history",
    "holds_lease",
    "insert_revisions",
    "list_facts",
    "pending_sessions",
    "read_source",
    "release_lease",
    "take_lease",
    "users_with_added_memories",
    "write_fact",
    "write_source",
]


@dataclass
class FactRow:
    """A row of ``sqlstore_facts`` (times in seconds since the epoch, UTC)."""

    id: str
    text: str
    topics: list[str]
    valid_from: float | None
    invalid_at: float | None
    expire_at: float | None
    session_id: str | None
    event_ids: list[str]
    revision_count: int
    create_time: float
    update_time: float

    @classmethod
    def of(cls, row: Any) -> FactRow:
        return cls(
            id=row.id,
            text=row.text,
            topics=list(json.loads(row.topics)),
            valid_from=row.valid_from,
            invalid_at=row.invalid_at,
            expire_at=row.expire_at,
            session_id=row.session_id,
            event_ids=list(json.loads(row.event_ids)),
            revision_count=int(row.revision_count),
            create_time=float(row.create_time),
            update_time=float(row.update_time),
        )

    def values(self) -> dict[str, Any]:
        """The row's columns but the user's, JSON columns as JSON text."""
        return {
            **self.__dict__,
            "topics": json.dumps(self.topics, ensure_ascii=False),
            "event_ids": json.dumps(self.event_ids),
        }


@dataclass
class Revision:
    """A row of ``sqlstore_fact_revisions``: one change of a fact (``action``:
    ``create``, ``update``, ``invalidate``, ``expire`` or ``import``)."""

    fact_id: str
    revision: int
    action: str
    old_text: str | None
    new_text: str | None
    session_id: str | None
    event_ids: list[str]
    model: str | None
    create_time: float

    @classmethod
    def of(cls, row: Any) -> Revision:
        return cls(
            fact_id=row.fact_id,
            revision=int(row.revision),
            action=row.action,
            old_text=row.old_text,
            new_text=row.new_text,
            session_id=row.session_id,
            event_ids=list(json.loads(row.event_ids)),
            model=row.model,
            create_time=float(row.create_time),
        )


@dataclass
class Source:
    """A session's generation record: events processed and failed attempts since."""

    event_count: int
    attempts: int
    error: str | None


def _user(table: Any, app_name: str, user_id: str) -> list[Any]:
    return [table.c.app_name == app_name, table.c.user_id == user_id]


def _current(now: float) -> list[Any]:
    return [
        facts.c.invalid_at.is_(None),
        or_(facts.c.expire_at.is_(None), facts.c.expire_at > now),
    ]


async def take_lease(
    conn: AsyncConnection, *, app_name: str, user_id: str, holder: str, until: float, now: float
) -> str:
    """Make ``holder`` the user's generator until ``until`` if no other holds an
    unexpired lease; returns who holds it now (``holder``, or the other). The caller
    holds the user lock."""
    where = _user(fact_leases, app_name, user_id)
    found = (await conn.execute(select(fact_leases).where(*where))).first()
    if found is None:
        row = {"app_name": app_name, "user_id": user_id, "holder": holder, "lease_until": until}
        await conn.execute(insert(fact_leases).values(row))
        return holder
    if found.holder != holder and found.lease_until > now:
        return str(found.holder)
    values = {"holder": holder, "lease_until": until}
    await conn.execute(update(fact_leases).where(*where).values(values))
    return holder


async def holds_lease(conn: AsyncConnection, *, app_name: str, user_id: str, holder: str) -> bool:
    """Whether ``holder`` holds the user's lease (expired or not: no other took it)."""
    where = [*_user(fact_leases, app_name, user_id), fact_leases.c.holder == holder]
    return (await conn.execute(select(fact_leases.c.holder).where(*where))).first() is not None


async def release_lease(conn: AsyncConnection, *, app_name: str, user_id: str, holder: str) -> bool:
    """End ``holder``'s lease of the user; whether it still held it."""
    where = [*_user(fact_leases, app_name, user_id), fact_leases.c.holder == holder]
    return int((await conn.execute(delete(fact_leases).where(*where))).rowcount) > 0


async def read_source(
    conn: AsyncConnection, *, app_name: str, user_id: str, session_id: str
) -> Source | None:
    """The session's generation record, or ``None`` before its first run."""
    where = [*_user(fact_sources, app_name, user_id), fact_sources.c.session_id == session_id]
    columns = (fact_sources.c.event_count, fact_sources.c.attempts, fact_sources.c.error)
    found = (await conn.execute(select(*columns).where(*where))).first()
    return None if found is None else Source(int(found[0]), int(found[1]), found[2])


async def write_source(
    conn: AsyncConnection,
    *,
    app_name: str,
    user_id: str,
    session_id: str,
    source: Source,
    now: float,
) -> None:
    """Store the session's generation record (made if absent)."""
    where = [*_user(fact_sources, app_name, user_id), fact_sources.c.session_id == session_id]
    values = {
        "event_count": source.event_count,
        "attempts": source.attempts,
        "error": source.error,
        "update_time": now,
    }
    if (await conn.execute(update(fact_sources).where(*where).values(values))).rowcount:
        return
    key = {"app_name": app_name, "user_id": user_id, "session_id": session_id}
    await conn.execute(insert(fact_sources).values({**key, **values}))


async def current_facts(
    conn: AsyncConnection, *, app_name: str, user_id: str, ids: Sequence[str], now: float
) -> dict[str, FactRow]:
    """The user's current facts among ``ids``, by id."""
    found: dict[str, FactRow] = {}
    for chunk in chunks(list(ids)):
        stmt = select(facts).where(
            *_user(facts, app_name, user_id), facts.c.id.in_(chunk), *_current(now)
        )
        found.update((r.id, FactRow.of(r)) for r in (await conn.execute(stmt)).all())
    return found


async def list_facts(
    conn: AsyncConnection,
    *,
    app_name: str,
    user_id: str,
    now: float,
    history: bool = False,
    limit: int | None = None,
) -> list[FactRow]:
    """The user's current facts (with ``history``, also those no longer current), the
    most recently changed first."""
    stmt = select(facts).where(*_user(facts, app_name, user_id))
    if not history:
        stmt = stmt.where(*_current(now))
    stmt = stmt.order_by(facts.c.update_time.desc(), facts.c.id).limit(limit)
    return [FactRow.of(r) for r in (await conn.execute(stmt)).all()]


async def fact_history(
    conn: AsyncConnection, *, app_name: str, user_id: str, fact_id: str
) -> tuple[FactRow | None, list[Revision]]:
    """One fact (current or not; ``None`` if unknown) and its revisions, oldest first."""
    stmt = select(facts).where(*_user(facts, app_name, user_id), facts.c.id == fact_id)
    found = (await conn.execute(stmt)).first()
    revisions = (
        select(fact_revisions)
        .where(*_user(fact_revisions, app_name, user_id), fact_revisions.c.fact_id == fact_id)
        .order_by(fact_revisions.c.revision)
    )
    rows = (await conn.execute(revisions)).all()
    return (None if found is None else FactRow.of(found)), [Revision.of(r) for r in rows]


async def write_fact(
    conn: AsyncConnection, *, app_name: str, user_id: str, fact: FactRow, new: bool
) -> None:
    """Insert the fact (``new``) or update the stored one of its id."""
    values = fact.values()
    if new:
        await conn.execute(insert(facts).values(app_name=app_name, user_id=user_id, **values))
        return
    key = [*_user(facts, app_name, user_id), facts.c.id == fact.id]
    await conn.execute(update(facts).where(*key).values(values))


async def insert_revisions(
    conn: AsyncConnection, *, app_name: str, user_id: str, revisions: Iterable[Revision]
) -> None:
    """Insert revisions of the user's facts."""
    rows = [
        {
            **r.__dict__,
            "app_name": app_name,
            "user_id": user_id,
            "event_ids": json.dumps(r.event_ids),
        }
        for r in revisions
    ]
    if rows:
        await conn.execute(insert(fact_revisions), rows)


async def delete_facts(
    conn: AsyncConnection,
    *,
    app_name: str,
    user_id: str,
    ids: Sequence[str] | None = None,
    session_id: str | None = None,
) -> list[str]:
    """Delete the user's facts (all of them; those of ``ids``; those last revised from
    ``session_id``, with that session's generation record; both filters combine) and
    their revisions; returns the ids of the facts deleted. Their memories are the
    caller's to delete."""
    conditions = _user(facts, app_name, user_id)
    if session_id is not None:
        conditions.append(facts.c.session_id == session_id)
        if ids is None:
            sources = [
                *_user(fact_sources, app_name, user_id),
                fact_sources.c.session_id == session_id,
            ]
            await conn.execute(delete(fact_sources).where(*sources))
    elif ids is None:
        await conn.execute(delete(fact_sources).where(*_user(fact_sources, app_name, user_id)))
    found: list[str] = []
    for chunk in [None] if ids is None else chunks(list(ids)):
        where = conditions if chunk is None else [*conditions, facts.c.id.in_(chunk)]
        found += [str(r[0]) for r in (await conn.execute(select(facts.c.id).where(*where)))]
    for chunk in chunks(found):
        revisions = [*_user(fact_revisions, app_name, user_id), fact_revisions.c.fact_id.in_(chunk)]
        await conn.execute(delete(fact_revisions).where(*revisions))
        await conn.execute(
            delete(facts).where(*_user(facts, app_name, user_id), facts.c.id.in_(chunk))
        )
    return found


async def pending_sessions(
    conn: AsyncConnection,
    *,
    app_name: str | None,
    user_id: str | None,
    max_attempts: int,
    after: tuple[str, str, str] | None,
    limit: int,
    failed: bool | None = False,
) -> list[tuple[str, str, str, int, str | None]]:
    """Sessions with events generation has not processed, in key order after ``after``
    (keyset pagination; an administrative read across users, like the idle job's):
    ``(app_name, user_id, session_id, attempts, error)``; those with fewer than
    ``max_attempts`` failed attempts, or (``failed``) those with as many or more, or
    (``failed`` None) both."""
    f = fact_sources
    stmt = (
        select(sessions.c.app_name, sessions.c.user_id, sessions.c.id, f.c.attempts, f.c.error)
        .outerjoin(
            f,
            and_(
                f.c.app_name == sessions.c.app_name,
                f.c.user_id == sessions.c.user_id,
                f.c.session_id == sessions.c.id,
            ),
        )
        .where(or_(f.c.event_count.is_(None), f.c.event_count < sessions.c.revision))
        .order_by(sessions.c.app_name, sessions.c.user_id, sessions.c.id)
        .limit(limit)
    )
    if failed:
        stmt = stmt.where(f.c.attempts >= max_attempts)
    elif failed is False:
        stmt = stmt.where(or_(f.c.attempts.is_(None), f.c.attempts < max_attempts))
    if app_name is not None:
        stmt = stmt.where(sessions.c.app_name == app_name)
    if user_id is not None:
        stmt = stmt.where(sessions.c.user_id == user_id)
    if after is not None:
        stmt = stmt.where(tuple_(sessions.c.app_name, sessions.c.user_id, sessions.c.id) > after)
    return [(a, u, s, int(n or 0), e) for a, u, s, n, e in (await conn.execute(stmt)).all()]


async def added_memories(conn: AsyncConnection, *, app_name: str, user_id: str) -> list[Any]:
    """The user's memories made by ``add_memory`` (no event, no fact), by id: rows of
    id, session_id, author, timestamp, content, custom_metadata."""
    m = memories
    fact_ids = select(facts.c.id).where(*_user(facts, app_name, user_id))
    stmt = (
        select(m.c.id, m.c.session_id, m.c.author, m.c.timestamp, m.c.content, m.c.custom_metadata)
        .where(*_user(m, app_name, user_id), m.c.event_id.is_(None), m.c.id.not_in(fact_ids))
        .order_by(m.c.id)
    )
    return list((await conn.execute(stmt)).all())


async def all_revisions(
    conn: AsyncConnection, *, app_name: str, user_id: str
) -> dict[str, list[Revision]]:
    """Every revision of the user's facts, by fact id, oldest first."""
    r = fact_revisions
    stmt = select(r).where(*_user(r, app_name, user_id)).order_by(r.c.fact_id, r.c.revision)
    found: dict[str, list[Revision]] = {}
    for row in (await conn.execute(stmt)).all():
        found.setdefault(row.fact_id, []).append(Revision.of(row))
    return found


async def all_sources(conn: AsyncConnection, *, app_name: str, user_id: str) -> list[Any]:
    """The user's generation records: rows of session_id, event_count, attempts,
    error, update_time."""
    f = fact_sources
    columns = (f.c.session_id, f.c.event_count, f.c.attempts, f.c.error, f.c.update_time)
    stmt = select(*columns).where(*_user(f, app_name, user_id)).order_by(f.c.session_id)
    return list((await conn.execute(stmt)).all())


async def users_with_added_memories(conn: AsyncConnection, *, app_name: str) -> list[str]:
    """The users of an app with facts or ``add_memory`` memories (an administrative
    read across the app's users, for exports), in order."""
    with_facts = select(facts.c.user_id).where(facts.c.app_name == app_name)
    added = select(memories.c.user_id).where(
        memories.c.app_name == app_name, memories.c.event_id.is_(None)
    )
    stmt = with_facts.union(added)
    return sorted(str(r[0]) for r in (await conn.execute(stmt)).all())
