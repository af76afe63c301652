"""One failure, one typed error, on every backend (the one mapper,
:mod:`adk_sqlstore.failures`).

Each test forces the same database failure on an SQLite file and on PostgreSQL (a
trigger refusing a write, a duplicate key the call does not expect, a table that is
gone) and checks that both raise the same class of error, with the database's reason in
its message: never a raw driver or SQLAlchemy error.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from sqlalchemy import text

from adk_sqlstore import (
    DatabaseUnavailableError,
    Event,
    EventActions,
    InvalidEventError,
    MemoryEntry,
    SqlMemoryService,
    SqlSessionService,
    Store,
)

from .conftest import BACKENDS, PostgresFactory

APP, USER = "faults", "u1"

# A trigger refusing every insert into a table, with an integrity error on both backends.
_SQLITE_REFUSE = (
    "CREATE TRIGGER refuse_{table} BEFORE INSERT ON {table}"
    " BEGIN SELECT RAISE(ABORT, 'refused by the test'); END"
)
_PG_REFUSE = [
    "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
    " RAISE EXCEPTION 'refused by the test' USING ERRCODE = 'check_violation'; END $$",
    "CREATE TRIGGER refuse_{table} BEFORE INSERT ON {table} FOR EACH ROW EXECUTE FUNCTION refuse()",
]


@pytest.fixture(params=BACKENDS)
def own_db_url(request: pytest.FixtureRequest) -> str:
    """A migrated database of this test's own (its schema is changed by the test)."""
    if request.param == "sqlite":
        return str(request.getfixturevalue("sqlite_url"))
    factory: PostgresFactory = request.getfixturevalue("postgres_factory")
    return factory.create()


async def _ddl(store: Store, *statements: str) -> None:
    async with store.engine.begin() as conn:
        for statement in statements:
            await conn.execute(text(statement))


async def _refuse_inserts(store: Store, table: str) -> None:
    if store.engine.dialect.name == "sqlite":
        await _ddl(store, _SQLITE_REFUSE.format(table=table))
    else:
        await _ddl(store, *(s.format(table=table) for s in _PG_REFUSE))


def _turn(text_: str) -> Event:
    return Event(author="user", content={"parts": [{"text": text_}]})


async def _raises_database_error(call: Awaitable[Any], *reason: str) -> DatabaseUnavailableError:
    with pytest.raises(DatabaseUnavailableError) as raised:
        await call
    assert type(raised.value) is DatabaseUnavailableError
    for words in reason:
        assert words in str(raised.value)
    return raised.value


Case = Callable[[SqlSessionService, SqlMemoryService], Awaitable[Any]]


async def _add_memory(sessions: SqlSessionService, memory: SqlMemoryService) -> Any:
    return await memory.add_memory(
        app_name=APP, user_id=USER, memories=[MemoryEntry(content={"parts": [{"text": "x"}]})]
    )


async def _ingest(sessions: SqlSessionService, memory: SqlMemoryService) -> Any:
    session = await sessions.create_session(app_name=APP, user_id=USER)
    await sessions.append_event(session, _turn("a turn to remember"))
    return await memory.add_session_to_memory(session)


async def _append(sessions: SqlSessionService, memory: SqlMemoryService) -> Any:
    session = await sessions.create_session(app_name=APP, user_id=USER, session_id="s")
    return await sessions.append_event(session, _turn("refused"))


async def _create(sessions: SqlSessionService, memory: SqlMemoryService) -> Any:
    return await sessions.create_session(app_name=APP, user_id=USER, state={"user:k": 1})


@pytest.mark.parametrize(
    ("table", "case"),
    [
        ("sqlstore_memories", _add_memory),
        ("sqlstore_memories", _ingest),
        ("sqlstore_events", _append),
        ("sqlstore_user_state", _create),
    ],
    ids=["add_memory", "add_session_to_memory", "append_event", "create_session"],
)
async def test_a_refused_write_is_the_same_error_on_every_backend(
    own_db_url: str, table: str, case: Case
) -> None:
    async with Store.from_url(own_db_url) as store:
        sessions, memory = SqlSessionService(store), SqlMemoryService(store)
        await store.ensure_schema()
        await _refuse_inserts(store, table)
        await _raises_database_error(case(sessions, memory), "refused by the test")
        # nothing half-written: no session of the refused call is left behind
        listed = await sessions.list_sessions(app_name=APP)
        if table != "sqlstore_events":
            assert all(not s.events for s in listed.sessions)


async def test_a_duplicate_key_the_call_does_not_expect_is_the_same_error(
    own_db_url: str,
) -> None:
    """A unique index the store does not know of (an operator's): a duplicate there is
    no AlreadyExistsError or InvalidEventError, but a database failure, on both."""
    async with Store.from_url(own_db_url) as store:
        sessions, memory = SqlSessionService(store), SqlMemoryService(store)
        await store.ensure_schema()
        await _ddl(store, "CREATE UNIQUE INDEX one_text ON sqlstore_memories (app_name, text)")
        same = [MemoryEntry(content={"parts": [{"text": "twice"}]}) for _ in range(2)]
        error = await _raises_database_error(
            memory.add_memory(app_name=APP, user_id=USER, memories=same)
        )
        assert "one_text" in str(error) or "UNIQUE" in str(error)
        # the duplicates the store expects keep their own errors
        session = await sessions.create_session(app_name=APP, user_id=USER)
        event = _turn("once")
        await sessions.append_event(session, event)
        with pytest.raises(InvalidEventError, match="already exists"):
            await sessions.append_event(session, _turn("other").model_copy(update={"id": event.id}))


async def test_a_missing_table_is_the_same_error_on_every_backend(own_db_url: str) -> None:
    async with Store.from_url(own_db_url) as store:
        sessions = SqlSessionService(store)
        session = await sessions.create_session(app_name=APP, user_id=USER, session_id="s")
        await _ddl(store, "DROP TABLE sqlstore_user_state")
        await _raises_database_error(
            sessions.get_user_state(app_name=APP, user_id=USER), "sqlstore_user_state"
        )
        await _raises_database_error(
            sessions.append_event(
                session, Event(author="user", actions=EventActions(state_delta={"user:k": 1}))
            ),
            "sqlstore_user_state",
        )
