"""A run's changes to the user's facts (a :class:`~.planning.Plan`), written in one
transaction under the user lock, if the run still holds the lease; and the facts'
memories.

A current fact is a row of ``sqlstore_facts`` and a memory (same id) that search
finds, with ``custom_metadata`` ``{**the metadata add_memory was given, "kind":
"fact", "topics": [...], "source_session_id": ..., "source_event_ids": [...],
"valid_from": ISO 8601, "revision_count": n}`` (and ``"expire_time"`` with a time to
live). An invalidated fact keeps its row (``invalid_at``: when it stopped being true;
``invalidate_time``: when the store learned it) and its revisions; its memory goes.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from ..errors import GenerationError
from ..memory.hybrid import HybridMemory
from ..memory.rows import MemoryRows, iso_time
from ..search.text import text_hash
from ..sql import fact_runs as runs
from ..sql import facts as sql
from ..sql import memory as memory_sql
from ..sql.users import lock_user
from ..store import Store, retry_conflicts
from .generator import GenerationReport
from .planning import Plan

__all__ = [
    "FACT_KIND",
    "Destination",
    "Target",
    "fact_memory",
    "fact_metadata",
    "kept",
    "revert_invalidations",
    "write_plan",
]

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


def fact_metadata(fact: sql.FactRow) -> dict[str, Any]:
    """The ``custom_metadata`` of a fact's memory: the metadata ``add_memory`` was
    given, then the store's keys (which win)."""
    metadata: dict[str, Any] = {
        **(fact.custom_metadata or {}),
        "kind": FACT_KIND,
        "topics": fact.topics,
        "source_session_id": fact.session_id,
        "source_event_ids": fact.event_ids,
        "valid_from": iso_time(fact.since),
        "revision_count": fact.revision_count,
    }
    if fact.expire_at is not None:
        metadata["expire_time"] = iso_time(fact.expire_at)
    if fact.invalid_at is not None:
        metadata["invalid_time"] = iso_time(fact.invalid_at)
    if fact.invalidate_time is not None:
        metadata["invalidate_time"] = iso_time(fact.invalidate_time)
    return metadata


def fact_memory(
    rows: MemoryRows, app_name: str, user_id: str, fact: sql.FactRow, now: float
) -> Any:
    """A current fact's memory row (through the ingestion filter; ``None`` if it
    filters the text out)."""
    return rows.row(
        app_name=app_name, user_id=user_id, memory_id=fact.id, session_id=None,
        event_id=None, author=None, timestamp=fact.since, text=fact.text,
        role=None, custom_metadata=fact_metadata(fact), now=now,
    )  # fmt: skip


@dataclass(frozen=True)
class Destination:
    """Where a run's facts go: the store, the memory rows' builder (the ingestion
    filter and text analysis), the vectors (hybrid search), the facts' time to live
    (seconds; ``None``: forever)."""

    store: Store
    rows: MemoryRows
    hybrid: HybridMemory | None
    ttl: float | None


@dataclass(frozen=True)
class Target:
    """Whose facts a run writes, from which session (``None``: facts given to
    ``add_memory``), and the session's new watermark (its events processed, for its
    ``incarnation``; not kept without ``watermark``)."""

    app_name: str
    user_id: str
    session_id: str | None = None
    event_count: int = 0
    watermark: bool = True
    incarnation: str | None = None


@dataclass
class _Changes:
    """Rows to write: facts (with whether each is new), revisions, memories; built
    from a plan for one target at one time."""

    key: Target
    model: str
    now: float
    facts: list[tuple[sql.FactRow, bool]] = field(default_factory=list)
    revisions: list[sql.Revision] = field(default_factory=list)
    memories: list[dict[str, Any]] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)
    ids: dict[str, str] = field(default_factory=dict)  # new fact alias -> its fact's id

    def revise(self, fact: sql.FactRow, new: bool, action: str, old: str | None,
               events: list[str], invalid_at: float | None = None,
               by: str | None = None) -> None:  # fmt: skip
        """Write ``fact`` with a revision of ``action``."""
        text = fact.text if action != "invalidate" else None
        revision = sql.Revision(
            fact.id, fact.revision_count, action, old, text, self.key.session_id,
            events, self.model, self.now, invalid_at, by,
        )  # fmt: skip
        self.revisions.append(revision)
        self.facts.append((fact, new))


def _changes(to: Destination, key: Target, plan: Plan, now: float) -> _Changes:
    """The rows the plan comes to: facts (new or not), revisions, memories."""
    out = _Changes(key, plan.model, now)
    expire = None if to.ttl is None else now + to.ttl
    for n, alias in enumerate(plan.new):
        _new_fact(out, plan, n, alias, expire)
    new = plan.new
    for stored, by in plan.invalidations:
        since = new[by].valid_from if by is not None else plan.when
        by_id = out.ids.get(by) if by is not None else None
        fact = sql.FactRow(
            **{**stored.__dict__, "invalid_at": since, "invalidate_time": now,
               "invalidated_by": by_id, "update_time": now}
        )  # fmt: skip
        fact.revision_count += 1
        events = [plan.events[e] for e in new[by].events if e in plan.events] if by else []
        out.revise(fact, False, "invalidate", stored.text, events, since, by_id)
        out.gone.append(stored.id)
    out.memories = [
        row
        for fact, _ in out.facts
        if fact.current
        and (row := fact_memory(to.rows, key.app_name, key.user_id, fact, now)) is not None
    ]
    return out


def _new_fact(out: _Changes, plan: Plan, n: int, alias: str, expire: float | None) -> None:
    """The rows of the ``n``-th new fact (``alias``), by its change."""
    x, change, now, session_id = plan.new[alias], plan.changes[alias], out.now, out.key.session_id
    events = [plan.events[e] for e in x.events if e in plan.events]
    if change.action in ("create", "superseded"):
        fact = sql.FactRow(
            f"fact-{uuid.uuid4().hex}", x.text, list(x.topics), x.valid_from, None, expire,
            session_id, events, 1, now, now, custom_metadata=plan.metadata[n],
        )  # fmt: skip
        out.ids[alias] = fact.id
        if change.action == "create":
            out.revise(fact, True, "create", None, events)
            return
        assert change.target is not None  # a newer stored fact says otherwise
        newer = change.target
        out.revisions.append(
            sql.Revision(fact.id, 1, "create", None, x.text, session_id, events, plan.model, now)
        )
        fact.invalid_at, fact.invalidate_time, fact.invalidated_by = newer.since, now, newer.id
        fact.revision_count = 2
        out.revise(fact, True, "invalidate", x.text, events, newer.since, newer.id)
    elif change.action == "update":
        stored, metadata = change.target, plan.metadata[n]
        assert stored is not None and change.text is not None
        fact = sql.FactRow(
            stored.id, change.text, list(dict.fromkeys([*stored.topics, *x.topics])),
            x.valid_from, None, expire, session_id, events,
            stored.revision_count + 1, stored.create_time, now,
            custom_metadata=stored.custom_metadata if metadata is None
            else {**(stored.custom_metadata or {}), **metadata},
        )  # fmt: skip
        out.ids[alias] = fact.id
        out.revise(fact, False, "update", stored.text, events)
    elif change.target is not None:  # the same as a stored fact
        stored = change.target
        out.ids[alias] = stored.id
        more = [e for e in events if e not in stored.event_ids]
        if more and session_id is not None and stored.session_id == session_id:
            joined = sql.FactRow(**{**stored.__dict__, "event_ids": [*stored.event_ids, *more]})
            out.facts.append((joined, False))  # its evidence joined: no revision


async def write_plan(
    to: Destination, key: Target, holder: str, plan: Plan, report: GenerationReport
) -> None:
    """Write the plan, move the session's watermark (if any) and end the lease, in
    one transaction under the user lock. Stored facts changed meanwhile (none should
    be: the lease keeps other runs out) are left as they are.

    Raises:
        GenerationError: the run no longer holds the user's lease (it expired); nothing
            was written.
    """
    now = time.time()
    changes = _changes(to, key, plan, now)
    prepared = None if to.hybrid is None else await to.hybrid.prepare(changes.memories)

    async def write() -> None:
        user = {"app_name": key.app_name, "user_id": key.user_id}
        async with to.store.transaction(write=True) as conn:
            await lock_user(conn, app_name=key.app_name, user_id=key.user_id, mode="exclusive")
            if not await runs.holds_lease(conn, **user, holder=holder):
                raise GenerationError("the run's lease of the user expired before it wrote")
            await _write(conn, user, changes, now)
            if to.hybrid is not None:
                await to.hybrid.write(conn, prepared, key.app_name, key.user_id)
            if key.session_id is not None and key.watermark:
                source = runs.Source(key.event_count, 0, None, key.incarnation)
                await runs.write_source(
                    conn, **user, session_id=key.session_id, source=source, now=now
                )
            await runs.release_lease(conn, **user, holder=holder)

    await retry_conflicts(write)
    report.created += plan.count("create") + plan.count("superseded")
    report.updated += plan.count("update")
    report.invalidated += len(plan.invalidations) + plan.count("superseded")
    report.unchanged += plan.count("same")
    fresh = {f.id for f, _ in changes.facts if f.current}
    report.fact_ids += [i for i in dict.fromkeys(changes.ids.values()) if i in fresh]


async def _write(
    conn: AsyncConnection, user: dict[str, str], changes: _Changes, now: float
) -> None:
    """The facts, revisions and memories of ``changes``, but of stored facts no longer
    current (left as they are)."""
    stored = await sql.current_facts(
        conn, **user, ids=[f.id for f, new in changes.facts if not new], now=now
    )
    kept_ = [(f, new) for f, new in changes.facts if new or f.id in stored]
    for fact, new in kept_:
        await sql.write_fact(conn, **user, fact=fact, new=new)
    ids = {f.id for f, _ in kept_}
    await sql.insert_revisions(
        conn, **user, revisions=[r for r in changes.revisions if r.fact_id in ids]
    )
    gone = [i for i in changes.gone if i in ids]
    if gone:
        await memory_sql.delete_memories(conn, **user, memory_ids=gone)
    await memory_sql.upsert_memories(conn, [m for m in changes.memories if m["id"] in ids])


async def _still_contradicting(
    conn: AsyncConnection,
    user: dict[str, str],
    fact: sql.FactRow,
    gone: dict[str, sql.FactRow],
    restored: dict[str, sql.FactRow],
    now: float,
) -> sql.FactRow | None:
    """The fact that contradicts ``fact`` once the facts ``gone`` are deleted: the
    first that stays along the chain of invalidations from it (none past a cycle back
    to it), else a current fact equal to it (``restored``: those made current again
    so far, by text hash; ``fact`` joins them when none is)."""
    by = fact.invalidated_by
    seen: set[str] = set()
    while by is not None and by in gone and by not in seen:
        seen.add(by)
        by = gone[by].invalidated_by
    if by is not None and by != fact.id:
        survivor = (await sql.read_facts(conn, **user, ids=[by])).get(by)
        if survivor is not None:
            return survivor
    key = text_hash(fact.text)
    equal = restored.get(key) or (
        await sql.current_by_hash(conn, **user, hashes=[key], now=now)
    ).get(key)
    if equal is not None and equal.id not in gone:
        return equal
    restored[key] = fact
    return None


async def revert_invalidations(
    conn: AsyncConnection,
    rows: MemoryRows,
    *,
    app_name: str,
    user_id: str,
    gone: Sequence[str],
    session_id: str | None,
    now: float,
) -> list[dict[str, Any]]:
    """Before the facts ``gone`` are deleted (and, with ``session_id``, that session's
    facts): undo the invalidations they caused. A fact one of them invalidated is
    current again (a ``restore`` revision, its memory made again), or, when the fact
    that invalidated it was itself invalidated by a fact that stays, invalidated by
    that one instead (an ``invalidate`` revision). Returns the memory rows written
    (for their vectors). The caller holds the user lock (``"exclusive"``)."""
    user = {"app_name": app_name, "user_id": user_id}
    affected = [
        f
        for f in await sql.invalidated_by_any(conn, **user, ids=gone, session_id=session_id)
        if f.id not in gone
    ]
    if not affected:
        return []
    gone_rows = await sql.read_facts(conn, **user, ids=list(gone))
    restored: dict[str, sql.FactRow] = {}  # by text hash
    written: list[dict[str, Any]] = []
    revisions: list[sql.Revision] = []
    for fact in affected:
        survivor = await _still_contradicting(conn, user, fact, gone_rows, restored, now)
        fact.revision_count += 1
        fact.update_time = now
        if survivor is not None:
            fact.invalidated_by, fact.invalid_at = survivor.id, max(survivor.since, fact.since)
            fact.invalidate_time = fact.invalidate_time or now
            revision = sql.Revision(
                fact.id, fact.revision_count, "invalidate", fact.text, None, session_id, [],
                None, now, fact.invalid_at, survivor.id,
            )  # fmt: skip
        else:
            fact.invalid_at = fact.invalidate_time = fact.invalidated_by = None
            revision = sql.Revision(
                fact.id, fact.revision_count, "restore", None, fact.text, session_id, [],
                None, now,
            )  # fmt: skip
            if (fact.expire_at is None or fact.expire_at > now) and (
                row := fact_memory(rows, app_name, user_id, fact, now)
            ) is not None:
                written.append(row)
        revisions.append(revision)
        await sql.write_fact(conn, **user, fact=fact, new=False)
    await sql.insert_revisions(conn, **user, revisions=revisions)
    await memory_sql.upsert_memories(conn, written)
    return written
