"""The writers of one user that ``tests/test_forget_races.py`` races against each other,
in this process or in worker processes (spawned: this module is what they import).

Each round has a user of its own with two sessions, memories, a fact and two
artifacts (:func:`set_up`); then two or three writers run at once on it, each after a
random pause of up to 3 ms, and :func:`check` compares what is left with what the
store promises (``forget_user``'s docstring, ``docs/architecture.md`` "Locks").
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import logging
import random
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from sqlalchemy import text

from adk_sqlstore import (
    AlreadyExistsError,
    ConcurrencyConflictError,
    Event,
    EventActions,
    MemoryEntry,
    SessionNotFoundError,
    SqlMemoryService,
    SqlSessionService,
    StaleSessionError,
)
from adk_sqlstore.artifacts import ArtifactStorage, artifact_key
from adk_sqlstore.search.text import length_class

from .embedders import Concepts

OPS = (
    "append",
    "create_session",
    "delete_session",
    "add_session_to_memory",
    "ingest_session",
    "add_events",
    "add_memory",
    "delete_memories",
    "save_artifact",
    "delete_artifact",
    "forget_user",
    "prune",
    "reindex",
    "embed_missing",
)
"""The writers of a user's rows (issue 32's list): sessions, every ingestion path,
facts, artifacts, forgetting, retention, re-indexing and the embedding backfill."""

CREATORS = ("create_session", "add_memory", "add_events", "save_artifact")
"""Writers that make something new for the user, which may rightly land after a
``forget_user`` (new data); every other writer works on what the user had, and after
``forget_user`` finds nothing or fails with ``SessionNotFoundError``."""

EXPECTED = frozenset(
    {"ok", "gone", "SessionNotFoundError", "StaleSessionError", "AlreadyExistsError"}
)
"""Outcomes a writer may have: done, nothing to do (its session gone), or the typed
errors of a race with a deletion, another append or another create of the id. A
streamed save racing ``forget_user`` may also fail with ``ConcurrencyConflictError``
(its chunks went with the user: "stream forgotten")."""

OP_BYTES = b"written by a racing save " * 40
SETUP_BYTES = b"saved before the round " * 40


def schedule(rounds: int, seed: int) -> list[tuple[str, ...]]:
    """``rounds`` combinations of writers: every pair (a writer with itself too) and
    every triple of different writers once, in random order, as far as ``rounds``
    reaches, then random ones."""
    rng = random.Random(seed)
    combos: list[tuple[str, ...]] = [
        *itertools.combinations_with_replacement(OPS, 2),
        *itertools.combinations(OPS, 3),
    ]
    rng.shuffle(combos)
    while len(combos) < rounds:
        combos.append(tuple(rng.choice(OPS) for _ in range(rng.choice((2, 3)))))
    return combos[:rounds]


@dataclass(frozen=True)
class Round:
    """One round's user and the addresses its writers work on."""

    number: int
    app_name: str
    user_id: str

    @classmethod
    def new(cls, number: int, tag: str) -> Round:
        return cls(number, f"race-{tag}-{number}", f"user-{number}")

    @property
    def key(self) -> dict[str, Any]:
        return {"app_name": self.app_name, "user_id": self.user_id}


class _Retries(logging.Handler):
    """Counts the transactions the store ran again because the database ended them (a
    deadlock, a serialization failure: ``failures.conflict_error``'s message), and
    apart those that found their user forgotten while they waited for the user lock
    (a race the lock order resolves, not a deadlock)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.count = 0
        self.forgotten = 0

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message.startswith("running a transaction again"):
            if "the database ended the transaction" in message:
                self.count += 1
            else:
                self.forgotten += 1


def _turn(text: str, **delta: Any) -> Event:
    return Event(
        author="user",
        content={"role": "user", "parts": [{"text": text}]},
        actions=EventActions(state_delta=delta),
    )


class Executor:
    """A process's services on the database, and the writers run with them."""

    def __init__(self, url: str) -> None:
        self.sessions = SqlSessionService.from_url(url)
        self.memory = SqlMemoryService(self.sessions.store)
        # The test server has no pgvector: there, memories are never embedded (and
        # embedding backfills have nothing to do); SQLite and MySQL keep vectors.
        self.vectors = not url.startswith("postgresql")
        embedder = Concepts() if self.vectors else None
        self.hybrid = SqlMemoryService(self.sessions.store, embedder=embedder)
        self.artifacts = ArtifactStorage(self.sessions.store)
        self.retries = _Retries()
        logger = logging.getLogger("adk_sqlstore.store")
        logger.addHandler(self.retries)
        logger.setLevel(logging.DEBUG)

    async def close(self) -> None:
        logging.getLogger("adk_sqlstore.store").removeHandler(self.retries)
        await self.sessions.close()

    async def run(
        self, op: str, race: Round, delay: float, seed: int
    ) -> tuple[str, str, float, float, int]:
        """Run writer ``op`` after ``delay`` seconds: (op, outcome, start, end, retries),
        times on the machine's monotonic clock (shared by its processes)."""
        await asyncio.sleep(delay)
        retries, start = self.retries.count, time.monotonic()
        try:
            outcome = await getattr(self, f"_{op}")(race, random.Random(seed))
        except (SessionNotFoundError, StaleSessionError, AlreadyExistsError) as exc:
            outcome = type(exc).__name__
        except ConcurrencyConflictError as exc:  # save_stream's docstring: its user forgotten
            streamed = "streamed in" in str(exc)
            outcome = "stream forgotten" if streamed else f"unexpected {type(exc).__name__}: {exc}"
        except Exception as exc:  # reported, and the test fails on it
            outcome = f"unexpected {type(exc).__name__}: {exc}"
        return op, outcome, start, time.monotonic(), self.retries.count - retries

    async def _session(self, race: Round, name: str) -> Any:
        return await self.sessions.get_session(**race.key, session_id=name)

    async def _append(self, race: Round, rng: random.Random) -> str:
        session = await self._session(race, rng.choice(("s1", "s2")))
        if session is None:
            return "gone"
        await self.sessions.append_event(
            session, _turn(f"appended turn {rng.random()}", n=99, **{"user:appended": 1})
        )
        return "ok"

    async def _create_session(self, race: Round, rng: random.Random) -> str:
        await self.sessions.create_session(
            **race.key, session_id="s-new", state={"k": 1, "user:x": 1}
        )
        return "ok"

    async def _delete_session(self, race: Round, rng: random.Random) -> str:
        await self.sessions.delete_session(**race.key, session_id="s2")
        return "ok"

    async def _add_session_to_memory(self, race: Round, rng: random.Random) -> str:
        session = await self._session(race, "s1")
        if session is None:
            return "gone"
        memory = rng.choice((self.memory, self.hybrid))
        await memory.add_session_to_memory(session)
        return "ok"

    async def _ingest_session(self, race: Round, rng: random.Random) -> str:
        await rng.choice((self.memory, self.hybrid)).ingest_session(**race.key, session_id="s2")
        return "ok"

    async def _add_events(self, race: Round, rng: random.Random) -> str:
        event = _turn("an event added by itself")
        event.id = "ev-1"
        await rng.choice((self.memory, self.hybrid)).add_events_to_memory(
            **race.key, session_id="s-events", events=[event]
        )
        return "ok"

    async def _add_memory(self, race: Round, rng: random.Random) -> str:
        fact = MemoryEntry(id="fact-2", content={"parts": [{"text": "a racing fact"}]})
        await rng.choice((self.memory, self.hybrid)).add_memory(**race.key, memories=[fact])
        return "ok"

    async def _delete_memories(self, race: Round, rng: random.Random) -> str:
        await self.memory.delete_memories(**race.key, session_id="s1")
        return "ok"

    async def _save_artifact(self, race: Round, rng: random.Random) -> str:
        name, session = rng.choice((("user:notes.txt", None), ("photo.bin", "s1")))
        key = artifact_key(race.app_name, race.user_id, name, session)
        if rng.random() < 0.5:
            await self.artifacts.save(
                key, part={}, data=OP_BYTES, mime_type=None, custom_metadata=None
            )
        else:
            await self.artifacts.save_stream(
                key,
                [OP_BYTES[:100], OP_BYTES[100:]],
                part={},
                mime_type=None,
                custom_metadata=None,
            )
        return "ok"

    async def _delete_artifact(self, race: Round, rng: random.Random) -> str:
        await self.artifacts.delete(
            artifact_key(race.app_name, race.user_id, "user:notes.txt", None)
        )
        return "ok"

    async def _forget_user(self, race: Round, rng: random.Random) -> str:
        await rng.choice((self.sessions.forget_user, self.memory.forget_user))(**race.key)
        return "ok"

    async def _prune(self, race: Round, rng: random.Random) -> str:
        await self.sessions.prune(
            older_than=0, app_name=race.app_name, with_memories=rng.random() < 0.5
        )
        return "ok"

    async def _reindex(self, race: Round, rng: random.Random) -> str:
        await self.memory.reindex(
            app_name=race.app_name, language=rng.choice(("german", "english"))
        )
        return "ok"

    async def _embed_missing(self, race: Round, rng: random.Random) -> str:
        if self.vectors:
            await self.hybrid.embed_missing(app_name=race.app_name)
        return "ok"


async def set_up(executor: Executor, race: Round) -> None:
    """The user as a round finds it: sessions s1 and s2 with three turns each (session
    and ``user:`` keys), both ingested, a fact, a user artifact and a session one."""
    for name in ("s1", "s2"):
        session = await executor.sessions.create_session(**race.key, session_id=name)
        for n in range(3):
            await executor.sessions.append_event(
                session, _turn(f"{name} turn {n} about lunch", n=n, **{"user:k": n})
            )
        await executor.memory.add_session_to_memory(session)
    await executor.memory.add_memory(
        **race.key, memories=[MemoryEntry(id="fact-1", content={"parts": [{"text": "a fact"}]})]
    )
    for name, session_id in (("user:notes.txt", None), ("photo.bin", "s1")):
        await executor.artifacts.save(
            artifact_key(race.app_name, race.user_id, name, session_id),
            part={},
            data=SETUP_BYTES,
            mime_type=None,
            custom_metadata=None,
        )


async def _rows(executor: Executor, race: Round, sql: str) -> list[Any]:
    async with executor.sessions.store.engine.connect() as conn:
        return list((await conn.execute(text(sql), race.key)).all())


_MINE = "app_name = :app_name AND user_id = :user_id"


async def check(
    executor: Executor, race: Round, results: list[tuple[str, str, float, float, int]]
) -> list[str]:
    """What is wrong with the user's rows after a round (nothing: an empty list)."""
    forgetting = any(op == "forget_user" for op, *_ in results)
    problems = [
        f"{op}: {outcome}"
        for op, outcome, *_ in results
        if outcome not in EXPECTED
        and not (op == "save_artifact" and outcome == "stream forgotten" and forgetting)
    ]
    problems += await _consistent(executor, race)
    forgot = [r for r in results if r[0] == "forget_user" and r[1] == "ok"]
    if forgot:
        problems += await _forgotten(executor, race, results, start=min(r[2] for r in forgot))
    return problems


async def _consistent(executor: Executor, race: Round) -> list[str]:
    """Whatever ran: sessions whole, statistics exact, artifacts whole, the user's row
    there while they have anything."""
    problems = []
    listed = await executor.sessions.list_sessions(**race.key)
    for summary in listed.sessions:
        session = await executor.sessions.get_session(**race.key, session_id=summary.id)
        if session is None or session.revision != len(session.events):
            problems.append(f"session {summary.id}: revision is not its event count")
    memories = await _rows(
        executor, race, f"SELECT terms, token_count FROM sqlstore_memories WHERE {_MINE}"
    )
    stats = await _rows(
        executor,
        race,
        f"SELECT doc_count, lexeme_count FROM sqlstore_memory_stats WHERE {_MINE}",
    )
    counted = (len(memories), sum(int(n) for _, n in memories))
    if (tuple(stats[0]) if stats else (0, 0)) != counted:
        problems.append(f"statistics {stats} but the memories count {counted}")
    terms = Counter(
        term for t, n in memories for term in [*str(t).split(), f"~{length_class(int(n))}"]
    )
    stored = await _rows(
        executor, race, f"SELECT term, df FROM sqlstore_memory_terms WHERE {_MINE}"
    )
    if dict(terms) != {str(t): int(df) for t, df in stored}:
        problems.append("term frequencies differ from a recount of the memories")
    problems += await _artifacts_whole(executor, race)
    users = await _rows(executor, race, f"SELECT 1 FROM sqlstore_users WHERE {_MINE}")
    if not users and (listed.sessions or memories or await _user_state(executor, race)):
        problems.append("the user has rows but no sqlstore_users row")
    return problems


async def _user_state(executor: Executor, race: Round) -> dict[str, Any]:
    return await executor.sessions.get_user_state(**race.key)


async def _artifacts_whole(executor: Executor, race: Round) -> list[str]:
    versions = await _rows(
        executor,
        race,
        f"SELECT content_sha256, size FROM sqlstore_artifacts WHERE {_MINE}"
        " AND content_sha256 IS NOT NULL",
    )
    contents = {
        str(sha): (int(size), int(count))
        for sha, size, count in await _rows(
            executor,
            race,
            f"SELECT sha256, size, chunk_count FROM sqlstore_artifact_contents WHERE {_MINE}",
        )
    }
    chunks = Counter(
        str(sha)
        for (sha,) in await _rows(
            executor, race, f"SELECT sha256 FROM sqlstore_artifact_chunks WHERE {_MINE}"
        )
    )
    problems = [f"version on missing content {sha}" for sha, _ in versions if sha not in contents]
    problems += [
        f"content {sha} has {chunks[sha]} of {count} chunks"
        for sha, (_, count) in contents.items()
        if chunks[sha] != count
    ]
    referred = {str(sha) for sha, _ in versions}
    problems += [
        f"content {sha} referred to by no version" for sha in contents if sha not in referred
    ]
    problems += [f"chunks of no content: {sha}" for sha in chunks if sha not in contents]
    return problems


async def _forgotten(
    executor: Executor,
    race: Round,
    results: list[tuple[str, str, float, float, int]],
    *,
    start: float,
) -> list[str]:
    """After a ``forget_user`` that returned: nothing the user had before it is left,
    nor anything a writer finished before it began; what is left came from writers
    that make new data (:data:`CREATORS`) and did not finish before it began."""
    problems = []
    sessions = {
        str(s)
        for (s,) in await _rows(executor, race, f"SELECT id FROM sqlstore_sessions WHERE {_MINE}")
    }
    memories = {
        str(m): s
        for m, s in await _rows(
            executor, race, f"SELECT id, session_id FROM sqlstore_memories WHERE {_MINE}"
        )
    }
    user_state = await _user_state(executor, race)
    shas = {
        str(sha)
        for (sha,) in await _rows(
            executor, race, f"SELECT sha256 FROM sqlstore_artifact_contents WHERE {_MINE}"
        )
    }
    left = {
        "create_session": bool(sessions & {"s-new"}) or "x" in user_state,
        "add_memory": "fact-2" in memories,
        "add_events": any(s == "s-events" for s in memories.values()),
        "save_artifact": hashlib.sha256(OP_BYTES).hexdigest() in shas,
    }
    if sessions - {"s-new"}:
        problems.append(f"sessions the user had are left: {sorted(sessions - {'s-new'})}")
    if set(user_state) - {"x"}:
        problems.append(f"user state is left: {sorted(set(user_state) - {'x'})}")
    had = [m for m, s in memories.items() if m == "fact-1" or s in ("s1", "s2")]
    if had:
        problems.append(f"memories the user had are left: {sorted(had)}")
    if hashlib.sha256(SETUP_BYTES).hexdigest() in shas:
        problems.append("artifact bytes the user had are left")
    for op, outcome, _, end, _ in results:
        if op in CREATORS and left[op] and outcome == "ok" and end < start:
            problems.append(f"{op} finished before forget_user began, and is left")
    for op, is_left in left.items():
        if is_left and not any(r[0] == op and r[1] == "ok" for r in results):
            problems.append(f"something of {op} is left, which did not run")
    return problems
