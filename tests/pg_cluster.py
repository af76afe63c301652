"""Throwaway PostgreSQL servers for tests that must stop, restart or reconfigure one.

A test never touches a server it did not start: fault tests get a cluster of their own,
made with ``initdb`` in a temporary folder and run by ``pg_ctl`` on a free port of
127.0.0.1, removed at the end. As root (CI), the server runs as the ``postgres`` user,
since PostgreSQL refuses to run as root.

Also a command, to run any command against a fresh (optionally password-protected)
server::

    python -m tests.pg_cluster [--password SECRET] -- pytest -m postgres

runs ``pytest -m postgres`` with ``ADK_SQLSTORE_TEST_POSTGRES_URL`` set to the new
server's admin URL, then removes the server and exits with the command's status.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Self
from urllib.parse import quote, unquote, urlsplit, urlunsplit

__all__ = [
    "ClusterUnavailable",
    "Pgbouncer",
    "ThrowawayCluster",
    "pgvector_binaries",
    "server_binaries",
]


class ClusterUnavailable(RuntimeError):
    """This machine cannot start a PostgreSQL server of its own (the reason is the
    message)."""


def server_binaries() -> Path:
    """The folder holding ``initdb`` and ``pg_ctl`` (the newest installed version).

    Raises:
        ClusterUnavailable: no PostgreSQL server binaries are installed.
    """
    candidates = []
    found = shutil.which("initdb")
    if found:
        candidates.append(Path(found).resolve().parent)
    for installed in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        candidates.append(Path(installed))
    for folder in candidates:
        if (folder / "initdb").is_file() and (folder / "pg_ctl").is_file():
            return folder
    raise ClusterUnavailable(
        "no PostgreSQL server binaries (initdb, pg_ctl) on this machine: install the"
        " PostgreSQL server package (Debian: apt install postgresql) to run this test"
    )


def pgvector_binaries() -> Path:
    """The folder of ``initdb`` and ``pg_ctl`` of a PostgreSQL with pgvector:
    ``$ADK_SQLSTORE_TEST_PGVECTOR_BIN``, else the one the PyPI package ``pgserver``
    bundles (PostgreSQL 16, pgvector 0.6.2; only its files are used, not its Python
    API).

    Raises:
        ClusterUnavailable: pgserver is not installed (it comes with the test extra).
    """
    import importlib.util

    given = os.environ.get("ADK_SQLSTORE_TEST_PGVECTOR_BIN")
    spec = importlib.util.find_spec("pgserver")
    if given:
        folder = Path(given)
    elif spec is None or spec.origin is None:
        raise ClusterUnavailable(
            "no PostgreSQL with pgvector here: the PyPI package pgserver bundles one"
            ' (pip install -e ".[test]"; it has no wheels for Python 3.13 and later, where'
            " ADK_SQLSTORE_TEST_PGVECTOR_BIN may name the bin folder of another"
            " environment's pgserver/pginstall)"
        )
    else:
        folder = Path(spec.origin).parent / "pginstall" / "bin"
    if not (folder / "initdb").is_file():
        raise ClusterUnavailable(f"pgserver has no server binaries at {folder}")
    return folder


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ThrowawayCluster:
    """A PostgreSQL cluster in a temporary folder, on a free port of 127.0.0.1.

    Use as a context manager (the cluster is stopped and its folder removed on exit)
    or call :meth:`start` and :meth:`remove`.

    Args:
        password: the superuser ``postgres`` needs this password over TCP
            (scram-sha-256); ``None``: trust, as the machine's own server.
        settings: more server settings (``-c name=value``).
        binaries: the folder of the server's programs (default: the newest installed
            PostgreSQL's, :func:`server_binaries`).
    """

    def __init__(
        self,
        *,
        password: str | None = None,
        settings: dict[str, str] | None = None,
        binaries: Path | None = None,
    ) -> None:
        self.bin = binaries if binaries is not None else server_binaries()
        self.password = password
        self.settings = dict(settings or {})
        self.port = 0
        self.folder = Path(tempfile.mkdtemp(prefix="adk-sqlstore-pg-"))
        self.data = self.folder / "data"
        self._run_as: list[str] = []
        if os.geteuid() == 0:
            try:
                owner = pwd.getpwnam("postgres")
            except KeyError:
                self.remove()
                raise ClusterUnavailable(
                    "running as root, and there is no 'postgres' user to run a server as"
                ) from None
            runuser = shutil.which("runuser")
            if runuser is None:
                self.remove()
                raise ClusterUnavailable("running as root without runuser to drop to 'postgres'")
            os.chown(self.folder, owner.pw_uid, owner.pw_gid)
            self._run_as = [runuser, "-u", "postgres", "--"]
            if binaries is not None and not self._runnable(binaries / "initdb"):
                # e.g. pgserver's, in a venv under a folder only root may enter (a
                # clone in mktemp -d, or under /root): a copy the server's user can run
                # (with the wheel's shared libraries, found relative to the programs)
                install, package = binaries.parent, binaries.parent.parent
                site = self.folder / "site"
                shutil.copytree(install, site / package.name / install.name, symlinks=True)
                for libs in package.parent.glob(f"{package.name}*.libs"):
                    shutil.copytree(libs, site / libs.name, symlinks=True)
                self.bin = site / package.name / install.name / binaries.name

    def _runnable(self, program: Path) -> bool:
        """Whether the server's user may run ``program``."""
        check = subprocess.run([*self._run_as, "test", "-x", str(program)], check=False)
        return check.returncode == 0

    # -- life cycle -------------------------------------------------------------------

    def _run(self, *args: str, check: bool = True) -> None:
        # Output goes to a file, not a pipe: a server started by pg_ctl inherits it, and
        # a pipe would stay open (and this call wait) for as long as the server runs.
        with tempfile.TemporaryFile() as out:
            code = subprocess.run(
                [*self._run_as, *args],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=120,
                check=False,
            ).returncode
            out.seek(0)
            said = out.read().decode(errors="replace").strip()
        if check and code != 0:
            log = self.folder / "server.log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(f"{' '.join(args[:2])} failed ({code}): {said}\n{tail}")

    def _pg_ctl(self, *args: str, check: bool = True) -> None:
        log = str(self.folder / "server.log")
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", log, *args, check=check)

    def start(self) -> Self:
        """initdb (once) and start the server; returns when it accepts connections."""
        if not self.data.exists():
            args = [str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres", "-E", "UTF8"]
            args += ["--locale=C", "--no-sync"]
            if self.password is not None:
                pwfile = self.folder / "pwfile"
                pwfile.write_text(self.password + "\n")
                if self._run_as:
                    owner = pwd.getpwnam("postgres")
                    os.chown(pwfile, owner.pw_uid, owner.pw_gid)
                args += [f"--pwfile={pwfile}", "--auth-host=scram-sha-256", "--auth-local=trust"]
            else:
                args += ["--auth=trust"]
            self._run(*args)
            self.port = _free_port()
        options = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories="
            f"{self.folder} -c fsync=off -c full_page_writes=off -c max_connections=200"
        )
        # pg_ctl runs the server through a shell: values are quoted for it
        options += "".join(f" -c {name}='{value}'" for name, value in self.settings.items())
        self._pg_ctl("-o", options, "-w", "-t", "60", "start")
        return self

    def standby(self, **settings: str) -> ThrowawayCluster:
        """A streaming-replication standby of this running server, started: a base
        backup (``pg_basebackup -R``) into a folder of its own, on a port of its own.
        The caller removes it."""
        other = ThrowawayCluster(settings=settings)
        try:
            other._run(
                str(self.bin / "pg_basebackup"),
                *("-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres"),
                *("-D", str(other.data), "-R", "-X", "stream", "--no-sync"),
            )
            other.port = _free_port()
            return other.start()
        except BaseException:
            other.remove()
            raise

    def _pids(self) -> list[int]:
        """The server's processes: the postmaster and its children."""
        pid = int((self.data / "postmaster.pid").read_text().split()[0])
        children = subprocess.run(
            ["pgrep", "-P", str(pid)], capture_output=True, text=True, check=False
        ).stdout.split()
        return [pid, *map(int, children)]

    def freeze(self) -> None:
        """Stop every process of the server (SIGSTOP): it keeps its connections and
        accepts new ones, but answers nothing, as a hung or cut-off server."""
        for pid in self._pids():
            os.kill(pid, signal.SIGSTOP)

    def thaw(self) -> None:
        """Let a frozen server run again (SIGCONT)."""
        for pid in self._pids():
            os.kill(pid, signal.SIGCONT)

    def promote(self) -> None:
        """Promote this standby to a primary; returns when it accepts writes."""
        self._pg_ctl("-w", "-t", "60", "promote")

    def restart(self) -> None:
        """Restart the server (fast shutdown: open connections are closed); returns
        when it accepts connections again."""
        self._pg_ctl("-m", "fast", "-w", "-t", "60", "restart")

    def restart_command(self) -> list[str]:
        """The command line of :meth:`restart`, for another process to run."""
        log = str(self.folder / "server.log")
        pg_ctl = [str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", log]
        return [*self._run_as, *pg_ctl, "-m", "fast", "-w", "-t", "60", "restart"]

    def stop(self) -> None:
        """Stop the server at once (its folder stays: :meth:`start` starts it again)."""
        if (self.data / "postmaster.pid").exists():
            self._pg_ctl("-m", "immediate", "-w", "stop", check=False)

    def remove(self) -> None:
        """Stop the server and delete its folder."""
        self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)

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

    # -- addresses ------------------------------------------------------------------

    def url(self, database: str = "postgres") -> str:
        """The superuser's URL of ``database`` on this server (password included)."""
        secret = "" if self.password is None else ":" + quote(self.password, safe="")
        return f"postgresql://postgres{secret}@127.0.0.1:{self.port}/{database}"


class Pgbouncer:
    """PgBouncer in transaction mode on a free port of 127.0.0.1, in front of the
    PostgreSQL server of ``server_url`` (its user and password are those of the URL).
    Its folder (config, log, pid) is temporary; :meth:`remove` stops it.

    Raises:
        ClusterUnavailable: the ``pgbouncer`` program is not installed (Debian: apt
            install pgbouncer).
    """

    def __init__(self, server_url: str, *, pool_size: int = 20) -> None:
        program = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
        if not Path(program).is_file():
            raise ClusterUnavailable(
                "pgbouncer is not installed: install it (Debian: apt install pgbouncer) to"
                " run the tests behind a pooler in transaction mode"
            )
        server = urlsplit(server_url)
        self.user = unquote(server.username or "postgres")
        self.password = unquote(server.password) if server.password else None
        self.folder = Path(tempfile.mkdtemp(prefix="adk-sqlstore-pgbouncer-"))
        self.port = _free_port()
        self.config = self.folder / "pgbouncer.ini"
        auth = "scram-sha-256" if self.password is not None else "trust"
        secret = (self.password or "").replace('"', '""')
        (self.folder / "users.txt").write_text(f'"{self.user}" "{secret}"\n')
        self.config.write_text(
            "[databases]\n"
            f"* = host={server.hostname or '127.0.0.1'} port={server.port or 5432}\n"
            "[pgbouncer]\n"
            f"listen_addr = 127.0.0.1\nlisten_port = {self.port}\nunix_socket_dir =\n"
            f"auth_type = {auth}\nauth_file = {self.folder / 'users.txt'}\n"
            "pool_mode = transaction\n"
            f"default_pool_size = {pool_size}\nmax_client_conn = 2000\n"
            f"logfile = {self.folder / 'pgbouncer.log'}\n"
            f"pidfile = {self.folder / 'pgbouncer.pid'}\n"
        )
        self._run_as: list[str] = []
        if os.geteuid() == 0:  # pgbouncer refuses to run as root
            owner = pwd.getpwnam("postgres")
            for path in (self.folder, *self.folder.iterdir()):
                os.chown(path, owner.pw_uid, owner.pw_gid)
            self._run_as = ["runuser", "-u", "postgres", "--"]
        self.program = program

    def start(self) -> Self:
        done = subprocess.run(
            [*self._run_as, self.program, "-d", str(self.config)],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"pgbouncer did not start: {done.stderr}{self.log()}")
        deadline = time.monotonic() + 30
        while True:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", self.port)) == 0:
                    return self
            if time.monotonic() > deadline:
                raise RuntimeError(f"pgbouncer did not listen on {self.port}: {self.log()}")
            time.sleep(0.05)

    def log(self) -> str:
        path = self.folder / "pgbouncer.log"
        return path.read_text(errors="replace")[-2000:] if path.exists() else ""

    def url(self, database_url: str) -> str:
        """``database_url`` (a database on the server) reached through this pooler, with
        ``pgbouncer=true`` for adk-sqlstore."""
        parts = urlsplit(database_url)
        userinfo = parts.netloc.rpartition("@")[0]
        netloc = f"{userinfo}@127.0.0.1:{self.port}" if userinfo else f"127.0.0.1:{self.port}"
        query = "&".join(q for q in (parts.query, "pgbouncer=true") if q)
        return urlunsplit((parts.scheme, netloc, parts.path, query, ""))

    def remove(self) -> None:
        pidfile = self.folder / "pgbouncer.pid"
        if pidfile.exists():
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pidfile.read_text().strip()), signal.SIGINT)
            deadline = time.monotonic() + 10
            while pidfile.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
        shutil.rmtree(self.folder, ignore_errors=True)

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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.pg_cluster",
        description="Run a command against a throwaway PostgreSQL server"
        " ($ADK_SQLSTORE_TEST_POSTGRES_URL is its admin URL).",
    )
    parser.add_argument("--password", help="require this password for TCP connections")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- command and arguments")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given")
    with ThrowawayCluster(password=args.password) as cluster:
        env = {**os.environ, "ADK_SQLSTORE_TEST_POSTGRES_URL": cluster.url()}
        shown = "postgres:***@" if args.password is not None else "postgres@"
        print(f"throwaway PostgreSQL server at postgresql://{shown}127.0.0.1:{cluster.port}")
        sys.stdout.flush()
        return subprocess.run(command, env=env, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
