"""``list_sessions`` in one statement with objects built without validation (issue
15, round 2): property-based, every listed session equals the same session loaded
alone by ``get_session`` (validated, its own statement) without its events, on both
backends, through the core and the ADK classes, whole lists and pages, one user or
every user of the app, with ``app:``, ``user:`` and session state and tied
``last_update_time``s; nothing of another app shows up."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adk_sqlstore import Event, EventActions, SqlSessionService

from .conftest import examples

USERS = ("u1", "u2", "u3")
VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.text(max_size=5),
    st.lists(st.integers(0, 3), max_size=2),
    st.dictionaries(st.sampled_from("xy"), st.integers(0, 3), max_size=2),
)
KEYS = st.sampled_from(["a", "b", "app:a", "app:b", "user:a", "user:c", "temp:t"])
STATES = st.dictionaries(KEYS, VALUES, max_size=4)


async def _expected(service: Any, app: str, user_id: str | None) -> list[Any]:
    """Every session of the app (or user) loaded alone, without events, in the
    listing's order."""
    users = USERS if user_id is None else (user_id,)
    loaded = []
    for user in users:
        for row in (await service.list_sessions(app_name=app, user_id=user, limit=1000)).sessions:
            one = await service.get_session(app_name=app, user_id=user, session_id=row.id)
            loaded.append(one.model_copy(update={"events": []}))
    return sorted(loaded, key=lambda s: (s.last_update_time, s.user_id, s.id))


async def _listed(service: Any, app: str, user_id: str | None, limit: int | None) -> list[Any]:
    if limit is None:
        return list((await service.list_sessions(app_name=app, user_id=user_id)).sessions)
    out, token = [], None
    while True:
        page = await service.list_sessions(
            app_name=app, user_id=user_id, limit=limit, page_token=token
        )
        assert len(page.sessions) <= limit
        out += page.sessions
        token = page.next_page_token
        if token is None:
            return out


def _same(listed: Any, loaded: Any) -> None:
    assert listed == loaded
    assert listed.model_fields_set == loaded.model_fields_set
    assert listed.model_dump() == loaded.model_dump()


@settings(
    max_examples=examples(20),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
async def test_listed_sessions_equal_sessions_loaded_alone(
    db_url: str, data: st.DataObject
) -> None:
    pytest.importorskip("google.adk", reason="the adk extra is not installed")
    from adk_sqlstore.adk import SqlSessionService as AdkSessionService

    app, other = f"app-{uuid.uuid4().hex[:8]}", f"other-{uuid.uuid4().hex[:8]}"
    async with SqlSessionService.from_url(db_url) as core:
        adk = AdkSessionService(store=core.store)
        for n in range(data.draw(st.integers(0, 7), label="sessions")):
            user = data.draw(st.sampled_from(USERS), label="user")
            session = await core.create_session(
                app_name=data.draw(st.sampled_from([app, app, other]), label="app"),
                user_id=user,
                session_id=f"s{data.draw(st.integers(0, 3), label='id')}-{n}",
                state=data.draw(STATES, label="state"),
            )
            for _ in range(data.draw(st.integers(0, 2), label="appends")):
                delta = data.draw(STATES, label="delta")
                tied = 1_000.0 + data.draw(st.integers(0, 2), label="timestamp")
                event = Event(author="a", timestamp=tied, actions=EventActions(state_delta=delta))
                await core.append_event(session, event)
        user_id = data.draw(st.sampled_from([None, *USERS]), label="listed user")
        limit = data.draw(st.sampled_from([None, 1, 2, 5]), label="limit")
        for service in (core, adk):
            expected = await _expected(service, app, user_id)
            listed = await _listed(service, app, user_id, limit)
            assert [s.id for s in listed] == [s.id for s in expected]
            for got, want in zip(listed, expected, strict=True):
                _same(got, want)
