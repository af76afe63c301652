"""One service object used from several event loops: ``asyncio.run`` more than once
(notebooks, Celery tasks, sync web frameworks) and threads with loops of their own
(issue 11: "Task ... got Future ... attached to a different loop" on PostgreSQL)."""

from __future__ import annotations

import asyncio
import threading
import traceback
from typing import Any

import asyncpg
import pytest
from sqlalchemy.engine import make_url

from adk_sqlstore import Event, EventActions, SqlMemoryService, SqlSessionService

from .conftest import run_sync


def _turn(n: int) -> Event:
    return Event(
        author="user",
        content={"role": "user", "parts": [{"text": f"badminton turn {n}"}]},
        actions=EventActions(state_delta={"n": n, "user:last": n}),
    )


async def _work(sessions: Any, memory: Any, tag: str) -> int:
    """Create a session, append, ingest, search, read back: every kind of call."""
    session = await sessions.create_session(app_name="loops", user_id=tag)
    for n in range(5):
        await sessions.append_event(session, _turn(n))
    await memory.add_session_to_memory(session)
    found = await memory.search_memory(app_name="loops", user_id=tag, query="badminton")
    stored = await sessions.get_session(app_name="loops", user_id=tag, session_id=session.id)
    assert stored is not None and stored.state["n"] == 4
    assert len(found.memories) == 5
    return len(stored.events)


async def _server_connections(url: str) -> int:
    """Connections to this test's database other than the one asking."""
    parsed = make_url(url)
    dsn = parsed.set(drivername="postgresql").render_as_string(hide_password=False)
    conn = await asyncpg.connect(dsn)
    try:
        return int(
            await conn.fetchval(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        )
    finally:
        await conn.close()


@pytest.mark.parametrize("classes", ["core", "adk"])
def test_one_service_from_asyncio_run_twice_and_from_threads(db_url: str, classes: str) -> None:
    if classes == "adk":
        pytest.importorskip("google.adk")
        from adk_sqlstore.adk import SqlMemoryService as AdkMemory
        from adk_sqlstore.adk import SqlSessionService as AdkSessions

        sessions: Any = AdkSessions(db_url)
        memory: Any = AdkMemory(engine=sessions.engine)
    else:
        sessions = SqlSessionService.from_url(db_url)
        memory = SqlMemoryService(sessions.engine)
    # Two loops, one after the other.
    assert asyncio.run(_work(sessions, memory, "first-run")) == 5
    assert asyncio.run(_work(sessions, memory, "second-run")) == 5
    # Six threads, each with a loop of its own, at the same time.
    results: list[Any] = []

    async def busy(n: int) -> list[int]:  # several tasks of one loop at once
        return list(
            await asyncio.gather(*(_work(sessions, memory, f"thread-{n}-{k}") for k in range(5)))
        )

    def in_thread(n: int) -> None:
        try:
            results.append(asyncio.run(busy(n)))
        except Exception as exc:  # reported below
            results.append(exc)

    # 30 tasks at once: more than a pool holds, so tasks of several loops wait on it
    threads = [threading.Thread(target=in_thread, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert results == [[5] * 5] * 6, results

    # And the loop the test runs last: everything written above is there.
    async def everything() -> list[str]:
        listed = await sessions.list_sessions(app_name="loops")
        return sorted(s.user_id for s in listed.sessions)

    assert asyncio.run(everything()) == sorted(
        ["first-run", "second-run", *(f"thread-{n}-{k}" for n in range(6) for k in range(5))]
    )
    if make_url(db_url).get_backend_name() == "postgresql" and "pgbouncer" not in db_url:
        # Each loop's connections were closed as its asyncio.run ended: none is left
        # open to the server (a connection of a dead loop cannot be closed later).
        # (Behind PgBouncer, the pooler keeps server connections open by design.)
        assert run_sync(_server_connections(db_url)) == 0
    asyncio.run(sessions.close())


def test_loops_closed_without_asyncio_run_close_their_connections(db_url: str) -> None:
    """A loop made with ``asyncio.new_event_loop()``, driven by ``run_until_complete``
    and ended by ``loop.close()`` alone (no ``shutdown_asyncgens``, as in ADK's own
    thread-safety test of its memory service) closes the connections it opened: on
    PostgreSQL none is left open to the server, and no socket is left to the garbage
    collector (the suite turns its ResourceWarning into an error)."""
    sessions = SqlSessionService.from_url(db_url)
    memory = SqlMemoryService(sessions.engine)
    failures: list[str] = []

    def in_thread(n: int) -> None:
        loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(_work(sessions, memory, f"closed-{n}"))
        except BaseException:  # reported below, with where it came from
            failures.append(traceback.format_exc())
        finally:
            loop.close()

    threads = [threading.Thread(target=in_thread, args=(n,)) for n in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    in_thread(3)  # and one in this thread
    assert not failures, failures
    if make_url(db_url).get_backend_name() == "postgresql" and "pgbouncer" not in db_url:
        assert run_sync(_server_connections(db_url)) == 0
    asyncio.run(sessions.close())
