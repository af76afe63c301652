"""The stores measured side by side, behind one small interface.

* ``core``: adk-sqlstore's own API (:class:`adk_sqlstore.SqlSessionService`);
* ``adk classes``: adk-sqlstore's ADK drop-in (:mod:`adk_sqlstore.adk`), ADK types;
* ``ADK``: google-adk's own ``DatabaseSessionService`` on the same database;
* ``raw``: the floor: the same work with the bare driver (asyncpg, or sqlite3) and no
  ORM or models: one transaction with a conditional revision update and one event
  insert per append; one ordered select plus JSON decoding per load;
* ``sqlspec``: a peer, sqlspec's ADK extension (``SQLSpecSessionService``) on asyncpg
  or aiosqlite, on the same database (the ``bench`` extra pins its version), ADK types.

A contender's ``notes`` say where it behaves differently from the others, as found by
reading its source or by running it; the tables print them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sqlite3
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.engine import make_url

from adk_sqlstore import Event as CoreEvent
from adk_sqlstore import EventActions as CoreActions
from adk_sqlstore import GetSessionConfig as CoreConfig
from adk_sqlstore import Session as CoreSession
from adk_sqlstore import SqlSessionService
from adk_sqlstore.urls import normalize_url

APP = "bench"


def text_of(n: int) -> str:
    return f"message {n}: could you order the usual vegetarian thali for lunch today?"


class Contender:
    """One store. Sessions are handles the contender understands."""

    name = ""

    def __init__(self) -> None:
        self.notes: list[str] = []

    async def open(self, url: str) -> None: ...

    async def close(self) -> None: ...

    async def create(self, user: str) -> Any: ...

    def make_event(self, n: int) -> Any: ...

    async def append(self, session: Any, event: Any) -> None: ...

    async def load(self, user: str, session_id: str, recent: int | None = None) -> int: ...

    async def list(self, user: str) -> int: ...

    async def bulk(self, user: str, count: int) -> str:
        """A session with ``count`` events, written as fast as the store allows."""
        session = await self.create(user)
        for n in range(count):
            await self.append(session, self.make_event(n))
        return self.session_id(session)

    def session_id(self, session: Any) -> str:
        return str(session.id)


class ServiceContender(Contender):
    """A store driven through a session service's API on ``self.service``."""

    service: Any

    def config(self, recent: int) -> Any:
        """The service's ``GetSessionConfig`` for the newest ``recent`` events."""
        raise NotImplementedError

    async def close(self) -> None:
        await self.service.close()

    async def create(self, user: str) -> Any:
        return await self.service.create_session(app_name=APP, user_id=user)

    async def append(self, session: Any, event: Any) -> None:
        await self.service.append_event(session, event)

    async def load(self, user: str, session_id: str, recent: int | None = None) -> int:
        got = await self.service.get_session(
            app_name=APP,
            user_id=user,
            session_id=session_id,
            config=self.config(recent) if recent is not None else None,
        )
        assert got is not None
        return len(got.events)

    async def list(self, user: str) -> int:
        return len((await self.service.list_sessions(app_name=APP, user_id=user)).sessions)


class ImportingContender(ServiceContender):
    """A store of ours: a bulk session is written in one ``import_session``."""

    def session_model(self) -> Any:
        """The Session class the service imports."""
        raise NotImplementedError

    async def bulk(self, user: str, count: int) -> str:
        events = [self.make_event(n) for n in range(count)]
        for n, event in enumerate(events):
            event.timestamp = 1.7e9 + n
        session = self.session_model()(
            id=str(uuid.uuid4()), app_name=APP, user_id=user, events=events
        )
        await self.service.import_session(session)
        return str(session.id)


class Core(ImportingContender):
    name = "core"
    service: SqlSessionService

    async def open(self, url: str) -> None:
        self.service = SqlSessionService.from_url(url, auto_migrate=True)

    def config(self, recent: int) -> Any:
        return CoreConfig(num_recent_events=recent)

    def make_event(self, n: int) -> Any:
        delta = {"turn": n} if n % 5 == 0 else {}
        return CoreEvent(
            author="user",
            invocation_id=f"i{n}",
            actions=CoreActions(state_delta=delta),
            content={"role": "user", "parts": [{"text": text_of(n)}]},
        )

    def session_model(self) -> Any:
        return CoreSession


def adk_event(n: int) -> Any:
    from google.adk.events import Event, EventActions
    from google.genai import types

    delta = {"turn": n} if n % 5 == 0 else {}
    return Event(
        author="user",
        invocation_id=f"i{n}",
        actions=EventActions(state_delta=delta),
        content=types.Content(role="user", parts=[types.Part(text=text_of(n))]),
    )


class AdkTypes(ServiceContender):
    """A store that takes and returns ADK's own types."""

    def config(self, recent: int) -> Any:
        from google.adk.sessions.base_session_service import GetSessionConfig

        return GetSessionConfig(num_recent_events=recent)

    def make_event(self, n: int) -> Any:
        return adk_event(n)


class AdkClasses(AdkTypes, ImportingContender):
    name = "adk classes"

    async def open(self, url: str) -> None:
        from adk_sqlstore.adk import SqlSessionService as AdkSqlSessionService

        self.service = AdkSqlSessionService(url, auto_migrate=True)

    def session_model(self) -> Any:
        from google.adk.sessions import Session

        return Session


class AdkDatabase(AdkTypes):
    name = "ADK DatabaseSessionService"

    async def open(self, url: str) -> None:
        from google.adk.sessions import DatabaseSessionService

        self.service = DatabaseSessionService(
            db_url=normalize_url(url).render_as_string(hide_password=False)
        )

    async def bulk(self, user: str, count: int) -> str:
        """Rows written with ADK's own ORM classes, as its append would write them."""
        from google.adk.sessions.schemas.v1 import StorageEvent

        session = await self.create(user)
        factory = self.service.database_session_factory
        for start in range(0, count, 5000):
            async with factory() as db:
                for n in range(start, min(start + 5000, count)):
                    event = self.make_event(n)
                    event.timestamp = 1.7e9 + n
                    db.add(StorageEvent.from_event(session, event))
                await db.commit()
        return str(session.id)


_RAW_BUMP = (
    "UPDATE sqlstore_sessions SET revision = revision + 1, update_time = {ts} WHERE app_name"
    " = {a} AND user_id = {u} AND id = {s} AND revision = {r} RETURNING revision"
)
_RAW_INSERT = (
    "INSERT INTO sqlstore_events (app_name, user_id, session_id, seq, id, invocation_id,"
    " author, timestamp, data) VALUES ({a}, {u}, {s}, {seq}, {id}, {inv}, {au}, {ts}, {d})"
)
_RAW_LOAD = (
    "SELECT data FROM sqlstore_events WHERE app_name = {a} AND user_id = {u} AND session_id"
    " = {s} ORDER BY seq"
)
_RAW_RECENT = (
    "SELECT data FROM sqlstore_events WHERE app_name = {a} AND user_id = {u} AND session_id"
    " = {s} ORDER BY seq DESC LIMIT {n}"
)
_RAW_LIST = (
    "SELECT id, revision, update_time FROM sqlstore_sessions WHERE app_name = {a} AND user_id"
    " = {u} ORDER BY update_time, id"
)
_RAW_CREATE = (
    "INSERT INTO sqlstore_sessions (app_name, user_id, id, revision, create_time, update_time,"
    " incarnation) VALUES ({a}, {u}, {s}, 0, {t}, {t}, '')"
)
_PG = {"a": "$1", "u": "$2", "s": "$3"}


def raw_event(n: int) -> tuple[str, str, float, str]:
    event_id = str(uuid.uuid4())
    data = json.dumps(
        {
            "id": event_id,
            "invocation_id": f"i{n}",
            "author": "user",
            "timestamp": time.time(),
            "content": {"role": "user", "parts": [{"text": text_of(n)}]},
        }
    )
    return event_id, f"i{n}", time.time(), data


class RawPostgres(Contender):
    name = "raw"

    async def open(self, url: str) -> None:
        import asyncpg

        dsn = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
        self.pool = await asyncpg.create_pool(dsn, min_size=1, max_size=20)

    async def close(self) -> None:
        await self.pool.close()

    async def create(self, user: str) -> Any:
        session_id = str(uuid.uuid4())
        await self.pool.execute(
            _RAW_CREATE.format(**_PG, t="$4"), APP, user, session_id, time.time()
        )
        return {"user": user, "id": session_id, "revision": 0}

    def session_id(self, session: Any) -> str:
        return str(session["id"])

    def make_event(self, n: int) -> Any:
        return raw_event(n)

    async def append(self, session: Any, event: Any) -> None:
        event_id, invocation_id, timestamp, data = event
        async with self.pool.acquire() as conn, conn.transaction():
            revision = await conn.fetchval(
                _RAW_BUMP.format(**_PG, ts="$4", r="$5"),
                APP,
                session["user"],
                session["id"],
                timestamp,
                session["revision"],
            )
            if revision is None:
                raise RuntimeError("stale")
            await conn.execute(
                _RAW_INSERT.format(**_PG, seq="$4", id="$5", inv="$6", au="$7", ts="$8", d="$9"),
                APP,
                session["user"],
                session["id"],
                revision,
                event_id,
                invocation_id,
                "user",
                timestamp,
                data,
            )
        session["revision"] = revision

    async def load(self, user: str, session_id: str, recent: int | None = None) -> int:
        if recent is None:
            rows = await self.pool.fetch(_RAW_LOAD.format(**_PG), APP, user, session_id)
        else:
            rows = await self.pool.fetch(
                _RAW_RECENT.format(**_PG, n="$4"), APP, user, session_id, recent
            )
        return len([json.loads(r[0]) for r in rows])

    async def list(self, user: str) -> int:
        return len(await self.pool.fetch(_RAW_LIST.format(**_PG), APP, user))


_LITE = {"a": "?", "u": "?", "s": "?"}


class RawSqlite(Contender):
    """sqlite3, synchronous and in-process: WAL, synchronous=NORMAL, BEGIN IMMEDIATE."""

    name = "raw"

    async def open(self, url: str) -> None:
        self.path = make_url(url).database
        self.local: dict[int, sqlite3.Connection] = {}

    def db(self) -> sqlite3.Connection:
        import threading

        key = threading.get_ident()
        if key not in self.local:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA busy_timeout=30000")
            self.local[key] = conn
        return self.local[key]

    async def close(self) -> None:
        for conn in self.local.values():
            conn.close()

    async def create(self, user: str) -> Any:
        session_id = str(uuid.uuid4())
        self.db().execute(
            _RAW_CREATE.format(**_LITE, t="?"), (APP, user, session_id, time.time(), time.time())
        )
        return {"user": user, "id": session_id, "revision": 0}

    def session_id(self, session: Any) -> str:
        return str(session["id"])

    def make_event(self, n: int) -> Any:
        return raw_event(n)

    def _append(self, session: Any, event: Any) -> None:
        event_id, invocation_id, timestamp, data = event
        db = self.db()
        db.execute("BEGIN IMMEDIATE")
        row = db.execute(
            _RAW_BUMP.format(**_LITE, ts="?", r="?"),
            (timestamp, APP, session["user"], session["id"], session["revision"]),
        ).fetchone()
        if row is None:
            db.execute("ROLLBACK")
            raise RuntimeError("stale")
        db.execute(
            _RAW_INSERT.format(**_LITE, seq="?", id="?", inv="?", au="?", ts="?", d="?"),
            (
                APP,
                session["user"],
                session["id"],
                row[0],
                event_id,
                invocation_id,
                "user",
                timestamp,
                data,
            ),
        )
        db.execute("COMMIT")
        session["revision"] = row[0]

    async def append(self, session: Any, event: Any) -> None:
        self._append(session, event)

    async def load(self, user: str, session_id: str, recent: int | None = None) -> int:
        if recent is None:
            rows = self.db().execute(_RAW_LOAD.format(**_LITE), (APP, user, session_id))
        else:
            rows = self.db().execute(
                _RAW_RECENT.format(**_LITE, n="?"), (APP, user, session_id, recent)
            )
        return len([json.loads(r[0]) for r in rows.fetchall()])

    async def list(self, user: str) -> int:
        return len(self.db().execute(_RAW_LIST.format(**_LITE), (APP, user)).fetchall())

    async def concurrent(self, sessions: list[Any], events: list[list[Any]]) -> None:
        """20 threads, each with its own connection, as 20 writers would; ``events[i]``
        are appended to ``sessions[i]``."""

        def work(session: Any, mine: list[Any]) -> None:
            for event in mine:
                self._append(session, event)

        await asyncio.gather(
            *(asyncio.to_thread(work, s, e) for s, e in zip(sessions, events, strict=True))
        )


def _is_postgres(url: str) -> bool:
    return make_url(url).get_backend_name() == "postgresql"


def sqlspec_config(url: str, **adk: Any) -> Any:
    """sqlspec's database config for the run's SQLAlchemy-style URL: asyncpg on
    PostgreSQL, aiosqlite on SQLite, its default pool settings. Its tables keep their
    default names (``adk_session``, ``adk_event``, ``adk_memory``...) except the metadata
    table, whose default name, ``adk_internal_metadata``, is also ADK's own."""
    extension = {"adk": {"metadata_table": "sqlspec_adk_internal_metadata", **adk}}
    if _is_postgres(url):
        from sqlspec.adapters.asyncpg import AsyncpgConfig

        dsn = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
        return AsyncpgConfig(connection_config={"dsn": dsn}, extension_config=extension)
    from sqlspec.adapters.aiosqlite import AiosqliteConfig

    path = make_url(url).database
    return AiosqliteConfig(connection_config={"database": path}, extension_config=extension)


_SQLSPEC_SESSION_NOTES = [
    "sqlspec append_event (extensions/adk/service.py, SQLSpecSessionService.append_event)"
    " first reads the session row (store.get_session) and raises StaleSessionError when"
    " its update_time differs from the one the Session object was loaded with, then writes"
    " in a second, separate transaction (store.append_event_and_update_state: INSERT the"
    " event; UPDATE adk_session SET state, update_time WHERE app_name, user_id, id, with"
    " no condition on update_time). Within one process an asyncio.Lock per session"
    " serializes appends; across processes the check and the write can interleave: tried"
    " (sqlspec 0.69.0, both backends) with two services (two pools) holding the same"
    " loaded session and appending at once, both appends succeeded, both events were"
    " stored, and the session state kept only the second writer's state_delta. An append"
    " after another writer's commit raises StaleSessionError.",
    "sqlspec state: each append writes the whole session state of the in-memory Session"
    " plus the event's delta (no merge in SQL); app: and user: state are read before the"
    " write transaction and upserted whole inside it (service.py, append_event).",
    "sqlspec events are ordered by their timestamp, not by append order (store.get_events:"
    " ORDER BY timestamp ASC), and num_recent_events becomes LIMIT n on that ascending"
    " order: GetSessionConfig(num_recent_events=5) on a 50-event session returned the"
    " five oldest events (tried on both backends), where the other stores return the"
    " newest. Its num_recent_events rows time that query.",
    "sqlspec bulk (the sessions loaded whole and by num_recent_events): it has no bulk"
    " write, so the rows are made by its own converter (extensions/adk/converters.py,"
    " event_to_record) and inserted with its store's INSERT into adk_event through its"
    " pooled connection, 5,000 per executemany and transaction; the session row is not"
    " touched (as for ADK's bulk).",
]


class Sqlspec(AdkTypes):
    """sqlspec's ADK extension: ``SQLSpecSessionService`` over its asyncpg or aiosqlite
    store (``AsyncpgADKStore``, ``AiosqliteADKStore``), tables made by its
    ``ensure_tables``."""

    name = "sqlspec"

    async def open(self, url: str) -> None:
        from sqlspec.extensions.adk import SQLSpecSessionService

        self.postgres = _is_postgres(url)
        self.db_config = sqlspec_config(url)
        if self.postgres:
            from sqlspec.adapters.asyncpg.adk import AsyncpgADKStore as Store
        else:
            from sqlspec.adapters.aiosqlite.adk import AiosqliteADKStore as Store
        store = Store(self.db_config)
        await store.ensure_tables()
        self.service = SQLSpecSessionService(store)
        self.reread = False
        self.reread = await self._appending_to_a_new_session_fails()
        self.notes += _SQLSPEC_SESSION_NOTES

    async def _appending_to_a_new_session_fails(self) -> bool:
        """Whether append_event on the Session that create_session returned raises
        StaleSessionError (so the run re-reads new sessions, as a workaround)."""
        from google.adk.errors import StaleSessionError

        for _ in range(3):
            session = await self.create(f"probe-{uuid.uuid4().hex[:8]}")
            try:
                await self.service.append_event(session, self.make_event(0))
            except StaleSessionError:
                self.notes.append(
                    "sqlspec: append_event on the Session that create_session returned"
                    " raised StaleSessionError (this run). create_session returns the"
                    " update_time it computed in Python (microseconds), while the store"
                    " keeps a Julian-day REAL (aiosqlite store), which loses some"
                    " microseconds; get_session then gives another update_time, and"
                    " append_event's marker check fails. ADK's Runner appends to the"
                    " session create_session returns when it creates one"
                    " (auto_create_session). Workaround here: every new session is"
                    " re-read with get_session before it is used, outside the timings."
                )
                return True
        return False

    async def close(self) -> None:
        await self.db_config.close_pool()

    async def create(self, user: str) -> Any:
        session = await super().create(user)
        if self.reread:
            session = await self.service.get_session(
                app_name=APP, user_id=user, session_id=session.id
            )
        return session

    async def bulk(self, user: str, count: int) -> str:
        """Rows made by sqlspec's ``event_to_record`` and written with its store's
        INSERT through its pooled connection, 5,000 per ``executemany`` and transaction
        (its API has no bulk write; its append reads and re-checks the session first)."""
        from sqlspec.extensions.adk.converters import event_to_record

        session = await self.create(user)
        table = self.service.store.events_table
        columns = "id, app_name, user_id, session_id, invocation_id, timestamp, event_data"
        for start in range(0, count, 5000):
            records = []
            for n in range(start, min(start + 5000, count)):
                event = self.make_event(n)
                event.timestamp = 1.7e9 + n
                records.append(
                    event_to_record(event=event, app_name=APP, user_id=user, session_id=session.id)
                )
            rows = [
                (
                    r["id"],
                    APP,
                    user,
                    session.id,
                    r["invocation_id"],
                    r["timestamp"],
                    r["event_data"],
                )
                for r in records
            ]
            async with self.db_config.provide_connection() as conn:
                if self.postgres:
                    sql = f"INSERT INTO {table} ({columns}) VALUES ($1, $2, $3, $4, $5, $6, $7)"
                    async with conn.transaction():
                        await conn.executemany(sql, rows)
                else:
                    from sqlspec.adapters.aiosqlite.core import datetime_to_julian, end_transaction
                    from sqlspec.utils.serializers import to_json

                    sql = f"INSERT INTO {table} ({columns}) VALUES (?, ?, ?, ?, ?, ?, ?)"
                    await conn.executemany(
                        sql, [(*r[:5], datetime_to_julian(r[5]), to_json(r[6])) for r in rows]
                    )
                    await end_transaction(conn, commit=True)
        return str(session.id)


@dataclass
class SqlspecMemory:
    """sqlspec's ``SQLSpecMemoryService`` and what its store logged (FTS fallbacks)."""

    service: Any
    config: Any
    postgres: bool
    warnings: list[str] = field(default_factory=list)

    async def settle(self) -> None:
        """After a bulk load: VACUUM ANALYZE its table (PostgreSQL), ANALYZE (SQLite)."""
        table = self.service.store.memory_table
        async with self.config.provide_connection() as conn:
            if self.postgres:
                await conn.execute(f"VACUUM ANALYZE {table}")
            else:
                from sqlspec.adapters.aiosqlite.core import end_transaction

                await conn.execute("ANALYZE")
                await end_transaction(conn, commit=True)


class _Collect(logging.Handler):
    def __init__(self, into: list[str]) -> None:
        super().__init__(logging.WARNING)
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        self.into.append(record.getMessage())


@contextlib.asynccontextmanager
async def sqlspec_memory(url: str) -> AsyncIterator[SqlspecMemory]:
    """sqlspec's memory service on the run's database, full-text search on
    (``memory_use_fts``: FTS5 on SQLite, a GIN to_tsvector index on PostgreSQL), its
    table made by its ``ensure_tables`` (on PostgreSQL after ``CREATE EXTENSION vector``,
    as its migration does; pgvector must be on the server). Its store's warnings (an FTS
    query that fails and falls back to LIKE) are collected instead of printed."""
    from sqlspec.extensions.adk import SQLSpecMemoryService

    postgres = _is_postgres(url)
    config = sqlspec_config(url, memory_use_fts=True)
    logger = logging.getLogger(
        "sqlspec.adapters.asyncpg.adk.store" if postgres else "sqlspec.adapters.aiosqlite.adk.store"
    )
    memory = SqlspecMemory(None, config, postgres)
    handler = _Collect(memory.warnings)
    logger.addHandler(handler)
    propagate, logger.propagate = logger.propagate, False
    try:
        if postgres:
            from sqlspec.adapters.asyncpg.adk import AsyncpgADKMemoryStore as Store
        else:
            from sqlspec.adapters.aiosqlite.adk import AiosqliteADKMemoryStore as Store
        if postgres:  # what its migration runs first: its table has a VECTOR column
            async with config.provide_connection() as conn:
                await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        store = Store(config)
        await store.ensure_tables()
        memory.service = SQLSpecMemoryService(store)
        yield memory
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate
        await config.close_pool()


def contenders(backend: str) -> list[Contender]:
    raw: Contender = RawPostgres() if backend == "postgres" else RawSqlite()
    return [Core(), AdkClasses(), AdkDatabase(), raw, Sqlspec()]
