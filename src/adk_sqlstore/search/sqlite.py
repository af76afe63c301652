"""Search on SQLite: FTS5 over the analysed terms (:mod:`.analysis`), ranked by
:mod:`.lexical`.

FTS5 reads are restricted to the user's rows by their scope token in the MATCH
expression, so no other user's postings are read. All matching rows are scored in one
statement: FTS5 cannot say cheaply which of a few rows hold a common word, so MaxScore's
second reads would cost more than they save; a user with 100,000 memories pays for the
postings of the query's words (see ``benchmarks/RESULTS.md``).
"""

from __future__ import annotations

from typing import Any

from ..sql.search import fts5_match, sqlite_rank, sqlite_term_counts
from .lexical import BM25_B, BM25_K1, SCORE_SCALE, Scored, Term, UserMemories, rounded

__all__ = ["SqliteSearch"]

_TERMS_PER_STATEMENT = 400  # SQLite: at most 500 terms in a compound SELECT


class SqliteSearch(UserMemories):
    """One search on SQLite (see the module docstring)."""

    async def terms(self) -> tuple[list[Term], float, float] | None:
        stats = await self.stats()
        if stats is None:
            return None
        return await self._counted(self.df_limit(stats[0])), *stats

    async def _counted(self, limit: int | None) -> list[Term]:
        """The query terms with their document frequencies, counted up to ``limit``."""
        words = self.query_terms
        found: list[Term] = []
        for start in range(0, len(words), _TERMS_PER_STATEMENT):
            chunk = words[start : start + _TERMS_PER_STATEMENT]
            params: dict[str, Any] = {
                f"m{i}": fts5_match(self.scope, w) for i, w in enumerate(chunk)
            }
            if limit is not None:
                params["cap"] = limit
            statement = sqlite_term_counts(len(chunk), capped=limit is not None)
            counts = await self.conn.execute(statement, params)
            found += [Term(chunk[i], int(df)) for i, df in counts.all()]
        return found

    async def rank(self, terms: list[Term], avgdl: float, limit: int) -> list[Scored]:
        params: dict[str, Any] = {
            **self.params,
            "limit": limit,
            "avgdl": avgdl,
            "k1": BM25_K1,
            "b": BM25_B,
            "scale": SCORE_SCALE,
        }
        for i, term in enumerate(terms):
            params[f"w{i}"] = term.idf
            params[f"m{i}"] = fts5_match(self.scope, term.text)
        result = await self.conn.execute(sqlite_rank(len(terms)), params)
        return [(rounded(score), ts, pk) for score, ts, pk in result]
