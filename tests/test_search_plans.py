"""Memory search of big users (issue 15): the per-user term counts kept by triggers
(migration 0006) and the search plan of ``adk_sqlstore.search.planner``, on an SQLite
file and PostgreSQL.

A search reads few memories, but its answer must be the exact BM25 top k, as reading
every match would give; each test recomputes that answer here from the stored rows.
"""

from __future__ import annotations

import importlib.util
import math
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from adk_sqlstore import Event, MemoryEntry, Session, SqlMemoryService
from adk_sqlstore.search import planner
from adk_sqlstore.search.analysis import analyzer
from adk_sqlstore.search.text import LENGTH_CLASSES, length_class

from .conftest import examples

APP = "plans"
MIGRATION = Path(__file__).parents[1] / "migrations" / "versions" / "0006_term_frequencies.py"


def entries(texts: list[str], timestamps: list[str] | None = None) -> list[MemoryEntry]:
    stamps = timestamps or [None] * len(texts)  # type: ignore[list-item]
    return [
        MemoryEntry(content={"parts": [{"text": t}]}, timestamp=s)
        for t, s in zip(texts, stamps, strict=True)
    ]


async def stored(memory: SqlMemoryService, user: str) -> list[tuple[int, str, float, str, int]]:
    """The user's memories as (pk, id, timestamp, terms, token_count)."""
    async with memory.engine.connect() as conn:
        rows = await conn.execute(
            text(
                "SELECT pk, id, timestamp, terms, token_count FROM sqlstore_memories"
                " WHERE app_name = :a AND user_id = :u"
            ),
            {"a": APP, "u": user},
        )
        return [
            (int(pk), str(mid), float(ts), str(t), int(dl)) for pk, mid, ts, t, dl in rows.all()
        ]


async def counts(memory: SqlMemoryService) -> dict[tuple[str, str, str], int]:
    async with memory.engine.connect() as conn:
        rows = await conn.execute(
            text("SELECT app_name, user_id, term, df FROM sqlstore_memory_terms")
        )
        return {(a, u, t): int(df) for a, u, t, df in rows.all()}


async def recounted(memory: SqlMemoryService) -> dict[tuple[str, str, str], int]:
    """The term counts as the triggers must keep them, counted from the memories."""
    async with memory.engine.connect() as conn:
        rows = await conn.execute(
            text("SELECT app_name, user_id, terms, token_count FROM sqlstore_memories")
        )
        found: Counter[tuple[str, str, str]] = Counter()
        for app, user, terms, count in rows.all():
            for term in [*terms.split(), f"~{length_class(count)}"]:
                found[(app, user, term)] += 1
    return dict(found)


def expected_top(
    rows: list[tuple[int, str, float, str, int]], query: set[str], k: int
) -> list[Any]:
    """BM25's top ``k`` (id, score) over ``rows`` for the (analysed) ``query`` terms:
    tf 1, statistics over these rows, scores rounded to 1e-9 half up, ties to the more
    recent memory, then the later row."""
    n = len(rows)
    avgdl = max(sum(r[4] for r in rows) / n, 1.0)
    df = Counter(t for r in rows for t in set(r[3].split()))
    idf = {t: math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in query if df[t]}
    order = sorted(idf, key=lambda t: (-idf[t], t))  # the order the backends add them in
    scored = []
    for pk, mid, ts, terms, dl in rows:
        held = set(terms.split())
        if held & set(idf):
            total = 0.0
            for t in order:
                total += idf[t] if t in held else 0.0
            norm = 1 - 0.75 + 0.75 * dl / avgdl
            score = math.floor(total * 2.2 / (1 + 1.2 * norm) * 1e9 + 0.5) / 1e9
            scored.append((score, ts, pk, mid))
    scored.sort(reverse=True)
    return [(mid, score) for score, _, _, mid in scored[:k]]


async def answer(memory: SqlMemoryService, user: str, query: str, k: int) -> list[Any]:
    found = await memory.search_memory(app_name=APP, user_id=user, query=query, limit=k)
    return [(m.id, m.custom_metadata["score"]) for m in found.memories]


# -- the term counts -------------------------------------------------------------------


def test_the_migration_keeps_the_packages_length_classes() -> None:
    """Migration 0006 froze a copy of the length classes its SQL computes; the package
    computes the same ones (a change to them needs a new migration)."""
    spec = importlib.util.spec_from_file_location("m0006", MIGRATION)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.LENGTH_CLASSES == LENGTH_CLASSES
    assert [length_class(n) for n in (0, 1, 8, 9, 10, 11, 127, 128, 10_000)] == [
        0, 1, 8, 9, 9, 11, 64, 128, 128,
    ]  # fmt: skip


async def test_term_counts_follow_every_kind_of_write(db_url: str) -> None:
    """After inserts, re-ingestion that changes and drops events, deletes by session and
    by id, a re-index in another language and forget_user, the counts equal a recount
    from the memories; a forgotten user has none left."""
    rng = random.Random(5)
    words = ["apple", "pear", "plum", "fig", "kiwi", "lime", "date", "sloe", "cherry"]

    def sentence() -> str:
        return " ".join(rng.choice(words) for _ in range(rng.randint(1, 14)))

    async with SqlMemoryService.from_url(db_url) as memory:
        await memory.add_memory(
            app_name=APP, user_id="a", memories=entries([sentence() for _ in range(40)])
        )
        await memory.add_memory(
            app_name=APP, user_id="b", memories=entries([sentence() for _ in range(25)])
        )
        events = [
            Event(
                id=f"e{n}",
                author="user",
                timestamp=1.7e9 + n,
                content={"parts": [{"text": sentence()}]},
            )
            for n in range(30)
        ]
        session = Session(id="s1", app_name=APP, user_id="a", events=events)
        await memory.add_session_to_memory(session)
        assert await counts(memory) == await recounted(memory)
        changed = [
            e.model_copy(update={"content": {"parts": [{"text": sentence()}]}}) for e in events[:10]
        ]
        await memory.add_session_to_memory(
            session.model_copy(update={"events": changed + events[20:]})
        )
        assert await counts(memory) == await recounted(memory)
        await memory.add_events_to_memory(
            app_name=APP, user_id="b", events=events[:5], session_id="s2"
        )
        await memory.delete_memories(app_name=APP, user_id="b", session_id="s2")
        found = await memory.search_memory(app_name=APP, user_id="a", query="plum")
        ids = [str(m.id) for m in found.memories]
        await memory.delete_memories(app_name=APP, user_id="a", memory_ids=ids[:4])
        assert await counts(memory) == await recounted(memory)
        await memory.reindex(language="simple")
        assert await counts(memory) == await recounted(memory)
        await memory.forget_user(app_name=APP, user_id="a")
        after = await counts(memory)
        assert after == await recounted(memory)
        assert after and not [key for key in after if key[1] == "a"]


# -- the exact top k -------------------------------------------------------------------


def _zipf_corpus(rng: random.Random, n: int) -> list[str]:
    """``n`` memories: two words in most of them (80%, 55%), a Zipf tail of 400 more,
    lengths from 1 to 60 terms (every length class to 48)."""
    tail = [f"w{i:03d}x" for i in range(400)]
    weights = [1 / (r + 1) ** 1.1 for r in range(len(tail))]
    docs = []
    for _ in range(n):
        size = rng.choice([1, 2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 30, 45, 60])
        words = set(rng.choices(tail, weights, k=size))
        words |= {"cmona"} if rng.random() < 0.8 else set()
        words |= {"cmonb"} if rng.random() < 0.55 else set()
        docs.append(" ".join(sorted(words)))
    return docs


@pytest.fixture(scope="module")
def big_corpus() -> tuple[list[str], list[str]]:
    rng = random.Random(11)
    docs = _zipf_corpus(rng, 6_000)
    # Many memories share a timestamp: ties go to the later row.
    stamps = [f"2026-01-0{1 + rng.randrange(3)}T00:00:00+00:00" for _ in docs]
    return docs, stamps


QUERIES = [
    "cmona",  # one word most memories hold
    "cmona cmonb",  # the user's two most frequent words
    "what about cmonb and cmona?",
    "cmona cmonb w000x w001x",  # only common words
    "w000x w001x w002x w003x w004x w005x",
    "cmona w399x",  # a rare word with a common one
    "w150x w151x cmonb",
    "w017x",
    "nothing of those",
]


async def test_a_big_users_search_is_the_exact_bm25_top_k(
    db_url: str, big_corpus: tuple[list[str], list[str]]
) -> None:
    """6,000 memories (past what one read holds, so the plan splits on terms and on
    length classes): for queries of the most frequent words, only common ones, rare
    with common, and none found, the ids and scores returned are BM25's top k, for k
    of 1, 10 and 60."""
    docs, stamps = big_corpus
    async with SqlMemoryService.from_url(db_url) as memory:
        await memory.add_memory(app_name=APP, user_id="big", memories=entries(docs, stamps))
        rows = await stored(memory, "big")
        for k in (1, 10, 60):
            for query in QUERIES:
                terms = set(analyzer().query_terms(query))
                expected = expected_top(rows, terms, k)
                assert await answer(memory, "big", query, k) == expected, (k, query)


@st.composite
def small_corpora(draw: st.DrawFn) -> tuple[list[str], list[str], list[str]]:
    vocabulary = ["aaq", "bbq", "ccq", "ddq", "eeq", "ffq"]
    shares = draw(st.lists(st.floats(0.02, 0.95), min_size=6, max_size=6))
    rng = random.Random(draw(st.integers(0, 2**32)))
    docs = []
    for _ in range(draw(st.integers(1, 200))):
        words = [w for w, p in zip(vocabulary, shares, strict=True) if rng.random() < p]
        words += [f"pad{rng.randrange(40)}q" for _ in range(rng.choice([0, 0, 1, 3, 9, 20]))]
        docs.append(" ".join(words) or "pad0q")
    stamps = [f"2026-01-0{1 + rng.randrange(2)}T00:00:00+00:00" for _ in docs]
    query = draw(st.lists(st.sampled_from(vocabulary), min_size=1, max_size=5, unique=True))
    return docs, stamps, query


@settings(
    max_examples=examples(40),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=small_corpora(), k=st.sampled_from([1, 3, 10, 30]))
async def test_every_plan_gives_the_exact_top_k(
    db_url: str, monkeypatch: pytest.MonkeyPatch, case: Any, k: int
) -> None:
    """With the plan made to split any node of more than 4 expected memories, random
    corpora (words held by 2% to 95% of the memories, lengths of 1 to 26, tied
    timestamps) still give BM25's exact top k: every split, bound and prune is taken."""
    monkeypatch.setattr(planner, "READ_ROWS", 4)
    docs, stamps, query = case
    user = f"u{random.randrange(10**9)}"
    async with SqlMemoryService.from_url(db_url) as memory:
        await memory.add_memory(app_name=APP, user_id=user, memories=entries(docs, stamps))
        terms = set(analyzer().query_terms(" ".join(query)))
        expected = expected_top(await stored(memory, user), terms, k)
        assert await answer(memory, user, " ".join(query), k) == expected


# -- the plan alone, over memories in a list ---------------------------------------------


def _plan_case(
    docs: list[tuple[int, float, frozenset[str], int]],
    query: list[str],
    k: int,
    round_trips: bool = False,
) -> tuple[list[Any], list[Any], int]:
    """The planner's answer over ``docs`` (pk, timestamp, terms, length) through a
    reader with the SQL's semantics, and the brute-force answer, and the reads made."""
    import asyncio

    from adk_sqlstore.search.lexical import ReadRow, Term, rounded, weigh

    n = len(docs)
    avgdl = max(sum(d[3] for d in docs) / n, 1.0)
    classes = {d[0]: length_class(d[3]) for d in docs}
    postings: dict[str, list[tuple[int, float, frozenset[str], int]]] = {}
    for d in docs:
        for t in d[2]:
            postings.setdefault(t, []).append(d)
    terms = weigh([Term(t, len(postings.get(t, []))) for t in query], n)

    def score(d: tuple[int, float, frozenset[str], int]) -> float:
        total = 0.0
        for t in terms:
            total += t.idf if t.text in d[2] else 0.0
        return rounded(total * 2.2 / (1 + 1.2 * (0.25 + 0.75 * d[3] / avgdl)))

    reads = 0

    async def read(wave: Any, limit: int) -> list[Any]:
        nonlocal reads
        rows = []
        for r in wave:
            reads += 1
            held = [terms[i].text for i in r.held]
            others = [t.text for i, t in enumerate(terms) if i not in r.absent]
            absent = {terms[i].text for i in r.absent}
            found = postings[held[0]] if held else [d for t in others for d in postings[t]]
            matches = {
                d
                for d in found
                if classes[d[0]] in r.classes and all(h in d[2] for h in held) and not absent & d[2]
            }
            best = sorted(((score(d), d[1], d[0]) for d in matches), reverse=True)[:limit]
            rows += [ReadRow(*b) for b in best]
        return rows

    per_class = Counter(classes.values())
    sizes = [per_class[low] for low in LENGTH_CLASSES]
    got = (
        asyncio.run(planner.rank(terms, n, avgdl, sizes, k, read, round_trips=round_trips))
        if terms
        else []
    )
    names = {t.text for t in terms}
    expected = sorted(((score(d), d[1], d[0]) for d in docs if names & d[2]), reverse=True)
    return got, expected[:k], reads


@st.composite
def listed_corpora(draw: st.DrawFn) -> tuple[list[Any], list[str], int]:
    vocabulary = [f"t{i}" for i in range(draw(st.integers(1, 10)))]
    shares = [draw(st.sampled_from([0.0, 0.001, 0.02, 0.3, 0.7, 0.99, 1.0])) for _ in vocabulary]
    rng = random.Random(draw(st.integers(0, 2**32)))
    docs = []
    for pk in range(draw(st.integers(1, 1500))):
        terms = {w for w, p in zip(vocabulary, shares, strict=True) if rng.random() < p}
        length = len(terms) + rng.choice([0, 0, 1, 2, 5, 12, 40, 200])
        docs.append((pk, float(rng.randrange(3)), frozenset(terms), max(length, 1)))
    query = draw(st.lists(st.sampled_from(vocabulary), min_size=1, unique=True))
    return docs, query, draw(st.sampled_from([1, 2, 10, 50]))


@settings(max_examples=examples(300), deadline=None)
@given(
    case=listed_corpora(),
    read_rows=st.sampled_from([1, 30, 300]),
    round_trips=st.booleans(),
)
def test_the_plan_is_the_exact_top_k_whatever_the_shares(
    case: Any, read_rows: int, round_trips: bool
) -> None:
    """Words held by none, a few, most or all memories, lengths across every class, tied
    timestamps, a plan splitting nodes of 1, 30 or 300 expected memories (three times
    that, in waves of k, where each wave is a round trip): the top k is the
    brute-force one, in order."""
    docs, query, k = case
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(planner, "READ_ROWS", read_rows)
        got, expected, _ = _plan_case(docs, query, k, round_trips)
    assert got == expected
