"""Pydantic v2 models with ADK's field names and meanings.

The shapes follow ``google.adk.sessions.Session``, ``google.adk.events.Event`` and
``google.genai.types.Content``: the same snake_case field names, accepted in camelCase
as well (ADK's models serialise either way). Every model keeps fields it does not
declare (``extra="allow"``), so an event written and read back equals the original
whatever it carried. Bytes (``inline_data.data``) travel as base64 in JSON, as in ADK.

Times are floats in seconds since the Unix epoch (UTC).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, Self

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator
from pydantic.alias_generators import to_camel

__all__ = [
    "Blob",
    "Content",
    "Event",
    "EventActions",
    "EventLike",
    "FunctionCall",
    "FunctionResponse",
    "GetSessionConfig",
    "GetSessionConfigLike",
    "ListSessionsResponse",
    "MemoryEntry",
    "Part",
    "SearchMemoryResponse",
    "Session",
    "SessionLike",
    "session_incarnation",
    "set_session_incarnation",
]


class _AdkModel(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        alias_generator=to_camel,
        populate_by_name=True,
        ser_json_bytes="base64",
        val_json_bytes="base64",
    )


class FunctionCall(_AdkModel):
    """A tool call requested by the model (GenAI ``FunctionCall``)."""

    id: str | None = None
    args: dict[str, Any] | None = None
    name: str | None = None


class FunctionResponse(_AdkModel):
    """The result of a tool call (GenAI ``FunctionResponse``)."""

    id: str | None = None
    name: str | None = None
    response: dict[str, Any] | None = None


class Blob(_AdkModel):
    """Inline binary data (GenAI ``Blob``); ``data`` is base64 in JSON."""

    mime_type: str | None = None
    data: bytes | None = None
    display_name: str | None = None


class Part(_AdkModel):
    """One part of a message: text, a function call or response, inline data, ..."""

    text: str | None = None
    thought: bool | None = None
    inline_data: Blob | None = None
    function_call: FunctionCall | None = None
    function_response: FunctionResponse | None = None


class Content(_AdkModel):
    """A message (GenAI ``Content``): ``role`` is ``"user"`` or ``"model"``."""

    role: str | None = None
    parts: list[Part] | None = None


class EventActions(_AdkModel):
    """Side effects carried by an event (ADK ``EventActions``).

    ``state_delta`` maps state keys (optionally prefixed ``app:``, ``user:`` or
    ``temp:``) to their new JSON values.
    """

    skip_summarization: bool | None = None
    state_delta: dict[str, Any] = Field(default_factory=dict)
    artifact_delta: dict[str, int] = Field(default_factory=dict)
    transfer_to_agent: str | None = None
    escalate: bool | None = None
    requested_auth_configs: dict[str, Any] = Field(default_factory=dict)
    requested_tool_confirmations: dict[str, Any] = Field(default_factory=dict)


def _new_id() -> str:
    return str(uuid.uuid4())


class Event(_AdkModel):
    """One record in a session's append-only history (ADK ``Event``).

    Attributes:
        id: unique within its session; generated (UUID4) when not given.
        invocation_id: groups the events of one user turn.
        author: ``"user"`` or the name of the agent that produced the event.
        timestamp: seconds since the Unix epoch (UTC), float; stored bit-for-bit.
        content: the message (text, function calls and responses, ...).
        partial: a streaming fragment; partial events are never stored.
        turn_complete: the model finished its turn.
        branch: ``agent_1.agent_2`` path for sub-agent isolation.
        actions: side effects, including ``state_delta``.
    """

    id: str = Field(default_factory=_new_id)
    invocation_id: str = ""
    author: str = ""
    timestamp: float = Field(default_factory=time.time)
    content: Content | None = None
    partial: bool | None = None
    turn_complete: bool | None = None
    branch: str | None = None
    actions: EventActions = Field(default_factory=EventActions)

    def text(self) -> str:
        """The event's text parts joined by newlines (``""`` when it has none)."""
        if self.content is None or not self.content.parts:
            return ""
        return "\n".join(p.text for p in self.content.parts if p.text)


class Session(BaseModel):
    """A conversation addressed by (app_name, user_id, id) (ADK ``Session``).

    Attributes:
        state: session state merged with ``app:`` and ``user:`` state, prefixes
            restored.
        events: the stored events in append order (oldest first).
        last_update_time: seconds since the epoch (UTC) of the last append.
        revision: the optimistic-concurrency token: the number of appends the
            stored session had when this object was loaded. An append from an
            object whose revision is behind storage raises ``StaleSessionError``.
    """

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    id: str
    app_name: str
    user_id: str
    state: dict[str, Any] = Field(default_factory=dict)
    events: list[Event] = Field(default_factory=list)
    last_update_time: float = 0.0
    revision: int = 0

    # Which creation of this (app_name, user_id, id) the object was loaded from: a
    # session deleted and created again under the same id is another incarnation.
    _incarnation: str | None = PrivateAttr(default=None)


def session_incarnation(session: Session) -> str | None:
    """Which creation of its address ``session`` was loaded from (``None`` for an object
    this store did not make)."""
    return session._incarnation


def set_session_incarnation(session: Session, incarnation: str | None) -> None:
    """Record which creation of its address ``session`` was loaded from."""
    session._incarnation = incarnation


class GetSessionConfig(BaseModel):
    """Limits on the events ``get_session`` loads (ADK ``GetSessionConfig``).

    Attributes:
        num_recent_events: return at most the newest N events; 0 returns none;
            negative values are rejected (``pydantic.ValidationError``).
        after_timestamp: return only events with ``timestamp >= after_timestamp``
            (seconds since the epoch, inclusive).

    Both limits combine: the newest N of the events at or after the timestamp.
    """

    num_recent_events: int | None = None
    after_timestamp: float | None = None

    @field_validator("num_recent_events")
    @classmethod
    def _non_negative(cls, value: int | None) -> int | None:
        if value is not None and value < 0:
            raise ValueError("num_recent_events must be greater than or equal to 0")
        return value


class ListSessionsResponse(BaseModel):
    """Sessions without their events, oldest ``last_update_time`` first.

    Attributes:
        next_page_token: pass it to ``list_sessions`` for the next page; ``None`` on
            the last page (and when no ``limit`` was asked for).
    """

    sessions: list[Session] = Field(default_factory=list)
    next_page_token: str | None = None


class MemoryEntry(BaseModel):
    """One remembered item (ADK ``MemoryEntry``).

    Attributes:
        content: the remembered message; only text parts are kept in memory.
        custom_metadata: free-form; search results add ``session_id``,
            ``event_id`` (``None`` for distilled facts) and ``score`` (higher is more
            relevant).
        id: the memory's id: stable across re-ingestions of the same event.
        author: who said it (``"user"`` or an agent name).
        timestamp: when the content happened, ISO 8601 in UTC
            (``2026-11-16T12:30:00+00:00``).
    """

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    content: Content
    custom_metadata: dict[str, Any] = Field(default_factory=dict)
    id: str | None = None
    author: str | None = None
    timestamp: str | None = None


class SearchMemoryResponse(BaseModel):
    """Memories matching a query, most relevant first (ADK ``SearchMemoryResponse``)."""

    memories: list[MemoryEntry] = Field(default_factory=list)


class EventLike(Protocol):
    """What the store reads of an event: this library's :class:`Event` and ADK's
    ``google.adk.events.Event`` alike."""

    @property
    def id(self) -> str: ...
    @property
    def invocation_id(self) -> str: ...
    @property
    def author(self) -> str: ...
    @property
    def timestamp(self) -> float: ...
    @property
    def partial(self) -> bool | None: ...
    @property
    def content(self) -> Any: ...
    @property
    def actions(self) -> Any: ...
    def model_dump_json(self, *, exclude_none: bool = False) -> str: ...
    def model_copy(
        self, *, update: Mapping[str, Any] | None = None, deep: bool = False
    ) -> Self: ...


class SessionLike(Protocol):
    """What the store reads of a session: this library's :class:`Session` and ADK's
    ``google.adk.sessions.Session`` alike."""

    @property
    def id(self) -> str: ...
    @property
    def app_name(self) -> str: ...
    @property
    def user_id(self) -> str: ...
    @property
    def state(self) -> Mapping[str, Any]: ...
    @property
    def events(self) -> Sequence[EventLike]: ...
    @property
    def last_update_time(self) -> float: ...


class GetSessionConfigLike(Protocol):
    """What ``get_session`` reads of its ``config``: this library's
    :class:`GetSessionConfig` and ADK's alike."""

    @property
    def num_recent_events(self) -> int | None: ...
    @property
    def after_timestamp(self) -> float | None: ...
