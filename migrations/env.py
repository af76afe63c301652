"""Alembic environment for adk-sqlstore (asyncio engine, via ``run_sync``).

The database comes from, in order: a connection handed over by adk-sqlstore itself
(``config.attributes["connection"]``), ``alembic -x url=...``, the
``ADK_SQLSTORE_DATABASE_URL`` environment variable, the embedded SQLite file.
"""

from __future__ import annotations

import asyncio
import logging.config

from alembic import context
from sqlalchemy import pool
from sqlalchemy.engine import Connection

from adk_sqlstore.engine import WRITE_OPTION, create_engine
from adk_sqlstore.schema import ALEMBIC_VERSION_TABLE, include_object, metadata
from adk_sqlstore.sql.schema_version import lock_migrations, unlock_migrations
from adk_sqlstore.urls import resolve_url

config = context.config
if config.config_file_name is not None and config.attributes.get("configure_logging", True):
    logging.config.fileConfig(config.config_file_name, disable_existing_loggers=False)


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        version_table=ALEMBIC_VERSION_TABLE,
        render_as_batch=True,
        compare_type=True,
        include_object=include_object,  # this library's tables only (see its docstring)
        transaction_per_migration=False,
    )


def _run(connection: Connection) -> None:
    _configure(connection)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_offline() -> None:
    target = resolve_url(context.get_x_argument(as_dictionary=True).get("url"))
    context.configure(
        url=target.url,
        target_metadata=metadata,
        version_table=ALEMBIC_VERSION_TABLE,
        render_as_batch=True,
        literal_binds=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    target = resolve_url(context.get_x_argument(as_dictionary=True).get("url"))

    async def run() -> None:
        engine = create_engine(target.url, poolclass=pool.NullPool)
        try:
            async with engine.connect() as conn:
                conn = await conn.execution_options(**{WRITE_OPTION: True})
                await conn.run_sync(lock_migrations)  # one migration at a time
                try:
                    await conn.run_sync(_run)
                    await conn.commit()
                finally:
                    await conn.run_sync(unlock_migrations)
        finally:
            await engine.dispose()

    asyncio.run(run())


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
