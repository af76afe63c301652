"""Driver, network and connection-pool failures, as this library's typed errors: the
one mapper every call goes through, so that the same failure gives the same error on
every backend, in one line that says what it most likely means, with passwords hidden.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from sqlalchemy.engine import URL
from sqlalchemy.exc import DBAPIError, DisconnectionError, IntegrityError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.ext.asyncio import AsyncEngine

from .errors import (
    AdkSqlStoreError,
    ConcurrencyConflictError,
    DatabaseUnavailableError,
    PoolTimeoutError,
)
from .url_display import shown_url

__all__ = [
    "conflict_error",
    "database_error",
    "database_errors",
    "driver_error",
    "is_conflict",
    "is_unique_violation",
]


_DRIVER_PACKAGES = frozenset({"asyncpg", "aiosqlite", "sqlite3", "asyncmy"})
_MYSQL_DUPLICATE_KEY = frozenset({1062, 1586})  # ER_DUP_ENTRY, ER_DUP_ENTRY_WITH_KEY_NAME
_MYSQL_DEADLOCK = 1213  # ER_LOCK_DEADLOCK
_CONFLICT_SQLSTATES = frozenset({"40P01", "40001"})  # deadlock_detected, serialization_failure


def driver_error(engine: AsyncEngine, exc: BaseException) -> DatabaseUnavailableError | None:
    """The typed error for a database, network or connection-pool failure of ``engine``
    (``None`` when ``exc`` is none of those: a bug to let through).

    Covers SQLAlchemy's driver errors, OS and network errors (refused, reset, broken
    pipe, timeouts), the drivers' own exceptions when they escape SQLAlchemy's wrapping
    (as some connect errors do with SQLAlchemy 2.0.x), and a pool that stayed full for
    ``pool_timeout`` seconds (:class:`PoolTimeoutError`).

    Raises:
        asyncio.CancelledError: ``exc`` is how a driver reported the cancellation of the
            running task (Ctrl-C, a timeout around the call): cancellation is not a
            database failure, and passes on as itself.
    """
    if _cancelled(exc):
        raise asyncio.CancelledError from exc
    if isinstance(exc, PoolTimeout):
        pool: Any = engine.sync_engine.pool  # a QueuePool: only it can time out
        size = f"pool_size {pool.size()} + max_overflow {pool._max_overflow}"
        timeout = pool.timeout()
        return PoolTimeoutError(
            f"no database connection became free within pool_timeout ({timeout} s) on"
            f" {shown_url(engine.url)}: all {size} were in use; raise pool_size or"
            " max_overflow (URL parameters or keyword arguments), or pool_timeout"
        )
    if isinstance(exc, (DBAPIError, OSError, DisconnectionError)) or (
        type(exc).__module__.partition(".")[0] in _DRIVER_PACKAGES
    ):
        return database_error(engine.url, exc)
    return None


def conflict_error(exc: BaseException) -> ConcurrencyConflictError | None:
    """The typed error for a transaction the server ended because it lost a race with
    another writer (:func:`is_conflict`), else ``None``."""
    if not is_conflict(exc):
        return None
    orig = _innermost(exc)
    detail = (str(orig).splitlines() or [""])[0]
    return ConcurrencyConflictError(
        f"lost a race with another writer of the same rows: the database ended the"
        f" transaction ({type(orig).__name__}: {detail}); nothing of it was written"
    )


def _cancelled(exc: BaseException) -> bool:
    """Whether ``exc`` wraps a cancellation of the running task (and not a driver's
    internal time-out dressed as one)."""
    task = _current_task()
    return bool(
        task is not None
        and task.cancelling()
        and isinstance(_innermost(exc), asyncio.CancelledError)
    )


def _current_task() -> asyncio.Task[Any] | None:
    try:
        return asyncio.current_task()
    except RuntimeError:  # no running loop
        return None


def _innermost(exc: BaseException) -> BaseException:
    """The driver's own error under SQLAlchemy's and adapters' wrappers."""
    orig = getattr(exc, "orig", None) or exc
    while orig.__cause__ is not None:
        orig = orig.__cause__
    return orig


@contextlib.contextmanager
def database_errors(
    engine: AsyncEngine, *, on_duplicate: Callable[[], AdkSqlStoreError] | None = None
) -> Iterator[None]:
    """Re-raise database, network and pool failures of ``engine`` as typed errors; this
    library's own errors and bugs pass unchanged. The one mapper: every call of every
    service goes through it, so the same failure gives the same error on every backend.

    - a transaction ended by the server to break a deadlock or a serialization failure
      (:func:`is_conflict`): :class:`ConcurrencyConflictError` (callers that may run
      the transaction again do, :func:`adk_sqlstore.store.retry_conflicts`);
    - a duplicate key (:func:`is_unique_violation`): ``on_duplicate()`` when given (the
      caller knows what is duplicated: a session id, an event id), else as below;
    - any other integrity violation, driver, network or pool failure
      (:func:`driver_error`): :class:`DatabaseUnavailableError` or its subclass
      :class:`PoolTimeoutError`.

    Usable around ``await`` (``with``, not ``async with``).
    """
    try:
        yield
    except AdkSqlStoreError:
        raise
    except IntegrityError as exc:
        if on_duplicate is not None and is_unique_violation(exc):
            raise on_duplicate() from exc
        raise database_error(engine.url, exc) from exc
    except Exception as exc:
        typed = conflict_error(exc) or driver_error(engine, exc)
        if typed is None:
            raise
        raise typed from exc


def is_unique_violation(exc: IntegrityError) -> bool:
    """Whether an ``IntegrityError`` is a duplicate key (and not, say, a NOT NULL or
    foreign key violation): SQLSTATE 23505 on PostgreSQL, "UNIQUE constraint failed"
    or "PRIMARY KEY" on SQLite, error 1062 (``ER_DUP_ENTRY``) on MySQL and MariaDB."""
    orig = exc.orig
    if orig is not None and type(orig).__module__.partition(".")[0] == "asyncmy":
        return bool(orig.args and orig.args[0] in _MYSQL_DUPLICATE_KEY)
    sqlstate = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    if sqlstate is not None:
        return bool(sqlstate == "23505")
    message = str(orig)
    return "UNIQUE constraint failed" in message or "PRIMARY KEY must be unique" in message


def is_conflict(exc: BaseException) -> bool:
    """Whether ``exc`` (a driver error, wrapped or not) is the server ending a
    transaction because it lost a race with another: a deadlock (SQLSTATE 40P01 on
    PostgreSQL, error 1213 on MySQL and MariaDB) or a serialization failure (40001).
    SQLite takes its write lock up front and has neither."""
    orig = _innermost(exc)
    if type(orig).__module__.partition(".")[0] == "asyncmy":
        return bool(orig.args and orig.args[0] == _MYSQL_DEADLOCK)
    return getattr(orig, "sqlstate", None) in _CONFLICT_SQLSTATES


# What a failure most likely means, by the driver's exception (its class name, as the
# drivers are imported only where installed).
_HINTS = {
    "ConnectionRefusedError": "could not connect: is the server running, and are the host"
    " and port right?",
    "gaierror": "could not resolve the host name",
    "TimeoutError": "no answer in time: a statement ran past command_timeout, or"
    " connecting took longer than connect_timeout (the server may be hung or cut off)",
    "CancelledError": "no answer in time (a driver time-out): the server may be hung or cut off",
    "InvalidSQLStatementNameError": "a prepared statement is missing: behind a connection"
    " pooler in transaction mode? add ?pgbouncer=true to the URL",
    "DuplicatePreparedStatementError": "a prepared statement is already there: behind a"
    " connection pooler in transaction mode? add ?pgbouncer=true to the URL",
    "TargetServerAttributeNotMatched": "no host had the wanted target_session_attrs (no"
    " primary yet, during a failover?)",
    "InvalidCatalogNameError": "create it first (createdb NAME, or CREATE DATABASE), then"
    " adk-sqlstore migrate --url ...",
}
_CLOSED_UNDER_THE_CALL = (
    "the connection was closed under the call: a server restart or failover, a pooler,"
    " or a server timeout (idle_in_transaction_session_timeout, idle_session_timeout);"
    " the server's log has the reason"
)
_CONNECTION_LOST = frozenset(
    {"ConnectionResetError", "BrokenPipeError", "ConnectionDoesNotExistError", "InterfaceError"}
)


def database_error(url: str | URL, exc: BaseException) -> DatabaseUnavailableError:
    """A :class:`DatabaseUnavailableError` describing a driver or network error on
    ``url``, in one line, with passwords hidden and what it most likely means."""
    orig = _innermost(exc)
    name = type(orig).__name__
    detail = (str(orig).splitlines() or [""])[0]
    hint = _HINTS.get(name) or (_CLOSED_UNDER_THE_CALL if name in _CONNECTION_LOST else "")
    said = "; ".join(part for part in (detail, hint) if part) or "(no message)"
    return DatabaseUnavailableError(f"database error on {shown_url(url)}: {name}: {said}")
