"""Bad input: nothing is stored that cannot be read back, clear typed errors, one
rule for identifiers on every backend, nothing of a refused call written."""

from __future__ import annotations

import datetime
import math
import time
from typing import Any

import pytest

from adk_sqlstore import (
    Event,
    GetSessionConfig,
    InvalidEventError,
    InvalidIdentifierError,
    InvalidStateError,
    MemoryEntry,
    SqlMemoryService,
    SqlSessionService,
    StaleSessionError,
)


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value]
    return value


UNSTORABLE_EVENTS: dict[str, dict[str, Any]] = {
    "infinite timestamp": {"timestamp": math.inf},
    "NaN timestamp": {"timestamp": math.nan},
    "millisecond timestamp": {"timestamp": 1795958888277.0},
    "deep nesting": {
        "content": {"parts": [{"function_call": {"name": "f", "args": {"v": nested(300)}}}]}
    },
    "huge integer": {
        "content": {"parts": [{"function_call": {"name": "f", "args": {"v": 10**4400}}}]}
    },
    "NaN in args": {
        "content": {"parts": [{"function_call": {"name": "f", "args": {"v": math.nan}}}]}
    },
    "set in args": {
        "content": {"parts": [{"function_call": {"name": "f", "args": {"v": {1, 2}}}}]}
    },
    "tuple in args": {
        "content": {"parts": [{"function_call": {"name": "f", "args": {"v": (1, 2)}}}]}
    },
    "datetime in an extra field": {
        "custom_metadata": {"at": datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)}
    },
    "NUL in author": {"author": "a\x00b"},
}


@pytest.mark.parametrize("case", list(UNSTORABLE_EVENTS), ids=list(UNSTORABLE_EVENTS))
async def test_an_event_that_would_not_read_back_is_refused(
    service: SqlSessionService, case: str
) -> None:
    s = await service.create_session(app_name="app", user_id="u1", state={"k": 1})
    await service.append_event(s, Event(author="user", content={"parts": [{"text": "ok"}]}))
    bad = Event.model_validate(
        {"author": "agent", **UNSTORABLE_EVENTS[case], "actions": {"state_delta": {"k": 2}}}
    )
    with pytest.raises(InvalidEventError):
        await service.append_event(s, bad)
    got = await service.get_session(app_name="app", user_id="u1", session_id=s.id)
    assert got is not None  # still readable
    assert [e.text() for e in got.events] == ["ok"] and got.state == {"k": 1}
    assert got.revision == 1 and s.revision == 1


async def test_import_refuses_a_session_that_would_not_read_back(
    service: SqlSessionService,
) -> None:
    from adk_sqlstore.sessions.json_files import load_session

    for stamp in ["1e400", "NaN"]:
        doc = (
            '{"id": "s", "app_name": "app", "user_id": "u1", "events": [{"id": "e1",'
            f' "author": "user", "timestamp": {stamp}}}]}}'
        )
        with pytest.raises(InvalidEventError, match="timestamp"):
            await service.import_session(load_session(doc))
        assert await service.get_session(app_name="app", user_id="u1", session_id="s") is None


async def test_memory_refuses_out_of_range_times_and_bad_fields(
    service: SqlSessionService,
) -> None:
    memory = SqlMemoryService(service.engine)
    event = Event(
        author="user", timestamp=time.time() * 1000, content={"parts": [{"text": "apple strudel"}]}
    )
    with pytest.raises(InvalidEventError, match="milliseconds"):
        await memory.add_events_to_memory(app_name="app", user_id="u1", events=[event])
    with pytest.raises(InvalidEventError, match="author"):
        await memory.add_memory(
            app_name="app",
            user_id="u1",
            memories=[MemoryEntry(content={"parts": [{"text": "x"}]}, author="a\x00b")],
        )
    with pytest.raises(InvalidIdentifierError, match="memory id"):
        await memory.add_memory(
            app_name="app",
            user_id="u1",
            memories=[MemoryEntry(id="\x00", content={"parts": [{"text": "x"}]})],
        )
    with pytest.raises(InvalidStateError, match="custom_metadata"):
        await memory.add_memory(
            app_name="app",
            user_id="u1",
            custom_metadata={"x": math.nan},
            memories=[MemoryEntry(content={"parts": [{"text": "x"}]})],
        )
    assert (await memory.search_memory(app_name="app", user_id="u1", query="x")).memories == []


@pytest.mark.parametrize("bad", ["a\x00b", "\ud800", "", 42])
async def test_identifiers_follow_one_rule_on_reads_too(
    service: SqlSessionService, bad: Any
) -> None:
    memory = SqlMemoryService(service.engine)
    calls = [
        service.get_session(app_name="app", user_id="u1", session_id=bad),
        service.get_session(app_name=bad, user_id="u1", session_id="s"),
        service.list_sessions(app_name=bad),
        service.list_sessions(app_name="app", user_id=bad),
        service.get_user_state(app_name="app", user_id=bad),
        service.get_app_state(app_name=bad),
        service.delete_session(app_name="app", user_id=bad, session_id="s"),
        service.forget_user(app_name="app", user_id=bad),
        memory.search_memory(app_name="app", user_id=bad, query="x"),
        memory.delete_memories(app_name="app", user_id="u1", memory_ids=[bad]),
    ]
    for call in calls:
        with pytest.raises(InvalidIdentifierError):
            await call


async def test_integers_too_long_for_python_are_refused_naming_the_key(
    service: SqlSessionService,
) -> None:
    s = await service.create_session(app_name="app", user_id="u1", state={"fine": 10**3999})
    with pytest.raises(InvalidStateError, match=r"'user:x'.*4000 digits"):
        await service.append_event(
            s, Event(author="a", actions={"state_delta": {"user:x": [10**5000]}})
        )
    got = await service.get_session(app_name="app", user_id="u1", session_id=s.id)
    assert got is not None and got.state == {"fine": 10**3999}


async def test_huge_limits_are_taken_as_everything(service: SqlSessionService) -> None:
    memory = SqlMemoryService(service.engine)
    s = await service.create_session(app_name="app", user_id="u1")
    await service.append_event(s, Event(author="user", content={"parts": [{"text": "fig"}]}))
    got = await service.get_session(
        app_name="app",
        user_id="u1",
        session_id=s.id,
        config=GetSessionConfig(num_recent_events=2**63),
    )
    assert got is not None and len(got.events) == 1
    await memory.add_session_to_memory(s)
    found = await memory.search_memory(app_name="app", user_id="u1", query="fig", limit=10**20)
    assert len(found.memories) == 1


async def test_an_object_of_a_deleted_session_cannot_write_to_its_successor(
    service: SqlSessionService,
) -> None:
    old = await service.create_session(app_name="app", user_id="u1", session_id="same")
    await service.delete_session(app_name="app", user_id="u1", session_id="same")
    await service.create_session(app_name="app", user_id="u1", session_id="same")
    with pytest.raises(StaleSessionError, match="deleted and created again"):
        await service.append_event(old, Event(author="ghost"))
    got = await service.get_session(app_name="app", user_id="u1", session_id="same")
    assert got is not None and got.events == []
