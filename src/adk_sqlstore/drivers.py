"""What each driver needs of an engine: its arguments, and the listeners that set up
its connections and begin its transactions (:func:`adk_sqlstore.engine.create_engine`
and :func:`~adk_sqlstore.engine.configure_engine` apply them).

- PostgreSQL (asyncpg): pool sizes, server settings (``statement_timeout``,
  ``search_path``), each host of a several-hosts URL tried with a time-out of its own,
  statements never reused behind a transaction pooler; a pooled connection whose
  socket the server closed is replaced at checkout.
- SQLite (aiosqlite): the pragmas of :func:`~adk_sqlstore.sql.connection.sqlite_pragmas`
  on each connection, transactions begun by this library (``BEGIN`` for reads,
  ``BEGIN IMMEDIATE`` for writes).
- MySQL and MariaDB (asyncmy): the session settings of
  :func:`~adk_sqlstore.sql.connection.mysql_session`, ``VARBINARY`` read back as text,
  connections recycled before the server's ``wait_timeout`` and replaced at checkout
  once the server closed them, and the store's reads begun on one consistent snapshot.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import URL, Engine
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.pool import AsyncAdaptedQueuePool

from .errors import ConfigurationError
from .settings import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_MAX_OVERFLOW,
    DEFAULT_MYSQL_POOL_RECYCLE,
    DEFAULT_POOL_SIZE,
)
from .sql.connection import (
    BEGIN_READ,
    BEGIN_WRITE,
    MYSQL_BEGIN_READ,
    mysql_session,
    sqlite_pragmas,
)
from .sql.sqlite_thread import restore_on_checkout

__all__ = [
    "READ_OPTION",
    "WRITE_OPTION",
    "configure_mysql",
    "configure_postgres",
    "configure_sqlite",
    "mysql_options",
    "postgres_options",
    "sqlite_options",
]

WRITE_OPTION = "adk_sqlstore_write"
READ_OPTION = "adk_sqlstore_read"  # MySQL: a read-only transaction on one snapshot


def sqlite_options(url: URL, kwargs: dict[str, Any]) -> None:
    """Add the engine arguments of an SQLite file to ``kwargs``.

    Raises:
        ConfigurationError: the file's folder does not exist.
    """
    database = url.database or ""
    if database and database != ":memory:" and not database.startswith("file:"):
        folder = Path(database).resolve().parent
        if not folder.is_dir():  # fail here, not in aiosqlite's thread
            raise ConfigurationError(
                f"the folder {folder} of SQLite database {database} does not exist"
            )
        # A pool of open connections, as SQLAlchemy 2.1 chooses for a file (2.0 opens
        # a connection, and aiosqlite's thread, per use).
        kwargs.setdefault("poolclass", AsyncAdaptedQueuePool)
    # Every transaction of this library ends in COMMIT or ROLLBACK, so the pool's
    # extra ROLLBACK on check-in would only cost a trip to aiosqlite's thread.
    kwargs.setdefault("pool_reset_on_return", None)


def _connect_host_by_host(timeout: float) -> Callable[..., Awaitable[Any]]:
    """asyncpg's ``connect``, giving each host of a several-hosts URL ``timeout``
    seconds of its own.

    asyncpg spends one time budget on all hosts: a primary that accepts connections
    but answers nothing (frozen, or cut off) uses it all, and the promoted standby
    after it is never tried. Here each host is tried in turn with its own budget; the
    first that connects and has the wanted ``target_session_attrs`` wins, else the
    last error is raised.
    """

    async def connect(*args: Any, **kwargs: Any) -> Any:
        import asyncpg

        hosts, ports = kwargs.get("host"), kwargs.get("port")
        if not isinstance(hosts, list | tuple) or len(hosts) < 2:
            return await asyncpg.connect(*args, **{"timeout": timeout, **kwargs})
        if not isinstance(ports, list | tuple):
            ports = [ports] * len(hosts)
        failure: BaseException | None = None
        for host, port in zip(hosts, ports, strict=True):
            try:
                return await asyncpg.connect(
                    *args, **{"timeout": timeout, **kwargs, "host": host, "port": port}
                )
            except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
                failure = exc  # the next host; asyncpg's own reason is kept for the last
        assert failure is not None
        raise failure

    return connect


def _unnamed() -> str:
    """asyncpg's name for an unnamed prepared statement."""
    return ""


def postgres_options(settings: dict[str, Any], kwargs: dict[str, Any]) -> None:
    """Add to ``kwargs`` (of ``create_async_engine``) the engine and asyncpg arguments
    of PostgreSQL connection ``settings`` (:data:`adk_sqlstore.settings.SETTINGS`)."""
    if "poolclass" not in kwargs:
        kwargs.setdefault("pool_size", DEFAULT_POOL_SIZE)
        kwargs.setdefault("max_overflow", DEFAULT_MAX_OVERFLOW)
    connect_args = kwargs.setdefault("connect_args", {})
    server = connect_args.setdefault("server_settings", {})
    if "statement_timeout" in settings:
        server.setdefault("statement_timeout", settings["statement_timeout"])
    if "search_path" in settings:
        server.setdefault("search_path", settings["search_path"])
    if "command_timeout" in settings:
        connect_args.setdefault("command_timeout", settings["command_timeout"])
    connect_args.setdefault(
        "async_creator_fn",
        _connect_host_by_host(settings.get("connect_timeout", DEFAULT_CONNECT_TIMEOUT)),
    )
    if settings.get("pgbouncer"):
        # A transaction pooler hands each transaction to any server connection: a
        # statement prepared on one is unknown to the next, and one left prepared there
        # stays for the server connection's life (asyncpg closes it later, through
        # whichever connection the pooler then gives). So: no caches, and every
        # statement unnamed (name ""), which the next statement replaces on the server;
        # prepared and run inside one transaction, on one server connection.
        connect_args.setdefault("statement_cache_size", 0)
        connect_args.setdefault("prepared_statement_cache_size", 0)
        connect_args.setdefault("prepared_statement_name_func", _unnamed)
    if not server:
        del connect_args["server_settings"]
    if not connect_args:
        del kwargs["connect_args"]


def _varbinary_as_text(value: Any) -> Any:
    """A ``VARBINARY`` value as text: identifiers and keys are stored as UTF-8 bytes on
    MySQL and MariaDB (exact, unpadded comparison, and a key's length in bytes: see
    :mod:`adk_sqlstore.schema`), and read back as the ``str`` they were."""
    return value.decode() if isinstance(value, bytes | bytearray) else value


def mysql_options(settings: dict[str, Any], kwargs: dict[str, Any]) -> None:
    """Add to ``kwargs`` (of ``create_async_engine``) the engine and asyncmy arguments
    of MySQL or MariaDB connection ``settings`` (:data:`adk_sqlstore.settings.SETTINGS`).

    asyncmy reads every ``VARBINARY`` value back as text (its ``VAR_STRING`` decoder;
    ``BLOB`` values, the embeddings, stay bytes)."""
    from asyncmy.constants import FIELD_TYPE
    from asyncmy.converters import conversions

    if "poolclass" not in kwargs:
        kwargs.setdefault("pool_size", DEFAULT_POOL_SIZE)
        kwargs.setdefault("max_overflow", DEFAULT_MAX_OVERFLOW)
        kwargs.setdefault("pool_recycle", DEFAULT_MYSQL_POOL_RECYCLE)
    connect_args = kwargs.setdefault("connect_args", {})
    decoders = dict(conversions)
    decoders[FIELD_TYPE.VAR_STRING] = _varbinary_as_text
    connect_args.setdefault("conv", decoders)
    connect_args.setdefault(
        "connect_timeout", settings.get("connect_timeout", DEFAULT_CONNECT_TIMEOUT)
    )
    if "command_timeout" in settings:
        connect_args.setdefault("read_timeout", settings["command_timeout"])


def configure_postgres(sync_engine: Engine) -> None:
    @event.listens_for(sync_engine, "checkout")
    def _on_checkout(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
        driver = getattr(dbapi_connection, "driver_connection", None)
        if driver is not None and driver.is_closed():
            raise DisconnectionError("the server closed this pooled connection")


def configure_sqlite(sync_engine: Engine, busy_timeout: float) -> None:
    pragmas = sqlite_pragmas(busy_timeout)

    @event.listens_for(sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # we emit BEGIN ourselves
        cursor = dbapi_connection.cursor()
        try:
            for pragma in pragmas:
                cursor.execute(pragma)
        finally:
            cursor.close()

    @event.listens_for(sync_engine, "checkout")
    def _on_checkout(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        restore_on_checkout(dbapi_connection, record.info)

    @event.listens_for(sync_engine, "reset")
    def _on_reset(dbapi_connection: Any, _record: Any, reset_state: Any) -> None:
        # The pool does not roll back on check-in (pool_reset_on_return=None, one trip
        # to aiosqlite's thread saved per call); a transaction a cancelled read left
        # open is rolled back here, so that no pooled connection keeps one.
        driver = getattr(dbapi_connection, "driver_connection", None)
        if reset_state.asyncio_safe and getattr(driver, "in_transaction", False):
            dbapi_connection.rollback()

    @event.listens_for(sync_engine, "begin")
    def _on_begin(conn: Any) -> None:
        write = conn.get_execution_options().get(WRITE_OPTION, False)
        conn.exec_driver_sql(BEGIN_WRITE if write else BEGIN_READ)


def configure_mysql(sync_engine: Engine, statement_timeout_ms: float | None) -> None:
    @event.listens_for(sync_engine, "checkout")
    def _on_checkout(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
        # asyncmy marks its stream broken when the server closes the connection (a
        # restart, wait_timeout): replaced here, as asyncpg's is_closed() is for
        # PostgreSQL, instead of failing the call with "server has gone away".
        driver = getattr(dbapi_connection, "driver_connection", None)
        if driver is not None and getattr(driver, "_stream_broken", False):
            raise DisconnectionError("the server closed this pooled connection")

    @event.listens_for(sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        mariadb = "mariadb" in str(dbapi_connection.driver_connection.get_server_info()).lower()
        cursor = dbapi_connection.cursor()
        try:
            for statement in mysql_session(
                mariadb=mariadb, statement_timeout_ms=statement_timeout_ms
            ):
                cursor.execute(statement)
        finally:
            cursor.close()

    @event.listens_for(sync_engine, "begin")
    def _on_begin(conn: Any) -> None:
        if conn.get_execution_options().get(READ_OPTION, False):
            for statement in MYSQL_BEGIN_READ:
                conn.exec_driver_sql(statement)
