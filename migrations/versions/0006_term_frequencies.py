"""Per-user term frequencies and an impact-ordered full-text index, for searches of
big users.

Two things let a search of a user with 100,000 memories read a few hundred of them
(``adk_sqlstore.search.planner``):

- ``sqlstore_memory_terms``: per ``(app_name, user_id, term)``, how many of the user's
  memories hold the term (BM25's document frequency), and per length class ``~L`` how
  many of them are in it; kept by triggers as memories are inserted, re-indexed and
  deleted. Counting a common word through the full-text index read all its postings
  (78 ms for a word held by 78,000 memories on PostgreSQL); this is one index lookup.
  A row goes when no memory holds the term any more, so ``forget_user`` leaves none
  of the user's words behind.
- Index tokens carry their memory's length class: ``term~L``, ``L`` the lowest length
  of the class the memory's ``token_count`` is in (1, 2, ... 8, 9, 11, 13, 16, 20, 25,
  32, 48, 64, 128; ``adk_sqlstore.search.text.LENGTH_CLASSES``). With term frequency 1,
  a memory's BM25 weight depends on its length alone, so these are impact-ordered
  postings (Anh & Moffat, "Pruned query evaluation using pre-computed impacts", SIGIR
  2006): "the short memories holding both of the user's two most frequent words" is a
  few small index conjunctions (1 ms) instead of reading the 41,000 that hold both.

PostgreSQL: ``search_vector`` is generated from ``terms`` and ``token_count`` (the
scope token of 0005 kept), the class by an immutable SQL function
``sqlstore_length_class(token_count)``; the term counts are kept by a trigger per
statement over its transition tables (one upsert of the statement's terms, in key
order). SQLite: the
FTS5 table is contentless (its tokens are not a column of ``sqlstore_memories``), kept
with the per-user statistics by row triggers; ``json_each`` splits ``terms`` (a term
never holds a space, a control character or a double quote:
``adk_sqlstore.search.analysis``).

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import context, op

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TERMS = "sqlstore_memory_terms"
LENGTH_CLASSES = (1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 13, 16, 20, 25, 32, 48, 64, 128)
"""The lowest length of each class (as ``adk_sqlstore.search.text.LENGTH_CLASSES``,
which a test compares with this frozen copy)."""


def _length_class(count: str) -> str:
    """SQL: the length class of ``count`` (a token count) as text; 0 for none."""
    cases = " ".join(f"WHEN {count} >= {low} THEN '{low}'" for low in reversed(LENGTH_CLASSES))
    return f"(CASE {cases} ELSE '0' END)"


def _classed_terms(terms: str, count: str) -> str:
    """SQL: the space-separated ``terms`` with their memory's length class, ``t~L``."""
    length = _length_class(count)
    return (
        f"(CASE WHEN {terms} = '' THEN ''"
        f" ELSE replace({terms}, ' ', '~' || {length} || ' ') || '~' || {length} END)"
    )


# -- PostgreSQL -------------------------------------------------------------------------

_PG_LENGTH_CLASS = f"""
CREATE FUNCTION sqlstore_length_class(token_count integer) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT {_length_class("token_count")} $$
"""
_PG_CLASSED = (
    "(CASE WHEN terms = '' THEN ''"
    " ELSE replace(terms, ' ', '~' || sqlstore_length_class(token_count) || ' ')"
    " || '~' || sqlstore_length_class(token_count) END)"
)
_PG_VECTORS = {
    "classed": f"array_to_tsvector(array_append(string_to_array({_PG_CLASSED}, ' '),"
    " chr(1) || search_scope))",
    # 0005's: terms and the scope token.
    "scoped": "array_to_tsvector(array_append(string_to_array(terms, ' '),"
    " chr(1) || search_scope))",
}
# The (app_name, user_id, term, count) of the rows of {rows}: their terms, and one
# ``~L`` per row for its length class.
_PG_COUNTS = (
    "(SELECT r.app_name, r.user_id, x.term, count(*) AS n FROM {rows} AS r,"
    " unnest(string_to_array(r.terms, ' ') || ('~' || sqlstore_length_class(r.token_count)))"
    " AS x(term) GROUP BY 1, 2, 3)"
)
_PG_ADDED = f"""
    INSERT INTO {_TERMS} AS t (app_name, user_id, term, df)
    SELECT app_name, user_id, term, n FROM {_PG_COUNTS} AS c ORDER BY 1, 2, 3
    ON CONFLICT (app_name, user_id, term) DO UPDATE SET df = t.df + EXCLUDED.df;"""
_PG_REMOVED = f"""
    DELETE FROM {_TERMS} AS t USING {_PG_COUNTS} AS c
     WHERE t.app_name = c.app_name AND t.user_id = c.user_id AND t.term = c.term
       AND t.df <= c.n;
    UPDATE {_TERMS} AS t SET df = t.df - c.n FROM {_PG_COUNTS} AS c
     WHERE t.app_name = c.app_name AND t.user_id = c.user_id AND t.term = c.term;"""
# An update counts only the rows whose terms, length or owner changed.
_PG_CHANGED = """(SELECT {side}.app_name, {side}.user_id, {side}.terms, {side}.token_count
      FROM old_rows AS o JOIN new_rows AS n ON n.pk = o.pk
     WHERE (o.app_name, o.user_id, o.terms, o.token_count)
           IS DISTINCT FROM (n.app_name, n.user_id, n.terms, n.token_count))"""
_PG_FUNCTION = f"""
CREATE FUNCTION sqlstore_memory_terms_counted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    {_PG_ADDED.format(rows="new_rows")}
  ELSIF TG_OP = 'DELETE' THEN
    {_PG_REMOVED.format(rows="old_rows")}
  ELSE
    {_PG_REMOVED.format(rows=_PG_CHANGED.format(side="o"))}
    {_PG_ADDED.format(rows=_PG_CHANGED.format(side="n"))}
  END IF;
  RETURN NULL;
END
$$
"""
# Named after the statistics triggers (sqlstore_memories_counted_*), which PostgreSQL
# fires first (alphabetical order): a writer locks the user's statistics row before
# any of its term rows, so writers of one user queue there instead of deadlocking.
_PG_TRIGGERS = {
    "insert": "REFERENCING NEW TABLE AS new_rows",
    "update": "REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows",
    "delete": "REFERENCING OLD TABLE AS old_rows",
}


def _pg_search_vector(kind: str) -> None:
    """``search_vector`` generated as ``kind`` and its GIN index (over search_scope
    too where btree_gin exists, as in 0002 and 0005)."""
    op.execute("DROP INDEX ix_sqlstore_memories_search")
    op.execute("ALTER TABLE sqlstore_memories DROP COLUMN search_vector")
    op.execute(
        "ALTER TABLE sqlstore_memories ADD COLUMN search_vector tsvector"
        f" GENERATED ALWAYS AS ({_PG_VECTORS[kind]}) STORED"
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


# -- SQLite -----------------------------------------------------------------------------

_SQLITE_TOKENS = "tokenize=\"ascii tokenchars '_.@/\\:-+#~%=?&'\""
_SQLITE_FTS = {
    # Contentless, one column: the scope token and the classed terms (no classed term
    # is a scope token: it ends in ~L), and which rows hold a token is all it keeps
    # (detail=none: no positions or columns; searches ask for tokens alone). Inserts
    # took half the time of two columns in full detail, the index half the space.
    "classed": "CREATE VIRTUAL TABLE sqlstore_memories_fts USING fts5(tokens,"
    f" content='', detail=none, {_SQLITE_TOKENS})",
    # 0004's: over sqlstore_memories.terms.
    "terms": f"CREATE VIRTUAL TABLE sqlstore_memories_fts USING fts5(search_scope, terms,"
    f" content='sqlstore_memories', content_rowid='pk', {_SQLITE_TOKENS})",
}
_SQLITE_STATS = {
    "insert": """
  INSERT INTO sqlstore_memory_stats(app_name, user_id, doc_count, lexeme_count)
  VALUES (new.app_name, new.user_id, 1, new.token_count)
  ON CONFLICT(app_name, user_id) DO UPDATE
    SET doc_count = doc_count + 1, lexeme_count = lexeme_count + new.token_count;""",
    "delete": """
  UPDATE sqlstore_memory_stats
    SET doc_count = doc_count - 1, lexeme_count = lexeme_count - old.token_count
  WHERE app_name = old.app_name AND user_id = old.user_id;""",
    "update": """
  UPDATE sqlstore_memory_stats
    SET lexeme_count = lexeme_count - old.token_count + new.token_count
  WHERE app_name = new.app_name AND user_id = new.user_id;""",
}


_SQLITE_FTS_COLUMNS = {"classed": "tokens", "terms": "search_scope, terms"}


def _sqlite_fts_row(row: str, kind: str) -> str:
    """SQL: the FTS5 values (rowid, then its columns) of ``row`` (new, old, a row)."""
    if kind == "terms":
        return f"{row}.pk, {row}.search_scope, {row}.terms"
    classed = _classed_terms(f"{row}.terms", f"{row}.token_count")
    return f"{row}.pk, {row}.search_scope || ' ' || {classed}"


def _sqlite_fts_triggers(kind: str) -> list[str]:
    """The FTS5 index and statistics triggers (0004's, with the classed tokens where
    ``kind`` is ``classed``)."""
    columns = _SQLITE_FTS_COLUMNS[kind]
    add = f"INSERT INTO sqlstore_memories_fts(rowid, {columns}) VALUES ({{}});"
    remove = (
        f"INSERT INTO sqlstore_memories_fts(sqlstore_memories_fts, rowid, {columns})"
        " VALUES ('delete', {});"
    )
    new, old = _sqlite_fts_row("new", kind), _sqlite_fts_row("old", kind)
    return [
        "CREATE TRIGGER sqlstore_memories_fts_insert AFTER INSERT ON sqlstore_memories"
        f" BEGIN {add.format(new)} {_SQLITE_STATS['insert']} END",
        "CREATE TRIGGER sqlstore_memories_fts_delete AFTER DELETE ON sqlstore_memories"
        f" BEGIN {remove.format(old)} {_SQLITE_STATS['delete']} END",
        "CREATE TRIGGER sqlstore_memories_fts_update AFTER UPDATE OF search_scope, terms,"
        " token_count ON sqlstore_memories"
        f" BEGIN {remove.format(old)} {add.format(new)} {_SQLITE_STATS['update']} END",
    ]


def _sqlite_search(kind: str) -> None:
    """SQLite's FTS5 table (``kind``: classed, or 0004's terms), its triggers, filled."""
    for event in ("insert", "delete", "update"):
        op.execute(f"DROP TRIGGER IF EXISTS sqlstore_memories_fts_{event}")
    op.execute("DROP TABLE IF EXISTS sqlstore_memories_fts")
    op.execute(_SQLITE_FTS[kind])
    for trigger in _sqlite_fts_triggers(kind):
        op.execute(trigger)
    if kind == "terms":
        op.execute("INSERT INTO sqlstore_memories_fts(sqlstore_memories_fts) VALUES ('rebuild')")
    else:
        op.execute(
            "INSERT INTO sqlstore_memories_fts(rowid, tokens)"
            f" SELECT {_sqlite_fts_row('m', kind)} FROM sqlstore_memories AS m"
        )


def _sqlite_json(row: str) -> str:
    """SQL: ``row``'s terms and its ``~L`` as a JSON array of strings."""
    escaped = f"replace({row}.terms, '\\', '\\\\')"
    length = _length_class(f"{row}.token_count")
    return (
        f"""(CASE WHEN {row}.terms = '' THEN '["~' || {length} || '"]'"""
        f""" ELSE '["' || replace({escaped}, ' ', '","') || '","~' || {length} || '"]' END)"""
    )


def _sqlite_added(row: str) -> str:
    return f"""
  INSERT INTO {_TERMS} (app_name, user_id, term, df)
  SELECT {row}.app_name, {row}.user_id, j.value, 1 FROM json_each({_sqlite_json(row)}) AS j
   WHERE true
  ON CONFLICT (app_name, user_id, term) DO UPDATE SET df = df + 1;"""


def _sqlite_removed(row: str) -> str:
    held = f"term IN (SELECT value FROM json_each({_sqlite_json(row)}))"
    owner = f"app_name = {row}.app_name AND user_id = {row}.user_id"
    return f"""
  DELETE FROM {_TERMS} WHERE {owner} AND df <= 1 AND {held};
  UPDATE {_TERMS} SET df = df - 1 WHERE {owner} AND {held};"""


_SQLITE_TERM_TRIGGERS = {
    "insert": f"AFTER INSERT ON sqlstore_memories BEGIN {_sqlite_added('new')} END",
    "delete": f"AFTER DELETE ON sqlstore_memories BEGIN {_sqlite_removed('old')} END",
    "update": (
        "AFTER UPDATE OF app_name, user_id, terms, token_count ON sqlstore_memories"
        " WHEN old.terms IS NOT new.terms OR old.token_count IS NOT new.token_count"
        " OR old.app_name IS NOT new.app_name OR old.user_id IS NOT new.user_id"
        f" BEGIN {_sqlite_removed('old')} {_sqlite_added('new')} END"
    ),
}

_BACKFILL = {
    "postgresql": f"INSERT INTO {_TERMS} (app_name, user_id, term, df)"
    f" SELECT app_name, user_id, term, n FROM {_PG_COUNTS.format(rows='sqlstore_memories')} AS c",
    "sqlite": f"INSERT INTO {_TERMS} (app_name, user_id, term, df)"
    f" SELECT m.app_name, m.user_id, j.value, count(*)"
    f" FROM sqlstore_memories AS m, json_each({_sqlite_json('m')}) AS j GROUP BY 1, 2, 3",
}


def upgrade() -> None:
    if op.get_context().dialect.name == "mysql":  # 0009 makes its schema whole
        return
    dialect = op.get_bind().dialect.name
    op.create_table(
        _TERMS,
        sa.Column("app_name", sa.Text(), nullable=False),
        sa.Column("user_id", sa.Text(), nullable=False),
        sa.Column("term", sa.Text(), nullable=False),
        sa.Column("df", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("app_name", "user_id", "term", name=f"pk_{_TERMS}"),
        sqlite_with_rowid=False,
    )
    if dialect == "postgresql":
        op.execute(_PG_LENGTH_CLASS)
    op.execute(_BACKFILL[dialect])
    if dialect == "postgresql":
        _pg_search_vector("classed")
        op.execute(_PG_FUNCTION)
        for event, tables in _PG_TRIGGERS.items():
            op.execute(
                f"CREATE TRIGGER sqlstore_memories_terms_{event} AFTER {event.upper()}"
                f" ON sqlstore_memories {tables} FOR EACH STATEMENT"
                " EXECUTE FUNCTION sqlstore_memory_terms_counted()"
            )
    else:
        _sqlite_search("classed")
        for event, body in _SQLITE_TERM_TRIGGERS.items():
            op.execute(f"CREATE TRIGGER sqlstore_memories_terms_{event} {body}")


def downgrade() -> None:
    if op.get_context().dialect.name == "mysql":  # 0009 makes its schema whole
        return
    dialect = op.get_bind().dialect.name
    for event in ("insert", "update", "delete"):
        on = " ON sqlstore_memories" if dialect == "postgresql" else ""
        op.execute(f"DROP TRIGGER sqlstore_memories_terms_{event}{on}")
    if dialect == "postgresql":
        op.execute("DROP FUNCTION sqlstore_memory_terms_counted()")
        _pg_search_vector("scoped")
        op.execute("DROP FUNCTION sqlstore_length_class(integer)")
    else:
        _sqlite_search("terms")
    op.drop_table(_TERMS)
