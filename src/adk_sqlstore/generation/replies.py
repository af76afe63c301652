"""A model's answers, read tolerantly and checked: only what the store showed can be
named.

Reading: a reply's answer is the first JSON object of the asked shape
(``{"facts": [...]}`` for an extraction, ``{"decisions": [...]}`` for a
consolidation) wherever it stands in the reply: after a sentence, inside a Markdown
fence (```` ```json ````, any case, with or without a language), before an
explanation, nested in another object. A reasoning model's ``<think>...</think>``
(or ``<thinking>``) blocks at the start of the reply are skipped, whatever they hold
(JSON too), and so is the text before a ``</think>`` whose ``<think>`` was in the
prompt's template (DeepSeek-R1's), unless an answer is written across that
``</think>``: it is then data (a fact about the tag). Keys are read whatever their
case and separators (``Facts``, ``Valid_From``, ``validFrom``, ``EVENT_IDS``), and
so are actions (``"CREATE"``), aliases (``e3``) and topics (``user_preferences``,
when that names one topic only). A bare list (``[{"text": ...}]``) is not the asked
shape and is refused: the instructions ask for the object, and a list's items could
be anything.

A reply holding no such object (nothing but prose, a reply cut off mid-JSON, a
reasoning block never closed) is a :class:`GenerationError` naming the model, the
purpose and the reply's length, never its text (it may echo the conversation).
Inside an answer, items that name events or facts not shown, topics not configured,
or that go past the caps are dropped (counted in :class:`Dropped`, logged by the
generator without their text). Every string taken from a reply is passed through
:func:`clean_model_text`.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any, Literal

from ..errors import GenerationError
from ..search.text import valid_unicode

__all__ = [
    "MAX_FACT_CHARS",
    "Decision",
    "Dropped",
    "Extracted",
    "clean_model_text",
    "parse_decisions",
    "parse_facts",
    "parse_time",
]

MAX_FACT_CHARS = 1000
"""Characters of a fact's text kept (a longer one is cut)."""

Action = Literal["create", "update", "none", "invalidate"]
_ACTIONS: tuple[Action, ...] = ("create", "update", "none", "invalidate")

_DECODER = json.JSONDecoder(strict=False)  # raw newlines and tabs inside strings are read
_OPEN = re.compile(r"<(think|thinking)>", re.I)
_CLOSE = re.compile(r"</(think|thinking)>", re.I)
_LEADING = re.compile(r"[\s\ufeff]*<(think|thinking)>", re.I)
_NOT_ALNUM = re.compile(r"[^0-9a-z]")
_OBJECT = re.compile(r"\{\s*[\"}]")  # where a JSON object may start: '{', then '"' or '}'
_MAX_FAILED = 1000
"""Places a JSON object may start that are tried, at most, before a reply is given up
on (each failure costs a scan of the text before it)."""


def clean_model_text(text: str) -> str:
    """``text`` (a string from a model's reply) as every backend can store it: NUL
    characters removed, lone surrogates (``"\\ud83d"`` in JSON becomes one) replaced by
    U+FFFD."""
    return valid_unicode(text.replace("\x00", ""))


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

    action: Action
    fact: str | None
    target: str | None
    text: str | None


# -- finding the answer in a reply --------------------------------------------------


def _key(name: object) -> str:
    """A key as compared: lower case, letters and digits only (``Valid_From``,
    ``validFrom`` and ``VALID-FROM`` are ``validfrom``)."""
    return _NOT_ALNUM.sub("", name.lower()) if isinstance(name, str) else ""


def _keyed(obj: Mapping[Any, Any]) -> dict[str, Any]:
    """``obj``'s items under their compared keys (the first of two that compare equal)."""
    keyed: dict[str, Any] = {}
    for name, value in obj.items():
        keyed.setdefault(_key(name), value)
    return keyed


def _answer(text: str, model: str, purpose: str) -> tuple[str, int | None]:
    """The part of ``text`` holding the answer: after its leading reasoning blocks, or
    after a ``</think>`` opened in the prompt's template; and where that ``</think>``
    stands in ``text`` (``None`` without one), should it be data in the answer."""
    rest = text
    while opened := _LEADING.match(rest):
        closed = _CLOSE.search(rest, opened.end())
        if closed is None:
            raise GenerationError(
                f"model {model!r} answered the {purpose} with a reasoning block (<think>)"
                f" never closed and no answer after it ({len(text)} characters: was the"
                " model's output limit reached?)"
            )
        rest = rest[closed.end() :]
    if rest is not text:
        return rest, None
    closed = _CLOSE.search(text)
    if closed is not None and _OPEN.search(text, 0, closed.start()) is None:
        return text[closed.end() :], closed.start()
    return text, None


def _walk(value: Any, key: str) -> list[Any] | None:
    """The list under ``key`` of the first object in ``value`` (itself, then what it
    holds, in the order written) having one."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            found = _keyed(item).get(key)
            if isinstance(found, list):
                return found
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, list):
            stack.extend(reversed(item))
    return None


def _find(text: str, key: str, spanning: int | None = None) -> tuple[list[Any] | None, bool]:
    """The list of the first JSON object in ``text`` having ``key`` (compared as
    :func:`_key` does), only among the objects written across position ``spanning``
    if given; and whether a JSON object ran to the end of ``text`` unfinished (a reply
    cut off). At most :data:`_MAX_FAILED` objects that do not decode are tried, and
    none past one nested deeper than the decoder goes: bounded work on any reply."""
    cut = False
    end = len(text.rstrip())
    failed = 0
    start = _OBJECT.search(text)
    while start is not None and failed < _MAX_FAILED:
        at = start.start()
        try:
            value, after = _DECODER.raw_decode(text, at)
        except json.JSONDecodeError as exc:
            cut = cut or exc.pos >= end or exc.msg.startswith("Unterminated string")
            failed += 1
            start = _OBJECT.search(text, at + 1)
            continue
        except RecursionError:  # nested deeper than any answer: a reply not to read
            break
        if spanning is None or at < spanning < after:
            found = _walk(value, key)
            if found is not None:
                return found, cut
        start = _OBJECT.search(text, after)
    return None, cut


def _items(text: str, model: str, purpose: str, key: str) -> list[Any]:
    """The list under ``key`` of a reply's answer (see the module docstring).

    Raises:
        GenerationError: there is none; the message says why, never the reply's text.
    """
    if not isinstance(text, str):
        raise GenerationError(f"model {model!r} answered the {purpose} with no text")
    answer, close = _answer(text, model, purpose)
    found, cut = _find(answer, key)
    if found is None and close is not None:  # "</think>" in the answer's text?
        found, _ = _find(text, key, spanning=close)
    if found is not None:
        return found
    if cut:
        raise GenerationError(
            f"model {model!r} answered the {purpose} with JSON cut off before its end"
            f" ({len(text)} characters: was the model's output limit reached?)"
        )
    if "{" not in text:
        raise GenerationError(
            f"model {model!r} answered the {purpose} with something that is not JSON"
            f" ({len(text)} characters)"
        )
    raise GenerationError(
        f"model {model!r}: the {purpose} is not {{'{key}': [...]}}: no JSON object in its"
        f" {len(text)} characters has a {key!r} list"
    )


# -- values ---------------------------------------------------------------------------


def _string(value: Any) -> str | None:
    return clean_model_text(value) if isinstance(value, str) else None


def _strings(value: Any) -> list[str]:
    """A list of strings (a single string is a list of one); other items ignored."""
    values = [value] if isinstance(value, str) else value if isinstance(value, list) else []
    return [clean_model_text(v) for v in values if isinstance(v, str)]


def _matcher(names: Sequence[str]) -> Callable[[str], str | None]:
    """Maps a name the model gave to one of ``names``: the same, else the only one
    equal to it compared as keys are (``user_preferences``, ``e3``)."""
    exact = set(names)
    loose: dict[str, str | None] = {}
    for name in names:
        loose[_key(name)] = None if _key(name) in loose else name
    return lambda given: given if given in exact else loose.get(_key(given))


_MONTHS = {
    name: n
    for n, names in enumerate(
        (
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ),
        1,
    )
    for name in names
}
_WEEKDAY = r"(?:(?:mon|tues?|wed(?:nes)?|thu(?:rs)?|fri|sat(?:ur)?|sun)(?:day)?\.?,?\s+)?"
_DAY = r"(?P<day>\d{1,2})(?:st|nd|rd|th)?"
_MONTH = r"(?P<month>[a-z]+)\.?"
_NAMED = [
    re.compile(rf"^{_WEEKDAY}{_DAY}\s+(?:of\s+)?{_MONTH},?\s+(?P<year>\d{{4}})$", re.I),
    re.compile(rf"^{_WEEKDAY}{_MONTH}\s+{_DAY},?\s+(?P<year>\d{{4}})$", re.I),
]
_YEAR_FIRST = re.compile(
    r"^(?P<year>\d{4})[/.](?P<month>\d{1,2})[/.](?P<day>\d{1,2})"
    r"(?:[ T](?P<hour>\d{1,2}):(?P<minute>\d{2})(?::(?P<second>\d{2}))?)?$"
)
_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}")


def _utc(when: datetime) -> float:
    return (when if when.tzinfo is not None else when.replace(tzinfo=UTC)).timestamp()


def _named(value: str) -> datetime | None:
    for pattern in _NAMED:
        if found := pattern.match(value):
            month = _MONTHS.get(found["month"].lower())
            if month is not None:
                return datetime(int(found["year"]), month, int(found["day"]))  # noqa: DTZ001
    return None


def _parsed(value: str) -> datetime | None:
    """``value`` read by :func:`parse_time`'s rules (no zone: naive), or ``None``."""
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        pass
    try:
        if year_first := _YEAR_FIRST.match(value):
            year, month, day, hour, minute, second = (int(p or 0) for p in year_first.groups())
            return datetime(year, month, day, hour, minute, second)  # noqa: DTZ001
        if _ISO_DATE.match(value):  # an ISO date followed by something else
            start = date.fromisoformat(value[:10])
            return datetime(start.year, start.month, start.day)  # noqa: DTZ001
        return _named(value)
    except ValueError:  # a day or month out of range
        return None


def parse_time(value: Any) -> float | None:
    """When a fact became true, as a model gave it, in seconds since the epoch (UTC), or
    ``None`` when it is none of these:

    - ISO 8601 as Python reads it: ``2026-09-28``, ``2026-09-28T14:00``,
      ``2026-09-28T14:00:00Z``, ``2026-09-28T14:00:00+02:00``, ``2026-09-28 14:00``,
      ``20260928``, or an ISO date followed by other text (``2026-09-28 (Monday)``:
      that day);
    - year first with ``/`` or ``.``: ``2026/09/28``, ``2026.09.28``, optionally with
      ``HH:MM`` or ``HH:MM:SS``;
    - English month names, full or short, day before or after the month, with an
      optional weekday and ordinal: ``28 September 2026``, ``28th of Sep 2026``,
      ``September 28, 2026``, ``Sep 28 2026``, ``Monday, September 28th, 2026``;
    - a JSON number: seconds since the epoch.

    A time without a zone is UTC; one outside the years 1-9999 in UTC is not read.
    ``28.09.2026``, ``09/28/2026`` and ``28/09/2026`` are
    not read: which number is the day depends on the writer's country.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        try:
            seconds = float(value)
        except OverflowError:  # an int past floats
            return None
    elif isinstance(value, str):
        when = _parsed(" ".join(value.split()))
        try:
            seconds = _utc(when) if when is not None else math.nan
        except (OverflowError, OSError, ValueError):
            return None
    else:
        return None
    try:  # within the years 1-9999 in UTC, as the store keeps times?
        datetime.fromtimestamp(seconds, UTC)
    except (OverflowError, OSError, ValueError):  # inf, nan, out of range
        return None
    return seconds if math.isfinite(seconds) and _MIN_TIME <= seconds <= _MAX_TIME else None


_MIN_TIME = datetime(1, 1, 2, tzinfo=UTC).timestamp()
_MAX_TIME = datetime(9999, 12, 30, tzinfo=UTC).timestamp()


# -- the two replies ------------------------------------------------------------------

_FACT_KEYS = {
    "text": "text",
    "topics": "topics",
    "validfrom": "valid_from",
    "eventids": "event_ids",
}
_DECISION_KEYS = {"fact": "fact", "action": "action", "target": "target", "text": "text"}


def _fields(item: Any, names: Mapping[str, str]) -> dict[str, Any] | None:
    """An item's fields under their names (keys compared as :func:`_key` does), or
    ``None`` when it is not an object."""
    if not isinstance(item, dict):
        return None
    keyed = _keyed(item)
    return {name: keyed.get(k) for k, name in names.items()}


def parse_facts(
    text: str,
    *,
    model: str,
    events: Mapping[str, float],
    topics: Sequence[str],
    limit: int,
    dropped: Dropped,
) -> list[Extracted]:
    """The facts of an extraction reply: the first ``{"facts": [...]}`` in it (see the
    module docstring for what is read). ``events``: the shown events' aliases and
    times (seconds, UTC); a fact naming none of them is dropped, and so is one under
    none of ``topics`` (matched exactly, else whatever the case and separators if
    that names one topic only); past ``limit`` facts the rest are dropped. A fact's
    ``valid_from`` is read by :func:`parse_time`; absent or not read, it is the time
    of the latest event the fact names.

    Raises:
        GenerationError: the reply holds no JSON object with a ``facts`` list (prose
            only, another shape, JSON cut off, a reasoning block never closed).
    """
    items = _items(text, model, "extraction", "facts")
    event_of = _matcher(list(events))
    topic_of = _matcher(list(topics))
    found: list[Extracted] = []
    for item in items:
        fields = _fields(item, _FACT_KEYS)
        said = _string(fields["text"]) if fields is not None else None
        if fields is None or said is None:
            dropped.add("not a fact")
            continue
        shown = tuple(dict.fromkeys(e for e in map(event_of, _strings(fields["event_ids"])) if e))
        kept = tuple(dict.fromkeys(t for t in map(topic_of, _strings(fields["topics"])) if t))
        if not said.strip():
            dropped.add("empty")
        elif not shown:
            dropped.add("names no event shown")
        elif not kept:
            dropped.add("under no configured topic")
        elif len(found) >= limit:
            dropped.add("past the limit of facts")
        else:
            when = parse_time(fields["valid_from"])
            if when is None:
                when = max(events[e] for e in shown)
            found.append(Extracted(said.strip()[:MAX_FACT_CHARS], kept, when, shown))
    return found


def parse_decisions(
    text: str, *, model: str, new: Sequence[str], stored: Sequence[str], dropped: Dropped
) -> list[Decision]:
    """The decisions of a consolidation reply: the first ``{"decisions": [...]}`` in
    it (see the module docstring for what is read), only those naming shown aliases
    (new facts ``new``, stored facts ``stored``), at most one per new fact (the first)
    and one invalidation per stored fact. An action is ``create``, ``update``,
    ``none`` or ``invalidate`` in any case.

    Raises:
        GenerationError: the reply holds no JSON object with a ``decisions`` list
            (prose only, another shape, JSON cut off, a reasoning block never closed).
    """
    items = _items(text, model, "consolidation", "decisions")
    new_of = _matcher(list(new))
    stored_of = _matcher(list(stored))
    decided: set[str] = set()
    invalidated: set[str] = set()
    found: list[Decision] = []
    for item in items:
        fields = _fields(item, _DECISION_KEYS)
        action = _key(fields["action"]) if fields is not None else ""
        if fields is None or action not in _ACTIONS:
            dropped.add("not a decision")
            continue
        fact = new_of(given) if (given := _string(fields["fact"])) is not None else None
        target = stored_of(given) if (given := _string(fields["target"])) is not None else None
        said = (_string(fields["text"]) or "").strip()[:MAX_FACT_CHARS] or None
        if action == "invalidate":
            if target is None or target in invalidated:
                dropped.add("invalidates no stored fact shown")
                continue
            invalidated.add(target)
            found.append(Decision("invalidate", fact, target, None))
            continue
        if fact is None or fact in decided:
            dropped.add("decides on no new fact shown")
            continue
        if action == "update" and (target is None or said is None):
            dropped.add("updates no stored fact shown")
            continue
        decided.add(fact)
        found.append(Decision(action, fact, target, said))
    return found
