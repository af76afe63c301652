"""SQLite's batches (:mod:`adk_sqlstore.sql.sqlite_thread`): one hop to aiosqlite's
thread through its private queue when this aiosqlite has it (the versions tested do),
else the same batch through SQLAlchemy's adapter, with the same results and errors."""

from __future__ import annotations

import asyncio
import gc
import shutil
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
