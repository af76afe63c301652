"""Search on SQLite: FTS5 over classed terms (a contentless table, migration 0006), for
the reads of :mod:`.planner`.

A read matches its index tokens through FTS5, restricted to the user's rows by their
scope token in the MATCH expression (no other user's postings are read), and scores
each memory over all the query's terms from its ``terms`` column.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..sql.search import fts5_match, sqlite_wave
from .lexical import Read, ReadRow, Term, UserMemories, rounded, token_groups

__all__ = ["SqliteSearch"]


class SqliteSearch(UserMemories):
    """One search on SQLite (see the module docstring)."""

    async def read(
        self, terms: list[Term], avgdl: float, reads: Sequence[Read], limit: int
    ) -> list[ReadRow]:
        params = self.read_params(terms, avgdl, limit)
        for r, read in enumerate(reads):
            params[f"match_{r}"] = fts5_match(self.scope, token_groups(read, terms))
        statement = sqlite_wave([read.absent for read in reads], len(terms))
        result = await self.conn.execute(statement, params)
        return [ReadRow(rounded(score), ts, pk) for score, ts, pk in result.all()]
