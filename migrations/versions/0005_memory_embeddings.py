"""Hybrid memory search: one embedding per memory.

A table ``sqlstore_memory_embeddings``: per memory (``memory_pk``, deleted with it),
the user it belongs to, the embedder's ``model`` and ``dimensions``, the SHA-256 of
the text that was embedded (a memory whose text changes is embedded again) and the
vector.

The vector's type is per backend: SQLite a BLOB of little-endian float32; PostgreSQL
pgvector's ``vector`` where the extension exists or can be created here (``CREATE
EXTENSION IF NOT EXISTS vector``), else ``bytea`` (memory search is then lexical, and
``adk-sqlstore memory embed`` switches to ``vector`` once pgvector is installed).

PostgreSQL's full-text index also changes: ``search_vector`` now holds the user's scope
token (``chr(1) || search_scope``, a lexeme no text analysis makes) beside the terms,
and searches ask for it with each word (``scope & word``), so that a GIN index over
``search_vector`` alone reads only the user's postings: servers without btree_gin (such
as pgserver's, used here for pgvector) searched 1,000,000 memories of 1,000 users at
115 ms p95 before, reading every user's postings of each word. The BM25 length and
the per-user statistics count ``token_count`` (the terms), not the tsvector's length.

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


# The per-user statistics trigger function of 0002, counting ``{length}`` per memory.
_COUNTED = """
CREATE OR REPLACE FUNCTION sqlstore_memories_counted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP IN ('DELETE', 'UPDATE') THEN
    UPDATE sqlstore_memory_stats AS s
       SET doc_count = s.doc_count - o.docs, lexeme_count = s.lexeme_count - o.lexemes
      FROM (SELECT app_name, user_id, count(*) AS docs, sum({length}) AS lexemes
              FROM old_rows GROUP BY app_name, user_id) AS o
     WHERE s.app_name = o.app_name AND s.user_id = o.user_id;
  END IF;
  IF TG_OP IN ('INSERT', 'UPDATE') THEN
    INSERT INTO sqlstore_memory_stats AS s (app_name, user_id, doc_count, lexeme_count)
    SELECT app_name, user_id, count(*), sum({length})
      FROM new_rows GROUP BY app_name, user_id
    ON CONFLICT (app_name, user_id) DO UPDATE
       SET doc_count = s.doc_count + EXCLUDED.doc_count,
           lexeme_count = s.lexeme_count + EXCLUDED.lexeme_count;
  END IF;
  RETURN NULL;
END
$$
"""
_VECTORS = {
    "scoped": "array_to_tsvector(array_append(string_to_array(terms, ' '),"
    " chr(1) || search_scope))",
    "terms": "array_to_tsvector(string_to_array(terms, ' '))",
}
_LENGTHS = {"scoped": "token_count", "terms": "length(search_vector)"}


def _pg_search(kind: str) -> None:
    """PostgreSQL's ``search_vector`` (with the scope token, or 0004's terms alone),
    its GIN index (with search_scope where btree_gin exists, as in 0002) and the
    statistics function counting accordingly."""
    op.execute(_COUNTED.format(length=_LENGTHS[kind]))
    op.execute("DROP INDEX ix_sqlstore_memories_search")
    op.execute("ALTER TABLE sqlstore_memories DROP COLUMN search_vector")
    op.execute(
        "ALTER TABLE sqlstore_memories ADD COLUMN search_vector tsvector"
        f" GENERATED ALWAYS AS ({_VECTORS[kind]}) STORED"
    )
    has_btree_gin = (
        not context.is_offline_mode()
        and op.get_bind()
        .exec_driver_sql("SELECT 1 FROM pg_extension WHERE extname = 'btree_gin'")
        .first()
        is not None
    )
    columns = "search_scope, search_vector" if has_btree_gin else "search_vector"
    op.execute(
        "CREATE INDEX ix_sqlstore_memories_search ON sqlstore_memories"
        f" USING gin ({columns}) WITH (fastupdate = off)"
    )


def upgrade() -> None:
    if op.get_context().dialect.name == "mysql":  # 0009 makes its schema whole
        return
    dialect = op.get_bind().dialect.name
    if dialect == "postgresql":
        _pg_search("scoped")
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
    if op.get_context().dialect.name == "mysql":  # 0009 makes its schema whole
        return
    op.drop_table("sqlstore_memory_embeddings")  # the vector extension stays
    if op.get_bind().dialect.name == "postgresql":
        _pg_search("terms")
