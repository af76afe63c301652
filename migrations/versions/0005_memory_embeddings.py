"""Hybrid memory search: one embedding per memory.

A table ``sqlstore_memory_embeddings``: per memory (``memory_pk``, deleted with it),
the user it belongs to, the embedder's ``model`` and ``dimensions``, the SHA-256 of
the text that was embedded (a memory whose text changes is embedded again) and the
vector.

The vector's type is per backend: SQLite a BLOB of little-endian float32; PostgreSQL
pgvector's ``vector`` where the extension exists or can be created here (``CREATE
EXTENSION IF NOT EXISTS vector``), else ``bytea`` (memory search is then lexical, and
``adk-sqlstore memory embed`` switches to ``vector`` once pgvector is installed).

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import context, op

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_log = logging.getLogger("adk_sqlstore.migrations")


def _pgvector() -> bool:
    """Whether pgvector's ``vector`` type can be used (creating the extension if the
    server has it and this role may)."""
    if context.is_offline_mode():
        return False
    bind = op.get_bind()
    available = bind.execute(
        sa.text("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
    ).first()
    if available is None:
        return False
    try:
        with bind.begin_nested():
            bind.execute(sa.text("CREATE EXTENSION IF NOT EXISTS vector"))
    except sa.exc.DBAPIError as exc:  # e.g. not allowed for this role
        _log.warning("pgvector is on the server but cannot be created here: %s", exc)
    return (
        bind.execute(sa.text("SELECT 1 FROM pg_extension WHERE extname = 'vector'")).first()
        is not None
    )


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    big = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
    op.create_table(
        "sqlstore_memory_embeddings",
        sa.Column("memory_pk", big, nullable=False),
        sa.Column("app_name", sa.Text(), nullable=False),
        sa.Column("user_id", sa.Text(), nullable=False),
        sa.Column("model", sa.Text(), nullable=False),
        sa.Column("dimensions", sa.Integer(), nullable=False),
        sa.Column("text_sha256", sa.Text(), nullable=False),
        sa.Column("embedding", sa.LargeBinary(), nullable=False),
        sa.Column("update_time", sa.Double(), nullable=False),
        sa.ForeignKeyConstraint(
            ["memory_pk"],
            ["sqlstore_memories.pk"],
            name="fk_sqlstore_memory_embeddings_sqlstore_memories",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("memory_pk", name="pk_sqlstore_memory_embeddings"),
    )
    op.create_index(
        "ix_sqlstore_memory_embeddings_user_vectors",
        "sqlstore_memory_embeddings",
        ["app_name", "user_id", "model", "dimensions", "update_time"],
    )
    if dialect == "postgresql" and _pgvector():
        op.execute(
            "ALTER TABLE sqlstore_memory_embeddings ALTER COLUMN embedding TYPE vector USING NULL"
        )


def downgrade() -> None:
    op.drop_table("sqlstore_memory_embeddings")  # the vector extension stays
