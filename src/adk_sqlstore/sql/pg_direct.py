"""PostgreSQL: the hot paths' statements sent to asyncpg itself, past SQLAlchemy's
execution layer (the counterpart of :mod:`.sqlite_thread`).

Through ``AsyncConnection.execute`` a one-statement append cost about 500 us of
Python on a 2-vCPU machine, most of it SQLAlchemy's execution context, events, result
object and greenlet switch around asyncpg's own call; straight to asyncpg it took
about a fifth less, and 20 tasks appending at once (CPU-bound in the client) 1.3-1.6x
the events per second (``benchmarks``, 2026-12-02). The statement is compiled once by
SQLAlchemy's asyncpg dialect (its ``$n`` text and parameter order), on the connection
SQLAlchemy checked out (its pool, codecs, time-outs and settings unchanged).

SQLAlchemy's own path is taken instead whenever something listens to the engine's
statements (``before_cursor_execute``/``after_cursor_execute``: OpenTelemetry's
SQLAlchemy instrumentation, a test's recorder), so that they see every statement, and
inside a transaction SQLAlchemy began (behind a transaction pooler).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

from sqlalchemy.dialects.postgresql import asyncpg as asyncpg_dialect
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.elements import TextClause

__all__ = ["PgStatement", "fetch"]


class PgStatement:
    """A hot path's PostgreSQL statement: the SQLAlchemy clause, and the same compiled
    for asyncpg (``$n`` placeholders, the names in their order)."""

    def __init__(self, clause: TextClause) -> None:
        self.clause = clause
        compiled = clause.compile(dialect=asyncpg_dialect.dialect())  # type: ignore[no-untyped-call]
        self.sql = compiled.string
        self.names = tuple(compiled.positiontup or ())


def _observed(conn: AsyncConnection) -> bool:
    dispatch = conn.sync_engine.dispatch
    return bool(dispatch.before_cursor_execute or dispatch.after_cursor_execute)


async def fetch(
    conn: AsyncConnection, statement: PgStatement, params: dict[str, Any]
) -> Sequence[Sequence[Any]]:
    """The rows of one statement on ``conn`` (PostgreSQL, checked out, outside a
    transaction: the statement commits by itself).

    Raises:
        sqlalchemy.exc.IntegrityError: a constraint violation, wrapped as SQLAlchemy
            wraps it (``.orig`` is asyncpg's exception, with its ``sqlstate``).
        asyncpg.PostgresError: any other error of the statement (the connection is
            kept: outside a transaction nothing is left open on it).
        BaseException: anything else (a lost connection, a cancellation mid-statement):
            the connection is invalidated first, so that the pool never hands it out
            again in an unknown state (as SQLAlchemy does).
    """
    sync = conn.sync_connection
    if sync is None or sync.invalidated or conn.in_transaction() or _observed(conn):
        return (await conn.execute(statement.clause, params)).all()
    import asyncpg

    driver: Any = sync.connection.driver_connection
    args = [params[name] for name in statement.names]
    try:
        rows: Sequence[Sequence[Any]] = await driver.fetch(statement.sql, *args)
    except asyncpg.IntegrityConstraintViolationError as exc:
        raise IntegrityError(statement.sql, args, exc) from exc
    except asyncpg.PostgresError:
        if driver.is_closed():  # the server ended the session (a shutdown, a kill)
            await _invalidate(conn)
        raise
    except BaseException:
        await _invalidate(conn)
        raise
    return rows


async def _invalidate(conn: AsyncConnection) -> None:
    with contextlib.suppress(Exception):  # the original failure is the one to raise
        await conn.invalidate()
