"""The lock order (``docs/architecture.md``, "Locks"; :mod:`adk_sqlstore.sql.users`):
every transaction that writes a user's rows takes the user lock first, in a mode that
allows what it writes, then first locks the tables in the order of ``LOCK_ORDER``, and
the rows of one table it locks several of in key order; the one writer without a user
lock, an append, locks its session row first and writes nothing past app state.

Checked on what the store really sends: every statement of every transaction of every
public writer is recorded on PostgreSQL and MariaDB (SQLite has one writer at a time:
``BEGIN IMMEDIATE``), and the tables each statement writes or locks are read from its
text in the order they come (a statement's data-modifying CTEs run in the order of
their text: each depends on the user lock, ``tests/test_lock_order.py`` checks the
text, PostgreSQL's plan the rest). A public method nobody classified as a writer or a
reader fails the test, so a new writer cannot skip it.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from adk_sqlstore import (
    Event,
    EventActions,
    MemoryEntry,
    MemoryGenerator,
    Session,
    SqlMemoryService,
    SqlSessionService,
)
from adk_sqlstore.artifacts import ArtifactStorage, artifact_key
from adk_sqlstore.sql.users import EXCLUSIVE_TABLES, LOCK_ORDER

from .embedders import Concepts
from .scripted_models import ScriptedModel, last_event_as_a_fact

REPO = Path(__file__).resolve().parents[1]

RANK = {table: n for n, group in enumerate(LOCK_ORDER) for table in group}
APP_STATE_RANK = RANK["sqlstore_app_state"]

# What a write to a table also locks: the triggers' tables (statistics, index) and the
# foreign keys' cascades.
IMPLIED = {
    "sqlstore_memories": (
        "sqlstore_memory_stats",
        "sqlstore_memory_terms",
        "sqlstore_memory_postings",
        "sqlstore_memories_fts",
        "sqlstore_memory_embeddings",
    ),
    "sqlstore_sessions": ("sqlstore_events", "sqlstore_session_state"),
}

_TOKENS = re.compile(
    r"(?P<open>\()|(?P<close>\))"
    r"|\bINSERT\s+(?:IGNORE\s+)?INTO\s+(?P<insert>\w+)"
    r"|\bUPDATE\s+(?P<update>\w+)\s+SET\b"
    r"|\bDELETE\s+FROM\s+(?P<delete>\w+)"
    r"|\bFROM\s+(?P<source>\w+)"
    r"|\bFOR\s+(?P<lock>NO\s+KEY\s+UPDATE|KEY\s+SHARE|UPDATE|SHARE)\b"
    r"|\b(?P<share>LOCK\s+IN\s+SHARE\s+MODE)"
    r"|\bON\s+DUPLICATE\s+KEY\s+(?P<upsert>UPDATE)\b"
    r"|\b(?P<order>ORDER\s+BY)\b",
    re.I,
)
_ONE_SESSION = re.compile(r"(?<![\w])id\s*=", re.I)
SHARE, EXCLUSIVE = "share", "exclusive"
_MODES = {
    "KEY SHARE": SHARE,
    "SHARE": SHARE,
    "LOCK IN SHARE MODE": SHARE,
    "NO KEY UPDATE": EXCLUSIVE,
    "UPDATE": EXCLUSIVE,  # FOR UPDATE: forget_user on PostgreSQL, exclusive on MySQL
}


@dataclass(frozen=True)
class Touch:
    """A table a statement writes (``mode`` None) or locks rows of (``mode`` share or
    exclusive), and whether its locking read was ordered."""

    table: str
    mode: str | None = None
    ordered: bool = False


def touches(statement: str) -> list[Touch]:
    """The store's tables ``statement`` writes or locks, in the order of its text."""
    found: list[Touch] = []
    depth, sources, ordered = 0, {0: ""}, {0: False}
    inserting: str | None = None
    for match in _TOKENS.finditer(statement):
        kind = match.lastgroup
        value = " ".join(match.group(kind).upper().split()) if kind else ""
        if kind == "open":
            depth += 1
            sources[depth], ordered[depth] = "", False
        elif kind == "close":
            depth -= 1
        elif kind in ("insert", "update", "delete"):
            table = match.group(kind)
            inserting = table if kind == "insert" else None
            found.append(Touch(table))
            found.extend(Touch(t) for t in IMPLIED.get(table, ()) if kind != "insert")
            if kind == "insert" and table == "sqlstore_memories":
                found.extend(Touch(t) for t in IMPLIED[table])
        elif kind == "source":
            sources[depth] = match.group(kind)
        elif kind == "order":
            ordered[depth] = True
        elif kind in ("lock", "share"):
            one_row = bool(_ONE_SESSION.search(statement))  # a key: nothing to order
            found.append(Touch(sources[depth], _MODES[value], ordered[depth] or one_row))
        elif kind == "upsert" and inserting is not None:
            found.append(Touch(inserting, EXCLUSIVE, True))  # MySQL: X on a duplicate row
    return [t for t in found if t.table.startswith("sqlstore_")]


@dataclass
class Transaction:
    """The statements of one transaction, with their parameters."""

    statements: list[tuple[str, Any]] = field(default_factory=list)

    def problems(self) -> list[str]:
        """How this transaction breaks the lock order (none: it keeps it)."""
        done = [(touch, params) for sql, params in self.statements for touch in touches(sql)]
        if not done:
            return []  # reads only
        first = done[0][0]
        if {t.table for t, _ in done} == {"sqlstore_app_state"}:
            return []  # app state alone: no user's rows (import_state of an app)
        if first.table != "sqlstore_users":
            return self._append_problems(first, [t for t, _ in done])
        modes = [t.mode for t, _ in done if t.table == "sqlstore_users" and t.mode]
        mode = max(modes, key=[SHARE, EXCLUSIVE].index) if modes else EXCLUSIVE
        problems = []
        highest, seen = -1, set()
        for touch, _ in done:
            rank = RANK[touch.table]
            if touch.table not in seen and rank < highest:
                problems.append(f"{touch.table} first locked after {LOCK_ORDER[highest]}")
            seen.add(touch.table)
            highest = max(highest, rank)
            if touch.table in EXCLUSIVE_TABLES and mode != EXCLUSIVE:
                problems.append(f"{touch.table} written under a {mode} user lock")
            if touch.table == "sqlstore_sessions" and touch.mode and not touch.ordered:
                problems.append("several sessions locked without ORDER BY")
        users = [
            (p["app_name"], p["user_id"])
            for t, p in done
            if t.table == "sqlstore_users" and t.mode and "user_id" in p
        ]
        if users != sorted(users):
            problems.append(f"users locked out of key order: {users}")
        return problems

    @staticmethod
    def _append_problems(first: Touch, done: list[Touch]) -> list[str]:
        """An append: its session row first, then nothing past app state."""
        if first.table != "sqlstore_sessions" or first.mode is not None:
            return [f"first lock on {first.table}, not the user's row nor an append's session"]
        beyond = sorted({t.table for t in done if RANK[t.table] > APP_STATE_RANK})
        return [f"{', '.join(beyond)} written without the user lock"] if beyond else []


class Recorder:
    """Every statement, by call and transaction (PostgreSQL's autocommit statements are
    a transaction each)."""

    def __init__(self) -> None:
        self.current: str | None = None
        self.calls: dict[str, list[Transaction]] = {}
        self._open: dict[int, Transaction] = {}

    def listen(self, engine: Any) -> None:
        event.listen(engine, "begin", self._begin)
        event.listen(engine, "commit", self._end)
        event.listen(engine, "rollback", self._end)
        event.listen(engine, "before_cursor_execute", self._statement)

    def _begin(self, conn: Any) -> None:
        if self.current is not None:
            transaction = Transaction()
            self._open[id(conn)] = transaction
            self.calls.setdefault(self.current, []).append(transaction)

    def _end(self, conn: Any) -> None:
        self._open.pop(id(conn), None)

    def _statement(
        self, conn: Any, cursor: Any, statement: str, params: Any, context: Any, many: bool
    ) -> None:
        if self.current is None:
            return
        transaction = self._open.get(id(conn))
        if transaction is None or conn.get_execution_options().get("isolation_level") == (
            "AUTOCOMMIT"
        ):
            transaction = Transaction()
            self.calls.setdefault(self.current, []).append(transaction)
        compiled = getattr(context, "compiled_parameters", None) or [{}]
        transaction.statements.append((statement, compiled[0]))

    @contextmanager
    def call(self, name: str) -> Iterator[None]:
        self.current = name
        try:
            yield
        finally:
            self.current = None


def _turn(text: str, number: int, **delta: Any) -> Event:
    return Event(
        author="user",
        invocation_id=f"i{number}",
        content={"role": "user", "parts": [{"text": text}]},
        actions=EventActions(state_delta=delta),
    )


WRITERS = {
    SqlSessionService: {
        "create_session",
        "append_event",
        "delete_session",
        "forget_user",
        "prune",
        "import_session",
        "import_state",
    },
    SqlMemoryService: {
        "add_session_to_memory",
        "add_events_to_memory",
        "add_memory",
        "delete_memories",
        "forget_user",
        "ingest_session",
        "ingest_idle_sessions",
        "reindex",
        "embed_missing",
        "close_session",  # deprecated: ingest_session
        "generate",
        "generate_pending",
        "import_memories",
        "correct_fact",
    },
    ArtifactStorage: {"save", "save_stream", "restore", "delete"},
}
"""The public methods that write; each is run below."""

READERS = {
    SqlSessionService: {
        "get_session",
        "list_sessions",
        "iter_sessions",
        "get_user_state",
        "get_app_state",
        "ensure_schema",
        "from_url",
        "close",
    },
    SqlMemoryService: {
        "search_memory",
        "vector_storage",
        "count_to_reindex",
        "count_to_embed",
        "count_idle_sessions",
        "idle_sessions",
        "list_facts",
        "fact_history",
        "generation_failures",
        "export_memories",
        "users_with_memories",
        "retrieve_profiles",
        "from_url",
        "close",
    },
    ArtifactStorage: {"version", "versions", "filenames", "load", "read"},
}


def test_every_public_method_is_a_known_writer_or_reader() -> None:
    """A method added to a service must be classified here (and, as a writer, run by
    the test below), so that no writer escapes the lock order check."""
    for cls in (SqlSessionService, SqlMemoryService, ArtifactStorage):
        public = {
            name
            for name, member in inspect.getmembers(cls)
            if not name.startswith("_") and (inspect.isfunction(member) or inspect.ismethod(member))
        }
        assert public == WRITERS[cls] | READERS[cls], cls.__name__


def test_the_documented_order_is_the_one_checked() -> None:
    """docs/architecture.md lists the groups of LOCK_ORDER, in order."""
    text = (REPO / "docs" / "architecture.md").read_text()
    section = text[text.index("## Locks") :]
    positions = [section.index(f"`{group[0]}`") for group in LOCK_ORDER]
    assert positions == sorted(positions)
    for group in LOCK_ORDER:
        for table in group:
            assert f"`{table}`" in section, table


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        pytest.param(  # forget_user before this order: statistics row, then events
            [
                "INSERT INTO sqlstore_memory_stats (app_name, user_id, doc_count,"
                " lexeme_count) VALUES ($1, $2, 0, 0) ON CONFLICT (app_name, user_id)"
                " DO UPDATE SET doc_count = sqlstore_memory_stats.doc_count",
                "DELETE FROM sqlstore_events WHERE app_name = $1 AND user_id = $2",
            ],
            "first lock on sqlstore_memory_stats",
            id="forget-statistics-first",
        ),
        pytest.param(  # an ingestion locking the session before the user
            [
                "SELECT 1 FROM sqlstore_sessions WHERE id = $1 FOR SHARE",
                "SELECT 1 FROM sqlstore_users WHERE user_id = $1 FOR NO KEY UPDATE",
            ],
            "first lock on sqlstore_sessions",
            id="session-before-user",
        ),
        pytest.param(
            [
                "SELECT 1 FROM sqlstore_users WHERE user_id = $1 FOR KEY SHARE",
                "INSERT INTO sqlstore_memories (app_name, user_id, id) VALUES ($1, $2, $3)",
            ],
            "written under a share user lock",
            id="memories-under-share",
        ),
        pytest.param(
            [
                "SELECT 1 FROM sqlstore_users WHERE user_id = $1 FOR NO KEY UPDATE",
                "DELETE FROM sqlstore_artifacts WHERE user_id = $1",
                "DELETE FROM sqlstore_memories WHERE user_id = $1",
            ],
            "sqlstore_memories first locked after",
            id="memories-after-artifacts",
        ),
        pytest.param(
            [
                "SELECT 1 FROM sqlstore_users WHERE user_id = $1 FOR UPDATE",
                "SELECT id FROM sqlstore_sessions WHERE user_id = $1 FOR UPDATE",
            ],
            "several sessions locked without ORDER BY",
            id="sessions-unordered",
        ),
        pytest.param(
            [
                "UPDATE sqlstore_sessions SET revision = revision + 1 WHERE id = $1",
                "INSERT INTO sqlstore_memories (app_name, user_id, id) VALUES ($1, $2, $3)",
            ],
            "written without the user lock",
            id="append-writing-memories",
        ),
    ],
)
def test_the_check_finds_orders_it_forbids(sql: list[str], expected: str) -> None:
    """The checker itself: orders that deadlocked (or could), fed to it, are refused."""
    found = Transaction([(s, {}) for s in sql]).problems()
    assert any(expected in p for p in found), found


def _invalidate_all(prompt: dict[str, Any]) -> dict[str, Any]:
    """Consolidation: every stored fact shown is contradicted (updates and deletes)."""
    stored = [f["id"] for f in prompt["stored_facts"]]
    return {"decisions": [{"fact": "N1", "action": "invalidate", "target": t} for t in stored]}


async def _every_writer(url: str, recorder: Recorder, embedder: Any) -> None:
    """Run every writer of WRITERS on ``url``, each call under its name."""
    key: dict[str, Any] = {"app_name": "locks", "user_id": "u1"}
    async with SqlSessionService.from_url(url) as sessions:
        model = ScriptedModel(last_event_as_a_fact, _invalidate_all)
        memory = SqlMemoryService(
            sessions.store, embedder=embedder, generator=MemoryGenerator(model)
        )
        await memory.vector_storage()
        storage = ArtifactStorage(sessions.store)
        recorder.listen(sessions.store.engine.sync_engine)
        with recorder.call("create_session"):
            s = await sessions.create_session(**key, state={"k": 1, "user:u": 1, "app:a": 1})
        with recorder.call("append_event"):
            for n in range(3):
                await sessions.append_event(
                    s, _turn(f"badminton turn {n}", n, n=n, **{"user:n": n, "app:n": n})
                )
        stale = await sessions.get_session(**key, session_id=s.id)
        with recorder.call("add_session_to_memory"):
            await memory.add_session_to_memory(s)
        await sessions.append_event(s, _turn("one more turn", 9))
        with recorder.call("add_session_to_memory (stale object)"):
            assert stale is not None
            await memory.add_session_to_memory(stale)
        with recorder.call("add_events_to_memory"):
            await memory.add_events_to_memory(
                **key, session_id="s2", events=[s.events[0], _turn("", 7)]
            )
        with recorder.call("add_memory"):
            await memory.add_memory(
                **key, memories=[MemoryEntry(content={"parts": [{"text": "a tennis fact"}]})]
            )
        with recorder.call("generate"):
            await sessions.append_event(s, _turn("a generated fact", 11))
            await memory.generate(**key, session_id=s.id)
        with recorder.call("correct_fact"):
            fact = (await memory.list_facts(**key))[0]
            await memory.correct_fact(**key, fact_id=fact.id, text="corrected", operator="ops")
        with recorder.call("generate_pending"):
            await sessions.append_event(s, _turn("a pending fact", 12))
            await memory.generate_pending(app_name="locks")
        with recorder.call("add_memory (consolidated)"):
            await memory.add_memory(
                **key,
                memories=[MemoryEntry(content={"parts": [{"text": "a consolidated fact"}]})],
                consolidate=True,
            )
        with recorder.call("import_memories"):
            document = await memory.export_memories(**key)
            await memory.import_memories({**document, "user_id": "u2"})
            await memory.import_memories({**document, "user_id": "u2"}, replace=True)
        expiring = SqlMemoryService(sessions.store, generator=MemoryGenerator(model, ttl=0.001))
        await expiring.add_memory(
            **key,
            memories=[MemoryEntry(content={"parts": [{"text": "a short-lived fact"}]})],
            consolidate=True,
        )
        with recorder.call("ingest_session"):
            await memory.ingest_session(**key, session_id=s.id)
        with recorder.call("close_session"), pytest.deprecated_call():
            await memory.close_session(**key, session_id=s.id)
        with recorder.call("ingest_idle_sessions"):
            await sessions.append_event(s, _turn("idle now", 10))
            await memory.ingest_idle_sessions(timedelta(0))
        with recorder.call("reindex"):
            await memory.reindex(language="german")
        with recorder.call("embed_missing"):
            if embedder is not None:  # memories written without it, then embedded
                await SqlMemoryService(sessions.store).add_memory(
                    **key, memories=[MemoryEntry(content={"parts": [{"text": "unembedded"}]})]
                )
                await memory.embed_missing()
        with recorder.call("delete_memories"):
            await memory.delete_memories(**key, session_id="s2")
        with recorder.call("import_session"):
            copy = Session.model_validate(
                {**s.model_dump(), "id": "imported", "state": {"user:x": 1}}
            )
            await sessions.import_session(copy)
            await sessions.import_session(copy, replace=True)
        with recorder.call("import_state"):
            await sessions.import_state(**key, state={"y": 2})
            await sessions.import_state(app_name="locks", user_id=None, state={"z": 3})
        user_file = artifact_key("locks", "u1", "user:notes.txt", None)
        session_file = artifact_key("locks", "u1", "photo.bin", s.id)
        with recorder.call("save"):
            await storage.save(
                user_file, part={}, data=b"x" * 100, mime_type="text/plain", custom_metadata=None
            )
            await storage.save(
                session_file,
                part={},
                data=b"y" * (3 << 20),
                mime_type=None,
                custom_metadata={"a": 1},
            )
            await storage.save(
                user_file,
                part={"text": "no bytes"},
                data=None,
                mime_type=None,
                custom_metadata=None,
            )
        with recorder.call("save_stream"):
            await storage.save_stream(
                session_file, [b"z" * (5 << 20)], part={}, mime_type=None, custom_metadata=None
            )
        with recorder.call("restore"):
            stored = await storage.version(session_file, 0)
            assert stored is not None
            blocks = storage.read(session_file, stored)
            await storage.restore(artifact_key("locks", "u1", "copy.bin", s.id), stored, blocks)
        with recorder.call("delete"):
            await storage.delete(session_file)
        with recorder.call("delete_session"):
            await sessions.delete_session(**key, session_id="imported")
        with recorder.call("prune"):
            await sessions.prune(older_than=0, with_memories=True)
        s2 = await sessions.create_session(**key)
        await sessions.append_event(s2, _turn("to be forgotten", 1, **{"user:k": 1}))
        await memory.add_session_to_memory(s2)
        with recorder.call("forget_user"):
            await sessions.forget_user(**key)
        with recorder.call("forget_user (memory)"):
            await memory.forget_user(**key)


@pytest.mark.parametrize(
    "backend",
    [
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("mysql", marks=pytest.mark.mysql),
    ],
)
async def test_every_writer_takes_its_locks_in_the_documented_order(
    backend: str, request: pytest.FixtureRequest
) -> None:
    url = str(request.getfixturevalue(f"{backend}_url"))
    recorder = Recorder()
    await _every_writer(url, recorder, Concepts() if backend == "mysql" else None)
    written = {
        name.split(" ")[0]
        for name, txns in recorder.calls.items()
        if any(touches(sql) for t in txns for sql, _ in t.statements)
    }
    assert written >= set().union(*WRITERS.values()) - (
        {"embed_missing"} if backend == "postgres" else set()
    )
    broken = {
        name: problems
        for name, transactions in recorder.calls.items()
        for transaction in transactions
        if (problems := transaction.problems())
    }
    assert broken == {}, "\n".join(f"{k}: {v}" for k, v in broken.items())
