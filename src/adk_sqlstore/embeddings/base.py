"""The embedder protocol, and batching with checks."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from ..errors import EmbeddingError

__all__ = ["Embedder", "embed_texts"]


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors (see :mod:`adk_sqlstore.embeddings`)."""

    model: str
    dimensions: int
    batch_size: int

    async def embed(self, texts: list[str]) -> list[list[float]]:
        """One vector of :attr:`dimensions` floats per text, in order (at most
        :attr:`batch_size` texts)."""
        ...


async def embed_texts(embedder: Embedder, texts: Sequence[str]) -> list[list[float]]:
    """Every text's vector, in order, asking ``embedder`` for at most its
    ``batch_size`` texts at a time.

    Raises:
        EmbeddingError: the embedder failed, or returned another number of vectors,
            a vector of another length, or a value that is not a finite number.
    """
    vectors: list[list[float]] = []
    size = max(int(embedder.batch_size), 1)
    for start in range(0, len(texts), size):
        batch = list(texts[start : start + size])
        got = await embedder.embed(batch)
        if len(got) != len(batch):
            raise EmbeddingError(f"{embedder.model}: {len(got)} vectors for {len(batch)} texts")
        for vector in got:
            if len(vector) != embedder.dimensions:
                raise EmbeddingError(
                    f"{embedder.model}: a vector of {len(vector)} dimensions, not"
                    f" {embedder.dimensions}"
                )
            if not all(isinstance(x, int | float) and math.isfinite(x) for x in vector):
                raise EmbeddingError(f"{embedder.model}: a vector holds a non-finite value")
        vectors += [[float(x) for x in v] for v in got]
    return vectors
