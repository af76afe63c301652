"""Hybrid-search figures (issue 14): search latency with vectors at scale, the query
embedding's own latency, and ingestion throughput with the local model and without.

The scale databases hold generated memories (``memory_bench.Corpus``) and random unit
vectors of 384 dimensions (MiniLM's size), written straight into the vector table: the
model would take hours to embed a million texts here, and search latency does not
depend on what the vectors mean. Queries are embedded by a stand-in embedder that
costs nothing (a random unit vector), so the search figures exclude the query's
embedding, which is measured on its own with the real model.

PostgreSQL needs pgvector: the machine's server is used when it has it, else a
throwaway PostgreSQL 16 with pgvector from the PyPI package ``pgserver`` (see
``tests/pg_cluster.py``), whose version the figure's label names.
"""

from __future__ import annotations

import contextlib
import hashlib
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import text
from sqlalchemy.engine import make_url

from adk_sqlstore import SqlMemoryService

from .memory_bench import (
    APP,
    Corpus,
    _core_sessions,
    _load_scale,
    _percentiles,
    _search_latencies,
    _settle,
)
from .suite import Figure

DIMENSIONS = 384
MODEL = "bench-random-384"


@dataclass(frozen=True)
class HybridSize:
    users: int
    per_user: int
    heavy: int
    queries: int
    model_events: int  # events ingested with the local model


HYBRID_SIZES = {
    "small": HybridSize(users=100, per_user=100, heavy=2_000, queries=40, model_events=64),
    "full": HybridSize(users=1_000, per_user=1_000, heavy=100_000, queries=200, model_events=1_000),
}


class RandomEmbedder:
    """A stand-in embedder: a random unit vector per text (seeded by the text), at no
    cost, so that search latency excludes the query's embedding."""

    model = MODEL
    dimensions = DIMENSIONS
    batch_size = 256

    async def embed(self, texts: list[str]) -> list[list[float]]:
        out = []
        for t in texts:
            seed = int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "little")
            v = np.random.default_rng(seed).standard_normal(DIMENSIONS)
            out.append((v / np.linalg.norm(v)).tolist())
        return out


async def _has_pgvector(admin_url: str) -> bool:
    import asyncpg

    conn = await asyncpg.connect(_dsn(admin_url))
    try:
        return bool(
            await conn.fetchval("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
        )
    finally:
        await conn.close()


def _dsn(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


@contextlib.asynccontextmanager
async def vector_server(backend: str, admin_url: str) -> AsyncIterator[tuple[str, str]]:
    """(admin URL, description) of a server that keeps vectors: the given one, or a
    throwaway pgserver PostgreSQL with pgvector; for SQLite, nothing to start."""
    if backend == "sqlite" or await _has_pgvector(admin_url):
        yield admin_url, ""
        return
    from tests.pg_cluster import ThrowawayCluster, pgvector_binaries

    with ThrowawayCluster(binaries=pgvector_binaries()) as cluster:
        yield cluster.url(), "pgserver's PostgreSQL 16 with pgvector 0.6.2"


async def _bulk_vectors(memory: SqlMemoryService, seed: int) -> int:
    """A random unit vector of :data:`MODEL` for every memory without one."""
    rng = np.random.default_rng(seed)
    engine = memory.engine
    async with engine.connect() as conn:
        rows = (
            await conn.execute(
                text(
                    "SELECT pk, app_name, user_id FROM sqlstore_memories m WHERE NOT EXISTS"
                    " (SELECT 1 FROM sqlstore_memory_embeddings e WHERE e.memory_pk = m.pk)"
                    " ORDER BY pk"
                )
            )
        ).all()
    for start in range(0, len(rows), 20_000):
        chunk = rows[start : start + 20_000]
        vectors = rng.standard_normal((len(chunk), DIMENSIONS)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        if engine.dialect.name == "postgresql":
            await _copy_pgvector(memory, chunk, vectors)
        else:
            async with engine.begin() as conn:
                await conn.execute(
                    text(
                        "INSERT INTO sqlstore_memory_embeddings VALUES"
                        " (:pk, :app_name, :user_id, :model, :dimensions, '', :embedding, 0)"
                    ),
                    [
                        {
                            "pk": pk,
                            "app_name": app,
                            "user_id": user,
                            "model": MODEL,
                            "dimensions": DIMENSIONS,
                            "embedding": vectors[i].astype("<f4").tobytes(),
                        }
                        for i, (pk, app, user) in enumerate(chunk)
                    ],
                )
    return len(rows)


async def _copy_pgvector(memory: SqlMemoryService, rows: Any, vectors: np.ndarray) -> None:
    """COPY with pgvector's binary format (the fastest load; about 1 s per 100,000)."""
    import struct

    import asyncpg

    conn = await asyncpg.connect(_dsn(memory.store.url.render_as_string(hide_password=False)))
    try:
        await conn.set_type_codec(
            "vector",
            schema="public",
            format="binary",
            encoder=lambda v: struct.pack(">HH", len(v), 0) + np.asarray(v, ">f4").tobytes(),
            decoder=lambda b: np.frombuffer(b, ">f4", offset=4),
        )
        await conn.copy_records_to_table(
            "sqlstore_memory_embeddings",
            records=[
                (pk, app, user, MODEL, DIMENSIONS, "", vectors[i], 0.0)
                for i, (pk, app, user) in enumerate(rows)
            ],
            columns=[
                "memory_pk",
                "app_name",
                "user_id",
                "model",
                "dimensions",
                "text_sha256",
                "embedding",
                "update_time",
            ],
        )
        await conn.execute("VACUUM ANALYZE sqlstore_memory_embeddings")
    finally:
        await conn.close()


@contextlib.asynccontextmanager
async def _database(backend: str, admin_url: str) -> AsyncIterator[str]:
    from .__main__ import throwaway

    async with throwaway(backend, admin_url) as url:
        yield url


async def _scale(
    backend: str,
    admin_url: str,
    corpus: Corpus,
    users: int,
    per_user: int,
    heavy: int,
    queries: int,
    progress: Callable[[str], None],
) -> tuple[list[float], list[float], float]:
    """Hybrid search latencies (normal users, the heavy user) and the load's seconds."""
    async with _database(backend, admin_url) as url:
        async with SqlMemoryService.from_url(url, auto_migrate=True) as loader:
            progress(f"hybrid: loading {users * per_user + heavy:,} memories and vectors")
            start = time.perf_counter()
            await _load_scale(loader, corpus, users, per_user, heavy, progress)
            await _bulk_vectors(loader, seed=users + heavy)
            await _settle(loader)
            load = time.perf_counter() - start
        async with SqlMemoryService.from_url(url, embedder=RandomEmbedder()) as memory:
            if heavy:  # nothing to embed, but it builds pgvector's HNSW index
                began = time.perf_counter()
                await memory.embed_missing()
                progress(f"hybrid: index ready in {time.perf_counter() - began:.0f} s")
            user = "heavy" if heavy else "user-0"
            await memory.search_memory(app_name=APP, user_id=user, query="warm up")

            async def search(user: str, query: str) -> Any:
                return await memory.search_memory(app_name=APP, user_id=user, query=query)

            if heavy:
                times = []
                for _ in range(queries):
                    began = time.perf_counter()
                    await search("heavy", corpus.query())
                    times.append((time.perf_counter() - began) * 1000)
                return [], times, load
            normal, _ = await _search_latencies(search, corpus, users, queries, False)
            return normal, [], load


async def _model_figures(
    url: str, corpus: Corpus, events: int, progress: Callable[[str], None]
) -> dict[str, float] | str:
    """The local model's query latency (p50, p95 ms) and ingestion events/s with it
    and without (the same sessions), or why it could not run."""
    try:
        import sentence_transformers  # noqa: F401
    except ImportError:
        return 'the embeddings extra is not installed (pip install "adk-sqlstore[embeddings]")'
    from adk_sqlstore.embeddings import MiniLMEmbedder

    embedder = MiniLMEmbedder(threads=2)
    progress("hybrid: the local model's query latency and ingestion throughput")
    await embedder.embed(["warm up"])
    times = []
    for _ in range(50):
        query = corpus.query()
        began = time.perf_counter()
        await embedder.embed([query])
        times.append((time.perf_counter() - began) * 1000)
    q50, q95 = _percentiles(times)
    out = {"query50": q50, "query95": q95}
    for label, chosen in (("without", None), ("with", embedder)):
        sessions = _core_sessions(corpus, f"ingest-{label}-{uuid.uuid4().hex[:6]}", events)
        async with SqlMemoryService.from_url(url, embedder=chosen, auto_migrate=True) as memory:
            began = time.perf_counter()
            for session in sessions:
                await memory.add_session_to_memory(session)
            out[label] = events / (time.perf_counter() - began)
    return out


async def run_hybrid(
    backend: str, admin_url: str, size: HybridSize, progress: Callable[[str], None]
) -> list[Figure]:
    """The hybrid-search figures of one backend."""
    corpus = Corpus(seed=11)
    figures: list[Figure] = []
    async with vector_server(backend, admin_url) as (server, note):
        where = f" ({note})" if note else ""
        total = size.users * size.per_user
        normal, _, load = await _scale(
            backend, server, corpus, size.users, size.per_user, 0, size.queries, progress
        )
        p50, p95 = _percentiles(normal)
        label = f"hybrid search at {total:,} memories ({size.users:,} users){where}"
        figures.append(Figure("hybrid50", label + ", p50", "ms", False, {"core": p50}))
        figures.append(Figure("hybrid95", label + ", p95", "ms", False, {"core": p95}))
        figures.append(
            Figure(
                "hybridload", f"loading {total:,} memories and vectors", "s", False, {"core": load}
            )
        )
        _, heavy, _ = await _scale(
            backend, server, corpus, 0, 0, size.heavy, size.queries, progress
        )
        h50, h95 = _percentiles(heavy)
        figures.append(
            Figure(
                "hybridheavy95",
                f"hybrid search, user with {size.heavy:,} memories, p95 (p50 {h50:.1f} ms)",
                "ms",
                False,
                {"core": h95},
            )
        )
        async with _database(backend, server) as url:
            model = await _model_figures(url, corpus, size.model_events, progress)
    if isinstance(model, str):
        progress(f"hybrid: no local-model figures: {model}")
        return figures
    figures.append(
        Figure(
            "embedquery",
            f"query embedding, all-MiniLM-L6-v2 on the CPU, p95 (p50 {model['query50']:.1f} ms)",
            "ms",
            False,
            {"core": model["query95"]},
        )
    )
    for label in ("without", "with"):
        figures.append(
            Figure(
                f"ingest_{label}",
                f"add_session_to_memory {label} the local model",
                "events/s",
                True,
                {"core": model[label]},
            )
        )
    return figures
