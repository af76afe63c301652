"""One rule for sizes on every backend: a state key or identifier of any length is
either stored and read back exactly, or refused with the same typed error before
anything is written (issue 11: a 3,000-character key failed on PostgreSQL only)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adk_sqlstore import (
    Event,
    EventActions,
    InvalidIdentifierError,
    InvalidMemoryError,
    InvalidStateError,
    MemoryEntry,
    SqlMemoryService,
    SqlSessionService,
)
from adk_sqlstore.memory.rows import MAX_MEMORY_BYTES
from adk_sqlstore.validation import MAX_IDENTIFIER_BYTES, MAX_STATE_KEY_BYTES

from .conftest import examples
from .helpers import text_of

CHARS = ["k", "é", "界", "😀"]  # 1, 2, 3 and 4 UTF-8 bytes
SETTINGS = settings(
    max_examples=examples(40),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


def _text(size: int, char: str) -> str:
    """About ``size`` UTF-8 bytes of ``char`` (never more than one char over)."""
    return char * max(0, -(-size // len(char.encode())))


async def _count(service: SqlSessionService) -> tuple[int, dict[str, Any], dict[str, Any]]:
    listed = await service.list_sessions(app_name="limits")
    user = await service.get_user_state(app_name="limits", user_id="u1")
    app = await service.get_app_state(app_name="limits")
    return len(listed.sessions), user, app


@SETTINGS
@given(
    size=st.integers(0, 20_000) | st.integers(MAX_STATE_KEY_BYTES - 8, MAX_STATE_KEY_BYTES + 8),
    char=st.sampled_from(CHARS),
    scope=st.sampled_from(["", "user:", "app:"]),
)
async def test_state_keys_of_any_length(
    service: SqlSessionService, size: int, char: str, scope: str
) -> None:
    key = scope + _text(size - len(scope), char) if size > len(scope) else scope
    fits = 0 < len(key.encode()) <= MAX_STATE_KEY_BYTES and key not in ("user:", "app:")
    before = await _count(service)
    if not fits:
        with pytest.raises(InvalidStateError):
            await service.create_session(app_name="limits", user_id="u1", state={key: 1})
        assert await _count(service) == before  # nothing written
        session = await service.create_session(app_name="limits", user_id="u1")
        with pytest.raises(InvalidStateError):
            await service.append_event(
                session, Event(author="a", actions=EventActions(state_delta={key: 2}))
            )
        stored = await service.get_session(app_name="limits", user_id="u1", session_id=session.id)
        assert stored is not None and stored.events == [] and key not in stored.state
        return
    session = await service.create_session(app_name="limits", user_id="u1", state={key: 1})
    assert session.state[key] == 1
    await service.append_event(
        session, Event(author="a", actions=EventActions(state_delta={key: 2}))
    )
    stored = await service.get_session(app_name="limits", user_id="u1", session_id=session.id)
    assert stored is not None and stored.state[key] == 2


@SETTINGS
@given(
    size=st.integers(0, 20_000) | st.integers(MAX_IDENTIFIER_BYTES - 4, MAX_IDENTIFIER_BYTES + 4),
    char=st.sampled_from(CHARS),
    field=st.sampled_from(["app_name", "user_id", "session_id", "event_id"]),
)
async def test_identifiers_of_any_length(
    service: SqlSessionService, size: int, char: str, field: str
) -> None:
    value = _text(size, char)
    fits = 0 < len(value.encode()) <= MAX_IDENTIFIER_BYTES
    # A user of its own per example, so that an id hypothesis draws twice is no clash.
    ids = {"app_name": "limits", "user_id": uuid.uuid4().hex, "session_id": None}
    if field != "event_id":
        ids[field] = value
    if not fits and field != "event_id":
        before = await _count(service)
        with pytest.raises(InvalidIdentifierError):
            await service.create_session(**ids)  # type: ignore[arg-type]
        assert await _count(service) == before  # nothing written
        return
    session = await service.create_session(**ids)  # type: ignore[arg-type]
    event = Event(author="a", id=value) if field == "event_id" else Event(author="a")
    if not fits:
        with pytest.raises(InvalidIdentifierError):
            await service.append_event(session, event)
    else:
        await service.append_event(session, event)
    stored = await service.get_session(
        app_name=session.app_name, user_id=session.user_id, session_id=session.id
    )
    assert stored is not None
    if field == "event_id":
        assert [e.id for e in stored.events] == ([value] if fits else [])
    else:
        assert len(stored.events) == 1
        assert (stored.app_name, stored.user_id, stored.id)[
            ["app_name", "user_id", "session_id"].index(field)
        ] == value


async def test_a_memory_past_the_limit_is_refused_and_one_at_it_stored(db_url: str) -> None:
    """A memory's text is at most MAX_MEMORY_BYTES (8 MiB, as an event), on every
    backend: one more byte is an InvalidMemoryError and nothing of the call is stored
    (found by a review: MySQL dropped the connection, past its packet size, on a 40 MiB
    memory that SQLite stored)."""
    async with SqlMemoryService.from_url(db_url) as memory:

        def fact(text: str) -> MemoryEntry:
            return MemoryEntry(content={"parts": [{"text": text}]})

        word = "quota' "  # quotes: the driver's escaping makes the statement longer
        at_limit = (word * (MAX_MEMORY_BYTES // len(word) + 1))[:MAX_MEMORY_BYTES]
        with pytest.raises(InvalidMemoryError, match="MAX_MEMORY_BYTES"):
            await memory.add_memory(
                app_name="limits", user_id="u1", memories=[fact("small"), fact(at_limit + "é")]
            )
        found = await memory.search_memory(app_name="limits", user_id="u1", query="small")
        assert found.memories == []
        await memory.add_memory(app_name="limits", user_id="u1", memories=[fact(at_limit)])
        found = await memory.search_memory(app_name="limits", user_id="u1", query="quota")
        assert [len(text_of(m).encode()) for m in found.memories] == [MAX_MEMORY_BYTES]
