"""Throwaway Citus clusters (distributed PostgreSQL) for the tests that run the store
on several nodes: a coordinator and workers, each a :class:`ThrowawayCluster` of its own
(``initdb`` in a temporary folder, a free port of 127.0.0.1) with
``shared_preload_libraries = 'citus'``. Never the machine's own server.

The Citus extension must be installed in this machine's PostgreSQL
(``../shared/citus/install.sh``, which ``.ci/run`` runs). Citus 13 does not propagate
``CREATE DATABASE``: :meth:`CitusCluster.create_database` makes the database on every
node, creates the extension in each and adds the workers to the coordinator's copy.

Also a command, to run any command against a fresh cluster::

    python -m tests.citus_cluster [--workers 2] -- pytest -m postgres ...

runs it with ``ADK_SQLSTORE_TEST_POSTGRES_URL`` set to the coordinator's admin URL and
``ADK_SQLSTORE_TEST_CITUS_WORKERS`` to the workers' (comma-separated), which the test
fixtures read to make every throwaway database a Citus database.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
from types import TracebackType
from typing import Self

import asyncpg

from tests.pg_cluster import ClusterUnavailable, ThrowawayCluster, server_binaries

__all__ = ["CitusCluster", "citus_installed", "create_citus_database", "drop_citus_database"]

SETTINGS = {
    "shared_preload_libraries": "citus",
    "max_prepared_transactions": "200",
    "max_connections": "300",
    "citus.max_shared_pool_size": "200",
    # shard moves (citus_rebalance_start) copy with logical replication, without
    # blocking writes
    "wal_level": "logical",
}


def citus_installed() -> bool:
    """Whether this machine's PostgreSQL has the Citus extension's files."""
    try:
        binaries = server_binaries()
    except ClusterUnavailable:
        return False
    pg_config = binaries / "pg_config"
    if not pg_config.is_file():
        return False
    libdir = subprocess.run(
        [str(pg_config), "--pkglibdir"], capture_output=True, text=True, check=False
    ).stdout.strip()
    return bool(libdir) and os.path.isfile(os.path.join(libdir, "citus.so"))


async def _execute(url: str, *statements: str) -> None:
    conn = await asyncpg.connect(url)
    try:
        for statement in statements:
            await conn.execute(statement)
    finally:
        await conn.close()


def _on(url: str, database: str) -> str:
    return url.rsplit("/", 1)[0] + "/" + database


async def create_citus_database(coordinator: str, workers: list[str], name: str) -> None:
    """Database ``name`` on the coordinator (admin URL ``coordinator``) and every worker,
    with the Citus extension in each, and the workers added to the coordinator's copy."""
    for admin in (coordinator, *workers):
        await _execute(admin, f'CREATE DATABASE "{name}"')
        await _execute(_on(admin, name), "CREATE EXTENSION citus")
    host, port = _host_port(coordinator)
    await _execute(_on(coordinator, name), f"SELECT citus_set_coordinator_host('{host}', {port})")
    for worker in workers:
        host, port = _host_port(worker)
        await add_node(_on(coordinator, name), host, port)


async def add_node(coordinator: str, host: str, port: int, attempts: int = 8) -> None:
    """``citus_add_node`` on the coordinator's database at URL ``coordinator``, tried
    again when it met another database's (another test process's) at the worker.

    Adding a node syncs the cluster-wide roles to it (``worker_create_or_alter_role``),
    so two databases added to one worker at once may fail with "tuple concurrently
    updated" (seen as "failure on connection marked as essential"); the failed one
    rolled back whole and is simply done again.
    """
    for attempt in range(attempts):
        try:
            await _execute(coordinator, f"SELECT citus_add_node('{host}', {port})")
            return
        except asyncpg.InternalServerError as error:
            if "marked as essential" not in str(error) or attempt == attempts - 1:
                raise
            await asyncio.sleep(0.05 * 2**attempt)


async def drop_citus_database(coordinator: str, workers: list[str], name: str) -> None:
    """Drop database ``name`` on every node."""
    for admin in (coordinator, *workers):
        await _execute(admin, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _host_port(url: str) -> tuple[str, int]:
    netloc = url.split("//", 1)[1].split("/", 1)[0].rpartition("@")[2]
    host, _, port = netloc.partition(":")
    return host, int(port or 5432)


class CitusCluster:
    """A coordinator and ``workers`` workers, started on free ports; removed on exit.

    Raises:
        ClusterUnavailable: no PostgreSQL server programs, or no Citus extension in
            them (run ``../shared/citus/install.sh`` as root).
    """

    def __init__(self, workers: int = 2) -> None:
        if not citus_installed():
            raise ClusterUnavailable(
                "the Citus extension is not installed in this machine's PostgreSQL: run"
                " ../shared/citus/install.sh as root (.ci/run does)"
            )
        self.coordinator = ThrowawayCluster(settings=SETTINGS)
        self.workers = [ThrowawayCluster(settings=SETTINGS) for _ in range(workers)]
        self.databases: list[str] = []

    @property
    def nodes(self) -> list[ThrowawayCluster]:
        return [self.coordinator, *self.workers]

    def start(self) -> Self:
        for node in self.nodes:
            node.start()
        return self

    def remove(self) -> None:
        for node in self.nodes:
            node.remove()

    def __enter__(self) -> Self:
        try:
            return self.start()
        except BaseException:
            self.remove()
            raise

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.remove()

    def worker_urls(self, database: str = "postgres") -> list[str]:
        return [worker.url(database) for worker in self.workers]

    def create_database(self, name: str) -> str:
        """A Citus database ``name`` on every node; returns the coordinator's URL of it."""
        asyncio.run(create_citus_database(self.coordinator.url(), self.worker_urls(), name))
        self.databases.append(name)
        return self.coordinator.url(name)

    def add_worker(self) -> ThrowawayCluster:
        """Start one more worker, with every database of :meth:`create_database`, and
        add it to each (it holds no shards until a rebalance moves some there)."""
        worker = ThrowawayCluster(settings=SETTINGS).start()
        self.workers.append(worker)

        async def join() -> None:
            for name in self.databases:
                await _execute(worker.url(), f'CREATE DATABASE "{name}"')
                await _execute(worker.url(name), "CREATE EXTENSION citus")
                await add_node(self.coordinator.url(name), "127.0.0.1", worker.port)

        asyncio.run(join())
        return worker


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.citus_cluster",
        description="Run a command against a throwaway Citus cluster"
        " ($ADK_SQLSTORE_TEST_POSTGRES_URL: the coordinator's admin URL;"
        " $ADK_SQLSTORE_TEST_CITUS_WORKERS: the workers').",
    )
    parser.add_argument("--workers", type=int, default=2, help="how many workers (default 2)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- command and arguments")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given")
    with CitusCluster(workers=args.workers) as cluster:
        env = {
            **os.environ,
            "ADK_SQLSTORE_TEST_POSTGRES_URL": cluster.coordinator.url(),
            "ADK_SQLSTORE_TEST_CITUS_WORKERS": ",".join(cluster.worker_urls()),
        }
        ports = ", ".join(str(node.port) for node in cluster.nodes)
        print(f"throwaway Citus cluster: coordinator and workers on 127.0.0.1 ports {ports}")
        sys.stdout.flush()
        return subprocess.run(command, env=env, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
