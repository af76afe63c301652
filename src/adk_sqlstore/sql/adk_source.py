"""Reads of ADK's own session databases, for importing them (their tables, not ours).

ADK's ``SqliteSessionService`` layout is read with these statements, as ADK itself
reads it; its ``DatabaseSessionService`` layout is read through ADK's own ORM models
(:mod:`adk_sqlstore.adk.database_import`).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Select, column, func, select, table, text, tuple_
from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import ColumnElement, TextClause

__all__ = [
    "SQLITE_APP_STATES",
    "SQLITE_EVENTS",
    "SQLITE_SESSION",
    "SQLITE_SESSION_KEYS",
    "SQLITE_USER_STATES",
    "count_keys",
    "keys_after",
    "schema_version",
]

_sessions = table("sessions", column("app_name"), column("user_id"), column("id"))
_app_states = table("app_states", column("app_name"), column("state"))
_user_states = table("user_states", column("app_name"), column("user_id"), column("state"))

SQLITE_SESSION_KEYS = (_sessions.c.app_name, _sessions.c.user_id, _sessions.c.id)
"""The key columns of ``sessions`` (read in key order, in batches)."""

SQLITE_APP_STATES: Select[Any] = select(_app_states.c.app_name, _app_states.c.state)
"""Rows (app_name, state as JSON text)."""

SQLITE_USER_STATES: Select[Any] = select(
    _user_states.c.app_name, _user_states.c.user_id, _user_states.c.state
)
"""Rows (app_name, user_id, state as JSON text)."""

SQLITE_SESSION: TextClause = text(
    "SELECT state, update_time FROM sessions WHERE app_name = :app AND user_id = :user AND id = :id"
)
"""One session's state (JSON text) and update time (epoch seconds)."""

SQLITE_EVENTS: TextClause = text(
    "SELECT event_data FROM events WHERE app_name = :app AND user_id = :user"
    " AND session_id = :id ORDER BY timestamp, rowid"
)
"""One session's events as JSON text, in the order ADK reads them."""


def schema_version(connection: Connection) -> str | None:
    """``DatabaseSessionService``'s schema version from its ``adk_internal_metadata``
    table (``None`` when the row is missing)."""
    key = connection.dialect.identifier_preparer.quote("key")
    row = connection.execute(
        text(f"SELECT value FROM adk_internal_metadata WHERE {key} = 'schema_version'")
    ).first()
    return None if row is None else str(row[0])


def keys_after(
    keys: tuple[ColumnElement[Any], ...], after: tuple[str, ...] | None, limit: int
) -> Select[Any]:
    """The next ``limit`` values of the key columns ``keys`` after ``after``, in key
    order (keyset pagination over a sessions table of either layout)."""
    stmt = select(*keys).order_by(*keys).limit(limit)
    if after is not None:
        stmt = stmt.where(tuple_(*keys) > after)
    return stmt


def count_keys(keys: tuple[ColumnElement[Any], ...]) -> Select[Any]:
    """How many rows the key columns ``keys`` have."""
    return select(func.count()).select_from(select(*keys).subquery())
