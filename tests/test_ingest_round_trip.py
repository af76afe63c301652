"""``add_session_to_memory`` in one round trip (issue 15): one statement on PostgreSQL,
one batch in aiosqlite's thread on SQLite (``adk_sqlstore.sql.ingest``). It must leave
the database exactly as the transaction of separate statements does, the memories,
the per-user statistics and the ingestion records, through first ingestions,
re-ingestions with events added, changed and gone, sessions of this store and
sessions from elsewhere; and ``add_events_to_memory`` and ``add_memory`` likewise in
one round trip."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, text

from adk_sqlstore import Event, MemoryEntry, Session, SqlMemoryService, SqlSessionService
from adk_sqlstore.memory import ingestion, writing
from adk_sqlstore.sql import memory as sql_memory

from .conftest import PostgresFactory

APP = "round-trip"
AT = "2026-01-01T00:00:00Z"

MEMORY_COLUMNS = (
    "app_name, user_id, id, session_id, event_id, author, timestamp, content, text, terms,"
    " analysis, token_count, custom_metadata, search_scope"
)


def _turn(text: str, event_id: str, n: int) -> Event:
    author = "user" if n % 2 else "assistant"
    return Event(
        id=event_id, author=author, timestamp=1.7e9 + n, content={"parts": [{"text": text}]}
    )


async def _scenario(url: str) -> list[Any]:
    """Ingestions of every kind; the reports and the tables they leave."""
    reports: list[Any] = []
    async with SqlSessionService.from_url(url) as sessions:
        memory = SqlMemoryService(sessions.store)
        await memory.add_memory(  # a fact of the same user: counted in the same statistics
            app_name=APP,
            user_id="u1",
            memories=[MemoryEntry(content={"parts": [{"text": "a fact"}]})],
        )
        stored = await sessions.create_session(app_name=APP, user_id="u1", session_id="s1")
        for n, line in enumerate(["alpha apricot", "beta blueberry", "gamma grape"]):
            await sessions.append_event(stored, _turn(line, f"e{n}", n))
        reports.append(await memory.add_session_to_memory(stored))
        reports.append(await memory.add_session_to_memory(stored))  # unchanged: no rewrite
        await sessions.append_event(stored, _turn("delta date", "e3", 3))
        reports.append(await memory.add_session_to_memory(stored))
        outside = [_turn(f"outside {w} 555-0142", f"o{n}", n) for n, w in enumerate("abcdef")]
        elsewhere = Session(id="x1", app_name=APP, user_id="u2", events=outside)
        reports.append(await memory.add_session_to_memory(elsewhere))
        changed = [*outside[:2], _turn("outside c changed", "o2", 2), outside[4]]
        changed.append(Event(id="o5", partial=True, content={"parts": [{"text": "partial"}]}))
        changed.append(Event(id="o6", content={"parts": [{"text": "   "}]}))  # no text left
        reports.append(
            await memory.add_session_to_memory(elsewhere.model_copy(update={"events": changed}))
        )
        reports.append(
            await memory.add_session_to_memory(elsewhere.model_copy(update={"events": []}))
        )
        reports.append(await memory.add_session_to_memory(elsewhere))
        reports.append(await _lists(memory))
        async with sessions.store.transaction(write=False) as conn:
            tables = [
                (await conn.execute(text(sql))).all()
                for sql in (
                    f"SELECT {MEMORY_COLUMNS} FROM sqlstore_memories ORDER BY 1, 2, 3",
                    "SELECT app_name, user_id, doc_count, lexeme_count FROM sqlstore_memory_stats"
                    " ORDER BY 1, 2",
                    "SELECT app_name, user_id, count(*), sum(token_count) FROM sqlstore_memories"
                    " GROUP BY 1, 2 ORDER BY 1, 2",
                    "SELECT app_name, user_id, session_id, revision, event_count"
                    " FROM sqlstore_memory_ingestions ORDER BY 1, 2, 3",
                )
            ]
    facts = [row for row in tables[0] if row.user_id == "u1" and row.session_id is None]
    assert len(facts) == 1  # a new id each run: compared by its text only
    memories = [tuple(row) for row in tables[0] if row not in facts]
    return [reports, memories, facts[0].text, *[[tuple(r) for r in rows] for rows in tables[1:]]]


async def _lists(memory: SqlMemoryService) -> list[Any]:
    """add_events_to_memory and add_memory: events added again (one without text now),
    repeated ids in one call, metadata."""
    key: dict[str, Any] = {"app_name": APP, "user_id": "u3"}
    events = [_turn(f"event {w} RFC7231", f"v{n}", n) for n, w in enumerate("abcd")]
    counts = [
        await memory.add_events_to_memory(**key, events=events, session_id="s9"),
        await memory.add_events_to_memory(
            **key,
            events=[*events[:2], _turn("", "v2", 2), _turn("event d again", "v3", 3), events[0]],
            session_id="s9",
            custom_metadata={"source": "é", "n": [1, 2.5, None]},
        ),
        await memory.add_events_to_memory(**key, events=events[:1]),  # no session
    ]
    ids = await memory.add_memory(
        **key,
        memories=[
            MemoryEntry(id="f1", content={"parts": [{"text": "fact one"}]}, timestamp=AT),
            MemoryEntry(id="f2", content={"parts": [{"text": "fact two"}]}, timestamp=AT),
            MemoryEntry(id="f1", content={"parts": [{"text": "fact one, fixed"}]}, timestamp=AT),
            MemoryEntry(id="f3", content={"parts": [{"text": "  "}]}, timestamp=AT),
        ],
        custom_metadata={"kind": "fact"},
    )
    ids += await memory.add_memory(
        **key,
        memories=[
            {
                "id": "f2",
                "content": {"parts": [{"text": "fact two"}]},
                "author": "me",
                "timestamp": AT,
            }
        ],
    )
    return [counts, ids]


async def _databases(
    count: int, backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> list[str]:
    if backend == "sqlite":
        urls = [f"sqlite:///{tmp_path}/db{n}.db" for n in range(count)]
        for url in urls:
            async with SqlMemoryService.from_url(url, auto_migrate=True) as memory:
                await memory.store.ensure_schema()
        return urls
    factory: PostgresFactory = request.getfixturevalue("postgres_factory")
    return [factory.create() for _ in range(count)]


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
async def test_one_round_trip_leaves_what_the_transaction_leaves(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The transaction path also in chunks of 2 rows a statement (PostgreSQL's arrays,
    :data:`adk_sqlstore.sql.constructs.PG_ARRAY_ROWS`, else 10,000)."""
    fast_url, slow_url, chunked_url = await _databases(3, backend, tmp_path, request)
    fast = await _scenario(fast_url)
    with monkeypatch.context() as patched:
        patched.setattr(ingestion, "one_round_trip", lambda *args, **kwargs: False)
        patched.setattr(writing, "one_round_trip", lambda *args, **kwargs: False)
        slow = await _scenario(slow_url)
        patched.setattr(sql_memory, "PG_ARRAY_ROWS", 2)
        chunked = await _scenario(chunked_url)
    assert fast == slow == chunked
    reports, memories, _, stats, truth, _ = fast
    assert [(r.events, r.deleted) for r in reports[:-1]] == [
        (3, 0), (3, 0), (4, 0), (6, 0), (4, 2), (0, 4), (6, 0)
    ]  # fmt: skip
    assert reports[-1] == [[4, 3, 1], ["f1", "f2", "f1", "f2"]]
    assert len(memories) == 4 + 6 + 3 + 1 + 2
    assert stats == truth  # the statistics the triggers keep are exact


async def test_each_write_is_one_statement(db_url: str) -> None:
    """PostgreSQL: one statement each (it commits by itself); SQLite: no statement
    through SQLAlchemy at all (one batch in aiosqlite's thread); MySQL: the few
    statements of one transaction each."""
    async with SqlSessionService.from_url(db_url) as sessions:
        memory = SqlMemoryService(sessions.store)
        stored = await sessions.create_session(app_name=APP, user_id="u1")
        for n in range(3):
            await sessions.append_event(stored, _turn(f"line {n}", f"e{n}", n))
        await memory.add_session_to_memory(stored)  # the store is warm
        await sessions.append_event(stored, _turn("one more", "e3", 3))
        statements: list[str] = []
        engine = sessions.store.engine.sync_engine
        listener = lambda *args: statements.append(args[2])  # noqa: E731
        event.listen(engine, "before_cursor_execute", listener)
        try:
            report = await memory.add_session_to_memory(stored)
            await memory.add_events_to_memory(
                app_name=APP, user_id="u1", events=[_turn("", "e9", 9), _turn("x", "e8", 8)]
            )
            await memory.add_memory(
                app_name=APP, user_id="u1", memories=[{"content": {"parts": [{"text": "y"}]}}]
            )
        finally:
            event.remove(engine, "before_cursor_execute", listener)
    assert (report.events, report.deleted) == (4, 0)
    dialect = sessions.store.engine.dialect.name
    if dialect == "postgresql":  # each takes the user lock in a WITH of its own
        assert [s.split()[0] for s in statements] == ["WITH", "WITH", "WITH"]
    elif dialect == "mysql":  # a transaction each, the user's row locked first: the
        # session locked, its ids, the rows, the record; the memory of the event
        # without text deleted, the row; the row
        assert [s.split()[0] for s in statements] == [
            *("SELECT", "SELECT", "SELECT", "INSERT", "INSERT"),
            *("SELECT", "DELETE", "INSERT"),
            *("SELECT", "INSERT"),
        ]
    else:
        assert statements == []
