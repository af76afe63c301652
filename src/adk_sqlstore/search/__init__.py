"""Memory search: BM25 over each user's memories, on PostgreSQL full-text search,
SQLite FTS5 or an inverted index in a MySQL/MariaDB table, with index and query terms
from one text analysis.

- :mod:`.analysis`: the text-analysis pipeline (terms of a memory and of a query);
- :mod:`.text`: what an event says, the indexed form, the user's scope token;
- :mod:`.lexical`: BM25, and the reads every backend shares;
- :mod:`.planner`: the exact top k in few reads (a branch and bound over the terms a
  memory holds), the same on every backend;
- :mod:`.hybrid`: BM25 fused with vector similarity, when an embedder is configured;
- :mod:`.postgres`, :mod:`.sqlite`, :mod:`.mysql`: each backend's reads (their SQL is in
  :mod:`adk_sqlstore.sql.search`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from ..sql.sqlite_thread import run_batch
from .analysis import DEFAULT_LANGUAGE, analyzer
from .hybrid import Fused, VectorQuery, candidate_terms, fuse, vector_scores
from .lexical import (
    MAX_SEARCH_RESULTS,
    TERMS_LOOKED_UP,
    Read,
    ReadRow,
    Scored,
    UserMemories,
    weigh,
)
from .mysql import MysqlSearch
from .planner import rank
from .postgres import PostgresSearch
from .sqlite import SqliteSearch, search_now
from .text import MAX_QUERY_CHARS, valid_unicode

__all__ = ["one_batch", "search_memories"]

_BACKENDS: dict[str, type[UserMemories]] = {
    "postgresql": PostgresSearch,
    "sqlite": SqliteSearch,
    "mysql": MysqlSearch,
}


def one_batch(dialect: str, vector: VectorQuery | None) -> bool:
    """Whether :func:`search_memories` wants a connection outside any transaction: on
    SQLite without vectors the whole search is one batch in aiosqlite's thread, in a
    read transaction of its own (:func:`.sqlite.search_now`). Otherwise it wants a read
    transaction (one snapshot for its several statements)."""
    return dialect == "sqlite" and vector is None


async def search_memories(
    conn: AsyncConnection,
    *,
    app_name: str,
    user_id: str,
    query: str,
    limit: int,
    language: str = DEFAULT_LANGUAGE,
    vector: VectorQuery | None = None,
) -> list[tuple[Any, Fused]]:
    """Rank one user's memories against a natural-language query, best first.

    The query is analysed as memories are indexed (:mod:`.analysis`, in ``language``);
    any query term may match; stop words are ignored; no input raises (the query is
    never parsed as search syntax; it is cut at :data:`~.text.MAX_QUERY_CHARS`
    characters, and its first :data:`~.lexical.TERMS_LOOKED_UP` distinct terms are
    looked up). At most :data:`~.lexical.MAX_SEARCH_RESULTS` results. With ``vector``
    (the query's embedding), BM25 and vector similarity are fused (:mod:`.hybrid`).

    Returns:
        (row, scores) pairs; rows have pk, id, session_id, event_id, author,
        timestamp, content, custom_metadata; ``scores.score`` is BM25, or the fused
        score with ``vector``; higher is better. Ties go to the more recent memory.
    """
    query = valid_unicode(query[:MAX_QUERY_CHARS]).replace("\x00", " ")
    limit = min(limit, MAX_SEARCH_RESULTS)
    if limit <= 0:
        return []
    query_terms = analyzer(language).query_terms(query)[:TERMS_LOOKED_UP]
    if one_batch(conn.dialect.name, vector) and not conn.in_transaction():
        if not query_terms:
            return []
        search = SqliteSearch(conn, app_name, user_id, query_terms)
        found = await run_batch(conn, search_now, search, limit)
        return [(row, Fused(pk, score, score, None)) for (score, _, pk), row in found]
    wanted = limit if vector is None else max(limit, vector.candidates)
    lexical = await _lexical(conn, app_name, user_id, query_terms, wanted, vector is not None)
    if vector is None:
        ranked = [Fused(pk, score, score, None) for score, _, pk in lexical]
        rows = await _rows(conn, app_name, user_id, [f.pk for f in ranked])
        return [(rows[f.pk], f) for f in ranked if f.pk in rows]
    bm25 = {pk: score for score, _, pk in lexical[: vector.candidates]}
    similar = await vector_scores(conn, vector, app_name=app_name, user_id=user_id, also=list(bm25))
    fused = fuse(bm25, similar, vector.weight)
    rows = await _rows(conn, app_name, user_id, [f.pk for f in fused])
    fused.sort(key=lambda f: (f.score, rows[f.pk].timestamp if f.pk in rows else 0, f.pk))
    fused.reverse()
    return [(rows[f.pk], f) for f in fused[:limit] if f.pk in rows]


async def _lexical(
    conn: AsyncConnection,
    app_name: str,
    user_id: str,
    query_terms: list[str],
    limit: int,
    hybrid: bool = False,
) -> list[Scored]:
    """BM25's top ``limit`` (score, timestamp, pk), best first; as candidates of a
    hybrid search, for a big user, over the rarer terms only
    (:func:`.hybrid.candidate_terms`)."""
    if not query_terms:
        return []
    search = _BACKENDS[conn.dialect.name](conn, app_name, user_id, query_terms)
    await search.begin()
    stats = await search.terms()
    if stats is None:
        return []
    terms = weigh(stats.terms, stats.n)
    if hybrid:
        terms = candidate_terms(terms, stats.n)
    if not terms:
        return []

    async def read(reads: Sequence[Read], wanted: int) -> list[ReadRow]:
        return await search.read(terms, stats.avgdl, reads, wanted)

    return await rank(
        terms,
        stats.n,
        stats.avgdl,
        stats.class_sizes,
        limit,
        read,
        round_trips=conn.dialect.name != "sqlite",
    )


async def _rows(
    conn: AsyncConnection, app_name: str, user_id: str, pks: list[int]
) -> dict[int, Any]:
    if not pks:
        return {}
    return await _BACKENDS[conn.dialect.name](conn, app_name, user_id, []).rows(pks)
