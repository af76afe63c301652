"""The query parameters each driver takes in a database URL, checked before any
connection (a parameter a driver does not take would fail later, at connect, with a
``TypeError``): asyncpg's (libpq's ``sslmode`` spelled as asyncpg's ``ssl``) and
asyncmy's (``charset`` always ``utf8mb4``). This library's own settings
(:data:`adk_sqlstore.settings.SETTINGS`) are taken beside them. Messages show the URL
as the caller gives it (``shown``: its password hidden)."""

from __future__ import annotations

from sqlalchemy.engine import URL

from .errors import ConfigurationError
from .settings import SETTINGS

__all__ = ["asyncmy_query", "asyncpg_query", "sqlite_query"]


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
    "ssl": {"disable", "allow", "prefer", "require", "verify-ca", "verify-full", "true", "false"},
    "target_session_attrs": {
        "any",
        "primary",
        "standby",
        "prefer-standby",
        "read-write",
        "read-only",
    },
}


def asyncpg_query(url: URL, shown: str) -> URL:
    """The URL's query as asyncpg takes it: libpq's ``sslmode`` becomes ``ssl`` (same
    values: disable, allow, prefer, require, verify-ca, verify-full); parameters
    asyncpg does not take raise ``ValueError`` here, not a ``TypeError`` at connect."""
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
    unknown = sorted(set(query) - _ASYNCPG_QUERY - set(SETTINGS))
    if unknown:
        taken = sorted(_ASYNCPG_QUERY | {"sslmode"} | set(SETTINGS) - {"sqlite_busy_timeout"})
        raise ConfigurationError(
            f"database URL {shown!r}: adk-sqlstore and its PostgreSQL driver"
            f" (asyncpg) do not take {', '.join(unknown)}; they take {', '.join(taken)}"
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


def asyncmy_query(url: URL, shown: str) -> URL:
    """The URL's query as asyncmy takes it, ``charset=utf8mb4`` set: every text column
    is utf8mb4 (four-byte characters, emoji, included), and another connection charset
    would garble them. Parameters asyncmy does not take, or another charset, raise
    ``ValueError`` here, not a ``TypeError`` at connect."""
    query = dict(url.query)
    charset = str(query.get("charset", "utf8mb4")).lower()
    if charset != "utf8mb4":
        raise ConfigurationError(
            f"database URL {shown!r}: charset must be utf8mb4 (the store's"
            f" text is utf8mb4 throughout), not {query['charset']!r}"
        )
    query["charset"] = "utf8mb4"
    taken = _ASYNCMY_QUERY | set(SETTINGS) - {"sqlite_busy_timeout", "pgbouncer", "search_path"}
    unknown = sorted(set(query) - taken)
    if unknown:
        raise ConfigurationError(
            f"database URL {shown!r}: adk-sqlstore and its MySQL driver (asyncmy)"
            f" do not take {', '.join(unknown)}; they take {', '.join(sorted(taken))}"
        )
    return url.set(query=query)


_SQLITE_QUERY = {"uri", "timeout", "isolation_level", "detect_types", "check_same_thread"}
_SQLITE_URI_QUERY = {"mode", "cache", "immutable", "nolock", "psow", "vfs"}


def sqlite_query(url: URL, shown: str) -> URL:
    """The URL's query as SQLAlchemy's SQLite driver takes it: parameters it does not
    take (a misspelt setting, say) raise ``ValueError`` here, where SQLAlchemy would only
    warn and ignore them; with ``uri=true``, SQLite's own URI parameters (``mode``,
    ``cache``, ...) are taken too."""
    query = dict(url.query)
    taken = _SQLITE_QUERY | set(SETTINGS)
    if str(query.get("uri", "")).lower() in ("true", "1"):
        taken |= _SQLITE_URI_QUERY
    unknown = sorted(set(query) - taken)
    if unknown:
        raise ConfigurationError(
            f"database URL {shown!r}: adk-sqlstore and its SQLite driver do not take"
            f" {', '.join(unknown)}; they take {', '.join(sorted(taken))}"
        )
    return url
