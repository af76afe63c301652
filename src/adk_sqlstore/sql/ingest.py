"""Memories written in one round trip: a session's (``add_session_to_memory``) and
a list of them (``add_events_to_memory``, ``add_memory``).

What the memory service otherwise does in a transaction of several statements (for a
session: its row locked and checked, its memories' ids read, those gone deleted, the
rows upserted, the ingestion recorded; for a list: the memories of events without text
deleted, the rows upserted), as one statement on PostgreSQL (data-modifying CTEs, run
outside an explicit transaction: PostgreSQL runs it atomically on one snapshot) and as
one batch in aiosqlite's thread on SQLite (:mod:`.sqlite_thread`, the whole
transaction there). The rows, the statistics the triggers keep and the ingestion
record come out as from the statements of :mod:`.memory`. When a session's stored
incarnation or revision is not the one expected, nothing is written and the caller
takes its transaction path.

On PostgreSQL each statement takes the user lock first (``"exclusive"``,
:func:`.users.pg_user_lock`: every other part of it waits for it), then the session's
row, as the transaction paths do (:data:`.users.LOCK_ORDER`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from ..errors import ConcurrencyConflictError
from .citus import WRITE_MEMORIES_FUNCTION, on_citus
from .constructs import CHUNK, PG_ARRAY_ROWS, chunks
from .memory import MEMORY_COMPARED, MEMORY_UPDATABLE, PG_COLUMN_TYPES
from .pg_direct import PgStatement, fetch
from .sqlite_thread import execute, fetch_all, fetch_one, rollback_quietly, run_batch
from .users import SQLITE_CREATE_USER, pg_user_lock

__all__ = ["SessionMemories", "one_round_trip", "replace_session_memories", "write_memories"]


@dataclass(frozen=True)
class SessionMemories:
    """One session's memories as they are to be stored.

    ``incarnation`` and ``revision`` are the session's as loaded from this store: the
    write happens only while the stored row still has both (and it is locked against
    deletion until the write ends). ``incarnation=None``: a session not from this
    store, written without a check.
    """

    app_name: str
    user_id: str
    session_id: str
    incarnation: str | None
    revision: int | None
    rows: Sequence[dict[str, Any]]
    now: float

    def params(self) -> dict[str, Any]:
        return {
            "app_name": self.app_name,
            "user_id": self.user_id,
            "session_id": self.session_id,
            "incarnation": self.incarnation,
            "revision": self.revision,
            "event_count": len(self.rows),
            "now": self.now,
        }


_COLUMNS = ("app_name", "user_id", "id", *MEMORY_UPDATABLE)
_SET = ", ".join(f"{c} = excluded.{c}" for c in MEMORY_UPDATABLE)
_CHANGED = " OR ".join(
    f"sqlstore_memories.{c} IS DISTINCT FROM excluded.{c}" for c in MEMORY_COMPARED
)
_CONFLICT = f" ON CONFLICT (app_name, user_id, id) DO UPDATE SET {_SET} WHERE {_CHANGED}"
_RECORD = (
    " ON CONFLICT (app_name, user_id, session_id) DO UPDATE SET revision = excluded.revision,"
    " event_count = excluded.event_count, ingest_time = excluded.ingest_time"
)
_SESSION_WHERE = "app_name = :app_name AND user_id = :user_id AND id = :session_id"

# -- PostgreSQL ---------------------------------------------------------------------------

# With the session checked, the user has a row (their session is there); without, the
# write may be the user's first, and makes it.
_PG_LOCKS = {check: pg_user_lock("exclusive", create=not check) for check in (True, False)}
_PG_CHECKED = {
    True: f"SELECT 1 FROM sqlstore_sessions WHERE {_SESSION_WHERE}"
    " AND incarnation = CAST(:incarnation AS TEXT) AND revision = CAST(:revision AS BIGINT)"
    " AND {held} FOR SHARE",
    False: "SELECT 1 WHERE {held}",
}
_PG_ARRAYS = ", ".join(
    f"CAST(:rows_{c} AS {PG_COLUMN_TYPES.get(c, 'TEXT')}[])" for c in ("id", *MEMORY_UPDATABLE)
)
_PG_REPLACE = """
WITH {lock},
checked AS ({checked}),
gone AS (
    DELETE FROM sqlstore_memories
    WHERE app_name = :app_name AND user_id = :user_id AND session_id = :session_id
      AND NOT (id = ANY(CAST(:rows_id AS TEXT[]))) AND EXISTS (SELECT 1 FROM checked)
    RETURNING 1
),
upserted AS (
    INSERT INTO sqlstore_memories ({columns})
    SELECT CAST(:app_name AS TEXT), CAST(:user_id AS TEXT), m.*
    FROM unnest({arrays}) AS m WHERE EXISTS (SELECT 1 FROM checked)
    {conflict}
),
recorded AS (
    INSERT INTO sqlstore_memory_ingestions
        (app_name, user_id, session_id, revision, event_count, ingest_time)
    SELECT CAST(:app_name AS TEXT), CAST(:user_id AS TEXT), CAST(:session_id AS TEXT),
           CAST(:revision AS BIGINT), CAST(:event_count AS BIGINT),
           CAST(:now AS DOUBLE PRECISION)
    FROM checked
    {record}
)
SELECT (SELECT count(*) FROM checked), (SELECT count(*) FROM gone)
"""
_PG_STATEMENTS = {
    check: text(
        _PG_REPLACE.format(
            lock=_PG_LOCKS[check][0],
            checked=sql.format(held=_PG_LOCKS[check][1]),
            columns=", ".join(_COLUMNS),
            arrays=_PG_ARRAYS,
            conflict=_CONFLICT,
            record=_RECORD,
        )
    )
    for check, sql in _PG_CHECKED.items()
}
"""One statement per case: the session checked (and locked) or not."""

_PG_WRITE_LOCK, _PG_WRITE_HELD = pg_user_lock("exclusive", create=True)
_PG_UPSERT = (
    f"upserted AS (INSERT INTO sqlstore_memories ({', '.join(_COLUMNS)})"
    f" SELECT CAST(:app_name AS TEXT), CAST(:user_id AS TEXT), m.* FROM unnest({_PG_ARRAYS})"
    f" AS m WHERE {_PG_WRITE_HELD}{_CONFLICT})"
)
_PG_GONE = (
    "gone AS (DELETE FROM sqlstore_memories WHERE app_name = :app_name"
    f" AND user_id = :user_id AND id = ANY(CAST(:gone AS TEXT[])) AND {_PG_WRITE_HELD})"
)
_PG_WRITES = {
    gone: text(
        f"WITH {_PG_WRITE_LOCK},\n{_PG_GONE + ',' if gone else ''}\n{_PG_UPSERT}\n"
        f"SELECT {_PG_WRITE_HELD}"
    )
    for gone in (False, True)
}
"""The user locked (and made if absent), then the memories of ``:gone`` ids deleted or
not, then the rows upserted; the statement returns whether the lock was held (if not,
the user was forgotten while it waited, and nothing was written)."""


def _arrays(params: dict[str, Any], rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    for column in ("id", *MEMORY_UPDATABLE):
        params[f"rows_{column}"] = [row[column] for row in rows]
    return params


async def _postgres_replace(conn: AsyncConnection, write: SessionMemories) -> int | None:
    params = _arrays(write.params(), write.rows)
    statement = _PG_STATEMENTS[write.incarnation is not None]
    checked, deleted = (await conn.execute(statement, params)).one()
    return int(deleted) if checked else None


_CITUS_WRITE = PgStatement(
    text(
        f"SELECT {WRITE_MEMORIES_FUNCTION}(:app_name, :user_id, :now, :gone, "
        + ", ".join(f":rows_{c}" for c in ("id", *MEMORY_UPDATABLE))
        + ")"
    )
)


async def _postgres_write(
    conn: AsyncConnection,
    app_name: str,
    user_id: str,
    rows: Sequence[Any],
    gone: Sequence[str],
    now: float,
) -> bool:
    params = _arrays(
        {"app_name": app_name, "user_id": user_id, "gone": list(gone), "now": now}, rows
    )
    if on_citus(conn):  # the function the user's worker runs (delegated there)
        return bool((await fetch(conn, _CITUS_WRITE, params))[0][0])
    return bool((await conn.execute(_PG_WRITES[bool(gone)], params)).scalar_one())


# -- SQLite -------------------------------------------------------------------------------

_SQLITE_SESSION = f"SELECT incarnation, revision FROM sqlstore_sessions WHERE {_SESSION_WHERE}"
_SQLITE_EXISTING = (
    "SELECT id, pk FROM sqlstore_memories"
    " WHERE app_name = :app_name AND user_id = :user_id AND session_id = :session_id"
)
_SQLITE_DELETE = (
    "DELETE FROM sqlstore_memories WHERE app_name = ? AND user_id = ? AND {key} IN ({marks})"
)
_SQLITE_UPSERT = (
    f"INSERT INTO sqlstore_memories ({', '.join(_COLUMNS)})"
    f" VALUES ({', '.join(':' + c for c in _COLUMNS)}){_CONFLICT}"
).replace(" IS DISTINCT FROM ", " IS NOT ")
_SQLITE_RECORD = (
    "INSERT INTO sqlstore_memory_ingestions"
    " (app_name, user_id, session_id, revision, event_count, ingest_time)"
    " VALUES (:app_name, :user_id, :session_id, :revision, :event_count, :now)" + _RECORD
)


def _sqlite_replace(db: Any, write: SessionMemories) -> int | None:
    """The ingestion as one SQLite transaction (a batch of :mod:`.sqlite_thread`)."""
    params = write.params()
    execute(db, "BEGIN IMMEDIATE")
    try:
        if write.incarnation is not None:
            stored = fetch_one(db, _SQLITE_SESSION, params)
            if stored is None or tuple(stored) != (write.incarnation, write.revision):
                execute(db, "ROLLBACK")
                return None
        else:  # the user's first row, maybe: theirs made if absent (sql.users)
            execute(db, SQLITE_CREATE_USER, params)
        keep = {row["id"] for row in write.rows}
        gone = [pk for mid, pk in fetch_all(db, _SQLITE_EXISTING, params) if mid not in keep]
        deleted = _sqlite_delete(db, write.app_name, write.user_id, "pk", gone)
        if write.rows:
            db.cursor().executemany(_SQLITE_UPSERT, write.rows)
        execute(db, _SQLITE_RECORD, params)
        execute(db, "COMMIT")
        return deleted
    except BaseException:
        rollback_quietly(db)
        raise


def _sqlite_delete(db: Any, app_name: str, user_id: str, key: str, keys: Sequence[Any]) -> int:
    """Delete the user's memories whose ``key`` (``pk`` or ``id``) is one of ``keys``."""
    deleted = 0
    for chunk in chunks(keys, CHUNK):
        marks = ", ".join("?" * len(chunk))
        sql = _SQLITE_DELETE.format(key=key, marks=marks)
        deleted += execute(db, sql, (app_name, user_id, *chunk)).rowcount
    return deleted


def _sqlite_write(
    db: Any, app_name: str, user_id: str, rows: Sequence[Any], gone: Sequence[str], now: float
) -> None:
    """A list of memories written as one SQLite transaction (a batch)."""
    execute(db, "BEGIN IMMEDIATE")
    try:
        user = {"app_name": app_name, "user_id": user_id, "now": now}
        execute(db, SQLITE_CREATE_USER, user)
        _sqlite_delete(db, app_name, user_id, "id", gone)
        if rows:
            db.cursor().executemany(_SQLITE_UPSERT, rows)
        execute(db, "COMMIT")
    except BaseException:
        rollback_quietly(db)
        raise


def one_round_trip(bound: Any, rows: int, *, replacing: bool = False) -> bool:
    """Whether the writes here take ``rows`` rows on ``bound``'s database (an engine or
    connection): :func:`replace_session_memories` (``replacing``) or
    :func:`write_memories`. PostgreSQL: one statement's arrays, at most
    :data:`~.constructs.PG_ARRAY_ROWS` rows (more are written a chunk per statement in
    a transaction, :func:`.memory.upsert_memories`); Citus (:func:`.citus.on_citus`):
    :func:`write_memories` only, any number of rows (a call of a function run on the
    user's worker); MySQL and MariaDB: never, their writes are the statements of
    :mod:`.memory` in a transaction."""
    dialect = bound.dialect.name
    if on_citus(bound):
        return not replacing
    if dialect == "mysql":
        return False
    return dialect != "postgresql" or rows <= PG_ARRAY_ROWS


async def replace_session_memories(conn: AsyncConnection, write: SessionMemories) -> int | None:
    """Upsert ``write.rows`` as the session's memories, delete its others and record the
    ingestion (``write.revision``, the number of rows), atomically in one round trip.

    ``conn`` must be outside any transaction (PostgreSQL: in AUTOCOMMIT mode). Every
    row must be of ``write``'s user and session, and as many as :func:`one_round_trip`
    allows.

    Returns:
        How many memories were deleted, or ``None`` when the stored session is gone or
        not at ``write``'s incarnation and revision (nothing was written).
    """
    if conn.dialect.name == "postgresql":
        return await _postgres_replace(conn, write)
    return await run_batch(conn, _sqlite_replace, write)


async def write_memories(
    conn: AsyncConnection,
    *,
    app_name: str,
    user_id: str,
    rows: Sequence[dict[str, Any]],
    gone: Sequence[str] = (),
    now: float,
) -> None:
    """Delete the user's memories with the ids ``gone``, then upsert ``rows`` (as
    :func:`.memory.upsert_memories`: unchanged rows are not rewritten; of rows with
    the same id, the last wins), atomically in one round trip, under the user lock
    (the user's row made if absent, ``now`` its creation time).

    ``conn`` must be outside any transaction (PostgreSQL: in AUTOCOMMIT mode). Every
    row must be of the user, as many as :func:`one_round_trip` allows, and none of
    their ids in ``gone``.

    Raises:
        ConcurrencyConflictError: the user was forgotten while the statement waited for
            their lock (PostgreSQL); nothing was written: run it again.
    """
    if conn.dialect.name == "postgresql":
        latest: dict[str, dict[str, Any]] = {}
        for row in rows:  # one statement may not update a row twice
            latest[row["id"]] = row
        if not await _postgres_write(conn, app_name, user_id, list(latest.values()), gone, now):
            raise ConcurrencyConflictError(
                f"user {user_id!r} of app {app_name!r} was forgotten while their memories"
                " waited to be written; nothing was written"
            )
        return
    await run_batch(conn, _sqlite_write, app_name, user_id, rows, gone, now)
