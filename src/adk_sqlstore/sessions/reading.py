"""Loading one session: its row, merged state and events, from one snapshot."""

from __future__ import annotations

import json
from typing import Any, TypedDict

from sqlalchemy.ext.asyncio import AsyncConnection

from ..models import GetSessionConfig
from ..sql.hot_paths import list_session_rows, load_session_rows
from ..sql.sessions import SessionRow
from ..state import merge_state
from ..validation import check_identifier
from .builders import gc_paused
from .codec import (
    EventT,
    ListedRow,
    ListT,
    SessionCodec,
    SessionModels,
    SessionT,
    encode_page_token,
)

__all__ = ["SessionKey", "list_page", "read_session", "session_key"]

_ALL_EVENTS = 2**31  # a num_recent_events at least this large means "all events"


class SessionKey(TypedDict):
    """A session's address, as the statements take it."""

    app_name: str
    user_id: str
    session_id: str


def session_key(app_name: object, user_id: object, session_id: object) -> SessionKey:
    """The checked address of a session.

    Raises:
        InvalidIdentifierError: an identifier is not a non-empty string of at most 255
            UTF-8 bytes without NUL.
    """
    return {
        "app_name": check_identifier("app_name", app_name),
        "user_id": check_identifier("user_id", user_id),
        "session_id": check_identifier("session_id", session_id),
    }


async def read_session(
    conn: AsyncConnection,
    key: SessionKey,
    codec: SessionCodec[SessionT, EventT, ListT],
    config: GetSessionConfig | None = None,
) -> SessionT | None:
    """The session at ``key`` with its merged state and events (oldest first), as the
    codec's models, read on ``conn`` (outside a transaction: one statement, one
    snapshot; or inside the caller's).

    Args:
        config: ``num_recent_events`` keeps the newest N events (the statement reads N
            rows whatever the history length), ``after_timestamp`` those at or after a
            time; both combine. State is the whole fold whatever ``config`` limits.

    Returns:
        The session, or ``None`` when it does not exist for this app and user.
    """
    num_recent = config.num_recent_events if config else None
    if num_recent is not None and num_recent >= _ALL_EVENTS:
        num_recent = None
    rows = await load_session_rows(
        conn,
        **key,
        num_recent_events=num_recent,
        after_timestamp=config.after_timestamp if config else None,
    )
    if not rows or rows[0][0] != 0:
        return None
    _, incarnation, _, revision, update_time = rows[0]
    scopes: tuple[dict[str, Any], ...] = ({}, {}, {})
    texts: list[str] = []
    for part, k, v, _, _ in rows[1:]:
        if part == 4:
            texts.append(v)
        else:
            scopes[part - 1][k] = json.loads(v)
    row = SessionRow(
        key["app_name"], key["user_id"], key["session_id"], revision, update_time, incarnation
    )
    return codec.models.build_session(row, merge_state(*scopes), codec.decode_events(texts))


async def list_page(
    conn: AsyncConnection,
    models: SessionModels[SessionT, EventT, ListT],
    *,
    app_name: str,
    user_id: str | None,
    limit: int | None,
    after: tuple[float, str, str] | None,
) -> ListT:
    """Sessions without events, by (update_time, user_id, id), after ``after``: all of
    them, or a page of ``limit`` with the token of the next, read in one statement on
    ``conn`` (outside a transaction: one snapshot)."""
    with gc_paused():  # thousands of objects, all kept
        rows = await list_session_rows(
            conn,
            app_name=app_name,
            user_id=user_id,
            after=after,
            limit=None if limit is None else limit + 1,
        )
        app, users, session_states, listed = _parse_listing(rows)
        del rows  # read: the rows' tuples go before the objects are made
        more = limit is not None and len(listed) > limit
        if more:
            del listed[limit:]
        states = _listed_states(listed, app, users, session_states)
        sessions = models.build_listed(app_name, listed, states)
        last = listed[-1] if more else None
        token = encode_page_token(last[4], last[0], last[1]) if last else None
        return models.list_response(sessions, token)


def _parse_listing(
    rows: list[tuple[Any, ...]],
) -> tuple[
    dict[str, Any],
    dict[str, dict[str, Any]],
    dict[tuple[str, str], dict[str, Any]],
    list[ListedRow],
]:
    """The app state, user states, session states and listed sessions of the rows of
    :func:`~adk_sqlstore.sql.hot_paths.list_session_rows`."""
    app: dict[str, Any] = {}
    users: dict[str, dict[str, Any]] = {}
    session_states: dict[tuple[str, str], dict[str, Any]] = {}
    listed: list[ListedRow] = []
    same: dict[str, str] = {}  # one str object per user id, not one per session
    for part, u, s, k, v, n, t in rows:
        if part == 2:
            listed.append((same.setdefault(u, u), s, k, n, t))
        elif part == 3:
            session_states.setdefault((u, s), {})[k] = json.loads(v)
        elif part == 1:
            users.setdefault(u, {})[k] = json.loads(v)
        else:
            app[k] = json.loads(v)
    return app, users, session_states, listed


def _listed_states(
    listed: list[ListedRow],
    app: dict[str, Any],
    users: dict[str, dict[str, Any]],
    session_states: dict[tuple[str, str], dict[str, Any]],
) -> list[dict[str, Any]]:
    """Each listed session's merged state, its own dict (the models keep the dict they
    are given): :func:`merge_state` of its scopes, the prefixed ``app:`` and ``user:``
    keys made once per user rather than once per session."""
    get = session_states.get
    none: dict[str, Any] = {}
    shared = {u: merge_state(app, user, {}) for u, user in users.items()}
    app_only = merge_state(app, {}, {})
    # Session keys first, then app:, then user: keys, as merge_state orders them.
    return [{**get((u, s), none), **shared.get(u, app_only)} for u, s, _, _, _ in listed]
