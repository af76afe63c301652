"""The rough edges a new user hit in their first hour (issue 33), one test each: what
the user typed, and the one clear line they should get back."""

from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from adk_sqlstore import SqlMemoryService, SqlSessionService
from adk_sqlstore.cli import app
from adk_sqlstore.errors import ConfigurationError

from .conftest import REPO, MysqlFactory, PostgresFactory, run_sync
from .helpers import runner

README = (REPO / "README.md").read_text()
PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
DOCS = "\n".join(page.read_text() for page in PAGES)  # the README and the site's pages


# 1. a driver that is not installed: one line naming the extra, library and CLI alike
@pytest.mark.parametrize(
    ("url", "driver", "extra"),
    [
        ("mysql://root@127.0.0.1:3306/test", "asyncmy", "mysql"),
        ("mariadb://root@127.0.0.1:3306/test", "asyncmy", "mysql"),
        ("postgresql://postgres@127.0.0.1:5432/postgres", "asyncpg", "postgres"),
    ],
)
def test_a_missing_driver_is_one_line_naming_the_extra(
    url: str, driver: str, extra: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [m for m in sys.modules if m == driver or m.startswith(driver + ".")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, driver, None)  # as if not installed
    with pytest.raises(ConfigurationError) as caught:
        SqlSessionService.from_url(url)
    message = str(caught.value)
    assert f"pip install 'adk-sqlstore[{extra}]'" in message and "\n" not in message
    assert f"the {driver} driver" in message
    result = runner.invoke(app, ["sessions", "list", "--app", "a", "--url", url])
    assert result.exit_code == 1
    assert result.output.strip().count("\n") == 0, result.output
    assert f"adk-sqlstore[{extra}]" in result.output and "Traceback" not in result.output


# 2. a session file that is not a session: which field, which event, which line
def test_a_bad_session_file_names_the_field_the_event_and_the_value(
    tmp_path: Path, db_url: str
) -> None:
    bad = tmp_path / "bad.session.json"
    event = {"author": "user", "timestamp": "yesterday"}
    bad.write_text(json.dumps({"id": "s", "app_name": "a", "user_id": "u", "events": [event]}))
    result = runner.invoke(app, ["import", str(bad), "--url", db_url])
    assert result.exit_code == 1
    assert "events[0].timestamp" in result.output and "'yesterday'" in result.output
    lines = tmp_path / "lines.session.json"
    good = {"id": "t", "app_name": "a", "user_id": "u"}
    lines.write_text(json.dumps(good) + "\n" + json.dumps({"id": 5, "app_name": "a"}) + "\n")
    result = runner.invoke(app, ["import", str(lines), "--url", db_url])
    assert result.exit_code == 1 and "line 2: id: " in result.output, result.output
    array = tmp_path / "array.session.json"
    array.write_text(json.dumps([good, {**good, "id": "u", "events": [event]}]))
    result = runner.invoke(app, ["import", str(array), "--url", db_url])
    assert "item 1: events[0].timestamp" in result.output, result.output


def test_importing_a_file_that_is_not_there_says_so(sqlite_url: str) -> None:
    result = runner.invoke(app, ["import", "nonexistent.session.json", "--url", sqlite_url])
    assert result.exit_code == 1
    assert result.output.strip() == "error: no file or folder 'nonexistent.session.json'"


@pytest.mark.postgres
def test_a_database_that_does_not_exist_says_to_create_it(postgres_server: str) -> None:
    url = postgres_server.rsplit("/", 1)[0] + "/adk_sqlstore_no_such_database"
    result = runner.invoke(app, ["info", "--url", url])
    assert result.exit_code == 1 and "create it first (createdb" in result.output


# 3. a SQLite file in a folder that does not exist: the advice works as given
def test_the_advice_for_a_missing_sqlite_folder_makes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The relative URL is resolved in a folder of the test's own (named like a clone
    of this repository, as a path the advice repeats may hold the command's name)."""
    where = tmp_path / "adk-sqlstore"
    where.mkdir()
    monkeypatch.chdir(where)
    url = "sqlite:///nonexistent/dir/x.db"
    result = runner.invoke(app, ["sessions", "list", "--app", "a", "--url", url])
    assert result.exit_code == 1
    advice = result.output.split("create it with: ", 1)[1].strip()
    run = f"adk-sqlstore migrate --url {url}"
    assert advice.startswith("mkdir -p ") and advice.endswith(run)
    command = advice.removesuffix(run) + f"{Path(sys.executable).parent}/{run}"
    done = subprocess.run(command, shell=True, cwd=where, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert (where / "nonexistent" / "dir" / "x.db").is_file()


# 4. messages show the URL as the user wrote it, never the driver's spelling
def _unmigrated(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> str:
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'empty.db'}"
    factory: PostgresFactory | MysqlFactory = request.getfixturevalue(f"{backend}_factory")
    return factory.create(migrate=False)


@pytest.mark.parametrize(
    "backend",
    [
        "sqlite",
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("mysql", marks=pytest.mark.mysql),
    ],
)
def test_messages_show_the_url_as_written(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    url = _unmigrated(request, backend, tmp_path)
    result = runner.invoke(app, ["sessions", "list", "--app", "a", "--url", url])
    assert result.exit_code == 1 and "adk-sqlstore migrate" in result.output
    assert not re.search(r"\+(asyncpg|asyncmy|aiosqlite)|charset=", result.output), result.output
    written = url.split("://", 1)[0] + "://"
    assert written in result.output
    done = runner.invoke(app, ["migrate", "--url", url])
    assert done.exit_code == 0 and not re.search(r"\+(asyncpg|asyncmy|aiosqlite)", done.output)


def test_a_url_without_a_scheme_lists_every_database() -> None:
    result = runner.invoke(app, ["sessions", "list", "--app", "a", "--url", "localhost/db"])
    assert result.exit_code == 1
    for scheme in ("postgresql://", "mysql://", "sqlite:///"):
        assert scheme in result.output


# 5. the core service given to ADK's Runner: stopped at the first call, naming the class
async def test_the_core_service_given_to_adk_says_which_class_adk_needs(sqlite_url: str) -> None:
    pytest.importorskip("google.adk", reason="the adk extra is not installed")
    from google.adk.agents import LlmAgent
    from google.adk.runners import Runner
    from google.genai import types

    async with SqlSessionService.from_url(sqlite_url) as core:
        agent = LlmAgent(name="helper", model="gemini-2.0-flash")
        runner_ = Runner(app_name="a", agent=agent, session_service=core)  # type: ignore[arg-type]
        message = types.Content(role="user", parts=[types.Part(text="hi")])
        with pytest.raises(TypeError, match=r"from adk_sqlstore\.adk import SqlSessionService"):
            async for _ in runner_.run_async(user_id="u", session_id="s", new_message=message):
                pass
        memory = SqlMemoryService(core.store)
        assert repr(memory).endswith("for ADK use adk_sqlstore.adk>")  # pydantic shows the end
        # the ADK classes, which call the core ones, are not refused
        from adk_sqlstore.adk import SqlSessionService as AdkSessions

        async with AdkSessions(store=core.store) as adk_sessions:
            made = await adk_sessions.create_session(app_name="a", user_id="u")
            assert await adk_sessions.get_session(app_name="a", user_id="u", session_id=made.id)


# 7. an embedder whose libraries are missing fails when the service is made
def test_an_embedder_without_its_extra_fails_when_the_service_is_made(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    with pytest.raises(ConfigurationError, match=r"adk-sqlstore\[embeddings\]"):
        SqlMemoryService.from_url(sqlite_url, embedder="minilm")
    with pytest.raises(ConfigurationError, match=r"adk-sqlstore\[embeddings\]"):
        SqlMemoryService.from_url(sqlite_url + "?embedder=minilm")


# 8. artifacts get without --session names the option
def test_artifacts_get_without_a_session_names_the_option(sqlite_url: str) -> None:
    args = ["artifacts", "get", "report.pdf", "--app", "a", "--user", "u", "--url", sqlite_url]
    result = runner.invoke(app, args)
    assert result.exit_code == 1 and "--session" in result.output
    assert "session_id" not in result.output
    listed = runner.invoke(
        app, ["artifacts", "list", "--app", "a", "--user", "u", "--url", sqlite_url]
    )
    assert listed.exit_code == 0 and "pass --session SESSION" in listed.output


# 9. help and docs that say what the commands do; a --version
def test_forget_user_says_it_deletes_artifacts() -> None:
    help_text = runner.invoke(app, ["forget-user", "--help"]).output
    assert "artifacts" in help_text
    asked = runner.invoke(app, ["forget-user", "--app", "a", "--user", "u"], input="n\n")
    assert "artifact" in asked.output


def test_version() -> None:
    from importlib.metadata import version

    result = runner.invoke(app, ["--version"])
    assert (
        result.exit_code == 0 and result.output.strip() == f"adk-sqlstore {version('adk-sqlstore')}"
    )


def test_the_readme_lists_every_source_import_adk_reads() -> None:
    help_text = runner.invoke(app, ["import-adk", "--help"]).output
    assert "MySQL" in help_text
    assert "import-adk --source mysql://" in DOCS


def test_the_readme_and_the_makefile_give_the_same_test_times() -> None:
    header = (REPO / "Makefile").read_text().split("\n\n", 1)[0]
    entries = {e.split()[0]: e for e in header.split("#   make ")[1:]}
    for target in ("test", "test-all", "test-citus"):
        figure = r"([\d.]+(?:-[\d.]+)? min)"  # "about 11 min", or a range: "3.5-4 min"
        in_readme = re.search(rf"\| `make {target}` \|[^\n]*\| (?:about )?{figure} \|", README)
        in_make = re.search(rf"\((?:about )?{figure}", entries[target])
        assert in_readme and in_make, target
        assert in_readme.group(1) == in_make.group(1), target


# 10. examples import only what they use; the package docstrings name every database
def test_readme_examples_import_only_what_they_use(tmp_path: Path) -> None:
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed (the dev extra)")
    for n, code in enumerate(re.findall(r"```python\n(.*?)```", DOCS, re.S)):
        path = tmp_path / f"example{n}.py"
        path.write_text(code)
        done = subprocess.run(
            [ruff, "check", "--isolated", "--select", "F401,F811,F841", str(path)],
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stdout


def test_the_package_docstrings_name_every_database() -> None:
    import adk_sqlstore

    assert adk_sqlstore.__doc__ is not None and "MySQL" in adk_sqlstore.__doc__
    pytest.importorskip("google.adk", reason="the adk extra is not installed")
    import adk_sqlstore.adk

    assert adk_sqlstore.adk.__doc__ is not None and "MySQL" in adk_sqlstore.adk.__doc__


# 11. where the examples' data goes, and how big it is
def test_info_shows_the_default_file_and_its_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    monkeypatch.delenv("ADK_SQLSTORE_DATABASE_URL", raising=False)
    default = tmp_path / "adk-sqlstore" / "adk_sqlstore.db"
    assert "not created yet" in runner.invoke(app, ["info"]).output

    async def use() -> None:
        async with SqlSessionService.from_url() as sessions:
            await sessions.create_session(app_name="a", user_id="u")

    run_sync(use())
    shown = runner.invoke(app, ["info"]).output
    assert str(default) in shown and "embedded default" in shown
    assert re.search(r"[\d,]+ bytes", shown)
    from adk_sqlstore.migration import HEAD_REVISION

    assert f"schema: revision {HEAD_REVISION} (this version's)" in shown
    assert "adk-sqlstore info" in README


# 12. where we differ from ADK's SQL services, each listed in docs/adk-compatibility.md
async def test_events_with_equal_timestamps_come_back_in_append_order(db_url: str) -> None:
    """ADK's DatabaseSessionService orders events by timestamp, then by id (a random
    UUID): equal timestamps come back shuffled. Ours come back as appended."""
    from adk_sqlstore import Event

    async with SqlSessionService.from_url(db_url) as sessions:
        session = await sessions.create_session(app_name="a", user_id="u")
        for n in range(12):
            await sessions.append_event(
                session, Event(author="user", timestamp=1_700_000_000.0, invocation_id=str(n))
            )
        got = await sessions.get_session(app_name="a", user_id="u", session_id=session.id)
        assert got is not None
        assert [e.invocation_id for e in got.events] == [str(n) for n in range(12)]


def test_the_compatibility_list_names_our_differences_from_adks_services() -> None:
    """Rough edge 12: each difference from ADK's session services is a row naming the
    test of ours that asserts it, and that test exists."""
    text = (REPO / "docs" / "adk-compatibility.md").read_text()
    section = text.split("## Where we differ from ADK's session services", 1)[1]
    section = section.split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and "---" not in line]
    named = [re.findall(r"`(test_\w+)`", row.rsplit("|", 2)[1]) for row in rows[1:]]
    assert len(named) >= 8 and all(named), rows
    defined = {
        node.name
        for path in (REPO / "tests").glob("test_*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }
    assert {name for names in named for name in names} <= defined
    for test in (
        "test_events_with_equal_timestamps_come_back_in_append_order",
        "test_non_json_values_are_rejected_naming_the_key_and_nothing_is_written",
    ):
        assert test in section


def test_export_and_import_of_the_longest_ids(tmp_path: Path, sqlite_url: str) -> None:
    """A user id of 255 UTF-8 bytes ('é' x 127, and one more byte) percent-encodes to
    765 characters, past a file name's 255 bytes: export used to stop there. Long names
    are cut, with a hash to keep them apart; the files hold the full ids."""
    from adk_sqlstore.sessions.json_files import path_component

    users = ["é" * 127 + "a", "é" * 127 + "b"]

    async def seed() -> None:
        async with SqlSessionService.from_url(sqlite_url) as sessions:
            for user in users:
                await sessions.create_session(app_name="a", user_id=user, session_id="é" * 127)

    run_sync(seed())
    out = tmp_path / "out"
    result = runner.invoke(app, ["export", "--app", "a", "--out", str(out), "--url", sqlite_url])
    assert result.exit_code == 0, result.output
    assert len({path_component(u) for u in users}) == 2
    assert all(len(p.name.encode()) <= 255 for p in out.rglob("*"))
    target = f"sqlite:///{tmp_path / 'copy.db'}"
    assert runner.invoke(app, ["migrate", "--url", target]).exit_code == 0
    result = runner.invoke(app, ["import", str(out), "--url", target])
    assert result.exit_code == 0, result.output

    async def imported() -> list[int]:
        async with SqlSessionService.from_url(target) as sessions:
            return [
                len((await sessions.list_sessions(app_name="a", user_id=user)).sessions)
                for user in users
            ]

    assert run_sync(imported()) == [1, 1]


@pytest.mark.parametrize("typo", ["pool_sise=3", "auto_migrat=true", "languag=german"])
def test_a_misspelt_sqlite_url_setting_is_refused_naming_it(typo: str, tmp_path: Path) -> None:
    """PostgreSQL and MySQL URLs refused a setting they do not take; SQLite ones only
    warned (SQLAlchemy: "not accepted by the pysqlite driver") and went on. The
    refusal names the setting meant (issue 40)."""
    url = f"sqlite:///{tmp_path / 'x.db'}?{typo}"
    name = typo.split("=")[0]
    meant = {"pool_sise": "pool_size", "auto_migrat": "auto_migrate", "languag": "language"}
    said = rf"{name} \(did you mean `{meant[name]}`\?\); they take"
    with pytest.raises(ConfigurationError, match=said):
        SqlSessionService.from_url(url)
    assert SqlSessionService.from_url(f"sqlite:///file:{tmp_path / 'x.db'}?uri=true&mode=rwc")


@pytest.mark.parametrize("keyword", ["url", "db_url"])
def test_the_adk_classes_say_how_to_give_the_url(keyword: str, tmp_path: Path) -> None:
    """``SqlSessionService(url=...)`` said "Store.from_url() got multiple values for
    argument 'url'"; ``db_url=`` (ADK's DatabaseSessionService's name) named the
    embedded default file."""
    pytest.importorskip("google.adk", reason="the adk extra is not installed")
    from adk_sqlstore.adk import SqlSessionService as AdkSessions

    with pytest.raises(ConfigurationError, match=f"{keyword}= is not an argument"):
        AdkSessions(**{keyword: f"sqlite:///{tmp_path / 'x.db'}"})  # type: ignore[arg-type]
