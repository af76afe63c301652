"""The user lock, and the one order in which every transaction takes its locks.

Every transaction that writes a user's rows locks the user's ``sqlstore_users`` row
first (the *user lock*), in the mode of what it writes, then the tables in the order
of :data:`LOCK_ORDER`; rows of one table that it locks several of (sessions, users)
it locks in key order. Two writers of one user then never wait for each other in a
cycle, on any backend (``docs/architecture.md``, "Locks"):

- ``"share"``: writers of sessions and state (``create_session``, ``import_state``),
  which may run beside each other and beside appends (PostgreSQL ``FOR KEY SHARE``;
  MySQL ``FOR UPDATE``, see below);
- ``"exclusive"``: writers of memories, artifacts or several tables of the user
  (ingestion, ``add_memory``, ``delete_memories``, ``delete_session``,
  ``import_session``, artifact saves and deletes, ``prune``, re-indexing, embedding
  backfills), which take turns per user (PostgreSQL ``FOR NO KEY UPDATE``, which
  ``"share"`` holders do not wait for; MySQL ``FOR UPDATE``);
- ``"forget"``: ``forget_user``, which waits for every writer of the user holding the
  lock and keeps new ones waiting until it commits (``FOR UPDATE`` on both; it makes
  the row if absent, which on PostgreSQL waits for a transaction making the user's
  first row: a plain locking read does not see that row, and ``forget_user`` then
  deleted the rows of that writer's that it saw, one table at a time, and left the
  others), then locks the user's sessions: an append, the one writer that takes no user lock,
  locks its session row first, so it commits before ``forget_user`` deletes it or
  finds it gone.

MySQL and MariaDB lock ``FOR UPDATE`` in every mode: InnoDB keeps a lock that a read
took on a row deleted meanwhile (by ``forget_user``), and a writer that then made the
row again turned its shared lock into an exclusive one, which deadlocked with a writer
waiting for the exclusive lock (found by ``tests/test_forget_races.py``); so there
writers of one user's sessions take turns too. SQLite has one writer at a time
(``BEGIN IMMEDIATE``), so there nothing is locked, but the row is made where the other
backends make it. A writer that may give a user their
first row (``create=True``) makes the row when it is absent, so that a user with any
row has one, and ``forget_user`` deletes it with the rest.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Literal

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from ..errors import ConcurrencyConflictError

__all__ = [
    "EXCLUSIVE_TABLES",
    "LOCK_ORDER",
    "PG_LOCK_MODES",
    "SQLITE_CREATE_USER",
    "LockMode",
    "delete_user",
    "lock_user",
    "lock_users",
    "pg_user_lock",
]

LockMode = Literal["share", "exclusive", "forget"]

LOCK_ORDER: tuple[tuple[str, ...], ...] = (
    ("sqlstore_users",),
    ("sqlstore_sessions",),
    ("sqlstore_events", "sqlstore_session_state"),
    ("sqlstore_user_state",),
    ("sqlstore_app_state",),
    (
        "sqlstore_memory_ingestions",
        "sqlstore_memories",
        "sqlstore_memory_embeddings",
        "sqlstore_memory_stats",
        "sqlstore_memory_terms",
        "sqlstore_memory_postings",
        "sqlstore_memories_fts",
        "sqlstore_fact_leases",
        "sqlstore_fact_sources",
        "sqlstore_facts",
        "sqlstore_fact_revisions",
    ),
    ("sqlstore_artifact_contents", "sqlstore_artifact_chunks", "sqlstore_artifacts"),
)
"""The order in which a transaction first locks rows of each table, group by group
(the user's row, then the user's sessions in key order, then their events and session
state, ...). Within a group the order is free: the groups' tables are written only by
writers of one row (an append writes its own session's events and state) or by
writers holding the user lock in ``"exclusive"`` or ``"forget"`` mode
(:data:`EXCLUSIVE_TABLES`), which take turns. App state, shared by an app's users,
comes after every user's own table but memories and artifacts, and its keys are
written in sorted order. ``tests/test_lock_order.py`` checks every writer against it."""

EXCLUSIVE_TABLES = frozenset(LOCK_ORDER[5] + LOCK_ORDER[6])
"""Tables only writers holding the user lock in ``"exclusive"`` or ``"forget"`` mode
write: memories and their index, artifacts."""

PG_LOCK_MODES: dict[LockMode, str] = {
    "share": "KEY SHARE",
    "exclusive": "NO KEY UPDATE",
    "forget": "UPDATE",
}
"""PostgreSQL's row lock (``FOR ...``) for each mode: ``KEY SHARE`` holders wait only
for ``UPDATE``; ``NO KEY UPDATE`` holders wait for each other and for ``UPDATE``."""
_WHERE = "app_name = :app_name AND user_id = :user_id"
_COLUMNS = "(app_name, user_id, create_time) VALUES (:app_name, :user_id, :now)"
_PG_CREATE = f"INSERT INTO sqlstore_users {_COLUMNS} ON CONFLICT (app_name, user_id) DO NOTHING"

SQLITE_CREATE_USER = f"INSERT INTO sqlstore_users {_COLUMNS} ON CONFLICT DO NOTHING"
"""SQLite: the user's row made if absent (named parameters ``app_name``, ``user_id``,
``now``), for the batches of :mod:`.sqlite_thread`."""


def pg_user_lock(mode: LockMode, *, create: bool) -> tuple[str, str]:
    """The user lock inside one PostgreSQL statement: ``(ctes, held)``, where ``ctes``
    are common table expressions to put first in its ``WITH`` (parameters
    ``:app_name``, ``:user_id`` and, with ``create``, ``:now``) and ``held`` a
    condition that is true once the lock is held (or the row made, which no one else
    can lock before this statement commits). Make every other part of the statement
    depend on ``held`` (``WHERE ... AND held``), so that PostgreSQL takes the user
    lock before anything else; where ``held`` is false (the user was forgotten while
    the statement waited) the statement must write nothing, and the caller raises
    :class:`~adk_sqlstore.errors.ConcurrencyConflictError` to run it again."""
    lock = PG_LOCK_MODES[mode]
    locked = f"user_locked AS (SELECT 1 FROM sqlstore_users WHERE {_WHERE} FOR {lock})"
    if not create:
        return locked, "EXISTS (SELECT 1 FROM user_locked)"
    created = f"user_created AS ({_PG_CREATE} RETURNING 1)"
    return (
        f"{created},\n{locked}",
        "(EXISTS (SELECT 1 FROM user_created) OR EXISTS (SELECT 1 FROM user_locked))",
    )


_PG_LOCK = {
    (mode, create): text("WITH {}\nSELECT {}".format(*pg_user_lock(mode, create=create)))
    for mode in PG_LOCK_MODES
    for create in (False, True)
}
_MYSQL_CREATE = text(
    f"INSERT INTO sqlstore_users {_COLUMNS} ON DUPLICATE KEY UPDATE create_time = create_time"
)
_MYSQL_LOCK = text(f"SELECT 1 FROM sqlstore_users WHERE {_WHERE} FOR UPDATE")
_SQLITE_CREATE = text(SQLITE_CREATE_USER)
_DELETE = text(f"DELETE FROM sqlstore_users WHERE {_WHERE}")
_ATTEMPTS = 10  # a user forgotten again and again while a writer waits for their lock


async def lock_user(
    conn: AsyncConnection,
    *,
    app_name: str,
    user_id: str,
    mode: LockMode,
    create: bool = False,
    now: float = 0.0,
) -> None:
    """Take the user lock in ``mode`` until the transaction ends: the first statement
    of a transaction that writes the user's rows (see the module docstring). With
    ``create``, the user's row is made if absent (``now``: its ``create_time``,
    seconds since the epoch); without, a user who has no row has nothing to lock and
    nothing is done, but in ``"exclusive"`` and ``"forget"`` mode, where the row is
    made all the same: a locking read that finds no row leaves nothing locked while
    another transaction makes the user's first row (PostgreSQL does not even wait for
    it), and a deleting writer that went on unlocked beside it saw that writer's rows one
    statement at a time (an artifact's bytes left without their version, on PostgreSQL
    and then MariaDB, found by ``tests/test_forget_races.py``).

    MySQL and MariaDB: the row is locked (``FOR UPDATE`` in every mode) before it is
    made (an insert that takes an exclusive lock on a row made meanwhile), never
    locked shared and then exclusively, which InnoDB deadlocks on between two such
    writers.

    Raises:
        ConcurrencyConflictError: the user was forgotten again each time this waited
            for their lock (:data:`_ATTEMPTS` times).
    """
    params = {"app_name": app_name, "user_id": user_id, "now": now}
    dialect = conn.dialect.name
    if dialect == "sqlite":
        if create:
            await conn.execute(_SQLITE_CREATE, params)
        return
    if dialect == "mysql":
        locked = (await conn.execute(_MYSQL_LOCK, params)).first() is not None
        if not locked and (create or mode != "share"):
            params["now"] = now or time.time()
            await conn.execute(_MYSQL_CREATE, params)
        return
    if not create:
        if (await conn.execute(_PG_LOCK[mode, False], params)).scalar_one() or mode == "share":
            return
        params["now"] = now or time.time()
        # No row to lock: but a transaction may be making the user's first row, which a
        # locking read does not see (nor wait for), and this writer's statements would
        # then see that transaction's rows one table at a time. Making the row waits
        # for it (and leaves the user a row, as any writer does).
    for _ in range(_ATTEMPTS):
        if (await conn.execute(_PG_LOCK[mode, True], params)).scalar_one():
            return
        # forget_user deleted the row while this waited for it: make it again
    raise ConcurrencyConflictError(
        f"user {user_id!r} of app {app_name!r} was forgotten again each time this call"
        " waited for the user's lock"
    )


async def lock_users(
    conn: AsyncConnection, keys: Iterable[tuple[str, str]], *, mode: LockMode
) -> None:
    """Take the user lock of each ``(app_name, user_id)`` in ``keys``, in key order
    (a transaction spanning users: prune, re-indexing, embedding backfills); users
    without a row have nothing to lock. One statement per user: each is routed to the
    user's shard on a distributed database."""
    for app_name, user_id in sorted(set(keys)):
        await lock_user(conn, app_name=app_name, user_id=user_id, mode=mode)


async def delete_user(conn: AsyncConnection, *, app_name: str, user_id: str) -> int:
    """Delete the user's row (``forget_user``, last); how many rows went (0 or 1)."""
    result = await conn.execute(_DELETE, {"app_name": app_name, "user_id": user_id})
    return int(result.rowcount)
