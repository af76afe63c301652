"""Statements run on every new connection, and how transactions begin.

SQLite: each new connection gets ``journal_mode=WAL``, ``synchronous=NORMAL`` (durable
across application crashes), ``foreign_keys=ON``, ``secure_delete=ON`` (deleted text is
zeroed, not left in free pages) and a busy timeout; transactions are begun by the
library: ``BEGIN`` for reads (one snapshot per call), ``BEGIN IMMEDIATE`` for writes (a
writer waits for the lock instead of failing when it upgrades a read lock).
"""

from __future__ import annotations

__all__ = ["BEGIN_READ", "BEGIN_WRITE", "sqlite_pragmas"]

BEGIN_READ = "BEGIN"
BEGIN_WRITE = "BEGIN IMMEDIATE"


def sqlite_pragmas(busy_timeout: float) -> list[str]:
    """The settings of a new SQLite connection; ``busy_timeout`` in seconds."""
    return [
        f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}",
        "PRAGMA journal_mode = WAL",
        "PRAGMA synchronous = NORMAL",
        "PRAGMA foreign_keys = ON",
        "PRAGMA secure_delete = ON",
    ]
