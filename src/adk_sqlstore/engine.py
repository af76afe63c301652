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

import os
import re
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from sqlalchemy import event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, DisconnectionError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from .errors import DatabaseUnavailableError

__all__ = [
    "DATABASE_URL_ENV",
    "DatabaseTarget",
    "configure_engine",
    "create_engine",
    "database_error",
    "default_sqlite_path",
    "describe_url",
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
    unknown = sorted(set(query) - _ASYNCPG_QUERY)
    if unknown:
        raise ValueError(
            f"database URL {redact_url(url)!r}: the PostgreSQL driver (asyncpg) does not take"
            f" {', '.join(unknown)}; it takes {', '.join(sorted(_ASYNCPG_QUERY | {'sslmode'}))}"
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


def create_engine(
    url: str | URL, *, sqlite_busy_timeout: float = DEFAULT_SQLITE_BUSY_TIMEOUT, **kwargs: Any
) -> AsyncEngine:
    """Create an :class:`AsyncEngine` for ``url`` configured by :func:`configure_engine`.

    Args:
        url: a database URL (normalised with the asyncio driver).
        sqlite_busy_timeout: seconds an SQLite writer waits for the lock.
        **kwargs: passed to :func:`sqlalchemy.ext.asyncio.create_async_engine`.
    """
    normalized = normalize_url(url)
    if normalized.get_backend_name() == "postgresql" and "poolclass" not in kwargs:
        # Enough connections for an agent server's concurrent turns: past pool_size, each
        # extra connection is opened and closed again per use.
        kwargs.setdefault("pool_size", 20)
        kwargs.setdefault("max_overflow", 20)
    if normalized.get_backend_name() == "sqlite":
        database = normalized.database or ""
        if database and database != ":memory:" and not database.startswith("file:"):
            folder = Path(database).resolve().parent
            if not folder.is_dir():  # fail here, not in aiosqlite's thread
                raise ValueError(
                    f"the folder {folder} of SQLite database {database} does not exist"
                )
        # Every transaction of this library ends in COMMIT or ROLLBACK, so the pool's
        # extra ROLLBACK on check-in would only cost a trip to aiosqlite's thread.
        kwargs.setdefault("pool_reset_on_return", None)
    try:
        engine = create_async_engine(normalized, **kwargs)
    except ModuleNotFoundError as exc:
        extra = "postgres" if normalized.get_backend_name() == "postgresql" else "sqlite"
        raise ValueError(
            f"the {exc.name} driver for {redact_url(normalized)} is not installed: pip install"
            f" 'adk-sqlstore[{extra}]'"
        ) from exc
    configure_engine(engine, sqlite_busy_timeout=sqlite_busy_timeout)
    return engine


def configure_engine(
    engine: AsyncEngine, *, sqlite_busy_timeout: float = DEFAULT_SQLITE_BUSY_TIMEOUT
) -> None:
    """Install this library's connection settings on ``engine`` (idempotent).

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


def database_error(url: str | URL, exc: BaseException) -> DatabaseUnavailableError:
    """A :class:`DatabaseUnavailableError` describing a driver or network error on
    ``url``, in one line, with passwords hidden."""
    orig = getattr(exc, "orig", None) or exc
    while orig.__cause__ is not None:  # the driver's own error, not an adapter's wrapper
        orig = orig.__cause__
    detail = (str(orig).splitlines() or [""])[0]
    return DatabaseUnavailableError(
        f"database error on {redact_url(url)}: {type(orig).__name__}: {detail}"
    )
