"""Errors raised by adk-sqlstore.

Every error derives from :class:`AdkSqlStoreError`. Errors that ADK also defines
(``AlreadyExistsError``, ``SessionNotFoundError``, ``StaleSessionError``) carry the
same names so that code written against ADK reads the same; the ADK drop-in classes
re-raise ADK's own types chained to these. Database driver, network and pool errors are mapped
to these in one place (:mod:`adk_sqlstore.failures`), wrapped with ``raise ... from
exc``, and never carry a database password in their message.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AdkSqlStoreError",
    "AlreadyExistsError",
    "ConcurrencyConflictError",
    "ConfigurationError",
    "DatabaseUnavailableError",
    "EmbeddingError",
    "GenerationError",
    "InvalidArgumentError",
    "InvalidArtifactError",
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
]


class AdkSqlStoreError(Exception):
    """Root of every error this library raises."""


class AlreadyExistsError(AdkSqlStoreError):
    """A session with this (app_name, user_id, session_id) already exists."""


class SessionNotFoundError(AdkSqlStoreError):
    """The session does not exist (never created, or deleted)."""


class StaleSessionError(AdkSqlStoreError):
    """The session object was loaded before another writer appended to it.

    Nothing was written. Reload the session with ``get_session`` and retry the turn.
    Follows ADK's ``google.adk.errors.StaleSessionError``.
    """

    def __init__(self, message: str, *, expected_revision: int, stored_revision: int) -> None:
        super().__init__(message)
        self.expected_revision = expected_revision
        self.stored_revision = stored_revision


class InvalidStateError(AdkSqlStoreError, ValueError):
    """A state key or value cannot be stored exactly as JSON.

    Attributes:
        key: the offending state key, with its scope prefix as the caller wrote it.
    """

    def __init__(self, message: str, *, key: str) -> None:
        super().__init__(message)
        self.key = key


class InvalidEventError(AdkSqlStoreError, ValueError):
    """An event cannot be stored: it does not serialise to JSON, or its id is taken."""


class InvalidIdentifierError(AdkSqlStoreError, ValueError):
    """An app_name, user_id or session id is not a storable identifier."""


class SchemaNotMigratedError(AdkSqlStoreError, ValueError):
    """The database schema is not at the revision this version of the library needs.

    Also a ``ValueError`` (the database given cannot be used as it is): ADK's server
    then stops at start-up with the message on one line (``Error: ...``).

    Attributes:
        current_revision: the database's Alembic revision, or ``None`` when it has none.
        head_revision: the revision this library needs.
    """

    def __init__(self, message: str, *, current_revision: str | None, head_revision: str) -> None:
        super().__init__(message)
        self.current_revision = current_revision
        self.head_revision = head_revision


class InvalidMemoryError(AdkSqlStoreError, ValueError):
    """A memory or event given to the memory service cannot be stored: not a
    ``MemoryEntry``/event (nor a dict of one), or a timestamp that is not ISO 8601.
    Nothing of the call is written."""


class InvalidArtifactError(AdkSqlStoreError, ValueError):
    """An artifact cannot be stored (over ``max_artifact_bytes``, or a part of a kind
    artifacts do not hold), or a version was deleted while it was read."""


class MigrationError(AdkSqlStoreError, RuntimeError):
    """A migration cannot run on this database (e.g. SQLite without FTS5)."""


class DatabaseUnavailableError(AdkSqlStoreError):
    """The database could not be reached or failed while running a statement.

    The original driver error is chained as ``__cause__``.
    """


class ConcurrencyConflictError(AdkSqlStoreError):
    """The call lost a race with another writer of the same rows, again and again.

    The database ended the call's transaction to break a deadlock (PostgreSQL SQLSTATE
    40P01, MySQL/MariaDB error 1213) or a serialization failure (40001), or the user
    was forgotten while the call waited for the user's lock. Nothing of the call was
    written: the whole transaction was rolled back. Idempotent calls (ingestion,
    ``add_memory``, ``add_events_to_memory``, ``delete_memories``, ``forget_user``,
    ``prune``, artifact saves, ...) already ran it again a few times
    (:func:`adk_sqlstore.store.retry_conflicts`) before raising this; run it again
    later. The driver's error, if any, is chained as ``__cause__``.
    """


class PoolTimeoutError(DatabaseUnavailableError):
    """Every pooled connection stayed in use for ``pool_timeout`` seconds: the call gave
    up waiting for one (raise ``pool_size``/``max_overflow``, or find what holds them)."""


class InvalidArgumentError(AdkSqlStoreError, ValueError):
    """An argument is not of the kind the call takes (its type or range); the message
    names it. Nothing was written. Also a ``ValueError``."""


class ConfigurationError(InvalidArgumentError):
    """A database URL or connection setting that cannot be used: the message says why,
    with any password hidden."""


class EmbeddingError(AdkSqlStoreError):
    """An embedder failed (its server answered with an error, or could not be
    reached) or returned vectors of the wrong number, length or values."""


class GenerationError(AdkSqlStoreError):
    """Memory generation failed for a session: its model failed or timed out, or
    answered with something that is not the JSON asked for. The message names the
    model and what went wrong, never the conversation's text. Nothing was written for
    that session's facts (its turns are stored as without generation), and the next
    run tries it again, up to its limit of attempts.

    Attributes:
        report: the failed run's ``GenerationReport`` (its model calls and tokens
            counted), when a run raised it; else ``None``.
    """

    report: Any = None


class SearchLanguageWarning(UserWarning):
    """A search found nothing, and memories of the user are indexed for another search
    language (or an older text analysis): they cannot match until they are re-indexed
    (``adk-sqlstore memory reindex``) or searched in their language."""


class VectorSearchWarning(UserWarning):
    """Hybrid search was asked for (an embedder is configured) but this database keeps
    no vectors (PostgreSQL without pgvector): memory search is lexical until pgvector
    is installed and ``adk-sqlstore memory embed`` has run."""


class TransientModelError(GenerationError):
    """A model call failed in a way that may pass on another try: the server answered
    HTTP 429, 500, 502, 503 or 504, or the connection failed or was reset. Within the
    generator's ``timeout`` the call is made again, after a growing wait (at least the
    server's ``Retry-After``); a :class:`GenerationError` is raised once it gives up.
    Your own chat model may raise it to have its call retried.

    Attributes:
        status: the HTTP status, or ``None`` for a connection that failed.
        retry_after: seconds the server asked to wait (``Retry-After``), or ``None``.
    """

    def __init__(
        self, message: str, *, status: int | None = None, retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after
