"""Loading one session: its row, merged state and events, from one snapshot."""

from __future__ import annotations

import json
from typing import Any, TypedDict

from sqlalchemy.ext.asyncio import AsyncConnection

from ..models import GetSessionConfig
from ..sql import sessions as sql
from ..sql.hot_paths import load_session_rows
from ..sql.sessions import SessionRow
from ..state import merge_state
from ..validation import check_identifier
from .builders import gc_paused
from .codec import EventT, ListT, SessionCodec, SessionModels, SessionT, encode_page_token

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
    them, or a page of ``limit`` with the token of the next (inside the caller's read
    transaction: one snapshot)."""
    with gc_paused():  # thousands of objects, all kept
        rows, session_states = await sql.list_sessions(
            conn,
            app_name=app_name,
            user_id=user_id,
            after=after,
            limit=None if limit is None else limit + 1,
        )
        more = limit is not None and len(rows) > limit
        rows = rows[:limit]
        app = await sql.load_app_state(conn, app_name=app_name)
        # One page of every user's sessions: the state of those users only.
        wanted = None if user_id is not None or limit is None else {r.user_id for r in rows}
        users = await sql.load_user_states(
            conn, app_name=app_name, user_id=user_id, user_ids=wanted
        )
        # Each session its own state dict: the models keep the dict they are given.
        if app or users:
            states = [
                merge_state(
                    app, users.get(r.user_id, {}), session_states.get((r.user_id, r.id), {})
                )
                for r in rows
            ]
        else:
            states = [session_states.get((r.user_id, r.id)) or {} for r in rows]
        sessions = models.build_sessions(rows, states)
        last = rows[-1] if more else None
        token = encode_page_token(last.update_time, last.user_id, last.id) if last else None
        return models.list_response(sessions, token)
