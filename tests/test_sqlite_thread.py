"""SQLite's batches (:mod:`adk_sqlstore.sql.sqlite_thread`): one hop to aiosqlite's
thread through its private queue when this aiosqlite has it (the versions tested do),
else the same batch through SQLAlchemy's adapter, with the same results and errors."""

from __future__ import annotations

import asyncio
import gc
import shutil
import sqlite3
import threading
import warnings
from pathlib import Path
from typing import Any

import pytest

from adk_sqlstore import (
    Event,
    EventActions,
    InvalidEventError,
    MemoryEntry,
    SqlMemoryService,
    SqlSessionService,
    StaleSessionError,
    Store,
)
from adk_sqlstore.engine import create_engine
from adk_sqlstore.migration import upgrade
from adk_sqlstore.sql import sqlite_thread

pytestmark = pytest.mark.sqlite

APP = "batches"


async def _workload(url: str) -> dict[str, object]:
    """Appends (with state in every scope), loads, a stale append, a duplicate event and
    a forgotten user: every batch the store runs on SQLite."""
    async with SqlSessionService.from_url(url) as sessions:
        memory = SqlMemoryService(sessions.store)
        session = await sessions.create_session(app_name=APP, user_id="u1", session_id="s")
        stale = await sessions.get_session(app_name=APP, user_id="u1", session_id="s")
        assert stale is not None
        for n in range(3):
            delta = {"n": n, "user:n": n, "app:n": n, "temp:t": n}
            await sessions.append_event(
                session,
                Event(
                    id=f"e{n}",
                    author="user",
                    timestamp=1000.0 + n,
                    content={"parts": [{"text": f"turn {n} about kayaks"}]},
                    actions=EventActions(state_delta=delta),
                ),
            )
        with pytest.raises(StaleSessionError):
            await sessions.append_event(stale, Event(author="user"))
        with pytest.raises(InvalidEventError, match="already exists"):
            await sessions.append_event(session, Event(id="e0", author="user"))
        loaded = await sessions.get_session(app_name=APP, user_id="u1", session_id="s")
        assert loaded is not None
        await memory.add_session_to_memory(loaded)
        await memory.add_memory(
            app_name=APP, user_id="u2", memories=[MemoryEntry(content={"parts": [{"text": "x"}]})]
        )
        found = await memory.search_memory(app_name=APP, user_id="u1", query="kayaks")
        forgotten = await sessions.forget_user(app_name=APP, user_id="u1")
        gone = await sessions.get_session(app_name=APP, user_id="u1", session_id="s")
        return {
            "state": loaded.state,
            "events": [(e.id, e.actions.state_delta) for e in loaded.events],
            "revision": loaded.revision,
            "found": len(found.memories),
            "forgotten": forgotten,
            "gone": gone,
        }


async def test_the_queue_of_this_aiosqlite_is_used(sqlite_url: str) -> None:
    async with (
        SqlSessionService.from_url(sqlite_url) as sessions,
        sessions.engine.connect() as conn,
    ):
        raw = await conn.get_raw_connection()
        assert sqlite_thread._queue(raw.driver_connection) is not None


async def test_without_the_queue_the_batches_give_the_same_results(
    tmp_path: Path, sqlite_template: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    urls = []
    for name in ("queued.db", "adapted.db"):
        shutil.copyfile(sqlite_template, tmp_path / name)
        urls.append(f"sqlite:///{tmp_path / name}")
    queued = await _workload(urls[0])
    calls = []

    def no_queue(driver: object) -> None:
        calls.append(driver)

    monkeypatch.setattr(sqlite_thread, "_queue", no_queue)
    adapted = await _workload(urls[1])
    assert calls, "the fallback path ran"
    assert adapted == queued
    assert queued["state"] == {"n": 2, "user:n": 2, "app:n": 2}
    assert queued["revision"] == 3 and queued["found"] == 3 and queued["gone"] is None


async def test_the_held_connection_serves_appends_and_goes_back_at_close(sqlite_url: str) -> None:
    # Sequential appends reuse one connection kept checked out (no pool round trip);
    # concurrent ones take pooled connections meanwhile; closing the store returns it,
    # so no aiosqlite thread outlives the service.
    before = {t.ident for t in threading.enumerate()}
    async with SqlSessionService.from_url(sqlite_url) as service:
        sessions = [await service.create_session(app_name="app", user_id="u") for _ in range(5)]
        for n in range(10):
            await service.append_event(sessions[0], Event(author="user", invocation_id=f"i{n}"))

        async def appends(session: Any) -> None:
            for n in range(10):
                await service.append_event(session, Event(author="user", invocation_id=f"c{n}"))

        await asyncio.gather(*(appends(s) for s in sessions[1:]))
        for session in sessions:
            got = await service.get_session(app_name="app", user_id="u", session_id=session.id)
            assert got is not None and got.events == session.events
            assert len(got.events) == 10
        # A failed append (another writer's stale object) leaves the next ones working.
        stale = (await service.list_sessions(app_name="app", user_id="u")).sessions[0]
        stale.revision = 0
        with pytest.raises(StaleSessionError):
            await service.append_event(stale, Event(author="user"))
        await service.append_event(sessions[0], Event(author="user"))
    for _ in range(50):
        if {t.ident for t in threading.enumerate()} <= before:
            break
        await asyncio.sleep(0.02)
    assert {t.ident for t in threading.enumerate()} <= before


async def test_a_store_closed_after_its_engine_was_disposed_leaves_no_connection_open(
    sqlite_url: str,
) -> None:
    # engine.dispose() (SQLAlchemy's) leaves checked-out connections to the pool it
    # replaces; the held one is closed when the store closes, not left to the garbage
    # collector (aiosqlite: "was deleted before being closed", a ResourceWarning).
    engine = create_engine(sqlite_url)
    await upgrade(engine)
    service = SqlSessionService(engine)
    session = await service.create_session(app_name="app", user_id="u")
    await service.append_event(session, Event(author="user", invocation_id="i"))
    await engine.dispose()
    await service.close()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gc.collect()
    assert [w for w in caught if issubclass(w.category, ResourceWarning)] == []


async def test_appends_run_in_the_event_loop_and_checkpoint_in_aiosqlites_thread(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An append on the held connection runs in the loop (no hop to aiosqlite's thread);
    # every CHECKPOINT_EVERY of them one passive checkpoint runs in the thread instead
    # of SQLite's own checkpoint in the loop, so the write-ahead log stays small.
    hops: list[str] = []
    in_thread = sqlite_thread._in_thread

    async def counted(conn: Any, batch: Any, *args: Any, **kwargs: Any) -> Any:
        hops.append(batch.__name__)
        return await in_thread(conn, batch, *args, **kwargs)

    monkeypatch.setattr(sqlite_thread, "_in_thread", counted)
    path = Path(sqlite_url.removeprefix("sqlite:///"))
    appends = 10 * sqlite_thread.CHECKPOINT_EVERY
    text = "kayak " * 300  # about 2 kB an event: 3 to 4 pages of log an append
    async with SqlSessionService.from_url(sqlite_url) as service:
        session = await service.create_session(app_name="app", user_id="u")
        wal_sizes = []
        for n in range(appends):
            event = Event(author="user", content={"parts": [{"text": f"{n} {text}"}]})
            await service.append_event(session, event)
            wal_sizes.append(path.with_name(path.name + "-wal").stat().st_size)
        got = await service.get_session(app_name="app", user_id="u", session_id=session.id)
        assert got is not None and got.events == session.events and got.revision == appends
    assert hops.count("_sqlite_append") == 0
    assert hops.count("_checkpoint") == appends // sqlite_thread.CHECKPOINT_EVERY
    # Without checkpoints the log would hold every append (more than 8 MB here).
    assert max(wal_sizes) < 4 * 4096 * 2 * sqlite_thread.CHECKPOINT_EVERY


async def test_an_append_that_finds_the_write_lock_taken_waits_in_the_thread(
    sqlite_url: str,
) -> None:
    # Another connection (another process, say) holds the write lock: the in-loop try
    # fails at once, the append waits for the lock in aiosqlite's thread (busy_timeout),
    # the event loop runs meanwhile, and the append lands once the lock is released.
    async with SqlSessionService.from_url(sqlite_url) as service:
        session = await service.create_session(app_name="app", user_id="u")
        await service.append_event(session, Event(author="user", invocation_id="first"))
        other = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"), isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")
            loop = asyncio.get_running_loop()
            released = loop.create_future()

            def release() -> None:
                other.execute("COMMIT")
                released.set_result(loop.time())

            ticks = 0

            async def ticker() -> None:
                nonlocal ticks
                while not released.done():
                    ticks += 1
                    await asyncio.sleep(0.005)

            loop.call_later(0.4, release)
            ticking = asyncio.create_task(ticker())
            await service.append_event(session, Event(author="user", invocation_id="second"))
            landed = loop.time()
            await ticking
        finally:
            other.close()
        assert released.done() and landed >= released.result()
        assert ticks >= 20, f"the event loop was blocked while the append waited ({ticks})"
        await service.append_event(session, Event(author="user", invocation_id="third"))
        got = await service.get_session(app_name="app", user_id="u", session_id=session.id)
        assert got is not None
        assert [e.invocation_id for e in got.events] == ["first", "second", "third"]


async def test_connections_back_in_the_pool_have_their_own_settings(sqlite_url: str) -> None:
    # The held connection runs without a busy timeout or automatic checkpoints while
    # it serves appends; a connection the pool hands out (after a failed append closed
    # the held one, or after the service closed) waits for locks as configured.
    engine = create_engine(sqlite_url, sqlite_busy_timeout=7.0)
    try:
        store = Store(engine)
        service = SqlSessionService(store)
        session = await service.create_session(app_name="app", user_id="u")
        stale = await service.get_session(app_name="app", user_id="u", session_id=session.id)
        assert stale is not None
        await service.append_event(session, Event(author="user"))
        with pytest.raises(StaleSessionError):
            await service.append_event(stale, Event(author="user"))
        await service.append_event(session, Event(author="user"))
        await store.close()  # the held connection goes back to the pool
        pooled = engine.sync_engine.pool.checkedin()  # type: ignore[attr-defined]
        assert pooled >= 1
        conns = [await engine.connect() for _ in range(pooled)]
        try:
            for conn in conns:
                busy = (await conn.exec_driver_sql("PRAGMA busy_timeout")).scalar()
                pages = (await conn.exec_driver_sql("PRAGMA wal_autocheckpoint")).scalar()
                assert (busy, pages) == (7000, 1000)
        finally:
            for conn in conns:
                await conn.close()
    finally:
        await engine.dispose()


@pytest.mark.parametrize("url", ["sqlite://", "sqlite+aiosqlite:///:memory:"])
async def test_an_in_memory_database_keeps_its_appends_in_aiosqlites_thread(url: str) -> None:
    # An in-memory database's connection may be used only from the thread that opened
    # it (check_same_thread): its appends stay in aiosqlite's thread.
    async with SqlSessionService.from_url(url, auto_migrate=True) as service:
        session = await service.create_session(app_name="app", user_id="u")
        for n in range(3):
            await service.append_event(session, Event(author="user", invocation_id=f"i{n}"))
        got = await service.get_session(app_name="app", user_id="u", session_id=session.id)
        assert got is not None and got.events == session.events and got.revision == 3
