"""Search on PostgreSQL: full-text search (``tsvector``, a GIN index holding each user's
scope token), ranked by :mod:`.lexical`.

A user with at most :data:`EXACT_DF` memories: every memory matching a query term is
read once, with a flag per term, which gives the document frequencies and all the
scores. A bigger user: document frequencies are counted through the GIN index, then
candidates are read MaxScore-style (:meth:`~.lexical.UserMemories.rank`). Either way
the frequencies are exact, as on SQLite, so both backends give the same answers.
"""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncConnection

from ..sql.search import (
    PG_CANDIDATES,
    PG_SEARCH_INDEX,
    PG_TERM_COUNTS,
    pg_best,
    scope_lexeme,
    tsquery_lexeme,
)
from .lexical import (
    BM25_B,
    BM25_K1,
    SCORE_SCALE,
    Candidate,
    Scored,
    Term,
    UserMemories,
    bm25,
    rounded,
)

__all__ = ["EXACT_DF", "PostgresSearch"]

EXACT_DF = 2_000
"""A user with at most this many memories is searched in one read."""

_SCOPE_IN_INDEX: dict[str, bool] = {}  # database URL: its GIN index holds search_scope


class PostgresSearch(UserMemories):
    """One search on PostgreSQL (see the module docstring)."""

    def __init__(
        self, conn: AsyncConnection, app_name: str, user_id: str, query_terms: list[str]
    ) -> None:
        super().__init__(conn, app_name, user_id, query_terms)
        self._every_match: list[Candidate] | None = None
        self._read_terms: list[str] = []

    async def _scope_prefix(self) -> str:
        """``scope & `` in tsquery text where the GIN index lacks ``search_scope`` (no
        btree_gin): the user's token in ``search_vector`` then keeps the index to the
        user's postings; empty where the index holds ``search_scope`` (asking for the
        token too would read its postings for nothing). Either way the answer is the
        same; the index's definition is read once per database."""
        key = self.conn.engine.url.render_as_string(hide_password=True)
        holds_scope = _SCOPE_IN_INDEX.get(key)
        if holds_scope is None:
            definition = (await self.conn.execute(PG_SEARCH_INDEX)).scalar()
            holds_scope = _SCOPE_IN_INDEX[key] = "search_scope" in str(definition or "")
        return "" if holds_scope else f"{scope_lexeme(self.scope)} & "

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
        """Exact document frequencies, each counted through the GIN index from the
        user's postings (as SQLite's FTS5 counts them: both backends weigh alike); up
        to :attr:`df_limit` where one is set."""
        limit = self.df_limit(n)
        params = {
            **self.params,
            "terms": self.query_terms,
            "cap": int(n) if limit is None else limit,
            "search_scope": self.scope,
            "scope_prefix": await self._scope_prefix(),
        }
        counted = {t: int(df) for t, df in await self.conn.execute(PG_TERM_COUNTS, params)}
        return [Term(t, counted.get(t, 0)) for t in self.query_terms]

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
            "wanted": f"{await self._scope_prefix()}({' | '.join(lexemes)})",
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
            "wanted": f"{await self._scope_prefix()}("
            + " | ".join(tsquery_lexeme(t.text) for t in wanted)
            + ")",
            "avgdl": avgdl,
            "limit": limit,
            "k1": BM25_K1,
            "b": BM25_B,
            "scale": SCORE_SCALE,
        }
        if seen:
            params["seen"] = " | ".join(tsquery_lexeme(t.text) for t in seen)
        result = await self.conn.execute(pg_best(excluding_seen=bool(seen)), params)
        return [(rounded(score), ts, pk) for score, ts, pk in result.all()]
