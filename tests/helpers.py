"""Helpers shared by the test files: building events, reading text back, folding
state, running the CLI, and the API layers the contract suite runs over.

The contract suite: a behaviour that both API layers promise (the core services,
``adk_sqlstore.SqlSessionService``/``SqlMemoryService``, and the ADK classes,
``adk_sqlstore.adk.SqlSessionService``/``SqlMemoryService``) is tested once, through
the ``layer`` fixture (``tests/conftest.py``), which runs it four times: (core, ADK) x
(SQLite file, PostgreSQL). :class:`Layer` hides only what differs by design: the
event and config classes (ours or ``google.adk``'s), the error classes (ADK's own,
chained to ours), and where the revision of a session object is kept.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal

from typer.testing import CliRunner

from adk_sqlstore import (
    AlreadyExistsError,
    Event,
    GetSessionConfig,
    MemoryEntry,
    SessionNotFoundError,
    SqlMemoryService,
    SqlSessionService,
    StaleSessionError,
)
from adk_sqlstore.cli import app

__all__ = [
    "LAYERS",
    "Layer",
    "cli",
    "cli_apart",
    "fold",
    "open_layer",
    "runner",
    "text_of",
    "texts",
]

LayerName = Literal["core", "adk"]
LAYERS: tuple[LayerName, ...] = ("core", "adk")

runner = CliRunner(env={"COLUMNS": "200"})


def cli(*args: str, code: int = 0, stdin: str | None = None) -> str:
    """Run ``adk-sqlstore *args`` in-process; assert its exit code; return its output."""
    result = runner.invoke(app, list(args), input=stdin, catch_exceptions=False)
    assert result.exit_code == code, result.output
    return result.output


def cli_apart(*args: str, code: int = 0) -> tuple[str, str]:
    """As :func:`cli`, with standard output and standard error apart: (out, err)."""
    try:  # click 8.1 (typer 0.12) mixes them unless told
        apart = CliRunner(env={"COLUMNS": "200"}, mix_stderr=False)  # type: ignore[call-arg]
    except TypeError:  # click 8.2 and later (and typer's own copy) keep them apart
        apart = CliRunner(env={"COLUMNS": "200"})
    result = apart.invoke(app, list(args), catch_exceptions=False)
    assert result.exit_code == code, result.output
    return result.stdout, result.stderr


def text_of(event: Any) -> str:
    """The text of an event or a memory entry of either layer (parts joined by spaces)."""
    content = event.content
    if content is None or not content.parts:
        return ""
    return " ".join(p.text for p in content.parts if p.text)


def texts(found: Any) -> list[str]:
    """The texts of a ``search_memory`` response's memories, best first."""
    return [text_of(m) for m in found.memories]


def fold(events: Iterable[Any]) -> dict[str, Any]:
    """Session state as the fold of the events' ``actions.state_delta``."""
    state: dict[str, Any] = {}
    for event in events:
        state.update(event.actions.state_delta or {})
    return state


@dataclass
class Layer:
    """One API layer on one database, as the contract suite sees it."""

    name: LayerName
    url: str
    sessions: Any  # SqlSessionService of this layer
    memory: Any  # SqlMemoryService of this layer, on the same Store
    event_model: type[Any]
    config_model: type[Any]
    entry_model: type[Any]
    already_exists: type[Exception]
    stale: type[Exception]
    not_found: type[Exception]

    @property
    def core_sessions(self) -> SqlSessionService[Any, Any, Any]:
        """The core session service under this layer (for what ADK's interface lacks)."""
        core: SqlSessionService[Any, Any, Any] = (
            self.sessions if self.name == "core" else self.sessions.core
        )
        return core

    def event(
        self,
        text: str,
        *,
        author: str = "user",
        ts: float | None = None,
        delta: dict[str, Any] | None = None,
        **extra: Any,
    ) -> Any:
        """A text event of this layer's event class."""
        fields: dict[str, Any] = {
            "author": author,
            "invocation_id": "inv-1",
            "content": {
                "role": "user" if author == "user" else "model",
                "parts": [{"text": text}],
            },
            "actions": {"state_delta": delta or {}},
            **extra,
        }
        if ts is not None:
            fields["timestamp"] = ts
        return self.event_model.model_validate(fields)

    @property
    def core_memory(self) -> SqlMemoryService:
        """The core memory service under this layer (it returns reports and ids where
        ADK's interface returns ``None``)."""
        core: SqlMemoryService = self.memory if self.name == "core" else self.memory.core
        return core

    def memory_entry(self, **fields: Any) -> Any:
        """A ``MemoryEntry`` of this layer (``content`` given as a dict)."""
        return self.entry_model.model_validate(fields)

    def event_of(self, **fields: Any) -> Any:
        """An event of this layer's class validated from ``fields`` (author ``"user"``
        unless given; no content unless given)."""
        return self.event_model.model_validate({"author": "user", **fields})

    async def stored(self, app_name: str, user_id: str, session_id: str) -> Any:
        """The stored session, asserted to exist."""
        got = await self.sessions.get_session(
            app_name=app_name, user_id=user_id, session_id=session_id
        )
        assert got is not None, (app_name, user_id, session_id)
        return got

    def config(self, **fields: Any) -> Any:
        """A ``GetSessionConfig`` of this layer."""
        return self.config_model(**fields)

    def revision(self, session: Any) -> int:
        """The revision a session object was read at (events stored before it)."""
        if self.name == "core":
            return int(session.revision)
        marker: str = session._storage_update_marker  # ADK keeps it there, "inc:rev"
        return int(marker.rpartition(":")[2])

    def ours(self, error: BaseException) -> BaseException:
        """adk-sqlstore's own error behind ``error`` (ADK's errors chain to ours)."""
        if self.name == "adk":
            assert error.__cause__ is not None, f"{error!r} is not chained to our error"
            return error.__cause__
        return error

    def open_sessions(self) -> Any:
        """Another session service of this layer on the same database (its own
        engine): a second worker."""
        return type(self.sessions).from_url(self.url)


@asynccontextmanager
async def open_layer(name: LayerName, url: str) -> AsyncIterator[Layer]:
    """The services of layer ``name`` on ``url``, closed at the end."""
    if name == "core":
        sessions = SqlSessionService.from_url(url)
        async with sessions, SqlMemoryService(sessions.store) as memory:
            yield Layer(
                name,
                url,
                sessions,
                memory,
                Event,
                GetSessionConfig,
                MemoryEntry,
                AlreadyExistsError,
                StaleSessionError,
                SessionNotFoundError,
            )
        return
    from google.adk.errors import StaleSessionError as AdkStale
    from google.adk.errors.already_exists_error import AlreadyExistsError as AdkAlreadyExists
    from google.adk.errors.session_not_found_error import SessionNotFoundError as AdkNotFound
    from google.adk.events import Event as AdkEvent
    from google.adk.memory.memory_entry import MemoryEntry as AdkMemoryEntry
    from google.adk.sessions.base_session_service import GetSessionConfig as AdkConfig

    from adk_sqlstore.adk import SqlMemoryService as AdkMemory
    from adk_sqlstore.adk import SqlSessionService as AdkSessions

    adk_sessions = AdkSessions(url)
    adk_memory = AdkMemory(store=adk_sessions.store)
    try:
        yield Layer(
            name,
            url,
            adk_sessions,
            adk_memory,
            AdkEvent,
            AdkConfig,
            AdkMemoryEntry,
            AdkAlreadyExists,
            AdkStale,
            AdkNotFound,
        )
    finally:
        await adk_memory.close()
        await adk_sessions.close()
