"""Search on PostgreSQL: full-text search (``tsvector``, a GIN index holding each user's
scope token), ranked by :mod:`.lexical`.

A user with at most :data:`EXACT_DF` memories: every memory matching a query term is
read once, with a flag per term, which gives the exact document frequencies and all
the scores. A bigger user: document frequencies are counted (and estimated past
:data:`EXACT_DF`), then candidates are read MaxScore-style
(:meth:`~.lexical.UserMemories.rank`).
"""

from __future__ import annotations

import time

from sqlalchemy.ext.asyncio import AsyncConnection

from ..engine import given_url
from ..sql.search import (
    PG_CANDIDATES,
    PG_COMMON_LEXEMES,
    PG_TERM_COUNTS,
    pg_best,
    tsquery_lexeme,
)
from .lexical import BM25_B, BM25_K1, Candidate, Scored, Term, UserMemories, bm25

__all__ = ["EXACT_DF", "PostgresSearch"]

EXACT_DF = 2_000
"""PostgreSQL counts a term's memories exactly up to this many."""

_COMMON_TTL = 300.0  # seconds a process keeps the column's statistics
_common_cache: dict[str, tuple[float, dict[str, float]]] = {}


async def _common_lexemes(conn: AsyncConnection) -> dict[str, float]:
    """Lexeme -> share of memories holding it, for the commonest lexemes (cached per
    database and search_path)."""
    key = given_url(conn.engine).render_as_string(hide_password=True)
    cached = _common_cache.get(key)
    if cached and cached[0] > time.monotonic():
        return cached[1]
    row = (await conn.execute(PG_COMMON_LEXEMES)).first()
    shares: dict[str, float] = {}
    if row is not None and row[0] is not None:
        shares = dict(zip(row[0], row[1], strict=False))
    _common_cache[key] = (time.monotonic() + _COMMON_TTL, shares)
    return shares


class PostgresSearch(UserMemories):
    """One search on PostgreSQL (see the module docstring)."""

    def __init__(
        self, conn: AsyncConnection, app_name: str, user_id: str, query_terms: list[str]
    ) -> None:
        super().__init__(conn, app_name, user_id, query_terms)
        self._every_match: list[Candidate] | None = None
        self._read_terms: list[str] = []

    async def terms(self) -> tuple[list[Term], float, float] | None:
        stats = await self.stats()
        if stats is None:
            return None
        n = stats[0]
        if n > EXACT_DF:
            return await self._counted_terms(n), *stats
        terms = [Term(term, 0) for term in self.query_terms]
        if terms:
            self._every_match = await self._every_match_of(terms)
            self._read_terms = [t.text for t in terms]
            for i, t in enumerate(terms):
                t.df = sum(c.flags[i] for c in self._every_match)
        return terms, *stats

    async def _counted_terms(self, n: float) -> list[Term]:
        """Document frequencies counted exactly up to :data:`EXACT_DF`, or estimated.

        A term that ANALYZE lists among the column's commonest lexemes gets N times
        its share of rows when that comes to :data:`EXACT_DF` or more: it is not
        counted, as counting reads its whole posting list (78,000 entries for a common
        word of a user with 100,000 memories). A term counted up to the cap gets the
        larger of the cap and that estimate. Either estimate only moves the weight of
        very common words, which is small either way.
        """
        shares = await _common_lexemes(self.conn)
        lexemes = self.query_terms
        estimated = {t: round(shares.get(t, 0.0) * n) for t in lexemes}
        to_count = [t for t in lexemes if estimated[t] < EXACT_DF]
        counted: dict[str, int] = {}
        if to_count:
            params = {
                **self.params,
                "terms": to_count,
                "cap": EXACT_DF,
                "search_scope": self.scope,
            }
            counted = {t: int(df) for t, df in await self.conn.execute(PG_TERM_COUNTS, params)}
        terms = []
        for t in lexemes:
            df = counted.get(t, EXACT_DF)
            if df >= EXACT_DF:
                df = min(int(n), max(EXACT_DF, estimated[t]))
            terms.append(Term(t, df))
        return terms

    async def rank(self, terms: list[Term], avgdl: float, limit: int) -> list[Scored]:
        if self._every_match is None:
            return await super().rank(terms, avgdl, limit)
        order = [self._read_terms.index(t.text) for t in terms]
        scored = []
        for c in self._every_match:
            flags = [c.flags[i] for i in order]
            if any(flags):
                candidate = Candidate(c.pk, c.timestamp, c.dl, flags)
                scored.append((bm25(candidate, terms, avgdl), c.timestamp, c.pk))
        scored.sort(reverse=True)
        return scored[:limit]

    async def _every_match_of(self, terms: list[Term]) -> list[Candidate]:
        """Every memory holding one of ``terms``, with a flag per term."""
        lexemes = [tsquery_lexeme(t.text) for t in terms]
        params = {
            **self.params,
            "search_scope": self.scope,
            "all_terms": lexemes,
            "wanted": " | ".join(lexemes),
        }
        result = await self.conn.execute(PG_CANDIDATES, params)
        return [Candidate(pk, ts, dl, list(flags)) for pk, ts, dl, flags in result.all()]

    async def best(
        self, wanted: list[Term], seen: list[Term], terms: list[Term], avgdl: float, limit: int
    ) -> list[Scored]:
        params = {
            **self.params,
            "search_scope": self.scope,
            "all_terms": [tsquery_lexeme(t.text) for t in terms],
            "idfs": [t.idf for t in terms],
            "wanted": " | ".join(tsquery_lexeme(t.text) for t in wanted),
            "avgdl": avgdl,
            "limit": limit,
            "k1": BM25_K1,
            "b": BM25_B,
        }
        if seen:
            params["seen"] = " | ".join(tsquery_lexeme(t.text) for t in seen)
        result = await self.conn.execute(pg_best(excluding_seen=bool(seen)), params)
        return [(float(score), ts, pk) for score, ts, pk in result.all()]
