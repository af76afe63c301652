"""The schema revision Alembic recorded, and the lock migrations take."""

from __future__ import annotations

from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection

from ..schema import ALEMBIC_VERSION_TABLE

__all__ = ["MIGRATION_LOCK", "lock_migrations", "read_revision"]

MIGRATION_LOCK = 0x61646B73716C
"""``pg_advisory_xact_lock`` key ("adksql" in ASCII): one migration at a time per
database."""


def read_revision(connection: Connection) -> str | None:
    """The database's Alembic revision, or ``None`` when it was never migrated."""
    if not inspect(connection).has_table(ALEMBIC_VERSION_TABLE):
        return None
    rows = connection.execute(text(f"SELECT version_num FROM {ALEMBIC_VERSION_TABLE}")).all()
    return rows[0][0] if rows else None


def lock_migrations(connection: Connection) -> None:
    """Wait for any other migration of this database, then hold it off until the
    transaction ends (PostgreSQL: an advisory lock; SQLite: the caller's write
    transaction already excludes other writers)."""
    if connection.dialect.name == "postgresql":
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK})
