"""The schema revision Alembic recorded, and the lock migrations take."""

from __future__ import annotations

from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection

from ..schema import ALEMBIC_VERSION_TABLE

__all__ = ["MIGRATION_LOCK", "lock_migrations", "read_revision", "unlock_migrations"]

MIGRATION_LOCK = 0x61646B73716C
"""``pg_advisory_xact_lock`` key ("adksql" in ASCII): one migration at a time per
database."""


def read_revision(connection: Connection) -> str | None:
    """The database's Alembic revision, or ``None`` when it was never migrated."""
    if not inspect(connection).has_table(ALEMBIC_VERSION_TABLE):
        return None
    rows = connection.execute(text(f"SELECT version_num FROM {ALEMBIC_VERSION_TABLE}")).all()
    return rows[0][0] if rows else None


_MYSQL_LOCK_WAIT = 3600  # seconds: a migration of a big database may take long


def _mysql_lock_name(connection: Connection) -> str:
    """The named lock of this database's migrations (MySQL names are per server)."""
    return f"adk_sqlstore_migration.{connection.engine.url.database or ''}"[:64]


def lock_migrations(connection: Connection) -> None:
    """Wait for any other migration of this database, then hold it off until the
    transaction ends (PostgreSQL: an advisory lock; SQLite: the caller's write
    transaction already excludes other writers), or on MySQL and MariaDB until
    :func:`unlock_migrations` (a named lock, ``GET_LOCK``: DDL commits there, and
    the lock belongs to the connection).

    Raises:
        TimeoutError: MySQL: another migration held the lock for an hour.
    """
    if connection.dialect.name == "postgresql":
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK})
    elif connection.dialect.name == "mysql":
        got = connection.execute(
            text("SELECT GET_LOCK(:name, :wait)"),
            {"name": _mysql_lock_name(connection), "wait": _MYSQL_LOCK_WAIT},
        ).scalar()
        if got != 1:
            raise TimeoutError("another migration of this database held its lock for an hour")


def unlock_migrations(connection: Connection) -> None:
    """Let the next migration of this database run (MySQL and MariaDB; elsewhere the
    lock ended with the transaction)."""
    if connection.dialect.name == "mysql":
        connection.execute(text("DO RELEASE_LOCK(:name)"), {"name": _mysql_lock_name(connection)})
