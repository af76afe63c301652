"""The one seam where PostgreSQL and SQLite differ.

Everything else is written once in SQLAlchemy Core; a statement whose syntax differs
between the two dialects is built here, one function per statement: the upsert, and
full-text search over memories.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from sqlalchemy import Table, or_, text
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Dialect, Row
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.dml import Insert

from .text import MAX_QUERY_CHARS, query_terms, search_scope, valid_unicode

__all__ = ["BM25_B", "BM25_K1", "is_unique_violation", "search_memories", "upsert"]

T = TypeVar("T")

BM25_K1 = 1.2
MAX_SEARCH_RESULTS = 1000
"""Most memories one search returns, whatever ``limit`` asks for."""
BM25_B = 0.75


def upsert(
    dialect: Dialect,
    table: Table,
    *,
    key: Sequence[str],
    update: Sequence[str],
    only_if_changed: Sequence[str] | None = None,
) -> Insert:
    """``INSERT ... ON CONFLICT (key) DO UPDATE SET update = excluded.update``.

    Both PostgreSQL and SQLite (3.24+) support this statement; SQLAlchemy builds it
    with each dialect's own ``insert`` construct. Execute it with a list of row dicts
    (an executemany: the statement is compiled once and cached).

    Args:
        only_if_changed: update a conflicting row only when one of these columns
            differs from the new value (``IS DISTINCT FROM``).
    """
    module: Any
    if dialect.name == "postgresql":
        module = postgresql
    elif dialect.name == "sqlite":
        module = sqlite
    else:  # pragma: no cover - engine.normalize_url refuses other databases
        raise NotImplementedError(dialect.name)
    stmt = module.insert(table)
    where = None
    if only_if_changed:
        where = or_(*(table.c[c].is_distinct_from(stmt.excluded[c]) for c in only_if_changed))
    return stmt.on_conflict_do_update(  # type: ignore[no-any-return]
        index_elements=list(key),
        set_={name: stmt.excluded[name] for name in update},
        where=where,
    )


_MEMORY_COLUMNS = (
    "m.id, m.session_id, m.event_id, m.author, m.timestamp, m.content, m.custom_metadata"
)

# BM25 (Robertson & Zaragoza, "The Probabilistic Relevance Framework: BM25 and Beyond",
# 2009) over PostgreSQL's own lexemes: the query is stemmed and stripped of stop words by
# to_tsvector('english'), any term may match (OR), and each matching term adds
#   idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))
# with idf = ln(1 + (N - df + 0.5) / (df + 0.5)) over this user's memories only (N and
# avgdl from sqlstore_memory_stats, df counted among the matching rows). The app/user
# filter and the tsvector match are one WHERE clause: the planner combines the
# (app_name, user_id) index with the GIN index on search_vector (the tsquery is an
# InitPlan, computed once). Ties go to the newer memory.
_POSTGRES_SEARCH = text(f"""
WITH terms AS (
    SELECT DISTINCT lexeme AS term FROM unnest(to_tsvector('english'::regconfig, :query))
),
q AS (
    SELECT string_agg(
        '''' || replace(replace(term, '\\', '\\\\'), '''', '''''') || '''', ' | '
    )::tsquery AS tsq
    FROM terms
),
stats AS (
    SELECT greatest(doc_count, 1)::float8 AS n,
           greatest(lexeme_count::float8 / greatest(doc_count, 1), 1) AS avgdl
    FROM sqlstore_memory_stats WHERE app_name = :app_name AND user_id = :user_id
),
docs AS (
    SELECT m.pk, m.search_vector
    FROM sqlstore_memories m
    WHERE m.app_name = :app_name AND m.user_id = :user_id
      AND m.search_vector @@ (SELECT tsq FROM q)
),
hits AS (
    SELECT d.pk, length(d.search_vector) AS dl, u.lexeme,
           coalesce(array_length(u.positions, 1), 1) AS tf
    FROM docs d CROSS JOIN LATERAL unnest(d.search_vector) u
    WHERE u.lexeme IN (SELECT term FROM terms)
),
df AS (SELECT lexeme, count(*) AS df FROM hits GROUP BY lexeme),
scored AS (
    SELECT h.pk, sum(
        ln(1 + (s.n - df.df + 0.5) / (df.df + 0.5))
        * h.tf * ({BM25_K1} + 1)
        / (h.tf + {BM25_K1} * (1 - {BM25_B} + {BM25_B} * h.dl / s.avgdl))
    ) AS score
    FROM hits h JOIN df USING (lexeme) CROSS JOIN stats s
    GROUP BY h.pk
)
SELECT {_MEMORY_COLUMNS}, scored.score
FROM scored JOIN sqlstore_memories m ON m.pk = scored.pk
ORDER BY scored.score DESC, m.timestamp DESC, m.pk DESC
LIMIT :limit
""")

# SQLite: the same BM25 over FTS5's Porter-stemmed index, with per-user statistics.
# FTS5's own bm25() counts terms over the whole table (every user), and gives words found
# in more than half of the rows no weight at all, so a user's first memories would rank by
# length alone. Instead each query word is matched on its own, restricted to the user's
# rows by their scope token inside the MATCH expression: the counts give the word's
# document frequency among this user's memories (the IDF is computed in Python, SQLite
# having no guaranteed ln()), and a row's score is
#   (sum of the IDF of the words it contains) * (k1 + 1) / (1 + k1 * (1 - b + b * dl / avgdl))
# i.e. BM25 with term frequency taken as 1 (memories are short turns). N and avgdl come
# from sqlstore_memory_stats, dl is the row's token_count.
_SQLITE_MAX_TERMS = 64  # the rarest words of a query are kept; SQLite compounds <= 500


def _sqlite_hits(count: int, select: str) -> str:
    return " UNION ALL ".join(select.format(i=i) for i in range(count))


async def _search_sqlite(
    conn: AsyncConnection, app_name: str, user_id: str, terms: list[str], limit: int
) -> Sequence[Row[Any]]:
    stats = (
        await conn.execute(
            text(
                "SELECT doc_count, lexeme_count FROM sqlstore_memory_stats"
                " WHERE app_name = :app_name AND user_id = :user_id"
            ),
            {"app_name": app_name, "user_id": user_id},
        )
    ).first()
    if stats is None or stats.doc_count <= 0:
        return []
    n = float(stats.doc_count)
    avgdl = max(stats.lexeme_count / n, 1.0)
    scope = _fts5_string(search_scope(app_name, user_id))
    matches = [f"search_scope : {scope} AND text : {_fts5_string(t)}" for t in terms]
    weights: list[tuple[float, str]] = []
    for start in range(0, len(matches), 400):
        chunk = matches[start : start + 400]
        counts = await conn.execute(
            text(
                _sqlite_hits(
                    len(chunk),
                    "SELECT {i}, count(*) FROM sqlstore_memories_fts"
                    " WHERE sqlstore_memories_fts MATCH :m{i}",
                )
            ),
            {f"m{i}": m for i, m in enumerate(chunk)},
        )
        for i, df in counts.all():
            if df:
                weights.append((math.log(1 + (n - df + 0.5) / (df + 0.5)), chunk[i]))
    if not weights:
        return []
    weights = sorted(weights, reverse=True)[:_SQLITE_MAX_TERMS]
    hits = _sqlite_hits(
        len(weights),
        "SELECT rowid AS pk, :w{i} AS w FROM sqlstore_memories_fts"
        " WHERE sqlstore_memories_fts MATCH :m{i}",
    )
    sql = f"""
        WITH hits AS ({hits})
        SELECT {_MEMORY_COLUMNS},
               sum(hits.w) * ({BM25_K1} + 1)
               / (1 + {BM25_K1} * (1 - {BM25_B} + {BM25_B} * m.token_count / :avgdl)) AS score
        FROM hits JOIN sqlstore_memories m ON m.pk = hits.pk
        WHERE m.app_name = :app_name AND m.user_id = :user_id
        GROUP BY m.pk
        ORDER BY score DESC, m.timestamp DESC, m.pk DESC
        LIMIT :limit
    """
    params: dict[str, Any] = {
        "app_name": app_name,
        "user_id": user_id,
        "limit": limit,
        "avgdl": avgdl,
    }
    for i, (weight, match) in enumerate(weights):
        params[f"w{i}"] = weight
        params[f"m{i}"] = match
    return (await conn.execute(text(sql), params)).all()


def _fts5_string(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


async def search_memories(
    conn: AsyncConnection, *, app_name: str, user_id: str, query: str, limit: int
) -> Sequence[Row[Any]]:
    """Rank one user's memories against a natural-language query, best first.

    Any query term may match; stop words are ignored; no input raises (the query is
    never parsed as search syntax). Rows: id, session_id, event_id, author, timestamp,
    content, custom_metadata, score (higher is better).
    """
    query = valid_unicode(query[:MAX_QUERY_CHARS]).replace("\x00", " ")
    terms = query_terms(query)
    limit = min(limit, MAX_SEARCH_RESULTS)
    if not terms or limit <= 0:
        return []
    if conn.dialect.name == "postgresql":
        params = {
            "app_name": app_name,
            "user_id": user_id,
            "limit": limit,
            "query": query,
        }
        return (await conn.execute(_POSTGRES_SEARCH, params)).all()
    return await _search_sqlite(conn, app_name, user_id, terms, limit)


def is_unique_violation(exc: IntegrityError) -> bool:
    """Whether an ``IntegrityError`` is a duplicate key (and not, say, a NOT NULL or
    foreign key violation): SQLSTATE 23505 on PostgreSQL, "UNIQUE constraint failed"
    or "PRIMARY KEY" on SQLite."""
    orig = exc.orig
    sqlstate = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    if sqlstate is not None:
        return bool(sqlstate == "23505")
    message = str(orig)
    return "UNIQUE constraint failed" in message or "PRIMARY KEY must be unique" in message


# -- the hot paths: one append, one session load ----------------------------------------
#
# An append and a load are each one database round trip on PostgreSQL (a single statement
# outside an explicit transaction, which PostgreSQL runs atomically on one snapshot) and
# one hop to aiosqlite's worker thread on SQLite (the whole transaction runs there on the
# sqlite3 connection). Both write and read exactly what the generic queries in
# queries.py would; the parameter names are shared (SQLAlchemy's :name and sqlite3's
# named style agree).


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

_POSTGRES_APPEND = text(f"""
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


def _sqlite_append(db: sqlite3.Connection, row: AppendRow) -> int | None:
    """One append as one SQLite transaction, run in aiosqlite's worker thread."""
    params = row.params()
    db.execute("BEGIN IMMEDIATE")
    try:
        bumped = db.execute(_BUMP, params).fetchone()
        if bumped is None:
            db.execute("ROLLBACK")
            return None
        revision = int(bumped[0])
        db.execute(_SQLITE_INSERT_EVENT, {**params, "seq": revision})
        for sql, items in (
            (_SQLITE_SESSION_STATE, row.session_state),
            (_SQLITE_USER_STATE, row.user_state),
            (_SQLITE_APP_STATE, row.app_state),
        ):
            if items:
                db.executemany(sql, [{**params, "key": k, "value": v} for k, v in items])
        db.execute("COMMIT")
        return revision
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise


async def _in_sqlite_thread(conn: AsyncConnection, fn: Callable[..., T], *args: Any) -> T:
    """Run ``fn(sqlite3_connection, *args)`` in aiosqlite's worker thread: however many
    statements ``fn`` runs, it is one hop. sqlite3 errors come back wrapped as
    SQLAlchemy's (``IntegrityError``, ``OperationalError``, ...)."""
    raw = await conn.get_raw_connection()
    driver: Any = raw.driver_connection
    try:
        run = driver._execute  # aiosqlite: queue a function for its connection thread
        return cast(T, await run(fn, driver._conn, *args))
    except sqlite3.Error as exc:
        raise DBAPIError.instance(fn.__name__, None, exc, sqlite3.Error) from exc


async def append_row(conn: AsyncConnection, row: AppendRow) -> int | None:
    """Append one event under the revision guard, with its state keys, atomically.

    ``conn`` must be outside any transaction (PostgreSQL: in AUTOCOMMIT mode).

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
        revision: int | None = (await conn.execute(_POSTGRES_APPEND, params)).scalar_one_or_none()
        return revision
    return await _in_sqlite_thread(conn, _sqlite_append, row)


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
_POSTGRES_LOAD_SESSION = text(_LOAD_SESSION)


def _sqlite_load(db: sqlite3.Connection, params: dict[str, Any]) -> list[tuple[Any, ...]]:
    return db.execute(_LOAD_SESSION, params).fetchall()


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
    params = {
        "app_name": app_name,
        "user_id": user_id,
        "session_id": session_id,
        "num_recent_events": 2**62 if num_recent_events is None else num_recent_events,
        "after_timestamp": -math.inf if after_timestamp is None else after_timestamp,
    }
    if conn.dialect.name == "postgresql":
        return [tuple(r) for r in (await conn.execute(_POSTGRES_LOAD_SESSION, params)).all()]
    return await _in_sqlite_thread(conn, _sqlite_load, params)
