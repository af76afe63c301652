"""The memory inspector's pages, timed for a big user: ``python -m benchmarks inspector``.

Target: every page served in at most 150 ms at the 95th percentile for a user with
100,000 memories, 2,000 facts, 10,000 sessions and a 50,000-event session (2 cores).

- **Data** (``--size full``; ``small`` is the smoke run): one app holding the big user
  and 20 small ones, and two other apps of 5 users each. A user's sessions hold
  generated conversation (:class:`.memory_bench.Corpus`: Zipf-distributed words) in the
  store's own forms, bulk-inserted with SQLAlchemy Core: session rows, events (as the
  store writes them: ``model_dump_json(exclude_none=True)``), session, user and app
  state rows (the fold of the events' state deltas), the user row, ingestion records, a
  generation record per session (1% of them failed). The big user's longest session is a
  cycle of five events: user text, a function call, its response, agent text, agent
  text; one event in four carries a state delta (session keys, now and then a ``user:``,
  ``app:`` or ``temp:`` key). Memories are the events that carry text, made by the
  store's row builder (its text analysis: the search terms) and written by its bulk path
  (:func:`adk_sqlstore.memory.writing.write_rows`, 5,000 a call; the triggers keep
  ``sqlstore_memory_stats`` and the term statistics). Facts, with their revisions (a
  fifth invalidated, some updated, some expired) and the current ones' memories, come
  through ``import_memories``, a batch after each batch of sessions (so fact memories
  are interleaved with turns as generation leaves them). Then VACUUM ANALYZE
  (PostgreSQL) or ANALYZE (SQLite), as autovacuum would.
- **Timing**: the app (``create_app(store)``, read-only) is called in process through
  ``httpx.ASGITransport``; each page is requested ``--runs`` times (after 3 warm-ups),
  the pages in turn each round; a request counts from send to the whole body read.
  Every response must be 200. Search takes a different 3-word query each time.

Nothing is kept between runs: each backend's database is a throwaway one, made and
filled again (``--url``: an empty database of yours instead).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console
from rich.table import Table
from sqlalchemy import insert, text

from adk_sqlstore import SqlMemoryService
from adk_sqlstore.artifacts.service import ArtifactStorage
from adk_sqlstore.inspector import create_app
from adk_sqlstore.inspector.rendering import encode_cursor
from adk_sqlstore.memory.rows import MemoryRows
from adk_sqlstore.memory.transfer import MEMORIES_FORMAT
from adk_sqlstore.memory.writing import write_rows
from adk_sqlstore.models import Content, Event, EventActions, FunctionCall, FunctionResponse, Part
from adk_sqlstore.schema import (
    app_state,
    events,
    fact_sources,
    memory_ingestions,
    session_state,
    sessions,
    user_state,
    users,
)
from adk_sqlstore.sql.artifacts import ArtifactKey
from adk_sqlstore.store import Store
from adk_sqlstore.url_display import redact_url
from adk_sqlstore.validation import dump_json_value

from .__main__ import DEFAULT_ADMIN, throwaway
from .memory_bench import Corpus, _percentiles

__all__ = ["SIZES", "UserSpec", "main"]

APP = "bench-inspector"
BIG = "big-user"
TARGET_MS = 150.0
WARM_UPS = 3
DAY = 86400.0
CHUNK = 5_000  # rows a bulk insert or write_rows call
TOPICS = [
    "food", "work", "family", "travel", "health", "music", "books", "sports", "home",
    "finances", "friends", "languages", "devices", "schedule", "pets", "education",
]  # fmt: skip
ERRORS = ["ModelError: timed out", "ModelError: 429 rate limited", "GenerationError: bad JSON"]


@dataclass(frozen=True)
class UserSpec:
    """A user to make: ``memories`` in all (turns and the current facts' memories),
    ``facts`` (current or not), ``sessions``, the longest one's ``long_events``."""

    memories: int
    facts: int
    sessions: int
    long_events: int
    artifacts: int = 0  # files, three versions each


@dataclass(frozen=True)
class InspectorSize:
    big: UserSpec
    others: int  # small users beside the big one
    other_apps: int  # apps of 5 small users each
    small: UserSpec = UserSpec(memories=60, facts=10, sessions=10, long_events=0, artifacts=1)


SIZES = {
    "full": InspectorSize(
        big=UserSpec(memories=100_000, facts=2_000, sessions=10_000, long_events=50_000,
                     artifacts=20),
        others=20,
        other_apps=2,
    ),
    "small": InspectorSize(
        big=UserSpec(memories=2_000, facts=200, sessions=200, long_events=2_000, artifacts=5),
        others=3,
        other_apps=1,
    ),
}  # fmt: skip


@dataclass
class Made:
    """What the pages are asked about: the big user's long session, a fact with
    several revisions, counts as stored."""

    long_session: str = ""
    long_events: int = 0
    fact_id: str = ""
    counts: dict[str, int] = field(default_factory=dict)


class _Maker:
    """Makes users' rows, deterministically from ``seed`` (times relative to now)."""

    def __init__(self, store: Store, seed: int = 11) -> None:
        self.store = store
        self.rng = random.Random(seed)
        self.corpus = Corpus(seed=seed)
        self.rows = MemoryRows(None, mask_card_numbers=True)
        self.memory = SqlMemoryService(store)
        self.now = time.time()

    def _id(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def _text(self, sentences: int) -> str:
        return " ".join(self.corpus.sentence().capitalize() + "." for _ in range(sentences))

    def _delta(self, n: int) -> dict[str, Any]:
        delta: dict[str, Any] = {f"k{self.rng.randrange(300)}": self.corpus.word(), "step": n}
        if n % 50 == 0:
            delta[f"user:pref_{self.rng.randrange(20)}"] = self.corpus.word()
        if n % 500 == 0:
            delta["app:counter"] = n
        if n % 7 == 0:
            delta["temp:scratch"] = self.corpus.sentence()
        return delta

    def events(self, count: int, start: float, span: float, long: bool) -> list[Event]:
        """A session's events: text turns; a long session also function calls and
        responses (no text) and state deltas on one event in four."""
        out = []
        invocation = ""
        for n in range(count):
            ts = start + span * n / max(count, 1)
            step = n % 5 if long else (0 if n % 2 == 0 else 3)
            if step == 0:
                invocation = f"e-{self._id()}"
            actions = EventActions(state_delta=self._delta(n) if long and n % 4 == 3 else {})
            if not long and n == 0:
                actions = EventActions(state_delta={"topic": self.corpus.word()})
            if step == 1:
                call = FunctionCall(id=f"call-{n}", name="lookup", args={"q": self.corpus.word()})
                content = Content(role="model", parts=[Part(function_call=call)])
                author = "assistant"
            elif step == 2:
                reply = FunctionResponse(
                    id=f"call-{n - 1}", name="lookup", response={"result": self.corpus.sentence()}
                )
                content = Content(role="user", parts=[Part(function_response=reply)])
                author = "assistant"
            elif step == 0:
                content = Content(role="user", parts=[Part(text=self._text(1))])
                author = "user"
            else:
                content = Content(role="model", parts=[Part(text=self._text(3))])
                author = "assistant"
            out.append(
                Event(
                    id=self._id(),
                    invocation_id=invocation,
                    author=author,
                    timestamp=ts,
                    content=content,
                    actions=actions,
                )
            )
        return out

    async def _insert(self, table: Any, rows: list[dict[str, Any]]) -> None:
        for start in range(0, len(rows), CHUNK):
            async with self.store.engine.begin() as conn:
                await conn.execute(insert(table), rows[start : start + CHUNK])

    def _fact(
        self, session_id: str, evs: list[Event], earlier: list[str], fate: str
    ) -> dict[str, Any]:
        """A fact from a session (``fate``: current, updated, invalidated, expired),
        with its revisions, as ``import_memories`` reads it."""
        source = self.rng.choice(evs)
        made = source.timestamp + 60
        text = "The user " + self.corpus.sentence() + "."
        revisions = [
            {"revision": 1, "action": "create", "new_text": text, "session_id": session_id,
             "event_ids": [source.id], "model": "bench-model", "create_time": made},
        ]  # fmt: skip
        fact: dict[str, Any] = {
            "id": f"fact-{uuid.UUID(int=self.rng.getrandbits(128)).hex}",
            "topics": self.rng.sample(TOPICS, self.rng.choice((1, 1, 2))),
            "valid_from": source.timestamp,
            "session_id": session_id,
            "event_ids": [source.id],
            "create_time": made,
        }
        last = made
        if fate == "updated" or self.rng.random() < 0.2:
            for _ in range(self.rng.randint(1, 3)):
                last += self.rng.uniform(DAY / 10, 3 * DAY)
                new = "The user " + self.corpus.sentence() + "."
                revisions.append(
                    {"revision": len(revisions) + 1, "action": "update", "old_text": text,
                     "new_text": new, "session_id": session_id, "event_ids": [source.id],
                     "model": "bench-model", "create_time": min(last, self.now - 60)}
                )  # fmt: skip
                text = new
        if fate == "invalidated":
            last += self.rng.uniform(DAY / 10, 3 * DAY)
            by = self.rng.choice(earlier) if earlier else None
            at = min(last, self.now - 60)
            revisions.append(
                {"revision": len(revisions) + 1, "action": "invalidate", "session_id": session_id,
                 "event_ids": [source.id], "model": "bench-model", "create_time": at,
                 "invalid_at": at, "by_fact_id": by}
            )  # fmt: skip
            fact.update(invalid_at=at, invalidate_time=at, invalidated_by=by)
        if fate == "expired":
            fact["expire_at"] = self.now - self.rng.uniform(60, 5 * DAY)
        fact.update(
            text=text,
            revision_count=len(revisions),
            update_time=min(float(revisions[-1]["create_time"]), self.now - 60),  # type: ignore[arg-type]
            revisions=revisions,
        )
        return fact

    async def user(
        self, app_name: str, user_id: str, spec: UserSpec, progress: Callable[[str], None]
    ) -> Made:
        """Every row of one user, as the store would hold them."""
        rng, made = self.rng, Made()
        fates = ["invalidated"] * (spec.facts // 5) + ["expired"] * (spec.facts * 3 // 100)
        fates += ["updated"] * (spec.facts // 10)
        fates += ["current"] * (spec.facts - len(fates))
        rng.shuffle(fates)
        current = sum(1 for f in fates if f != "invalidated")  # expired ones keep a memory
        long_text = sum(1 for n in range(spec.long_events) if n % 5 not in (1, 2))
        others = max(spec.sessions - (1 if spec.long_events else 0), 1)
        rest = max(spec.memories - current - long_text, 0)
        lengths = [rest // others + (1 if i < rest % others else 0) for i in range(others)]
        if spec.long_events:
            lengths.insert(0, -spec.long_events)  # negative: the long session
        # Each fact's session: a tenth from the long session, the rest from sessions with
        # events.
        with_events = [i for i, n in enumerate(lengths) if n]
        of_session: dict[int, list[str]] = {}
        for fate in fates:
            pick = 0 if spec.long_events and rng.random() < 0.1 else rng.choice(with_events)
            of_session.setdefault(pick, []).append(fate)
        async with self.store.engine.begin() as conn:
            await conn.execute(
                insert(users), [{"app_name": app_name, "user_id": user_id,
                                 "create_time": self.now - 120 * DAY}]
            )  # fmt: skip
        key = {"app_name": app_name, "user_id": user_id}
        user_keys: dict[str, str] = {}
        app_keys: dict[str, str] = {}
        fact_ids: list[str] = []
        best: tuple[int, str] = (0, "")
        batch = max(1, min(len(lengths), 1_000))
        done_memories = done_events = 0
        for first in range(0, len(lengths), batch):
            s_rows, e_rows, state_rows, ingested, sources, memory_rows = [], [], [], [], [], []
            facts: list[dict[str, Any]] = []
            for index in range(first, min(first + batch, len(lengths))):
                length = lengths[index]
                long = length < 0
                count = -length if long else length
                if long:
                    span = 20 * DAY
                    start = self.now - span - 3600
                else:
                    span = 20 * 60.0 * max(count, 1)
                    start = self.now - rng.uniform(0, 90 * DAY) - span
                session_id = self._id()
                evs = self.events(count, start, span, long)
                revision = len(evs)
                incarnation = uuid.UUID(int=rng.getrandbits(128)).hex
                update_time = evs[-1].timestamp if evs else start
                s_rows.append({**key, "id": session_id, "revision": revision,
                               "create_time": start, "incarnation": incarnation,
                               "update_time": update_time})  # fmt: skip
                state: dict[str, str] = {}
                for seq, ev in enumerate(evs, 1):
                    e_rows.append({**key, "session_id": session_id, "seq": seq, "id": ev.id,
                                   "invocation_id": ev.invocation_id, "author": ev.author,
                                   "timestamp": ev.timestamp,
                                   "data": ev.model_dump_json(exclude_none=True)})  # fmt: skip
                    for k, v in ev.actions.state_delta.items():
                        target = (user_keys if k.startswith("user:")
                                  else app_keys if k.startswith("app:") else state)  # fmt: skip
                        if not k.startswith("temp:"):
                            target[k.split(":", 1)[1] if ":" in k else k] = dump_json_value(v)
                state_rows += [{**key, "session_id": session_id, "key": k, "value": v}
                               for k, v in state.items()]  # fmt: skip
                if long:
                    made.long_session, made.long_events = session_id, revision
                if evs:
                    ingested.append(
                        {**key, "session_id": session_id, "revision": revision,
                         "event_count": revision, "ingest_time": update_time + 5}
                    )  # fmt: skip
                    failed = rng.random() < 0.01  # given up on: the failures tab
                    sources.append(
                        {**key, "session_id": session_id,
                         "event_count": revision - 1 if failed else revision,
                         "attempts": rng.randint(1, 3) if failed else 0,
                         "error": rng.choice(ERRORS) if failed else None,
                         "update_time": update_time + 10, "incarnation": incarnation}
                    )  # fmt: skip
                memory_rows += self.rows.from_events(
                    **key, session_id=session_id, events=evs, custom_metadata=None,
                    now=update_time + 5,
                )  # fmt: skip
                for fate in of_session.get(index, []):
                    fact = self._fact(session_id, evs, fact_ids, fate)
                    fact_ids.append(fact["id"])
                    facts.append(fact)
                    if fact["revision_count"] > best[0]:
                        best = (fact["revision_count"], fact["id"])
            await self._insert(sessions, s_rows)
            await self._insert(events, e_rows)
            await self._insert(session_state, state_rows)
            await self._insert(memory_ingestions, ingested)
            await self._insert(fact_sources, sources)
            for start in range(0, len(memory_rows), CHUNK):
                await write_rows(self.store, None, **key, rows=memory_rows[start : start + CHUNK])
            if facts:
                await self.memory.import_memories(
                    {"format": MEMORIES_FORMAT, **key, "facts": facts}
                )
            done_memories += len(memory_rows)
            done_events += len(e_rows)
            if len(lengths) > batch:
                progress(
                    f"{user_id}: {min(first + batch, len(lengths)):,} of {len(lengths):,}"
                    f" sessions, {done_events:,} events, {done_memories:,} turns"
                )
        now = self.now
        await self._insert(
            user_state,
            [{**key, "key": k, "value": v, "update_time": now} for k, v in user_keys.items()],
        )
        async with self.store.engine.begin() as conn:
            for k, v in app_keys.items():  # the app's keys: the last writer's value
                await conn.execute(
                    app_state.delete().where(app_state.c.app_name == app_name, app_state.c.key == k)
                )
                await conn.execute(
                    insert(app_state).values(app_name=app_name, key=k, value=v, update_time=now)
                )
        storage = ArtifactStorage(self.store)
        for n in range(spec.artifacts):
            scoped = n % 4 == 0  # the user's own ("user:" filenames)
            name = f"user:profile-{n}.csv" if scoped else f"report-{n}.csv"
            session = "" if scoped or not made.long_session else made.long_session
            for version in range(3):
                body = (f"version,{version}\n" + self._text(4)).encode() * 20
                await storage.save(
                    ArtifactKey(app_name, user_id, session, name),
                    part={"inline_data": {"mime_type": "text/csv"}}, data=body,
                    mime_type="text/csv", custom_metadata=None,
                )  # fmt: skip
        made.fact_id = best[1]
        return made


async def _settle(store: Store) -> None:
    """What autovacuum would do after a bulk load: PostgreSQL's VACUUM ANALYZE
    (planner statistics, visibility map), SQLite's ANALYZE."""
    engine = store.engine
    if engine.dialect.name == "postgresql":
        async with engine.connect() as conn:
            autocommit = await conn.execution_options(isolation_level="AUTOCOMMIT")
            await autocommit.execute(text("VACUUM ANALYZE"))
    else:
        async with engine.begin() as conn:
            await conn.execute(text("ANALYZE"))


async def _counts(store: Store, made: Made) -> dict[str, int]:
    """The big user's rows as stored (checks the load)."""
    queries = {
        "memories": "SELECT doc_count FROM sqlstore_memory_stats WHERE app_name = :a"
        " AND user_id = :u",
        "memory_rows": "SELECT count(*) FROM sqlstore_memories WHERE app_name = :a"
        " AND user_id = :u",
        "facts": "SELECT count(*) FROM sqlstore_facts WHERE app_name = :a AND user_id = :u",
        "fact_revisions": "SELECT count(*) FROM sqlstore_fact_revisions WHERE app_name = :a"
        " AND user_id = :u",
        "sessions": "SELECT count(*) FROM sqlstore_sessions WHERE app_name = :a AND user_id = :u",
        "events": "SELECT count(*) FROM sqlstore_events WHERE app_name = :a AND user_id = :u",
        "long_session_deltas": "SELECT count(*) FROM sqlstore_events WHERE app_name = :a"
        ' AND user_id = :u AND session_id = :s AND data LIKE \'%"state_delta":{"%\'',
    }
    out = {}
    async with store.engine.connect() as conn:
        for name, sql in queries.items():
            params = {"a": APP, "u": BIG, "s": made.long_session}
            out[name] = int((await conn.execute(text(sql), params)).scalar() or 0)
    if out["memories"] != out["memory_rows"]:
        stats, rows = out["memories"], out["memory_rows"]
        raise RuntimeError(f"sqlstore_memory_stats counts {stats:,} memories, the table {rows:,}")
    return out


async def build(store: Store, size: InspectorSize, progress: Callable[[str], None]) -> Made:
    """Every app and user of ``size``; the big user's :class:`Made`."""
    await store.ensure_schema()
    maker = _Maker(store)
    made = await maker.user(APP, BIG, size.big, progress)
    for n in range(size.others):
        await maker.user(APP, f"user-{n:03d}", size.small, progress)
    for a in range(size.other_apps):
        for n in range(5):
            await maker.user(f"other-app-{a}", f"user-{n:03d}", size.small, progress)
    progress("settling (VACUUM ANALYZE / ANALYZE)")
    await _settle(store)
    made.counts = await _counts(store, made)
    return made


def pages(made: Made, corpus: Corpus) -> dict[str, Callable[[], str]]:
    """Each page's name and a maker of its path (search: a new query each time)."""
    user = f"/apps/{APP}/users/{BIG}"
    session = f"{user}/sessions/{made.long_session}"
    later = max(made.long_events * 4 // 5, 1)
    late = max(made.long_events - 37, 1)
    fixed = {
        "apps": "/",
        "app users": f"/apps/{APP}",
        "user: sessions": f"{user}?tab=sessions",
        "user: facts": f"{user}?tab=facts",
        "user: facts history": f"{user}?tab=facts&history=1",
        "user: memories": f"{user}?tab=memories",
        "user: memories, turns": f"{user}?tab=memories&kind=turns",
        "user: state": f"{user}?tab=state",
        "user: artifacts": f"{user}?tab=artifacts",
        "user: failures": f"{user}?tab=failures",
        "fact": f"{user}/facts/{made.fact_id}",
        f"session of {made.long_events:,} events": session,
        f"session, after event {later:,}": f"{session}?after={encode_cursor(later)}",
        f"session, at event {late:,}": f"{session}?at={encode_cursor(late)}",
    }
    out: dict[str, Callable[[], str]] = {name: _always(path) for name, path in fixed.items()}

    def search() -> str:
        query = " ".join(corpus.word() for _ in range(3))
        return f"{user}/search?{httpx.QueryParams({'q': query})}"

    out["search, 3 words"] = search
    return out


async def measure(
    store: Store, made: Made, runs: int, progress: Callable[[str], None]
) -> dict[str, dict[str, float]]:
    """Each page's p50, p95 and max (ms), and its size (bytes)."""
    app = create_app(store)
    times: dict[str, list[float]] = {}
    sizes: dict[str, int] = {}
    paths = pages(made, Corpus(seed=99))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://inspector") as client:
        for round_ in range(WARM_UPS + runs):
            for name, path in paths.items():
                url = path()
                start = time.perf_counter()
                response = await client.get(url)
                body = response.content
                took = (time.perf_counter() - start) * 1000
                if response.status_code != 200:
                    raise RuntimeError(f"{name}: {url} answered {response.status_code}")
                if round_ >= WARM_UPS:
                    times.setdefault(name, []).append(took)
                    sizes[name] = len(body)
            if round_ == WARM_UPS - 1:
                progress(f"warmed up; timing {runs} rounds of {len(paths)} pages")
    out = {}
    for name, values in times.items():
        p50, p95 = _percentiles(values) if len(values) > 1 else (values[0], values[0])
        out[name] = {"p50": p50, "p95": p95, "max": max(values), "bytes": sizes[name]}
    return out


def _load() -> list[float]:
    with contextlib.suppress(OSError, ValueError):
        return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]
    return [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else []


async def run_backend(
    backend: str, args: argparse.Namespace, progress: Callable[[str], None]
) -> dict[str, Any]:
    @contextlib.asynccontextmanager
    async def database() -> AsyncIterator[str]:
        if args.url:
            yield args.url
            return
        async with throwaway(backend, args.postgres_admin_url) as url:
            yield url

    size = SIZES[args.size]
    async with database() as url:
        progress(f"database {redact_url(url)}")
        store = Store.from_url(url, auto_migrate=True)
        try:
            started = time.perf_counter()
            made = await build(store, size, progress)
            built = time.perf_counter() - started
            progress(
                f"built in {built:.0f} s: "
                + ", ".join(f"{k} {v:,}" for k, v in made.counts.items())
            )
            before = _load()
            figures = await measure(store, made, args.runs, progress)
            after = _load()
        finally:
            await store.close()
    return {
        "build_seconds": round(built, 1),
        "counts": made.counts,
        "load_average_before": before,
        "load_average_after": after,
        "pages": {k: {m: round(v, 2) for m, v in f.items()} for k, f in figures.items()},
    }


def report(results: dict[str, dict[str, Any]], console: Console) -> None:
    table = Table(title=f"inspector pages, ms (target: p95 at most {TARGET_MS:.0f} ms)")
    table.add_column("page")
    for backend in results:
        for head in ("p50", "p95", "max"):
            table.add_column(f"{backend} {head}", justify="right")
    names = list(next(iter(results.values()))["pages"])
    for name in names:
        cells = [name]
        for result in results.values():
            f = result["pages"][name]
            p95 = f"{f['p95']:.1f}"
            cells += [f"{f['p50']:.1f}", f"[red]{p95}[/]" if f["p95"] > TARGET_MS else p95,
                      f"{f['max']:.1f}"]  # fmt: skip
        table.add_row(*cells)
    over = [
        f"{backend}: {name} ({f['p95']:.0f} ms)"
        for backend, result in results.items()
        for name, f in result["pages"].items()
        if f["p95"] > TARGET_MS
    ]
    table.caption = "over the target: " + ("; ".join(over) if over else "none")
    console.print(table)
    for backend, result in results.items():
        console.print(
            f"{backend}: built in {result['build_seconds']:.0f} s; load average"
            f" {' '.join(map(str, result['load_average_before']))} before the timing,"
            f" {' '.join(map(str, result['load_average_after']))} after",
            style="dim",
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks inspector", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument(
        "--size",
        choices=sorted(SIZES),
        default="full",
        help="full: 100,000 memories, 2,000 facts, 10,000 sessions, a 50,000-event session;"
        " small: 2,000, 200, 200 and 2,000 (the smoke run)",
    )
    parser.add_argument("--runs", type=int, default=30, help="timed requests a page (default 30)")
    parser.add_argument("--url", help="fill this empty database instead of a throwaway one")
    parser.add_argument("--postgres-admin-url", default=DEFAULT_ADMIN)
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs: 1 or more")
    backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
    if args.url and len(backends) > 1:
        parser.error("--url needs one --backend")
    console = Console(width=max(Console().width, 120))
    size = SIZES[args.size]
    console.print(
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} CPUs, load average"
        f" {' '.join(map(str, _load()))}; {args.size} size: {size.big.memories:,} memories,"
        f" {size.big.facts:,} facts, {size.big.sessions:,} sessions, a"
        f" {size.big.long_events:,}-event session; {args.runs} runs a page",
        style="dim",
    )
    results: dict[str, dict[str, Any]] = {}
    for backend in backends:

        def progress(message: str, backend: str = backend) -> None:
            console.print(f"  {backend}: {message}", style="dim")

        results[backend] = asyncio.run(run_backend(backend, args, progress))
        if len(backends) > 1:  # as soon as it is done
            report({backend: results[backend]}, console)
    report(results, console)
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "time": f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
                    "cpus": os.cpu_count(),
                    "size": args.size,
                    "runs": args.runs,
                    "target_ms": TARGET_MS,
                    "backends": results,
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())


def _always(path: str) -> Callable[[], str]:
    """A page's path that is the same every time."""
    return lambda: path
