"""Jobs over many sessions or users, run from cron or the command line: the idle job,
re-indexing and embedding backfills (mixed into
:class:`~adk_sqlstore.SqlMemoryService`)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Collection
from datetime import timedelta
from typing import Any, Protocol, cast

from .. import telemetry
from ..errors import ConfigurationError
from ..generation.generator import GenerationReport
from ..sql import memory as sql
from ..store import Store, write_completes
from ..validation import check_age, check_count, check_identifier
from .hybrid import HybridMemory
from .ingestion import IngestReport, idle_sessions, ingest_each
from .reindex import DEFAULT_REINDEX_BATCH, count_to_reindex, reindex
from .rows import MemoryRows
from .vectors import DEFAULT_EMBED_BATCH

__all__ = ["MemoryJobs"]


class _Generating(Protocol):
    """The service's generation (:class:`~adk_sqlstore.generation.service.MemoryFacts`)."""

    async def generate_pending(
        self, *, app_name: str | None = None, skip: Collection[tuple[str, str, str]] = ()
    ) -> GenerationReport: ...


class MemoryJobs:
    """The batch jobs of a memory service (see the module docstring)."""

    _store: Store
    _rows: MemoryRows
    _hybrid: HybridMemory | None
    _generator: Any

    async def ingest_session(self, *, app_name: str, user_id: str, session_id: str) -> IngestReport:
        """Reload a session whole and ingest it (the service's)."""
        raise NotImplementedError

    # -- re-indexing --------------------------------------------------------------------

    async def count_to_reindex(
        self, *, language: str | None = None, app_name: str | None = None
    ) -> int:
        """How many memories :meth:`reindex` would re-index (same arguments)."""
        return await count_to_reindex(
            self._store, language=language or self._rows.analyzer.language, app_name=app_name
        )

    @write_completes
    async def reindex(
        self,
        *,
        language: str | None = None,
        app_name: str | None = None,
        batch_size: int = DEFAULT_REINDEX_BATCH,
        on_batch: Callable[[int], None] | None = None,
    ) -> int:
        """Index memories again from their stored text, for ``language`` (default: the
        service's) with this version's text analysis; memories already indexed so are
        skipped (idempotent, resumable). A batch of ``batch_size`` memories is one
        transaction; ``on_batch(n)`` is called after each. Spans every user of
        ``app_name`` (or of every app): an administrative operation.

        Returns:
            How many memories were re-indexed.

        Raises:
            ConfigurationError: an unknown language.
            InvalidArgumentError: ``batch_size`` is not 1 or more.
        """
        check_count("batch_size", batch_size, least=1)
        if app_name is not None:
            check_identifier("app_name", app_name)
        return await reindex(
            self._store,
            language=language or self._rows.analyzer.language,
            app_name=app_name,
            batch_size=batch_size,
            on_batch=on_batch,
        )

    # -- embedding ----------------------------------------------------------------------

    async def count_to_embed(self, *, app_name: str | None = None) -> int:
        """How many memories :meth:`embed_missing` would embed (same arguments); 0
        without an embedder."""
        if app_name is not None:
            check_identifier("app_name", app_name)
        return 0 if self._hybrid is None else await self._hybrid.count_missing(app_name=app_name)

    @write_completes
    async def embed_missing(
        self,
        *,
        app_name: str | None = None,
        batch_size: int = DEFAULT_EMBED_BATCH,
        on_batch: Callable[[int], None] | None = None,
    ) -> int:
        """Embed the memories (of ``app_name``, or of every app) that have no vector of
        the embedder's model: those written before the embedder was configured, or
        while it failed. On PostgreSQL it first enables pgvector (``CREATE EXTENSION
        vector``, then the column's type) if the server has it, and afterwards builds
        the model's HNSW index if it is missing (minutes for millions of vectors,
        blocking writes to the vector table meanwhile). Idempotent and resumable; a
        batch of ``batch_size`` memories is embedded outside any transaction, then
        written in one; ``on_batch(n)`` is called after each. An administrative
        operation spanning every user.

        Returns:
            How many memories were embedded.

        Raises:
            ConfigurationError: no embedder is configured, or the PostgreSQL server has
                no pgvector.
            EmbeddingError: the embedder failed (batches before it are kept).
            InvalidArgumentError: ``batch_size`` is not 1 or more.
        """
        check_count("batch_size", batch_size, least=1)
        if app_name is not None:
            check_identifier("app_name", app_name)
        if self._hybrid is None:
            raise ConfigurationError(
                "no embedder: give one (SqlMemoryService(embedder=...), ?embedder= in the"
                " URL, or --embedder)"
            )
        return await self._hybrid.embed_missing(
            app_name=app_name, batch_size=batch_size, on_batch=on_batch
        )

    # -- the idle job -----------------------------------------------------------------

    @telemetry.traced("count_idle_sessions", rows=telemetry.counted)
    async def count_idle_sessions(
        self, *, idle_for: timedelta | float = timedelta(minutes=30), app_name: str | None = None
    ) -> int:
        """How many sessions :meth:`ingest_idle_sessions` would ingest now."""
        cutoff = time.time() - check_age("idle_for", idle_for)
        if app_name is not None:
            check_identifier("app_name", app_name)
        async with self._store.transaction(write=False) as conn:
            return await sql.count_idle_sessions(conn, cutoff=cutoff, app_name=app_name)

    def idle_sessions(
        self,
        *,
        idle_for: timedelta | float = timedelta(minutes=30),
        app_name: str | None = None,
        batch_size: int = 500,
    ) -> AsyncIterator[tuple[str, str, str]]:
        """(app_name, user_id, session_id) of the sessions idle for ``idle_for`` (a
        ``timedelta`` or seconds) whose current revision memory does not hold, read in
        batches."""
        cutoff = time.time() - check_age("idle_for", idle_for)
        return idle_sessions(self._store, cutoff=cutoff, app_name=app_name, batch_size=batch_size)

    @telemetry.traced("ingest_idle_sessions", rows=telemetry.counted)
    async def ingest_idle_sessions(
        self,
        idle_for: timedelta | float = timedelta(minutes=30),
        *,
        app_name: str | None = None,
        on_session: Callable[[IngestReport], None] | None = None,
    ) -> IngestReport:
        """Ingest every session last updated more than ``idle_for`` ago whose current
        revision has not been ingested yet (the idle-timeout trigger; run it from cron
        or a scheduler). Running it again does nothing new until sessions change.

        Sessions are streamed in batches (memory use does not grow with their number),
        each ingested in its own transaction; one that cannot be (e.g. it holds data
        that no longer reads back) is counted in ``failed``, logged and skipped. With
        a generator, facts are generated after each ingestion, and then for the
        sessions whose generation failed before (``generate_pending``: the retry).

        Args:
            idle_for: how long a session must have been idle (``timedelta`` or seconds).
            app_name: only this app's sessions (default: every app).
            on_session: called after each session with its report (progress bars).

        Returns:
            The totals.

        Raises:
            DatabaseUnavailableError: the database cannot be reached.
        """

        ingested: set[tuple[str, str, str]] = set()

        async def ingest(app: str, user: str, session_id: str) -> IngestReport:
            ingested.add((app, user, session_id))
            return await self.ingest_session(app_name=app, user_id=user, session_id=session_id)

        keys = self.idle_sessions(idle_for=idle_for, app_name=app_name)
        total = await ingest_each(keys, ingest, on_session)
        if self._generator is not None:  # the others: each run once, its attempt once
            retried = await cast(_Generating, self).generate_pending(
                app_name=app_name, skip=ingested
            )
            if total.generation is None:
                total.generation = retried
            else:
                total.generation.add(retried)
        return total
