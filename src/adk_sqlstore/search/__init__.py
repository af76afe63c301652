"""Memory search: BM25 over each user's memories, on PostgreSQL full-text search or
SQLite FTS5, with index and query terms from one text analysis.

- :mod:`.analysis`: the text-analysis pipeline (terms of a memory and of a query);
- :mod:`.text`: what an event says, the indexed form, the user's scope token;
- :mod:`.lexical`: the BM25 ranker (MaxScore reads), the same on every backend;
- :mod:`.postgres`, :mod:`.sqlite`: each backend's reads (their SQL is in
  :mod:`adk_sqlstore.sql.search`).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection

from .analysis import DEFAULT_LANGUAGE, analyzer
from .lexical import MAX_SEARCH_RESULTS, TERMS_LOOKED_UP, UserMemories, weigh
from .postgres import PostgresSearch
from .sqlite import SqliteSearch
from .text import MAX_QUERY_CHARS, valid_unicode

__all__ = ["search_memories"]


async def search_memories(
    conn: AsyncConnection,
    *,
    app_name: str,
    user_id: str,
    query: str,
    limit: int,
    language: str = DEFAULT_LANGUAGE,
) -> list[tuple[Row[Any], float]]:
    """Rank one user's memories against a natural-language query, best first.

    The query is analysed as memories are indexed (:mod:`.analysis`, in ``language``);
    any query term may match; stop words are ignored; no input raises (the query is
    never parsed as search syntax; it is cut at :data:`~.text.MAX_QUERY_CHARS`
    characters, and its first :data:`~.lexical.TERMS_LOOKED_UP` distinct terms are
    looked up). At most :data:`~.lexical.MAX_SEARCH_RESULTS` results.

    Returns:
        (row, score) pairs; rows have pk, id, session_id, event_id, author, timestamp,
        content, custom_metadata; the score is BM25, higher is better.
    """
    query = valid_unicode(query[:MAX_QUERY_CHARS]).replace("\x00", " ")
    limit = min(limit, MAX_SEARCH_RESULTS)
    query_terms = analyzer(language).query_terms(query)[:TERMS_LOOKED_UP]
    if not query_terms or limit <= 0:
        return []
    search: UserMemories = (
        PostgresSearch(conn, app_name, user_id, query_terms)
        if conn.dialect.name == "postgresql"
        else SqliteSearch(conn, app_name, user_id, query_terms)
    )
    found = await search.terms()
    if found is None:
        return []
    terms, n, avgdl = found
    terms = weigh(terms, n)
    if not terms:
        return []
    scored = await search.rank(terms, avgdl, limit)
    rows = await search.rows([pk for _, _, pk in scored])
    return [(rows[pk], score) for score, _, pk in scored if pk in rows]
