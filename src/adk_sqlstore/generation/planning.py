"""A run's plan: the new facts (equal ones merged), the stored facts they repeat, the
model's decisions, and the changes they come to, before anything is written
(:mod:`.writing`).

Rules the plan keeps, whatever the model answers:

- facts equal after :func:`~adk_sqlstore.search.text.normal_form` are one fact: within
  one reply they are merged (topics and evidence joined, the earliest ``valid_from``);
  one equal to a current stored fact is that fact (unchanged; its evidence joined when
  both come from the same session), without asking the model;
- a stored fact is updated by at most one new fact, and one invalidated is not
  updated;
- an invalidation is bi-temporal, as Graphiti's edges are: the stored fact stopped
  being true when the contradicting fact became true (its ``valid_from``), and the
  store learned it now. A new fact that became true before the stored fact it
  contradicts (a backfilled old conversation) does not invalidate it: it is stored as
  already superseded by it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from ..search.text import text_hash
from ..sql import facts as sql
from .replies import Decision, Extracted

__all__ = ["Change", "Plan", "merge_equal", "plan_changes"]


def merge_equal(
    facts: list[Extracted], metadata: list[dict[str, Any] | None] | None = None
) -> tuple[list[Extracted], list[dict[str, Any] | None]]:
    """``facts`` with those equal after normalisation merged into the first of them
    (topics and evidence joined in order, the earliest ``valid_from``), and their
    ``metadata`` (one per fact, merged the same way: the first's keys win)."""
    given = metadata if metadata is not None else [None] * len(facts)
    merged: dict[str, tuple[Extracted, dict[str, Any] | None]] = {}
    for fact, extra in zip(facts, given, strict=True):
        key = text_hash(fact.text)
        if key not in merged:
            merged[key] = (fact, extra)
            continue
        first, first_extra = merged[key]
        joined = replace(
            first,
            topics=tuple(dict.fromkeys([*first.topics, *fact.topics])),
            valid_from=min(first.valid_from, fact.valid_from),
            events=tuple(dict.fromkeys([*first.events, *fact.events])),
        )
        extras = None
        if first_extra is not None or extra is not None:
            extras = {**(extra or {}), **(first_extra or {})}
        merged[key] = (joined, extras)
    return [f for f, _ in merged.values()], [m for _, m in merged.values()]


@dataclass
class Change:
    """What happens to a new fact (``N1``, ...): ``create``, ``update`` (of
    ``target``), ``same`` (``target`` already says it), ``superseded`` (created
    already invalidated by the newer ``target``)."""

    action: str
    target: sql.FactRow | None = None
    text: str | None = None


@dataclass
class Plan:
    """A run's new facts (``N1``... in order, equal ones merged) with their
    ``metadata``, the events (alias -> id) and stored facts (alias -> row) shown,
    the stored facts equal to new ones (alias -> row), the model's decisions, and
    what they come to: a :class:`Change` per new fact, and the stored facts
    invalidated with the new fact that contradicted each (alias, or ``None``)."""

    facts: list[Extracted]
    events: dict[str, str]
    metadata: list[dict[str, Any] | None] = field(default_factory=list)
    stored: dict[str, sql.FactRow] = field(default_factory=dict)
    same: dict[str, sql.FactRow] = field(default_factory=dict)
    decisions: list[Decision] = field(default_factory=list)
    changes: dict[str, Change] = field(default_factory=dict)
    invalidations: list[tuple[sql.FactRow, str | None]] = field(default_factory=list)
    model: str = ""
    when: float = 0.0  # the run's latest event time: an invalidation by no fact's time
    current: dict[str, sql.FactRow] = field(default_factory=dict)  # by hash: of updates' texts

    def __post_init__(self) -> None:
        if not self.metadata:
            self.metadata = [None] * len(self.facts)

    @property
    def new(self) -> dict[str, Extracted]:
        """The new facts by alias."""
        return {f"N{n}": fact for n, fact in enumerate(self.facts, 1)}

    def unseen(self) -> list[tuple[str, Extracted]]:
        """The new facts (alias, fact) no stored fact is equal to: those the model
        decides on."""
        return [(a, f) for a, f in self.new.items() if a not in self.same]

    def count(self, action: str) -> int:
        return sum(1 for c in self.changes.values() if c.action == action)


def plan_changes(plan: Plan, *, model: str) -> None:
    """Resolve the decisions into ``plan.changes`` and ``plan.invalidations``: each new
    fact is created unless decided otherwise or equal to a stored fact; a stored fact
    is updated by at most one new fact, and one that is invalidated is not updated;
    an invalidation by a new fact that predates the stored fact is turned around
    (the new fact is stored as superseded)."""
    plan.model = model
    new = plan.new
    invalidated: dict[str, str | None] = {}
    for x in plan.decisions:
        if x.action == "invalidate" and x.target in plan.stored:
            invalidated[x.target] = x.fact if x.fact in new else None
    decided = {x.fact: x for x in plan.decisions if x.action != "invalidate"}
    updated: set[str] = set()
    for alias in new:
        if alias in plan.same:
            plan.changes[alias] = Change("same", plan.same[alias])
            continue
        d: Decision | None = decided.get(alias)
        if d is None or d.action == "create":
            plan.changes[alias] = Change("create")
        elif d.action == "update" and d.target not in invalidated and d.target not in updated:
            assert d.target is not None and d.text is not None
            updated.add(d.target)
            plan.changes[alias] = Change("update", plan.stored[d.target], d.text)
        elif d.action == "update":  # of a fact invalidated: it replaces that fact
            plan.changes[alias] = Change("create")
        else:
            plan.changes[alias] = Change("same", plan.stored.get(d.target or ""))
    _no_equal_facts(plan)
    for alias, by in invalidated.items():
        old = plan.stored[alias]
        since = new[by].valid_from if by is not None else plan.when
        if since >= old.since:
            plan.invalidations.append((old, by))
        elif by is not None and plan.changes[by].action == "create":
            plan.changes[by] = Change("superseded", old)


def _no_equal_facts(plan: Plan) -> None:
    """Changes that would leave two current facts equal after normalisation become
    ``same``: an update whose text is another current fact's (that fact says it), a
    second update to the same text, a new fact whose text an update gives."""
    known = {text_hash(f.text): f for f in [*plan.stored.values(), *plan.current.values()]}
    for alias, change in plan.changes.items():
        if change.action != "update":
            continue
        assert change.target is not None and change.text is not None
        key = text_hash(change.text)
        equal = known.get(key)
        if equal is not None and equal.id != change.target.id:
            plan.changes[alias] = Change("same", equal)
        else:
            known[key] = change.target
    for alias, change in plan.changes.items():
        if change.action == "create" and (equal := known.get(text_hash(plan.new[alias].text))):
            plan.changes[alias] = Change("same", equal)
