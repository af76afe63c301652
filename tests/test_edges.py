"""Edge cases and bad input: nothing stored that cannot be read back, clear typed errors,
one rule for identifiers on every backend."""

from __future__ import annotations

import datetime
import json
import math
import multiprocessing
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url
from typer.testing import CliRunner

from adk_sqlstore import (
    Event,
    GetSessionConfig,
    InvalidEventError,
    InvalidIdentifierError,
    InvalidStateError,
    MemoryEntry,
    SchemaNotMigratedError,
    SqlMemoryService,
    SqlSessionService,
    StaleSessionError,
)
from adk_sqlstore.cli import app
from adk_sqlstore.engine import create_engine
from adk_sqlstore.urls import DATABASE_URL_ENV, normalize_url, redact_url

from .conftest import PG_ADMIN_URL, REPO, PostgresFactory, pg_url, run_sync
from .workers import create_with_auto_migrate

runner = CliRunner(env={"COLUMNS": "200"})


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value]
    return value


UNSTORABLE_EVENTS = {
    "infinite timestamp": {"timestamp": math.inf},
    "NaN timestamp": {"timestamp": math.nan},
    "millisecond timestamp": {"timestamp": 1795958888277.0},
    "deep nesting": {
        "content": {"parts": [{"function_call": {"name": "f", "args": {"v": nested(300)}}}]}
    },
    "huge integer": {
        "content": {"parts": [{"function_call": {"name": "f", "args": {"v": 10**4400}}}]}
    },
    "NaN in args": {
        "content": {"parts": [{"function_call": {"name": "f", "args": {"v": math.nan}}}]}
    },
    "set in args": {
        "content": {"parts": [{"function_call": {"name": "f", "args": {"v": {1, 2}}}}]}
    },
    "tuple in args": {
        "content": {"parts": [{"function_call": {"name": "f", "args": {"v": (1, 2)}}}]}
    },
    "datetime in an extra field": {
        "custom_metadata": {"at": datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)}
    },
    "NUL in author": {"author": "a\x00b"},
}


@pytest.mark.parametrize("case", list(UNSTORABLE_EVENTS), ids=list(UNSTORABLE_EVENTS))
async def test_an_event_that_would_not_read_back_is_refused(
    service: SqlSessionService, case: str
) -> None:
    s = await service.create_session(app_name="app", user_id="u1", state={"k": 1})
    await service.append_event(s, Event(author="user", content={"parts": [{"text": "ok"}]}))
    bad = Event.model_validate(
        {"author": "agent", **UNSTORABLE_EVENTS[case], "actions": {"state_delta": {"k": 2}}}
    )
    with pytest.raises(InvalidEventError):
        await service.append_event(s, bad)
    got = await service.get_session(app_name="app", user_id="u1", session_id=s.id)
    assert got is not None  # still readable
    assert [e.text() for e in got.events] == ["ok"] and got.state == {"k": 1}
    assert got.revision == 1 and s.revision == 1


async def test_import_refuses_a_session_that_would_not_read_back(
    service: SqlSessionService,
) -> None:
    from adk_sqlstore.sessions.json_files import load_session

    for stamp in ["1e400", "NaN"]:
        doc = (
            '{"id": "s", "app_name": "app", "user_id": "u1", "events": [{"id": "e1",'
            f' "author": "user", "timestamp": {stamp}}}]}}'
        )
        with pytest.raises(InvalidEventError, match="timestamp"):
            await service.import_session(load_session(doc))
        assert await service.get_session(app_name="app", user_id="u1", session_id="s") is None


async def test_ingest_idle_goes_on_past_a_session_that_fails(
    service: SqlSessionService,
) -> None:
    memory = SqlMemoryService(service.engine)
    long_ago = time.time() - 7200
    for user in ("a-bad", "b-good"):
        s = await service.create_session(app_name="idle", user_id=user)
        await service.append_event(
            s,
            Event(author="user", timestamp=long_ago, content={"parts": [{"text": f"kiwi {user}"}]}),
        )
    # Damage one stored event behind the library's back (as an old bug or a manual
    # edit might have): it no longer reads back.
    async with service.engine.begin() as conn:
        await conn.execute(
            text(
                'UPDATE sqlstore_events SET data = \'{"id": 1, "timestamp": null}\''
                " WHERE user_id = 'a-bad'"
            )
        )
    report = await memory.ingest_idle_sessions(datetime.timedelta(minutes=30), app_name="idle")
    assert (report.sessions, report.failed) == (1, 1)
    assert "idle/a-bad/" in report.errors[0]
    found = await memory.search_memory(app_name="idle", user_id="b-good", query="kiwi")
    assert len(found.memories) == 1


async def test_memory_refuses_out_of_range_times_and_bad_fields(
    service: SqlSessionService,
) -> None:
    memory = SqlMemoryService(service.engine)
    event = Event(
        author="user", timestamp=time.time() * 1000, content={"parts": [{"text": "apple strudel"}]}
    )
    with pytest.raises(InvalidEventError, match="milliseconds"):
        await memory.add_events_to_memory(app_name="app", user_id="u1", events=[event])
    with pytest.raises(InvalidEventError, match="author"):
        await memory.add_memory(
            app_name="app",
            user_id="u1",
            memories=[MemoryEntry(content={"parts": [{"text": "x"}]}, author="a\x00b")],
        )
    with pytest.raises(InvalidIdentifierError, match="memory id"):
        await memory.add_memory(
            app_name="app",
            user_id="u1",
            memories=[MemoryEntry(id="\x00", content={"parts": [{"text": "x"}]})],
        )
    with pytest.raises(InvalidStateError, match="custom_metadata"):
        await memory.add_memory(
            app_name="app",
            user_id="u1",
            custom_metadata={"x": math.nan},
            memories=[MemoryEntry(content={"parts": [{"text": "x"}]})],
        )
    assert (await memory.search_memory(app_name="app", user_id="u1", query="x")).memories == []


@pytest.mark.parametrize("bad", ["a\x00b", "\ud800", "", 42])
async def test_identifiers_follow_one_rule_on_reads_too(
    service: SqlSessionService, bad: Any
) -> None:
    memory = SqlMemoryService(service.engine)
    calls = [
        service.get_session(app_name="app", user_id="u1", session_id=bad),
        service.get_session(app_name=bad, user_id="u1", session_id="s"),
        service.list_sessions(app_name=bad),
        service.list_sessions(app_name="app", user_id=bad),
        service.get_user_state(app_name="app", user_id=bad),
        service.get_app_state(app_name=bad),
        service.delete_session(app_name="app", user_id=bad, session_id="s"),
        service.forget_user(app_name="app", user_id=bad),
        memory.search_memory(app_name="app", user_id=bad, query="x"),
        memory.delete_memories(app_name="app", user_id="u1", memory_ids=[bad]),
    ]
    for call in calls:
        with pytest.raises(InvalidIdentifierError):
            await call


async def test_integers_too_long_for_python_are_refused_naming_the_key(
    service: SqlSessionService,
) -> None:
    s = await service.create_session(app_name="app", user_id="u1", state={"fine": 10**3999})
    with pytest.raises(InvalidStateError, match=r"'user:x'.*4000 digits"):
        await service.append_event(
            s, Event(author="a", actions={"state_delta": {"user:x": [10**5000]}})
        )
    got = await service.get_session(app_name="app", user_id="u1", session_id=s.id)
    assert got is not None and got.state == {"fine": 10**3999}


async def test_ingesting_a_partly_loaded_session_keeps_older_memories(
    service: SqlSessionService,
) -> None:
    memory = SqlMemoryService(service.engine)
    s = await service.create_session(app_name="app", user_id="u1")
    for n in range(30):
        await service.append_event(
            s, Event(author="user", content={"parts": [{"text": f"walnut {n}"}]})
        )
    await memory.add_session_to_memory(s)
    recent = await service.get_session(
        app_name="app", user_id="u1", session_id=s.id, config=GetSessionConfig(num_recent_events=5)
    )
    assert recent is not None and len(recent.events) == 5
    report = await memory.add_session_to_memory(recent)
    assert (report.events, report.deleted) == (30, 0)
    found = await memory.search_memory(app_name="app", user_id="u1", query="walnut", limit=50)
    assert len(found.memories) == 30


async def test_huge_limits_are_taken_as_everything(service: SqlSessionService) -> None:
    memory = SqlMemoryService(service.engine)
    s = await service.create_session(app_name="app", user_id="u1")
    await service.append_event(s, Event(author="user", content={"parts": [{"text": "fig"}]}))
    got = await service.get_session(
        app_name="app",
        user_id="u1",
        session_id=s.id,
        config=GetSessionConfig(num_recent_events=2**63),
    )
    assert got is not None and len(got.events) == 1
    await memory.add_session_to_memory(s)
    found = await memory.search_memory(app_name="app", user_id="u1", query="fig", limit=10**20)
    assert len(found.memories) == 1


async def test_an_object_of_a_deleted_session_cannot_write_to_its_successor(
    service: SqlSessionService,
) -> None:
    old = await service.create_session(app_name="app", user_id="u1", session_id="same")
    await service.delete_session(app_name="app", user_id="u1", session_id="same")
    await service.create_session(app_name="app", user_id="u1", session_id="same")
    with pytest.raises(StaleSessionError, match="deleted and created again"):
        await service.append_event(old, Event(author="ghost"))
    got = await service.get_session(app_name="app", user_id="u1", session_id="same")
    assert got is not None and got.events == []


async def test_a_session_from_url_engine_lets_memory_migrate_the_embedded_default(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    monkeypatch.delenv(DATABASE_URL_ENV, raising=False)
    async with SqlSessionService.from_url() as sessions:
        memory = SqlMemoryService(sessions.engine)
        assert (await memory.search_memory(app_name="a", user_id="u", query="hi")).memories == []


@pytest.mark.postgres
def test_processes_auto_migrating_one_new_database_together(
    postgres_factory: PostgresFactory,
) -> None:
    url = postgres_factory.create(migrate=False)
    ctx = multiprocessing.get_context("spawn")
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


# -- URLs and passwords -----------------------------------------------------------------


def test_passwords_in_query_parameters_are_hidden() -> None:
    raw = "postgresql://postgres@127.0.0.1/db?password=s3cretpw&sslmode=require"
    assert "s3cretpw" not in redact_url(raw)
    assert "s3cretpw" not in redact_url(normalize_url(raw))
    assert "sslmode=require" in redact_url(raw)


def test_an_unencoded_at_sign_in_a_password_is_refused_without_showing_it() -> None:
    with pytest.raises(ValueError, match="%40") as info:
        normalize_url("postgresql://postgres:s3c@ret/pw@127.0.0.1/x")
    assert "s3c" not in str(info.value) and "ret/pw" not in str(info.value)


def test_a_missing_driver_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "asyncpg", None)
    with pytest.raises(ValueError, match=r"adk-sqlstore\[postgres\]"):
        create_engine("postgresql://u:pw@127.0.0.1/db")


# -- command line ---------------------------------------------------------------------


def cli(*args: str, code: int = 0, stdin: str | None = None) -> str:
    result = runner.invoke(app, list(args), input=stdin, catch_exceptions=False)
    assert result.exit_code == code, result.output
    return result.output


async def _odd_ids(url: str) -> None:
    async with SqlSessionService.from_url(url) as service:
        memory = SqlMemoryService(service.engine)
        for user, sid in [
            ("[bold]x", "[/red]"),
            ("../../escape", "/tmp/pwned"),
            ("carol", "same"),
            ("dave", "same"),
            ("..", ".."),
        ]:
            s = await service.create_session(app_name="cli", user_id=user, session_id=sid)
            await service.append_event(
                s, Event(author="[/]", content={"parts": [{"text": f"[red]plum[/red] of {user}"}]})
            )
            await memory.add_session_to_memory(s)


def test_cli_prints_ids_and_text_verbatim(db_url: str) -> None:
    run_sync(_odd_ids(db_url))
    listing = cli("sessions", "list", "--app", "cli", "--url", db_url)
    assert "[/red]" in listing and "[bold]x" in listing
    shown = cli("sessions", "show", "[/red]", "--app", "cli", "--user", "[bold]x", "--url", db_url)
    assert "[red]plum[/red] of [bold]x" in shown and "[/]" in shown
    found = cli(
        "memory", "search", "[/x] plum", "--app", "cli", "--user", "[bold]x", "--url", db_url
    )
    assert "[red]plum[/red]" in found and "[/x] plum" in found
    missing = cli(
        "sessions", "show", "nope", "--app", "[/]", "--user", "[/]", "--url", db_url, code=1
    )
    assert "no session 'nope'" in missing
    forgot = cli("forget-user", "--app", "cli", "--user", "[bold]x", "--yes", "--url", db_url)
    assert "forgot [bold]x in cli" in forgot


def test_export_never_writes_outside_its_folder_nor_overwrites(db_url: str, tmp_path: Path) -> None:
    run_sync(_odd_ids(db_url))
    out = tmp_path / "exports" / "out"
    cli("export", "--app", "cli", "--out", str(out), "--url", db_url)
    written = sorted(p.relative_to(out).as_posix() for p in out.rglob("*.session.json"))
    assert written == sorted(
        [
            "%2E./%2E..session.json",
            "%2E.%2F..%2Fescape/%2Ftmp%2Fpwned.session.json",
            "%5Bbold%5Dx/%5B%2Fred%5D.session.json",
            "carol/same.session.json",
            "dave/same.session.json",
        ]
    )
    assert not Path("/tmp/pwned.session.json").exists()
    assert list(out.parent.iterdir()) == [out]
    # The export reads back: a folder, at any depth.
    fresh = tmp_path / "fresh.db"
    cli("migrate", "--url", f"sqlite:///{fresh}")
    assert "5 imported" in cli("import", str(out), "--url", f"sqlite:///{fresh}")


def test_import_reads_what_export_writes_to_stdout(db_url: str, tmp_path: Path) -> None:
    run_sync(_odd_ids(db_url))
    lines = cli("export", "--app", "cli", "--out", "-", "--url", db_url)
    assert len(lines.splitlines()) == 5
    fresh = f"sqlite:///{tmp_path / 'fresh.db'}"
    cli("migrate", "--url", fresh)
    assert "5 imported" in cli("import", "-", "--url", fresh, stdin=lines)


def test_import_of_a_binary_file_names_the_file(tmp_path: Path, sqlite_url: str) -> None:
    blob = tmp_path / "photo.session.json"
    blob.write_bytes(b"\xff\xfe\x00\x00garbage")
    output = cli("import", str(blob), "--url", sqlite_url, code=1)
    assert "photo.session.json is not ADK session JSON" in output


def test_migrate_reports_database_problems_in_one_line(
    tmp_path: Path, postgres_server: str
) -> None:
    for url in [
        pg_url(database="adk_sqlstore_does_not_exist", password="pw"),
        pg_url(username="nosuchuser", password=None),
        "sqlite:////nonexistent-dir/x.db",
    ]:
        output = cli("migrate", "--url", url, code=1)
        assert output.startswith("error: ") and "Traceback" not in output
        assert len(output.strip().splitlines()) == 1 and ":pw@" not in output
        password = make_url(PG_ADMIN_URL).password  # the suite's server may need one
        assert not password or f":{quote(str(password), safe='')}@" not in output
        assert not password or f":{password}@" not in output


async def _pretend_newer(url: str) -> None:
    engine = create_engine(url)
    try:
        async with engine.begin() as conn:
            await conn.execute(text("UPDATE sqlstore_alembic_version SET version_num = '0099'"))
    finally:
        await engine.dispose()


def test_a_database_newer_than_the_library_says_to_upgrade_the_package(
    sqlite_url: str,
) -> None:
    run_sync(_pretend_newer(sqlite_url))
    output = cli("migrate", "--url", sqlite_url, code=1)
    assert "newer than this version of adk-sqlstore" in output
    assert "upgrade the adk-sqlstore package" in output

    async def read() -> None:
        async with SqlSessionService.from_url(sqlite_url) as service:
            await service.list_sessions(app_name="a")

    with pytest.raises(SchemaNotMigratedError, match="upgrade the adk-sqlstore package"):
        run_sync(read())


def test_read_commands_do_not_create_missing_sqlite_files(tmp_path: Path) -> None:
    missing = tmp_path / "typo.db"
    for args in (
        ["sessions", "list", "--app", "a"],
        ["memory", "search", "x", "--app", "a", "--user", "u"],
    ):
        output = cli(*args, "--url", f"sqlite:///{missing}", code=1)
        assert "no database file at" in output and "adk-sqlstore migrate" in output
    assert not missing.exists()


@pytest.mark.parametrize("minutes", ["inf", "nan", "-5", "1e30"])
def test_ingest_idle_refuses_impossible_durations(minutes: str, sqlite_url: str) -> None:
    result = runner.invoke(
        app, ["memory", "ingest-idle", "--idle-minutes", minutes, "--url", sqlite_url]
    )
    assert result.exit_code == 2 and "Traceback" not in result.output


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


def test_card_numbers_with_other_separators_are_masked() -> None:
    from adk_sqlstore.memory.redaction import mask_card_numbers

    for card in [
        "4111\u00a01111\u00a01111\u00a01111",
        "4111  1111  1111  1111",
        "4111\t1111\t1111\t1111",
        "4111 -1111 -1111 -1111",
    ]:
        assert mask_card_numbers(f"pay {card} now") == "pay [card ending 1111] now", card


def test_json_lines_and_arrays_load_as_sessions() -> None:
    from adk_sqlstore.sessions.json_files import load_sessions

    one = {"id": "s1", "app_name": "a", "user_id": "u"}
    two = {"id": "s2", "app_name": "a", "user_id": "u"}
    assert [s.id for s in load_sessions(json.dumps(one))] == ["s1"]
    assert [s.id for s in load_sessions(json.dumps([one, two]))] == ["s1", "s2"]
    assert [s.id for s in load_sessions(f"{json.dumps(one)}\n{json.dumps(two)}\n")] == ["s1", "s2"]
