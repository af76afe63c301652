"""ADK's own types for the core services: the session models
(:class:`~adk_sqlstore.sessions.SessionModels`) that make them read and write
``google.adk`` sessions and events, and the conversion of errors and memory entries."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any

from .. import errors
from ..models import MemoryEntry
from ..sessions.builders import ManyModels
from ..sessions.codec import EventListReader, ListedRow, SessionModels, Token
from ..sql.sessions import SessionRow
from ._google import (
    AdkAlreadyExistsError,
    AdkEvent,
    AdkListSessionsResponse,
    AdkMemoryEntry,
    AdkSession,
    AdkSessionNotFoundError,
    AdkStaleSessionError,
    genai_types,
)

__all__ = ["ADK_MODELS", "AdkModels", "PagedListSessionsResponse", "adk_errors", "to_adk_entry"]


class PagedListSessionsResponse(AdkListSessionsResponse):
    """ADK's ``ListSessionsResponse`` with the token of the next page (``None`` on the
    last one)."""

    next_page_token: str | None = None


class AdkModels(SessionModels[AdkSession, AdkEvent, PagedListSessionsResponse]):
    """ADK's ``Session``, ``Event`` and ``ListSessionsResponse``.

    The optimistic-concurrency token travels in ADK's own attribute for it,
    ``Session._storage_update_marker``, as ``"<incarnation>:<revision>"`` (ADK's
    ``DatabaseSessionService`` keeps its own marker there the same way). ADK's tools put
    pydantic objects into function responses: they are stored as their JSON form (as
    ADK's ``DatabaseSessionService`` does), not refused; an event that would not read
    back at all still is.
    """

    event_model = AdkEvent
    exact_events = False

    def event_list_reader(self) -> EventListReader[AdkEvent]:
        """ADK's validator without its Python validators that do nothing to stored JSON
        (:mod:`adk_sqlstore.adk.event_reader`), built once per process."""
        return _event_reader()

    def build_session(
        self, row: SessionRow, state: dict[str, Any], events: list[AdkEvent]
    ) -> AdkSession:
        session = AdkSession(
            id=row.id,
            app_name=row.app_name,
            user_id=row.user_id,
            state=state,
            events=events,
            last_update_time=row.update_time,
        )
        self.set_token(session, Token(row.revision, row.incarnation))
        return session

    def build_listed(
        self, app_name: str, listed: list[ListedRow], states: list[dict[str, Any]]
    ) -> list[AdkSession]:
        # Exactly the fields and private attribute of ADK's Session, made here: the
        # objects are constructed, not validated (tests/test_listing.py).
        return _many_sessions().build_exact(
            [
                {
                    "id": s,
                    "app_name": app_name,
                    "user_id": u,
                    "state": state,
                    "events": [],
                    "last_update_time": t,
                }
                for (u, s, _, _, t), state in zip(listed, states, strict=True)
            ],
            # _marker's form, "<incarnation>:<revision>" (an incarnation is never None).
            [{"_storage_update_marker": f"{k}:{n}"} for _, _, k, n, _ in listed],
        )

    def list_response(
        self, sessions: list[AdkSession], next_page_token: str | None
    ) -> PagedListSessionsResponse:
        return PagedListSessionsResponse(sessions=sessions, next_page_token=next_page_token)

    def token_of(self, session: object) -> Token:
        marker = getattr(session, "_storage_update_marker", None)
        if isinstance(marker, str) and ":" in marker:
            incarnation, _, revision = marker.rpartition(":")
            if revision.isdigit():
                return Token(int(revision), incarnation or None)
        # A session made elsewhere (by hand, or by another service): it is as new as
        # the events it holds.
        events = getattr(session, "events", None)
        return Token(len(events) if isinstance(events, list) else None, None)

    def set_token(self, session: AdkSession, token: Token) -> None:
        session._storage_update_marker = _marker(token)

    def apply_append(self, session: AdkSession, event: AdkEvent, delta: dict[str, Any]) -> None:
        session.state.update(delta)
        session.events.append(event)
        session.last_update_time = event.timestamp


def _marker(token: Token) -> str:
    return f"{token.incarnation or ''}:{token.revision}"


@cache
def _many_sessions() -> ManyModels[AdkSession]:
    return ManyModels(AdkSession)


@cache
def _event_reader() -> EventListReader[AdkEvent]:
    from .event_reader import EventListReader as AdkEventListReader

    return AdkEventListReader()


ADK_MODELS = AdkModels()
"""The models of the ADK classes."""


@contextmanager
def adk_errors() -> Iterator[None]:
    """Raise ADK's error types for adk-sqlstore's, chained (``from``) to them."""
    try:
        yield
    except errors.StaleSessionError as exc:
        raise AdkStaleSessionError(str(exc)) from exc
    except errors.SessionNotFoundError as exc:
        raise AdkSessionNotFoundError(str(exc)) from exc
    except errors.AlreadyExistsError as exc:
        raise AdkAlreadyExistsError(str(exc)) from exc


def to_adk_entry(entry: MemoryEntry) -> AdkMemoryEntry:
    """A search result as ADK's ``MemoryEntry`` (``content`` a GenAI ``Content``)."""
    return AdkMemoryEntry(
        content=genai_types.Content.model_validate(entry.content.model_dump(exclude_none=True)),
        custom_metadata=entry.custom_metadata,
        id=entry.id,
        author=entry.author,
        timestamp=entry.timestamp,
    )
