"""Statements that delete in bulk: pruning sessions by age (with their artifacts),
forgetting a user (with every artifact of the user's)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, and_, delete, func, select, tuple_
from sqlalchemy.ext.asyncio import AsyncConnection

from ..schema import (
    artifact_chunks,
    artifact_contents,
    artifacts,
    events,
    memories,
    memory_ingestions,
    memory_stats,
    session_state,
    sessions,
    user_state,
)
from .artifacts import collect_contents

__all__ = ["forget_user", "prune_batch", "prune_counts"]

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
        ("artifact_versions", artifacts),
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
    with their events, session state, ingestion records and artifacts (their bytes
    when no other version of the user's holds them), and with ``with_memories`` their
    memories; returns rows deleted by kind. The sessions are locked while read
    (PostgreSQL, MySQL: FOR UPDATE; SQLite: the caller's write transaction), so a
    session appended to meanwhile is either kept or its append fails; user and app
    state, and the user's own artifacts, are never touched."""
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
    return counts


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
        ("artifact_versions", artifacts),
        ("artifact_chunks", artifact_chunks),
        ("artifact_contents", artifact_contents),
    ]:
        result = await conn.execute(
            delete(table).where(table.c.app_name == app_name, table.c.user_id == user_id)
        )
        counts[name] = int(result.rowcount)
    return counts
