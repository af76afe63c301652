"""One generation run for one session: the lease, the events after the watermark, the
model calls (outside every transaction), and the write (:mod:`.writing`).

The user's lease (``sqlstore_fact_leases``) makes runs for one user take turns across
processes and machines: a run waits for it (polling) while another run holds it, and
writes only if it still holds it, in the transaction that also moves the watermark;
so two runs never both act on the same facts, and a run that died is replaced once
its lease expires. Runs for different users go on in parallel.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import AdkSqlStoreError, GenerationError
from ..memory.hybrid import HybridMemory
from ..memory.rows import MemoryRows, iso_time
from ..search.text import clean_text, text_hash, text_of
from ..sessions.codec import SessionCodec
from ..sessions.reading import SessionKey, read_session, session_key
from ..sql import fact_runs as runs
from ..sql import facts as sql
from ..sql.users import lock_user
from ..store import Store, retry_conflicts
from .calls import call_model
from .chat import ModelRequest
from .generator import GenerationReport, MemoryGenerator
from .planning import Plan, merge_equal, plan_changes
from .prompts import Shown, consolidation_prompt, extraction_prompt
from .replies import Dropped, Extracted, parse_decisions, parse_facts
from .writing import Destination, Target, write_plan

__all__ = ["MAX_SHOWN_FACTS", "Generation", "GivenEvents", "Similar"]

logger = logging.getLogger(__name__)

Similar = Callable[[str, str, str, int], Awaitable[list[str]]]
"""``(app_name, user_id, text, limit) -> memory ids``: the store's search, best first."""

_POLL = (0.05, 1.0)  # seconds between looks at a lease held by another run: first, most
MAX_SHOWN_FACTS = 50
"""Stored facts one consolidation call is shown at most."""


@dataclass
class GivenEvents:
    """Events ``add_events_to_memory`` got for a session the store does not hold: all
    of them are new (no watermark is kept: the next call brings the next events)."""

    events: list[Any]


@dataclass
class Generation:
    """What a run needs from the memory service that starts it."""

    store: Store
    rows: MemoryRows
    hybrid: HybridMemory | None
    codec: SessionCodec[Any, Any, Any]
    similar: Similar
    generator: MemoryGenerator

    @property
    def destination(self) -> Destination:
        """Where the run's facts go."""
        return Destination(self.store, self.rows, self.hybrid, self.generator.ttl)

    async def run(
        self,
        app_name: str,
        user_id: str,
        session_id: str,
        *,
        consolidate: bool | None = None,
        automatic: bool = False,
        given: Any = None,
    ) -> GenerationReport:
        """Generate facts from the session's events after its watermark; an
        ``automatic`` run (after an ingestion, or of pending sessions) skips a session
        that failed the generator's ``max_attempts`` times. The session is read from
        the store; one the store does not hold (a session service of another kind) is
        taken from ``given``, the session object ``add_session_to_memory`` got.

        Any failure of the run (the model's, a reply's, the database's) is recorded as
        a failed attempt of the session and logged naming the app, user and session
        (never content); its report counts the calls made (``failed`` 1). An
        ``automatic`` run never raises it: it returns that report.

        Raises:
            GenerationError: (not ``automatic``) the model failed, timed out or
                answered with no JSON of the asked shape; or another run held the
                user's lease for longer than a run may. Its ``report`` is the run's.
            DatabaseUnavailableError, ConcurrencyConflictError: (not ``automatic``) as
                any write.
        """
        key = session_key(app_name, user_id, session_id)
        report = GenerationReport()
        try:
            holder = secrets.token_hex(16)
            await self._wait_for_lease(app_name, user_id, holder)
        except Exception as exc:
            report.failed = 1
            await self._failed(key, None, exc, report)
            if automatic:
                return report
            raise
        read: dict[str, str | None] = {}  # the incarnation the run read, once it did
        try:
            await self._run(key, holder, consolidate, automatic, given, report, read)
        except Exception as exc:
            report.failed = 1
            await self._failed(key, holder, exc, report, read)
            if automatic:
                return report
            if isinstance(exc, GenerationError):
                exc.report = report
            raise
        except BaseException:
            await asyncio.shield(self._release(app_name, user_id, holder))
            raise
        return report

    async def add_facts(
        self,
        app_name: str,
        user_id: str,
        facts: list[Extracted],
        *,
        consolidate: bool,
        metadata: list[dict[str, Any] | None] | None = None,
    ) -> GenerationReport:
        """Store facts given by the caller (``add_memory(..., consolidate=True)``),
        each with its ``metadata`` (merged into its memory's), consolidated with the
        user's stored facts in one model call (none with ``consolidate`` false: each
        is created); facts equal to each other or to a current stored fact are one
        fact, without a call.

        Raises:
            GenerationError: as :meth:`run` (nothing was written); its ``report`` is
                the run's.
        """
        holder = secrets.token_hex(16)
        await self._wait_for_lease(app_name, user_id, holder)
        report = GenerationReport()
        try:
            merged, extras = merge_equal(facts, metadata)
            plan = Plan(facts=merged, events={}, metadata=extras, when=time.time())
            await self._consolidate(app_name, user_id, plan, report, consolidate=consolidate)
            plan_changes(plan, model=self.generator.model.name)
            await write_plan(self.destination, Target(app_name, user_id), holder, plan, report)
        except BaseException as exc:
            await asyncio.shield(self._release(app_name, user_id, holder))
            if isinstance(exc, GenerationError):
                exc.report = report
            raise
        return report

    async def _wait_for_lease(self, app_name: str, user_id: str, holder: str) -> None:
        """Take the user's lease, waiting while other runs hold it, one after another
        (an expired lease is taken over: a run that died holds no one up)."""
        pause, seen, since = _POLL[0], "", time.monotonic()
        while (current := await self._take_lease(app_name, user_id, holder)) != holder:
            if current != seen:
                seen, since = current, time.monotonic()
            elif time.monotonic() - since > self.generator.lease_seconds + 60:
                raise GenerationError(  # a lease not ending when it should: clocks apart
                    "another generation run held the user's lease past its end"
                    f" ({self.generator.lease_seconds:.0f} s)"
                )
            await asyncio.sleep(pause)
            pause = min(pause * 2, _POLL[1])

    async def _take_lease(self, app_name: str, user_id: str, holder: str) -> str:
        async def take() -> str:
            now = time.time()
            async with self.store.transaction(write=True) as conn:
                await lock_user(
                    conn, app_name=app_name, user_id=user_id, mode="exclusive", create=True, now=now
                )
                return await runs.take_lease(
                    conn,
                    app_name=app_name,
                    user_id=user_id,
                    holder=holder,
                    until=now + self.generator.lease_seconds,
                    now=now,
                )

        return await retry_conflicts(take)

    async def _release(self, app_name: str, user_id: str, holder: str) -> None:
        async def release() -> None:
            async with self.store.transaction(write=True) as conn:
                await lock_user(conn, app_name=app_name, user_id=user_id, mode="exclusive")
                await runs.release_lease(conn, app_name=app_name, user_id=user_id, holder=holder)

        await retry_conflicts(release)

    async def _failed(
        self,
        key: SessionKey,
        holder: str | None,
        exc: Exception,
        report: GenerationReport,
        read: dict[str, str | None] | None = None,
    ) -> None:
        """Count a failed attempt for the session and end the lease (one transaction);
        logged naming the session (ids are not content), never raising: a database
        that fails here too is logged as well. A run of a session since deleted (or
        made again: ``read`` holds the incarnation the run read) counts for nothing.
        ``report.given_up`` counts a session that reached its ``max_attempts``."""
        logger.warning(
            "memory generation failed for session %r of user %r of app %r (%d model calls):"
            " %s",
            key["session_id"], key["user_id"], key["app_name"], report.model_calls,
            _reason(exc),
        )  # fmt: skip

        async def record() -> None:
            async with self.store.transaction(write=True) as conn:
                await lock_user(
                    conn, app_name=key["app_name"], user_id=key["user_id"], mode="exclusive",
                    create=True, now=time.time(),
                )  # fmt: skip
                source, incarnation = await runs.session_source(conn, **key)
                ran = (read or {}).get("incarnation", incarnation)
                if ran == incarnation:
                    source = source or runs.Source(0, 0, None, incarnation)
                    source.attempts += 1
                    source.error = _reason(exc)[:500]
                    await runs.write_source(conn, **key, source=source, now=time.time())
                    if source.attempts >= self.generator.max_attempts:
                        report.given_up = 1
                if holder is not None:
                    await runs.release_lease(
                        conn, app_name=key["app_name"], user_id=key["user_id"], holder=holder
                    )

        try:
            await asyncio.shield(retry_conflicts(record))
        except Exception as again:
            logger.error(
                "recording the failed generation of session %r of user %r of app %r failed: %s",
                key["session_id"], key["user_id"], key["app_name"], _reason(again),
            )  # fmt: skip
            if holder is not None:
                with contextlib.suppress(Exception):
                    await asyncio.shield(self._release(key["app_name"], key["user_id"], holder))

    async def _run(
        self,
        key: SessionKey,
        holder: str,
        consolidate: bool | None,
        automatic: bool,
        given: Any,
        report: GenerationReport,
        read: dict[str, str | None],
    ) -> None:
        async with self.store.transaction(write=False) as conn:
            found, incarnation = await runs.session_source(conn, **key)
            source = found or runs.Source(0, 0, None)
            stored = await read_session(conn, key, self.codec)
        read["incarnation"] = incarnation
        session = stored if stored is not None else given
        events = list(session.events) if session is not None else []
        loose = stored is None and isinstance(given, GivenEvents)  # no watermark: all new
        start = 0 if loose else source.event_count
        if session is None or (
            start >= len(events) or (automatic and source.attempts >= self.generator.max_attempts)
        ):
            report.skipped = 1
            await self._release(key["app_name"], key["user_id"], holder)
            return
        shown = self._shown(events[start:])
        report.sessions, report.events = 1, len(shown)
        facts = await self._extract(shown, report) if shown else []
        merged, _ = merge_equal(facts)
        when = max((float(e.timestamp) for e in shown.values()), default=time.time())
        plan = Plan(merged, {e.alias: event.id for e, event in shown.items()}, when=when)
        consolidate = self.generator.consolidate if consolidate is None else consolidate
        await self._consolidate(
            key["app_name"], key["user_id"], plan, report, consolidate=consolidate
        )
        plan_changes(plan, model=self.generator.model.name)
        target = Target(
            key["app_name"], key["user_id"], key["session_id"], len(events), not loose,
            incarnation,
        )  # fmt: skip
        await write_plan(self.destination, target, holder, plan, report)

    def _shown(self, events: Sequence[Any]) -> dict[Shown, Any]:
        """The events with text after the ingestion filter, as shown to the model
        (aliases E1, E2, ... in order), mapped to the events."""
        shown: dict[Shown, Any] = {}
        for event in events:
            if getattr(event, "partial", False):
                continue
            text = self.rows.filter(text_of(event.content)).strip()
            if text:
                alias = Shown(f"E{len(shown) + 1}", text, iso_time(event.timestamp), event.author)
                shown[alias] = event
        return shown

    async def _extract(self, shown: dict[Shown, Any], report: GenerationReport) -> list[Extracted]:
        generator = self.generator
        system, prompt = extraction_prompt(list(shown), generator.topics, limit=generator.max_facts)
        reply = await call_model(self.generator, ModelRequest(system, prompt, "extraction"), report)
        dropped = Dropped()
        times = {e.alias: float(event.timestamp) for e, event in shown.items()}
        facts = parse_facts(
            reply.text,
            model=generator.model.name,
            events=times,
            topics=[t.name for t in generator.topics],
            limit=generator.max_facts,
            dropped=dropped,
        )
        _log_dropped(dropped, report, "extraction")
        return facts

    async def _consolidate(
        self,
        app_name: str,
        user_id: str,
        plan: Plan,
        report: GenerationReport,
        *,
        consolidate: bool,
    ) -> None:
        """Find the new facts equal to current stored ones (``plan.same``, no model
        call); with ``consolidate``, show the model the others beside the stored facts
        they may touch (:meth:`_candidates`) and record its decisions in ``plan``
        (no call without stored facts to show: every new fact is then created)."""
        if not plan.facts:
            return
        user = {"app_name": app_name, "user_id": user_id}
        hashes = {alias: text_hash(f.text) for alias, f in plan.new.items()}
        async with self.store.transaction(write=False) as conn:
            equal = await sql.current_by_hash(
                conn, **user, hashes=list(hashes.values()), now=time.time()
            )
        plan.same = {a: equal[h] for a, h in hashes.items() if h in equal}
        unseen = plan.unseen()
        if not consolidate or not unseen:
            return
        shown = await self._candidates(app_name, user_id, unseen)
        if not shown:
            return
        plan.stored = {f"F{n}": fact for n, fact in enumerate(shown, 1)}
        new = [Shown(a, f.text, iso_time(f.valid_from)) for a, f in unseen]
        old = [Shown(a, f.text, iso_time(f.since)) for a, f in plan.stored.items()]
        system, prompt = consolidation_prompt(new, old)
        reply = await call_model(
            self.generator, ModelRequest(system, prompt, "consolidation"), report
        )
        dropped = Dropped()
        plan.decisions = parse_decisions(
            reply.text,
            model=self.generator.model.name,
            new=[s.alias for s in new],
            stored=list(plan.stored),
            dropped=dropped,
        )
        _log_dropped(dropped, report, "consolidation")
        updated = [text_hash(d.text) for d in plan.decisions if d.action == "update" and d.text]
        if updated:
            async with self.store.transaction(write=False) as conn:
                plan.current = await sql.current_by_hash(
                    conn, **user, hashes=updated, now=time.time()
                )

    async def _candidates(
        self, app_name: str, user_id: str, unseen: list[tuple[str, Extracted]]
    ) -> list[sql.FactRow]:
        """The stored facts a consolidation is shown, at most :data:`MAX_SHOWN_FACTS`:
        all the user's current facts while they are no more; else the union of each
        new fact's best hits by the store's search (hybrid with an embedder; each new
        fact's hits in turn, best first) and the current facts under the new facts'
        topics, the most recently changed first (at least a quarter of the facts shown,
        while there are that many). Memory Bank considers all of a
        scope's memories; mem0 shows the vector search's top 10."""
        user = {"app_name": app_name, "user_id": user_id}
        now = time.time()
        async with self.store.transaction(write=False) as conn:
            listed = await sql.list_facts(
                conn, app_name=app_name, user_id=user_id, now=now, limit=MAX_SHOWN_FACTS + 1
            )
        if len(listed) <= MAX_SHOWN_FACTS:
            return listed
        per_fact = max(self.generator.similar_facts, MAX_SHOWN_FACTS // len(unseen))
        hits = [await self.similar(app_name, user_id, f.text, per_fact) for _, f in unseen]
        ids: dict[str, None] = {}
        for rank in range(per_fact):
            for found in hits:
                if rank < len(found):
                    ids[found[rank]] = None
        topics = list(dict.fromkeys(t for _, f in unseen for t in f.topics))
        async with self.store.transaction(write=False) as conn:
            stored = await sql.current_facts(conn, **user, ids=list(ids), now=now)
            under = await sql.current_under_topics(
                conn, **user, topics=topics, now=now, limit=2 * MAX_SHOWN_FACTS
            )
        hit = [stored[i] for i in ids if i in stored]
        taken = {f.id for f in hit}
        more = [f for f in under if f.id not in taken]
        reserved = min(len(more), MAX_SHOWN_FACTS // 4)  # a quarter for the topics' facts
        shown = hit[: MAX_SHOWN_FACTS - reserved]
        shown += more[: MAX_SHOWN_FACTS - len(shown)]
        return shown


def _reason(exc: BaseException) -> str:
    """A failure as logged and recorded: a GenerationError's message (it names no
    content), else the exception's class (a driver's message may quote data)."""
    if isinstance(exc, GenerationError | AdkSqlStoreError):
        return clean_text(str(exc))
    return type(exc).__name__


def _log_dropped(dropped: Dropped, report: GenerationReport, purpose: str) -> None:
    if dropped:
        for reason, n in dropped.reasons.items():
            report.dropped[reason] = report.dropped.get(reason, 0) + n
        logger.warning(
            "memory generation dropped items of the model's %s: %s",
            purpose,
            ", ".join(f"{n} {reason}" for reason, n in sorted(dropped.reasons.items())),
        )
