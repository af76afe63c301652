"""Isolation, property-based: random operations by several users of several apps
through every public read and write path (core classes, ADK classes, the CLI's read
commands). No call returns, changes or deletes another (app_name, user_id)'s sessions,
state or memories; ``app:`` state is shared, and only within its app.

Every piece of data a user writes carries that user's marker word; ``app:`` values
carry the app's. A result seen by a caller may hold only the caller's own marker and
its own app's marker.
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from adk_sqlstore import (
    Event,
    EventActions,
    Session,
    SessionNotFoundError,
    SqlMemoryService,
    SqlSessionService,
)
from adk_sqlstore.cli import app as cli_app

from .conftest import Figures, examples

adk = pytest.importorskip("google.adk")

from google.adk.events import Event as AdkEvent  # noqa: E402
from google.adk.events import EventActions as AdkActions  # noqa: E402

from adk_sqlstore.adk import SqlMemoryService as AdkMemoryService  # noqa: E402
from adk_sqlstore.adk import SqlSessionService as AdkSessionService  # noqa: E402

APPS = ["app-one", "app-two"]
USERS = ["alice", "bob", "carol"]
OWNERS = [(a, u) for a in APPS for u in USERS]
runner = CliRunner(env={"COLUMNS": "250"})


def user_marker(app_name: str, user_id: str) -> str:
    return f"zq{APPS.index(app_name)}{user_id}"


def app_marker(app_name: str) -> str:
    return f"zqapp{APPS.index(app_name)}"


ALL_MARKERS = re.compile(r"zq(?:app\d|\d[a-z]+)")


def assert_only_own(seen: Any, app_name: str, user_id: str, *, app_wide: bool = False) -> None:
    """``seen`` (any result, as JSON or text) holds no other user's or app's marker.
    With ``app_wide`` (a listing of every user of the app), any marker of the app."""
    blob = seen if isinstance(seen, str) else json.dumps(seen, default=str, ensure_ascii=False)
    allowed = {app_marker(app_name)}
    if app_wide:
        allowed |= {user_marker(app_name, u) for u in USERS}
    else:
        allowed.add(user_marker(app_name, user_id))
    leaked = set(ALL_MARKERS.findall(blob)) - allowed
    assert not leaked, f"{app_name}/{user_id} saw {leaked}"


def dump(obj: Any) -> Any:
    return obj.model_dump(mode="json") if hasattr(obj, "model_dump") else obj


@dataclass
class World:
    """What each owner made: session id -> number of events, and what was ingested."""

    sessions: dict[tuple[str, str], dict[str, int]] = field(
        default_factory=lambda: {o: {} for o in OWNERS}
    )
    ingested: dict[tuple[str, str], dict[str, int]] = field(
        default_factory=lambda: {o: {} for o in OWNERS}
    )  # session id -> events it had when last ingested
    ops: int = 0


async def _cli(*args: str) -> str:
    result = await asyncio.to_thread(runner.invoke, cli_app, list(args))
    return result.output


@settings(
    max_examples=examples(25),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
async def test_random_operations_never_cross_users_or_apps(
    db_url: str, data: st.DataObject, figures: Figures
) -> None:
    core = SqlSessionService.from_url(db_url)
    memory = SqlMemoryService(core.engine)
    adk_sessions = AdkSessionService(engine=core.engine)
    adk_memory = AdkMemoryService(engine=core.engine)
    world = World()
    try:
        # start from nothing: earlier examples ran on the same database
        for a, u in OWNERS:
            await core.forget_user(app_name=a, user_id=u)
        for _ in range(data.draw(st.integers(15, 40), label="operations")):
            caller = data.draw(st.sampled_from(OWNERS), label="caller")
            victim = data.draw(st.sampled_from([o for o in OWNERS if o != caller]), label="victim")
            op = data.draw(
                st.sampled_from(
                    [
                        "create",
                        "adk_create",
                        "append",
                        "adk_append",
                        "ingest",
                        "adk_ingest",
                        "get_victims",
                        "adk_get_victims",
                        "delete_victims",
                        "adk_delete_victims",
                        "append_to_victims",
                        "list",
                        "adk_list",
                        "list_app",
                        "search",
                        "adk_search",
                        "states",
                        "delete_victims_memories",
                        "cli_list",
                        "cli_show_victims",
                        "cli_search",
                    ]
                ),
                label="op",
            )
            await _run(op, caller, victim, world, core, memory, adk_sessions, adk_memory, db_url)
            world.ops += 1
        await _check_world(world, core, memory)
    finally:
        await core.close()
    figures.tally(examples=1, operations=world.ops, crossings=0)


def _event(app_name: str, user_id: str, n: int, *, adk_types: bool = False) -> Any:
    mark = user_marker(app_name, user_id)
    delta = {
        f"note_{n}": mark,
        f"user:note_{n}": mark,
        f"app:note_{user_id}": app_marker(app_name),
    }
    content = {"role": "user", "parts": [{"text": f"{mark} turn {n} about lunch"}]}
    if adk_types:
        return AdkEvent(author="user", content=content, actions=AdkActions(state_delta=delta))
    return Event(author="user", content=content, actions=EventActions(state_delta=delta))


async def _run(
    op: str,
    caller: tuple[str, str],
    victim: tuple[str, str],
    world: World,
    core: SqlSessionService,
    memory: SqlMemoryService,
    adk_sessions: AdkSessionService,
    adk_memory: AdkMemoryService,
    url: str,
) -> None:
    a, u = caller
    mine = world.sessions[caller]
    theirs = list(world.sessions[victim])
    victim_sid = theirs[0] if theirs else "no-such-session"
    mark = user_marker(a, u)
    if op in ("create", "adk_create"):
        state = {"mood": mark, "user:seen": mark, "app:menu": app_marker(a)}
        service: Any = core if op == "create" else adk_sessions
        s = await service.create_session(app_name=a, user_id=u, state=state)
        assert_only_own(dump(s), a, u)
        mine[s.id] = 0
    elif op in ("append", "adk_append") and mine:
        sid = sorted(mine)[0]
        if op == "append":
            s = await core.get_session(app_name=a, user_id=u, session_id=sid)
            assert s is not None
            await core.append_event(s, _event(a, u, mine[sid]))
        else:
            s = await adk_sessions.get_session(app_name=a, user_id=u, session_id=sid)
            assert s is not None
            await adk_sessions.append_event(s, _event(a, u, mine[sid], adk_types=True))
        assert_only_own(dump(s), a, u)
        mine[sid] += 1
    elif op in ("ingest", "adk_ingest") and mine:
        sid = sorted(mine)[-1]
        if op == "ingest":
            s = await core.get_session(app_name=a, user_id=u, session_id=sid)
            assert s is not None
            await memory.add_session_to_memory(s)
        else:
            adk_s = await adk_sessions.get_session(app_name=a, user_id=u, session_id=sid)
            assert adk_s is not None
            await adk_memory.add_session_to_memory(adk_s)
        world.ingested[caller][sid] = mine[sid]
    elif op == "get_victims":
        assert await core.get_session(app_name=a, user_id=u, session_id=victim_sid) is None
    elif op == "adk_get_victims":
        assert await adk_sessions.get_session(app_name=a, user_id=u, session_id=victim_sid) is None
    elif op == "delete_victims":
        await core.delete_session(app_name=a, user_id=u, session_id=victim_sid)
    elif op == "adk_delete_victims":
        await adk_sessions.delete_session(app_name=a, user_id=u, session_id=victim_sid)
    elif op == "append_to_victims":
        forged = Session(id=victim_sid, app_name=a, user_id=u)
        with pytest.raises(SessionNotFoundError):
            await core.append_event(forged, _event(a, u, 0))
    elif op == "list":
        listed = await core.list_sessions(app_name=a, user_id=u)
        assert {s.id for s in listed.sessions} == set(mine)
        assert_only_own(dump(listed), a, u)
    elif op == "adk_list":
        adk_listed = await adk_sessions.list_sessions(app_name=a, user_id=u)
        assert {s.id for s in adk_listed.sessions} == set(mine)
        assert_only_own(dump(adk_listed), a, u)
    elif op == "list_app":
        listed = await core.list_sessions(app_name=a)
        assert {s.user_id for s in listed.sessions} <= set(USERS)
        assert {s.app_name for s in listed.sessions} <= {a}
        assert_only_own(dump(listed), a, u, app_wide=True)
    elif op in ("search", "adk_search"):
        query = f"{user_marker(*victim)} {mark} lunch turn"
        found: Any
        if op == "search":
            found = await memory.search_memory(app_name=a, user_id=u, query=query)
        else:
            found = await adk_memory.search_memory(app_name=a, user_id=u, query=query)
        assert_only_own(dump(found), a, u)
        assert {m.custom_metadata["session_id"] for m in found.memories} <= set(
            world.ingested[caller]
        )
    elif op == "states":
        assert_only_own(await core.get_user_state(app_name=a, user_id=u), a, u)
        assert_only_own(await core.get_app_state(app_name=a), a, u)
    elif op == "delete_victims_memories":
        await memory.delete_memories(app_name=a, user_id=u, session_id=victim_sid)
    elif op == "cli_list":
        output = await _cli("sessions", "list", "--app", a, "--user", u, "--url", url)
        assert_only_own(output, a, u)
        for sid in theirs:
            assert sid not in output
    elif op == "cli_show_victims":
        output = await _cli("sessions", "show", victim_sid, "--app", a, "--user", u, "--url", url)
        assert_only_own(output, a, u)
    elif op == "cli_search":
        query = f"{user_marker(*victim)} lunch"
        output = await _cli("memory", "search", query, "--app", a, "--user", u, "--url", url)
        assert_only_own(" ".join(output.split()).replace(query, "<query>"), a, u)


async def _check_world(world: World, core: SqlSessionService, memory: SqlMemoryService) -> None:
    """Each owner still has exactly what it made, whatever the others did."""
    for (a, u), sessions in world.sessions.items():
        listed = await core.list_sessions(app_name=a, user_id=u)
        assert {s.id for s in listed.sessions} == set(sessions)
        for sid, count in sessions.items():
            s = await core.get_session(app_name=a, user_id=u, session_id=sid)
            assert s is not None and len(s.events) == count
            assert_only_own(dump(s), a, u)
        found = await memory.search_memory(
            app_name=a, user_id=u, query=f"{user_marker(a, u)} lunch", limit=1000
        )
        with_text = {sid for sid, n in world.ingested[(a, u)].items() if n > 0}
        assert {m.custom_metadata["session_id"] for m in found.memories} >= with_text
        assert_only_own(dump(found), a, u)
