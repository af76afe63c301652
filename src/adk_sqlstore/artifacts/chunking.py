"""An artifact's bytes in chunks of exactly :data:`~adk_sqlstore.sql.artifacts.CHUNK_BYTES`
(the last shorter): cut from bytes in memory, or gathered from a stream of pieces of
any size, a few chunks at a time (never the whole)."""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Iterable

from ..errors import InvalidArgumentError
from ..sql.artifacts import CHUNK_BYTES

__all__ = ["CHUNKS_PER_STATEMENT", "as_chunks", "batches"]

CHUNKS_PER_STATEMENT = 4
"""Chunks written or read per statement: 4 MiB, within MySQL's default packet (16 MiB)."""


def batches(data: memoryview) -> Iterable[list[tuple[int, bytes]]]:
    """``data`` as (seq, chunk) batches of a statement each, copied a batch at a time."""
    step = CHUNK_BYTES * CHUNKS_PER_STATEMENT
    for start in range(0, len(data), step):
        batch = data[start : start + step]
        first = start // CHUNK_BYTES
        yield [
            (first + n, bytes(batch[offset : offset + CHUNK_BYTES]))
            for n, offset in enumerate(range(0, len(batch), CHUNK_BYTES))
        ]


async def as_chunks(source: AsyncIterable[bytes] | Iterable[bytes]) -> AsyncIterator[bytes]:
    """The bytes of ``source`` in chunks of exactly CHUNK_BYTES (the last shorter)."""
    pending = bytearray()

    async def items() -> AsyncIterator[bytes]:
        if isinstance(source, AsyncIterable):
            async for item in source:
                yield item
        else:
            for item in source:
                yield item

    async for item in items():
        if not isinstance(item, bytes | bytearray | memoryview):
            raise InvalidArgumentError(
                f"an artifact stream yields bytes, not {type(item).__name__}"
            )
        pending += item
        while len(pending) >= CHUNK_BYTES:
            yield bytes(pending[:CHUNK_BYTES])
            del pending[:CHUNK_BYTES]
    if pending:
        yield bytes(pending)
