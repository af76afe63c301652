"""The stores measured side by side, behind one small interface.

* ``core``: adk-sqlstore's own API (:class:`adk_sqlstore.SqlSessionService`);
* ``adk classes``: adk-sqlstore's ADK drop-in (:mod:`adk_sqlstore.adk`), ADK types;
* ``ADK``: google-adk's own ``DatabaseSessionService`` on the same database;
* ``raw``: the floor: the same work with the bare driver (asyncpg, or sqlite3) and no
  ORM or models: one transaction with a conditional revision update and one event
  insert per append; one ordered select plus JSON decoding per load.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
import uuid
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

    async def concurrent(self, sessions: list[Any], per_task: int) -> None:
        """20 threads, each with its own connection, as 20 writers would."""

        def work(session: Any) -> None:
            for n in range(per_task):
                self._append(session, raw_event(n))

        await asyncio.gather(*(asyncio.to_thread(work, s) for s in sessions))


def contenders(backend: str) -> list[Contender]:
    raw: Contender = RawPostgres() if backend == "postgres" else RawSqlite()
    return [Core(), AdkClasses(), AdkDatabase(), raw]
