"""Hybrid memory search: embeddings beside BM25 (issue 14), on an SQLite file (vectors
in BLOBs, an exact scan) and on PostgreSQL with pgvector (a throwaway server of
pgserver's PostgreSQL 16) and without it (the machine's PostgreSQL 15: lexical, with a
warning).

The embedder here is deterministic (``tests.embedders.Concepts``: words of one concept
share a dimension), so that what the vectors find is known; the real local model runs
in ``test_embedders.py`` and the LoCoMo recall test.
"""

from __future__ import annotations

import asyncio
import sqlite3
import warnings
from collections.abc import AsyncIterator
from contextlib import closing
from typing import Any

import pytest
from sqlalchemy import text

from adk_sqlstore import (
    ConfigurationError,
    Event,
    IngestEvery,
    InvalidArgumentError,
    SqlMemoryService,
    SqlSessionService,
    Store,
    VectorSearchWarning,
)
from adk_sqlstore.cli import app as cli_app

from .embedders import Concepts, Failing, OtherModel
from .helpers import texts

APP = "app"
SPORT = "I play badminton every Sunday"
COLOUR = "My favourite colour is green"


def fact(text: str, **fields: Any) -> dict[str, Any]:
    return {"content": {"role": "user", "parts": [{"text": text}]}, **fields}


def turn(text: str, author: str = "user") -> Event:
    return Event(author=author, content={"role": "user", "parts": [{"text": text}]})


@pytest.fixture(params=["sqlite", "pgvector", pytest.param("mysql", marks=pytest.mark.mysql)])
def vector_url(request: pytest.FixtureRequest) -> str:
    """A migrated, empty database that keeps vectors: an SQLite file, a database on a
    PostgreSQL server with pgvector, or a MySQL/MariaDB one (vectors as ``LONGBLOB``,
    scanned exactly, as on SQLite)."""
    return str(request.getfixturevalue(f"{request.param}_url"))


@pytest.fixture
async def hybrid(vector_url: str) -> AsyncIterator[SqlMemoryService]:
    async with SqlMemoryService.from_url(vector_url, embedder=Concepts()) as memory:
        yield memory


async def vector_rows(memory: SqlMemoryService) -> list[tuple[Any, ...]]:
    async with memory.store.transaction(write=False) as conn:
        result = await conn.execute(
            text(
                "SELECT m.id, e.app_name, e.user_id, e.model, e.dimensions"
                " FROM sqlstore_memory_embeddings e"
                " JOIN sqlstore_memories m ON m.pk = e.memory_pk ORDER BY m.id"
            )
        )
        return [tuple(row) for row in result.all()]


async def search(memory: SqlMemoryService, query: str, user: str = "u1", limit: int = 10) -> Any:
    return await memory.search_memory(app_name=APP, user_id=user, query=query, limit=limit)


# -- search -------------------------------------------------------------------------


async def test_a_question_sharing_no_word_finds_its_answer(hybrid: SqlMemoryService) -> None:
    """The issue: keyword search cannot connect "What sport do I like?" to "I play
    badminton every Sunday"; the vectors do."""
    assert await hybrid.vector_storage() in ("blob", "pgvector")
    await hybrid.add_memory(app_name=APP, user_id="u1", memories=[fact(SPORT), fact(COLOUR)])
    found = await search(hybrid, "What sport do I like?")
    assert texts(found)[0] == SPORT
    best = found.memories[0].custom_metadata
    assert best["lexical_score"] is None  # no shared word
    assert best["vector_score"] > 0.5
    assert best["score"] == max(m.custom_metadata["score"] for m in found.memories)

    async with SqlMemoryService.from_url(hybrid.store.url) as lexical:
        assert texts(await search(lexical, "What sport do I like?")) == []


async def test_scores_are_reported_and_a_word_match_still_counts(
    hybrid: SqlMemoryService,
) -> None:
    await hybrid.add_memory(
        app_name=APP,
        user_id="u1",
        memories=[fact("My wife Sarah likes tea"), fact("Green tea at noon"), fact(COLOUR)],
    )
    found = await search(hybrid, "green")
    assert texts(found)[0] == COLOUR or texts(found)[0] == "Green tea at noon"
    for entry in found.memories:
        meta = entry.custom_metadata
        assert set(meta) >= {"score", "lexical_score", "vector_score", "session_id"}
        assert 0.0 <= meta["score"] <= 1.0
    matched = {
        text
        for text, e in zip(texts(found), found.memories, strict=True)
        if e.custom_metadata["lexical_score"] is not None
    }
    assert matched == {COLOUR, "Green tea at noon"}


async def test_no_user_sees_another_users_memories_through_vectors(
    hybrid: SqlMemoryService,
) -> None:
    """(app_name, user_id) is inside every vector query: identical memories of other
    users and apps are never returned, whatever the query."""
    users = [("app", "u1"), ("app", "u2"), ("other-app", "u1")]
    for app_name, user in users:
        await hybrid.add_memory(
            app_name=app_name,
            user_id=user,
            memories=[fact(f"{SPORT} ({app_name}/{user})"), fact(f"{COLOUR} {user}")],
        )
    for app_name, user in users:
        for query in ("What sport do I like?", "colour", "zzz unrelated", SPORT):
            found = await hybrid.search_memory(app_name=app_name, user_id=user, query=query)
            if query != "zzz unrelated":  # related to nothing: nothing found
                assert found.memories, query
            for entry in found.memories:
                said = texts(type(found)(memories=[entry]))[0]
                assert said.endswith(f"({app_name}/{user})") or said.endswith(user)
                assert said.endswith(user) or f"{app_name}/{user}" in said
    found = await hybrid.search_memory(app_name="app", user_id="nobody", query="sport")
    assert found.memories == []


async def test_vectors_of_another_model_are_never_compared(vector_url: str) -> None:
    async with SqlMemoryService.from_url(vector_url, embedder=Concepts()) as first:
        await first.add_memory(app_name=APP, user_id="u1", memories=[fact(SPORT)])
    async with SqlMemoryService.from_url(vector_url, embedder=OtherModel()) as other:
        found = await search(other, "What sport do I like?")
        assert found.memories == []  # no word shared, and no vector of test-other
        assert await other.count_to_embed() == 1
        assert await other.embed_missing() == 1
        assert texts(await search(other, "What sport do I like?")) == [SPORT]
        assert [r[3] for r in await vector_rows(other)] == ["test-other"]  # one per memory


async def test_unrelated_memories_are_left_out_and_a_lone_match_scores_high(
    hybrid: SqlMemoryService,
) -> None:
    """A memory with no query word and no similarity is not returned (a new user's
    break-test: every memory came back at score 0); a lone match scores 1, not 0."""
    await hybrid.add_memory(app_name=APP, user_id="u1", memories=[fact(SPORT), fact(COLOUR)])
    assert texts(await search(hybrid, "🏸🏸 zzz")) == []
    await hybrid.add_memory(app_name=APP, user_id="u2", memories=[fact(SPORT)])
    (only,) = (await search(hybrid, "What sport do I like?", user="u2")).memories
    assert only.custom_metadata["score"] == 0.5  # similarity 1 (alone), no BM25 match
    (both,) = (await search(hybrid, "badminton sport", user="u2")).memories
    assert both.custom_metadata["score"] == 1.0


# -- ingestion ----------------------------------------------------------------------


async def test_every_ingestion_path_embeds(vector_url: str) -> None:
    embedder = Concepts()
    async with (
        SqlSessionService.from_url(vector_url) as sessions,
        SqlMemoryService(sessions.store, embedder=embedder) as memory,
    ):
        # add_session_to_memory
        s1 = await sessions.create_session(app_name=APP, user_id="u1")
        await sessions.append_event(s1, turn(SPORT))
        await memory.add_session_to_memory(s1)
        # add_events_to_memory
        await memory.add_events_to_memory(
            app_name=APP, user_id="u1", session_id="s-x", events=[turn("I drive a Tesla")]
        )
        # add_memory
        await memory.add_memory(app_name=APP, user_id="u1", memories=[fact("Sarah is my wife")])
        # ingest_session (the end of a conversation)
        s2 = await sessions.create_session(app_name=APP, user_id="u1")
        await sessions.append_event(s2, turn("We played tennis"))
        await memory.ingest_session(app_name=APP, user_id="u1", session_id=s2.id)
        # the idle job
        s3 = await sessions.create_session(app_name=APP, user_id="u1")
        await sessions.append_event(s3, turn("Dinner was pasta"))
        await memory.ingest_idle_sessions(0)
        # every N events
        checkpoint = IngestEvery(memory, every=1)
        async with SqlSessionService.from_url(vector_url, after_append=checkpoint) as hooked:
            s4 = await hooked.create_session(app_name=APP, user_id="u1")
            await hooked.append_event(s4, turn("My car is red"))
        assert await memory.count_to_embed() == 0
        stored = await vector_rows(memory)
        assert len(stored) == 6
        assert {r[1:] for r in stored} == {(APP, "u1", "test-concepts", 64)}
        assert texts(await search(memory, "vehicle", limit=2)) != []


async def test_a_turn_is_embedded_with_the_turn_before_it(hybrid: SqlMemoryService) -> None:
    """docs/hybrid-search.md: a memory's vector is the mean of its text and of the
    previous turn of its session followed by its text."""
    embedder = hybrid.embedder
    assert isinstance(embedder, Concepts)
    events = [turn("first words"), turn("second words", author="agent")]
    await hybrid.add_events_to_memory(app_name=APP, user_id="u1", session_id="s1", events=events)
    asked = [t for call in embedder.calls for t in call]
    assert "user: first words" in asked[0] or "first words" in asked[0]
    assert any("first words" in t and t.rstrip().endswith("second words") for t in asked)
    # an incremental add finds its previous turn in the database
    embedder.calls.clear()
    await hybrid.add_events_to_memory(
        app_name=APP, user_id="u1", session_id="s1", events=[turn("third words")]
    )
    asked = [t for call in embedder.calls for t in call]
    assert any("second words" in t and t.endswith("third words") for t in asked)


async def test_only_new_or_changed_text_is_embedded_again(hybrid: SqlMemoryService) -> None:
    embedder = hybrid.embedder
    assert isinstance(embedder, Concepts)
    await hybrid.add_memory(app_name=APP, user_id="u1", memories=[fact(SPORT, id="m1")])
    assert embedder.calls
    embedder.calls.clear()
    await hybrid.add_memory(app_name=APP, user_id="u1", memories=[fact(SPORT, id="m1")])
    assert embedder.calls == []  # unchanged: not embedded again
    await hybrid.add_memory(app_name=APP, user_id="u1", memories=[fact("I drive a car", id="m1")])
    assert embedder.calls and "I drive a car" in embedder.calls[0][0]
    assert texts(await search(hybrid, "tesla")) == ["I drive a car"]


async def test_redacted_text_is_what_is_embedded(vector_url: str) -> None:
    embedder = Concepts()
    async with SqlMemoryService.from_url(
        vector_url, embedder=embedder, redactors=[r"secret-\w+"]
    ) as memory:
        await memory.add_memory(
            app_name=APP,
            user_id="u1",
            memories=[fact("my card 4111 1111 1111 1111 and code secret-cobra")],
        )
    asked = " ".join(t for call in embedder.calls for t in call)
    assert "4111" not in asked and "cobra" not in asked
    assert "[redacted]" in asked


async def test_no_transaction_is_open_while_the_model_runs(sqlite_url: str) -> None:
    """The embedder writes to the same SQLite file through another store while it
    runs: it would wait on the write lock (and fail at busy_timeout) if ingestion held
    a transaction."""

    class Writing(Concepts):
        async def embed(self, texts: list[str]) -> list[list[float]]:
            async with SqlSessionService.from_url(sqlite_url, sqlite_busy_timeout=0.2) as other:
                await other.create_session(app_name=APP, user_id="writer")
            return await super().embed(texts)

    async with (
        SqlSessionService.from_url(sqlite_url) as sessions,
        SqlMemoryService(sessions.store, embedder=Writing()) as memory,
    ):
        s = await sessions.create_session(app_name=APP, user_id="u1")
        await sessions.append_event(s, turn(SPORT))
        await memory.add_session_to_memory(s)
        await memory.add_memory(app_name=APP, user_id="u1", memories=[fact(COLOUR)])
        found = await search(memory, "what sport")
        assert texts(found)[0] == SPORT
        listed = await sessions.list_sessions(app_name=APP, user_id="writer")
        assert len(listed.sessions) == 3  # two writes and the query's embedding


async def test_an_embedder_failure_keeps_the_memories_and_searches_lexically(
    vector_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with SqlMemoryService.from_url(vector_url, embedder=Failing()) as memory:
        await memory.add_memory(app_name=APP, user_id="u1", memories=[fact(SPORT)])
        assert "stored without vectors" in caplog.text
        found = await search(memory, "badminton")
        assert texts(found) == [SPORT]  # lexical, with a logged warning
        assert "searching lexically" in caplog.text
    async with SqlMemoryService.from_url(vector_url, embedder=Concepts()) as memory:
        assert await memory.count_to_embed() == 1
        assert await memory.embed_missing() == 1
        assert await memory.embed_missing() == 0  # idempotent
        assert texts(await search(memory, "What sport do I like?")) == [SPORT]


async def test_a_changed_memory_whose_embedding_fails_loses_its_old_vector(
    vector_url: str,
) -> None:
    async with SqlMemoryService.from_url(vector_url, embedder=Concepts()) as memory:
        await memory.add_memory(app_name=APP, user_id="u1", memories=[fact(SPORT, id="m1")])
    async with SqlMemoryService.from_url(vector_url, embedder=Failing()) as failing:
        assert isinstance(failing.embedder, Failing)
        failing.embedder.model = "test-concepts"  # the same model, now failing
        await failing.add_memory(app_name=APP, user_id="u1", memories=[fact(COLOUR, id="m1")])
        assert await vector_rows(failing) == []  # no stale vector of the old text
    async with SqlMemoryService.from_url(vector_url, embedder=Concepts()) as memory:
        assert await memory.count_to_embed() == 1


async def test_vectors_go_with_their_memories(vector_url: str) -> None:
    async with (
        SqlSessionService.from_url(vector_url) as sessions,
        SqlMemoryService(sessions.store, embedder=Concepts()) as memory,
    ):
        s = await sessions.create_session(app_name=APP, user_id="u1")
        for line in (SPORT, COLOUR, "I drive a Tesla"):
            await sessions.append_event(s, turn(line))
        await memory.add_session_to_memory(s)
        await memory.add_memory(app_name=APP, user_id="u2", memories=[fact(SPORT)])
        assert len(await vector_rows(memory)) == 4
        found = await search(memory, "Tesla")
        tesla = [m.id for m in found.memories if "Tesla" in (m.content.parts[0].text or "")]
        assert len(tesla) == 1
        await memory.delete_memories(app_name=APP, user_id="u1", memory_ids=tesla)
        assert len(await vector_rows(memory)) == 3
        await memory.forget_user(app_name=APP, user_id="u1")
        assert [r[2] for r in await vector_rows(memory)] == ["u2"]


async def test_pgvector_big_users_are_searched_through_the_hnsw_index(
    pgvector_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A user past HNSW_FROM memories is searched through the model's HNSW index
    (made at first use on a small table); when the index cannot serve a user (too few
    of the nearest vectors of all users are theirs), the exact scan answers."""
    from adk_sqlstore.search import hybrid as hybrid_module
    from adk_sqlstore.sql import embeddings as sql_embeddings

    monkeypatch.setattr(hybrid_module, "HNSW_FROM", 100)
    calls: list[tuple[str, int]] = []
    real = sql_embeddings.nearest_hnsw

    async def counting(*args: Any, **kwargs: Any) -> list[tuple[int, float]]:
        found = await real(*args, **kwargs)
        calls.append((kwargs["user_id"], len(found)))
        return found

    monkeypatch.setattr(sql_embeddings, "nearest_hnsw", counting)
    words = ["tea", "car", "sport", "wife", "green", "paris", "music", "bread", "rain", "code"]

    def notes(user: str, n: int) -> list[dict[str, Any]]:
        return [fact(f"{words[i % 10]} {words[i // 10 % 10]} {user} {i}") for i in range(n)]

    async with SqlMemoryService.from_url(
        pgvector_url, embedder=Concepts(), hybrid_candidates=20
    ) as memory:
        await memory.add_memory(app_name=APP, user_id="big", memories=notes("big", 1000))
        await memory.add_memory(app_name=APP, user_id="mid", memories=notes("mid", 100))
        await memory.add_memory(app_name=APP, user_id="small", memories=notes("small", 5))
        async with memory.store.transaction(write=False) as conn:
            assert await sql_embeddings.hnsw_exists(conn, model="test-concepts", dimensions=64)
        found = {}
        for user in ("big", "mid", "small"):
            found[user] = texts(await search(memory, "tennis tesla", user=user, limit=5))
            assert 0 < len(found[user]) <= 5 and all(f" {user} " in t for t in found[user])
        assert ("big", 20) in calls  # through the index, which found enough
        assert ("small", 20) not in calls  # under HNSW_FROM: never through it
        assert [n for u, n in calls if u == "mid"] and all(n < 20 for u, n in calls if u == "mid")
        monkeypatch.setattr(hybrid_module, "HNSW_FROM", 10**9)  # exact scans only
        for user in ("mid", "small"):  # the index fell short, or was not used: exact
            assert texts(await search(memory, "tennis tesla", user=user, limit=5)) == found[user]
        exact = texts(await search(memory, "tennis tesla", user="big", limit=5))
        assert exact[0] == found["big"][0]


async def test_sqlite_keeps_big_users_vectors_in_memory_and_sees_every_change(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A big user's vectors stay in memory between searches (search.hybrid's cache),
    used only while their fingerprint is unchanged: writes through another store (as
    from another process) are seen at once."""
    from adk_sqlstore.search import hybrid as hybrid_module

    monkeypatch.setattr(hybrid_module, "CACHED_FROM", 3)
    cache = hybrid_module.UserVectorCache(2**20)
    monkeypatch.setattr(hybrid_module, "VECTOR_CACHE", cache)
    async with (
        SqlMemoryService.from_url(sqlite_url, embedder=Concepts()) as reader,
        SqlMemoryService.from_url(sqlite_url, embedder=Concepts()) as writer,
    ):
        await writer.add_memory(
            app_name=APP,
            user_id="u1",
            memories=[fact(f"{w} note", id=w) for w in ("tea", "bread", "rain", "music")],
        )
        await search(reader, "What sport do I like?")  # read and cached (nothing related)
        assert len(cache._entries) == 1
        await writer.add_memory(app_name=APP, user_id="u1", memories=[fact(SPORT, id="s")])
        assert texts(await search(reader, "What sport do I like?"))[0] == SPORT
        await writer.add_memory(app_name=APP, user_id="u1", memories=[fact("I drive", id="s")])
        assert texts(await search(reader, "Tesla", limit=1)) == ["I drive"]
        await writer.delete_memories(app_name=APP, user_id="u1", memory_ids=["s"])
        assert "I drive" not in texts(await search(reader, "Tesla"))
        hit = await search(reader, "tea")
        assert texts(hit)[0] == "tea note"


async def test_a_big_users_bm25_candidates_leave_out_common_words(
    vector_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """For a user past HNSW_FROM memories, hybrid search's BM25 side skips words held
    by more than 2% of the user's memories (search.hybrid.BIG_USER_TERM_SHARE)."""
    from adk_sqlstore.search import hybrid as hybrid_module

    monkeypatch.setattr(hybrid_module, "HNSW_FROM", 50)
    async with SqlMemoryService.from_url(vector_url, embedder=Concepts()) as memory:
        notes = [fact(f"common note number {i}") for i in range(100)]
        notes.append(fact("common zebra sighting"))
        await memory.add_memory(app_name=APP, user_id="u1", memories=notes)
        found = await search(memory, "common zebra")
        assert texts(found)[0] == "common zebra sighting"
        scored = [m for m in found.memories if m.custom_metadata["lexical_score"] is not None]
        assert [m.custom_metadata["lexical_score"] for m in scored] == [
            scored[0].custom_metadata["lexical_score"]
        ]  # only the zebra memory: "common" (101 memories) was left out
        only_common = await search(memory, "common")
        assert all(m.custom_metadata["lexical_score"] is None for m in only_common.memories)
    async with SqlMemoryService.from_url(vector_url) as lexical:
        assert len((await search(lexical, "common", limit=200)).memories) == 101


# -- configuration ------------------------------------------------------------------


async def test_the_embedder_is_named_in_urls_and_the_adk_class(vector_url: str) -> None:
    named = vector_url + ("&" if "?" in vector_url else "?") + "embedder=tests.embedders:Concepts"
    async with SqlMemoryService.from_url(named) as memory:
        assert isinstance(memory.embedder, Concepts)
        await memory.add_memory(app_name=APP, user_id="u1", memories=[fact(SPORT)])
        assert texts(await search(memory, "What sport do I like?")) == [SPORT]
    async with SqlMemoryService.from_url(named, embedder=OtherModel()) as memory:
        assert isinstance(memory.embedder, OtherModel)  # the keyword wins
    async with SqlMemoryService.from_url(vector_url) as memory:
        assert memory.embedder is None
        assert await memory.vector_storage() == "none"

    pytest.importorskip("google.adk")
    from adk_sqlstore.adk import SqlMemoryService as AdkMemoryService

    scheme = "sqlstore+" + vector_url
    adk = AdkMemoryService(
        scheme + ("&" if "?" in scheme else "?") + "embedder=tests.embedders:Concepts"
    )
    try:
        assert isinstance(adk.embedder, Concepts)
        found = await adk.search_memory(app_name=APP, user_id="u1", query="What sport do I like?")
        assert texts(found) == [SPORT]
    finally:
        await adk.close()


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({"embedder": "no-such-embedder"}, ConfigurationError),
        ({"embedder": "openai:unknown-model"}, ConfigurationError),
        ({"embedder": "tests.embedders:NoSuchThing"}, ConfigurationError),
        ({"embedder": "json:dumps"}, ConfigurationError),
        ({"embedder": 42}, ConfigurationError),
        ({"embedder": Concepts(), "hybrid_weight": 1.5}, InvalidArgumentError),
        ({"embedder": Concepts(), "hybrid_weight": "half"}, InvalidArgumentError),
        ({"embedder": Concepts(), "hybrid_candidates": 0}, InvalidArgumentError),
    ],
)
async def test_bad_hybrid_settings_raise_typed_errors(
    sqlite_url: str, arguments: dict[str, Any], error: type[Exception]
) -> None:
    with pytest.raises(error):
        SqlMemoryService.from_url(sqlite_url, **arguments)
    with pytest.raises(ConfigurationError):
        Store.from_url(sqlite_url + "?embedder=no-such-embedder")


def test_memory_embed_backfills_from_the_command_line(sqlite_url: str) -> None:
    from typer.testing import CliRunner

    async def write() -> None:
        async with SqlMemoryService.from_url(sqlite_url) as memory:
            await memory.add_memory(
                app_name=APP, user_id="u1", memories=[fact(SPORT), fact(COLOUR)]
            )

    asyncio.run(write())
    runner = CliRunner()
    args = ["memory", "embed", "--url", sqlite_url]
    done = runner.invoke(cli_app, [*args, "--embedder", "tests.embedders:Concepts"])
    assert done.exit_code == 0, done.output
    assert "embedded 2 memories with test-concepts" in done.output
    again = runner.invoke(cli_app, [*args, "--embedder", "tests.embedders:Concepts"])
    assert "embedded 0 memories" in again.output
    none = runner.invoke(cli_app, args)
    assert none.exit_code == 1 and "no embedder" in none.output
    found = runner.invoke(
        cli_app,
        [
            "memory",
            "search",
            "What sport do I like?",
            "--app",
            APP,
            "--user",
            "u1",
            "--url",
            sqlite_url,
            "--embedder",
            "tests.embedders:Concepts",
        ],
    )
    assert found.exit_code == 0 and "badminton" in found.output
    with closing(sqlite3.connect(sqlite_url.removeprefix("sqlite:///"))) as conn:
        assert conn.execute("SELECT count(*) FROM sqlstore_memory_embeddings").fetchone() == (2,)


# -- PostgreSQL without pgvector ----------------------------------------------------


@pytest.mark.postgres
async def test_without_pgvector_search_is_lexical_with_one_warning(postgres_url: str) -> None:
    async with SqlMemoryService.from_url(postgres_url, embedder=Concepts()) as memory:
        with pytest.warns(VectorSearchWarning, match="pgvector"):
            await memory.add_memory(app_name=APP, user_id="u1", memories=[fact(SPORT)])
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # once per service
            assert texts(await search(memory, "badminton")) == [SPORT]
            meta = (await search(memory, "badminton")).memories[0].custom_metadata
            assert meta["vector_score"] is None and meta["lexical_score"] == meta["score"]
        assert await vector_rows(memory) == []
        with pytest.raises(ConfigurationError, match="no pgvector"):
            await memory.embed_missing()
