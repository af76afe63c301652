"""The one seam where PostgreSQL and SQLite differ.

Everything else is written once in SQLAlchemy Core; a statement whose syntax differs
between the two dialects is built here, one function per statement: the upsert, and
full-text search over memories.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Table, or_, text
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Dialect, Row
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.dml import Insert

from .text import MAX_QUERY_CHARS, query_terms, search_scope, valid_unicode

__all__ = ["BM25_B", "BM25_K1", "is_unique_violation", "search_memories", "upsert"]

BM25_K1 = 1.2
MAX_SEARCH_RESULTS = 1000
"""Most memories one search returns, whatever ``limit`` asks for."""
BM25_B = 0.75


def upsert(
    dialect: Dialect,
    table: Table,
    *,
    key: Sequence[str],
    update: Sequence[str],
    only_if_changed: Sequence[str] | None = None,
) -> Insert:
    """``INSERT ... ON CONFLICT (key) DO UPDATE SET update = excluded.update``.

    Both PostgreSQL and SQLite (3.24+) support this statement; SQLAlchemy builds it
    with each dialect's own ``insert`` construct. Execute it with a list of row dicts
    (an executemany: the statement is compiled once and cached).

    Args:
        only_if_changed: update a conflicting row only when one of these columns
            differs from the new value (``IS DISTINCT FROM``).
    """
    module: Any
    if dialect.name == "postgresql":
        module = postgresql
    elif dialect.name == "sqlite":
        module = sqlite
    else:  # pragma: no cover - engine.normalize_url refuses other databases
        raise NotImplementedError(dialect.name)
    stmt = module.insert(table)
    where = None
    if only_if_changed:
        where = or_(*(table.c[c].is_distinct_from(stmt.excluded[c]) for c in only_if_changed))
    return stmt.on_conflict_do_update(  # type: ignore[no-any-return]
        index_elements=list(key),
        set_={name: stmt.excluded[name] for name in update},
        where=where,
    )


_MEMORY_COLUMNS = (
    "m.id, m.session_id, m.event_id, m.author, m.timestamp, m.content, m.custom_metadata"
)

# BM25 (Robertson & Zaragoza, "The Probabilistic Relevance Framework: BM25 and Beyond",
# 2009) over PostgreSQL's own lexemes: the query is stemmed and stripped of stop words by
# to_tsvector('english'), any term may match (OR), and each matching term adds
#   idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))
# with idf = ln(1 + (N - df + 0.5) / (df + 0.5)) over this user's memories only (N and
# avgdl from sqlstore_memory_stats, df counted among the matching rows). The app/user
# filter and the tsvector match are one WHERE clause: the planner combines the
# (app_name, user_id) index with the GIN index on search_vector (the tsquery is an
# InitPlan, computed once). Ties go to the newer memory.
_POSTGRES_SEARCH = text(f"""
WITH terms AS (
    SELECT DISTINCT lexeme AS term FROM unnest(to_tsvector('english'::regconfig, :query))
),
q AS (
    SELECT string_agg(
        '''' || replace(replace(term, '\\', '\\\\'), '''', '''''') || '''', ' | '
    )::tsquery AS tsq
    FROM terms
),
stats AS (
    SELECT greatest(doc_count, 1)::float8 AS n,
           greatest(lexeme_count::float8 / greatest(doc_count, 1), 1) AS avgdl
    FROM sqlstore_memory_stats WHERE app_name = :app_name AND user_id = :user_id
),
docs AS (
    SELECT m.pk, m.search_vector
    FROM sqlstore_memories m
    WHERE m.app_name = :app_name AND m.user_id = :user_id
      AND m.search_vector @@ (SELECT tsq FROM q)
),
hits AS (
    SELECT d.pk, length(d.search_vector) AS dl, u.lexeme,
           coalesce(array_length(u.positions, 1), 1) AS tf
    FROM docs d CROSS JOIN LATERAL unnest(d.search_vector) u
    WHERE u.lexeme IN (SELECT term FROM terms)
),
df AS (SELECT lexeme, count(*) AS df FROM hits GROUP BY lexeme),
scored AS (
    SELECT h.pk, sum(
        ln(1 + (s.n - df.df + 0.5) / (df.df + 0.5))
        * h.tf * ({BM25_K1} + 1)
        / (h.tf + {BM25_K1} * (1 - {BM25_B} + {BM25_B} * h.dl / s.avgdl))
    ) AS score
    FROM hits h JOIN df USING (lexeme) CROSS JOIN stats s
    GROUP BY h.pk
)
SELECT {_MEMORY_COLUMNS}, scored.score
FROM scored JOIN sqlstore_memories m ON m.pk = scored.pk
ORDER BY scored.score DESC, m.timestamp DESC, m.pk DESC
LIMIT :limit
""")

# SQLite: the same BM25 over FTS5's Porter-stemmed index, with per-user statistics.
# FTS5's own bm25() counts terms over the whole table (every user), and gives words found
# in more than half of the rows no weight at all, so a user's first memories would rank by
# length alone. Instead each query word is matched on its own, restricted to the user's
# rows by their scope token inside the MATCH expression: the counts give the word's
# document frequency among this user's memories (the IDF is computed in Python, SQLite
# having no guaranteed ln()), and a row's score is
#   (sum of the IDF of the words it contains) * (k1 + 1) / (1 + k1 * (1 - b + b * dl / avgdl))
# i.e. BM25 with term frequency taken as 1 (memories are short turns). N and avgdl come
# from sqlstore_memory_stats, dl is the row's token_count.
_SQLITE_MAX_TERMS = 64  # the rarest words of a query are kept; SQLite compounds <= 500


def _sqlite_hits(count: int, select: str) -> str:
    return " UNION ALL ".join(select.format(i=i) for i in range(count))


async def _search_sqlite(
    conn: AsyncConnection, app_name: str, user_id: str, terms: list[str], limit: int
) -> Sequence[Row[Any]]:
    stats = (
        await conn.execute(
            text(
                "SELECT doc_count, lexeme_count FROM sqlstore_memory_stats"
                " WHERE app_name = :app_name AND user_id = :user_id"
            ),
            {"app_name": app_name, "user_id": user_id},
        )
    ).first()
    if stats is None or stats.doc_count <= 0:
        return []
    n = float(stats.doc_count)
    avgdl = max(stats.lexeme_count / n, 1.0)
    scope = _fts5_string(search_scope(app_name, user_id))
    matches = [f"search_scope : {scope} AND text : {_fts5_string(t)}" for t in terms]
    weights: list[tuple[float, str]] = []
    for start in range(0, len(matches), 400):
        chunk = matches[start : start + 400]
        counts = await conn.execute(
            text(
                _sqlite_hits(
                    len(chunk),
                    "SELECT {i}, count(*) FROM sqlstore_memories_fts"
                    " WHERE sqlstore_memories_fts MATCH :m{i}",
                )
            ),
            {f"m{i}": m for i, m in enumerate(chunk)},
        )
        for i, df in counts.all():
            if df:
                weights.append((math.log(1 + (n - df + 0.5) / (df + 0.5)), chunk[i]))
    if not weights:
        return []
    weights = sorted(weights, reverse=True)[:_SQLITE_MAX_TERMS]
    hits = _sqlite_hits(
        len(weights),
        "SELECT rowid AS pk, :w{i} AS w FROM sqlstore_memories_fts"
        " WHERE sqlstore_memories_fts MATCH :m{i}",
    )
    sql = f"""
        WITH hits AS ({hits})
        SELECT {_MEMORY_COLUMNS},
               sum(hits.w) * ({BM25_K1} + 1)
               / (1 + {BM25_K1} * (1 - {BM25_B} + {BM25_B} * m.token_count / :avgdl)) AS score
        FROM hits JOIN sqlstore_memories m ON m.pk = hits.pk
        WHERE m.app_name = :app_name AND m.user_id = :user_id
        GROUP BY m.pk
        ORDER BY score DESC, m.timestamp DESC, m.pk DESC
        LIMIT :limit
    """
    params: dict[str, Any] = {
        "app_name": app_name,
        "user_id": user_id,
        "limit": limit,
        "avgdl": avgdl,
    }
    for i, (weight, match) in enumerate(weights):
        params[f"w{i}"] = weight
        params[f"m{i}"] = match
    return (await conn.execute(text(sql), params)).all()


def _fts5_string(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


async def search_memories(
    conn: AsyncConnection, *, app_name: str, user_id: str, query: str, limit: int
) -> Sequence[Row[Any]]:
    """Rank one user's memories against a natural-language query, best first.

    Any query term may match; stop words are ignored; no input raises (the query is
    never parsed as search syntax). Rows: id, session_id, event_id, author, timestamp,
    content, custom_metadata, score (higher is better).
    """
    query = valid_unicode(query[:MAX_QUERY_CHARS]).replace("\x00", " ")
    terms = query_terms(query)
    limit = min(limit, MAX_SEARCH_RESULTS)
    if not terms or limit <= 0:
        return []
    if conn.dialect.name == "postgresql":
        params = {
            "app_name": app_name,
            "user_id": user_id,
            "limit": limit,
            "query": query,
        }
        return (await conn.execute(_POSTGRES_SEARCH, params)).all()
    return await _search_sqlite(conn, app_name, user_id, terms, limit)


def is_unique_violation(exc: IntegrityError) -> bool:
    """Whether an ``IntegrityError`` is a duplicate key (and not, say, a NOT NULL or
    foreign key violation): SQLSTATE 23505 on PostgreSQL, "UNIQUE constraint failed"
    or "PRIMARY KEY" on SQLite."""
    orig = exc.orig
    sqlstate = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    if sqlstate is not None:
        return bool(sqlstate == "23505")
    message = str(orig)
    return "UNIQUE constraint failed" in message or "PRIMARY KEY must be unique" in message
