"""Writing memory rows that are not a whole session's: ``add_memory`` and
``add_events_to_memory`` (a session's are :mod:`.ingestion`'s)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from ..sql import memory as sql
from ..sql.ingest import one_round_trip, write_memories
from ..sql.users import lock_user
from ..store import Store, retry_conflicts
from .hybrid import HybridMemory

__all__ = ["write_rows"]


async def write_rows(
    store: Store,
    hybrid: HybridMemory | None,
    *,
    app_name: str,
    user_id: str,
    rows: list[dict[str, Any]],
    gone: Sequence[str] = (),
) -> None:
    """Delete the user's memories of ids ``gone`` and upsert ``rows`` (with their vectors,
    embedded before the transaction opens, with ``hybrid``), in one transaction under
    the user lock (``"exclusive"``, the user's row made if absent), run again whole if
    it loses a race: one round trip without an embedder
    (:func:`~adk_sqlstore.sql.ingest.write_memories`).

    Raises:
        ConcurrencyConflictError: it kept losing races
            (:func:`~adk_sqlstore.store.retry_conflicts`); nothing was written.
    """
    now = time.time()
    if hybrid is None and one_round_trip(store.engine, len(rows)):

        async def at_once() -> None:
            async with store.autocommit() as conn:
                await write_memories(
                    conn, app_name=app_name, user_id=user_id, rows=rows, gone=gone, now=now
                )

        await retry_conflicts(at_once)
        return
    prepared = None if hybrid is None else await hybrid.prepare(rows)

    async def write() -> None:
        async with store.transaction(write=True) as conn:
            await lock_user(
                conn, app_name=app_name, user_id=user_id, mode="exclusive", create=True, now=now
            )
            if gone:
                await sql.delete_memories(conn, app_name=app_name, user_id=user_id, memory_ids=gone)
            await sql.upsert_memories(conn, rows)
            if hybrid is not None:
                await hybrid.write(conn, prepared, app_name, user_id)

    await retry_conflicts(write)
