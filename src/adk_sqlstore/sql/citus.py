"""Citus (distributed PostgreSQL): the store's tables spread over a cluster by user.

Where the ``citus`` extension is installed in the database, ``adk-sqlstore migrate``
runs :func:`distribute` after the migrations: every table of :mod:`adk_sqlstore.schema`
that has a ``user_id`` column becomes a distributed table with ``user_id`` as its
distribution column, all colocated with ``sqlstore_sessions`` (a user's sessions,
events, state, memories, artifacts and facts on one shard); ``sqlstore_app_state``
(``app:`` keys, shared by the users of an app) a reference table, copied to every node;
the Alembic version table stays on the coordinator. The table list is the schema's
own, so a table a later migration adds is distributed by the same command; a table
with neither ``user_id`` nor a place below fails loudly (:class:`ValueError`).

Citus refuses two things the single-server schema has, which :func:`distribute`
changes first (both only on a Citus database):

- a primary key or unique constraint without the distribution column:
  ``sqlstore_memories``' surrogate key ``pk`` becomes ``(user_id, pk)``, and the vectors'
  key and foreign key, ``(memory_pk)``, become ``(user_id, memory_pk)``;
- statement-level triggers over transition tables: the search statistics
  (``sqlstore_memory_stats``, ``sqlstore_memory_terms``, migration 0006) are kept by
  row-level triggers instead, with the same counts (a write per memory and per term
  of it, on the memory's own shard).

Idempotent: a table already in ``pg_dist_partition`` is left alone, and each change is
made only where it is missing. Source: Citus's documentation, "Distributing tables"
and "Reference tables" (create_distributed_table, colocate_with, create_reference_table).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncConnection

from ..schema import ALEMBIC_VERSION_TABLE, app_state, metadata, sessions

__all__ = [
    "DISTRIBUTION_COLUMN",
    "ROW_TRIGGERS",
    "citus_installed",
    "detect_citus",
    "distribute",
    "distributed_tables",
    "layout",
    "on_citus",
]

DISTRIBUTION_COLUMN = "user_id"
"""Every distributed table's distribution column."""

ROW_TRIGGERS = """
CREATE OR REPLACE FUNCTION sqlstore_memories_counted_row() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP IN ('DELETE', 'UPDATE') THEN
    UPDATE sqlstore_memory_stats
       SET doc_count = doc_count - 1,
           lexeme_count = lexeme_count - OLD.token_count
     WHERE app_name = OLD.app_name AND user_id = OLD.user_id;
  END IF;
  IF TG_OP IN ('INSERT', 'UPDATE') THEN
    INSERT INTO sqlstore_memory_stats AS s (app_name, user_id, doc_count, lexeme_count)
    VALUES (NEW.app_name, NEW.user_id, 1, NEW.token_count)
    ON CONFLICT (app_name, user_id) DO UPDATE
       SET doc_count = s.doc_count + 1, lexeme_count = s.lexeme_count + EXCLUDED.lexeme_count;
  END IF;
  RETURN NULL;
END
$$
;;
CREATE OR REPLACE FUNCTION sqlstore_memory_terms_counted_row() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP IN ('DELETE', 'UPDATE') THEN
    DELETE FROM sqlstore_memory_terms
     WHERE app_name = OLD.app_name AND user_id = OLD.user_id AND df <= 1
       AND term = ANY (string_to_array(OLD.terms, ' ')
                       || ('~' || sqlstore_length_class(OLD.token_count)));
    UPDATE sqlstore_memory_terms SET df = df - 1
     WHERE app_name = OLD.app_name AND user_id = OLD.user_id
       AND term = ANY (string_to_array(OLD.terms, ' ')
                       || ('~' || sqlstore_length_class(OLD.token_count)));
  END IF;
  IF TG_OP IN ('INSERT', 'UPDATE') THEN
    INSERT INTO sqlstore_memory_terms AS t (app_name, user_id, term, df)
    SELECT NEW.app_name, NEW.user_id, x.term, 1
      FROM unnest(string_to_array(NEW.terms, ' ')
                  || ('~' || sqlstore_length_class(NEW.token_count))) AS x(term)
     ORDER BY 3
    ON CONFLICT (app_name, user_id, term) DO UPDATE SET df = t.df + 1;
  END IF;
  RETURN NULL;
END
$$
;;
DROP TRIGGER IF EXISTS sqlstore_memories_counted_insert ON sqlstore_memories;;
DROP TRIGGER IF EXISTS sqlstore_memories_counted_update ON sqlstore_memories;;
DROP TRIGGER IF EXISTS sqlstore_memories_counted_delete ON sqlstore_memories;;
DROP TRIGGER IF EXISTS sqlstore_memories_terms_insert ON sqlstore_memories;;
DROP TRIGGER IF EXISTS sqlstore_memories_terms_update ON sqlstore_memories;;
DROP TRIGGER IF EXISTS sqlstore_memories_terms_delete ON sqlstore_memories;;
CREATE TRIGGER sqlstore_memories_counted_row
  AFTER INSERT OR UPDATE OR DELETE ON sqlstore_memories
  FOR EACH ROW EXECUTE FUNCTION sqlstore_memories_counted_row();;
CREATE TRIGGER sqlstore_memories_terms_counted_row
  AFTER INSERT OR UPDATE OR DELETE ON sqlstore_memories
  FOR EACH ROW EXECUTE FUNCTION sqlstore_memory_terms_counted_row();;
"""
"""The search statistics kept per row: the migrations' statement-level triggers over
transition tables, which Citus refuses on distributed tables, replaced (statements
separated by ``;;``)."""

_KEYS_WITH_USER = """
ALTER TABLE sqlstore_memory_embeddings
  DROP CONSTRAINT fk_sqlstore_memory_embeddings_sqlstore_memories,
  DROP CONSTRAINT pk_sqlstore_memory_embeddings;
ALTER TABLE sqlstore_memories DROP CONSTRAINT pk_sqlstore_memories;
ALTER TABLE sqlstore_memories ADD CONSTRAINT pk_sqlstore_memories PRIMARY KEY (user_id, pk);
ALTER TABLE sqlstore_memory_embeddings
  ADD CONSTRAINT pk_sqlstore_memory_embeddings PRIMARY KEY (user_id, memory_pk),
  ADD CONSTRAINT fk_sqlstore_memory_embeddings_sqlstore_memories
    FOREIGN KEY (user_id, memory_pk) REFERENCES sqlstore_memories (user_id, pk)
    ON DELETE CASCADE;
"""
"""The memories' surrogate key and the vectors' keys, with the distribution column
(statements separated by ``;``)."""


def _run_script(connection: Connection, script: str, separator: str) -> None:
    for statement in script.split(separator):
        if statement.strip():
            connection.exec_driver_sql(statement)


_FLAG = "adk_sqlstore_citus"  # on the engine's dialect, shared by its views and twins


def on_citus(bound: Any) -> bool:
    """Whether ``bound`` (a connection or engine, sync or async) reaches a database whose
    tables are distributed by Citus, as :func:`detect_citus` found: its per-user writes
    are then plain statements (single-row or multi-row ``VALUES``, ``UPDATE`` and
    ``DELETE`` filtered on ``user_id``), which Citus routes to the user's one shard and
    commits there in one phase; data-modifying CTEs and ``INSERT ... SELECT`` from
    arrays, the single server's one-round-trip forms, would be planned through the
    coordinator and committed in two phases on every worker."""
    return bool(getattr(bound.dialect, _FLAG, False))


_DETECT = text("/* catalog */ SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')")
_DISTRIBUTED = text(
    "/* catalog */ SELECT EXISTS (SELECT 1 FROM pg_dist_partition"
    " WHERE logicalrelid = to_regclass('sqlstore_sessions'))"
)


async def detect_citus(conn: AsyncConnection) -> bool:
    """Find whether the store's tables are distributed by Citus, and remember it on the
    engine's dialect (:func:`on_citus`). PostgreSQL only; two catalog reads."""
    found = False
    if conn.dialect.name == "postgresql" and (await conn.execute(_DETECT)).scalar():
        found = bool((await conn.execute(_DISTRIBUTED)).scalar())
    setattr(conn.dialect, _FLAG, found)
    return found


def citus_installed(connection: Connection) -> bool:
    """Whether the ``citus`` extension is installed in this PostgreSQL database."""
    if connection.dialect.name != "postgresql":
        return False
    found = connection.execute(text("SELECT 1 FROM pg_extension WHERE extname = 'citus'"))
    return found.first() is not None


def distributed_tables(connection: Connection) -> dict[str, str]:
    """The store's tables Citus knows, by name: ``"distributed"`` or ``"reference"``."""
    rows = connection.execute(
        text(
            "SELECT logicalrelid::regclass::text, partmethod::text FROM pg_dist_partition"
            " WHERE logicalrelid::regclass::text LIKE 'sqlstore\\_%'"
        )
    ).all()
    return {name: "reference" if method == "n" else "distributed" for name, method in rows}


def layout(connection: Connection) -> tuple[dict[str, str], int] | None:
    """:func:`distributed_tables` and the number of active worker nodes, or ``None``
    where Citus is not installed."""
    if not citus_installed(connection):
        return None
    workers = connection.execute(text("SELECT count(*) FROM citus_get_active_worker_nodes()"))
    return distributed_tables(connection), int(workers.scalar_one())


def _has_statement_triggers(connection: Connection) -> bool:
    found = connection.execute(
        text(
            "SELECT 1 FROM pg_trigger WHERE tgrelid = 'sqlstore_memories'::regclass"
            " AND tgname = 'sqlstore_memories_counted_insert'"
        )
    )
    return found.first() is not None


def _memory_key_has_user(connection: Connection) -> bool:
    key = connection.execute(
        text(
            "SELECT pg_get_constraintdef(oid) FROM pg_constraint"
            " WHERE conname = 'pk_sqlstore_memories'"
        )
    ).scalar_one()
    return "user_id" in str(key)


def distribute(connection: Connection) -> list[str]:
    """Distribute the store's tables over the Citus cluster (see the module's text), in
    the caller's transaction, idempotently.

    Returns:
        The tables this call distributed (or made reference tables), in schema order;
        empty when all already were, or when Citus is not installed here.

    Raises:
        ValueError: a table of the schema has no ``user_id`` and is not the app state.
        sqlalchemy.exc.DBAPIError: Citus refused (e.g. no worker node was added: the
            tables are then distributed onto the coordinator alone).
    """
    if not citus_installed(connection):
        return []
    known = distributed_tables(connection)
    # sessions first: the others are colocated with it
    tables = sorted(
        (t for t in metadata.sorted_tables if t.name != ALEMBIC_VERSION_TABLE),
        key=lambda t: t is not sessions,
    )
    todo = [t for t in tables if t.name not in known]
    if not todo:
        return []
    # Colocated tables with foreign keys between them, in one transaction: Citus asks
    # for its sequential mode there.
    connection.execute(text("SET LOCAL citus.multi_shard_modify_mode TO 'sequential'"))
    connection.execute(text("SET LOCAL citus.enable_unsafe_triggers TO on"))
    if "sqlstore_memories" not in known:
        if _has_statement_triggers(connection):
            _run_script(connection, ROW_TRIGGERS, ";;")
        if not _memory_key_has_user(connection):
            _run_script(connection, _KEYS_WITH_USER, ";")
    done = []
    for table in todo:
        if table is app_state:
            connection.execute(text(f"SELECT create_reference_table('{table.name}')"))
        elif DISTRIBUTION_COLUMN in table.c:
            connection.execute(
                text(
                    f"SELECT create_distributed_table('{table.name}', '{DISTRIBUTION_COLUMN}',"
                    f" colocate_with => :colocate)"
                ),
                {"colocate": "none" if table is sessions else sessions.name},
            )
        else:
            raise ValueError(
                f"{table.name} has no {DISTRIBUTION_COLUMN} column and is not the app state:"
                " say in adk_sqlstore.sql.citus how Citus should place it"
            )
        done.append(table.name)
    return done
