"""Running a batch of SQLite statements in one hop to aiosqlite's thread.

aiosqlite runs every call on its connection in a thread of its own; SQLAlchemy's
adapter makes each statement (and each fetch) one hop there and back. The hot paths
(:mod:`.hot_paths`) and the purge of deleted text (:mod:`.maintenance`) instead hand
aiosqlite a whole batch: a function of a DB-API connection that runs several
statements, begun and ended by itself. That is one hop instead of five to ten, and
halves the time of an append.

aiosqlite has no public way to run a function in its thread, so :func:`run_batch` uses
its private ``_execute``/``_conn`` (present from aiosqlite 0.17 to 0.22, the versions
tested). Where they are missing the same batch runs through SQLAlchemy's adapter
instead: each statement then is one hop, slower but the same transaction and results
(``tests/test_sqlite_thread.py`` runs both).
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, cast

from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection

__all__ = ["execute", "fetch_all", "fetch_one", "rollback_quietly", "run_batch"]

T = TypeVar("T")

_QUEUE_INFO = "adk_sqlstore_sqlite_queue"


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


async def run_batch(conn: AsyncConnection, batch: Callable[..., T], *args: Any) -> T:
    """Run ``batch(db, *args)`` on ``conn``'s SQLite connection, where ``db`` is a DB-API
    connection (use :func:`execute`, :func:`fetch_one`, :func:`fetch_all`). ``conn``
    must be outside any transaction: the batch begins and ends its own.

    Raises:
        sqlalchemy.exc.DBAPIError: SQLite's error, wrapped as SQLAlchemy wraps it
            (``IntegrityError``, ``OperationalError``, ...).
    """
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
    try:
        if queue is not None:
            return cast(T, await queue(batch, *args))
        assert raw is not None
        return await conn.run_sync(lambda _: batch(raw.dbapi_connection, *args))
    except sqlite3.Error as exc:
        raise DBAPIError.instance(batch.__name__, None, exc, sqlite3.Error) from exc
