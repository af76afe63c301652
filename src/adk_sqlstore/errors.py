"""Errors raised by adk-sqlstore.

Every error derives from :class:`AdkSqlStoreError`. Errors that ADK also defines
(``AlreadyExistsError``, ``SessionNotFoundError``, ``StaleSessionError``) carry the
same names so that code written against ADK reads the same; the ADK drop-in classes
re-raise ADK's own types chained to these. Database driver, network and pool errors are mapped
in one place (:func:`driver_error`, :func:`database_errors`), wrapped with
``raise ... from exc``, and never carry a database password in their message.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any

from sqlalchemy.engine import URL
from sqlalchemy.exc import DBAPIError, DisconnectionError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.ext.asyncio import AsyncEngine

from .urls import redact_url

__all__ = [
    "AdkSqlStoreError",
    "AlreadyExistsError",
    "DatabaseUnavailableError",
    "InvalidEventError",
    "InvalidIdentifierError",
    "InvalidMemoryError",
    "InvalidStateError",
    "MigrationError",
    "PoolTimeoutError",
    "SchemaNotMigratedError",
    "SessionNotFoundError",
    "StaleSessionError",
    "database_error",
    "database_errors",
    "driver_error",
]


class AdkSqlStoreError(Exception):
    """Root of every error this library raises."""


class AlreadyExistsError(AdkSqlStoreError):
    """A session with this (app_name, user_id, session_id) already exists."""


class SessionNotFoundError(AdkSqlStoreError):
    """The session does not exist (never created, or deleted)."""


class StaleSessionError(AdkSqlStoreError):
    """The session object was loaded before another writer appended to it.

    Nothing was written. Reload the session with ``get_session`` and retry the turn.
    Follows ADK's ``google.adk.errors.StaleSessionError``.
    """

    def __init__(self, message: str, *, expected_revision: int, stored_revision: int) -> None:
        super().__init__(message)
        self.expected_revision = expected_revision
        self.stored_revision = stored_revision


class InvalidStateError(AdkSqlStoreError, ValueError):
    """A state key or value cannot be stored exactly as JSON.

    Attributes:
        key: the offending state key, with its scope prefix as the caller wrote it.
    """

    def __init__(self, message: str, *, key: str) -> None:
        super().__init__(message)
        self.key = key


class InvalidEventError(AdkSqlStoreError, ValueError):
    """An event cannot be stored: it does not serialise to JSON, or its id is taken."""


class InvalidIdentifierError(AdkSqlStoreError, ValueError):
    """An app_name, user_id or session id is not a storable identifier."""


class SchemaNotMigratedError(AdkSqlStoreError, ValueError):
    """The database schema is not at the revision this version of the library needs.

    Also a ``ValueError`` (the database given cannot be used as it is): ADK's server
    then stops at start-up with the message on one line (``Error: ...``).

    Attributes:
        current_revision: the database's Alembic revision, or ``None`` when it has none.
        head_revision: the revision this library needs.
    """

    def __init__(self, message: str, *, current_revision: str | None, head_revision: str) -> None:
        super().__init__(message)
        self.current_revision = current_revision
        self.head_revision = head_revision


class InvalidMemoryError(AdkSqlStoreError, ValueError):
    """A memory or event given to the memory service cannot be stored: not a
    ``MemoryEntry``/event (nor a dict of one), or a timestamp that is not ISO 8601.
    Nothing of the call is written."""


class MigrationError(AdkSqlStoreError, RuntimeError):
    """A migration cannot run on this database (e.g. SQLite without FTS5)."""


class DatabaseUnavailableError(AdkSqlStoreError):
    """The database could not be reached or failed while running a statement.

    The original driver error is chained as ``__cause__``.
    """


class PoolTimeoutError(DatabaseUnavailableError):
    """Every pooled connection stayed in use for ``pool_timeout`` seconds: the call gave
    up waiting for one (raise ``pool_size``/``max_overflow``, or find what holds them)."""


# -- driver, network and pool failures: the one mapper --------------------------------


_DRIVER_PACKAGES = frozenset({"asyncpg", "aiosqlite", "sqlite3"})


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
            f" {redact_url(engine.url)}: all {size} were in use; raise pool_size or"
            " max_overflow (URL parameters or keyword arguments), or pool_timeout"
        )
    if isinstance(exc, (DBAPIError, OSError, DisconnectionError)) or (
        type(exc).__module__.partition(".")[0] in _DRIVER_PACKAGES
    ):
        return database_error(engine.url, exc)
    return None


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
def database_errors(engine: AsyncEngine) -> Iterator[None]:
    """Re-raise database, network and pool failures of ``engine`` as typed errors
    (:func:`driver_error`); this library's own errors and bugs pass unchanged. Usable
    around ``await``s (``with``, not ``async with``)."""
    try:
        yield
    except AdkSqlStoreError:
        raise
    except Exception as exc:
        typed = driver_error(engine, exc)
        if typed is None:
            raise
        raise typed from exc


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
    return DatabaseUnavailableError(f"database error on {redact_url(url)}: {name}: {said}")
