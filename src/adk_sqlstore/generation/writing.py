"""A run's changes to the user's facts: planned from the model's decisions, then
written in one transaction under the user lock, if the run still holds the lease.

A current fact is a row of ``sqlstore_facts`` and a memory (same id) that search
finds, with ``custom_metadata`` ``{"kind": "fact", "topics": [...],
"source_session_id": ..., "source_event_ids": [...], "valid_from": ISO 8601,
"revision_count": n}`` (and ``"expire_time"`` with a time to live). An invalidated
fact keeps its row (``invalid_at`` set) and its revisions; its memory goes.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy.ext.asyncio import AsyncConnection

from ..errors import GenerationError
from ..memory.rows import iso_time
from ..sql import facts as sql
from ..sql import memory as memory_sql
from ..sql.users import lock_user
from ..store import retry_conflicts
from .generator import GenerationReport
from .replies import Decision, Extracted

if TYPE_CHECKING:
    from .running import Generation

__all__ = ["FACT_KIND", "Plan", "Target", "fact_metadata", "kept", "plan_changes", "write_plan"]

FACT_KIND = "fact"
"""``custom_metadata["kind"]`` of a fact's memory."""


def kept(found: list[Any], kind: str | None, now: float) -> list[Any]:
    """Found memories (``MemoryEntry``) of ``kind`` (``"facts"``, ``"turns"``, ``None``:
    both), without facts past their time to live (at ``now``, seconds since the epoch)."""
    out = []
    for entry in found:
        metadata = entry.custom_metadata or {}
        fact = metadata.get("kind") == FACT_KIND
        if (kind == "facts" and not fact) or (kind == "turns" and fact):
            continue
        expire = metadata.get("expire_time") if fact else None
        if isinstance(expire, str) and _epoch(expire) <= now:
            continue
        out.append(entry)
    return out


def _epoch(iso: str) -> float:
    try:
        return datetime.fromisoformat(iso).timestamp()
    except ValueError:
        return float("inf")


@dataclass
class Plan:
    """A run's new facts (``N1``... in order), the events (alias -> id) and stored
    facts (alias -> row) shown, the model's decisions, and what they come to."""

    facts: list[Extracted]
    events: dict[str, str]
    stored: dict[str, sql.FactRow] = field(default_factory=dict)
    decisions: list[Decision] = field(default_factory=list)
    creates: list[Extracted] = field(default_factory=list)
    updates: list[tuple[sql.FactRow, Extracted, str]] = field(default_factory=list)
    invalidations: list[tuple[sql.FactRow, Extracted | None]] = field(default_factory=list)
    unchanged: int = 0
    model: str = ""


def plan_changes(plan: Plan, *, model: str) -> None:
    """Resolve the decisions: each new fact is created unless decided otherwise; a
    stored fact is updated by at most one new fact, and one that is invalidated is
    not updated."""
    plan.model = model
    new = {f"N{n}": fact for n, fact in enumerate(plan.facts, 1)}
    invalidated = {d.target: d for d in plan.decisions if d.action == "invalidate"}
    for target, invalidation in invalidated.items():
        assert target is not None
        plan.invalidations.append((plan.stored[target], new.get(invalidation.fact or "")))
    decided = {d.fact: d for d in plan.decisions if d.action != "invalidate"}
    updated: set[str] = set()
    for alias, fact in new.items():
        d = decided.get(alias)
        if d is None or d.action == "create":
            plan.creates.append(fact)
        elif d.action == "update" and d.target not in invalidated and d.target not in updated:
            assert d.target is not None and d.text is not None
            updated.add(d.target)
            plan.updates.append((plan.stored[d.target], fact, d.text))
        elif d.action == "update" and d.target in invalidated:
            plan.creates.append(fact)  # it replaces the fact it was to update
        else:
            plan.unchanged += 1


def fact_metadata(fact: sql.FactRow) -> dict[str, Any]:
    """The ``custom_metadata`` of a fact's memory."""
    metadata: dict[str, Any] = {
        "kind": FACT_KIND,
        "topics": fact.topics,
        "source_session_id": fact.session_id,
        "source_event_ids": fact.event_ids,
        "valid_from": iso_time(
            fact.valid_from if fact.valid_from is not None else fact.create_time
        ),
        "revision_count": fact.revision_count,
    }
    if fact.expire_at is not None:
        metadata["expire_time"] = iso_time(fact.expire_at)
    if fact.invalid_at is not None:
        metadata["invalid_time"] = iso_time(fact.invalid_at)
    return metadata


@dataclass
class _Changes:
    """Rows to write: facts (with whether each is new), revisions, memories."""

    facts: list[tuple[sql.FactRow, bool]] = field(default_factory=list)
    revisions: list[sql.Revision] = field(default_factory=list)
    memories: list[dict[str, Any]] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Target:
    """Whose facts a run writes, from which session (``None``: facts given to
    ``add_memory``), and the session's new watermark (its events processed; not kept
    without ``watermark``)."""

    app_name: str
    user_id: str
    session_id: str | None = None
    event_count: int = 0
    watermark: bool = True


def _changes(run: Generation, key: Target, plan: Plan, now: float) -> _Changes:
    """The rows the plan comes to: facts (new or not), revisions, memories."""
    expire = None if run.generator.ttl is None else now + run.generator.ttl
    out = _Changes()

    def revise(fact: sql.FactRow, new: bool, action: str, old: str | None, by: Any) -> None:
        events = [plan.events[e] for e in by.events] if by is not None else []
        text = fact.text if action != "invalidate" else None
        revision = (fact.revision_count, action, old, text, key.session_id, events, plan.model)
        out.revisions.append(sql.Revision(fact.id, *revision, now))
        out.facts.append((fact, new))

    for x in plan.creates:
        events = [plan.events[e] for e in x.events]
        fact_id = f"fact-{uuid.uuid4().hex}"
        fact = sql.FactRow(
            fact_id, x.text, list(x.topics), x.valid_from, None, expire, key.session_id, events,
            1, now, now,
        )  # fmt: skip
        revise(fact, True, "create", None, x)
    for stored, x, text in plan.updates:
        fact = sql.FactRow(
            stored.id, text, list(dict.fromkeys([*stored.topics, *x.topics])), x.valid_from,
            None, expire, key.session_id, [plan.events[e] for e in x.events],
            stored.revision_count + 1, stored.create_time, now,
        )  # fmt: skip
        revise(fact, False, "update", stored.text, x)
    for stored, by in plan.invalidations:
        fact = sql.FactRow(**{**stored.__dict__, "invalid_at": now, "update_time": now})
        fact.revision_count += 1
        revise(fact, False, "invalidate", stored.text, by)
        out.gone.append(stored.id)
    out.memories = [
        row
        for fact, _ in out.facts
        if fact.invalid_at is None and (row := _memory(run, key, fact, now)) is not None
    ]
    return out


def _memory(run: Generation, key: Target, fact: sql.FactRow, now: float) -> Any:
    """A current fact's memory row (through the ingestion filter)."""
    return run.rows.row(
        app_name=key.app_name, user_id=key.user_id, memory_id=fact.id, session_id=None,
        event_id=None, author=None,
        timestamp=fact.valid_from if fact.valid_from is not None else now, text=fact.text,
        role=None, custom_metadata=fact_metadata(fact), now=now,
    )  # fmt: skip


async def write_plan(
    run: Generation,
    key: Target,
    holder: str,
    plan: Plan,
    report: GenerationReport,
) -> None:
    """Write the plan, move the session's watermark (if any) and end the lease, in
    one transaction under the user lock. Stored facts changed meanwhile (none should
    be: the lease keeps other runs out) are left as they are.

    Raises:
        GenerationError: the run no longer holds the user's lease (it expired); nothing
            was written.
    """
    now = time.time()
    changes = _changes(run, key, plan, now)
    prepared = None if run.hybrid is None else await run.hybrid.prepare(changes.memories)

    async def write() -> None:
        user = {"app_name": key.app_name, "user_id": key.user_id}
        async with run.store.transaction(write=True) as conn:
            await lock_user(conn, app_name=key.app_name, user_id=key.user_id, mode="exclusive")
            if not await sql.holds_lease(conn, **user, holder=holder):
                raise GenerationError("the run's lease of the user expired before it wrote")
            await _write(conn, user, changes, now)
            if run.hybrid is not None:
                await run.hybrid.write(conn, prepared, key.app_name, key.user_id)
            if key.session_id is not None and key.watermark:
                source = sql.Source(key.event_count, 0, None)
                await sql.write_source(
                    conn, **user, session_id=key.session_id, source=source, now=now
                )
            await sql.release_lease(conn, **user, holder=holder)

    await retry_conflicts(write)
    report.created += len(plan.creates)
    report.updated += len(plan.updates)
    report.invalidated += len(plan.invalidations)
    report.unchanged += plan.unchanged
    report.fact_ids += [f.id for f, _ in changes.facts if f.invalid_at is None]


async def _write(
    conn: AsyncConnection, user: dict[str, str], changes: _Changes, now: float
) -> None:
    """The facts, revisions and memories of ``changes``, but of stored facts no longer
    current (left as they are)."""
    stored = await sql.current_facts(
        conn, **user, ids=[f.id for f, new in changes.facts if not new], now=now
    )
    kept = [(f, new) for f, new in changes.facts if new or f.id in stored]
    for fact, new in kept:
        await sql.write_fact(conn, **user, fact=fact, new=new)
    ids = {f.id for f, _ in kept}
    await sql.insert_revisions(
        conn, **user, revisions=[r for r in changes.revisions if r.fact_id in ids]
    )
    gone = [i for i in changes.gone if i in ids]
    if gone:
        await memory_sql.delete_memories(conn, **user, memory_ids=gone)
    await memory_sql.upsert_memories(conn, [m for m in changes.memories if m["id"] in ids])
