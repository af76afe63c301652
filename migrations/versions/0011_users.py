"""The user lock: one row per user of an app, ``sqlstore_users``.

Every transaction that writes a user's rows locks the user's row first, in the mode of
what it writes (``adk_sqlstore.sql.users``; the order of every lock after it is in
``docs/architecture.md``, "Locks"): writers of sessions and state share it, writers of
memories and artifacts take it in turn, ``forget_user`` takes it alone and deletes it
with the rest. Writers that may give a user their first row make it when it is absent;
this revision makes it for every user the store already holds anything for.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-03
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.mysql import VARBINARY

revision: str = "0011"
down_revision: str | Sequence[str] | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Every table holding a user's rows before this revision.
_HOLDING_USERS = (
    "sqlstore_sessions",
    "sqlstore_user_state",
    "sqlstore_memories",
    "sqlstore_memory_ingestions",
    "sqlstore_memory_stats",
    "sqlstore_artifacts",
    "sqlstore_artifact_contents",
    "sqlstore_artifact_chunks",
)


def _options() -> dict[str, str]:
    """MySQL's table options (as migration 0009's); none elsewhere."""
    dialect: Any = op.get_context().dialect
    if dialect.name != "mysql":
        return {}
    mariadb = bool(getattr(dialect, "is_mariadb", False))
    return {
        "mysql_engine": "InnoDB",
        "mysql_charset": "utf8mb4",
        "mysql_collate": "utf8mb4_nopad_bin" if mariadb else "utf8mb4_0900_bin",
    }


def upgrade() -> None:
    identifier = sa.Text().with_variant(VARBINARY(255), "mysql")
    op.create_table(
        "sqlstore_users",
        sa.Column("app_name", identifier, nullable=False),
        sa.Column("user_id", identifier, nullable=False),
        sa.Column("create_time", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("app_name", "user_id", name="pk_sqlstore_users"),
        **_options(),
    )
    holders = " UNION ".join(f"SELECT app_name, user_id FROM {t}" for t in _HOLDING_USERS)
    op.execute(
        sa.text(
            "INSERT INTO sqlstore_users (app_name, user_id, create_time)"
            f" SELECT app_name, user_id, :now FROM ({holders}) AS held"
        ).bindparams(now=time.time())
    )


def downgrade() -> None:
    op.drop_table("sqlstore_users")
