"""Hybrid ranking: BM25 and vector similarity fused by normalised scores.

Each side proposes its top ``candidates`` memories of the user (BM25 from
:mod:`.lexical`; the largest inner products between the query's unit vector and the
memories' vectors); over their union, both scores are min-max normalised and mixed::

    score = weight * minmax(similarity) + (1 - weight) * minmax(bm25)

A memory outside BM25's top ``candidates`` counts 0 there; every candidate's
similarity is its real one (a memory without a vector of the model counts as the
least similar). Defaults (weight 0.5, 100 candidates a side) come from the LoCoMo
study in ``docs/hybrid-search.md``: recall@10 0.686 against 0.612 for BM25 alone;
reciprocal-rank fusion scored 0.594, below BM25 alone.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sqlalchemy.ext.asyncio import AsyncConnection

from ..sql import embeddings as sql
from ..sql.embeddings import VectorStorage
from ..sql.search import MEMORY_STATS
from .lexical import rounded

__all__ = [
    "DEFAULT_CANDIDATES",
    "DEFAULT_WEIGHT",
    "HNSW_FROM",
    "Fused",
    "VectorQuery",
    "fuse",
    "vector_scores",
]

DEFAULT_WEIGHT = 0.5
"""The vector side's weight in the fused score (BM25 has ``1 - weight``)."""
DEFAULT_CANDIDATES = 100
"""Memories each side proposes."""
HNSW_FROM = 20_000
"""On PostgreSQL, a user with this many memories or more is searched through the
model's HNSW index (where it exists), and a smaller one by an exact scan of the user's
vectors (their btree index): an exact scan of 100,000 vectors of 384 dimensions took
about 100 ms, the index 13 ms; 1,000 took 1.5 ms exactly. When the index returns fewer
than the candidates wanted (it filters the user's vectors out of the nearest of all
users'), the exact scan runs instead."""


@dataclass(frozen=True)
class VectorQuery:
    """The vector half of a hybrid search: the query's unit vector (float32), the
    model whose vectors it is compared with, how they are stored, and the fusion's
    weight and candidates per side."""

    vector: np.ndarray
    model: str
    storage: VectorStorage
    weight: float = DEFAULT_WEIGHT
    candidates: int = DEFAULT_CANDIDATES
    hnsw: bool = False
    """Whether the model has an HNSW index (PostgreSQL)."""


@dataclass(frozen=True)
class Fused:
    """A memory's fused score, its BM25 score (``None`` outside BM25's candidates) and
    its similarity (``None`` without a vector of the model)."""

    pk: int
    score: float
    lexical: float | None
    similarity: float | None


def _minmax(values: np.ndarray) -> np.ndarray:
    low, high = float(values.min()), float(values.max())
    return (values - low) / (high - low) if high > low else np.zeros_like(values)


def fuse(lexical: dict[int, float], similar: dict[int, float], weight: float) -> list[Fused]:
    """The union of both sides' candidates with fused scores (see the module
    docstring), unordered."""
    keys = list(lexical.keys() | similar.keys())
    if not keys:
        return []
    floor = min(similar.values()) if similar else 0.0
    bm25 = np.array([lexical.get(k, 0.0) for k in keys], dtype=np.float64)
    cos = np.array([similar.get(k, floor) for k in keys], dtype=np.float64)
    mixed = weight * _minmax(cos) + (1 - weight) * _minmax(bm25)
    return [
        Fused(k, rounded(float(mixed[i])), lexical.get(k), similar.get(k))
        for i, k in enumerate(keys)
    ]


async def vector_scores(
    conn: AsyncConnection,
    query: VectorQuery,
    *,
    app_name: str,
    user_id: str,
    also: list[int],
) -> dict[int, float]:
    """The user's ``query.candidates`` memories most similar to the query, and the
    similarity of the memories ``also`` (BM25's candidates), by row key: inner
    products of unit vectors, rounded as scores are."""
    if query.storage == "pgvector":
        text_form = "[" + ",".join(repr(float(x)) for x in query.vector) + "]"
        where = {"app_name": app_name, "user_id": user_id, "model": query.model}
        found = {}
        if query.hnsw and await _memory_count(conn, app_name, user_id) >= HNSW_FROM:
            found = dict(
                await sql.nearest_hnsw(
                    conn,
                    **where,
                    dimensions=int(query.vector.shape[0]),
                    query=text_form,
                    limit=query.candidates,
                )
            )
            if len(found) < query.candidates:
                found = {}  # the index came up short: scan exactly
        if not found:
            found = dict(
                await sql.nearest_pgvector(conn, **where, query=text_form, limit=query.candidates)
            )
        missing = [pk for pk in also if pk not in found]
        found.update(
            await sql.scores_pgvector(
                conn,
                app_name=app_name,
                user_id=user_id,
                model=query.model,
                query=text_form,
                pks=missing,
            )
        )
    else:
        stored = await sql.user_vectors(conn, app_name=app_name, user_id=user_id, model=query.model)
        if not stored:
            return {}
        pks = np.fromiter((pk for pk, _ in stored), dtype=np.int64, count=len(stored))
        matrix = np.frombuffer(b"".join(v for _, v in stored), dtype="<f4")
        matrix = matrix.reshape(len(stored), -1)
        if matrix.shape[1] != query.vector.shape[0]:
            return {}
        similarity = matrix @ query.vector.astype(np.float32)
        top = min(query.candidates, len(stored))
        best = np.argpartition(-similarity, top - 1)[:top]
        found = {int(pks[i]): float(similarity[i]) for i in best}
        wanted = set(also) - found.keys()
        if wanted:
            for i in np.flatnonzero(np.isin(pks, list(wanted))):
                found[int(pks[i])] = float(similarity[i])
    return {pk: rounded(score) for pk, score in found.items()}


async def _memory_count(conn: AsyncConnection, app_name: str, user_id: str) -> int:
    row = (await conn.execute(MEMORY_STATS, {"app_name": app_name, "user_id": user_id})).first()
    return int(row.doc_count) if row is not None else 0
