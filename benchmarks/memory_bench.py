"""Memory figures: ingestion throughput and search latency at scale.

Text is generated: pronounceable words drawn with a Zipf distribution (a few very
common words, a long tail of rare ones, as in conversation), so that posting lists are
as skewed as real ones. Queries mix stop words and 3-6 drawn words.
"""

from __future__ import annotations

import random
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import make_url

from adk_sqlstore import Event, MemoryEntry, Session, SqlMemoryService

from .contenders import sqlspec_memory
from .suite import Figure

APP = "bench-memory"
_SYLLABLES = [
    "ka",
    "lo",
    "mi",
    "ne",
    "ru",
    "ta",
    "vo",
    "si",
    "pe",
    "da",
    "qu",
    "zo",
    "ri",
    "ba",
    "te",
    "ul",
    "om",
    "ar",
    "en",
    "is",
]
_STOP = ["what", "did", "i", "the", "a", "to", "about", "my", "is", "do", "when", "you"]


@dataclass(frozen=True)
class MemorySize:
    ingest_events: int
    long_sessions: tuple[int, ...]  # one session of each length, ingested whole
    scales: tuple[tuple[int, int, int], ...]  # (users, memories per user, heavy user's)
    queries: int


MEMORY_SIZES = {
    "small": MemorySize(
        ingest_events=500,
        long_sessions=(1_000, 5_000),
        scales=((100, 10, 0), (100, 90, 1_000)),
        queries=40,
    ),
    "full": MemorySize(
        ingest_events=10_000,
        long_sessions=(20_000, 100_000),
        scales=((1_000, 10, 0), (1_000, 900, 100_000)),
        queries=200,
    ),
}


class Corpus:
    def __init__(self, seed: int = 7, vocabulary: int = 20_000) -> None:
        self.rng = random.Random(seed)
        words = set()
        while len(words) < vocabulary:
            words.add("".join(self.rng.choice(_SYLLABLES) for _ in range(self.rng.randint(2, 4))))
        self.words = sorted(words)
        weights = [1 / (rank + 1) ** 1.07 for rank in range(vocabulary)]
        total = sum(weights)
        self.cumulative = []
        acc = 0.0
        for w in weights:
            acc += w / total
            self.cumulative.append(acc)

    def word(self) -> str:
        import bisect

        return self.words[
            min(bisect.bisect(self.cumulative, self.rng.random()), len(self.words) - 1)
        ]

    def sentence(self) -> str:
        return " ".join(self.word() for _ in range(self.rng.randint(6, 18)))

    def query(self) -> str:
        words = [self.word() for _ in range(self.rng.randint(3, 6))]
        words += self.rng.sample(_STOP, 3)
        self.rng.shuffle(words)
        return " ".join(words) + "?"


def _percentiles(values: list[float]) -> tuple[float, float]:
    q = statistics.quantiles(values, n=100, method="inclusive")
    return q[49], q[94]


def _core_sessions(corpus: Corpus, user: str, events: int, per_session: int = 50) -> list[Session]:
    sessions = []
    for start in range(0, events, per_session):
        evs = [
            Event(
                author="user" if n % 2 else "assistant",
                timestamp=1.7e9 + n,
                content={"role": "user", "parts": [{"text": corpus.sentence()}]},
            )
            for n in range(start, min(start + per_session, events))
        ]
        sessions.append(Session(id=str(uuid.uuid4()), app_name=APP, user_id=user, events=evs))
    return sessions


def _adk_sessions(sessions: list[Session]) -> list[Any]:
    from google.adk.events import Event as AdkEvent
    from google.adk.sessions import Session as AdkSession

    return [
        AdkSession(
            id=s.id,
            app_name=s.app_name,
            user_id=s.user_id,
            events=[AdkEvent.model_validate(e.model_dump()) for e in s.events],
        )
        for s in sessions
    ]


async def ingest_throughput(
    url: str, url_for_scale: Callable[[int], Any], corpus: Corpus, size: MemorySize
) -> Figure:
    """events/s for add_session_to_memory: ours, ADK's two local services, and
    sqlspec's on a fresh database of the run's backend. Our schema is migrated before
    the timer starts (with ``--skip-sessions`` the database is new, and the migrations
    took 0.4-1.2 s of a 3-5 s figure), as sqlspec's tables are made before its timer;
    ADK's services make theirs on first use (a few CREATE ... IF NOT EXISTS)."""
    from google.adk.memory import InMemoryMemoryService
    from google.adk.memory._sqlite_memory_service import SqliteMemoryService

    fig = Figure("ingest", "add_session_to_memory", "events/s", True)
    result = fig.values
    sessions = _core_sessions(corpus, "ingest", size.ingest_events)
    adk = _adk_sessions(sessions)
    async with SqlMemoryService.from_url(url, auto_migrate=True) as memory:
        await memory.store.ensure_schema()  # made before the timer, as sqlspec's tables are
        start = time.perf_counter()
        for session in sessions:
            await memory.add_session_to_memory(session)
        result["core"] = size.ingest_events / (time.perf_counter() - start)
    in_memory = InMemoryMemoryService()
    start = time.perf_counter()
    for adk_session in adk:
        await in_memory.add_session_to_memory(adk_session)
    result["ADK InMemoryMemoryService"] = size.ingest_events / (time.perf_counter() - start)
    with tempfile.TemporaryDirectory() as folder:
        sqlite_memory = SqliteMemoryService(str(Path(folder) / "adk_memory.db"))
        start = time.perf_counter()
        for adk_session in adk:
            await sqlite_memory.add_session_to_memory(adk_session)
        result["ADK SqliteMemoryService"] = size.ingest_events / (time.perf_counter() - start)

    async def peer() -> float:
        async with url_for_scale(0) as peer_url, sqlspec_memory(peer_url) as peer_memory:
            start = time.perf_counter()
            for adk_session in adk:
                await peer_memory.service.add_session_to_memory(adk_session)
            return size.ingest_events / (time.perf_counter() - start)

    value = await _peer([fig], peer())
    if value is not None:
        result["sqlspec"] = value
    return fig


async def _peer(figures: list[Figure], job: Awaitable[Any], name: str = "sqlspec") -> Any:
    """``job``'s result, or None when it raised: then ``name`` failed ``figures``."""
    try:
        return await job
    except Exception as exc:  # a peer failing is a result, not a crash
        for fig in figures:
            fig.extra[name] = f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:80]}"
        return None


async def _load_scale(
    memory: SqlMemoryService,
    corpus: Corpus,
    users: int,
    per_user: int,
    heavy: int,
    progress: Callable[[str], None],
) -> None:
    for n in range(users):
        await memory.add_memory(
            app_name=APP,
            user_id=f"user-{n}",
            memories=[
                MemoryEntry(content={"parts": [{"text": corpus.sentence()}]}, timestamp=None)
                for _ in range(per_user)
            ],
        )
        if n % 100 == 99:
            progress(f"memories: {n + 1:,} of {users:,} users loaded")
    for start in range(0, heavy, 2_000):
        await memory.add_memory(
            app_name=APP,
            user_id="heavy",
            memories=[
                MemoryEntry(content={"parts": [{"text": corpus.sentence()}]})
                for _ in range(min(2_000, heavy - start))
            ],
        )


async def _settle(memory: SqlMemoryService) -> None:
    """What autovacuum would do after a bulk load, before the latencies are taken:
    PostgreSQL's VACUUM ANALYZE (planner statistics, visibility map), SQLite's ANALYZE."""
    engine = memory.engine
    if engine.dialect.name == "postgresql":
        async with engine.connect() as conn:
            autocommit = await conn.execution_options(isolation_level="AUTOCOMMIT")
            await autocommit.execute(text("VACUUM ANALYZE sqlstore_memories"))
    else:
        async with engine.begin() as conn:
            await conn.execute(text("ANALYZE"))


async def _search_latencies(
    search: Callable[[str, str], Any], corpus: Corpus, users: int, queries: int, heavy: bool
) -> tuple[list[float], list[float]]:
    normal, heavy_times = [], []
    for _ in range(queries):
        user = f"user-{corpus.rng.randrange(users)}"
        start = time.perf_counter()
        await search(user, corpus.query())
        normal.append((time.perf_counter() - start) * 1000)
        if heavy:
            start = time.perf_counter()
            await search("heavy", corpus.query())
            heavy_times.append((time.perf_counter() - start) * 1000)
    return normal, heavy_times


async def long_session(url_for_scale: Callable[[int], Any], corpus: Corpus, events: int) -> Figure:
    """events/s for add_session_to_memory of one session of ``events`` events (on a
    fresh database): the rate stays the same whatever the length when ingestion is
    linear."""
    (session,) = _core_sessions(corpus, "long", events, per_session=events)
    async with (
        url_for_scale(events) as fresh,
        SqlMemoryService.from_url(fresh, auto_migrate=True) as memory,
    ):
        await memory.store.ensure_schema()  # the migrations are not ingestion
        start = time.perf_counter()
        await memory.add_session_to_memory(session)
        rate = events / (time.perf_counter() - start)
    label = f"add_session_to_memory, one {events:,}-event session"
    return Figure(f"ingest_long_{events}", label, "events/s", True, {"core": rate})


async def run_memory(
    url_for_scale: Callable[[int], Any],
    url: str,
    size: MemorySize,
    progress: Callable[[str], None],
    notes: list[str] | None = None,
) -> list[Figure]:
    """The memory figures; ``url_for_scale`` gives a fresh database per scale (and one
    for each peer). How many results each store returned goes to ``notes``."""
    notes = [] if notes is None else notes
    corpus = Corpus()
    figures = []
    progress("memory: ingestion throughput")
    figures.append(await ingest_throughput(url, url_for_scale, corpus, size))
    for events in size.long_sessions:
        progress(f"memory: one {events:,}-event session")
        figures.append(await long_session(url_for_scale, corpus, events))
    fallbacks: list[str] = []
    for users, per_user, heavy in size.scales:
        total = users * per_user + heavy
        hits: dict[str, list[int]] = {"core": []}
        async with (
            url_for_scale(total) as scale_url,
            SqlMemoryService.from_url(scale_url, auto_migrate=True) as memory,
        ):
            progress(f"memory: loading {total:,} memories")
            await _load_scale(memory, corpus, users, per_user, heavy, progress)
            await _settle(memory)
            await memory.search_memory(app_name=APP, user_id="user-0", query="warm up")

            async def ours(user: str, query: str, memory: SqlMemoryService = memory) -> Any:
                return await memory.search_memory(app_name=APP, user_id=user, query=query)

            normal, heavy_times = await _search_latencies(
                _counting(ours, hits["core"]), corpus, users, size.queries, heavy > 0
            )
        p50, p95 = _percentiles(normal)
        label = f"search_memory at {total:,} memories ({users:,} users)"
        fig_p50 = Figure(f"search50_{total}", label + ", p50", "ms", False, {"core": p50})
        fig_p95 = Figure(f"search95_{total}", label + ", p95", "ms", False, {"core": p95})
        scale_figures = [fig_p50, fig_p95]
        if heavy:
            h50, h95 = _percentiles(heavy_times)
            fig_h = Figure(
                f"heavy95_{total}",
                f"search_memory, user with {heavy:,} memories, p95",
                "ms",
                False,
                {"core": h95},
            )
            fig_h.label += f" (p50 {h50:.1f} ms)"
            scale_figures.append(fig_h)
        if total <= 20_000:  # ADK's services hold all of it in Python or re-read it
            for name, (a50, a95) in (
                await _adk_search(corpus, users, per_user, size.queries, hits)
            ).items():
                fig_p50.values[name] = a50
                fig_p95.values[name] = a95
        progress(f"memory: sqlspec, loading {total:,} memories")
        hits["sqlspec"] = []
        latencies = await _peer(
            scale_figures,
            _sqlspec_search(
                url_for_scale, corpus, (users, per_user, heavy), size.queries, hits, fallbacks
            ),
        )
        if latencies is None:
            del hits["sqlspec"]
        else:
            (fig_p50.values["sqlspec"], fig_p95.values["sqlspec"]), heavy_sqlspec = latencies
            if heavy:
                fig_h.values["sqlspec"] = heavy_sqlspec[1]
                fig_h.label += f" (sqlspec p50 {heavy_sqlspec[0]:.1f} ms)"
        figures += scale_figures
        notes.append(
            f"results per search at {total:,} memories (mean over the timed searches of"
            f" users with {per_user:,} memories): "
            + ", ".join(f"{name} {statistics.fmean(n):.1f}" for name, n in hits.items() if n)
        )
    notes += _sqlspec_memory_notes(url, fallbacks)
    return figures


def _counting(search: Callable[[str, str], Any], hits: list[int]) -> Callable[[str, str], Any]:
    """``search``, keeping the number of memories each call returned in ``hits``."""

    async def counted(user: str, query: str) -> Any:
        response = await search(user, query)
        hits.append(len(response.memories))
        return response

    return counted


async def _sqlspec_search(
    url_for_scale: Callable[[int], Any],
    corpus: Corpus,
    scale: tuple[int, int, int],
    queries: int,
    hits: dict[str, list[int]],
    fallbacks: list[str],
) -> tuple[tuple[float, float], tuple[float, float]]:
    """sqlspec's memory service on a fresh database of the run's backend, loaded the
    fastest way its API allows (``add_memory``, a user's memories in one call, the
    heavy user's 2,000 per call: one executemany on SQLite, one INSERT per row in one
    transaction on PostgreSQL): (p50, p95) for the users, and for the heavy one."""
    from google.adk.memory.memory_entry import MemoryEntry as AdkEntry
    from google.genai import types

    users, per_user, heavy = scale

    def entries(count: int) -> list[Any]:
        return [
            AdkEntry(content=types.Content(parts=[types.Part(text=corpus.sentence())]))
            for _ in range(count)
        ]

    async with url_for_scale(users * per_user + heavy) as url, sqlspec_memory(url) as peer:
        service = peer.service
        for n in range(users):
            await service.add_memory(app_name=APP, user_id=f"user-{n}", memories=entries(per_user))
        for start in range(0, heavy, 2_000):
            await service.add_memory(
                app_name=APP, user_id="heavy", memories=entries(min(2_000, heavy - start))
            )
        await peer.settle()
        await service.search_memory(app_name=APP, user_id="user-0", query="warm up")
        peer.warnings.clear()

        async def search(user: str, query: str) -> Any:
            return await service.search_memory(app_name=APP, user_id=user, query=query)

        normal, heavy_times = await _search_latencies(
            _counting(search, hits["sqlspec"]), corpus, users, queries, heavy > 0
        )
        if peer.warnings:
            fallbacks.append(
                f"{len(peer.warnings)} of {queries * (2 if heavy else 1)} searches at"
                f" {users * per_user + heavy:,} memories: {peer.warnings[0]}"
            )
    return _percentiles(normal), (_percentiles(heavy_times) if heavy else (0.0, 0.0))


def _sqlspec_memory_notes(url: str, fallbacks: list[str]) -> list[str]:
    """What sqlspec's memory search does on this backend (read in its source), and
    the fallbacks its store logged in this run."""
    if make_url(url).get_backend_name() == "postgresql":
        return [
            "sqlspec memory (PostgreSQL, memory_use_fts on): search_memory runs"
            " (adapters/asyncpg/adk/store.py, AsyncpgADKMemoryStore.search_entries)"
            " SELECT * FROM adk_memory WHERE app_name AND (user's or app-scoped rows) AND"
            " to_tsvector('english', content_text) @@ plainto_tsquery('english', query)"
            " ORDER BY timestamp DESC LIMIT 20: a row must hold every query word that is"
            " not an English stop word (plainto_tsquery ANDs them), with a GIN index on"
            " the to_tsvector expression; results are the newest matches, not ranked"
            " by relevance (no ts_rank). Its table always has an embedding VECTOR(768)"
            " column and, by default, an HNSW index on it (_memory_table_ddl), so it"
            " needs pgvector even for text search. add_session_to_memory inserts one"
            " row per statement (INSERT ... ON CONFLICT (event_id) DO NOTHING) in one"
            " transaction.",
        ]
    notes = [
        "sqlspec memory (SQLite, memory_use_fts on): search_memory runs"
        " (adapters/aiosqlite/adk/store.py, AiosqliteADKMemoryStore.search_entries)"
        " SELECT m.* FROM adk_memory m JOIN adk_memory_fts fts ON m.rowid = fts.rowid"
        " WHERE app_name AND (user's or app-scoped rows) AND fts.content_text MATCH query"
        " ORDER BY m.timestamp DESC LIMIT 20, the query passed to FTS5 as it is: a row"
        " must hold every word, stop words included (FTS5 ANDs bare words), and results"
        " are the newest matches, not ranked (bm25 is not used). When MATCH raises (in"
        " FTS5's query syntax a '?', an apostrophe, an unclosed quote, a '-' or a ':' in"
        " a word raise, tried on SQLite 3.40), it logs a warning and runs"
        " content_text LIKE '%query%' instead: the whole query as one substring, whose"
        " plan (EXPLAIN QUERY PLAN, SQLite 3.40) is SCAN adk_memory, every user's rows."
        " add_session_to_memory is one executemany of INSERT OR IGNORE (FTS5 triggers"
        " index the text).",
    ]
    notes += [f"sqlspec memory fell back from FTS5 to LIKE in this run: {f}" for f in fallbacks]
    return notes


async def _adk_search(
    corpus: Corpus, users: int, per_user: int, queries: int, hits: dict[str, list[int]]
) -> dict[str, tuple[float, float]]:
    """ADK's InMemoryMemoryService and SqliteMemoryService on the same data."""
    from google.adk.memory import InMemoryMemoryService
    from google.adk.memory._sqlite_memory_service import SqliteMemoryService

    out: dict[str, tuple[float, float]] = {}
    with tempfile.TemporaryDirectory() as folder:
        for name, service in [
            ("ADK InMemoryMemoryService", InMemoryMemoryService()),
            ("ADK SqliteMemoryService", SqliteMemoryService(str(Path(folder) / "m.db"))),
        ]:
            for n in range(users):
                for adk_session in _adk_sessions(_core_sessions(corpus, f"user-{n}", per_user)):
                    await service.add_session_to_memory(adk_session)

            async def search(user: str, query: str, service: Any = service) -> Any:
                return await service.search_memory(app_name=APP, user_id=user, query=query)

            hits[name] = []
            normal, _ = await _search_latencies(
                _counting(search, hits[name]), corpus, users, queries, False
            )
            out[name] = _percentiles(normal)
    return out
