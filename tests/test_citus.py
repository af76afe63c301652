"""The store on a real Citus cluster (distributed PostgreSQL): a coordinator and two
workers of this test module's own (:mod:`tests.citus_cluster`), never the machine's
server. docs/scaling.md promises that every per-user call is one shard on one worker
with a one-phase commit, and that ``adk-sqlstore migrate`` distributes the tables;
this module observes the cluster itself: the remote commands the coordinator sends
(``citus.log_remote_commands``, in its log), by call."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import asyncpg
import pytest

from adk_sqlstore import (
    Event,
    EventActions,
    MemoryEntry,
    MemoryGenerator,
    SqlMemoryService,
    SqlSessionService,
)
from adk_sqlstore.artifacts import ArtifactStorage
from adk_sqlstore.engine import create_engine
from adk_sqlstore.migration import citus_layout, upgrade
from adk_sqlstore.sql.artifacts import ArtifactKey
from adk_sqlstore.store import Store

from .citus_cluster import CitusCluster
from .conftest import IN_CI
from .pg_cluster import ClusterUnavailable
from .scripted_models import ScriptedModel, last_event_as_a_fact

pytestmark = pytest.mark.citus


def _new_cluster() -> CitusCluster:
    """A coordinator and two workers, not started (skipped where Citus is not
    installed: a failure under CI=true)."""
    try:
        return CitusCluster(workers=2)
    except ClusterUnavailable as exc:
        if IN_CI:
            pytest.fail(f"CI=true but {exc}")
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def cluster() -> Iterator[CitusCluster]:
    """A coordinator and two workers, started for this module."""
    with _new_cluster() as made:
        yield made


_counter = iter(range(1_000_000))


@pytest.fixture
def citus_url(cluster: CitusCluster) -> str:
    """A new database on every node of the cluster, workers added, not yet migrated."""
    return cluster.create_database(f"citus_test_{next(_counter)}")


@dataclass
class Remote:
    """What the coordinator sent to the workers during one call."""

    commands: list[tuple[int, str]] = field(default_factory=list)

    @property
    def workers(self) -> set[int]:
        return {port for port, _ in self.commands}

    @property
    def two_phase(self) -> bool:
        return any(command.startswith("PREPARE TRANSACTION") for _, command in self.commands)


_ISSUED = re.compile(
    r"NOTICE:  issuing (.*?)\n[^\n]*DETAIL:  on server \S+@[\d.]+:(\d+) connectionId", re.S
)


class Observer:
    """The coordinator's remote commands by call, read from its server log (the store's
    connections log them: ``citus.log_remote_commands`` and ``log_min_messages`` set
    for them alone)."""

    def __init__(self, cluster: CitusCluster) -> None:
        self.log = cluster.coordinator.folder / "server.log"
        self.by_call: dict[str, Remote] = {}

    @asynccontextmanager
    async def call(self, name: str) -> AsyncIterator[None]:
        await asyncio.sleep(0)
        start = self.log.stat().st_size
        yield
        await asyncio.sleep(0.05)  # the server writes its log a moment later
        with self.log.open("rb") as log:
            log.seek(start)
            said = log.read().decode(errors="replace")
        remote = self.by_call.setdefault(name, Remote())
        remote.commands += [(int(port), command) for command, port in _ISSUED.findall(said)]


def observed_engine(url: str) -> Any:
    settings = {"citus.log_remote_commands": "on", "log_min_messages": "notice"}
    return create_engine(url, connect_args={"server_settings": settings})


def _text(words: str) -> dict[str, Any]:
    return {"role": "user", "parts": [{"text": words}]}


async def _per_user_calls(url: str, observer: Observer, user_id: str) -> None:
    engine = observed_engine(url)
    store = Store.of(engine)
    sessions = SqlSessionService(store)
    memory = SqlMemoryService(store, generator=MemoryGenerator(ScriptedModel(last_event_as_a_fact)))
    artifacts = ArtifactStorage(store)
    key: dict[str, Any] = {"app_name": "shard", "user_id": user_id}
    try:
        async with observer.call("create_session"):
            session = await sessions.create_session(**key, state={"k": 1, "user:u": 1})
        async with observer.call("append_event"):
            for n in range(3):
                delta = {"n": n, "user:n": n}
                event = Event(author="user", content=_text(f"badminton turn {n}"))
                event.actions = EventActions(state_delta=delta)
                await sessions.append_event(session, event)
        async with observer.call("get_session"):
            await sessions.get_session(**key, session_id=session.id)
        async with observer.call("list_sessions(user_id)"):
            await sessions.list_sessions(**key)
        async with observer.call("add_session_to_memory"):
            await memory.add_session_to_memory(session)
        async with observer.call("ingest_session"):
            await memory.ingest_session(**key, session_id=session.id)
        async with observer.call("add_events_to_memory"):
            await memory.add_events_to_memory(**key, session_id="s2", events=[session.events[0]])
        async with observer.call("add_memory"):
            entry = MemoryEntry(content={"parts": [{"text": "a badminton fact"}]})
            await memory.add_memory(**key, memories=[entry])
        async with observer.call("search_memory"):
            found = await memory.search_memory(**key, query="badminton turn")
            assert found.memories
        async with observer.call("generate"):
            await sessions.append_event(session, Event(author="user", content=_text("a fact")))
            await memory.generate(**key, session_id=session.id)
        async with observer.call("delete_memories"):
            await memory.delete_memories(**key, session_id="s2")
        where = ArtifactKey(**key, session_id=session.id, filename="f")
        async with observer.call("save_artifact"):
            await artifacts.save(
                where, part={}, data=b"bytes" * 100, mime_type="text/plain", custom_metadata=None
            )
        async with observer.call("load_artifact"):
            assert await artifacts.load(where, None) is not None
        async with observer.call("list_artifacts"):
            assert await artifacts.filenames("shard", user_id, session.id) == ["f"]
        async with observer.call("delete_artifact"):
            await artifacts.delete(where)
        async with observer.call("delete_session"):
            await sessions.delete_session(**key, session_id=session.id)
    finally:
        await store.close()
        await engine.dispose()


async def _migrated(url: str) -> None:
    engine = create_engine(url)
    try:
        await upgrade(engine)
    finally:
        await engine.dispose()


async def _a_user_on_each_worker(url: str) -> list[str]:
    """User ids whose shard is on each worker, one per worker."""
    conn = await asyncpg.connect(url)
    try:
        by_port: dict[int, str] = {}
        for n in range(100):
            port = await conn.fetchval(
                "SELECT nodeport FROM citus_shards WHERE shardid ="
                " get_shard_id_for_distribution_column('sqlstore_sessions', $1::text)",
                f"user-{n}",
            )
            by_port.setdefault(port, f"user-{n}")
        return sorted(by_port.values())
    finally:
        await conn.close()


async def test_every_per_user_call_is_one_worker_and_one_phase(
    cluster: CitusCluster, citus_url: str
) -> None:
    """docs/scaling.md: "every per-user call is one shard, one worker, one-phase
    commit", for users on each worker."""
    await _migrated(citus_url)
    reached: set[int] = set()
    for user_id in await _a_user_on_each_worker(citus_url):
        observer = Observer(cluster)
        await _per_user_calls(citus_url, observer, user_id)
        report = {
            call: (sorted(remote.workers), remote.two_phase)
            for call, remote in observer.by_call.items()
        }
        crossing = {call: line for call, line in report.items() if len(line[0]) > 1 or line[1]}
        assert crossing == {}, user_id
        assert len(report) == 16 and all(line[0] for line in report.values())
        reached |= {port for line in report.values() for port in line[0]}
    assert reached == {worker.port for worker in cluster.workers}


async def test_an_append_with_an_app_key_writes_every_node(
    cluster: CitusCluster, citus_url: str
) -> None:
    """docs/scaling.md: app: keys live in a reference table, copied to every node: such
    an append writes every node's copy in two phases (what it costs is in
    benchmarks/RESULTS.md)."""
    await _migrated(citus_url)
    observer = Observer(cluster)
    engine = observed_engine(citus_url)
    async with SqlSessionService(Store.of(engine)) as sessions:
        session = await sessions.create_session(app_name="a", user_id="u")
        async with observer.call("append(app:)"):
            event = Event(author="user", actions=EventActions(state_delta={"app:flag": 1}))
            await sessions.append_event(session, event)
        got = await sessions.get_session(app_name="a", user_id="u", session_id=session.id)
        assert got is not None and got.state["app:flag"] == 1
    await engine.dispose()
    remote = observer.by_call["append(app:)"]
    assert remote.workers == {worker.port for worker in cluster.workers}
    assert remote.two_phase
    database = citus_url.rsplit("/", 1)[1]
    for node in cluster.nodes:
        conn = await asyncpg.connect(node.url(database))
        try:
            value = await conn.fetchval(
                "SELECT value FROM sqlstore_app_state WHERE app_name = 'a' AND key = 'flag'"
            )
        finally:
            await conn.close()
        assert value == "1", node.port


async def _worker_stats_naming(cluster: CitusCluster, database: str, *words: str) -> int:
    """How many pg_stats rows of the store's shard tables, on any worker, hold any of
    ``words`` in their most common values or elements or histogram."""
    found = 0
    for worker in cluster.workers:
        conn = await asyncpg.connect(worker.url(database))
        try:
            await conn.execute("SET citus.override_table_visibility = off")
            found += await conn.fetchval(
                "SELECT count(*) FROM pg_stats WHERE tablename LIKE 'sqlstore\\_%'"
                " AND concat_ws(' ', most_common_vals::text, most_common_elems::text,"
                " histogram_bounds::text) ~ $1",
                "|".join(words),
            )
        finally:
            await conn.close()
    return found


async def test_forget_user_leaves_no_statistics_on_any_worker(
    cluster: CitusCluster, citus_url: str
) -> None:
    """The issue's finding: forget_user's clean-up ran on the coordinator only, and the
    workers' pg_stats of the user's shards still held their id and words."""
    await _migrated(citus_url)
    database = citus_url.rsplit("/", 1)[1]
    async with SqlSessionService.from_url(citus_url) as sessions:
        memory = SqlMemoryService(sessions.engine)
        for user_id in ("keeper", "gone-user"):
            session = await sessions.create_session(app_name="a", user_id=user_id)
            for n in range(5):
                words = "zebrafishword" if user_id == "gone-user" else "ordinary"
                await sessions.append_event(
                    session, Event(author="user", content=_text(f"{words} {n}"))
                )
            await memory.add_session_to_memory(session)
        conn = await asyncpg.connect(citus_url)
        await conn.execute("ANALYZE")
        await conn.close()
        assert await _worker_stats_naming(cluster, database, "gone-user", "zebrafishword") > 0
        await sessions.forget_user(app_name="a", user_id="gone-user")
        assert await _worker_stats_naming(cluster, database, "gone-user", "zebrafishword") == 0
        assert await sessions.list_sessions(app_name="a", user_id="keeper")


async def test_the_fan_out_calls_work(cluster: CitusCluster, citus_url: str) -> None:
    """prune (the CLI's too), the idle-ingestion scan and listing an app's sessions span
    shards; they run on the cluster (prune used to fail: FOR UPDATE across shards)."""
    from adk_sqlstore.cli import app as cli

    from .helpers import runner

    await _migrated(citus_url)
    async with SqlSessionService.from_url(citus_url) as sessions:
        memory = SqlMemoryService(sessions.engine)
        for n in range(6):
            session = await sessions.create_session(app_name="a", user_id=f"user-{n}")
            await sessions.append_event(session, Event(author="user", content=_text("hello")))
        listed = await sessions.list_sessions(app_name="a")
        assert len(listed.sessions) == 6
        assert len([s async for s in sessions.iter_sessions(app_name="a")]) == 6
        report = await memory.ingest_idle_sessions(timedelta(0))
        assert report.sessions == 6
        pruned = await sessions.prune(older_than=timedelta(days=1))
        assert pruned.sessions == 0
        await asyncio.sleep(0.05)
        pruned = await sessions.prune(older_than=timedelta(0), with_memories=True)
        assert pruned.sessions == 6 and pruned.memories == 6
        assert (await sessions.list_sessions(app_name="a")).sessions == []
    args = ["prune", "--older-than", "1d", "--yes", "--url", citus_url]
    result = await asyncio.to_thread(runner.invoke, cli, args)
    assert result.exit_code == 0, result.output


@pytest.mark.soak
async def test_adding_a_worker_and_rebalancing_under_load_loses_nothing() -> None:
    """A third worker joins and citus_rebalance_start() moves shards to it while
    appends and searches run: every append that returned is stored, every search
    answers, and the only errors are the store's typed ones."""
    from adk_sqlstore.errors import AdkSqlStoreError

    with _new_cluster() as cluster:
        url = await asyncio.to_thread(cluster.create_database, "rebalanced")
        conn = await asyncpg.connect(url)
        await conn.execute('ALTER DATABASE "rebalanced" SET citus.shard_count = 8')
        await conn.close()
        await _migrated(url)
        done = asyncio.Event()
        appended: dict[tuple[str, str], int] = {}
        typed: list[AdkSqlStoreError] = []
        async with SqlSessionService.from_url(url) as sessions:
            memory = SqlMemoryService(sessions.engine)

            async def work(user_id: str) -> None:
                session = await sessions.create_session(app_name="a", user_id=user_id)
                while not done.is_set():
                    try:
                        event = Event(author="user", content=_text("kayak trip planned"))
                        await sessions.append_event(session, event)
                        appended[(user_id, session.id)] = appended.get((user_id, session.id), 0) + 1
                        await memory.add_events_to_memory(
                            app_name="a", user_id=user_id, session_id=session.id, events=[event]
                        )
                        await memory.search_memory(app_name="a", user_id=user_id, query="kayak")
                    except AdkSqlStoreError as exc:
                        typed.append(exc)
                        got = await sessions.get_session(
                            app_name="a", user_id=user_id, session_id=session.id
                        )
                        assert got is not None
                        session = got
                    await asyncio.sleep(0.01)

            workers = [asyncio.create_task(work(f"user-{n}")) for n in range(6)]
            await asyncio.sleep(1)
            new = await asyncio.to_thread(cluster.add_worker)
            admin = await asyncpg.connect(url)
            try:
                await admin.execute("SELECT citus_rebalance_start()")
                await admin.execute("SELECT citus_rebalance_wait()")
                moved = await admin.fetchval(
                    "SELECT count(*) FROM citus_shards WHERE nodeport = $1", new.port
                )
            finally:
                await admin.close()
            await asyncio.sleep(1)
            done.set()
            await asyncio.gather(*workers)
            assert moved > 0
            admin = await asyncpg.connect(url)
            for (user_id, session_id), count in appended.items():
                got = await sessions.get_session(
                    app_name="a", user_id=user_id, session_id=session_id
                )
                assert got is not None and len(got.events) == count
                remembered = await admin.fetchval(
                    "SELECT count(*) FROM sqlstore_memories WHERE user_id = $1", user_id
                )
                assert remembered == count
                found = await memory.search_memory(app_name="a", user_id=user_id, query="kayak")
                assert found.memories
            await admin.close()
        assert len(typed) <= sum(appended.values()) // 2, typed[:3]


async def test_migrate_distributes_a_table_a_later_migration_adds(
    cluster: CitusCluster, citus_url: str
) -> None:
    """The table list is the schema's: a table a newer migration adds (here made by
    hand, and declared in the schema for this test) is distributed by the next
    migrate, colocated; running it again changes nothing."""
    from sqlalchemy import Column, PrimaryKeyConstraint, Table, Text

    from adk_sqlstore.schema import metadata

    await _migrated(citus_url)
    engine = create_engine(citus_url)
    before = await citus_layout(engine)
    assert before is not None and len(before[0]) == len(metadata.tables)
    later = Table(
        "sqlstore_later",
        metadata,
        Column("app_name", Text, nullable=False),
        Column("user_id", Text, nullable=False),
        Column("note", Text),
        PrimaryKeyConstraint("app_name", "user_id"),
    )
    try:
        conn = await asyncpg.connect(citus_url)
        await conn.execute(
            "CREATE TABLE sqlstore_later (app_name text NOT NULL, user_id text NOT NULL,"
            " note text, PRIMARY KEY (app_name, user_id))"
        )
        await conn.close()
        await upgrade(engine)
        await upgrade(engine)
        after = await citus_layout(engine)
        assert after is not None and after[0]["sqlstore_later"] == "distributed"
        assert {k: v for k, v in after[0].items() if k != "sqlstore_later"} == before[0]
    finally:
        metadata.remove(later)
        await engine.dispose()


async def test_a_store_with_data_moves_onto_citus(cluster: CitusCluster) -> None:
    """A single-server store in use (sessions, state, memories, artifacts) becomes
    distributed: the citus extension added on every node, workers added, migrate run
    again. Everything reads back, and the search statistics stay exact (the copy into
    the shards runs the row triggers)."""
    name = f"citus_test_{next(_counter)}"
    for node in cluster.nodes:
        conn = await asyncpg.connect(node.url())
        await conn.execute(f'CREATE DATABASE "{name}"')
        await conn.close()
    url = cluster.coordinator.url(name)
    await _migrated(url)  # plain PostgreSQL: no extension yet
    async with SqlSessionService.from_url(url) as sessions:
        memory = SqlMemoryService(sessions.engine)
        for user_id in ("u1", "u2", "u3"):
            session = await sessions.create_session(
                app_name="a", user_id=user_id, state={"k": 1, "user:u": 2, "app:x": 3}
            )
            for n in range(4):
                await sessions.append_event(
                    session, Event(author="user", content=_text(f"kayak trip {n} {user_id}"))
                )
            await memory.add_session_to_memory(session)
            where = ArtifactKey(app_name="a", user_id=user_id, session_id=session.id, filename="f")
            await ArtifactStorage(sessions.store).save(
                where, part={}, data=b"x" * 10, mime_type="text/plain", custom_metadata=None
            )
    await asyncio.to_thread(_make_citus, cluster, name)
    await _migrated(url)
    engine = create_engine(url)
    layout = await citus_layout(engine)
    await engine.dispose()
    assert layout is not None and set(layout[0].values()) == {"distributed", "reference"}
    async with SqlSessionService.from_url(url) as sessions:
        memory = SqlMemoryService(sessions.engine)
        for user_id in ("u1", "u2", "u3"):
            listed = await sessions.list_sessions(app_name="a", user_id=user_id)
            (session,) = listed.sessions
            got = await sessions.get_session(app_name="a", user_id=user_id, session_id=session.id)
            assert got is not None and len(got.events) == 4
            assert got.state == {"k": 1, "user:u": 2, "app:x": 3}
            found = await memory.search_memory(app_name="a", user_id=user_id, query="kayak")
            assert len(found.memories) == 4
            where = ArtifactKey(app_name="a", user_id=user_id, session_id=session.id, filename="f")
            assert await ArtifactStorage(sessions.store).load(where, None) is not None
    conn = await asyncpg.connect(url)
    try:
        kept = await conn.fetch(
            "SELECT user_id, doc_count, lexeme_count FROM sqlstore_memory_stats ORDER BY 1"
        )
        counted = await conn.fetch(
            "SELECT user_id, count(*), sum(token_count) FROM sqlstore_memories"
            " GROUP BY 1 ORDER BY 1"
        )
        assert [tuple(r) for r in kept] == [tuple(r) for r in counted]
        terms = await conn.fetchval("SELECT sum(df) FROM sqlstore_memory_terms")
        expected = await conn.fetchval(
            "SELECT count(*) FROM sqlstore_memories,"
            " unnest(string_to_array(terms, ' ') || ('~' || sqlstore_length_class(token_count)))"
        )
        assert terms == expected
    finally:
        await conn.close()


def _make_citus(cluster: CitusCluster, name: str) -> None:
    """The extension in database ``name`` on every node, the workers added."""

    async def run() -> None:
        for node in cluster.nodes:
            conn = await asyncpg.connect(node.url(name))
            await conn.execute("CREATE EXTENSION citus")
            await conn.close()
        conn = await asyncpg.connect(cluster.coordinator.url(name))
        await conn.execute(
            f"SELECT citus_set_coordinator_host('127.0.0.1', {cluster.coordinator.port})"
        )
        for worker in cluster.workers:
            await conn.execute(f"SELECT citus_add_node('127.0.0.1', {worker.port})")
        await conn.close()

    asyncio.run(run())


async def test_a_role_that_owns_the_database_migrates_and_runs_it(cluster: CitusCluster) -> None:
    """docs/scaling.md: migrate needs a role that may create tables and triggers, not a
    superuser (the tables are distributed after their migration commits: Citus records
    a new table's sequence over a connection of its own)."""
    name = f"citus_test_{next(_counter)}"
    for node in cluster.nodes:
        conn = await asyncpg.connect(node.url())
        await conn.execute(
            "DO $$ BEGIN CREATE ROLE app LOGIN PASSWORD 'pw'; EXCEPTION WHEN duplicate_object"
            " THEN NULL; END $$"
        )
        await conn.execute(f'CREATE DATABASE "{name}" OWNER app')
        await conn.close()
    await asyncio.to_thread(_make_citus, cluster, name)
    url = f"postgresql://app:pw@127.0.0.1:{cluster.coordinator.port}/{name}"
    await _migrated(url)
    async with SqlSessionService.from_url(url) as sessions:
        memory = SqlMemoryService(sessions.engine)
        session = await sessions.create_session(app_name="a", user_id="u")
        await sessions.append_event(session, Event(author="user", content=_text("kayak")))
        await memory.add_session_to_memory(session)
        assert (await memory.search_memory(app_name="a", user_id="u", query="kayak")).memories
    # not a superuser: the emptied shards' statistics are left, and the command says so
    from adk_sqlstore.cli import app as cli

    from .helpers import runner

    args = ["forget-user", "--app", "a", "--user", "u", "--yes", "--url", url]
    result = await asyncio.to_thread(runner.invoke, cli, args)
    assert result.exit_code == 0, result.output
    assert "warning: forget_user" in result.output and "the user's shard" in result.output
