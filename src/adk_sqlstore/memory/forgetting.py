"""Deleting memories (a mixin of ``SqlMemoryService``): by session, by id, a user's
all, and forgetting a user. Facts (:mod:`adk_sqlstore.generation`) go with their
memories."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from .. import telemetry
from ..errors import InvalidArgumentError
from ..sessions.retention import forget_user
from ..sql import facts as facts_sql
from ..sql import memory as sql
from ..sql.users import lock_user
from ..store import Store, retry_conflicts, write_completes
from ..validation import check_identifier

__all__ = ["MemoryForgetting"]


class MemoryForgetting:
    """``delete_memories`` and ``forget_user`` of a memory service."""

    _store: Store

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
        their ids, or as the facts last revised from ``session_id`` (with the
        session's generation record, so that a later run generates them again).

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
        user = {"app_name": app_name, "user_id": user_id}

        async def delete() -> int:
            async with self._store.transaction(write=True) as conn:
                await lock_user(conn, app_name=app_name, user_id=user_id, mode="exclusive")
                deleted = await sql.delete_memories(
                    conn, **user, session_id=session_id, memory_ids=ids
                )
                facts = await facts_sql.delete_facts(conn, **user, ids=ids, session_id=session_id)
                if session_id is not None and facts:  # their memories have no session
                    deleted += await sql.delete_memories(conn, **user, memory_ids=facts)
                return deleted

        return await retry_conflicts(delete)

    @telemetry.traced("forget_user", rows=telemetry.counted)
    @write_completes
    async def forget_user(self, *, app_name: str, user_id: str) -> dict[str, int]:
        """Delete everything stored for one user of one app; see
        :meth:`adk_sqlstore.SqlSessionService.forget_user`."""
        return await forget_user(self._store, app_name=app_name, user_id=user_id)
