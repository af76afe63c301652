"""Statements run on every new connection, and how transactions begin.

SQLite: each new connection gets ``journal_mode=WAL``, ``synchronous=NORMAL`` (durable
across application crashes), ``foreign_keys=ON``, ``secure_delete=ON`` (deleted text is
zeroed, not left in free pages) and a busy timeout; transactions are begun by the
library: ``BEGIN`` for reads (one snapshot per call), ``BEGIN IMMEDIATE`` for writes (a
writer waits for the lock instead of failing when it upgrades a read lock).
"""

from __future__ import annotations

__all__ = ["BEGIN_READ", "BEGIN_WRITE", "SQLITE_MMAP_BYTES", "sqlite_pragmas"]

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
