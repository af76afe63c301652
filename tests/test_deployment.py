"""Where users deploy the store: behind a connection pooler in transaction mode, with
connection settings in the URL, across event loops (issue 11)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from adk_sqlstore import (
    DatabaseUnavailableError,
    Event,
    EventActions,
    PoolTimeoutError,
    SqlMemoryService,
    SqlSessionService,
)

from .conftest import IN_CI, Figures, PostgresFactory, run_sync
from .pg_cluster import ClusterUnavailable, Pgbouncer, ThrowawayCluster


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

    async def prepared_left() -> set[int]:
        """Statements left prepared on the pooler's server connections (asked through
        it, once per server connection and more: it hands out any)."""
        import asyncpg

        plain = url.replace("?pgbouncer=true", "").replace("&pgbouncer=true", "")
        conn = await asyncpg.connect(plain, statement_cache_size=0)
        try:
            return {
                int(await conn.fetchval("SELECT count(*) FROM pg_prepared_statements"))
                for _ in range(30)
            }
        finally:
            await conn.close()

    # Unnamed statements: nothing piles up on the server (it did with named ones: a
    # backend held thousands, and its memory grew with them).
    assert run_sync(prepared_left()) == {0}


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


# -- every failure typed, with a one-line reason --------------------------------------


@pytest.mark.postgres
async def test_a_connection_the_server_closes_mid_call_is_a_typed_error(
    postgres_factory: PostgresFactory,
) -> None:
    """Issue 11: a connection killed by idle_in_transaction_session_timeout surfaced as
    a bare BrokenPipeError. A redactor slower than the timeout, run inside an
    ingestion's transaction, gets it killed: DatabaseUnavailableError naming the likely
    causes; the service carries on."""
    import time

    def slow(text: str) -> str:
        time.sleep(0.6)
        return text

    # A session setting: set on a direct connection (a pooler would not pass it on).
    timeout = {"server_settings": {"idle_in_transaction_session_timeout": "300"}}
    url = postgres_factory.create()
    async with SqlSessionService.from_url(url, connect_args=timeout) as service:
        memory = SqlMemoryService(service.engine, redactors=[slow])
        session = await service.create_session(app_name="idle", user_id="u1")
        await service.append_event(session, _turn(1))
        stale = await service.get_session(app_name="idle", user_id="u1", session_id=session.id)
        assert stale is not None
        await service.append_event(session, _turn(2))  # the ingestion reloads, in its transaction
        with pytest.raises(DatabaseUnavailableError) as raised:
            await memory.add_session_to_memory(stale)
        message = str(raised.value)
        assert "\n" not in message and "idle_in_transaction_session_timeout" in message
        assert len((await service.list_sessions(app_name="idle")).sessions) == 1


_INTERRUPT_WHILE_IMPORTING = """
import builtins, sys
real_import = builtins.__import__

def interrupted(name, *args, **kwargs):
    if name.startswith("{module}"):
        raise KeyboardInterrupt
    return real_import(name, *args, **kwargs)

builtins.__import__ = interrupted
sys.argv = ["adk-sqlstore", "sessions", "list", "--app", "a"]
from adk_sqlstore._entry import main
main()
"""


@pytest.mark.parametrize("module", ["sqlalchemy", "typer", "rich"])
def test_ctrl_c_while_the_command_line_starts_is_one_line(module: str, tmp_path: Any) -> None:
    """Ctrl-C while ``adk-sqlstore`` imports what it runs on (the bulk of its start-up
    time) prints one line and exits with 130, no traceback. (The interrupt is raised at
    the import of ``module``, so that the test does not depend on timing.)"""
    import os
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _INTERRUPT_WHILE_IMPORTING.format(module=module)],
        env={**os.environ, "XDG_DATA_HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 130, done.stderr
    assert done.stderr == "adk-sqlstore: interrupted\n" and done.stdout == ""


# -- failover ---------------------------------------------------------------------------


async def _replicating(primary: ThrowawayCluster) -> None:
    """Wait until the primary has a synchronous standby streaming from it."""
    import asyncpg

    conn = await asyncpg.connect(primary.url())
    try:
        for _ in range(300):
            state = await conn.fetchval(
                "SELECT sync_state FROM pg_stat_replication WHERE state = 'streaming'"
            )
            if state == "sync":
                return
            await asyncio.sleep(0.1)
        raise AssertionError("the standby never caught up")
    finally:
        await conn.close()


@pytest.fixture
def replicated() -> Iterator[tuple[ThrowawayCluster, ThrowawayCluster]]:
    """A primary with a synchronous streaming standby, both of this test's own (never
    the machine's server)."""
    try:
        primary = ThrowawayCluster(settings={"synchronous_standby_names": "*"})
    except ClusterUnavailable as exc:
        if IN_CI:
            pytest.fail(f"CI=true but {exc}")
        pytest.skip(str(exc))
    with primary:
        standby = primary.standby()
        try:
            run_sync(_replicating(primary))
            yield primary, standby
        finally:
            standby.remove()


@pytest.mark.postgres
async def test_failover_to_a_promoted_standby_loses_nothing_committed(
    replicated: tuple[ThrowawayCluster, ThrowawayCluster], figures: Figures
) -> None:
    """A URL with both hosts and ``target_session_attrs=read-write``: after the primary
    dies and the standby is promoted, the same service carries on without a restart.
    Calls in flight get DatabaseUnavailableError; later calls succeed; every append
    acknowledged before is there (synchronous replication)."""
    primary, standby = replicated
    url = (
        f"postgresql://postgres@127.0.0.1:{primary.port},127.0.0.1:{standby.port}/postgres"
        "?target_session_attrs=read-write"
    )
    async with SqlSessionService.from_url(url, auto_migrate=True) as service:
        sessions = [await service.create_session(app_name="ha", user_id=f"u{n}") for n in range(4)]
        before: list[str] = []
        for n in range(40):  # acknowledged before the failover, none in flight
            event = _turn(n)
            await service.append_event(sessions[n % 4], event)
            before.append(event.id)

        acknowledged: set[str] = set(before)
        unsure: set[str] = set()  # failed calls: may or may not have committed
        failures: dict[str, int] = {}
        stop = asyncio.Event()

        async def writer(session: Any) -> None:
            n = 0
            while not stop.is_set():
                n += 1
                event = _turn(n)
                try:
                    fresh = await service.get_session(
                        app_name="ha", user_id=session.user_id, session_id=session.id
                    )
                    assert fresh is not None
                    await service.append_event(fresh, event)
                    acknowledged.add(event.id)
                except DatabaseUnavailableError as exc:
                    unsure.add(event.id)
                    name = type(exc).__name__
                    failures[name] = failures.get(name, 0) + 1
                    await asyncio.sleep(0.05)

        tasks = [asyncio.create_task(writer(s)) for s in sessions]
        await asyncio.sleep(0.5)
        await asyncio.to_thread(primary.stop)  # the primary dies
        await asyncio.sleep(0.5)
        await asyncio.to_thread(standby.promote)
        await asyncio.sleep(1.5)
        stop.set()
        await asyncio.gather(*tasks)  # any error but DatabaseUnavailableError fails here
        assert failures, "the failover went unnoticed"
        for session in sessions:  # the same service object, no restart
            fresh = await service.get_session(
                app_name="ha", user_id=session.user_id, session_id=session.id
            )
            assert fresh is not None
            event = _turn(999)
            await service.append_event(fresh, event)
            acknowledged.add(event.id)
        stored: set[str] = set()
        for session in sessions:
            got = await service.get_session(
                app_name="ha", user_id=session.user_id, session_id=session.id
            )
            assert got is not None and got.revision == len(got.events)
            stored |= {e.id for e in got.events}
    assert sum(event_id in stored for event_id in before) == len(before) == 40
    assert acknowledged <= stored  # nothing acknowledged is lost
    assert stored <= acknowledged | unsure  # nothing appears that was not written
    figures.add(
        f"failover to a promoted synchronous standby: 40 of 40 events written before read"
        f" back after; {len(acknowledged)} appends acknowledged, all stored;"
        f" {sum(failures.values())} calls in flight got DatabaseUnavailableError"
        f" ({len(stored - acknowledged)} of them had committed); later calls succeeded"
    )


@pytest.mark.postgres
async def test_session_settings_and_schema_from_the_url(postgres_factory: PostgresFactory) -> None:
    """``statement_timeout``, ``command_timeout`` and ``search_path`` in the URL reach
    the server; with ``search_path`` the migration puts every table in that schema."""
    from sqlalchemy import text

    url = postgres_factory.create(migrate=False)
    admin = SqlSessionService.from_url(url)
    async with admin.engine.begin() as conn:
        await conn.execute(text("CREATE SCHEMA agents"))
    await admin.close()
    sep = "&" if "?" in url else "?"
    settings = "search_path=agents&statement_timeout=1500ms&command_timeout=7"
    async with SqlSessionService.from_url(f"{url}{sep}{settings}", auto_migrate=True) as service:
        session = await service.create_session(app_name="schema", user_id="u1")
        await service.append_event(session, _turn(1))
        async with service.engine.connect() as conn:
            assert (await conn.execute(text("SHOW statement_timeout"))).scalar() == "1500ms"
            assert (await conn.execute(text("SHOW search_path"))).scalar() == "agents"
            raw = await conn.get_raw_connection()
            assert raw.driver_connection._config.command_timeout == 7  # type: ignore[union-attr]
            schemas = {
                row[0]
                for row in await conn.execute(
                    text(
                        "SELECT DISTINCT schemaname FROM pg_tables"
                        " WHERE tablename LIKE 'sqlstore_%'"
                    )
                )
            }
            assert schemas == {"agents"}
