"""Search on PostgreSQL: full-text search (``tsvector`` of classed terms, a GIN index
holding each user's scope token), for the reads of :mod:`.planner`.

A read matches its index tokens through the GIN index (the user's postings only) and
scores each memory over all the query's terms from its ``terms`` column.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..sql.search import PG_CUSTOM_PLANS, PG_SEARCH_INDEX, pg_wave, scope_lexeme, tsquery_of
from .lexical import Read, ReadRow, Term, UserMemories, rounded, token_groups

__all__ = ["PostgresSearch"]


def _scan_groups(groups: list[list[str]]) -> list[list[list[str]]]:
    """The token groups of a read as the GIN scans that find them: a scan per
    conjunction of two or more lexemes (each then has lexemes every match holds:
    GIN's fast scan), else one scan of them all (a union of postings)."""
    return [[group] for group in groups] if any(len(g) > 1 for g in groups) else [groups]


_SCOPE_IN_INDEX: dict[str, bool] = {}  # database URL: its GIN index holds search_scope


class PostgresSearch(UserMemories):
    """One search on PostgreSQL (see the module docstring)."""

    async def begin(self) -> None:
        """Plans made for each statement's own values (:data:`~..sql.search.PG_CUSTOM_PLANS`)."""
        await self.conn.execute(PG_CUSTOM_PLANS)

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

    async def read(
        self, terms: list[Term], avgdl: float, reads: Sequence[Read], limit: int
    ) -> list[ReadRow]:
        params = {**self.read_params(terms, avgdl, limit), "search_scope": self.scope}
        prefix = await self._scope_prefix()
        shapes = []
        for r, read in enumerate(reads):
            groups = _scan_groups(token_groups(read, terms))
            for g, group in enumerate(groups):
                params[f"wanted_{r}_{g}"] = f"{prefix}({tsquery_of(group)})"
            shapes.append((len(groups), read.absent))
        statement = pg_wave(shapes, len(terms))
        result = await self.conn.execute(statement, params)
        return [ReadRow(rounded(score), ts, pk) for score, ts, pk in result.all()]
