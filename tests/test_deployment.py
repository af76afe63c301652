"""Where users deploy the store: behind a connection pooler in transaction mode, with
connection settings in the URL, across event loops (issue 11)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from adk_sqlstore import (
    Event,
    EventActions,
    PoolTimeoutError,
    SqlMemoryService,
    SqlSessionService,
)

from .conftest import PostgresFactory
from .pg_cluster import Pgbouncer


def _turn(n: int) -> Event:
    return Event(
        author="user",
        content={"role": "user", "parts": [{"text": f"badminton turn {n}"}]},
        actions=EventActions(state_delta={"n": n, "user:seen": n, "app:calls": n}),
    )


async def _conversation(sessions: Any, memory: Any, user: str) -> tuple[int, int]:
    session = await sessions.create_session(app_name="pooled", user_id=user)
    for n in range(8):
        await sessions.append_event(session, _turn(n))
        session = await sessions.get_session(app_name="pooled", user_id=user, session_id=session.id)
    await memory.add_session_to_memory(session)
    found = await memory.search_memory(app_name="pooled", user_id=user, query="badminton")
    listed = await sessions.list_sessions(app_name="pooled", user_id=user)
    assert len(listed.sessions) == 1 and session.state["n"] == 7
    return len(session.events), len(found.memories)


@pytest.mark.postgres
def test_behind_pgbouncer_in_transaction_mode(
    pgbouncer: Pgbouncer, postgres_factory: PostgresFactory
) -> None:
    """With ``?pgbouncer=true``, 24 conversations, 12 at a time, through a pooler that
    hands each transaction to any of its server connections: no prepared statement is
    missing, nothing is lost. Core and ADK classes, two event loops."""
    url = pgbouncer.url(postgres_factory.create())

    async def run(classes: str) -> list[tuple[int, int]]:
        if classes == "adk":
            pytest.importorskip("google.adk")
            from adk_sqlstore.adk import SqlMemoryService as AdkMemory
            from adk_sqlstore.adk import SqlSessionService as AdkSessions

            sessions: Any = AdkSessions(url, pool_size=12)
            memory: Any = AdkMemory(engine=sessions.engine)
        else:
            sessions = SqlSessionService.from_url(url, pool_size=12)
            memory = SqlMemoryService(sessions.engine)
        try:
            return await asyncio.gather(
                *(_conversation(sessions, memory, f"{classes}-{n}") for n in range(12))
            )
        finally:
            await sessions.close()

    assert asyncio.run(run("core")) == [(8, 8)] * 12
    assert asyncio.run(run("adk")) == [(8, 8)] * 12


@pytest.mark.postgres
async def test_pool_settings_from_the_url_and_a_full_pool_fails_typed(postgres_url: str) -> None:
    """``pool_size``/``max_overflow``/``pool_timeout`` in the URL (keywords win); a pool
    that stays full raises PoolTimeoutError after pool_timeout, never hangs."""
    sep = "&" if "?" in postgres_url else "?"
    url = f"{postgres_url}{sep}pool_size=1&max_overflow=0&pool_timeout=0.3"
    async with SqlSessionService.from_url(url) as service:
        pool: Any = service.engine.sync_engine.pool
        assert (pool.size(), pool._max_overflow, pool.timeout()) == (1, 0, 0.3)
        await service.create_session(app_name="a", user_id="u")
        async with service.engine.connect():  # the only connection, held
            with pytest.raises(PoolTimeoutError, match=r"pool_timeout \(0.3 s\)"):
                await asyncio.wait_for(service.list_sessions(app_name="a"), timeout=10)
        assert len((await service.list_sessions(app_name="a")).sessions) == 1
    async with SqlSessionService.from_url(url, pool_size=3, max_overflow=2) as service:
        pool = service.engine.sync_engine.pool
        assert (pool.size(), pool._max_overflow) == (3, 2)
