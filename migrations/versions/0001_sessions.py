"""Sessions, events and scoped state.

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_SESSION_FK = (
    ["app_name", "user_id", "session_id"],
    ["sqlstore_sessions.app_name", "sqlstore_sessions.user_id", "sqlstore_sessions.id"],
)


def upgrade() -> None:
    if op.get_context().dialect.name == "mysql":  # 0009 makes its schema whole
        return
    op.create_table(
        "sqlstore_sessions",
        sa.Column("app_name", sa.Text(), nullable=False),
        sa.Column("user_id", sa.Text(), nullable=False),
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("revision", sa.BigInteger(), nullable=False),
        sa.Column("create_time", sa.Double(), nullable=False),
        sa.Column("update_time", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("app_name", "user_id", "id", name="pk_sqlstore_sessions"),
    )
    op.create_table(
        "sqlstore_events",
        sa.Column("app_name", sa.Text(), nullable=False),
        sa.Column("user_id", sa.Text(), nullable=False),
        sa.Column("session_id", sa.Text(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("invocation_id", sa.Text(), nullable=False),
        sa.Column("author", sa.Text(), nullable=False),
        sa.Column("timestamp", sa.Double(), nullable=False),
        sa.Column("data", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint(
            "app_name", "user_id", "session_id", "seq", name="pk_sqlstore_events"
        ),
        sa.UniqueConstraint(
            "app_name",
            "user_id",
            "session_id",
            "id",
            name="uq_sqlstore_events_app_name_user_id_session_id_id",
        ),
        sa.ForeignKeyConstraint(
            *_SESSION_FK,
            name="fk_sqlstore_events_sqlstore_sessions",
            ondelete="CASCADE",
        ),
    )
    op.create_table(
        "sqlstore_session_state",
        sa.Column("app_name", sa.Text(), nullable=False),
        sa.Column("user_id", sa.Text(), nullable=False),
        sa.Column("session_id", sa.Text(), nullable=False),
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint(
            "app_name", "user_id", "session_id", "key", name="pk_sqlstore_session_state"
        ),
        sa.ForeignKeyConstraint(
            *_SESSION_FK,
            name="fk_sqlstore_session_state_sqlstore_sessions",
            ondelete="CASCADE",
        ),
    )
    op.create_table(
        "sqlstore_user_state",
        sa.Column("app_name", sa.Text(), nullable=False),
        sa.Column("user_id", sa.Text(), nullable=False),
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.Column("update_time", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("app_name", "user_id", "key", name="pk_sqlstore_user_state"),
    )
    op.create_table(
        "sqlstore_app_state",
        sa.Column("app_name", sa.Text(), nullable=False),
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.Column("update_time", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("app_name", "key", name="pk_sqlstore_app_state"),
    )


def downgrade() -> None:
    if op.get_context().dialect.name == "mysql":  # 0009 makes its schema whole
        return
    op.drop_table("sqlstore_app_state")
    op.drop_table("sqlstore_user_state")
    op.drop_table("sqlstore_session_state")
    op.drop_table("sqlstore_events")
    op.drop_table("sqlstore_sessions")
