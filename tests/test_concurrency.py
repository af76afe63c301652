"""Load and concurrency across OS processes and tasks, on every backend.

From the design notes (003): an append built on a stale read "is rejected with a typed
error, never merged silently"; writers that reload and retry must lose nothing.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sqlalchemy import text

from adk_sqlstore import (
    Event,
    EventActions,
    InvalidEventError,
    MemoryEntry,
    SqlMemoryService,
    SqlSessionService,
    StaleSessionError,
)

from .conftest import THOROUGH, Figures
from .helpers import fold
from .workers import key_writer, process_context, retrying_appender

PROCESSES = 8  # the soak size (make test-all); make test runs 4 x 50
APPENDS = 200
SOAK = pytest.mark.soak


def _spawn(target: Any, args_of: list[tuple[Any, ...]]) -> list[Any]:
    """Run one process per argument tuple (each gets a results queue last) and return
    what each put on it."""
    ctx = process_context()
    results = ctx.Queue()
    workers = [ctx.Process(target=target, args=(*args, results)) for args in args_of]
    for w in workers:
        w.start()
    out = [results.get(timeout=600) for _ in workers]
    for w in workers:
        w.join(timeout=60)
        assert w.exitcode == 0
    return out


@pytest.mark.parametrize(
    ("processes", "appends"),
    [pytest.param(4, 50, id="4x50"), pytest.param(PROCESSES, APPENDS, id="8x200", marks=SOAK)],
)
async def test_processes_retrying_on_stale_lose_nothing(
    db_url: str, figures: Figures, processes: int, appends: int
) -> None:
    async with SqlSessionService.from_url(db_url) as service:
        session = await service.create_session(app_name="race", user_id="u1")
    names = [f"proc-{n}" for n in range(processes)]
    reports = _spawn(retrying_appender, [(db_url, session.id, name, appends) for name in names])
    accepted: dict[str, list[str]] = {}
    attempts = stale = 0
    for name, ids, tried, rejected in reports:
        assert isinstance(ids, list), f"{name} failed: {ids}"
        accepted[name] = ids
        attempts += tried
        stale += rejected

    async with SqlSessionService.from_url(db_url) as service:
        stored = await service.get_session(app_name="race", user_id="u1", session_id=session.id)
    assert stored is not None
    ids = [e.id for e in stored.events]
    # exactly the successful appends: none lost, none duplicated
    assert len(ids) == len(set(ids)) == processes * appends
    assert set(ids) == {i for got in accepted.values() for i in got}
    # each process's events in its own order
    for name in names:
        assert [e.id for e in stored.events if e.author == name] == accepted[name]
        assert [e.invocation_id for e in stored.events if e.author == name] == [
            f"{name}-{n}" for n in range(appends)
        ]
    assert stored.revision == processes * appends
    # the stored state is the fold of the stored deltas, user: keys included
    assert stored.state == fold(stored.events)
    assert all(stored.state[f"count_{name}"] == appends for name in names)
    figures.add(
        f"{processes} processes x {appends} appends on one session: {attempts} attempts,"
        f" {stale} StaleSessionError retried, {len(ids)} events stored, 0 lost, 0 duplicated"
    )


async def test_writers_of_different_user_and_app_keys_lose_nothing(
    db_url: str, figures: Figures
) -> None:
    """Six processes, each on a session of its own of one user, each setting its own
    ``user:`` and ``app:`` key 60 times (25 in make test): every key ends there."""
    names = [f"w{n}" for n in range(6)]
    rounds = 60 if THOROUGH else 25
    reports = _spawn(key_writer, [(db_url, name, rounds) for name in names])
    assert all(outcome == "ok" for _, outcome in reports), reports
    async with SqlSessionService.from_url(db_url) as service:
        user = await service.get_user_state(app_name="race", user_id="u1")
        app = await service.get_app_state(app_name="race")
        listed = await service.list_sessions(app_name="race", user_id="u1")
        assert user == dict.fromkeys(names, rounds)
        assert app == dict.fromkeys(names, rounds)
        for s in listed.sessions:
            got = await service.get_session(app_name="race", user_id="u1", session_id=s.id)
            assert got is not None and got.state["n"] == rounds and len(got.events) == rounds
            assert {k: v for k, v in got.state.items() if k.startswith("user:")} == {
                f"user:{name}": rounds for name in names
            }
    figures.add(
        f"6 processes x {rounds} appends on 6 sessions of one user: 0 user:/app: updates lost"
    )


async def test_an_event_id_already_in_the_session_is_rejected_never_stored_twice(
    service: SqlSessionService,
) -> None:
    """append_event's docstring: another event under a taken id (here: another
    timestamp or author) is rejected (InvalidEventError), from the same session object
    or from a fresh one. (The same event again is no error:
    tests/test_adk_compat_sessions_later.py.)"""
    s = await service.create_session(app_name="race", user_id="u1")
    event = Event(author="user", id="e-1")
    await service.append_event(s, event)
    with pytest.raises(InvalidEventError, match="already exists"):
        await service.append_event(s, Event(author="user", id="e-1"))
    fresh = await service.get_session(app_name="race", user_id="u1", session_id=s.id)
    assert fresh is not None
    with pytest.raises(InvalidEventError, match="already exists"):
        await service.append_event(fresh, Event(author="again", id="e-1"))
    stale_copy = s.model_copy(deep=True)
    await service.append_event(s, Event(author="user", id="e-2"))
    with pytest.raises((InvalidEventError, StaleSessionError)):
        await service.append_event(stale_copy, Event(author="user", id="e-2"))
    stored = await service.get_session(app_name="race", user_id="u1", session_id=s.id)
    assert stored is not None and [e.id for e in stored.events] == ["e-1", "e-2"]
    assert stored.revision == 2


async def test_tasks_appending_through_one_session_object_take_turns(
    service: SqlSessionService,
) -> None:
    """append_event's docstring: appends through one object from several tasks run one
    after another (as ADK's InMemorySessionService and DatabaseSessionService allow);
    another object loaded before them is still stale."""
    s = await service.create_session(app_name="race", user_id="u1")
    other = await service.get_session(app_name="race", user_id="u1", session_id=s.id)
    assert other is not None
    await asyncio.gather(
        *(
            service.append_event(
                s, Event(author="a", actions=EventActions(state_delta={f"k{n}": n}))
            )
            for n in range(20)
        )
    )
    assert s.revision == len(s.events) == 20
    stored = await service.get_session(app_name="race", user_id="u1", session_id=s.id)
    assert stored is not None
    assert [e.id for e in stored.events] == [e.id for e in s.events]
    assert stored.state == s.state == {f"k{n}": n for n in range(20)}
    with pytest.raises(StaleSessionError):
        await service.append_event(other, Event(author="late"))
    # a cancelled waiter leaves the lock usable
    waiting = [asyncio.create_task(service.append_event(s, Event(author="w"))) for _ in range(5)]
    waiting[2].cancel()
    done = await asyncio.gather(*waiting, return_exceptions=True)
    assert sum(isinstance(d, asyncio.CancelledError) for d in done) <= 1
    stored = await service.get_session(app_name="race", user_id="u1", session_id=s.id)
    assert stored is not None and stored.revision == len(s.events) == len(stored.events)


async def test_the_adk_classes_let_tasks_take_turns_too(db_url: str) -> None:
    pytest.importorskip("google.adk")
    from google.adk.events import Event as AdkEvent
    from google.adk.events import EventActions as AdkActions

    from adk_sqlstore.adk import SqlSessionService as AdkSessions

    async with AdkSessions(db_url, auto_migrate=True) as service:
        s = await service.create_session(app_name="race", user_id="u1")
        await asyncio.gather(
            *(
                service.append_event(
                    s, AdkEvent(author="a", actions=AdkActions(state_delta={f"k{n}": n}))
                )
                for n in range(5)
            )
        )
        stored = await service.get_session(app_name="race", user_id="u1", session_id=s.id)
        assert stored is not None and len(stored.events) == 5
        assert stored.state == {f"k{n}": n for n in range(5)}


async def _statistics(memory: SqlMemoryService, app: str) -> tuple[int, int, Any]:
    """(memories stored, memories found by a search of every one, the statistics row's
    doc_count or None) of user ``u`` of ``app``."""
    async with memory.store.engine.connect() as conn:
        stored = (
            await conn.execute(
                text("SELECT count(*) FROM sqlstore_memories WHERE app_name = :a"), {"a": app}
            )
        ).scalar_one()
        counted = (
            await conn.execute(
                text("SELECT doc_count FROM sqlstore_memory_stats WHERE app_name = :a"),
                {"a": app},
            )
        ).scalar()
    found = await memory.search_memory(app_name=app, user_id="u", query="alpha", limit=1000)
    return int(stored), len(found.memories), counted


@SOAK
async def test_forget_user_racing_a_memory_write_leaves_all_of_it_or_none(db_url: str) -> None:
    """A user forgotten while ``add_memory`` of 300 facts runs, started a little later
    each round: afterwards either nothing of the user is left, or the 300 memories all
    are, counted in the user's statistics and found by search (found by a review: the
    memories of a write committed meanwhile were left without their statistics row,
    found by no search, on PostgreSQL and MySQL)."""
    async with SqlSessionService.from_url(db_url) as service:
        memory = SqlMemoryService(service.store)
        for run in range(25):
            app = f"forget-race-{run}"
            facts = [
                MemoryEntry(content={"parts": [{"text": f"fact {i} alpha"}]}) for i in range(300)
            ]

            async def forget(delay: float = 0.003 * run, app: str = app) -> None:
                await asyncio.sleep(delay)
                await service.forget_user(app_name=app, user_id="u")

            await asyncio.gather(
                memory.add_memory(app_name=app, user_id="u", memories=facts), forget()
            )
            stored, found, counted = await _statistics(memory, app)
            assert (stored, found, counted or 0) in ((0, 0, 0), (300, 300, 300)), run


async def test_writers_of_one_users_memories_never_deadlock(db_url: str) -> None:
    """Four tasks, each ingesting a session of one user and deleting its memories again,
    25 times: no call fails (found by a review: on MySQL the row triggers locked memory
    rows before the user's statistics row, and writers of one user deadlocked), and the
    statistics end where the memories are."""
    async with SqlSessionService.from_url(db_url) as service:
        memory = SqlMemoryService(service.store)
        sessions = []
        for k in range(4):
            s = await service.create_session(app_name="deadlock", user_id="u")
            for i in range(10):
                text_ = f"word{k}{i} common{i} topic{i * k} alpha"
                await service.append_event(
                    s, Event(author="user", content={"role": "user", "parts": [{"text": text_}]})
                )
            sessions.append(s)

        async def churn(session: Any) -> None:
            for _ in range(25):
                await memory.add_session_to_memory(session)
                await memory.delete_memories(
                    app_name="deadlock", user_id="u", session_id=session.id
                )
            await memory.add_session_to_memory(session)

        await asyncio.gather(*(churn(s) for s in sessions))
        assert await _statistics(memory, "deadlock") == (40, 40, 40)
