"""The store: one database, shared by the services on it.

A :class:`Store` owns (or borrows) an engine and is the services' only way to the
database: it checks the schema (or migrates it, with ``auto_migrate``) once, opens
transactions of the three kinds the services use, maps every driver, network and pool
failure to this library's typed errors (:mod:`adk_sqlstore.failures`), and purges
deleted text after a user is forgotten. The services
(:class:`~adk_sqlstore.SqlSessionService`, :class:`~adk_sqlstore.SqlMemoryService`)
hold a store and call only its public methods, so they can share one::

    store = Store.from_url("postgresql://user:pass@host/agents")
    sessions = SqlSessionService(store)
    memory = SqlMemoryService(store)
    ...
    await store.close()
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import random
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Generator
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Any, Generic, ParamSpec, Self, TypeVar, cast

from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from .embeddings.registry import embedder_named
from .engine import (
    configure_engine,
    create_engine,
    dispose_engine,
    engine_for_loop,
    given_url,
    release_held,
)
from .engine import engine_views as _views
from .errors import (
    AdkSqlStoreError,
    ConcurrencyConflictError,
    DatabaseUnavailableError,
    InvalidArgumentError,
    SchemaNotMigratedError,
)
from .failures import database_errors
from .migration import HEAD_REVISION, check_schema, current_revision, upgrade
from .search.analysis import analyzer
from .sql.citus import detect_citus
from .sql.maintenance import Purge, purge_deleted_text, truncate_wal
from .urls import resolve_url
from .validation import check_argument

__all__ = [
    "CONFLICT_ATTEMPTS",
    "ClosedOnExit",
    "OnStore",
    "Store",
    "finish_before_cancel",
    "retry_conflicts",
    "write_completes",
]

logger = logging.getLogger(__name__)

# Set on engines made by from_url: whether stores on that engine migrate it themselves.
_AUTO_MIGRATE = "_adk_sqlstore_auto_migrate"
# Set while forget_user could not empty SQLite's write-ahead log: kept on the engine, so
# that every store on it retries after its writes.
_WAL_PURGE_PENDING = "_adk_sqlstore_wal_purge_pending"


P = ParamSpec("P")
T = TypeVar("T")

CONFLICT_ATTEMPTS = 10
"""How many times :func:`retry_conflicts` runs a transaction that keeps losing races."""


async def retry_conflicts(
    work: Callable[[], Awaitable[T]], *, attempts: int = CONFLICT_ATTEMPTS
) -> T:
    """``await work()`` (one whole transaction, or a call made of one), run again after
    a short random pause while it raises
    :class:`~adk_sqlstore.errors.ConcurrencyConflictError`: the database ended the
    transaction to break a deadlock or a serialization failure, or the user was
    forgotten while it waited for the user's lock. Either way the transaction was
    rolled back whole, so running it again is safe. The pause grows from about 1 ms to
    at most 64 ms; after ``attempts`` tries the last error is raised.

    The store takes its locks in one order (``docs/architecture.md``, "Locks"), so
    its own writers do not deadlock each other; this covers the rest: another
    application's transactions on the same rows, and the database's own choices.
    """
    for attempt in range(attempts):
        try:
            return await work()
        except ConcurrencyConflictError as exc:
            if attempt == attempts - 1:
                raise
            logger.debug("running a transaction again (%d): %s", attempt + 1, exc)
            await asyncio.sleep(random.uniform(0.5, 1.0) * 0.001 * min(2**attempt, 64))
    raise AssertionError("unreachable")  # pragma: no cover


async def finish_before_cancel(work: Coroutine[Any, Any, T]) -> T:
    """Await ``work`` to its end even if the caller is cancelled meanwhile, then pass
    the cancellation on.

    A write cancelled halfway would leave its connection in a transaction (SQLAlchemy
    then discards the connection, and an SQLite write lock can outlive it). Writes are
    short, so they finish (commit or roll back) first; the caller still gets
    ``CancelledError``, and what it holds is never ahead of storage.

    ``work`` starts in the caller's task and moves to a task of its own at its first
    wait: a write that never waits (an SQLite append run in the event loop) costs no
    task and no turn of the loop (as Python 3.12's eager tasks would).
    """
    try:
        pending = work.send(None)
    except StopIteration as done:
        return cast(T, done.value)
    task = asyncio.ensure_future(_resumed(work, pending))
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        while not task.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait({task})
        if not task.cancelled():
            task.exception()  # retrieved: the cancellation is what the caller hears of
        raise


async def _resumed(work: Coroutine[Any, Any, T], pending: Any) -> T:
    """The rest of ``work``, started elsewhere and now waiting on ``pending``."""
    return await _Rest(work, pending)


class _Rest(Generic[T]):
    """Awaitable: drive a started coroutine on, from what it yielded last (a future,
    or ``None`` for a bare turn of the loop), passing in what the task sends or
    throws (a cancellation)."""

    def __init__(self, work: Coroutine[Any, Any, T], pending: Any) -> None:
        self._work = work
        self._pending = pending

    def __await__(self) -> Generator[Any, Any, T]:
        work, pending = self._work, self._pending
        while True:
            try:
                sent = yield pending
            except GeneratorExit:
                work.close()
                raise
            except BaseException as exc:
                try:
                    pending = work.throw(exc)
                except StopIteration as done:
                    return cast(T, done.value)
            else:
                try:
                    pending = work.send(sent)
                except StopIteration as done:
                    return cast(T, done.value)


def write_completes(
    method: Callable[P, Coroutine[Any, Any, T]],
) -> Callable[P, Coroutine[Any, Any, T]]:
    """Decorate a write method with :func:`finish_before_cancel`."""

    @functools.wraps(method)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        return await finish_before_cancel(method(*args, **kwargs))

    return wrapper


class ClosedOnExit:
    """``async with x:`` closes ``x`` on the way out (see ``close()``)."""

    async def close(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


class Store(ClosedOnExit):
    """One database for the services: engine, schema, transactions and failures.

    Create it with :meth:`from_url` (it then owns and closes its engine) or pass an
    :class:`~sqlalchemy.ext.asyncio.AsyncEngine` you manage (never closed here). Use it
    as an async context manager, or call :meth:`close`.

    Args:
        engine: an asyncio engine (asyncpg or aiosqlite); this library's connection
            settings are installed on it (:func:`adk_sqlstore.engine.configure_engine`).
        auto_migrate: upgrade the schema to the newest revision on first use.
            ``None`` (the default): only if the engine was made by a ``from_url`` that
            chose to (SQLite); your own engines: no.

    Raises:
        InvalidArgumentError: ``auto_migrate`` is not True, False or None.
    """

    def __init__(self, engine: AsyncEngine, *, auto_migrate: bool | None = None) -> None:
        if not isinstance(engine, AsyncEngine):
            raise InvalidArgumentError(
                f"engine must be an AsyncEngine (or use Store.from_url), not"
                f" {type(engine).__name__}"
            )
        configure_engine(engine)
        self._engine = engine
        self._owns_engine = False
        if auto_migrate is None:  # as decided by the from_url that made the engine
            auto_migrate = bool(engine.sync_engine.__dict__.get(_AUTO_MIGRATE, False))
        check_argument("auto_migrate", auto_migrate, bool, "True, False or None")
        self._auto_migrate: bool = auto_migrate
        self.search_language: str | None = None
        """The URL's ``?language=`` (memory search), taken by memory services on this
        store that are not given one."""
        self.search_embedder: str | None = None
        """The URL's ``?embedder=`` (hybrid memory search), taken by memory services on
        this store that are not given one."""
        self.memory_generator: str | None = None
        """The URL's ``?generator=`` (the model of memory generation), taken by memory
        services on this store that are not given one."""
        self._ready = False
        self._schema_reported = False
        # One per event loop: an asyncio.Lock belongs to the loop that first waits on it.
        self._ready_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )

    @classmethod
    def from_url(
        cls, url: str | URL | None = None, *, auto_migrate: bool | None = None, **settings: Any
    ) -> Self:
        """A store on an engine of its own, closed with the store.

        Args:
            url: a database URL; ``None`` means ``$ADK_SQLSTORE_DATABASE_URL``, else the
                embedded SQLite file. Every spelling of :mod:`adk_sqlstore.urls` works
                (``postgresql://``, ``sqlite:///``, ADK's ``sqlstore+...`` URIs, an
                ``auto_migrate`` parameter, ``language`` and ``embedder`` parameters for
                memory search: :attr:`search_language`, :attr:`search_embedder`; a
                ``generator`` parameter for memory generation: :attr:`memory_generator`).
            auto_migrate: migrate on first use; ``None`` means as the URL's
                ``auto_migrate`` parameter says, else for SQLite yes and for PostgreSQL
                no (a server database is never altered unless asked). Other stores on
                this engine make the same choice.
            **settings: connection settings (:mod:`adk_sqlstore.settings`: ``pool_size``,
                ``statement_timeout``, ``search_path``, ``pgbouncer``, ...).

        Raises:
            ConfigurationError: the URL or a setting is invalid, the language or embedder
                unknown, or
                the driver is not installed (a ``ValueError``; the message hides the
                password).
        """
        if auto_migrate is not None:
            check_argument("auto_migrate", auto_migrate, bool, "True, False or None")
        target = resolve_url(url)
        if target.language is not None:
            analyzer(target.language)  # an unknown language fails before an engine exists
        if target.embedder is not None:
            embedder_named(target.embedder)  # so does an unknown embedder
        engine = create_engine(target.url, **settings)
        auto = target.migrates_itself if auto_migrate is None else auto_migrate
        engine.sync_engine.__dict__[_AUTO_MIGRATE] = auto
        store = cls(engine, auto_migrate=auto)
        store._owns_engine = True
        store.search_language = target.language
        store.search_embedder = target.embedder
        store.memory_generator = target.generator
        return store

    @classmethod
    def of(cls, store: Store | AsyncEngine, *, auto_migrate: bool | None = None) -> Store:
        """``store`` itself, or a new store on an engine you manage.

        Raises:
            InvalidArgumentError: ``store`` is neither, or ``auto_migrate`` is given
                with a store (it is the store's own choice).
        """
        if isinstance(store, Store):
            if auto_migrate is not None and auto_migrate != store.auto_migrate:
                raise InvalidArgumentError(
                    "auto_migrate is decided by the Store passed in; set it there"
                    " (Store(engine, auto_migrate=...) or Store.from_url(...))"
                )
            return store
        return cls(store, auto_migrate=auto_migrate)

    @property
    def engine(self) -> AsyncEngine:
        """The engine for the running event loop: a store may be used from several loops
        (``asyncio.run`` twice, threads with loops of their own), each with a pool of
        its own (:func:`adk_sqlstore.engine.engine_for_loop`)."""
        return engine_for_loop(self._engine)

    @property
    def url(self) -> URL:
        """The database URL with its connection settings (show it with
        :func:`adk_sqlstore.url_display.redact_url`)."""
        return given_url(self._engine)

    @property
    def auto_migrate(self) -> bool:
        """Whether this store upgrades the schema by itself on first use."""
        return self._auto_migrate

    @property
    def owns_engine(self) -> bool:
        """Whether :meth:`close` disposes of the engine (made by :meth:`from_url`)."""
        return self._owns_engine

    async def close(self) -> None:
        """Empty SQLite's write-ahead log if a ``forget_user`` left it pending, then
        dispose of the engine if this store created it, with the pools made for other
        event loops."""
        if self._wal_purge_pending:
            with contextlib.suppress(DatabaseUnavailableError):
                await self._retry_wal_purge()
        await release_held(engine_for_loop(self._engine))
        if self._owns_engine:
            await dispose_engine(self._engine)

    # -- schema -------------------------------------------------------------------------

    async def ensure_schema(self) -> None:
        """Check (or, with ``auto_migrate``, upgrade) the schema, once per store.

        Raises:
            SchemaNotMigratedError: the database is not at the needed revision (also
                logged, once per store, at ERROR on the ``adk_sqlstore`` logger family: a
                server shows the command to run at its first request).
            DatabaseUnavailableError: the database cannot be reached.
        """
        if self._ready:
            return
        lock = self._ready_locks.setdefault(asyncio.get_running_loop(), asyncio.Lock())
        async with lock:
            if self._ready:
                return
            try:
                with self.errors():
                    # At head, auto_migrate takes no lock: a store starting beside a
                    # busy SQLite writer does not wait for its write lock.
                    if self._auto_migrate and await current_revision(self.engine) != HEAD_REVISION:
                        await upgrade(self.engine)
                    await check_schema(self.engine)
                    await self._detect_citus()
            except SchemaNotMigratedError as exc:
                if not self._schema_reported:  # one line, not one per request of a server
                    self._schema_reported = True
                    logger.error("adk-sqlstore: %s", exc)
                raise
            self._ready = True

    async def _detect_citus(self) -> None:
        """On PostgreSQL, whether the tables are distributed by Citus (then every hot
        path is a transaction of plain, single-shard statements: see
        :func:`adk_sqlstore.sql.citus.on_citus`)."""
        if self.engine.dialect.name != "postgresql":
            return
        async with self.engine.connect() as conn:
            await detect_citus(conn)

    # -- transactions -------------------------------------------------------------------

    def errors(
        self, *, on_duplicate: Callable[[], AdkSqlStoreError] | None = None
    ) -> contextlib.AbstractContextManager[None]:
        """A context manager raising this library's typed errors for the database's
        failures (:func:`adk_sqlstore.failures.database_errors`): a duplicate key as
        ``on_duplicate()`` when given, any other failure as
        :class:`~adk_sqlstore.errors.DatabaseUnavailableError`."""
        return database_errors(self._engine, on_duplicate=on_duplicate)

    @asynccontextmanager
    async def transaction(
        self, *, write: bool, on_duplicate: Callable[[], AdkSqlStoreError] | None = None
    ) -> AsyncIterator[AsyncConnection]:
        """One transaction, committed at the end of the block, rolled back on any error.

        ``write``: SQLite takes the write lock up front (``BEGIN IMMEDIATE``); without
        it, PostgreSQL reads one read-only repeatable-read snapshot. Failures are raised
        as by :meth:`errors`.
        """
        await self.ensure_schema()
        views = _views(self._engine)
        with self.errors(on_duplicate=on_duplicate):
            async with (views.write if write else views.read).begin() as conn:
                yield conn
        if write and self._wal_purge_pending:
            await self._retry_wal_purge()

    @asynccontextmanager
    async def autocommit(
        self, *, on_duplicate: Callable[[], AdkSqlStoreError] | None = None
    ) -> AsyncIterator[AsyncConnection]:
        """A connection outside any transaction, for the one-round-trip hot paths of
        :mod:`adk_sqlstore.sql.hot_paths`: on PostgreSQL each statement commits by
        itself (one statement is one atomic round trip); on SQLite a batch of
        statements begins and ends its own transaction in aiosqlite's thread. Behind a
        transaction pooler (``pgbouncer=true``) it is a write transaction instead.
        Failures are raised as by :meth:`errors`."""
        await self.ensure_schema()
        views = _views(self._engine)
        engine = views.autocommit
        with self.errors(on_duplicate=on_duplicate):
            if views.held is not None:
                async with views.held.use() as held:
                    if held is not None:
                        yield held
                        return
            async with engine.begin() if views.autocommit_begins else engine.connect() as conn:
                yield conn

    # -- deleted text -------------------------------------------------------------------

    async def purge_deleted_text(self, *, user_id: str | None = None) -> Purge:
        """Clear the copies of deleted text the database keeps (after ``forget_user``
        of ``user_id``; see :func:`adk_sqlstore.sql.maintenance.purge_deleted_text`).
        When a reader of an older SQLite snapshot keeps the write-ahead log from being
        emptied, every store on this engine retries after its next write and at
        :meth:`close`."""
        async with self.autocommit() as conn:
            purged = await purge_deleted_text(conn, user_id=user_id)
        if purged.wal_pending:
            self._wal_purge_pending = True
        return purged

    @property
    def _wal_purge_pending(self) -> bool:
        return bool(self._engine.sync_engine.__dict__.get(_WAL_PURGE_PENDING, False))

    @_wal_purge_pending.setter
    def _wal_purge_pending(self, pending: bool) -> None:
        self._engine.sync_engine.__dict__[_WAL_PURGE_PENDING] = pending

    async def _retry_wal_purge(self) -> None:
        """Empty SQLite's write-ahead log of forgotten text, if no reader of an older
        snapshot is left (no wait)."""
        with self.errors():
            async with _views(self._engine).autocommit.connect() as conn:
                if await truncate_wal(conn):
                    self._wal_purge_pending = False


class OnStore(ClosedOnExit):
    """A service on a :class:`Store`: its ``store`` and ``engine``, and ``close()``,
    which closes the store only if the service made it (``from_url``, a URI)."""

    _store: Store
    _owns_store: bool = False

    def _use_store(self, store: Store, *, owns: bool) -> None:
        self._store = store
        self._owns_store = owns

    @property
    def store(self) -> Store:
        """The database this service runs on (services may share one)."""
        return self._store

    @property
    def engine(self) -> AsyncEngine:
        """The store's engine for the running event loop."""
        return self._store.engine

    def __repr__(self) -> str:
        # The end says it: pydantic's errors (ADK's Runner given a core service) show
        # the first and last 25 characters.
        kind = type(self)
        if kind.__module__.startswith("adk_sqlstore.adk"):
            return f"<adk_sqlstore.adk.{kind.__name__}>"
        return f"<adk_sqlstore.{kind.__name__} (core): for ADK use adk_sqlstore.adk>"

    async def close(self) -> None:
        """Close the store if this service made it; a store passed in is left open."""
        if self._owns_store:
            await self._store.close()
