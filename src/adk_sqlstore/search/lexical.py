"""BM25 ranking of one user's memories, the same on every backend.

Ranking is BM25 (Robertson & Zaragoza, "The Probabilistic Relevance Framework: BM25 and
Beyond", 2009) with term frequency taken as 1 (memories are short turns) and statistics
over the user's own memories only::

    score(d) = sum over query terms t in d of  idf(t) * (k1 + 1) / (1 + k1 * norm(d))
    idf(t) = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5)),  norm(d) = 1 - b + b * dl(d) / avgdl

N and avgdl come from ``sqlstore_memory_stats``; df(t) is counted among the user's
memories by each backend (:mod:`.postgres`, :mod:`.sqlite`). Terms come from
:mod:`.analysis` on both backends, for the index and the query alike, and dl is the
number of a memory's distinct terms, so both backends score alike.

Any term may match. To keep a user with 100,000 memories fast, candidates can be read
MaxScore-style (Turtle & Flood, "Query evaluation: strategies and optimizations",
1995; :meth:`UserMemories.rank`): first the memories holding the rarest terms, scored
exactly on every term; more terms are added only while a memory holding none of the
terms read so far could still beat the k-th score found. The result is the exact top
k.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection

from ..sql.search import MEMORY_ROWS, MEMORY_STATS
from .text import search_scope

__all__ = [
    "BM25_B",
    "BM25_K1",
    "MAX_SEARCH_RESULTS",
    "SCORE_SCALE",
    "TERMS_LOOKED_UP",
    "TERMS_PER_QUERY",
    "Candidate",
    "Scored",
    "Term",
    "UserMemories",
    "bm25",
    "rounded",
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
many bigrams, and looking each up would take seconds."""
_FIRST_READ = 2_000  # candidates read in the first MaxScore round, by summed df

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
    """A query term: its text (in the backend's index form), document frequency among
    the user's memories, and weight."""

    text: str
    df: int
    idf: float = 0.0


@dataclass
class Candidate:
    """A memory read with a flag per query term: whether it holds it."""

    pk: int
    timestamp: float
    dl: int
    flags: list[bool]


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


def bm25(candidate: Candidate, terms: list[Term], avgdl: float) -> float:
    """A candidate's score for ``terms`` (in the order of its flags), rounded."""
    idf = sum(t.idf for t, hit in zip(terms, candidate.flags, strict=True) if hit)
    norm = 1 - BM25_B + BM25_B * candidate.dl / avgdl
    return rounded(idf * (BM25_K1 + 1) / (1 + BM25_K1 * norm))


class UserMemories:
    """The reads of one search, over one user's memories (each backend implements
    :meth:`terms` and :meth:`best`, or overrides :meth:`rank`)."""

    def __init__(
        self, conn: AsyncConnection, app_name: str, user_id: str, query_terms: list[str]
    ) -> None:
        self.conn = conn
        self.params: dict[str, Any] = {"app_name": app_name, "user_id": user_id}
        self.scope = search_scope(app_name, user_id)
        self.query_terms = query_terms
        self.df_limit: Callable[[float], int | None] = lambda n: None
        """Given the user's N, a document frequency past which a term need not be
        counted exactly (its count may stop there; :func:`.hybrid.candidate_terms`
        leaves such terms out), or ``None``: count every term exactly."""

    async def rows(self, pks: list[int]) -> dict[int, Row[Any]]:
        """The memories to return, by row key."""
        result = await self.conn.execute(MEMORY_ROWS, {**self.params, "pks": pks})
        return {row.pk: row for row in result.all()}

    async def stats(self) -> tuple[float, float] | None:
        """The user's N (memories) and avgdl (mean length), or ``None`` for none."""
        row = (await self.conn.execute(MEMORY_STATS, self.params)).first()
        if row is None or row.doc_count <= 0:
            return None
        return float(row.doc_count), max(row.lexeme_count / row.doc_count, 1.0)

    async def terms(self) -> tuple[list[Term], float, float] | None:
        """The query's terms with their document frequency, N and avgdl (``None``
        when the user has no memories)."""
        raise NotImplementedError

    async def best(
        self, wanted: list[Term], seen: list[Term], terms: list[Term], avgdl: float, limit: int
    ) -> list[Scored]:
        """The top ``limit``, best first, of the memories holding a ``wanted`` term but
        no ``seen`` one, scored on all ``terms``."""
        raise NotImplementedError

    async def rank(self, terms: list[Term], avgdl: float, limit: int) -> list[Scored]:
        """The top ``limit``, best first: MaxScore over :meth:`best` (``terms`` sorted
        rarest first).

        The result is the exact top ``limit`` of all the memories holding any term, as
        on SQLite: a common word (held by more than half of the user's memories, idf <
        ln 2, adding at most 1.17 to a score where a rare word adds 10) is read last,
        and only while the rarer words have not found ``limit`` memories scoring more
        than it could add.
        """
        # A term adds at most idf * (k1 + 1) / (1 + k1 * (1 - b)) to a memory's score.
        ceiling = [t.idf * (BM25_K1 + 1) / (1 + BM25_K1 * (1 - BM25_B)) for t in terms]
        read = 1
        while read < len(terms) and sum(t.df for t in terms[: read + 1]) <= _FIRST_READ:
            read += 1
        scored: list[Scored] = []
        seen: list[Term] = []
        while True:
            scored += await self.best(terms[len(seen) : read], seen, terms, avgdl, limit)
            seen = terms[:read]
            scored.sort(reverse=True)
            del scored[limit:]
            unread = sum(ceiling[read : len(terms)])
            if read == len(terms) or (len(scored) == limit and unread < scored[-1][0]):
                return scored
            read += 1
