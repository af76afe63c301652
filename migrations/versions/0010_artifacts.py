"""Artifacts: the files an agent saves or receives, with their versions, in the same
database as sessions and memory (ADK's ``BaseArtifactService``).

- ``sqlstore_artifacts``: one row per version of an artifact, keyed by ``(app_name,
  user_id, session_id, filename, version)`` (``session_id`` is empty for the user's
  own artifacts, whose filenames start with ``user:``): its MIME type, custom metadata
  and creation time, the part as JSON without its bytes, and the SHA-256 and size of
  its bytes when it has any.
- ``sqlstore_artifact_contents`` and ``sqlstore_artifact_chunks``: the bytes, once per
  user and SHA-256 (saving the same bytes again writes no chunk), in chunks of at most
  1 MiB (``bytea``, ``BLOB``, ``LONGBLOB``), so that a large file is written and read a
  few chunks at a time, never whole. A content goes when no version of the user's
  refers to it any more.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-03
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.mysql import LONGBLOB, LONGTEXT, VARBINARY

revision: str = "0010"
down_revision: str | Sequence[str] | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _key(length: int) -> Any:
    """Text; ``VARBINARY`` on MySQL (as migration 0009's keys)."""
    return sa.Text().with_variant(VARBINARY(length), "mysql")


def _text() -> Any:
    return sa.Text().with_variant(LONGTEXT(), "mysql")


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
    options = _options()
    op.create_table(
        "sqlstore_artifacts",
        sa.Column("app_name", _key(255), nullable=False),
        sa.Column("user_id", _key(255), nullable=False),
        sa.Column("session_id", _key(255), nullable=False),
        sa.Column("filename", _key(1024), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("mime_type", _text(), nullable=True),
        sa.Column("custom_metadata", _text(), nullable=False),
        sa.Column("create_time", sa.Double(), nullable=False),
        sa.Column("part", _text(), nullable=False),
        sa.Column("content_sha256", _key(64), nullable=True),
        sa.Column("size", sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint(
            "app_name", "user_id", "session_id", "filename", "version", name="pk_sqlstore_artifacts"
        ),
        sa.Index(
            "ix_sqlstore_artifacts_app_name_user_id_content_sha256",
            "app_name",
            "user_id",
            "content_sha256",
        ),
        **options,
    )
    op.create_table(
        "sqlstore_artifact_contents",
        sa.Column("app_name", _key(255), nullable=False),
        sa.Column("user_id", _key(255), nullable=False),
        sa.Column("sha256", _key(64), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("chunk_count", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint(
            "app_name", "user_id", "sha256", name="pk_sqlstore_artifact_contents"
        ),
        **options,
    )
    op.create_table(
        "sqlstore_artifact_chunks",
        sa.Column("app_name", _key(255), nullable=False),
        sa.Column("user_id", _key(255), nullable=False),
        sa.Column("sha256", _key(64), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("data", sa.LargeBinary().with_variant(LONGBLOB(), "mysql"), nullable=False),
        sa.PrimaryKeyConstraint(
            "app_name", "user_id", "sha256", "seq", name="pk_sqlstore_artifact_chunks"
        ),
        **options,
    )


def downgrade() -> None:
    op.drop_table("sqlstore_artifact_chunks")
    op.drop_table("sqlstore_artifact_contents")
    op.drop_table("sqlstore_artifacts")
