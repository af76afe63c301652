"""The tables, declared once with SQLAlchemy Core.

Alembic migrations (``migrations/``) are the only thing that creates them; this
module is what the queries are written against and what the migration test compares
the migrated database with. Every table is prefixed ``sqlstore_`` so that it can
share a database with ADK's own ``DatabaseSessionService`` tables (``sessions``,
``events``, ...), and every key leads with ``(app_name, user_id)``.

Times are ``DOUBLE PRECISION`` seconds since the Unix epoch (UTC), so an event's
float timestamp comes back bit-for-bit on every dialect. JSON is stored as text
written by this library: PostgreSQL ``jsonb`` cannot hold ``U+0000`` and rewrites
floats such as ``1e308``, MySQL's ``JSON`` type reorders keys and rewrites numbers, and
state must round-trip exactly.

MySQL and MariaDB (InnoDB): identifiers and keys are ``VARBINARY`` (:func:`key`), their
UTF-8 bytes: compared exactly (no case or accent folding, no trailing-space padding,
which every ``utf8mb4`` collation but the server-specific ``_nopad_bin``/``_0900_bin``
ones has) and sized in bytes, as the limits of :mod:`adk_sqlstore.validation` are, so
that a key of four identifiers stays within InnoDB's 3,072-byte index limit (as
``VARCHAR(255)`` in ``utf8mb4`` each would count 1,020). The engine reads them back as
text (:func:`adk_sqlstore.engine.mysql_options`). Other text is ``LONGTEXT`` in
``utf8mb4`` with the server's binary no-pad collation (:data:`MYSQL_TEXT`).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    Double,
    ForeignKeyConstraint,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    PrimaryKeyConstraint,
    Table,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.dialects import mysql
from sqlalchemy.types import TypeEngine

__all__ = [
    "ALEMBIC_VERSION_TABLE",
    "IDENTIFIER",
    "MYSQL_TEXT",
    "SEARCH_OBJECTS",
    "app_state",
    "artifact_chunks",
    "artifact_contents",
    "artifacts",
    "events",
    "fact_leases",
    "fact_revisions",
    "fact_sources",
    "facts",
    "include_object",
    "key",
    "memories",
    "memory_embeddings",
    "memory_ingestions",
    "memory_stats",
    "memory_terms",
    "metadata",
    "session_state",
    "sessions",
    "user_state",
    "users",
]

ALEMBIC_VERSION_TABLE = "sqlstore_alembic_version"


class _Utf8Varbinary(mysql.VARBINARY):
    """``VARBINARY`` holding UTF-8 text: a ``str`` is bound as it is (the driver sends
    it in utf8mb4, stored as its bytes) and read back as one (the engine's decoder), so
    SQLAlchemy's conversions to and from ``bytes`` are left out."""

    def bind_processor(self, dialect: Any) -> None:
        return None

    def result_processor(self, dialect: Any, coltype: Any) -> None:
        return None


def key(length: int) -> TypeEngine[str]:
    """A key column of text: ``TEXT``, or ``VARBINARY(length)`` on MySQL (its UTF-8
    bytes, read and written as ``str``)."""
    return Text().with_variant(_Utf8Varbinary(length), "mysql")


IDENTIFIER = key(255)
"""app_name, user_id, session, event and memory ids: at most 255 UTF-8 bytes
(:data:`~adk_sqlstore.validation.MAX_IDENTIFIER_BYTES`)."""
_STATE_KEY = key(1024)  # validation.MAX_STATE_KEY_BYTES
_TERM = key(1040)  # search.analysis.MAX_TERM_CHARS (255) in UTF-8, and "~128"
_TEXT = Text().with_variant(mysql.LONGTEXT(), "mysql")

MYSQL_TEXT = {"mariadb": "utf8mb4_nopad_bin", "mysql": "utf8mb4_0900_bin"}
"""The collation of MySQL and MariaDB tables (their ``LONGTEXT`` columns): ``utf8mb4``
compared by code point, trailing spaces included; the two servers name it apart."""

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

# One row per user of an app that the store holds anything for: the user lock. Every
# transaction that writes a user's rows locks it first, in the mode of what it writes,
# then the rest in one order (adk_sqlstore.sql.users, docs/architecture.md "Locks");
# forget_user locks it exclusively and deletes it with the rest.
users = Table(
    "sqlstore_users",
    metadata,
    Column("app_name", IDENTIFIER, nullable=False),
    Column("user_id", IDENTIFIER, nullable=False),
    Column("create_time", Double, nullable=False),
    PrimaryKeyConstraint("app_name", "user_id"),
)

sessions = Table(
    "sqlstore_sessions",
    metadata,
    Column("app_name", IDENTIFIER, nullable=False),
    Column("user_id", IDENTIFIER, nullable=False),
    Column("id", IDENTIFIER, nullable=False),
    # Optimistic-concurrency token: the number of events appended so far.
    Column("revision", BigInteger, nullable=False),
    Column("create_time", Double, nullable=False),
    # Random per create: a deleted and re-created session is another incarnation.
    Column("incarnation", IDENTIFIER, nullable=False, server_default=text("''")),
    Column("update_time", Double, nullable=False),
    PrimaryKeyConstraint("app_name", "user_id", "id"),
)

events = Table(
    "sqlstore_events",
    metadata,
    Column("app_name", IDENTIFIER, nullable=False),
    Column("user_id", IDENTIFIER, nullable=False),
    Column("session_id", IDENTIFIER, nullable=False),
    # Append order within the session: the session revision the append produced.
    Column("seq", BigInteger, nullable=False),
    Column("id", IDENTIFIER, nullable=False),
    Column("invocation_id", _TEXT, nullable=False),
    Column("author", _TEXT, nullable=False),
    Column("timestamp", Double, nullable=False),
    # The whole event as JSON text, so no field is lost.
    Column("data", _TEXT, nullable=False),
    PrimaryKeyConstraint("app_name", "user_id", "session_id", "seq"),
    UniqueConstraint("app_name", "user_id", "session_id", "id"),
    ForeignKeyConstraint(
        ["app_name", "user_id", "session_id"],
        ["sqlstore_sessions.app_name", "sqlstore_sessions.user_id", "sqlstore_sessions.id"],
        ondelete="CASCADE",
    ),
)

session_state = Table(
    "sqlstore_session_state",
    metadata,
    Column("app_name", IDENTIFIER, nullable=False),
    Column("user_id", IDENTIFIER, nullable=False),
    Column("session_id", IDENTIFIER, nullable=False),
    Column("key", _STATE_KEY, nullable=False),
    Column("value", _TEXT, nullable=False),
    PrimaryKeyConstraint("app_name", "user_id", "session_id", "key"),
    ForeignKeyConstraint(
        ["app_name", "user_id", "session_id"],
        ["sqlstore_sessions.app_name", "sqlstore_sessions.user_id", "sqlstore_sessions.id"],
        ondelete="CASCADE",
    ),
)

user_state = Table(
    "sqlstore_user_state",
    metadata,
    Column("app_name", IDENTIFIER, nullable=False),
    Column("user_id", IDENTIFIER, nullable=False),
    Column("key", _STATE_KEY, nullable=False),
    Column("value", _TEXT, nullable=False),
    Column("update_time", Double, nullable=False),
    PrimaryKeyConstraint("app_name", "user_id", "key"),
)

app_state = Table(
    "sqlstore_app_state",
    metadata,
    Column("app_name", IDENTIFIER, nullable=False),
    Column("key", _STATE_KEY, nullable=False),
    Column("value", _TEXT, nullable=False),
    Column("update_time", Double, nullable=False),
    PrimaryKeyConstraint("app_name", "key"),
)


# -- long-term memory ----------------------------------------------------------------

memories = Table(
    "sqlstore_memories",
    metadata,
    # Surrogate key: SQLite's FTS5 index refers to rows by this integer (an alias of
    # the rowid, so VACUUM cannot renumber it).
    Column(
        "pk", BigInteger().with_variant(Integer(), "sqlite"), primary_key=True, autoincrement=True
    ),
    Column("app_name", IDENTIFIER, nullable=False),
    Column("user_id", IDENTIFIER, nullable=False),
    # The memory's id: derived from (session_id, event_id) for events, so that
    # re-ingesting an event updates its row; random for distilled facts.
    Column("id", IDENTIFIER, nullable=False),
    Column("session_id", IDENTIFIER, nullable=True),
    Column("event_id", IDENTIFIER, nullable=True),
    Column("author", _TEXT, nullable=True),
    Column("timestamp", Double, nullable=False),
    # The remembered Content as JSON (text parts only, after the ingestion filter).
    Column("content", _TEXT, nullable=False),
    # The indexed form: author and text, NUL removed, length-capped.
    Column("text", _TEXT, nullable=False),
    # The index terms of the indexed form, space-separated and distinct
    # (search.analysis): PostgreSQL's tsvector and SQLite's FTS5 index are made of them.
    Column("terms", _TEXT, nullable=False, server_default=text("''")),
    # The analysis the terms come from ("<version>:<language>", Analyzer.signature).
    Column("analysis", _TEXT, nullable=False, server_default=text("''")),
    # The number of terms: the BM25 length.
    Column("token_count", Integer, nullable=False),
    Column("custom_metadata", _TEXT, nullable=False),
    # (app_name, user_id) as one token for SQLite FTS5 (see text.search_scope).
    Column("search_scope", _TEXT, nullable=False),
    Column("update_time", Double, nullable=False),
    UniqueConstraint("app_name", "user_id", "id"),
    Index(None, "app_name", "user_id", "session_id"),
)

# Per user: how many memories, and how long they are in all (PostgreSQL: tsvector
# lexemes; SQLite: token_count); BM25 needs the count and the average length. Kept by
# triggers.
memory_stats = Table(
    "sqlstore_memory_stats",
    metadata,
    Column("app_name", IDENTIFIER, nullable=False),
    Column("user_id", IDENTIFIER, nullable=False),
    Column("doc_count", BigInteger, nullable=False),
    Column("lexeme_count", BigInteger, nullable=False),
    PrimaryKeyConstraint("app_name", "user_id"),
)

# Per user and term: how many of the user's memories hold the term (BM25's document
# frequency), and per length class "~L" how many memories are in it. Kept by triggers;
# a term's row goes when no memory holds it any more.
memory_terms = Table(
    "sqlstore_memory_terms",
    metadata,
    Column("app_name", IDENTIFIER, nullable=False),
    Column("user_id", IDENTIFIER, nullable=False),
    Column("term", _TERM, nullable=False),
    Column("df", BigInteger, nullable=False),
    PrimaryKeyConstraint("app_name", "user_id", "term"),
    sqlite_with_rowid=False,
)

# One embedding per memory (hybrid search): the embedder's model and dimensions, the
# SHA-256 of what was embedded (the memory is embedded again when it changes), and the
# vector: little-endian float32 (SQLite BLOB; PostgreSQL pgvector's ``vector`` where
# the extension exists, else ``bytea``, unused). Deleted with its memory.
memory_embeddings = Table(
    "sqlstore_memory_embeddings",
    metadata,
    Column("memory_pk", BigInteger().with_variant(Integer(), "sqlite"), nullable=False),
    Column("app_name", IDENTIFIER, nullable=False),
    Column("user_id", IDENTIFIER, nullable=False),
    Column("model", IDENTIFIER, nullable=False),
    Column("dimensions", Integer, nullable=False),
    Column("text_sha256", _TEXT, nullable=False),
    Column("embedding", LargeBinary().with_variant(mysql.LONGBLOB(), "mysql"), nullable=False),
    Column("update_time", Double, nullable=False),
    PrimaryKeyConstraint("memory_pk"),
    ForeignKeyConstraint(["memory_pk"], ["sqlstore_memories.pk"], ondelete="CASCADE"),
    # The user's vectors of one model and length; with update_time, their fingerprint
    # (count, keys, latest change) is read from the index alone (search.hybrid's cache).
    Index(
        "ix_sqlstore_memory_embeddings_user_vectors",
        "app_name",
        "user_id",
        "model",
        "dimensions",
        "update_time",
    ),
)

# Which revision of each session memory holds (for idle ingestion).
memory_ingestions = Table(
    "sqlstore_memory_ingestions",
    metadata,
    Column("app_name", IDENTIFIER, nullable=False),
    Column("user_id", IDENTIFIER, nullable=False),
    Column("session_id", IDENTIFIER, nullable=False),
    Column("revision", BigInteger, nullable=True),
    Column("event_count", BigInteger, nullable=False),
    Column("ingest_time", Double, nullable=False),
    PrimaryKeyConstraint("app_name", "user_id", "session_id"),
)

# -- artifacts ------------------------------------------------------------------------

# One row per version of an artifact (ADK's artifact service): session_id is "" for the
# user's own artifacts ("user:" filenames); the part as JSON without its bytes, which
# are in artifact_contents (once per user and SHA-256) and artifact_chunks.
artifacts = Table(
    "sqlstore_artifacts",
    metadata,
    Column("app_name", IDENTIFIER, nullable=False),
    Column("user_id", IDENTIFIER, nullable=False),
    Column("session_id", IDENTIFIER, nullable=False),
    Column("filename", key(1024), nullable=False),
    Column("version", BigInteger, nullable=False),
    Column("mime_type", _TEXT, nullable=True),
    Column("custom_metadata", _TEXT, nullable=False),
    Column("create_time", Double, nullable=False),
    Column("part", _TEXT, nullable=False),
    Column("content_sha256", key(64), nullable=True),
    Column("size", BigInteger, nullable=True),
    PrimaryKeyConstraint("app_name", "user_id", "session_id", "filename", "version"),
    Index(None, "app_name", "user_id", "content_sha256"),
)

artifact_contents = Table(
    "sqlstore_artifact_contents",
    metadata,
    Column("app_name", IDENTIFIER, nullable=False),
    Column("user_id", IDENTIFIER, nullable=False),
    Column("sha256", key(64), nullable=False),
    Column("size", BigInteger, nullable=False),
    Column("chunk_count", Integer, nullable=False),
    PrimaryKeyConstraint("app_name", "user_id", "sha256"),
)

# The bytes of a content, in order (seq from 0), at most ARTIFACT_CHUNK_BYTES each; a
# content being streamed in is written under a "pending-..." key first.
artifact_chunks = Table(
    "sqlstore_artifact_chunks",
    metadata,
    Column("app_name", IDENTIFIER, nullable=False),
    Column("user_id", IDENTIFIER, nullable=False),
    Column("sha256", key(64), nullable=False),
    Column("seq", Integer, nullable=False),
    Column("data", LargeBinary().with_variant(mysql.LONGBLOB(), "mysql"), nullable=False),
    PrimaryKeyConstraint("app_name", "user_id", "sha256", "seq"),
)

# Memory generation (migration 0012). A fact a model extracted from conversations (or
# imported): current while invalid_at is NULL (and expire_at, if any, is ahead); a
# current fact is also a row of sqlstore_memories with the same id, which search finds.
facts = Table(
    "sqlstore_facts",
    metadata,
    Column("app_name", IDENTIFIER, nullable=False),
    Column("user_id", IDENTIFIER, nullable=False),
    Column("id", IDENTIFIER, nullable=False),
    Column("text", _TEXT, nullable=False),
    Column("topics", _TEXT, nullable=False),  # a JSON list of topic names
    Column("valid_from", Double, nullable=True),  # when it became true (seconds, UTC)
    Column("invalid_at", Double, nullable=True),  # when it stopped being true
    Column("expire_at", Double, nullable=True),  # its time to live's end
    Column("session_id", IDENTIFIER, nullable=True),  # the source of its text
    Column("event_ids", _TEXT, nullable=False),  # a JSON list: that source's events
    Column("revision_count", Integer, nullable=False),
    Column("create_time", Double, nullable=False),
    Column("update_time", Double, nullable=False),
    # Migration 0013: when the store learned it stopped being true (invalid_at is when
    # it did), and the fact that said so; the text's normalised SHA-256 (equal facts
    # are one); add_memory's custom_metadata (a JSON object), merged into its memory's.
    Column("invalidate_time", Double, nullable=True),
    Column("invalidated_by", IDENTIFIER, nullable=True),
    Column("text_hash", key(64), nullable=True),
    Column("custom_metadata", _TEXT, nullable=True),
    PrimaryKeyConstraint("app_name", "user_id", "id"),
)

# Every change of a fact, numbered from 1: create, update, invalidate, restore.
fact_revisions = Table(
    "sqlstore_fact_revisions",
    metadata,
    Column("app_name", IDENTIFIER, nullable=False),
    Column("user_id", IDENTIFIER, nullable=False),
    Column("fact_id", IDENTIFIER, nullable=False),
    Column("revision", Integer, nullable=False),
    Column("action", key(16), nullable=False),
    Column("old_text", _TEXT, nullable=True),
    Column("new_text", _TEXT, nullable=True),
    Column("session_id", IDENTIFIER, nullable=True),
    Column("event_ids", _TEXT, nullable=False),
    Column("model", _TEXT, nullable=True),
    Column("create_time", Double, nullable=False),
    # Migration 0013: an invalidation's time the fact stopped being true, and the fact
    # that contradicted it (of an invalidate or restore revision).
    Column("invalid_at", Double, nullable=True),
    Column("by_fact_id", IDENTIFIER, nullable=True),
    PrimaryKeyConstraint("app_name", "user_id", "fact_id", "revision"),
)

# Per session: how many of its events generation has processed (the watermark), and
# the failed attempts at the events after it.
fact_sources = Table(
    "sqlstore_fact_sources",
    metadata,
    Column("app_name", IDENTIFIER, nullable=False),
    Column("user_id", IDENTIFIER, nullable=False),
    Column("session_id", IDENTIFIER, nullable=False),
    Column("event_count", Integer, nullable=False),
    Column("attempts", Integer, nullable=False),
    Column("error", _TEXT, nullable=True),  # the last failure's kind, never content
    Column("update_time", Double, nullable=False),
    # Migration 0013: the session's incarnation the watermark belongs to (NULL: a
    # session the store does not hold, or imported before its session).
    Column("incarnation", IDENTIFIER, nullable=True),
    PrimaryKeyConstraint("app_name", "user_id", "session_id"),
)

# Per user generating: who (a random token) may write the user's facts until when
# (seconds, UTC): one generator per user at a time, across processes and machines.
fact_leases = Table(
    "sqlstore_fact_leases",
    metadata,
    Column("app_name", IDENTIFIER, nullable=False),
    Column("user_id", IDENTIFIER, nullable=False),
    Column("holder", key(64), nullable=False),
    Column("lease_until", Double, nullable=False),
    PrimaryKeyConstraint("app_name", "user_id"),
)

SEARCH_OBJECTS: dict[str, dict[str, set[Any]]] = {
    "postgresql": {
        "columns": {("sqlstore_memories", "search_vector")},
        "indexes": {"ix_sqlstore_memories_search"},
        "tables": set(),
    },
    "sqlite": {
        "columns": set(),
        "indexes": set(),
        "tables": {"sqlstore_memories_fts"},
    },
    "mysql": {
        "columns": set(),
        "indexes": set(),
        "tables": {"sqlstore_memory_postings"},
    },
}
"""Full-text search objects each dialect's migration adds beyond the tables above:
PostgreSQL a ``tsvector`` column ``search_vector`` generated from ``terms`` and
``token_count`` (each term with its memory's length class, ``term~L``, and the user's
scope token; ``array_to_tsvector``) in a GIN index with ``search_scope`` (btree_gin,
where it can be created); SQLite a contentless FTS5 table of the scope token and the
classed terms (split at spaces only), kept in sync by triggers (migration 0006); MySQL
and MariaDB an inverted index in a table, ``sqlstore_memory_postings`` (user, classed
term, memory), kept by triggers too (migration 0009). They
are not declared in ``metadata`` because they exist on one dialect only."""

TABLE_PREFIX = "sqlstore_"
"""Every table of this library starts with it: a database may hold others' tables too
(ADK's ``sessions``, ``events``, ...)."""


def include_object(obj: Any, name: str | None, kind: str, reflected: bool, compare_to: Any) -> bool:
    """Alembic's ``include_object`` for this library (``migrations/env.py`` and the
    migration tests): autogenerate and ``alembic check`` compare only this library's
    own tables, leaving out

    - tables of others that share the database (not prefixed ``sqlstore_``, such as
      ADK's ``DatabaseSessionService`` tables): never proposed for dropping;
    - the dialect's full-text search objects (:data:`SEARCH_OBJECTS`), which the
      migration adds on one dialect only and which are not declared in ``metadata``.
    """
    search = {
        key: set().union(*(v[key] for v in SEARCH_OBJECTS.values()))
        for key in ("tables", "indexes", "columns")
    }
    if kind == "table":
        table = name or ""
        return table.startswith(TABLE_PREFIX) and not any(
            table == t or table.startswith(t + "_") for t in search["tables"]
        )
    if kind == "index":
        return name not in search["indexes"]
    if kind == "column":
        return (obj.table.name, name) not in search["columns"]
    return True
