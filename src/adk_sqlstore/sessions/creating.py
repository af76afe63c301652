"""Creating a session: its row and initial state in one transaction, under the user
lock (``"share"``: creates of one user run beside each other and beside appends)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from typing import Any

from ..errors import AlreadyExistsError
from ..sql import sessions as sql
from ..state import merge_state, split_delta
from ..store import Store, retry_conflicts
from ..validation import check_state_delta
from .codec import EncodedState, SessionCodec
from .reading import SessionKey, session_key

__all__ = ["create_session"]


async def create_session(
    store: Store,
    codec: SessionCodec[Any, Any, Any],
    *,
    app_name: str,
    user_id: str,
    state: Mapping[str, Any] | None,
    session_id: str | None,
) -> tuple[sql.SessionRow, dict[str, Any]]:
    """Store a new session and its initial state; see
    :meth:`adk_sqlstore.SqlSessionService.create_session`. Returns its row and merged
    state."""
    key = session_key(app_name, user_id, str(uuid.uuid4()) if session_id is None else session_id)
    check_state_delta(state)
    scoped = split_delta(state)
    encoded = codec.encode_state(scoped)
    now, incarnation = time.time(), uuid.uuid4().hex
    app, users = await retry_conflicts(lambda: _insert(store, key, encoded, now, incarnation))
    row = sql.SessionRow(app_name, user_id, key["session_id"], 0, now, incarnation)
    return row, merge_state(app, users.get(user_id, {}), scoped.session)


async def _insert(
    store: Store, key: SessionKey, encoded: EncodedState, now: float, incarnation: str
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The transaction: the user lock (the user's row made if absent), the session row,
    its state; the app's and the user's state as they now are."""

    def taken() -> AlreadyExistsError:
        return AlreadyExistsError(
            f"session {key['session_id']!r} already exists for app {key['app_name']!r} and"
            f" user {key['user_id']!r}"
        )

    user = {"app_name": key["app_name"], "user_id": key["user_id"]}
    async with store.transaction(write=True, on_duplicate=taken) as conn:
        await sql.insert_new_session(conn, **key, now=now, incarnation=incarnation)
        await sql.write_state(
            conn, **key, app=encoded.app, user=encoded.user, session=encoded.session, now=now
        )
        app = await sql.load_app_state(conn, app_name=key["app_name"])
        users = await sql.load_user_states(conn, **user)
    return app, users
