"""The query parameters a database URL takes, checked before any connection (a
parameter a driver does not take would fail later, at connect, with a ``TypeError``,
or be ignored): this library's own (the connection settings of
:data:`adk_sqlstore.settings.SETTINGS` that apply to the backend, and the service
options of :data:`STORE_OPTIONS`) and its driver's: asyncpg's (libpq's ``sslmode``
spelled as asyncpg's ``ssl``), asyncmy's (``charset`` always ``utf8mb4``) and
sqlite3's. A parameter none of them takes is refused, naming every parameter the URL
takes and the one most like it. Messages show the URL as the caller gives it
(``shown``: its password hidden)."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from sqlalchemy.engine import URL

from .errors import ConfigurationError
from .settings import SETTINGS
from .suggestions import closest

__all__ = ["STORE_OPTIONS", "asyncmy_query", "asyncpg_query", "sqlite_query"]

STORE_OPTIONS = frozenset({"auto_migrate", "embedder", "generator", "language"})
"""The service options a URL may carry beside the connection settings, read by
:func:`adk_sqlstore.urls.resolve_url` (``from_url``, the command line's ``--url``,
``$ADK_SQLSTORE_DATABASE_URL`` and ADK's service URIs), not by ``create_engine``."""

_SETTINGS_OF = {
    "PostgreSQL": frozenset(SETTINGS) - {"sqlite_busy_timeout"},
    "MySQL and MariaDB": frozenset(SETTINGS) - {"sqlite_busy_timeout", "pgbouncer", "search_path"},
    "SQLite": frozenset(SETTINGS)
    - {"command_timeout", "connect_timeout", "pgbouncer", "search_path", "statement_timeout"},
}
"""The connection settings each backend applies (:mod:`adk_sqlstore.drivers`); the
others would do nothing there, so its URLs refuse them."""


def _refuse_unknown(
    query: Collection[str],
    shown: str,
    *,
    backend: str,
    drivers: Mapping[str, Collection[str]],
    options: Collection[str],
    meant: Mapping[str, str],
) -> None:
    """Raise :class:`ConfigurationError` if ``query`` names a parameter neither this
    library (the settings of ``backend``, and ``options``) nor the driver takes
    (``drivers``: the driver's parameters, headed by its name, then any further group
    it takes, headed as the message shows it); ``meant``: what names that mean
    something taken here (``timeout``) are answered with, before the closest name
    (:func:`_did_you_mean`'s words, or a sentence of their own)."""
    own = _SETTINGS_OF[backend] | set(options)
    theirs = {name for names in drivers.values() for name in names}
    unknown = sorted(set(query) - own - theirs)
    if not unknown:
        return
    named = [_why(name, own | theirs, meant) for name in unknown]
    driver = next(iter(drivers)).removesuffix("'s")
    taken = [f"adk-sqlstore's: {', '.join(sorted(own))}"]
    taken += [f"{label}: {', '.join(sorted(names))}" for label, names in drivers.items()]
    raise ConfigurationError(
        f"database URL {shown!r}: adk-sqlstore and its {backend.split()[0]} driver ({driver})"
        f" do not take {', '.join(named)}; they take {'; '.join(taken)}"
    )


def _did_you_mean(name: str) -> str:
    return f"did you mean `{name}`?"


_MODEL_MEANT = "did you mean `embedder` (hybrid search) or `generator` (memory generation)?"
"""The answer to ``model``, which names neither option (the command line's ``--model``
named both, by command)."""


def _why(name: str, taken: Collection[str], meant: Mapping[str, str]) -> str:
    """``name``, refused, with a word on why: the backends whose setting it is, that
    only ``from_url`` takes it, or the taken name it most likely means (whatever the
    case of its letters)."""
    backends = [backend for backend, names in _SETTINGS_OF.items() if name in names]
    if backends:
        return f"{name} (a setting of {', '.join(backends)} only)"
    if name in STORE_OPTIONS:
        return f"{name} (an option of from_url and --url, not of create_engine)"
    if name.lower() in meant:
        return f"{name} ({meant[name.lower()]})"
    if name.lower() == "model" and {"embedder", "generator"} <= set(taken):
        return f"{name} ({_MODEL_MEANT})"
    near = closest(name, taken)
    return f"{name} ({_did_you_mean(near)})" if near else name


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


_ASYNCPG_VALUES = {
    # asyncpg takes True for ssl, but a URL gives text, which must name a mode.
    "ssl": {"disable", "allow", "prefer", "require", "verify-ca", "verify-full"},
    "target_session_attrs": {
        "any",
        "primary",
        "standby",
        "prefer-standby",
        "read-write",
        "read-only",
    },
}


def asyncpg_query(url: URL, shown: str, options: Collection[str] = ()) -> URL:
    """The URL's query as asyncpg takes it: libpq's ``sslmode`` becomes ``ssl`` (same
    values: disable, allow, prefer, require, verify-ca, verify-full).

    Args:
        url: a PostgreSQL URL.
        shown: the URL for messages (password hidden).
        options: the service options (:data:`STORE_OPTIONS`) the caller takes out of
            the query itself: named as taken in the message, not checked here.

    Raises:
        ConfigurationError: (a ``ValueError``) a parameter neither asyncpg nor this
            library takes on PostgreSQL (SQLite's ``sqlite_busy_timeout`` too), or a
            value asyncpg would refuse at connect.
    """
    query = dict(url.query)
    if "sslmode" in query:
        query.setdefault("ssl", query.pop("sslmode"))
        query.pop("sslmode", None)
    for name, allowed in _ASYNCPG_VALUES.items():
        if name in query and str(query[name]).lower() not in allowed:
            raise ConfigurationError(
                f"database URL {shown!r}: {name} must be one of"
                f" {', '.join(sorted(allowed))}, not {query[name]!r}"
            )
    _refuse_unknown(
        query,
        shown,
        backend="PostgreSQL",
        drivers={"asyncpg's": _ASYNCPG_QUERY | {"sslmode"}},
        options=options,
        meant={"timeout": _did_you_mean("connect_timeout")},
    )
    return url.set(query=query) if query != dict(url.query) else url


_ASYNCMY_QUERY = {
    "charset",
    "unix_socket",
    "ssl_ca",
    "ssl_cert",
    "ssl_key",
    "ssl_check_hostname",
    "local_infile",
}


def asyncmy_query(url: URL, shown: str, options: Collection[str] = ()) -> URL:
    """The URL's query as asyncmy takes it, ``charset=utf8mb4`` set: every text column
    is utf8mb4 (four-byte characters, emoji, included), and another connection charset
    would garble them.

    Args:
        url: a MySQL or MariaDB URL.
        shown: the URL for messages (password hidden).
        options: as for :func:`asyncpg_query`.

    Raises:
        ConfigurationError: (a ``ValueError``) a parameter neither asyncmy nor this
            library takes on MySQL (``pgbouncer``, ``search_path`` and
            ``sqlite_busy_timeout`` too), or another charset.
    """
    query = dict(url.query)
    charset = str(query.get("charset", "utf8mb4")).lower()
    if charset != "utf8mb4":
        raise ConfigurationError(
            f"database URL {shown!r}: charset must be utf8mb4 (the store's"
            f" text is utf8mb4 throughout), not {query['charset']!r}"
        )
    query["charset"] = "utf8mb4"
    _refuse_unknown(
        query,
        shown,
        backend="MySQL and MariaDB",
        drivers={"asyncmy's": _ASYNCMY_QUERY},
        options=options,
        meant={"timeout": _did_you_mean("connect_timeout")},
    )
    return url.set(query=query)


_SQLITE_QUERY = {"uri", "detect_types", "check_same_thread", "cached_statements"}
"""What SQLAlchemy passes on to sqlite3 from the query; not ``timeout`` (the store
sets the busy timeout itself: ``sqlite_busy_timeout``) nor ``isolation_level`` (it
begins its own transactions), which would do nothing."""
_SQLITE_URI_QUERY = {"mode", "cache", "immutable", "nolock", "psow", "vfs"}
"""SQLite's URI parameters: taken with ``uri=true`` and a ``file:`` path only (SQLite
reads any other path as a plain file name, ``?`` and all)."""
_TRUE = ("true", "yes", "on", "y", "t", "1")  # as SQLAlchemy reads uri=


def sqlite_query(url: URL, shown: str, options: Collection[str] = ()) -> URL:
    """The URL's query as SQLAlchemy's SQLite driver takes it (where SQLAlchemy would
    only warn about a parameter it does not take, and ignore it); with ``uri=true``
    (and a ``file:`` path: ``sqlite:///file:x.db?uri=true&mode=ro``), SQLite's own
    URI parameters (``mode``, ``cache``, ...) are taken too.

    Args:
        url: an SQLite URL.
        shown: the URL for messages (password hidden).
        options: as for :func:`asyncpg_query`.

    Raises:
        ConfigurationError: (a ``ValueError``) a parameter neither sqlite3 nor this
            library takes on SQLite (the server backends' settings too), or
            ``uri=true`` with a path that is not a ``file:`` URI (SQLite would open a
            file named after the whole URI, query included).
    """
    drivers = {"sqlite3's": _SQLITE_QUERY}
    meant = {
        "timeout": _did_you_mean("sqlite_busy_timeout"),
        "busy_timeout": _did_you_mean("sqlite_busy_timeout"),
    }
    database = url.database or ""
    uri = str(url.query.get("uri", "")).strip().lower() in _TRUE
    if uri and database not in ("", ":memory:") and not database.startswith("file:"):
        raise ConfigurationError(
            f"database URL {shown!r}: with uri=true, SQLite reads the path as a URI only"
            f" when it starts with file: (any other is a file name, query and all):"
            f" write {_uri_form(url)}"
        )
    if uri:
        drivers["with uri=true, SQLite's"] = _SQLITE_URI_QUERY
    else:
        answer = f"SQLite's URI parameters need uri=true and a file: path: {_uri_form(url)}"
        meant.update(dict.fromkeys(_SQLITE_URI_QUERY, answer))
    _refuse_unknown(
        url.query, shown, backend="SQLite", drivers=drivers, options=options, meant=meant
    )
    return url


def _uri_form(url: URL) -> str:
    """``url`` as SQLite's URI parameters need it: ``sqlite:///file:PATH?uri=true&...``
    (its SQLite URI parameters, or ``mode=ro`` for want of any)."""
    path = url.database or "x.db"
    path = path if path.startswith("file:") else f"file:{path}"
    given = [f"{k}={v}" for k, v in url.query.items() if k in _SQLITE_URI_QUERY]
    return f"sqlite:///{path}?" + "&".join(["uri=true", *(given or ["mode=ro"])])
