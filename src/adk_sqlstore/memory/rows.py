"""Memories as rows: made from events (one memory per event that carries text) or from
entries (distilled facts), after the ingestion filter.

"filter it at ingestion rather than at retrieval" (design notes, 000): the filter
(payment card numbers masked by default, plus the application's own rules) runs on
the text and the author before anything reaches the memory table.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic_core import to_json

from ..errors import InvalidMemoryError
from ..models import Content, EventLike, Part
from ..search.analysis import DEFAULT_LANGUAGE, analyzer
from ..search.text import indexed_text, search_scope, text_of, valid_unicode
from ..validation import (
    DEFAULT_MAX_EVENT_BYTES,
    check_identifier,
    check_json_value,
    check_text_field,
    check_timestamp,
)
from .redaction import Redactor, build_filter

__all__ = ["MAX_MEMORY_BYTES", "MemoryRows", "as_models", "check_metadata", "iso_time", "memory_id"]

_MEMORY_NAMESPACE = uuid.UUID("6f1c2d4e-8a9b-4c3d-9e2f-0a1b2c3d4e5f")


class _MemoryIds:
    """The memory ids of one session's events: UUID5 of their address, with the SHA-1
    of the namespace and the session's part taken once (``uuid.uuid5`` per event made
    the whole hash and a ``UUID`` object each time; the same ids:
    tests/test_memory_rows.py).
    """

    def __init__(self, app_name: str, user_id: str, session_id: str | None) -> None:
        prefix = f"{app_name}\x00{user_id}\x00{session_id or ''}\x00"
        self._prefix = hashlib.sha1(
            _MEMORY_NAMESPACE.bytes + prefix.encode(), usedforsecurity=False
        )

    def of(self, event_id: str) -> str:
        sha = self._prefix.copy()
        sha.update(event_id.encode())
        raw = bytearray(sha.digest()[:16])
        raw[6] = (raw[6] & 0x0F) | 0x50  # version 5
        raw[8] = (raw[8] & 0x3F) | 0x80  # the RFC 4122 variant
        h = raw.hex()
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def memory_id(app_name: str, user_id: str, session_id: str | None, event_id: str) -> str:
    """The stable id of the memory made from one event (UUID5 of its address)."""
    return _MemoryIds(app_name, user_id, session_id).of(event_id)


def _content_json(role: Any, text: str) -> str:
    """The stored ``content``: ``Content(role=role, parts=[Part(text=text)])`` as
    ``model_dump_json(exclude_none=True)`` writes it, by the same serializer without
    building the two models when both are plain strings (or no role)."""
    if type(text) is str and (role is None or type(role) is str):
        part = {"text": text}
        return to_json(
            {"parts": [part]} if role is None else {"role": role, "parts": [part]}
        ).decode()
    return Content(role=role, parts=[Part(text=text)]).model_dump_json(exclude_none=True)


class _Batch:
    """What the rows of one call share: their user, the time of writing and the
    metadata (checked and made JSON at the first row, as each row did before)."""

    __slots__ = ("_json", "_metadata", "app_name", "now", "scope", "user_id")

    def __init__(
        self,
        app_name: str,
        user_id: str,
        now: float,
        custom_metadata: Mapping[str, Any] | None,
        *,
        scope: str | None = None,
    ) -> None:
        self.app_name = app_name
        self.user_id = user_id
        self.now = now
        self.scope = scope if scope is not None else search_scope(app_name, user_id)
        self._metadata = custom_metadata
        self._json: str | None = None

    def metadata_json(self) -> str:
        """The metadata as stored.

        Raises:
            InvalidStateError: it is not exact JSON.
        """
        if self._json is None:
            metadata = dict(self._metadata or {})
            check_json_value("custom_metadata", metadata, "memory field")
            self._json = json.dumps(metadata, ensure_ascii=False, allow_nan=False)
        return self._json


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


MAX_MEMORY_BYTES = DEFAULT_MAX_EVENT_BYTES
"""Largest text of one memory, in UTF-8 bytes (as an event's stored JSON: a session's
events never reach it). Every backend refuses more; MySQL's packet limit would
otherwise drop the connection on a bigger one."""


def _check_size(text: str) -> None:
    """Raises InvalidMemoryError for a text over :data:`MAX_MEMORY_BYTES`."""
    if len(text) * 4 > MAX_MEMORY_BYTES and len(text.encode()) > MAX_MEMORY_BYTES:
        raise InvalidMemoryError(
            f"a memory's text is {len(text.encode()):,} bytes; the limit is"
            f" {MAX_MEMORY_BYTES:,} (MAX_MEMORY_BYTES)"
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
        batch = _Batch(app_name, user_id, now, custom_metadata)
        return self._row(batch, memory_id, session_id, event_id, author, timestamp, text, role)

    def _row(
        self,
        batch: _Batch,
        memory_id: str,
        session_id: str | None,
        event_id: str | None,
        author: str | None,
        timestamp: float,
        text: str,
        role: str | None,
    ) -> dict[str, Any] | None:
        """:meth:`row` once its ids are checked."""
        if author is not None:
            check_text_field("memory author", author)
            author = self.filter(valid_unicode(author))  # it is stored and indexed too
        check_timestamp("memory timestamp", timestamp)
        metadata = batch.metadata_json()
        filtered = self.filter(valid_unicode(text))
        if not filtered.strip():
            return None
        _check_size(filtered)
        indexed = indexed_text(author, filtered)
        terms = self.analyzer.index_terms(indexed)
        return {
            "app_name": batch.app_name,
            "user_id": batch.user_id,
            "id": memory_id,
            "session_id": session_id,
            "event_id": event_id,
            "author": author,
            "timestamp": timestamp,
            "content": _content_json(role, filtered),
            "text": indexed,
            "terms": " ".join(terms),
            "analysis": self.analyzer.signature,
            "token_count": len(terms),
            "custom_metadata": metadata,
            "search_scope": batch.scope,
            "update_time": batch.now,
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
        event id keeps its last version).

        Raises:
            InvalidIdentifierError, InvalidEventError, InvalidStateError: as
                :meth:`row`, for the first event that cannot be stored.
        """
        batch = _Batch(app_name, user_id, now, custom_metadata)
        ids = _MemoryIds(app_name, user_id, session_id)
        rows: dict[str, dict[str, Any]] = {}
        for event in events:
            if event.partial:
                continue
            check_identifier("event id", event.id)  # before it is hashed into the memory id
            mid = ids.of(event.id)
            content = event.content
            row = self._row(
                batch,
                mid,
                session_id,
                event.id,
                event.author or None,
                float(event.timestamp),
                text_of(content),
                getattr(content, "role", None),
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
        scope = search_scope(app_name, user_id)
        for entry in entries:
            metadata = {
                **(custom_metadata or {}),
                **(getattr(entry, "custom_metadata", None) or {}),
            }
            mid = entry.id or str(uuid.uuid4())
            timestamp = _epoch(entry.timestamp)
            check_identifier("memory id", mid)
            row = self._row(
                _Batch(app_name, user_id, now, metadata, scope=scope),
                mid,
                None,
                None,
                entry.author,
                timestamp,
                text_of(entry.content),
                getattr(entry.content, "role", None),
            )
            if row is not None:
                rows.append(row)
        return rows
