"""Memories as rows: made from events (one memory per event that carries text) or from
entries (distilled facts), after the ingestion filter.

"filter it at ingestion rather than at retrieval" (design notes, 000): the filter
(payment card numbers masked by default, plus the application's own rules) runs on
the text and the author before anything reaches the memory table.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError

from ..errors import InvalidMemoryError
from ..models import Content, EventLike, Part
from ..search.analysis import DEFAULT_LANGUAGE, analyzer
from ..search.text import indexed_text, search_scope, text_of, valid_unicode
from ..validation import check_identifier, check_json_value, check_text_field, check_timestamp
from .redaction import Redactor, build_filter

__all__ = ["MemoryRows", "as_models", "check_metadata", "iso_time", "memory_id"]

_MEMORY_NAMESPACE = uuid.UUID("6f1c2d4e-8a9b-4c3d-9e2f-0a1b2c3d4e5f")


def memory_id(app_name: str, user_id: str, session_id: str | None, event_id: str) -> str:
    """The stable id of the memory made from one event (UUID5 of its address)."""
    return str(
        uuid.uuid5(
            _MEMORY_NAMESPACE, f"{app_name}\x00{user_id}\x00{session_id or ''}\x00{event_id}"
        )
    )


def iso_time(timestamp: float) -> str:
    """Seconds since the epoch as ISO 8601 in UTC (as a number outside the years
    1-9999)."""
    try:
        return datetime.fromtimestamp(timestamp, UTC).isoformat()
    except (OverflowError, OSError, ValueError):
        return str(timestamp)


def _epoch(value: str | None) -> float:
    """Seconds since the epoch from an ISO 8601 string (naive means UTC); now if None.

    Raises:
        InvalidMemoryError: it is not ISO 8601.
    """
    if not value:
        return time.time()
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except (ValueError, TypeError, AttributeError) as exc:
        raise InvalidMemoryError(f"memory timestamp {value!r} is not ISO 8601") from exc
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


def as_models(items: object, model: type[BaseModel], kind: str, plural: str) -> list[Any]:
    """``items`` as objects with ``model``'s attributes: ``model`` instances, objects of
    another class with the same fields (ADK's own), or dicts of them (validated).

    Raises:
        InvalidMemoryError: ``items`` is not a list, or naming the first item that is
            none of these.
    """
    if (
        isinstance(items, str | bytes | Mapping | BaseModel)
        or hasattr(items, "content")
        or not isinstance(items, Iterable)
    ):
        what = type(items).__name__ if items is not None else "None"
        raise InvalidMemoryError(f"{plural} must be a list of {plural}, not a {what}")
    adapter: TypeAdapter[Any] = TypeAdapter(model)
    converted = []
    for n, item in enumerate(items):
        if isinstance(item, Mapping):
            try:
                item = adapter.validate_python(item)
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(p) for p in first["loc"]) or kind
                raise InvalidMemoryError(
                    f"{kind} {n} is not a valid {model.__name__}: {where}: {first['msg']}"
                ) from None
        elif not hasattr(item, "content"):
            raise InvalidMemoryError(
                f"{kind} {n} is a {type(item).__name__}, not a {model.__name__} (or a dict of one)"
            )
        converted.append(item)
    return converted


def check_metadata(custom_metadata: object) -> None:
    """Raise :class:`InvalidMemoryError` unless ``custom_metadata`` is ``None`` or a
    mapping."""
    if custom_metadata is not None and not isinstance(custom_metadata, Mapping):
        raise InvalidMemoryError(
            f"custom_metadata must be a dict, not {type(custom_metadata).__name__}"
        )


class MemoryRows:
    """Builds memory rows through the ingestion filter.

    Args:
        redactors: extra rules after card masking: callables ``str -> str`` or regular
            expressions whose matches become ``[redacted]``.
        mask_card_numbers: mask Luhn-valid payment card numbers.
        language: the search language the rows are indexed for
            (:class:`~adk_sqlstore.search.analysis.Analyzer`).

    Raises:
        ConfigurationError: an unknown language.
    """

    def __init__(
        self,
        redactors: Iterable[Redactor] | None,
        *,
        mask_card_numbers: bool,
        language: str = DEFAULT_LANGUAGE,
    ) -> None:
        self.filter = build_filter(redactors, mask_cards=mask_card_numbers)
        self.analyzer = analyzer(language)

    def row(
        self,
        *,
        app_name: str,
        user_id: str,
        memory_id: str,
        session_id: str | None,
        event_id: str | None,
        author: str | None,
        timestamp: float,
        text: str,
        role: str | None,
        custom_metadata: Mapping[str, Any] | None,
        now: float,
    ) -> dict[str, Any] | None:
        """A memory row from raw text, after the filter; ``None`` if no text is left.

        Raises:
            InvalidIdentifierError, InvalidEventError, InvalidStateError: an id, the
                author, the timestamp or the metadata cannot be stored.
        """
        check_identifier("memory id", memory_id)
        if event_id is not None:
            check_identifier("event id", event_id)
        if author is not None:
            check_text_field("memory author", author)
            author = self.filter(valid_unicode(author))  # it is stored and indexed too
        check_timestamp("memory timestamp", timestamp)
        metadata = dict(custom_metadata or {})
        check_json_value("custom_metadata", metadata, "memory field")
        filtered = self.filter(valid_unicode(text))
        if not filtered.strip():
            return None
        indexed = indexed_text(author, filtered)
        terms = self.analyzer.index_terms(indexed)
        return {
            "app_name": app_name,
            "user_id": user_id,
            "id": memory_id,
            "session_id": session_id,
            "event_id": event_id,
            "author": author,
            "timestamp": timestamp,
            "content": Content(role=role, parts=[Part(text=filtered)]).model_dump_json(
                exclude_none=True
            ),
            "text": indexed,
            "terms": " ".join(terms),
            "analysis": self.analyzer.signature,
            "token_count": len(terms),
            "custom_metadata": json.dumps(metadata, ensure_ascii=False, allow_nan=False),
            "search_scope": search_scope(app_name, user_id),
            "update_time": now,
        }

    def from_events(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str | None,
        events: Iterable[EventLike],
        custom_metadata: Mapping[str, Any] | None,
        now: float,
    ) -> list[dict[str, Any]]:
        """One row per event that carries text (partial events skipped; a repeated
        event id keeps its last version)."""
        rows: dict[str, dict[str, Any]] = {}
        for event in events:
            if event.partial:
                continue
            mid = memory_id(app_name, user_id, session_id, event.id)
            row = self.row(
                app_name=app_name,
                user_id=user_id,
                memory_id=mid,
                session_id=session_id,
                event_id=event.id,
                author=event.author or None,
                timestamp=float(event.timestamp),
                text=text_of(event.content),
                role=getattr(event.content, "role", None),
                custom_metadata=custom_metadata,
                now=now,
            )
            rows.pop(mid, None)
            if row is not None:
                rows[mid] = row
        return list(rows.values())

    def from_entries(
        self,
        *,
        app_name: str,
        user_id: str,
        entries: Iterable[Any],
        custom_metadata: Mapping[str, Any] | None,
        now: float,
    ) -> list[dict[str, Any]]:
        """One row per entry (``MemoryEntry`` or the like) that carries text; an entry
        without an id gets a new one, without a timestamp the time of writing.

        Raises:
            InvalidMemoryError: an entry's timestamp is not ISO 8601.
        """
        rows = []
        for entry in entries:
            metadata = {
                **(custom_metadata or {}),
                **(getattr(entry, "custom_metadata", None) or {}),
            }
            row = self.row(
                app_name=app_name,
                user_id=user_id,
                memory_id=entry.id or str(uuid.uuid4()),
                session_id=None,
                event_id=None,
                author=entry.author,
                timestamp=_epoch(entry.timestamp),
                text=text_of(entry.content),
                role=getattr(entry.content, "role", None),
                custom_metadata=metadata,
                now=now,
            )
            if row is not None:
                rows.append(row)
        return rows
