"""The facts half of ``SqlMemoryService`` (a mixin): generating facts from sessions,
and reading a user's facts, profiles and histories."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from typing import Any

from .. import telemetry
from ..errors import ConfigurationError, InvalidArgumentError
from ..memory.hybrid import HybridMemory
from ..memory.rows import MemoryRows, iso_time
from ..models import Content, MemoryEntry, Part, SearchMemoryResponse, SessionLike
from ..search.text import clean_text, text_of
from ..sessions.codec import SessionCodec
from ..sql import fact_runs as runs
from ..sql import facts as sql
from ..store import Store, write_completes
from ..validation import check_count, check_identifier
from .correcting import correct_fact
from .facts import Fact, FactRevision, fact_of, revision_of
from .generator import DEFAULT_MAX_ATTEMPTS, GenerationReport, MemoryGenerator
from .history import PAST_FACTS_SEARCHED, rank_past_facts
from .replies import MAX_FACT_CHARS, Extracted
from .running import Generation
from .writing import Destination, fact_metadata

__all__ = ["MemoryFacts", "consolidation_asked"]

_PAGE = 100  # sessions read at a time by generate_pending

ENABLE_CONSOLIDATION = "enable_consolidation"
"""Memory Bank's ``custom_metadata`` key asking ``add_memory`` to consolidate."""


def consolidation_asked(
    consolidate: bool, custom_metadata: Mapping[str, Any] | None
) -> tuple[bool, Mapping[str, Any] | None]:
    """Whether ``add_memory`` consolidates (``consolidate``, or
    ``custom_metadata["enable_consolidation"]`` as in ADK's Memory Bank service), and
    the metadata to store (without that key).

    Raises:
        InvalidArgumentError: ``enable_consolidation`` is not a bool.
    """
    if not custom_metadata or ENABLE_CONSOLIDATION not in custom_metadata:
        return consolidate, custom_metadata
    enable = custom_metadata[ENABLE_CONSOLIDATION]
    if not isinstance(enable, bool):
        raise InvalidArgumentError(
            f'custom_metadata["{ENABLE_CONSOLIDATION}"] must be True or False, not {enable!r:.40}'
        )
    rest = {k: v for k, v in custom_metadata.items() if k != ENABLE_CONSOLIDATION}
    return consolidate or enable, rest


logger = logging.getLogger(__name__)


class MemoryFacts:
    """Memory generation for a memory service (see :class:`~.generator.MemoryGenerator`)."""

    _store: Store
    _rows: MemoryRows
    _hybrid: HybridMemory | None
    _codec: SessionCodec[Any, Any, Any]
    _generator: MemoryGenerator | None

    search_memory: Callable[..., Awaitable[SearchMemoryResponse]]  # the service's

    @property
    def generator(self) -> MemoryGenerator | None:
        """The memory generator (``None``: memory holds turns and added facts only)."""
        return self._generator

    def _generation(self) -> Generation:
        if self._generator is None:
            raise ConfigurationError(
                "this memory service has no generator: pass generator=MemoryGenerator(model)"
                " (or ?generator=MODEL in the store URL)"
            )
        return Generation(
            self._store, self._rows, self._hybrid, self._codec, self._similar, self._generator
        )

    async def _similar(self, app_name: str, user_id: str, text: str, limit: int) -> list[str]:
        """The ids of the user's current facts most like ``text``, best first, at most
        ``limit``: by BM25; with an embedder, from both sides' candidates, the best
        tenth by BM25 (the facts a new one updates share its words), then by vector
        similarity, then the rest by BM25 (not by their fused score, which sinks a fact
        that shares no word with ``text``, as a contradiction often does)."""
        if self._hybrid is None:
            found = await self.search_memory(
                app_name=app_name, user_id=user_id, query=text, limit=limit, kind="facts"
            )
            return [m.id for m in found.memories if m.id]
        found = await self.search_memory(  # every candidate of both sides (at most 1,000)
            app_name=app_name, user_id=user_id, query=text, limit=200, kind="facts"
        )

        def best(score: str) -> list[str]:
            scored = [
                (float(value), m.id)
                for m in found.memories
                if m.id and isinstance(value := (m.custom_metadata or {}).get(score), int | float)
            ]
            return [i for _, i in sorted(scored, key=lambda pair: -pair[0])]

        by_words = best("lexical_score")
        first = max(1, limit // 10)  # the closest by words: the facts a new one updates
        ids = dict.fromkeys([*by_words[:first], *best("vector_score"), *by_words[first:]])
        return list(ids)[:limit]

    @telemetry.traced("generate", rows=lambda report: report.created + report.updated)
    @write_completes
    async def generate(
        self, *, app_name: str, user_id: str, session_id: str, consolidate: bool | None = None
    ) -> GenerationReport:
        """Generate facts from the session's events not yet processed (after its
        watermark; none: no model call), consolidated with the user's stored facts
        unless ``consolidate`` is false (default: the generator's setting).

        Generation for one user takes turns across processes (a lease); the model is
        called outside every transaction; the facts, their revisions and the new
        watermark are written in one transaction.

        Returns:
            What was done (:class:`~.generator.GenerationReport`).

        Raises:
            ConfigurationError: the service has no generator.
            GenerationError: the model failed, timed out or did not answer JSON of the
                asked shape; nothing was written for the session but its failed attempt
                (the next run tries again, up to the generator's ``max_attempts``).
        """
        return await self._generation().run(app_name, user_id, session_id, consolidate=consolidate)

    async def _generate_automatically(
        self, app_name: str, user_id: str, session_id: str, given: Any = None
    ) -> Any:
        """A run of a trigger: skips sessions past their attempts; a failure of any
        kind is recorded and logged by the run, counted in its report, never raised."""
        return await self._generation().run(
            app_name, user_id, session_id, automatic=True, given=given
        )

    async def generate_pending(
        self,
        *,
        app_name: str | None = None,
        user_id: str | None = None,
        retry_failed: bool = False,
        on_session: Callable[[GenerationReport], None] | None = None,
        skip: Collection[tuple[str, str, str]] = (),
    ) -> GenerationReport:
        """Generate facts for every session with events not yet processed (of one app,
        one user, or all), skipping those that failed the generator's ``max_attempts``
        times unless ``retry_failed`` (:meth:`generation_failures` lists them; an
        explicit :meth:`generate` runs one); a session that fails is logged and
        counted, and the others go on. Sessions are read in key order, a page at a
        time. ``on_session`` is called after each. ``skip``: ``(app_name, user_id,
        session_id)`` of sessions not to run (the idle job's, run just before).

        Raises:
            ConfigurationError: the service has no generator.
        """
        run = self._generation()
        if app_name is not None:
            check_identifier("app_name", app_name)
        if user_id is not None:
            check_identifier("user_id", user_id)
        total, after = GenerationReport(), None
        while True:
            async with self._store.transaction(write=False) as conn:
                page = await runs.pending_sessions(
                    conn, app_name=app_name, user_id=user_id, after=after, limit=_PAGE,
                    max_attempts=run.generator.max_attempts, failed=None if retry_failed else False,
                )  # fmt: skip
            for app, user, session_id, _, _ in page:
                if (app, user, session_id) in skip:
                    continue
                if retry_failed:
                    try:
                        report = await self.generate(
                            app_name=app, user_id=user, session_id=session_id
                        )
                    except Exception as exc:  # recorded and logged by the run
                        report = getattr(exc, "report", None) or GenerationReport(failed=1)
                else:
                    report = await self._generate_automatically(app, user, session_id)
                total.add(report)
                if on_session is not None:
                    on_session(report)
            if len(page) < _PAGE:
                return total
            after = page[-1][:3]

    @property
    def max_attempts(self) -> int:
        """Failed runs of a session before the automatic runs give up on it: the
        generator's ``max_attempts``, or :data:`~.generator.DEFAULT_MAX_ATTEMPTS`
        without a generator."""
        generator = self._generator
        return DEFAULT_MAX_ATTEMPTS if generator is None else generator.max_attempts

    async def generation_failures(
        self,
        *,
        app_name: str | None = None,
        user_id: str | None = None,
        limit: int = 100,
        retrying: bool = False,
    ) -> list[tuple[str, str, str, int, str | None]]:
        """Sessions generation gave up on (failed :attr:`max_attempts` times; the
        automatic runs skip them, :meth:`generate` or ``generate_pending(retry_failed=
        True)`` runs them again), and with ``retrying`` also those that failed fewer times (the
        next automatic run retries them): ``(app_name, user_id, session_id, attempts,
        error)`` in key order, the error being the last failure's message (it names
        no content)."""
        async with self._store.transaction(write=False) as conn:
            return await runs.pending_sessions(
                conn, app_name=app_name, user_id=user_id, after=None, limit=limit,
                max_attempts=1 if retrying else self.max_attempts, failed=True,
            )  # fmt: skip

    async def _past_facts(
        self, app_name: str, user_id: str, query: str, limit: int
    ) -> list[MemoryEntry]:
        """``search_memory(..., history=True)``'s second part: the user's facts no
        longer current that match ``query`` (:mod:`.history`), as memories marked
        ``current: False``."""
        now = time.time()
        async with self._store.transaction(write=False) as conn:
            rows = await sql.list_facts(
                conn, app_name=app_name, user_id=user_id, now=now, history=True,
                limit=PAST_FACTS_SEARCHED,
            )  # fmt: skip
        past = [r for r in rows if r.invalid_at is not None or (r.expire_at or now + 1) <= now]
        found = []
        for score, fact in rank_past_facts(self._rows.analyzer, query, past, limit):
            metadata = {
                **fact_metadata(fact),
                "current": False,
                "session_id": None,
                "event_id": None,
                "score": score,
            }
            found.append(
                MemoryEntry(
                    id=fact.id,
                    content=Content(role="user", parts=[Part(text=fact.text)]),
                    timestamp=iso_time(fact.valid_from or fact.create_time),
                    custom_metadata=metadata,
                )
            )
        return found

    async def _add_facts(
        self, app_name: str, user_id: str, rows: list[dict[str, Any]], now: float
    ) -> list[str]:
        """``add_memory(..., consolidate=True)``: the entries' texts (memory ``rows``,
        filtered) consolidated as new facts; the ids of the facts made or updated."""
        facts, extras = [], []
        for row in rows:
            metadata = json.loads(row["custom_metadata"])
            topics = metadata.pop("topics", None)
            names = (
                tuple(t for t in topics if isinstance(t, str)) if isinstance(topics, list) else ()
            )
            text = clean_text(text_of(Content.model_validate_json(row["content"])))
            facts.append(Extracted(text[:MAX_FACT_CHARS], names, float(row["timestamp"]), ()))
            extras.append(metadata or None)
        report = await self._generation().add_facts(
            app_name, user_id, facts, consolidate=True, metadata=extras
        )
        return report.fact_ids

    async def _generate_quietly(self, session: SessionLike) -> GenerationReport | None:
        """Generation after an ingestion, when the service has a generator: a failure
        is logged (the turns are stored; the next run retries), never raised."""
        if self._generator is None:
            return None
        report: GenerationReport = await self._generate_automatically(
            session.app_name, session.user_id, session.id, session
        )
        return report

    @telemetry.traced("list_facts", rows=len)
    async def list_facts(
        self, *, app_name: str, user_id: str, history: bool = False, limit: int | None = None
    ) -> list[Fact]:
        """The user's current facts (with ``history``, also those contradicted or
        expired since), the most recently changed first, at most ``limit``."""
        check_identifier("app_name", app_name)
        check_identifier("user_id", user_id)
        if limit is not None:
            check_count("limit", limit, least=1)
        async with self._store.transaction(write=False) as conn:
            rows = await sql.list_facts(
                conn,
                app_name=app_name,
                user_id=user_id,
                now=time.time(),
                history=history,
                limit=limit,
            )
        return [fact_of(r) for r in rows]

    async def fact_history(
        self, *, app_name: str, user_id: str, fact_id: str
    ) -> tuple[Fact, list[FactRevision]] | None:
        """One fact of the user (current or not) and its revisions, oldest first;
        ``None`` if the user has no fact of that id."""
        check_identifier("app_name", app_name)
        check_identifier("user_id", user_id)
        check_identifier("fact id", fact_id)
        async with self._store.transaction(write=False) as conn:
            fact, revisions = await sql.fact_history(
                conn, app_name=app_name, user_id=user_id, fact_id=fact_id
            )
        if fact is None:
            return None
        return fact_of(fact), [revision_of(r) for r in revisions]

    @telemetry.traced("correct_fact")
    @write_completes
    async def correct_fact(
        self, *, app_name: str, user_id: str, fact_id: str, text: str, operator: str
    ) -> Fact:
        """An operator's correction of one of the user's current facts: its text becomes
        ``text`` (NUL characters dropped, lone surrogates replaced, leading and trailing
        whitespace removed), never silently. In one transaction under the user lock, the
        fact's ``revision_count`` grows by one and ``update_time`` becomes now; an
        ``update`` revision keeps the old and new text, with ``model``
        ``"operator:OPERATOR"``, no session and no events; the fact's memory (same id)
        is rewritten with the new text (through the ingestion filter, re-embedded with an
        embedder), so search finds the new text and no longer the old. The fact keeps its
        id, topics, ``valid_from``, time to live and source session and events
        (deleting that session still deletes it). No model is called; no generator is
        needed. A text equal to the fact's own is a no-op.

        Args:
            fact_id: the fact's id (``fact-...``, :meth:`list_facts`).
            text: the new text, at most 1,000 characters
                (:data:`~adk_sqlstore.generation.replies.MAX_FACT_CHARS`).
            operator: who corrects it (an identifier: at most 255 UTF-8 bytes), recorded
                in the revision's ``model``.

        Returns:
            The fact as stored afterwards (:class:`~.facts.Fact`, times ISO 8601, UTC).

        Raises:
            InvalidIdentifierError: ``app_name``, ``user_id``, ``fact_id`` or
                ``operator`` is not an identifier (a str of 1 to 255 UTF-8 bytes).
            InvalidArgumentError: ``text`` is not a str, is empty or only whitespace,
                is over 1,000 characters, or has nothing left after the ingestion filter;
                the user has no fact ``fact_id`` (another user's fact is not theirs);
                the fact is no longer current (invalidated or expired); or another
                current fact of the user already says ``text`` (equal after
                normalisation: its id is in the message). Nothing was written.
            ConcurrencyConflictError: it kept losing races with other writers (run
                again 10 times); nothing was written.
        """
        check_identifier("app_name", app_name)
        check_identifier("user_id", user_id)
        check_identifier("fact id", fact_id)
        check_identifier("operator", operator)
        row = await correct_fact(
            Destination(self._store, self._rows, self._hybrid, None),
            app_name=app_name, user_id=user_id, fact_id=fact_id, text=text, operator=operator,
        )  # fmt: skip
        return fact_of(row)

    async def retrieve_profiles(
        self, *, app_name: str, user_id: str, topics: Sequence[str] | None = None
    ) -> dict[str, list[Fact]]:
        """The user's current facts by topic, in one call (as Memory Bank's
        ``retrieve_profiles``): topic name -> facts, the most recently changed first;
        only ``topics`` when given. A fact under two topics is under both."""
        profiles: dict[str, list[Fact]] = {}
        for fact in await self.list_facts(app_name=app_name, user_id=user_id):
            for topic in fact.topics:
                if topics is None or topic in topics:
                    profiles.setdefault(topic, []).append(fact)
        return profiles
