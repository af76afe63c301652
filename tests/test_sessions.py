"""Session service behaviour, on an SQLite file and on PostgreSQL.

Quotes are from the design documents the product comes from (../shared/seeds/):
003 "ADK sessions, state, and memory" and 000 "Cross-Session Memory in ADK".
"""

from __future__ import annotations

import asyncio

import pytest
from pydantic import ValidationError

from adk_sqlstore import (
    AlreadyExistsError,
    Event,
    EventActions,
    GetSessionConfig,
    SessionNotFoundError,
    SqlSessionService,
    StaleSessionError,
)


def text_event(
    text: str,
    *,
    author: str = "user",
    ts: float | None = None,
    delta: dict[str, object] | None = None,
    **extra: object,
) -> Event:
    fields: dict[str, object] = {
        "author": author,
        "invocation_id": "inv-1",
        "content": {"role": "user" if author == "user" else "model", "parts": [{"text": text}]},
        "actions": EventActions(state_delta=delta or {}),
        **extra,
    }
    if ts is not None:
        fields["timestamp"] = ts
    return Event.model_validate(fields)


# -- create_session -----------------------------------------------------------------


async def test_create_session_generates_an_id_and_starts_at_revision_zero(
    service: SqlSessionService,
) -> None:
    a = await service.create_session(app_name="app", user_id="u1")
    b = await service.create_session(app_name="app", user_id="u1")
    assert a.id and b.id and a.id != b.id
    assert (a.revision, a.events, a.state) == (0, [], {})
    got = await service.get_session(app_name="app", user_id="u1", session_id=a.id)
    assert got is not None
    assert got.id == a.id and got.last_update_time == a.last_update_time


async def test_initial_state_is_split_by_scope_and_temp_is_not_stored(
    service: SqlSessionService,
) -> None:
    state = {"cart": [], "user:tier": "gold", "app:menu_version": "2026-09", "temp:token": "x"}
    created = await service.create_session(
        app_name="app", user_id="u1", state=state, session_id="s1"
    )
    # The returned object has the stored view: no temp: key.
    assert created.state == {"cart": [], "user:tier": "gold", "app:menu_version": "2026-09"}
    assert await service.get_user_state(app_name="app", user_id="u1") == {"tier": "gold"}
    assert await service.get_app_state(app_name="app") == {"menu_version": "2026-09"}
    # "a fresh session already sees it": another session of the user, and of another user.
    other = await service.create_session(app_name="app", user_id="u1")
    assert other.state == {"user:tier": "gold", "app:menu_version": "2026-09"}
    stranger = await service.create_session(app_name="app", user_id="u2")
    assert stranger.state == {"app:menu_version": "2026-09"}
    elsewhere = await service.create_session(app_name="other-app", user_id="u1")
    assert elsewhere.state == {}


async def test_existing_id_raises_already_exists(service: SqlSessionService) -> None:
    await service.create_session(
        app_name="app", user_id="u1", session_id="s1", state={"k": "first"}
    )
    with pytest.raises(AlreadyExistsError):
        await service.create_session(
            app_name="app", user_id="u1", session_id="s1", state={"k": "second", "user:x": 1}
        )
    got = await service.get_session(app_name="app", user_id="u1", session_id="s1")
    assert got is not None and got.state == {"k": "first"}
    # Nothing of the failed create was written, not even its user: key.
    assert await service.get_user_state(app_name="app", user_id="u1") == {}
    # Session ids are scoped to (app_name, user_id), as in ADK.
    await service.create_session(app_name="app", user_id="u2", session_id="s1")


async def test_racing_creates_of_one_id_let_exactly_one_win(db_url: str) -> None:
    services = [SqlSessionService.from_url(db_url) for _ in range(4)]
    try:
        results = await asyncio.gather(
            *(
                s.create_session(
                    app_name="app", user_id="u1", session_id="race", state={"winner": n}
                )
                for n, s in enumerate(services)
            ),
            return_exceptions=True,
        )
    finally:
        for s in services:
            await s.close()
    winners = [r for r in results if not isinstance(r, BaseException)]
    losers = [r for r in results if isinstance(r, BaseException)]
    assert len(winners) == 1
    assert len(losers) == 3 and all(isinstance(e, AlreadyExistsError) for e in losers)


# -- get_session --------------------------------------------------------------------


async def test_get_session_is_none_for_absent_or_foreign_ids(service: SqlSessionService) -> None:
    s = await service.create_session(app_name="app", user_id="alice", session_id="s1")
    await service.append_event(s, text_event("secret"))
    assert await service.get_session(app_name="app", user_id="alice", session_id="nope") is None
    assert await service.get_session(app_name="app", user_id="bob", session_id="s1") is None
    assert await service.get_session(app_name="other", user_id="alice", session_id="s1") is None


async def test_events_come_back_in_append_order_with_merged_state(
    service: SqlSessionService,
) -> None:
    s = await service.create_session(app_name="app", user_id="u1", state={"a": 1})
    # Out-of-order timestamps: order is the order of appends, the order of the fold.
    for n, ts in enumerate([30.0, 10.0, 20.0, 20.0]):
        await service.append_event(s, text_event(f"m{n}", ts=ts, delta={"a": n, "user:last": n}))
    got = await service.get_session(app_name="app", user_id="u1", session_id=s.id)
    assert got is not None
    assert [e.text() for e in got.events] == ["m0", "m1", "m2", "m3"]
    assert got.events == s.events
    assert got.state == {"a": 3, "user:last": 3}
    assert got.revision == 4


@pytest.fixture
async def history(service: SqlSessionService) -> str:
    s = await service.create_session(app_name="app", user_id="u1", session_id="h")
    for n in range(10):
        await service.append_event(s, text_event(f"m{n}", ts=1000.0 + n))
    return s.id


async def _texts(service: SqlSessionService, config: GetSessionConfig) -> list[str]:
    got = await service.get_session(app_name="app", user_id="u1", session_id="h", config=config)
    assert got is not None
    return [e.text() for e in got.events]


async def test_num_recent_events_returns_the_newest(
    service: SqlSessionService, history: str
) -> None:
    assert await _texts(service, GetSessionConfig(num_recent_events=3)) == ["m7", "m8", "m9"]
    assert await _texts(service, GetSessionConfig(num_recent_events=100)) == [
        f"m{n}" for n in range(10)
    ]
    assert await _texts(service, GetSessionConfig(num_recent_events=0)) == []


async def test_zero_recent_events_still_returns_the_state(service: SqlSessionService) -> None:
    s = await service.create_session(app_name="app", user_id="u1", state={"k": "v"})
    await service.append_event(s, text_event("x", delta={"k2": "v2"}))
    got = await service.get_session(
        app_name="app", user_id="u1", session_id=s.id, config=GetSessionConfig(num_recent_events=0)
    )
    assert got is not None and got.events == [] and got.state == {"k": "v", "k2": "v2"}


def test_negative_num_recent_events_is_rejected() -> None:
    with pytest.raises(ValidationError, match="greater than or equal to 0"):
        GetSessionConfig(num_recent_events=-1)


async def test_after_timestamp_is_inclusive(service: SqlSessionService, history: str) -> None:
    assert await _texts(service, GetSessionConfig(after_timestamp=1007.0)) == ["m7", "m8", "m9"]
    assert await _texts(service, GetSessionConfig(after_timestamp=1006.5)) == ["m7", "m8", "m9"]
    assert await _texts(service, GetSessionConfig(after_timestamp=2000.0)) == []


async def test_recent_and_after_timestamp_combine(service: SqlSessionService, history: str) -> None:
    config = GetSessionConfig(num_recent_events=2, after_timestamp=1003.0)
    assert await _texts(service, config) == ["m8", "m9"]
    config = GetSessionConfig(num_recent_events=5, after_timestamp=1007.0)
    assert await _texts(service, config) == ["m7", "m8", "m9"]


# -- list_sessions ------------------------------------------------------------------


async def test_list_sessions_orders_by_last_update_without_events(
    service: SqlSessionService,
) -> None:
    ids = []
    for n, ts in enumerate([300.0, 100.0, 200.0]):
        s = await service.create_session(
            app_name="app", user_id="u1", session_id=f"s{n}", state={"n": n}
        )
        await service.append_event(s, text_event("hi", ts=ts))
        ids.append(s.id)
    listing = await service.list_sessions(app_name="app", user_id="u1")
    assert [s.id for s in listing.sessions] == ["s1", "s2", "s0"]
    assert all(s.events == [] for s in listing.sessions)
    assert [s.state for s in listing.sessions] == [{"n": 1}, {"n": 2}, {"n": 0}]
    assert [s.last_update_time for s in listing.sessions] == [100.0, 200.0, 300.0]


async def test_list_sessions_breaks_ties_by_user_then_id(service: SqlSessionService) -> None:
    for user, sid in [("u2", "b"), ("u1", "c"), ("u2", "a"), ("u1", "a")]:
        s = await service.create_session(app_name="app", user_id=user, session_id=sid)
        await service.append_event(s, text_event("same time", ts=500.0))
    listing = await service.list_sessions(app_name="app")
    assert [(s.user_id, s.id) for s in listing.sessions] == [
        ("u1", "a"),
        ("u1", "c"),
        ("u2", "a"),
        ("u2", "b"),
    ]


async def test_list_sessions_of_all_users_stays_in_the_app(service: SqlSessionService) -> None:
    await service.create_session(app_name="app", user_id="u1", state={"user:x": 1})
    await service.create_session(app_name="app", user_id="u2", state={"user:x": 2})
    await service.create_session(app_name="other", user_id="u1")
    everyone = await service.list_sessions(app_name="app", user_id=None)
    assert sorted((s.user_id, s.state["user:x"]) for s in everyone.sessions) == [
        ("u1", 1),
        ("u2", 2),
    ]
    only = await service.list_sessions(app_name="app", user_id="u2")
    assert [s.user_id for s in only.sessions] == ["u2"]
    assert (await service.list_sessions(app_name="nobody")).sessions == []


# -- delete_session -----------------------------------------------------------------


async def test_delete_session_removes_it_and_its_events_only(service: SqlSessionService) -> None:
    mine = await service.create_session(
        app_name="app", user_id="u1", session_id="s1", state={"user:keep": 1}
    )
    theirs = await service.create_session(app_name="app", user_id="u2", session_id="s1")
    await service.append_event(mine, text_event("mine"))
    await service.append_event(theirs, text_event("theirs"))
    await service.delete_session(app_name="app", user_id="u1", session_id="s1")
    assert await service.get_session(app_name="app", user_id="u1", session_id="s1") is None
    other = await service.get_session(app_name="app", user_id="u2", session_id="s1")
    assert other is not None and [e.text() for e in other.events] == ["theirs"]
    # User state belongs to the user, not the session.
    assert await service.get_user_state(app_name="app", user_id="u1") == {"keep": 1}
    # The id is free again, with no leftover events.
    again = await service.create_session(app_name="app", user_id="u1", session_id="s1")
    got = await service.get_session(app_name="app", user_id="u1", session_id=again.id)
    assert got is not None and got.events == []
    # Deleting what is not there is a no-op.
    await service.delete_session(app_name="app", user_id="u1", session_id="never")


# -- append_event -------------------------------------------------------------------


async def test_partial_events_are_returned_and_not_stored(service: SqlSessionService) -> None:
    s = await service.create_session(app_name="app", user_id="u1")
    partial = text_event("stream", partial=True, delta={"k": 1})
    assert await service.append_event(s, partial) is partial
    assert s.events == [] and s.revision == 0 and "k" not in s.state
    got = await service.get_session(app_name="app", user_id="u1", session_id=s.id)
    assert got is not None and got.events == [] and got.state == {} and got.revision == 0


async def test_temp_keys_reach_the_caller_but_are_never_stored(
    service: SqlSessionService,
) -> None:
    """003: "temp: ... values written under it are dropped when the event is appended"."""
    s = await service.create_session(app_name="app", user_id="u1")
    event = text_event(
        "tool", author="agent", delta={"temp:claims": {"sub": "u1"}, "order_id": "8842"}
    )
    returned = await service.append_event(s, event)
    assert s.state["temp:claims"] == {"sub": "u1"}  # visible to the rest of the invocation
    assert returned.actions.state_delta == {"order_id": "8842"}
    got = await service.get_session(app_name="app", user_id="u1", session_id=s.id)
    assert got is not None
    assert got.state == {"order_id": "8842"}
    assert got.events[0].actions.state_delta == {"order_id": "8842"}  # not in the stored event


async def test_temp_values_need_not_be_json(service: SqlSessionService) -> None:
    s = await service.create_session(app_name="app", user_id="u1")
    token = object()
    await service.append_event(s, text_event("x", delta={"temp:token": token}))
    assert s.state["temp:token"] is token


async def test_delta_is_split_by_scope(service: SqlSessionService) -> None:
    """000: "a value written as user:diet in Monday's session is simply present in Thursday's"."""
    monday = await service.create_session(app_name="lunch-app", user_id="user-17")
    await service.append_event(
        monday,
        text_event(
            "saved",
            author="lunch_assistant",
            delta={"user:diet": "vegetarian", "app:menu_version": "2026-09", "step": 2},
        ),
    )
    thursday = await service.create_session(app_name="lunch-app", user_id="user-17")
    assert thursday.state == {"user:diet": "vegetarian", "app:menu_version": "2026-09"}
    assert await service.get_user_state(app_name="lunch-app", user_id="user-17") == {
        "diet": "vegetarian"
    }
    assert await service.get_app_state(app_name="lunch-app") == {"menu_version": "2026-09"}
    other_user = await service.create_session(app_name="lunch-app", user_id="user-42")
    assert other_user.state == {"app:menu_version": "2026-09"}
    # An older session object sees new user state when it is loaded again.
    reloaded = await service.get_session(
        app_name="lunch-app", user_id="user-17", session_id=monday.id
    )
    assert reloaded is not None and reloaded.state["step"] == 2


async def test_append_moves_last_update_time_and_revision(service: SqlSessionService) -> None:
    s = await service.create_session(app_name="app", user_id="u1")
    await service.append_event(s, text_event("a", ts=1234.5))
    assert s.last_update_time == 1234.5 and s.revision == 1
    got = await service.get_session(app_name="app", user_id="u1", session_id=s.id)
    assert got is not None and got.last_update_time == 1234.5 and got.revision == 1


async def test_direct_mutation_of_session_state_is_not_persisted(
    service: SqlSessionService,
) -> None:
    """003: "That mutates a local dictionary. No event carries it, nothing persists it"."""
    s = await service.create_session(app_name="app", user_id="u1", state={"order_id": "1"})
    s.state["order_id"] = "8842"
    await service.append_event(s, text_event("unrelated", delta={"other": True}))
    got = await service.get_session(app_name="app", user_id="u1", session_id=s.id)
    assert got is not None and got.state == {"order_id": "1", "other": True}


# -- optimistic concurrency ---------------------------------------------------------


async def test_append_from_a_stale_object_raises_and_writes_nothing(
    service: SqlSessionService,
) -> None:
    """003: "rejects an append built on a stale read, surfacing the race as an error"."""
    s = await service.create_session(app_name="app", user_id="u1", state={"n": 0})
    first = await service.get_session(app_name="app", user_id="u1", session_id=s.id)
    second = await service.get_session(app_name="app", user_id="u1", session_id=s.id)
    assert first is not None and second is not None
    await service.append_event(first, text_event("first", delta={"n": 1}))
    loser = text_event("second", delta={"n": 2, "user:x": "lost", "app:y": "lost"})
    with pytest.raises(StaleSessionError) as info:
        await service.append_event(second, loser)
    assert (info.value.expected_revision, info.value.stored_revision) == (0, 1)
    # Nothing written, and the loser's object did not move.
    assert second.events == [] and second.revision == 0 and second.state == {"n": 0}
    got = await service.get_session(app_name="app", user_id="u1", session_id=s.id)
    assert got is not None
    assert [e.text() for e in got.events] == ["first"] and got.state == {"n": 1}
    assert await service.get_user_state(app_name="app", user_id="u1") == {}
    assert await service.get_app_state(app_name="app") == {}
    # After a reload the same event goes through.
    await service.append_event(got, loser)
    assert got.revision == 2


async def test_equal_timestamps_never_cause_a_false_stale_error(
    service: SqlSessionService,
) -> None:
    s = await service.create_session(app_name="app", user_id="u1")
    same = s.last_update_time
    for n in range(5):  # all at the creation time, then at near-equal times
        await service.append_event(s, text_event(f"e{n}", ts=same))
    for n in range(5):
        await service.append_event(s, text_event(f"f{n}", ts=same + n * 1e-9))
    reloaded = await service.get_session(app_name="app", user_id="u1", session_id=s.id)
    assert reloaded is not None
    await service.append_event(reloaded, text_event("after reload", ts=same))
    assert reloaded.revision == 11


async def test_append_to_a_deleted_session_raises_not_found(service: SqlSessionService) -> None:
    s = await service.create_session(app_name="app", user_id="u1")
    await service.delete_session(app_name="app", user_id="u1", session_id=s.id)
    with pytest.raises(SessionNotFoundError):
        await service.append_event(s, text_event("too late"))


async def test_concurrent_appends_from_one_loaded_session_let_one_win(db_url: str) -> None:
    async with SqlSessionService.from_url(db_url) as service:
        s = await service.create_session(app_name="app", user_id="u1")
        copies = [
            await service.get_session(app_name="app", user_id="u1", session_id=s.id)
            for _ in range(6)
        ]
        results = await asyncio.gather(
            *(service.append_event(c, text_event(f"w{n}")) for n, c in enumerate(copies)),
            return_exceptions=True,
        )
        assert sum(not isinstance(r, BaseException) for r in results) == 1
        assert all(
            isinstance(r, StaleSessionError) for r in results if isinstance(r, BaseException)
        )
        got = await service.get_session(app_name="app", user_id="u1", session_id=s.id)
        assert got is not None and len(got.events) == 1 and got.revision == 1


async def test_duplicate_event_id_is_rejected_not_stored_twice(
    service: SqlSessionService,
) -> None:
    from adk_sqlstore import InvalidEventError

    s = await service.create_session(app_name="app", user_id="u1")
    event = text_event("once", delta={"k": 1})
    await service.append_event(s, event)
    again = text_event("twice", id=event.id, delta={"k": 2})
    with pytest.raises(InvalidEventError, match="already exists"):
        await service.append_event(s, again)
    got = await service.get_session(app_name="app", user_id="u1", session_id=s.id)
    assert got is not None and [e.text() for e in got.events] == ["once"]
    assert got.state == {"k": 1} and got.revision == 1 and s.revision == 1


# -- pagination ---------------------------------------------------------------------


async def test_list_sessions_pages_through_everything_in_order(
    service: SqlSessionService,
) -> None:
    for n in range(23):
        user = f"u{n % 3}"
        s = await service.create_session(
            app_name="app", user_id=user, session_id=f"s{n:02d}", state={"n": n, "user:u": user}
        )
        await service.append_event(s, text_event("x", ts=1000.0 + n % 7))  # many ties
    await service.create_session(app_name="other", user_id="u0")
    everything = await service.list_sessions(app_name="app")
    assert everything.next_page_token is None and len(everything.sessions) == 23
    for user_id in (None, "u1"):
        expected = await service.list_sessions(app_name="app", user_id=user_id)
        pages, token = [], None
        while True:
            page = await service.list_sessions(
                app_name="app", user_id=user_id, limit=5, page_token=token
            )
            assert len(page.sessions) <= 5
            pages.extend(page.sessions)
            token = page.next_page_token
            if token is None:
                break
        assert [(s.user_id, s.id) for s in pages] == [(s.user_id, s.id) for s in expected.sessions]
        assert [s.state for s in pages] == [s.state for s in expected.sessions]
    streamed = [s.id async for s in service.iter_sessions(app_name="app", page_size=4)]
    assert streamed == [s.id for s in everything.sessions]


async def test_list_sessions_rejects_bad_limits_and_tokens(service: SqlSessionService) -> None:
    with pytest.raises(ValueError, match="limit"):
        await service.list_sessions(app_name="app", limit=0)
    for token in ["garbage", "W10=", "WyJ4IiwgInkiLCAieiJd"]:
        with pytest.raises(ValueError, match="page_token"):
            await service.list_sessions(app_name="app", limit=5, page_token=token)
