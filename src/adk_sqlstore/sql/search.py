"""The reads of a memory search, per dialect (the ranking itself is
:mod:`adk_sqlstore.search`).

Every statement reads one user's memories only: ``app_name`` and ``user_id`` in the
WHERE clause, and the user's scope token (``search_scope``) in the full-text index
condition, so that no other user's postings are read. BM25's parameters are bound
(``:k1``, ``:b``, ``:avgdl``, ``:scale``). A wave of a search plan
(:mod:`adk_sqlstore.search.planner`) is one statement, its reads joined by ``UNION
ALL``: each the user's memories matching its index condition (classed terms, ``t~L``:
migration 0006) and holding none of its absent terms, scored over all the query's
terms from their ``terms`` column (idfs added in term order), its best ``:limit`` as
rows ``(score, timestamp, pk)``. The query's terms are bound as ``:t0``, ``:t1``, ...
(``' term '``: a memory holds it where it is in ``' ' || terms || ' '``), their idfs
as ``:w0``, ``:w1``, ...
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from sqlalchemy import bindparam, text
from sqlalchemy.sql.elements import TextClause

__all__ = [
    "MEMORY_ROWS",
    "MEMORY_STATS",
    "PG_CUSTOM_PLANS",
    "PG_SEARCH_INDEX",
    "TERM_STATS",
    "WaveRead",
    "fts5_match",
    "fts5_string",
    "mysql_wave",
    "pg_wave",
    "scope_lexeme",
    "sqlite_memory_rows",
    "sqlite_term_stats",
    "sqlite_wave",
    "tsquery_lexeme",
    "tsquery_of",
]

_ROWS = (
    "SELECT pk, id, session_id, event_id, author, timestamp, content, custom_metadata"
    " FROM sqlstore_memories{hint} WHERE app_name = :app_name AND user_id = :user_id"
    " AND pk IN :pks"
)
MEMORY_ROWS = {
    "postgresql": text(_ROWS.format(hint="")).bindparams(bindparam("pks", expanding=True)),
    "mysql": text(_ROWS.format(hint="")).bindparams(bindparam("pks", expanding=True)),
}
"""Per dialect (PostgreSQL, MySQL; SQLite: :func:`sqlite_memory_rows`): the memories
with row keys ``:pks`` (what a search returns)."""

MEMORY_STATS = text(
    "SELECT doc_count, lexeme_count FROM sqlstore_memory_stats"
    " WHERE app_name = :app_name AND user_id = :user_id"
)
"""The user's number of memories and their total length (BM25's N and avgdl)."""

_STATS_ROW = (
    "SELECT NULL AS term, NULL AS df, doc_count, lexeme_count FROM sqlstore_memory_stats"
    " WHERE app_name = :app_name AND user_id = :user_id"
)
TERM_STATS = {
    # One primary-key lookup per term: with `term = ANY (...)` PostgreSQL may scan all
    # of a big user's terms (it did before the new table had statistics).
    "postgresql": text(
        _STATS_ROW + " UNION ALL SELECT q.term, (SELECT t.df FROM sqlstore_memory_terms t"
        " WHERE t.app_name = :app_name AND t.user_id = :user_id AND t.term = q.term),"
        " NULL, NULL FROM unnest(CAST(:terms AS TEXT[])) AS q(term)"
    ),
}
TERM_STATS["mysql"] = text(
    _STATS_ROW + " UNION ALL SELECT term, df, NULL, NULL FROM sqlstore_memory_terms"
    " WHERE app_name = :app_name AND user_id = :user_id AND term IN :terms"
).bindparams(bindparam("terms", expanding=True))
"""Per dialect (PostgreSQL, MySQL; SQLite: :func:`sqlite_term_stats`): the user's
number of memories and their total length (BM25's N and avgdl), in a row whose
``term`` is NULL, and the document frequency of each of ``:terms`` (NULL or no row: no
memory of the user holds it)."""


def _named(name: str, count: int) -> str:
    return ", ".join(f":{name}_{i}" for i in range(count))


@functools.lru_cache(maxsize=512)
def sqlite_term_stats(terms: int) -> str:
    """:data:`TERM_STATS` for sqlite3 itself (inside aiosqlite's thread), the terms
    bound as ``:term_0`` ... ``:term_{terms-1}``."""
    return (
        _STATS_ROW + " UNION ALL SELECT term, df, NULL, NULL FROM sqlstore_memory_terms"
        f" WHERE app_name = :app_name AND user_id = :user_id AND term IN ({_named('term', terms)})"
    )


@functools.lru_cache(maxsize=1024)
def sqlite_memory_rows(pks: int) -> str:
    """:data:`MEMORY_ROWS` for sqlite3 itself, the row keys bound as ``:pk_0`` ...
    ``:pk_{pks-1}``. By rowid: SQLite's planner took a (app_name, user_id, ...) index and
    read every memory of a big user (28 ms for 100,000)."""
    return _ROWS.format(hint=" NOT INDEXED").replace(":pks", f"({_named('pk', pks)})")


WaveRead = tuple[int, ...]
"""The shape of one read of a wave: the indexes of its absent terms (tested on each
memory; its index condition is bound)."""


def _held_idf(holds: str, weight: str, terms: int) -> str:
    """SQL: the summed idf of the query terms a memory holds, in term order (``holds``
    and ``weight``: the SQL of term ``{i}``'s test and idf)."""
    return " + ".join(
        f"CASE WHEN {holds.format(i=i)} > 0 THEN {weight.format(i=i)} ELSE 0.0 END"
        for i in range(terms)
    )


# -- PostgreSQL ---------------------------------------------------------------------------


def tsquery_lexeme(term: str) -> str:
    """A lexeme as tsquery text: quoted, so that no character is query syntax."""
    return "'" + term.replace("\\", "\\\\").replace("'", "''") + "'"


def scope_lexeme(scope: str) -> str:
    """The user's scope token as PostgreSQL's ``search_vector`` holds it (after
    ``chr(1)``, which no analysed term holds; migration 0005), as tsquery text."""
    return tsquery_lexeme("\x01" + scope)


PG_CUSTOM_PLANS = text("SET LOCAL plan_cache_mode = force_custom_plan")
"""Plan each of this transaction's statements for its own values. asyncpg prepares
statements once per connection, and after five runs PostgreSQL may plan one without its
values (a generic plan): for a search, which knows nothing then of its words, it read
every memory of the user through the b-tree index (850 ms for a user with 100,000
memories, where the GIN index takes 10 ms)."""

PG_SEARCH_INDEX = text(
    "/* catalog */ SELECT indexdef FROM pg_indexes"
    " WHERE indexname = 'ix_sqlstore_memories_search'"
    " AND schemaname = ANY (current_schemas(false))"
)
"""The definition of the full-text index (whether it holds ``search_scope``)."""

_PG_HOLDS = "strpos(x.t, CAST(:t{i} AS TEXT))"
_PG_READ = """(SELECT s.score, m.timestamp, m.pk
FROM sqlstore_memories AS m,
LATERAL (SELECT ' ' || m.terms || ' ' AS t) AS x,
LATERAL (
    SELECT floor(({idf})
        * (CAST(:k1 AS FLOAT8) + 1)
        / (1 + CAST(:k1 AS FLOAT8) * (1 - CAST(:b AS FLOAT8)
           + CAST(:b AS FLOAT8) * m.token_count / CAST(:avgdl AS FLOAT8)))
        * CAST(:scale AS FLOAT8) + 0.5) / CAST(:scale AS FLOAT8) AS score
) AS s
WHERE m.app_name = :app_name AND m.user_id = :user_id AND m.search_scope = :search_scope
  AND ({wanted}){absent}
ORDER BY s.score DESC, m.timestamp DESC, m.pk DESC
LIMIT :limit)"""


def pg_wave(reads: Sequence[tuple[int, WaveRead]], terms: int) -> TextClause:
    """One wave's reads on PostgreSQL, for a query of ``terms`` terms; read ``r`` is
    given as (number of groups, absent terms) and binds ``:wanted_r_0``,
    ``:wanted_r_1``, ... (one tsquery per group, each one GIN scan of a BitmapOr: in
    one tsquery, an OR of conjunctions holds no lexeme every match holds, and GIN then
    read the union of all their postings, 25 ms for 249 memories where the scans
    took 1 ms each)."""
    idf = _held_idf(_PG_HOLDS, "CAST(:w{i} AS FLOAT8)", terms)
    parts = []
    for r, (groups, absent) in enumerate(reads):
        wanted = " OR ".join(
            f"m.search_vector @@ CAST(:wanted_{r}_{g} AS tsquery)" for g in range(groups)
        )
        missing = "".join(f"\n  AND {_PG_HOLDS.format(i=i)} = 0" for i in absent)
        parts.append(_PG_READ.format(r=r, idf=idf, wanted=wanted, absent=missing))
    return text("\nUNION ALL\n".join(parts))


# -- SQLite (FTS5) ------------------------------------------------------------------------


def fts5_string(term: str) -> str:
    """A term as an FTS5 string (quoted: no character is query syntax)."""
    return '"' + term.replace('"', '""') + '"'


def fts5_match(scope: str, groups: Sequence[Sequence[str]]) -> str:
    """An FTS5 MATCH expression for the rows of one user's scope token holding every
    token of one of ``groups`` (the table's one column holds both: migration 0006)."""
    joined = " OR ".join(
        "(" + " AND ".join(fts5_string(t) for t in group) + ")" for group in groups
    )
    return f"{fts5_string(scope)} AND ({joined})"


def tsquery_of(groups: Sequence[Sequence[str]]) -> str:
    """tsquery text for a ``search_vector`` holding every lexeme of one of ``groups``."""
    return " | ".join("(" + " & ".join(tsquery_lexeme(t) for t in group) + ")" for group in groups)


_SQLITE_HOLDS = "instr(' ' || m.terms || ' ', :t{i})"
_SQLITE_READ = """SELECT * FROM (SELECT
    CAST(({idf}) * (:k1 + 1) / (1 + :k1 * (1 - :b + :b * m.token_count / :avgdl))
         * :scale + 0.5 AS INTEGER) / :scale AS score,
    m.timestamp AS timestamp, m.pk AS pk
FROM sqlstore_memories_fts
JOIN sqlstore_memories AS m NOT INDEXED ON m.pk = sqlstore_memories_fts.rowid
WHERE sqlstore_memories_fts MATCH :match_{r} AND m.app_name = :app_name
  AND m.user_id = :user_id{absent}
ORDER BY score DESC, m.timestamp DESC, m.pk DESC
LIMIT :limit)"""


def sqlite_wave(reads: Sequence[WaveRead], terms: int) -> TextClause:
    """One wave's reads on SQLite, for a query of ``terms`` terms; read ``r`` binds
    ``:match_r`` (:func:`fts5_match`)."""
    idf = _held_idf(_SQLITE_HOLDS, ":w{i}", terms)
    parts = []
    for r, absent in enumerate(reads):
        missing = "".join(f"\n  AND {_SQLITE_HOLDS.format(i=i)} = 0" for i in absent)
        parts.append(_SQLITE_READ.format(r=r, idf=idf, absent=missing))
    return text("\nUNION ALL\n".join(parts))


# -- MySQL and MariaDB (an inverted index in a table) -------------------------------------

_MYSQL_HOLDS = "LOCATE(:t{i}, CONCAT(' ', m.terms, ' '))"
_MYSQL_READ = """(SELECT FLOOR(({idf})
        * (CAST(:k1 AS DOUBLE) + 1)
        / (1 + CAST(:k1 AS DOUBLE) * (1 - CAST(:b AS DOUBLE)
           + CAST(:b AS DOUBLE) * m.token_count / CAST(:avgdl AS DOUBLE)))
        * CAST(:scale AS DOUBLE) + 0.5) / CAST(:scale AS DOUBLE) AS score,
    m.timestamp AS timestamp, m.pk AS pk
FROM ({held}) AS c
JOIN sqlstore_memories AS m ON m.pk = c.memory_pk
WHERE m.app_name = :app_name AND m.user_id = :user_id{absent}
ORDER BY score DESC, m.timestamp DESC, m.pk DESC
LIMIT :limit)"""
_MYSQL_POSTING = (
    "sqlstore_memory_postings AS p{j}"
    " ON p{j}.app_name = p0.app_name AND p{j}.user_id = p0.user_id"
    " AND p{j}.memory_pk = p0.memory_pk AND p{j}.token = :h_{r}_{g}_{j}"
)


def _mysql_held(r: int, groups: Sequence[int]) -> str:
    """SQL: the ``memory_pk`` of the user's memories holding every token of one of
    read ``r``'s groups (``groups``: their sizes; tokens bound as ``:h_r_g_j``): one
    range of the postings per group, each further token a primary-key lookup; the
    one-token groups together in one ``IN`` (a memory holding several of them once:
    ``DISTINCT``, and ``UNION`` between the parts)."""
    owner = "p0.app_name = :app_name AND p0.user_id = :user_id"
    singles = [g for g, size in enumerate(groups) if size == 1]
    parts = []
    if singles:
        tokens = ", ".join(f":h_{r}_{g}_0" for g in singles)
        parts.append(
            f"SELECT DISTINCT p0.memory_pk FROM sqlstore_memory_postings AS p0"
            f" WHERE {owner} AND p0.token IN ({tokens})"
        )
    for g, size in enumerate(groups):
        if size > 1:
            joins = "".join(f" JOIN {_MYSQL_POSTING.format(j=j, r=r, g=g)}" for j in range(1, size))
            parts.append(
                f"SELECT p0.memory_pk FROM sqlstore_memory_postings AS p0{joins}"
                f" WHERE {owner} AND p0.token = :h_{r}_{g}_0"
            )
    return "\n  UNION ".join(parts)


def mysql_wave(reads: Sequence[tuple[Sequence[int], WaveRead]], terms: int) -> TextClause:
    """One wave's reads on MySQL and MariaDB, for a query of ``terms`` terms; read
    ``r`` is given as (the sizes of its token groups, its absent terms), and binds
    token ``j`` of its group ``g`` as ``:h_r_g_j`` (an index token, ``t~L``: migration
    0009's postings). Bound numbers are cast to ``DOUBLE``: the driver writes a float
    as a decimal literal, which MySQL would otherwise add up as ``DECIMAL``."""
    idf = _held_idf(_MYSQL_HOLDS, "CAST(:w{i} AS DOUBLE)", terms)
    parts = []
    for r, (groups, absent) in enumerate(reads):
        missing = "".join(f"\n  AND {_MYSQL_HOLDS.format(i=i)} = 0" for i in absent)
        parts.append(_MYSQL_READ.format(idf=idf, held=_mysql_held(r, groups), absent=missing))
    return text("\nUNION ALL\n".join(parts))
