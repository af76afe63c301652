"""Connection settings: the names a database URL's query (``?pool_size=5``) and the
keyword arguments of ``from_url`` take (keywords win), their defaults, and how each
value is checked and converted (a URL gives text; keywords give numbers or text alike):

- ``pool_size`` (default 5), ``max_overflow`` (default 0): connections kept open,
  and opened beyond them under load, per process and event loop. The defaults
  suit a server shared by many workers: 5 connections kept busy did as much as 10,
  20 or 40 for 50 concurrent tasks on a 2-vCPU client, and overflow connections,
  opened and closed per use, only cost (``python -m benchmarks.pool_sizes``:
  500 cycles/s at 5+0, 534 at 10+0, 331 at 20+20); a burst waits for a free
  connection instead, up to ``pool_timeout``;
- ``connect_timeout`` (PostgreSQL, MySQL; seconds, default 10): to connect to one host;
  each host of a several-hosts URL gets that long, so that a failover reaches the
  promoted standby even when the old primary hangs rather than refuses;
- ``pool_timeout`` (seconds, default 30): how long a call waits for a connection
  when all are in use, then fails with
  :class:`~adk_sqlstore.errors.PoolTimeoutError`;
- ``pool_recycle`` (seconds, default never; MySQL and MariaDB 3,600): replace
  connections older than this;
- ``pool_pre_ping`` (default false): test each connection before use (a closed
  socket is always detected without it);
- ``statement_timeout`` (``30s``, ``500ms`` or milliseconds): the server cancels
  longer statements (PostgreSQL and MariaDB: any statement; MySQL: its reads,
  ``max_execution_time``), and the call fails with
  :class:`~adk_sqlstore.errors.DatabaseUnavailableError`; ``command_timeout``
  (seconds): the client gives up waiting for one. Without it, a call on a
  connection to a server that stopped answering (not one that closed it) waits for
  the kernel's TCP timeout: set it where servers can hang or be cut off;
- ``search_path`` (PostgreSQL): the schema(s) the tables live in, e.g. ``agents``;
- ``pgbouncer=true``: behind a pooler in transaction mode (PgBouncer, Supabase's,
  many managed offerings): statements are prepared unnamed, never reused or left
  on a server connection, and every statement runs inside a transaction. Session
  settings (``search_path``, ``statement_timeout``) do not pass through such a
  pooler: set them on the role (``ALTER ROLE ... SET``);
- ``sqlite_busy_timeout`` (seconds, default 30): how long an SQLite writer waits
  for the lock.


:func:`adk_sqlstore.engine.create_engine` applies them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from .errors import ConfigurationError

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_MAX_OVERFLOW",
    "DEFAULT_MYSQL_POOL_RECYCLE",
    "DEFAULT_POOL_SIZE",
    "DEFAULT_SQLITE_BUSY_TIMEOUT",
    "FALSE_WORDS",
    "SETTINGS",
    "TRUE_WORDS",
    "check_settings",
    "convert_settings",
    "milliseconds",
]

TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")

DEFAULT_SQLITE_BUSY_TIMEOUT = 30.0  # seconds


def _seconds(name: str, value: object) -> float:
    """A positive, finite number of seconds: a number, or its text in a URL."""
    try:
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise TypeError
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number) or number <= 0:
        raise ConfigurationError(f"{name} must be a positive number of seconds, not {value!r}")
    return number


def _count(name: str, value: object, least: int) -> int:
    """A whole number of at least ``least``: an int, or its digits in a URL."""
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and value.strip().isdigit():
        number = int(value)
    if number is None or number < least:
        raise ConfigurationError(
            f"{name} must be a whole number of at least {least}, not {value!r}"
        )
    return number


def _flag(name: str, value: object) -> bool:
    """True or false: a bool, or one of true/false, yes/no, on/off, 1/0 in a URL."""
    if isinstance(value, bool):
        return value
    text = value.lower() if isinstance(value, str) else None
    if text in TRUE_WORDS:
        return True
    if text in FALSE_WORDS:
        return False
    raise ConfigurationError(f"{name} must be true or false, not {value!r}")


_MAX_MILLISECONDS = 2_147_483_647  # PostgreSQL's limit for a time setting
_UNITS_MS = {"ms": 1.0, "s": 1e3, "min": 6e4, "h": 3.6e6, "d": 8.64e7, None: 1.0}


def _duration(name: str, value: object) -> str:
    """A PostgreSQL duration: milliseconds as a number, or text such as ``30s``,
    ``1.5s``, ``500ms``, ``2min`` (PostgreSQL's own units)."""
    text = str(value).strip() if isinstance(value, int | float | str) else ""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(ms|s|min|h|d)?", text)
    if isinstance(value, bool) or match is None:
        raise ConfigurationError(
            f"{name} must be milliseconds or a duration such as 30s, not {value!r}"
        )
    milliseconds = float(match[1]) * _UNITS_MS[match[2]]
    if not 0 <= milliseconds <= _MAX_MILLISECONDS:
        raise ConfigurationError(f"{name} {value!r} is longer than PostgreSQL takes (24 days)")
    return text


def milliseconds(duration: str) -> float:
    """The milliseconds of a duration checked by the ``statement_timeout`` setting
    (``30s``, ``500ms``, ``1500``)."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(ms|s|min|h|d)?", duration.strip())
    if match is None:
        raise ConfigurationError(f"not a duration: {duration!r}")
    return float(match[1]) * _UNITS_MS[match[2]]


def _words(name: str, value: object) -> str:
    """Non-empty text (a schema name, or several separated by commas)."""
    if not isinstance(value, str) or not value.strip():
        raise ConfigurationError(f"{name} must be a schema name, not {value!r}")
    return value.strip()


SETTINGS: dict[str, Callable[[str, object], Any]] = {
    "pool_size": lambda n, v: _count(n, v, 1),
    "max_overflow": lambda n, v: _count(n, v, 0),
    "pool_timeout": _seconds,
    "pool_recycle": _seconds,
    "pool_pre_ping": _flag,
    "statement_timeout": _duration,
    "command_timeout": _seconds,
    "connect_timeout": _seconds,
    "search_path": _words,
    "pgbouncer": _flag,
    "sqlite_busy_timeout": _seconds,
}
"""Connection settings taken as URL query parameters (``?pool_size=5``) and as keyword
arguments of ``create_engine``/``from_url`` (which win), converted by these functions.
See :func:`create_engine` for what each does."""

DEFAULT_POOL_SIZE = 5  # measured: see engine.create_engine and benchmarks/pool_sizes.py
DEFAULT_MAX_OVERFLOW = 0
DEFAULT_MYSQL_POOL_RECYCLE = 3600.0
"""Seconds after which a pooled MySQL or MariaDB connection is replaced unless
``pool_recycle`` says otherwise: the server closes connections idle for
``wait_timeout`` (8 hours by default, often minutes on managed servers), and a call on
such a connection would fail."""
DEFAULT_CONNECT_TIMEOUT = 10.0
"""Seconds to connect to one PostgreSQL host (each host of a several-hosts URL gets
this long, so that an unresponsive primary does not use up the time of the next)."""


_SESSION_SETTINGS = ("search_path", "statement_timeout")


def convert_settings(given: dict[str, Any]) -> dict[str, Any]:
    """Connection settings given as keyword arguments, checked and converted as in a
    URL (the same names: :data:`SETTINGS`).

    Raises:
        ConfigurationError: naming the setting.
    """
    settings = {name: SETTINGS[name](name, value) for name, value in given.items()}
    check_settings(settings)
    return settings


def check_settings(settings: dict[str, Any]) -> None:
    """Refuse settings that cannot go together.

    Raises:
        ConfigurationError: a session setting behind a transaction pooler, which would
            pass it on to no server connection.
    """
    if settings.get("pgbouncer"):
        for name in _SESSION_SETTINGS:
            if name in settings:
                raise ConfigurationError(
                    f"{name} does not pass through a connection pooler in transaction mode"
                    f" (pgbouncer=true): set it on the database role instead (ALTER ROLE"
                    f" ... SET {name} = ...)"
                )
