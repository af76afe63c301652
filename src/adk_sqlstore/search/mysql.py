"""Search on MySQL and MariaDB: an inverted index in an InnoDB table,
``sqlstore_memory_postings`` (migration 0009), for the reads of :mod:`.planner`.

A read finds the user's memories holding every token of one of its groups (classed
terms, ``t~L``, migration 0006) in the user's range of the postings, ``(app_name,
user_id)`` first in its key and in every statement; each memory is scored over all
the query's terms from its ``terms`` column, as on the other backends.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..sql.search import mysql_wave
from .lexical import Read, ReadRow, Term, UserMemories, rounded, token_groups

__all__ = ["MysqlSearch"]


class MysqlSearch(UserMemories):
    """One search on MySQL or MariaDB (see the module docstring)."""

    async def read(
        self, terms: list[Term], avgdl: float, reads: Sequence[Read], limit: int
    ) -> list[ReadRow]:
        params = self.read_params(terms, avgdl, limit)
        shapes = []
        for r, read in enumerate(reads):
            groups = token_groups(read, terms)
            for g, group in enumerate(groups):
                for j, token in enumerate(group):
                    params[f"h_{r}_{g}_{j}"] = token
            shapes.append(([len(group) for group in groups], read.absent))
        result = await self.conn.execute(mysql_wave(shapes, len(terms)), params)
        return [ReadRow(rounded(score), ts, pk) for score, ts, pk in result.all()]
