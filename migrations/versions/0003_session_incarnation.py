"""Session incarnation: tell a re-created session from a deleted one with the same id.

A session object loaded before its session was deleted and re-created under the same
id carries the old incarnation, so its appends are refused instead of landing in the
new session (whose revision restarted at 0). Existing rows get the empty incarnation.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    if op.get_context().dialect.name == "mysql":  # 0009 makes its schema whole
        return
    # A plain ADD COLUMN on both dialects (no table copy: on SQLite, rebuilding a table
    # that others reference would cascade deletes into events).
    op.add_column(
        "sqlstore_sessions",
        sa.Column("incarnation", sa.Text(), nullable=False, server_default=sa.text("''")),
    )


def downgrade() -> None:
    if op.get_context().dialect.name == "mysql":  # 0009 makes its schema whole
        return
    if op.get_bind().dialect.name == "sqlite":
        op.execute("ALTER TABLE sqlstore_sessions DROP COLUMN incarnation")  # SQLite 3.35+
    else:
        op.drop_column("sqlstore_sessions", "incarnation")
