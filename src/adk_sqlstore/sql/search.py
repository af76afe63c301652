"""The reads of a memory search, per dialect (the ranking itself is
:mod:`adk_sqlstore.search`).

Every statement reads one user's memories only: ``app_name`` and ``user_id`` in the
WHERE clause, and the user's scope token (``search_scope``) in the index condition, so
that no other user's postings are read. BM25's parameters are bound (``:k1``, ``:b``).
"""

from __future__ import annotations

from sqlalchemy import bindparam, text
from sqlalchemy.sql.elements import TextClause

__all__ = [
    "MEMORY_ROWS",
    "MEMORY_STATS",
    "PG_CANDIDATES",
    "PG_SEARCH_INDEX",
    "PG_TERM_COUNTS",
    "fts5_match",
    "pg_best",
    "scope_lexeme",
    "sqlite_rank",
    "sqlite_term_counts",
    "tsquery_lexeme",
]

MEMORY_ROWS = text(
    "SELECT pk, id, session_id, event_id, author, timestamp, content, custom_metadata"
    " FROM sqlstore_memories WHERE app_name = :app_name AND user_id = :user_id"
    " AND pk IN :pks"
).bindparams(bindparam("pks", expanding=True))
"""The memories with row keys ``:pks`` (what a search returns)."""

MEMORY_STATS = text(
    "SELECT doc_count, lexeme_count FROM sqlstore_memory_stats"
    " WHERE app_name = :app_name AND user_id = :user_id"
)
"""The user's number of memories and their total length (BM25's N and avgdl)."""


# -- PostgreSQL ---------------------------------------------------------------------------


def tsquery_lexeme(term: str) -> str:
    """A lexeme as tsquery text: quoted, so that no character is query syntax."""
    return "'" + term.replace("\\", "\\\\").replace("'", "''") + "'"


def scope_lexeme(scope: str) -> str:
    """The user's scope token as PostgreSQL's ``search_vector`` holds it (after
    ``chr(1)``, which no analysed term holds; migration 0005), as tsquery text."""
    return tsquery_lexeme("\x01" + scope)


PG_TERM_COUNTS = text(r"""
SELECT t.term, (
    SELECT count(*) FROM (
        SELECT 1 FROM sqlstore_memories m
        WHERE m.app_name = :app_name AND m.user_id = :user_id
          AND m.search_scope = :search_scope
          AND m.search_vector @@ CAST(:scope_prefix
              || '''' || replace(replace(t.term, '\', '\\'), '''', '''''') || '''' AS tsquery)
        LIMIT :cap
    ) AS hits
) AS df
FROM unnest(CAST(:terms AS TEXT[])) AS t(term)
""")
"""Each of ``:terms`` with the number of the user's memories holding it, counted up to
``:cap``. Where the GIN index lacks ``search_scope`` (no btree_gin),
``:scope_prefix`` is ``scope_lexeme & `` (:func:`scope_lexeme`, the user's token in
``search_vector``), so that it reads only the user's postings; else it is empty."""

PG_SEARCH_INDEX = text(
    "/* catalog */ SELECT indexdef FROM pg_indexes"
    " WHERE indexname = 'ix_sqlstore_memories_search'"
    " AND schemaname = ANY (current_schemas(false))"
)
"""The definition of the full-text index (whether it holds ``search_scope``)."""

PG_CANDIDATES = text("""
SELECT m.pk, m.timestamp, m.token_count AS dl,
       ARRAY(SELECT m.search_vector @@ CAST(x.q AS tsquery)
             FROM unnest(CAST(:all_terms AS TEXT[])) WITH ORDINALITY AS x(q, i)
             ORDER BY x.i) AS flags
FROM sqlstore_memories m
WHERE m.app_name = :app_name AND m.user_id = :user_id AND m.search_scope = :search_scope
  AND m.search_vector @@ CAST(:wanted AS tsquery)
""")
"""Every memory of the user holding a ``:wanted`` lexeme, with its length and a flag
per lexeme of ``:all_terms``."""

_PG_BEST = """
SELECT score, m.timestamp, m.pk
FROM sqlstore_memories m,
LATERAL (
    SELECT floor((
        SELECT sum(x.idf) FROM unnest(CAST(:all_terms AS TEXT[]), CAST(:idfs AS FLOAT8[]))
            AS x(q, idf)
        WHERE m.search_vector @@ CAST(x.q AS tsquery)
    ) * (CAST(:k1 AS FLOAT8) + 1)
    / (1 + CAST(:k1 AS FLOAT8) * (1 - CAST(:b AS FLOAT8)
       + CAST(:b AS FLOAT8) * m.token_count / CAST(:avgdl AS FLOAT8)))
    * CAST(:scale AS FLOAT8) + 0.5) / CAST(:scale AS FLOAT8) AS score
) AS s
WHERE m.app_name = :app_name AND m.user_id = :user_id AND m.search_scope = :search_scope
  AND m.search_vector @@ CAST(:wanted AS tsquery) {seen}
ORDER BY score DESC, m.timestamp DESC, m.pk DESC
LIMIT :limit
"""
_PG_BEST_STATEMENTS = {
    seen: text(_PG_BEST.format(seen=seen))
    for seen in ("", "AND NOT m.search_vector @@ CAST(:seen AS tsquery)")
}


def pg_best(*, excluding_seen: bool) -> TextClause:
    """The best ``:limit`` of the user's memories holding a ``:wanted`` lexeme (and,
    ``excluding_seen``, none of ``:seen``), scored by BM25 over ``:all_terms`` with
    weights ``:idfs`` and rounded (``:scale``), best first (ties: the more recent,
    then the later row)."""
    return _PG_BEST_STATEMENTS[
        "AND NOT m.search_vector @@ CAST(:seen AS tsquery)" if excluding_seen else ""
    ]


# -- SQLite (FTS5) ------------------------------------------------------------------------


def _fts5_string(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def fts5_match(scope: str, term: str) -> str:
    """An FTS5 MATCH expression for ``term`` among the rows of one user's scope token
    (both quoted: no character is query syntax)."""
    return f"search_scope : {_fts5_string(scope)} AND terms : {_fts5_string(term)}"


def sqlite_term_counts(terms: int, *, capped: bool = False) -> TextClause:
    """Rows ``(i, df)`` for ``terms`` MATCH expressions bound as ``:m0``, ``:m1``, ...
    (at most 500 in one compound statement); ``capped``: each counted up to ``:cap``."""
    if capped:
        return text(
            " UNION ALL ".join(
                f"SELECT {i}, count(*) FROM (SELECT 1 FROM sqlstore_memories_fts"
                f" WHERE sqlstore_memories_fts MATCH :m{i} LIMIT :cap)"
                for i in range(terms)
            )
        )
    return text(
        " UNION ALL ".join(
            f"SELECT {i}, count(*) FROM sqlstore_memories_fts"
            f" WHERE sqlstore_memories_fts MATCH :m{i}"
            for i in range(terms)
        )
    )


def sqlite_rank(terms: int) -> TextClause:
    """The best ``:limit`` memories of the user matching any of ``terms`` MATCH
    expressions ``:m0``... with weights ``:w0``..., scored by BM25 (``:k1``, ``:b``,
    ``:avgdl``) and rounded (``:scale``), as rows ``(score, timestamp, pk)`` best
    first."""
    hits = " UNION ALL ".join(
        f"SELECT rowid AS pk, :w{i} AS w FROM sqlstore_memories_fts"
        f" WHERE sqlstore_memories_fts MATCH :m{i}"
        for i in range(terms)
    )
    return text(f"""
        WITH hits AS ({hits})
        SELECT CAST(sum(hits.w) * (:k1 + 1)
               / (1 + :k1 * (1 - :b + :b * m.token_count / :avgdl)) * :scale + 0.5
               AS INTEGER) / :scale AS score, m.timestamp, m.pk
        FROM hits JOIN sqlstore_memories m ON m.pk = hits.pk
        WHERE m.app_name = :app_name AND m.user_id = :user_id
        GROUP BY m.pk
        ORDER BY score DESC, m.timestamp DESC, m.pk DESC
        LIMIT :limit
    """)
