"""A model's answers, parsed and checked: only what the store showed can be named.

A reply that is not JSON of the asked shape is a :class:`GenerationError`; inside a
valid reply, items that name events or facts not shown, topics not configured, or
that go past the caps are dropped (counted in :class:`Dropped`, logged by the
generator without their text).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from ..errors import GenerationError

__all__ = [
    "MAX_FACT_CHARS",
    "Decision",
    "Dropped",
    "Extracted",
    "parse_decisions",
    "parse_facts",
]

MAX_FACT_CHARS = 1000
"""Characters of a fact's text kept (a longer one is cut)."""

_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.S)


class _Fact(BaseModel):
    model_config = ConfigDict(extra="ignore")
    text: str
    topics: list[str] = []
    valid_from: str | None = None
    event_ids: list[str] = []


class _Facts(BaseModel):
    model_config = ConfigDict(extra="ignore")
    facts: list[Any]


class _Decision(BaseModel):
    model_config = ConfigDict(extra="ignore")
    fact: str | None = None
    action: Literal["create", "update", "none", "invalidate"]
    target: str | None = None
    text: str | None = None


class _Decisions(BaseModel):
    model_config = ConfigDict(extra="ignore")
    decisions: list[Any]


@dataclass
class Dropped:
    """What was dropped from a reply, by reason (counts only, never text)."""

    reasons: Counter[str] = field(default_factory=Counter)

    def add(self, reason: str) -> None:
        self.reasons[reason] += 1

    def __bool__(self) -> bool:
        return bool(self.reasons)


@dataclass(frozen=True)
class Extracted:
    """A fact the model extracted: its text, topics, when it became true (seconds,
    UTC) and the aliases of the events it comes from (all shown)."""

    text: str
    topics: tuple[str, ...]
    valid_from: float
    events: tuple[str, ...]


@dataclass(frozen=True)
class Decision:
    """What to do with a new fact (``fact``: its alias) or a stored one (``target``)."""

    action: Literal["create", "update", "none", "invalidate"]
    fact: str | None
    target: str | None
    text: str | None


def _json(text: str, model: str, purpose: str) -> Any:
    fenced = _FENCE.match(text)
    try:
        return json.loads(fenced.group(1) if fenced else text)
    except (ValueError, TypeError) as exc:
        raise GenerationError(
            f"model {model!r} answered the {purpose} with something that is not JSON"
            f" ({len(text)} characters)"
        ) from exc


def _time(value: str | None, default: float) -> float:
    if not value:
        return default
    try:
        when = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        try:
            day = date.fromisoformat(value.strip()[:10])
        except ValueError:
            return default
        when = datetime(day.year, day.month, day.day, tzinfo=UTC)
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()


def parse_facts(
    text: str,
    *,
    model: str,
    events: Mapping[str, float],
    topics: Sequence[str],
    limit: int,
    dropped: Dropped,
) -> list[Extracted]:
    """The facts of an extraction reply. ``events``: the shown events' aliases and
    times (seconds, UTC); a fact naming none of them is dropped, and so is one under
    none of ``topics``; past ``limit`` facts the rest are dropped.

    Raises:
        GenerationError: the reply is not JSON of the shape ``{"facts": [...]}``.
    """
    try:
        items = _Facts.model_validate(_json(text, model, "extraction")).facts
    except ValidationError as exc:
        raise GenerationError(f"model {model!r}: the extraction is not {{'facts': [...]}}") from exc
    found: list[Extracted] = []
    for item in items:
        try:
            fact = _Fact.model_validate(item)
        except ValidationError:
            dropped.add("not a fact")
            continue
        shown = tuple(dict.fromkeys(e for e in fact.event_ids if e in events))
        kept = tuple(dict.fromkeys(t for t in fact.topics if t in topics))
        if not fact.text.strip():
            dropped.add("empty")
        elif not shown:
            dropped.add("names no event shown")
        elif not kept:
            dropped.add("under no configured topic")
        elif len(found) >= limit:
            dropped.add("past the limit of facts")
        else:
            when = _time(fact.valid_from, max(events[e] for e in shown))
            found.append(Extracted(fact.text.strip()[:MAX_FACT_CHARS], kept, when, shown))
    return found


def parse_decisions(
    text: str, *, model: str, new: Sequence[str], stored: Sequence[str], dropped: Dropped
) -> list[Decision]:
    """The decisions of a consolidation reply, only those naming shown aliases (new
    facts ``new``, stored facts ``stored``), at most one per new fact (the first) and
    one invalidation per stored fact.

    Raises:
        GenerationError: the reply is not JSON of the shape ``{"decisions": [...]}``.
    """
    try:
        items = _Decisions.model_validate(_json(text, model, "consolidation")).decisions
    except ValidationError as exc:
        raise GenerationError(
            f"model {model!r}: the consolidation is not {{'decisions': [...]}}"
        ) from exc
    decided: set[str] = set()
    invalidated: set[str] = set()
    found: list[Decision] = []
    for item in items:
        try:
            d = _Decision.model_validate(item)
        except ValidationError:
            dropped.add("not a decision")
            continue
        if d.action == "invalidate":
            if d.target is None or d.target not in stored or d.target in invalidated:
                dropped.add("invalidates no stored fact shown")
                continue
            invalidated.add(d.target)
            found.append(Decision("invalidate", d.fact if d.fact in new else None, d.target, None))
            continue
        if d.fact is None or d.fact not in new or d.fact in decided:
            dropped.add("decides on no new fact shown")
            continue
        if d.action == "update" and (d.target not in stored or not (d.text or "").strip()):
            dropped.add("updates no stored fact shown")
            continue
        decided.add(d.fact)
        target = d.target if d.target in stored else None
        text_ = (d.text or "").strip()[:MAX_FACT_CHARS] or None
        found.append(Decision(d.action, d.fact, target, text_))
    return found
