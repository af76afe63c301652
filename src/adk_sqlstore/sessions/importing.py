"""Bulk copy into the store: whole sessions and scope state as they are (from ADK
session JSON, ADK's own databases, another store)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from typing import Any

from ..errors import InvalidArgumentError, InvalidEventError
from ..models import SessionLike
from ..sql import sessions as sql
from ..sql.users import lock_user
from ..state import ScopedDelta, split_delta
from ..store import Store, retry_conflicts
from ..validation import (
    check_argument,
    check_identifier,
    check_session,
    check_state_delta,
    check_timestamp,
)
from .codec import EventT, ListT, SessionCodec, SessionT
from .reading import SessionKey, session_key

__all__ = ["import_session", "import_state"]


async def import_session(
    store: Store,
    codec: SessionCodec[SessionT, EventT, ListT],
    session: SessionLike,
    *,
    replace: bool = False,
) -> bool:
    """Store a whole session in one transaction; see
    :meth:`adk_sqlstore.SqlSessionService.import_session`."""
    check_session(session)
    check_argument("replace", replace, bool, "True or False")
    key = session_key(session.app_name, session.user_id, session.id)
    check_state_delta(session.state)
    rows = _event_rows(codec, key, session)
    now = time.time()
    update_time = session.last_update_time or (
        session.events[-1].timestamp if session.events else now
    )
    try:
        check_timestamp("last_update_time", update_time)
    except InvalidEventError as exc:  # a field of the session, not of an event
        raise InvalidArgumentError(f"session {exc}") from None
    create_time = min([update_time, *(e.timestamp for e in session.events[:1])])
    state = codec.encode_state(split_delta(session.state))

    async def write() -> bool:
        app, user = state.app, state.user
        async with store.transaction(write=True) as conn:
            await lock_user(
                conn,
                app_name=key["app_name"],
                user_id=key["user_id"],
                mode="exclusive",
                create=True,
                now=now,
            )
            replaced = await sql.session_revision(conn, **key) is not None
            if replaced:
                if not replace:
                    return False
                await sql.delete_session(conn, **key, ingestion_record=False)
            if not replace:  # a dump's copy of user: and app: keys is older than the store's
                stored = await sql.load_states(conn, **key)
                app = {k: v for k, v in app.items() if k not in stored.app}
                user = {k: v for k, v in user.items() if k not in stored.user}
            await sql.insert_session(
                conn,
                **key,
                create_time=create_time,
                update_time=update_time,
                revision=len(rows),
                incarnation=uuid.uuid4().hex,
            )
            await sql.insert_events(conn, rows)
            await sql.write_state(conn, **key, app=app, user=user, session=state.session, now=now)
            if replaced:  # last: a memory table comes after state in the lock order
                await sql.delete_ingestion_record(conn, **key)
        return True

    return await retry_conflicts(write)


def _event_rows(
    codec: SessionCodec[SessionT, EventT, ListT], key: SessionKey, session: SessionLike
) -> list[dict[str, Any]]:
    """The session's events as rows (checked and encoded).

    Raises:
        InvalidEventError, InvalidStateError: an event cannot be stored, or two have
            one id.
    """
    rows = []
    seen: set[str] = set()
    for seq, event in enumerate(session.events, start=1):
        check_state_delta(event.actions.state_delta)
        if event.id in seen:
            raise InvalidEventError(
                f"session {session.id!r} cannot be imported: two of its events have the"
                f" id {event.id!r}"
            )
        seen.add(event.id)
        rows.append(
            {
                **key,
                "seq": seq,
                "id": event.id,
                "invocation_id": event.invocation_id or "",
                "author": event.author or "",
                "timestamp": float(event.timestamp),
                "data": codec.encode_event(event),
            }
        )
    return rows


async def import_state(
    store: Store,
    codec: SessionCodec[SessionT, EventT, ListT],
    *,
    app_name: str,
    user_id: str | None,
    state: Mapping[str, Any],
    replace: bool = False,
) -> int:
    """Write app or one user's state in one transaction; see
    :meth:`adk_sqlstore.SqlSessionService.import_state`."""
    check_identifier("app_name", app_name)
    if user_id is not None:
        check_identifier("user_id", user_id)
    check_state_delta(state)
    check_argument("replace", replace, bool, "True or False")
    scope = ScopedDelta(app=dict(state)) if user_id is None else ScopedDelta(user=dict(state))
    encoded = codec.encode_state(scope)
    given = encoded.app if user_id is None else encoded.user

    async def write() -> int:
        values, now = given, time.time()
        async with store.transaction(write=True) as conn:
            if user_id is not None:
                await lock_user(
                    conn, app_name=app_name, user_id=user_id, mode="share", create=True, now=now
                )
            if not replace:
                existing = (
                    await sql.load_app_state(conn, app_name=app_name)
                    if user_id is None
                    else (await sql.load_user_states(conn, app_name=app_name, user_id=user_id)).get(
                        user_id, {}
                    )
                )
                values = {k: v for k, v in values.items() if k not in existing}
            await sql.write_state(
                conn,
                app_name=app_name,
                user_id=user_id or "",
                session_id="",
                app=values if user_id is None else {},
                user=values if user_id is not None else {},
                session={},
                now=now,
            )
        return len(values)

    return await retry_conflicts(write)
