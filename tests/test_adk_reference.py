"""What ADK 2.13's own session services do, where docs/adk-compatibility.md says ours
does the same or differs on purpose.

The installed google-adk's ``InMemorySessionService``, ``DatabaseSessionService`` (on
an SQLite file) and ``SqliteSessionService`` are run through the cases of
``tests/test_adk_compat_sessions_later.py``: when an upgrade of google-adk changes one of
these behaviours, a test here fails, and the list and our tests are refreshed with it.
These tests check ADK, not us; they keep the list's column "ADK's services" true.
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("google.adk", reason="ADK's services need google.adk (adk extra)")

from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.events import Event, EventActions
from google.adk.sessions import (
    DatabaseSessionService,
    InMemorySessionService,
    Session,
)
from google.adk.sessions.sqlite_session_service import SqliteSessionService

KINDS = ("in_memory", "database", "sqlite")
APP = "my_app"


@pytest.fixture(params=KINDS)
async def adk_service(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    """One of ADK's own session services, on a file of the test's own."""
    kind = request.param
    if kind == "in_memory":
        yield InMemorySessionService()
    elif kind == "database":
        service = DatabaseSessionService(f"sqlite+aiosqlite:///{tmp_path / 'adk.db'}")
        yield service
        await service.close()
    else:
        yield SqliteSessionService(str(tmp_path / "adk-sqlite.db"))


def _kind(service: Any) -> str:
    kinds: dict[type[Any], str] = {
        InMemorySessionService: "in_memory",
        DatabaseSessionService: "database",
        SqliteSessionService: "sqlite",
    }
    return kinds[type(service)]


async def test_adk_lists_the_least_recently_updated_first(adk_service: Any) -> None:
    for session_id in ("a", "b", "c"):
        await adk_service.create_session(app_name=APP, user_id="u", session_id=session_id)
    first = await adk_service.get_session(app_name=APP, user_id="u", session_id="a")
    await asyncio.sleep(0.01)
    await adk_service.append_event(first, Event(invocation_id="i", author="user"))
    listed = await adk_service.list_sessions(app_name=APP, user_id="u")
    assert [s.id for s in listed.sessions] == ["b", "c", "a"]


async def test_adk_stores_dict_none_and_false_values_as_given(adk_service: Any) -> None:
    session = await adk_service.create_session(
        app_name=APP,
        user_id="u1",
        session_id="s1",
        state={"profile": {"name": "ada"}, "flag": True, "off": False, "user:pref": "dark"},
    )
    delta = {"profile": {"name": "bob"}, "flag": None, "new_flag": True, "user:pref": None}
    await adk_service.append_event(
        session, Event(invocation_id="i", author="user", actions=EventActions(state_delta=delta))
    )
    got = await adk_service.get_session(app_name=APP, user_id="u1", session_id="s1")
    assert got.state == {**delta, "off": False}


async def test_adk_raises_session_not_found_for_a_session_never_created(adk_service: Any) -> None:
    never = Session(app_name=APP, user_id="user", id="never_created")
    with pytest.raises(SessionNotFoundError):
        await adk_service.append_event(never, Event(invocation_id="i", author="user"))


async def test_adk_strips_session_ids_except_its_database_service(adk_service: Any) -> None:
    await adk_service.create_session(app_name=APP, user_id="u", session_id="ex")
    if _kind(adk_service) == "database":
        padded = await adk_service.create_session(app_name=APP, user_id="u", session_id="  ex  ")
        blank = await adk_service.create_session(app_name=APP, user_id="u", session_id="   ")
        assert (padded.id, blank.id) == ("  ex  ", "   ")
    else:
        with pytest.raises(AlreadyExistsError):
            await adk_service.create_session(app_name=APP, user_id="u", session_id="  ex  ")
        blank = await adk_service.create_session(app_name=APP, user_id="u", session_id="   ")
        assert blank.id.strip()


async def test_adk_deduplicates_an_equal_event_in_memory_only(adk_service: Any) -> None:
    """Its SQL services raise the database's own error (not an ADK error) instead."""
    session = await adk_service.create_session(app_name=APP, user_id="u", session_id="d")
    event = Event(invocation_id="i", author="user", actions=EventActions(state_delta={"c": 1}))
    await adk_service.append_event(session, event)
    if _kind(adk_service) == "in_memory":
        await adk_service.append_event(session, event.model_copy(deep=True))
    else:
        with pytest.raises(Exception, match="UNIQUE constraint failed") as raised:
            await adk_service.append_event(session, event.model_copy(deep=True))
        assert not isinstance(raised.value, ValueError)  # not one of ADK's typed errors
    got = await adk_service.get_session(app_name=APP, user_id="u", session_id="d")
    assert len(got.events) == 1 and got.state == {"c": 1}


async def test_adk_keeps_different_events_sharing_an_id_in_memory_only(adk_service: Any) -> None:
    session = await adk_service.create_session(app_name=APP, user_id="u", session_id="m")
    await adk_service.append_event(session, Event(id="shared", invocation_id="a", author="user"))
    second = Event(id="shared", invocation_id="b", author="agent")
    if _kind(adk_service) == "in_memory":
        await adk_service.append_event(session, second)
        expected = ["user", "agent"]
    else:
        with pytest.raises(Exception, match="UNIQUE constraint failed"):
            await adk_service.append_event(session, second)
        expected = ["user"]
    got = await adk_service.get_session(app_name=APP, user_id="u", session_id="m")
    assert [e.author for e in got.events] == expected


async def test_adk_database_service_orders_tied_timestamps_by_event_id(adk_service: Any) -> None:
    """Ours keeps append order, as ADK's in-memory and SQLite services do
    (docs/adk-compatibility.md)."""
    session = await adk_service.create_session(app_name=APP, user_id="u", session_id="t")
    for event_id in ("event_z", "event_a", "event_m"):
        await adk_service.append_event(session, Event(id=event_id, author="user", timestamp=100.0))
    got = await adk_service.get_session(app_name=APP, user_id="u", session_id="t")
    ids = [e.id for e in got.events]
    if _kind(adk_service) == "database":
        assert ids == ["event_a", "event_m", "event_z"]
    else:
        assert ids == ["event_z", "event_a", "event_m"]


async def test_adk_sql_services_store_a_non_json_state_value_converted(
    adk_service: Any,
) -> None:
    """A datetime is stored as its ISO text, a function as its str() (the in-memory
    service keeps the objects); ours raises InvalidStateError instead
    (docs/adk-compatibility.md)."""
    session = await adk_service.create_session(app_name=APP, user_id="u", session_id="j")
    when = datetime.datetime(2026, 12, 5, 12, 0, tzinfo=datetime.UTC)
    delta = {"when": when, "callback": len, "ok": 2}
    await adk_service.append_event(
        session, Event(invocation_id="i", author="user", actions=EventActions(state_delta=delta))
    )
    got = await adk_service.get_session(app_name=APP, user_id="u", session_id="j")
    if _kind(adk_service) == "in_memory":
        assert got.state == delta
    else:
        assert got.state == {"when": "2026-12-05T12:00:00Z", "callback": str(len), "ok": 2}
