"""A user's memories that no session holds, out and back in (a mixin of
``SqlMemoryService``): the memories ``add_memory`` stored, the generated facts with
every revision, and the generation records (what each session's generation
processed). Memories made from sessions are not carried: importing the sessions
and ingesting them makes them again.

The document (``memories.json`` beside a user's exported sessions)::

    {"format": "adk-sqlstore.memories/1", "app_name": ..., "user_id": ...,
     "memories": [{"id", "session_id", "author", "timestamp", "content",
                   "custom_metadata"}],
     "facts": [{"id", "text", "topics", "valid_from", "invalid_at", "expire_at",
                "session_id", "event_ids", "revision_count", "create_time",
                "update_time", "invalidate_time", "invalidated_by", "custom_metadata",
                "revisions": [{"revision", "action", "old_text", "new_text",
                "session_id", "event_ids", "model", "create_time", "invalid_at",
                "by_fact_id"}]}],
     "generation": [{"session_id", "event_count", "attempts", "error",
                     "update_time"}]}

A generation record is imported for the session of that id as the store holds it
then (its incarnation), or for the next one made if none is held yet.

Times are seconds since the epoch (UTC), as stored, so that a round trip is exact;
``content`` is the memory's ``Content`` as JSON.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from .. import telemetry
from ..errors import InvalidMemoryError
from ..generation.writing import fact_metadata
from ..models import Content
from ..search.text import text_of
from ..sql import fact_runs as runs
from ..sql import facts as sql
from ..sql import memory as memory_sql
from ..sql.sessions import load_session
from ..sql.users import lock_user
from ..store import Store, retry_conflicts, write_completes
from ..validation import check_argument, check_identifier
from .hybrid import HybridMemory
from .rows import MemoryRows

__all__ = ["MEMORIES_FORMAT", "MemoryTransfer"]

MEMORIES_FORMAT = "adk-sqlstore.memories/1"
"""The ``format`` of an exported memories document."""


class _Memory(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    session_id: str | None = None
    author: str | None = None
    timestamp: float
    content: dict[str, Any]
    custom_metadata: dict[str, Any] = {}


class _Revision(BaseModel):
    model_config = ConfigDict(extra="forbid")
    revision: int
    action: str
    old_text: str | None = None
    new_text: str | None = None
    session_id: str | None = None
    event_ids: list[str] = []
    model: str | None = None
    create_time: float
    invalid_at: float | None = None
    by_fact_id: str | None = None


class _Fact(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    text: str
    topics: list[str] = []
    valid_from: float | None = None
    invalid_at: float | None = None
    expire_at: float | None = None
    session_id: str | None = None
    event_ids: list[str] = []
    revision_count: int
    create_time: float
    update_time: float
    invalidate_time: float | None = None
    invalidated_by: str | None = None
    custom_metadata: dict[str, Any] | None = None
    revisions: list[_Revision] = []


class _Source(BaseModel):
    model_config = ConfigDict(extra="forbid")
    session_id: str
    event_count: int
    attempts: int = 0
    error: str | None = None
    update_time: float


class _Document(BaseModel):
    model_config = ConfigDict(extra="forbid")
    format: str
    app_name: str
    user_id: str
    memories: list[_Memory] = []
    facts: list[_Fact] = []
    generation: list[_Source] = []


class MemoryTransfer:
    """``export_memories`` and ``import_memories`` of a memory service."""

    _store: Store
    _rows: MemoryRows
    _hybrid: HybridMemory | None

    async def export_memories(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        """The user's memories no session holds, as the module docstring's document
        (JSON-ready): ``add_memory``'s memories, every fact (current or not) with its
        revisions, and the generation records. Read in one snapshot."""
        check_identifier("app_name", app_name)
        check_identifier("user_id", user_id)
        user = {"app_name": app_name, "user_id": user_id}
        async with self._store.transaction(write=False) as conn:
            added = await sql.added_memories(conn, **user)
            facts = await sql.list_facts(
                conn, app_name=app_name, user_id=user_id, now=time.time(), history=True
            )
            revisions = await sql.all_revisions(conn, **user)
            sources = await runs.all_sources(conn, **user)
        return {
            "format": MEMORIES_FORMAT,
            **user,
            "memories": [
                {
                    "id": m.id,
                    "session_id": m.session_id,
                    "author": m.author,
                    "timestamp": m.timestamp,
                    "content": json.loads(m.content),
                    "custom_metadata": json.loads(m.custom_metadata),
                }
                for m in added
            ],
            "facts": [
                {
                    **{k: v for k, v in f.__dict__.items() if k != "text_hash"},
                    "revisions": [
                        {k: v for k, v in r.__dict__.items() if k != "fact_id"}
                        for r in revisions.get(f.id, [])
                    ],
                }
                for f in sorted(facts, key=lambda f: f.id)
            ],
            "generation": [dict(s._mapping) for s in sources],
        }

    async def users_with_memories(self, *, app_name: str) -> list[str]:
        """The users of ``app_name`` whose memories :meth:`export_memories` would
        carry (facts, ``add_memory``'s memories), in order."""
        check_identifier("app_name", app_name)
        async with self._store.transaction(write=False) as conn:
            return await sql.users_with_added_memories(conn, app_name=app_name)

    @telemetry.traced("import_memories", rows=lambda counts: sum(counts.values()))
    @write_completes
    async def import_memories(
        self, document: Mapping[str, Any], *, replace: bool = False
    ) -> dict[str, int]:
        """Store what :meth:`export_memories` wrote, in one transaction under the user
        lock. A memory, fact or generation record the store already has (same id) is
        kept unless ``replace``.

        Returns:
            Counts: ``memories``, ``facts`` and ``fact_revisions`` imported, and
            ``skipped`` (memories and facts kept).

        Raises:
            InvalidMemoryError: ``document`` is not such a document; nothing is written.
            ConcurrencyConflictError: it kept losing races (run again 10 times).
        """
        check_argument("replace", replace, bool, "True or False")
        try:
            doc = _Document.model_validate(document)
        except ValidationError as exc:
            raise InvalidMemoryError(f"not a memories document: {exc.errors()[:1]}") from exc
        if doc.format != MEMORIES_FORMAT:
            raise InvalidMemoryError(f"not a memories document of {MEMORIES_FORMAT!r}")
        check_identifier("app_name", doc.app_name)
        check_identifier("user_id", doc.user_id)
        now = time.time()
        rows = self._memory_rows(doc, now)
        prepared = None if self._hybrid is None else await self._hybrid.prepare(rows)

        async def write() -> dict[str, int]:
            user = {"app_name": doc.app_name, "user_id": doc.user_id}
            async with self._store.transaction(write=True) as conn:
                await lock_user(conn, **user, mode="exclusive", create=True, now=now)
                counts = await _write(conn, doc, rows, replace=replace, now=now)
                if self._hybrid is not None:
                    await self._hybrid.write(conn, prepared, doc.app_name, doc.user_id)
                return counts

        return await retry_conflicts(write)

    def _memory_rows(self, doc: _Document, now: float) -> list[dict[str, Any]]:
        """Memory rows of the document's memories and current facts."""
        rows = []
        for m in doc.memories:
            row = self._rows.row(
                app_name=doc.app_name, user_id=doc.user_id, memory_id=m.id,
                session_id=m.session_id, event_id=None, author=m.author, timestamp=m.timestamp,
                text=text_of(Content.model_validate(m.content)), role=m.content.get("role"),
                custom_metadata=m.custom_metadata, now=now,
            )  # fmt: skip
            if row is not None:
                rows.append(row)
        for f in doc.facts:
            fact = _fact_row(f)
            if fact.current:
                row = self._rows.row(
                    app_name=doc.app_name, user_id=doc.user_id, memory_id=f.id, session_id=None,
                    event_id=None, author=None, timestamp=f.valid_from or f.create_time,
                    text=f.text, role=None, custom_metadata=fact_metadata(fact), now=now,
                )  # fmt: skip
                if row is not None:
                    rows.append(row)
        return rows


def _fact_row(f: _Fact) -> sql.FactRow:
    values = f.model_dump(exclude={"revisions"})
    if values["invalid_at"] is not None and values["invalidate_time"] is None:
        values["invalidate_time"] = values["invalid_at"]  # written before invalidate_time existed
    return sql.FactRow(**values)


async def _write(
    conn: Any, doc: _Document, rows: list[dict[str, Any]], *, replace: bool, now: float
) -> dict[str, int]:
    """The document's rows, but those the store has (unless ``replace``)."""
    user = {"app_name": doc.app_name, "user_id": doc.user_id}
    counts = {"memories": 0, "facts": 0, "fact_revisions": 0, "skipped": 0}
    ids = [m.id for m in doc.memories] + [f.id for f in doc.facts]
    existing = await memory_sql.existing_memory_ids(conn, **user, ids=ids)
    stored = await sql.list_facts(
        conn, app_name=doc.app_name, user_id=doc.user_id, now=now, history=True
    )
    stored_facts = {f.id for f in stored}
    if replace:  # the facts go, and their memories (one not current has none)
        await sql.delete_facts(conn, **user, ids=[f.id for f in doc.facts if f.id in stored_facts])
        await memory_sql.delete_memories(conn, **user, memory_ids=[f.id for f in doc.facts])
        stored_facts, existing = set(), set()
    fresh = {m.id for m in doc.memories if m.id not in existing}
    fresh |= {f.id for f in doc.facts if f.id not in stored_facts and f.id not in existing}
    for f in doc.facts:
        if f.id not in fresh:
            continue
        await sql.write_fact(conn, **user, fact=_fact_row(f), new=True)
        revisions = [sql.Revision(f.id, **r.model_dump()) for r in f.revisions]
        await sql.insert_revisions(conn, **user, revisions=revisions)
        counts["facts"] += 1
        counts["fact_revisions"] += len(revisions)
    await memory_sql.upsert_memories(conn, [r for r in rows if r["id"] in fresh])
    counts["memories"] = len([m for m in doc.memories if m.id in fresh])
    counts["skipped"] = len(ids) - len(fresh)
    for source in doc.generation:
        if not replace and await runs.read_source(conn, **user, session_id=source.session_id):
            continue
        session = await load_session(conn, **user, session_id=source.session_id)
        incarnation = None if session is None else session.incarnation
        record = runs.Source(source.event_count, source.attempts, source.error, incarnation)
        await runs.write_source(
            conn, **user, session_id=source.session_id, source=record, now=source.update_time
        )
    return counts
