"""Alembic is the only schema source: upgrade, downgrade, and what the wheel ships."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect
from sqlalchemy.engine import Connection

from adk_sqlstore import (
    SqlMemoryService,
    SqlSessionService,
)
from adk_sqlstore.engine import create_engine
from adk_sqlstore.migration import (
    HEAD_REVISION,
    current_revision,
    downgrade,
    migrations_path,
    upgrade,
)
from adk_sqlstore.schema import ALEMBIC_VERSION_TABLE, SEARCH_OBJECTS, include_object, metadata
from adk_sqlstore.urls import DATABASE_URL_ENV, normalize_url

from .conftest import BACKENDS, REPO, MysqlFactory, PostgresFactory, run_sync
from .workers import create_with_auto_migrate, process_context

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:alembic")


def _empty(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'empty.db'}"
    factory: PostgresFactory | MysqlFactory = request.getfixturevalue(f"{request.param}_factory")
    return factory.create(migrate=False)


@pytest.fixture(params=BACKENDS)
def empty_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty database (no tables at all)."""
    return _empty(request, tmp_path)


@pytest.fixture(params=BACKENDS[:2])
def empty_old_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty SQLite or PostgreSQL database: the backends with revisions before 0009
    (MySQL's schema is made whole by 0009), for tests of what those revisions do to
    the data they find."""
    return _empty(request, tmp_path)


def _diff(conn: Connection) -> list[Any]:
    context = MigrationContext.configure(
        conn,
        opts={
            "compare_type": True,
            "version_table": ALEMBIC_VERSION_TABLE,
            "include_object": include_object,
        },
    )
    return list(compare_metadata(context, metadata))


def _tables(conn: Connection) -> set[str]:
    """The tables, without the dialects' search objects (schema.SEARCH_OBJECTS)."""
    search = set().union(*(objects["tables"] for objects in SEARCH_OBJECTS.values()))
    return {
        name
        for name in inspect(conn).get_table_names()
        if not any(name == t or name.startswith(t + "_") for t in search)
    }


def _all_tables(conn: Connection) -> set[str]:
    return set(inspect(conn).get_table_names())


def _search_objects(conn: Connection) -> dict[str, set[Any]]:
    inspector = inspect(conn)
    found: dict[str, set[Any]] = {"tables": set(), "indexes": set(), "columns": set()}
    found["tables"] = {t for t in inspector.get_table_names() if t == "sqlstore_memories_fts"}
    if "sqlstore_memories" in inspector.get_table_names():
        found["indexes"] = {
            i["name"]
            for i in inspector.get_indexes("sqlstore_memories")
            if i["name"] == "ix_sqlstore_memories_search_vector"
        }
        found["columns"] = {
            ("sqlstore_memories", c["name"])
            for c in inspector.get_columns("sqlstore_memories")
            if c["name"] == "search_vector"
        }
    return found


def _revisions() -> list[str]:
    config = Config()
    config.set_main_option("script_location", str(migrations_path()))
    script = ScriptDirectory.from_config(config)
    return [rev.revision for rev in reversed(list(script.walk_revisions()))]


def test_head_constant_matches_the_migration_scripts() -> None:
    assert _revisions()[-1] == HEAD_REVISION


async def test_upgrade_gives_exactly_the_declared_schema(empty_url: str) -> None:
    engine = create_engine(empty_url)
    try:
        await upgrade(engine)
        assert await current_revision(engine) == HEAD_REVISION
        async with engine.connect() as conn:
            assert await conn.run_sync(_diff) == []
            assert await conn.run_sync(_tables) == {
                *(t.name for t in metadata.sorted_tables),
                ALEMBIC_VERSION_TABLE,
            }
        await upgrade(engine)  # idempotent
        assert await current_revision(engine) == HEAD_REVISION
    finally:
        await engine.dispose()


async def test_every_revision_walks_down_and_up(empty_url: str) -> None:
    engine = create_engine(empty_url)
    revisions = _revisions()
    try:
        for revision in revisions:
            await upgrade(engine, revision)
            assert await current_revision(engine) == revision
        for target in [*reversed(revisions[:-1]), "base"]:
            await downgrade(engine, "-1")
            assert await current_revision(engine) == (None if target == "base" else target)
        async with engine.connect() as conn:
            # Everything is gone, the search objects included.
            assert await conn.run_sync(_all_tables) <= {ALEMBIC_VERSION_TABLE}
        await upgrade(engine)
        async with engine.connect() as conn:
            assert await conn.run_sync(_diff) == []
    finally:
        await engine.dispose()


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != DATABASE_URL_ENV}
    env.update(extra)
    return env


def test_alembic_upgrade_head_from_the_repository_root(empty_url: str) -> None:
    alembic = Path(sys.executable).with_name("alembic")
    done = subprocess.run(
        [str(alembic), "upgrade", "head"],
        cwd=REPO,
        env=_clean_env(**{DATABASE_URL_ENV: empty_url}),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert run_sync(_revision_of(empty_url)) == HEAD_REVISION


def test_alembic_check_finds_no_drift_even_beside_adks_tables(empty_url: str) -> None:
    """``alembic check`` from a checkout on a migrated database reports nothing to do,
    also when ADK's DatabaseSessionService shares the database: autogenerate never
    proposes dropping others' tables (migrations/env.py, schema.include_object)."""
    pytest.importorskip("google.adk")
    from google.adk.sessions import DatabaseSessionService

    alembic = str(Path(sys.executable).with_name("alembic"))
    env = _clean_env(**{DATABASE_URL_ENV: empty_url})

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [alembic, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
        )

    assert run("upgrade", "head").returncode == 0
    checked = run("check")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "No new upgrade operations detected" in checked.stdout + checked.stderr

    async def adk_tables() -> None:
        adk_url = normalize_url(empty_url).render_as_string(hide_password=False)
        service = DatabaseSessionService(db_url=adk_url)
        try:
            await service.create_session(app_name="a", user_id="u")  # makes its tables
        finally:
            await service.close()

    run_sync(adk_tables())
    checked = run("check")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "remove_table" not in checked.stdout + checked.stderr


@pytest.mark.soak  # CI runs it (make test-all); out of make test's minutes
def test_processes_migrating_at_once_report_what_each_did(empty_url: str) -> None:
    """Four ``adk-sqlstore migrate`` at once on an empty database: one migrates (and
    says so), the other three find it done."""
    command = [sys.executable, "-m", "adk_sqlstore", "migrate", "--url", empty_url]
    procs = [
        subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for _ in range(4)
    ]
    outputs = [p.communicate(timeout=120)[0] for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, outputs
    assert sum(f"migrated from empty to {HEAD_REVISION}" in o for o in outputs) == 1, outputs
    assert sum(f"already at revision {HEAD_REVISION}" in o for o in outputs) == 3, outputs


async def _revision_of(url: str) -> str | None:
    engine = create_engine(url)
    try:
        return await current_revision(engine)
    finally:
        await engine.dispose()


@pytest.mark.sqlite
def test_the_wheel_ships_the_migrations_and_can_migrate(tmp_path: Path) -> None:
    hatchling = Path(sys.executable).with_name("hatchling")
    built = subprocess.run(
        [str(hatchling), "build", "-t", "wheel", "-d", str(tmp_path / "dist")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "dist").glob("adk_sqlstore-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        assert "adk_sqlstore/migrations/env.py" in names
        assert "adk_sqlstore/migrations/versions/0001_sessions.py" in names
        assert "adk_sqlstore/migrations/versions/0002_memory.py" in names
        assert "adk_sqlstore/py.typed" in names
        archive.extractall(tmp_path / "site")
    # Run the installed package (not this checkout) from an unrelated folder.
    db = tmp_path / "from-wheel.db"
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import adk_sqlstore;"
        " assert adk_sqlstore.__file__.startswith(sys.argv[1]), adk_sqlstore.__file__;"
        " from adk_sqlstore.migration import migrations_path;"
        " assert str(migrations_path()).startswith(sys.argv[1]);"
        " from adk_sqlstore.cli import app; app(sys.argv[2:])"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "site"), "migrate", "--url", f"sqlite:///{db}"],
        cwd=tmp_path,
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"migrated from empty to {HEAD_REVISION}" in done.stdout


@pytest.mark.sqlite
def test_sqlite_without_fts5_fails_clearly_at_migration_time(tmp_path: Path) -> None:
    """No silent fallback: an SQLite that cannot create FTS5 tables stops the migration
    with a message that says why."""
    import sqlite3

    from alembic import command
    from sqlalchemy import create_engine as create_sync_engine

    from adk_sqlstore.errors import MigrationError
    from adk_sqlstore.migration import _alembic_config

    def no_fts5(action: int, arg1: str | None, *_: object) -> int:
        if action == sqlite3.SQLITE_CREATE_VTABLE and arg1 and "fts5" in arg1.lower():
            return sqlite3.SQLITE_DENY
        return sqlite3.SQLITE_OK

    def connect() -> sqlite3.Connection:
        conn = sqlite3.connect(tmp_path / "no-fts5.db")
        conn.set_authorizer(no_fts5)
        return conn

    engine = create_sync_engine("sqlite://", creator=connect)
    try:
        with engine.begin() as conn, pytest.raises(MigrationError, match="without FTS5"):
            command.upgrade(_alembic_config(conn), "head")
    finally:
        engine.dispose()


# -- moved from test_edges.py


async def test_a_session_from_url_engine_lets_memory_migrate_the_embedded_default(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    monkeypatch.delenv(DATABASE_URL_ENV, raising=False)
    async with SqlSessionService.from_url() as sessions:
        memory = SqlMemoryService(sessions.engine)
        assert (await memory.search_memory(app_name="a", user_id="u", query="hi")).memories == []


@pytest.mark.soak  # processes (about 6 s); make test-all (CI) runs it
@pytest.mark.postgres
def test_processes_auto_migrating_one_new_database_together(
    postgres_factory: PostgresFactory,
) -> None:
    url = postgres_factory.create(migrate=False)
    ctx = process_context()
    results = ctx.Queue()
    workers = [
        ctx.Process(target=create_with_auto_migrate, args=(url, n, results)) for n in range(6)
    ]
    for w in workers:
        w.start()
    outcomes = [results.get(timeout=120) for _ in workers]
    for w in workers:
        w.join(timeout=60)
    assert sorted(outcomes) == [f"ok {n}" for n in range(6)], outcomes


def test_alembic_offline_sql_works_on_sqlite(tmp_path: Path) -> None:
    done = subprocess.run(
        [str(Path(sys.executable).with_name("alembic")), "upgrade", "head", "--sql"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={"PATH": "/usr/bin:/bin", DATABASE_URL_ENV: f"sqlite:///{tmp_path / 'x.db'}"},
    )
    assert done.returncode == 0, done.stderr
    assert "CREATE VIRTUAL TABLE sqlstore_memories_fts" in done.stdout


async def test_0004_reindexes_memories_written_before_it(empty_old_url: str) -> None:
    """Memories stored under 0003 (indexed by each backend's own parser) are analysed
    by 0004 in batches: found by identifier parts and inside unspaced text on both
    backends, with the per-user statistics recounted; down to 0003 and up again."""
    from sqlalchemy import text

    from adk_sqlstore import MemoryEntry
    from adk_sqlstore.search.analysis import analyzer
    from adk_sqlstore.search.text import search_scope

    stored = ["write to jane.doe@example.com", "私はPythonを使う", "Fußball"] * 700
    engine = create_engine(empty_old_url)
    try:
        await upgrade(engine, "0003")
        async with engine.begin() as conn:
            await conn.execute(
                text(
                    "INSERT INTO sqlstore_memories (app_name, user_id, id, timestamp, content,"
                    " text, token_count, custom_metadata, search_scope, update_time)"
                    " VALUES ('app', 'u', :id, 1.0, :content, :text, 3, '{}', :scope, 1.0)"
                ),
                [
                    {
                        "id": f"m{n}",
                        "content": f'{{"parts":[{{"text":"{t}"}}]}}',
                        "text": t,
                        "scope": search_scope("app", "u"),
                    }
                    for n, t in enumerate(stored)
                ],
            )
        await upgrade(engine)
        async with engine.connect() as conn:
            stats = (
                await conn.execute(
                    text("SELECT doc_count, lexeme_count FROM sqlstore_memory_stats")
                )
            ).one()
            signatures = (
                await conn.execute(text("SELECT DISTINCT analysis FROM sqlstore_memories"))
            ).all()
        lengths = [len(analyzer().index_terms(t)) for t in stored]
        assert tuple(stats) == (len(stored), sum(lengths))
        assert signatures == [(analyzer().signature,)]
        async with SqlMemoryService(engine) as memory:
            for query, want in [
                ("example", stored[0]),
                ("python", stored[1]),
                ("fussball", stored[2]),
            ]:
                found = await memory.search_memory(
                    app_name="app", user_id="u", query=query, limit=1
                )
                assert [p.text for m in found.memories for p in m.content.parts or []] == [want]
            await memory.add_memory(
                app_name="app",
                user_id="u",
                memories=[MemoryEntry(content={"parts": [{"text": "ok"}]})],
            )
        await downgrade(engine, "0003")
        async with engine.connect() as conn:
            count = (
                await conn.execute(text("SELECT doc_count FROM sqlstore_memory_stats"))
            ).scalar()
        assert count == len(stored) + 1
        await upgrade(engine)
        async with engine.connect() as conn:
            assert await conn.run_sync(_diff) == []
    finally:
        await engine.dispose()


async def test_0007_indexes_terms_holding_a_backslash(empty_old_url: str) -> None:
    """A term holding a backslash (a Windows path, ``a\\b``) is one term to the text
    analysis; before 0007 SQLite's index split it and its search failed. Memories
    written before it are found after it (its index is filled from them), down to 0006
    and up again."""
    from sqlalchemy import text

    from adk_sqlstore import MemoryEntry

    stored = ["C:\\Users\\jane\\report.pdf", "0\\0", "plain words only"]
    engine = create_engine(empty_old_url)
    try:
        await upgrade(engine)
        async with SqlMemoryService(engine) as memory:
            for t in stored:
                entry = MemoryEntry(content={"parts": [{"text": t}]})
                await memory.add_memory(app_name="app", user_id="u", memories=[entry])
        await downgrade(engine, "0006")
        async with engine.connect() as conn:
            kept = (await conn.execute(text("SELECT count(*) FROM sqlstore_memories"))).scalar()
        assert kept == len(stored)
        await upgrade(engine)
        async with SqlMemoryService(engine) as memory:
            for query, want in [
                ("C:\\Users\\jane\\report.pdf", stored[0]),
                ("report.pdf", stored[0]),
                ("0\\0", stored[1]),
                ("words", stored[2]),
            ]:
                found = await memory.search_memory(app_name="app", user_id="u", query=query)
                got = [p.text for m in found.memories for p in m.content.parts or []]
                assert got == [want], query
        async with engine.connect() as conn:
            assert await conn.run_sync(_diff) == []
    finally:
        await engine.dispose()
