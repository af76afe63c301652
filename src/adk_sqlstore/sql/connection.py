"""Statements run on every new connection, and how transactions begin.

SQLite: each new connection gets ``journal_mode=WAL``, ``synchronous=NORMAL`` (durable
across application crashes), ``foreign_keys=ON``, ``secure_delete=ON`` (deleted text is
zeroed, not left in free pages) and a busy timeout; transactions are begun by the
library: ``BEGIN`` for reads (one snapshot per call), ``BEGIN IMMEDIATE`` for writes (a
writer waits for the lock instead of failing when it upgrades a read lock).

MySQL and MariaDB: each new connection gets a strict, fixed ``sql_mode`` (a value too
long for its column is an error, never truncated; no ``NO_BACKSLASH_ESCAPES``, which
the driver's quoting needs off; no ``ANSI_QUOTES`` or ``PIPES_AS_CONCAT``, whatever the
server's default), ``READ COMMITTED`` for writes (InnoDB then takes no gap locks, so
writers of different keys do not deadlock on each other's ranges; the revision guard is
a row lock either way) and the statement timeout when one is set. Reads begin with
``REPEATABLE READ`` and ``WITH CONSISTENT SNAPSHOT, READ ONLY``: every read of a call
sees one snapshot, as on the other backends.
"""

from __future__ import annotations

__all__ = [
    "BEGIN_READ",
    "BEGIN_WRITE",
    "MYSQL_BEGIN_READ",
    "MYSQL_SQL_MODE",
    "SQLITE_MMAP_BYTES",
    "mysql_session",
    "sqlite_pragmas",
]

BEGIN_READ = "BEGIN"
BEGIN_WRITE = "BEGIN IMMEDIATE"


SQLITE_MMAP_BYTES = 1 << 30
"""How much of an SQLite file each connection maps into memory (1 GiB of address
space, not of memory: pages are read into the OS page cache as they are used)."""


def sqlite_pragmas(busy_timeout: float) -> list[str]:
    """The settings of a new SQLite connection; ``busy_timeout`` in seconds."""
    return [
        f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}",
        "PRAGMA journal_mode = WAL",
        "PRAGMA synchronous = NORMAL",
        "PRAGMA foreign_keys = ON",
        "PRAGMA secure_delete = ON",
        # Reads through a memory map (shared by every connection, in the OS page cache)
        # instead of a read() into each connection's 2 MiB page cache: a search of a
        # user with 100,000 memories fetched its rows about 30% faster.
        f"PRAGMA mmap_size = {SQLITE_MMAP_BYTES}",
    ]


MYSQL_SQL_MODE = "STRICT_ALL_TABLES,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION"

MYSQL_BEGIN_READ = (
    "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ",
    "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY",
)
"""How a read transaction begins on MySQL and MariaDB (writes begin implicitly, at
their first statement, in the session's ``READ COMMITTED``)."""


def mysql_session(*, mariadb: bool, statement_timeout_ms: float | None) -> list[str]:
    """The settings of a new MySQL or MariaDB connection (see the module docstring);
    ``statement_timeout_ms``: MariaDB's ``max_statement_time`` (any statement), MySQL's
    ``max_execution_time`` (its SELECTs only, all MySQL has)."""
    settings = [
        f"SET SESSION sql_mode = '{MYSQL_SQL_MODE}'",
        "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",
    ]
    if statement_timeout_ms is not None:
        if mariadb:
            settings.append(f"SET SESSION max_statement_time = {statement_timeout_ms / 1000:.3f}")
        else:
            settings.append(f"SET SESSION max_execution_time = {round(statement_timeout_ms)}")
    return settings
