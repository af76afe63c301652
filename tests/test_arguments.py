# mypy: disable-error-code="arg-type"
# (this file passes arguments of the wrong type on purpose, to see them refused)
"""Arguments of the wrong kind, on an SQLite file and PostgreSQL.

Every public call refuses an argument of the wrong type or range with a typed error
(:class:`InvalidArgumentError`, or the more specific ``InvalidStateError``,
``InvalidEventError``, ``InvalidMemoryError``) whose message names the argument, and
writes nothing: never an ``AttributeError`` from deep inside, never a half-written row.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from adk_sqlstore import (
    AdkSqlStoreError,
    Event,
    EventActions,
    IngestEvery,
    InvalidArgumentError,
    InvalidEventError,
    InvalidMemoryError,
    InvalidStateError,
    MemoryEntry,
    SqlMemoryService,
    SqlSessionService,
)

APP, USER, SID = "args", "u1", "s1"
Call = Callable[[SqlSessionService, SqlMemoryService, Any], Coroutine[Any, Any, Any]]
KEY = {"app_name": APP, "user_id": USER}


def _event(**delta: Any) -> Event:
    return Event(author="user", actions=EventActions(state_delta=delta))


async def _checkpoint(memory: SqlMemoryService, every: Any) -> None:
    IngestEvery(memory, every=every)


# (call, error type, words the message must contain)
CASES: dict[str, tuple[Call, type[Exception], str]] = {
    "create_session state not a dict": (
        lambda s, m, _: s.create_session(**KEY, session_id="new", state="x=1"),
        InvalidStateError,
        "state must be a dict",
    ),
    "create_session temp: key without a name": (
        lambda s, m, _: s.create_session(**KEY, session_id="new", state={"temp:": 1}),
        InvalidStateError,
        "temp:",
    ),
    "get_session config a string": (
        lambda s, m, _: s.get_session(**KEY, session_id=SID, config="recent"),
        InvalidArgumentError,
        "config",
    ),
    "get_session config with a str count": (
        lambda s, m, _: s.get_session(**KEY, session_id=SID, config={"num_recent_events": "3"}),
        InvalidArgumentError,
        "config",
    ),
    "get_session config with a negative count": (
        lambda s, m, _: s.get_session(
            **KEY,
            session_id=SID,
            config=SimpleNamespace(num_recent_events=-1, after_timestamp=None),
        ),
        InvalidArgumentError,
        "num_recent_events",
    ),
    "list_sessions limit a str": (
        lambda s, m, _: s.list_sessions(**KEY, limit="10"),
        InvalidArgumentError,
        "limit",
    ),
    "list_sessions limit True": (
        lambda s, m, _: s.list_sessions(**KEY, limit=True),
        InvalidArgumentError,
        "limit",
    ),
    "list_sessions limit 0": (
        lambda s, m, _: s.list_sessions(**KEY, limit=0),
        InvalidArgumentError,
        "limit",
    ),
    "list_sessions page_token made up": (
        lambda s, m, _: s.list_sessions(**KEY, page_token="bm90IGEgdG9rZW4="),
        InvalidArgumentError,
        "page_token",
    ),
    "list_sessions page_token empty": (
        lambda s, m, _: s.list_sessions(**KEY, page_token=""),
        InvalidArgumentError,
        "page_token",
    ),
    "append_event to a str": (
        lambda s, m, session: s.append_event(SID, _event(a=1)),
        InvalidArgumentError,
        "session must be a Session",
    ),
    "append_event None": (
        lambda s, m, session: s.append_event(session, None),
        InvalidEventError,
        "event must be an Event",
    ),
    "append_event a dict that is no event": (
        lambda s, m, session: s.append_event(session, {"author": 5}),
        InvalidEventError,
        "event",
    ),
    "append_event state_delta a list": (
        lambda s, m, session: s.append_event(
            session,
            Event.model_construct(
                author="u", actions=EventActions.model_construct(state_delta=["a"])
            ),
        ),
        InvalidStateError,
        "state must be a dict",
    ),
    "prune older_than a str": (
        lambda s, m, _: s.prune(older_than="30d"),
        InvalidArgumentError,
        "older_than",
    ),
    "prune older_than negative": (
        lambda s, m, _: s.prune(older_than=timedelta(days=-1)),
        InvalidArgumentError,
        "older_than",
    ),
    "prune batch_size 0": (
        lambda s, m, _: s.prune(older_than=0, batch_size=0),
        InvalidArgumentError,
        "batch_size",
    ),
    "prune dry_run a str": (
        lambda s, m, _: s.prune(older_than=0, dry_run="no"),
        InvalidArgumentError,
        "dry_run",
    ),
    "import_session a str": (
        lambda s, m, _: s.import_session("s1"),
        InvalidArgumentError,
        "session must be a Session",
    ),
    "import_state state a list": (
        lambda s, m, _: s.import_state(app_name=APP, user_id=USER, state=[("a", 1)]),
        InvalidStateError,
        "state must be a dict",
    ),
    "import_state replace a str": (
        lambda s, m, _: s.import_state(app_name=APP, user_id=USER, state={"k": 2}, replace="yes"),
        InvalidArgumentError,
        "replace",
    ),
    "IngestEvery every 0": (
        lambda s, m, _: _checkpoint(m, 0),
        InvalidArgumentError,
        "every",
    ),
    "add_session_to_memory None": (
        lambda s, m, _: m.add_session_to_memory(None),
        InvalidArgumentError,
        "session must be a Session",
    ),
    "add_events_to_memory events None": (
        lambda s, m, _: m.add_events_to_memory(**KEY, events=None),
        InvalidMemoryError,
        "events must be a list",
    ),
    "add_events_to_memory events one event": (
        lambda s, m, _: m.add_events_to_memory(**KEY, events=_event(a=1)),
        InvalidMemoryError,
        "events must be a list",
    ),
    "add_events_to_memory custom_metadata a str": (
        lambda s, m, _: m.add_events_to_memory(
            **KEY,
            events=[_event(a=1)],
            custom_metadata="tag",
        ),
        InvalidMemoryError,
        "custom_metadata",
    ),
    "add_memory memories a number": (
        lambda s, m, _: m.add_memory(**KEY, memories=5),
        InvalidMemoryError,
        "memories must be a list of memories",
    ),
    "add_memory memories one entry": (
        lambda s, m, _: m.add_memory(
            **KEY,
            memories=MemoryEntry(content={"parts": [{"text": "x"}]}),
        ),
        InvalidMemoryError,
        "memories must be a list",
    ),
    "search_memory query None": (
        lambda s, m, _: m.search_memory(**KEY, query=None),
        InvalidArgumentError,
        "query",
    ),
    "search_memory limit 0": (
        lambda s, m, _: m.search_memory(**KEY, query="x", limit=0),
        InvalidArgumentError,
        "limit",
    ),
    "delete_memories memory_ids one id": (
        lambda s, m, _: m.delete_memories(**KEY, memory_ids="abc"),
        InvalidArgumentError,
        "memory_ids",
    ),
    "ingest_idle_sessions idle_for a str": (
        lambda s, m, _: m.ingest_idle_sessions("30m"),
        InvalidArgumentError,
        "idle_for",
    ),
    "count_idle_sessions idle_for negative": (
        lambda s, m, _: m.count_idle_sessions(idle_for=-5),
        InvalidArgumentError,
        "idle_for",
    ),
}


async def _snapshot(service: SqlSessionService, memory: SqlMemoryService) -> Any:
    sessions = await service.list_sessions(app_name=APP)
    return (
        sorted((s.user_id, s.id, s.last_update_time) for s in sessions.sessions),
        [
            (e.id, e.actions.state_delta)
            for e in (await service.get_session(**KEY, session_id=SID)).events  # type: ignore[union-attr]
        ],
        await service.get_user_state(**KEY),
        [m.id for m in (await memory.search_memory(**KEY, query="kept")).memories],
    )


@pytest.mark.parametrize("case", sorted(CASES))
async def test_arguments_of_the_wrong_kind_are_refused_by_name_and_write_nothing(
    service: SqlSessionService, case: str
) -> None:
    call, error, words = CASES[case]
    memory = SqlMemoryService(service.engine)
    session = await service.create_session(**KEY, session_id=SID, state={"user:k": 1})
    await service.append_event(session, _event(n=1))
    await memory.add_memory(**KEY, memories=[MemoryEntry(content={"parts": [{"text": "kept"}]})])
    before = await _snapshot(service, memory)
    with pytest.raises(error) as raised:
        await call(service, memory, session)
    assert isinstance(raised.value, AdkSqlStoreError) and isinstance(raised.value, ValueError)
    assert words in str(raised.value)
    assert await _snapshot(service, memory) == before
    # the session object passed in is still usable
    await service.append_event(session, _event(n=2))
