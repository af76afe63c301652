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

from sqlalchemy import Table, text
from sqlalchemy.engine import Connection

from ..schema import ALEMBIC_VERSION_TABLE, app_state, metadata, sessions
from .citus import APPEND_FUNCTION, WRITE_MEMORIES_FUNCTION
from .memory import MEMORY_COMPARED, MEMORY_UPDATABLE, PG_COLUMN_TYPES
from .schema_version import lock_migrations

__all__ = [
    "DISTRIBUTION_COLUMN",
    "ROW_TRIGGERS",
    "citus_installed",
    "distribute",
    "distributed_tables",
    "layout",
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
DECLARE
  new_term text;
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
    -- a single-row statement per term, in term order: each is routed to this shard
    -- and run here (an INSERT ... SELECT would be planned through intermediate results)
    FOR new_term IN
      SELECT x.term FROM unnest(string_to_array(NEW.terms, ' ')
                                || ('~' || sqlstore_length_class(NEW.token_count))) AS x(term)
       ORDER BY 1
    LOOP
      INSERT INTO sqlstore_memory_terms AS t (app_name, user_id, term, df)
      VALUES (NEW.app_name, NEW.user_id, new_term, 1)
      ON CONFLICT (app_name, user_id, term) DO UPDATE SET df = t.df + 1;
    END LOOP;
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


_APPEND_SIGNATURE = (
    f"{APPEND_FUNCTION}(text, text, text, bigint, text, double precision, text, text, text,"
    " double precision, text, text[], text[], text[], text[], text[], text[], double precision)"
)
_APPEND = f"""
CREATE OR REPLACE FUNCTION {APPEND_FUNCTION}(
  p_app_name text, p_user_id text, p_session_id text, p_expected_revision bigint,
  p_expected_incarnation text, p_update_time double precision, p_event_id text,
  p_invocation_id text, p_author text, p_timestamp double precision, p_data text,
  p_session_keys text[], p_session_values text[], p_user_keys text[], p_user_values text[],
  p_app_keys text[], p_app_values text[], p_now double precision
) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  new_revision bigint;
  i integer;
BEGIN
  UPDATE sqlstore_sessions SET revision = revision + 1, update_time = p_update_time
   WHERE app_name = p_app_name AND user_id = p_user_id AND id = p_session_id
     AND revision = p_expected_revision
     AND (p_expected_incarnation IS NULL OR incarnation = p_expected_incarnation)
  RETURNING revision INTO new_revision;
  IF new_revision IS NULL THEN
    RETURN NULL;
  END IF;
  INSERT INTO sqlstore_events
      (app_name, user_id, session_id, seq, id, invocation_id, author, timestamp, data)
  VALUES (p_app_name, p_user_id, p_session_id, new_revision, p_event_id, p_invocation_id,
          p_author, p_timestamp, p_data);
  FOR i IN 1 .. coalesce(array_length(p_session_keys, 1), 0) LOOP
    INSERT INTO sqlstore_session_state (app_name, user_id, session_id, key, value)
    VALUES (p_app_name, p_user_id, p_session_id, p_session_keys[i], p_session_values[i])
    ON CONFLICT (app_name, user_id, session_id, key) DO UPDATE SET value = EXCLUDED.value;
  END LOOP;
  FOR i IN 1 .. coalesce(array_length(p_user_keys, 1), 0) LOOP
    INSERT INTO sqlstore_user_state (app_name, user_id, key, value, update_time)
    VALUES (p_app_name, p_user_id, p_user_keys[i], p_user_values[i], p_now)
    ON CONFLICT (app_name, user_id, key)
    DO UPDATE SET value = EXCLUDED.value, update_time = EXCLUDED.update_time;
  END LOOP;
  FOR i IN 1 .. coalesce(array_length(p_app_keys, 1), 0) LOOP
    INSERT INTO sqlstore_app_state (app_name, key, value, update_time)
    VALUES (p_app_name, p_app_keys[i], p_app_values[i], p_now)
    ON CONFLICT (app_name, key)
    DO UPDATE SET value = EXCLUDED.value, update_time = EXCLUDED.update_time;
  END LOOP;
  RETURN new_revision;
END
$$
"""
"""An append on Citus: :mod:`.hot_paths`' append (the revision guard, the event, the
state keys) as a function distributed by its ``p_user_id`` and colocated with the
sessions, so that Citus runs the whole call on the worker that holds the user's shard
(function call delegation: one hop from the coordinator, the statements executed
locally there, a one-phase commit). An ``app:`` key makes that worker write the
reference table on every node in two phases."""


def _array_type(column: str) -> str:
    return PG_COLUMN_TYPES.get(column, "TEXT").lower() + "[]"


_COLUMNS = ("id", *MEMORY_UPDATABLE)
_WRITE_MEMORIES_SIGNATURE = (
    f"{WRITE_MEMORIES_FUNCTION}(text, text, double precision, text[], "
    + ", ".join(_array_type(c) for c in _COLUMNS)
    + ")"
)
_CHANGED = " OR ".join(
    f"sqlstore_memories.{c} IS DISTINCT FROM EXCLUDED.{c}" for c in MEMORY_COMPARED
)
_WRITE_MEMORIES = f"""
CREATE OR REPLACE FUNCTION {WRITE_MEMORIES_FUNCTION}(
  p_app_name text, p_user_id text, p_now double precision, p_gone text[],
  {", ".join(f"p_{c} {_array_type(c)}" for c in _COLUMNS)}
) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
  i integer;
BEGIN
  INSERT INTO sqlstore_users (app_name, user_id, create_time)
  VALUES (p_app_name, p_user_id, p_now) ON CONFLICT (app_name, user_id) DO NOTHING;
  IF NOT FOUND THEN
    PERFORM 1 FROM sqlstore_users WHERE app_name = p_app_name AND user_id = p_user_id
      FOR NO KEY UPDATE;
    IF NOT FOUND THEN
      RETURN false;
    END IF;
  END IF;
  IF coalesce(array_length(p_gone, 1), 0) > 0 THEN
    DELETE FROM sqlstore_memories
     WHERE app_name = p_app_name AND user_id = p_user_id AND id = ANY (p_gone);
  END IF;
  FOR i IN 1 .. coalesce(array_length(p_id, 1), 0) LOOP
    INSERT INTO sqlstore_memories (app_name, user_id, {", ".join(_COLUMNS)})
    VALUES (p_app_name, p_user_id, {", ".join(f"p_{c}[i]" for c in _COLUMNS)})
    ON CONFLICT (app_name, user_id, id) DO UPDATE
      SET {", ".join(f"{c} = EXCLUDED.{c}" for c in MEMORY_UPDATABLE)}
      WHERE {_CHANGED};
  END LOOP;
  RETURN true;
END
$$
"""
"""A user's memories written on Citus, as :func:`.ingest.write_memories` writes them on
one server: the user lock (``"exclusive"``, the user's row made if absent; ``false``
and nothing written when the user was forgotten meanwhile), the memories of ids
``p_gone`` deleted, then the rows (one array per column) upserted, unchanged ones left
alone; distributed by ``p_user_id``, so the call runs on the user's worker."""

_FUNCTIONS = (
    (_APPEND, _APPEND_SIGNATURE),
    (_WRITE_MEMORIES, _WRITE_MEMORIES_SIGNATURE),
)


def _create_functions(connection: Connection) -> None:
    """(Re)create the store's functions and distribute each by its ``p_user_id``,
    colocated with the sessions (Citus then delegates a call outside a transaction to
    the worker holding that user's shard)."""
    for definition, signature in _FUNCTIONS:
        connection.exec_driver_sql(definition)
        connection.execute(
            text(
                f"SELECT create_distributed_function('{signature}', 'p_user_id',"
                " colocate_with => 'sqlstore_sessions')"
            )
        )


_RECOUNT = """
DELETE FROM sqlstore_memory_terms;
DELETE FROM sqlstore_memory_stats;
INSERT INTO sqlstore_memory_stats (app_name, user_id, doc_count, lexeme_count)
SELECT app_name, user_id, count(*), sum(token_count) FROM sqlstore_memories
GROUP BY app_name, user_id;
INSERT INTO sqlstore_memory_terms (app_name, user_id, term, df)
SELECT m.app_name, m.user_id, x.term, count(*)
  FROM sqlstore_memories m,
       unnest(string_to_array(m.terms, ' ')
              || ('~' || sqlstore_length_class(m.token_count))) AS x(term)
 GROUP BY m.app_name, m.user_id, x.term
"""
"""The search statistics counted again from the memories (statements separated by
``;``), each statement of colocated tables run on every shard at once."""


def _run_script(connection: Connection, script: str, separator: str) -> None:
    for statement in script.split(separator):
        if statement.strip():
            connection.exec_driver_sql(statement)


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
    """Distribute the store's tables over the Citus cluster (see the module's text),
    idempotently, a step per transaction under the migration lock (committed on
    ``connection`` as it goes: Citus records a table's sequence and the functions it
    propagates over connections of its own, which must see what came before).

    Returns:
        The tables this call distributed (or made reference tables), in the order it
        did; empty when all already were, or when Citus is not installed here.

    Also (re)creates the store's distributed functions (:mod:`.citus`' names) and, when
    it distributed the memories, counts their search statistics again (the copy of a
    store's rows into the shards ran the row triggers over them).

    Raises:
        ValueError: a table of the schema has no ``user_id`` and is not the app state.
        sqlalchemy.exc.DBAPIError: Citus refused.
    """
    if not citus_installed(connection):
        return []
    done = []
    while (table := _next_table(connection)) is not None:
        _distribute_table(connection, table)
        connection.commit()
        done.append(table.name)
    _step(connection)
    if "sqlstore_memories" in done:
        _run_script(connection, _RECOUNT, ";")
    # the functions every time: a newer version of the library may have changed them
    _create_functions(connection)
    connection.commit()
    return done


def _step(connection: Connection) -> None:
    """Begin a step: the migration lock, Citus's settings for it."""
    lock_migrations(connection)
    # Colocated tables with foreign keys between them: Citus asks for its sequential
    # mode; the statistics triggers write colocated tables: allowed when told so.
    connection.execute(text("SET LOCAL citus.multi_shard_modify_mode TO 'sequential'"))
    connection.execute(text("SET LOCAL citus.enable_unsafe_triggers TO on"))


_LAST = ("sqlstore_memories", "sqlstore_memory_embeddings")
"""Distributed last: the copy of a store's memories into the shards runs the statistics
triggers, which write the statistics tables, distributed by then (and the vectors refer
to the memories)."""


def _next_table(connection: Connection) -> Table | None:
    """The next table to distribute (sessions first: the others are colocated with
    it), in a new step; before the memories, their keys and triggers made Citus's (and
    committed)."""
    _step(connection)
    known = distributed_tables(connection)
    tables = sorted(
        (t for t in metadata.sorted_tables if t.name != ALEMBIC_VERSION_TABLE),
        key=lambda t: (t is not sessions, _LAST.index(t.name) if t.name in _LAST else -1),
    )
    todo = [t for t in tables if t.name not in known]
    if not todo:
        return None
    if todo[0].name == "sqlstore_memories" and (
        _has_statement_triggers(connection) or not _memory_key_has_user(connection)
    ):
        if _has_statement_triggers(connection):
            _run_script(connection, ROW_TRIGGERS, ";;")
        if not _memory_key_has_user(connection):
            _run_script(connection, _KEYS_WITH_USER, ";")
        connection.commit()
        _step(connection)
    return todo[0]


def _distribute_table(connection: Connection, table: Table) -> None:
    if table is app_state:
        connection.execute(text(f"SELECT create_reference_table('{table.name}')"))
    elif DISTRIBUTION_COLUMN in table.c:
        connection.execute(
            text(
                f"SELECT create_distributed_table('{table.name}', '{DISTRIBUTION_COLUMN}',"
                " colocate_with => :colocate)"
            ),
            {"colocate": "none" if table is sessions else sessions.name},
        )
    else:
        raise ValueError(
            f"{table.name} has no {DISTRIBUTION_COLUMN} column and is not the app state:"
            " say in adk_sqlstore.sql.distribution how Citus should place it"
        )
