"""ADK's session-service tests, as behaviours of ours (issue 18, the session half).

google/adk-python's ``tests/unittests/sessions/test_session_service.py`` (google-adk
2.13) checks what a session service promises. Each behaviour it checks that no other
test of the contract suite already covers is tested here, in our own words, with its
inputs and expected results; each docstring names the upstream test. The list of every
upstream test, mapped to ours or said not to apply, is docs/adk-compatibility.md.

Every test takes ``layer`` (tests/conftest.py): it runs on SQLite, PostgreSQL and
MySQL/MariaDB, through the core service and through the ADK class; a test about ADK's
own types skips the core layer. The tests on a new, empty SQLite file run through both
layers.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from adk_sqlstore.schema import ALEMBIC_VERSION_TABLE

from .helpers import LAYERS, Layer, LayerName, open_layer

APP = "my_app"


def _delta(layer: Layer, invocation_id: str, ts: float, delta: dict[str, Any]) -> Any:
    """An event of ``invocation_id`` at ``ts`` carrying ``delta``."""
    return layer.event_of(invocation_id=invocation_id, timestamp=ts, actions={"state_delta": delta})


# -- create, get, delete ------------------------------------------------------------------


async def test_created_session_reads_back_equal_then_is_gone_after_delete(layer: Layer) -> None:
    """test_create_get_session: the created session carries the app, the user, a new id
    and the state given, updated no later than now; get_session returns an equal
    object (revision marker included); after delete_session, get_session is None."""
    created = await layer.sessions.create_session(
        app_name=APP, user_id="test_user", state={"key": "value"}
    )
    assert (created.app_name, created.user_id, created.state) == (
        APP,
        "test_user",
        {"key": "value"},
    )
    assert created.id
    assert created.last_update_time <= time.time()
    got = await layer.stored(APP, "test_user", created.id)
    assert got == created
    assert got.last_update_time <= time.time()
    await layer.sessions.delete_session(app_name=APP, user_id="test_user", session_id=created.id)
    assert (
        await layer.sessions.get_session(app_name=APP, user_id="test_user", session_id=created.id)
        is None
    )


async def test_one_session_id_under_two_users_is_two_sessions(layer: Layer) -> None:
    """test_get_session_respects_user_id, test_create_session_sequential_same_app_name:
    u2 may create session id ``s1`` that u1 already has in the same app; get_session
    for u2 returns u2's session, without u1's event, and u1's is still there."""
    first = await layer.sessions.create_session(app_name=APP, user_id="u1", session_id="s1")
    await layer.sessions.append_event(first, layer.event_of(invocation_id="inv1"))
    await layer.sessions.create_session(app_name=APP, user_id="u2", session_id="s1")
    theirs = await layer.stored(APP, "u2", "s1")
    assert (theirs.user_id, theirs.app_name, theirs.events) == ("u2", APP, [])
    mine = await layer.stored(APP, "u1", "s1")
    assert mine.user_id == "u1" and [e.invocation_id for e in mine.events] == ["inv1"]


# -- temp: state ---------------------------------------------------------------------------


async def test_temp_keys_leave_the_appended_event_but_stay_in_the_object(layer: Layer) -> None:
    """test_temp_state_is_not_persisted_in_state_or_events: after the append, the
    caller's session object holds ``temp:k1`` and ``sk``; the caller's own event object
    no longer carries ``temp:k1`` in its delta (``sk`` stays), nor does storage."""
    session = await layer.sessions.create_session(app_name=APP, user_id="u1", session_id="s1")
    event = layer.event_of(
        invocation_id="inv1", actions={"state_delta": {"temp:k1": "v1", "sk": "v2"}}
    )
    await layer.sessions.append_event(session, event)
    assert session.state["temp:k1"] == "v1" and session.state["sk"] == "v2"
    assert event.actions.state_delta == {"sk": "v2"}
    stored = await layer.stored(APP, "u1", "s1")
    assert stored.state == {"sk": "v2"}
    assert stored.events[0].actions.state_delta == {"sk": "v2"}


async def test_temp_value_reaches_the_next_step_of_the_invocation(layer: Layer) -> None:
    """test_temp_state_visible_across_sequential_events: agent-1's ``temp:output`` is
    readable from the session object by agent-2 of the same invocation (as a
    SequentialAgent hands ``output_key`` on); the event's delta, all temp, is stored
    empty, and nothing temp is stored."""
    session = await layer.sessions.create_session(app_name=APP, user_id="u1", session_id="s_seq")
    first = layer.event_of(
        invocation_id="inv1",
        author="agent1",
        actions={"state_delta": {"temp:output": "result_from_a1"}},
    )
    await layer.sessions.append_event(session, first)
    assert session.state.get("temp:output") == "result_from_a1"
    assert first.actions.state_delta == {}
    handed_on = session.state["temp:output"]
    second = layer.event_of(
        invocation_id="inv1", author="agent2", actions={"state_delta": {"got": handed_on}}
    )
    await layer.sessions.append_event(session, second)
    assert session.state["temp:output"] == "result_from_a1"
    stored = await layer.stored(APP, "u1", "s_seq")
    assert stored.state == {"got": "result_from_a1"}
    assert [e.actions.state_delta for e in stored.events] == [{}, {"got": "result_from_a1"}]


# -- events round trip ---------------------------------------------------------------------


async def test_bytes_in_an_event_round_trip(layer: Layer) -> None:
    """test_append_event_bytes: an image part (``b"test_image_data"``, image/png) is in
    the session object after the append and read back equal; on the ADK layer so is
    grounding metadata holding bytes (``sdk_blob=b"test_sdk_blob"``). The core Event
    has no typed grounding field (undeclared fields hold JSON only)."""
    image = {"inline_data": {"mime_type": "image/png", "data": b"test_image_data"}}
    fields: dict[str, Any] = {
        "invocation_id": "invocation",
        "content": {"role": "user", "parts": [image]},
    }
    if layer.name == "adk":
        fields["grounding_metadata"] = {"search_entry_point": {"sdk_blob": b"test_sdk_blob"}}
    event = layer.event_of(**fields)
    expected = event.model_copy(deep=True)
    session = await layer.sessions.create_session(app_name=APP, user_id="user")
    await layer.sessions.append_event(session, event)
    assert session.events[0].content == expected.content
    stored = await layer.stored(APP, "user", session.id)
    assert len(stored.events) == 1
    assert stored.events[0].content == expected.content
    assert stored.events[0].content.parts[0].inline_data.data == b"test_image_data"
    if layer.name == "adk":
        assert stored.events[0].grounding_metadata == expected.grounding_metadata
        entry_point = stored.events[0].grounding_metadata.search_entry_point
        assert entry_point.sdk_blob == b"test_sdk_blob"


@pytest.fixture
async def adk_layer(db_url: str) -> AsyncIterator[Layer]:
    """The ADK classes on every backend (a test of ADK's own types; the core layer's
    round trip of any event is tests/test_values.py's)."""
    pytest.importorskip("google.adk", reason="the ADK layer needs google.adk (adk extra)")
    async with open_layer("adk", db_url) as opened:
        yield opened


async def test_an_event_with_every_field_reads_back_in_an_equal_session(
    adk_layer: Layer,
) -> None:
    """test_append_event_complete (ADK's types): after appending an event that sets
    content, turn_complete, partial=False, artifact_delta, transfer_to_agent, escalate,
    long_running_tool_ids, error code and message, interrupted, grounding, usage and
    citation metadata, custom_metadata, a timestamp and both transcriptions, the
    session read back equals the caller's session object."""
    layer = adk_layer
    from google.adk.events import Event, EventActions
    from google.genai import types

    event = Event(
        invocation_id="invocation",
        author="user",
        content=types.Content(role="user", parts=[types.Part(text="test_text")]),
        turn_complete=True,
        partial=False,
        actions=EventActions(artifact_delta={"file": 0}, transfer_to_agent="agent", escalate=True),
        long_running_tool_ids={"tool1"},
        error_code="error_code",
        error_message="error_message",
        interrupted=True,
        grounding_metadata=types.GroundingMetadata(web_search_queries=["query1"]),
        usage_metadata=types.GenerateContentResponseUsageMetadata(
            prompt_token_count=1, candidates_token_count=1, total_token_count=2
        ),
        citation_metadata=types.CitationMetadata(),
        custom_metadata={"custom_key": "custom_value"},
        timestamp=1700000000.123,
        input_transcription=types.Transcription(text="input transcription", finished=True),
        output_transcription=types.Transcription(text="output transcription", finished=True),
    )
    session = await layer.sessions.create_session(app_name=APP, user_id="user")
    await layer.sessions.append_event(session, event)
    stored = await layer.stored(APP, "user", session.id)
    assert stored == session
    assert stored.last_update_time == 1700000000.123


# -- stale writers ------------------------------------------------------------------------


async def test_an_object_left_behind_is_rejected_after_its_own_append(layer: Layer) -> None:
    """test_append_event_to_stale_session: an object that appended ``inv1`` falls
    behind when a reloaded copy appends ``inv2``; its next append (``inv3``) is
    refused as "modified in storage" (ADK's error is a ValueError), and storage holds
    inv1 and inv2 with sk1 and sk2, no sk3."""
    now = time.time()
    original = await layer.sessions.create_session(app_name=APP, user_id="user")
    await layer.sessions.append_event(original, _delta(layer, "inv1", now + 1, {"sk1": "v1"}))
    updated = await layer.stored(APP, "user", original.id)
    await layer.sessions.append_event(updated, _delta(layer, "inv2", now + 2, {"sk2": "v2"}))
    assert original.last_update_time < updated.last_update_time
    assert len(original.events) == 1 and "sk2" not in original.state
    with pytest.raises(layer.stale, match="modified in storage") as refused:
        await layer.sessions.append_event(original, _delta(layer, "inv3", now + 3, {"sk3": "v3"}))
    if layer.name == "adk":
        assert isinstance(refused.value, ValueError)
    final = await layer.stored(APP, "user", original.id)
    assert [e.invocation_id for e in final.events] == ["inv1", "inv2"]
    assert final.state == {"sk1": "v1", "sk2": "v2"}


async def test_two_copies_appending_at_once_let_one_win_every_round(layer: Layer) -> None:
    """test_append_event_concurrent_stale_sessions_reject_stale_writer: eight rounds of
    two deep copies of the latest session appending at once: each round exactly one
    append succeeds and the other is refused as "modified in storage"; storage ends
    with eight events and one of the two keys of each round."""
    session = await layer.sessions.create_session(app_name=APP, user_id="user")
    for i in range(8):
        latest = await layer.stored(APP, "user", session.id)
        copies = [latest.model_copy(deep=True), latest.model_copy(deep=True)]
        base = latest.last_update_time + 10.0
        results = await asyncio.gather(
            *(
                layer.sessions.append_event(
                    copy, _delta(layer, f"inv{i}-{n}", base + n, {f"sk{i}-{n}": f"v{i}-{n}"})
                )
                for n, copy in enumerate(copies, start=1)
            ),
            return_exceptions=True,
        )
        errors = [r for r in results if isinstance(r, BaseException)]
        assert len(errors) == 1, results
        assert isinstance(errors[0], layer.stale) and "modified in storage" in str(errors[0])
    final = await layer.stored(APP, "user", session.id)
    assert len(final.events) == 8
    for i in range(8):
        written = {k for k in final.state if k.startswith(f"sk{i}-")}
        assert len(written) == 1
        (key,) = written
        assert final.state[key] == "v" + key.removeprefix("sk")


async def test_a_drifted_last_update_time_is_not_staleness(layer: Layer) -> None:
    """test_append_event_allows_timestamp_drift_for_current_session: an up-to-date
    object whose last_update_time is off by 0.0001 s (a float round trip) appends
    normally: events inv1, inv2."""
    session = await layer.sessions.create_session(app_name=APP, user_id="user", session_id="s1")
    first = layer.event_of(invocation_id="inv1", timestamp=session.last_update_time + 10)
    await layer.sessions.append_event(session, first)
    session.last_update_time -= 0.0001
    second = layer.event_of(invocation_id="inv2", timestamp=first.timestamp + 10)
    await layer.sessions.append_event(session, second)
    stored = await layer.stored(APP, "user", "s1")
    assert [e.invocation_id for e in stored.events] == ["inv1", "inv2"]


def _without_marker(layer: Layer, session: Any) -> Any:
    """``session`` without the mark of the read it came from: ADK's Session with its
    ``_storage_update_marker`` cleared (as upstream does); on the core layer a copy made
    from its fields, as by another program (it keeps ``revision``, not the
    incarnation)."""
    if layer.name == "adk":
        session._storage_update_marker = None
        return session
    return type(session).model_validate(session.model_dump())


async def test_an_object_without_its_marker_appends_while_current(layer: Layer) -> None:
    """test_append_event_allows_markerless_current_session: an up-to-date session
    object without its storage marker (and with a drifted last_update_time) appends
    normally: events inv1, inv2."""
    session = await layer.sessions.create_session(app_name=APP, user_id="user", session_id="s1")
    first = layer.event_of(invocation_id="inv1", timestamp=session.last_update_time + 10)
    await layer.sessions.append_event(session, first)
    bare = _without_marker(layer, session)
    bare.last_update_time -= 0.0001
    second = layer.event_of(invocation_id="inv2", timestamp=first.timestamp + 10)
    await layer.sessions.append_event(bare, second)
    stored = await layer.stored(APP, "user", "s1")
    assert [e.invocation_id for e in stored.events] == ["inv1", "inv2"]


# -- first calls ---------------------------------------------------------------------------


async def _create_at_once(sessions: Any) -> None:
    """Five creates in five apps (upstream's), then five in one new app by one new user
    seeding the same user: and app: keys, all at once: none fails, all are stored."""
    apps = await asyncio.gather(
        *(
            sessions.create_session(app_name=f"app_{i}", user_id="user", session_id=f"sess_{i}")
            for i in range(5)
        ),
        return_exceptions=True,
    )
    assert not [r for r in apps if isinstance(r, BaseException)], apps
    shared = await asyncio.gather(
        *(
            sessions.create_session(
                app_name="shared",
                user_id="new",
                session_id=f"s{i}",
                state={"app:seen": True, "user:seen": True},
            )
            for i in range(5)
        ),
        return_exceptions=True,
    )
    assert not [r for r in shared if isinstance(r, BaseException)], shared
    for i in range(5):
        found = await sessions.get_session(
            app_name=f"app_{i}", user_id="user", session_id=f"sess_{i}"
        )
        assert found is not None
    listed = await sessions.list_sessions(app_name="shared", user_id="new")
    assert sorted(s.id for s in listed.sessions) == [f"s{i}" for i in range(5)]
    assert all(s.state == {"app:seen": True, "user:seen": True} for s in listed.sessions)


async def test_concurrent_first_calls_of_a_new_service_all_succeed(layer: Layer) -> None:
    """test_concurrent_prepare_tables_no_race_condition (on a migrated database): a
    new service's first calls, made all at once, all succeed (they race on its schema
    check); so do creates racing on one new app's and user's state."""
    fresh = layer.open_sessions()
    try:
        await _create_at_once(fresh)
    finally:
        await fresh.close()


@pytest.fixture(params=LAYERS)
async def empty_sqlite(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Layer]:
    """A layer on a new SQLite file, no tables yet (it migrates itself on first use, as
    SQLite stores do by default)."""
    name: LayerName = request.param
    if name == "adk":
        pytest.importorskip("google.adk", reason="the ADK layer needs google.adk (adk extra)")
    async with open_layer(name, f"sqlite:///{tmp_path / 'new.db'}") as opened:
        yield opened


def _tables(url: str) -> set[str]:
    """The tables in the SQLite file of ``url``."""
    with contextlib.closing(sqlite3.connect(url.removeprefix("sqlite:///"))) as conn:
        return {name for (name,) in conn.execute("SELECT name FROM sqlite_master")}


@pytest.mark.sqlite
async def test_concurrent_first_calls_on_an_empty_file_all_succeed(empty_sqlite: Layer) -> None:
    """test_concurrent_prepare_tables_no_race_condition (as upstream, on an empty
    SQLite database): the first calls, made all at once, create the tables once and
    all succeed."""
    assert _tables(empty_sqlite.url) == set()
    await _create_at_once(empty_sqlite.sessions)
    assert {ALEMBIC_VERSION_TABLE, "sqlstore_sessions"} <= _tables(empty_sqlite.url)


@pytest.mark.sqlite
async def test_eager_schema_preparation_is_idempotent(empty_sqlite: Layer) -> None:
    """test_public_prepare_tables_eager_initialization,
    test_prepare_tables_idempotent_after_creation: preparing the schema ahead of the
    first call creates the tables; doing it again is a no-op; then create_session
    works. The ADK class has ADK's name for it, ``prepare_tables()``; the core
    service's is ``ensure_schema()``."""
    sessions = empty_sqlite.sessions
    prepare = sessions.prepare_tables if empty_sqlite.name == "adk" else sessions.ensure_schema
    await prepare()
    tables = _tables(empty_sqlite.url)
    assert {ALEMBIC_VERSION_TABLE, "sqlstore_sessions"} <= tables
    await prepare()
    assert _tables(empty_sqlite.url) == tables
    session = await empty_sqlite.sessions.create_session(
        app_name="app", user_id="user", session_id="s1"
    )
    assert session.id == "s1"


# -- get_user_state --------------------------------------------------------------------------


async def test_user_state_is_empty_for_an_unknown_user_another_user_or_app(
    layer: Layer,
) -> None:
    """test_get_user_state_returns_empty_dict_when_no_state_exists,
    test_get_user_state_is_not_visible_across_users,
    test_get_user_state_is_not_visible_across_apps: nothing stored yet gives ``{}``;
    u1's ``user:`` keys in my_app are not u2's, nor u1's in other_app."""
    assert await layer.sessions.get_user_state(app_name=APP, user_id="u1") == {}
    session = await layer.sessions.create_session(app_name=APP, user_id="u1")
    delta = {"user:secret": "only-for-u1", "user:data": "only-app-a"}
    await layer.sessions.append_event(
        session, layer.event_of(author="system", actions={"state_delta": delta})
    )
    assert await layer.sessions.get_user_state(app_name=APP, user_id="u2") == {}
    assert await layer.sessions.get_user_state(app_name="other_app", user_id="u1") == {}
    assert await layer.sessions.get_user_state(app_name=APP, user_id="u1") == {
        "secret": "only-for-u1",
        "data": "only-app-a",
    }


async def test_user_state_from_events_is_read_without_prefix_latest_value(
    layer: Layer,
) -> None:
    """test_get_user_state_returns_state_written_via_append_event,
    test_get_user_state_available_before_session_is_created,
    test_get_user_state_reflects_latest_write: ``user:`` keys an event wrote come back
    without their prefix, nested values whole, session keys left out; a later write of
    a key wins."""
    session = await layer.sessions.create_session(app_name=APP, user_id="u1")

    async def write(delta: dict[str, Any]) -> None:
        event = layer.event_of(author="system", actions={"state_delta": delta})
        await layer.sessions.append_event(session, event)

    await write({"user:profile": {"name": "Alice"}, "session_key": 1})
    assert await layer.sessions.get_user_state(app_name=APP, user_id="u1") == {
        "profile": {"name": "Alice"}
    }
    await write({"user:ctx": {"v": 1}})
    await write({"user:counter": 1})
    await write({"user:counter": 2})
    assert await layer.sessions.get_user_state(app_name=APP, user_id="u1") == {
        "profile": {"name": "Alice"},
        "ctx": {"v": 1},
        "counter": 2,
    }
