"""Database URLs as messages show them: passwords hidden (:func:`redact_url`), the
driver this library adds left out (:func:`shown_url`), an SQLite URL as its file
(:func:`describe_url`, :func:`sqlite_path`). :mod:`adk_sqlstore.urls` resolves URLs;
this module only shows them, and never raises."""

from __future__ import annotations

import re
from pathlib import Path

from sqlalchemy.engine import URL, make_url

__all__ = ["describe_url", "redact_url", "shown_url", "sqlite_path"]


# A query value runs to the next "&" (SQLAlchemy keeps "#" and ";" in it); a key may be
# percent-encoded ("pass%77ord").
_SECRET_QUERY = re.compile(
    r"((?:^|[?&;])(?:[^=&?#]*(?:pass|pwd|secret|token|api_key|apikey|%[0-9a-f]{2})[^=&?#]*)=)"
    r"[^&]*",
    re.I,
)
_USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+._\-]*://[^:/?#@]*:)(.*)(@[^@]*)$", re.S)


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
    return f"SQLite file {path}" if path is not None else shown_url(url)


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


def shown_url(url: str | URL) -> str:
    """``url`` as its user writes it, for messages: the password hidden, and what this
    library adds when it picks the asyncio driver left out (``+asyncpg``, ``+asyncmy``,
    ``+aiosqlite``, MySQL's ``charset=utf8mb4``); ``sqlite:///relative.db`` stays
    relative. Never raises."""
    if isinstance(url, str):
        try:
            url = make_url(url)
        except Exception:
            return redact_url(url)
    driver = url.drivername.partition("+")[2]
    if driver in ("asyncpg", "asyncmy", "aiosqlite"):
        url = url.set(drivername=url.get_backend_name())
    if url.get_backend_name() == "mysql" and url.query.get("charset") == "utf8mb4":
        url = url.difference_update_query(["charset"])
    return redact_url(url)
