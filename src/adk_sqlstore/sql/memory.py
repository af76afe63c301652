"""Statements on memories, ingestion records and the scan for idle sessions.

The per-user search statistics (``sqlstore_memory_stats``) are kept by triggers
created in the migrations, never written here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import and_, bindparam, delete, func, or_, select, text, tuple_, update
from sqlalchemy.ext.asyncio import AsyncConnection

from ..schema import memories, memory_ingestions, sessions
from .citus import on_citus
from .constructs import PG_ARRAY_ROWS, chunks, upsert

__all__ = [
    "MEMORY_COMPARED",
    "MEMORY_UPDATABLE",
    "PG_COLUMN_TYPES",
    "count_idle_sessions",
    "count_memories_to_reindex",
    "delete_memories",
    "delete_memories_by_pk",
    "existing_memory_ids",
    "idle_sessions",
    "memories_to_reindex",
    "memory_ids_of_session",
    "memory_texts",
    "other_analysis",
    "record_ingestion",
    "set_terms",
    "upsert_memories",
]

MEMORY_UPDATABLE = (
    "session_id",
    "event_id",
    "author",
    "timestamp",
    "content",
    "text",
    "terms",
    "analysis",
    "token_count",
    "custom_metadata",
    "search_scope",
    "update_time",
)
"""The columns an upsert of a memory sets (all but its key)."""
MEMORY_COMPARED = (
    "session_id",
    "event_id",
    "author",
    "timestamp",
    "content",
    "custom_metadata",
    "analysis",
)
"""The columns whose change makes an upsert rewrite (and re-index) a stored memory."""

PG_COLUMN_TYPES = {
    "timestamp": "DOUBLE PRECISION",
    "update_time": "DOUBLE PRECISION",
    "token_count": "INTEGER",
}
"""PostgreSQL types of the memory columns that are not TEXT (for arrays of them)."""
_PG_UPSERT = text(
    f"INSERT INTO {memories.name} (app_name, user_id, id, {', '.join(MEMORY_UPDATABLE)})"
    " SELECT CAST(:app_name AS TEXT), CAST(:user_id AS TEXT), * FROM unnest("
    + ", ".join(
        f"CAST(:{c} AS {PG_COLUMN_TYPES.get(c, 'TEXT')}[])" for c in ("id", *MEMORY_UPDATABLE)
    )
    + ") ON CONFLICT (app_name, user_id, id) DO UPDATE SET "
    + ", ".join(f"{c} = EXCLUDED.{c}" for c in MEMORY_UPDATABLE)
    + " WHERE "
    + " OR ".join(f"{memories.name}.{c} IS DISTINCT FROM EXCLUDED.{c}" for c in MEMORY_COMPARED)
)
"""One user's memories as arrays, one per column (the user's ``:app_name`` and
``:user_id`` bound once: the statement names its one user)."""


_TEXTS = text("SELECT pk, text FROM sqlstore_memories WHERE pk IN :pks").bindparams(
    bindparam("pks", expanding=True)
)


async def memory_texts(conn: AsyncConnection, *, pks: Sequence[int]) -> dict[int, str]:
    """Row key to indexed text, for those of ``pks`` that exist (any user's: for
    administrative batches such as ``adk-sqlstore memory embed`` and ``reindex``)."""
    found: dict[int, str] = {}
    for chunk in chunks(list(pks)):
        found.update((int(pk), str(t)) for pk, t in (await conn.execute(_TEXTS, {"pks": chunk})))
    return found


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


async def existing_memory_ids(
    conn: AsyncConnection, *, app_name: str, user_id: str, ids: Sequence[str]
) -> set[str]:
    """Those of ``ids`` the user has memories of."""
    found: set[str] = set()
    for chunk in chunks(list(ids)):
        stmt = select(memories.c.id).where(
            memories.c.app_name == app_name, memories.c.user_id == user_id, memories.c.id.in_(chunk)
        )
        found.update(str(r[0]) for r in (await conn.execute(stmt)).all())
    return found


async def delete_memories_by_pk(
    conn: AsyncConnection, *, app_name: str, user_id: str, pks: Sequence[int]
) -> int:
    """Delete memories of one user by row key; returns how many were deleted."""
    deleted = 0
    for chunk in chunks(pks):
        result = await conn.execute(
            delete(memories).where(
                memories.c.app_name == app_name,
                memories.c.user_id == user_id,
                memories.c.pk.in_(chunk),
            )
        )
        deleted += result.rowcount
    return deleted


async def upsert_memories(conn: AsyncConnection, rows: Sequence[dict[str, Any]]) -> None:
    """Insert memories, or update those whose ``(app_name, user_id, id)`` exists and
    whose content changed (unchanged rows are not rewritten, nor re-indexed); of rows
    with the same key, the last wins.

    PostgreSQL takes each chunk of :data:`~.constructs.PG_ARRAY_ROWS` as one statement
    over arrays (``unnest``): its statistics trigger then runs once per chunk, not once
    per row (once per row, each run updated the user's statistics row again in the same
    transaction, and every update walked all the row's earlier versions: a
    100,000-event session took 16x the time of 20,000). On Citus, whose statistics
    triggers are per row anyway, rows are multi-row ``VALUES`` of one user, routed to
    their shard (an ``INSERT ... SELECT`` over arrays would go through the coordinator
    and commit on every worker)."""
    if not rows:
        return
    if conn.dialect.name == "postgresql" and not on_citus(conn):
        by_user: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
        for row in rows:
            by_user.setdefault((row["app_name"], row["user_id"]), {})[row["id"]] = row
        for (app_name, user_id), latest in by_user.items():
            for chunk in chunks(list(latest.values()), PG_ARRAY_ROWS):
                columns = {c: [r[c] for r in chunk] for c in ("id", *MEMORY_UPDATABLE)}
                await conn.execute(
                    _PG_UPSERT, {"app_name": app_name, "user_id": user_id, **columns}
                )
        return
    stmt = upsert(
        conn.dialect,
        memories,
        key=("app_name", "user_id", "id"),
        update=MEMORY_UPDATABLE,
        only_if_changed=MEMORY_COMPARED,
    )
    for chunk in chunks(rows):
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
    for chunk in chunks(ids):
        result = await conn.execute(delete(memories).where(*conditions, memories.c.id.in_(chunk)))
        deleted += result.rowcount
    return deleted


def _not_analysed_as(signature: str, app_name: str | None) -> list[Any]:
    conditions = [memories.c.analysis != signature]
    if app_name is not None:
        conditions.append(memories.c.app_name == app_name)
    return conditions


async def count_memories_to_reindex(
    conn: AsyncConnection, *, signature: str, app_name: str | None
) -> int:
    """How many memories (of ``app_name``, or all) were not analysed as ``signature``."""
    stmt = select(func.count()).where(*_not_analysed_as(signature, app_name))
    return int((await conn.execute(stmt.select_from(memories))).scalar_one())


async def memories_to_reindex(
    conn: AsyncConnection, *, signature: str, app_name: str | None, after: int, limit: int
) -> list[tuple[int, str, str]]:
    """Up to ``limit`` memories not analysed as ``signature``, as ``(pk, app_name,
    user_id)`` in row-key order after ``after`` (keyset pagination)."""
    stmt = (
        select(memories.c.pk, memories.c.app_name, memories.c.user_id)
        .where(*_not_analysed_as(signature, app_name), memories.c.pk > after)
        .order_by(memories.c.pk)
        .limit(limit)
    )
    return [(int(pk), str(a), str(u)) for pk, a, u in (await conn.execute(stmt)).all()]


_SET_TERMS = (
    update(memories)
    .where(memories.c.pk == bindparam("row_pk"))
    .values(
        terms=bindparam("new_terms"),
        token_count=bindparam("new_token_count"),
        analysis=bindparam("new_analysis"),
    )
)


async def set_terms(conn: AsyncConnection, rows: Sequence[tuple[int, list[str], str]]) -> None:
    """Store memories' index terms: ``(pk, terms, analysis signature)`` each (the
    search index and per-user statistics follow by the migrations' triggers)."""
    if rows:
        await conn.execute(
            _SET_TERMS,
            [
                {
                    "row_pk": pk,
                    "new_terms": " ".join(terms),
                    "new_token_count": len(terms),
                    "new_analysis": signature,
                }
                for pk, terms, signature in rows
            ],
        )


async def other_analysis(
    conn: AsyncConnection, *, app_name: str, user_id: str, signature: str
) -> str | None:
    """The analysis of one memory of the user not analysed as ``signature``, if any."""
    stmt = (
        select(memories.c.analysis)
        .where(*_not_analysed_as(signature, app_name), memories.c.user_id == user_id)
        .limit(1)
    )
    return (await conn.execute(stmt)).scalar()
