"""Statements of memory generation: facts and their revisions (tables of migrations
0012 and 0013, :mod:`adk_sqlstore.schema`; the runs' lease and watermarks are
:mod:`.fact_runs`'s).

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

from sqlalchemy import and_, delete, insert, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from ..schema import fact_revisions, fact_sources, facts, memories
from ..search.text import clean_text, text_hash
from .constructs import chunks

__all__ = [
    "FactRow",
    "Revision",
    "added_memories",
    "all_revisions",
    "current_by_hash",
    "current_facts",
    "current_under_topics",
    "delete_facts",
    "equal_fact",
    "fact_history",
    "facts_to_delete",
    "insert_revisions",
    "invalidated_by_any",
    "list_facts",
    "read_facts",
    "users_with_added_memories",
    "write_fact",
]


@dataclass
class FactRow:
    """A row of ``sqlstore_facts`` (times in seconds since the epoch, UTC):
    ``invalid_at`` is when the fact stopped being true, ``invalidate_time`` when the
    store learned it, ``invalidated_by`` the fact that said so; ``session_id`` and
    ``event_ids`` are the source of its text (its last create or update)."""

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
    invalidate_time: float | None = None
    invalidated_by: str | None = None
    text_hash: str | None = None
    custom_metadata: dict[str, Any] | None = None

    @classmethod
    def of(cls, row: Any) -> FactRow:
        metadata = row.custom_metadata
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
            invalidate_time=row.invalidate_time,
            invalidated_by=row.invalidated_by,
            text_hash=row.text_hash,
            custom_metadata=None if metadata is None else json.loads(metadata),
        )

    @property
    def current(self) -> bool:
        """Not invalidated (its time to live aside)."""
        return self.invalid_at is None and self.invalidate_time is None

    @property
    def since(self) -> float:
        """When it became true: ``valid_from``, else when it was stored."""
        return self.valid_from if self.valid_from is not None else self.create_time

    def values(self) -> dict[str, Any]:
        """The row's columns but the user's: text cleaned (no NUL, no lone surrogate),
        its hash, JSON columns as JSON text."""
        text = clean_text(self.text)
        metadata = self.custom_metadata
        return {
            **self.__dict__,
            "text": text,
            "text_hash": text_hash(text),
            "topics": json.dumps([clean_text(t) for t in self.topics], ensure_ascii=False),
            "event_ids": json.dumps(self.event_ids),
            "custom_metadata": None if metadata is None else json.dumps(metadata),
        }


@dataclass
class Revision:
    """A row of ``sqlstore_fact_revisions``: one change of a fact (``action``:
    ``create``, ``update``, ``invalidate`` or ``restore``);
    an invalidation's ``invalid_at`` (when the fact stopped being true; its
    ``create_time`` is when the store learned it) and ``by_fact_id`` (the fact that
    contradicted it)."""

    fact_id: str
    revision: int
    action: str
    old_text: str | None
    new_text: str | None
    session_id: str | None
    event_ids: list[str]
    model: str | None
    create_time: float
    invalid_at: float | None = None
    by_fact_id: str | None = None

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
            invalid_at=row.invalid_at,
            by_fact_id=row.by_fact_id,
        )


def _user(table: Any, app_name: str, user_id: str) -> list[Any]:
    return [table.c.app_name == app_name, table.c.user_id == user_id]


def _current(now: float) -> list[Any]:
    return [
        facts.c.invalid_at.is_(None),
        facts.c.invalidate_time.is_(None),
        or_(facts.c.expire_at.is_(None), facts.c.expire_at > now),
    ]


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


async def current_by_hash(
    conn: AsyncConnection, *, app_name: str, user_id: str, hashes: Sequence[str], now: float
) -> dict[str, FactRow]:
    """The user's current facts whose text hash is among ``hashes``, by hash (the most
    recently changed of equal ones)."""
    found: dict[str, FactRow] = {}
    for chunk in chunks(list(dict.fromkeys(hashes))):
        stmt = (
            select(facts)
            .where(*_user(facts, app_name, user_id), facts.c.text_hash.in_(chunk), *_current(now))
            .order_by(facts.c.update_time, facts.c.id)
        )
        found.update((r.text_hash, FactRow.of(r)) for r in (await conn.execute(stmt)).all())
    return found


async def equal_fact(
    conn: AsyncConnection,
    *,
    app_name: str,
    user_id: str,
    text_hash: str,
    other_than: str,
    now: float,
) -> str | None:
    """The id of a current fact of the user whose text hash is ``text_hash``, other
    than the fact ``other_than`` (the first by id); ``None`` if there is none."""
    stmt = (
        select(facts.c.id)
        .where(
            *_user(facts, app_name, user_id),
            facts.c.text_hash == text_hash,
            facts.c.id != other_than,
            *_current(now),
        )
        .order_by(facts.c.id)
        .limit(1)
    )
    found = (await conn.execute(stmt)).scalar()
    return None if found is None else str(found)


def _like(value: str) -> str:
    return value.replace("!", "!!").replace("%", "!%").replace("_", "!_")


async def current_under_topics(
    conn: AsyncConnection,
    *,
    app_name: str,
    user_id: str,
    topics: Sequence[str],
    now: float,
    limit: int,
) -> list[FactRow]:
    """The user's current facts filed under any of ``topics``, the most recently
    changed first, at most ``limit``."""
    if not topics:
        return []
    under = [
        facts.c.topics.like(f"%{_like(json.dumps(t, ensure_ascii=False))}%", escape="!")
        for t in topics
    ]
    stmt = (
        select(facts)
        .where(*_user(facts, app_name, user_id), *_current(now), or_(*under))
        .order_by(facts.c.update_time.desc(), facts.c.id)
        .limit(limit)
    )
    rows = [FactRow.of(r) for r in (await conn.execute(stmt)).all()]
    return [r for r in rows if set(r.topics) & set(topics)]


async def read_facts(
    conn: AsyncConnection, *, app_name: str, user_id: str, ids: Sequence[str]
) -> dict[str, FactRow]:
    """The user's facts among ``ids`` (current or not), by id."""
    found: dict[str, FactRow] = {}
    for chunk in chunks(list(ids)):
        stmt = select(facts).where(*_user(facts, app_name, user_id), facts.c.id.in_(chunk))
        found.update((r.id, FactRow.of(r)) for r in (await conn.execute(stmt)).all())
    return found


async def invalidated_by_any(
    conn: AsyncConnection,
    *,
    app_name: str,
    user_id: str,
    ids: Sequence[str],
    session_id: str | None = None,
) -> list[FactRow]:
    """The user's facts invalidated by one of the facts ``ids``, and (``session_id``)
    those invalidated from that session by no fact (their last revision an
    ``invalidate`` of that session), in id order."""
    found: dict[str, FactRow] = {}
    for chunk in chunks(list(ids)):
        stmt = select(facts).where(
            *_user(facts, app_name, user_id), facts.c.invalidated_by.in_(chunk)
        )
        found.update((r.id, FactRow.of(r)) for r in (await conn.execute(stmt)).all())
    if session_id is not None:
        r = fact_revisions
        last = and_(
            r.c.app_name == facts.c.app_name,
            r.c.user_id == facts.c.user_id,
            r.c.fact_id == facts.c.id,
            r.c.revision == facts.c.revision_count,
        )
        stmt = (
            select(facts)
            .join(r, last)
            .where(
                *_user(facts, app_name, user_id),
                facts.c.invalid_at.is_not(None),
                facts.c.invalidated_by.is_(None),
                r.c.action == "invalidate",
                r.c.session_id == session_id,
            )
        )
        found.update((row.id, FactRow.of(row)) for row in (await conn.execute(stmt)).all())
    return [found[k] for k in sorted(found)]


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
            "old_text": None if r.old_text is None else clean_text(r.old_text),
            "new_text": None if r.new_text is None else clean_text(r.new_text),
            "model": None if r.model is None else clean_text(r.model),
            "event_ids": json.dumps(r.event_ids),
        }
        for r in revisions
    ]
    if rows:
        await conn.execute(insert(fact_revisions), rows)


async def facts_to_delete(
    conn: AsyncConnection,
    *,
    app_name: str,
    user_id: str,
    ids: Sequence[str] | None = None,
    session_id: str | None = None,
) -> list[str]:
    """The ids of the user's facts :func:`delete_facts` deletes with these filters."""
    conditions = _user(facts, app_name, user_id)
    if session_id is not None:
        conditions.append(facts.c.session_id == session_id)
    found: list[str] = []
    for chunk in [None] if ids is None else chunks(list(ids)):
        where = conditions if chunk is None else [*conditions, facts.c.id.in_(chunk)]
        found += [str(r[0]) for r in (await conn.execute(select(facts.c.id).where(*where)))]
    return found


async def delete_facts(
    conn: AsyncConnection,
    *,
    app_name: str,
    user_id: str,
    ids: Sequence[str] | None = None,
    session_id: str | None = None,
) -> list[str]:
    """Delete the user's facts (all of them; those of ``ids``; those whose text comes
    from ``session_id``, with that session's generation record; both filters
    combine) and their revisions; returns the ids of the facts deleted. Their
    memories are the caller's to delete, and so are the invalidations they caused
    (:func:`adk_sqlstore.generation.writing.revert_invalidations`)."""
    if session_id is not None:
        if ids is None:
            sources = [
                *_user(fact_sources, app_name, user_id),
                fact_sources.c.session_id == session_id,
            ]
            await conn.execute(delete(fact_sources).where(*sources))
    elif ids is None:
        await conn.execute(delete(fact_sources).where(*_user(fact_sources, app_name, user_id)))
    found = await facts_to_delete(
        conn, app_name=app_name, user_id=user_id, ids=ids, session_id=session_id
    )
    for chunk in chunks(found):
        revisions = [*_user(fact_revisions, app_name, user_id), fact_revisions.c.fact_id.in_(chunk)]
        await conn.execute(delete(fact_revisions).where(*revisions))
        await conn.execute(
            delete(facts).where(*_user(facts, app_name, user_id), facts.c.id.in_(chunk))
        )
    return found


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


async def users_with_added_memories(conn: AsyncConnection, *, app_name: str) -> list[str]:
    """The users of an app with facts or ``add_memory`` memories (an administrative
    read across the app's users, for exports), in order."""
    with_facts = select(facts.c.user_id).where(facts.c.app_name == app_name)
    added = select(memories.c.user_id).where(
        memories.c.app_name == app_name, memories.c.event_id.is_(None)
    )
    stmt = with_facts.union(added)
    return sorted(str(r[0]) for r in (await conn.execute(stmt)).all())
