"""Statements of generation runs: the per-user lease and the per-session generation
record (the watermark and failed attempts), tables of migrations 0012 and 0013
(:mod:`adk_sqlstore.schema`).

Every statement names ``(app_name, user_id)`` in its ``WHERE`` (or its row, for an
insert), but :func:`pending_sessions`, an administrative read across users. Writers
hold the user lock in ``"exclusive"`` mode (:mod:`.users`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, delete, insert, or_, select, tuple_, update
from sqlalchemy.ext.asyncio import AsyncConnection

from ..schema import fact_leases, fact_sources, sessions
from ..search.text import clean_text

__all__ = [
    "Source",
    "all_sources",
    "delete_source",
    "holds_lease",
    "pending_sessions",
    "read_source",
    "release_lease",
    "session_source",
    "take_lease",
    "write_source",
]


def _user(table: Any, app_name: str, user_id: str) -> list[Any]:
    return [table.c.app_name == app_name, table.c.user_id == user_id]


@dataclass
class Source:
    """A session's generation record: events processed and failed attempts since,
    for one incarnation of the session (``None``: a session the store does not hold,
    or a record imported before its session)."""

    event_count: int
    attempts: int
    error: str | None
    incarnation: str | None = None


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
    f = fact_sources.c
    columns = (f.event_count, f.attempts, f.error, f.incarnation)
    found = (await conn.execute(select(*columns).where(*where))).first()
    return None if found is None else Source(int(found[0]), int(found[1]), found[2], found[3])


async def session_source(
    conn: AsyncConnection, *, app_name: str, user_id: str, session_id: str
) -> tuple[Source | None, str | None]:
    """The generation record of the session as the store holds it now, and that
    session's incarnation (``None``: the store holds no such session). A record of
    another incarnation, or one bound to none that is older than the session (made
    before it was: an earlier session of that id), counts for nothing (``None``)."""
    f, s = fact_sources.c, sessions.c
    stmt = select(f.event_count, f.attempts, f.error, f.incarnation, f.update_time).where(
        *_user(fact_sources, app_name, user_id), f.session_id == session_id
    )
    found = (await conn.execute(stmt)).first()
    held = (
        await conn.execute(
            select(s.incarnation, s.create_time).where(
                *_user(sessions, app_name, user_id), s.id == session_id
            )
        )
    ).first()
    incarnation = None if held is None else str(held[0])
    if found is None:
        return None, incarnation
    source = Source(int(found[0]), int(found[1]), found[2], found[3])
    if held is not None:
        if (source.incarnation is None and found[4] < held[1]) or source.incarnation not in (
            None,
            incarnation,
        ):
            return None, incarnation
        source.incarnation = incarnation
    return source, incarnation


async def delete_source(
    conn: AsyncConnection, *, app_name: str, user_id: str, session_id: str
) -> None:
    """Delete the session's generation record (the session was deleted or replaced:
    its watermark and failed attempts go with it). The caller holds the user lock
    (``"exclusive"``)."""
    where = [*_user(fact_sources, app_name, user_id), fact_sources.c.session_id == session_id]
    await conn.execute(delete(fact_sources).where(*where))


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
        "error": None if source.error is None else clean_text(source.error),
        "update_time": now,
        "incarnation": source.incarnation,
    }
    if (await conn.execute(update(fact_sources).where(*where).values(values))).rowcount:
        return
    key = {"app_name": app_name, "user_id": user_id, "session_id": session_id}
    await conn.execute(insert(fact_sources).values({**key, **values}))


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
                or_(
                    and_(f.c.incarnation.is_(None), f.c.update_time >= sessions.c.create_time),
                    f.c.incarnation == sessions.c.incarnation,
                ),
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


async def all_sources(conn: AsyncConnection, *, app_name: str, user_id: str) -> list[Any]:
    """The user's generation records: rows of session_id, event_count, attempts,
    error, update_time."""
    f = fact_sources
    columns = (f.c.session_id, f.c.event_count, f.c.attempts, f.c.error, f.c.update_time)
    stmt = select(*columns).where(*_user(f, app_name, user_id)).order_by(f.c.session_id)
    return list((await conn.execute(stmt)).all())
