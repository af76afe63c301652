"""Exact round trips of state values and events, and rejection of what is not JSON."""

from __future__ import annotations

import datetime
import math
import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adk_sqlstore import (
    Event,
    InvalidIdentifierError,
    InvalidStateError,
    SqlSessionService,
)

from .conftest import examples

TRICKY_VALUES: dict[str, Any] = {
    "nul": "before\x00after",
    "emoji": "lunch 🥗 café naïve 你好",
    "non_bmp": "\U0001f600\U00010348\U0010ffff",
    "big_int": 2**200,
    "negative_big": -(2**80) - 1,
    "max_float": 1e308,
    "tiny_float": 5e-324,
    "negative_zero": -0.0,
    "tenth": 0.1,
    "nested": [[1, [2, [3, [4, [5]]]]], {"a": {"b": {"c": [None, True, False]}}}],
    "empty": {"list": [], "dict": {}, "str": ""},
    "quotes": 'it\'s "quoted" \\ back\\slash\n\t\r',
    "sql": "'; DROP TABLE sqlstore_sessions; --",
    "none": None,
}


def assert_exact(a: Any, b: Any) -> None:
    """Equal, with the same types all the way down (1 vs 1.0 vs True differ)."""
    assert type(a) is type(b), (a, b)
    if isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            assert_exact(a[k], b[k])
    elif isinstance(a, list):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            assert_exact(x, y)
    elif isinstance(a, float):
        assert struct.pack("<d", a) == struct.pack("<d", b)
    else:
        assert a == b


async def test_tricky_values_round_trip_exactly_in_every_scope(service: SqlSessionService) -> None:
    state = {}
    for key, value in TRICKY_VALUES.items():
        state[key] = value
        state["user:" + key] = value
        state["app:" + key] = value
    s = await service.create_session(app_name="app", user_id="u1", state=state)
    got = await service.get_session(app_name="app", user_id="u1", session_id=s.id)
    assert got is not None
    for key in state:
        assert_exact(got.state[key], state[key])
    # And through an event's delta, inside the stored event too.
    s2 = await service.create_session(app_name="app", user_id="u2")
    event = Event(author="agent", actions={"state_delta": TRICKY_VALUES})
    await service.append_event(s2, event)
    got2 = await service.get_session(app_name="app", user_id="u2", session_id=s2.id)
    assert got2 is not None
    for key, value in TRICKY_VALUES.items():
        assert_exact(got2.state[key], value)
        assert_exact(got2.events[0].actions.state_delta[key], value)


async def test_event_timestamp_comes_back_bit_for_bit(service: SqlSessionService) -> None:
    s = await service.create_session(app_name="app", user_id="u1")
    stamps = [1795958888.2777488, 1e-7, 1732000000.123456789, math.nextafter(1.7e9, 2e9), 0.1 + 0.2]
    for ts in stamps:
        await service.append_event(s, Event(author="user", timestamp=ts))
    got = await service.get_session(app_name="app", user_id="u1", session_id=s.id)
    assert got is not None
    for event, ts in zip(got.events, stamps, strict=True):
        assert struct.pack("<d", event.timestamp) == struct.pack("<d", ts)
    assert struct.pack("<d", got.last_update_time) == struct.pack("<d", stamps[-1])


async def test_events_round_trip_whatever_they_carry(service: SqlSessionService) -> None:
    s = await service.create_session(app_name="app", user_id="u1")
    events = [
        Event.model_validate(
            {
                "invocation_id": "e-1",
                "author": "lunch_assistant",
                "branch": "root.sub",
                "turn_complete": True,
                "content": {
                    "role": "model",
                    "parts": [
                        {
                            "function_call": {
                                "id": "adk-1",
                                "name": "remember_diet",
                                "args": {"diet": "vegetarian", "nested": {"camelCase": 1}},
                            }
                        },
                        {"text": "and text", "thought": True},
                    ],
                },
                "actions": {
                    "state_delta": {"user:diet": "vegetarian"},
                    "artifact_delta": {"a.png": 2},
                    "transfer_to_agent": "other",
                    "escalate": False,
                    "requested_tool_confirmations": {"adk-1": {"hint": "ok?"}},
                    "compaction": {"start_timestamp": 1.0, "end_timestamp": 2.0},
                },
                "long_running_tool_ids": ["adk-1"],
                "node_info": {"path": "lunch_assistant@1"},
                "usage_metadata": {"prompt_token_count": 12, "candidates_token_count": 3},
                "grounding_metadata": {"web_search_queries": ["lunch"]},
                "custom_metadata": {"anything": [1, "two", None]},
                "unknown_future_field": {"kept": True},
            }
        ),
        Event.model_validate(
            {
                "author": "user",
                "content": {
                    "role": "user",
                    "parts": [
                        {"inline_data": {"mime_type": "image/png", "data": b"\x89PNG\x00\xff\x10"}},
                        {
                            "function_response": {
                                "id": "adk-1",
                                "name": "remember_diet",
                                "response": {"status": "saved"},
                            }
                        },
                    ],
                },
            }
        ),
        Event(author="user"),  # nothing but defaults
    ]
    for event in events:
        await service.append_event(s, event.model_copy(deep=True))
    got = await service.get_session(app_name="app", user_id="u1", session_id=s.id)
    assert got is not None
    assert got.events == events
    assert got.events[1].content.parts[0].inline_data.data == b"\x89PNG\x00\xff\x10"  # type: ignore[union-attr, index]


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (float("nan"), "not a JSON number"),
        (float("inf"), "not a JSON number"),
        ({1, 2}, "set is not JSON"),
        ((1, 2), "tuple is not JSON"),
        (b"bytes", "bytes is not JSON"),
        (datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC), "datetime is not JSON"),
        (object(), "object is not JSON"),
        (lambda: 1, "function is not JSON"),  # upstream: ..._with_non_serializable_state_delta
        ({1: "int key"}, "JSON object keys are strings"),
        ("lone \ud800 surrogate", "lone surrogate"),
        ({"deep": [[[[[["ok", float("nan")]]]]]]}, "not a JSON number"),
    ],
)
async def test_non_json_values_are_rejected_naming_the_key_and_nothing_is_written(
    service: SqlSessionService, value: Any, reason: str
) -> None:
    with pytest.raises(InvalidStateError, match=reason) as info:
        await service.create_session(
            app_name="app", user_id="u1", session_id="s", state={"ok": 1, "user:bad_key": value}
        )
    assert info.value.key == "user:bad_key" and "user:bad_key" in str(info.value)
    assert await service.get_session(app_name="app", user_id="u1", session_id="s") is None

    s = await service.create_session(app_name="app", user_id="u1", session_id="s2")
    with pytest.raises(InvalidStateError, match="bad_key"):
        await service.append_event(
            s,
            Event(
                author="a", actions={"state_delta": {"fine": 1, "app:fine": 2, "bad_key": value}}
            ),
        )
    got = await service.get_session(app_name="app", user_id="u1", session_id="s2")
    assert got is not None and got.events == [] and got.state == {} and got.revision == 0
    assert s.revision == 0 and s.events == []
    assert await service.get_app_state(app_name="app") == {}


async def test_too_deep_values_are_rejected(service: SqlSessionService) -> None:
    deep: Any = "leaf"
    for _ in range(150):
        deep = [deep]
    with pytest.raises(InvalidStateError, match="nested deeper"):
        await service.create_session(app_name="app", user_id="u1", state={"deep": deep})


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("app_name", ""),
        ("user_id", "a\x00b"),
        ("session_id", "x" * 256),
        ("user_id", "\udc00"),
        ("app_name", 42),
    ],
)
async def test_bad_identifiers_are_rejected_clearly(
    service: SqlSessionService, field: str, value: Any
) -> None:
    ids: dict[str, Any] = {"app_name": "app", "user_id": "u1", "session_id": "s1"}
    ids[field] = value
    with pytest.raises(InvalidIdentifierError, match=field):
        await service.create_session(**ids)


async def test_unusual_identifiers_are_stored_verbatim(service: SqlSessionService) -> None:
    for user_id in [" spaced ", "../../etc/passwd", "'; DROP TABLE x; --", "ユーザー🙂", "a" * 255]:
        s = await service.create_session(app_name="app/../x", user_id=user_id, session_id=user_id)
        got = await service.get_session(app_name="app/../x", user_id=user_id, session_id=user_id)
        assert got is not None and got.user_id == user_id and got.id == s.id == user_id


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)


@settings(
    max_examples=examples(40),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    value=json_values,
    key=st.text(min_size=1, max_size=20).filter(
        lambda k: "\x00" not in k and not k.startswith("temp:") and k not in ("user:", "app:")
    ),
)
async def test_any_json_value_round_trips(service: SqlSessionService, value: Any, key: str) -> None:
    s = await service.create_session(app_name="app", user_id="prop")
    await service.append_event(s, Event(author="a", actions={"state_delta": {key: value}}))
    got = await service.get_session(app_name="app", user_id="prop", session_id=s.id)
    assert got is not None
    assert_exact(got.state[key], value)
    assert_exact(got.events[0].actions.state_delta[key], value)
