"""BM25 ranking of one user's memories, the same on every backend.

Ranking is BM25 (Robertson & Zaragoza, "The Probabilistic Relevance Framework: BM25 and
Beyond", 2009) with term frequency taken as 1 (memories are short turns) and statistics
over the user's own memories only::

    score(d) = sum over query terms t in d of  idf(t) * (k1 + 1) / (1 + k1 * norm(d))
    idf(t) = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5)),  norm(d) = 1 - b + b * dl(d) / avgdl

N and avgdl come from ``sqlstore_memory_stats``; df(t) from ``sqlstore_memory_terms``
(both kept by triggers, migration 0006). Terms come from :mod:`.analysis` on both
backends, for the index and the query alike, and dl is the number of a memory's
distinct terms, so both backends score alike. Any term may match; the top k is found
by :mod:`.planner` through each backend's reads (:meth:`UserMemories.read`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection

from ..sql.search import MEMORY_ROWS, TERM_STATS
from .text import LENGTH_CLASSES, classed, search_scope

__all__ = [
    "BM25_B",
    "BM25_K1",
    "CLASS_TERMS",
    "MAX_SEARCH_RESULTS",
    "SCORE_SCALE",
    "TERMS_LOOKED_UP",
    "TERMS_PER_QUERY",
    "Read",
    "ReadRow",
    "Scored",
    "Stats",
    "Term",
    "UserMemories",
    "rounded",
    "stats_of",
    "token_groups",
    "weigh",
]

BM25_K1 = 1.2
BM25_B = 0.75
MAX_SEARCH_RESULTS = 1000
"""Most memories one search returns, whatever ``limit`` asks for."""
TERMS_PER_QUERY = 64
"""The rarest distinct terms of a query count; the others are dropped."""
TERMS_LOOKED_UP = 256
"""A query's first distinct terms whose document frequency is looked up (the rarest
:data:`TERMS_PER_QUERY` of them count): a query of 10,000 Chinese characters has as
many bigrams."""

SCORE_SCALE = 1e9
"""Scores are rounded to 9 decimals, the same way on every backend
(``floor(score * 1e9 + 0.5) / 1e9``, halves up: SQLite's ``round`` and PostgreSQL's
disagree on halves), so that the last bits of floating-point sums taken in different
orders do not reorder results between backends."""

Scored = tuple[float, float, int]
"""(score, timestamp, pk) of a memory: sorted descending, the best first and, among
equal scores, the more recent."""


@dataclass
class Term:
    """A query term: its text (in the index form), document frequency among the
    user's memories, and weight."""

    text: str
    df: int
    idf: float = 0.0


@dataclass(frozen=True)
class Read:
    """One read of a search plan (:mod:`.planner`): the memories holding every term of
    ``held`` and none of ``absent`` (indexes into the search's terms, rarest first),
    or with ``held`` empty at least one of the others, whose length classes are in
    ``classes`` (their lowest lengths, :data:`~.text.LENGTH_CLASSES`): their best
    ``limit``, scored over all the search's terms."""

    held: tuple[int, ...]
    absent: tuple[int, ...]
    classes: tuple[int, ...]


@dataclass(frozen=True)
class ReadRow:
    """A memory a read returned: its rounded score, timestamp and row key."""

    score: float
    timestamp: float
    pk: int


@dataclass
class Stats:
    """What a search knows of the user before it reads memories: the query's terms
    with their document frequencies, the number of memories ``n``, their mean length
    ``avgdl``, and how many are in each length class (:data:`~.text.LENGTH_CLASSES`)."""

    terms: list[Term]
    n: float
    avgdl: float
    class_sizes: list[int]


CLASS_TERMS = [f"~{low}" for low in LENGTH_CLASSES]
"""The pseudo-terms whose document frequency is the number of the user's memories in
each length class (kept beside the real terms, migration 0006)."""


def stats_of(query_terms: list[str], rows: Sequence[Sequence[Any]]) -> Stats | None:
    """The :class:`Stats` of a search from the rows of :data:`~..sql.search.TERM_STATS`
    (``(term, df, docs, lexemes)``; the user's row has a NULL term); ``None`` when the
    user has no memories."""
    found: dict[str, int] = {}
    stats: tuple[float, float] | None = None
    for term, df, docs, lexemes in rows:
        if term is None:
            stats = (float(docs), float(lexemes))
        elif df is not None:
            found[term] = int(df)
    if stats is None or stats[0] <= 0:
        return None
    n, lexemes = stats
    return Stats(
        [Term(t, found.get(t, 0)) for t in query_terms],
        n,
        max(lexemes / n, 1.0),
        [found.get(c, 0) for c in CLASS_TERMS],
    )


def weigh(terms: list[Term], n: float) -> list[Term]:
    """The terms found among the user's ``n`` memories with their idf, rarest first,
    at most :data:`TERMS_PER_QUERY`."""
    found = [t for t in terms if t.df > 0]
    for t in found:
        t.idf = math.log(1 + (n - t.df + 0.5) / (t.df + 0.5))
    return sorted(found, key=lambda t: (-t.idf, t.text))[:TERMS_PER_QUERY]


def rounded(score: float) -> float:
    """A score as every backend returns it (see :data:`SCORE_SCALE`)."""
    return math.floor(float(score) * SCORE_SCALE + 0.5) / SCORE_SCALE


def token_groups(read: Read, terms: list[Term]) -> list[list[str]]:
    """The index tokens of a read: its memories hold every token of one group (its held
    terms in one of its length classes, or with none held, one undecided term in
    one)."""
    if read.held:
        return [[classed(terms[i].text, low) for i in read.held] for low in read.classes]
    undecided = [t.text for i, t in enumerate(terms) if i not in read.absent]
    return [[classed(t, low)] for low in read.classes for t in undecided]


class UserMemories:
    """The reads of one search, over one user's memories; each backend implements
    :meth:`read`."""

    def __init__(
        self, conn: AsyncConnection, app_name: str, user_id: str, query_terms: list[str]
    ) -> None:
        self.conn = conn
        self.params: dict[str, Any] = {"app_name": app_name, "user_id": user_id}
        self.scope = search_scope(app_name, user_id)
        self.query_terms = query_terms

    async def begin(self) -> None:
        """What the backend does once, before the search's statements (nothing here)."""

    async def rows(self, pks: list[int]) -> dict[int, Row[Any]]:
        """The memories to return, by row key."""
        statement = MEMORY_ROWS[self.conn.dialect.name]
        result = await self.conn.execute(statement, {**self.params, "pks": pks})
        return {row.pk: row for row in result.all()}

    async def terms(self) -> Stats | None:
        """The query's terms with their document frequency (0: no memory holds it) and
        the user's statistics; ``None`` when the user has no memories. One statement."""
        params = {**self.params, "terms": [*self.query_terms, *CLASS_TERMS]}
        statement = TERM_STATS[self.conn.dialect.name]
        return stats_of(self.query_terms, list(await self.conn.execute(statement, params)))

    def read_params(self, terms: list[Term], avgdl: float, limit: int) -> dict[str, Any]:
        """The bound values every read of a wave shares (see :mod:`..sql.search`)."""
        params: dict[str, Any] = {
            **self.params,
            "limit": limit,
            "avgdl": avgdl,
            "k1": BM25_K1,
            "b": BM25_B,
            "scale": SCORE_SCALE,
        }
        for i, term in enumerate(terms):
            params[f"t{i}"] = f" {term.text} "
            params[f"w{i}"] = term.idf
        return params

    async def read(
        self, terms: list[Term], avgdl: float, reads: Sequence[Read], limit: int
    ) -> list[ReadRow]:
        """The rows of one wave of a search plan (:mod:`.planner`) for ``terms``
        (rarest first, weighed) in one statement: each read's best ``limit``."""
        raise NotImplementedError
