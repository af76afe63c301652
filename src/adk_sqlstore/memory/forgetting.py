"""Deleting memories (a mixin of ``SqlMemoryService``): by session, by id, a user's
all, and forgetting a user. Facts (:mod:`adk_sqlstore.generation`) go with their
memories."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence

from .. import telemetry
from ..errors import InvalidArgumentError
from ..generation.writing import fact_memory, revert_invalidations
from ..sessions.retention import forget_user
from ..sql import facts as facts_sql
from ..sql import memory as sql
from ..sql.users import lock_user
from ..store import Store, retry_conflicts, write_completes
from ..validation import check_identifier
from .hybrid import HybridMemory
from .rows import MemoryRows
from .vectors import Prepared

__all__ = ["MemoryForgetting"]


class MemoryForgetting:
    """``delete_memories`` and ``forget_user`` of a memory service."""

    _store: Store
    _rows: MemoryRows
    _hybrid: HybridMemory | None

    @telemetry.traced("delete_memories", rows=telemetry.counted)
    @write_completes
    async def delete_memories(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str | None = None,
        memory_ids: Sequence[str] | None = None,
    ) -> int:
        """Delete one user's memories: those of ``session_id``, those with the given
        ids, both filters combined, or all of them when neither is given. Facts
        (memories of ``custom_metadata["kind"] == "fact"``) go with their revisions: by
        their ids, or as the facts whose text comes from ``session_id`` (with the
        session's generation record, so that a later run generates them again).

        Deleting facts undoes the invalidations they caused (and, with
        ``session_id``, those the session's generation made): a fact they
        contradicted is current again (a ``restore`` revision; its memory, and its
        vector with an embedder, made again), or, when the deleted fact had itself
        been contradicted by a fact that stays, is invalidated by that one instead.

        Returns:
            How many memories were deleted.

        Raises:
            InvalidArgumentError: ``memory_ids`` is not a list of ids.
            ConcurrencyConflictError: it kept losing races with another application's
                transactions (run again 10 times); nothing was written.
        """
        check_identifier("app_name", app_name)
        check_identifier("user_id", user_id)
        if session_id is not None:
            check_identifier("session_id", session_id)
        ids: list[str] | None = None
        if memory_ids is not None:
            if isinstance(memory_ids, str | bytes) or not isinstance(memory_ids, Iterable):
                raise InvalidArgumentError(
                    f"memory_ids must be a list of memory ids, not {memory_ids!r:.60}"
                )
            ids = [check_identifier("memory id", mid) for mid in memory_ids]
        return await self._delete(app_name, user_id, session_id, ids)

    async def _delete(
        self, app_name: str, user_id: str, session_id: str | None, ids: list[str] | None
    ) -> int:
        """:meth:`delete_memories`, its arguments checked."""
        user = {"app_name": app_name, "user_id": user_id}
        revert = ids is not None or session_id is not None
        prepared = await self._restored_vectors(user, ids, session_id) if revert else None

        async def delete() -> int:
            async with self._store.transaction(write=True) as conn:
                await lock_user(conn, app_name=app_name, user_id=user_id, mode="exclusive")
                deleted = await sql.delete_memories(
                    conn, **user, session_id=session_id, memory_ids=ids
                )
                if revert:
                    gone = await facts_sql.facts_to_delete(
                        conn, **user, ids=ids, session_id=session_id
                    )
                    await revert_invalidations(
                        conn, self._rows, **user, gone=gone, session_id=session_id,
                        now=time.time(),
                    )  # fmt: skip
                facts = await facts_sql.delete_facts(conn, **user, ids=ids, session_id=session_id)
                if session_id is not None and facts:  # their memories have no session
                    deleted += await sql.delete_memories(conn, **user, memory_ids=facts)
                if self._hybrid is not None and prepared is not None:
                    await self._hybrid.write(conn, prepared, app_name, user_id)
                return deleted

        return await retry_conflicts(delete)

    async def _restored_vectors(
        self, user: dict[str, str], ids: list[str] | None, session_id: str | None
    ) -> Prepared | None:
        """With an embedder, the vectors of the facts a deletion would make current
        again, embedded before its transaction (a fact restored that was not foreseen
        here gets its vector from ``adk-sqlstore memory embed``)."""
        if self._hybrid is None:
            return None
        now = time.time()
        async with self._store.transaction(write=False) as conn:
            gone = await facts_sql.facts_to_delete(conn, **user, ids=ids, session_id=session_id)
            affected = await facts_sql.invalidated_by_any(
                conn, **user, ids=gone, session_id=session_id
            )
        rows = [
            row
            for fact in affected
            if fact.id not in gone
            and (row := fact_memory(self._rows, user["app_name"], user["user_id"], fact, now))
            is not None
        ]
        return await self._hybrid.prepare(rows)

    @telemetry.traced("forget_user", rows=telemetry.counted)
    @write_completes
    async def forget_user(self, *, app_name: str, user_id: str) -> dict[str, int]:
        """Delete everything stored for one user of one app; see
        :meth:`adk_sqlstore.SqlSessionService.forget_user`."""
        return await forget_user(self._store, app_name=app_name, user_id=user_id)
