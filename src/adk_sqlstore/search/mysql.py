"""Search on MySQL and MariaDB: an InnoDB ``FULLTEXT`` index over each memory's
hashed, per-user index tokens (migration 0009), for the reads of :mod:`.planner`.

A read matches its classed terms (``t~L``, migration 0006), each hashed with the
user's scope token (:func:`.text.mysql_token`), in boolean mode: the index holds the
user's postings only under those words, and the ``(app_name, user_id)`` condition is
in the statement too. Each memory is scored over all the query's terms from its
``terms`` column, as on the other backends.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..sql.search import mysql_match, mysql_wave
from .lexical import Read, ReadRow, Term, UserMemories, rounded, token_groups
from .text import mysql_token

__all__ = ["MysqlSearch"]


class MysqlSearch(UserMemories):
    """One search on MySQL or MariaDB (see the module docstring)."""

    async def read(
        self, terms: list[Term], avgdl: float, reads: Sequence[Read], limit: int
    ) -> list[ReadRow]:
        params = self.read_params(terms, avgdl, limit)
        for r, read in enumerate(reads):
            groups = token_groups(read, terms)
            hashed = [[mysql_token(self.scope, token) for token in group] for group in groups]
            params[f"wanted_{r}"] = mysql_match(hashed)
        statement = mysql_wave([read.absent for read in reads], len(terms))
        result = await self.conn.execute(statement, params)
        return [ReadRow(rounded(score), ts, pk) for score, ts, pk in result.all()]
