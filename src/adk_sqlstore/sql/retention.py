"""Statements that delete in bulk: pruning sessions by age (with their artifacts),
forgetting a user (with every artifact of the user's).

Both take their locks in the order of :data:`.users.LOCK_ORDER`: the caller holds the
user lock (prune: of every user of the batch), then the sessions are locked in key
order, then the tables are emptied group by group.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, and_, delete, func, select, tuple_
from sqlalchemy.ext.asyncio import AsyncConnection

from ..schema import (
    artifact_chunks,
    artifact_contents,
    artifacts,
    events,
    fact_leases,
    fact_revisions,
    fact_sources,
    facts,
    memories,
    memory_ingestions,
    memory_stats,
    session_state,
    sessions,
    user_state,
)
from .artifacts import collect_contents
from .constructs import chunks
from .facts import delete_facts
from .memory import delete_memories
from .users import delete_user, lock_users

__all__ = ["expired_facts_batch", "forget_user", "prune_batch", "prune_counts"]

_FORGET_COUNTS = (
    "events",
    "session_state_keys",
    "sessions",
    "user_state_keys",
    "memories",
    "memory_ingestions",
    "memory_stats",
    "facts",
    "fact_revisions",
    "artifact_versions",
    "artifact_chunks",
    "artifact_contents",
)
"""What :func:`forget_user` counts, in the order it reports them."""

# Keys per IN list of (app_name, user_id, session_id): 3 bound parameters each.
_KEYS_PER_STATEMENT = 300


def _stale(cutoff: float, app_name: str | None) -> list[ColumnElement[bool]]:
    conditions = [sessions.c.update_time < cutoff]
    if app_name is not None:
        conditions.append(sessions.c.app_name == app_name)
    return conditions


def _pruned_tables(with_memories: bool) -> list[tuple[str, Any]]:
    """The tables prune empties of its sessions' rows, in lock order."""
    tables = [
        ("events", events),
        ("session_state_keys", session_state),
        ("memory_ingestions", memory_ingestions),
    ]
    if with_memories:
        tables.append(("memories", memories))
    tables.append((_WATERMARKS, fact_sources))  # not counted: generation's bookkeeping
    tables.append(("artifact_versions", artifacts))
    return tables


_WATERMARKS = "fact_sources"


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
    counts.pop(_WATERMARKS)
    return counts


async def prune_batch(
    conn: AsyncConnection, *, cutoff: float, app_name: str | None, with_memories: bool, limit: int
) -> tuple[int, dict[str, int]]:
    """Delete up to ``limit`` sessions last updated before ``cutoff`` (oldest first),
    with their events, session state, ingestion records and artifacts (their bytes
    when no other version of the user's holds them), and with ``with_memories`` their
    memories; returns how many sessions were found stale, and rows deleted by kind.

    The users of the sessions found are locked (``"exclusive"``, in key order), then
    the sessions (PostgreSQL, MySQL: FOR UPDATE, in key order, one statement per user,
    which Citus routes to the user's shard: it refuses FOR UPDATE across shards; SQLite:
    the caller's write transaction), each checked stale again: a session appended to meanwhile is
    kept, or its append waits and fails. User and app state, and the user's own
    artifacts, are never touched."""
    stmt = (
        select(sessions.c.app_name, sessions.c.user_id, sessions.c.id)
        .where(*_stale(cutoff, app_name))
        .order_by(sessions.c.update_time, sessions.c.app_name, sessions.c.user_id, sessions.c.id)
        .limit(limit)
    )
    found = sorted(tuple(row) for row in (await conn.execute(stmt)).all())
    await lock_users(conn, [(app, user) for app, user, _ in found], mode="exclusive")
    by_user: dict[tuple[str, str], list[str]] = {}
    for app, user, session_id in found:
        by_user.setdefault((app, user), []).append(session_id)
    keys: list[tuple[Any, ...]] = []
    for (app, user), ids in sorted(by_user.items()):  # a statement per user: one shard
        for chunk in chunks(ids, _KEYS_PER_STATEMENT):
            mine = [sessions.c.app_name == app, sessions.c.user_id == user]
            locked = (
                select(sessions.c.app_name, sessions.c.user_id, sessions.c.id)
                .where(*mine, sessions.c.id.in_(chunk), *_stale(cutoff, app_name))
                .order_by(sessions.c.id)
                .with_for_update()
            )
            keys.extend(tuple(row) for row in (await conn.execute(locked)).all())
    counts = {"sessions": 0, **{name: 0 for name, _ in _pruned_tables(with_memories)}}
    for chunk in chunks(keys, _KEYS_PER_STATEMENT):
        held = select(artifacts.c.app_name, artifacts.c.user_id, artifacts.c.content_sha256)
        held = held.where(
            tuple_(artifacts.c.app_name, artifacts.c.user_id, artifacts.c.session_id).in_(chunk),
            artifacts.c.content_sha256.is_not(None),
        )
        contents = {tuple(row) for row in (await conn.execute(held.distinct())).all()}
        for name, table in _pruned_tables(with_memories):
            key = tuple_(table.c.app_name, table.c.user_id, table.c.session_id)
            result = await conn.execute(delete(table).where(key.in_(chunk)))
            counts[name] += int(result.rowcount)
        key = tuple_(sessions.c.app_name, sessions.c.user_id, sessions.c.id)
        result = await conn.execute(delete(sessions).where(key.in_(chunk)))
        counts["sessions"] += int(result.rowcount)
        for app, user, sha in sorted(contents):
            await collect_contents(conn, app, user, [sha])
    counts.pop(_WATERMARKS)
    return len(found), counts


async def forget_user(conn: AsyncConnection, *, app_name: str, user_id: str) -> dict[str, int]:
    """Delete everything stored for one user of one app; returns row counts by kind.

    The caller holds the user lock in ``"forget"`` mode: every other writer of the
    user has committed, and none starts, but an append, which locks only its session
    row; so the user's sessions are locked next (in key order), then every table is
    emptied in lock order, and the user's row goes last."""
    user = and_(sessions.c.app_name == app_name, sessions.c.user_id == user_id)
    await conn.execute(select(sessions.c.id).where(user).order_by(sessions.c.id).with_for_update())
    counts: dict[str, int] = {}
    for name, table in [
        ("events", events),
        ("session_state_keys", session_state),
        ("user_state_keys", user_state),
        ("memories", memories),
        ("memory_ingestions", memory_ingestions),
        ("memory_stats", memory_stats),
        ("fact_leases", fact_leases),
        ("fact_sources", fact_sources),
        ("facts", facts),
        ("fact_revisions", fact_revisions),
        ("artifact_versions", artifacts),
        ("artifact_chunks", artifact_chunks),
        ("artifact_contents", artifact_contents),
        ("sessions", sessions),
    ]:
        result = await conn.execute(
            delete(table).where(table.c.app_name == app_name, table.c.user_id == user_id)
        )
        counts[name] = int(result.rowcount)
    await delete_user(conn, app_name=app_name, user_id=user_id)
    return {name: counts[name] for name in _FORGET_COUNTS}


async def expired_facts_batch(
    conn: AsyncConnection, *, now: float, app_name: str | None, limit: int, dry_run: bool = False
) -> tuple[int, int]:
    """Delete up to ``limit`` facts whose time to live ended before ``now`` (seconds,
    UTC), with their revisions and memories; returns (facts found, facts deleted).
    Their users are locked (``"exclusive"``, in key order) first, and each fact is
    checked expired again under the lock. ``dry_run``: count them all, delete none."""
    expired = [facts.c.expire_at.is_not(None), facts.c.expire_at <= now]
    if app_name is not None:
        expired.append(facts.c.app_name == app_name)
    if dry_run:
        stmt = select(func.count()).select_from(facts).where(*expired)
        found = int((await conn.execute(stmt)).scalar_one())
        return found, 0
    keys = select(facts.c.app_name, facts.c.user_id, facts.c.id).where(*expired)
    rows = (await conn.execute(keys.order_by(facts.c.expire_at, facts.c.id).limit(limit))).all()
    await lock_users(conn, [(a, u) for a, u, _ in rows], mode="exclusive")
    deleted = 0
    by_user: dict[tuple[str, str], list[str]] = {}
    for app, user, fact_id in rows:
        by_user.setdefault((app, user), []).append(fact_id)
    for (app, user_id), ids in sorted(by_user.items()):
        mine = [facts.c.app_name == app, facts.c.user_id == user_id]
        still = select(facts.c.id).where(*mine, facts.c.id.in_(ids), *expired)
        gone = [str(r[0]) for r in (await conn.execute(still)).all()]
        if gone:
            await delete_memories(conn, app_name=app, user_id=user_id, memory_ids=gone)
            deleted += len(await delete_facts(conn, app_name=app, user_id=user_id, ids=gone))
    return len(rows), deleted
