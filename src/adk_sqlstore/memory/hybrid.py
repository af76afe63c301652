"""The vector half of a memory service (hybrid search): how the store keeps vectors,
pgvector's HNSW index, the query's embedding, and embedding at ingestion and in
backfills (:mod:`.vectors`)."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable
from typing import Any

from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection

from ..embeddings.base import Embedder, embed_texts
from ..errors import AdkSqlStoreError, ConfigurationError, InvalidArgumentError, VectorSearchWarning
from ..search.hybrid import HNSW_FROM, VectorQuery
from ..search.text import MAX_QUERY_CHARS
from ..sql import embeddings as sql
from ..sql.embeddings import VectorStorage
from ..store import Store
from ..validation import check_count
from .vectors import MemoryVectors, Prepared, unit_rows

__all__ = ["PGVECTOR_HINT", "HybridMemory"]

logger = logging.getLogger(__name__)

PGVECTOR_HINT = (
    "memory search is lexical only: this PostgreSQL server has no pgvector. Install it"
    " (e.g. apt install postgresql-16-pgvector, or an image with pgvector), then run"
    " `adk-sqlstore memory embed --url ... --embedder ...`, which enables it and embeds"
    " the stored memories"
)

_HNSW_BUILT_AT_START = 10_000
"""On PostgreSQL, a service creates its model's HNSW index at first use when fewer
vectors of the model than this are stored (seconds); over more, building it is left
to ``adk-sqlstore memory embed`` (minutes, blocking writes to the table)."""


class HybridMemory:
    """Embeds memories and queries with one embedder, for one store.

    Args:
        store: the memory service's store.
        embedder: the embedder.
        weight: the vector side's weight in the fused score, 0 to 1.
        candidates: memories each side proposes (at most 1,000 are used).

    Raises:
        InvalidArgumentError: ``weight`` outside 0-1, or ``candidates`` not 1 or more.
    """

    def __init__(self, store: Store, embedder: Embedder, *, weight: float, candidates: int) -> None:
        if isinstance(weight, bool) or not isinstance(weight, int | float) or not 0 <= weight <= 1:
            raise InvalidArgumentError(
                f"hybrid_weight must be a number from 0 to 1, not {weight!r}"
            )
        check_count("hybrid_candidates", candidates, least=1)
        self.store = store
        self.vectors = MemoryVectors(embedder)
        self.weight = float(weight)
        self.candidates = min(candidates, 1000)
        self._storage: VectorStorage | None = None
        self._hnsw = False

    async def storage(self) -> VectorStorage:
        """How the store keeps vectors (read once): ``"blob"``, ``"pgvector"`` (then
        the model's HNSW index is made if the table is small), or ``"none"``
        (PostgreSQL without pgvector: a :class:`VectorSearchWarning` says so once)."""
        if self._storage is None:
            async with self.store.transaction(write=False) as conn:
                storage = await sql.vector_storage(conn)
            if storage == "none":
                warnings.warn(PGVECTOR_HINT, VectorSearchWarning, stacklevel=3)
            elif storage == "pgvector":
                self._hnsw = await self._ensure_hnsw(build_any=False)
            self._storage = storage
        return self._storage

    async def _ensure_hnsw(self, *, build_any: bool) -> bool:
        """Whether the model has its HNSW index, creating it if fewer than
        :data:`_HNSW_BUILT_AT_START` vectors of the model are stored (or whatever their
        number, ``build_any``: ``memory embed``)."""
        model, dimensions = self.vectors.model, self.vectors.dimensions
        async with self.store.transaction(write=False) as conn:
            if await sql.hnsw_exists(conn, model=model, dimensions=dimensions):
                return True
            count = await sql.count_vectors(conn, model=model)
        if count >= _HNSW_BUILT_AT_START and not build_any:
            logger.warning(
                "%d vectors of %s have no HNSW index: users with %d memories or more are"
                " searched by an exact scan; `adk-sqlstore memory embed` builds the index",
                count,
                model,
                HNSW_FROM,
            )
            return False
        try:
            async with self.store.transaction(write=True) as conn:
                await sql.ensure_hnsw(conn, model=model, dimensions=dimensions)
        except (AdkSqlStoreError, DBAPIError) as exc:  # e.g. another process made it first
            logger.info("creating the HNSW index of %s: %s", model, exc)
        async with self.store.transaction(write=False) as conn:
            return await sql.hnsw_exists(conn, model=model, dimensions=dimensions)

    async def prepare(self, rows: list[dict[str, Any]]) -> Prepared | None:
        """Vectors for memory rows of one user, computed before the write transaction
        (:meth:`.vectors.MemoryVectors.prepare`)."""
        if not rows:
            return None
        return await self.vectors.prepare(self.store, await self.storage(), rows)

    async def write(
        self, conn: AsyncConnection, prepared: Prepared | None, app_name: str, user_id: str
    ) -> None:
        """Store ``prepared`` vectors, in the transaction that wrote their memories."""
        if prepared is not None:
            await self.vectors.write(conn, prepared, app_name=app_name, user_id=user_id)

    async def query(self, query: str) -> VectorQuery | None:
        """The query's embedding, made before any transaction opens; ``None`` for a
        blank query, without vector storage, or when the embedder fails (logged: the
        search is then lexical)."""
        if not query.strip():
            return None
        storage = await self.storage()
        if storage == "none":
            return None
        embedder = self.vectors.embedder
        try:
            embedded = await embed_texts(embedder, [query[:MAX_QUERY_CHARS]])
        except AdkSqlStoreError as exc:
            logger.warning(
                "embedding a query with %s failed; searching lexically: %s", embedder.model, exc
            )
            return None
        return VectorQuery(
            unit_rows(embedded)[0],
            self.vectors.model,
            storage,
            weight=self.weight,
            candidates=self.candidates,
            hnsw=self._hnsw,
        )

    async def count_missing(self, *, app_name: str | None) -> int:
        """How many memories (of ``app_name``, or all) have no vector of the model."""
        return await self.vectors.count_missing(self.store, app_name=app_name)

    async def embed_missing(
        self, *, app_name: str | None, batch_size: int, on_batch: Callable[[int], None] | None
    ) -> int:
        """See :meth:`adk_sqlstore.SqlMemoryService.embed_missing`."""
        if self.store.engine.dialect.name == "postgresql":
            async with self.store.transaction(write=True) as conn:
                enabled = await sql.enable_pgvector(conn)
            if not enabled:
                raise ConfigurationError(
                    "this PostgreSQL server has no pgvector (the vector extension): install"
                    " it on the server, then run this again"
                )
            self._storage = "pgvector"
        done = await self.vectors.embed_missing(
            self.store,
            await self.storage(),
            app_name=app_name,
            batch_size=batch_size,
            on_batch=on_batch,
        )
        if self._storage == "pgvector":
            self._hnsw = await self._ensure_hnsw(build_any=True)
        return done
