"""Between session objects and stored rows: the session models a service reads and
writes, event and state encoding, page tokens and load limits.

A session service is generic over its models (:class:`SessionModels`): this library's
own (:data:`CORE_MODELS`: :class:`~adk_sqlstore.Session`, :class:`~adk_sqlstore.Event`,
:class:`~adk_sqlstore.ListSessionsResponse`) or ADK's (:mod:`adk_sqlstore.adk`). The
models decide how a loaded session object is built and how it carries its revision
token; everything else is the same code for both.
"""

from __future__ import annotations

import base64
import json
import math
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from types import GenericAlias
from typing import Any, Generic, Protocol, cast

from pydantic import TypeAdapter, ValidationError
from pydantic_core import PydanticSerializationError
from typing_extensions import TypeVar

from ..errors import InvalidArgumentError, InvalidEventError, InvalidStateError
from ..models import (
    Event,
    EventLike,
    GetSessionConfig,
    ListSessionsResponse,
    Session,
    SessionLike,
    session_incarnation,
    set_session_incarnation,
)
from ..sql.sessions import SessionRow
from ..state import ScopedDelta
from ..validation import (
    check_count,
    check_event_fields,
    check_size_limit,
    dump_json_value,
    json_size,
)
from .builders import ManyModels, gc_paused

__all__ = [
    "CORE_MODELS",
    "CoreModels",
    "EncodedState",
    "EventListReader",
    "EventT",
    "ListT",
    "ListedRow",
    "SessionCodec",
    "SessionModels",
    "SessionT",
    "Token",
    "decode_page_token",
    "encode_page_token",
    "parse_config",
]

SessionT = TypeVar("SessionT", bound=SessionLike, default=Session)
EventT = TypeVar("EventT", bound=EventLike, default=Event)
ListT = TypeVar("ListT", default=ListSessionsResponse)
EventRead = TypeVar("EventRead")

#: A listed session as read: (user_id, session id, incarnation, revision, update_time).
ListedRow = tuple[str, str, str, int, float]


class EventListReader(Protocol[EventRead]):
    """Reads a JSON array of stored events (pydantic's ``TypeAdapter`` is one)."""

    def validate_json(self, data: str, /) -> list[EventRead]:
        """The events; raises ``pydantic.ValidationError`` for JSON that is not such an
        array."""
        ...


@dataclass(frozen=True)
class Token:
    """The optimistic-concurrency token a session object carries.

    Attributes:
        revision: appends the stored session had when the object was loaded
            (``None``: unknown, an object this store did not make).
        incarnation: which creation of the session's address it was loaded from
            (``None``: unknown; only the revision is checked then).
    """

    revision: int | None
    incarnation: str | None


class SessionModels(ABC, Generic[SessionT, EventT, ListT]):
    """The classes a session service reads and writes, and how a session object
    carries its :class:`Token`."""

    #: The model events are decoded into.
    event_model: type[EventT]
    #: Refuse an event that would not read back equal (True), or only one that would
    #: not read back at all (False: values JSON lacks are stored as their JSON form).
    exact_events: bool = True

    def event_list_reader(self) -> EventListReader[EventT]:
        """What reads a JSON array of stored events into ``list[event_model]`` (and
        checks, on append, that an event reads back): pydantic's validator unless the
        models know a faster one that returns the same objects."""
        if self.event_model is Event:
            return cast(EventListReader[EventT], _EVENT_LIST)
        return cast(
            EventListReader[EventT], TypeAdapter(cast(Any, GenericAlias(list, (self.event_model,))))
        )

    @abstractmethod
    def build_session(
        self, row: SessionRow, state: dict[str, Any], events: list[EventT]
    ) -> SessionT:
        """A session object for a stored row, its merged state and events."""

    def build_sessions(
        self, rows: list[SessionRow], states: list[dict[str, Any]]
    ) -> list[SessionT]:
        """Session objects without events for many rows and their merged states
        (``list_sessions``), in order; each keeps the state dict it is given."""
        return [self.build_session(row, state, []) for row, state in zip(rows, states, strict=True)]

    def build_listed(
        self, app_name: str, listed: list[ListedRow], states: list[dict[str, Any]]
    ) -> list[SessionT]:
        """Session objects without events for the listed rows of an app (as
        :func:`adk_sqlstore.sql.hot_paths.list_session_rows` reads them) and their
        merged states, in order; each keeps the state dict it is given. The default
        makes :class:`SessionRow` objects for :meth:`build_sessions`."""
        rows = [SessionRow(app_name, u, s, n, t, k) for u, s, k, n, t in listed]
        return self.build_sessions(rows, states)

    @abstractmethod
    def list_response(self, sessions: list[SessionT], next_page_token: str | None) -> ListT:
        """The answer of ``list_sessions``."""

    @abstractmethod
    def token_of(self, session: object) -> Token:
        """The token ``session`` was loaded at (unknown parts ``None``)."""

    @abstractmethod
    def set_token(self, session: SessionT, token: Token) -> None:
        """Record on ``session`` the token of the revision it now matches."""

    @abstractmethod
    def apply_append(self, session: SessionT, event: EventT, delta: dict[str, Any]) -> None:
        """Bring ``session`` up to date with a committed append: its state gets
        ``delta`` (``temp:`` keys included), its events ``event``, its
        ``last_update_time`` the event's timestamp."""


class CoreModels(SessionModels[Session, Event, ListSessionsResponse]):
    """This library's own models; the token is :attr:`Session.revision` and the
    session's incarnation."""

    event_model = Event

    def build_session(self, row: SessionRow, state: dict[str, Any], events: list[Event]) -> Session:
        session = Session(
            id=row.id,
            app_name=row.app_name,
            user_id=row.user_id,
            state=state,
            events=events,
            last_update_time=row.update_time,
            revision=row.revision,
        )
        set_session_incarnation(session, row.incarnation)
        return session

    def build_listed(
        self, app_name: str, listed: list[ListedRow], states: list[dict[str, Any]]
    ) -> list[Session]:
        # Exactly the fields and private attributes of Session, made here: the objects
        # are constructed, not validated (tests/test_listing.py: equal to validated).
        return _MANY_SESSIONS.build_exact(
            [
                {
                    "id": s,
                    "app_name": app_name,
                    "user_id": u,
                    "state": state,
                    "events": [],
                    "last_update_time": t,
                    "revision": n,
                }
                for (u, s, _, n, t), state in zip(listed, states, strict=True)
            ],
            [{"_incarnation": k} for _, _, k, _, _ in listed],
        )

    def list_response(
        self, sessions: list[Session], next_page_token: str | None
    ) -> ListSessionsResponse:
        return ListSessionsResponse(sessions=sessions, next_page_token=next_page_token)

    def token_of(self, session: object) -> Token:
        revision = getattr(session, "revision", None)
        if isinstance(revision, bool) or not isinstance(revision, int):
            return Token(None, None)
        incarnation = session_incarnation(session) if isinstance(session, Session) else None
        return Token(revision, incarnation)

    def set_token(self, session: Session, token: Token) -> None:
        if token.revision is not None:
            session.revision = token.revision

    def apply_append(self, session: Session, event: Event, delta: dict[str, Any]) -> None:
        session.state.update(delta)
        session.events.append(event)
        session.last_update_time = event.timestamp


_EVENT_LIST = TypeAdapter(list[Event])
_MANY_SESSIONS = ManyModels(Session)

CORE_MODELS = CoreModels()
"""The models of :class:`~adk_sqlstore.SqlSessionService` unless told otherwise."""


@dataclass(frozen=True)
class EncodedState:
    """State values as JSON text, by scope (keys without their prefix)."""

    app: dict[str, str]
    user: dict[str, str]
    session: dict[str, str]


class SessionCodec(Generic[SessionT, EventT, ListT]):
    """Events and state to stored JSON text and back, under a service's size limits.

    Args:
        models: the session models.
        max_event_bytes: the largest event accepted, in UTF-8 bytes of its JSON.
        max_state_value_bytes: the largest state value accepted, likewise.

    Raises:
        ValueError: a limit is not a positive number of bytes.
    """

    def __init__(
        self,
        models: SessionModels[SessionT, EventT, ListT],
        *,
        max_event_bytes: int,
        max_state_value_bytes: int,
    ) -> None:
        self.models = models
        self.max_event_bytes = check_size_limit("max_event_bytes", max_event_bytes)
        self.max_state_value_bytes = check_size_limit(
            "max_state_value_bytes", max_state_value_bytes
        )
        self._event: TypeAdapter[EventT] = TypeAdapter(models.event_model)
        self._events = models.event_list_reader()

    def coerce_event(self, event: object) -> EventT:
        """``event`` as the event model (a dict of one is validated).

        Raises:
            InvalidEventError: it is neither.
        """
        if isinstance(event, Mapping):
            try:
                return self._event.validate_python(event)
            except ValidationError as exc:
                raise InvalidEventError(
                    f"event is not a valid event: {exc.errors()[0]['msg']}"
                ) from None
        if not all(hasattr(event, name) for name in ("id", "author", "actions", "timestamp")):
            raise InvalidEventError(f"event must be an Event, not {type(event).__name__}")
        return cast(EventT, event)

    def decode_events(self, texts: list[str]) -> list[EventT]:
        """Validate stored events in one pass. The garbage collector is paused
        meanwhile: thousands of new model objects would otherwise set off full
        collections that scan the whole heap and take most of the time (about 3x)."""
        if not texts:
            return []
        if len(texts) <= 64:
            return self._events.validate_json("[" + ",".join(texts) + "]")
        with gc_paused():
            return self._events.validate_json("[" + ",".join(texts) + "]")

    def encode_event(self, event: EventLike) -> str:
        """The event as JSON, after checking that it reads back (and, with the models'
        ``exact_events``, that it reads back equal to itself).

        Raises:
            InvalidEventError, InvalidIdentifierError: naming the event and the problem.
        """
        check_event_fields(event)
        try:
            # exclude_none, as ADK's own services write events: exclude_defaults would
            # also drop default-valued fields of objects a tool returned (a function
            # response's {"memories": []} read back as {}).
            data = event.model_dump_json(exclude_none=True)
        except (PydanticSerializationError, ValueError) as exc:
            raise InvalidEventError(f"event {event.id!r} cannot be written as JSON: {exc}") from exc
        limit = self.max_event_bytes
        if len(data) * 4 > limit and (size := json_size(data)) > limit:
            raise InvalidEventError(
                f"event {event.id!r} is {size:,} bytes as JSON; the limit is"
                f" {limit:,} (max_event_bytes)"
            )
        self._check_reads_back(event, data)
        return data

    def _check_reads_back(self, event: EventLike, data: str) -> None:
        try:
            (decoded,) = self._events.validate_json("[" + data + "]")
        except ValidationError as exc:
            problem = exc.errors()[0]
            where = ".".join(str(p) for p in problem["loc"][1:]) or "the event"
            raise InvalidEventError(
                f"event {event.id!r} cannot be stored: {where} would not read back"
                f" ({problem['msg']})"
            ) from exc
        # Field by field rather than ==, so that an instance of a subclass of the event
        # model passes when it carries nothing more.
        if self.models.exact_events and (
            decoded.__dict__ != event.__dict__
            or getattr(decoded, "__pydantic_extra__", None)
            != getattr(event, "__pydantic_extra__", None)
        ):
            raise InvalidEventError(
                f"event {event.id!r} cannot be stored exactly: a value in it is not JSON (NaN"
                " or infinite numbers, sets, tuples, bytes outside inline_data, datetimes or"
                " other objects would come back changed); convert it first"
            )

    def encode_state(self, scoped: ScopedDelta) -> EncodedState:
        """Each scope's values as JSON text.

        Raises:
            InvalidStateError: a value is longer than ``max_state_value_bytes`` as JSON.
        """
        encoded = []
        for prefix, values in (("app:", scoped.app), ("user:", scoped.user), ("", scoped.session)):
            texts = {k: dump_json_value(v) for k, v in values.items()}
            for k, text in texts.items():
                limit = self.max_state_value_bytes
                if len(text) * 4 > limit and (size := json_size(text)) > limit:
                    raise InvalidStateError(
                        f"state key {prefix + k!r}: the value is {size:,} bytes as JSON; the"
                        f" limit is {limit:,} (max_state_value_bytes)",
                        key=prefix + k,
                    )
            encoded.append(texts)
        return EncodedState(app=encoded[0], user=encoded[1], session=encoded[2])


def parse_config(config: object) -> GetSessionConfig | None:
    """``config`` as a :class:`GetSessionConfig` (ADK's has the same fields; a dict of
    them is validated).

    Raises:
        InvalidArgumentError: it is none of these, or its limits are not numbers.
    """
    if config is None:
        return None
    fields = ("num_recent_events", "after_timestamp")
    if isinstance(config, Mapping):
        values = dict(config)
    elif all(hasattr(config, name) for name in fields):
        values = {name: getattr(config, name) for name in fields}
    else:
        raise InvalidArgumentError(
            f"config must be a GetSessionConfig, not {type(config).__name__}"
        )
    try:
        checked = GetSessionConfig.model_validate(values, strict=True)
    except ValidationError as exc:
        raise InvalidArgumentError(f"config: {exc.errors()[0]['msg']}") from None
    if checked.num_recent_events is not None:
        check_count("config.num_recent_events", checked.num_recent_events, least=0)
    return checked


def encode_page_token(update_time: float, user_id: str, session_id: str) -> str:
    """The ``next_page_token`` after the session (update_time, user_id, session_id)."""
    raw = json.dumps([update_time, user_id, session_id], ensure_ascii=False)
    return base64.urlsafe_b64encode(raw.encode()).decode()


def decode_page_token(token: str) -> tuple[float, str, str]:
    """The (update_time, user_id, session_id) a page token continues after.

    Raises:
        InvalidArgumentError: it is not a token :func:`encode_page_token` made.
    """
    try:
        update_time, user_id, session_id = json.loads(base64.urlsafe_b64decode(token))
        if isinstance(update_time, bool) or not isinstance(update_time, int | float):
            raise TypeError
        if not math.isfinite(update_time):  # json.loads takes Infinity and NaN
            raise ValueError
        return float(update_time), str(user_id), str(session_id)
    except (ValueError, TypeError) as exc:
        raise InvalidArgumentError("page_token is not a token list_sessions returned") from exc
