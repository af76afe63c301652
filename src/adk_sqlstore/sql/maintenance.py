"""Purging deleted text where the database leaves copies of it (after ``forget_user``).

SQLite keeps deleted text in the FTS5 index until its segments merge, in freed pages
unless ``secure_delete`` is on, and in the write-ahead log until a checkpoint;
PostgreSQL keeps the most common values of each column in ``pg_statistic`` until the
next ANALYZE. :func:`purge_deleted_text` clears what can be cleared now.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from .citus import on_citus
from .sqlite_thread import execute, fetch_one, rollback_quietly, run_batch

__all__ = ["USER_TABLES", "WAL_PURGE_WAIT", "Purge", "purge_deleted_text", "truncate_wal"]

WAL_PURGE_WAIT = 1.0
"""Seconds ``forget_user`` waits for SQLite readers of an older snapshot to finish, so
that the write-ahead log can be emptied (see :func:`purge_deleted_text`)."""

# Tables whose PostgreSQL statistics (pg_stats: most common values and elements) name
# users and their words; refreshed after a user is forgotten.
USER_TABLES = (
    "sqlstore_users",
    "sqlstore_sessions",
    "sqlstore_events",
    "sqlstore_session_state",
    "sqlstore_user_state",
    "sqlstore_memories",
    "sqlstore_memory_stats",
    "sqlstore_memory_terms",
    "sqlstore_memory_ingestions",
    "sqlstore_memory_embeddings",
    "sqlstore_facts",
    "sqlstore_fact_revisions",
    "sqlstore_fact_sources",
    "sqlstore_fact_leases",
    "sqlstore_artifacts",
    "sqlstore_artifact_contents",
    "sqlstore_artifact_chunks",
)


def _sqlite_truncate_wal(db: Any, wait: float) -> bool:
    """Checkpoint the whole write-ahead log into the database and truncate it, waiting
    at most ``wait`` seconds for readers of older snapshots; whether it was done."""
    (previous,) = fetch_one(db, "PRAGMA busy_timeout") or (30_000,)
    execute(db, f"PRAGMA busy_timeout = {int(wait * 1000)}")
    try:
        busy, _, _ = fetch_one(db, "PRAGMA wal_checkpoint(TRUNCATE)") or (1, 0, 0)
    finally:
        execute(db, f"PRAGMA busy_timeout = {int(previous)}")
    return bool(busy == 0)


def _sqlite_purge(db: Any, wait: float) -> bool:
    """Merge the FTS5 index (deletes only mark its entries until then), then empty the
    write-ahead log."""
    execute(db, "BEGIN IMMEDIATE")
    try:
        execute(db, "INSERT INTO sqlstore_memories_fts(sqlstore_memories_fts) VALUES ('optimize')")
        execute(db, "COMMIT")
    except BaseException:
        rollback_quietly(db)
        raise
    return _sqlite_truncate_wal(db, wait)


@dataclass
class Purge:
    """What :func:`purge_deleted_text` could not clear yet.

    Attributes:
        wal_pending: SQLite: a reader of an older snapshot kept the old pages, in the
            write-ahead log and the file, until it ends (see :func:`truncate_wal`).
        stale_statistics: PostgreSQL: tables left with no rows whose old statistics
            remain in ``pg_stats`` (ANALYZE leaves an empty table's statistics as they
            were, and only a superuser may delete them).
    """

    wal_pending: bool = False
    stale_statistics: list[str] = field(default_factory=list)


async def purge_deleted_text(
    conn: AsyncConnection, *, wait: float = WAL_PURGE_WAIT, user_id: str | None = None
) -> Purge:
    """Make deleted text unrecoverable where the database leaves it behind (after a
    user is forgotten; ``conn`` outside any transaction).

    SQLite: FTS5 deletes only mark index entries until segments merge, so the index is
    merged ("optimize", which rewrites the whole index: 0.08 s for 100,000 short
    memories on a 2-vCPU machine); with ``secure_delete`` on (every connection) the
    freed pages are zeroed; then the write-ahead log, which still holds the pages as
    they were, is checkpointed into the file and truncated. A reader of an older
    snapshot (another connection inside a read) still needs those pages: the log is
    emptied at once when there is none, after up to ``wait`` seconds when one ends
    meanwhile, and otherwise not now (``wal_pending``; until then the old pages are in
    the log and the file: call :func:`truncate_wal` again later).

    PostgreSQL: the statistics of the user tables are refreshed (ANALYZE), so that
    ``pg_stats`` no longer lists the user's id or words among the most common values.
    ANALYZE leaves the statistics of a table that has no rows left as they were: those
    are deleted where the role may (a superuser), else reported (``stale_statistics``).
    The deleted rows themselves stay in the table files until (auto)VACUUM. On Citus the
    ANALYZE reaches every shard on every worker, and the statistics of each shard left
    with no rows are deleted on its worker (a superuser: ``run_command_on_shards``);
    ``stale_statistics`` then names the tables whose shard holding ``user_id`` (the
    user just forgotten, if given) is left empty.

    MySQL and MariaDB: nothing is done here. InnoDB's statistics hold no values, and
    its memory postings are rows deleted with the memories; its pages keep deleted
    records until purge reuses the space (``OPTIMIZE TABLE`` rewrites a table without
    them: an administrator's job, not a per-user one; README, "MySQL and MariaDB").
    """
    if conn.dialect.name == "sqlite":
        return Purge(wal_pending=not await run_batch(conn, _sqlite_purge, wait))
    if conn.dialect.name == "mysql":
        return Purge()
    # Statements on whole tables (maintenance, reading no user's rows) say so: on a
    # distributed database they run on every shard (docs/scaling.md).
    await conn.execute(text(f"/* statistics */ ANALYZE {', '.join(USER_TABLES)}"))
    citus = on_citus(conn)
    empty = [t for t in USER_TABLES if await _has_empty_part(conn, t, citus, user_id)]
    if not empty:
        return Purge()
    may_delete = (
        await conn.execute(text("SELECT rolsuper FROM pg_roles WHERE rolname = current_user"))
    ).scalar()
    if not may_delete:
        return Purge(stale_statistics=empty)
    if citus:
        for table in empty:
            await conn.execute(_CITUS_DELETE_EMPTY_SHARD_STATISTICS, {"table": table})
        return Purge()
    await conn.execute(
        text(
            "DELETE FROM pg_catalog.pg_statistic"
            " WHERE starelid = ANY (CAST(CAST(:tables AS TEXT[]) AS regclass[]))"
        ),
        {"tables": empty},
    )
    return Purge()


# Citus: ANALYZE on the coordinator analyzes every shard on the workers; the statistics
# of each shard left with no rows are deleted there (run_command_on_shards puts the
# shard's name for %1$s).
_CITUS_EMPTY_SHARDS = text(
    "/* statistics */ SELECT count(*) FROM run_command_on_shards(CAST(:table AS regclass),"
    " 'SELECT NOT EXISTS (SELECT 1 FROM %1$s)') WHERE result = 't' AND (CAST(:user_id AS TEXT)"
    " IS NULL OR shardid = get_shard_id_for_distribution_column(CAST(:table AS regclass),"
    " CAST(:user_id AS TEXT)))"
)
_CITUS_DELETE_EMPTY_SHARD_STATISTICS = text(
    "/* statistics */ SELECT count(*) FROM run_command_on_shards(CAST(:table AS regclass),"
    " $cmd$DO $do$ BEGIN IF NOT EXISTS (SELECT 1 FROM %1$s) THEN"
    " DELETE FROM pg_catalog.pg_statistic WHERE starelid = '%1$s'::regclass;"
    " END IF; END $do$$cmd$)"
)


async def _has_empty_part(
    conn: AsyncConnection, table: str, citus: bool, user_id: str | None
) -> bool:
    """Whether ``table`` has no rows (on Citus: whether its shard holding ``user_id``,
    or with ``None`` any shard of it, has none)."""
    if citus:
        params = {"table": table, "user_id": user_id}
        return bool((await conn.execute(_CITUS_EMPTY_SHARDS, params)).scalar())
    statement = text(f"/* statistics */ SELECT NOT EXISTS (SELECT 1 FROM {table})")
    return bool((await conn.execute(statement)).scalar())


async def truncate_wal(conn: AsyncConnection, *, wait: float = 0.0) -> bool:
    """SQLite: checkpoint and truncate the write-ahead log if no reader of an older
    snapshot is left (waiting at most ``wait`` seconds); whether it was done. Other
    databases: ``True``."""
    if conn.dialect.name != "sqlite":
        return True
    return await run_batch(conn, _sqlite_truncate_wal, wait)
