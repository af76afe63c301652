"""Drop-in session and memory services for Google ADK (extra ``adk``).

``pip install "adk-sqlstore[adk]"``, then replace ADK's in-memory services::

    from adk_sqlstore.adk import SqlMemoryService, SqlSessionService

    session_service = SqlSessionService.from_url("postgresql://user:pass@host/agents")
    memory_service = SqlMemoryService(engine=session_service.engine)
    runner = Runner(agent=agent, app_name="lunch-app", session_service=session_service,
                    memory_service=memory_service)

:class:`SqlSessionService` subclasses ``google.adk.sessions.BaseSessionService`` and
:class:`SqlMemoryService` subclasses ``google.adk.memory.BaseMemoryService``. Both take
and return ADK's own types (``Session``, ``Event``, ``GetSessionConfig``,
``ListSessionsResponse``, ``MemoryEntry``, ``SearchMemoryResponse``) and raise ADK's own
errors (``google.adk.errors.AlreadyExistsError``, ``SessionNotFoundError``,
``StaleSessionError``), chained to adk-sqlstore's. All the logic is the core services'
(:class:`adk_sqlstore.SqlSessionService`, :class:`adk_sqlstore.SqlMemoryService`);
this module only converts types and errors.

For ADK's command line, both classes accept ``uri=`` (the ``services.yaml``
convention; ``adk-sqlstore services-yaml`` prints the file, shipped in this package as
``adk_sqlstore/services.yaml``): ``sqlstore+postgresql://...``,
``sqlstore+sqlite:///relative/to/cwd.db``, ``sqlstore+sqlite:////absolute/path.db`` or
``sqlstore://`` (``$ADK_SQLSTORE_DATABASE_URL``, else the embedded SQLite file); add
``?auto_migrate=true`` to let a PostgreSQL database be migrated on first use. Plain
database URLs work too (every spelling of :mod:`adk_sqlstore.engine`). Each class logs
where its data lives when it is created (the absolute path of an SQLite file).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import timedelta
from typing import Any, Self

try:
    from google.adk.errors import StaleSessionError as AdkStaleSessionError
    from google.adk.errors.already_exists_error import (
        AlreadyExistsError as AdkAlreadyExistsError,
    )
    from google.adk.errors.session_not_found_error import (
        SessionNotFoundError as AdkSessionNotFoundError,
    )
    from google.adk.events import Event as AdkEvent
    from google.adk.memory import BaseMemoryService
    from google.adk.memory.base_memory_service import SearchMemoryResponse as AdkSearchResponse
    from google.adk.memory.memory_entry import MemoryEntry as AdkMemoryEntry
    from google.adk.sessions import BaseSessionService
    from google.adk.sessions import Session as AdkSession
    from google.adk.sessions.base_session_service import (
        GetSessionConfig as AdkGetSessionConfig,
    )
    from google.adk.sessions.base_session_service import (
        ListSessionsResponse as AdkListSessionsResponse,
    )
    from google.genai import types as genai_types
except ImportError as exc:  # pragma: no cover - exercised in a process without google-adk
    raise ImportError(
        "adk_sqlstore.adk needs google-adk; install it with: pip install 'adk-sqlstore[adk]'"
    ) from exc

from sqlalchemy.ext.asyncio import AsyncEngine

from . import errors, queries
from .engine import given_url
from .memory import IngestReport, MemoryCheckpoint
from .memory import SqlMemoryService as CoreMemoryService
from .migration import check_schema_at_startup
from .redaction import Redactor
from .sessions import SqlSessionService as CoreSessionService
from .store import ClosedOnExit
from .urls import describe_url
from .validation import DEFAULT_MAX_EVENT_BYTES, DEFAULT_MAX_STATE_VALUE_BYTES

__all__ = ["PagedListSessionsResponse", "SqlMemoryService", "SqlSessionService"]

logger = logging.getLogger(__name__)


class PagedListSessionsResponse(AdkListSessionsResponse):
    """ADK's ``ListSessionsResponse`` with the token of the next page (``None`` on the
    last one)."""

    next_page_token: str | None = None


@contextmanager
def _adk_errors() -> Iterator[None]:
    """Raise ADK's error types for adk-sqlstore's, chained (``from``) to them."""
    try:
        yield
    except errors.StaleSessionError as exc:
        raise AdkStaleSessionError(str(exc)) from exc
    except errors.SessionNotFoundError as exc:
        raise AdkSessionNotFoundError(str(exc)) from exc
    except errors.AlreadyExistsError as exc:
        raise AdkAlreadyExistsError(str(exc)) from exc


class _AdkModels(CoreSessionService):
    """The core session service, reading and writing ADK's Session and Event.

    The optimistic-concurrency token travels in ADK's own private attribute
    ``Session._storage_update_marker`` as ``"<incarnation>:<revision>"``.
    """

    event_model = AdkEvent
    # ADK's own tools put pydantic objects into function responses; they are stored
    # as their JSON form (as ADK's DatabaseSessionService does), not refused. An event
    # that would not read back at all is still refused.
    exact_events = False

    def _build_session(  # type: ignore[override]
        self, row: queries.SessionRow, state: dict[str, Any], events: list[Any]
    ) -> AdkSession:
        session = AdkSession(
            id=row.id,
            app_name=row.app_name,
            user_id=row.user_id,
            state=state,
            events=events,
            last_update_time=row.update_time,
        )
        session._storage_update_marker = f"{row.incarnation}:{row.revision}"
        return session

    def _list_response(self, sessions: list[Any], next_page_token: str | None) -> Any:
        return PagedListSessionsResponse(sessions=sessions, next_page_token=next_page_token)

    def _token_of(self, session: Any) -> tuple[int, str | None]:
        marker = getattr(session, "_storage_update_marker", None)
        if isinstance(marker, str) and ":" in marker:
            incarnation, _, revision = marker.rpartition(":")
            if revision.isdigit():
                return int(revision), incarnation or None
        # A session made elsewhere (by hand, or by another service): it is as new as
        # the events it holds.
        return len(session.events), None

    def _set_token(self, session: Any, revision: int, incarnation: str | None) -> None:
        session._storage_update_marker = f"{incarnation or ''}:{revision}"


def _from_uri(
    uri: str | None, auto_migrate: bool | None, kind: str, kwargs: dict[str, Any], **limits: Any
) -> _AdkModels:
    """The core service on its own engine for an ADK service URI, logging where the
    data lives (ADK's server shows INFO lines at start-up).

    Built by ADK's service registry (``adk web``, ``adk api_server``: it passes
    ``agents_dir``), the schema is checked at once, so that a server on a database
    nobody migrated stops at start-up with one line naming the command to run, instead
    of answering every request with HTTP 500.

    Raises:
        SchemaNotMigratedError: built by ADK's registry, on a database that is not
            migrated and may not migrate itself.
    """
    by_adk_server = kwargs.pop("agents_dir", None) is not None
    service = _AdkModels.from_url(uri, auto_migrate=auto_migrate, **limits, **kwargs)
    logger.info("adk-sqlstore %s: %s", kind, describe_url(given_url(service.engine)))
    if by_adk_server and not service.auto_migrate:
        check_schema_at_startup(service.engine)
    return service


class SqlSessionService(BaseSessionService, ClosedOnExit):
    """ADK ``BaseSessionService`` on PostgreSQL or SQLite, backed by
    :class:`adk_sqlstore.SqlSessionService` (see it for every behaviour).

    Args:
        uri: a database URL, or an ADK service URI (``sqlstore+postgresql://...``,
            ``sqlstore+sqlite:///path``, ``sqlstore://``); ``None`` means
            ``$ADK_SQLSTORE_DATABASE_URL``, else the embedded SQLite file.
        engine: an engine you manage, instead of ``uri`` (not closed by
            :meth:`close`).
        auto_migrate: as for :meth:`adk_sqlstore.SqlSessionService.from_url`
            (default: SQLite yes, PostgreSQL no).
        memory_checkpoint: ingest into memory every N appended events.
        max_event_bytes, max_state_value_bytes: size limits (default 8 MiB per event,
            1 MiB per state value), as for :class:`adk_sqlstore.SqlSessionService`.
        **kwargs: passed to ``create_async_engine``; ``agents_dir`` means ADK's server
            (its service registry) is building the service.

    Raises:
        SchemaNotMigratedError: built by ADK's server (``adk web``, ``adk api_server``)
            on a database that is not migrated and may not migrate itself: the server
            stops at start-up with this one line, naming the command to run.
    """

    def __init__(
        self,
        uri: str | None = None,
        *,
        engine: AsyncEngine | None = None,
        auto_migrate: bool | None = None,
        memory_checkpoint: MemoryCheckpoint | None = None,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
        max_state_value_bytes: int = DEFAULT_MAX_STATE_VALUE_BYTES,
        **kwargs: Any,
    ) -> None:
        limits: dict[str, Any] = {
            "memory_checkpoint": memory_checkpoint,
            "max_event_bytes": max_event_bytes,
            "max_state_value_bytes": max_state_value_bytes,
        }
        if engine is not None:
            self._core = _AdkModels(engine, auto_migrate=auto_migrate, **limits)
        else:
            self._core = _from_uri(uri, auto_migrate, "session service", kwargs, **limits)

    @classmethod
    def from_url(cls, url: str | None = None, **kwargs: Any) -> Self:
        """The same as ``SqlSessionService(url, **kwargs)``."""
        return cls(url, **kwargs)

    @property
    def engine(self) -> AsyncEngine:
        """The engine (share it with :class:`SqlMemoryService`)."""
        return self._core.engine

    @property
    def core(self) -> CoreSessionService:
        """The core service doing the work (it returns ADK types here)."""
        return self._core

    async def close(self) -> None:
        """Dispose of the engine if this service created it."""
        await self._core.close()

    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> AdkSession:
        """See :meth:`adk_sqlstore.SqlSessionService.create_session`.

        Raises:
            google.adk.errors.AlreadyExistsError: the id is taken.
        """
        with _adk_errors():
            session: AdkSession = await self._core.create_session(  # type: ignore[assignment]
                app_name=app_name, user_id=user_id, state=state, session_id=session_id
            )
        return session

    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: AdkGetSessionConfig | None = None,
    ) -> AdkSession | None:
        """See :meth:`adk_sqlstore.SqlSessionService.get_session`."""
        return await self._core.get_session(  # type: ignore[return-value]
            app_name=app_name,
            user_id=user_id,
            session_id=session_id,
            config=config,  # type: ignore[arg-type]  # same fields as ours
        )

    async def list_sessions(
        self,
        *,
        app_name: str,
        user_id: str | None = None,
        limit: int | None = None,
        page_token: str | None = None,
    ) -> PagedListSessionsResponse:
        """See :meth:`adk_sqlstore.SqlSessionService.list_sessions`; ADK's call (no
        ``limit``) returns every session."""
        response: PagedListSessionsResponse = await self._core.list_sessions(  # type: ignore[assignment]
            app_name=app_name, user_id=user_id, limit=limit, page_token=page_token
        )
        return response

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        """See :meth:`adk_sqlstore.SqlSessionService.delete_session`."""
        await self._core.delete_session(app_name=app_name, user_id=user_id, session_id=session_id)

    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        """See :meth:`adk_sqlstore.SqlSessionService.get_user_state`."""
        return await self._core.get_user_state(app_name=app_name, user_id=user_id)

    async def get_app_state(self, *, app_name: str) -> dict[str, Any]:
        """See :meth:`adk_sqlstore.SqlSessionService.get_app_state`."""
        return await self._core.get_app_state(app_name=app_name)

    async def append_event(self, session: AdkSession, event: AdkEvent) -> AdkEvent:
        """See :meth:`adk_sqlstore.SqlSessionService.append_event` (ADK's semantics,
        ``temp:`` keys included).

        Raises:
            google.adk.errors.StaleSessionError: another writer appended first.
            google.adk.errors.SessionNotFoundError: the session was deleted.
        """
        with _adk_errors():
            appended: AdkEvent = await self._core.append_event(session, event)
        return appended

    async def forget_user(self, *, app_name: str, user_id: str) -> dict[str, int]:
        """See :meth:`adk_sqlstore.SqlSessionService.forget_user`."""
        return await self._core.forget_user(app_name=app_name, user_id=user_id)

    async def import_session(self, session: AdkSession, *, replace: bool = False) -> bool:
        """See :meth:`adk_sqlstore.SqlSessionService.import_session`."""
        return await self._core.import_session(session, replace=replace)


def _to_adk_entry(entry: Any) -> AdkMemoryEntry:
    return AdkMemoryEntry(
        content=genai_types.Content.model_validate(entry.content.model_dump(exclude_none=True)),
        custom_metadata=entry.custom_metadata,
        id=entry.id,
        author=entry.author,
        timestamp=entry.timestamp,
    )


class SqlMemoryService(BaseMemoryService, ClosedOnExit):
    """ADK ``BaseMemoryService`` on PostgreSQL or SQLite, backed by
    :class:`adk_sqlstore.SqlMemoryService` (see it for every behaviour: per-session
    upsert, BM25 search, the card-number filter, ingestion triggers).

    Args:
        uri: as for :class:`SqlSessionService`.
        engine: an engine you manage, e.g. ``session_service.engine``.
        redactors, mask_card_numbers: the ingestion filter.
        auto_migrate: as for :class:`SqlSessionService`.
        **kwargs: passed to ``create_async_engine``; ``agents_dir`` as for
            :class:`SqlSessionService`.

    Raises:
        SchemaNotMigratedError: as for :class:`SqlSessionService`.
    """

    def __init__(
        self,
        uri: str | None = None,
        *,
        engine: AsyncEngine | None = None,
        redactors: Iterable[Redactor] | None = None,
        mask_card_numbers: bool = True,
        auto_migrate: bool | None = None,
        **kwargs: Any,
    ) -> None:
        if engine is None:
            sessions = _from_uri(uri, auto_migrate, "memory service", kwargs)
        else:
            sessions = _AdkModels(engine, auto_migrate=auto_migrate)
        self._sessions = sessions
        self._core = CoreMemoryService(
            sessions.engine,
            redactors=redactors,
            mask_card_numbers=mask_card_numbers,
            sessions=sessions,
        )

    @classmethod
    def from_url(cls, url: str | None = None, **kwargs: Any) -> Self:
        """The same as ``SqlMemoryService(url, **kwargs)``."""
        return cls(url, **kwargs)

    @property
    def engine(self) -> AsyncEngine:
        """The engine this service runs on."""
        return self._core.engine

    @property
    def core(self) -> CoreMemoryService:
        """The core service doing the work."""
        return self._core

    async def close(self) -> None:
        """Dispose of the engine if this service created it."""
        await self._sessions.close()

    async def add_session_to_memory(self, session: AdkSession) -> None:
        """See :meth:`adk_sqlstore.SqlMemoryService.add_session_to_memory` (a session
        deleted since it was loaded raises ADK's ``SessionNotFoundError``)."""
        with _adk_errors():
            await self._core.add_session_to_memory(session)

    async def add_events_to_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        events: Sequence[AdkEvent],
        session_id: str | None = None,
        custom_metadata: Mapping[str, object] | None = None,
    ) -> None:
        """See :meth:`adk_sqlstore.SqlMemoryService.add_events_to_memory`."""
        await self._core.add_events_to_memory(
            app_name=app_name,
            user_id=user_id,
            events=events,
            session_id=session_id,
            custom_metadata=custom_metadata,
        )

    async def add_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        memories: Sequence[AdkMemoryEntry],
        custom_metadata: Mapping[str, object] | None = None,
    ) -> None:
        """See :meth:`adk_sqlstore.SqlMemoryService.add_memory`."""
        await self._core.add_memory(
            app_name=app_name, user_id=user_id, memories=memories, custom_metadata=custom_metadata
        )

    async def search_memory(
        self, *, app_name: str, user_id: str, query: str, limit: int = 10
    ) -> AdkSearchResponse:
        """See :meth:`adk_sqlstore.SqlMemoryService.search_memory`; returns ADK's
        ``SearchMemoryResponse`` of ADK ``MemoryEntry`` (``content`` a GenAI
        ``types.Content``)."""
        found = await self._core.search_memory(
            app_name=app_name, user_id=user_id, query=query, limit=limit
        )
        return AdkSearchResponse(memories=[_to_adk_entry(m) for m in found.memories])

    async def delete_memory(
        self, *, app_name: str, user_id: str, memory_id: str | None = None
    ) -> None:
        """Delete one memory by the id ``search_memory`` returned (no-op without one)."""
        if memory_id:
            await self._core.delete_memories(
                app_name=app_name, user_id=user_id, memory_ids=[memory_id]
            )

    async def delete_memories(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str | None = None,
        memory_ids: Sequence[str] | None = None,
    ) -> int:
        """See :meth:`adk_sqlstore.SqlMemoryService.delete_memories`."""
        return await self._core.delete_memories(
            app_name=app_name, user_id=user_id, session_id=session_id, memory_ids=memory_ids
        )

    async def close_session(self, *, app_name: str, user_id: str, session_id: str) -> IngestReport:
        """See :meth:`adk_sqlstore.SqlMemoryService.close_session`."""
        return await self._core.close_session(
            app_name=app_name, user_id=user_id, session_id=session_id
        )

    async def ingest_idle_sessions(
        self, idle_for: timedelta = timedelta(minutes=30), *, app_name: str | None = None
    ) -> IngestReport:
        """See :meth:`adk_sqlstore.SqlMemoryService.ingest_idle_sessions`."""
        return await self._core.ingest_idle_sessions(idle_for, app_name=app_name)

    async def forget_user(self, *, app_name: str, user_id: str) -> dict[str, int]:
        """See :meth:`adk_sqlstore.SqlMemoryService.forget_user`."""
        return await self._core.forget_user(app_name=app_name, user_id=user_id)
