"""Running a batch of SQLite statements in one hop to aiosqlite's thread, or in the
event loop itself.

aiosqlite runs every call on its connection in a thread of its own; SQLAlchemy's
adapter makes each statement (and each fetch) one hop there and back. The hot paths
(:mod:`.hot_paths`) and the purge of deleted text (:mod:`.maintenance`) instead hand
aiosqlite a whole batch: a function of a DB-API connection that runs several
statements, begun and ended by itself. That is one hop instead of five to ten, and
halves the time of an append.

A short write (an append: a few rows, bounded by the size limits) can skip the hop
too: on the connection the hot paths hold (:class:`~.held.HeldConnection`), a batch
run with ``in_loop=True`` runs in the event loop's own thread, as a synchronous
``sqlite3`` program would (measured: 700 -> 320 us per append on a busy 2-vCPU
machine; the hop's futures and wake-ups cost more than the batch's SQL). It must not
block the loop, so while the connection serves such batches it is in *loop mode*:

- ``busy_timeout = 0``: where another connection holds the write lock, ``BEGIN
  IMMEDIATE`` fails at once (nothing written) and the batch runs again in aiosqlite's
  thread, which waits for the lock as every other write does;
- ``wal_autocheckpoint = 0``: the commit that crosses SQLite's checkpoint threshold
  would copy the write-ahead log into the database and fsync it in the loop
  (measured: 6-7 ms); instead every :data:`CHECKPOINT_EVERY` in-loop writes are
  followed by a passive checkpoint in aiosqlite's thread.

Any batch run in the thread on that connection first puts its settings back, and so
does :func:`restore_on_checkout` (a pool ``checkout`` listener) when the connection is
checked out again after going back to the pool.

aiosqlite has no public way to run a function in its thread, so :func:`run_batch` uses
its private ``_execute``/``_conn`` (present from aiosqlite 0.17 to 0.22, the versions
tested). Where they are missing the same batch runs through SQLAlchemy's adapter
instead: each statement then is one hop, slower but the same transaction and results
(``tests/test_sqlite_thread.py`` runs both); batches then never run in the loop.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection

__all__ = [
    "CHECKPOINT_EVERY",
    "allow_in_loop",
    "execute",
    "fetch_all",
    "fetch_one",
    "restore_on_checkout",
    "rollback_quietly",
    "run_batch",
]

T = TypeVar("T")

_QUEUE_INFO = "adk_sqlstore_sqlite_queue"
_LOOP_INFO = "adk_sqlstore_sqlite_loop"

CHECKPOINT_EVERY = 100
"""In-loop writes between two passive checkpoints run in aiosqlite's thread (SQLite
checkpoints by itself at 1,000 pages of log; an append writes a few pages)."""

_BUSY = (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


def execute(db: Any, sql: str, params: Any = ()) -> Any:
    """Run one statement on a DB-API connection; the cursor (for its rows)."""
    cursor = db.cursor()
    cursor.execute(sql, params)
    return cursor


def fetch_one(db: Any, sql: str, params: Any = ()) -> tuple[Any, ...] | None:
    """The first row of one statement, or ``None``."""
    row = execute(db, sql, params).fetchone()
    return None if row is None else tuple(row)


def fetch_all(db: Any, sql: str, params: Any = ()) -> list[tuple[Any, ...]]:
    """Every row of one statement."""
    return [tuple(row) for row in execute(db, sql, params).fetchall()]


def rollback_quietly(db: Any) -> None:
    """Roll back the batch's transaction, if one is still open."""
    with contextlib.suppress(sqlite3.Error):
        execute(db, "ROLLBACK")


@dataclass
class _Loop:
    """A connection's state for in-loop batches (kept in its ``info``)."""

    db: sqlite3.Connection
    busy_timeout: int = 0  # milliseconds: the connection's own, put back on leaving
    autocheckpoint: int = 0  # pages: likewise
    active: bool = False  # in loop mode now
    writes: int = 0  # in-loop writes since the last checkpoint

    def enter(self) -> None:
        """Loop mode (in the loop's thread): no waiting, no checkpoint on commit."""
        if not self.active:
            (self.busy_timeout,) = fetch_one(self.db, "PRAGMA busy_timeout") or (0,)
            (self.autocheckpoint,) = fetch_one(self.db, "PRAGMA wal_autocheckpoint") or (0,)
            execute(self.db, "PRAGMA busy_timeout = 0")
            execute(self.db, "PRAGMA wal_autocheckpoint = 0")
            self.active = True

    def leave(self, db: Any) -> None:
        """The connection's own settings back (in aiosqlite's thread)."""
        if self.active:
            execute(db, f"PRAGMA busy_timeout = {int(self.busy_timeout)}")
            execute(db, f"PRAGMA wal_autocheckpoint = {int(self.autocheckpoint)}")
            self.active = False


def _queue(driver: Any) -> Callable[..., Awaitable[Any]] | None:
    """aiosqlite's own way to run ``fn(sqlite3_connection, *args)`` in its thread, or
    ``None`` where this aiosqlite lacks it."""
    queue = getattr(driver, "_execute", None)
    connection = getattr(driver, "_conn", None)
    if not callable(queue) or not isinstance(connection, sqlite3.Connection):
        return None

    async def run(fn: Callable[..., Any], *args: Any) -> Any:
        return await queue(fn, connection, *args)

    return run


async def allow_in_loop(conn: AsyncConnection) -> None:
    """Let ``run_batch(conn, ..., in_loop=True)`` run in the event loop (``conn`` is
    the held connection, used by one task at a time); a no-op where aiosqlite's
    connection cannot be reached or may not be used from this thread (an in-memory
    database opened with ``check_same_thread``)."""
    raw = await conn.get_raw_connection()
    db = getattr(raw.driver_connection, "_conn", None)
    if _queue(raw.driver_connection) is None or not isinstance(db, sqlite3.Connection):
        return
    try:
        db.cursor().close()  # raises ProgrammingError where the thread is checked
    except sqlite3.ProgrammingError:
        return
    conn.info[_LOOP_INFO] = _Loop(db)


def restore_on_checkout(dbapi_connection: Any, info: dict[str, Any]) -> None:
    """A pool ``checkout`` listener's part: a connection the hot paths held comes out
    of the pool with its own settings and no longer runs batches in the loop (until
    :func:`allow_in_loop` again). ``info``: the connection record's."""
    state: _Loop | None = info.pop(_LOOP_INFO, None)
    if state is not None and state.active:
        state.leave(dbapi_connection)  # SQLAlchemy's adapter: a hop per statement


async def run_batch(
    conn: AsyncConnection, batch: Callable[..., T], *args: Any, in_loop: bool = False
) -> T:
    """Run ``batch(db, *args)`` on ``conn``'s SQLite connection, where ``db`` is a DB-API
    connection (use :func:`execute`, :func:`fetch_one`, :func:`fetch_all`). ``conn``
    must be outside any transaction: the batch begins and ends its own.

    ``in_loop``: ``batch`` is a short write that begins with ``BEGIN IMMEDIATE`` and
    rolls back on any error; on a connection :func:`allow_in_loop` let, it runs in the
    event loop, and again in aiosqlite's thread if the write lock was taken.

    Raises:
        sqlalchemy.exc.DBAPIError: SQLite's error, wrapped as SQLAlchemy wraps it
            (``IntegrityError``, ``OperationalError``, ...).
    """
    state: _Loop | None = conn.info.get(_LOOP_INFO)
    try:
        if in_loop and state is not None:
            try:
                state.enter()
                result = batch(state.db, *args)
            except sqlite3.OperationalError as exc:
                if exc.sqlite_errorcode & 0xFF not in _BUSY:
                    raise
            else:
                state.writes += 1
                if state.writes >= CHECKPOINT_EVERY:
                    state.writes = 0
                    await _in_thread(conn, _checkpoint)
                return result
        return await _in_thread(conn, batch, *args, state=state)
    except sqlite3.Error as exc:
        raise DBAPIError.instance(batch.__name__, None, exc, sqlite3.Error) from exc


def _checkpoint(db: Any) -> None:
    """A passive checkpoint: what no reader still needs of the log is copied into the
    database (without waiting for readers or writers)."""
    fetch_one(db, "PRAGMA wal_checkpoint(PASSIVE)")


async def _in_thread(
    conn: AsyncConnection, batch: Callable[..., T], *args: Any, state: _Loop | None = None
) -> T:
    """Run ``batch`` in aiosqlite's thread, the connection's own settings first."""
    # The connection's own way into aiosqlite's thread, kept in its info (which the
    # pool clears when it replaces the DB-API connection): a lookup instead of a
    # greenlet round trip per batch.
    queue = conn.info.get(_QUEUE_INFO)
    raw = None
    if queue is None:
        raw = await conn.get_raw_connection()
        queue = _queue(raw.driver_connection)
        if queue is not None:
            conn.info[_QUEUE_INFO] = queue
    if state is not None and state.active:
        batch = _after_leaving(state, batch)
    if queue is not None:
        return cast(T, await queue(batch, *args))
    assert raw is not None
    return await conn.run_sync(lambda _: batch(raw.dbapi_connection, *args))


def _after_leaving(state: _Loop, batch: Callable[..., T]) -> Callable[..., T]:
    def run(db: Any, *args: Any) -> T:
        state.leave(db)
        return batch(db, *args)

    run.__name__ = batch.__name__
    return run
