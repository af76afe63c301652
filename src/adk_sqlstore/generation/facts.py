"""Facts as the public API returns them: a fact, its revisions."""

from __future__ import annotations

from dataclasses import dataclass

from ..memory.rows import iso_time
from ..sql.facts import FactRow, Revision

__all__ = ["Fact", "FactRevision", "fact_of", "revision_of"]


def _iso(seconds: float | None) -> str | None:
    return None if seconds is None else iso_time(seconds)


@dataclass(frozen=True)
class Fact:
    """A fact about a user (times ISO 8601, UTC).

    Attributes:
        id: the fact's id, also its memory's id (``fact-...``).
        text: what it says.
        topics: the topics it is filed under.
        valid_from: when it became true.
        invalid_at: when it stopped being true: the ``valid_from`` of the fact that
            contradicted it (``None`` while current). Graphiti's ``invalid_at``.
        invalidate_time: when the store learned that (``None`` while current).
            Graphiti's ``expired_at``.
        invalidated_by: the id of the fact that contradicted it, if any.
        expire_time: when its time to live ends (``None``: never).
        session_id, event_ids: the session and events its text comes from (its last
            ``create`` or ``update``; an invalidation does not change them).
        revision_count: its revisions so far (1 after it was created).
        create_time, update_time: when it was first stored and last changed.
    """

    id: str
    text: str
    topics: tuple[str, ...]
    valid_from: str | None
    invalid_at: str | None
    expire_time: str | None
    session_id: str | None
    event_ids: tuple[str, ...]
    revision_count: int
    create_time: str
    update_time: str
    invalidate_time: str | None = None
    invalidated_by: str | None = None

    @property
    def current(self) -> bool:
        """Whether no fact contradicted it."""
        return self.invalid_at is None and self.invalidate_time is None


@dataclass(frozen=True)
class FactRevision:
    """One change of a fact: ``action`` ``create``, ``update``, ``invalidate``,
    or ``restore`` (the fact that invalidated it was deleted);
    the text before and after (``None`` where there is none); the session and events
    it comes from; the model that made it (``None``: the store itself; an operator's
    correction, ``SqlMemoryService.correct_fact``, is an ``update`` recorded as model
    ``"operator:NAME"``, with no session nor events); when the store
    made it (``create_time``, ISO 8601, UTC); and of an invalidation, when the fact
    stopped being true (``invalid_at``) and the fact that contradicted it
    (``by_fact_id``)."""

    revision: int
    action: str
    old_text: str | None
    new_text: str | None
    session_id: str | None
    event_ids: tuple[str, ...]
    model: str | None
    create_time: str
    invalid_at: str | None = None
    by_fact_id: str | None = None


def fact_of(row: FactRow) -> Fact:
    """The public form of a stored fact."""
    return Fact(
        id=row.id,
        text=row.text,
        topics=tuple(row.topics),
        valid_from=_iso(row.valid_from),
        invalid_at=_iso(row.invalid_at),
        expire_time=_iso(row.expire_at),
        session_id=row.session_id,
        event_ids=tuple(row.event_ids),
        revision_count=row.revision_count,
        create_time=iso_time(row.create_time),
        update_time=iso_time(row.update_time),
        invalidate_time=_iso(row.invalidate_time),
        invalidated_by=row.invalidated_by,
    )


def revision_of(row: Revision) -> FactRevision:
    """The public form of a stored revision."""
    return FactRevision(
        revision=row.revision,
        action=row.action,
        old_text=row.old_text,
        new_text=row.new_text,
        session_id=row.session_id,
        event_ids=tuple(row.event_ids),
        model=row.model,
        create_time=iso_time(row.create_time),
        invalid_at=_iso(row.invalid_at),
        by_fact_id=row.by_fact_id,
    )
