"""Statements of the memory inspector's pages of memories and facts (the rest:
:mod:`.inspection`; a session's generation record is :func:`.fact_runs.read_source`):
a user's memories and facts by keyset, a session's facts. Every statement names
``(app_name, user_id)``."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import and_, exists, func, literal, or_, select
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.elements import UnaryExpression
from sqlalchemy.sql.operators import custom_op

from ..schema import facts, memories, memory_stats

__all__ = [
    "PAGE_ROWS",
    "SCAN_WINDOW",
    "current",
    "fact_page",
    "facts_of_session",
    "memory_page",
]

SCAN_WINDOW = 10_000
"""How many ``pk`` values below a page's start SQLite first looks among for the
newest memories of a user who holds many (:func:`memory_page`)."""
PAGE_ROWS = 50  # the rows of a page, for the estimate of _holds_most
PAGE_ROWS = 50  # the rows of a page, for the estimate of _holds_most


def current(now: float) -> Any:
    """Facts current at ``now``: not invalidated, not expired."""
    return and_(
        facts.c.invalid_at.is_(None),
        facts.c.invalidate_time.is_(None),
        or_(facts.c.expire_at.is_(None), facts.c.expire_at > now),
    )


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
        stmt = stmt.where(current(now))
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
    optionally of one session, after ``pk`` ``after``.

    No index is ordered by ``pk`` within a user, and each database would read a big
    user's (or session's) rows whole to sort them, or walk the ``pk`` index past
    other rows; so, of a user who holds a good share of the memories (100,000),
    SQLite first looks among the :data:`SCAN_WINDOW` ``pk`` values below ``after``
    in the table's own order (the newest rows, read without an index), then, for the
    rest of the page, below them through the index as before (a user of 100,000:
    38 ms, 170 of turns only, now 4-6); PostgreSQL reads a session's rows through the
    session's index (never backwards along ``pk``, which for an old session passes
    every newer memory)."""
    m = memories.c
    columns = (
        m.pk, m.id, m.session_id, m.event_id, m.author, m.timestamp, m.text, m.custom_metadata
    )  # fmt: skip
    where = []
    if session_id is not None:
        where.append(m.session_id == session_id)
    if kind is not None:
        is_fact = exists(
            select(literal(1)).where(
                facts.c.app_name == m.app_name, facts.c.user_id == m.user_id, facts.c.id == m.id
            )
        )
        where.append(is_fact if kind == "facts" else ~is_fact)
    dialect = conn.dialect.name
    rows: list[Any] = []
    if dialect == "sqlite" and session_id is None and await _holds_most(conn, app_name, user_id):
        rows, after, limit = await _newest_window(
            conn, app_name, user_id, columns, where, after, limit
        )
        if not limit:
            return rows
    stmt = select(*columns).where(m.app_name == app_name, m.user_id == user_id, *where)
    if after is not None:
        stmt = stmt.where(m.pk < after)
    if dialect == "postgresql" and session_id is not None:
        fenced = stmt.offset(0).subquery()  # OFFSET 0: planned alone, by the session's index
        return list((await conn.execute(
            select(fenced).order_by(fenced.c.pk.desc()).limit(limit)
        )).all())  # fmt: skip
    stmt = stmt.order_by(m.pk.desc()).limit(limit)
    return rows + list((await conn.execute(stmt)).all())


async def _newest_window(
    conn: AsyncConnection,
    app_name: str,
    user_id: str,
    columns: Any,
    where: list[Any],
    after: int | None,
    limit: int,
) -> tuple[list[Any], int, int]:
    """SQLite: the user's rows among the :data:`SCAN_WINDOW` ``pk`` values below
    ``after`` (read in the table's order), the ``after`` to go on from and how many
    rows are still wanted (0: none)."""
    m = memories.c
    if after is None:
        after = ((await conn.execute(select(func.max(m.pk)))).scalar() or 0) + 1
    low = after - SCAN_WINDOW
    window = (
        select(*columns)
        .where(_unindexed(m.app_name) == app_name, _unindexed(m.user_id) == user_id)
        .where(m.pk < after, m.pk >= low, *where)
        .order_by(m.pk.desc())
        .limit(limit)
    )
    rows = list((await conn.execute(window)).all())
    if len(rows) >= limit or low <= 1:
        return rows, after, 0
    return rows, low, limit - len(rows)


async def _holds_most(conn: AsyncConnection, app_name: str, user_id: str) -> bool:
    """Whether the user holds enough of the memories (by ``sqlstore_memory_stats``
    and the highest ``pk``) that a :data:`SCAN_WINDOW` of ``pk`` values holds two
    pages of theirs, if spread evenly."""
    st = memory_stats.c
    held = select(st.doc_count).where(st.app_name == app_name, st.user_id == user_id)
    top = select(func.max(memories.c.pk))
    count, highest = (
        await conn.execute(select(held.scalar_subquery(), top.scalar_subquery()))
    ).one()
    return bool(count) and count * SCAN_WINDOW >= 2 * PAGE_ROWS * (highest or 0)


def _unindexed(column: Any) -> Any:
    """``+column`` (SQLite: the same value, but no index is used for it)."""
    return UnaryExpression(column, operator=custom_op("+"), type_=column.type)


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
