"""Memory generation: facts, their revisions, what generation has processed, leases.

- ``sqlstore_facts``: facts a model extracted from conversations (or imported), current
  while ``invalid_at`` is NULL and ``expire_at`` (if any) is ahead; a current fact is
  also a row of ``sqlstore_memories`` with the same id (search finds it there);
- ``sqlstore_fact_revisions``: every change of a fact (create, update, invalidate,
  expire), numbered from 1 per fact;
- ``sqlstore_fact_sources``: per session, the number of its events generation has
  processed (the watermark) and the failed attempts after it;
- ``sqlstore_fact_leases``: per user, the generator that may write the user's facts,
  and until when (one at a time across processes and machines).

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-05
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision: str = "0012"
down_revision: str | Sequence[str] | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


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


def _key(length: int) -> Any:
    return sa.Text().with_variant(mysql.VARBINARY(length), "mysql")


def upgrade() -> None:
    identifier = _key(255)
    text = sa.Text().with_variant(mysql.LONGTEXT(), "mysql")

    def user() -> list[sa.Column[Any]]:
        return [
            sa.Column("app_name", identifier, nullable=False),
            sa.Column("user_id", identifier, nullable=False),
        ]

    op.create_table(
        "sqlstore_facts",
        *user(),
        sa.Column("id", identifier, nullable=False),
        sa.Column("text", text, nullable=False),
        sa.Column("topics", text, nullable=False),
        sa.Column("valid_from", sa.Double(), nullable=True),
        sa.Column("invalid_at", sa.Double(), nullable=True),
        sa.Column("expire_at", sa.Double(), nullable=True),
        sa.Column("session_id", identifier, nullable=True),
        sa.Column("event_ids", text, nullable=False),
        sa.Column("revision_count", sa.Integer(), nullable=False),
        sa.Column("create_time", sa.Double(), nullable=False),
        sa.Column("update_time", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("app_name", "user_id", "id", name="pk_sqlstore_facts"),
        **_options(),
    )
    op.create_table(
        "sqlstore_fact_revisions",
        *user(),
        sa.Column("fact_id", identifier, nullable=False),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.Column("action", _key(16), nullable=False),
        sa.Column("old_text", text, nullable=True),
        sa.Column("new_text", text, nullable=True),
        sa.Column("session_id", identifier, nullable=True),
        sa.Column("event_ids", text, nullable=False),
        sa.Column("model", text, nullable=True),
        sa.Column("create_time", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint(
            "app_name", "user_id", "fact_id", "revision", name="pk_sqlstore_fact_revisions"
        ),
        **_options(),
    )
    op.create_table(
        "sqlstore_fact_sources",
        *user(),
        sa.Column("session_id", identifier, nullable=False),
        sa.Column("event_count", sa.Integer(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("error", text, nullable=True),
        sa.Column("update_time", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint(
            "app_name", "user_id", "session_id", name="pk_sqlstore_fact_sources"
        ),
        **_options(),
    )
    op.create_table(
        "sqlstore_fact_leases",
        *user(),
        sa.Column("holder", _key(64), nullable=False),
        sa.Column("lease_until", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("app_name", "user_id", name="pk_sqlstore_fact_leases"),
        **_options(),
    )


def downgrade() -> None:
    for table in (
        "sqlstore_fact_leases",
        "sqlstore_fact_sources",
        "sqlstore_fact_revisions",
        "sqlstore_facts",
    ):
        op.drop_table(table)
