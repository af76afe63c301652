"""Retention: ``SqlSessionService.prune`` and ``adk-sqlstore prune``, on an SQLite file
and on PostgreSQL.

Issue 6: "deletes sessions (with their events) not updated since then, optionally their
memories too, in batches with a progress bar; reports counts; never touches user or
app state."
"""

from __future__ import annotations

import math
import time
from datetime import timedelta
from typing import Any

import pytest
from typer.testing import CliRunner

from adk_sqlstore import (
    Event,
    EventActions,
    MemoryEntry,
    PruneReport,
    SessionNotFoundError,
    SqlMemoryService,
    SqlSessionService,
)
from adk_sqlstore.cli import app

from .conftest import run_sync
from .helpers import text_of

DAY = 86400.0
runner = CliRunner(env={"COLUMNS": "200"})


async def _session(
    service: SqlSessionService, app_name: str, user_id: str, age_days: float, text: str
) -> Any:
    """A session whose last event (and so last update) is ``age_days`` old, with a
    session key, a user: key and an app: key."""
    s = await service.create_session(app_name=app_name, user_id=user_id, state={"mood": "ok"})
    await service.append_event(
        s,
        Event(
            author="user",
            timestamp=time.time() - age_days * DAY,
            content={"role": "user", "parts": [{"text": text}]},
            actions=EventActions(
                state_delta={
                    "step": 1,
                    f"user:last_{s.id[:8]}": text,
                    f"app:seen_{user_id}": True,
                }
            ),
        ),
    )
    return s


async def _world(service: SqlSessionService) -> dict[str, Any]:
    """Old and recent sessions of two users in two apps, all ingested into memory, and
    one fact with no session."""
    made = {
        "old_a1": await _session(service, "app-a", "u1", 120, "old pancakes in app a"),
        "old_a2": await _session(service, "app-a", "u2", 95, "old waffles in app a"),
        "new_a1": await _session(service, "app-a", "u1", 10, "new pancakes in app a"),
        "old_b1": await _session(service, "app-b", "u1", 200, "old pancakes in app b"),
        "new_b2": await _session(service, "app-b", "u2", 1, "new waffles in app b"),
    }
    async with SqlMemoryService(service.engine) as memory:
        for s in made.values():
            await memory.add_session_to_memory(s)
        await memory.add_memory(
            app_name="app-a",
            user_id="u1",
            memories=[MemoryEntry(content={"parts": [{"text": "fact: pancakes are sacred"}]})],
        )
    return made


async def _alive(service: SqlSessionService, s: Any) -> bool:
    got = await service.get_session(app_name=s.app_name, user_id=s.user_id, session_id=s.id)
    return got is not None


async def _memory_texts(service: SqlSessionService, app_name: str, user_id: str) -> set[str]:
    async with SqlMemoryService(service.engine) as memory:
        found = await memory.search_memory(
            app_name=app_name, user_id=user_id, query="pancakes waffles fact"
        )
    return {text_of(m) for m in found.memories}


async def test_prune_deletes_old_sessions_and_their_events_only(
    service: SqlSessionService,
) -> None:
    made = await _world(service)
    users_before = {
        (a, u): await service.get_user_state(app_name=a, user_id=u)
        for a in ("app-a", "app-b")
        for u in ("u1", "u2")
    }
    apps_before = {a: await service.get_app_state(app_name=a) for a in ("app-a", "app-b")}

    report = await service.prune(older_than=timedelta(days=90))

    assert isinstance(report, PruneReport) and not report.dry_run
    assert (report.sessions, report.events, report.memories) == (3, 3, 0)
    assert report.session_state_keys == 6  # "mood" and "step" of each
    assert report.memory_ingestions == 3
    assert abs(report.cutoff - (time.time() - 90 * DAY)) < 60
    for name, s in made.items():
        assert await _alive(service, s) == name.startswith("new"), name
    # never touches user or app state
    for (a, u), state in users_before.items():
        assert await service.get_user_state(app_name=a, user_id=u) == state
    for a, state in apps_before.items():
        assert await service.get_app_state(app_name=a) == state
    # memories stay unless asked
    assert "old pancakes in app a" in await _memory_texts(service, "app-a", "u1")
    # a kept session is whole: its events and state are all there
    kept = await service.get_session(app_name="app-a", user_id="u1", session_id=made["new_a1"].id)
    assert kept is not None and len(kept.events) == 1
    assert kept.state["mood"] == "ok" and kept.state["step"] == 1


async def test_prune_with_memories_removes_only_the_pruned_sessions_memories(
    service: SqlSessionService,
) -> None:
    await _world(service)
    report = await service.prune(older_than=90 * DAY, with_memories=True)
    assert (report.sessions, report.memories) == (3, 3)
    assert await _memory_texts(service, "app-a", "u1") == {
        "new pancakes in app a",
        "fact: pancakes are sacred",
    }
    assert await _memory_texts(service, "app-a", "u2") == set()
    assert await _memory_texts(service, "app-b", "u1") == set()
    assert await _memory_texts(service, "app-b", "u2") == {"new waffles in app b"}


async def test_dry_run_counts_exactly_what_a_prune_then_deletes(
    service: SqlSessionService,
) -> None:
    made = await _world(service)
    planned = await service.prune(older_than=timedelta(days=90), with_memories=True, dry_run=True)
    assert planned.dry_run
    assert all([await _alive(service, s) for s in made.values()])
    done = await service.prune(older_than=timedelta(days=90), with_memories=True)
    assert (planned.sessions, planned.events, planned.memories) == (3, 3, 3)
    for kind in ("sessions", "events", "session_state_keys", "memory_ingestions", "memories"):
        assert getattr(planned, kind) == getattr(done, kind), kind
    again = await service.prune(older_than=timedelta(days=90), with_memories=True)
    assert (again.sessions, again.events, again.memories) == (0, 0, 0)


async def test_prune_goes_in_batches_oldest_first(service: SqlSessionService) -> None:
    ages = [300, 250, 200, 150, 100]
    for n, age in enumerate(ages):
        await _session(service, "app-a", f"u{n}", age, f"turn {n}")
    batches: list[PruneReport] = []
    report = await service.prune(
        older_than=timedelta(days=90), batch_size=2, on_batch=batches.append
    )
    assert [b.sessions for b in batches] == [2, 2, 1]
    assert report.sessions == 5 and report.events == 5
    listed = await service.list_sessions(app_name="app-a")
    assert listed.sessions == []


async def test_a_batch_deletes_the_oldest_sessions_first(service: SqlSessionService) -> None:
    oldest = await _session(service, "app-a", "u1", 300, "oldest")
    younger = await _session(service, "app-a", "u2", 100, "younger")
    first: list[PruneReport] = []

    def stop_after_first(batch: PruneReport) -> None:
        first.append(batch)
        raise KeyboardInterrupt  # an operator stopping the job between batches

    with pytest.raises(KeyboardInterrupt):
        await service.prune(older_than=90 * DAY, batch_size=1, on_batch=stop_after_first)
    assert [b.sessions for b in first] == [1]
    assert not await _alive(service, oldest)
    assert await _alive(service, younger)


async def test_prune_of_one_app_leaves_the_others(service: SqlSessionService) -> None:
    made = await _world(service)
    report = await service.prune(older_than=timedelta(days=90), app_name="app-b")
    assert report.sessions == 1
    assert not await _alive(service, made["old_b1"])
    assert await _alive(service, made["old_a1"]) and await _alive(service, made["old_a2"])


async def test_ingesting_a_session_loaded_before_its_prune_leaves_no_memories(
    service: SqlSessionService,
) -> None:
    """An idle-ingestion job overlapping a prune: the session object was loaded before
    the prune deleted it, and is ingested after. Nothing may be written, or ``prune
    --memories`` would leave memories of a session no later prune can find."""
    s = await _session(service, "app-a", "u1", 120, "secret zebra")
    loaded = await service.get_session(app_name="app-a", user_id="u1", session_id=s.id)
    assert loaded is not None
    await service.prune(older_than=timedelta(days=90), with_memories=True)
    async with SqlMemoryService(service.engine) as memory:
        with pytest.raises(SessionNotFoundError, match="deleted since it was loaded"):
            await memory.add_session_to_memory(loaded)
        # the explicit close of a session that is gone ingests nothing, as documented
        report = await memory.ingest_session(app_name="app-a", user_id="u1", session_id=s.id)
        assert report.sessions == 0
        found = await memory.search_memory(app_name="app-a", user_id="u1", query="zebra")
    assert found.memories == []
    # a session deleted and created again under the same id is another session
    again = await service.create_session(app_name="app-a", user_id="u1", session_id=s.id)
    async with SqlMemoryService(service.engine) as memory:
        with pytest.raises(SessionNotFoundError):
            await memory.add_session_to_memory(loaded)
        await memory.add_session_to_memory(again)
        assert (
            await memory.search_memory(app_name="app-a", user_id="u1", query="zebra")
        ).memories == []


async def test_the_adk_memory_class_refuses_a_pruned_session_too(db_url: str) -> None:
    pytest.importorskip("google.adk")
    from google.adk.errors.session_not_found_error import (
        SessionNotFoundError as AdkSessionNotFoundError,
    )

    from adk_sqlstore.adk import SqlMemoryService as AdkMemory
    from adk_sqlstore.adk import SqlSessionService as AdkSessions

    async with AdkSessions(db_url, auto_migrate=True) as sessions:
        memory = AdkMemory(engine=sessions.engine)
        s = await sessions.create_session(app_name="app-a", user_id="u1")
        await sessions.core.delete_session(app_name="app-a", user_id="u1", session_id=s.id)
        with pytest.raises(AdkSessionNotFoundError) as raised:
            await memory.add_session_to_memory(s)
        assert isinstance(raised.value.__cause__, SessionNotFoundError)


async def test_appending_to_a_pruned_session_fails_clearly(service: SqlSessionService) -> None:
    s = await _session(service, "app-a", "u1", 120, "old")
    await service.prune(older_than=timedelta(days=90))
    with pytest.raises(SessionNotFoundError):
        await service.append_event(s, Event(author="user"))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"older_than": -1.0}, "older_than"),
        ({"older_than": math.nan}, "older_than"),
        ({"older_than": math.inf}, "older_than"),
        ({"older_than": timedelta(days=-1)}, "older_than"),
        ({"older_than": 10**400}, "older_than"),
        ({"older_than": True}, "older_than"),
        ({"older_than": "90d"}, "older_than"),
        ({"older_than": 10.0, "batch_size": 0}, "batch_size"),
        ({"older_than": 10.0, "batch_size": True}, "batch_size"),
        ({"older_than": 10.0, "app_name": ""}, "app_name"),
    ],
)
async def test_bad_arguments_raise_before_anything_is_deleted(
    service: SqlSessionService, kwargs: dict[str, Any], message: str
) -> None:
    s = await _session(service, "app-a", "u1", 120, "old")
    with pytest.raises(ValueError, match=message):
        await service.prune(**kwargs)
    assert await _alive(service, s)


# -- the command ----------------------------------------------------------------------


def test_prune_command_dry_run_then_for_real(db_url: str) -> None:
    async def seed() -> None:
        async with SqlSessionService.from_url(db_url) as service:
            await _world(service)

    run_sync(seed())
    dry = runner.invoke(app, ["prune", "--older-than", "90d", "--dry-run", "--url", db_url])
    assert dry.exit_code == 0, dry.output
    assert "would delete 3 session(s), 3 event(s)" in dry.output
    assert "not updated since" in dry.output

    declined = runner.invoke(app, ["prune", "--older-than", "90d", "--url", db_url], input="n\n")
    assert declined.exit_code == 1 and "Aborted" in declined.output

    done = runner.invoke(
        app,
        [
            *("prune", "--older-than", "90d", "--memories", "--batch-size", "1", "--yes"),
            *("--url", db_url),
        ],
    )
    assert done.exit_code == 0, done.output
    assert "deleted 3 session(s), 3 event(s)" in done.output and "3 memories" in done.output

    async def remaining() -> int:
        async with SqlSessionService.from_url(db_url) as service:
            total = 0
            for a in ("app-a", "app-b"):
                total += len((await service.list_sessions(app_name=a)).sessions)
            return total

    assert run_sync(remaining()) == 2


@pytest.mark.parametrize("age", ["90", "d", "-5d", "ninety days", "1e400d", "nand", "5y"])
def test_prune_command_rejects_ages_it_cannot_read(age: str, sqlite_url: str) -> None:
    result = runner.invoke(app, ["prune", "--older-than", age, "--dry-run", "--url", sqlite_url])
    assert result.exit_code == 2
    assert "is not an age such as 90d" in result.output


@pytest.mark.parametrize("age", ["740000d", "5000000w", "365001d"])
def test_prune_command_refuses_ages_beyond_a_thousand_years(age: str, sqlite_url: str) -> None:
    result = runner.invoke(app, ["prune", "--older-than", age, "--yes", "--url", sqlite_url])
    assert result.exit_code == 2, result.output
    assert "is more than 1000 years" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("age", "seconds"),
    [("45s", 45), ("30m", 1800), ("12h", 43200), ("1.5d", 129600), ("2w", 1209600)],
)
def test_prune_command_reads_ages(age: str, seconds: int, sqlite_url: str) -> None:
    result = runner.invoke(app, ["prune", "--older-than", age, "--dry-run", "--url", sqlite_url])
    assert result.exit_code == 0, result.output
    since = result.output.split("not updated since ")[1].split(")")[0]
    from datetime import datetime

    cutoff = datetime.fromisoformat(since).timestamp()
    assert abs(cutoff - (time.time() - seconds)) < 60
