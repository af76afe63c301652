"""Fixtures: one database fixture parametrised over an SQLite file, PostgreSQL and
MySQL/MariaDB.

PostgreSQL: each test process (pytest-xdist runs two or more) creates its own throwaway
database (dropped at the end) through the admin URL ``$ADK_SQLSTORE_TEST_POSTGRES_URL``
(default ``postgresql://postgres@127.0.0.1:5432/postgres``; any server, a
password-protected one included), migrates it once, and empties its tables before each
test. Without a server the PostgreSQL tests skip, saying how to start one; under
``CI=true`` they fail instead, so CI never passes without them. The suite never stops,
restarts or reconfigures that server: tests that need to do so start their own
(:mod:`tests.pg_cluster`), and the run fails if the server's
``pg_postmaster_start_time()`` changed between its start and its end.

MySQL and MariaDB: the same, through ``$ADK_SQLSTORE_TEST_MYSQL_URL`` (default
``mysql://root@127.0.0.1:3306/test``, a user allowed to create databases): a throwaway
database per test process, migrated once, emptied before each test; without a server
the MySQL tests skip, and under ``CI=true`` they fail.

SQLite: each test gets its own file, copied from a migrated template.

Tests marked ``soak`` (kill -9 loops, server restarts) run in ``make test-all`` (CI),
not in ``make test``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import shutil
import subprocess
import uuid
from collections.abc import AsyncIterator, Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import asyncpg
import pytest
from sqlalchemy.engine import make_url

from adk_sqlstore import SqlSessionService
from adk_sqlstore.engine import create_engine
from adk_sqlstore.migration import upgrade
from adk_sqlstore.schema import ALEMBIC_VERSION_TABLE, metadata

from .helpers import LAYERS, Layer, open_layer
from .pg_cluster import ClusterUnavailable, Pgbouncer, ThrowawayCluster, pgvector_binaries

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
PG_ADMIN_URL = os.environ.get(
    "ADK_SQLSTORE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
MYSQL_ADMIN_URL = os.environ.get("ADK_SQLSTORE_TEST_MYSQL_URL", "mysql://root@127.0.0.1:3306/test")
CITUS_WORKERS = [
    url for url in os.environ.get("ADK_SQLSTORE_TEST_CITUS_WORKERS", "").split(",") if url
]
"""The workers' admin URLs when the PostgreSQL test server is a Citus coordinator
(``python -m tests.citus_cluster -- pytest ...``): every throwaway database is then
made on every node and distributed by ``adk-sqlstore migrate``'s code."""
VIA_PGBOUNCER = os.environ.get("ADK_SQLSTORE_TEST_PGBOUNCER", "").lower() in ("1", "true", "yes")
_THOROUGH = os.environ.get("ADK_SQLSTORE_TEST_THOROUGH", "").lower()
THOROUGH = _THOROUGH in ("1", "true", "yes") if _THOROUGH else IN_CI
"""Whether the property and race tests run at full size: in CI (``CI=true``) unless
``ADK_SQLSTORE_TEST_THOROUGH=0`` (CI's runs on Citus, on the lowest versions, on the
newest Python, on the password-protected server and through PgBouncer: the full size
runs once, in ``make test-all``'s main run), or with ``ADK_SQLSTORE_TEST_THOROUGH=1``."""


def examples(count: int) -> int:
    """Hypothesis examples for a property test: ``count`` where :data:`THOROUGH`, else
    a third of it (at least 5), as in ``make test``, which stays within its few minutes
    (hypothesis's own advice: more examples in CI)."""
    return count if THOROUGH else max(5, count // 3)


T = TypeVar("T")

BACKENDS = [
    pytest.param("sqlite", marks=pytest.mark.sqlite),
    pytest.param("postgres", marks=pytest.mark.postgres),
    pytest.param("mysql", marks=pytest.mark.mysql),
]


def shared_data(*parts: str) -> Path:
    """A path under ../shared/data, skipping the test where the folder is absent."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        if IN_CI:
            pytest.fail(f"{path} is missing; CI runs next to ../shared/data")
        pytest.skip(
            f"{path} is absent: these tests read the evaluation data in ../shared/data,"
            " which a clone of this repository does not include"
        )
    return path


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion on a private loop in another thread.

    Usable from sync fixtures and helpers whatever loop pytest-asyncio has set up.
    """
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


def _asyncpg_dsn(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def pg_url(**parts: Any) -> str:
    """The test server's admin URL with some parts replaced (``database``, ``username``,
    ``password``, ...), password kept: for a database that does not exist, a user
    that does not exist, a wrong password, all on the server the suite was given."""
    return make_url(PG_ADMIN_URL).set(**parts).render_as_string(hide_password=False)


def with_query(url: str, **params: str) -> str:
    """``url`` with query parameters added (after those it has)."""
    added = "&".join(f"{k}={v}" for k, v in params.items())
    return f"{url}{'&' if '?' in url else '?'}{added}"


def pg_address() -> str:
    """``host:port`` of the test server (tests that build URLs by hand use it)."""
    url = make_url(PG_ADMIN_URL)
    return f"{url.host or '127.0.0.1'}:{url.port or 5432}"


async def _admin(sql: str, admin_url: str = PG_ADMIN_URL) -> None:
    conn = await asyncpg.connect(_asyncpg_dsn(admin_url), timeout=5)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


def _unavailable(server: str, admin_url: str, exc: BaseException, start: str) -> None:
    """Skip (under ``CI=true``, fail) a test that needs ``server`` at ``admin_url``,
    saying how to ``start`` one."""
    message = (
        f"{server} is not reachable at {make_url(admin_url).render_as_string()}"
        f" ({type(exc).__name__}: {exc}). Start one with {start}."
    )
    if IN_CI:
        pytest.fail("CI=true and " + message)
    pytest.skip(message)


def _postgres_unavailable(exc: BaseException) -> None:
    _unavailable(
        "PostgreSQL",
        PG_ADMIN_URL,
        exc,
        "`docker compose up -d postgres`"
        " (then set ADK_SQLSTORE_TEST_POSTGRES_URL=postgresql://adk:adk@127.0.0.1:5432/adk)"
        " or `pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start`",
    )


@pytest.fixture(scope="session")
def postgres_server() -> str:
    """The admin URL of a reachable PostgreSQL server (or skip/fail)."""
    try:
        run_sync(_admin("SELECT 1"))
    except (OSError, asyncpg.PostgresError, TimeoutError) as exc:
        _postgres_unavailable(exc)
    return PG_ADMIN_URL


class _Factory:
    """Creates throwaway databases on a test server and drops them at the end; each
    server's factory says how to run its admin statements and quote a name."""

    quote = '"'
    drop_options = ""

    def __init__(self, admin_url: str) -> None:
        self.admin_url = admin_url
        self.created: list[str] = []

    def admin(self, statement: str) -> None:
        raise NotImplementedError

    def create(self, *, migrate: bool = True) -> str:
        name = f"adk_sqlstore_test_{uuid.uuid4().hex[:12]}"
        self.admin(f"CREATE DATABASE {self.quote}{name}{self.quote}")
        self.created.append(name)
        url = make_url(self.admin_url).set(database=name).render_as_string(hide_password=False)
        if migrate:
            run_sync(_migrate(url))
        return url

    def drop_all(self) -> None:
        for name in self.created:
            quoted = f"{self.quote}{name}{self.quote}"
            self.admin(f"DROP DATABASE IF EXISTS {quoted}{self.drop_options}")


class PostgresFactory(_Factory):
    """Throwaway databases on the PostgreSQL test server (on a Citus cluster: on each
    node, workers added, so that the migration distributes the tables)."""

    drop_options = " WITH (FORCE)"

    def admin(self, statement: str) -> None:
        if CITUS_WORKERS and statement.startswith(("CREATE DATABASE", "DROP DATABASE")):
            from .citus_cluster import create_citus_database, drop_citus_database

            name = statement.split('"')[1]
            if statement.startswith("CREATE"):
                run_sync(create_citus_database(self.admin_url, CITUS_WORKERS, name))
            else:
                run_sync(drop_citus_database(self.admin_url, CITUS_WORKERS, name))
            return
        run_sync(_admin(statement, self.admin_url))

    def drop_all(self) -> None:
        """Drop every database made, eight at a time (one by one, the tens a test process
        makes took seconds at the end of the run); on a Citus cluster one by one."""
        if CITUS_WORKERS:
            super().drop_all()
            return
        statements = [f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)' for name in self.created]

        async def drop() -> None:
            at_once = asyncio.Semaphore(8)  # of the server's connections (100 by default)

            async def one(statement: str) -> None:
                async with at_once:
                    await _admin(statement, self.admin_url)

            await asyncio.gather(*(one(statement) for statement in statements))

        run_sync(drop())


async def _migrate(url: str) -> None:
    engine = create_engine(url)
    try:
        await upgrade(engine)
    finally:
        await engine.dispose()


@pytest.fixture(scope="session")
def postgres_factory(postgres_server: str) -> Iterator[PostgresFactory]:
    factory = PostgresFactory(postgres_server)
    yield factory
    factory.drop_all()


@pytest.fixture(scope="session")
def postgres_test_db(postgres_factory: PostgresFactory) -> str:
    """The run's migrated PostgreSQL database (tables emptied per test by ``db_url``),
    committing without waiting for the WAL flush (``synchronous_commit = off`` on this
    throwaway database only: the tests that kill a server start their own)."""
    url = postgres_factory.create()
    name = make_url(url).database
    postgres_factory.admin(f'ALTER DATABASE "{name}" SET synchronous_commit = off')
    return url


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("template") / "template.db"
    run_sync(_migrate(f"sqlite:///{path}"))
    return path


async def _truncate(url: str) -> None:
    """Empty every table of the store: ``DELETE`` in one round trip (a few ms on the
    small tables most tests leave, where ``TRUNCATE``, which makes new files for each
    table, takes 70 ms), ``TRUNCATE`` where a test left many memories."""
    conn = await asyncpg.connect(_asyncpg_dsn(url))
    try:
        tables = [t.name for t in reversed(metadata.sorted_tables)]
        many = await conn.fetchval(
            "SELECT count(*) FROM (SELECT 1 FROM sqlstore_memories LIMIT 5001) AS m"
        )
        if many > 5000:
            await conn.execute(f"TRUNCATE {', '.join(tables)}")
        else:
            await conn.execute("".join(f"DELETE FROM {table};" for table in tables))
    finally:
        await conn.close()


@pytest.fixture
def sqlite_url(sqlite_template: Path, tmp_path: Path) -> str:
    """A migrated, empty SQLite file of this test's own."""
    path = tmp_path / "store.db"
    shutil.copyfile(sqlite_template, path)
    return f"sqlite:///{path}"


@pytest.fixture(scope="session")
def pgbouncer(postgres_server: str) -> Iterator[Pgbouncer]:
    """PgBouncer in transaction mode in front of the test server (one per test
    process), or skip (a failure under CI=true) where it is not installed."""
    try:
        bouncer = Pgbouncer(postgres_server)
    except ClusterUnavailable as exc:
        if IN_CI:
            pytest.fail(f"CI=true but {exc}")
        pytest.skip(str(exc))
    with bouncer:
        yield bouncer


@pytest.fixture(scope="session")
def postgres_store_url(request: pytest.FixtureRequest, postgres_test_db: str) -> str:
    """The URL the store is given for the run's database: direct, or through PgBouncer
    in transaction mode when ``ADK_SQLSTORE_TEST_PGBOUNCER=1`` (then every test on
    ``db_url``/``postgres_url``, the contract suite, runs behind the pooler)."""
    if not VIA_PGBOUNCER:
        return postgres_test_db
    bouncer: Pgbouncer = request.getfixturevalue("pgbouncer")
    return bouncer.url(postgres_test_db)


@pytest.fixture
def postgres_url(postgres_test_db: str, postgres_store_url: str) -> str:
    """The run's migrated PostgreSQL database, emptied for this test."""
    run_sync(_truncate(postgres_test_db))
    return postgres_store_url


@pytest.fixture
def throwaway_cluster() -> Iterator[ThrowawayCluster]:
    """A PostgreSQL server of this test's own (``initdb`` in a temporary folder, a free
    port), which the test may stop and restart; removed afterwards. Skipped where no
    PostgreSQL server binaries are installed (a failure under CI=true)."""
    try:
        cluster = ThrowawayCluster()
    except ClusterUnavailable as exc:
        if IN_CI:
            pytest.fail(f"CI=true but this machine cannot start a PostgreSQL server: {exc}")
        pytest.skip(str(exc))
    with cluster:
        yield cluster


@pytest.fixture(scope="session")
def pgvector_factory() -> Iterator[PostgresFactory]:
    """A PostgreSQL server with pgvector of this test process's own (pgserver's
    PostgreSQL 16, started on a free port, removed at the end), making throwaway
    databases; skipped where pgserver is not installed (a failure under CI=true)."""
    try:
        cluster = ThrowawayCluster(binaries=pgvector_binaries())
    except ClusterUnavailable as exc:
        if IN_CI:
            pytest.fail(f"CI=true but {exc}")
        pytest.skip(str(exc))
    with cluster:
        factory = PostgresFactory(cluster.url())
        yield factory
        factory.drop_all()


@pytest.fixture
def pgvector_url(pgvector_factory: PostgresFactory) -> str:
    """A migrated, empty database of this test's own on a server with pgvector."""
    return pgvector_factory.create()


# -- MySQL and MariaDB ----------------------------------------------------------------


async def _mysql_connect(url: str) -> Any:
    """An asyncmy connection to the database of ``url`` (none: the server's)."""
    import asyncmy

    parts = make_url(url)
    return await asyncmy.connect(
        host=parts.host or "127.0.0.1",
        port=parts.port or 3306,
        user=parts.username or "root",
        password=parts.password or "",
        database=parts.database or "",
        connect_timeout=5,
    )


async def _mysql_admin(*statements: str, admin_url: str = MYSQL_ADMIN_URL) -> None:
    conn = await _mysql_connect(admin_url)
    try:
        async with conn.cursor() as cursor:
            for statement in statements:
                await cursor.execute(statement)
        await conn.commit()
    finally:
        conn.close()


def _mysql_unavailable(exc: BaseException) -> None:
    _unavailable(
        "MySQL/MariaDB",
        MYSQL_ADMIN_URL,
        exc,
        "`docker compose up -d mysql`"
        " (then set ADK_SQLSTORE_TEST_MYSQL_URL=mysql://root:adk@127.0.0.1:3306/adk)"
        " or `start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd`",
    )


@pytest.fixture(scope="session")
def mysql_server() -> str:
    """The admin URL of a reachable MySQL or MariaDB server (or skip/fail)."""
    try:
        run_sync(_mysql_admin("SELECT 1"))
    except Exception as exc:  # asyncmy's errors, OSError, a time-out: all mean "no server"
        _mysql_unavailable(exc)
    return MYSQL_ADMIN_URL


class MysqlFactory(_Factory):
    """Throwaway databases on the MySQL test server."""

    quote = "`"

    def admin(self, statement: str) -> None:
        run_sync(_mysql_admin(statement, admin_url=self.admin_url))


@pytest.fixture(scope="session")
def mysql_factory(mysql_server: str) -> Iterator[MysqlFactory]:
    factory = MysqlFactory(mysql_server)
    yield factory
    factory.drop_all()


@pytest.fixture(scope="session")
def mysql_test_db(mysql_factory: MysqlFactory) -> str:
    """The run's migrated MySQL database (tables emptied per test by ``mysql_url``)."""
    return mysql_factory.create()


@pytest.fixture
def mysql_url(mysql_test_db: str) -> str:
    """The run's migrated MySQL database, emptied for this test."""
    run_sync(_mysql_empty(mysql_test_db))
    return mysql_test_db


async def _mysql_empty(url: str) -> None:
    """Empty every table of the store (the MySQL-only postings included): ``DELETE``
    (fast on small tables), ``TRUNCATE`` where a soak test left many memories (deleting
    them one trigger call at a time took minutes)."""
    conn = await _mysql_connect(url)
    try:
        async with conn.cursor() as cursor:
            await cursor.execute("SET FOREIGN_KEY_CHECKS = 0")
            await cursor.execute(
                "SELECT count(*) FROM (SELECT 1 FROM sqlstore_memories LIMIT 5001) AS m"
            )
            (many,) = await cursor.fetchone()
            await cursor.execute("SHOW TABLES LIKE 'sqlstore\\_%'")
            tables = [t for (t,) in await cursor.fetchall() if t != ALEMBIC_VERSION_TABLE]
            for table in tables:
                truncate = many > 5000 and table.startswith("sqlstore_memor")
                await cursor.execute(f"{'TRUNCATE' if truncate else 'DELETE FROM'} {table}")
        await conn.commit()
    finally:
        conn.close()


@pytest.fixture(params=BACKENDS)
def db_url(request: pytest.FixtureRequest) -> str:
    """A migrated, empty database: an SQLite file, the PostgreSQL test database, or the
    MySQL one."""
    return str(request.getfixturevalue(f"{request.param}_url"))


@pytest.fixture
async def service(db_url: str) -> AsyncIterator[SqlSessionService]:
    async with SqlSessionService.from_url(db_url) as svc:
        yield svc


@pytest.fixture(params=LAYERS)
async def layer(request: pytest.FixtureRequest, db_url: str) -> AsyncIterator[Layer]:
    """The contract suite's fixture: the session and memory services of one API layer
    (the core services, or the ADK classes) on one database, SQLite or PostgreSQL:
    four runs of every test that takes it (see :mod:`tests.helpers`). The ADK runs
    skip where google-adk is not installed (``make test-lowest``)."""
    if request.param == "adk":
        pytest.importorskip("google.adk", reason="the ADK layer needs google.adk (adk extra)")
    async with open_layer(request.param, db_url) as opened:
        yield opened


_MYSQL_FIXTURES = {"mysql_server", "mysql_factory", "mysql_test_db", "mysql_url"}
_POSTGRES_FIXTURES = {
    "postgres_server",
    "postgres_factory",
    "postgres_test_db",
    "postgres_url",
    "pgvector_factory",
    "pgvector_url",
}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that uses the PostgreSQL server is a ``postgres`` test, marked or not (so
    that ``-m postgres`` selects it and CI refuses to skip it); likewise ``mysql``."""
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if _POSTGRES_FIXTURES & fixtures:
            item.add_marker(pytest.mark.postgres)
        if _MYSQL_FIXTURES & fixtures:
            item.add_marker(pytest.mark.mysql)


# -- run-wide checks, in the controlling process (with pytest-xdist, reports arrive there)


def _is_controller(config: pytest.Config) -> bool:
    return not hasattr(config, "workerinput")


_skipped_postgres: list[str] = []
_skipped_mysql: list[str] = []
_figures: dict[str, list[str]] = {}
_server_start: dict[str, str | None] = {}
_server_report: list[str] = []


async def _postmaster_start_time() -> str | None:
    try:
        conn = await asyncpg.connect(_asyncpg_dsn(PG_ADMIN_URL), timeout=5)
    except (OSError, asyncpg.PostgresError, TimeoutError):
        return None
    try:
        return str(await conn.fetchval("SELECT pg_postmaster_start_time()"))
    finally:
        await conn.close()


def _untracked_files() -> set[str] | None:
    """Files in the checkout that git does not ignore and that are new or whose content
    differs from the index (None outside a git work tree): a test that writes into the
    checkout instead of its tmp_path (a new file, or a tracked one written again) shows
    here. ``git diff`` compares content, where ``ls-files --modified`` also lists a file
    only touched, or cloned in the second the index was written."""
    files: set[str] = set()
    for command in (["ls-files", "--others", "--exclude-standard"], ["diff", "--name-only"]):
        try:
            listed = subprocess.run(
                ["git", *command],
                cwd=REPO,
                capture_output=True,
                text=True,
                timeout=30,
                check=True,
            )
        except (OSError, subprocess.SubprocessError):
            return None
        files.update(listed.stdout.splitlines())
    return files


_untracked_before: dict[str, set[str] | None] = {}


def pytest_sessionstart(session: pytest.Session) -> None:
    if _is_controller(session.config):
        _server_start["before"] = run_sync(_postmaster_start_time())
        _untracked_before["files"] = _untracked_files()


def _skipped_for_want_of_adk(report: pytest.TestReport) -> bool:
    """A test skipped because an extra is not installed (make test-lowest runs with the
    test extra only: no google-adk, no httpx, no inspector), not because PostgreSQL was
    missing."""
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    extras = ("google.adk", "adk extra", "openai extra", "inspector extra")
    return any(extra in reason for extra in extras)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped and "postgres" in report.keywords and not _skipped_for_want_of_adk(report):
        _skipped_postgres.append(report.nodeid)
    if report.skipped and "mysql" in report.keywords and not _skipped_for_want_of_adk(report):
        _skipped_mysql.append(report.nodeid)
    if report.when == "teardown":
        lines = [value for name, value in report.user_properties if name == "figure"]
        if lines:
            _figures[report.nodeid] = [str(line) for line in lines]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if not _is_controller(session.config):
        return
    if IN_CI and _skipped_postgres:
        print(f"\nCI=true but {len(_skipped_postgres)} PostgreSQL test(s) were skipped:")
        for nodeid in _skipped_postgres:
            print(f"  {nodeid}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    if IN_CI and _skipped_mysql:
        print(f"\nCI=true but {len(_skipped_mysql)} MySQL test(s) were skipped:")
        for nodeid in _skipped_mysql:
            print(f"  {nodeid}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    _check_checkout_untouched(session)
    before = _server_start.get("before")
    if before is None:
        return
    after = run_sync(_postmaster_start_time())
    where = make_url(PG_ADMIN_URL).render_as_string()
    if after != before:
        _server_report.append(
            f"FAILED: the PostgreSQL server the suite was given ({where}) was restarted or"
            f" stopped during the run: pg_postmaster_start_time() was {before}, now {after}"
        )
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    else:
        _server_report.append(
            f"the PostgreSQL server the suite was given ({where}) was left alone:"
            f" pg_postmaster_start_time() {before} before and after the run"
        )


def _check_checkout_untouched(session: pytest.Session) -> None:
    before, after = _untracked_before.get("files"), _untracked_files()
    if before is None or after is None or not after - before:
        return
    print("\nthe run wrote files in the checkout (a test must write under its tmp_path):")
    for name in sorted(after - before):
        print(f"  {name}")
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


# -- figures the reliability tests report (processes, operations, faults, inputs) -------


class Figures:
    """Lines of figures a test reports; printed at the end of the run (and copied into
    docs/reliability.md). They travel as the test's user properties, so that they
    reach the terminal from pytest-xdist's worker processes too."""

    def __init__(self, node: pytest.Item) -> None:
        self.node = node
        self.totals: dict[str, int] = {}

    def add(self, line: str) -> None:
        self.node.user_properties.append(("figure", line))

    def tally(self, **counts: int) -> None:
        """Add to running totals (for a test hypothesis runs many times), reported as
        one line when the test ends."""
        for name, n in counts.items():
            self.totals[name] = self.totals.get(name, 0) + n

    def flush(self) -> None:
        if self.totals:
            self.add(", ".join(f"{name.replace('_', ' ')} {n}" for name, n in self.totals.items()))


@pytest.fixture
def figures(request: pytest.FixtureRequest) -> Iterator[Figures]:
    reported = Figures(request.node)
    yield reported
    reported.flush()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _figures:
        terminalreporter.section("reliability figures")
        for nodeid, lines in _figures.items():
            for line in lines:
                terminalreporter.write_line(f"{nodeid}: {line}")
    if _server_report:
        terminalreporter.section("the PostgreSQL server under test")
        for line in _server_report:
            terminalreporter.write_line(line)


@pytest.fixture
async def sessions(db_url: str) -> AsyncIterator[SqlSessionService]:
    """A session service on the test's database (:func:`db_url`)."""
    async with SqlSessionService.from_url(db_url) as service:
        yield service
