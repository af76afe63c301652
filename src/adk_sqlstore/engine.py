"""Engines: pools, and the one place that makes and configures them (what each driver
needs is in :mod:`adk_sqlstore.drivers`).

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
import time
import weakref
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import URL
from sqlalchemy.exc import ArgumentError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.util import await_only

from .drivers import (
    READ_OPTION,
    WRITE_OPTION,
    configure_mysql,
    configure_postgres,
    configure_sqlite,
    mysql_options,
    postgres_options,
    sqlite_options,
)
from .errors import ConfigurationError
from .settings import (
    DEFAULT_SQLITE_BUSY_TIMEOUT,
    SETTINGS,
    check_settings,
    convert_settings,
    milliseconds,
)
from .sql.held import HeldConnection
from .url_display import shown_url
from .urls import normalize_url, split_settings

__all__ = [
    "WRITE_OPTION",
    "EngineViews",
    "configure_engine",
    "create_engine",
    "dispose_engine",
    "engine_for_loop",
    "engine_views",
    "given_url",
    "release_held",
]


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
    try:  # the options of MySQL and MariaDB need their driver's constants
        if backend == "postgresql":
            postgres_options(settings, kwargs)
        elif backend == "mysql":
            mysql_options(settings, kwargs)
        else:
            sqlite_options(normalized, kwargs)
    except ModuleNotFoundError as exc:
        raise _missing_driver(given, exc) from exc
    engine = _create(normalized, given, kwargs)
    timeout = settings.get("statement_timeout")
    configure_engine(
        engine,
        sqlite_busy_timeout=settings.get("sqlite_busy_timeout", DEFAULT_SQLITE_BUSY_TIMEOUT),
        pgbouncer=settings.get("pgbouncer", False),
        mysql_statement_timeout_ms=None if timeout is None else milliseconds(timeout),
    )
    engine.sync_engine.__dict__[_GIVEN_URL] = given
    return engine


def _missing_driver(given: URL, exc: ModuleNotFoundError) -> ConfigurationError:
    """The one-line error for a URL whose driver is not installed, naming the extra."""
    extras = {"postgresql": "postgres", "mysql": "mysql"}
    extra = extras.get(given.get_backend_name(), "sqlite")
    return ConfigurationError(
        f"the {(exc.name or 'its').split('.')[0]} driver for {shown_url(given)} is not"
        " installed: pip install"
        f" 'adk-sqlstore[{extra}]'"
    )


def _create(url: URL, given: URL, kwargs: dict[str, Any]) -> AsyncEngine:
    """``create_async_engine``, its failures as :class:`ConfigurationError` (naming the
    URL as the user gave it, ``given``)."""
    try:
        return create_async_engine(url, **kwargs)
    except ModuleNotFoundError as exc:
        raise _missing_driver(given, exc) from exc
    except (ArgumentError, TypeError) as exc:  # keyword arguments SQLAlchemy does not take
        raise ConfigurationError(
            f"cannot make an engine for {shown_url(given)}: {exc} (adk-sqlstore's settings:"
            f" {', '.join(sorted(SETTINGS))}; any other keyword goes to SQLAlchemy's"
            " create_async_engine)"
        ) from exc


_GIVEN_URL = "_adk_sqlstore_url"


def given_url(engine: AsyncEngine) -> URL:
    """The URL ``engine`` was made from, with this library's settings (which the
    engine's own ``url`` lacks): for messages and the command a user should run."""
    sync: Any = engine.sync_engine
    while _GIVEN_URL not in sync.__dict__ and hasattr(sync, "_proxied"):
        sync = sync._proxied  # an engine with execution options: the one it wraps
    url: URL = sync.__dict__.get(_GIVEN_URL, engine.url)
    return url


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
    ``READ COMMITTED``, the statement timeout), and the store's read transactions
    (:func:`engine_views`) begin with one consistent snapshot (``MYSQL_BEGIN_READ``);
    other transactions on the engine begin as MySQL begins them.
    """
    sync_engine = engine.sync_engine
    if sync_engine.__dict__.get(_CONFIGURED, False):
        return
    sync_engine.__dict__[_CONFIGURED] = True
    sync_engine.__dict__[_PGBOUNCER] = pgbouncer
    if sync_engine.dialect.name == "postgresql":
        configure_postgres(sync_engine)
    elif sync_engine.dialect.name == "sqlite":
        configure_sqlite(sync_engine, sqlite_busy_timeout)
    elif sync_engine.dialect.name == "mysql":
        configure_mysql(sync_engine, mysql_statement_timeout_ms)


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
    connection of a dead loop. A loop closed without that step (``loop.close()``
    alone) runs it as it closes (:func:`_finalize_on_close`).
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
    _finalize_on_close(loop, generator)


def _finalize_on_close(
    loop: asyncio.AbstractEventLoop, generator: AsyncGenerator[None, None]
) -> None:
    """Make ``loop.close()`` run ``generator``'s ``finally`` first, when the loop was
    not shut down by ``asyncio.run``: a loop made with ``asyncio.new_event_loop()``,
    driven by ``run_until_complete`` and closed (as in a thread with a loop of its
    own) closes its pooled connections then, instead of leaving open sockets to the
    garbage collector. A loop whose ``close`` cannot be replaced (uvloop) keeps the
    garbage collector's way."""
    original = loop.close

    def close() -> None:
        if not loop.is_running() and not loop.is_closed():
            with contextlib.suppress(Exception):
                loop.run_until_complete(generator.aclose())
        original()

    with contextlib.suppress(AttributeError, TypeError):
        loop.close = close  # type: ignore[method-assign]


_FIRST_USE = threading.Lock()
_DIALECT_READY = "_adk_sqlstore_dialect_ready"
_DIALECT_WAIT = 30.0  # seconds a first connection waits for another's initialization


def _wait_for_dialect_initialization(engine: AsyncEngine) -> None:
    """Make every first connection of ``engine``'s pools (its twins' included) wait
    until the dialect is initialized.

    SQLAlchemy initializes a dialect (server version, default schema, SQL mode) on the
    first connection of the engine, once: a second connection made meanwhile skips it
    and goes on with the dialect half-initialized. Within one event loop that is rare;
    with twins in several loops (threads with loops of their own, each making its first
    connection at once) it is the rule, and on MySQL a query then fails inside
    SQLAlchemy (``assert schema is not None`` in ``has_table``). A connection that
    finds the initialization begun elsewhere now waits for it (polling, without
    blocking its loop), up to 30 seconds.
    """
    sync = engine.sync_engine
    dialect = sync.dialect
    if _DIALECT_READY in dialect.__dict__:
        return
    ready = threading.Event()
    dialect.__dict__[_DIALECT_READY] = ready
    if getattr(dialect, "server_version_info", None) is not None:
        ready.set()  # initialized already: the engine was used before it came here
    else:
        initialize = dialect.initialize

        def initialize_then_tell(connection: Any) -> None:
            initialize(connection)
            ready.set()

        dialect.initialize = initialize_then_tell  # type: ignore[method-assign]

    def wait_until_ready(_dbapi_connection: Any, _record: Any) -> None:
        # Runs after SQLAlchemy's own first-connect listener (registered before it).
        if ready.is_set():
            return
        deadline = time.monotonic() + _DIALECT_WAIT
        while not ready.is_set() and time.monotonic() < deadline:
            await_only(asyncio.sleep(0.005))

    event.listen(sync.pool, "connect", wait_until_ready)


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
    state: _Loops | None = sync.__dict__.get(_LOOPS)
    if state is None:
        with _FIRST_USE:
            state = sync.__dict__.get(_LOOPS)
            if state is None:
                _wait_for_dialect_initialization(engine)
                state = sync.__dict__[_LOOPS] = _Loops()
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
            read = current.execution_options(**{READ_OPTION: True})
            views = EngineViews(write=write, read=read, autocommit=write, autocommit_begins=True)
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
