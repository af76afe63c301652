"""The SQLite connection the hot paths keep checked out between their batches."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.pool import Pool

from .sqlite_thread import allow_in_loop

__all__ = ["HeldConnection"]


class HeldConnection:
    """SQLite: one connection kept checked out between the hot paths' batches
    (:mod:`adk_sqlstore.sql.sqlite_thread`), so that an append does not pay a pool
    checkout and check-in through SQLAlchemy's asyncio layer (measured: about 190 us of
    the 750 us of an append on a busy 2-vCPU machine, more than the batch's own SQL).
    One task at a time uses it; a task that finds it in use takes a pooled connection,
    as before. Appends on it run in the event loop itself
    (:func:`~.sqlite_thread.allow_in_loop`). After a failure or a cancellation it is
    closed, and the next use opens another.
    """

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._conn: AsyncConnection | None = None
        self._pool: Pool | None = None  # the pool self._conn was checked out of
        self._busy = False

    @contextlib.asynccontextmanager
    async def use(self) -> AsyncIterator[AsyncConnection | None]:
        """The held connection, or ``None`` while another task uses it. A transaction
        left open on it is rolled back at the end."""
        if self._busy:
            yield None
            return
        self._busy = True
        try:
            if self._conn is None:
                self._pool = self._engine.sync_engine.pool
                self._conn = await self._engine.connect()
                await allow_in_loop(self._conn)
            conn = self._conn
            try:
                yield conn
            except BaseException:
                self._conn = None
                await _close_quietly(conn)
                raise
            if conn.in_transaction():
                await conn.rollback()
        finally:
            self._busy = False

    async def release(self) -> None:
        """Return the connection to the pool (before the pool is disposed); close it
        instead where the engine was disposed meanwhile (``engine.dispose()`` leaves
        checked-out connections to the pool it replaced, which nothing would close)."""
        conn, self._conn = self._conn, None
        if conn is None:
            return
        if self._engine.sync_engine.pool is not self._pool:
            with contextlib.suppress(Exception):
                await asyncio.shield(conn.invalidate())
        await _close_quietly(conn)


async def _close_quietly(conn: AsyncConnection) -> None:
    with contextlib.suppress(Exception):
        await asyncio.shield(conn.close())
