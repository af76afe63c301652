"""The ADK session service: ``google.adk.sessions.BaseSessionService`` over
:class:`adk_sqlstore.SqlSessionService`."""

from __future__ import annotations

from typing import Any, Self

from sqlalchemy.ext.asyncio import AsyncEngine

from ..sessions import AfterAppend
from ..sessions import SqlSessionService as CoreSessionService
from ..store import OnStore, Store
from ..validation import DEFAULT_MAX_EVENT_BYTES, DEFAULT_MAX_STATE_VALUE_BYTES
from ._google import AdkEvent, AdkGetSessionConfig, AdkSession, BaseSessionService
from .models import ADK_MODELS, PagedListSessionsResponse, adk_errors
from .uri import chosen_store

__all__ = ["SqlSessionService"]

CoreAdkSessions = CoreSessionService[AdkSession, AdkEvent, PagedListSessionsResponse]


class SqlSessionService(BaseSessionService, OnStore):
    """ADK ``BaseSessionService`` on PostgreSQL, MySQL/MariaDB or SQLite, backed by
    :class:`adk_sqlstore.SqlSessionService` (see it for every behaviour).

    Args:
        uri: a database URL, or an ADK service URI (``sqlstore+postgresql://...``,
            ``sqlstore+sqlite:///path``, ``sqlstore://``); ``None`` means
            ``$ADK_SQLSTORE_DATABASE_URL``, else the embedded SQLite file. A
            :class:`~adk_sqlstore.Store` or an engine here is taken as ``store``.
        store: a :class:`~adk_sqlstore.Store` (or an engine) you manage, instead of
            ``uri`` (not closed by :meth:`close`).
        engine: the same as ``store``, for an engine.
        auto_migrate: as for :meth:`adk_sqlstore.Store.from_url` (default: SQLite yes,
            PostgreSQL no).
        after_append: called after each committed append, e.g.
            :class:`~adk_sqlstore.IngestEvery`.
        memory_checkpoint: the former name of ``after_append`` (deprecated).
        max_event_bytes: the largest event (default 8 MiB), as for
            :class:`adk_sqlstore.SqlSessionService`.
        max_state_value_bytes: the largest state value (default 1 MiB), likewise.
        **settings: connection settings (:mod:`adk_sqlstore.settings`), with a URL
            only; ``agents_dir`` means ADK's server (its service registry) is building
            the service.

    Raises:
        InvalidArgumentError: more than one of ``uri``, ``store`` and ``engine``, or
            connection settings with a store or engine.
        SchemaNotMigratedError: built by ADK's server (``adk web``, ``adk api_server``)
            on a database that is not migrated and may not migrate itself: the server
            stops at start-up with this one line, naming the command to run.
    """

    def __init__(
        self,
        uri: str | Store | AsyncEngine | None = None,
        *,
        store: Store | AsyncEngine | None = None,
        engine: AsyncEngine | None = None,
        auto_migrate: bool | None = None,
        after_append: AfterAppend | None = None,
        memory_checkpoint: AfterAppend | None = None,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
        max_state_value_bytes: int = DEFAULT_MAX_STATE_VALUE_BYTES,
        **settings: Any,
    ) -> None:
        chosen, owns = chosen_store(
            "session service",
            uri,
            store=store,
            engine=engine,
            auto_migrate=auto_migrate,
            settings=settings,
        )
        self._use_store(chosen, owns=owns)
        self._core: CoreAdkSessions = CoreSessionService(
            self._store,
            models=ADK_MODELS,
            after_append=after_append,
            memory_checkpoint=memory_checkpoint,
            max_event_bytes=max_event_bytes,
            max_state_value_bytes=max_state_value_bytes,
        )

    @classmethod
    def from_url(cls, url: str | None = None, **kwargs: Any) -> Self:
        """The same as ``SqlSessionService(url, **kwargs)``."""
        return cls(url, **kwargs)

    @property
    def core(self) -> CoreAdkSessions:
        """The core service doing the work (it returns ADK types here), for what ADK's
        interface lacks: ``prune``, ``import_state``, ``iter_sessions``, ..."""
        return self._core

    async def prepare_tables(self) -> None:
        """Make the schema ready now rather than at the first call (as ADK's
        ``DatabaseSessionService.prepare_tables``): migrates it when ``auto_migrate``
        is on, else checks it; safe to call again (a no-op then).

        Raises:
            SchemaNotMigratedError: the database is behind and ``auto_migrate`` is off.
        """
        await self._core.ensure_schema()

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
        with adk_errors():
            return await self._core.create_session(
                app_name=app_name, user_id=user_id, state=state, session_id=session_id
            )

    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: AdkGetSessionConfig | None = None,
    ) -> AdkSession | None:
        """See :meth:`adk_sqlstore.SqlSessionService.get_session`."""
        return await self._core.get_session(
            app_name=app_name, user_id=user_id, session_id=session_id, config=config
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
        return await self._core.list_sessions(
            app_name=app_name, user_id=user_id, limit=limit, page_token=page_token
        )

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
        with adk_errors():
            return await self._core.append_event(session, event)

    async def forget_user(self, *, app_name: str, user_id: str) -> dict[str, int]:
        """See :meth:`adk_sqlstore.SqlSessionService.forget_user`."""
        return await self._core.forget_user(app_name=app_name, user_id=user_id)

    async def import_session(self, session: AdkSession, *, replace: bool = False) -> bool:
        """See :meth:`adk_sqlstore.SqlSessionService.import_session`."""
        return await self._core.import_session(session, replace=replace)
