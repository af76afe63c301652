"""Configuration: URLs, the embedded default, injected engines, SQLite settings, errors."""

from __future__ import annotations

import logging
import re
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url
from typer.testing import CliRunner

from adk_sqlstore import (
    DatabaseUnavailableError,
    SchemaNotMigratedError,
    SqlMemoryService,
    SqlSessionService,
)
from adk_sqlstore.cli import app
from adk_sqlstore.engine import create_engine
from adk_sqlstore.errors import ConfigurationError
from adk_sqlstore.migration import HEAD_REVISION, current_revision
from adk_sqlstore.settings import SETTINGS
from adk_sqlstore.url_display import describe_url, redact_url
from adk_sqlstore.urls import DATABASE_URL_ENV, default_sqlite_path, normalize_url, resolve_url

from .conftest import pg_url, run_sync, with_query


def test_plain_urls_are_mapped_to_asyncio_drivers() -> None:
    assert normalize_url("postgresql://u@h/db").drivername == "postgresql+asyncpg"
    assert normalize_url("postgres://u@h/db").drivername == "postgresql+asyncpg"
    assert normalize_url("postgresql+psycopg2://u@h/db").drivername == "postgresql+asyncpg"
    assert normalize_url("postgresql+asyncpg://u@h/db").drivername == "postgresql+asyncpg"
    assert normalize_url("sqlite:///x.db").drivername == "sqlite+aiosqlite"
    assert normalize_url("sqlite:////abs/x.db").database == "/abs/x.db"


def test_unsupported_or_invalid_urls_say_so_without_the_password() -> None:
    with pytest.raises(ValueError, match="unsupported database 'oracle'") as info:
        normalize_url("oracle://root:hunter2@localhost/db")
    assert "hunter2" not in str(info.value)
    with pytest.raises(ValueError, match="invalid database URL") as info:
        normalize_url("not a url :// hunter2")
    assert "hunter2" not in str(info.value)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        # a driver name with "_" (SQLAlchemy's own), and the mistake the message is for
        ("postgresql+psycopg_async://app:hunter2@x@db.example.com/agents", "more than one '@'"),
        ("mysql+mysql_connector://app:hunter2@db/agents?auto_migrate=yes_please", "neither"),
        # a query password runs to the next "&": "#" and ";" are in it
        ("postgresql://app@db/agents?password=pa#hunter2&auto_migrate=maybe", "neither true"),
        ("mysql://app@db/agents?password=pa;hunter2&auto_migrate=maybe", "neither true"),
        ("postgresql://app@db:54x2/agents?password=pa#hunter2", "not a port number"),
        ("postgresql://u@h/db?pass%77ord=hunter2&auto_migrate=maybe", "neither true"),
        # "@host" forgotten: the password reads as a port
        ("postgresql://app:hunter2/agents", "the URL lacks '@host'"),
        ("mariadb://app:hunter2", "the URL lacks '@host'"),
        # libpq's key=value form after a scheme, or after a database name
        ("postgresql://host=127.0.0.1 user=postgres password=hunter2", "key=value"),
        ("postgresql://postgres@127.0.0.1:5432/agents password=hunter2", "key=value"),
        ("postgresql:/postgres:hunter2/db", "has no scheme"),
    ],
)
def test_a_password_in_a_mistyped_url_is_never_shown(url: str, message: str) -> None:
    """Found by a review that tried 130 inputs (each of these showed the password)."""
    with pytest.raises(ValueError, match=message) as raised:
        normalize_url(url)
    assert "hunter2" not in str(raised.value)


def test_an_empty_url_says_so() -> None:
    with pytest.raises(ValueError, match="the database URL is empty"):
        normalize_url("")


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("definitely not a url hunter2", "has no scheme"),
        ("hunter2", "has no scheme"),
        ("host=db user=app password=hunter2 dbname=agents", "key=value connection string"),
        ("app:hunter2@db/agents", "has no scheme"),
    ],
)
def test_a_string_without_a_scheme_is_not_echoed_unless_it_reads_as_a_path(
    url: str, message: str
) -> None:
    """As ADK 2.13's DatabaseSessionService (upstream
    test_database_session_service_malformed_url_reports_usable_error): a malformed URL
    gets a usable error that does not repeat what may be a password. A path is shown,
    as the user typed it."""
    with pytest.raises(ValueError, match=message) as raised:
        normalize_url(url)
    assert "hunter2" not in str(raised.value)
    assert "may hold a password" in str(raised.value)
    with pytest.raises(ValueError, match=r"'sessions\.db' has no scheme"):
        normalize_url("sessions.db")


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("/var/lib/app.db", "has no scheme"),
        ("sqlite://relative.db", "three slashes"),
        ("postgresql://postgres@127.0.0.1:99999/x", "no valid port"),
        ("postgresql://u:hunter2@h/db?application_name=x", "do not take application_name"),
        ("postgresql://u:hunter2@h/db?connect_timeout=soon", "connect_timeout must be"),
        ("postgresql://u:hunter2@h/db?tcp_keepalives=1", "do not take tcp_keepalives"),
        ("postgresql://u:hunter2%2F@127.0.0.1:abc/db", "is not a port number"),
        ("postgresql://postgres:hunter2@x w:rd/é%?#&@127.0.0.1:5/t1", "percent-encode"),
        ("postgresql://u:hunter2@[::1:5432/db", "percent-encoded"),
        ("sqlite:/x.db", "three slashes"),
        ("sqlstore:///x.db", "is not a URL adk-sqlstore reads"),
        ("mysql://u:hunter2@h/db?charset=latin1", "charset must be utf8mb4"),
        ("mariadb://u:hunter2@h/db?search_path=agents", "do not take search_path"),
        ("mysql://u:hunter2@h/db?pgbouncer=true", "do not take pgbouncer"),
        ("mysql://u:hunter2@h:70000/db", "no valid port"),
    ],
)
def test_urls_the_drivers_would_choke_on_fail_clearly_up_front(url: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as raised:
        normalize_url(url)
    assert "hunter2" not in str(raised.value)


# What each backend's URL takes besides its driver's parameters: the service options,
# and the connection settings the backend applies (no setting that would do nothing).
SERVICE_OPTIONS = {"auto_migrate", "embedder", "generator", "language"}
SETTINGS_TAKEN = {
    "asyncpg": set(SETTINGS) - {"sqlite_busy_timeout"},
    "asyncmy": set(SETTINGS) - {"sqlite_busy_timeout", "pgbouncer", "search_path"},
    "sqlite3": set(SETTINGS)
    - {"command_timeout", "connect_timeout", "pgbouncer", "search_path", "statement_timeout"},
}
URLS = {
    "asyncpg": "postgresql://u:hunter2@h/db",
    "asyncmy": "mariadb://u:hunter2@h/db",
    "sqlite3": "sqlite:///x.db",
}
VALUES = {  # a value each parameter takes (else "1")
    "search_path": "agents",
    "statement_timeout": "1s",
    "pgbouncer": "false",
    "pool_pre_ping": "true",
    "auto_migrate": "true",
    "language": "german",
    "ssl": "disable",
    "sslmode": "require",
    "target_session_attrs": "read-write",
    "charset": "utf8mb4",
    "uri": "true",
    "check_same_thread": "false",
    "detect_types": "0",
    "mode": "rwc",
}


_ASYNCPG_TAKEN = {
    "host",
    "port",
    "user",
    "password",
    "database",
    "passfile",
    "ssl",
    "sslmode",
    "target_session_attrs",
    "prepared_statement_cache_size",
}


def _taken(message: str) -> dict[str, set[str]]:
    """The parameters a refusal says the URL takes, by whose they are."""
    listed = message.split("; they take ", 1)[1]
    return {
        whose.removesuffix("'s"): set(names.split(", "))
        for whose, _, names in (part.partition(": ") for part in listed.split("; "))
    }


@pytest.mark.parametrize(
    ("url", "typo", "meant"),
    [
        ("postgresql://u:hunter2@h/db", "generater", "generator"),
        ("postgres://u:hunter2@h1:5432,h2:5433/db", "target_session_attr", "target_session_attrs"),
        ("mysql://u:hunter2@h/db", "embeder", "embedder"),
        ("mariadb://u:hunter2@h/db", "pool_sise", "pool_size"),
        ("sqlite:///x.db", "languag", "language"),
        ("sqlstore+sqlite:///x.db", "auto_migrat", "auto_migrate"),
        ("sqlite:///x.db", "sqlite_busy_timout", "sqlite_busy_timeout"),
        ("sqlite:///x.db", "timeout", "sqlite_busy_timeout"),  # sqlite3's, overridden
        ("sqlite:///file:x.db?uri=true", "mod", "mode"),
        ("sqlite:///x.db", "GENERATOR", "generator"),  # whatever the case of its letters
        ("postgresql://u:hunter2@h/db", "Pool_Size", "pool_size"),
        ("postgresql://u:hunter2@h/db", "timeout", "connect_timeout"),
    ],
)
def test_a_misspelt_url_parameter_gets_the_closest_and_every_one_taken(
    url: str, typo: str, meant: str
) -> None:
    """Issue 40: ``?generater=`` got "they take command_timeout, ..., user": asyncpg's
    parameters and some settings, without the store's own options, and no
    suggestion. Now every parameter the URL takes on its backend, the store's and the
    driver's apart, and the one meant; still a ConfigurationError (a ValueError)."""
    with pytest.raises(ConfigurationError) as raised:
        resolve_url(f"{url}{'&' if '?' in url else '?'}{typo}=1")
    message = str(raised.value)
    assert f"do not take {typo} (did you mean `{meant}`?); they take" in message
    assert isinstance(raised.value, ValueError) and "hunter2" not in message
    driver = "asyncpg" if url.startswith("postgres") else "asyncmy" if "://u" in url else "sqlite3"
    taken = _taken(message)
    assert taken.pop("adk-sqlstore") == SERVICE_OPTIONS | SETTINGS_TAKEN[driver]
    assert next(iter(taken)) == driver
    if driver == "asyncpg":
        assert taken["asyncpg"] == _ASYNCPG_TAKEN


@pytest.mark.parametrize("driver", sorted(URLS))
def test_every_parameter_a_url_is_said_to_take_it_takes(driver: str) -> None:
    """The names a refusal lists are those the check lets through, one by one (with
    uri=true, SQLite's URI parameters too); nothing close: no suggestion."""
    uri = ["sqlite:///file:x.db?uri=true"] if driver == "sqlite3" else []
    for url in [URLS[driver], *uri]:
        with pytest.raises(ConfigurationError) as raised:
            resolve_url(f"{url}{'&' if '?' in url else '?'}zzqqx=1")
        assert "do not take zzqqx; they take" in str(raised.value)
        for names in _taken(str(raised.value)).values():
            for name in names:
                base = url.replace("///x.db", "///file:x.db") if name == "uri" else url
                resolve_url(f"{base}{'&' if '?' in base else '?'}{name}={VALUES.get(name, '1')}")


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("postgresql://u@h/db?sqlite_busy_timeout=3", "sqlite_busy_timeout (a setting of SQLite"),
        ("mysql://u@h/db?search_path=x", "search_path (a setting of PostgreSQL only)"),
        ("sqlite:///x.db?statement_timeout=5s", "(a setting of PostgreSQL, MySQL and MariaDB"),
        ("sqlite:///x.db?pgbouncer=true", "pgbouncer (a setting of PostgreSQL only)"),
        ("sqlite:///x.db?isolation_level=SERIALIZABLE", "do not take isolation_level;"),
        ("postgresql://u@h/db?ssl=true", "ssl must be one of allow, disable, prefer, require"),
    ],
)
def test_a_url_parameter_that_would_do_nothing_is_refused(url: str, why: str) -> None:
    """PostgreSQL URLs let ``sqlite_busy_timeout`` through (and said they did not take
    it), SQLite ones the servers' settings and sqlite3's overridden ``timeout`` and
    ``isolation_level``: all ignored. asyncpg refused ``ssl=true`` only at connect."""
    with pytest.raises(ConfigurationError, match=re.escape(why)):
        resolve_url(url)


async def _reads(url: str) -> None:
    async with SqlSessionService.from_url(url) as service:
        await service.list_sessions(app_name="a")


def test_every_sqlite_parameter_listed_connects(sqlite_url: str) -> None:
    """What SQLite URLs are said to take works there (a file at head: no write)."""
    uri_values = {"vfs": "unix", "cache": "private", "immutable": "0", "nolock": "0"}
    for name in SETTINGS_TAKEN["sqlite3"] | {"detect_types", "check_same_thread"}:
        run_sync(_reads(with_query(sqlite_url, **{name: VALUES.get(name, "1")})))
    run_sync(_reads(with_query(sqlite_url, cached_statements="10")))
    file_uri = sqlite_url.replace("sqlite:///", "sqlite:///file:")  # the file itself
    run_sync(_reads(with_query(file_uri, uri="true")))
    for name, value in {**uri_values, "mode": "rw", "psow": "1"}.items():
        run_sync(_reads(with_query(file_uri, uri="true", **{name: value})))
    folder = Path(sqlite_url[len("sqlite:///") :]).parent
    assert not [p.name for p in folder.iterdir() if "?" in p.name or "file:" in p.name]


@pytest.mark.postgres
def test_every_asyncpg_parameter_listed_connects(postgres_url: str) -> None:
    """asyncpg's parameters, as PostgreSQL URLs are said to take them, connect (asyncpg
    refused ``ssl=true``, which the check let through, only there)."""
    parts = make_url(postgres_url)
    given = {
        "host": parts.host or "127.0.0.1",
        "port": str(parts.port or 5432),
        "user": parts.username or "postgres",
        "database": parts.database or "",
        "passfile": "/nonexistent/passfile",
        "ssl": "disable",
        "sslmode": "disable",
        "target_session_attrs": "any",
        "prepared_statement_cache_size": "10",
    }
    if parts.password is None:
        given["password"] = "unused"  # the server trusts the test user
    assert set(given) | {"password"} == _ASYNCPG_TAKEN
    for name, value in given.items():
        run_sync(_reads(with_query(postgres_url, **{name: value})))


def test_create_engine_says_which_options_only_from_url_takes() -> None:
    with pytest.raises(ConfigurationError) as raised:
        create_engine("postgresql://u@h/db?generator=openai:x")
    message = str(raised.value)
    assert "do not take generator (an option of from_url and --url" in message
    assert "generator" not in _taken(message)["adk-sqlstore"]


def test_libpq_sslmode_is_passed_to_asyncpg_as_ssl() -> None:
    url = normalize_url("postgresql://u@h/db?sslmode=require")
    assert dict(url.query) == {"ssl": "require"}


@pytest.mark.postgres
async def test_sslmode_disable_connects(postgres_url: str) -> None:
    async with SqlSessionService.from_url(
        with_query(postgres_url, sslmode="disable"), auto_migrate=True
    ) as s:
        assert await s.list_sessions(app_name="a") is not None


def test_url_precedence_argument_then_environment_then_embedded(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.delenv(DATABASE_URL_ENV, raising=False)
    embedded = resolve_url(None)
    assert embedded.embedded
    assert embedded.url.database == str(tmp_path / "data" / "adk-sqlstore" / "adk_sqlstore.db")
    assert default_sqlite_path().parent.is_dir()
    monkeypatch.setenv(DATABASE_URL_ENV, "sqlite:///from-env.db")
    assert resolve_url(None).url.database == "from-env.db"
    assert not resolve_url(None).embedded
    assert resolve_url("sqlite:///explicit.db").url.database == "explicit.db"


async def test_embedded_default_migrates_itself(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    monkeypatch.delenv(DATABASE_URL_ENV, raising=False)
    async with SqlSessionService.from_url() as service:
        s = await service.create_session(app_name="app", user_id="u1")
    async with SqlSessionService.from_url() as service:
        assert await service.get_session(app_name="app", user_id="u1", session_id=s.id)
    assert default_sqlite_path().is_file()


async def test_environment_url_is_used(monkeypatch: pytest.MonkeyPatch, db_url: str) -> None:
    monkeypatch.setenv(DATABASE_URL_ENV, db_url)
    async with SqlSessionService.from_url() as service:
        await service.create_session(app_name="app", user_id="u1", session_id="via-env")
    async with SqlSessionService.from_url(db_url) as service:
        assert await service.get_session(app_name="app", user_id="u1", session_id="via-env")


@pytest.mark.sqlite
async def test_an_sqlite_file_migrates_itself_unless_told_not_to(tmp_path: Path) -> None:
    async with SqlSessionService.from_url(f"sqlite:///{tmp_path / 'own.db'}") as service:
        await service.create_session(app_name="app", user_id="u1")
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    async with SqlSessionService.from_url(url, auto_migrate=False) as service:
        with pytest.raises(SchemaNotMigratedError, match="adk-sqlstore migrate --url") as info:
            await service.list_sessions(app_name="app")
    assert info.value.current_revision is None and info.value.head_revision == HEAD_REVISION
    # Nothing was created behind the user's back.
    engine = create_engine(url)
    try:
        assert await current_revision(engine) is None
        async with engine.connect() as conn:
            tables = (await conn.execute(text("SELECT name FROM sqlite_master"))).all()
        assert tables == []
    finally:
        await engine.dispose()


@pytest.mark.sqlite
async def test_a_service_starting_beside_a_busy_writer_reads_at_once(tmp_path: Path) -> None:
    """auto_migrate on a file already at head takes no write lock: a new worker reads
    while another holds SQLite's write lock (it used to wait the busy timeout, then
    fail)."""
    path = tmp_path / "busy.db"
    async with SqlSessionService.from_url(f"sqlite:///{path}") as service:
        await service.create_session(app_name="app", user_id="u1", session_id="s1")
    writer = sqlite3.connect(path, isolation_level=None)
    try:
        writer.execute("BEGIN IMMEDIATE")  # a writer mid-transaction
        url = f"sqlite:///{path}?sqlite_busy_timeout=1"
        async with SqlSessionService.from_url(url, auto_migrate=True) as service:
            got = await service.get_session(app_name="app", user_id="u1", session_id="s1")
            assert got is not None and got.id == "s1"
    finally:
        writer.execute("ROLLBACK")
        writer.close()


@pytest.mark.postgres
async def test_a_server_database_is_never_altered_unless_asked(postgres_factory: object) -> None:
    url = postgres_factory.create(migrate=False)  # type: ignore[attr-defined]
    async with SqlSessionService.from_url(url) as service:
        with pytest.raises(SchemaNotMigratedError, match="migrate"):
            await service.create_session(app_name="app", user_id="u1")
    async with SqlSessionService.from_url(url, auto_migrate=True) as service:
        await service.create_session(app_name="app", user_id="u1")
    engine = create_engine(url)
    try:
        assert await current_revision(engine) == HEAD_REVISION
    finally:
        await engine.dispose()


async def test_injected_engine_is_not_closed_by_the_service(db_url: str) -> None:
    engine = create_engine(db_url)
    try:
        async with SqlSessionService(engine) as service:
            await service.create_session(app_name="app", user_id="u1")
        # Still usable after the service closed.
        async with engine.connect() as conn:
            assert (await conn.execute(text("SELECT 1"))).scalar() == 1
        second = SqlSessionService(engine)
        assert (await second.list_sessions(app_name="app")).sessions
    finally:
        await engine.dispose()


async def test_service_created_from_url_disposes_its_engine(db_url: str) -> None:
    service = SqlSessionService.from_url(db_url)
    await service.create_session(app_name="app", user_id="u1")
    pool: Any = service.engine.pool  # a QueuePool (its checkedin() is not on Pool)
    assert pool.checkedin() >= 1
    await service.close()
    assert pool.checkedin() == 0


@pytest.mark.sqlite
async def test_sqlite_runs_with_wal_busy_timeout_and_foreign_keys(sqlite_url: str) -> None:
    async with SqlSessionService.from_url(sqlite_url) as service:
        await service.list_sessions(app_name="app")
        async with service.engine.connect() as conn:
            assert (await conn.execute(text("PRAGMA journal_mode"))).scalar() == "wal"
            assert (await conn.execute(text("PRAGMA foreign_keys"))).scalar() == 1
            assert (await conn.execute(text("PRAGMA busy_timeout"))).scalar() == 30000
            assert (await conn.execute(text("PRAGMA mmap_size"))).scalar() == 1 << 30


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://bob:hunter2secret@127.0.0.1:1/db",  # nothing listens there
        pg_url(database="adk_sqlstore_no_such_db", password="hunter2secret"),
    ],
)
async def test_passwords_never_appear_in_errors_or_logs(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    async with SqlSessionService.from_url(url) as service:
        with pytest.raises(DatabaseUnavailableError) as info:
            await service.list_sessions(app_name="app")
    chain: list[BaseException] = []
    exc: BaseException | None = info.value
    while exc is not None:
        chain.append(exc)
        exc = exc.__cause__ or exc.__context__
    assert "***" in str(info.value)
    for item in chain:
        assert "hunter2secret" not in str(item)
        assert "hunter2secret" not in repr(item)
    assert "hunter2secret" not in caplog.text


def _spellings(db_url: str) -> list[str]:
    """Every way the product accepts to write the URL of one database."""
    plain = make_url(db_url)
    scheme, rest = db_url.split("://", 1)
    forms = [db_url, f"sqlstore+{db_url}", with_query(db_url, auto_migrate="false")]
    if plain.get_backend_name() == "postgresql":
        forms += [f"postgres://{rest}", f"postgresql+asyncpg://{rest}"]
        forms += [with_query(f"sqlstore+postgres://{rest}", auto_migrate="false")]
    elif plain.get_backend_name() == "mysql":
        forms += [f"mariadb://{rest}", f"mysql+asyncmy://{rest}", f"mysql+aiomysql://{rest}"]
        forms += [with_query(f"sqlstore+mariadb://{rest}", auto_migrate="false")]
    else:
        forms += [f"sqlite+aiosqlite://{rest}", f"sqlstore+sqlite+aiosqlite://{rest}"]
    assert scheme in ("postgresql", "sqlite", "mysql")
    return forms


def test_every_url_spelling_works_everywhere(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 10: "Every URL form that any part of the product accepts must be accepted
    everywhere (CLI, from_url, ADK classes, environment variable)"."""
    pytest.importorskip("google.adk")

    from adk_sqlstore.adk import SqlMemoryService as AdkMemoryService
    from adk_sqlstore.adk import SqlSessionService as AdkSessionService

    async def through_the_classes(spelling: str) -> str:
        async with SqlSessionService.from_url(spelling) as core:
            made = (await core.create_session(app_name="app", user_id="u1")).id
        async with AdkSessionService(spelling) as adk:
            assert await adk.get_session(app_name="app", user_id="u1", session_id=made)
        async with AdkMemoryService(spelling) as adk_memory:
            await adk_memory.search_memory(app_name="app", user_id="u1", query="x")
        async with SqlMemoryService.from_url(spelling) as memory:
            await memory.search_memory(app_name="app", user_id="u1", query="x")
        return made

    async def through_the_environment(session_id: str) -> None:
        for default in (None, "sqlstore://"):
            async with SqlSessionService.from_url(default) as via_env:
                got = await via_env.get_session(app_name="app", user_id="u1", session_id=session_id)
                assert got is not None

    runner = CliRunner(env={"COLUMNS": "300"})
    made: list[str] = []
    for n, spelling in enumerate(_spellings(db_url)):
        made.append(run_sync(through_the_classes(spelling)))
        assert runner.invoke(app, ["migrate", "--url", spelling]).exit_code == 0, spelling
        listed = runner.invoke(app, ["sessions", "list", "--app", "app", "--url", spelling])
        assert f"{n + 1} session(s)" in listed.output and made[-1] in listed.output, spelling
        monkeypatch.setenv(DATABASE_URL_ENV, spelling)
        run_sync(through_the_environment(made[0]))
        listed = runner.invoke(app, ["sessions", "list", "--app", "app"])
        assert f"{n + 1} session(s)" in listed.output, listed.output


def test_service_uri_options(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    monkeypatch.delenv(DATABASE_URL_ENV, raising=False)
    assert resolve_url("sqlstore://").embedded
    assert resolve_url("sqlstore://?auto_migrate=false").migrates_itself is False
    pg = resolve_url("sqlstore+postgresql://u:p@h/db?auto_migrate=true&sslmode=require")
    assert pg.migrates_itself and pg.display == "postgresql://u:***@h/db?ssl=require"
    assert not resolve_url("postgresql://u@h/db").migrates_itself
    relative = resolve_url("sqlstore+sqlite:///rel.db").url
    assert relative.database == "rel.db"
    assert resolve_url("sqlstore+sqlite:////abs/x.db").url.database == "/abs/x.db"
    monkeypatch.setenv(DATABASE_URL_ENV, "sqlstore+sqlite:////env/x.db?auto_migrate=false")
    from_env = resolve_url("sqlstore://")
    assert from_env.url.database == "/env/x.db" and not from_env.migrates_itself
    # The path logged is the file opened: SQLite does not expand "~".
    assert describe_url(normalize_url("sqlite:///~/t.db")) == f"SQLite file {Path.cwd()}/~/t.db"
    with pytest.raises(ValueError, match=r"sqlstore\+sqlite:///path\.db"):
        resolve_url("sqlstore:///x.db")
    with pytest.raises(ValueError, match="neither true nor false"):
        resolve_url("sqlite:///x.db?auto_migrate=maybe")


# -- moved from test_edges.py


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


# -- the query of sqlstore://, SQLite's URI parameters, `model` (a review's findings)


@pytest.mark.parametrize(
    ("query", "said"),
    [
        ("generater=x", "do not take generater (did you mean `generator`?)"),
        ("pool_size=abc&sslmode=bogus", "do not take sslmode;"),
        ("Pool_size=1", "do not take Pool_size (did you mean `pool_size`?)"),
        ("statement_timeout=5s", "statement_timeout (a setting of PostgreSQL, MySQL"),
        ("pool_size=abc", "pool_size must be a whole number of at least 1, not 'abc'"),
    ],
)
def test_a_sqlstore_url_query_is_checked_as_the_sqlite_url_it_resolves_to(
    query: str, said: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``sqlstore://?generater=x`` (ADK's spelling of the default) was taken with its
    query unread, everywhere: ``from_url``, ``create_engine``, ``info --url``. Now
    the same refusal, word for word, as the SQLite URL it resolves to."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    monkeypatch.delenv(DATABASE_URL_ENV, raising=False)
    sqlite = f"sqlite:///{default_sqlite_path()}?{query}"
    with pytest.raises(ConfigurationError, match=re.escape(said)) as expected:
        resolve_url(sqlite)
    for given in (f"sqlstore://?{query}", f"sqlstore:?{query}&auto_migrate=false"):
        with pytest.raises(ConfigurationError) as raised:
            resolve_url(given)
        assert str(raised.value) == str(expected.value)
        with pytest.raises(ConfigurationError) as raised:
            SqlSessionService.from_url(given)
        assert str(raised.value) == str(expected.value)
        with pytest.raises(ConfigurationError) as raised:
            create_engine(given)
        with pytest.raises(ConfigurationError) as as_sqlite:
            create_engine(sqlite)
        assert str(raised.value) == str(as_sqlite.value)
    result = CliRunner().invoke(app, ["info", "--url", f"sqlstore://?{query}"])
    assert result.exit_code == 1 and result.output == f"error: {expected.value}\n"
    with pytest.raises(ConfigurationError, match=r"do not take generator \(an option of from_url"):
        create_engine("sqlstore://?generator=x")  # as create_engine("sqlite:///...?generator=x")


async def test_the_settings_of_a_sqlstore_url_are_applied(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The settings of ``sqlstore://``'s query apply to the embedded file, and to the
    URL of the environment variable (winning over its own), checked as that URL's."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    monkeypatch.delenv(DATABASE_URL_ENV, raising=False)
    url = "sqlstore://?pool_size=3&sqlite_busy_timeout=7&language=german&auto_migrate=true"
    async with SqlMemoryService.from_url(url) as memory:
        await memory.search_memory(app_name="a", user_id="u", query="x")
        engine = memory.store.engine
        assert engine.pool.size() == 3  # type: ignore[attr-defined]
        async with engine.connect() as conn:
            assert (await conn.execute(text("PRAGMA busy_timeout"))).scalar() == 7000
        assert memory.language == "german"
    assert resolve_url(url).embedded
    monkeypatch.setenv(DATABASE_URL_ENV, "postgresql://u@h/db?pool_size=2&language=german")
    target = resolve_url("sqlstore://?pool_size=9&sslmode=require")
    assert dict(target.url.query) == {"pool_size": "9", "ssl": "require"}
    assert target.language == "german" and not target.embedded
    with pytest.raises(ConfigurationError, match=r"sqlite_busy_timeout \(a setting of SQLite"):
        resolve_url("sqlstore://?sqlite_busy_timeout=3")


def test_sqlite_uri_parameters_are_answered_with_the_form_that_works(tmp_path: Path) -> None:
    """``?mode=ro`` was answered "did you mean `uri=true&mode`?", and
    ``sqlite:///x.db?uri=true&mode=ro`` made a file named ``x.db?mode=ro``: SQLite
    reads a path as a URI only after ``file:``. The answer now gives the form that
    works, a path without ``file:`` under ``uri=true`` is refused, and that form
    opens the file itself (read-only here), in code and on the command line."""
    with pytest.raises(ConfigurationError) as raised:
        resolve_url("sqlite:///x.db?mode=ro")
    assert (
        "do not take mode (SQLite's URI parameters need uri=true and a file: path:"
        " sqlite:///file:x.db?uri=true&mode=ro); they take"
    ) in str(raised.value)
    path = tmp_path / "x.db"
    with pytest.raises(ConfigurationError) as raised:
        SqlSessionService.from_url(f"sqlite:///{path}?uri=true&mode=ro")
    assert str(raised.value).endswith(
        "with uri=true, SQLite reads the path as a URI only when it starts with file: (any"
        f" other is a file name, query and all): write sqlite:///file:{path}?uri=true&mode=ro"
    )
    assert CliRunner().invoke(app, ["migrate", "--url", f"sqlite:///{path}"]).exit_code == 0
    read_only = f"sqlite:///file:{path}?uri=true&mode=ro"

    async def use() -> None:
        async with SqlSessionService.from_url(read_only) as service:
            assert (await service.list_sessions(app_name="a")).sessions == []
            with pytest.raises(DatabaseUnavailableError, match="readonly database"):
                await service.create_session(app_name="a", user_id="u")

    run_sync(use())
    listed = CliRunner().invoke(app, ["sessions", "list", "--app", "a", "--url", read_only])
    assert listed.exit_code == 0 and "0 session(s)" in listed.output, listed.output
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(("-wal", "-shm"))) == [
        "x.db"
    ]


@pytest.mark.parametrize("url", ["sqlite:///x.db", "postgresql://u@h/db", "mysql://u@h/db"])
def test_model_in_a_url_is_answered_with_embedder_or_generator(url: str) -> None:
    """``?model=`` was answered "did you mean `sslmode`?" on PostgreSQL."""
    with pytest.raises(ConfigurationError) as raised:
        resolve_url(f"{url}?model=x")
    assert (
        "do not take model (did you mean `embedder` (hybrid search) or `generator`"
        " (memory generation)?); they take"
    ) in str(raised.value)
