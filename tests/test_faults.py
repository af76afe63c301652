"""Faults: processes killed mid-write, a PostgreSQL restart, cancelled tasks, SQLite
lock contention. The store must stay consistent and keep working."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from adk_sqlstore import (
    DatabaseUnavailableError,
    Event,
    EventActions,
    SqlMemoryService,
    SqlSessionService,
)

from .conftest import Figures
from .helpers import fold
from .pg_cluster import ThrowawayCluster
from .workers import contended_writer, endless_writer, process_context


def _has_text(event: Any) -> bool:
    content = event.content
    return bool(content and content.parts and any(p.text for p in content.parts))


async def check_consistent(url: str) -> dict[str, int]:
    """Every session's state is the fold of its events and its revision their count;
    every memory belongs to a completed ingestion, which holds exactly the text events
    of the revision it recorded. Returns counts of what was checked."""
    checked = {"sessions": 0, "events": 0, "memories": 0}
    async with (
        SqlSessionService.from_url(url) as service,
        SqlMemoryService(service.engine) as _memory,
    ):
        async with service.engine.connect() as conn:
            if conn.dialect.name == "sqlite":
                (ok,) = (await conn.execute(text("PRAGMA integrity_check"))).one()
                assert ok == "ok"
            ingestions = {
                (a, u, s): (rev, count)
                for a, u, s, rev, count in await conn.execute(
                    text(
                        "SELECT app_name, user_id, session_id, revision, event_count"
                        " FROM sqlstore_memory_ingestions"
                    )
                )
            }
            memory_rows: dict[tuple[str, str, str], set[str]] = {}
            for a, u, s, e in await conn.execute(
                text("SELECT app_name, user_id, session_id, event_id FROM sqlstore_memories")
            ):
                memory_rows.setdefault((a, u, s), set()).add(e)
        listed = await service.list_sessions(app_name="crash")
        for brief in listed.sessions:
            s = await service.get_session(
                app_name="crash", user_id=brief.user_id, session_id=brief.id
            )
            assert s is not None
            assert s.revision == len(s.events)
            folded = fold(s.events)
            own = {k: v for k, v in folded.items() if not k.startswith("app:")}
            assert {k: v for k, v in s.state.items() if k in own} == own
            assert s.state.get(f"user:last_{s.id}") == folded.get(f"user:last_{s.id}")
            key = ("crash", s.user_id, s.id)
            if key in memory_rows:
                assert key in ingestions, f"memories of {key} without a completed ingestion"
            if key in ingestions:
                revision, count = ingestions[key]
                expected = {e.id for e in s.events[:revision] if _has_text(e)}
                assert memory_rows.get(key, set()) == expected
                assert count == len(expected)
            checked["sessions"] += 1
            checked["events"] += len(s.events)
            checked["memories"] += len(memory_rows.get(key, ()))
    return checked


KILLS = 20  # SIGKILLs during the run, then one of each writer at the end
WORK_BETWEEN_KILLS = 12  # events the writers must have added since the last kill


async def _event_count(service: SqlSessionService) -> int:
    async with service.engine.connect() as conn:
        return int((await conn.execute(text("SELECT count(*) FROM sqlstore_events"))).scalar_one())


@pytest.mark.soak
async def test_kill_9_during_appends_and_ingestion_keeps_the_database_consistent(
    db_url: str, figures: Figures
) -> None:
    """Writers are killed at random points, each kill only after the writers have done
    more work (events stored since the last kill), so a busy machine makes the test
    slower, never weaker."""
    ctx = process_context()
    rng = random.Random(20261129)
    kills = 0
    workers = [ctx.Process(target=endless_writer, args=(db_url, f"user-{n}", n)) for n in range(4)]
    for w in workers:
        w.start()
    stored = 0
    async with SqlSessionService.from_url(db_url) as probe:
        for _ in range(KILLS):
            waited = time.monotonic()
            while (now := await _event_count(probe)) < stored + WORK_BETWEEN_KILLS:
                assert time.monotonic() - waited < 300, "the writers made no progress for 5 min"
                await asyncio.sleep(0.1)
            stored = now
            await asyncio.sleep(rng.uniform(0, 0.3))  # a random point of the next writes
            n = rng.randrange(len(workers))
            os.kill(workers[n].pid or 0, signal.SIGKILL)
            workers[n].join(timeout=30)
            assert workers[n].exitcode == -signal.SIGKILL, "the writer stopped on its own"
            kills += 1
            workers[n] = ctx.Process(target=endless_writer, args=(db_url, f"user-{n}", 100 + kills))
            workers[n].start()
    for w in workers:
        os.kill(w.pid or 0, signal.SIGKILL)
        w.join(timeout=30)
        kills += 1
    checked = await check_consistent(db_url)
    assert checked["events"] >= KILLS * WORK_BETWEEN_KILLS
    assert checked["sessions"] > KILLS // 2 and checked["memories"] > 10
    figures.add(
        f"{kills} SIGKILLs of 4 writer processes; afterwards {checked['sessions']} sessions,"
        f" {checked['events']} events, {checked['memories']} memories checked: consistent"
    )


# -- a PostgreSQL restart ---------------------------------------------------------------


async def _wait_for_server(url: str, seconds: float) -> None:
    import asyncpg

    dsn = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    deadline = time.monotonic() + seconds
    while True:
        try:
            conn = await asyncpg.connect(dsn, timeout=2)
            await conn.close()
            return
        except (TimeoutError, OSError, asyncpg.PostgresError):
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


async def test_a_pooled_mysql_connection_the_server_closed_is_replaced(mysql_url: str) -> None:
    """A server closes connections idle past its ``wait_timeout`` (or on a restart):
    the next call takes a new connection instead of failing with "server has gone
    away" (found by a review; PostgreSQL's pool already did). Shown with this test's
    own connection's ``wait_timeout``: the server is not reconfigured."""
    async with SqlSessionService.from_url(mysql_url) as service:
        session = await service.create_session(app_name="idle", user_id="u")
        async with service.store.engine.connect() as conn:  # the pool's one connection
            await conn.execute(text("SET SESSION wait_timeout = 1"))
        await asyncio.sleep(2.5)
        got = await service.get_session(app_name="idle", user_id="u", session_id=session.id)
        assert got is not None and got.id == session.id


@pytest.mark.postgres
@pytest.mark.soak
async def test_a_postgres_restart_fails_calls_clearly_then_the_service_recovers(
    throwaway_cluster: ThrowawayCluster, figures: Figures
) -> None:
    """On a server of the test's own (never the one the suite was given)."""
    postgres_url = throwaway_cluster.url()
    outcomes: dict[str, int] = {"ok": 0, "DatabaseUnavailableError": 0}
    other: list[str] = []
    async with SqlSessionService.from_url(postgres_url, auto_migrate=True) as service:
        sessions = [await service.create_session(app_name="outage", user_id="u1") for _ in range(8)]
        stop = asyncio.Event()

        async def worker(session: Any) -> None:
            while not stop.is_set():
                try:
                    fresh = await service.get_session(
                        app_name="outage", user_id="u1", session_id=session.id
                    )
                    assert fresh is not None
                    await service.append_event(
                        fresh,
                        Event(author="user", actions=EventActions(state_delta={"n": 1})),
                    )
                    outcomes["ok"] += 1
                except DatabaseUnavailableError as exc:
                    outcomes["DatabaseUnavailableError"] += 1
                    if "database error on postgresql" not in str(exc):
                        other.append(f"unclear message: {exc}")
                    await asyncio.sleep(0.05)
                except Exception as exc:  # anything else is a defect, reported below
                    other.append(f"{type(exc).__name__}: {exc}")
                    await asyncio.sleep(0.05)

        tasks = [asyncio.create_task(worker(s)) for s in sessions]
        await asyncio.sleep(1.0)
        before = outcomes["ok"]
        await asyncio.to_thread(throwaway_cluster.restart)
        await _wait_for_server(postgres_url, 60)
        await asyncio.sleep(1.0)
        stop.set()
        await asyncio.gather(*tasks)
        assert other == [], other[:5]
        assert outcomes["DatabaseUnavailableError"] > 0, "the restart went unnoticed"
        # every call after the server is back succeeds, on the same service object
        after = outcomes["ok"]
        for session in sessions:
            fresh = await service.get_session(
                app_name="outage", user_id="u1", session_id=session.id
            )
            assert fresh is not None and fresh.revision == len(fresh.events)
            await service.append_event(fresh, Event(author="user"))
        # a restart while the application is idle: not one call fails afterwards
        await asyncio.to_thread(throwaway_cluster.restart)
        await _wait_for_server(postgres_url, 60)
        await asyncio.sleep(0.5)
        for session in sessions:
            fresh = await service.get_session(
                app_name="outage", user_id="u1", session_id=session.id
            )
            assert fresh is not None
            await service.append_event(fresh, Event(author="user"))
    assert after > before
    figures.add(
        f"PostgreSQL restarted under 8 writers: {outcomes['DatabaseUnavailableError']} calls"
        f" failed with DatabaseUnavailableError, {outcomes['ok']} succeeded, 0 other errors;"
        " all calls after the restart succeeded, and so did every call after an idle restart"
    )


# -- cancellation -----------------------------------------------------------------------


async def test_cancelled_appends_never_half_write_nor_run_ahead(
    service: SqlSessionService, figures: Figures
) -> None:
    rng = random.Random(7)
    s = await service.create_session(app_name="crash", user_id="u1")
    cancelled = 0
    # SQLite appends run in the event loop, with nothing to cancel in them, unless
    # another writer holds the lock: then they wait in aiosqlite's thread. So another
    # connection holds it now and then, for a few milliseconds.
    lite = service.engine.dialect.name == "sqlite"
    other = (
        sqlite3.connect(str(service.engine.url.database), isolation_level=None) if lite else None
    )
    for n in range(150):
        before = (s.revision, [e.id for e in s.events], dict(s.state))
        event = Event(
            author="user",
            content={"role": "user", "parts": [{"text": f"turn {n}"}]},
            actions=EventActions(state_delta={"n": n, "user:n": n, "app:n": n}),
        )
        if other is not None and rng.random() < 0.5:
            other.execute("BEGIN IMMEDIATE")
            asyncio.get_running_loop().call_later(rng.choice([0.001, 0.004]), other.commit)
        task = asyncio.create_task(service.append_event(s, event))
        await asyncio.sleep(rng.choice([0, 0, 0.0001, 0.0005, 0.001, 0.003]))
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            cancelled += 1
        if other is not None and other.in_transaction:
            other.commit()
        # a cancelled append either left everything as it was or finished first (it
        # is not interrupted halfway); the caller's object is never ahead of storage
        after = (s.revision, [e.id for e in s.events], dict(s.state))
        stored = await service.get_session(app_name="crash", user_id="u1", session_id=s.id)
        assert stored is not None
        assert stored.revision == len(stored.events) >= s.revision
        assert [e.id for e in s.events] == [e.id for e in stored.events][: len(s.events)]
        assert stored.state == fold(stored.events)
        if stored.revision == before[0]:
            assert after == before
        else:
            assert stored.revision == before[0] + 1 and after[0] in (before[0], stored.revision)
            assert stored.events[-1].id == event.id
        s = stored  # a caller that was cancelled reloads, as after a StaleSessionError
    if other is not None:
        other.close()
    assert cancelled > 10
    figures.add(f"150 appends cancelled at random points ({cancelled} cancelled): consistent")


@pytest.mark.soak  # CI runs it (make test-all); out of make test's minutes
async def test_reads_cancelled_mid_statement_leave_every_pooled_connection_usable(
    service: SqlSessionService, figures: Figures
) -> None:
    """A get_session or list_sessions cancelled while its statement runs (PostgreSQL:
    sent to asyncpg past SQLAlchemy's execution layer) never leaves a connection that
    is still busy, or in a transaction, for the next call to get from the pool."""
    rng = random.Random(5)
    key: dict[str, Any] = {"app_name": "cancel", "user_id": "u1"}
    big = await service.create_session(**key, state={"k": 0})
    await service.import_session(
        big.model_copy(
            update={
                "id": "big",
                "events": [
                    Event(author="user", content={"parts": [{"text": f"turn {n} " * 20}]})
                    for n in range(2_000)
                ],
            }
        )
    )
    for n in range(30):
        await service.create_session(**key, state={"n": n})
    cancelled = 0
    for n in range(120):
        read = (
            service.get_session(**key, session_id="big") if n % 2 else service.list_sessions(**key)
        )
        task = asyncio.ensure_future(read)
        await asyncio.sleep(rng.choice([0, 0.0005, 0.001, 0.002, 0.005]))
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            cancelled += 1
        # whatever connection the pool gives next answers this call, and correctly
        whole = await service.get_session(**key, session_id="big")
        assert whole is not None and len(whole.events) == 2_000
        listed = await service.list_sessions(**key)
        assert len(listed.sessions) == 32
    # every connection the pool holds is idle and outside a transaction
    many = await asyncio.gather(*(service.get_session(**key, session_id="big") for _ in range(12)))
    assert all(s is not None and len(s.events) == 2_000 for s in many)
    assert cancelled > 20
    figures.add(f"120 reads cancelled at random points ({cancelled} cancelled): pool usable")


async def test_cancelled_ingestion_never_half_writes(
    service: SqlSessionService, figures: Figures
) -> None:
    rng = random.Random(11)
    memory = SqlMemoryService(service.engine)
    s = await service.create_session(app_name="crash", user_id="u1")
    cancelled = 0
    for n in range(60):
        for k in range(3):
            await service.append_event(
                s,
                Event(
                    author="user",
                    content={"role": "user", "parts": [{"text": f"turn {n} {k} soup"}]},
                ),
            )
        task = asyncio.create_task(memory.add_session_to_memory(s))
        await asyncio.sleep(rng.choice([0, 0.0002, 0.001, 0.003, 0.01]))
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            cancelled += 1
        async with service.engine.connect() as conn:
            rows = (
                await conn.execute(
                    text("SELECT count(*) FROM sqlstore_memories WHERE session_id = :s"),
                    {"s": s.id},
                )
            ).scalar_one()
            ingested = (
                await conn.execute(
                    text("SELECT revision FROM sqlstore_memory_ingestions WHERE session_id = :s"),
                    {"s": s.id},
                )
            ).scalar_one_or_none()
        # all of one ingestion or none of it: the rows are those of the recorded revision
        assert rows == (ingested or 0)
    assert cancelled > 5
    figures.add(f"60 ingestions cancelled at random points ({cancelled} cancelled): consistent")


# -- SQLite lock contention ----------------------------------------------------------------


@pytest.mark.soak  # 6 processes (about 11 s); make test-all (CI) runs it
@pytest.mark.sqlite
def test_sqlite_writers_in_several_processes_never_see_database_is_locked(
    sqlite_url: str, figures: Figures
) -> None:
    ctx = process_context()
    results = ctx.Queue()
    names = [f"p{n}" for n in range(6)]
    workers = [
        ctx.Process(target=contended_writer, args=(sqlite_url, name, 40, results)) for name in names
    ]
    for w in workers:
        w.start()
    reports = dict(results.get(timeout=600) for _ in workers)
    for w in workers:
        w.join(timeout=60)
    assert reports == dict.fromkeys(names, 40), reports
    path = Path(make_url(sqlite_url).database or "")
    assert path.exists()
    figures.add(
        "6 processes x 40 rounds (create, 3 appends, ingest, list, delete) on one SQLite"
        " file: 0 'database is locked' errors"
    )
