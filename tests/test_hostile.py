"""Hostile and bad input, property-based (hypothesis), on an SQLite file and PostgreSQL.

Every input either round-trips exactly or is refused with a typed error that names
what is wrong, and a refused call writes nothing.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adk_sqlstore import (
    Event,
    EventActions,
    InvalidEventError,
    InvalidIdentifierError,
    InvalidStateError,
    MemoryEntry,
    SqlMemoryService,
    SqlSessionService,
)
from adk_sqlstore.validation import (
    DEFAULT_MAX_EVENT_BYTES,
    DEFAULT_MAX_STATE_VALUE_BYTES,
    MAX_IDENTIFIER_BYTES,
)

from .conftest import Figures, examples, pg_url
from .helpers import text_of
from .test_values import assert_exact, json_values

SETTINGS = settings(
    max_examples=examples(60),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# -- state values -------------------------------------------------------------------------

NOT_JSON = st.sampled_from(
    [
        math.nan,
        math.inf,
        -math.inf,
        {1, 2},
        (1, 2),
        b"bytes",
        bytearray(b"x"),
        object(),
        {1: "int key"},
        {("a",): "tuple key"},
        "lone \ud800 surrogate",
        "\udfff",
        complex(1, 2),
        10**5000,
    ]
)


def _with_a_bad_leaf(value: Any, bad: Any, path: list[int]) -> Any:
    """``value`` with ``bad`` put somewhere inside it (or instead of it)."""
    if not path:
        return bad
    step = path[0]
    if isinstance(value, list) and value:
        items = list(value)
        i = step % len(items)
        items[i] = _with_a_bad_leaf(items[i], bad, path[1:])
        return items
    if isinstance(value, dict) and value:
        copy = dict(value)
        k = sorted(copy)[step % len(copy)]
        copy[k] = _with_a_bad_leaf(copy[k], bad, path[1:])
        return copy
    return [value, bad]


state_keys = st.text(min_size=1, max_size=30).filter(
    lambda k: "\x00" not in k and not k.startswith("temp:") and k.encode("utf-8", "replace")
)
scopes = st.sampled_from(["", "user:", "app:"])


@SETTINGS
@given(
    value=json_values,
    bad=NOT_JSON,
    path=st.lists(st.integers(0, 10), max_size=4),
    key=state_keys,
    scope=scopes,
)
async def test_values_that_are_not_json_are_refused_naming_the_key(
    service: SqlSessionService, value: Any, bad: Any, path: list[int], key: str, scope: str
) -> None:
    hostile = _with_a_bad_leaf(value, bad, path)
    name = scope + key
    s = await service.create_session(app_name="hostile", user_id="u1")
    with pytest.raises(InvalidStateError) as info:
        await service.append_event(
            s, Event(author="a", actions=EventActions(state_delta={"fine": 1, name: hostile}))
        )
    assert info.value.key == name and repr(name) in str(info.value)
    with pytest.raises(InvalidStateError):
        await service.create_session(app_name="hostile", user_id="u1", state={name: hostile})
    stored = await service.get_session(app_name="hostile", user_id="u1", session_id=s.id)
    assert stored is not None and stored.events == [] and stored.revision == 0
    assert stored.state == {} and s.events == [] and s.revision == 0
    assert await service.get_user_state(app_name="hostile", user_id="u1") == {}
    assert await service.get_app_state(app_name="hostile") == {}


@SETTINGS
@given(value=json_values, key=state_keys, scope=scopes)
async def test_every_json_value_round_trips_in_every_scope(
    service: SqlSessionService, value: Any, key: str, scope: str
) -> None:
    s = await service.create_session(app_name="hostile", user_id="u2")
    await service.append_event(
        s, Event(author="a", actions=EventActions(state_delta={scope + key: value}))
    )
    got = await service.get_session(app_name="hostile", user_id="u2", session_id=s.id)
    assert got is not None
    assert_exact(got.state[scope + key], value)
    assert_exact(got.events[0].actions.state_delta[scope + key], value)


# -- size limits ----------------------------------------------------------------------------


async def test_default_size_limits_give_clear_errors_and_write_nothing(
    service: SqlSessionService,
) -> None:
    s = await service.create_session(app_name="big", user_id="u1")
    too_big_value = "x" * (DEFAULT_MAX_STATE_VALUE_BYTES + 1)
    with pytest.raises(InvalidStateError, match="max_state_value_bytes") as info:
        await service.append_event(
            s, Event(author="a", actions=EventActions(state_delta={"user:notes": too_big_value}))
        )
    assert info.value.key == "user:notes"
    with pytest.raises(InvalidStateError, match="max_state_value_bytes"):
        await service.create_session(app_name="big", user_id="u1", state={"blob": too_big_value})
    # a value just under the limit, counted in UTF-8 bytes (é is two)
    fits = "é" * ((DEFAULT_MAX_STATE_VALUE_BYTES - 2) // 2)
    await service.append_event(s, Event(author="a", actions=EventActions(state_delta={"k": fits})))
    over = "é" * (DEFAULT_MAX_STATE_VALUE_BYTES // 2)  # + 2 quote bytes: over
    with pytest.raises(InvalidStateError, match="max_state_value_bytes"):
        await service.append_event(
            s, Event(author="a", actions=EventActions(state_delta={"k": over}))
        )
    # events: the whole stored JSON counts
    part = "y" * (DEFAULT_MAX_STATE_VALUE_BYTES - 10)
    huge = Event(
        author="a",
        content={"role": "user", "parts": [{"text": part} for _ in range(9)]},
    )
    with pytest.raises(InvalidEventError, match="max_event_bytes"):
        await service.append_event(s, huge)
    stored = await service.get_session(app_name="big", user_id="u1", session_id=s.id)
    assert stored is not None and stored.revision == 1 and stored.state == {"k": fits}
    assert await service.get_user_state(app_name="big", user_id="u1") == {}
    assert DEFAULT_MAX_EVENT_BYTES == 8 * 1024 * 1024


async def test_size_limits_are_configurable(db_url: str) -> None:
    async with SqlSessionService.from_url(
        db_url, max_event_bytes=2_000, max_state_value_bytes=100
    ) as service:
        s = await service.create_session(app_name="big", user_id="u1", state={"k": "v" * 98})
        with pytest.raises(InvalidStateError, match="the limit is 100"):
            await service.append_event(
                s, Event(author="a", actions=EventActions(state_delta={"k": "v" * 99}))
            )
        with pytest.raises(InvalidEventError, match="the limit is 2,000"):
            await service.append_event(
                s, Event(author="a", content={"parts": [{"text": "t" * 2_000}]})
            )
        with pytest.raises(InvalidStateError, match="max_state_value_bytes"):
            await service.import_state(app_name="big", user_id=None, state={"k": "v" * 200})
        await service.append_event(s, Event(author="a", content={"parts": [{"text": "ok"}]}))
    bad: Any
    for bad in (0, -1, 1.5, "10", True):
        with pytest.raises(ValueError, match="max_event_bytes"):
            SqlSessionService.from_url(db_url, max_event_bytes=bad)
        with pytest.raises(ValueError, match="max_state_value_bytes"):
            SqlSessionService.from_url(db_url, max_state_value_bytes=bad)


async def test_the_adk_classes_take_the_same_limits(db_url: str) -> None:
    pytest.importorskip("google.adk")
    from google.adk.events import Event as AdkEvent
    from google.adk.events import EventActions as AdkActions

    from adk_sqlstore.adk import SqlSessionService as AdkSessionService

    service = AdkSessionService(db_url, max_state_value_bytes=50)
    try:
        s = await service.create_session(app_name="big", user_id="u1")
        with pytest.raises(InvalidStateError, match="the limit is 50"):
            await service.append_event(
                s,
                AdkEvent(author="a", actions=AdkActions(state_delta={"k": "v" * 60})),
            )
    finally:
        await service.close()


# -- identifiers ------------------------------------------------------------------------


def _storable(identifier: str) -> bool:
    """The documented rule: non-empty, at most 255 UTF-8 bytes, no NUL, no lone
    surrogate."""
    try:
        size = len(identifier.encode("utf-8"))
    except UnicodeEncodeError:
        return False
    return 0 < size <= MAX_IDENTIFIER_BYTES and "\x00" not in identifier


identifiers = st.one_of(
    st.text(max_size=40),
    st.text(min_size=250, max_size=260),
    st.sampled_from(
        [
            "",
            " ",
            "\t\n",
            "\x00",
            "a\x00",
            "../../etc/passwd",
            "C:\\Windows\\system32",
            "'; DROP TABLE sqlstore_sessions; --",
            '" OR 1=1 --',
            "%",
            "_",
            "*",
            "x" * 255,
            "x" * 256,
            "é" * 127,
            "é" * 128,
            "\ud800",
            "🙂" * 63,
            "🙂" * 64,
        ]
    ),
)


@SETTINGS
@given(app_name=identifiers, user_id=identifiers, session_id=identifiers)
async def test_identifiers_follow_one_rule_on_every_call(
    service: SqlSessionService, app_name: str, user_id: str, session_id: str
) -> None:
    owner_ok = _storable(app_name) and _storable(user_id)
    ids: dict[str, Any] = {"app_name": app_name, "user_id": user_id, "session_id": session_id}
    memory = SqlMemoryService(service.engine)
    with_session_id: list[Callable[[], Awaitable[Any]]] = [
        lambda: service.create_session(**ids),
        lambda: service.get_session(**ids),
        lambda: service.delete_session(**ids),
        lambda: memory.delete_memories(app_name=app_name, user_id=user_id, session_id=session_id),
    ]
    without: list[Callable[[], Awaitable[Any]]] = [
        lambda: service.list_sessions(app_name=app_name, user_id=user_id),
        lambda: service.get_user_state(app_name=app_name, user_id=user_id),
        lambda: memory.search_memory(app_name=app_name, user_id=user_id, query="x"),
        lambda: service.forget_user(app_name=app_name, user_id=user_id),
    ]
    if owner_ok and _storable(session_id):
        s = await service.create_session(**ids)
        got = await service.get_session(**ids)
        assert got is not None
        assert (got.app_name, got.user_id, got.id) == (app_name, user_id, session_id)
        assert s.id == session_id
        listed = await service.list_sessions(app_name=app_name, user_id=user_id)
        assert [x.id for x in listed.sessions] == [session_id]
        await service.delete_session(**ids)
        assert await service.get_session(**ids) is None
        return
    refused = with_session_id + ([] if owner_ok else without)
    for call in refused:
        with pytest.raises(InvalidIdentifierError):
            await call()
    if owner_ok:  # only the session id is bad: the owner's other calls work
        for call in without:
            await call()


# -- search queries -----------------------------------------------------------------------


async def _seed_two_users(service: SqlSessionService) -> SqlMemoryService:
    """The memories of a victim and of a caller (replacing earlier examples' copies)."""
    memory = SqlMemoryService(service.engine)
    for user_id in ("victim", "caller"):
        await memory.delete_memories(app_name="search", user_id=user_id)
    await memory.add_memory(
        app_name="search",
        user_id="victim",
        memories=[
            MemoryEntry(content={"parts": [{"text": t}]})
            for t in [
                "victim secret: my PIN is 4711 and I live at 5 Elm Street",
                "'; DROP TABLE sqlstore_memories; -- victim",
                "你好世界 victim ユーザー 😀 café naïve",
                "a & b | c ! d ( e ) : f * g <-> h victim",
            ]
        ],
    )
    await memory.add_memory(
        app_name="search",
        user_id="caller",
        memories=[MemoryEntry(content={"parts": [{"text": "caller note about lunch"}]})],
    )
    return memory


@SETTINGS
@given(
    query=st.text(max_size=200)
    | st.sampled_from(
        [
            "victim secret PIN",
            "4711",
            "Elm Street",
            "'; DROP TABLE sqlstore_memories; --",
            "你好世界",
            "😀",
            "café",
            "a & b | c",
            "victim:*",
            "!victim",
            "victim <-> secret",
            "search_scope : victim",
            "\x00victim",
        ]
    )
)
async def test_any_query_never_raises_nor_finds_another_users_memories(
    service: SqlSessionService, query: str
) -> None:
    memory = await _seed_two_users(service)
    found = await memory.search_memory(app_name="search", user_id="caller", query=query)
    for m in found.memories:
        text = text_of(m)
        assert text == "caller note about lunch"


async def test_injection_strings_are_stored_and_found_verbatim(
    service: SqlSessionService, figures: Figures
) -> None:
    memory = await _seed_two_users(service)
    found = await memory.search_memory(
        app_name="search", user_id="victim", query="'; DROP TABLE sqlstore_memories; --"
    )
    texts = [text_of(m) for m in found.memories]
    assert "'; DROP TABLE sqlstore_memories; -- victim" in texts
    found = await memory.search_memory(app_name="search", user_id="victim", query="你好世界")
    assert [text_of(m) for m in found.memories][:1] == ["你好世界 victim ユーザー 😀 café naïve"]
    figures.add(
        f"hypothesis: {SETTINGS.max_examples} examples each of non-JSON values, JSON values,"
        " identifiers and search queries per backend"
    )


# -- passwords ------------------------------------------------------------------------------

SECRET = "hunter2secret"
SECRET_URLS = [
    f"postgresql://bob:{SECRET}@127.0.0.1:1/db",  # nothing listens there
    pg_url(database="adk_sqlstore_no_such_db", password=SECRET),  # the test server
    f"postgresql://bob@127.0.0.1:1/db?password={SECRET}",
]


@pytest.mark.parametrize("url", SECRET_URLS)
@pytest.mark.parametrize(
    "command",
    [
        ["migrate"],
        ["sessions", "list", "--app", "a"],
        ["sessions", "show", "s1", "--app", "a", "--user", "u"],
        ["memory", "search", "lunch", "--app", "a", "--user", "u"],
        ["memory", "ingest-idle"],
        ["prune", "--older-than", "90d", "--dry-run"],
        ["export", "--app", "a", "--out", "-"],
        ["forget-user", "--app", "a", "--user", "u", "--yes"],
    ],
)
def test_cli_never_prints_a_password(url: str, command: list[str]) -> None:
    from typer.testing import CliRunner

    from adk_sqlstore.cli import app

    result = CliRunner(env={"COLUMNS": "300"}).invoke(app, [*command, "--url", url])
    output = " ".join(result.output.split())
    assert result.exit_code == 1, output
    assert SECRET not in result.output and SECRET not in str(result.exception or "")
    assert "error: database error on postgresql" in output
    assert "***" in output


@pytest.mark.parametrize("url", SECRET_URLS)
async def test_adk_classes_and_memory_never_show_a_password(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    pytest.importorskip("google.adk")
    import logging

    from adk_sqlstore.adk import SqlMemoryService as AdkMemoryService
    from adk_sqlstore.adk import SqlSessionService as AdkSessionService

    caplog.set_level(logging.DEBUG)
    failures: list[BaseException] = []
    adk_sessions = AdkSessionService(url)
    adk_memory = AdkMemoryService(url)
    memory = SqlMemoryService.from_url(url)
    for call in (
        lambda: adk_sessions.list_sessions(app_name="a", user_id="u"),
        lambda: adk_memory.search_memory(app_name="a", user_id="u", query="x"),
        lambda: memory.search_memory(app_name="a", user_id="u", query="x"),
    ):
        with pytest.raises(Exception) as info:  # noqa: PT011 - any type; none may leak
            await call()
        failures.append(info.value)
    for closing in (adk_sessions.close(), adk_memory.close(), memory.close()):
        await closing
    for failure in failures:
        exc: BaseException | None = failure
        while exc is not None:
            assert SECRET not in str(exc) and SECRET not in repr(exc)
            exc = exc.__cause__ or exc.__context__
    assert SECRET not in caplog.text
