"""The ADK memory service: ``google.adk.memory.BaseMemoryService`` over
:class:`adk_sqlstore.SqlMemoryService`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import timedelta
from typing import Any, Literal, Self

from sqlalchemy.ext.asyncio import AsyncEngine

from ..embeddings.base import Embedder
from ..embeddings.registry import resolve_embedder
from ..generation import Fact, FactRevision, GenerationReport, MemoryGenerator
from ..generation.generator import resolve_generator
from ..memory import IngestReport
from ..memory import SqlMemoryService as CoreMemoryService
from ..memory.redaction import Redactor
from ..search.analysis import analyzer
from ..search.hybrid import DEFAULT_CANDIDATES, DEFAULT_WEIGHT
from ..store import OnStore, Store
from ._google import AdkEvent, AdkMemoryEntry, AdkSearchResponse, AdkSession, BaseMemoryService
from .models import ADK_MODELS, adk_errors, to_adk_entry
from .uri import chosen_store

__all__ = ["SqlMemoryService"]


class SqlMemoryService(BaseMemoryService, OnStore):
    """ADK ``BaseMemoryService`` on PostgreSQL, MySQL/MariaDB or SQLite, backed by
    :class:`adk_sqlstore.SqlMemoryService` (see it for every behaviour: per-session
    upsert, BM25 search, the card-number filter, ingestion triggers).

    Args:
        uri: as for :class:`~adk_sqlstore.adk.SqlSessionService`.
        store: a :class:`~adk_sqlstore.Store` (or an engine) you manage, e.g.
            ``session_service.store``.
        engine: the same as ``store``, for an engine (e.g. ``session_service.engine``).
        redactors: the ingestion filter's own rules (as for
            :class:`adk_sqlstore.SqlMemoryService`).
        mask_card_numbers: whether the filter masks payment card numbers (default yes).
        language: the search language (as for :class:`adk_sqlstore.SqlMemoryService`);
            also ``?language=german`` in the URI (the keyword wins).
        embedder: hybrid search's embedder (as for
            :class:`adk_sqlstore.SqlMemoryService`); also ``?embedder=minilm`` in the
            URI (the keyword wins).
        hybrid_weight: the vector half's weight in the fusion, likewise.
        hybrid_candidates: how many candidates each half brings, likewise.
        generator: memory generation (as for :class:`adk_sqlstore.SqlMemoryService`):
            a :class:`~adk_sqlstore.MemoryGenerator` or a model (the agent's own
            ``Gemini(...)``, ``LiteLlm(...)``, a model name); also
            ``?generator=gemini-2.5-flash`` in the URI (the keyword wins).
        auto_migrate: as for :class:`~adk_sqlstore.adk.SqlSessionService`.
        **settings: connection settings; ``agents_dir`` as for
            :class:`~adk_sqlstore.adk.SqlSessionService`.

    Raises:
        InvalidArgumentError: more than one of ``uri``, ``store`` and ``engine``, or
            connection settings with a store or engine.
        SchemaNotMigratedError: as for :class:`~adk_sqlstore.adk.SqlSessionService`.
    """

    def __init__(
        self,
        uri: str | Store | AsyncEngine | None = None,
        *,
        store: Store | AsyncEngine | None = None,
        engine: AsyncEngine | None = None,
        redactors: Iterable[Redactor] | None = None,
        mask_card_numbers: bool = True,
        auto_migrate: bool | None = None,
        language: str | None = None,
        embedder: Embedder | str | None = None,
        hybrid_weight: float = DEFAULT_WEIGHT,
        hybrid_candidates: int = DEFAULT_CANDIDATES,
        generator: MemoryGenerator | Any = None,
        **settings: Any,
    ) -> None:
        if language is not None:
            analyzer(language)  # an unknown language fails before a store is opened
        embedder = resolve_embedder(embedder)  # so does an unknown embedder
        generator = resolve_generator(generator)  # and an unknown model
        chosen, owns = chosen_store(
            "memory service",
            uri,
            store=store,
            engine=engine,
            auto_migrate=auto_migrate,
            settings=settings,
        )
        self._use_store(chosen, owns=owns)
        self._core = CoreMemoryService(
            self._store,
            redactors=redactors,
            mask_card_numbers=mask_card_numbers,
            models=ADK_MODELS,
            language=language,
            embedder=embedder,
            hybrid_weight=hybrid_weight,
            hybrid_candidates=hybrid_candidates,
            generator=generator,
        )

    @classmethod
    def from_url(cls, url: str | None = None, **kwargs: Any) -> Self:
        """The same as ``SqlMemoryService(url, **kwargs)``."""
        return cls(url, **kwargs)

    @property
    def language(self) -> str:
        """The search language (see :class:`adk_sqlstore.SqlMemoryService`)."""
        return self._core.language

    @property
    def embedder(self) -> Embedder | None:
        """The embedder of hybrid search, or ``None`` (see
        :class:`adk_sqlstore.SqlMemoryService`)."""
        return self._core.embedder

    @property
    def core(self) -> CoreMemoryService:
        """The core service doing the work."""
        return self._core

    async def add_session_to_memory(self, session: AdkSession) -> None:
        """See :meth:`adk_sqlstore.SqlMemoryService.add_session_to_memory` (a session
        deleted since it was loaded raises ADK's ``SessionNotFoundError``)."""
        with adk_errors():
            await self._core.add_session_to_memory(session)

    async def add_events_to_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        events: Sequence[AdkEvent],
        session_id: str | None = None,
        custom_metadata: Mapping[str, object] | None = None,
    ) -> None:
        """See :meth:`adk_sqlstore.SqlMemoryService.add_events_to_memory`."""
        await self._core.add_events_to_memory(
            app_name=app_name,
            user_id=user_id,
            events=events,
            session_id=session_id,
            custom_metadata=custom_metadata,
        )

    async def add_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        memories: Sequence[AdkMemoryEntry],
        custom_metadata: Mapping[str, object] | None = None,
    ) -> None:
        """See :meth:`adk_sqlstore.SqlMemoryService.add_memory`;
        ``custom_metadata={"enable_consolidation": True}`` consolidates the entries
        with the user's facts, as ADK's ``VertexAiMemoryBankService`` does."""
        await self._core.add_memory(
            app_name=app_name, user_id=user_id, memories=memories, custom_metadata=custom_metadata
        )

    async def search_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        query: str,
        limit: int = 10,
        kind: Literal["facts", "turns"] | None = None,
        history: bool = False,
    ) -> AdkSearchResponse:
        """See :meth:`adk_sqlstore.SqlMemoryService.search_memory`; returns ADK's
        ``SearchMemoryResponse`` of ADK ``MemoryEntry`` (``content`` a GenAI
        ``types.Content``)."""
        found = await self._core.search_memory(
            app_name=app_name, user_id=user_id, query=query, limit=limit, kind=kind, history=history
        )
        return AdkSearchResponse(memories=[to_adk_entry(m) for m in found.memories])

    async def delete_memory(
        self, *, app_name: str, user_id: str, memory_id: str | None = None
    ) -> None:
        """Delete one memory by the id ``search_memory`` returned (no-op without one)."""
        if memory_id:
            await self._core.delete_memories(
                app_name=app_name, user_id=user_id, memory_ids=[memory_id]
            )

    async def delete_memories(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str | None = None,
        memory_ids: Sequence[str] | None = None,
    ) -> int:
        """See :meth:`adk_sqlstore.SqlMemoryService.delete_memories`."""
        return await self._core.delete_memories(
            app_name=app_name, user_id=user_id, session_id=session_id, memory_ids=memory_ids
        )

    async def ingest_session(self, *, app_name: str, user_id: str, session_id: str) -> IngestReport:
        """See :meth:`adk_sqlstore.SqlMemoryService.ingest_session`."""
        return await self._core.ingest_session(
            app_name=app_name, user_id=user_id, session_id=session_id
        )

    async def close_session(self, *, app_name: str, user_id: str, session_id: str) -> IngestReport:
        """The former name of :meth:`ingest_session` (deprecated)."""
        return await self._core.close_session(
            app_name=app_name, user_id=user_id, session_id=session_id
        )

    async def ingest_idle_sessions(
        self, idle_for: timedelta | float = timedelta(minutes=30), *, app_name: str | None = None
    ) -> IngestReport:
        """See :meth:`adk_sqlstore.SqlMemoryService.ingest_idle_sessions`."""
        return await self._core.ingest_idle_sessions(idle_for, app_name=app_name)

    async def forget_user(self, *, app_name: str, user_id: str) -> dict[str, int]:
        """See :meth:`adk_sqlstore.SqlMemoryService.forget_user`."""
        return await self._core.forget_user(app_name=app_name, user_id=user_id)

    @property
    def generator(self) -> MemoryGenerator | None:
        """The memory generator, or ``None`` (see :class:`adk_sqlstore.SqlMemoryService`)."""
        return self._core.generator

    async def generate(
        self, *, app_name: str, user_id: str, session_id: str, consolidate: bool | None = None
    ) -> GenerationReport:
        """See :meth:`adk_sqlstore.SqlMemoryService.generate`."""
        return await self._core.generate(
            app_name=app_name, user_id=user_id, session_id=session_id, consolidate=consolidate
        )

    async def list_facts(
        self, *, app_name: str, user_id: str, history: bool = False, limit: int | None = None
    ) -> list[Fact]:
        """See :meth:`adk_sqlstore.SqlMemoryService.list_facts`."""
        return await self._core.list_facts(
            app_name=app_name, user_id=user_id, history=history, limit=limit
        )

    async def fact_history(
        self, *, app_name: str, user_id: str, fact_id: str
    ) -> tuple[Fact, list[FactRevision]] | None:
        """See :meth:`adk_sqlstore.SqlMemoryService.fact_history`."""
        return await self._core.fact_history(app_name=app_name, user_id=user_id, fact_id=fact_id)

    async def retrieve_profiles(
        self, *, app_name: str, user_id: str, topics: Sequence[str] | None = None
    ) -> dict[str, list[Fact]]:
        """See :meth:`adk_sqlstore.SqlMemoryService.retrieve_profiles`."""
        return await self._core.retrieve_profiles(app_name=app_name, user_id=user_id, topics=topics)
