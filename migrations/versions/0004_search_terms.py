"""Memory search from our own text analysis: every memory re-indexed.

Index terms are now made in Python (``adk_sqlstore.search.analysis``), the same for
both backends: a ``terms`` column (space-separated terms) and an ``analysis`` column
(the analysis they come from). PostgreSQL's ``search_vector`` becomes
``array_to_tsvector(string_to_array(terms, ' '))`` (no parser or dictionary of its
own); SQLite's FTS5 table indexes ``terms``, split at spaces only. ``token_count`` is
the number of terms on both, and the per-user statistics are recounted.

Existing memories are analysed in batches of 1,000 rows (English, the default
language; ``adk-sqlstore memory reindex --language ...`` re-indexes for another).
Offline (``alembic upgrade --sql``) the rows cannot be read: they are left with no
terms, and ``adk-sqlstore memory reindex`` indexes them afterwards.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence

import sqlalchemy as sa
from alembic import context, op

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_BATCH = 1_000
_log = logging.getLogger("adk_sqlstore.migrations")

_PG_TRIGGERS = [
    "CREATE TRIGGER sqlstore_memories_counted_insert AFTER INSERT ON sqlstore_memories"
    " REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT"
    " EXECUTE FUNCTION sqlstore_memories_counted()",
    "CREATE TRIGGER sqlstore_memories_counted_update AFTER UPDATE ON sqlstore_memories"
    " REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT"
    " EXECUTE FUNCTION sqlstore_memories_counted()",
    "CREATE TRIGGER sqlstore_memories_counted_delete AFTER DELETE ON sqlstore_memories"
    " REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT"
    " EXECUTE FUNCTION sqlstore_memories_counted()",
]
_PG_VECTORS = {
    "terms": "array_to_tsvector(string_to_array(terms, ' '))",
    "english": "to_tsvector('english'::regconfig, text)",
}

# FTS5's ascii tokenizer splits at spaces only once every ASCII character a term may
# hold is a token character (non-ASCII characters always are).
_SQLITE_FTS = {
    "terms": (
        "CREATE VIRTUAL TABLE sqlstore_memories_fts USING fts5(search_scope, terms,"
        " content='sqlstore_memories', content_rowid='pk',"
        " tokenize=\"ascii tokenchars '_.@/\\:-+#~%=?&'\")"
    ),
    "text": (
        "CREATE VIRTUAL TABLE sqlstore_memories_fts USING fts5(search_scope, text,"
        " content='sqlstore_memories', content_rowid='pk',"
        " tokenize='porter unicode61 remove_diacritics 2')"
    ),
}
_SQLITE_TRIGGERS = """
CREATE TRIGGER sqlstore_memories_fts_insert AFTER INSERT ON sqlstore_memories BEGIN
  INSERT INTO sqlstore_memories_fts(rowid, search_scope, {col})
  VALUES (new.pk, new.search_scope, new.{col});
  INSERT INTO sqlstore_memory_stats(app_name, user_id, doc_count, lexeme_count)
  VALUES (new.app_name, new.user_id, 1, new.token_count)
  ON CONFLICT(app_name, user_id) DO UPDATE
    SET doc_count = doc_count + 1, lexeme_count = lexeme_count + new.token_count;
END
;;
CREATE TRIGGER sqlstore_memories_fts_delete AFTER DELETE ON sqlstore_memories BEGIN
  INSERT INTO sqlstore_memories_fts(sqlstore_memories_fts, rowid, search_scope, {col})
  VALUES ('delete', old.pk, old.search_scope, old.{col});
  UPDATE sqlstore_memory_stats
    SET doc_count = doc_count - 1, lexeme_count = lexeme_count - old.token_count
  WHERE app_name = old.app_name AND user_id = old.user_id;
END
;;
CREATE TRIGGER sqlstore_memories_fts_update AFTER UPDATE OF search_scope, {col}, token_count
ON sqlstore_memories BEGIN
  INSERT INTO sqlstore_memories_fts(sqlstore_memories_fts, rowid, search_scope, {col})
  VALUES ('delete', old.pk, old.search_scope, old.{col});
  INSERT INTO sqlstore_memories_fts(rowid, search_scope, {col})
  VALUES (new.pk, new.search_scope, new.{col});
  UPDATE sqlstore_memory_stats
    SET lexeme_count = lexeme_count - old.token_count + new.token_count
  WHERE app_name = new.app_name AND user_id = new.user_id;
END
"""

_STATS_FROM_COUNTS = {
    "postgresql": "sum(length(search_vector))",
    "sqlite": "sum(token_count)",
}


def _drop_search(dialect: str) -> None:
    """Drop the search index, its triggers and (PostgreSQL) the tsvector column."""
    if dialect == "postgresql":
        for name in ("insert", "update", "delete"):
            op.execute(f"DROP TRIGGER sqlstore_memories_counted_{name} ON sqlstore_memories")
        op.execute("DROP INDEX ix_sqlstore_memories_search")
        op.execute("ALTER TABLE sqlstore_memories DROP COLUMN search_vector")
    else:
        for name in ("insert", "delete", "update"):
            op.execute(f"DROP TRIGGER sqlstore_memories_fts_{name}")
        op.execute("DROP TABLE sqlstore_memories_fts")


def _create_search(dialect: str, source: str) -> None:
    """The search index over ``source`` (``terms``, or the old ``english``/``text``),
    its triggers, and the per-user statistics recounted."""
    if dialect == "postgresql":
        op.execute(
            "ALTER TABLE sqlstore_memories ADD COLUMN search_vector tsvector"
            f" GENERATED ALWAYS AS ({_PG_VECTORS[source]}) STORED"
        )
        _create_gin_index()
        for trigger in _PG_TRIGGERS:
            op.execute(trigger)
    else:
        column = "terms" if source == "terms" else "text"
        op.execute(_SQLITE_FTS[column])
        for trigger in _SQLITE_TRIGGERS.format(col=column).split(";;"):
            op.execute(trigger)
        op.execute("INSERT INTO sqlstore_memories_fts(sqlstore_memories_fts) VALUES ('rebuild')")
    op.execute("DELETE FROM sqlstore_memory_stats")
    op.execute(
        "INSERT INTO sqlstore_memory_stats (app_name, user_id, doc_count, lexeme_count)"
        f" SELECT app_name, user_id, count(*), {_STATS_FROM_COUNTS[dialect]}"
        " FROM sqlstore_memories GROUP BY app_name, user_id"
    )


def _create_gin_index() -> None:
    """As in 0002: a GIN index over (search_scope, search_vector) with btree_gin, or
    over search_vector alone where btree_gin cannot be created."""
    bind = op.get_bind()
    has_btree_gin = bind.exec_driver_sql(
        "SELECT 1 FROM pg_extension WHERE extname = 'btree_gin'"
    ).first()
    columns = "search_scope, search_vector" if has_btree_gin else "search_vector"
    op.execute(
        "CREATE INDEX ix_sqlstore_memories_search ON sqlstore_memories"
        f" USING gin ({columns}) WITH (fastupdate = off)"
    )


def _each_batch(analyse: Callable[[str], tuple[str, int, str]]) -> None:
    """Set ``terms``, ``token_count`` and ``analysis`` of every memory from its text,
    a batch of rows at a time (keyset order on ``pk``)."""
    bind = op.get_bind()
    after, done = -1, 0
    select = sa.text(
        "SELECT pk, text FROM sqlstore_memories WHERE pk > :after ORDER BY pk LIMIT :n"
    )
    update = sa.text(
        "UPDATE sqlstore_memories SET terms = :terms, token_count = :token_count,"
        " analysis = :analysis WHERE pk = :pk"
    )
    while rows := bind.execute(select, {"after": after, "n": _BATCH}).all():
        values = []
        for pk, text in rows:
            terms, count, analysis = analyse(text)
            values.append({"pk": pk, "terms": terms, "token_count": count, "analysis": analysis})
        bind.execute(update, values)
        after, done = rows[-1][0], done + len(rows)
        _log.info("re-indexed %d memories", done)


def _analysed(text: str) -> tuple[str, int, str]:
    from adk_sqlstore.search.analysis import analyzer

    terms = analyzer().index_terms(text)
    return " ".join(terms), len(terms), analyzer().signature


_OLD_WORD = re.compile(r"\w+")


def _old_count(text: str) -> int:
    """0002's BM25 length: distinct words, English stop words left out."""
    from adk_sqlstore.search.analysis import stop_words

    stop = stop_words("english")
    return len({w for w in _OLD_WORD.findall(text.lower()) if w not in stop})


def upgrade() -> None:
    if op.get_context().dialect.name == "mysql":  # 0009 makes its schema whole
        return
    dialect = op.get_bind().dialect.name
    _drop_search(dialect)
    for name in ("terms", "analysis"):
        op.add_column(
            "sqlstore_memories",
            sa.Column(name, sa.Text(), nullable=False, server_default=sa.text("''")),
        )
    if context.is_offline_mode():
        _log.warning("offline: run `adk-sqlstore memory reindex` to index existing memories")
    else:
        _each_batch(_analysed)
    _create_search(dialect, "terms")


def downgrade() -> None:
    if op.get_context().dialect.name == "mysql":  # 0009 makes its schema whole
        return
    dialect = op.get_bind().dialect.name
    _drop_search(dialect)
    if dialect == "sqlite":
        for name in ("terms", "analysis"):
            op.execute(f"ALTER TABLE sqlstore_memories DROP COLUMN {name}")  # SQLite 3.35+
        if not context.is_offline_mode():
            _each_batch_old()
        _create_search(dialect, "text")
    else:
        for name in ("terms", "analysis"):
            op.drop_column("sqlstore_memories", name)
        _create_search(dialect, "english")


def _each_batch_old() -> None:
    bind = op.get_bind()
    rows = bind.execute(sa.text("SELECT pk, text FROM sqlstore_memories")).all()
    update = sa.text("UPDATE sqlstore_memories SET token_count = :token_count WHERE pk = :pk")
    values = [{"pk": pk, "token_count": _old_count(text)} for pk, text in rows]
    if values:
        bind.execute(update, values)
