"""Embedding memories for hybrid search: what is embedded, when, and how it is stored.

A memory's vector is the mean of two unit vectors: the memory's indexed text (author
and text, after the ingestion filter) and the same preceded by the previous memory of
its session (its own text alone when it has none: the first turn of a session, or a
fact from ``add_memory``). On the LoCoMo conversations this lifted hybrid recall@10
from 0.672 (the turn alone) to 0.686 (``docs/hybrid-search.md``); it costs a second
model pass per memory and nothing at search time.

Vectors are computed before the write transaction opens (no lock is held while a
model runs), only for memories whose embedded text changed or that have no vector of
the embedder's model (the SHA-256 of the embedded texts is stored beside the vector),
and written in the transaction that writes the memories. When the embedder fails,
the memories are still written, without vectors; ``adk-sqlstore memory embed`` adds
them later.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sqlalchemy.ext.asyncio import AsyncConnection

from ..embeddings.base import Embedder, embed_texts
from ..errors import AdkSqlStoreError
from ..sql import embeddings as sql
from ..sql.memory import memory_texts
from ..sql.users import lock_users
from ..store import Store, retry_conflicts

__all__ = ["DEFAULT_EMBED_BATCH", "MemoryVectors", "Prepared", "unit_rows"]

DEFAULT_EMBED_BATCH = 256
"""Memories per transaction of :meth:`MemoryVectors.embed_missing`."""

logger = logging.getLogger(__name__)


def unit_rows(vectors: Sequence[Sequence[float]]) -> np.ndarray:
    """Vectors as float32 rows of length 1 (a zero vector stays zero)."""
    matrix = np.asarray(vectors, dtype=np.float64)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return (matrix / np.where(norms > 0, norms, 1.0)).astype(np.float32)


def _sha(turn: str, with_previous: str) -> str:
    return hashlib.sha256(f"{turn}\x00{with_previous}".encode()).hexdigest()


def _with_previous(previous: str | None, turn: str) -> str:
    """What is embedded beside the turn: the previous turn, then the turn."""
    return f"{previous}\n{turn}" if previous is not None else turn


@dataclass
class Prepared:
    """Vectors computed for some memory rows: by memory id, (SHA-256, vector)."""

    storage: sql.VectorStorage = "none"
    vectors: dict[str, tuple[str, np.ndarray]] = field(default_factory=dict)
    stale: list[str] = field(default_factory=list)
    """Memory ids whose stored vector no longer matches their text and could not be
    embedded again (the embedder failed): their vectors are deleted."""


class MemoryVectors:
    """Embeds memory rows with one embedder (see the module docstring).

    Args:
        embedder: the embedder; its ``model`` is stored beside each vector.
    """

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder

    @property
    def model(self) -> str:
        """The embedder's model name."""
        return str(self.embedder.model)

    @property
    def dimensions(self) -> int:
        """The length of the embedder's vectors (with the model, what a vector is
        compared by)."""
        return int(self.embedder.dimensions)

    async def vectors(self, texts: Sequence[tuple[str, str]]) -> np.ndarray:
        """The vector of each (text, text with its previous) pair, in order.

        Raises:
            EmbeddingError: the embedder failed or answered wrongly.
        """
        distinct = list(dict.fromkeys(t for pair in texts for t in pair))
        embedded = unit_rows(await embed_texts(self.embedder, distinct))
        where = {t: i for i, t in enumerate(distinct)}
        return np.stack([(embedded[where[a]] + embedded[where[b]]) / 2 for a, b in texts]).astype(
            np.float32
        )

    async def prepare(
        self, store: Store, storage: sql.VectorStorage, rows: Sequence[dict[str, Any]]
    ) -> Prepared:
        """Vectors for those of ``rows`` (memory rows of one user, in session order)
        whose embedded text changed or that have none of this model; read and embedded
        outside any write transaction. An embedder failure is logged and leaves the
        memories without vectors."""
        if storage == "none" or not rows:
            return Prepared(storage)
        first = rows[0]
        async with store.transaction(write=False) as conn:
            stored = await sql.embedding_shas(
                conn,
                app_name=first["app_name"],
                user_id=first["user_id"],
                model=self.model,
                dimensions=self.dimensions,
                ids=[row["id"] for row in rows],
            )
            previous = await sql.previous_of(conn, first)
        wanted: list[tuple[str, str, str]] = []  # (memory id, text, text with previous)
        for row in rows:
            turn = row["text"]
            with_previous = _with_previous(previous, turn)
            if row["session_id"] is not None:
                previous = turn
            if stored.get(row["id"]) != _sha(turn, with_previous):
                wanted.append((row["id"], turn, with_previous))
        if not wanted:
            return Prepared(storage)
        try:
            vectors = await self.vectors([(a, b) for _, a, b in wanted])
        except AdkSqlStoreError as exc:
            logger.warning(
                "embedding %d memories with %s failed; they are stored without vectors"
                " (adk-sqlstore memory embed adds them): %s",
                len(wanted),
                self.model,
                exc,
            )
            return Prepared(storage, stale=[mid for mid, _, _ in wanted if mid in stored])
        return Prepared(
            storage,
            {mid: (_sha(a, b), vectors[i]) for i, (mid, a, b) in enumerate(wanted)},
        )

    async def write(
        self, conn: AsyncConnection, prepared: Prepared, *, app_name: str, user_id: str
    ) -> None:
        """Store ``prepared`` vectors beside their memories (written earlier in the same
        transaction); a memory gone meanwhile is skipped."""
        if not prepared.vectors and not prepared.stale:
            return
        pks = await sql.memory_pks(
            conn, app_name=app_name, user_id=user_id, ids=[*prepared.vectors, *prepared.stale]
        )
        await sql.delete_embeddings(
            conn,
            app_name=app_name,
            user_id=user_id,
            pks=[pks[mid] for mid in prepared.stale if mid in pks],
        )
        now = time.time()
        await sql.upsert_embeddings(
            conn,
            prepared.storage,
            [
                {
                    "memory_pk": pks[mid],
                    "app_name": app_name,
                    "user_id": user_id,
                    "model": self.model,
                    "dimensions": int(vector.shape[0]),
                    "text_sha256": sha,
                    "embedding": sql.vector_param(vector, prepared.storage),
                    "update_time": now,
                }
                for mid, (sha, vector) in prepared.vectors.items()
                if mid in pks
            ],
        )

    async def count_missing(self, store: Store, *, app_name: str | None) -> int:
        """How many memories (of ``app_name``, or all) have no vector of the model."""
        async with store.transaction(write=False) as conn:
            return await sql.count_to_embed(
                conn, model=self.model, dimensions=self.dimensions, app_name=app_name
            )

    async def embed_missing(
        self,
        store: Store,
        storage: sql.VectorStorage,
        *,
        app_name: str | None,
        batch_size: int,
        on_batch: Callable[[int], None] | None,
    ) -> int:
        """Embed every memory (of ``app_name``, or all) that has no vector of the model,
        in row-key order, ``batch_size`` at a time: each batch is read, embedded
        outside any transaction, then written in one transaction (a memory deleted or
        changed meanwhile is skipped), under the user lock of each user of the batch
        (``"exclusive"``, in key order). Idempotent and resumable. Returns how many were
        embedded.

        Raises:
            EmbeddingError: the embedder failed (the batches before are kept).
        """
        if storage == "none":
            return 0
        after, done = 0, 0
        while True:
            batch, pairs = await self._missing_batch(store, app_name, after, batch_size)
            if not batch:
                return done
            after = batch[-1]["pk"]
            vectors = await self.vectors(pairs)
            write = functools.partial(self._write_batch, store, storage, batch, pairs, vectors)
            rows = await retry_conflicts(write)
            done += len(rows)
            if on_batch is not None:
                on_batch(len(batch))

    async def _write_batch(
        self,
        store: Store,
        storage: sql.VectorStorage,
        batch: list[dict[str, Any]],
        pairs: list[tuple[str, str]],
        vectors: np.ndarray,
    ) -> list[dict[str, Any]]:
        """Store the vectors of ``batch`` (one transaction, under its users' locks) for
        the memories whose text is still the one embedded; the rows written."""
        now = time.time()
        async with store.transaction(write=True) as conn:
            users = [(row["app_name"], row["user_id"]) for row in batch]
            await lock_users(conn, users, mode="exclusive")
            current = await memory_texts(conn, pks=[row["pk"] for row in batch])
            rows = [
                {
                    "memory_pk": row["pk"],
                    "app_name": row["app_name"],
                    "user_id": row["user_id"],
                    "model": self.model,
                    "dimensions": int(vectors[i].shape[0]),
                    "text_sha256": _sha(*pairs[i]),
                    "embedding": sql.vector_param(vectors[i], storage),
                    "update_time": now,
                }
                for i, row in enumerate(batch)
                if current.get(row["pk"]) == row["text"]
            ]
            await sql.upsert_embeddings(conn, storage, rows)
        return rows

    async def _missing_batch(
        self, store: Store, app_name: str | None, after: int, limit: int
    ) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
        """The next memories without a vector of the model, after row key ``after``,
        and what to embed for each: (text, text with its previous turn)."""
        async with store.transaction(write=False) as conn:
            batch = await sql.memories_to_embed(
                conn,
                model=self.model,
                dimensions=self.dimensions,
                app_name=app_name,
                after=after,
                limit=limit,
            )
            pairs = []
            for row in batch:
                previous = await sql.previous_of(conn, row)
                pairs.append((row["text"], _with_previous(previous, row["text"])))
        return batch, pairs
