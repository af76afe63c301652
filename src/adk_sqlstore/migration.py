"""Running and checking the Alembic migrations from inside the library.

The migration scripts live in ``migrations/`` at the top of a source checkout and are
shipped inside the wheel as ``adk_sqlstore/migrations``, so an installed package can
migrate a database (``adk-sqlstore migrate``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from .engine import WRITE_OPTION, engine_for_loop, given_url
from .errors import MigrationError, SchemaNotMigratedError
from .failures import driver_error
from .sql.distribution import distribute, layout
from .sql.schema_version import (
    MIGRATION_LOCK,
    lock_migrations,
    read_revision,
    unlock_migrations,
)
from .url_display import shown_url

__all__ = [
    "HEAD_REVISION",
    "MIGRATION_LOCK",
    "REVISIONS",
    "check_schema",
    "check_schema_at_startup",
    "citus_layout",
    "current_revision",
    "downgrade",
    "migrations_path",
    "upgrade",
]

REVISIONS = (
    *("0001", "0002", "0003", "0004", "0005", "0006", "0007", "0008", "0009", "0010"),
    *("0011", "0012", "0013"),
)
"""Every Alembic revision this version of the library knows, oldest first."""

HEAD_REVISION = REVISIONS[-1]
"""The Alembic revision this version of the library reads and writes."""


def migrations_path() -> Path:
    """The folder holding ``env.py`` and ``versions/``.

    Inside an installed wheel it is ``adk_sqlstore/migrations``; in a source checkout
    (or an editable install) it is ``migrations/`` at the repository root.
    """
    packaged = Path(__file__).resolve().parent / "migrations"
    if (packaged / "env.py").is_file():
        return packaged
    checkout = Path(__file__).resolve().parents[2] / "migrations"
    if (checkout / "env.py").is_file():
        return checkout
    raise FileNotFoundError("adk-sqlstore's migration scripts are missing from this install")


@contextmanager
def _quiet_alembic() -> Iterator[None]:
    """Alembic's INFO lines ("Context impl ...", "setup plugin ...") kept out of the
    application's log while the library migrates: they say nothing to its users; so
    are the notes MySQL and MariaDB send on DDL (asyncmy logs them as warnings: "Name
    'pk_...' ignored for PRIMARY key", InnoDB's key has no name of its own)."""
    quieted = {"alembic": logging.WARNING, "asyncmy": logging.ERROR}
    levels = {name: logging.getLogger(name).level for name in quieted}
    for name, quiet in quieted.items():
        if levels[name] == logging.NOTSET:  # a level the application chose is left alone
            logging.getLogger(name).setLevel(quiet)
    try:
        yield
    finally:
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)


def _alembic_config(connection: Connection) -> Any:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(migrations_path()))
    config.attributes["connection"] = connection
    config.attributes["configure_logging"] = False
    return config


async def current_revision(engine: AsyncEngine) -> str | None:
    """The database's Alembic revision, or ``None`` when it was never migrated."""
    async with engine.connect() as conn:
        return await conn.run_sync(read_revision)


def _run_alembic(sync: Connection, operation: str, revision: str) -> str | None:
    from alembic import command
    from alembic.util import CommandError

    # Processes that start together wait for the first one's migration, then find the
    # database at head; without the lock they race on CREATE TABLE.
    lock_migrations(sync)
    current = read_revision(sync)
    if current is not None and current not in REVISIONS:
        raise _newer_database(sync, current)
    try:
        with _quiet_alembic():
            getattr(command, operation)(_alembic_config(sync), revision)
    except CommandError as exc:
        raise MigrationError(f"cannot {operation} to {revision!r}: {exc}") from exc
    return current


def _distribute(sync: Connection) -> None:
    """On Citus: every table distributed, a later migration's included, after the
    migration committed (in steps of their own: :func:`~.sql.distribution.distribute`)."""
    distribute(sync)


def _newer_database(sync: Connection, current: str) -> SchemaNotMigratedError:
    return SchemaNotMigratedError(
        f"the database {shown_url(sync.engine.url)} is at schema revision {current!r}, newer"
        f" than this version of adk-sqlstore knows (it needs {HEAD_REVISION!r}): upgrade the"
        " adk-sqlstore package",
        current_revision=current,
        head_revision=HEAD_REVISION,
    )


async def upgrade(engine: AsyncEngine, revision: str = "head") -> str | None:
    """Upgrade the database to ``revision`` (default: the newest) in one transaction.

    Concurrent upgrades of one database wait for each other (PostgreSQL: an advisory
    lock; SQLite: the write lock; MySQL and MariaDB: a named lock, and there each DDL
    statement commits by itself); each but the first then finds nothing to do.

    Returns:
        The revision the database was at when this upgrade got the lock (``None``:
        empty), so that of several processes migrating at once only the one that did
        the work reports it.

    Raises:
        SchemaNotMigratedError: the database is newer than this library.
        MigrationError: the migration cannot run here (e.g. SQLite without FTS5).
        sqlalchemy.exc.DBAPIError, OSError: the database cannot be reached.
    """
    return await _migrate(engine, "upgrade", revision)


async def _migrate(engine: AsyncEngine, operation: str, revision: str) -> str | None:
    """Run Alembic's ``operation`` to ``revision`` in one transaction, under the
    migration lock (released after the commit where it outlives transactions)."""
    async with engine.connect() as conn:
        conn = await conn.execution_options(**{WRITE_OPTION: True})
        try:
            before = await conn.run_sync(_run_alembic, operation, revision)
            await conn.commit()
            if operation == "upgrade" and conn.dialect.name == "postgresql":
                await conn.run_sync(_distribute)
                await conn.commit()
        finally:
            with contextlib.suppress(Exception):  # the failure itself is what to raise
                await conn.run_sync(unlock_migrations)
    return before


async def citus_layout(engine: AsyncEngine) -> tuple[dict[str, str], int] | None:
    """How the store's tables lie on a Citus cluster: each table Citus knows, by name
    (``"distributed"`` by ``user_id``, or ``"reference"``: a copy on every node), and
    the number of active worker nodes; ``None`` where the database has no Citus (see
    :mod:`adk_sqlstore.sql.citus`, which :func:`upgrade` runs)."""
    async with engine.connect() as conn:
        return await conn.run_sync(layout)


async def downgrade(engine: AsyncEngine, revision: str) -> None:
    """Downgrade the database to ``revision`` (``"base"`` removes every table)."""
    await _migrate(engine, "downgrade", revision)


async def check_schema(engine: AsyncEngine) -> None:
    """Raise :class:`SchemaNotMigratedError` unless the database is at :data:`HEAD_REVISION`.

    The message says what to do: run ``adk-sqlstore migrate`` (with this database's
    URL), or upgrade adk-sqlstore when the database is newer than it.
    """
    current = await current_revision(engine)
    if current == HEAD_REVISION:
        return
    url = given_url(engine)
    plain = shown_url(url)
    if current is not None and current not in REVISIONS:
        async with engine.connect() as conn:
            raise await conn.run_sync(_newer_database, current)
    if current is None:
        what = "has no adk-sqlstore tables"
    else:
        what = (
            f"is at schema revision {current!r}, this version of adk-sqlstore needs"
            f" {HEAD_REVISION!r}"
        )
    raise SchemaNotMigratedError(
        f"the database {plain} {what}: run `adk-sqlstore migrate --url '{plain}'`"
        f"{' (with the password)' if engine.url.password else ''}; in development,"
        " ?auto_migrate=true on the URL (or auto_migrate=True) lets the service migrate it"
        " on first use",
        current_revision=current,
        head_revision=HEAD_REVISION,
    )


def check_schema_at_startup(engine: AsyncEngine) -> None:
    """:func:`check_schema` from synchronous code (a server building its services), on
    ``engine`` (its settings, such as ``search_path``, included) from a worker thread
    with an event loop of its own (whose connections close when it ends).

    Raises:
        SchemaNotMigratedError: the database is not at :data:`HEAD_REVISION`. A database
            that cannot be reached now is not an error here: the first call reports it.
    """

    async def check() -> None:
        target = engine_for_loop(engine)
        try:
            await check_schema(target)
        except SchemaNotMigratedError:
            raise
        except Exception as exc:
            if driver_error(target, exc) is None:
                raise

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, check()).result()
