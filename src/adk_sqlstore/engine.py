"""Engines: the one place that knows about drivers, pools and pragmas.

:func:`create_engine` makes an :class:`AsyncEngine` for a URL (see :mod:`adk_sqlstore.urls`
for the spellings and settings), :func:`configure_engine` installs this library's
connection settings, :func:`engine_for_loop` gives each running event loop a pool of its
own, and :func:`engine_views` the ways a store uses one engine (write, read, one
statement).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import threading
import weakref
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import URL, Engine
from sqlalchemy.exc import ArgumentError, DisconnectionError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import AsyncAdaptedQueuePool

from .errors import ConfigurationError
from .settings import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_MAX_OVERFLOW,
    DEFAULT_MYSQL_POOL_RECYCLE,
    DEFAULT_POOL_SIZE,
    DEFAULT_SQLITE_BUSY_TIMEOUT,
    SETTINGS,
    check_settings,
    convert_settings,
    milliseconds,
)
from .sql.connection import (
    BEGIN_READ,
    BEGIN_WRITE,
    MYSQL_BEGIN_READ,
    mysql_session,
    sqlite_pragmas,
)
from .sql.held import HeldConnection
from .sql.sqlite_thread import restore_on_checkout
from .urls import normalize_url, redact_url, split_settings

__all__ = [
    "WRITE_OPTION",
    "EngineViews",
    "configure_engine",
    "create_engine",
    "dispose_engine",
    "engine_for_loop",
    "engine_views",
    "given_url",
    "mysql_options",
    "postgres_options",
    "release_held",
]

WRITE_OPTION = "adk_sqlstore_write"


def create_engine(url: str | URL, **kwargs: Any) -> AsyncEngine:
    """Create an :class:`AsyncEngine` for ``url`` configured by :func:`configure_engine`.

    Connection settings (:mod:`adk_sqlstore.settings`: pool sizes, time-outs,
    ``search_path``, ``pgbouncer``, ...) come from the URL's query
    (``?pool_size=5&statement_timeout=30s``) or, winning over it, from keyword
    arguments of the same names.

    Args:
        url: a database URL (normalised with the asyncio driver).
        **kwargs: the settings; anything else is passed to
            :func:`sqlalchemy.ext.asyncio.create_async_engine`.

    Raises:
        ConfigurationError: the URL or a setting is invalid, the driver is not
            installed, or SQLAlchemy does not take a keyword argument (a
            ``ValueError``; the message hides the password).
    """
    given = normalize_url(url)
    normalized, settings = split_settings(given)
    settings.update(
        convert_settings({name: kwargs.pop(name) for name in SETTINGS.keys() & kwargs.keys()})
    )
    check_settings(settings)
    for name in ("pool_size", "max_overflow", "pool_timeout", "pool_recycle", "pool_pre_ping"):
        if name in settings:
            kwargs.setdefault(name, settings[name])
    backend = normalized.get_backend_name()
    if backend == "postgresql":
        postgres_options(settings, kwargs)
    elif backend == "mysql":
        mysql_options(settings, kwargs)
    else:
        _sqlite_options(normalized, kwargs)
    engine = _create(normalized, kwargs)
    timeout = settings.get("statement_timeout")
    configure_engine(
        engine,
        sqlite_busy_timeout=settings.get("sqlite_busy_timeout", DEFAULT_SQLITE_BUSY_TIMEOUT),
        pgbouncer=settings.get("pgbouncer", False),
        mysql_statement_timeout_ms=None if timeout is None else milliseconds(timeout),
    )
    engine.sync_engine.__dict__[_GIVEN_URL] = given
    return engine


def _sqlite_options(url: URL, kwargs: dict[str, Any]) -> None:
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


def _create(url: URL, kwargs: dict[str, Any]) -> AsyncEngine:
    """``create_async_engine``, its failures as :class:`ConfigurationError`."""
    try:
        return create_async_engine(url, **kwargs)
    except ModuleNotFoundError as exc:
        extras = {"postgresql": "postgres", "mysql": "mysql"}
        extra = extras.get(url.get_backend_name(), "sqlite")
        raise ConfigurationError(
            f"the {exc.name} driver for {redact_url(url)} is not installed: pip install"
            f" 'adk-sqlstore[{extra}]'"
        ) from exc
    except (ArgumentError, TypeError) as exc:  # keyword arguments SQLAlchemy does not take
        raise ConfigurationError(f"cannot make an engine for {redact_url(url)}: {exc}") from exc


_GIVEN_URL = "_adk_sqlstore_url"


def given_url(engine: AsyncEngine) -> URL:
    """The URL ``engine`` was made from, with this library's settings (which the
    engine's own ``url`` lacks): for messages and the command a user should run."""
    sync: Any = engine.sync_engine
    while _GIVEN_URL not in sync.__dict__ and hasattr(sync, "_proxied"):
        sync = sync._proxied  # an engine with execution options: the one it wraps
    url: URL = sync.__dict__.get(_GIVEN_URL, engine.url)
    return url


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


_CONFIGURED = "_adk_sqlstore_configured"  # kept on the sync engine: whether, and how
_PGBOUNCER = "_adk_sqlstore_pgbouncer"


def configure_engine(
    engine: AsyncEngine,
    *,
    sqlite_busy_timeout: float = DEFAULT_SQLITE_BUSY_TIMEOUT,
    pgbouncer: bool = False,
    mysql_statement_timeout_ms: float | None = None,
) -> None:
    """Install this library's connection settings on ``engine`` (idempotent).

    ``pgbouncer``: the engine reaches PostgreSQL through a pooler in transaction mode
    (see :func:`create_engine`; the engine's asyncpg arguments must match): every
    statement then runs inside a transaction (:func:`engine_views`).

    PostgreSQL: a pooled connection the server has closed (a restart, an idle
    timeout) is replaced when it is checked out, without a round trip: asyncpg knows
    its socket is gone, so the call runs on a new connection instead of failing.

    SQLite: each new connection gets the settings of
    :func:`adk_sqlstore.sql.connection.sqlite_pragmas` (WAL, ``synchronous=NORMAL``,
    foreign keys, ``secure_delete``, the busy timeout). Transactions are begun by this
    library rather than by the driver: ``BEGIN`` for reads, so that every read of a
    call sees one snapshot, and ``BEGIN IMMEDIATE`` for writes, so that a writer waits
    for the lock (up to the busy timeout) instead of failing with "database is locked"
    when it upgrades a read lock.

    MySQL and MariaDB: each new connection gets the session settings of
    :func:`adk_sqlstore.sql.connection.mysql_session` (a strict ``sql_mode``,
    ``READ COMMITTED``, the statement timeout), and read transactions begin with one
    consistent snapshot (``MYSQL_BEGIN_READ``).
    """
    sync_engine = engine.sync_engine
    if sync_engine.__dict__.get(_CONFIGURED, False):
        return
    sync_engine.__dict__[_CONFIGURED] = True
    sync_engine.__dict__[_PGBOUNCER] = pgbouncer
    if sync_engine.dialect.name == "postgresql":
        _configure_postgres(sync_engine)
    elif sync_engine.dialect.name == "sqlite":
        _configure_sqlite(sync_engine, sqlite_busy_timeout)
    elif sync_engine.dialect.name == "mysql":
        _configure_mysql(sync_engine, mysql_statement_timeout_ms)


def _configure_postgres(sync_engine: Engine) -> None:
    @event.listens_for(sync_engine, "checkout")
    def _on_checkout(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
        driver = getattr(dbapi_connection, "driver_connection", None)
        if driver is not None and driver.is_closed():
            raise DisconnectionError("the server closed this pooled connection")


def _configure_sqlite(sync_engine: Engine, busy_timeout: float) -> None:
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


def _configure_mysql(sync_engine: Engine, statement_timeout_ms: float | None) -> None:
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
        if not conn.get_execution_options().get(WRITE_OPTION, False):
            for statement in MYSQL_BEGIN_READ:
                conn.exec_driver_sql(statement)


# -- one engine, several event loops ------------------------------------------------------

_LOOPS = "_adk_sqlstore_loops"  # per-engine state kept on the sync engine, never copied
_VIEWS = "_adk_sqlstore_views"


@dataclass
class _Loops:
    """Which event loop owns an engine's pool, and the twins made for other loops."""

    home: weakref.ReferenceType[asyncio.AbstractEventLoop] | None = None
    twins: dict[asyncio.AbstractEventLoop, AsyncEngine] = field(default_factory=dict)
    closers: dict[asyncio.AbstractEventLoop, AsyncGenerator[None, None]] = field(
        default_factory=dict
    )
    lock: threading.Lock = field(default_factory=threading.Lock)


def _twin(engine: AsyncEngine) -> AsyncEngine:
    """``engine`` with a pool of its own: same URL, settings, listeners and caches."""
    sync = copy.copy(engine.sync_engine)
    for name in (_LOOPS, _VIEWS):
        sync.__dict__.pop(name, None)
    sync.pool = engine.sync_engine.pool.recreate()  # PoolEvents listeners come along
    return AsyncEngine(sync)


def _close_when_loop_ends(
    state: _Loops, loop: asyncio.AbstractEventLoop, engine: AsyncEngine, home: bool
) -> None:
    """Close ``engine``'s pooled connections while ``loop`` shuts down.

    ``asyncio.run`` (and ``asyncio.Runner``) end by finalizing the loop's async
    generators, while the loop still runs: an async generator started here, and kept
    alive in ``state``, closes the pool in its ``finally``. The next loop then finds no
    connection of a dead loop. (A loop closed without that step, ``loop.close()``
    alone, leaves its connections to the garbage collector.)
    """

    async def closer() -> AsyncGenerator[None, None]:
        try:
            yield
        finally:
            # Closed first, released after: until then other loops keep off this pool.
            await release_held(engine)
            await engine.dispose()
            with state.lock:
                state.closers.pop(loop, None)
                if home:
                    state.home = None
                else:
                    state.twins.pop(loop, None)

    generator = closer()
    first = generator.__anext__()  # registers the generator with the running loop
    with contextlib.suppress(StopIteration):
        first.send(None)  # runs it to its yield, without awaiting anything
    state.closers[loop] = generator


def engine_for_loop(engine: AsyncEngine) -> AsyncEngine:
    """``engine``, or its twin for the running event loop.

    asyncpg connections belong to the event loop they were opened in, so a pool shared
    by two loops (a second ``asyncio.run``, a thread with a loop of its own, a notebook,
    a Celery task) hands connections across them and fails. The first loop that uses
    an engine keeps it; each other running loop gets a twin with the same
    settings and listeners and a pool of its own. When a loop shuts down (the end of
    ``asyncio.run``), the connections pooled for it are closed, and its engine serves
    the next loop. The same holds for SQLite: aiosqlite connections would serve any
    loop, but a pool's queue belongs to one.
    """
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # no loop running: nothing to choose between
        return engine
    sync = engine.sync_engine
    state: _Loops = sync.__dict__.setdefault(_LOOPS, _Loops())
    with state.lock:
        home = state.home() if state.home is not None else None
        if home is loop:
            return engine
        for other in [other for other in state.twins if other.is_closed()]:
            state.closers.pop(other, None)
            state.twins.pop(other).sync_engine.dispose(close=False)
        twin = state.twins.get(loop)
        if twin is not None:
            return twin
        if home is None or home.is_closed():
            if home is not None:  # closed without finalizing: let its connections go
                state.closers.pop(home, None)
                sync.dispose(close=False)
            state.home = weakref.ref(loop)
            _close_when_loop_ends(state, loop, engine, home=True)
            return engine
        twin = state.twins[loop] = _twin(engine)
        _close_when_loop_ends(state, loop, twin, home=False)
        return twin


async def dispose_engine(engine: AsyncEngine) -> None:
    """Close ``engine``'s pooled connections and those of its twins for other event
    loops (:func:`engine_for_loop`); a twin whose loop is not the running one is let go
    instead (its connections cannot be closed from here)."""
    state: _Loops | None = engine.sync_engine.__dict__.get(_LOOPS)
    current = engine_for_loop(engine)
    await release_held(current)
    for twin in list(state.twins.values()) if state else []:
        if twin is current:
            await twin.dispose()
        else:
            twin.sync_engine.dispose(close=False)
    if state is not None:
        state.twins.clear()
    if current is engine:
        await engine.dispose()
    else:
        engine.sync_engine.dispose(close=False)


@dataclass(frozen=True)
class EngineViews:
    """The ways this library uses one engine (all share its pool).

    Attributes:
        write: transactions that write (SQLite: ``BEGIN IMMEDIATE``).
        read: read transactions (PostgreSQL: read-only, repeatable read: one snapshot).
        autocommit: the hot paths' connection outside any transaction (PostgreSQL
            AUTOCOMMIT: one statement is one atomic round trip; SQLite: a batch of
            statements runs in aiosqlite's thread, which begins and commits itself).
            Behind a transaction pooler, and on MySQL and MariaDB (where a hot path
            is several statements), it is ``write`` (see ``autocommit_begins``).
        autocommit_begins: whether ``autocommit`` connections must be used inside
            ``engine.begin()`` (a transaction pooler, MySQL) rather than ``connect()``.
    """

    write: AsyncEngine
    read: AsyncEngine
    autocommit: AsyncEngine
    autocommit_begins: bool
    held: HeldConnection | None = None


async def release_held(engine: AsyncEngine) -> None:
    """Return the held SQLite connection (:class:`~adk_sqlstore.sql.held.HeldConnection`)
    of ``engine`` itself (not of a twin: see :func:`engine_for_loop`) to its pool."""
    views: EngineViews | None = engine.sync_engine.__dict__.get(_VIEWS)
    if views is not None and views.held is not None:
        await views.held.release()


def engine_views(engine: AsyncEngine) -> EngineViews:
    """The :class:`EngineViews` of ``engine`` for the running event loop (see
    :func:`engine_for_loop`), made once per engine and loop."""
    current = engine_for_loop(engine)
    views: EngineViews | None = current.sync_engine.__dict__.get(_VIEWS)
    if views is None:
        write = current.execution_options(**{WRITE_OPTION: True})
        if current.dialect.name == "mysql":
            # Each hot path is several statements in one write transaction here (no
            # data-modifying CTEs, no batches in a thread of the driver's).
            views = EngineViews(write=write, read=current, autocommit=write, autocommit_begins=True)
        elif current.dialect.name != "postgresql":
            views = EngineViews(
                write=write,
                read=current,
                autocommit=current,
                autocommit_begins=False,
                held=HeldConnection(current),
            )
        elif current.sync_engine.__dict__.get(_PGBOUNCER, False):
            read = current.execution_options(
                isolation_level="REPEATABLE READ", postgresql_readonly=True
            )
            views = EngineViews(write=write, read=read, autocommit=write, autocommit_begins=True)
        else:
            read = current.execution_options(
                isolation_level="REPEATABLE READ", postgresql_readonly=True
            )
            autocommit = current.execution_options(isolation_level="AUTOCOMMIT")
            views = EngineViews(
                write=write, read=read, autocommit=autocommit, autocommit_begins=False
            )
        current.sync_engine.__dict__[_VIEWS] = views
    return views
