"""``SqlMemoryService``: the public API of long-term memory (the work is in the other
modules of :mod:`adk_sqlstore.memory`)."""

from __future__ import annotations

import json
import time
import warnings
from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Literal, Self

from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from .. import telemetry
from ..embeddings.base import Embedder
from ..embeddings.registry import resolve_embedder
from ..errors import InvalidArgumentError, SessionNotFoundError
from ..generation.generator import MemoryGenerator, resolve_generator
from ..generation.running import GivenEvents
from ..generation.service import MemoryFacts, consolidation_asked
from ..generation.writing import kept
from ..models import (
    Content,
    Event,
    EventLike,
    MemoryEntry,
    SearchMemoryResponse,
    SessionLike,
)
from ..search import one_batch, search_memories
from ..search.analysis import DEFAULT_LANGUAGE, analyzer
from ..search.hybrid import DEFAULT_CANDIDATES, DEFAULT_WEIGHT, Fused, VectorQuery
from ..sessions.codec import CORE_MODELS, SessionCodec, SessionModels
from ..sessions.reading import read_session, session_key
from ..sql.embeddings import VectorStorage
from ..store import OnStore, Store, write_completes
from ..validation import (
    DEFAULT_MAX_EVENT_BYTES,
    DEFAULT_MAX_STATE_VALUE_BYTES,
    check_argument,
    check_count,
    check_identifier,
)
from .forgetting import MemoryForgetting
from .hybrid import HybridMemory
from .ingestion import IngestReport, ingest_session
from .jobs import MemoryJobs
from .redaction import Redactor
from .reindex import (
    warn_if_indexed_otherwise,
)
from .rows import MemoryRows, as_models, check_metadata, iso_time, memory_id
from .transfer import MemoryTransfer
from .writing import write_rows

__all__ = ["SqlMemoryService"]

_LANGUAGE_CHECKS_KEPT = 10_000  # users a service remembers having checked


class SqlMemoryService(MemoryJobs, MemoryFacts, MemoryForgetting, MemoryTransfer, OnStore):
    """Long-term memory for ADK-style agents in PostgreSQL, MySQL/MariaDB or SQLite.

    Follows ADK's ``BaseMemoryService`` (``add_session_to_memory``,
    ``add_events_to_memory``, ``add_memory``, ``search_memory``). Create it with
    :meth:`from_url` (it then owns and closes its store) or pass the
    :class:`~adk_sqlstore.Store` (or engine) a session service uses.

    Args:
        store: the database (:class:`~adk_sqlstore.Store`, or an ``AsyncEngine``).
        redactors: extra ingestion filters applied after card masking: callables
            ``str -> str`` or regular expressions whose matches become ``[redacted]``.
        mask_card_numbers: mask Luhn-valid payment card numbers (default True).
        auto_migrate: as for :class:`~adk_sqlstore.Store` (only with an engine).
        models: the session models of the sessions given to
            :meth:`add_session_to_memory` (default: this library's; the ADK classes
            pass ADK's).
        language: the search language: stemming and stop words of Latin-script
            words (a Snowball language such as ``"german"``, or ``"simple"`` for
            neither); default: the store URL's ``?language=``, else ``"english"``.
            See :mod:`adk_sqlstore.search.analysis`.
            Memories indexed in another language are re-indexed by
            ``adk-sqlstore memory reindex --language ...``.
        embedder: turns on hybrid search (BM25 fused with vector similarity,
            :mod:`adk_sqlstore.search.hybrid`): an embedder
            (:mod:`adk_sqlstore.embeddings`) or its name (``"minilm"``, ``"openai"``,
            ``"google"``, ``"package.module:NAME"``); default: the store URL's
            ``?embedder=``, else none (BM25 alone). Memories are embedded when
            they are written; ``adk-sqlstore memory embed`` embeds those written
            before.
        hybrid_weight: the vector side's weight in the fused score, 0 to 1 (default
            0.5).
        hybrid_candidates: memories each side proposes (default 100).
        generator: turns on memory generation (facts extracted from each ingested
            session by a model, consolidated with the user's facts:
            :class:`~adk_sqlstore.generation.MemoryGenerator`), or a model it takes
            (an ADK model or its name, ``openai:MODEL``, a callable); default: the
            store URL's ``?generator=``, else none.

    Raises:
        ConfigurationError: an unknown language, embedder or model, or a missing extra.
        InvalidArgumentError: ``hybrid_weight`` outside 0-1, or ``hybrid_candidates``
            not 1 or more.
    """

    def __init__(
        self,
        store: Store | AsyncEngine,
        *,
        redactors: Iterable[Redactor] | None = None,
        mask_card_numbers: bool = True,
        auto_migrate: bool | None = None,
        models: SessionModels[Any, Any, Any] | None = None,
        language: str | None = None,
        embedder: Embedder | str | None = None,
        hybrid_weight: float = DEFAULT_WEIGHT,
        hybrid_candidates: int = DEFAULT_CANDIDATES,
        generator: MemoryGenerator | Any = None,
    ) -> None:
        given = Store.of(store, auto_migrate=auto_migrate)
        self._generator = resolve_generator(
            generator if generator is not None else given.memory_generator
        )
        language = language or given.search_language or DEFAULT_LANGUAGE
        self._rows = MemoryRows(redactors, mask_card_numbers=mask_card_numbers, language=language)
        chosen = resolve_embedder(embedder if embedder is not None else given.search_embedder)
        self._hybrid = (
            HybridMemory(given, chosen, weight=hybrid_weight, candidates=hybrid_candidates)
            if chosen is not None
            else None
        )
        self._language_checked: set[tuple[str, str]] = set()
        self._use_store(given, owns=False)
        self._codec: SessionCodec[Any, Any, Any] = SessionCodec(
            models if models is not None else CORE_MODELS,
            max_event_bytes=DEFAULT_MAX_EVENT_BYTES,
            max_state_value_bytes=DEFAULT_MAX_STATE_VALUE_BYTES,
        )

    @property
    def language(self) -> str:
        """The search language (see the constructor)."""
        return self._rows.analyzer.language

    @property
    def embedder(self) -> Embedder | None:
        """The embedder of hybrid search, or ``None`` (BM25 alone)."""
        return self._hybrid.vectors.embedder if self._hybrid is not None else None

    async def vector_storage(self) -> VectorStorage:
        """How this store keeps vectors: ``"blob"`` (SQLite, an exact scan),
        ``"pgvector"``, or ``"none"`` (no embedder, or PostgreSQL without pgvector:
        search is lexical; a :class:`~adk_sqlstore.errors.VectorSearchWarning` says so
        once, naming how to enable it)."""
        return "none" if self._hybrid is None else await self._hybrid.storage()

    @classmethod
    def from_url(
        cls,
        url: str | URL | None = None,
        *,
        auto_migrate: bool | None = None,
        redactors: Iterable[Redactor] | None = None,
        mask_card_numbers: bool = True,
        models: SessionModels[Any, Any, Any] | None = None,
        language: str | None = None,
        embedder: Embedder | str | None = None,
        hybrid_weight: float = DEFAULT_WEIGHT,
        hybrid_candidates: int = DEFAULT_CANDIDATES,
        generator: MemoryGenerator | Any = None,
        **settings: Any,
    ) -> Self:
        """A service on a store of its own (:meth:`adk_sqlstore.Store.from_url`: the URL,
        ``auto_migrate`` and connection ``settings`` are as there), closed with it.
        The language, the embedder and the generator's model may also be given in
        the URL (``?language=german&embedder=minilm&generator=openai:gpt-4o-mini``);
        the keywords win."""
        if language is not None:
            analyzer(language)  # an unknown language fails before a store is opened
        if embedder is not None:
            embedder = resolve_embedder(embedder)
        generator = resolve_generator(generator)
        store = Store.from_url(url, auto_migrate=auto_migrate, **settings)
        service = cls(
            store,
            redactors=redactors,
            mask_card_numbers=mask_card_numbers,
            models=models,
            language=language,
            embedder=embedder,
            hybrid_weight=hybrid_weight,
            hybrid_candidates=hybrid_candidates,
            generator=generator,
        )
        service._use_store(store, owns=True)
        return service

    # -- writing ------------------------------------------------------------------------

    @telemetry.traced("add_session_to_memory", rows=telemetry.counted)
    @write_completes
    async def add_session_to_memory(self, session: SessionLike) -> IngestReport:
        """Store the session's events that carry text, one memory per event.

        Calling it again for the same session replaces that session's memories in one
        transaction: events gone from the session disappear, changed ones update,
        unchanged ones stay. Ingesting a session twice, or ten times at checkpoints,
        yields exactly one copy. The session's revision is recorded, so
        :meth:`ingest_idle_sessions` skips it until it changes. A session object loaded
        with ``GetSessionConfig`` limits, or before later appends, is reloaded whole
        first, so that no stored event's memory is dropped. With a generator, facts
        are then generated from the session's new events (:meth:`generate`; a failure
        is logged and counted in the report's ``generation``, the turns stay stored).

        Args:
            session: a :class:`~adk_sqlstore.Session` (or ADK ``Session``); one not
                from this store is taken as holding the whole conversation.

        Raises:
            SessionNotFoundError: the session was loaded from this store and has been
                deleted (or deleted and created again) since; nothing is written, so a
                deleted or pruned session leaves no memories behind.
            ConcurrencyConflictError: it kept losing races with another application's
                transactions (run again 10 times); nothing was written.
        """
        report = await ingest_session(self._store, self._codec, self._rows, session, self._hybrid)
        report.generation = await self._generate_quietly(session)
        return report

    @telemetry.traced("add_events_to_memory", rows=telemetry.counted)
    @write_completes
    async def add_events_to_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        events: Sequence[EventLike | Mapping[str, Any]],
        session_id: str | None = None,
        custom_metadata: Mapping[str, Any] | None = None,
    ) -> int:
        """Add events incrementally (e.g. only the latest turn); idempotent on event id:
        adding an event again updates its memory, and one that no longer carries text
        (after the ingestion filter) removes it.

        Args:
            session_id: the session the events belong to (``None`` if none).
            custom_metadata: stored with each memory and returned by searches.

        With a generator, facts are then generated: from the session's new events if
        the store holds the session, else from these events (a failure is logged).

        Returns:
            How many events carried text and were stored.

        Raises:
            InvalidMemoryError: ``events`` is not a list of events (or dicts of them).
            ConcurrencyConflictError: it kept losing races with another application's
                transactions (run again 10 times); nothing was written.
        """
        check_identifier("app_name", app_name)
        check_identifier("user_id", user_id)
        if session_id is not None:
            check_identifier("session_id", session_id)
        checked = as_models(events, Event, "event", "events")
        check_metadata(custom_metadata)
        rows = self._rows.from_events(
            app_name=app_name,
            user_id=user_id,
            session_id=session_id,
            events=checked,
            custom_metadata=custom_metadata,
            now=time.time(),
        )
        textless = {
            memory_id(app_name, user_id, session_id, e.id) for e in checked if not e.partial
        } - {row["id"] for row in rows}
        await write_rows(
            self._store,
            self._hybrid,
            app_name=app_name,
            user_id=user_id,
            rows=rows,
            gone=sorted(textless),
        )
        if self._generator is not None and session_id is not None:
            await self._generate_automatically(
                app_name, user_id, session_id, GivenEvents(list(checked))
            )
        return len(rows)

    @telemetry.traced("add_memory", rows=telemetry.counted)
    @write_completes
    async def add_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        memories: Sequence[Any],
        custom_metadata: Mapping[str, Any] | None = None,
        consolidate: bool = False,
    ) -> list[str]:
        """Store distilled facts, searched like events. An entry's text parts are
        filtered and stored; one without a timestamp gets the time of writing; one with
        an ``id`` replaces the memory with that id (so re-adding a fact does not copy
        it), one without gets a new id.

        Args:
            memories: ``MemoryEntry`` objects (``content``, ``author``, ``timestamp``
                as ISO 8601, ``custom_metadata``), ADK's, or dicts of them.
            custom_metadata: merged under each entry's own metadata.
            consolidate: store the entries as facts, consolidated with the user's
                stored facts by the generator's model in one call (created, merged into
                a fact they update, or left out as known; a fact they contradict stops
                being current), as Memory Bank's ``enable_consolidation``; topics from
                an entry's ``custom_metadata["topics"]``. Default False: stored as
                they are. ``custom_metadata={"enable_consolidation": True}`` (Memory
                Bank's spelling, which ADK's ``add_memory`` passes) asks for it too.

        Returns:
            The ids of the stored memories, in order (entries without text skipped);
            with ``consolidate``, of the facts created or updated.

        Raises:
            InvalidMemoryError: an entry is neither a ``MemoryEntry`` nor a dict of one,
                or its timestamp is not ISO 8601; nothing is written.
            ConcurrencyConflictError: it kept losing races with another application's
                transactions (run again 10 times); nothing was written.
            ConfigurationError: ``consolidate`` without a generator.
            GenerationError: with ``consolidate``, the model failed; nothing was written.
        """
        check_identifier("app_name", app_name)
        check_identifier("user_id", user_id)
        check_metadata(custom_metadata)
        check_argument("consolidate", consolidate, bool, "True or False")
        consolidate, custom_metadata = consolidation_asked(consolidate, custom_metadata)
        rows = self._rows.from_entries(
            app_name=app_name,
            user_id=user_id,
            entries=as_models(memories, MemoryEntry, "memory", "memories"),
            custom_metadata=custom_metadata,
            now=time.time(),
        )
        if consolidate:
            return await self._add_facts(app_name, user_id, rows, time.time())
        await write_rows(self._store, self._hybrid, app_name=app_name, user_id=user_id, rows=rows)
        return [row["id"] for row in rows]

    # -- reading ------------------------------------------------------------------------

    @telemetry.traced("search_memory", rows=telemetry.found)
    async def search_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        query: str,
        limit: int = 10,
        kind: Literal["facts", "turns"] | None = None,
        history: bool = False,
    ) -> SearchMemoryResponse:
        """Search one user's memories with a natural-language query.

        The query is analysed as memories are indexed
        (:mod:`adk_sqlstore.search.analysis`, in the service's language): Unicode
        normalised, case and accents folded, stop words dropped, words stemmed;
        identifiers (emails, URLs, paths, versions, ``ORD-4471``, ``snake_case``)
        match whole or by their parts; text without spaces (Chinese, Japanese,
        Korean, Thai, ...) matches by character bigrams. Any term may match, and
        memories are ranked by BM25 over this user's memories (:mod:`.search.lexical`,
        the same terms and scores on every backend); ties go to the more recent
        memory (ADK's in-memory service: the older). The author and the first 100,000
        characters of a text are indexed. Search syntax, SQL and long queries are
        plain words (cut at 10,000 characters); an empty or all-stop-word query finds
        nothing. Only rows of ``(app_name, user_id)`` are ever read.

        With an embedder (hybrid search, :mod:`adk_sqlstore.search.hybrid`), the
        query is embedded first (outside any transaction) and BM25's top candidates
        are fused with the user's nearest vectors of the embedder's model by min-max
        normalised scores; then a query sharing no word with a memory (or of stop
        words) can find it too. If the embedder fails, the search is BM25 (logged).

        Returns:
            At most ``limit`` memories (turns and current facts; at most 1,000),
            best first; with ``history`` (and ``kind`` not ``"turns"``), followed by
            at most ``limit`` more, the facts no longer current: up to twice ``limit``
            in all. Each carries ``id``, ``content``, ``author``, ``timestamp`` (ISO
            8601, UTC) and ``custom_metadata`` with the stored metadata plus
            ``session_id``, ``event_id`` and ``score`` (BM25, or with an embedder the
            fused score from 0 to 1; higher is better; comparable within one search
            only). With an embedder also ``lexical_score`` (BM25; ``None`` outside its
            candidates) and ``vector_score`` (the inner product of unit vectors;
            ``None`` without a vector of the model, or when the search fell back to
            BM25). A memory holding no query word with a similarity of 0 or less is
            not returned.

        Facts (:meth:`generate`; ``custom_metadata["kind"] == "fact"``) rank with
        turns; ``kind="facts"`` or ``"turns"`` keeps one kind (of the top ``max(5 x
        limit, 50)``). The facts no longer current (``current: False``) are those
        holding a query word among the user's 1,000 most recently changed, ranked by
        BM25 alone.

        Raises:
            InvalidArgumentError: ``query`` is not a str, ``limit`` not 1 or more, or
                ``kind`` not ``"facts"``, ``"turns"`` or ``None``.
        """
        check_identifier("app_name", app_name)
        check_identifier("user_id", user_id)
        check_argument("query", query, str, "a str")
        check_count("limit", limit, least=1)
        return await self._search(app_name, user_id, query, limit, kind, history)

    async def _search(
        self, app_name: str, user_id: str, query: str, limit: int, kind: str | None, history: bool
    ) -> SearchMemoryResponse:
        if kind not in (None, "facts", "turns"):
            raise InvalidArgumentError(f"kind must be 'facts', 'turns' or None, not {kind!r:.40}")
        check_argument("history", history, bool, "True or False")
        vector = None if self._hybrid is None else await self._hybrid.query(query)
        async with self._searching(vector) as conn:
            rows = await search_memories(
                conn,
                app_name=app_name,
                user_id=user_id,
                query=query,
                limit=limit if kind is None else max(5 * limit, 50),
                language=self.language,
                vector=vector,
            )
        if not rows:
            await self._warn_if_indexed_otherwise(app_name, user_id)
        hybrid = self._hybrid is not None  # the keys are there even when it fell back
        found = kept([_entry(r, s, hybrid=hybrid) for r, s in rows], kind, time.time())[:limit]
        if history and kind != "turns":
            found += await self._past_facts(app_name, user_id, query, limit)
        return SearchMemoryResponse(memories=found)

    def _searching(
        self, vector: VectorQuery | None
    ) -> AbstractAsyncContextManager[AsyncConnection]:
        """The connection a search runs on (:func:`~adk_sqlstore.search.one_batch`)."""
        if one_batch(self._store.engine.dialect.name, vector):
            return self._store.autocommit()
        return self._store.transaction(write=False)

    async def _warn_if_indexed_otherwise(self, app_name: str, user_id: str) -> None:
        """Once per user and service: :func:`.reindex.warn_if_indexed_otherwise`."""
        if (app_name, user_id) not in self._language_checked:
            if len(self._language_checked) >= _LANGUAGE_CHECKS_KEPT:
                self._language_checked.clear()
            self._language_checked.add((app_name, user_id))
            await warn_if_indexed_otherwise(
                self._store, self._rows.analyzer, app_name=app_name, user_id=user_id
            )

    # -- ingestion triggers -------------------------------------------------------------

    @telemetry.traced("ingest_session", rows=telemetry.counted)
    async def ingest_session(self, *, app_name: str, user_id: str, session_id: str) -> IngestReport:
        """The explicit end of a conversation: reload the session whole and ingest it
        (:meth:`add_session_to_memory`). Safe to retry (ingestion is an upsert); a
        session that does not exist (or is deleted meanwhile) ingests nothing."""
        key = session_key(app_name, user_id, session_id)
        async with self._store.autocommit() as conn:
            session = await read_session(conn, key, self._codec)
        if session is None:
            return IngestReport()
        try:
            return await self.add_session_to_memory(session)
        except SessionNotFoundError:  # deleted between the load and the write
            return IngestReport()

    async def close_session(self, *, app_name: str, user_id: str, session_id: str) -> IngestReport:
        """The former name of :meth:`ingest_session` (deprecated: it closes nothing)."""
        warnings.warn(
            "close_session is deprecated: use ingest_session", DeprecationWarning, stacklevel=2
        )
        return await self.ingest_session(app_name=app_name, user_id=user_id, session_id=session_id)


def _entry(row: Any, scores: Fused, *, hybrid: bool) -> MemoryEntry:
    """A found memory as returned: its stored metadata plus ``session_id``,
    ``event_id`` and ``score`` (and, ``hybrid``, ``lexical_score`` and
    ``vector_score``)."""
    metadata = json.loads(row.custom_metadata)
    metadata.update(session_id=row.session_id, event_id=row.event_id, score=scores.score)
    if hybrid:
        metadata.update(lexical_score=scores.lexical, vector_score=scores.similarity)
    return MemoryEntry(
        id=row.id,
        content=Content.model_validate_json(row.content),
        author=row.author,
        timestamp=iso_time(row.timestamp),
        custom_metadata=metadata,
    )
