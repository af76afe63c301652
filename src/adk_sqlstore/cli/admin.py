"""Commands on the database: ``migrate``, ``prune``, ``forget-user``, ``import-adk``,
``services-yaml``, ``demo``."""

from __future__ import annotations

import contextlib
import logging
import math
import sys
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from importlib.metadata import version
from typing import Annotated

import typer
from sqlalchemy.engine import URL

from .. import migration
from ..engine import create_engine
from ..errors import AdkSqlStoreError
from ..failures import database_errors
from ..memory import SqlMemoryService
from ..search.analysis import analyzer
from ..sessions import PruneReport, SqlSessionService
from ..url_display import sqlite_path
from ..urls import resolve_url
from .common import (
    AppOption,
    UrlOption,
    app,
    consoles,
    database,
    error,
    progress_bar,
    run_command,
)

__all__ = ["demo", "forget_user", "info", "migrate", "prune", "services_yaml"]


@app.command()
def migrate(url: UrlOption = None) -> None:
    """Upgrade the database schema to the newest revision (idempotent).

    On PostgreSQL with the citus extension installed (a Citus coordinator, its workers
    added with citus_add_node), every table is then distributed by user_id, colocated,
    the app state made a reference table and the store's functions distributed by
    user; tables already distributed are left as they are, and those a newer migration
    adds are distributed by the migrate that adds them (docs/scaling.md). With
    ?language= in the URL, memories are then re-indexed for that search language (as
    adk-sqlstore memory reindex does)."""

    async def run() -> None:
        target = resolve_url(url)
        if target.language is not None:
            analyzer(target.language)  # an unknown language fails before anything changes
        engine = create_engine(target.url)
        try:
            with database_errors(engine):
                before = await migration.upgrade(engine)  # as found under the migration lock
                after = await migration.current_revision(engine)
                citus = await migration.citus_layout(engine)
        finally:
            await engine.dispose()
        if before == after:
            consoles.out.print(f"{target.display}: already at revision {after}", soft_wrap=True)
        else:
            consoles.out.print(
                f"{target.display}: migrated from {before or 'empty'} to {after}", soft_wrap=True
            )
        if citus is not None:
            tables, workers = citus
            spread = sorted(name for name, kind in tables.items() if kind == "distributed")
            copied = sorted(name for name, kind in tables.items() if kind == "reference")
            consoles.out.print(
                f"Citus: {len(spread)} tables distributed by user_id (colocated) over"
                f" {workers} worker node(s); reference table(s): {', '.join(copied) or 'none'}",
                soft_wrap=True,
            )
        if target.language is not None:  # ?language=: memories indexed for it
            async with SqlMemoryService.from_url(url) as memory:
                done = await memory.reindex()
            consoles.out.print(
                f"re-indexed {done} memories for search language {memory.language!r}"
            )

    run_command(run())


@app.command()
def info(url: UrlOption = None) -> None:
    """Show the database the commands use (--url, else $ADK_SQLSTORE_DATABASE_URL, else
    the embedded SQLite file), for an SQLite file where it is and its size in bytes
    (with its write-ahead log), and its schema revision (connecting to it; on Citus,
    how the tables are spread). Examples and programs that give no URL share the
    embedded file: delete it to start afresh."""
    try:
        target = resolve_url(url)
    except ValueError as exc:
        error(str(exc))
        raise typer.Exit(1) from None
    source = (
        "from --url"
        if url is not None
        else "from $ADK_SQLSTORE_DATABASE_URL"
        if not target.embedded
        else "the embedded default: no --url, no $ADK_SQLSTORE_DATABASE_URL"
    )
    consoles.out.print(f"adk-sqlstore {version('adk-sqlstore')}")
    consoles.out.print(f"database: {target.display} ({source})", soft_wrap=True)
    path = sqlite_path(target.url)
    if path is not None and not path.exists():
        consoles.out.print(f"SQLite file: {path} (not created yet)")
        return
    if path is not None:
        parts = [path, path.with_name(path.name + "-wal")]
        size = sum(p.stat().st_size for p in parts if p.exists())
        consoles.out.print(f"SQLite file: {path}, {size:,} bytes")
    consoles.out.print(run_command(_schema_line(target.url)), soft_wrap=True)


async def _schema_line(url: URL) -> str:
    """The database's schema revision, against the one this version needs (connecting:
    a database that cannot be reached fails the command with its one-line error)."""
    engine = create_engine(url)
    try:
        with database_errors(engine):
            current = await migration.current_revision(engine)
            citus = await migration.citus_layout(engine)
    finally:
        await engine.dispose()
    head = migration.HEAD_REVISION
    if current == head:
        line = f"schema: revision {current} (this version's)"
    elif current is None:
        line = "schema: none yet: run adk-sqlstore migrate"
    else:
        line = f"schema: revision {current}; this version needs {head}: run adk-sqlstore migrate"
    if citus is not None:
        line += f"; Citus: {len(citus[0])} tables distributed over {citus[1]} worker node(s)"
    return line


@contextlib.asynccontextmanager
async def _warnings_shown() -> AsyncIterator[None]:
    """The library's warnings printed on standard error meanwhile ("warning: ..."): what
    forget_user could not clear yet, which the command's user should know."""

    class Shown(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            consoles.err.print(f"warning: {record.getMessage()}", style="yellow", soft_wrap=True)

    handler = Shown(logging.WARNING)
    logging.getLogger("adk_sqlstore").addHandler(handler)
    try:
        yield
    finally:
        logging.getLogger("adk_sqlstore").removeHandler(handler)


@app.command("forget-user")
def forget_user(
    app_name: AppOption,
    user: Annotated[str, typer.Option("--user", metavar="USER", help="The user_id to forget.")],
    yes: Annotated[bool, typer.Option("--yes", help="Do not ask for confirmation.")] = False,
    url: UrlOption = None,
) -> None:
    """Delete everything stored for one user of one app: sessions, events, user state,
    memories, facts and artifacts, in one transaction."""
    url = database(url)
    if not yes:
        typer.confirm(
            f"Delete every session, event, user state key, memory, fact and artifact of"
            f" user {user!r} in app {app_name!r}?",
            abort=True,
        )

    async def run() -> None:
        async with SqlSessionService.from_url(url) as service, _warnings_shown():
            counts = await service.forget_user(app_name=app_name, user_id=user)
        bookkeeping = {"memory_stats", "memory_ingestions", "artifact_chunks", "artifact_contents"}
        shown = ", ".join(
            f"{n} {kind.replace('_', ' ')}" for kind, n in counts.items() if kind not in bookkeeping
        )
        consoles.out.print(f"forgot {user} in {app_name}: deleted {shown}")

    run_command(run())


_AGE_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_MAX_AGE_DAYS = 1000 * 365  # much older cutoffs fall before the year 1, which no date shows


def _age(value: str) -> timedelta:
    """``90d``, ``12h``, ``30m``, ``45s``, ``2w`` (or ``1.5d``) as a timedelta."""
    text = value.strip().lower()
    try:
        amount = float(text[:-1]) if text and text[-1] in _AGE_UNITS else math.nan
    except ValueError:
        amount = math.nan
    if not math.isfinite(amount) or amount < 0:
        raise typer.BadParameter(
            f"{value!r} is not an age such as 90d, 12h, 30m, 45s or 2w", param_hint="--older-than"
        )
    seconds = amount * _AGE_UNITS[text[-1]]
    if seconds > _MAX_AGE_DAYS * 86400:
        raise typer.BadParameter(
            f"{value!r} is more than {_MAX_AGE_DAYS // 365} years", param_hint="--older-than"
        )
    return timedelta(seconds=seconds)


def _counts(report: PruneReport) -> str:
    parts = [
        f"{report.sessions} session(s)",
        f"{report.events} event(s)",
        f"{report.session_state_keys} session state key(s)",
        f"{report.artifact_versions} artifact version(s)",
    ]
    if report.with_memories:
        parts.append(f"{report.memories} memories")
    if report.facts:
        parts.append(f"{report.facts} expired fact(s)")
    return ", ".join(parts)


OlderThanOption = Annotated[
    str,
    typer.Option(
        "--older-than",
        metavar="AGE",
        help="Delete sessions not updated for this long: 90d, 12h, 30m, 45s, 2w.",
    ),
]
DryRunOption = Annotated[bool, typer.Option("--dry-run", help="Only count what would be deleted.")]
MemoriesOption = Annotated[
    bool, typer.Option("--memories", help="Also delete the memories made from them.")
]
OnlyAppOption = Annotated[str | None, typer.Option("--app", metavar="APP", help="Only this app.")]
BatchOption = Annotated[
    int, typer.Option(metavar="N", min=1, max=100_000, help="Sessions deleted per transaction.")
]
YesOption = Annotated[bool, typer.Option("--yes", help="Do not ask for confirmation.")]


@app.command()
def prune(
    older_than: OlderThanOption,
    dry_run: DryRunOption = False,
    with_memories: MemoriesOption = False,
    app_name: OnlyAppOption = None,
    batch_size: BatchOption = 1000,
    yes: YesOption = False,
    url: UrlOption = None,
) -> None:
    """Delete old sessions with their events (a retention policy; suits cron).

    Sessions not updated for AGE go, with their events, session state and artifacts,
    in batches of whole sessions. User and app state and the user's own artifacts
    (user:...) stay; so do memories unless --memories.
    """
    age, url = _age(older_than), database(url)

    async def count() -> PruneReport:
        async with SqlSessionService.from_url(url) as service:
            return await service.prune(
                older_than=age, app_name=app_name, with_memories=with_memories, dry_run=True
            )

    planned = run_command(count())
    since = datetime.fromtimestamp(planned.cutoff, UTC).isoformat(timespec="seconds")
    if dry_run or planned.sessions == 0:
        verb = "would delete" if dry_run else "deleted"
        consoles.out.print(f"{verb} {_counts(planned)} (not updated since {since})")
        return
    if not yes:
        typer.confirm(f"Delete {_counts(planned)} not updated since {since}?", abort=True)

    async def delete() -> PruneReport:
        async with SqlSessionService.from_url(url) as service:
            with progress_bar("pruning", "sessions") as progress:
                task = progress.add_task("prune", total=planned.sessions)
                return await service.prune(
                    older_than=time.time() - planned.cutoff,  # the cutoff confirmed
                    app_name=app_name,
                    with_memories=with_memories,
                    batch_size=batch_size,
                    on_batch=lambda batch: progress.update(task, advance=batch.sessions),
                )

    done = run_command(delete())
    consoles.out.print(f"deleted {_counts(done)} (not updated since {since})")


@app.command("services-yaml")
def services_yaml() -> None:
    """Print the services.yaml that registers adk-sqlstore with ADK's command line.

    Save it next to your agents, then start ADK with one of its URIs:

    \b
        adk-sqlstore services-yaml > path/to/agents/services.yaml
        adk api_server --session_service_uri sqlstore:// \\
            --memory_service_uri sqlstore:// path/to/agents

    sqlstore:// is $ADK_SQLSTORE_DATABASE_URL, else the embedded SQLite file;
    sqlstore+sqlite:///rel.db is relative to the working directory,
    sqlstore+sqlite:////abs.db absolute; sqlstore+postgresql://user:pass@host/db and
    sqlstore+mysql://user:pass@host/db (or sqlstore+mariadb://) need
    `adk-sqlstore migrate` first (or ?auto_migrate=true in development).
    """
    from importlib import resources

    text = resources.files("adk_sqlstore").joinpath("services.yaml").read_text(encoding="utf-8")
    sys.stdout.write(text)


@app.command()
def demo(url: UrlOption = None) -> None:
    """Run the lunch example: Monday's preference recalled on Thursday, in a new process."""
    from ..demo import main as demo_main

    try:
        code = demo_main([url] if url else [])
    except (AdkSqlStoreError, ValueError, OSError) as exc:
        error(str(exc))
        raise typer.Exit(1) from None
    raise typer.Exit(code)
