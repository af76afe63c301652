"""MySQL and MariaDB: the whole schema, as 0001-0008 leave it on the other dialects.

Revisions 0001-0008 do nothing on MySQL and MariaDB (they came before this backend);
this one makes every table at once, so that a new MySQL database and a PostgreSQL or
SQLite one at this revision hold the same tables (the migration test compares each
with ``adk_sqlstore.schema``). On PostgreSQL and SQLite it does nothing.

- InnoDB tables in ``utf8mb4`` with a binary no-pad collation (MariaDB
  ``utf8mb4_nopad_bin``, MySQL ``utf8mb4_0900_bin``): text compares by code point,
  trailing spaces included. Identifiers and keys are ``VARBINARY`` (their UTF-8
  bytes, compared exactly and sized in bytes: a key of three identifiers and a
  1,024-byte state key is 1,789 bytes, within InnoDB's 3,072), other text
  ``LONGTEXT``: JSON is stored as the text this library writes, never as MySQL's
  ``JSON`` type (which reorders keys and rewrites numbers).
- Memory search: ``sqlstore_memory_postings``, an inverted index in an InnoDB table:
  one row per memory and index token (each term with its memory's length class,
  ``term~L``, migration 0006), keyed by ``(app_name, user_id, token, memory_pk)``, so
  a read is a range of one user's postings. Not InnoDB ``FULLTEXT``: its index is
  changed outside transactions, and right after a commit, under concurrent load, a
  boolean-mode search on MariaDB 10.11 returned some of the user's matching rows and
  not others (3 runs of 7 of the test suite, 2026-12-03); it also splits and
  stop-words text by its own rules. A table is as transactional as the memories.
- The postings, the per-user statistics (``sqlstore_memory_stats``) and term
  frequencies (``sqlstore_memory_terms``) are kept by row triggers, as on SQLite: the
  terms of a row split by ``JSON_TABLE`` (a term never holds a space, a double quote
  or a control character: ``adk_sqlstore.search.analysis``), as ``utf8mb4`` whatever
  the database's default character set.

Needs MySQL 8.0.17 or newer, or MariaDB 10.6 or newer (``JSON_TABLE``, ``CAST(... AS
DOUBLE)``). DDL is not transactional on MySQL: a failure part-way leaves the tables
made so far (``adk-sqlstore migrate`` again after fixing the cause, once they are
dropped).

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-03
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import context, op
from sqlalchemy.dialects.mysql import LONGBLOB, LONGTEXT, VARBINARY

revision: str = "0009"
down_revision: str | Sequence[str] | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

LENGTH_CLASSES = (1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 13, 16, 20, 25, 32, 48, 64, 128)
"""The lowest length of each class (as ``adk_sqlstore.search.text.LENGTH_CLASSES``,
which a test compares with this frozen copy)."""

_TABLES = (
    "sqlstore_memory_ingestions",
    "sqlstore_memory_embeddings",
    "sqlstore_memory_terms",
    "sqlstore_memory_stats",
    "sqlstore_memory_postings",
    "sqlstore_memories",
    "sqlstore_app_state",
    "sqlstore_user_state",
    "sqlstore_session_state",
    "sqlstore_events",
    "sqlstore_sessions",
)  # in the order they are dropped
_TRIGGERS = ("insert", "update", "delete")


def _id(length: int = 255) -> Any:
    return VARBINARY(length)


def _text() -> Any:
    return LONGTEXT()


def _options() -> dict[str, str]:
    """InnoDB, utf8mb4, and the server's binary no-pad collation."""
    dialect: Any = op.get_context().dialect
    mariadb = bool(getattr(dialect, "is_mariadb", False))
    if not context.is_offline_mode():
        version = tuple(dialect.server_version_info or ())
        if (mariadb and version < (10, 6)) or (not mariadb and version < (8, 0, 17)):
            shown = ".".join(str(part) for part in version)
            raise RuntimeError(
                f"adk-sqlstore needs MariaDB 10.6+ or MySQL 8.0.17+ (JSON_TABLE); this"
                f" server is {'MariaDB' if mariadb else 'MySQL'} {shown}"
            )
    return {
        "mysql_engine": "InnoDB",
        "mysql_charset": "utf8mb4",
        "mysql_collate": "utf8mb4_nopad_bin" if mariadb else "utf8mb4_0900_bin",
    }


def _length_class(count: str) -> str:
    """SQL: the length class of ``count`` (a token count) as text; 0 for none."""
    cases = " ".join(f"WHEN {count} >= {low} THEN '{low}'" for low in reversed(LENGTH_CLASSES))
    return f"(CASE {cases} ELSE '0' END)"


def _json(row: str, separator: str, last: str) -> str:
    """SQL: ``row``'s space-separated terms as a JSON array of strings, each followed by
    ``separator`` (SQL text), the array ending with ``last`` (SQL text); a backslash in
    a term escaped (no term holds a double quote or a control character)."""
    escaped = rf"REPLACE({row}.terms, '\\', '\\\\')"
    return (
        f"""CONCAT('["', REPLACE({escaped}, ' ', CONCAT({separator}, '","')), {separator},"""
        f""" {last}, '"]')"""
    )


def _terms_of(row: str) -> str:
    """SQL: ``row``'s terms and its ``~L`` as rows ``j.term``."""
    length = _length_class(f"{row}.token_count")
    terms = (
        f"""(CASE WHEN {row}.terms = '' THEN CONCAT('["~', {length}, '"]')"""
        f""" ELSE {_json(row, "''", f'''CONCAT('","~', {length})''')} END)"""
    )
    return f"JSON_TABLE({terms}, '$[*]' COLUMNS (term {_TOKEN_COLUMN})) AS j"


def _tokens_of(row: str) -> str:
    """SQL: ``row``'s index tokens (each term with its length class, ``t~L``) as rows
    ``j.term`` (none for a row without terms)."""
    length = _length_class(f"{row}.token_count")
    classed = _json(row, f"CONCAT('~', {length})", "''")
    tokens = f"(CASE WHEN {row}.terms = '' THEN '[]' ELSE {classed} END)"
    return f"JSON_TABLE({tokens}, '$[*]' COLUMNS (term {_TOKEN_COLUMN})) AS j"


_TOKEN_COLUMN = "VARCHAR(1040) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$'"


def _added(row: str) -> str:
    """SQL: count ``row`` in its user's statistics, then its terms; index its tokens."""
    return f"""
  INSERT INTO sqlstore_memory_stats (app_name, user_id, doc_count, lexeme_count)
  VALUES ({row}.app_name, {row}.user_id, 1, {row}.token_count)
  ON DUPLICATE KEY UPDATE doc_count = doc_count + 1,
    lexeme_count = lexeme_count + {row}.token_count;
  INSERT INTO sqlstore_memory_terms (app_name, user_id, term, df)
  SELECT {row}.app_name, {row}.user_id, j.term, 1 FROM {_terms_of(row)}
  ON DUPLICATE KEY UPDATE df = df + 1;
  INSERT INTO sqlstore_memory_postings (app_name, user_id, token, memory_pk)
  SELECT {row}.app_name, {row}.user_id, j.term, {row}.pk FROM {_tokens_of(row)};"""


def _removed(row: str) -> str:
    """SQL: take ``row`` out of its user's statistics, then out of its terms (a term's
    row goes with its last memory), and its tokens out of the postings. Joined to the
    split terms, each row is one primary-key lookup (``term IN (SELECT ...)`` read all
    of the user's terms)."""
    owner = f"t.app_name = {row}.app_name AND t.user_id = {row}.user_id"
    held = f"sqlstore_memory_terms AS t JOIN {_terms_of(row)} ON t.term = j.term"
    return f"""
  UPDATE sqlstore_memory_stats
    SET doc_count = doc_count - 1, lexeme_count = lexeme_count - {row}.token_count
  WHERE app_name = {row}.app_name AND user_id = {row}.user_id;
  DELETE t FROM {held} WHERE {owner} AND t.df <= 1;
  UPDATE {held} SET t.df = t.df - 1 WHERE {owner};
  DELETE p FROM sqlstore_memory_postings AS p JOIN {_tokens_of(row)} ON p.token = j.term
  WHERE p.app_name = {row}.app_name AND p.user_id = {row}.user_id
    AND p.memory_pk = {row}.pk;"""


_CHANGED = (
    "NOT (OLD.app_name <=> NEW.app_name AND OLD.user_id <=> NEW.user_id"
    " AND OLD.terms <=> NEW.terms AND OLD.token_count <=> NEW.token_count)"
)
_TRIGGER_BODIES = {
    "insert": _added("NEW"),
    "delete": _removed("OLD"),
    "update": f"IF {_CHANGED} THEN {_removed('OLD')} {_added('NEW')} END IF;",
}


def _memories(options: dict[str, str]) -> None:
    op.create_table(
        "sqlstore_memories",
        sa.Column("pk", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("app_name", _id(), nullable=False),
        sa.Column("user_id", _id(), nullable=False),
        sa.Column("id", _id(), nullable=False),
        sa.Column("session_id", _id(), nullable=True),
        sa.Column("event_id", _id(), nullable=True),
        sa.Column("author", _text(), nullable=True),
        sa.Column("timestamp", sa.Double(), nullable=False),
        sa.Column("content", _text(), nullable=False),
        sa.Column("text", _text(), nullable=False),
        sa.Column("terms", _text(), nullable=False),
        sa.Column("analysis", _text(), nullable=False),
        sa.Column("token_count", sa.Integer(), nullable=False),
        sa.Column("custom_metadata", _text(), nullable=False),
        sa.Column("search_scope", _text(), nullable=False),
        sa.Column("update_time", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("pk"),
        sa.UniqueConstraint(
            "app_name", "user_id", "id", name="uq_sqlstore_memories_app_name_user_id_id"
        ),
        sa.Index(
            "ix_sqlstore_memories_app_name_user_id_session_id", "app_name", "user_id", "session_id"
        ),
        **options,
    )
    op.create_table(
        "sqlstore_memory_postings",
        sa.Column("app_name", _id(), nullable=False),
        sa.Column("user_id", _id(), nullable=False),
        sa.Column("token", _id(1040), nullable=False),
        sa.Column("memory_pk", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("app_name", "user_id", "token", "memory_pk"),
        **options,
    )
    op.create_table(
        "sqlstore_memory_stats",
        sa.Column("app_name", _id(), nullable=False),
        sa.Column("user_id", _id(), nullable=False),
        sa.Column("doc_count", sa.BigInteger(), nullable=False),
        sa.Column("lexeme_count", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("app_name", "user_id"),
        **options,
    )
    op.create_table(
        "sqlstore_memory_terms",
        sa.Column("app_name", _id(), nullable=False),
        sa.Column("user_id", _id(), nullable=False),
        sa.Column("term", _id(1040), nullable=False),
        sa.Column("df", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("app_name", "user_id", "term"),
        **options,
    )
    op.create_table(
        "sqlstore_memory_embeddings",
        sa.Column("memory_pk", sa.BigInteger(), nullable=False),
        sa.Column("app_name", _id(), nullable=False),
        sa.Column("user_id", _id(), nullable=False),
        sa.Column("model", _id(), nullable=False),
        sa.Column("dimensions", sa.Integer(), nullable=False),
        sa.Column("text_sha256", _text(), nullable=False),
        sa.Column("embedding", LONGBLOB(), nullable=False),
        sa.Column("update_time", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("memory_pk"),
        sa.ForeignKeyConstraint(
            ["memory_pk"],
            ["sqlstore_memories.pk"],
            name="fk_sqlstore_memory_embeddings_sqlstore_memories",
            ondelete="CASCADE",
        ),
        sa.Index(
            "ix_sqlstore_memory_embeddings_user_vectors",
            "app_name",
            "user_id",
            "model",
            "dimensions",
            "update_time",
        ),
        **options,
    )
    op.create_table(
        "sqlstore_memory_ingestions",
        sa.Column("app_name", _id(), nullable=False),
        sa.Column("user_id", _id(), nullable=False),
        sa.Column("session_id", _id(), nullable=False),
        sa.Column("revision", sa.BigInteger(), nullable=True),
        sa.Column("event_count", sa.BigInteger(), nullable=False),
        sa.Column("ingest_time", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("app_name", "user_id", "session_id"),
        **options,
    )
    for event in _TRIGGERS:
        op.execute(
            f"CREATE TRIGGER sqlstore_memories_counted_{event} AFTER {event.upper()}"
            f" ON sqlstore_memories FOR EACH ROW BEGIN {_TRIGGER_BODIES[event]} END"
        )


_SESSION_FK = (
    ["app_name", "user_id", "session_id"],
    ["sqlstore_sessions.app_name", "sqlstore_sessions.user_id", "sqlstore_sessions.id"],
)


def _sessions(options: dict[str, str]) -> None:
    op.create_table(
        "sqlstore_sessions",
        sa.Column("app_name", _id(), nullable=False),
        sa.Column("user_id", _id(), nullable=False),
        sa.Column("id", _id(), nullable=False),
        sa.Column("revision", sa.BigInteger(), nullable=False),
        sa.Column("create_time", sa.Double(), nullable=False),
        sa.Column("update_time", sa.Double(), nullable=False),
        sa.Column("incarnation", _id(), nullable=False, server_default=sa.text("''")),
        sa.PrimaryKeyConstraint("app_name", "user_id", "id"),
        **options,
    )
    op.create_table(
        "sqlstore_events",
        sa.Column("app_name", _id(), nullable=False),
        sa.Column("user_id", _id(), nullable=False),
        sa.Column("session_id", _id(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("id", _id(), nullable=False),
        sa.Column("invocation_id", _text(), nullable=False),
        sa.Column("author", _text(), nullable=False),
        sa.Column("timestamp", sa.Double(), nullable=False),
        sa.Column("data", _text(), nullable=False),
        sa.PrimaryKeyConstraint("app_name", "user_id", "session_id", "seq"),
        sa.UniqueConstraint(
            "app_name",
            "user_id",
            "session_id",
            "id",
            name="uq_sqlstore_events_app_name_user_id_session_id_id",
        ),
        sa.ForeignKeyConstraint(
            *_SESSION_FK, name="fk_sqlstore_events_sqlstore_sessions", ondelete="CASCADE"
        ),
        **options,
    )
    op.create_table(
        "sqlstore_session_state",
        sa.Column("app_name", _id(), nullable=False),
        sa.Column("user_id", _id(), nullable=False),
        sa.Column("session_id", _id(), nullable=False),
        sa.Column("key", _id(1024), nullable=False),
        sa.Column("value", _text(), nullable=False),
        sa.PrimaryKeyConstraint("app_name", "user_id", "session_id", "key"),
        sa.ForeignKeyConstraint(
            *_SESSION_FK, name="fk_sqlstore_session_state_sqlstore_sessions", ondelete="CASCADE"
        ),
        **options,
    )
    op.create_table(
        "sqlstore_user_state",
        sa.Column("app_name", _id(), nullable=False),
        sa.Column("user_id", _id(), nullable=False),
        sa.Column("key", _id(1024), nullable=False),
        sa.Column("value", _text(), nullable=False),
        sa.Column("update_time", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("app_name", "user_id", "key"),
        **options,
    )
    op.create_table(
        "sqlstore_app_state",
        sa.Column("app_name", _id(), nullable=False),
        sa.Column("key", _id(1024), nullable=False),
        sa.Column("value", _text(), nullable=False),
        sa.Column("update_time", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("app_name", "key"),
        **options,
    )


def upgrade() -> None:
    if op.get_context().dialect.name != "mysql":
        return
    options = _options()
    _sessions(options)
    _memories(options)


def downgrade() -> None:
    if op.get_context().dialect.name != "mysql":
        return
    for event in _TRIGGERS:
        op.execute(f"DROP TRIGGER IF EXISTS sqlstore_memories_counted_{event}")
    for table in _TABLES:
        op.drop_table(table)
