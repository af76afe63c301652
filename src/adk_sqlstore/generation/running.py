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
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import GenerationError
from ..memory.hybrid import HybridMemory
from ..memory.rows import MemoryRows, iso_time
from ..search.text import text_of
from ..sessions.codec import SessionCodec
from ..sessions.reading import SessionKey, read_session, session_key
from ..sql import facts as sql
from ..sql.users import lock_user
from ..store import Store, retry_conflicts
from .chat import ModelReply, ModelRequest
from .generator import GenerationReport, MemoryGenerator
from .prompts import Shown, consolidation_prompt, extraction_prompt
from .replies import Dropped, Extracted, parse_decisions, parse_facts
from .writing import Plan, Target, plan_changes, write_plan

__all__ = ["Generation", "GivenEvents", "Similar"]

logger = logging.getLogger(__name__)

Similar = Callable[[str, str, str, int], Awaitable[list[str]]]
"""``(app_name, user_id, text, limit) -> memory ids``: the store's search, best first."""

_POLL = (0.05, 1.0)  # seconds between looks at a lease held by another run: first, most
_MAX_SHOWN_FACTS = 50


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

        Raises:
            GenerationError: the model failed, timed out or answered with no JSON of
                the asked shape; or another run held the user's lease for longer than a
                run may. The failure is recorded for the session (its attempts).
            DatabaseUnavailableError, ConcurrencyConflictError: as any write.
        """
        key = session_key(app_name, user_id, session_id)
        holder = secrets.token_hex(16)
        await self._wait_for_lease(app_name, user_id, holder)
        try:
            report = await self._run(key, holder, consolidate, automatic, given)
        except GenerationError as exc:
            await self._failed(key, holder, exc)
            raise
        except BaseException:
            await asyncio.shield(self._release(app_name, user_id, holder))
            raise
        return report

    async def add_facts(
        self, app_name: str, user_id: str, facts: list[Extracted], *, consolidate: bool
    ) -> GenerationReport:
        """Store facts given by the caller (``add_memory(..., consolidate=True)``),
        consolidated with the user's stored facts in one model call (none with
        ``consolidate`` false: each is created).

        Raises:
            GenerationError: as :meth:`run` (nothing was written).
        """
        holder = secrets.token_hex(16)
        await self._wait_for_lease(app_name, user_id, holder)
        report = GenerationReport()
        try:
            plan = Plan(facts=facts, events={})
            if facts and consolidate:
                await self._consolidate(app_name, user_id, plan, report)
            plan_changes(plan, model=self.generator.model.name)
            await write_plan(self, Target(app_name, user_id), holder, plan, report)
        except BaseException:
            await asyncio.shield(self._release(app_name, user_id, holder))
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
                return await sql.take_lease(
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
                await sql.release_lease(conn, app_name=app_name, user_id=user_id, holder=holder)

        await retry_conflicts(release)

    async def _failed(self, key: SessionKey, holder: str, exc: GenerationError) -> None:
        """Count a failed attempt for the session and end the lease (one transaction)."""
        logger.warning("memory generation failed for a session: %s", exc)

        async def record() -> None:
            async with self.store.transaction(write=True) as conn:
                await lock_user(
                    conn, app_name=key["app_name"], user_id=key["user_id"], mode="exclusive"
                )
                source = await sql.read_source(conn, **key) or sql.Source(0, 0, None)
                source.attempts += 1
                source.error = str(exc)[:500]
                await sql.write_source(conn, **key, source=source, now=time.time())
                await sql.release_lease(
                    conn, app_name=key["app_name"], user_id=key["user_id"], holder=holder
                )

        await asyncio.shield(retry_conflicts(record))

    async def _run(
        self, key: SessionKey, holder: str, consolidate: bool | None, automatic: bool, given: Any
    ) -> GenerationReport:
        report = GenerationReport()
        async with self.store.transaction(write=False) as conn:
            source = await sql.read_source(conn, **key) or sql.Source(0, 0, None)
            stored = await read_session(conn, key, self.codec)
        session = stored if stored is not None else given
        events = list(session.events) if session is not None else []
        loose = stored is None and isinstance(given, GivenEvents)  # no watermark: all new
        start = 0 if loose else source.event_count
        if session is None or (
            start >= len(events) or (automatic and source.attempts >= self.generator.max_attempts)
        ):
            report.skipped = 1
            await self._release(key["app_name"], key["user_id"], holder)
            return report
        shown = self._shown(events[start:])
        report.sessions, report.events = 1, len(shown)
        facts = await self._extract(shown, report) if shown else []
        plan = Plan(facts=facts, events={e.alias: event.id for e, event in shown.items()})
        if facts and (self.generator.consolidate if consolidate is None else consolidate):
            await self._consolidate(key["app_name"], key["user_id"], plan, report)
        plan_changes(plan, model=self.generator.model.name)
        target = Target(key["app_name"], key["user_id"], key["session_id"], len(events), not loose)
        await write_plan(self, target, holder, plan, report)
        return report

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

    async def _call(self, request: ModelRequest, report: GenerationReport) -> ModelReply:
        model = self.generator.model
        report.model_calls += 1
        try:
            reply = await asyncio.wait_for(model.complete(request), self.generator.timeout)
        except TimeoutError as exc:
            raise GenerationError(
                f"model {model.name!r} gave no {request.purpose} within"
                f" {self.generator.timeout:g} s"
            ) from exc
        except GenerationError:
            raise
        except Exception as exc:
            raise GenerationError(
                f"model {model.name!r} failed during the {request.purpose}: {type(exc).__name__}"
            ) from None
        if not isinstance(reply, ModelReply) or not isinstance(reply.text, str):
            raise GenerationError(f"model {model.name!r} returned no ModelReply with text")
        report.prompt_tokens += (
            reply.prompt_tokens or (len(request.system) + len(request.prompt)) // 4
        )
        report.completion_tokens += reply.completion_tokens or 0
        return reply

    async def _extract(self, shown: dict[Shown, Any], report: GenerationReport) -> list[Extracted]:
        generator = self.generator
        system, prompt = extraction_prompt(list(shown), generator.topics, limit=generator.max_facts)
        reply = await self._call(ModelRequest(system, prompt, "extraction"), report)
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
        self, app_name: str, user_id: str, plan: Plan, report: GenerationReport
    ) -> None:
        """Show the model the stored facts most like the new ones; record its decisions
        in ``plan`` (none without stored facts: every new fact is then created)."""
        ids: dict[str, None] = {}
        for fact in plan.facts:
            for found in await self.similar(
                app_name, user_id, fact.text, self.generator.similar_facts
            ):
                ids[found] = None
        async with self.store.transaction(write=False) as conn:
            stored = await sql.current_facts(
                conn, app_name=app_name, user_id=user_id, ids=list(ids), now=time.time()
            )
        shown = [stored[i] for i in ids if i in stored][:_MAX_SHOWN_FACTS]
        if not shown:
            return
        plan.stored = {f"F{n}": fact for n, fact in enumerate(shown, 1)}
        new = [Shown(f"N{n}", f.text, iso_time(f.valid_from)) for n, f in enumerate(plan.facts, 1)]
        old = [
            Shown(a, f.text, iso_time(f.valid_from or f.create_time))
            for a, f in plan.stored.items()
        ]
        system, prompt = consolidation_prompt(new, old)
        reply = await self._call(ModelRequest(system, prompt, "consolidation"), report)
        dropped = Dropped()
        plan.decisions = parse_decisions(
            reply.text,
            model=self.generator.model.name,
            new=[s.alias for s in new],
            stored=list(plan.stored),
            dropped=dropped,
        )
        _log_dropped(dropped, report, "consolidation")


def _log_dropped(dropped: Dropped, report: GenerationReport, purpose: str) -> None:
    if dropped:
        for reason, n in dropped.reasons.items():
            report.dropped[reason] = report.dropped.get(reason, 0) + n
        logger.warning(
            "memory generation dropped items of the model's %s: %s",
            purpose,
            ", ".join(f"{n} {reason}" for reason, n in sorted(dropped.reasons.items())),
        )
