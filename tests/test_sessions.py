"""Session service behaviour: the contract suite (``layer``: the core service and the ADK
class, each on an SQLite file and on PostgreSQL).

Quotes are from the design documents the product comes from (../shared/seeds/):
003 "ADK sessions, state, and memory" and 000 "Cross-Session Memory in ADK".
"""

from __future__ import annotations

import asyncio
import base64
import json
import math
import sys
from typing import Any

import pytest
from pydantic import ValidationError

from adk_sqlstore import (
    GetSessionConfig,
    InvalidArgumentError,
    InvalidEventError,
    Session,
    StaleSessionError,
)

from .helpers import Layer, text_of

# -- create_session -----------------------------------------------------------------


async def test_create_session_generates_an_id_and_starts_at_revision_zero(
    layer: Layer,
) -> None:
    a = await layer.sessions.create_session(app_name="app", user_id="u1")
    b = await layer.sessions.create_session(app_name="app", user_id="u1")
    assert a.id and b.id and a.id != b.id
    assert (layer.revision(a), a.events, a.state) == (0, [], {})
    got = await layer.sessions.get_session(app_name="app", user_id="u1", session_id=a.id)
    assert got is not None
    assert got.id == a.id and got.last_update_time == a.last_update_time


async def test_initial_state_is_split_by_scope_and_temp_is_not_stored(
    layer: Layer,
) -> None:
    state = {"cart": [], "user:tier": "gold", "app:menu_version": "2026-09", "temp:token": "x"}
    created = await layer.sessions.create_session(
        app_name="app", user_id="u1", state=state, session_id="s1"
    )
    # The returned object has the stored view: no temp: key.
    assert created.state == {"cart": [], "user:tier": "gold", "app:menu_version": "2026-09"}
    assert await layer.sessions.get_user_state(app_name="app", user_id="u1") == {"tier": "gold"}
    assert await layer.sessions.get_app_state(app_name="app") == {"menu_version": "2026-09"}
    # "a fresh session already sees it": another session of the user, and of another user.
    other = await layer.sessions.create_session(app_name="app", user_id="u1")
    assert other.state == {"user:tier": "gold", "app:menu_version": "2026-09"}
    stranger = await layer.sessions.create_session(app_name="app", user_id="u2")
    assert stranger.state == {"app:menu_version": "2026-09"}
    elsewhere = await layer.sessions.create_session(app_name="other-app", user_id="u1")
    assert elsewhere.state == {}


async def test_existing_id_raises_already_exists(layer: Layer) -> None:
    await layer.sessions.create_session(
        app_name="app", user_id="u1", session_id="s1", state={"k": "first"}
    )
    with pytest.raises(layer.already_exists):
        await layer.sessions.create_session(
            app_name="app", user_id="u1", session_id="s1", state={"k": "second", "user:x": 1}
        )
    got = await layer.sessions.get_session(app_name="app", user_id="u1", session_id="s1")
    assert got is not None and got.state == {"k": "first"}
    # Nothing of the failed create was written, not even its user: key.
    assert await layer.sessions.get_user_state(app_name="app", user_id="u1") == {}
    # Session ids are scoped to (app_name, user_id), as in ADK.
    await layer.sessions.create_session(app_name="app", user_id="u2", session_id="s1")


async def test_racing_creates_of_one_id_let_exactly_one_win(layer: Layer) -> None:
    services = [layer.open_sessions() for _ in range(4)]
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
    assert len(losers) == 3 and all(isinstance(e, layer.already_exists) for e in losers)


# -- get_session --------------------------------------------------------------------


async def test_get_session_is_none_for_absent_or_foreign_ids(layer: Layer) -> None:
    s = await layer.sessions.create_session(app_name="app", user_id="alice", session_id="s1")
    await layer.sessions.append_event(s, layer.event("secret"))
    assert (
        await layer.sessions.get_session(app_name="app", user_id="alice", session_id="nope") is None
    )
    assert await layer.sessions.get_session(app_name="app", user_id="bob", session_id="s1") is None
    assert (
        await layer.sessions.get_session(app_name="other", user_id="alice", session_id="s1") is None
    )


async def test_events_come_back_in_append_order_with_merged_state(
    layer: Layer,
) -> None:
    s = await layer.sessions.create_session(app_name="app", user_id="u1", state={"a": 1})
    # Out-of-order timestamps: order is the order of appends, the order of the fold.
    for n, ts in enumerate([30.0, 10.0, 20.0, 20.0]):
        await layer.sessions.append_event(
            s, layer.event(f"m{n}", ts=ts, delta={"a": n, "user:last": n})
        )
    got = await layer.sessions.get_session(app_name="app", user_id="u1", session_id=s.id)
    assert got is not None
    assert [text_of(e) for e in got.events] == ["m0", "m1", "m2", "m3"]
    assert got.events == s.events
    assert got.state == {"a": 3, "user:last": 3}
    assert layer.revision(got) == 4


@pytest.fixture
async def history(layer: Layer) -> str:
    s = await layer.sessions.create_session(app_name="app", user_id="u1", session_id="h")
    for n in range(10):
        await layer.sessions.append_event(s, layer.event(f"m{n}", ts=1000.0 + n))
    return str(s.id)


async def _texts(layer: Layer, config: Any) -> list[str]:
    got = await layer.sessions.get_session(
        app_name="app", user_id="u1", session_id="h", config=config
    )
    assert got is not None
    return [text_of(e) for e in got.events]


async def test_num_recent_events_returns_the_newest(layer: Layer, history: str) -> None:
    assert await _texts(layer, layer.config(num_recent_events=3)) == ["m7", "m8", "m9"]
    assert await _texts(layer, layer.config(num_recent_events=100)) == [f"m{n}" for n in range(10)]
    assert await _texts(layer, layer.config(num_recent_events=0)) == []


async def test_zero_recent_events_still_returns_the_state(layer: Layer) -> None:
    s = await layer.sessions.create_session(app_name="app", user_id="u1", state={"k": "v"})
    await layer.sessions.append_event(s, layer.event("x", delta={"k2": "v2"}))
    got = await layer.sessions.get_session(
        app_name="app", user_id="u1", session_id=s.id, config=layer.config(num_recent_events=0)
    )
    assert got is not None and got.events == [] and got.state == {"k": "v", "k2": "v2"}


def test_negative_num_recent_events_is_rejected() -> None:
    with pytest.raises(ValidationError, match="greater than or equal to 0"):
        GetSessionConfig(num_recent_events=-1)


async def test_after_timestamp_is_inclusive(layer: Layer, history: str) -> None:
    assert await _texts(layer, layer.config(after_timestamp=1007.0)) == ["m7", "m8", "m9"]
    assert await _texts(layer, layer.config(after_timestamp=1006.5)) == ["m7", "m8", "m9"]
    assert await _texts(layer, layer.config(after_timestamp=2000.0)) == []


async def test_after_timestamp_may_be_infinite_or_nan(layer: Layer, history: str) -> None:
    """Found by a review: MySQL's driver wrote infinity as SQL that did not parse. Every
    backend: -inf keeps every event; +inf and NaN, which no time is at or after, none."""
    assert len(await _texts(layer, layer.config(after_timestamp=-math.inf))) == 10
    assert await _texts(layer, layer.config(after_timestamp=math.inf)) == []
    assert await _texts(layer, layer.config(after_timestamp=math.nan)) == []


async def test_limits_past_what_a_database_takes_mean_all(layer: Layer, history: str) -> None:
    """A limit no database's LIMIT takes lists everything, and the service goes on
    (found by a review: PostgreSQL's driver raised OverflowError for
    ``limit=sys.maxsize``, and the pooled connection failed the calls after it)."""
    for limit in (sys.maxsize, 10**30):
        listed = await layer.core_sessions.list_sessions(app_name="app", user_id="u1", limit=limit)
        assert len(listed.sessions) == 1 and listed.next_page_token is None
    assert len(await _texts(layer, layer.config(num_recent_events=10**30))) == 10
    found = await layer.memory.search_memory(app_name="app", user_id="u1", query="m1")
    assert found.memories == []


@pytest.mark.parametrize("bad", [-math.inf, math.inf, math.nan])
async def test_non_finite_times_from_callers_are_typed_errors(service: Any, bad: float) -> None:
    """A hand-made page token, or an imported session, holding an infinite or NaN time
    is refused before any statement (MySQL's driver cannot write one; SQLite and
    PostgreSQL stored or failed on them unlike each other)."""
    token = base64.urlsafe_b64encode(json.dumps([bad, "u", "s"]).encode()).decode()
    with pytest.raises(InvalidArgumentError, match="page_token"):
        await service.list_sessions(app_name="app", limit=1, page_token=token)
    with pytest.raises(InvalidArgumentError, match="last_update_time"):
        await service.import_session(
            Session(id="imported", app_name="app", user_id="u", last_update_time=bad)
        )
    listed = await service.list_sessions(app_name="app", user_id="u")
    assert listed.sessions == []


async def test_recent_and_after_timestamp_combine(layer: Layer, history: str) -> None:
    config = layer.config(num_recent_events=2, after_timestamp=1003.0)
    assert await _texts(layer, config) == ["m8", "m9"]
    config = layer.config(num_recent_events=5, after_timestamp=1007.0)
    assert await _texts(layer, config) == ["m7", "m8", "m9"]


# -- list_sessions ------------------------------------------------------------------


async def test_list_sessions_orders_by_last_update_without_events(
    layer: Layer,
) -> None:
    ids = []
    for n, ts in enumerate([300.0, 100.0, 200.0]):
        s = await layer.sessions.create_session(
            app_name="app", user_id="u1", session_id=f"s{n}", state={"n": n}
        )
        await layer.sessions.append_event(s, layer.event("hi", ts=ts))
        ids.append(s.id)
    listing = await layer.sessions.list_sessions(app_name="app", user_id="u1")
    assert [s.id for s in listing.sessions] == ["s1", "s2", "s0"]
    assert all(s.events == [] for s in listing.sessions)
    assert [s.state for s in listing.sessions] == [{"n": 1}, {"n": 2}, {"n": 0}]
    assert [s.last_update_time for s in listing.sessions] == [100.0, 200.0, 300.0]


async def test_list_sessions_breaks_ties_by_user_then_id(layer: Layer) -> None:
    for user, sid in [("u2", "b"), ("u1", "c"), ("u2", "a"), ("u1", "a")]:
        s = await layer.sessions.create_session(app_name="app", user_id=user, session_id=sid)
        await layer.sessions.append_event(s, layer.event("same time", ts=500.0))
    listing = await layer.sessions.list_sessions(app_name="app")
    assert [(s.user_id, s.id) for s in listing.sessions] == [
        ("u1", "a"),
        ("u1", "c"),
        ("u2", "a"),
        ("u2", "b"),
    ]


async def test_list_sessions_of_all_users_stays_in_the_app(layer: Layer) -> None:
    await layer.sessions.create_session(app_name="app", user_id="u1", state={"user:x": 1})
    await layer.sessions.create_session(app_name="app", user_id="u2", state={"user:x": 2})
    await layer.sessions.create_session(app_name="other", user_id="u1")
    everyone = await layer.sessions.list_sessions(app_name="app", user_id=None)
    assert sorted((s.user_id, s.state["user:x"]) for s in everyone.sessions) == [
        ("u1", 1),
        ("u2", 2),
    ]
    only = await layer.sessions.list_sessions(app_name="app", user_id="u2")
    assert [s.user_id for s in only.sessions] == ["u2"]
    assert (await layer.sessions.list_sessions(app_name="nobody")).sessions == []


# -- delete_session -----------------------------------------------------------------


async def test_delete_session_removes_it_and_its_events_only(layer: Layer) -> None:
    mine = await layer.sessions.create_session(
        app_name="app", user_id="u1", session_id="s1", state={"user:keep": 1}
    )
    theirs = await layer.sessions.create_session(app_name="app", user_id="u2", session_id="s1")
    await layer.sessions.append_event(mine, layer.event("mine"))
    await layer.sessions.append_event(theirs, layer.event("theirs"))
    await layer.sessions.delete_session(app_name="app", user_id="u1", session_id="s1")
    assert await layer.sessions.get_session(app_name="app", user_id="u1", session_id="s1") is None
    other = await layer.sessions.get_session(app_name="app", user_id="u2", session_id="s1")
    assert other is not None and [text_of(e) for e in other.events] == ["theirs"]
    # User state belongs to the user, not the session.
    assert await layer.sessions.get_user_state(app_name="app", user_id="u1") == {"keep": 1}
    # The id is free again, with no leftover events.
    again = await layer.sessions.create_session(app_name="app", user_id="u1", session_id="s1")
    got = await layer.sessions.get_session(app_name="app", user_id="u1", session_id=again.id)
    assert got is not None and got.events == []
    # Deleting what is not there is a no-op: an unknown session, user or app.
    await layer.sessions.delete_session(app_name="app", user_id="u1", session_id="never")
    await layer.sessions.delete_session(app_name="app", user_id="nobody", session_id="s1")
    await layer.sessions.delete_session(app_name="nowhere", user_id="u1", session_id="s1")
    assert await layer.sessions.get_session(app_name="app", user_id="u1", session_id="s1")


# -- append_event -------------------------------------------------------------------


async def test_partial_events_are_returned_and_not_stored(layer: Layer) -> None:
    s = await layer.sessions.create_session(app_name="app", user_id="u1")
    partial = layer.event("stream", partial=True, delta={"k": 1})
    assert await layer.sessions.append_event(s, partial) is partial
    assert s.events == [] and layer.revision(s) == 0 and "k" not in s.state
    got = await layer.sessions.get_session(app_name="app", user_id="u1", session_id=s.id)
    assert got is not None and got.events == [] and got.state == {} and layer.revision(got) == 0


async def test_temp_keys_reach_the_caller_but_are_never_stored(
    layer: Layer,
) -> None:
    """003: "temp: ... values written under it are dropped when the event is appended"."""
    s = await layer.sessions.create_session(app_name="app", user_id="u1")
    event = layer.event(
        "tool", author="agent", delta={"temp:claims": {"sub": "u1"}, "order_id": "8842"}
    )
    returned = await layer.sessions.append_event(s, event)
    assert s.state["temp:claims"] == {"sub": "u1"}  # visible to the rest of the invocation
    assert returned.actions.state_delta == {"order_id": "8842"}
    got = await layer.sessions.get_session(app_name="app", user_id="u1", session_id=s.id)
    assert got is not None
    assert got.state == {"order_id": "8842"}
    assert got.events[0].actions.state_delta == {"order_id": "8842"}  # not in the stored event


async def test_temp_values_need_not_be_json(layer: Layer) -> None:
    s = await layer.sessions.create_session(app_name="app", user_id="u1")
    token = object()
    await layer.sessions.append_event(s, layer.event("x", delta={"temp:token": token}))
    assert s.state["temp:token"] is token


async def test_delta_is_split_by_scope(layer: Layer) -> None:
    """000: "a value written as user:diet in Monday's session is simply present in Thursday's"."""
    monday = await layer.sessions.create_session(app_name="lunch-app", user_id="user-17")
    await layer.sessions.append_event(
        monday,
        layer.event(
            "saved",
            author="lunch_assistant",
            delta={"user:diet": "vegetarian", "app:menu_version": "2026-09", "step": 2},
        ),
    )
    thursday = await layer.sessions.create_session(app_name="lunch-app", user_id="user-17")
    assert thursday.state == {"user:diet": "vegetarian", "app:menu_version": "2026-09"}
    assert await layer.sessions.get_user_state(app_name="lunch-app", user_id="user-17") == {
        "diet": "vegetarian"
    }
    assert await layer.sessions.get_app_state(app_name="lunch-app") == {"menu_version": "2026-09"}
    other_user = await layer.sessions.create_session(app_name="lunch-app", user_id="user-42")
    assert other_user.state == {"app:menu_version": "2026-09"}
    # An older session object sees new user state when it is loaded again.
    reloaded = await layer.sessions.get_session(
        app_name="lunch-app", user_id="user-17", session_id=monday.id
    )
    assert reloaded is not None and reloaded.state["step"] == 2


async def test_append_moves_last_update_time_and_revision(layer: Layer) -> None:
    s = await layer.sessions.create_session(app_name="app", user_id="u1")
    await layer.sessions.append_event(s, layer.event("a", ts=1234.5))
    assert s.last_update_time == 1234.5 and layer.revision(s) == 1
    got = await layer.sessions.get_session(app_name="app", user_id="u1", session_id=s.id)
    assert got is not None and got.last_update_time == 1234.5 and layer.revision(got) == 1


async def test_direct_mutation_of_session_state_is_not_persisted(
    layer: Layer,
) -> None:
    """003: "That mutates a local dictionary. No event carries it, nothing persists it"."""
    s = await layer.sessions.create_session(app_name="app", user_id="u1", state={"order_id": "1"})
    s.state["order_id"] = "8842"
    await layer.sessions.append_event(s, layer.event("unrelated", delta={"other": True}))
    got = await layer.sessions.get_session(app_name="app", user_id="u1", session_id=s.id)
    assert got is not None and got.state == {"order_id": "1", "other": True}


# -- optimistic concurrency ---------------------------------------------------------


async def test_append_from_a_stale_object_raises_and_writes_nothing(
    layer: Layer,
) -> None:
    """003: "rejects an append built on a stale read, surfacing the race as an error"."""
    s = await layer.sessions.create_session(app_name="app", user_id="u1", state={"n": 0})
    first = await layer.sessions.get_session(app_name="app", user_id="u1", session_id=s.id)
    second = await layer.sessions.get_session(app_name="app", user_id="u1", session_id=s.id)
    assert first is not None and second is not None
    await layer.sessions.append_event(first, layer.event("first", delta={"n": 1}))
    loser = layer.event("second", delta={"n": 2, "user:x": "lost", "app:y": "lost"})
    with pytest.raises(layer.stale) as info:
        await layer.sessions.append_event(second, loser)
    ours = layer.ours(info.value)
    assert isinstance(ours, StaleSessionError)
    assert (ours.expected_revision, ours.stored_revision) == (0, 1)
    # Nothing written, and the loser's object did not move.
    assert second.events == [] and layer.revision(second) == 0 and second.state == {"n": 0}
    got = await layer.sessions.get_session(app_name="app", user_id="u1", session_id=s.id)
    assert got is not None
    assert [text_of(e) for e in got.events] == ["first"] and got.state == {"n": 1}
    assert await layer.sessions.get_user_state(app_name="app", user_id="u1") == {}
    assert await layer.sessions.get_app_state(app_name="app") == {}
    # After a reload the same event goes through.
    await layer.sessions.append_event(got, loser)
    assert layer.revision(got) == 2


async def test_equal_timestamps_never_cause_a_false_stale_error(
    layer: Layer,
) -> None:
    s = await layer.sessions.create_session(app_name="app", user_id="u1")
    same = s.last_update_time
    for n in range(5):  # all at the creation time, then at near-equal times
        await layer.sessions.append_event(s, layer.event(f"e{n}", ts=same))
    for n in range(5):
        await layer.sessions.append_event(s, layer.event(f"f{n}", ts=same + n * 1e-9))
    reloaded = await layer.sessions.get_session(app_name="app", user_id="u1", session_id=s.id)
    assert reloaded is not None
    await layer.sessions.append_event(reloaded, layer.event("after reload", ts=same))
    assert layer.revision(reloaded) == 11


async def test_append_to_a_deleted_session_raises_not_found(layer: Layer) -> None:
    s = await layer.sessions.create_session(app_name="app", user_id="u1")
    await layer.sessions.delete_session(app_name="app", user_id="u1", session_id=s.id)
    with pytest.raises(layer.not_found):
        await layer.sessions.append_event(s, layer.event("too late"))


async def test_concurrent_appends_from_one_loaded_session_let_one_win(layer: Layer) -> None:
    service = layer.sessions
    s = await service.create_session(app_name="app", user_id="u1")
    copies = [
        await service.get_session(app_name="app", user_id="u1", session_id=s.id) for _ in range(6)
    ]
    results = await asyncio.gather(
        *(service.append_event(c, layer.event(f"w{n}")) for n, c in enumerate(copies)),
        return_exceptions=True,
    )
    assert sum(not isinstance(r, BaseException) for r in results) == 1
    assert all(isinstance(r, layer.stale) for r in results if isinstance(r, BaseException))
    got = await service.get_session(app_name="app", user_id="u1", session_id=s.id)
    assert got is not None and len(got.events) == 1 and layer.revision(got) == 1


async def test_duplicate_event_id_is_rejected_not_stored_twice(
    layer: Layer,
) -> None:
    s = await layer.sessions.create_session(app_name="app", user_id="u1")
    event = layer.event("once", delta={"k": 1})
    await layer.sessions.append_event(s, event)
    again = layer.event("twice", id=event.id, delta={"k": 2})
    with pytest.raises(InvalidEventError, match="already exists"):
        await layer.sessions.append_event(s, again)
    got = await layer.sessions.get_session(app_name="app", user_id="u1", session_id=s.id)
    assert got is not None and [text_of(e) for e in got.events] == ["once"]
    assert got.state == {"k": 1} and layer.revision(got) == 1 and layer.revision(s) == 1


# -- pagination ---------------------------------------------------------------------


async def test_list_sessions_pages_through_everything_in_order(
    layer: Layer,
) -> None:
    for n in range(23):
        user = f"u{n % 3}"
        s = await layer.sessions.create_session(
            app_name="app", user_id=user, session_id=f"s{n:02d}", state={"n": n, "user:u": user}
        )
        await layer.sessions.append_event(s, layer.event("x", ts=1000.0 + n % 7))  # many ties
    await layer.sessions.create_session(app_name="other", user_id="u0")
    everything = await layer.sessions.list_sessions(app_name="app")
    assert everything.next_page_token is None and len(everything.sessions) == 23
    for user_id in (None, "u1"):
        expected = await layer.sessions.list_sessions(app_name="app", user_id=user_id)
        pages, token = [], None
        while True:
            page = await layer.sessions.list_sessions(
                app_name="app", user_id=user_id, limit=5, page_token=token
            )
            assert len(page.sessions) <= 5
            pages.extend(page.sessions)
            token = page.next_page_token
            if token is None:
                break
        assert [(s.user_id, s.id) for s in pages] == [(s.user_id, s.id) for s in expected.sessions]
        assert [s.state for s in pages] == [s.state for s in expected.sessions]
    streamed = [s.id async for s in layer.core_sessions.iter_sessions(app_name="app", page_size=4)]
    assert streamed == [s.id for s in everything.sessions]


async def test_list_sessions_rejects_bad_limits_and_tokens(layer: Layer) -> None:
    with pytest.raises(ValueError, match="limit"):
        await layer.sessions.list_sessions(app_name="app", limit=0)
    for token in ["garbage", "W10=", "WyJ4IiwgInkiLCAieiJd"]:
        with pytest.raises(ValueError, match="page_token"):
            await layer.sessions.list_sessions(app_name="app", limit=5, page_token=token)
