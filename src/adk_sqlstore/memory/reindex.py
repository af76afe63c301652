"""Re-indexing memories: their index terms made again from their stored text, for a
new version of the text analysis or another search language.

Each batch of rows is one transaction, read in row-key order and written back with
the terms of :class:`~adk_sqlstore.search.analysis.Analyzer`, under the user lock of
each user of the batch (``"exclusive"``, in key order: :mod:`adk_sqlstore.sql.users`),
the texts read again once it is held; a row already analysed as the target is
skipped, so running it again (or after an interruption) only does what is left.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

from ..errors import SearchLanguageWarning
from ..search.analysis import Analyzer, analyzer
from ..sql import memory as sql
from ..sql.users import lock_users
from ..store import Store, retry_conflicts

__all__ = ["DEFAULT_REINDEX_BATCH", "count_to_reindex", "reindex", "warn_if_indexed_otherwise"]

DEFAULT_REINDEX_BATCH = 1_000
"""Memories re-indexed per transaction."""


async def count_to_reindex(store: Store, *, language: str, app_name: str | None) -> int:
    """How many memories (of ``app_name``, or all) are not indexed for ``language``
    by this version of the analysis."""
    signature = analyzer(language).signature
    async with store.transaction(write=False) as conn:
        return await sql.count_memories_to_reindex(conn, signature=signature, app_name=app_name)


async def reindex(
    store: Store,
    *,
    language: str,
    app_name: str | None,
    batch_size: int = DEFAULT_REINDEX_BATCH,
    on_batch: Callable[[int], None] | None = None,
) -> int:
    """Re-index every memory (of ``app_name``, or all) not indexed for ``language``
    by this version of the analysis; ``on_batch(rows)`` after each committed batch.

    Returns:
        How many memories were re-indexed.

    Raises:
        ConfigurationError: an unknown language.
    """
    target = analyzer(language)
    after, done = -1, 0

    async def batch() -> list[tuple[int, str, str]]:
        async with store.transaction(write=True) as conn:
            rows = await sql.memories_to_reindex(
                conn, signature=target.signature, app_name=app_name, after=after, limit=batch_size
            )
            await lock_users(conn, [(app, user) for _, app, user in rows], mode="exclusive")
            texts = await sql.memory_texts(conn, pks=[pk for pk, _, _ in rows])
            await sql.set_terms(
                conn,
                [(pk, target.index_terms(text), target.signature) for pk, text in texts.items()],
            )
        return rows

    while True:
        rows = await retry_conflicts(batch)
        if not rows:
            return done
        after, done = rows[-1][0], done + len(rows)
        if on_batch is not None:
            on_batch(len(rows))


async def warn_if_indexed_otherwise(
    store: Store, searching: Analyzer, *, app_name: str, user_id: str
) -> None:
    """Warn (:class:`~adk_sqlstore.errors.SearchLanguageWarning`) when the user has
    memories indexed for another language or analysis than ``searching``: a search in
    it cannot match them."""
    async with store.transaction(write=False) as conn:
        other = await sql.other_analysis(
            conn, app_name=app_name, user_id=user_id, signature=searching.signature
        )
    if other is not None:
        indexed = other.partition(":")[2] or "no language (not indexed yet)"
        warnings.warn(
            f"memories of user {user_id!r} of app {app_name!r} are indexed for search"
            f" language {indexed!r}, and this service searches in {searching.language!r}:"
            " they cannot be found. Re-index them (adk-sqlstore memory reindex"
            f" --language {searching.language} --app {app_name}) or search in their"
            " language.",
            SearchLanguageWarning,
            stacklevel=4,
        )
