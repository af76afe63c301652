"""adk-sqlstore: durable sessions, scoped state and searchable memory for LLM agents.

A SQL-backed replacement for ADK's in-memory services, on PostgreSQL (asyncpg; Citus
too), MySQL or MariaDB (asyncmy), or an embedded SQLite file (aiosqlite)::

    from adk_sqlstore import SqlSessionService

    async with SqlSessionService.from_url("postgresql://localhost/agents") as sessions:
        session = await sessions.create_session(app_name="lunch-app", user_id="user-17")

The names below are imported on first use (PEP 562), so that importing a submodule,
such as the command line's entry point, stays cheap.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing at start-up
if TYPE_CHECKING:
    from typing import Any

    from .errors import (
        AdkSqlStoreError,
        AlreadyExistsError,
        ConcurrencyConflictError,
        ConfigurationError,
        DatabaseUnavailableError,
        EmbeddingError,
        GenerationError,
        InvalidArgumentError,
        InvalidEventError,
        InvalidIdentifierError,
        InvalidMemoryError,
        InvalidStateError,
        MigrationError,
        PoolTimeoutError,
        SchemaNotMigratedError,
        SearchLanguageWarning,
        SessionNotFoundError,
        StaleSessionError,
        TransientModelError,
        VectorSearchWarning,
    )
    from .generation import Fact, FactRevision, GenerationReport, MemoryGenerator, Topic
    from .memory import IngestEvery, IngestReport, MemoryCheckpoint, SqlMemoryService
    from .models import (
        Content,
        Event,
        EventActions,
        GetSessionConfig,
        ListSessionsResponse,
        MemoryEntry,
        Part,
        SearchMemoryResponse,
        Session,
    )
    from .sessions import PruneReport, SqlSessionService
    from .store import Store

_HOMES = {
    "errors": [
        "AdkSqlStoreError",
        "AlreadyExistsError",
        "ConcurrencyConflictError",
        "ConfigurationError",
        "DatabaseUnavailableError",
        "EmbeddingError",
        "GenerationError",
        "InvalidArgumentError",
        "InvalidEventError",
        "InvalidIdentifierError",
        "InvalidMemoryError",
        "InvalidStateError",
        "MigrationError",
        "PoolTimeoutError",
        "SchemaNotMigratedError",
        "SearchLanguageWarning",
        "SessionNotFoundError",
        "StaleSessionError",
        "TransientModelError",
        "VectorSearchWarning",
    ],
    "generation": ["Fact", "FactRevision", "GenerationReport", "MemoryGenerator", "Topic"],
    "memory": ["IngestEvery", "IngestReport", "MemoryCheckpoint", "SqlMemoryService"],
    "models": [
        "Content",
        "Event",
        "EventActions",
        "GetSessionConfig",
        "ListSessionsResponse",
        "MemoryEntry",
        "Part",
        "SearchMemoryResponse",
        "Session",
    ],
    "sessions": ["PruneReport", "SqlSessionService"],
    "store": ["Store"],
}
_MODULE_OF = {name: module for module, names in _HOMES.items() for name in names}

__all__ = [
    "AdkSqlStoreError",
    "AlreadyExistsError",
    "ConcurrencyConflictError",
    "ConfigurationError",
    "Content",
    "DatabaseUnavailableError",
    "EmbeddingError",
    "Event",
    "EventActions",
    "Fact",
    "FactRevision",
    "GenerationError",
    "GenerationReport",
    "GetSessionConfig",
    "IngestEvery",
    "IngestReport",
    "InvalidArgumentError",
    "InvalidEventError",
    "InvalidIdentifierError",
    "InvalidMemoryError",
    "InvalidStateError",
    "ListSessionsResponse",
    "MemoryCheckpoint",
    "MemoryEntry",
    "MemoryGenerator",
    "MigrationError",
    "Part",
    "PoolTimeoutError",
    "PruneReport",
    "SchemaNotMigratedError",
    "SearchLanguageWarning",
    "SearchMemoryResponse",
    "Session",
    "SessionNotFoundError",
    "SqlMemoryService",
    "SqlSessionService",
    "StaleSessionError",
    "Store",
    "Topic",
    "TransientModelError",
    "VectorSearchWarning",
]

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name == "telemetry":
        return importlib.import_module(".telemetry", __name__)
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'adk_sqlstore' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # the next access is a plain lookup
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
