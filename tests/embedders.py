"""Deterministic embedders for tests: no model, no network, the same vectors on every
machine. ``?embedder=tests.embedders:Concepts`` names one in a URL."""

from __future__ import annotations

import hashlib
import re

# Words that mean the same to the test "model": what keyword search cannot connect.
_CONCEPTS = {
    "sport": "sport",
    "sports": "sport",
    "badminton": "sport",
    "tennis": "sport",
    "play": "sport",
    "wife": "spouse",
    "sarah": "spouse",
    "married": "spouse",
    "car": "vehicle",
    "drive": "vehicle",
    "tesla": "vehicle",
}


class Concepts:
    """Bag of concepts hashed into 64 dimensions: words of one concept (``_CONCEPTS``)
    share a dimension, other words hash to their own."""

    model = "test-concepts"
    dimensions = 64
    batch_size = 8

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    async def embed(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        vectors = []
        for text in texts:
            vector = [0.0] * self.dimensions
            for word in re.findall(r"\w+", text.lower()):
                concept = _CONCEPTS.get(word, word)
                digest = hashlib.sha256(concept.encode()).digest()
                vector[digest[0] % self.dimensions] += 1.0
            if not any(vector):
                vector[0] = 1.0
            vectors.append(vector)
        return vectors


class OtherModel(Concepts):
    """The same vectors under another model name."""

    model = "test-other"


class Failing(Concepts):
    """An embedder whose server is down."""

    model = "test-failing"

    async def embed(self, texts: list[str]) -> list[list[float]]:
        from adk_sqlstore.errors import EmbeddingError

        raise EmbeddingError("test-failing: the server is down")
