"""Past one server (docs/scaling.md): every statement the store issues for one user's
call filters on the distribution key, ``user_id``, so that on Citus it is routed to the
one shard holding that user. Calls that span users by design (listing an app's users,
retention, the idle-ingestion scan) are named in docs/scaling.md and checked apart."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import event, text

from adk_sqlstore import (
    Event,
    EventActions,
    MemoryEntry,
    MemoryGenerator,
    SqlMemoryService,
    SqlSessionService,
)
from adk_sqlstore.sql.distribution import ROW_TRIGGERS

from .conftest import PostgresFactory
from .scripted_models import ScriptedModel, last_event_as_a_fact

USER_TABLES = (
    "sqlstore_sessions",
    "sqlstore_events",
    "sqlstore_session_state",
    "sqlstore_user_state",
    "sqlstore_memories",
    "sqlstore_memory_stats",
    "sqlstore_memory_terms",
    "sqlstore_memory_ingestions",
    "sqlstore_memory_embeddings",
    "sqlstore_users",
    "sqlstore_facts",
    "sqlstore_fact_revisions",
    "sqlstore_fact_sources",
    "sqlstore_fact_leases",
)
"""Distributed by user_id (docs/scaling.md); sqlstore_app_state is a reference table."""

_FILTERED = re.compile(r"\buser_id\s*(=|IN\b|=\s*ANY)", re.I)
_INSERT_COLUMNS = re.compile(r"^\s*INSERT\s+INTO\s+\w+\s*\(([^)]*)\)", re.I)


class Recorder:
    """The statements issued while ``call`` blocks are open, by call."""

    def __init__(self) -> None:
        self.current: str | None = None
        self.by_call: dict[str, list[str]] = {}

    def __call__(self, conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if self.current is not None:
            self.by_call.setdefault(self.current, []).append(statement)

    @contextmanager
    def call(self, name: str) -> Iterator[None]:
        self.current = name
        try:
            yield
        finally:
            self.current = None


def _text(text: str) -> dict[str, Any]:
    return {"role": "user", "parts": [{"text": text}]}


def _routes_to_one_user(statement: str) -> bool:
    """Whether a statement on user tables names the user (a WHERE on user_id, or an
    INSERT whose row carries it); statements on no user table pass, and so do
    forget_user's statistics statements, marked ``/* statistics */`` (maintenance:
    they run on every shard and read no user's rows), and reads of the system
    catalogs, marked ``/* catalog */``."""
    if not any(table in statement for table in USER_TABLES):
        return True
    if statement.lstrip().startswith(("/* statistics */", "/* catalog */")):
        return True
    if _FILTERED.search(statement):
        return True
    columns = _INSERT_COLUMNS.match(statement)
    return columns is not None and "user_id" in columns.group(1)


@pytest.mark.postgres
@pytest.mark.parametrize("hybrid", [False, True], ids=["bm25", "hybrid"])
async def test_every_statement_of_a_users_call_filters_on_user_id(
    hybrid: bool, request: pytest.FixtureRequest
) -> None:
    """With an embedder too (on a server with pgvector): every vector statement of a
    user's call names the user."""
    from .embedders import Concepts

    url = str(request.getfixturevalue("pgvector_url" if hybrid else "postgres_url"))
    recorder = Recorder()
    async with SqlSessionService.from_url(url) as sessions:
        model = ScriptedModel(last_event_as_a_fact)
        memory = SqlMemoryService(
            sessions.engine,
            embedder=Concepts() if hybrid else None,
            generator=MemoryGenerator(model),
        )
        if hybrid:
            assert await memory.vector_storage() == "pgvector"  # made its index: not a call
        event.listen(sessions.engine.sync_engine, "before_cursor_execute", recorder)
        key: dict[str, Any] = {"app_name": "shard", "user_id": "u1"}
        with recorder.call("create_session"):
            session = await sessions.create_session(**key, state={"k": 1, "user:u": 1, "app:a": 1})
        with recorder.call("append_event"):
            for n in range(3):
                await sessions.append_event(
                    session,
                    Event(
                        author="user",
                        content={"role": "user", "parts": [{"text": f"badminton turn {n}"}]},
                        actions=EventActions(state_delta={"n": n, "user:n": n, "app:n": n}),
                    ),
                )
        with recorder.call("get_session"):
            await sessions.get_session(**key, session_id=session.id)
        with recorder.call("list_sessions(user_id)"):
            await sessions.list_sessions(**key)
        with recorder.call("get_user_state"):
            await sessions.get_user_state(**key)
        with recorder.call("add_session_to_memory"):
            await memory.add_session_to_memory(session)
        with recorder.call("add_events_to_memory"):
            await memory.add_events_to_memory(**key, session_id="s2", events=[session.events[0]])
        with recorder.call("add_memory"):
            await memory.add_memory(
                **key, memories=[MemoryEntry(content={"parts": [{"text": "a badminton fact"}]})]
            )
        with recorder.call("search_memory"):
            await memory.search_memory(**key, query="badminton turn")
        with recorder.call("generate"):
            await sessions.append_event(session, Event(author="user", content=_text("a fact")))
            await memory.generate(**key, session_id=session.id)
        with recorder.call("add_memory(consolidate)"):
            entry = MemoryEntry(content={"parts": [{"text": "a badminton fact"}]})
            await memory.add_memory(**key, memories=[entry], consolidate=True)
        with recorder.call("facts"):
            facts = await memory.list_facts(**key, history=True)
            await memory.fact_history(**key, fact_id=facts[0].id)
            await memory.retrieve_profiles(**key)
            await memory.search_memory(**key, query="badminton", kind="facts")
        with recorder.call("export/import memories"):
            await memory.import_memories(await memory.export_memories(**key), replace=True)
        with recorder.call("ingest_session"):
            await memory.ingest_session(**key, session_id=session.id)
        with recorder.call("delete_memories"):
            await memory.delete_memories(**key, session_id="s2")
        with recorder.call("import_session"):
            copy = session.model_copy(update={"id": "imported"})
            await sessions.import_session(copy)
        with recorder.call("delete_session"):
            await sessions.delete_session(**key, session_id=session.id)
        with recorder.call("forget_user"):
            await sessions.forget_user(**key)
        # Calls that span an app's users by design (docs/scaling.md, "Fan-out calls").
        with recorder.call("list_sessions(app)"):
            await sessions.list_sessions(app_name="shard")
        with recorder.call("fan-out"):
            await sessions.prune(older_than=timedelta(days=1))
            await memory.ingest_idle_sessions(timedelta(0))
            await memory.generate_pending(app_name="shard")
            await memory.generation_failures(app_name="shard")
            await memory.users_with_memories(app_name="shard")
        event.remove(sessions.engine.sync_engine, "before_cursor_execute", recorder)
    assert set(recorder.by_call) >= {"append_event", "search_memory", "forget_user", "fan-out"}
    stray = {
        call: [s for s in statements if not _routes_to_one_user(s)]
        for call, statements in recorder.by_call.items()
        if call not in ("fan-out", "list_sessions(app)")
    }
    assert {call: s for call, s in stray.items() if s} == {}
    # Listing an app's users reads every shard, but only that app's rows.
    for statement in recorder.by_call["list_sessions(app)"]:
        if any(table in statement for table in USER_TABLES):
            assert re.search(r"\bapp_name\s*=", statement), statement


def _citus_trigger_sql() -> str:
    """The statements that replace the statistics triggers on Citus
    (adk_sqlstore.sql.citus, which ``adk-sqlstore migrate`` runs there), as one script."""
    return ROW_TRIGGERS.replace(";;", ";")


async def _stats_and_truth(engine: Any) -> tuple[list[Any], list[Any]]:
    """The per-user statistics as kept, and as counted from the memories."""
    async with engine.connect() as conn:
        stats = (
            await conn.execute(
                text(
                    "SELECT app_name, user_id, doc_count, lexeme_count FROM sqlstore_memory_stats"
                    " WHERE doc_count > 0 ORDER BY 1, 2"
                )
            )
        ).all()
        truth = (
            await conn.execute(
                text(
                    "SELECT app_name, user_id, count(*), sum(token_count)"
                    " FROM sqlstore_memories GROUP BY 1, 2 ORDER BY 1, 2"
                )
            )
        ).all()
    return [tuple(r) for r in stats], [tuple(r) for r in truth]


async def _terms_and_truth(engine: Any) -> tuple[list[Any], list[Any]]:
    """The per-user term counts as kept, and as counted from the memories."""
    async with engine.connect() as conn:
        kept = await conn.execute(
            text("SELECT app_name, user_id, term, df FROM sqlstore_memory_terms ORDER BY 1, 2, 3")
        )
        counted = await conn.execute(
            text(
                "SELECT app_name, user_id, term, count(*) FROM sqlstore_memories,"
                " unnest(string_to_array(terms, ' ')"
                " || ('~' || sqlstore_length_class(token_count))) AS term"
                " GROUP BY 1, 2, 3 ORDER BY 1, 2, 3"
            )
        )
        return [tuple(r) for r in kept.all()], [tuple(r) for r in counted.all()]


@pytest.mark.postgres
async def test_the_citus_row_triggers_keep_the_search_statistics_exact(
    postgres_factory: PostgresFactory,
) -> None:
    url = postgres_factory.create()
    async with SqlSessionService.from_url(url) as sessions:
        async with sessions.engine.connect() as conn:
            raw = await conn.get_raw_connection()
            await raw.driver_connection.execute(_citus_trigger_sql())  # type: ignore[union-attr]
            triggers = (
                await conn.execute(
                    text(
                        "SELECT tgname FROM pg_trigger WHERE NOT tgisinternal"
                        " AND tgrelid = 'sqlstore_memories'::regclass"
                    )
                )
            ).scalars()
            assert sorted(triggers) == [
                "sqlstore_memories_counted_row",
                "sqlstore_memories_terms_counted_row",
            ]
        memory = SqlMemoryService(sessions.engine)
        for user in ("u1", "u2"):
            key: dict[str, Any] = {"app_name": "stats", "user_id": user}
            session = await sessions.create_session(**key, session_id="s")
            for n in range(4):
                await sessions.append_event(
                    session,
                    Event(
                        author="user", content={"parts": [{"text": f"{user} plays badminton {n}"}]}
                    ),
                )
                await memory.add_session_to_memory(session)  # re-ingested: updates and inserts
            await memory.add_memory(
                **key,
                memories=[MemoryEntry(content={"parts": [{"text": t}]}) for t in ("tea", "jazz")],
            )
        stats, truth = await _stats_and_truth(sessions.engine)
        assert stats == truth and len(truth) == 2
        terms, counted = await _terms_and_truth(sessions.engine)
        assert terms == counted and ("stats", "u1", "badminton", 4) in terms
        await memory.delete_memories(app_name="stats", user_id="u1", session_id="s")
        await sessions.forget_user(app_name="stats", user_id="u2")
        stats, truth = await _stats_and_truth(sessions.engine)
        assert stats == truth == [("stats", "u1", 2, 2)]
        terms, counted = await _terms_and_truth(sessions.engine)
        assert terms == counted and {t for _, _, t, _ in terms} == {"tea", "jazz", "~1"}
        found = await memory.search_memory(app_name="stats", user_id="u1", query="jazz")
        assert len(found.memories) == 1
