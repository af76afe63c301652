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

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy.ext.asyncio import AsyncConnection

from ..sql import embeddings as sql
from ..sql.embeddings import VectorStorage
from ..sql.search import MEMORY_STATS
from .lexical import Term, rounded

__all__ = [
    "BIG_USER_TERM_SHARE",
    "CACHED_FROM",
    "DEFAULT_CANDIDATES",
    "DEFAULT_WEIGHT",
    "HNSW_FROM",
    "Fused",
    "UserVectorCache",
    "VectorQuery",
    "candidate_df_limit",
    "candidate_terms",
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


BIG_USER_TERM_SHARE = 0.02
"""For a user with :data:`HNSW_FROM` memories or more, the BM25 side of a hybrid search
scores its candidates on the query terms held by at most this share of the user's
memories (none when every term is more common: the vectors then rank alone). A word
held by thousands of memories weighs little (idf 3.9 at 2% against about 11 for a
word held by one memory) and reading its postings cost most of the time: on a user
with 100,000 memories, the BM25 side's p95 fell from 154 ms to 18 ms (SQLite).
Lexical-only search always counts every term exactly."""


def candidate_df_limit(n: float) -> int | None:
    """For a user with ``n`` memories, the document frequency at which counting a
    term's may stop in a hybrid search (such a term is left out), or ``None``."""
    return int(BIG_USER_TERM_SHARE * n) + 1 if n >= HNSW_FROM else None


def candidate_terms(terms: list[Term], n: float) -> list[Term]:
    """The terms (rarest first) a hybrid search's BM25 side scores for a user with
    ``n`` memories (see :data:`BIG_USER_TERM_SHARE`)."""
    limit = candidate_df_limit(n)
    if limit is None or not terms:
        return terms
    return [t for t in terms if t.df < limit]


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
    """Min-max normalised; all equal: 1 where positive (a lone good match is the
    best), else 0."""
    low, high = float(values.min()), float(values.max())
    if high > low:
        return (values - low) / (high - low)
    return np.where(values > 0, 1.0, 0.0)


def fuse(lexical: dict[int, float], similar: dict[int, float], weight: float) -> list[Fused]:
    """The union of both sides' candidates with fused scores (see the module
    docstring), unordered; a memory holding no query word whose similarity is 0 or
    less is left out (nothing relates it to the query)."""
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
        if k in lexical or similar.get(k, 0.0) > 0  # no word in common, nor similar: out
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
        found = await _pgvector_scores(conn, query, app_name, user_id, also)
    else:
        found = await _scanned_scores(conn, query, app_name, user_id, also)
    return {pk: rounded(score) for pk, score in found.items()}


async def _pgvector_scores(
    conn: AsyncConnection, query: VectorQuery, app_name: str, user_id: str, also: list[int]
) -> dict[int, float]:
    """:func:`vector_scores` through pgvector: the HNSW index for a big user (the
    exact scan when it comes up short), else the exact scan of the user's vectors."""
    where: dict[str, Any] = {
        "app_name": app_name,
        "user_id": user_id,
        "model": query.model,
        "dimensions": int(query.vector.shape[0]),
        "query": sql.vector_param(query.vector, "pgvector"),
    }
    found: dict[int, float] = {}
    if query.hnsw and await _memory_count(conn, app_name, user_id) >= HNSW_FROM:
        found = dict(await sql.nearest_hnsw(conn, **where, limit=query.candidates))
        if len(found) < query.candidates:
            found = {}  # the index came up short: scan exactly
    if not found:
        found = dict(await sql.nearest_pgvector(conn, **where, limit=query.candidates))
    missing = [pk for pk in also if pk not in found]
    found.update(await sql.scores_pgvector(conn, **where, pks=missing))
    return found


async def _scanned_scores(
    conn: AsyncConnection, query: VectorQuery, app_name: str, user_id: str, also: list[int]
) -> dict[int, float]:
    """:func:`vector_scores` by an exact scan in numpy of the user's vectors."""
    user_vectors = await _user_vectors(
        conn, query.model, int(query.vector.shape[0]), app_name, user_id
    )
    if user_vectors is None:
        return {}
    pks, matrix = user_vectors
    similarity = matrix @ query.vector.astype(np.float32)
    top = min(query.candidates, len(pks))
    best = np.argpartition(-similarity, top - 1)[:top]
    found = {int(pks[i]): float(similarity[i]) for i in best}
    wanted = set(also) - found.keys()
    if wanted:
        for i in np.flatnonzero(np.isin(pks, list(wanted))):
            found[int(pks[i])] = float(similarity[i])
    return found


async def _memory_count(conn: AsyncConnection, app_name: str, user_id: str) -> int:
    row = (await conn.execute(MEMORY_STATS, {"app_name": app_name, "user_id": user_id})).first()
    return int(row.doc_count) if row is not None else 0


CACHED_FROM = 5_000
"""On SQLite, the vectors of a user with this many or more are kept in memory between
searches (:class:`UserVectorCache`): reading 100,000 vectors of 384 dimensions from
SQLite took 250-450 ms, a product with the cached matrix about 10 ms. A smaller user's
are read each time (1,000 in about 4 ms)."""


class UserVectorCache:
    """Users' vectors (row keys and a float32 matrix) kept in memory, least recently
    used dropped first beyond ``max_bytes``. An entry is used only while its
    fingerprint (:func:`~adk_sqlstore.sql.embeddings.vector_fingerprint`, read in the
    search's own transaction) is unchanged, so another process's writes are never
    missed. Shared by every store of the process; safe from any thread."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[tuple[str, ...], tuple[Any, np.ndarray, np.ndarray]] = (
            OrderedDict()
        )
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: tuple[str, ...], fingerprint: Any) -> tuple[np.ndarray, np.ndarray] | None:
        """The vectors stored under ``key`` with this fingerprint, or ``None``."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or entry[0] != fingerprint:
                return None
            self._entries.move_to_end(key)
            return entry[1], entry[2]

    def put(
        self, key: tuple[str, ...], fingerprint: Any, pks: np.ndarray, matrix: np.ndarray
    ) -> None:
        """Keep ``pks`` and ``matrix`` under ``key`` (unless larger than the cache)."""
        size = pks.nbytes + matrix.nbytes
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= old[1].nbytes + old[2].nbytes
            if size > self.max_bytes:
                return
            self._entries[key] = (fingerprint, pks, matrix)
            self._bytes += size
            while self._bytes > self.max_bytes:
                _, (_, p, m) = self._entries.popitem(last=False)
                self._bytes -= p.nbytes + m.nbytes


VECTOR_CACHE = UserVectorCache(512 * 2**20)
"""The process's cache of big users' vectors (512 MiB at most: three users with 100,000
vectors of 384 dimensions)."""


async def _user_vectors(
    conn: AsyncConnection, model: str, dimensions: int, app_name: str, user_id: str
) -> tuple[np.ndarray, np.ndarray] | None:
    """The user's vectors of ``model`` as (row keys, matrix), from the cache when their
    fingerprint is unchanged; ``None`` when there are none."""
    fingerprint = await sql.vector_fingerprint(
        conn, app_name=app_name, user_id=user_id, model=model, dimensions=dimensions
    )
    if fingerprint[0] == 0:
        return None
    key = (
        conn.engine.url.render_as_string(hide_password=True),
        app_name,
        user_id,
        model,
        str(dimensions),
    )
    if fingerprint[0] >= CACHED_FROM:
        hit = VECTOR_CACHE.get(key, fingerprint)
        if hit is not None:
            return hit
    stored = await sql.user_vectors(
        conn, app_name=app_name, user_id=user_id, model=model, dimensions=dimensions
    )
    if not stored:
        return None
    pks = np.fromiter((pk for pk, _ in stored), dtype=np.int64, count=len(stored))
    matrix = np.frombuffer(b"".join(v for _, v in stored), dtype="<f4").reshape(len(stored), -1)
    if fingerprint[0] >= CACHED_FROM:
        VECTOR_CACHE.put(key, fingerprint, pks, matrix)
    return pks, matrix
