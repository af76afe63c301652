"""adk-sqlstore: durable sessions, scoped state and searchable memory for LLM agents.

A SQL-backed replacement for ADK's in-memory services, on PostgreSQL (asyncpg) or an
embedded SQLite file (aiosqlite)::

    from adk_sqlstore import SqlSessionService

    async with SqlSessionService.from_url("postgresql://localhost/agents") as sessions:
        session = await sessions.create_session(app_name="lunch-app", user_id="user-17")
"""

from .errors import (
    AdkSqlStoreError,
    AlreadyExistsError,
    DatabaseUnavailableError,
    InvalidEventError,
    InvalidIdentifierError,
    InvalidStateError,
    PoolTimeoutError,
    SchemaNotMigratedError,
    SessionNotFoundError,
    StaleSessionError,
)
from .memory import IngestReport, MemoryCheckpoint, SqlMemoryService
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

__all__ = [
    "AdkSqlStoreError",
    "AlreadyExistsError",
    "Content",
    "DatabaseUnavailableError",
    "Event",
    "EventActions",
    "GetSessionConfig",
    "IngestReport",
    "InvalidEventError",
    "InvalidIdentifierError",
    "InvalidStateError",
    "ListSessionsResponse",
    "MemoryCheckpoint",
    "MemoryEntry",
    "Part",
    "PoolTimeoutError",
    "PruneReport",
    "SchemaNotMigratedError",
    "SearchMemoryResponse",
    "Session",
    "SessionNotFoundError",
    "SqlMemoryService",
    "SqlSessionService",
    "StaleSessionError",
]

__version__ = "0.1.0"
