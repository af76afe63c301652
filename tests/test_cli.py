"""The adk-sqlstore command line, and ADK session JSON import/export."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import typer
from sqlalchemy import text
from sqlalchemy.engine import make_url
from typer.testing import CliRunner

from adk_sqlstore import (
    Event,
    SchemaNotMigratedError,
    SqlMemoryService,
    SqlSessionService,
)
from adk_sqlstore.cli import app
from adk_sqlstore.engine import create_engine
from adk_sqlstore.migration import HEAD_REVISION
from adk_sqlstore.sessions.json_files import dump_session, load_session
from adk_sqlstore.urls import DATABASE_URL_ENV

from .conftest import PG_ADMIN_URL, PostgresFactory, pg_url, run_sync, shared_data
from .helpers import cli, cli_apart, runner


def test_migrate_reports_what_it_did(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'x.db'}"
    assert f"migrated from empty to {HEAD_REVISION}" in cli("migrate", "--url", url)
    assert f"already at revision {HEAD_REVISION}" in cli("migrate", "--url", url)


@pytest.mark.postgres
def test_migrate_on_postgres_hides_the_password(postgres_factory: object) -> None:
    url = postgres_factory.create(migrate=False)  # type: ignore[attr-defined]
    with_password = url.replace("postgres@", "postgres:pa55word@")
    output = cli("migrate", "--url", with_password)
    assert f"migrated from empty to {HEAD_REVISION}" in output and "pa55word" not in output


def test_commands_on_an_unmigrated_database_fail_clearly(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    result = runner.invoke(app, ["sessions", "list", "--app", "a", "--url", url])
    assert result.exit_code == 1
    assert "adk-sqlstore migrate" in result.output


async def _seed(url: str) -> str:
    async with SqlSessionService.from_url(url) as service:
        s = await service.create_session(
            app_name="lunch-app", user_id="user-17", state={"app:menu_version": "2026-09"}
        )
        await service.append_event(
            s,
            Event(
                author="user",
                timestamp=1795958888.0,
                content={"role": "user", "parts": [{"text": "I'm vegetarian, deliver to Pune"}]},
            ),
        )
        await service.append_event(
            s,
            Event(
                author="lunch_assistant",
                timestamp=1795958890.0,
                content={
                    "role": "model",
                    "parts": [
                        {"function_call": {"name": "remember_diet", "args": {"diet": "vegetarian"}}}
                    ],
                },
                actions={"state_delta": {"user:diet": "vegetarian", "step": 1}},
            ),
        )
        return s.id


def test_sessions_list_and_show(db_url: str) -> None:
    session_id = run_sync(_seed(db_url))
    listing = cli("sessions", "list", "--app", "lunch-app", "--url", db_url)
    assert session_id in listing and "user-17" in listing and "1 session(s)" in listing
    assert "0 session(s)" in cli(
        "sessions", "list", "--app", "lunch-app", "--user", "user-42", "--url", db_url
    )
    shown = cli(
        "sessions", "show", session_id, "--app", "lunch-app", "--user", "user-17", "--url", db_url
    )
    for expected in [
        "I'm vegetarian, deliver to Pune",
        "remember_diet",
        "lunch_assistant",
        'user:diet = "vegetarian"',
        "2026-11-29 13:28:08",
        "state by scope",
        "menu_version",
        "revision 2",
    ]:
        assert expected in shown, expected
    missing = runner.invoke(
        app,
        [
            "sessions",
            "show",
            session_id,
            "--app",
            "lunch-app",
            "--user",
            "user-42",
            "--url",
            db_url,
        ],
    )
    assert missing.exit_code == 1 and "no session" in missing.output


def _adk_files() -> list[Path]:
    return sorted(shared_data("adk").glob("*.session.json"))


def test_import_adk_session_json_and_read_back_the_same(db_url: str, tmp_path: Path) -> None:
    files = _adk_files()
    output = cli("import", *map(str, files), "--url", db_url)
    assert f"{len(files)} imported, 0 skipped" in output
    again = cli("import", str(files[0].parent), "--url", db_url)
    assert f"0 imported, {len(files)} skipped" in again

    async def read(session_id: str, app_name: str, user_id: str) -> object:
        async with SqlSessionService.from_url(db_url) as service:
            return await service.get_session(
                app_name=app_name, user_id=user_id, session_id=session_id
            )

    for path in files:
        original = load_session(path.read_bytes())
        stored = run_sync(read(original.id, original.app_name, original.user_id))
        assert stored is not None
        assert stored.events == original.events  # type: ignore[attr-defined]
        assert stored.state == original.state  # type: ignore[attr-defined]
        assert stored.last_update_time == original.last_update_time  # type: ignore[attr-defined]

    out = tmp_path / "exported"
    cli("export", "--app", "lunch-app", "--out", str(out), "--url", db_url)
    for path in files:
        (written,) = out.rglob(path.name)  # DIR/<user_id>/<session id>.session.json
        assert written.parent.name == json.loads(path.read_text())["user_id"]
        assert json.loads(written.read_text()) == json.loads(path.read_text())


def test_camel_case_session_json_imports_the_same(db_url: str, tmp_path: Path) -> None:
    adk_session = pytest.importorskip("google.adk.sessions").Session
    for path in _adk_files():
        camel = adk_session.model_validate_json(path.read_text()).model_dump_json(by_alias=True)
        assert '"appName"' in camel and '"stateDelta"' in camel
        assert load_session(camel) == load_session(path.read_bytes())
        (tmp_path / path.name).write_text(camel)
    assert "4 imported" in cli("import", str(tmp_path), "--url", db_url)


def test_exported_json_is_what_adk_reads(db_url: str, tmp_path: Path) -> None:
    adk_session = pytest.importorskip("google.adk.sessions").Session
    session_id = run_sync(_seed(db_url))
    cli(
        "export",
        "--app",
        "lunch-app",
        "--user",
        "user-17",
        "--session",
        session_id,
        "--out",
        str(tmp_path),
        "--url",
        db_url,
    )
    text = (tmp_path / f"{session_id}.session.json").read_text()
    adk = adk_session.model_validate_json(text)
    assert adk.state["user:diet"] == "vegetarian"
    assert adk.events[1].content.parts[0].function_call.name == "remember_diet"
    assert load_session(text) == load_session(dump_session(load_session(text)))


def test_import_rejects_a_file_that_is_not_a_session(tmp_path: Path, db_url: str) -> None:
    bad = tmp_path / "bad.session.json"
    bad.write_text('{"hello": "world"}')
    result = runner.invoke(app, ["import", str(bad), "--url", db_url])
    assert result.exit_code == 1 and "is not ADK session JSON" in result.output


def test_importing_an_old_dump_keeps_the_user_and_app_state_the_store_has(
    db_url: str, tmp_path: Path
) -> None:
    """A dump carries a copy of user: and app: state from when it was taken; importing
    it must not roll back what the store holds now (only --replace overwrites)."""

    async def seed() -> tuple[str, str]:
        async with SqlSessionService.from_url(db_url) as service:
            old = await service.create_session(
                app_name="lunch",
                user_id="u1",
                state={"mood": "ok", "user:diet": "vegetarian", "app:menu": "2026-09"},
            )
            dump = dump_session(old)
            now = await service.create_session(app_name="lunch", user_id="u1")
            await service.append_event(
                now,
                Event(
                    author="user",
                    actions={"state_delta": {"user:diet": "vegan", "app:menu": "2027-01"}},
                ),
            )
            return dump.replace(old.id, "copy-of-old"), old.id

    dump, old_id = run_sync(seed())
    path = tmp_path / "copy-of-old.session.json"
    path.write_text(dump)
    result = runner.invoke(app, ["import", str(path), "--url", db_url])
    assert result.exit_code == 0, result.output

    async def states() -> tuple[dict[str, object], dict[str, object], dict[str, object]]:
        async with SqlSessionService.from_url(db_url) as service:
            imported = await service.get_session(
                app_name="lunch", user_id="u1", session_id="copy-of-old"
            )
            assert imported is not None
            return (
                await service.get_user_state(app_name="lunch", user_id="u1"),
                await service.get_app_state(app_name="lunch"),
                imported.state,
            )

    user, app_state, session_state = run_sync(states())
    assert user == {"diet": "vegan"} and app_state == {"menu": "2027-01"}
    assert session_state == {"mood": "ok", "user:diet": "vegan", "app:menu": "2027-01"}
    # --replace restores the dump's copy
    result = runner.invoke(app, ["import", str(path), "--replace", "--url", db_url])
    assert result.exit_code == 0, result.output
    user, app_state, _ = run_sync(states())
    assert user == {"diet": "vegetarian"} and app_state == {"menu": "2026-09"}
    assert old_id != "copy-of-old"


@pytest.mark.parametrize(
    "url",
    [
        "sqlite://relative.db",
        "postgresql://postgres@127.0.0.1:99999/x",
        "postgresql://postgres@127.0.0.1:5432/db?application_name=x",
        "/no/scheme/file.db",
    ],
)
def test_bad_urls_give_one_line_and_status_1(url: str) -> None:
    for command in (
        ["sessions", "list", "--app", "a"],
        ["migrate"],
        ["prune", "--older-than", "90d", "--dry-run"],
        ["forget-user", "--app", "a", "--user", "u", "--yes"],
    ):
        result = runner.invoke(app, [*command, "--url", url])
        assert result.exit_code == 1, result.output
        assert result.output.startswith("error: ") and result.output.count("\n") == 1


def test_errors_and_tables_are_not_cut_to_80_columns_in_a_pipe(db_url: str, tmp_path: Path) -> None:
    narrow = CliRunner()  # no COLUMNS: what a pipe or a file gets
    bad = tmp_path / ("a-long-folder-name-" * 4) / "bad.session.json"
    bad.parent.mkdir()
    bad.write_text("{not json")
    result = narrow.invoke(app, ["import", str(bad), "--url", db_url], env={"COLUMNS": ""})
    assert result.exit_code == 1
    assert result.output.count("\n") == 1 and str(bad) in result.output

    async def seed() -> None:
        async with SqlSessionService.from_url(db_url) as service:
            await service.create_session(
                app_name="wide", user_id="u1", session_id="a-session-id-" * 6
            )

    run_sync(seed())
    result = narrow.invoke(
        app, ["sessions", "list", "--app", "wide", "--url", db_url], env={"COLUMNS": ""}
    )
    assert result.exit_code == 0 and "a-session-id-" * 6 in result.output


def test_exporting_a_session_that_does_not_exist_fails(db_url: str, tmp_path: Path) -> None:
    result = runner.invoke(
        app,
        [
            "export",
            "--app",
            "a",
            "--user",
            "u",
            "--session",
            "nope",
            "--out",
            str(tmp_path),
            "--url",
            db_url,
        ],
    )
    assert result.exit_code == 1
    assert "no session 'nope' of app 'a' and user 'u'" in result.output


def _run_demo(env: dict[str, str]) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "adk_sqlstore", "demo"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


async def _snapshot(app_name: str) -> list[tuple[str, int, dict[str, Any]]]:
    """Every session of ``app_name`` in the embedded database: id, revision, state."""
    async with SqlSessionService.from_url() as service:
        listing = await service.list_sessions(app_name=app_name)
        return sorted((s.id, s.revision, s.state) for s in listing.sessions)


def test_demo_runs_twice_on_the_embedded_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """000's worked example: "One fact came back by key lookup and cost nothing; the other
    came back by search and cost one tool call.". Piped to a file (no COLUMNS), no line
    is broken inside a value; the README's own example data (lunch-app, user-17) is
    left untouched."""
    from .test_readme import EXAMPLES

    env = {k: v for k, v in os.environ.items() if k not in (DATABASE_URL_ENV, "COLUMNS")}
    env.update(XDG_DATA_HOME=str(tmp_path))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    monkeypatch.delenv(DATABASE_URL_ENV, raising=False)
    readme_use = next(code for _, code in EXAMPLES if 'app_name="lunch-app"' in code)
    subprocess.run([sys.executable, "-c", readme_use], env=env, check=True, timeout=120)
    users_data = run_sync(_snapshot("lunch-app"))
    assert len(users_data) == 2 and users_data[0][2]["user:diet"] == "vegetarian"

    first = _run_demo(env)
    assert str(tmp_path / "adk-sqlstore" / "adk_sqlstore.db") in first
    for expected in [
        "Monday",
        "I'm vegetarian, and please always deliver to the Pune office reception.",
        "remember_diet",
        'state_delta stored: user:diet = "vegetarian"',
        "temp: keys stored: no",
        "memory holds nothing yet",
        "adk-sqlstore memory ingest-idle --idle-minutes 30",
        "ingested 1 session(s), 2 event(s)",
        'before any turn: {"user:diet": "vegetarian"}',
        'load_memory(query="delivery address office")',
        "Shall I deliver it to the Pune office reception",
        "Where each fact came from",
        'user:diet = "vegetarian": key lookup',
        "delivery address: memory search, one tool call",
        "Thursday, a minute later: 'Actually, I eat fish now.'",
        "current fact: 'The user eats fish now (pescatarian).'",
        "from the user's turn 'Actually, I eat fish now.'",
        "in its history: 'The user is vegetarian.': created from the user's turn \"I'm"
        ' vegetarian, and please always deliver to the Pune office reception."',
        "invalidated by 'Actually, I eat fish now.'",
    ]:
        assert expected in first, expected
    if importlib.util.find_spec("sentence_transformers") is None:  # the hybrid part's hint
        assert 'pip install torch==2.13.0 "adk-sqlstore[embeddings]"' in first
    lines = first.splitlines()
    (explained,) = [line for line in lines if line.startswith('user:diet = "vegetarian"')]
    assert explained.endswith("UTC."), explained  # a 200-character sentence on one line
    (recalled,) = [line for line in lines if line.startswith("delivery address:")]
    assert recalled.endswith("the idle job put it there."), recalled
    assert max(len(line) for line in lines if set(line) <= {"─", " "} or "───" in line) <= 100
    # Monday, the idle job and Thursday ran in different processes.
    monday_pid = first.split("Monday")[1].split("process ")[1].split(",")[0]
    thursday_pid = first.split("Thursday")[1].split("new process ")[1].split(",")[0]
    assert monday_pid != thursday_pid
    second = _run_demo(env)
    # Monday's two turns and the current fact (and the hybrid part's fact, with it)
    assert re.search(r"forgot an earlier run: 2 session\(s\), [34] memories", second)
    assert "ingested 1 session(s), 2 event(s)" in second
    assert "Shall I deliver it to the Pune office reception" in second
    assert run_sync(_snapshot("lunch-app")) == users_data  # the README's data, untouched


async def _memory_seed(url: str) -> None:
    async with SqlSessionService.from_url(url) as service:
        for user, line in [
            ("user-17", "please deliver to the Pune office reception"),
            ("user-42", "deliver to the Mumbai office lobby"),
        ]:
            s = await service.create_session(app_name="lunch-app", user_id=user)
            await service.append_event(
                s,
                Event(
                    author="user",
                    timestamp=1000.0,
                    content={"role": "user", "parts": [{"text": line}]},
                ),
            )


def test_memory_ingest_idle_and_search_commands(db_url: str) -> None:
    run_sync(_memory_seed(db_url))
    first = cli("memory", "ingest-idle", "--idle-minutes", "30", "--url", db_url)
    assert "ingested 2 session(s), 2 event(s)" in first
    again = cli("memory", "ingest-idle", "--idle-minutes", "30", "--url", db_url)
    assert "ingested 0 session(s), 0 event(s)" in again
    found = cli(
        "memory",
        "search",
        "delivery address office",
        "--app",
        "lunch-app",
        "--user",
        "user-17",
        "--url",
        db_url,
    )
    assert "please deliver to the Pune office reception" in found and "Mumbai" not in found
    assert "1970-01-01 00:16:40" in found and "1 result(s)" in found


def test_forget_user_command_asks_first(db_url: str) -> None:
    run_sync(_memory_seed(db_url))
    declined = runner.invoke(
        app,
        ["forget-user", "--app", "lunch-app", "--user", "user-17", "--url", db_url],
        input="n\n",
    )
    assert declined.exit_code == 1 and "Aborted" in declined.output
    assert "user-17" in cli("sessions", "list", "--app", "lunch-app", "--url", db_url)
    done = cli("forget-user", "--app", "lunch-app", "--user", "user-17", "--yes", "--url", db_url)
    assert "forgot user-17 in lunch-app: deleted 1 events" in done and "1 sessions" in done
    listing = cli("sessions", "list", "--app", "lunch-app", "--url", db_url)
    assert "user-17" not in listing and "user-42" in listing


@pytest.mark.postgres
def test_an_unmigrated_database_is_one_error_line(postgres_factory: PostgresFactory) -> None:
    """The command reports the problem itself, once; the library's log record of it is
    not printed a second time."""
    url = postgres_factory.create(migrate=False)
    commands = (["sessions", "list", "--app", "a"], ["memory", "search", "x", "--app", "a"])
    for args in commands:
        if args[0] == "memory":
            args = [*args, "--user", "u"]
        done = subprocess.run(
            [sys.executable, "-m", "adk_sqlstore", *args, "--url", url],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        lines = (done.stdout + done.stderr).strip().splitlines()
        assert done.returncode == 1 and len(lines) == 1, lines
        assert lines[0].startswith("error: the database postgresql://")
        assert "adk-sqlstore migrate --url" in lines[0]


# -- moved from test_edges.py


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


def test_json_lines_and_arrays_load_as_sessions() -> None:
    from adk_sqlstore.sessions.json_files import load_sessions

    one = {"id": "s1", "app_name": "a", "user_id": "u"}
    two = {"id": "s2", "app_name": "a", "user_id": "u"}
    assert [s.id for s in load_sessions(json.dumps(one))] == ["s1"]
    assert [s.id for s in load_sessions(json.dumps([one, two]))] == ["s1", "s2"]
    assert [s.id for s in load_sessions(f"{json.dumps(one)}\n{json.dumps(two)}\n")] == ["s1", "s2"]


# -- how the commands read and show their command line (issue 40)


def _command_paths(command: Any, path: list[str]) -> list[list[str]]:
    """The words that reach ``command`` and every visible command under it, from the
    click tree typer builds (so a command added later is walked too)."""
    paths = [path]
    ctx = command.context_class(command, info_name=" ".join(["adk-sqlstore", *path]))
    for name in sorted(command.list_commands(ctx) if hasattr(command, "list_commands") else []):
        sub = command.get_command(ctx, name)
        if sub is not None and not sub.hidden:
            paths += _command_paths(sub, [*path, name])
    return paths


COMMAND_PATHS = _command_paths(typer.main.get_command(app), [])

PARSER_NOISE = re.compile(
    r"[{}]|\.\.\.\]\.\.\.|default: None|list\[|NoneType|Optional\[|Union\[|typing\.|<class "
    r"|<(?:str|int|float|bool|bytes|path|Path|datetime|uuid|UUID|text|file|[a-z]+ range"
    r"|[^<>\s]*\|[^<>\s]*|[a-z]+\[[^>]*\])>"
    r"|\b(?:TEXT|INTEGER|FLOAT|BOOLEAN|DIRECTORY|UUID)\b"
)
"""What a parser shows of its own workings: ``{QUERY}``, ``{PATH...}...``,
``<list[Path]>``, ``<str>``, click's ``TEXT``/``INTEGER``, ``[default: None]``."""

USAGE = re.compile(
    r"Usage: adk-sqlstore(?: [a-z-]+)* \[OPTIONS\]"
    r"(?: COMMAND \[ARGS\]\.\.\.|(?: \[?[A-Z][A-Z_]*(?:\.\.\.)?\]?)*)"
)


@pytest.mark.parametrize(
    "path", COMMAND_PATHS, ids=[" ".join(p) or "adk-sqlstore" for p in COMMAND_PATHS]
)
def test_help_reads_as_a_person_writes_the_command(path: list[str]) -> None:
    """Typer 0.29 printed ``import [OPTIONS] {PATH...}...``, ``PATH... <list[Path]>``
    and ``SESSION_ID <str>``; typer 0.12 drew panels with ``TEXT``, ``INTEGER`` and
    ``[default: None]``. Every command's help (the top level's too), 100 columns wide
    and without colour, shows its usage and arguments as a person writes them, each
    argument of the usage line listed with its help, and no deprecated option."""
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "100", "NO_COLOR": "1"})
    assert result.exit_code == 0, result.output
    text = result.output
    assert PARSER_NOISE.findall(text) == [], text
    usage = text.strip().splitlines()[0]
    assert USAGE.fullmatch(usage), usage
    shown = re.findall(r"\b[A-Z][A-Z_]*(?:\.\.\.)?", usage.split("[OPTIONS]")[1])
    if "COMMAND" not in shown:
        section = text.split("\nArguments:\n")[1].split("\n\n")[0] if shown else ""
        assert re.findall(r"^  (\S+)  ", section, re.M) == shown, text
    assert "--model" not in text


def test_a_mistyped_option_or_command_gets_the_closest_visible_one(sqlite_url: str) -> None:
    """As a database URL's parameters (one helper, adk_sqlstore.suggestions): the
    closest visible option or command, never the hidden, deprecated --model."""
    result = runner.invoke(app, ["memory", "search", "q", "--app", "a", "--embeder", "x"])
    assert result.exit_code == 2 and "did you mean --embedder?" in result.output
    result = runner.invoke(app, ["memory", "generate", "--modl", "x", "--url", sqlite_url])
    assert result.exit_code == 2 and "No such option: --modl" in result.output
    assert "--model" not in result.output
    result = runner.invoke(app, ["memroy", "search"])
    assert result.exit_code == 2 and "did you mean 'memory'?" in result.output
    result = runner.invoke(app, ["memory", "facts", "lsit"])
    assert result.exit_code == 2 and "did you mean 'list'?" in result.output
    result = runner.invoke(app, ["memory", "zzz"])
    assert result.exit_code == 2 and "No such command 'zzz'." in result.output


async def _badminton(url: str) -> None:
    async with SqlMemoryService.from_url(url) as memory:  # no embedder: no vector yet
        text = "I play badminton every Sunday"
        entry = {"content": {"parts": [{"text": text}]}}
        await memory.add_memory(app_name="a", user_id="u1", memories=[entry])


def test_the_embedder_option_is_embedder_and_model_is_its_old_name(sqlite_url: str) -> None:
    """``--model`` named the embedder in ``memory search`` and ``memory embed`` and the
    generator in ``memory generate``: it is ``--embedder`` here, and ``--model`` still
    works for a release, with one warning on standard error."""
    run_sync(_badminton(sqlite_url))
    embedder, url = "tests.embedders:Concepts", ["--url", sqlite_url]
    out, err = cli_apart("memory", "embed", "--embedder", embedder, *url)
    assert "embedded 1 memories with test-concepts" in out and err == ""
    out, err = cli_apart("memory", "embed", "--model", embedder, *url)
    assert "embedded 0 memories" in out
    assert err == "warning: --model is deprecated; use --embedder\n"
    search = ["memory", "search", "What sport do I like?", "--app", "a", "--user", "u1", *url]
    out, err = cli_apart(*search, "--embedder", embedder)
    assert "badminton" in out and "1 result(s)" in out and err == ""
    out, err = cli_apart(*search, "--model", embedder)  # hybrid: no word in common
    assert "badminton" in out and err == "warning: --model is deprecated; use --embedder\n"
    both = runner.invoke(app, [*search, "--model", embedder, "--embedder", embedder])
    assert both.exit_code == 2 and "give --embedder only" in both.output


@pytest.mark.parametrize(
    ("url", "driver"),
    [
        ("postgresql://postgres:hunter2@127.0.0.1:5432/postgres", "asyncpg"),
        ("mysql://root:hunter2@127.0.0.1:3306/test", "asyncmy"),
        ("sqlite:///{tmp}/x.db", "sqlite3"),
    ],
)
def test_a_misspelt_url_parameter_on_the_command_line_names_the_closest(
    url: str, driver: str, tmp_path: Path
) -> None:
    """``info --url ...?generater=...`` listed the driver's parameters only, and
    suggested nothing; the check comes before any connection (no server needed)."""
    typo = url.format(tmp=tmp_path) + "?generater=openai:x"
    output = cli("info", "--url", typo, code=1)
    assert output.startswith("error: ") and output.count("\n") == 1, output
    assert "do not take generater (did you mean `generator`?)" in output
    assert "adk-sqlstore's: auto_migrate, " in output and f"; {driver}'s: " in output
    assert "hunter2" not in output


# -- inspect's port, on-flags, memory generate's hint (a review's findings)


def test_inspect_says_in_one_line_that_it_cannot_listen(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``inspect --port 99999`` printed the banner, then two tracebacks; a port in use
    the banner, uvicorn's error and status 3. Now a port out of range is a usage error
    (status 2), and one that cannot be bound one error line (status 1), before the
    banner and before uvicorn runs."""
    import socket

    uvicorn = pytest.importorskip("uvicorn", reason="inspect needs the inspector extra")
    served: list[int] = []

    def run(_asgi: object, host: str, port: int, **_: object) -> None:
        served.append(port)
        raise SystemExit(3)  # what uvicorn does when it cannot bind

    monkeypatch.setattr(uvicorn, "run", run)
    for port in ("99999", "0"):
        result = runner.invoke(app, ["inspect", "--port", port, "--url", sqlite_url])
        assert result.exit_code == 2 and "--port" in result.output, result.output
        assert "Traceback" not in result.output and "memory inspector on" not in result.output
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = runner.invoke(app, ["inspect", "--port", str(port), "--url", sqlite_url])
    assert result.exit_code == 1, result.output
    assert result.output.startswith(f"error: cannot listen on 127.0.0.1:{port}: address")
    assert result.output.count("\n") == 1 and served == []


@pytest.mark.parametrize(
    ("command", "flag"),
    [
        (["memory", "search"], "--history"),
        (["memory", "facts", "list"], "--history"),
        (["memory", "generate"], "--retry-failed"),
        (["import"], "--replace"),
    ],
)
def test_on_flags_have_no_off_form(command: list[str], flag: str) -> None:
    """Help showed ``--history / --no-history [default: no-history]``: the flags are
    written as the docs write them, ``--history``, with no ``--no-`` form."""
    help_text = runner.invoke(app, [*command, "--help"]).output
    assert flag in help_text and "--no-" not in help_text and "default: no" not in help_text
    refused = runner.invoke(app, [*command, f"--no-{flag[2:]}"])
    assert refused.exit_code == 2 and f"No such option: --no-{flag[2:]}" in refused.output


def test_memory_generate_without_a_generator_names_the_option(sqlite_url: str) -> None:
    """It said "pass generator=MemoryGenerator(model)", the API's words, as
    ``memory embed`` now says ``--embedder``."""
    output = cli("memory", "generate", "--url", sqlite_url, code=1)
    assert output == (
        "error: no generator: pass --generator MODEL (e.g. --generator gemini-2.5-flash)"
        " or ?generator= in the URL\n"
    )
