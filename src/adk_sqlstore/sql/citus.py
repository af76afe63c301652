"""Citus (distributed PostgreSQL): whether this store's tables are distributed, and the
names of the store's distributed functions.

:mod:`.distribution` distributes the tables (``adk-sqlstore migrate`` runs it where the
``citus`` extension is installed); the store finds out once, when it starts
(:func:`detect_citus`), and from then on :func:`on_citus` is the one seam where a
statement differs on Citus: each write whose single-server form Citus cannot route to
one shard (a data-modifying CTE, an ``INSERT ... SELECT`` from arrays) is instead a
call of a function distributed by the user (delegated to the user's worker) or plain
statements each filtered on ``user_id``.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

__all__ = ["APPEND_FUNCTION", "WRITE_MEMORIES_FUNCTION", "detect_citus", "on_citus"]

APPEND_FUNCTION = "sqlstore_append"
"""The append on Citus (:mod:`.distribution` creates it)."""
WRITE_MEMORIES_FUNCTION = "sqlstore_write_memories"
"""A user's memories written on Citus: the user lock, deletions, upserts
(:mod:`.distribution` creates it)."""

_FLAG = "adk_sqlstore_citus"  # on the engine's dialect, shared by its views and twins


def on_citus(bound: Any) -> bool:
    """Whether ``bound`` (a connection or engine, sync or async) reaches a database whose
    tables are distributed by Citus, as :func:`detect_citus` found: its per-user writes
    are then plain statements (single-row or multi-row ``VALUES``, ``UPDATE`` and
    ``DELETE`` filtered on ``user_id``), which Citus routes to the user's one shard and
    commits there in one phase; data-modifying CTEs and ``INSERT ... SELECT`` from
    arrays, the single server's one-round-trip forms, would be planned through the
    coordinator and committed in two phases on every worker."""
    return bool(getattr(bound.dialect, _FLAG, False))


_DETECT = text("/* catalog */ SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')")
_DISTRIBUTED = text(
    "/* catalog */ SELECT EXISTS (SELECT 1 FROM pg_dist_partition"
    " WHERE logicalrelid = to_regclass('sqlstore_sessions'))"
)


async def detect_citus(conn: AsyncConnection) -> bool:
    """Find whether the store's tables are distributed by Citus, and remember it on the
    engine's dialect (:func:`on_citus`). PostgreSQL only; two catalog reads."""
    found = False
    if conn.dialect.name == "postgresql" and (await conn.execute(_DETECT)).scalar():
        found = bool((await conn.execute(_DISTRIBUTED)).scalar())
    setattr(conn.dialect, _FLAG, found)
    return found
