"""An operator's correction of a generated fact (``SqlMemoryService.correct_fact``):
never a silent overwrite. In one transaction under the user lock (``"exclusive"``, as
a run's write, :func:`.writing.write_plan`), the fact's text is replaced, an
``update`` revision records the old and new text with ``model`` ``"operator:NAME"``,
and the fact's memory (same id) is rewritten, with its vector when the service has an
embedder (embedded before the transaction opens). No model is called.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from ..errors import InvalidArgumentError
from ..memory.rows import iso_time
from ..search.text import clean_text, text_hash
from ..sql import facts as sql
from ..sql import memory as memory_sql
from ..sql.users import lock_user
from ..store import retry_conflicts
from ..validation import check_argument
from .replies import MAX_FACT_CHARS
from .writing import Destination, fact_memory

__all__ = ["OPERATOR_PREFIX", "correct_fact", "corrected_text"]

OPERATOR_PREFIX = "operator:"
"""How a revision an operator made names its maker: ``model`` is ``"operator:NAME"``."""


def corrected_text(text: object) -> str:
    """``text`` as a fact's text: cleaned as a model's text is (no NUL, no lone
    surrogate: :func:`~adk_sqlstore.search.text.clean_text`), without leading or
    trailing whitespace.

    Raises:
        InvalidArgumentError: it is not a str, is empty or only whitespace, or is over
            :data:`~.replies.MAX_FACT_CHARS` characters.
    """
    check_argument("text", text, str, "a str")
    assert isinstance(text, str)
    cleaned = clean_text(text).strip()
    if not cleaned:
        raise InvalidArgumentError("a fact's text must not be empty or only whitespace")
    if len(cleaned) > MAX_FACT_CHARS:
        raise InvalidArgumentError(
            f"a fact's text is at most {MAX_FACT_CHARS:,} characters (MAX_FACT_CHARS);"
            f" this one is {len(cleaned):,}"
        )
    return cleaned


async def _target(
    conn: AsyncConnection, user: dict[str, str], fact_id: str, text: str, now: float
) -> sql.FactRow:
    """The user's current fact ``fact_id``, to be given ``text``.

    Raises:
        InvalidArgumentError: the user has no such fact, it is no longer current
            (invalidated or expired), or another current fact of the user says
            ``text`` (by :func:`~adk_sqlstore.search.text.text_hash`).
    """
    fact = (await sql.read_facts(conn, **user, ids=[fact_id])).get(fact_id)
    if fact is None:
        raise InvalidArgumentError(f"the user has no fact {fact_id!r:.80}")
    if not fact.current:
        by = f" by {fact.invalidated_by!r}" if fact.invalidated_by else ""
        raise InvalidArgumentError(
            f"fact {fact_id!r:.80} was invalidated{by}: only a current fact can be corrected"
        )
    if fact.expire_at is not None and fact.expire_at <= now:
        raise InvalidArgumentError(
            f"fact {fact_id!r:.80} expired at {iso_time(fact.expire_at)}:"
            " only a current fact can be corrected"
        )
    if fact.text != text:
        equal = await sql.equal_fact(
            conn, **user, text_hash=text_hash(text), other_than=fact_id, now=now
        )
        if equal is not None:
            raise InvalidArgumentError(
                f"fact {equal!r} already says that: correcting fact {fact_id!r:.80} to its"
                " text would make a duplicate"
            )
    return fact


def _corrected(
    to: Destination, user: dict[str, str], fact: sql.FactRow, text: str, now: float
) -> tuple[sql.FactRow, dict[str, Any]]:
    """``fact`` saying ``text`` (one revision more), and its memory row.

    Raises:
        InvalidArgumentError: the store's ingestion filter leaves nothing of ``text``.
    """
    new = replace(
        fact,
        text=text,
        text_hash=text_hash(text),
        revision_count=fact.revision_count + 1,
        update_time=now,
    )
    row = fact_memory(to.rows, user["app_name"], user["user_id"], new, now)
    if row is None:
        raise InvalidArgumentError("the store's ingestion filter leaves nothing of the text")
    return new, row


async def correct_fact(
    to: Destination, *, app_name: str, user_id: str, fact_id: str, text: str, operator: str
) -> sql.FactRow:
    """Give the user's current fact ``fact_id`` the text ``text`` (checked by
    :func:`corrected_text`), as ``SqlMemoryService.correct_fact`` says; the fact as
    stored afterwards (unchanged when it already says exactly that). The identifiers
    are the caller's to check.

    Raises:
        InvalidArgumentError: as :func:`corrected_text` and :func:`_target` say;
            nothing was written.
        ConcurrencyConflictError: it kept losing races; nothing was written.
    """
    new_text = corrected_text(text)
    user = {"app_name": app_name, "user_id": user_id}
    async with to.store.transaction(write=False) as conn:  # refuse before embedding
        fact = await _target(conn, user, fact_id, new_text, time.time())
    if fact.text == new_text:
        return fact
    prepared = None
    if to.hybrid is not None:  # the vector depends on the memory's text alone
        _, row = _corrected(to, user, fact, new_text, time.time())
        prepared = await to.hybrid.prepare([row])

    async def write() -> sql.FactRow:
        now = time.time()
        async with to.store.transaction(write=True) as conn:
            await lock_user(conn, app_name=app_name, user_id=user_id, mode="exclusive")
            stored = await _target(conn, user, fact_id, new_text, now)
            if stored.text == new_text:  # corrected so meanwhile
                return stored
            fact, row = _corrected(to, user, stored, new_text, now)
            revision = sql.Revision(
                fact.id, fact.revision_count, "update", stored.text, fact.text, None, [],
                OPERATOR_PREFIX + operator, now,
            )  # fmt: skip
            await sql.write_fact(conn, **user, fact=fact, new=False)
            await sql.insert_revisions(conn, **user, revisions=[revision])
            await memory_sql.upsert_memories(conn, [row])
            if to.hybrid is not None:
                await to.hybrid.write(conn, prepared, app_name, user_id)
        return fact

    return await retry_conflicts(write)
