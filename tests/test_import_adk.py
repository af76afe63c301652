"""``adk-sqlstore import-adk``: copying ADK's own session databases.

Every source is written in the test by google-adk itself: its ``SqliteSessionService``
(what ADK uses for ``sqlite:///`` URLs and ``adk web``'s ``<agent>/.adk/session.db``) and
its ``DatabaseSessionService`` (schema v1) on an SQLite file and on PostgreSQL. After an
import, what adk-sqlstore returns must equal what ADK's own service returns from the source.
"""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("google.adk", reason="the adk extra is not installed")

from google.adk.cli.utils.local_storage import create_local_session_service
from google.adk.events import Event, EventActions
from google.adk.sessions import BaseSessionService, DatabaseSessionService, Session
from google.adk.sessions.sqlite_session_service import SqliteSessionService
from google.genai import types
from typer.testing import CliRunner

from adk_sqlstore.adk import SqlSessionService
from adk_sqlstore.cli import app
from adk_sqlstore.urls import DATABASE_URL_ENV, normalize_url

from .conftest import run_sync, shared_data
from .test_adk import rich_events

cli_runner = CliRunner(env={"COLUMNS": "200"})

Key = tuple[str, str, str]
APPS = ("lunch-app", "travel-app")


# -- what ADK writes, and what each side reads back --------------------------------------


def _say(author: str, text: str, **fields: Any) -> Event:
    role = "user" if author == "user" else "model"
    return Event(
        author=author,
        invocation_id="inv-" + author,
        content=types.Content(role=role, parts=[types.Part(text=text)]),
        **fields,
    )


async def _write(service: BaseSessionService, apps: tuple[str, str] = APPS) -> None:
    """Sessions of two apps and two users through ADK's own ``service``: state deltas of
    every scope (``temp:`` included), function calls and responses, non-ASCII text and
    emoji, an empty session, and two events with one timestamp whose ids sort against
    the order they were appended in."""
    lunch, travel = apps
    s1 = await service.create_session(
        app_name=lunch,
        user_id="user-17",
        session_id="s-1",
        state={"app:menu_version": "2026-09", "user:diet": "vegetarian", "greeting": "नमस्ते 👋"},
    )
    for event in rich_events():  # a function call, then its response
        event.actions.state_delta = {
            "user:diet": "vegan",
            "app:kitchen": "Pune",
            "turn": event.id,
            "temp:scratch": 1,
        }
        await service.append_event(s1, event)
    await service.append_event(s1, _say("user", "Ça va? 你好 🍛🥗 — ünïcödé"))
    tied = time.time()
    for event_id in ("tie-b", "tie-a"):
        await service.append_event(
            s1, _say("lunch_assistant", event_id, id=event_id, timestamp=tied)
        )
    s2 = await service.create_session(
        app_name=lunch, user_id="user-42", session_id="s-2", state={"user:diet": "jain"}
    )
    await service.append_event(
        s2,
        _say("user", "no onions 🧅", actions=EventActions(state_delta={"note": {"a": [1, 2.5]}})),
    )
    await service.create_session(app_name=lunch, user_id="user-17", session_id="s-3")  # empty
    s4 = await service.create_session(
        app_name=travel,
        user_id="user-42",
        session_id="s-4",
        state={"app:currency": "INR", "trip": {"to": "Zürich", "days": [1, 2]}},
    )
    await service.append_event(
        s4,
        _say(
            "travel_agent",
            "Booked ✈️",
            actions=EventActions(state_delta={"user:seat": "aisle", "temp:x": True, "n": None}),
        ),
    )


@dataclass
class View:
    """Every session, user state and app state of some apps, as one service reads them."""

    sessions: dict[Key, Session] = field(default_factory=dict)
    user_states: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    app_states: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def events(self) -> int:
        return sum(len(s.events) for s in self.sessions.values())

    def counts(self) -> str:
        """import-adk's summary when it copies all of this."""
        return (
            f"{len(self.sessions)} session(s) with {self.events} event(s),"
            f" {sum(map(len, self.user_states.values()))} user state key(s),"
            f" {sum(map(len, self.app_states.values()))} app state key(s)"
        )


async def _view(service: Any, apps: tuple[str, ...] = APPS) -> View:
    """What ``service`` (ADK's or ours) returns: sessions through list_sessions and
    get_session, user state through get_user_state, app state through get_app_state
    (ours) or the ``app:`` keys of a session (ADK has no get_app_state)."""
    view = View()
    for app_name in apps:
        for summary in (await service.list_sessions(app_name=app_name)).sessions:
            full = await service.get_session(
                app_name=app_name, user_id=summary.user_id, session_id=summary.id
            )
            assert full is not None
            view.sessions[(app_name, full.user_id, full.id)] = full
            view.user_states[(app_name, full.user_id)] = await service.get_user_state(
                app_name=app_name, user_id=full.user_id
            )
            view.app_states[app_name] = (
                await service.get_app_state(app_name=app_name)
                if isinstance(service, SqlSessionService)
                else {k[4:]: v for k, v in full.state.items() if k.startswith("app:")}
            )
    return view


async def _ours(url: str, apps: tuple[str, ...] = APPS) -> View:
    async with SqlSessionService(url) as service:
        return await _view(service, apps)


def _assert_same(theirs: View, ours: View) -> None:
    assert theirs.sessions and ours.sessions.keys() == theirs.sessions.keys()
    for key, expected in theirs.sessions.items():
        got = ours.sessions[key]
        assert got.events == expected.events, key
        assert got.model_dump() == expected.model_dump(), key
    assert ours.user_states == theirs.user_states
    assert ours.app_states == theirs.app_states


def _import(source: str, target: str, *extra: str) -> str:
    result = cli_runner.invoke(
        app, ["import-adk", "--source", source, "--target", target, *extra], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    return " ".join(result.output.split())


# -- the sources ---------------------------------------------------------------------------


@dataclass
class Source:
    """An ADK database: the URL given to --source, its file (SQLite), what ADK's own
    service read from it once written, and the order ADK reads the two events of one
    timestamp in (SqliteSessionService: as appended, by rowid; DatabaseSessionService:
    by id)."""

    url: str
    file: Path | None
    theirs: View
    tied: list[str]


async def _written(writer: Any, reader: Any = None) -> View:
    """Write with ADK's ``writer``, then read everything back with ``reader`` (or it)."""
    try:
        await _write(writer)
        return await _view(reader or writer)
    finally:
        for service in dict.fromkeys((writer, reader or writer)):
            await service.close()


def _adk_url(url: str) -> str:
    """A URL for ADK's DatabaseSessionService: our asyncio driver, password kept."""
    return normalize_url(url).render_as_string(hide_password=False)


@pytest.fixture(
    params=[
        "SqliteSessionService",
        "DatabaseSessionService-sqlite",
        pytest.param("DatabaseSessionService-postgres", marks=pytest.mark.postgres),
        pytest.param("DatabaseSessionService-mysql", marks=pytest.mark.mysql),
    ]
)
def adk_source(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Source]:
    path: Path | None = tmp_path / "adk_sessions.db"
    url = f"sqlite:///{path}"
    if request.param == "SqliteSessionService":
        writer = SqliteSessionService(db_path=str(path))
        # ADK reads it read-only here too (?mode=ro), as the import does.
        theirs = run_sync(_written(writer, SqliteSessionService(db_path=f"{url}?mode=ro")))
    else:
        for server in ("postgres", "mysql"):
            if request.param.endswith(server):
                factory = request.getfixturevalue(f"{server}_factory")
                url, path = factory.create(migrate=False), None
        theirs = run_sync(_written(DatabaseSessionService(db_url=_adk_url(url))))
    if path is not None:
        path.chmod(0o444)  # the import only reads it
    tied = ["tie-b", "tie-a"] if request.param == "SqliteSessionService" else ["tie-a", "tie-b"]
    yield Source(url, path, theirs, tied)
    if path is not None:
        path.chmod(0o644)


# -- importing them ------------------------------------------------------------------------


def test_import_equals_what_adk_reads(adk_source: Source, db_url: str) -> None:
    """Dry run counts and writes nothing; the import copies every session, event, user
    and app state key so that they read back equal to ADK's; a second run copies
    nothing; the source file is not changed by a byte."""
    theirs = adk_source.theirs
    before = adk_source.file.read_bytes() if adk_source.file else b""
    tied = [e.id for e in theirs.sessions[("lunch-app", "user-17", "s-1")].events[-2:]]
    assert tied == adk_source.tied  # and ours must read them in the same order
    assert theirs.counts() == (
        "4 session(s) with 7 event(s), 3 user state key(s), 3 app state key(s)"
    )

    dry = _import(adk_source.url, db_url, "--dry-run")
    assert f"would copy {theirs.counts()}; 0 session(s) already there" in dry
    assert run_sync(_ours(db_url)) == View()  # nothing written

    first = _import(adk_source.url, db_url)
    assert f"copied {theirs.counts()}; 0 session(s) already there" in first
    _assert_same(theirs, run_sync(_ours(db_url)))

    second = _import(adk_source.url, db_url)
    assert (
        "copied 0 session(s) with 0 event(s), 0 user state key(s), 0 app state key(s);"
        " 4 session(s) already there" in second
    )
    _assert_same(theirs, run_sync(_ours(db_url)))
    if adk_source.file:
        assert adk_source.file.read_bytes() == before


async def _diverge(url: str) -> None:
    """Change an imported session and the user and app state in the target."""
    async with SqlSessionService(url) as service:
        session = await service.get_session(
            app_name="lunch-app", user_id="user-17", session_id="s-1"
        )
        assert session is not None
        delta = {"user:diet": "changed", "app:kitchen": "moved", "turn": "local"}
        await service.append_event(
            session, Event(author="user", actions=EventActions(state_delta=delta))
        )


def test_existing_sessions_and_state_kept_unless_replace(adk_source: Source, db_url: str) -> None:
    _import(adk_source.url, db_url)
    run_sync(_diverge(db_url))
    kept = _import(adk_source.url, db_url)
    assert "copied 0 session(s)" in kept and "0 user state key(s), 0 app state key(s)" in kept
    ours = run_sync(_ours(db_url))
    assert len(ours.sessions[("lunch-app", "user-17", "s-1")].events) == 6
    assert ours.user_states[("lunch-app", "user-17")]["diet"] == "changed"
    assert ours.app_states["lunch-app"]["kitchen"] == "moved"

    replaced = _import(adk_source.url, db_url, "--replace")
    assert f"copied {adk_source.theirs.counts()}; 0 session(s) already there" in replaced
    _assert_same(adk_source.theirs, run_sync(_ours(db_url)))


def test_batches_of_sessions_cover_every_session(
    adk_source: Source, sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sessions are read in key-order batches; with batches of 3 the 4 sessions take two."""
    from adk_sqlstore.adk import database_import as adk_import

    monkeypatch.setattr(adk_import, "_BATCH", 3)
    _import(adk_source.url, sqlite_url)
    _assert_same(adk_source.theirs, run_sync(_ours(sqlite_url)))


def test_adk_web_default_session_files(tmp_path: Path, db_url: str) -> None:
    """``adk web`` keeps each agent's sessions in ``<agents>/<agent>/.adk/session.db``
    (ADK's local storage, SqliteSessionService); each file imports with sqlite:///."""
    agents = tmp_path / "agents"
    apps = ("lunch_agent", "travel_agent")

    async def write() -> View:
        service: Any = create_local_session_service(base_dir=agents, per_agent=True)
        try:
            await _write(service, apps)
            return await _view(service, apps)
        finally:
            await service.close()

    theirs = run_sync(write())
    files = [agents / name / ".adk" / "session.db" for name in apps]
    assert all(f.is_file() for f in files)
    outputs = [_import(f"sqlite:///{f}", db_url) for f in files]
    assert "copied 3 session(s) with 6 event(s)" in outputs[0]
    assert "copied 1 session(s) with 1 event(s)" in outputs[1]
    _assert_same(theirs, run_sync(_ours(db_url, apps)))


def test_a_dry_run_never_creates_nor_migrates_the_target(
    adk_source: Source, tmp_path: Path, postgres_factory: Any
) -> None:
    """--dry-run "writes nothing": a target file that does not exist is not created, a
    database that is not migrated is not migrated; everything counts as new."""
    missing = tmp_path / "not-yet.db"
    dry = _import(adk_source.url, f"sqlite:///{missing}", "--dry-run")
    assert f"would copy {adk_source.theirs.counts()}; 0 session(s) already there" in dry
    assert not missing.exists()
    empty = postgres_factory.create(migrate=False)
    dry = _import(adk_source.url, empty, "--dry-run")
    assert f"would copy {adk_source.theirs.counts()}; 0 session(s) already there" in dry

    async def tables() -> list[str]:
        import asyncpg

        conn = await asyncpg.connect(_adk_url(empty).replace("+asyncpg", ""))
        try:
            rows = await conn.fetch("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
            return [r[0] for r in rows]
        finally:
            await conn.close()

    assert run_sync(tables()) == []


def test_source_paths_with_characters_uris_escape(tmp_path: Path, db_url: str) -> None:
    """A source file whose path holds '#', '?', '%' or a space is opened (read-only) as
    that very file, not cut short at the '#' or '?'."""
    folder = tmp_path / "sources" / "sp ace#1%"
    folder.mkdir(parents=True)
    source = folder / "session?.db"
    theirs = run_sync(_written(SqliteSessionService(db_path=str(source))))
    source.chmod(0o444)
    escaped = str(source).replace("%", "%25").replace(" ", "%20").replace("#", "%23")
    output = _import(f"sqlite:///{escaped.replace('?', '%3F')}", db_url)
    assert f"copied {theirs.counts()}" in output
    _assert_same(theirs, run_sync(_ours(db_url)))
    assert [p.name for p in folder.parent.iterdir()] == ["sp ace#1%"]  # nothing else made
    source.chmod(0o644)


@pytest.mark.postgres
def test_a_source_url_takes_the_stores_settings(
    postgres_factory: Any, pgbouncer: Any, sqlite_url: str
) -> None:
    """``--source`` takes connection settings as the store's URLs do: a timeout, and a
    pooler in transaction mode (``?pgbouncer=true``)."""
    url = postgres_factory.create(migrate=False)
    theirs = run_sync(_written(DatabaseSessionService(db_url=_adk_url(url))))
    timed = f"{url}{'&' if '?' in url else '?'}statement_timeout=30s"
    assert f"copied {theirs.counts()}" in _import(timed, sqlite_url)
    again = _import(pgbouncer.url(url), sqlite_url)  # through the pooler, twice
    assert "copied 0 session(s)" in again and "4 session(s) already there" in again
    again = _import(pgbouncer.url(url), sqlite_url)
    assert "4 session(s) already there" in again
    _assert_same(theirs, run_sync(_ours(sqlite_url)))


def test_import_adk_needs_no_url_in_argv_for_target(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    source = tmp_path / "adk_sessions.db"
    run_sync(_written(SqliteSessionService(db_path=str(source))))
    monkeypatch.setenv(DATABASE_URL_ENV, f"sqlite:///{tmp_path / 'env-target.db'}")
    result = cli_runner.invoke(app, ["import-adk", "--source", f"sqlite:///{source}"])
    assert result.exit_code == 0 and "copied 4 session(s)" in result.output


@pytest.mark.shared_data
def test_import_adk_shared_data_database_equals_what_adk_reads(tmp_path: Path, db_url: str) -> None:
    """The DatabaseSessionService file in ../shared/data (written by ADK elsewhere)."""
    source = tmp_path / "adk_sessions.db"
    shutil.copyfile(shared_data("adk", "adk_sessions.db"), source)
    source.chmod(0o444)
    before = source.read_bytes()
    first = _import(f"sqlite:///{source}", db_url)
    assert "copied 4 session(s) with 18 event(s), 3 user state key(s), 1 app state key(s)" in first
    assert "4 session(s) already there" in _import(f"sqlite:///{source}", db_url)
    assert source.read_bytes() == before
    readable = tmp_path / "adk_copy.db"  # ADK's DatabaseSessionService writes to what it opens
    shutil.copyfile(source, readable)
    readable.chmod(0o644)

    async def theirs() -> View:
        service = DatabaseSessionService(db_url=_adk_url(f"sqlite:///{readable}"))
        try:
            return await _view(service, ("lunch-app",))
        finally:
            await service.close()

    _assert_same(run_sync(theirs()), run_sync(_ours(db_url, ("lunch-app",))))


# -- what is refused -----------------------------------------------------------------------


def _refused(source: str, target: str) -> str:
    result = cli_runner.invoke(app, ["import-adk", "--source", source, "--target", target])
    assert result.exit_code == 1, result.output
    return " ".join(result.output.split())


def test_import_adk_refuses_the_pickled_schema_and_other_databases(
    tmp_path: Path, sqlite_url: str
) -> None:
    legacy = tmp_path / "legacy.db"
    with contextlib.closing(sqlite3.connect(legacy)) as conn, conn:
        conn.execute("CREATE TABLE sessions (app_name TEXT, user_id TEXT, id TEXT)")
        conn.execute("CREATE TABLE events (id TEXT, actions BLOB)")
    output = _refused(f"sqlite:///{legacy}", sqlite_url)
    assert "pickles" in output and "adk migrate session" in output

    other = tmp_path / "other.db"
    sqlite3.connect(other).close()
    output = _refused(f"sqlite:///{other}", sqlite_url)
    assert f"sqlite:///{other} is not a session database of ADK" in output  # URL as given
    assert "DatabaseSessionService (schema v1" in output and "SqliteSessionService" in output

    # SqliteSessionService's tables without its events.event_data: not that layout either.
    partial = tmp_path / "partial.db"
    with contextlib.closing(sqlite3.connect(partial)) as conn, conn:
        conn.execute(
            "CREATE TABLE sessions (app_name, user_id, id, state, create_time, update_time)"
        )
        conn.execute("CREATE TABLE events (id, app_name, user_id, session_id, timestamp)")
        conn.execute("CREATE TABLE app_states (app_name, state, update_time)")
        conn.execute("CREATE TABLE user_states (app_name, user_id, state, update_time)")
    assert "is not a session database of ADK" in _refused(f"sqlite:///{partial}", sqlite_url)
