"""Searching facts no longer current (``search_memory(..., history=True)``).

They are not in the search index (an invalidated fact's memory goes; an expired one is
never returned), so a search asking for history ranks the user's past facts (the 1,000
most recently changed) in Python, by BM25 among themselves over the same text analysis
the index uses (:mod:`adk_sqlstore.search.lexical`'s formula and constants).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

from ..search.analysis import Analyzer
from ..search.lexical import BM25_B, BM25_K1, TERMS_PER_QUERY, rounded
from ..sql.facts import FactRow

__all__ = ["PAST_FACTS_SEARCHED", "rank_past_facts"]

PAST_FACTS_SEARCHED = 1000
"""The user's most recently changed past facts a history search ranks."""


def rank_past_facts(
    analyzer: Analyzer, query: str, facts: Sequence[FactRow], limit: int
) -> list[tuple[float, FactRow]]:
    """The facts holding a query term, best first (score, fact), at most ``limit``;
    ties go to the more recently changed."""
    wanted = analyzer.query_terms(query)[:TERMS_PER_QUERY]
    if not wanted or not facts:
        return []
    docs = [(fact, set(analyzer.index_terms(fact.text))) for fact in facts]
    n = len(docs)
    avgdl = sum(len(terms) for _, terms in docs) / n or 1.0
    df = Counter(t for _, terms in docs for t in set(wanted) & terms)
    scored = []
    for fact, terms in docs:
        norm = 1 - BM25_B + BM25_B * len(terms) / avgdl
        score = sum(
            math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) * (BM25_K1 + 1) / (1 + BM25_K1 * norm)
            for t in wanted
            if t in terms
        )
        if score > 0:
            scored.append((rounded(score), fact))
    scored.sort(key=lambda pair: (pair[0], pair[1].update_time), reverse=True)
    return scored[:limit]
