"""Database URLs and engines: the one place that knows about drivers and pragmas.

The URL comes from the argument, else the ``ADK_SQLSTORE_DATABASE_URL`` environment
variable, else an embedded SQLite file (see :func:`default_sqlite_path`). Every part of
the product (``from_url``, the ADK classes, the command line, the environment variable)
accepts the same spellings, resolved here by :func:`resolve_url`:

- ``postgresql://`` (or ``postgres://``, or any ``postgresql+<driver>://``), mapped to
  asyncpg; ``sqlite:///relative/to/cwd.db`` and ``sqlite:////absolute/path.db``, mapped
  to aiosqlite;
- the same with ADK's service-URI prefix, ``sqlstore+postgresql://...`` or
  ``sqlstore+sqlite:///...`` (what ADK's ``--session_service_uri`` needs);
- ``sqlstore://``: the environment variable, else the embedded file;
- an ``auto_migrate=true`` (or ``false``) query parameter on any of them.

Passwords are replaced by ``***`` wherever a URL is shown.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import math
import os
import re
import threading
import uuid
import weakref
from collections.abc import AsyncGenerator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from sqlalchemy import event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, DisconnectionError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import AsyncAdaptedQueuePool

from .errors import AdkSqlStoreError, DatabaseUnavailableError, PoolTimeoutError

__all__ = [
    "DATABASE_URL_ENV",
    "DatabaseTarget",
    "EngineViews",
    "configure_engine",
    "create_engine",
    "database_error",
    "database_errors",
    "default_sqlite_path",
    "describe_url",
    "dispose_engine",
    "driver_error",
    "engine_for_loop",
    "engine_views",
    "redact_url",
    "resolve_url",
    "sqlite_path",
]

DATABASE_URL_ENV = "ADK_SQLSTORE_DATABASE_URL"
DEFAULT_SQLITE_BUSY_TIMEOUT = 30.0  # seconds
WRITE_OPTION = "adk_sqlstore_write"

_ASYNC_DRIVERS = {"postgresql": "asyncpg", "sqlite": "aiosqlite"}


def default_sqlite_path() -> Path:
    """The embedded database file: ``$XDG_DATA_HOME/adk-sqlstore/adk_sqlstore.db``.

    ``XDG_DATA_HOME`` defaults to ``~/.local/share``.
    """
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "adk-sqlstore" / "adk_sqlstore.db"


class ClosedOnExit:
    """``async with service:`` closes the service on the way out (see ``close()``)."""

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


@dataclass(frozen=True)
class DatabaseTarget:
    """A resolved database URL.

    Attributes:
        url: the URL with an asyncio driver.
        embedded: True when no URL was given anywhere and the embedded SQLite
            default is used (the service may then migrate it by itself).
    """

    url: URL
    embedded: bool
    auto_migrate: bool | None = None

    @property
    def migrates_itself(self) -> bool:
        """Whether services on this database upgrade its schema by themselves unless
        told otherwise: as the URL's ``auto_migrate`` parameter says, else yes for
        SQLite files (the embedded default included) and no for server databases,
        which are never altered unless asked."""
        if self.auto_migrate is not None:
            return self.auto_migrate
        return self.embedded or self.url.get_backend_name() == "sqlite"

    @property
    def display(self) -> str:
        """The URL with its password replaced by ``***``."""
        return redact_url(self.url)


_SECRET_QUERY = re.compile(
    r"((?:^|[?&;])(?:password|passwd|pwd|sslpassword|secret|token|api_key)=)[^&;#]*", re.I
)
_USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*://[^:/?#@]*:)(.*)(@[^@]*)$", re.S)


def sqlite_path(url: URL) -> Path | None:
    """The absolute path of the SQLite database file ``url`` names (``None`` for a
    server or an in-memory database); a relative path is resolved against the working
    directory, as SQLite does."""
    database = url.database or ""
    if url.get_backend_name() != "sqlite" or database in ("", ":memory:"):
        return None
    if database.startswith("file:"):
        database = database[len("file:") :].split("?", 1)[0]
    return Path(database).absolute()


def describe_url(url: URL) -> str:
    """Where the data of ``url`` lives, for a message: ``SQLite file /abs/path.db``, or
    the URL with its password hidden."""
    path = sqlite_path(url)
    return f"SQLite file {path}" if path is not None else redact_url(url)


def redact_url(url: str | URL) -> str:
    """Render ``url`` with every password hidden (``***``): the one after ``user:``
    and those in query parameters such as ``?password=``. Never raises."""
    if isinstance(url, URL):
        text = url.render_as_string(hide_password=True)
    else:
        try:
            make_url(url)
        except Exception:  # unparsable: hide everything before the last "@"
            scheme, sep, rest = url.partition("://")
            if not sep or "@" not in rest:
                return "<unparsable database URL>"
            text = f"{scheme}://***@{rest.rsplit('@', 1)[1]}"
        else:
            # Everything between "user:" and the last "@" is the password, whatever it holds.
            text = _USERINFO.sub(r"\1***\3", url)
    return _SECRET_QUERY.sub(r"\1***", text)


SERVICE_SCHEME = "sqlstore"
"""The scheme of ADK service URIs: ``sqlstore://`` and ``sqlstore+<database URL>``."""

AUTO_MIGRATE_PARAMETER = "auto_migrate"
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def _split_options(url: str) -> tuple[str, bool | None]:
    """``url`` without the ``sqlstore+`` prefix and the ``auto_migrate`` parameter,
    and that parameter's value (``None`` when absent).

    Raises:
        ValueError: ``auto_migrate`` is neither true nor false.
    """
    if url.startswith(SERVICE_SCHEME + "+"):
        url = url[len(SERVICE_SCHEME) + 1 :]
    base, sep, query = url.partition("?")
    if not sep:
        return url, None
    auto: bool | None = None
    kept = []
    for pair in query.split("&"):
        key, _, value = pair.partition("=")
        if key != AUTO_MIGRATE_PARAMETER:
            if pair:
                kept.append(pair)
        elif value.lower() in _TRUE:
            auto = True
        elif value.lower() in _FALSE:
            auto = False
        else:
            raise ValueError(
                f"database URL {redact_url(url)!r}: auto_migrate={value!r} is neither true"
                " nor false"
            )
    return base + ("?" + "&".join(kept) if kept else ""), auto


def _is_service_default(url: str) -> bool:
    """Whether ``url`` is ``sqlstore://`` (with nothing after the scheme but options)."""
    return url.partition("?")[0] in (SERVICE_SCHEME + "://", SERVICE_SCHEME + ":")


_MULTIHOST = re.compile(
    r"^(?P<scheme>[A-Za-z][\w+.\-]*://)(?P<userinfo>[^@/?#]*@)?(?P<hosts>[^@/?#]*,[^@/?#]*)"
    r"(?P<rest>[/?].*)?$",
    re.S,
)


def _multihost(url: str) -> str:
    """libpq's several-hosts form, ``postgresql://u:p@h1:5432,h2:5433/db``, written as
    SQLAlchemy takes it for asyncpg: ``postgresql://u:p@/db?host=h1:5432&host=h2:5433``
    (asyncpg tries the hosts in order; with ``target_session_attrs=read-write`` it
    skips standbys, so the service follows a failover)."""
    match = _MULTIHOST.match(url)
    if match is None:
        return url
    path, _, query = (match["rest"] or "/").partition("?")
    hosts = "&".join(f"host={host}" for host in match["hosts"].split(",") if host)
    return f"{match['scheme']}{match['userinfo'] or ''}{path or '/'}?{hosts}" + (
        f"&{query}" if query else ""
    )


def normalize_url(url: str | URL) -> URL:
    """Map a URL to its asyncio driver: ``postgresql://`` to asyncpg, ``sqlite://``
    to aiosqlite (``postgres://`` is accepted as ``postgresql://``, and ADK's
    ``sqlstore+`` prefix and an ``auto_migrate`` parameter are dropped; see
    :func:`resolve_url` for ``sqlstore://``).

    Raises:
        ValueError: the URL cannot be parsed or names another database; the message
            shows the URL with its password hidden.
    """
    if isinstance(url, str):
        if _is_service_default(url):
            return resolve_url(url).url
        url, _ = _split_options(url)
    if isinstance(url, str) and url.startswith("postgres://"):
        url = "postgresql://" + url[len("postgres://") :]
    if isinstance(url, str) and url.startswith("postgresql"):
        url = _multihost(url)
    if isinstance(url, str) and "://" not in url:
        shown = repr(url) if "@" not in url else "(hidden: it may hold a password)"
        if url.startswith("sqlite:"):
            raise ValueError(
                f"SQLite URL {shown} needs three slashes: sqlite:///relative/to/cwd.db or"
                " sqlite:////absolute/path.db"
            )
        raise ValueError(
            f"database URL {shown} has no scheme: use postgresql://user@host/db or"
            " sqlite:///path/to.db"
        )
    if isinstance(url, str) and not url.startswith("sqlite") and url.count("@") > 1:
        raise ValueError(
            f"database URL {redact_url(url)!r} has more than one '@': percent-encode '@' in"
            " user names and passwords as %40 (and ':' '/' '?' '#' '%' and spaces too)"
        )
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):  # ValueError: a port that is not a number
        raise ValueError(_why_invalid(str(url))) from None
    backend = parsed.get_backend_name()
    driver = _ASYNC_DRIVERS.get(backend)
    if driver is None and backend.startswith(SERVICE_SCHEME):
        raise ValueError(
            f"{redact_url(parsed)!r} is not a URL adk-sqlstore reads: write sqlstore:// (the"
            " default database), sqlstore+postgresql://user:pass@host/db or"
            " sqlstore+sqlite:///path.db"
        )
    if driver is None:
        raise ValueError(
            f"unsupported database {backend!r} in {redact_url(parsed)!r}: adk-sqlstore runs"
            " on PostgreSQL (postgresql://) and SQLite (sqlite:///path)"
        )
    if backend == "sqlite" and parsed.host:
        raise ValueError(
            f"SQLite URL {redact_url(parsed)!r} names a host: write sqlite:///relative.db"
            " (three slashes) or sqlite:////absolute/path.db (four)"
        )
    try:
        port = parsed.port
    except ValueError:
        port = -1
    if port is not None and not 0 < port < 65536:
        raise ValueError(f"database URL {redact_url(parsed)!r} has no valid port (1-65535)")
    if backend == "postgresql":
        parsed = _asyncpg_query(parsed)
    if parsed.get_driver_name() != driver:
        parsed = parsed.set(drivername=f"{backend}+{driver}")
    return parsed


def _why_invalid(url: str) -> str:
    """A one-line reason why SQLAlchemy cannot parse ``url`` (password hidden)."""
    host = url.partition("://")[2].rsplit("@", 1)[-1].split("/", 1)[0].split("?", 1)[0]
    port = host.rpartition(":")[2] if ":" in host and not host.endswith("]") else ""
    if port and not port.isdigit():
        return f"database URL {redact_url(url)!r}: the port {port!r} is not a number (1-65535)"
    return (
        f"invalid database URL {redact_url(url)!r}: the form is"
        " postgresql://user:password@host:port/database, with '@' ':' '/' '?' '#' '%' and"
        " spaces in the user name or password percent-encoded"
    )


_ASYNCPG_QUERY = {
    "host",
    "port",
    "user",
    "password",
    "database",
    "passfile",
    "ssl",
    "target_session_attrs",
    "prepared_statement_cache_size",
}


def _asyncpg_query(url: URL) -> URL:
    """The URL's query as asyncpg takes it: libpq's ``sslmode`` becomes ``ssl`` (same
    values: disable, allow, prefer, require, verify-ca, verify-full); parameters
    asyncpg does not take raise ``ValueError`` here, not a ``TypeError`` at connect."""
    query = dict(url.query)
    if "sslmode" in query:
        query.setdefault("ssl", query.pop("sslmode"))
        query.pop("sslmode", None)
    unknown = sorted(set(query) - _ASYNCPG_QUERY - set(SETTINGS))
    if unknown:
        taken = sorted(_ASYNCPG_QUERY | {"sslmode"} | set(SETTINGS) - {"sqlite_busy_timeout"})
        raise ValueError(
            f"database URL {redact_url(url)!r}: adk-sqlstore and its PostgreSQL driver"
            f" (asyncpg) do not take {', '.join(unknown)}; they take {', '.join(taken)}"
        )
    return url.set(query=query) if query != dict(url.query) else url


def resolve_url(url: str | URL | None = None) -> DatabaseTarget:
    """Resolve the database: ``url``, else ``$ADK_SQLSTORE_DATABASE_URL``, else the
    embedded SQLite file (whose folder is created).

    Every spelling of the module docstring is accepted, in ``url`` and in the
    environment variable alike; ``sqlstore://`` (or ``None``) means the environment
    variable, else the embedded file. An ``auto_migrate`` parameter on ``sqlstore://``
    applies to whatever it resolves to.

    Raises:
        ValueError: the URL is invalid or names an unsupported database (the message
            hides the password).
    """
    auto: bool | None = None
    for candidate in (url, os.environ.get(DATABASE_URL_ENV, "").strip() or None):
        if isinstance(candidate, str):
            candidate, given = _split_options(candidate)
            auto = given if auto is None else auto  # the argument's choice first
            if _is_service_default(candidate):
                continue
        if candidate is not None:
            return DatabaseTarget(normalize_url(candidate), embedded=False, auto_migrate=auto)
    path = default_sqlite_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    return DatabaseTarget(normalize_url(f"sqlite:///{path}"), embedded=True, auto_migrate=auto)


def _positive(name: str, value: str) -> float:
    number = float(value)
    if not math.isfinite(number) or number <= 0:
        raise ValueError(f"{name} must be a positive number of seconds, not {value!r}")
    return number


def _count(name: str, value: str, least: int) -> int:
    number = int(value)
    if number < least:
        raise ValueError(f"{name} must be an integer of at least {least}, not {value!r}")
    return number


def _flag(name: str, value: str) -> bool:
    if value.lower() in _TRUE:
        return True
    if value.lower() in _FALSE:
        return False
    raise ValueError(f"{name} must be true or false, not {value!r}")


def _duration(name: str, value: str) -> str:
    if not re.fullmatch(r"\d+\s*(ms|s|min|h|d)?", value.strip()):
        raise ValueError(f"{name} must be milliseconds or a duration such as 30s, not {value!r}")
    return value.strip()


SETTINGS: dict[str, Callable[[str, str], Any]] = {
    "pool_size": lambda n, v: _count(n, v, 1),
    "max_overflow": lambda n, v: _count(n, v, 0),
    "pool_timeout": _positive,
    "pool_recycle": _positive,
    "pool_pre_ping": _flag,
    "statement_timeout": _duration,
    "command_timeout": _positive,
    "search_path": lambda n, v: v,
    "pgbouncer": _flag,
    "sqlite_busy_timeout": _positive,
}
"""Connection settings taken as URL query parameters (``?pool_size=5``) and as keyword
arguments of ``create_engine``/``from_url`` (which win), converted by these functions.
See :func:`create_engine` for what each does."""

DEFAULT_POOL_SIZE = 5  # measured: see create_engine and benchmarks/pool_sizes.py
DEFAULT_MAX_OVERFLOW = 0


def split_settings(url: URL) -> tuple[URL, dict[str, Any]]:
    """``url`` without this library's connection settings, and those settings.

    Raises:
        ValueError: a setting's value is not of its kind (naming it, password hidden).
    """
    query = dict(url.query)
    settings: dict[str, Any] = {}
    for name in SETTINGS.keys() & query.keys():
        raw = query.pop(name)
        value = raw[-1] if isinstance(raw, tuple) else raw
        try:
            settings[name] = SETTINGS[name](name, value)
        except ValueError as exc:
            raise ValueError(f"database URL {redact_url(url)!r}: {exc}") from None
    return (url.set(query=query) if settings else url), settings


def create_engine(url: str | URL, **kwargs: Any) -> AsyncEngine:
    """Create an :class:`AsyncEngine` for ``url`` configured by :func:`configure_engine`.

    Connection settings come from the URL's query (``?pool_size=5&statement_timeout=30s``)
    or, winning over it, from keyword arguments of the same names:

    - ``pool_size`` (default 5), ``max_overflow`` (default 0): connections kept open,
      and opened beyond them under load, per process and event loop. The defaults
      suit a server shared by many workers: 5 connections kept busy did as much as 10,
      20 or 40 for 50 concurrent tasks on a 2-vCPU client, and overflow connections,
      opened and closed per use, only cost (``python -m benchmarks.pool_sizes``:
      500 cycles/s at 5+0, 534 at 10+0, 331 at 20+20); a burst waits for a free
      connection instead, up to ``pool_timeout``;
    - ``pool_timeout`` (seconds, default 30): how long a call waits for a connection
      when all are in use, then fails with :class:`PoolTimeoutError`;
    - ``pool_recycle`` (seconds, default never): replace connections older than this;
    - ``pool_pre_ping`` (default false): test each connection before use (a closed
      socket is always detected without it);
    - ``statement_timeout`` (PostgreSQL; ``30s``, ``500ms`` or milliseconds): the
      server cancels longer statements (the call fails with
      :class:`DatabaseUnavailableError`); ``command_timeout`` (seconds): the client
      gives up waiting for one;
    - ``search_path`` (PostgreSQL): the schema(s) the tables live in, e.g. ``agents``;
    - ``pgbouncer=true``: behind a pooler in transaction mode (PgBouncer, Supabase's,
      many managed offerings): no prepared statements are reused and every statement
      runs inside a transaction. Session settings (``search_path``,
      ``statement_timeout``) do not pass through such a pooler: set them on the role
      (``ALTER ROLE ... SET``);
    - ``sqlite_busy_timeout`` (seconds, default 30): how long an SQLite writer waits
      for the lock.

    Args:
        url: a database URL (normalised with the asyncio driver).
        **kwargs: the settings above; anything else is passed to
            :func:`sqlalchemy.ext.asyncio.create_async_engine`.

    Raises:
        ValueError: the URL or a setting is invalid, or the driver is not installed.
    """
    normalized, settings = split_settings(normalize_url(url))
    settings.update({name: kwargs.pop(name) for name in SETTINGS.keys() & kwargs.keys()})
    backend = normalized.get_backend_name()
    for name in ("pool_size", "max_overflow", "pool_timeout", "pool_recycle", "pool_pre_ping"):
        if name in settings:
            kwargs.setdefault(name, settings[name])
    if backend == "postgresql":
        _postgres_options(settings, kwargs)
    elif backend == "sqlite":
        database = normalized.database or ""
        if database and database != ":memory:" and not database.startswith("file:"):
            folder = Path(database).resolve().parent
            if not folder.is_dir():  # fail here, not in aiosqlite's thread
                raise ValueError(
                    f"the folder {folder} of SQLite database {database} does not exist"
                )
            # A pool of open connections, as SQLAlchemy 2.1 chooses for a file (2.0 opens
            # a connection, and aiosqlite's thread, per use).
            kwargs.setdefault("poolclass", AsyncAdaptedQueuePool)
        # Every transaction of this library ends in COMMIT or ROLLBACK, so the pool's
        # extra ROLLBACK on check-in would only cost a trip to aiosqlite's thread.
        kwargs.setdefault("pool_reset_on_return", None)
    try:
        engine = create_async_engine(normalized, **kwargs)
    except ModuleNotFoundError as exc:
        extra = "postgres" if backend == "postgresql" else "sqlite"
        raise ValueError(
            f"the {exc.name} driver for {redact_url(normalized)} is not installed: pip install"
            f" 'adk-sqlstore[{extra}]'"
        ) from exc
    configure_engine(
        engine,
        sqlite_busy_timeout=settings.get("sqlite_busy_timeout", DEFAULT_SQLITE_BUSY_TIMEOUT),
        pgbouncer=settings.get("pgbouncer", False),
    )
    return engine


def _postgres_options(settings: dict[str, Any], kwargs: dict[str, Any]) -> None:
    """The engine and asyncpg arguments for PostgreSQL ``settings``."""
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
    if settings.get("pgbouncer"):
        # A transaction pooler hands each transaction to any server connection: a
        # statement prepared on one is unknown to the next. asyncpg's own cache off,
        # SQLAlchemy's too, and each statement prepared under a name of its own.
        connect_args.setdefault("statement_cache_size", 0)
        connect_args.setdefault("prepared_statement_cache_size", 0)
        connect_args.setdefault(
            "prepared_statement_name_func", lambda: f"__adk_sqlstore_{uuid.uuid4().hex}__"
        )
    if not server:
        del connect_args["server_settings"]
    if not connect_args:
        del kwargs["connect_args"]


def configure_engine(
    engine: AsyncEngine,
    *,
    sqlite_busy_timeout: float = DEFAULT_SQLITE_BUSY_TIMEOUT,
    pgbouncer: bool = False,
) -> None:
    """Install this library's connection settings on ``engine`` (idempotent).

    ``pgbouncer``: the engine reaches PostgreSQL through a pooler in transaction mode
    (see :func:`create_engine`; the engine's asyncpg arguments must match): every
    statement then runs inside a transaction (:func:`engine_views`).

    PostgreSQL: a pooled connection the server has closed (a restart, an idle
    timeout) is replaced when it is checked out, without a round trip: asyncpg knows
    its socket is gone, so the call runs on a new connection instead of failing.

    Each new SQLite connection gets ``journal_mode=WAL``, ``synchronous=NORMAL``
    (durable across application crashes), ``foreign_keys=ON`` and a busy timeout.
    Transactions are begun by this library rather than by the driver: ``BEGIN`` for
    reads, so that every read of a call sees one snapshot, and ``BEGIN IMMEDIATE`` for
    writes, so that a writer waits for the lock (up to the busy timeout) instead of
    failing with "database is locked" when it upgrades a read lock.
    """
    sync_engine = engine.sync_engine
    if getattr(sync_engine, "_adk_sqlstore", False):
        return
    sync_engine._adk_sqlstore = True  # type: ignore[attr-defined]
    sync_engine._adk_sqlstore_pgbouncer = pgbouncer  # type: ignore[attr-defined]
    if sync_engine.dialect.name == "postgresql":

        @event.listens_for(sync_engine, "checkout")
        def _on_checkout(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
            driver = getattr(dbapi_connection, "driver_connection", None)
            if driver is not None and driver.is_closed():
                raise DisconnectionError("the server closed this pooled connection")

        return
    if sync_engine.dialect.name != "sqlite":
        return
    busy_ms = int(sqlite_busy_timeout * 1000)

    @event.listens_for(sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # we emit BEGIN ourselves
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {busy_ms}")
            cursor.execute("PRAGMA journal_mode = WAL")
            cursor.execute("PRAGMA synchronous = NORMAL")
            cursor.execute("PRAGMA foreign_keys = ON")
            cursor.execute("PRAGMA secure_delete = ON")  # deleted text is zeroed, not left
        finally:
            cursor.close()

    @event.listens_for(sync_engine, "reset")
    def _on_reset(dbapi_connection: Any, _record: Any, reset_state: Any) -> None:
        # The pool does not roll back on check-in (pool_reset_on_return=None, one trip
        # to aiosqlite's thread saved per call); a transaction a cancelled read left
        # open is rolled back here, so that no pooled connection keeps one.
        raw = getattr(getattr(dbapi_connection, "driver_connection", None), "_conn", None)
        if reset_state.asyncio_safe and raw is not None and raw.in_transaction:
            dbapi_connection.rollback()

    @event.listens_for(sync_engine, "begin")
    def _on_begin(conn: Any) -> None:
        write = conn.get_execution_options().get(WRITE_OPTION, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


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
    a Celery task) hands connections across them and fails. The first loop that uses a
    PostgreSQL engine keeps it; each other running loop gets a twin with the same
    settings and listeners and a pool of its own. When a loop shuts down (the end of
    ``asyncio.run``), the connections pooled for it are closed, and its engine serves
    the next loop. aiosqlite connections work from any loop: SQLite engines are
    returned as they are.
    """
    if engine.dialect.driver != "asyncpg":
        return engine
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
        direct: the hot paths' connection outside any transaction (PostgreSQL
            AUTOCOMMIT: one statement is one atomic round trip; SQLite: the statements
            run in aiosqlite's thread, which begins and commits itself). Behind a
            transaction pooler it is ``write`` (see ``direct_begins``).
        direct_begins: whether ``direct`` connections must be used inside
            ``engine.begin()`` (a transaction pooler) rather than ``connect()``.
    """

    write: AsyncEngine
    read: AsyncEngine
    direct: AsyncEngine
    direct_begins: bool


def engine_views(engine: AsyncEngine) -> EngineViews:
    """The :class:`EngineViews` of ``engine`` for the running event loop (see
    :func:`engine_for_loop`), made once per engine and loop."""
    current = engine_for_loop(engine)
    views: EngineViews | None = current.sync_engine.__dict__.get(_VIEWS)
    if views is None:
        write = current.execution_options(**{WRITE_OPTION: True})
        if current.dialect.name != "postgresql":
            views = EngineViews(write=write, read=current, direct=current, direct_begins=False)
        elif getattr(current.sync_engine, "_adk_sqlstore_pgbouncer", False):
            read = current.execution_options(
                isolation_level="REPEATABLE READ", postgresql_readonly=True
            )
            views = EngineViews(write=write, read=read, direct=write, direct_begins=True)
        else:
            read = current.execution_options(
                isolation_level="REPEATABLE READ", postgresql_readonly=True
            )
            direct = current.execution_options(isolation_level="AUTOCOMMIT")
            views = EngineViews(write=write, read=read, direct=direct, direct_begins=False)
        current.sync_engine.__dict__[_VIEWS] = views
    return views


_DRIVER_PACKAGES = frozenset({"asyncpg", "aiosqlite", "sqlite3"})


def driver_error(engine: AsyncEngine, exc: BaseException) -> DatabaseUnavailableError | None:
    """The typed error for a database, network or connection-pool failure of ``engine``
    (``None`` when ``exc`` is none of those: a bug to let through).

    Covers SQLAlchemy's driver errors, OS and network errors (refused, reset, broken
    pipe, timeouts), the drivers' own exceptions when they escape SQLAlchemy's wrapping
    (as some connect errors do with SQLAlchemy 2.0.x), and a pool that stayed full for
    ``pool_timeout`` seconds (:class:`PoolTimeoutError`).
    """
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


def database_error(url: str | URL, exc: BaseException) -> DatabaseUnavailableError:
    """A :class:`DatabaseUnavailableError` describing a driver or network error on
    ``url``, in one line, with passwords hidden."""
    orig = getattr(exc, "orig", None) or exc
    while orig.__cause__ is not None:  # the driver's own error, not an adapter's wrapper
        orig = orig.__cause__
    detail = (str(orig).splitlines() or [""])[0] or "(no message)"
    if isinstance(orig, ConnectionError) or type(orig).__name__ in _CONNECTION_LOST:
        detail += (
            "; the connection was closed under the call: a server restart or failover, a"
            " pooler, or a server timeout (idle_in_transaction_session_timeout,"
            " idle_session_timeout); the server's log has the reason"
        )
    return DatabaseUnavailableError(
        f"database error on {redact_url(url)}: {type(orig).__name__}: {detail}"
    )


_CONNECTION_LOST = frozenset({"ConnectionDoesNotExistError", "InterfaceError"})
