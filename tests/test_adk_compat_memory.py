"""What ADK's own memory-service tests check, held by our memory services.

google/adk-python's ``tests/unittests/memory/test_in_memory_memory_service.py`` (the
version of google-adk 2.13) checks ``InMemoryMemoryService`` call by call. Each test
here checks one behaviour of that file through our public API, on every backend and
both API layers (the ``layer`` fixture); its docstring names the upstream test, and
``docs/adk-compatibility.md`` lists them side by side, with the deliberate
differences. The inputs and expected results are upstream's facts; the code is ours.

Upstream's sessions are never created in a session service (a memory service takes
any session object); so are these.
"""

from __future__ import annotations

import asyncio
import threading
import unicodedata
from typing import Any

import pytest

from adk_sqlstore import Session

from .helpers import Layer, text_of, texts

APP, USER, OTHER = "test-app", "test-user", "another-user"


def _session(layer: Layer, session_id: str, events: list[Any], **fields: Any) -> Any:
    """A session object of ``layer``'s class (ours, or ADK's), never stored."""
    model: Any = Session
    if layer.name == "adk":
        from google.adk.sessions import Session as AdkSession

        model = AdkSession
    return model.model_validate(
        {
            "app_name": fields.get("app_name", APP),
            "user_id": fields.get("user_id", USER),
            "id": session_id,
            "last_update_time": fields.get("last_update_time", 1000.0),
            "events": events,
        }
    )


def _event(layer: Layer, event_id: str, text: str | None, *, author: str = "user") -> Any:
    """An event of ``layer``'s class with ``text`` (``None``: no content)."""
    fields: dict[str, Any] = {
        "id": event_id,
        "invocation_id": f"inv-{event_id}",
        "author": author,
        "timestamp": 12345.0,
    }
    if text is not None:
        fields["content"] = {"role": "user", "parts": [{"text": text}]}
    return layer.event_model.model_validate(fields)


def _first_session(layer: Layer) -> Any:
    """Upstream's ``MOCK_SESSION_1``: two text events around one without content."""
    return _session(
        layer,
        "session-1",
        [
            _event(layer, "event-1a", "The ADK is a great toolkit."),
            _event(layer, "event-1b", None),
            _event(
                layer, "event-1c", "I agree. The Agent Development Kit (ADK) rocks!", author="model"
            ),
        ],
    )


async def _search(layer: Layer, query: str, *, user: str = USER, app: str = APP) -> Any:
    return await layer.memory.search_memory(app_name=app, user_id=user, query=query)


def _event_ids(found: Any) -> list[str]:
    return sorted(m.custom_metadata["event_id"] for m in found.memories)


# -- ingestion (upstream reads the private _session_events; the same facts, through
# -- search) ---------------------------------------------------------------------------


async def test_a_session_adds_its_text_events_only(layer: Layer) -> None:
    """Upstream ``test_add_session_to_memory``: the event without content is left out;
    the two others are memories, with their event ids."""
    await layer.memory.add_session_to_memory(_first_session(layer))
    found = await _search(layer, "ADK")
    assert _event_ids(found) == ["event-1a", "event-1c"]
    assert sorted(m.author for m in found.memories) == ["model", "user"]


async def test_add_events_to_memory_takes_the_events_given(layer: Layer) -> None:
    """Upstream ``test_add_events_to_memory_with_explicit_events`` and
    ``test_add_events_to_memory_alias_is_supported``: only the events passed are
    added, under the session id passed."""
    first = _first_session(layer)
    await layer.memory.add_events_to_memory(
        app_name=APP, user_id=USER, session_id=first.id, events=[first.events[0]]
    )
    found = await _search(layer, "ADK")
    assert _event_ids(found) == ["event-1a"]
    assert found.memories[0].custom_metadata["session_id"] == "session-1"


async def test_add_events_to_memory_without_a_session_id(layer: Layer) -> None:
    """Upstream ``test_add_events_to_memory_without_session_id_uses_default_bucket``:
    events added without a session id are kept and found."""
    first = _first_session(layer)
    await layer.memory.add_events_to_memory(app_name=APP, user_id=USER, events=[first.events[0]])
    found = await _search(layer, "toolkit")
    assert texts(found) == ["The ADK is a great toolkit."]
    assert _event_ids(found) == ["event-1a"]


async def test_add_events_to_memory_appends_to_the_session(layer: Layer) -> None:
    """Upstream ``test_add_events_to_memory_appends_without_replacing``: an event added
    to an ingested session joins its memories; none of them goes."""
    await layer.memory.add_session_to_memory(_first_session(layer))
    await layer.memory.add_events_to_memory(
        app_name=APP,
        user_id=USER,
        session_id="session-1",
        events=[_event(layer, "event-1d", "A new fact.")],
    )
    assert _event_ids(await _search(layer, "ADK")) == ["event-1a", "event-1c"]
    assert _event_ids(await _search(layer, "fact")) == ["event-1d"]


async def test_an_event_id_added_again_stays_one_memory(layer: Layer) -> None:
    """Upstream ``test_add_events_to_memory_deduplicates_event_ids``: an event id added
    again is still one memory. Deliberate difference: ADK keeps the first copy's text,
    we keep the newest (an edited event is re-ingested; see docs/adk-compatibility.md)."""
    await layer.memory.add_session_to_memory(_first_session(layer))
    await layer.memory.add_events_to_memory(
        app_name=APP,
        user_id=USER,
        session_id="session-1",
        events=[_event(layer, "event-1a", "Updated duplicate text.")],
    )
    everything = await _search(layer, "ADK duplicate updated toolkit")
    assert _event_ids(everything) == ["event-1a", "event-1c"]
    assert texts(await _search(layer, "duplicate")) == ["Updated duplicate text."]


async def test_a_session_without_events_adds_nothing(layer: Layer) -> None:
    """Upstream ``test_add_session_with_no_events_to_memory``: no error, no memory."""
    await layer.memory.add_session_to_memory(
        _session(layer, "session-4", [], last_update_time=4000)
    )
    assert (await _search(layer, "ADK")).memories == []


# -- search ----------------------------------------------------------------------------


async def test_a_word_finds_the_memory_with_its_author(layer: Layer) -> None:
    """Upstream ``test_search_memory_simple_match``: ``Python`` finds the one memory
    saying it, with its author."""
    await layer.memory.add_session_to_memory(_first_session(layer))
    await layer.memory.add_session_to_memory(
        _session(layer, "session-2", [_event(layer, "event-2a", "I like to code in Python.")])
    )
    found = await _search(layer, "Python")
    assert texts(found) == ["I like to code in Python."]
    assert found.memories[0].author == "user"


async def test_search_ignores_case(layer: Layer) -> None:
    """Upstream ``test_search_memory_case_insensitive_match``: ``development`` finds
    ``Development``."""
    await layer.memory.add_session_to_memory(_first_session(layer))
    assert texts(await _search(layer, "development")) == [
        "I agree. The Agent Development Kit (ADK) rocks!"
    ]


async def test_a_query_finds_every_memory_it_matches(layer: Layer) -> None:
    """Upstream ``test_search_memory_multiple_matches``: ``How about ADK?`` finds both
    memories that say ADK, and nothing else."""
    await layer.memory.add_session_to_memory(_first_session(layer))
    assert sorted(texts(await _search(layer, "How about ADK?"))) == [
        "I agree. The Agent Development Kit (ADK) rocks!",
        "The ADK is a great toolkit.",
    ]


async def test_a_word_nobody_said_finds_nothing(layer: Layer) -> None:
    """Upstream ``test_search_memory_no_match``."""
    await layer.memory.add_session_to_memory(_first_session(layer))
    assert (await _search(layer, "nonexistent")).memories == []


async def test_search_sees_the_callers_memories_only(layer: Layer) -> None:
    """Upstream ``test_search_memory_is_scoped_by_user``: another user's ``secret`` is
    not found by this user, and is by its own."""
    await layer.memory.add_session_to_memory(_first_session(layer))
    await layer.memory.add_session_to_memory(
        _session(
            layer, "session-3", [_event(layer, "event-3a", "This is a secret.")], user_id=OTHER
        )
    )
    assert (await _search(layer, "secret")).memories == []
    assert texts(await _search(layer, "secret", user=OTHER)) == ["This is a secret."]


async def test_a_slash_in_an_id_never_reaches_another_app_or_user(layer: Layer) -> None:
    """Upstream ``test_search_memory_does_not_collide_on_slash_in_identifiers``: app
    ``app/other-user`` with user ``user`` is not app ``app`` with user
    ``other-user/user``."""
    await layer.memory.add_session_to_memory(
        _session(
            layer,
            "session-slashed-app",
            [_event(layer, "event-slashed-app", "This is a secret.")],
            app_name="app/other-user",
            user_id="user",
        )
    )
    assert (await _search(layer, "secret", app="app", user="other-user/user")).memories == []
    assert texts(await _search(layer, "secret", app="app/other-user", user="user")) == [
        "This is a secret."
    ]


def _nfd(text: str) -> str:
    return unicodedata.normalize("NFD", text)


# Upstream test_search_memory_non_latin's cases: (stored text, query, memories found).
NON_LATIN = [
    # Japanese and Chinese: no spaces between words
    ("私の名前は太郎です", "太郎", 1),
    ("私の名前は太郎です", "天気", 0),
    ("我喜欢机器学习", "机器学习", 1),
    ("我喜欢机器学习", "天气预报", 0),
    # Korean and Cyrillic: spaced words
    ("제 이름은 민수입니다", "민수입니다", 1),
    ("Меня зовут Алексей", "Алексей", 1),
    # Han beside Latin words
    ("太郎 works at ABC Corp", "太郎", 1),
    ("太郎 works at ABC Corp", "ABC", 1),
    # Latin words inside unspaced text
    ("私はPythonでADKを使っています", "Python", 1),
    ("私はPythonでADKを使っています", "adk", 1),
    ("我用Python写代码", "python", 1),
    ("私はPythonでADKを使っています", "使って", 1),
    ("私はPythonでADKを使っています", "Java", 0),
    # part of a Latin word is not a match
    ("I like to code in Python.", "thon", 0),
    ("私はPythonでADKを使っています", "thon", 0),
    # decomposed (NFD) text and composed (NFC) queries, and the reverse
    (_nfd("私はCaféでADKを使っています"), "Café", 1),
    (_nfd("私はCaféでADKを使っています"), "café", 1),
    (_nfd("私はCaféでADKを使っています"), "Ruby", 0),
    (_nfd("Meet at the Café"), "Café", 1),
    ("Meet at the Café", _nfd("Café"), 1),
    (_nfd("プログラミングを学ぶ"), "プログラミング", 1),
    (_nfd("제 이름은 민수입니다"), "민수입니다", 1),
]


async def test_search_in_scripts_without_spaces_and_any_normal_form(layer: Layer) -> None:
    """Upstream ``test_search_memory_non_latin`` (22 cases): words inside Japanese and
    Chinese text, Latin words inside them, Korean and Cyrillic words, never a part of
    a Latin word, and text stored decomposed (NFD) found by composed (NFC) queries and
    the reverse. Each case is its own user, so that they cannot find each other."""
    for n, (stored, _query, _count) in enumerate(NON_LATIN):
        event = _event(layer, "event-i18n", stored)
        await layer.memory.add_session_to_memory(
            _session(layer, "session-i18n", [event], user_id=f"user-{n}", last_update_time=7000)
        )
    wrong = []
    for n, (stored, query, count) in enumerate(NON_LATIN):
        found = await _search(layer, query, user=f"user-{n}")
        if len(found.memories) != count or (count and text_of(found.memories[0]) != stored):
            wrong.append((stored, query, count, texts(found)))
    assert not wrong, wrong


# More of the same kind (ours): Thai, Lao and Khmer; half- and full-width forms and
# ligatures (NFKC); Hangul and Vietnamese in either normal form; traditional Han;
# digits and Latin inside unspaced text; a one-character Han query.
SAME_KIND = [
    ("ฉันชอบกินข้าวผัด", "ข้าวผัด", 1),
    ("ฉันชอบกินข้าวผัด", "ต้มยำ", 0),
    ("ມື້ນີ້ອາກາດດີ", "ອາກາດ", 1),
    ("ខ្ញុំស្រឡាញ់អ្នក", "ស្រឡាញ់", 1),
    ("東京タワーに行きました", "タワー", 1),
    ("ｶﾀｶﾅのテスト", "カタカナ", 1),
    ("私はＡＤＫを使う", "adk", 1),
    ("Ｐｙｔｈｏｎ３を使う", "python3", 1),
    ("ﬁnance report", "finance", 1),
    ("2024年に東京へ", "2024", 1),
    ("ราคา100บาท", "100", 1),
    ("我們喜歡機器學習", "機器學習", 1),
    ("他说:「我爱北京天安门」", "北京", 1),
    ("私の名前は太郎です", "太", 1),
    ("私の名前は太郎です", "郎です", 1),
    ("我用Python写代码", "写代码", 1),
    (_nfd("Tiếng Việt rất đẹp"), "tiếng", 1),
    ("Tiếng Việt rất đẹp", _nfd("Việt"), 1),
    (_nfd("한국어를 공부합니다"), "한국어", 1),
    ("한국어를 공부합니다", _nfd("공부"), 1),
    ("Straße", "strasse", 1),
]


async def test_search_in_more_scripts_and_forms_of_the_same_kind(layer: Layer) -> None:
    """Beyond upstream's cases, the same kinds (see ``SAME_KIND``), each its own user."""
    for n, (stored, _query, _count) in enumerate(SAME_KIND):
        event = _event(layer, "event-kind", stored)
        await layer.memory.add_session_to_memory(
            _session(layer, "session-kind", [event], user_id=f"kind-{n}")
        )
    wrong = []
    for n, (stored, query, count) in enumerate(SAME_KIND):
        found = await _search(layer, query, user=f"kind-{n}")
        if len(found.memories) != count or (count and text_of(found.memories[0]) != stored):
            wrong.append((stored, query, count, texts(found)))
    assert not wrong, wrong


async def test_memories_matching_more_query_words_come_first(layer: Layer) -> None:
    """Upstream ``test_search_memory_ranks_by_number_of_matching_words``."""
    said = ["The deploy is ready.", "Ready.", "The deploy status is ready."]
    events = [_event(layer, f"ranked-{n}", text) for n, text in enumerate(said)]
    await layer.memory.add_session_to_memory(_session(layer, "session-ranked", events))
    assert texts(await _search(layer, "deploy status ready")) == [
        "The deploy status is ready.",
        "The deploy is ready.",
        "Ready.",
    ]


async def test_a_common_word_returns_ten_memories_best_first(layer: Layer) -> None:
    """Upstream ``test_search_memory_returns_at_most_ten_memories``: 21 memories share
    the query's words; ten come back, the best match first. Deliberate difference: the
    nine that tie come newest first here (a later statement of a fact wins; the
    memories tie on time, so the one added later is the newer), ADK's oldest first."""
    events = [_event(layer, f"note-{i}", f"note {i} about work") for i in range(20)]
    events.append(_event(layer, "backlog", "the backlog note about work"))
    await layer.memory.add_session_to_memory(_session(layer, "session-many", events))
    found = texts(await _search(layer, "work backlog note"))
    assert found == ["the backlog note about work"] + [
        f"note {i} about work" for i in range(19, 10, -1)
    ]


def test_one_service_serves_threads_each_with_its_own_event_loop(layer: Layer) -> None:
    """Upstream ``test_search_memory_is_thread_safe_against_concurrent_writes``: one
    service, seeded from one event loop, then used at once by a writer thread and two
    searching threads, each running its own event loop: no error, and every memory
    written is found afterwards."""
    memory = layer.memory

    def fact(tag: str) -> Any:
        return _session(layer, f"session-{tag}", [_event(layer, tag, f"fact about {tag}")])

    seed = asyncio.new_event_loop()
    try:
        for i in range(20):
            seed.run_until_complete(memory.add_session_to_memory(fact(f"seed-{i}")))
    finally:
        seed.close()
    errors: list[BaseException] = []
    stop = threading.Event()
    barrier = threading.Barrier(3)
    rounds = 40

    def run(work: Any) -> None:
        loop = asyncio.new_event_loop()
        barrier.wait()
        try:
            for i in range(rounds):
                if stop.is_set():
                    return
                loop.run_until_complete(work(i))
        except BaseException as exc:
            errors.append(exc)
            stop.set()
        finally:
            loop.close()  # as upstream: no shutdown_asyncgens(); the pool closes anyway

    async def write(i: int) -> None:
        await memory.add_session_to_memory(fact(f"writer-{i}"))

    async def read(_i: int) -> None:
        found = await memory.search_memory(app_name=APP, user_id=USER, query="fact")
        assert 1 <= len(found.memories) <= 10

    threads = [threading.Thread(target=run, args=(w,)) for w in (write, read, read)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, repr(errors[0])

    async def best_matches() -> list[str]:
        """The best match of each writer's tag (the whole tag is its rarest term)."""
        found = []
        for i in range(rounds):
            hit = await memory.search_memory(app_name=APP, user_id=USER, query=f"writer-{i}")
            found.append(hit.memories[0].custom_metadata["event_id"] if hit.memories else "")
        return found

    check = asyncio.new_event_loop()
    try:
        assert check.run_until_complete(best_matches()) == [f"writer-{i}" for i in range(rounds)]
    finally:
        check.close()


@pytest.mark.parametrize("whole_session", [True, False], ids=["session", "events"])
async def test_a_stored_memory_does_not_follow_the_callers_objects(
    layer: Layer, whole_session: bool
) -> None:
    """Upstream ``test_ingested_memories_do_not_follow_caller_event_mutations``:
    changing an event after adding it changes no memory."""
    event = _event(layer, "event", "I prefer jasmine tea.")
    session = _session(layer, "session", [event])
    if whole_session:
        await layer.memory.add_session_to_memory(session)
    else:
        await layer.memory.add_events_to_memory(
            app_name=APP, user_id=USER, session_id=session.id, events=session.events
        )
    event.author = "changed"
    event.content.parts[0].text = "I prefer coffee."
    found = await _search(layer, "jasmine")
    assert texts(found) == ["I prefer jasmine tea."]
    assert found.memories[0].author == "user"


@pytest.mark.parametrize("whole_session", [True, False], ids=["session", "events"])
async def test_editing_a_search_result_changes_nothing_stored(
    layer: Layer, whole_session: bool
) -> None:
    """Upstream ``test_retrieved_memories_do_not_mutate_storage_or_session_history``:
    clearing a result's parts leaves the next search's result and the session's
    event as they were."""
    session = _session(layer, "session", [_event(layer, "event", "I prefer jasmine tea.")])
    if whole_session:
        await layer.memory.add_session_to_memory(session)
    else:
        await layer.memory.add_events_to_memory(
            app_name=APP, user_id=USER, session_id=session.id, events=session.events
        )
    (await _search(layer, "jasmine")).memories[0].content.parts.clear()
    assert texts(await _search(layer, "jasmine")) == ["I prefer jasmine tea."]
    assert text_of(session.events[0]) == "I prefer jasmine tea."
