"""The hot paths: an append, a session load and a session list, each one database
round trip.

On PostgreSQL each is a single statement run outside an explicit transaction, which
PostgreSQL runs atomically on one snapshot, sent to asyncpg directly
(:mod:`.pg_direct`); on SQLite each is one batch in aiosqlite's thread
(:mod:`.sqlite_thread`) running the whole transaction there. On MySQL and MariaDB
(no data-modifying CTEs, no ``RETURNING`` on ``UPDATE``) an append is a few statements
in the write transaction the caller opened (:meth:`adk_sqlstore.store.Store.autocommit`
opens one there), a load and a list one statement each. All write and read exactly
what the statements of :mod:`.sessions` would; the parameter names are shared
(SQLAlchemy's ``:name`` and sqlite3's named style agree)."""

from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.elements import TextClause

from .citus import APPEND_FUNCTION, on_citus
from .pg_direct import PgStatement, fetch
from .sessions import write_state
from .sqlite_thread import execute, fetch_all, fetch_one, rollback_quietly, run_batch

__all__ = ["AppendRow", "append_row", "list_session_rows", "load_session_rows"]


@dataclass(frozen=True)
class AppendRow:
    """Everything one append writes: the revision guard, the event row, state keys
    (sorted, values already JSON text)."""

    app_name: str
    user_id: str
    session_id: str
    expected_revision: int
    expected_incarnation: str | None
    update_time: float
    event_id: str
    invocation_id: str
    author: str
    timestamp: float
    data: str
    session_state: list[tuple[str, str]]
    user_state: list[tuple[str, str]]
    app_state: list[tuple[str, str]]
    now: float

    def params(self) -> dict[str, Any]:
        return {
            "app_name": self.app_name,
            "user_id": self.user_id,
            "session_id": self.session_id,
            "expected_revision": self.expected_revision,
            "expected_incarnation": self.expected_incarnation,
            "update_time": self.update_time,
            "event_id": self.event_id,
            "invocation_id": self.invocation_id,
            "author": self.author,
            "timestamp": self.timestamp,
            "data": self.data,
            "now": self.now,
        }


_BUMP = """
    UPDATE sqlstore_sessions SET revision = revision + 1, update_time = :update_time
    WHERE app_name = :app_name AND user_id = :user_id AND id = :session_id
      AND revision = :expected_revision
      AND (CAST(:expected_incarnation AS TEXT) IS NULL OR incarnation = :expected_incarnation)
    RETURNING revision
"""

_POSTGRES_APPEND = PgStatement(
    text(f"""
WITH bumped AS ({_BUMP}),
new_event AS (
    INSERT INTO sqlstore_events
        (app_name, user_id, session_id, seq, id, invocation_id, author, timestamp, data)
    SELECT :app_name, :user_id, :session_id, revision, :event_id, :invocation_id, :author,
           :timestamp, :data
    FROM bumped
),
new_session_state AS (
    INSERT INTO sqlstore_session_state (app_name, user_id, session_id, key, value)
    SELECT :app_name, :user_id, :session_id, s.key, s.value
    FROM bumped, unnest(CAST(:session_keys AS TEXT[]), CAST(:session_values AS TEXT[]))
         AS s(key, value)
    ON CONFLICT (app_name, user_id, session_id, key) DO UPDATE SET value = EXCLUDED.value
),
new_user_state AS (
    INSERT INTO sqlstore_user_state (app_name, user_id, key, value, update_time)
    SELECT :app_name, :user_id, s.key, s.value, :now
    FROM bumped, unnest(CAST(:user_keys AS TEXT[]), CAST(:user_values AS TEXT[])) AS s(key, value)
    ON CONFLICT (app_name, user_id, key)
    DO UPDATE SET value = EXCLUDED.value, update_time = EXCLUDED.update_time
),
new_app_state AS (
    INSERT INTO sqlstore_app_state (app_name, key, value, update_time)
    SELECT :app_name, s.key, s.value, :now
    FROM bumped, unnest(CAST(:app_keys AS TEXT[]), CAST(:app_values AS TEXT[])) AS s(key, value)
    ON CONFLICT (app_name, key)
    DO UPDATE SET value = EXCLUDED.value, update_time = EXCLUDED.update_time
)
SELECT revision FROM bumped
""")
)

_SQLITE_INSERT_EVENT = """
    INSERT INTO sqlstore_events
        (app_name, user_id, session_id, seq, id, invocation_id, author, timestamp, data)
    VALUES (:app_name, :user_id, :session_id, :seq, :event_id, :invocation_id, :author,
            :timestamp, :data)
"""
_SQLITE_SESSION_STATE = """
    INSERT INTO sqlstore_session_state (app_name, user_id, session_id, key, value)
    VALUES (:app_name, :user_id, :session_id, :key, :value)
    ON CONFLICT (app_name, user_id, session_id, key) DO UPDATE SET value = excluded.value
"""
_SQLITE_USER_STATE = """
    INSERT INTO sqlstore_user_state (app_name, user_id, key, value, update_time)
    VALUES (:app_name, :user_id, :key, :value, :now)
    ON CONFLICT (app_name, user_id, key)
    DO UPDATE SET value = excluded.value, update_time = excluded.update_time
"""
_SQLITE_APP_STATE = """
    INSERT INTO sqlstore_app_state (app_name, key, value, update_time)
    VALUES (:app_name, :key, :value, :now)
    ON CONFLICT (app_name, key)
    DO UPDATE SET value = excluded.value, update_time = excluded.update_time
"""


def _sqlite_append(db: Any, row: AppendRow) -> int | None:
    """One append as one SQLite transaction (a batch of :mod:`.sqlite_thread`)."""
    params = row.params()
    execute(db, "BEGIN IMMEDIATE")
    try:
        bumped = fetch_one(db, _BUMP, params)
        if bumped is None:
            execute(db, "ROLLBACK")
            return None
        revision = int(bumped[0])
        execute(db, _SQLITE_INSERT_EVENT, {**params, "seq": revision})
        for sql, items in (
            (_SQLITE_SESSION_STATE, row.session_state),
            (_SQLITE_USER_STATE, row.user_state),
            (_SQLITE_APP_STATE, row.app_state),
        ):
            if items:
                db.cursor().executemany(sql, [{**params, "key": k, "value": v} for k, v in items])
        execute(db, "COMMIT")
        return revision
    except BaseException:
        rollback_quietly(db)
        raise


_MYSQL_BUMP = text(
    _BUMP.replace("CAST(:expected_incarnation AS TEXT)", ":expected_incarnation").replace(
        "RETURNING revision", ""
    )
)
_MYSQL_INSERT_EVENT = text(_SQLITE_INSERT_EVENT)
_CITUS_APPEND = PgStatement(
    text(
        f"SELECT {APPEND_FUNCTION}(:app_name, :user_id, :session_id, :expected_revision,"
        " :expected_incarnation, :update_time, :event_id, :invocation_id, :author,"
        " :timestamp, :data, :session_keys, :session_values, :user_keys, :user_values,"
        " :app_keys, :app_values, :now)"
    )
)


async def _mysql_append(conn: AsyncConnection, row: AppendRow) -> int | None:
    """One append as statements of the caller's write transaction (MySQL, MariaDB):
    the guard's row lock is held from the bump to the commit."""
    params = row.params()
    bumped = await conn.execute(_MYSQL_BUMP, params)
    if bumped.rowcount != 1:  # matched rows (SQLAlchemy asks the server for found rows)
        return None
    revision = row.expected_revision + 1
    await conn.execute(_MYSQL_INSERT_EVENT, {**params, "seq": revision})
    await write_state(
        conn,
        app_name=row.app_name,
        user_id=row.user_id,
        session_id=row.session_id,
        app=dict(row.app_state),
        user=dict(row.user_state),
        session=dict(row.session_state),
        now=row.now,
    )
    return revision


async def append_row(conn: AsyncConnection, row: AppendRow) -> int | None:
    """Append one event under the revision guard, with its state keys, atomically.

    ``conn`` must be outside any transaction (PostgreSQL: in AUTOCOMMIT mode; on Citus
    the call of :data:`~.citus.APPEND_FUNCTION` is then delegated to the user's worker;
    inside a transaction it runs on the coordinator, each statement routed), or on
    MySQL and MariaDB inside a write transaction, which the caller commits.

    Returns:
        The new revision, or ``None`` when the guard matched no row (stale or absent).

    Raises:
        sqlalchemy.exc.IntegrityError: the event id is taken (nothing was written).
    """
    if conn.dialect.name == "postgresql":
        params = row.params()
        for scope in ("session", "user", "app"):
            items = getattr(row, f"{scope}_state")
            params[f"{scope}_keys"] = [k for k, _ in items]
            params[f"{scope}_values"] = [v for _, v in items]
        if on_citus(conn):  # delegated to the user's worker: one hop, one shard
            rows = await fetch(conn, _CITUS_APPEND, params)
            return None if not rows or rows[0][0] is None else int(rows[0][0])
        rows = await fetch(conn, _POSTGRES_APPEND, params)
        return int(rows[0][0]) if rows else None
    if conn.dialect.name == "mysql":
        return await _mysql_append(conn, row)
    return await run_batch(conn, _sqlite_append, row, in_loop=True)


_LOAD_SESSION = """
SELECT 0 AS part, incarnation AS k, CAST(NULL AS TEXT) AS v, revision AS n, update_time AS t
FROM sqlstore_sessions WHERE app_name = :app_name AND user_id = :user_id AND id = :session_id
UNION ALL
SELECT 1, key, value, NULL, NULL FROM sqlstore_app_state WHERE app_name = :app_name
UNION ALL
SELECT 2, key, value, NULL, NULL FROM sqlstore_user_state
WHERE app_name = :app_name AND user_id = :user_id
UNION ALL
SELECT 3, key, value, NULL, NULL FROM sqlstore_session_state
WHERE app_name = :app_name AND user_id = :user_id AND session_id = :session_id
UNION ALL
SELECT 4, NULL, data, seq, NULL FROM (
    SELECT data, seq FROM sqlstore_events
    WHERE app_name = :app_name AND user_id = :user_id AND session_id = :session_id
      AND timestamp >= :after_timestamp
    ORDER BY seq DESC LIMIT :num_recent_events
) recent
ORDER BY part, n
"""
_POSTGRES_LOAD_SESSION = PgStatement(text(_LOAD_SESSION))
_MYSQL_CASTS = {
    "AS TEXT)": "AS CHAR)",
    "AS BIGINT)": "AS SIGNED)",
    "AS DOUBLE PRECISION)": "AS DOUBLE)",
}


def _mysql(sql: str) -> TextClause:
    """A statement of this module for MySQL and MariaDB: their names for the types of
    its NULL columns, and the column ``key`` quoted (a reserved word there)."""
    for ours, theirs in _MYSQL_CASTS.items():
        sql = sql.replace(ours, theirs)
    return text(re.sub(r"(?<![\w`])key\b", "`key`", sql))


_MYSQL_LOAD_SESSION = _mysql(_LOAD_SESSION)


def _mysql_time(after: float) -> float:
    """``after_timestamp`` as MySQL takes it (no infinity, no NaN, which its driver
    writes as SQL that does not parse): -inf as the lowest double, and +inf and NaN,
    which no timestamp is at or after on the other backends, as the highest."""
    if math.isnan(after) or after == math.inf:
        return sys.float_info.max
    return max(after, -sys.float_info.max)


def _sqlite_load(db: Any, params: dict[str, Any]) -> list[tuple[Any, ...]]:
    return fetch_all(db, _LOAD_SESSION, params)


async def load_session_rows(
    conn: AsyncConnection,
    *,
    app_name: str,
    user_id: str,
    session_id: str,
    num_recent_events: int | None,
    after_timestamp: float | None,
) -> list[tuple[Any, ...]]:
    """A session's row, state and events in one statement (one snapshot).

    Rows are ``(part, k, v, n, t)``: part 0 the session (k incarnation, n revision, t
    update_time; absent if the session is), 1-3 app, user and session state (k key, v
    JSON text), 4 the events (v JSON text, n seq) oldest first.
    """
    after = -math.inf if after_timestamp is None else after_timestamp
    params: dict[str, Any] = {
        "app_name": app_name,
        "user_id": user_id,
        "session_id": session_id,
        "num_recent_events": 2**62 if num_recent_events is None else num_recent_events,
        "after_timestamp": after,
    }
    if conn.dialect.name == "postgresql":
        return cast(
            "list[tuple[Any, ...]]", list(await fetch(conn, _POSTGRES_LOAD_SESSION, params))
        )
    if conn.dialect.name == "mysql":
        params["after_timestamp"] = _mysql_time(after)
        return [tuple(r) for r in await conn.execute(_MYSQL_LOAD_SESSION, params)]
    return await run_batch(conn, _sqlite_load, params)


def _list_statement(*, one_user: bool, after: bool, page: bool) -> str:
    """The one statement of a session list (see :func:`list_session_rows`): the
    sessions' filter is the app, and the user when ``one_user``; ``after`` continues
    after a keyset position; ``page`` reads ``:limit`` sessions and the state of those
    sessions (and, listing every user, of their users) only."""
    where = "app_name = :app_name" + (" AND user_id = :user_id" if one_user else "")
    if after:
        where += " AND (update_time, user_id, id) > (:after_time, :after_user, :after_id)"
    columns = "user_id, id, incarnation, revision, update_time"
    listed = f"SELECT {columns} FROM sqlstore_sessions WHERE {where}"
    head = ""
    if page:
        head = f"WITH page AS ({listed} ORDER BY update_time, user_id, id LIMIT :limit)\n"
        listed = f"SELECT {columns} FROM page"
    users = " AND user_id = :user_id" if one_user else ""
    if page and not one_user:
        users = " AND user_id IN (SELECT user_id FROM page)"
    states = " AND st.user_id = :user_id" if one_user else ""
    if page:
        states += " AND (st.user_id, st.session_id) IN (SELECT user_id, id FROM page)"
    return f"""{head}SELECT 0 AS part, CAST(NULL AS TEXT) AS u, CAST(NULL AS TEXT) AS s, key AS k,
       value AS v, CAST(NULL AS BIGINT) AS n, CAST(NULL AS DOUBLE PRECISION) AS t
FROM sqlstore_app_state WHERE app_name = :app_name
UNION ALL
SELECT 1, user_id, NULL, key, value, NULL, NULL FROM sqlstore_user_state
WHERE app_name = :app_name{users}
UNION ALL
SELECT 2, user_id, id, incarnation, NULL, revision, update_time FROM ({listed}) listed
UNION ALL
SELECT 3, st.user_id, st.session_id, st.key, st.value, NULL, NULL
FROM sqlstore_session_state st WHERE st.app_name = :app_name{states}
ORDER BY t, u, s, k
"""


_LIST_SESSIONS = {
    (one_user, after, page): _list_statement(one_user=one_user, after=after, page=page)
    for one_user in (False, True)
    for after in (False, True)
    for page in (False, True)
}
_POSTGRES_LIST_SESSIONS = {shape: PgStatement(text(sql)) for shape, sql in _LIST_SESSIONS.items()}
_MYSQL_LIST_SESSIONS = {shape: _mysql(sql) for shape, sql in _LIST_SESSIONS.items()}


def _sqlite_list(db: Any, sql: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
    return db.execute(sql, params).fetchall()  # type: ignore[no-any-return]


async def list_session_rows(
    conn: AsyncConnection,
    *,
    app_name: str,
    user_id: str | None,
    after: tuple[float, str, str] | None,
    limit: int | None,
) -> list[tuple[Any, ...]]:
    """An app's (or one user's) sessions with their app, user and session state, in
    one statement (one snapshot), sessions by (update_time, user_id, id).

    ``conn`` must be outside any transaction (as for :func:`load_session_rows`).

    Args:
        user_id: one user's sessions; ``None``: every user of the app (this read spans
            the app's users).
        after: keyset pagination: only sessions after this (update_time, user_id, id).
        limit: at most this many sessions, and the state of those only.

    Returns:
        Rows ``(part, u, s, k, v, n, t)``: part 0 the app's state (k key, v JSON
        text); 1 user state (u user id, k, v); 2 the sessions (u user id, s session
        id, k incarnation, n revision, t update_time), in order among themselves; 3
        session state (u, s, k, v). State rows (t NULL) come together, first or last
        by dialect, each scope's keys in order (sorting by part too took about a
        quarter more of PostgreSQL's time).
    """
    shape = (user_id is not None, after is not None, limit is not None)
    params: dict[str, Any] = {"app_name": app_name, "user_id": user_id, "limit": limit}
    if after is not None:
        params["after_time"], params["after_user"], params["after_id"] = after
    if conn.dialect.name == "postgresql":
        return cast(
            "list[tuple[Any, ...]]", list(await fetch(conn, _POSTGRES_LIST_SESSIONS[shape], params))
        )  # asyncpg's records: tuples to read
    if conn.dialect.name == "mysql":
        return [tuple(r) for r in await conn.execute(_MYSQL_LIST_SESSIONS[shape], params)]
    return await run_batch(conn, _sqlite_list, _LIST_SESSIONS[shape], params)
