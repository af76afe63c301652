"""Deleting in bulk: pruning old sessions (a retention policy) and forgetting a user."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from ..sql import retention as sql
from ..sql.users import lock_user
from ..store import Store, finish_before_cancel, retry_conflicts
from ..validation import check_age, check_argument, check_count, check_identifier

__all__ = ["PruneReport", "forget_user", "prune"]

logger = logging.getLogger(__name__)


@dataclass
class PruneReport:
    """What :meth:`SqlSessionService.prune` deleted (or would delete, ``dry_run``).

    Attributes:
        cutoff: sessions last updated before this time were pruned (seconds since the
            epoch, UTC).
        sessions, events, session_state_keys, memory_ingestions: rows deleted.
        artifact_versions: versions of the sessions' artifacts deleted (their bytes
            go with the last version of the user's that holds them).
        memories: memories deleted (always 0 without ``with_memories``).
        facts: generated facts deleted because their time to live ended (with their
            revisions and memories), whatever their sessions' age.
    """

    cutoff: float
    dry_run: bool = False
    with_memories: bool = False
    sessions: int = 0
    events: int = 0
    session_state_keys: int = 0
    memory_ingestions: int = 0
    artifact_versions: int = 0
    memories: int = 0
    facts: int = 0

    def add(self, counts: Mapping[str, int]) -> None:
        """Add rows deleted, by kind."""
        for name, n in counts.items():
            setattr(self, name, getattr(self, name) + n)


async def prune(
    store: Store,
    *,
    older_than: timedelta | float,
    app_name: str | None = None,
    with_memories: bool = False,
    dry_run: bool = False,
    batch_size: int = 1000,
    on_batch: Callable[[PruneReport], None] | None = None,
) -> PruneReport:
    """Delete sessions not updated for ``older_than``, ``batch_size`` sessions per
    transaction; see :meth:`adk_sqlstore.SqlSessionService.prune`."""
    seconds = check_age("older_than", older_than)
    check_count("batch_size", batch_size, least=1, most=100_000)
    check_argument("with_memories", with_memories, bool, "True or False")
    check_argument("dry_run", dry_run, bool, "True or False")
    if app_name is not None:
        check_identifier("app_name", app_name)
    cutoff = time.time() - seconds
    report = PruneReport(cutoff=cutoff, dry_run=dry_run, with_memories=with_memories)
    options: dict[str, Any] = {
        "cutoff": cutoff,
        "app_name": app_name,
        "with_memories": with_memories,
    }
    if dry_run:
        async with store.transaction(write=False) as conn:
            report.add(await sql.prune_counts(conn, **options))
            found, _ = await sql.expired_facts_batch(
                conn, now=time.time(), app_name=app_name, limit=0, dry_run=True
            )
        report.facts = found
        return report
    report.facts = await _prune_expired_facts(store, app_name, batch_size)
    while True:
        found, counts = await finish_before_cancel(
            retry_conflicts(lambda: _prune_batch(store, options, batch_size))
        )
        batch = PruneReport(cutoff=cutoff, with_memories=with_memories)
        batch.add(counts)
        report.add(counts)
        if on_batch is not None and batch.sessions:
            on_batch(batch)
        if found < batch_size:
            return report


async def _prune_expired_facts(store: Store, app_name: str | None, batch_size: int) -> int:
    """Delete the facts whose time to live ended, a batch per transaction."""
    deleted, now = 0, time.time()

    async def batch() -> tuple[int, int]:
        async with store.transaction(write=True) as conn:
            return await sql.expired_facts_batch(conn, now=now, app_name=app_name, limit=batch_size)

    while True:
        found, done = await finish_before_cancel(retry_conflicts(batch))
        deleted += done
        if found < batch_size:
            return deleted


async def _prune_batch(
    store: Store, options: dict[str, Any], batch_size: int
) -> tuple[int, dict[str, int]]:
    async with store.transaction(write=True) as conn:
        return await sql.prune_batch(conn, **options, limit=batch_size)


async def forget_user(store: Store, *, app_name: str, user_id: str) -> dict[str, int]:
    """Delete everything stored for one user of one app, in one transaction (run again
    whole if the database ends it to break a deadlock with another application's
    transaction), then purge the copies of the deleted text; see
    :meth:`adk_sqlstore.SqlSessionService.forget_user`."""
    check_identifier("app_name", app_name)
    check_identifier("user_id", user_id)

    async def forget() -> dict[str, int]:
        async with store.transaction(write=True) as conn:
            # create=True: on PostgreSQL a user whose first row another transaction is
            # making has no row this one can see yet; making it waits for that
            # transaction, so its writes are all deleted here or all committed after.
            await lock_user(
                conn,
                app_name=app_name,
                user_id=user_id,
                mode="forget",
                create=True,
                now=time.time(),
            )
            return await sql.forget_user(conn, app_name=app_name, user_id=user_id)

    counts = await retry_conflicts(forget)
    if not any(counts.values()):
        return counts
    purged = await store.purge_deleted_text(user_id=user_id)
    if purged.wal_pending:
        logger.warning(
            "forget_user (app %r): another connection is reading an older snapshot of the"
            " SQLite file, so the file and its write-ahead log keep the forgotten text until"
            " that read ends; the store empties the log at its next write or close()",
            app_name,
        )
    if purged.stale_statistics:
        logger.warning(
            "forget_user (app %r): %s have no rows left (on Citus: in the user's shard), and"
            " PostgreSQL keeps an empty table's old statistics (pg_stats) until rows come"
            " back and ANALYZE runs; forget_user run by a superuser clears them (or, as one:"
            " DELETE FROM pg_statistic WHERE starelid = '<table>'::regclass, on Citus on"
            " each worker for the shard)",
            app_name,
            ", ".join(purged.stale_statistics),
        )
    return counts
