"""ADK's session-service tests of a later copy of the upstream file, as behaviours of
ours (issue 33, rough edge 12).

google/adk-python's ``tests/unittests/sessions/test_session_service.py`` grew after the
copy ``tests/test_adk_compat_sessions.py`` maps (57 tests). The later copy read here has
tests for list ordering, dict/None/boolean deltas, ``SessionNotFoundError``, a repeated
local hour (DST), re-delivered events, padded and blank ids and the service's URL
errors. Each behaviour is checked here in our own words, on SQLite, PostgreSQL and
MySQL/MariaDB through both API layers unless the test says otherwise; each docstring
names its upstream test. What ADK 2.13.0's own services do in the same cases is checked
by ``tests/test_adk_reference.py``, so that the differences listed in
docs/adk-compatibility.md are those of the installed release.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from adk_sqlstore import InvalidArgumentError, InvalidEventError, InvalidIdentifierError

from .helpers import Layer

APP = "my_app"


# -- list ordering -------------------------------------------------------------------------


async def test_an_append_moves_a_session_to_the_end_of_the_list(layer: Layer) -> None:
    """test_list_sessions_ordered_by_last_update_time,
    test_database_session_service_list_sessions_orders_by_update_time_then_id: sessions
    a, b, c created in turn, then an event appended to a: the list is b, c, a (least
    recently updated first); sessions updated at the same time are in id order."""
    for session_id in ("a", "b", "c"):
        await layer.sessions.create_session(app_name=APP, user_id="u", session_id=session_id)
    first = await layer.stored(APP, "u", "a")
    await asyncio.sleep(0.01)
    await layer.sessions.append_event(first, layer.event_of(invocation_id="invocation"))
    listed = await layer.sessions.list_sessions(app_name=APP, user_id="u")
    assert [s.id for s in listed.sessions] == ["b", "c", "a"]
    for session_id in ("active_b", "active_a"):
        tied = await layer.sessions.create_session(
            app_name=APP, user_id="tie", session_id=session_id
        )
        await layer.sessions.append_event(tied, layer.event_of(timestamp=2e9))
    listed = await layer.sessions.list_sessions(app_name=APP, user_id="tie")
    assert [s.id for s in listed.sessions] == ["active_a", "active_b"]


async def test_listed_sessions_carry_their_merged_state_and_no_events(layer: Layer) -> None:
    """test_list_sessions_sync_strips_events_and_merges_scoped_state,
    test_list_sessions_sync_unknown_app_or_user_returns_empty_response (ADK's in-memory
    ``list_sessions_sync``; the behaviour, through ``list_sessions``): a listed session
    has no events and its state with ``app:`` and ``user:`` keys merged in under their
    prefixes (``temp:`` never stored); an unknown app or user lists nothing."""
    session = await layer.sessions.create_session(
        app_name=APP,
        user_id="u1",
        session_id="s1",
        state={"app:a": "av", "user:u": "uv", "sk": "sv", "temp:t": "tv"},
    )
    await layer.sessions.append_event(
        session, layer.event_of(invocation_id="inv1", actions={"state_delta": {"sk2": "sv2"}})
    )
    (listed,) = (await layer.sessions.list_sessions(app_name=APP, user_id="u1")).sessions
    assert listed.id == "s1" and listed.events == []
    assert listed.state == {"app:a": "av", "user:u": "uv", "sk": "sv", "sk2": "sv2"}
    assert (await layer.sessions.list_sessions(app_name="unknown_app")).sessions == []
    unknown_user = await layer.sessions.list_sessions(app_name=APP, user_id="unknown_user")
    assert unknown_user.sessions == []
    assert [s.id for s in (await layer.sessions.list_sessions(app_name=APP)).sessions] == ["s1"]


# -- state deltas: values are stored as given ---------------------------------------------


async def test_dict_none_and_false_values_are_stored_as_given_in_every_scope(
    layer: Layer,
) -> None:
    """test_dict_valued_state_delta_replaces_stored_value,
    test_none_valued_state_delta_is_stored_not_dropped,
    test_boolean_state_survives_unrelated_state_delta,
    test_app_state_dict_valued_delta_replaces_stored_value,
    test_user_state_none_valued_delta_is_stored_not_dropped: a dict in a delta replaces
    the stored dict (no deep merge); None is stored as null, the key stays; a stored
    False survives a delta of another key; the same for ``app:`` and ``user:`` keys, as
    another user's and another session's new sessions see them; in the caller's object
    too."""
    session = await layer.sessions.create_session(
        app_name=APP,
        user_id="u1",
        session_id="s1",
        state={
            "profile": {"name": "ada", "role": "admin"},
            "flag": True,
            "off": False,
            "app:cfg": {"name": "ada", "role": "admin"},
            "user:pref": "dark_mode",
        },
    )
    delta = {
        "profile": {"name": "bob"},
        "flag": None,
        "new_flag": True,
        "app:cfg": {"name": "bob"},
        "user:pref": None,
    }
    await layer.sessions.append_event(
        session, layer.event_of(invocation_id="inv1", actions={"state_delta": delta})
    )
    expected = {**delta, "off": False}
    for state in (session.state, (await layer.stored(APP, "u1", "s1")).state):
        assert state == expected
        assert state["off"] is False and state["new_flag"] is True
    same_user = await layer.sessions.create_session(app_name=APP, user_id="u1", session_id="s1b")
    assert same_user.state == {"app:cfg": {"name": "bob"}, "user:pref": None}
    other_user = await layer.sessions.create_session(app_name=APP, user_id="u2", session_id="s2")
    assert other_user.state == {"app:cfg": {"name": "bob"}}


# -- appends to sessions that are not stored -----------------------------------------------


async def test_an_append_to_a_session_never_created_raises_not_found(layer: Layer) -> None:
    """test_append_event_to_unknown_session_raises_session_not_found: a session object
    made by hand, with an id never stored: ``SessionNotFoundError`` (ADK's own on the
    ADK layer), nothing stored. (After a delete:
    test_append_event_to_deleted_session_raises_session_not_found, held by
    tests/test_sessions.py::test_append_to_a_deleted_session_raises_not_found.)"""
    made = await layer.sessions.create_session(app_name=APP, user_id="user", session_id="kept")
    never = made.model_copy(update={"id": "never_created"})
    with pytest.raises(layer.not_found):
        await layer.sessions.append_event(never, layer.event_of(invocation_id="inv1"))
    got = await layer.sessions.get_session(app_name=APP, user_id="user", session_id="never_created")
    assert got is None


# -- a repeated local hour -------------------------------------------------------------------


@pytest.fixture
def eastern_time() -> Iterator[None]:
    """The process's local time zone set to US Eastern (DST) for the test."""
    before = os.environ.get("TZ")
    os.environ["TZ"] = "America/New_York"
    time.tzset()
    try:
        yield
    finally:
        if before is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = before
        time.tzset()


async def test_events_in_a_repeated_local_hour_keep_their_exact_times(
    layer: Layer, eastern_time: None
) -> None:
    """test_get_session_keeps_exact_epoch_across_a_repeated_local_hour: with the local
    zone US Eastern, events at 2024-11-03 06:00 and 06:30 UTC (01:00 and 01:30 local,
    the second time that morning) read back at the same instants, in order; so do the
    session's times. We store seconds since the epoch, never local wall-clock time."""
    assert time.localtime(1730613600.0).tm_isdst == 0  # the repeated hour, standard time
    session = await layer.sessions.create_session(app_name=APP, user_id="user")
    epochs = [1730613600.0, 1730615400.0]
    for epoch in epochs:
        await layer.sessions.append_event(session, layer.event_of(timestamp=epoch))
    got = await layer.stored(APP, "user", session.id)
    assert [e.timestamp for e in got.events] == epochs
    assert got.last_update_time == epochs[-1]
    after = await layer.sessions.get_session(
        app_name=APP,
        user_id="user",
        session_id=session.id,
        config=layer.config(after_timestamp=1730615000.0),
    )
    assert after is not None and [e.timestamp for e in after.events] == epochs[1:]


# -- re-delivered events -------------------------------------------------------------------


async def test_an_equal_event_delivered_again_is_stored_and_applied_once(layer: Layer) -> None:
    """test_append_event_is_idempotent_for_same_event_id: the same event appended again,
    as the same object and as an equal copy, is stored once and its delta applied once;
    the calls return the event and leave the session object as it was. So does a copy
    delivered through a copy of the session loaded before the first append (a retry
    after a lost reply), where another event's append would be stale."""
    session = await layer.sessions.create_session(
        app_name="test_app", user_id="user_dup", session_id="session_dup"
    )
    before = session.model_copy(deep=True)
    event = layer.event_of(invocation_id="inv_dup", actions={"state_delta": {"counter": 1}})
    await layer.sessions.append_event(session, event)
    revision = layer.revision(session)
    for again in (event, event.model_copy(deep=True)):
        assert await layer.sessions.append_event(session, again) is again
    assert await layer.sessions.append_event(before, event.model_copy(deep=True)) is not None
    assert before.events == [] and layer.revision(before) == 0
    assert len(session.events) == 1 and layer.revision(session) == revision
    stored = await layer.sessions.get_session(
        app_name="test_app", user_id="user_dup", session_id="session_dup"
    )
    assert stored is not None
    assert [e.id for e in stored.events] == [event.id]
    assert stored.state == {"counter": 1} and layer.revision(stored) == 1
    with pytest.raises(layer.stale):  # another event through the old copy is stale
        await layer.sessions.append_event(before, layer.event_of(invocation_id="other"))


async def test_an_equal_event_is_recognised_by_its_values(layer: Layer) -> None:
    """test_append_event_is_idempotent_for_same_event_id, where the copy is equal but
    not the same JSON text: its
    delta's keys in another order, a ``temp:`` key its first append dropped (the call
    returns the event as stored, without it), an infinite or NaN float the store keeps
    as ADK's own services do. (Found by a review: each was refused as "other
    content".)"""
    session = await layer.sessions.create_session(app_name=APP, user_id="u", session_id="v")
    delta = {"city": "Paris", "days": 3, "temp:scratch": "x"}
    event = layer.event_of(invocation_id="i", actions={"state_delta": delta})
    untrimmed = event.model_copy(deep=True)
    await layer.sessions.append_event(session, event)
    reordered = event.model_copy(deep=True)
    reordered.actions.state_delta = {"days": 3, "city": "Paris"}
    assert await layer.sessions.append_event(session, reordered) is reordered
    returned = await layer.sessions.append_event(session, untrimmed)
    assert returned.actions.state_delta == {"city": "Paris", "days": 3}
    if layer.name == "adk":  # ADK's event model carries model output: log-probabilities
        scored = layer.event_of(
            invocation_id="j",
            avg_logprobs=float("nan"),
            logprobs_result={"chosen_candidates": [{"token": "hi", "log_probability": -1e309}]},
        )
        await layer.sessions.append_event(session, scored)
        await layer.sessions.append_event(session, scored)
    stored = await layer.stored(APP, "u", "v")
    assert len(stored.events) == (2 if layer.name == "adk" else 1)
    assert stored.state == {"city": "Paris", "days": 3}


async def test_another_event_under_a_taken_id_through_an_old_copy_is_refused_too(
    layer: Layer,
) -> None:
    """test_append_different_events_not_deduplicated, through a copy of the session
    loaded before the first append: another event under the taken id is
    InvalidEventError (not StaleSessionError): reloading would
    not help."""
    session = await layer.sessions.create_session(app_name=APP, user_id="u", session_id="o")
    old = session.model_copy(deep=True)
    await layer.sessions.append_event(session, layer.event_of(id="e-1", invocation_id="a"))
    with pytest.raises(InvalidEventError, match="already exists"):
        await layer.sessions.append_event(old, layer.event_of(id="e-1", invocation_id="b"))
    assert [e.invocation_id for e in (await layer.stored(APP, "u", "o")).events] == ["a"]


async def test_another_event_under_a_taken_id_is_refused(layer: Layer) -> None:
    """test_append_different_events_not_deduplicated: ADK's in-memory service keeps two
    different events that share an id (its SQL services raise the database's integrity
    error). A deliberate difference: ours refuses the second with InvalidEventError
    naming the id, and stores nothing of it; an event id names one event of a session
    (memory ingestion and re-delivery are keyed on it)."""
    session = await layer.sessions.create_session(
        app_name="test_app", user_id="user_multi", session_id="session_multi"
    )
    await layer.sessions.append_event(
        session, layer.event_of(id="shared-event-id", invocation_id="inv_a", author="user")
    )
    other = layer.event_of(id="shared-event-id", invocation_id="inv_b", author="agent")
    with pytest.raises(ValueError, match="event id 'shared-event-id' already exists") as raised:
        await layer.sessions.append_event(session, other)
    assert isinstance(raised.value, InvalidEventError)  # no ADK error of this kind
    stored = await layer.stored("test_app", "user_multi", "session_multi")
    assert [e.author for e in stored.events] == ["user"]
    assert len(session.events) == 1


# -- session ids ---------------------------------------------------------------------------


async def test_session_ids_are_stored_as_given_whitespace_included(layer: Layer) -> None:
    """test_create_session_with_padded_duplicate_id_raises_error,
    test_create_session_with_blank_id_generates_one: ADK's in-memory and SQLite services
    strip a session id (``"  ex  "`` is ``"ex"``; ``"   "`` is no id), its
    DatabaseSessionService stores it as given. A deliberate difference from the first
    two: ours stores every id as given, as DatabaseSessionService does, so that a
    database imported from it (``adk-sqlstore import-adk``) keeps every session
    reachable and no two stored ids become one; an empty id is refused."""
    await layer.sessions.create_session(
        app_name=APP, user_id="u", session_id="ex", state={"keep": "original"}
    )
    padded = await layer.sessions.create_session(
        app_name=APP, user_id="u", session_id="  ex  ", state={"keep": "other"}
    )
    assert padded.id == "  ex  "
    assert (await layer.stored(APP, "u", "ex")).state == {"keep": "original"}
    assert (await layer.stored(APP, "u", "  ex  ")).state == {"keep": "other"}
    blank = await layer.sessions.create_session(app_name=APP, user_id="u", session_id="   ")
    assert blank.id == "   "
    with pytest.raises(ValueError, match="session_id must not be empty") as raised:
        await layer.sessions.create_session(app_name=APP, user_id="u", session_id="")
    assert isinstance(raised.value, InvalidIdentifierError)


async def test_two_creates_of_one_id_at_once_let_one_win_naming_the_id(layer: Layer) -> None:
    """test_create_session_concurrent_same_id_raises_already_exists_error,
    test_sqlite_create_session_concurrent_same_id_raises_already_exists_error: five
    rounds of two ``create_session`` calls at once with one id: one returns the session,
    the other raises ``AlreadyExistsError`` naming the id; the stored session is the
    winner's."""
    await layer.sessions.create_session(app_name=APP, user_id="user", session_id="warmup")
    for n in range(5):
        session_id = f"race-session-{n}"
        results = await asyncio.gather(
            *(
                layer.sessions.create_session(
                    app_name=APP, user_id="user", session_id=session_id, state={"by": k}
                )
                for k in range(2)
            ),
            return_exceptions=True,
        )
        won = [r for r in results if not isinstance(r, BaseException)]
        lost = [r for r in results if isinstance(r, BaseException)]
        assert len(won) == 1 and len(lost) == 1, results
        assert isinstance(lost[0], layer.already_exists) and session_id in str(lost[0])
        assert (await layer.stored(APP, "user", session_id)).state == won[0].state


# -- what a call returns is the caller's own ------------------------------------------------


async def test_editing_what_a_call_returned_changes_nothing_stored(layer: Layer) -> None:
    """test_returned_session_scoped_state_uses_configured_copy_depth,
    test_get_user_state_copies_to_session_state_depth: nested ``app:`` and ``user:``
    values in a session from create_session, get_session or list_sessions, and the
    dict get_user_state returns, edited in place: a later session of the user reads the
    stored values. (ADK's in-memory service shares them under its light-copy feature
    flag; ours always decodes a fresh copy.)"""
    state = {"app:config": {"theme": "light"}, "user:profile": {"name": "Alice"}}
    created = await layer.sessions.create_session(
        app_name=APP, user_id="u1", session_id="s1", state=state
    )
    got = await layer.stored(APP, "u1", "s1")
    (listed,) = (await layer.sessions.list_sessions(app_name=APP, user_id="u1")).sessions
    for returned in (created, got, listed):
        returned.state["app:config"]["theme"] = "dark"
        returned.state["user:profile"]["name"] = "Mallory"
    user_state = await layer.sessions.get_user_state(app_name=APP, user_id="u1")
    user_state["profile"]["name"] = "Mallory"
    user_state["added"] = 1
    later = await layer.sessions.create_session(app_name=APP, user_id="u1", session_id="s2")
    assert later.state == state
    assert await layer.sessions.get_user_state(app_name=APP, user_id="u1") == {
        "profile": {"name": "Alice"}
    }


# -- ADK's types in events -----------------------------------------------------------------


async def test_requested_tool_confirmations_round_trip(layer: Layer) -> None:
    """test_append_event_with_requested_tool_confirmations: an event asking to confirm
    ``tool_call_1`` (hint, confirmed False, a payload) reads back with the same
    confirmation, as ADK's ``ToolConfirmation`` on the ADK layer."""
    session = await layer.sessions.create_session(app_name=APP, user_id="user")
    confirmation = {
        "hint": "dynamic hint",
        "confirmed": False,
        "payload": {"collection_name": "photos", "resource_id": "album_1"},
    }
    event = layer.event_of(
        invocation_id="invocation",
        actions={"requested_tool_confirmations": {"tool_call_1": confirmation}},
    )
    await layer.sessions.append_event(session, event)
    (stored,) = (await layer.stored(APP, "user", session.id)).events
    asked = stored.actions.requested_tool_confirmations["tool_call_1"]
    if layer.name == "adk":
        from google.adk.tools.tool_confirmation import ToolConfirmation

        assert isinstance(asked, ToolConfirmation)
        asked = asked.model_dump(exclude_none=True)
    assert asked == confirmation


# -- constructing the ADK class ------------------------------------------------------------


async def test_the_adk_class_takes_one_of_a_url_or_an_engine(tmp_path: Path) -> None:
    """test_database_session_service_with_db_url,
    test_database_session_service_with_db_engine,
    test_database_session_service_caller_owned_engine_not_disposed_on_close,
    test_database_session_service_requires_one_argument: the ADK class works from a URL
    (positional or ``uri=``) or from an engine (``engine=``, or ``store=``); the
    caller's engine is still usable after ``close``; two of them at once are refused
    (InvalidArgumentError, a ValueError). With none, ours uses
    ``$ADK_SQLSTORE_DATABASE_URL`` or the embedded file (tests/test_config.py)."""
    pytest.importorskip("google.adk", reason="the ADK classes need google.adk (adk extra)")
    from adk_sqlstore.adk import SqlArtifactService, SqlMemoryService, SqlSessionService

    url = f"sqlite:///{tmp_path / 'by-url.db'}"
    for service in (SqlSessionService(url), SqlSessionService(uri=url)):
        async with service:
            made = await service.create_session(app_name="a", user_id="u", state={"k": "v"})
            assert await service.get_session(app_name="a", user_id="u", session_id=made.id) == made
    engine = create_async_engine(f"sqlite+aiosqlite:///{tmp_path / 'by-engine.db'}")
    try:
        async with SqlSessionService(engine=engine, auto_migrate=True) as service:
            made = await service.create_session(app_name="a", user_id="u", state={"k": "v"})
            assert await service.get_session(app_name="a", user_id="u", session_id=made.id) == made
        async with engine.connect() as conn:
            assert (await conn.execute(text("SELECT 1"))).scalar() == 1
        async with SqlSessionService(engine) as positional:  # as the core classes take it
            assert await positional.get_session(app_name="a", user_id="u", session_id=made.id)
        for both in ({"uri": url, "engine": engine}, {"store": engine, "engine": engine}):
            with pytest.raises(InvalidArgumentError, match="give one of a URI, store= or engine="):
                SqlSessionService(**both)
        with pytest.raises(InvalidArgumentError, match="give one of"):
            SqlSessionService(engine, engine=engine)
        # settings beside an engine would be ignored: refused, on each ADK class
        for cls in (SqlSessionService, SqlMemoryService, SqlArtifactService):
            for extra in ({"db_url": url}, {"pool_size": 2}, {"max_event_byte": 10}):
                with pytest.raises(InvalidArgumentError, match="cannot go with a store or engine"):
                    cls(engine=engine, **extra)
    finally:
        await engine.dispose()
