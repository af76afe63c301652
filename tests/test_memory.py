"""Long-term memory, on an SQLite file and on PostgreSQL.

Quotes are from the design documents (../shared/seeds/): 000 "Cross-Session Memory in
ADK" and 004 "BaseMemoryService".
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from adk_sqlstore import (
    Event,
    GetSessionConfig,
    IngestEvery,
    InvalidMemoryError,
    MemoryCheckpoint,
    MemoryEntry,
    Session,
    SqlMemoryService,
    SqlSessionService,
)

from .helpers import Layer, texts

APP = "app"


@pytest.fixture
async def memory(service: SqlSessionService) -> AsyncIterator[SqlMemoryService]:
    async with SqlMemoryService(service.engine) as svc:
        yield svc


def turn(
    text: str,
    *,
    author: str = "user",
    ts: float | None = None,
    event_id: str | None = None,
    model: type[Any] = Event,
) -> Any:
    fields: dict[str, Any] = {
        "author": author,
        "content": {"role": "user", "parts": [{"text": text}]},
    }
    if ts is not None:
        fields["timestamp"] = ts
    if event_id is not None:
        fields["id"] = event_id
    return model.model_validate(fields)


def make_turn(layer: Layer, text: str, **fields: Any) -> Any:
    """A turn of ``layer``'s event class."""
    return turn(text, model=layer.event_model, **fields)


async def session_with(
    target: SqlSessionService | Layer, user: str, *lines: str, ts: float | None = None
) -> Any:
    """A session of ``user`` in which the user said ``lines`` (on a core service, or on
    a contract-suite layer in its own types)."""
    service: Any = target.sessions if isinstance(target, Layer) else target
    model = target.event_model if isinstance(target, Layer) else Event
    s = await service.create_session(app_name=APP, user_id=user)
    for n, line in enumerate(lines):
        await service.append_event(s, turn(line, ts=None if ts is None else ts + n, model=model))
    return s


async def search(memory: SqlMemoryService, query: str, user: str = "u1", limit: int = 10) -> Any:
    return await memory.search_memory(app_name=APP, user_id=user, query=query, limit=limit)


# -- ingestion ----------------------------------------------------------------------


async def test_natural_language_question_finds_the_answer(layer: Layer) -> None:
    """004: a later session asks "What sport do I like?" after "My favorite sport is badminton."."""
    memory = layer.memory
    s = await session_with(
        layer,
        "u1",
        "My favorite sport is badminton.",
        "The weather in Pune is nice today.",
        "Please order lunch.",
    )
    await memory.add_session_to_memory(s)
    found = await search(memory, "What sport do I like?")
    assert texts(found)[0] == "My favorite sport is badminton."
    assert "The weather in Pune is nice today." not in texts(found)


async def test_only_events_with_text_are_stored_one_per_event(layer: Layer) -> None:
    service, memory = layer.sessions, layer.memory
    s = await service.create_session(app_name=APP, user_id="u1")
    await service.append_event(s, make_turn(layer, "I drive a blue hatchback"))
    await service.append_event(
        s,
        Event(
            author="agent",
            content={
                "role": "model",
                "parts": [{"function_call": {"name": "lookup", "args": {"car": "blue hatchback"}}}],
            },
        ),
    )
    await service.append_event(s, layer.event_model(author="agent"))  # no content at all
    await service.append_event(s, make_turn(layer, "   ", author="agent"))  # whitespace only
    report = await layer.core_memory.add_session_to_memory(s)
    assert (report.sessions, report.events) == (1, 1)
    found = await search(memory, "blue hatchback")
    assert texts(found) == ["I drive a blue hatchback"]


async def test_ingesting_twice_or_ten_times_yields_one_copy(layer: Layer) -> None:
    """000: "An append-only implementation turns every checkpoint into another copy"."""
    memory = layer.memory
    s = await session_with(layer, "u1", "deliver to the Pune office reception")
    for _ in range(10):
        await memory.add_session_to_memory(s)
    found = await search(memory, "Pune office")
    assert texts(found) == ["deliver to the Pune office reception"]
    first_id = found.memories[0].id
    await memory.add_session_to_memory(s)
    assert [m.id for m in (await search(memory, "Pune office")).memories] == [first_id]


async def test_a_changed_session_updates_its_rows(
    service: SqlSessionService, memory: SqlMemoryService
) -> None:
    session = Session(
        id="s1",
        app_name=APP,
        user_id="u1",
        events=[
            turn("alpha apples", event_id="e1"),
            turn("beta bananas", event_id="e2"),
            turn("gamma grapes", event_id="e3"),
        ],
    )
    await memory.add_session_to_memory(session)
    session.events = [
        turn("alpha apricots", event_id="e1"),  # changed
        turn("gamma grapes", event_id="e3"),  # unchanged
        turn("delta dates", event_id="e4"),  # new; e2 is gone
    ]
    report = await memory.add_session_to_memory(session)
    assert (report.events, report.deleted) == (3, 1)
    assert texts(await search(memory, "bananas")) == []
    assert texts(await search(memory, "apples")) == []
    assert texts(await search(memory, "apricots alpha")) == ["alpha apricots"]
    assert texts(await search(memory, "dates")) == ["delta dates"]
    assert len((await search(memory, "alpha gamma delta")).memories) == 3


async def test_add_events_to_memory_is_incremental_and_idempotent(layer: Layer) -> None:
    memory = layer.memory
    first = make_turn(layer, "I love hiking in the Alps", event_id="e1")
    second = make_turn(layer, "My sister lives in Lisbon", event_id="e2")
    stored = await layer.core_memory.add_events_to_memory(
        app_name=APP,
        user_id="u1",
        events=[first],
        session_id="s1",
        custom_metadata={"source": "latest-turn"},
    )
    assert stored == 1
    await memory.add_events_to_memory(
        app_name=APP, user_id="u1", events=[first, second], session_id="s1"
    )
    await memory.add_events_to_memory(app_name=APP, user_id="u1", events=[first], session_id="s1")
    found = await search(memory, "hiking Alps sister Lisbon")
    assert sorted(texts(found)) == ["I love hiking in the Alps", "My sister lives in Lisbon"]
    # Without a session id, re-adding the same event still does not copy it.
    for _ in range(3):
        await memory.add_events_to_memory(app_name=APP, user_id="u2", events=[first])
    assert texts(await search(memory, "hiking", user="u2")) == ["I love hiking in the Alps"]


async def test_a_stale_session_object_never_drops_newer_events_memories(layer: Layer) -> None:
    """add_session_to_memory's docstring: an object loaded before later appends is
    reloaded whole, so only events gone from the session disappear from memory."""
    service, memory = layer.sessions, layer.memory
    s = await session_with(layer, "u1", "alpha apricot")
    stale = await service.get_session(app_name=APP, user_id="u1", session_id=s.id)
    assert stale is not None
    await service.append_event(s, make_turn(layer, "beta blueberry"))
    await memory.add_session_to_memory(s)
    report = await layer.core_memory.add_session_to_memory(stale)
    assert report.deleted == 0 and report.events == 2
    assert texts(await search(memory, "blueberry")) == ["beta blueberry"]
    # the recorded revision is the stored one: the idle job has nothing left to do
    assert (await memory.ingest_idle_sessions(timedelta(0))).sessions == 0


async def test_an_event_added_again_without_text_removes_its_memory(layer: Layer) -> None:
    memory = layer.memory
    event = make_turn(layer, "gamma secret", event_id="e-gamma")
    assert (
        await layer.core_memory.add_events_to_memory(app_name=APP, user_id="u1", events=[event])
        == 1
    )
    assert texts(await search(memory, "gamma")) == ["gamma secret"]
    emptied = make_turn(layer, "", event_id="e-gamma")  # its text was removed
    assert (
        await layer.core_memory.add_events_to_memory(app_name=APP, user_id="u1", events=[emptied])
        == 0
    )
    assert texts(await search(memory, "gamma secret")) == []
    # the same event twice in one call: its last version counts
    both = [event, emptied]
    assert (
        await layer.core_memory.add_events_to_memory(app_name=APP, user_id="u1", events=both) == 0
    )
    assert texts(await search(memory, "gamma secret")) == []


async def test_add_memory_stores_facts_searched_like_events(layer: Layer) -> None:
    memory = layer.memory
    before = time.time()
    ids = await layer.core_memory.add_memory(
        app_name=APP,
        user_id="u1",
        memories=[
            layer.memory_entry(
                content={"role": "user", "parts": [{"text": "User switched to pescatarian"}]},
                author="extractor",
                timestamp="2026-09-28T10:00:00Z",
                custom_metadata={"kind": "diet"},
            ),
            layer.memory_entry(content={"parts": [{"text": "User's office is in Pune"}]}),
        ],
    )
    after = time.time()
    assert len(ids) == 2
    s = await session_with(layer, "u1", "I used to be vegetarian")
    await memory.add_session_to_memory(s)
    found = await search(memory, "pescatarian diet")
    fact = found.memories[0]
    assert texts(found)[0] == "User switched to pescatarian"
    assert fact.id == ids[0] and fact.author == "extractor"
    assert fact.timestamp == "2026-09-28T10:00:00+00:00"
    assert fact.custom_metadata["kind"] == "diet"
    assert fact.custom_metadata["session_id"] is None and fact.custom_metadata["event_id"] is None
    office = (await search(memory, "office Pune")).memories[0]
    written = datetime.fromisoformat(office.timestamp or "").timestamp()
    assert before - 1e-3 <= written <= after + 1e-3  # a fact without a time gets now
    # Re-adding a fact with its id replaces it.
    await memory.add_memory(
        app_name=APP,
        user_id="u1",
        memories=[
            layer.memory_entry(
                id=ids[0], content={"parts": [{"text": "User switched back to vegetarian"}]}
            )
        ],
    )
    assert "User switched to pescatarian" not in texts(await search(memory, "switched"))


async def test_one_id_twice_in_one_call_keeps_the_last(layer: Layer) -> None:
    await layer.memory.add_memory(
        app_name=APP,
        user_id="u1",
        memories=[
            layer.memory_entry(id="fact-1", content={"parts": [{"text": "User lives in Lyon"}]}),
            layer.memory_entry(id="fact-1", content={"parts": [{"text": "User lives in Nantes"}]}),
        ],
    )
    assert texts(await search(layer.memory, "where does the user live")) == ["User lives in Nantes"]


async def test_search_results_have_the_documented_shape(layer: Layer) -> None:
    memory = layer.memory
    s = await session_with(
        layer,
        "u1",
        "the red bicycle is in the garage",
        "my red scarf",
        "a red red red car",
        ts=1795958888.0,
    )
    await memory.add_session_to_memory(s)
    found = await search(memory, "red bicycle garage")
    scores = [m.custom_metadata["score"] for m in found.memories]
    assert scores == sorted(scores, reverse=True) and len(scores) == 3
    best = found.memories[0]
    assert texts(found)[0] == "the red bicycle is in the garage"
    assert best.author == "user"
    assert best.timestamp == datetime.fromtimestamp(1795958888.0, UTC).isoformat()
    assert best.custom_metadata["session_id"] == s.id
    assert best.custom_metadata["event_id"] == s.events[0].id
    assert isinstance(best.id, str) and best.id
    assert len((await search(memory, "red", limit=2)).memories) == 2


async def test_ties_go_to_the_more_recent_memory(memory: SqlMemoryService) -> None:
    old = Session(
        id="old", app_name=APP, user_id="u1", events=[turn("lunch at the canteen", ts=1000.0)]
    )
    new = Session(
        id="new", app_name=APP, user_id="u1", events=[turn("lunch at the canteen", ts=2000.0)]
    )
    await memory.add_session_to_memory(old)
    await memory.add_session_to_memory(new)
    found = await search(memory, "canteen lunch")
    assert [m.custom_metadata["session_id"] for m in found.memories] == ["new", "old"]


HOSTILE_QUERIES = [
    '"unbalanced quote',
    "it's",
    "a & b | c ! d ( e ) : f * g <-> h",
    "NEAR(a b)",
    "a AND OR NOT",
    "'; DROP TABLE sqlstore_memories; --",
    "\\",
    "\\\\'\\\"",
    "😀🥗",
    "你好世界",
    "ユーザー",
    "x" * 100_000,
    "",
    "   ",
    "the of and what is",
    "\x00",
    "a\x00b",
    "\ud800 lone surrogate",
    "search_scope : x",
    "text:badminton",
    "{search_scope text}: x",
    "^badminton",
    "badminton*",
    "-badminton",
    "+badminton",
    "col:(a OR b)",
    "$$",
    "%s %(x)s ?",
    ":name",
    "\n\t\r",
]


async def test_no_query_raises(layer: Layer) -> None:
    memory = layer.memory
    s = await session_with(layer, "u1", "My favorite sport is badminton.", "你好世界 friends")
    await memory.add_session_to_memory(s)
    for query in HOSTILE_QUERIES:
        found = await search(memory, query)
        assert len(found.memories) <= 2, query


async def test_empty_and_stop_word_queries_return_nothing(layer: Layer) -> None:
    memory = layer.memory
    s = await session_with(layer, "u1", "what is the thing that I do")
    await memory.add_session_to_memory(s)
    for query in ["", "   ", "what is the", "I do"]:
        assert (await search(memory, query)).memories == []


async def test_sql_injection_text_is_stored_and_found_verbatim(layer: Layer) -> None:
    memory = layer.memory
    line = "Robert'); DROP TABLE sqlstore_memories;-- said hello"
    s = await session_with(layer, "u1", line)
    await memory.add_session_to_memory(s)
    assert texts(await search(memory, "Robert DROP TABLE")) == [line]


async def test_text_with_nul_is_returned_exactly(layer: Layer) -> None:
    memory = layer.memory
    line = "before\x00after the zero byte 🥗"
    s = await session_with(layer, "u1", line)
    await memory.add_session_to_memory(s)
    assert texts(await search(memory, "before after zero byte")) == [line]


@pytest.mark.parametrize(
    "crowd", [pytest.param(10, id="10k"), pytest.param(100, id="100k", marks=pytest.mark.soak)]
)
async def test_crowded_index_still_returns_the_users_best_rows(
    service: SqlSessionService, memory: SqlMemoryService, db_url: str, crowd: int
) -> None:
    """000: "apply the app and user filter inside the query to the index, not after
    retrieving the top results, or a crowded index will quietly return other users' rows"."""
    decoy = "favorite sport badminton badminton sport favorite"
    for user in range(crowd):  # 1,000 rows each of other users, all matching better
        await memory.add_memory(
            app_name=APP,
            user_id=f"other-{user}",
            memories=[
                MemoryEntry(content={"parts": [{"text": f"{decoy} {n}"}]}) for n in range(1000)
            ],
        )
    s = await session_with(
        service,
        "u1",
        "I like playing sport on weekends",
        "badminton racket restrung",
        "nothing relevant here",
    )
    await memory.add_session_to_memory(s)
    found = await search(memory, "What is my favorite sport? badminton?")
    assert sorted(texts(found)) == ["I like playing sport on weekends", "badminton racket restrung"]
    assert {m.custom_metadata["session_id"] for m in found.memories} == {s.id}


async def test_a_big_users_top_k_is_the_exact_bm25_top_k(memory: SqlMemoryService) -> None:
    """A user with 3,200 memories (past the size PostgreSQL scores in one read, so
    candidates come MaxScore-style over several reads, and with words held by more than
    half of them):
    the scores returned are the exact best BM25 scores, recomputed here from the texts
    (tf = 1, idf = ln(1 + (N - df + 0.5) / (df + 0.5)), k1 = 1.2, b = 0.75)."""

    rng = random.Random(3)
    rare = [f"r{n:03d}q" for n in range(400)]
    docs = []
    # "mida" in 1,050 long memories, "midb" in 1,150 short ones: a search for both reads
    # mida's first and must go on to midb's, whose short memories score best.
    docs += [["mida", *rng.sample(rare, 15)] for _ in range(1050)]
    docs += [["midb", *rng.sample(rare, rng.randint(0, 1))] for _ in range(1150)]
    docs += [rng.sample(rare, rng.randint(2, 9)) for _ in range(1000)]
    for d in docs[1050:]:
        d += ["cmon"] if rng.random() < 0.8 else []  # in more than half of all memories
        d += ["midc"] if rng.random() < 0.3 else []
    await memory.add_memory(
        app_name=APP,
        user_id="big",
        memories=[MemoryEntry(content={"parts": [{"text": " ".join(d)}]}) for d in docs],
    )
    n = len(docs)
    avgdl = sum(len(d) for d in docs) / n
    df: dict[str, int] = {}
    for d in docs:
        for w in d:
            df[w] = df.get(w, 0) + 1

    def bm25(doc: list[str], query: list[str]) -> float:
        weight = 2.2 / (1 + 1.2 * (0.25 + 0.75 * len(doc) / avgdl))
        idf = sum(math.log(1 + (n - df[w] + 0.5) / (df[w] + 0.5)) for w in set(query) if w in doc)
        return weight * idf

    queries = [["mida", "midb"], ["mida", "midb", "cmon"], ["cmon"], ["midc", "mida", "midb"]]
    queries += [
        rng.sample(rare, rng.randint(0, 3)) + rng.sample(["mida", "midb", "midc", "cmon"], 2)
        for _ in range(12)
    ]
    for query in queries:
        found = await search(memory, "what about " + " ".join(query) + "?", user="big")
        expected = sorted((bm25(d, query) for d in docs if set(d) & set(query)), reverse=True)
        got = [m.custom_metadata["score"] for m in found.memories]
        assert got == pytest.approx(expected[:10], rel=1e-9, abs=1e-9), query
        assert all(set(t.split()) & set(query) for t in texts(found)), query


@pytest.mark.postgres
@pytest.mark.soak
async def test_postgres_search_uses_the_gin_index(postgres_url: str) -> None:
    """On a table big enough that the planner prefers it, a search's read is one GIN
    index scan holding the (app_name, user_id) filter and the tsquery: the user's
    postings only."""
    from adk_sqlstore.search.lexical import BM25_B, BM25_K1, SCORE_SCALE
    from adk_sqlstore.search.text import classed, search_scope
    from adk_sqlstore.sql.search import pg_wave, tsquery_of

    rng = random.Random(7)
    words = [f"w{n:04d}x" for n in range(3000)]
    params = {
        "app_name": APP,
        "user_id": "heavy",
        "search_scope": search_scope(APP, "heavy"),
        "wanted_0_0": tsquery_of([[classed("w0042x", 8)]]),
        "wanted_1_0": tsquery_of([[classed("w0042x", 8)]]),
        "t0": " w0042x ",
        "w0": 3.0,
        "avgdl": 8.0,
        "limit": 10,
        "k1": BM25_K1,
        "b": BM25_B,
        "scale": SCORE_SCALE,
    }
    async with SqlMemoryService.from_url(postgres_url) as memory:
        for user in ("heavy", "neighbour"):
            for _ in range(15):
                await memory.add_memory(
                    app_name=APP,
                    user_id=user,
                    memories=[
                        MemoryEntry(content={"parts": [{"text": " ".join(rng.sample(words, 8))}]})
                        for _ in range(1000)
                    ],
                )
        plans = []
        async with memory.engine.connect() as conn:
            await conn.execute(text("ANALYZE sqlstore_memories"))
            await conn.commit()
            for statement in (pg_wave([(1, ())], 1).text, pg_wave([(1, ()), (1, ())], 1).text):
                result = await conn.execute(text("EXPLAIN " + statement), params)
                plans.append("\n".join(row[0] for row in result.all()))
        found = await memory.search_memory(app_name=APP, user_id="heavy", query="which w0042x?")
    for plan in plans:
        assert "Bitmap Index Scan on ix_sqlstore_memories_search" in plan, plan
        index_condition = plan.split("Index Cond: ")[-1].splitlines()[0]
        assert f"search_scope = '{search_scope(APP, 'heavy')}'" in index_condition, plan
        assert "search_vector @@" in index_condition, plan
        assert "app_name = 'app'" in plan and "user_id = 'heavy'" in plan, plan
    assert found.memories and all("w0042x" in t for t in texts(found))


# -- what must never be remembered ----------------------------------------------------


async def _all_memory_text(memory: SqlMemoryService) -> str:
    async with memory.engine.connect() as conn:
        rows = (await conn.execute(text("SELECT * FROM sqlstore_memories"))).all()
    return "\n".join(str(value) for row in rows for value in row)


async def test_card_numbers_are_masked_before_storage(
    service: SqlSessionService, memory: SqlMemoryService
) -> None:
    """000: "filter it at ingestion rather than at retrieval"."""
    cards = [
        "4111 1111 1111 1111",
        "5500-0000-0000-0004",
        "340000000000009",
        "6011000990139424",
        "4000 0566 5566 5556",
    ]
    kept = [
        "4111 1111 1111 1112",  # fails the Luhn check
        "123456789012",  # 12 digits: too short
        "phone 020 7946 0958",
    ]
    s = await session_with(
        service, "u1", *(f"pay with {c} please" for c in cards), *(f"not a card: {k}" for k in kept)
    )
    await memory.add_session_to_memory(s)
    stored = await _all_memory_text(memory)
    for card in cards:
        assert card not in stored and card.replace(" ", "").replace("-", "") not in stored
    for value in kept:
        assert value in stored
    found = await search(memory, "pay with")
    assert "pay with [card ending 1111] please" in texts(found)
    assert "pay with [card ending 0004] please" in texts(found)
    # The masked card is not findable by its digits; only the Luhn-invalid run is.
    assert texts(await search(memory, "4111")) == ["not a card: 4111 1111 1111 1112"]


@pytest.mark.parametrize(
    "written",
    [
        "4111\x001111\x001111\x001111",  # NUL, which the index turns into a space
        "5555\n5555\n5555\n4444",  # line breaks
        "4111 - 1111 - 1111 - 1111",
        "4111\u20131111\u20131111\u20131111",  # en dash
        "4111\u200b1111\u200b1111\u200b1111",  # zero-width space
        "4111\u00ad1111\u00ad1111\u00ad1111",  # soft hyphen
        "\u0664" + "\u0661" * 15,  # Arabic-Indic digits
    ],
)
async def test_card_numbers_behind_unusual_separators_are_masked_too(
    service: SqlSessionService, memory: SqlMemoryService, written: str
) -> None:
    s = await session_with(service, "u1", f"card {written} thanks")
    await memory.add_session_to_memory(s)
    stored = await _all_memory_text(memory)
    digits = "".join(c for c in written if c.isdigit())
    assert written not in stored and digits not in stored
    assert "[card ending " in stored
    assert texts(await search(memory, digits)) == []  # the whole number is not indexed


async def test_a_card_number_split_across_parts_or_in_the_author_is_masked(
    service: SqlSessionService, memory: SqlMemoryService
) -> None:
    s = await service.create_session(app_name=APP, user_id="u1")
    await service.append_event(
        s,
        Event(
            author="4111111111111111",
            content={"role": "user", "parts": [{"text": "visa 4111 1111"}, {"text": "1111 1111"}]},
        ),
    )
    await memory.add_session_to_memory(s)
    stored = await _all_memory_text(memory)
    assert "4111 1111\n1111 1111" not in stored and "4111111111111111" not in stored
    assert texts(await search(memory, "visa")) == ["visa [card ending 1111]"]


async def test_applications_add_their_own_rules(service: SqlSessionService) -> None:
    memory = SqlMemoryService(
        service.engine,
        redactors=[
            r"\bMRN-\d+\b",  # a pattern
            lambda text: text.replace("hunter2", "[password]"),  # a callable
        ],
    )
    s = await session_with(
        service, "u1", "patient MRN-12345 password hunter2 card 4111111111111111"
    )
    await memory.add_session_to_memory(s)
    stored = await _all_memory_text(memory)
    assert "MRN-12345" not in stored and "hunter2" not in stored
    assert "4111111111111111" not in stored
    assert texts(await search(memory, "patient")) == [
        "patient [redacted] password [password] card [card ending 1111]"
    ]


# -- forgetting -----------------------------------------------------------------------


@pytest.mark.sqlite
async def test_a_forgotten_users_words_are_gone_from_the_sqlite_file(sqlite_url: str) -> None:
    """FTS5 deletes only mark index entries, and SQLite keeps freed pages as they were:
    forget_user purges both, so the words cannot be read back from the file."""
    path = Path(make_url(sqlite_url).database or "")
    async with SqlSessionService.from_url(sqlite_url) as service:
        memory = SqlMemoryService(service.engine)
        for n in range(50):  # enough rows for several FTS5 segments
            s = await service.create_session(app_name=APP, user_id="gone")
            await service.append_event(s, turn(f"my passphrase is zqxjvortex{n % 3} plorbitis"))
            await memory.add_session_to_memory(s)
        kept = await service.create_session(app_name=APP, user_id="stays")
        await service.append_event(kept, turn("keepsake kumquat"))
        await memory.add_session_to_memory(kept)
        await memory.forget_user(app_name=APP, user_id="gone")
        assert texts(await search(memory, "kumquat", user="stays")) == ["keepsake kumquat"]
    data = b"".join(f.read_bytes() for f in path.parent.glob(path.name + "*"))
    for word in (b"zqxjvortex", b"plorbiti", b"passphras"):
        assert word not in data, word
    assert b"kumquat" in data


def _file_bytes(path: Path) -> bytes:
    """The database file with its write-ahead log and shared-memory file."""
    return b"".join(f.read_bytes() for f in path.parent.glob(path.name + "*"))


@pytest.mark.sqlite
async def test_forget_user_beside_an_open_reader_returns_at_once_and_empties_the_wal(
    sqlite_url: str,
) -> None:
    """Issue 11: forget_user waited the whole 30 s busy timeout while another connection
    read, and the write-ahead log kept the text. Now: without a reader the text is gone
    from every file when it returns; beside a reader of an older snapshot it returns
    within 2 s, and the log is emptied by the service's next write once the read ends."""
    import sqlite3
    import time

    path = Path(make_url(sqlite_url).database or "")
    async with SqlSessionService.from_url(sqlite_url) as service:
        memory = SqlMemoryService(service.engine)
        for user in ("alone", "beside"):
            for n in range(20):
                s = await service.create_session(app_name=APP, user_id=user)
                await service.append_event(s, turn(f"{user} keeps quorblex{n % 3} in gravnik"))
                await memory.add_session_to_memory(s)
        await memory.forget_user(app_name=APP, user_id="alone")  # no reader: gone at once
        assert b"alone keeps" not in _file_bytes(path)

        reader = sqlite3.connect(path)
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM sqlstore_events").fetchall()  # holds a snapshot
        started = time.monotonic()
        await memory.forget_user(app_name=APP, user_id="beside")
        assert time.monotonic() - started < 2.0
        assert (await service.list_sessions(app_name=APP, user_id="beside")).sessions == []
        reader.rollback()
        reader.close()
        await service.create_session(app_name=APP, user_id="someone")  # the next write
        data = _file_bytes(path)
        for word in (b"quorblex", b"gravnik", b"beside keeps"):
            assert word not in data, word


@pytest.mark.postgres
@pytest.mark.single_server
async def test_forget_user_leaves_nothing_of_the_user_in_pg_stats(postgres_url: str) -> None:
    """Issue 11: pg_stats listed the forgotten user's id and words (most common values
    and elements) until the next ANALYZE; forget_user refreshes the statistics."""
    async with SqlMemoryService.from_url(postgres_url) as memory:
        for user, count in (("zvictimq", 300), ("other-a", 20), ("other-b", 20)):
            words = "flumbrix quandolet" if user == "zvictimq" else "common lunch"
            await memory.add_memory(
                app_name=APP,
                user_id=user,
                memories=[
                    MemoryEntry(content={"parts": [{"text": f"{words} {n}"}]}) for n in range(count)
                ],
            )
        find = text(
            "SELECT count(*) FROM pg_stats WHERE tablename LIKE 'sqlstore_%' AND ("
            " coalesce(most_common_vals::text, '') || coalesce(most_common_elems::text, '')"
            " || coalesce(histogram_bounds::text, '')) ~ '(zvictimq|flumbri|quandolet)'"
        )
        async with memory.engine.connect() as conn:
            await conn.execute(text("ANALYZE sqlstore_memories, sqlstore_memory_stats"))
            await conn.commit()  # statistics are transactional too
            assert (await conn.execute(find)).scalar_one() > 0  # listed before
        await memory.forget_user(app_name=APP, user_id="zvictimq")
        async with memory.engine.connect() as conn:
            assert (await conn.execute(find)).scalar_one() == 0


@pytest.mark.postgres
@pytest.mark.single_server
async def test_forget_user_clears_the_statistics_of_tables_it_leaves_empty(
    postgres_url: str,
) -> None:
    """ANALYZE leaves an empty table's statistics as they were: when the forgotten user
    was the only one with events and memories, those tables' old statistics still named
    them (a fresh-user review). They are deleted (the test server's role may)."""
    async with SqlMemoryService.from_url(postgres_url) as memory:
        sessions = SqlSessionService(memory.store)
        for n in range(20):  # others: sessions only
            await sessions.create_session(app_name=APP, user_id=f"other-{n}")
        for n in range(30):
            s = await sessions.create_session(app_name=APP, user_id="zlonevictimq")
            await sessions.append_event(s, turn(f"glimmerwick {n} snorplet"))
            await memory.add_session_to_memory(s)
        find = text(
            "SELECT count(*) FROM pg_stats WHERE tablename LIKE 'sqlstore_%' AND ("
            " coalesce(most_common_vals::text, '') || coalesce(most_common_elems::text, '')"
            " || coalesce(histogram_bounds::text, '')) ~ '(zlonevictimq|glimmerwick|snorplet)'"
        )
        async with memory.engine.connect() as conn:
            tables = ", ".join(
                f"sqlstore_{t}" for t in ("sessions", "events", "memories", "session_state")
            )
            await conn.execute(text(f"ANALYZE {tables}, sqlstore_memory_ingestions"))
            await conn.commit()  # statistics are transactional too
            assert (await conn.execute(find)).scalar_one() > 0  # listed before
        await memory.forget_user(app_name=APP, user_id="zlonevictimq")
        async with memory.engine.connect() as conn:
            assert (await conn.execute(find)).scalar_one() == 0


async def test_add_memory_takes_dicts_and_refuses_what_is_not_a_memory(
    memory: SqlMemoryService,
) -> None:
    """Issue 11: plain dicts raised AttributeError. A dict of a MemoryEntry is taken;
    anything else is InvalidMemoryError, and nothing of the call is written."""
    await memory.add_memory(
        app_name=APP,
        user_id="u1",
        memories=[{"content": {"parts": [{"text": "dict memory about kites"}]}}],
    )
    assert texts(await search(memory, "kites")) == ["dict memory about kites"]
    for bad in (
        ["just a string"],
        [{"content": 42}],
        [{"content": {"parts": [{"text": "stamped"}]}, "timestamp": "yesterday"}],
        {"content": {"parts": [{"text": "not in a list"}]}},
    ):
        with pytest.raises(InvalidMemoryError) as raised:
            await memory.add_memory(
                app_name=APP,
                user_id="u1",
                memories=[MemoryEntry(content={"parts": [{"text": "kites first"}]}), *bad]
                if isinstance(bad, list)
                else bad,  # type: ignore[arg-type]  # a dict where a list belongs, on purpose
            )
        assert "\n" not in str(raised.value)
    assert texts(await search(memory, "kites")) == ["dict memory about kites"]
    await memory.add_events_to_memory(
        app_name=APP,
        user_id="u1",
        session_id="s1",
        events=[{"author": "user", "content": {"parts": [{"text": "event dict kites"}]}}],
    )
    assert "event dict kites" in texts(await search(memory, "kites"))


async def test_forget_user_deletes_everything_of_that_user_only(layer: Layer) -> None:
    """000: "Deletion has to reach every copy: the user: map, every stored session, the
    memory index and any extracted facts"."""
    service, memory = layer.sessions, layer.memory
    for app, user in [(APP, "gone"), (APP, "stays"), ("other-app", "gone")]:
        s = await service.create_session(
            app_name=app, user_id=user, state={"user:diet": "vegan", "app:menu": 1, "k": 1}
        )
        await service.append_event(s, make_turn(layer, f"secret lunch order of {user} in {app}"))
        await service.append_event(s, make_turn(layer, "second turn"))
        await memory.add_session_to_memory(s)
        await memory.add_memory(
            app_name=app,
            user_id=user,
            memories=[
                layer.memory_entry(content={"parts": [{"text": f"secret fact about {user}"}]})
            ],
        )
    counts = await memory.forget_user(app_name=APP, user_id="gone")
    assert counts["sessions"] == 1 and counts["events"] == 2
    assert counts["memories"] == 3 and counts["user_state_keys"] == 1
    assert counts["session_state_keys"] == 1
    assert (await service.list_sessions(app_name=APP, user_id="gone")).sessions == []
    assert await service.get_user_state(app_name=APP, user_id="gone") == {}
    assert (await memory.search_memory(app_name=APP, user_id="gone", query="secret")).memories == []
    # Nobody else lost anything; app state is not the user's.
    assert (
        len((await memory.search_memory(app_name=APP, user_id="stays", query="secret")).memories)
        == 2
    )
    assert (
        len(
            (
                await memory.search_memory(app_name="other-app", user_id="gone", query="secret")
            ).memories
        )
        == 2
    )
    assert await service.get_user_state(app_name=APP, user_id="stays") == {"diet": "vegan"}
    assert await service.get_app_state(app_name=APP) == {"menu": 1}
    assert len((await service.list_sessions(app_name="other-app", user_id="gone")).sessions) == 1
    async with service.engine.connect() as conn:
        leftovers = (
            await conn.execute(
                text(
                    "SELECT count(*) FROM sqlstore_memories"
                    " WHERE user_id = 'gone' AND app_name = 'app'"
                )
            )
        ).scalar()
    assert leftovers == 0


async def test_delete_memories_by_session_ids_or_all(layer: Layer) -> None:
    memory = layer.memory
    a = await session_with(layer, "u1", "apple one", "apple two")
    b = await session_with(layer, "u1", "apple three")
    await memory.add_session_to_memory(a)
    await memory.add_session_to_memory(b)
    other = await session_with(layer, "u2", "apple other")
    await memory.add_session_to_memory(other)
    assert await memory.delete_memories(app_name=APP, user_id="u1", session_id=a.id) == 2
    found = await search(memory, "apple")
    assert texts(found) == ["apple three"]
    assert (
        await memory.delete_memories(
            app_name=APP, user_id="u1", memory_ids=[found.memories[0].id or ""]
        )
        == 1
    )
    await memory.add_session_to_memory(a)
    assert await memory.delete_memories(app_name=APP, user_id="u1") == 2
    assert (await search(memory, "apple")).memories == []
    assert texts(await search(memory, "apple", user="u2")) == ["apple other"]


# -- ingestion triggers -----------------------------------------------------------------


async def test_idle_sessions_are_ingested_once(layer: Layer) -> None:
    """000: "A scheduled job ingests sessions whose last update is older than ... thirty
    minutes"."""
    service, memory = layer.sessions, layer.memory
    long_ago = time.time() - 3600
    idle = await session_with(layer, "u1", "idle session about kayaks", ts=long_ago)
    await session_with(layer, "u1", "active session about kites", ts=time.time())
    await service.create_session(app_name=APP, user_id="u1")  # empty: nothing to ingest
    report = await memory.ingest_idle_sessions(timedelta(minutes=30))
    assert (report.sessions, report.events) == (1, 1)
    assert texts(await search(memory, "kayaks kites")) == ["idle session about kayaks"]
    again = await memory.ingest_idle_sessions(timedelta(minutes=30))
    assert (again.sessions, again.events) == (0, 0)
    # A new append makes the session's revision new; once idle it is ingested again.
    await service.append_event(idle, make_turn(layer, "kayaks need paddles", ts=long_ago + 10))
    assert await layer.core_memory.count_idle_sessions(idle_for=timedelta(minutes=30)) == 1
    third = await memory.ingest_idle_sessions(timedelta(minutes=30))
    assert (third.sessions, third.events) == (1, 2)
    assert len((await search(memory, "kayaks")).memories) == 2


async def test_idle_ingestion_streams_in_batches_and_filters_by_app(
    service: SqlSessionService, memory: SqlMemoryService
) -> None:
    long_ago = time.time() - 7200
    for n in range(7):
        await session_with(service, f"user{n}", f"note number {n} about tea", ts=long_ago)
    other = await service.create_session(app_name="other-app", user_id="user0")
    await service.append_event(other, turn("other app tea", ts=long_ago))
    keys = [key async for key in memory.idle_sessions(app_name=APP, batch_size=2)]
    assert len(keys) == 7 and len(set(keys)) == 7 and keys == sorted(keys)
    report = await memory.ingest_idle_sessions(timedelta(minutes=30), app_name=APP)
    assert report.sessions == 7
    assert await memory.count_idle_sessions(idle_for=timedelta(minutes=30)) == 1


async def test_ingest_session_reloads_and_is_safe_to_retry(layer: Layer) -> None:
    service, memory = layer.sessions, layer.memory
    s = await session_with(layer, "u1", "first thing about llamas")
    stale_copy = s.model_copy(deep=True)
    await service.append_event(s, make_turn(layer, "second thing about llamas"))
    await memory.add_session_to_memory(stale_copy)  # an old object: one event
    for _ in range(3):
        report = await memory.ingest_session(app_name=APP, user_id="u1", session_id=s.id)
        assert report.events == 2
    assert len((await search(memory, "llamas")).memories) == 2
    missing = await memory.ingest_session(app_name=APP, user_id="u1", session_id="nope")
    assert missing.sessions == 0


async def test_the_former_names_still_work_and_say_they_are_deprecated(
    service: SqlSessionService, memory: SqlMemoryService
) -> None:
    s = await session_with(service, "u1", "old names about llamas")
    with pytest.warns(DeprecationWarning, match="ingest_session"):
        report = await memory.close_session(app_name=APP, user_id="u1", session_id=s.id)
    assert report.events == 1
    with pytest.warns(DeprecationWarning, match="IngestEvery"):
        checkpoint = MemoryCheckpoint(memory, every=1)
    assert isinstance(checkpoint, IngestEvery)
    with pytest.warns(DeprecationWarning, match="after_append"):
        old = SqlSessionService(memory.store, memory_checkpoint=checkpoint)
    s2 = await old.create_session(app_name=APP, user_id="u1")
    await old.append_event(s2, turn("checkpointed walrus"))
    assert len((await search(memory, "walrus")).memories) == 1


async def test_ingest_every_ingests_every_n_events(db_url: str) -> None:
    async with SqlMemoryService.from_url(db_url) as memory:
        checkpoint = IngestEvery(memory, every=3)
        async with SqlSessionService(memory.store, after_append=checkpoint) as service:
            s = await service.create_session(app_name=APP, user_id="u1")
            counts = []
            for n in range(7):
                await service.append_event(s, turn(f"checkpoint walrus {n}"))
                counts.append(len((await search(memory, "walrus")).memories))
    assert counts == [0, 0, 3, 3, 3, 6, 6]


async def test_ingest_every_needs_a_positive_interval(memory: SqlMemoryService) -> None:
    with pytest.raises(ValueError, match="1 or more"):
        IngestEvery(memory, every=0)


# -- moved from test_edges.py


async def test_ingest_idle_goes_on_past_a_session_that_fails(
    service: SqlSessionService,
) -> None:
    memory = SqlMemoryService(service.engine)
    long_ago = time.time() - 7200
    for user in ("a-bad", "b-good"):
        s = await service.create_session(app_name="idle", user_id=user)
        await service.append_event(
            s,
            Event(author="user", timestamp=long_ago, content={"parts": [{"text": f"kiwi {user}"}]}),
        )
    # Damage one stored event behind the library's back (as an old bug or a manual
    # edit might have): it no longer reads back.
    async with service.engine.begin() as conn:
        await conn.execute(
            text(
                'UPDATE sqlstore_events SET data = \'{"id": 1, "timestamp": null}\''
                " WHERE user_id = 'a-bad'"
            )
        )
    report = await memory.ingest_idle_sessions(timedelta(minutes=30), app_name="idle")
    assert (report.sessions, report.failed) == (1, 1)
    assert "idle/a-bad/" in report.errors[0]
    found = await memory.search_memory(app_name="idle", user_id="b-good", query="kiwi")
    assert len(found.memories) == 1


async def test_ingesting_a_partly_loaded_session_keeps_older_memories(
    service: SqlSessionService,
) -> None:
    memory = SqlMemoryService(service.engine)
    s = await service.create_session(app_name="app", user_id="u1")
    for n in range(30):
        await service.append_event(
            s, Event(author="user", content={"parts": [{"text": f"walnut {n}"}]})
        )
    await memory.add_session_to_memory(s)
    recent = await service.get_session(
        app_name="app", user_id="u1", session_id=s.id, config=GetSessionConfig(num_recent_events=5)
    )
    assert recent is not None and len(recent.events) == 5
    report = await memory.add_session_to_memory(recent)
    assert (report.events, report.deleted) == (30, 0)
    found = await memory.search_memory(app_name="app", user_id="u1", query="walnut", limit=50)
    assert len(found.memories) == 30


def test_card_numbers_with_other_separators_are_masked() -> None:
    from adk_sqlstore.memory.redaction import mask_card_numbers

    for card in [
        "4111\u00a01111\u00a01111\u00a01111",
        "4111  1111  1111  1111",
        "4111\t1111\t1111\t1111",
        "4111 -1111 -1111 -1111",
    ]:
        assert mask_card_numbers(f"pay {card} now") == "pay [card ending 1111] now", card
