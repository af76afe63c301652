"""Database URLs: every spelling the product accepts, resolved in one place, and the
connection settings a URL may carry.

The URL comes from the argument, else the ``ADK_SQLSTORE_DATABASE_URL`` environment
variable, else an embedded SQLite file (see :func:`default_sqlite_path`). Every part of
the product (``from_url``, the ADK classes, the command line, the environment variable)
accepts the same spellings, resolved here by :func:`resolve_url`:

- ``postgresql://`` (or ``postgres://``, or any ``postgresql+<driver>://``), mapped to
  asyncpg; ``mysql://`` and ``mariadb://`` (or any ``mysql+<driver>://``), mapped to
  asyncmy (``mysql+asyncmy://``: one dialect for both servers, SQLAlchemy tells MariaDB
  from MySQL by the server's version); ``sqlite:///relative/to/cwd.db`` and
  ``sqlite:////absolute/path.db``, mapped to aiosqlite; libpq's several hosts
  (``h1:5432,h2:5433``) for failover;
- the same with ADK's service-URI prefix, ``sqlstore+postgresql://...``,
  ``sqlstore+mysql://...`` or ``sqlstore+sqlite:///...`` (what ADK's
  ``--session_service_uri`` needs);
- ``sqlstore://``: the environment variable, else the embedded file (its query applies
  to that URL, checked as that URL's own);
- an ``auto_migrate=true`` (or ``false``) query parameter on any of them, and the
  connection settings of :data:`adk_sqlstore.settings.SETTINGS` (applied by
  :func:`adk_sqlstore.engine.create_engine`).

Passwords are replaced by ``***`` wherever a URL is shown.
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any, overload
from urllib.parse import unquote

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from .errors import ConfigurationError
from .settings import FALSE_WORDS, SETTINGS, TRUE_WORDS, check_settings
from .url_display import redact_url, shown_url
from .url_parameters import STORE_OPTIONS, asyncmy_query, asyncpg_query, sqlite_query

__all__ = [
    "DATABASE_URL_ENV",
    "DatabaseTarget",
    "default_sqlite_path",
    "normalize_url",
    "pop_parameter",
    "resolve_url",
    "split_settings",
]

DATABASE_URL_ENV = "ADK_SQLSTORE_DATABASE_URL"

_ASYNC_DRIVERS = {"postgresql": "asyncpg", "sqlite": "aiosqlite", "mysql": "asyncmy"}
"""The asyncio driver of each backend. MySQL and MariaDB: asyncmy, not aiomysql (ADK's
choice for ``mysql://``): aiomysql 0.3.2 with PyMySQL 1.2 fails to bind a ``bytes``
value (``TypeError`` in ``escape_bytes_prefixed``), and asyncmy's protocol is compiled
(Cython); both round-trip every value of the contract suite otherwise (2026-12-03)."""


def default_sqlite_path() -> Path:
    """The embedded database file: ``$XDG_DATA_HOME/adk-sqlstore/adk_sqlstore.db``.

    ``XDG_DATA_HOME`` defaults to ``~/.local/share``.
    """
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "adk-sqlstore" / "adk_sqlstore.db"


@dataclass(frozen=True)
class DatabaseTarget:
    """A resolved database URL.

    Attributes:
        url: the URL with an asyncio driver.
        embedded: True when no URL was given anywhere and the embedded SQLite
            default is used (the service may then migrate it by itself).
        auto_migrate: the URL's ``auto_migrate`` parameter (``None`` when absent).
        language: the URL's ``language`` parameter, the memory search language
            (``None`` when absent).
        embedder: the URL's ``embedder`` parameter, the embedder of hybrid memory
            search (``None`` when absent).
        generator: the URL's ``generator`` parameter, the model of memory generation
            (``None`` when absent).
    """

    url: URL
    embedded: bool
    auto_migrate: bool | None = None
    language: str | None = None
    embedder: str | None = None
    generator: str | None = None

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
        """The URL as its user writes it, its password replaced by ``***``
        (:func:`shown_url`)."""
        return shown_url(self.url)


SERVICE_SCHEME = "sqlstore"
"""The scheme of ADK service URIs: ``sqlstore://`` and ``sqlstore+<database URL>``."""

AUTO_MIGRATE_PARAMETER = "auto_migrate"


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
        elif value.lower() in TRUE_WORDS:
            auto = True
        elif value.lower() in FALSE_WORDS:
            auto = False
        else:
            raise ConfigurationError(
                f"database URL {redact_url(url)!r}: auto_migrate={value!r} is neither true"
                " nor false"
            )
    return base + ("?" + "&".join(kept) if kept else ""), auto


@overload
def pop_parameter(url: str | None, name: str) -> tuple[str | None, str | None]: ...
@overload
def pop_parameter(url: str | URL | None, name: str) -> tuple[str | URL | None, str | None]: ...
def pop_parameter(url: str | URL | None, name: str) -> tuple[str | URL | None, str | None]:
    """``url`` without the query parameter ``name`` (a service option such as the
    memory service's ``?language=german``, not a connection setting), and its value
    (``None`` when absent)."""
    if not isinstance(url, str):
        if url is None or name not in url.query:
            return url, None
        query = dict(url.query)
        value = query.pop(name)
        return url.set(query=query), str(value[-1] if isinstance(value, tuple) else value)
    base, sep, query_text = url.partition("?")
    if not sep:
        return url, None
    found: str | None = None
    kept = []
    for pair in query_text.split("&"):
        key, _, value = pair.partition("=")
        if key == name:
            found = unquote(value)
        elif pair:
            kept.append(pair)
    return base + ("?" + "&".join(kept) if kept else ""), found


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
    """Map a URL to its asyncio driver: ``postgresql://`` to asyncpg, ``mysql://`` and
    ``mariadb://`` to asyncmy (as ``mysql+asyncmy://``), ``sqlite://`` to aiosqlite
    (``postgres://`` is accepted as ``postgresql://``, and ADK's
    ``sqlstore+`` prefix and an ``auto_migrate`` parameter are dropped; see
    :func:`resolve_url` for ``sqlstore://``).

    Raises:
        ValueError: the URL cannot be parsed, names another database, or has a query
            parameter neither this library nor the driver takes there
            (:mod:`adk_sqlstore.url_parameters`); the message shows the URL with its
            password hidden.
    """
    return _normalized(url, options=())


def _normalized(url: str | URL, *, options: Collection[str]) -> URL:
    """:func:`normalize_url`, for a caller that took the service ``options`` out of the
    URL's query itself (named as taken in a message about the query)."""
    if isinstance(url, str):
        if _is_service_default(url):
            taken = STORE_OPTIONS - {AUTO_MIGRATE_PARAMETER} <= set(options)
            return _resolve(url, take_options=taken).url
        url = _spelled(_split_options(url)[0])
        options = {*options, AUTO_MIGRATE_PARAMETER}
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):  # ValueError: a port that is not a number
        raise ConfigurationError(_why_invalid(str(url))) from None
    if parsed.get_backend_name() == "mariadb":  # a URL object: one dialect for both
        parsed = parsed.set(drivername="mysql")
    backend, driver = parsed.get_backend_name(), _driver(parsed)
    if backend == "postgresql":
        parsed = asyncpg_query(parsed, redact_url(parsed), options)
    elif backend == "mysql":
        parsed = asyncmy_query(parsed, redact_url(parsed), options)
    elif backend == "sqlite":
        parsed = sqlite_query(parsed, redact_url(parsed), options)
    if parsed.get_driver_name() != driver:
        parsed = parsed.set(drivername=f"{backend}+{driver}")
    split_settings(parsed)  # a setting's value is checked here, before any connection
    return parsed


def _spelled(url: str) -> str:
    """``url`` with ``postgres://`` as ``postgresql://`` and libpq's several hosts in
    the query, after the checks that need its text.

    Raises:
        ConfigurationError: no scheme, or more than one ``@``.
    """
    if url.startswith("postgres://"):
        url = "postgresql://" + url[len("postgres://") :]
    if url.startswith("mariadb:") or url.startswith("mariadb+"):
        url = "mysql" + url[len("mariadb") :]
    if url.startswith("postgresql"):
        url = _multihost(url)
    if not url.strip():
        raise ConfigurationError(
            "the database URL is empty: give postgresql://user@host/db, mysql://user@host/db"
            " or sqlite:///path/to.db, or leave it unset for the embedded SQLite file"
        )
    if "://" not in url or re.search(r"\s\w+=", url):
        shown = _shown_without_scheme(url)
        if "=" in url and not url.startswith("sqlite:"):
            raise ConfigurationError(
                f"database URL {shown} looks like a key=value connection string; write it as"
                " a URL: postgresql://user:password@host:5432/db (or mysql://...)"
            )
        if url.startswith("sqlite:"):
            raise ConfigurationError(
                f"SQLite URL {shown} needs three slashes: sqlite:///relative/to/cwd.db or"
                " sqlite:////absolute/path.db"
            )
        raise ConfigurationError(
            f"database URL {shown} has no scheme: use postgresql://user@host/db,"
            " mysql://user@host/db (or mariadb://) or sqlite:///path/to.db"
        )
    if not url.startswith("sqlite") and url.count("@") > 1:
        raise ConfigurationError(
            f"database URL {redact_url(url)!r} has more than one '@': percent-encode '@' in"
            " user names and passwords as %40 (and ':' '/' '?' '#' '%' and spaces too)"
        )
    return url


def _shown_without_scheme(url: str) -> str:
    """A string given as a database URL that has no ``://``, for a message: quoted when
    it reads as a path or file name, else hidden (a libpq ``key=value`` string, a
    password pasted into the wrong setting, or user info before an ``@``)."""
    looks_like_a_path = ("/" in url or "." in url) and not any(c in url for c in "@=: \t")
    if looks_like_a_path or (url.startswith("sqlite:") and "@" not in url):
        return repr(url)
    return f"(not shown: {len(url)} characters that may hold a password)"


def _driver(parsed: URL) -> str:
    """The asyncio driver for a parsed URL.

    Raises:
        ConfigurationError: another database, a host on an SQLite URL, or a bad port.
    """
    backend = parsed.get_backend_name()
    driver = _ASYNC_DRIVERS.get(backend)
    if driver is None and backend.startswith(SERVICE_SCHEME):
        raise ConfigurationError(
            f"{redact_url(parsed)!r} is not a URL adk-sqlstore reads: write sqlstore:// (the"
            " default database), sqlstore+postgresql://user:pass@host/db,"
            " sqlstore+mysql://user:pass@host/db or sqlstore+sqlite:///path.db"
        )
    if driver is None:
        raise ConfigurationError(
            f"unsupported database {backend!r} in {redact_url(parsed)!r}: adk-sqlstore runs"
            " on PostgreSQL (postgresql://), MySQL or MariaDB (mysql://, mariadb://) and"
            " SQLite (sqlite:///path)"
        )
    if backend == "sqlite" and parsed.host:
        raise ConfigurationError(
            f"SQLite URL {redact_url(parsed)!r} names a host: write sqlite:///relative.db"
            " (three slashes) or sqlite:////absolute/path.db (four)"
        )
    try:
        port = parsed.port
    except ValueError:
        port = -1
    if port is not None and not 0 < port < 65536:
        raise ConfigurationError(f"database URL {redact_url(parsed)!r} has no valid port (1-65535)")
    return driver


def _why_invalid(url: str) -> str:
    """A one-line reason why SQLAlchemy cannot parse ``url`` (password hidden)."""
    host = url.partition("://")[2].rsplit("@", 1)[-1].split("/", 1)[0].split("?", 1)[0]
    port = host.rpartition(":")[2] if ":" in host and not host.endswith("]") else ""
    if port and not port.isdigit():
        # Not repeated: "user:password/db" (no "@host") reads as host "user", port "password".
        return (
            f"database URL {redact_url(url)!r}: what follows the host's ':' is not a port"
            " number (1-65535); if it is a password, the URL lacks '@host'"
        )
    return (
        f"invalid database URL {redact_url(url)!r}: the form is"
        " postgresql://user:password@host:port/database, with '@' ':' '/' '?' '#' '%' and"
        " spaces in the user name or password percent-encoded"
    )


def resolve_url(url: str | URL | None = None) -> DatabaseTarget:
    """Resolve the database: ``url``, else ``$ADK_SQLSTORE_DATABASE_URL``, else the
    embedded SQLite file (whose folder is created).

    Every spelling of the module docstring is accepted, in ``url`` and in the
    environment variable alike; ``sqlstore://`` (or ``None``) means the environment
    variable, else the embedded file. The query of ``sqlstore://`` applies to whatever
    it resolves to: its ``auto_migrate``, ``language``, ``embedder`` and ``generator``,
    and the rest of it (connection settings, driver parameters) checked and applied as
    in that URL's own query (winning over it).

    Raises:
        ValueError: the URL is invalid or names an unsupported database (the message
            hides the password).
    """
    return _resolve(url, take_options=True)


def _resolve(url: str | URL | None, *, take_options: bool) -> DatabaseTarget:
    """:func:`resolve_url`; without ``take_options`` (``create_engine``), the service
    options of ``url`` itself are left in the query, where they are refused."""
    auto: bool | None = None
    language: str | None = None
    embedder: str | None = None
    generator: str | None = None
    carried: list[str] = []  # the rest of a sqlstore:// query, for what it resolves to
    options = STORE_OPTIONS - {AUTO_MIGRATE_PARAMETER} if take_options else frozenset()
    given = (url, os.environ.get(DATABASE_URL_ENV, "").strip() or None)
    for n, candidate in enumerate(given):
        if take_options or n > 0:  # the environment's options: the service's, not ours
            candidate, given_language = pop_parameter(candidate, "language")
            language = language or given_language  # the argument's choice first
            candidate, given_embedder = pop_parameter(candidate, "embedder")
            embedder = embedder or given_embedder
            candidate, given_generator = pop_parameter(candidate, "generator")
            generator = generator or given_generator
        if isinstance(candidate, str):
            candidate, given_auto = _split_options(candidate)
            auto = given_auto if auto is None else auto
            if _is_service_default(candidate):
                carried = _merged_query(carried, candidate.partition("?")[2])
                continue
            candidate = _with_query(candidate, carried)
        if candidate is not None:
            return DatabaseTarget(
                _normalized(candidate, options=options),
                embedded=False,
                auto_migrate=auto,
                language=language,
                embedder=embedder,
                generator=generator,
            )
    path = default_sqlite_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    return DatabaseTarget(
        _normalized(_with_query(f"sqlite:///{path}", carried), options=options),
        embedded=True,
        auto_migrate=auto,
        language=language,
        embedder=embedder,
        generator=generator,
    )


def _key(pair: str) -> str:
    return unquote(pair.partition("=")[0])


def _merged_query(first: list[str], then: str) -> list[str]:
    """The query pairs ``first``, then those of the query text ``then`` whose names
    ``first`` lacks (``first`` wins)."""
    named = {_key(pair) for pair in first}
    return first + [pair for pair in then.split("&") if pair and _key(pair) not in named]


def _with_query(url: str, pairs: list[str]) -> str:
    """``url`` with the query ``pairs`` (of a ``sqlstore://`` URL) in its query,
    replacing its own parameters of those names."""
    if not pairs:
        return url
    base, _, query = url.partition("?")
    return base + "?" + "&".join(_merged_query(pairs, query))


def split_settings(url: URL) -> tuple[URL, dict[str, Any]]:
    """``url`` without this library's connection settings, and those settings.

    Raises:
        ConfigurationError: a setting's value is not of its kind (naming it, password
            hidden).
    """
    query = dict(url.query)
    settings: dict[str, Any] = {}
    for name in SETTINGS.keys() & query.keys():
        raw = query.pop(name)
        value = raw[-1] if isinstance(raw, tuple) else raw
        try:
            settings[name] = SETTINGS[name](name, value)
        except ConfigurationError as exc:
            raise ConfigurationError(f"database URL {redact_url(url)!r}: {exc}") from None
    check_settings(settings)
    return (url.set(query=query) if settings else url), settings
