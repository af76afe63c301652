"""Configuration: URLs, the embedded default, injected engines, SQLite settings, errors."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from sqlalchemy import text

from adk_sqlstore import (
    DatabaseUnavailableError,
    SchemaNotMigratedError,
    SqlSessionService,
)
from adk_sqlstore.engine import (
    DATABASE_URL_ENV,
    create_engine,
    default_sqlite_path,
    normalize_url,
    resolve_url,
)
from adk_sqlstore.migration import HEAD_REVISION, current_revision


def test_plain_urls_are_mapped_to_asyncio_drivers() -> None:
    assert normalize_url("postgresql://u@h/db").drivername == "postgresql+asyncpg"
    assert normalize_url("postgres://u@h/db").drivername == "postgresql+asyncpg"
    assert normalize_url("postgresql+psycopg2://u@h/db").drivername == "postgresql+asyncpg"
    assert normalize_url("postgresql+asyncpg://u@h/db").drivername == "postgresql+asyncpg"
    assert normalize_url("sqlite:///x.db").drivername == "sqlite+aiosqlite"
    assert normalize_url("sqlite:////abs/x.db").database == "/abs/x.db"


def test_unsupported_or_invalid_urls_say_so_without_the_password() -> None:
    with pytest.raises(ValueError, match="unsupported database 'mysql'") as info:
        normalize_url("mysql://root:hunter2@localhost/db")
    assert "hunter2" not in str(info.value)
    with pytest.raises(ValueError, match="invalid database URL") as info:
        normalize_url("not a url :// hunter2")
    assert "hunter2" not in str(info.value)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("/var/lib/app.db", "has no scheme"),
        ("sqlite://relative.db", "three slashes"),
        ("postgresql://postgres@127.0.0.1:99999/x", "no valid port"),
        ("postgresql://u:hunter2@h/db?application_name=x", "does not take application_name"),
        ("postgresql://u:hunter2@h/db?connect_timeout=5", "does not take connect_timeout"),
    ],
)
def test_urls_the_drivers_would_choke_on_fail_clearly_up_front(url: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as raised:
        normalize_url(url)
    assert "hunter2" not in str(raised.value)


def test_libpq_sslmode_is_passed_to_asyncpg_as_ssl() -> None:
    url = normalize_url("postgresql://u@h/db?sslmode=require")
    assert dict(url.query) == {"ssl": "require"}


@pytest.mark.postgres
async def test_sslmode_disable_connects(postgres_url: str) -> None:
    async with SqlSessionService.from_url(
        postgres_url + "?sslmode=disable", auto_migrate=True
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
    assert service.engine.pool.checkedin() >= 1
    await service.close()
    assert service.engine.pool.checkedin() == 0


@pytest.mark.sqlite
async def test_sqlite_runs_with_wal_busy_timeout_and_foreign_keys(sqlite_url: str) -> None:
    async with SqlSessionService.from_url(sqlite_url) as service:
        await service.list_sessions(app_name="app")
        async with service.engine.connect() as conn:
            assert (await conn.execute(text("PRAGMA journal_mode"))).scalar() == "wal"
            assert (await conn.execute(text("PRAGMA foreign_keys"))).scalar() == 1
            assert (await conn.execute(text("PRAGMA busy_timeout"))).scalar() == 30000


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://bob:hunter2secret@127.0.0.1:1/db",  # nothing listens there
        "postgresql://postgres:hunter2secret@127.0.0.1:5432/adk_sqlstore_no_such_db",
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
