"""``adk-sqlstore``: the command line.

Every command takes ``--url``; without it the database is
``$ADK_SQLSTORE_DATABASE_URL``, else the embedded SQLite file. Passwords in URLs are
never printed.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import sys
import time
from collections.abc import AsyncIterator, Coroutine, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, TypeVar
from urllib.parse import quote

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.table import Table
from rich.text import Text

from . import migration
from .engine import create_engine
from .errors import (
    AdkSqlStoreError,
    SchemaNotMigratedError,
    SessionNotFoundError,
)
from .failures import database_errors, driver_error
from .memory import IngestReport, SqlMemoryService
from .models import Event, Session
from .session_json import dump_session, load_sessions, session_files
from .sessions import PruneReport, SqlSessionService
from .state import APP_PREFIX, USER_PREFIX
from .urls import redact_url, resolve_url, sqlite_path

app = typer.Typer(
    name="adk-sqlstore",
    help="Durable sessions, scoped state and memory for ADK agents, in PostgreSQL or SQLite.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
sessions_app = typer.Typer(help="Inspect stored sessions.", no_args_is_help=True)
app.add_typer(sessions_app, name="sessions")
memory_app = typer.Typer(help="Search and ingest long-term memory.", no_args_is_help=True)
app.add_typer(memory_app, name="memory")


@app.callback()
def _commands() -> None:
    # The commands report failures themselves, on one line; the library's log records
    # of the same failures would print them a second time (through logging's last
    # resort handler) unless the user configured logging.
    logging.getLogger("adk_sqlstore").addHandler(logging.NullHandler())


_PIPE_WIDTH = 1000


def make_console(*, stderr: bool = False, markup: bool = False) -> Console:
    """A rich console for the running command. Output to a pipe or file is not cut to
    80 columns: it is as wide as it needs (up to ``_PIPE_WIDTH``) unless COLUMNS says
    otherwise, so no line is broken inside a value."""
    console = Console(stderr=stderr, highlight=False, markup=markup)
    if not console.is_terminal and not os.environ.get("COLUMNS", "").strip():
        console = Console(stderr=stderr, highlight=False, markup=markup, width=_PIPE_WIDTH)
    return console


class _Consoles:
    """Rich consoles made on first use, so that they see the terminal (and COLUMNS) of
    the running command. Markup is off: ids, text and queries are printed as they are
    (a session id such as "[/red]" is just text); styles come from ``style=``."""

    @property
    def out(self) -> Console:
        return make_console(stderr=False)

    @property
    def err(self) -> Console:
        return make_console(stderr=True)


_consoles = _Consoles()

UrlOption = Annotated[
    str | None,
    typer.Option(
        "--url",
        metavar="URL",
        help="Database URL: postgresql://user:pass@host/db, sqlite:///relative.db,"
        " sqlite:////absolute.db, or the same with ADK's sqlstore+ prefix (sqlstore:// is"
        " the default). Default: $ADK_SQLSTORE_DATABASE_URL, else the embedded SQLite file.",
        show_default=False,
    ),
]
AppOption = Annotated[str, typer.Option("--app", metavar="APP", help="The app_name.")]

T = TypeVar("T")


def _error(message: str) -> None:
    _consoles.err.print(Text("error: ", style="red") + Text(message), soft_wrap=True)


def _run(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine, turning errors into one red line and exit code 1, and Ctrl-C
    into one line and exit code 130 (as at start-up, see ``_entry``)."""
    try:
        return asyncio.run(coro)
    except KeyboardInterrupt:
        sys.stderr.write("adk-sqlstore: interrupted\n")
        raise typer.Exit(130) from None
    except BrokenPipeError:
        # The reader went away (``export --out - | head``): stop quietly, as other
        # command-line tools do; stdout is pointed at /dev/null so that Python's own
        # flush at exit does not complain either.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise typer.Exit(1) from None
    except (AdkSqlStoreError, ValueError, OSError) as exc:
        _error(str(exc))
        raise typer.Exit(1) from None


def _database(url: str | None, *, must_exist: bool = True) -> str | None:
    """``url`` unchanged, after checking that an SQLite file it names exists (a read
    command would otherwise create an empty file); the embedded default is exempt."""
    try:
        target = resolve_url(url)
    except ValueError as exc:
        _error(str(exc))
        raise typer.Exit(1) from None
    path = target.url.database
    if (
        must_exist
        and not target.embedded
        and target.url.get_backend_name() == "sqlite"
        and path
        and path != ":memory:"
        and not Path(path).exists()
    ):
        _error(
            f"no database file at {path}; create it with: adk-sqlstore migrate --url"
            f" {redact_url(target.url)}"
        )
        raise typer.Exit(1)
    return url


@app.command()
def migrate(url: UrlOption = None) -> None:
    """Upgrade the database schema to the newest revision (idempotent)."""

    async def run() -> None:
        target = resolve_url(url)
        engine = create_engine(target.url)
        try:
            with database_errors(engine):
                before = await migration.upgrade(engine)  # as found under the migration lock
                after = await migration.current_revision(engine)
        finally:
            await engine.dispose()
        if before == after:
            _consoles.out.print(f"{target.display}: already at revision {after}")
        else:
            _consoles.out.print(f"{target.display}: migrated from {before or 'empty'} to {after}")

    _run(run())


def _when(ts: float) -> str:
    try:
        return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (OverflowError, OSError, ValueError):  # outside the years 1-9999
        return f"{ts!r} s"


@sessions_app.command("list")
def sessions_list(
    app_name: AppOption,
    user: Annotated[
        str | None, typer.Option("--user", metavar="USER", help="Only this user_id.")
    ] = None,
    url: UrlOption = None,
) -> None:
    """List sessions, oldest update first (read 500 at a time)."""

    async def run() -> None:
        count = 0
        async with SqlSessionService.from_url(_database(url)) as service:
            table = None
            async for s in service.iter_sessions(app_name=app_name, user_id=user):
                if table is None or table.row_count == 500:
                    if table is not None:
                        _consoles.out.print(table)
                    table = _session_table(
                        f"sessions of {app_name}" + (f" / {user}" if user else ""), count == 0
                    )
                table.add_row(
                    s.id, s.user_id, _when(s.last_update_time), str(s.revision), str(len(s.state))
                )
                count += 1
            if table is not None:
                _consoles.out.print(table)
        _consoles.out.print(f"{count} session(s)")

    _run(run())


def _session_table(title: str, first: bool) -> Table:
    table = Table(title=title if first else None, show_header=first)
    table.add_column("session id", no_wrap=True, min_width=36)
    table.add_column("user_id", no_wrap=True, min_width=12)
    table.add_column("last update", no_wrap=True, min_width=23)
    table.add_column("events", justify="right", min_width=6)
    table.add_column("state keys", justify="right", min_width=10)
    return table


def _describe(event: Event) -> str:
    pieces = []
    for part in event.content.parts or [] if event.content else []:
        if part.text:
            pieces.append(part.text)
        elif part.function_call:
            pieces.append(
                f"→ {part.function_call.name}({json.dumps(part.function_call.args or {})})"
            )
        elif part.function_response:
            pieces.append(
                f"← {part.function_response.name}: {json.dumps(part.function_response.response)}"
            )
        elif part.inline_data:
            pieces.append(f"[{part.inline_data.mime_type or 'data'}]")
    return "\n".join(pieces)


def _scope(key: str) -> str:
    if key.startswith(APP_PREFIX):
        return "app"
    return "user" if key.startswith(USER_PREFIX) else "session"


@sessions_app.command("show")
def sessions_show(
    session_id: Annotated[str, typer.Argument(metavar="SESSION_ID", help="The session id.")],
    app_name: AppOption,
    user: Annotated[str, typer.Option("--user", metavar="USER", help="The user_id.")],
    url: UrlOption = None,
) -> None:
    """Show a session: its events as a timeline and its state by scope."""

    async def run() -> None:
        async with SqlSessionService.from_url(_database(url)) as service:
            session = await service.get_session(
                app_name=app_name, user_id=user, session_id=session_id
            )
        if session is None:
            _error(f"no session {session_id!r} for app {app_name!r} and user {user!r}")
            raise typer.Exit(1)
        out = _consoles.out
        out.print(
            f"session {session.id} of {app_name} / {user}: {len(session.events)} events,"
            f" revision {session.revision}, last update {_when(session.last_update_time)}",
            style="bold",
        )
        timeline = Table(title="events")
        for column in ("#", "time (UTC)", "author", "content", "state_delta"):
            timeline.add_column(column)
        for n, event in enumerate(session.events, start=1):
            delta = "\n".join(
                f"{k} = {json.dumps(v, ensure_ascii=False)}"
                for k, v in event.actions.state_delta.items()
            )
            timeline.add_row(
                str(n),
                _when(event.timestamp).removesuffix(" UTC"),
                event.author,
                _describe(event),
                delta,
            )
        out.print(timeline)
        scopes = Table(title="state by scope")
        for column in ("scope", "key", "value"):
            scopes.add_column(column)
        for key, value in session.state.items():
            scopes.add_row(_scope(key), key, json.dumps(value, ensure_ascii=False))
        out.print(scopes)

    _run(run())


def _read_sessions(paths: list[Path]) -> Iterator[tuple[str, Session]]:
    """(source name, session) from files, folders (``*.session.json`` inside, at any
    depth) or ``-`` (standard input), one file at a time; JSON lines hold one session
    per line.

    Raises:
        ValueError: naming the file that is not ADK session JSON.
    """
    for path in paths:
        files: list[Path | None] = [None] if str(path) == "-" else list(session_files([path]))
        for file in files:
            name = "<stdin>" if file is None else str(file)
            try:
                data = sys.stdin.buffer.read() if file is None else file.read_bytes()
                found = load_sessions(data)
            except (ValidationError, ValueError) as exc:  # JSONDecodeError, UnicodeDecodeError
                first = str(exc).splitlines()[0]
                raise ValueError(f"{name} is not ADK session JSON: {first}") from None
            for session in found:
                yield name, session


@app.command("import")
def import_(
    paths: Annotated[
        list[Path],
        typer.Argument(
            metavar="PATH...",
            help="Session JSON files, folders of them, or - for standard input (JSON lines"
            " welcome).",
        ),
    ],
    replace: Annotated[
        bool,
        typer.Option(
            help="Replace sessions that already exist, and user:/app: keys the store has."
        ),
    ] = False,
    url: UrlOption = None,
) -> None:
    """Import ADK session JSON (what Session.model_dump_json() writes; snake_case or
    camelCase keys). A session that already exists is kept unless --replace; so are
    the user: and app: keys the store already has (a dump's copy is older)."""

    async def run() -> None:
        imported = skipped = 0
        async with SqlSessionService.from_url(url) as service:
            for name, session in _read_sessions(paths):
                where = f"session {session.id} of {session.app_name} / {session.user_id}"
                if await service.import_session(session, replace=replace):
                    imported += 1
                    _consoles.out.print(
                        f"imported {where} from {name}, {len(session.events)} events"
                    )
                else:
                    skipped += 1
                    _consoles.out.print(
                        f"skipped {where} from {name}: it already exists (use --replace)"
                    )
        _consoles.out.print(f"{imported} imported, {skipped} skipped")

    _run(run())


def _file_name(identifier: str) -> str:
    """An identifier as one safe path component: percent-encoded, never "." or "..",
    never hidden."""
    name = quote(identifier, safe="")
    return "%2E" + name[1:] if name.startswith(".") else name


@app.command("export")
def export(
    app_name: AppOption,
    user: Annotated[
        str | None, typer.Option("--user", metavar="USER", help="Only this user_id.")
    ] = None,
    session_id: Annotated[
        str | None, typer.Option("--session", metavar="SESSION_ID", help="Only this session.")
    ] = None,
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            metavar="DIR",
            help="Folder to write to; '-' writes JSON lines to standard output.",
        ),
    ] = Path("."),
    url: UrlOption = None,
) -> None:
    """Export sessions as ADK session JSON: DIR/<session id>.session.json with --user,
    else DIR/<user_id>/<session id>.session.json (ids percent-encoded)."""
    if session_id is not None and user is None:
        _error("--session needs --user")
        raise typer.Exit(2)

    async def sessions(service: SqlSessionService) -> AsyncIterator[Session]:
        if session_id is not None and user is not None:
            one = await service.get_session(app_name=app_name, user_id=user, session_id=session_id)
            if one is None:
                raise SessionNotFoundError(
                    f"no session {session_id!r} of app {app_name!r} and user {user!r}"
                )
            yield one
            return
        async for summary in service.iter_sessions(app_name=app_name, user_id=user):
            session = await service.get_session(
                app_name=app_name, user_id=summary.user_id, session_id=summary.id
            )
            if session is not None:  # else deleted meanwhile
                yield session

    async def run() -> None:
        async with SqlSessionService.from_url(_database(url)) as service:
            count = 0
            async for session in sessions(service):
                text = dump_session(session)
                if str(out) == "-":
                    sys.stdout.write(json.dumps(json.loads(text), ensure_ascii=False) + "\n")
                else:
                    folder = out if user is not None else out / _file_name(session.user_id)
                    folder.mkdir(parents=True, exist_ok=True)
                    path = folder / f"{_file_name(session.id)}.session.json"
                    path.write_text(text, encoding="utf-8")
                count += 1
        if str(out) != "-":
            _consoles.out.print(f"exported {count} session(s) to {out}")

    _run(run())


@memory_app.command("search")
def memory_search(
    query: Annotated[str, typer.Argument(metavar="QUERY", help="A natural-language query.")],
    app_name: AppOption,
    user: Annotated[
        str, typer.Option("--user", metavar="USER", help="The user_id whose memories to search.")
    ],
    limit: Annotated[
        int, typer.Option(metavar="N", min=1, max=1000, help="Most results to show.")
    ] = 10,
    url: UrlOption = None,
) -> None:
    """Search one user's memories; prints score, time, author and text, best first."""

    async def run() -> None:
        async with SqlMemoryService.from_url(_database(url)) as memory:
            found = await memory.search_memory(
                app_name=app_name, user_id=user, query=query, limit=limit
            )
        _consoles.out.print(f"memories of {app_name} / {user} for {query!r}", soft_wrap=True)
        table = Table()
        table.add_column("score", justify="right")
        table.add_column("time (UTC)", no_wrap=True)
        table.add_column("author")
        table.add_column("text")
        table.add_column("session")
        for entry in found.memories:
            text = "\n".join(p.text for p in entry.content.parts or [] if p.text)
            when = (entry.timestamp or "")[:19].replace("T", " ")
            table.add_row(
                f"{entry.custom_metadata['score']:.3g}",
                when,
                entry.author or "",
                text,
                entry.custom_metadata.get("session_id") or "fact",
            )
        _consoles.out.print(table)
        _consoles.out.print(f"{len(found.memories)} result(s)")

    _run(run())


@memory_app.command("ingest-idle")
def memory_ingest_idle(
    idle_minutes: Annotated[
        float,
        typer.Option(
            metavar="MINUTES",
            min=0,
            max=100_000_000,
            help="Ingest sessions not updated for this many minutes.",
        ),
    ] = 30,
    app_name: Annotated[
        str | None, typer.Option("--app", metavar="APP", help="Only this app.")
    ] = None,
    url: UrlOption = None,
) -> None:
    """Ingest idle sessions into memory (the idle-timeout trigger; suits cron).

    Only sessions whose current revision is not in memory yet are read, so running it
    again does nothing new until sessions change. Exits with 1 if any session could not
    be ingested (the others are).
    """
    if not math.isfinite(idle_minutes):
        raise typer.BadParameter("must be a number of minutes", param_hint="--idle-minutes")

    async def run() -> IngestReport:
        idle_for = timedelta(minutes=idle_minutes)
        async with SqlMemoryService.from_url(_database(url)) as memory:
            pending = await memory.count_idle_sessions(idle_for=idle_for, app_name=app_name)
            with Progress(
                TextColumn("ingesting"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("sessions, {task.fields[events]} events"),
                console=_consoles.out,
            ) as progress:
                task = progress.add_task("ingest", total=pending, events=0)

                def advance(report: IngestReport) -> None:
                    done = progress.tasks[0].fields["events"] + report.events
                    progress.update(task, advance=report.sessions + report.failed, events=done)

                return await memory.ingest_idle_sessions(
                    idle_for, app_name=app_name, on_session=advance
                )

    total = _run(run())
    _consoles.out.print(
        f"ingested {total.sessions} session(s), {total.events} event(s)"
        f" with text (idle for {idle_minutes:g} min or more)"
    )
    if total.failed:
        for line in total.errors:
            _error(f"not ingested: {line}")
        _error(f"{total.failed} session(s) could not be ingested")
        raise typer.Exit(1)


@app.command("forget-user")
def forget_user(
    app_name: AppOption,
    user: Annotated[str, typer.Option("--user", metavar="USER", help="The user_id to forget.")],
    yes: Annotated[bool, typer.Option("--yes", help="Do not ask for confirmation.")] = False,
    url: UrlOption = None,
) -> None:
    """Delete everything stored for one user of one app: sessions, events, user state
    and memories, in one transaction."""
    url = _database(url)
    if not yes:
        typer.confirm(
            f"Delete every session, event, user state key and memory of user {user!r} in"
            f" app {app_name!r}?",
            abort=True,
        )

    async def run() -> None:
        async with SqlSessionService.from_url(url) as service:
            counts = await service.forget_user(app_name=app_name, user_id=user)
        shown = ", ".join(f"{n} {kind.replace('_', ' ')}" for kind, n in counts.items())
        _consoles.out.print(f"forgot {user} in {app_name}: deleted {shown}")

    _run(run())


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
    ]
    if report.with_memories:
        parts.append(f"{report.memories} memories")
    return ", ".join(parts)


@app.command()
def prune(
    older_than: Annotated[
        str,
        typer.Option(
            "--older-than",
            metavar="AGE",
            help="Delete sessions not updated for this long: 90d, 12h, 30m, 45s, 2w.",
        ),
    ],
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Only count what would be deleted.")
    ] = False,
    with_memories: Annotated[
        bool, typer.Option("--memories", help="Also delete the memories made from them.")
    ] = False,
    app_name: Annotated[
        str | None, typer.Option("--app", metavar="APP", help="Only this app.")
    ] = None,
    batch_size: Annotated[
        int,
        typer.Option(metavar="N", min=1, max=100_000, help="Sessions deleted per transaction."),
    ] = 1000,
    yes: Annotated[bool, typer.Option("--yes", help="Do not ask for confirmation.")] = False,
    url: UrlOption = None,
) -> None:
    """Delete old sessions with their events (a retention policy; suits cron).

    Sessions not updated for AGE go, with their events and session state, in batches
    of whole sessions. User and app state stay; so do memories unless --memories.
    """
    age = _age(older_than)
    url = _database(url)

    async def count() -> PruneReport:
        async with SqlSessionService.from_url(url) as service:
            return await service.prune(
                older_than=age, app_name=app_name, with_memories=with_memories, dry_run=True
            )

    planned = _run(count())
    since = datetime.fromtimestamp(planned.cutoff, UTC).isoformat(timespec="seconds")
    if dry_run or planned.sessions == 0:
        verb = "would delete" if dry_run else "deleted"
        _consoles.out.print(f"{verb} {_counts(planned)} (not updated since {since})")
        return
    if not yes:
        typer.confirm(f"Delete {_counts(planned)} not updated since {since}?", abort=True)

    async def run() -> PruneReport:
        async with SqlSessionService.from_url(url) as service:
            with Progress(
                TextColumn("pruning"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("sessions"),
                console=_consoles.out,
            ) as progress:
                task = progress.add_task("prune", total=planned.sessions)
                return await service.prune(
                    older_than=time.time() - planned.cutoff,  # the cutoff confirmed
                    app_name=app_name,
                    with_memories=with_memories,
                    batch_size=batch_size,
                    on_batch=lambda batch: progress.update(task, advance=batch.sessions),
                )

    done = _run(run())
    _consoles.out.print(f"deleted {_counts(done)} (not updated since {since})")


@app.command("import-adk")
def import_adk(
    source: Annotated[
        str,
        typer.Option(
            "--source",
            metavar="URL",
            help="The database of ADK's DatabaseSessionService (schema v1, SQLite or"
            " PostgreSQL) or SqliteSessionService (e.g. adk web's"
            " sqlite:///agents/my_agent/.adk/session.db); detected, only read.",
        ),
    ],
    target: Annotated[
        str | None,
        typer.Option(
            "--target",
            metavar="URL",
            help="The adk-sqlstore database. Default: $ADK_SQLSTORE_DATABASE_URL, else the"
            " embedded SQLite file.",
            show_default=False,
        ),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Read and count everything, write nothing.")
    ] = False,
    replace: Annotated[
        bool, typer.Option("--replace", help="Overwrite sessions and state keys that exist.")
    ] = False,
) -> None:
    """Copy sessions, events, user state and app state from ADK's DatabaseSessionService
    or SqliteSessionService.

    Either database layout is detected from its tables. One transaction per session;
    sessions already imported are skipped, so running it twice changes nothing. ADK's
    old pickled schema is refused. Needs the adk extra.
    """
    try:
        from .adk import SqlSessionService as AdkSqlSessionService
        from .adk_import import ImportReport, count_sessions, import_adk_database, open_source
    except ImportError as exc:
        _error(str(exc))
        raise typer.Exit(1) from None
    target = _database(target, must_exist=False)

    async def existing_target() -> AdkSqlSessionService | None:
        """The target as it is, for a dry run: ``None`` when it holds nothing yet (no
        file, or not migrated); never created or migrated."""
        path = sqlite_path(resolve_url(target).url)
        if path is not None and not path.exists():
            return None
        store = AdkSqlSessionService(target, auto_migrate=False)
        try:
            await store.core.ensure_schema()
        except SchemaNotMigratedError:
            await store.close()
            return None
        return store

    async def run() -> ImportReport:
        engine = open_source(source)
        store = await existing_target() if dry_run else AdkSqlSessionService(target)
        try:
            total = await count_sessions(engine)
            with Progress(
                TextColumn("dry run" if dry_run else "importing"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("sessions"),
                console=_consoles.out,
            ) as progress:
                task = progress.add_task("import", total=total)
                return await import_adk_database(
                    engine,
                    store,
                    replace=replace,
                    dry_run=dry_run,
                    on_session=lambda s, written: progress.advance(task),
                )
        except Exception as exc:  # the source's failures, typed like the store's
            typed = driver_error(engine, exc)
            if typed is None:
                raise
            raise typed from exc
        finally:
            await engine.dispose()
            if store is not None:
                await store.close()

    report = _run(run())
    verb = "would copy" if dry_run else "copied"
    _consoles.out.print(
        f"{verb} {report.sessions} session(s) with {report.events} event(s),"
        f" {report.user_state_keys} user state key(s), {report.app_state_keys} app state"
        f" key(s); {report.skipped} session(s) already there, skipped"
    )


@app.command("services-yaml")
def services_yaml() -> None:
    """Print the services.yaml that registers adk-sqlstore with ADK's command line.

    Save it next to your agents, then start ADK with one of its URIs:

        adk-sqlstore services-yaml > path/to/agents/services.yaml

        adk api_server --session_service_uri sqlstore:// --memory_service_uri sqlstore://
        path/to/agents

    sqlstore:// is $ADK_SQLSTORE_DATABASE_URL, else the embedded SQLite file;
    sqlstore+sqlite:///rel.db is relative to the working directory,
    sqlstore+sqlite:////abs.db absolute; sqlstore+postgresql://user:pass@host/db needs
    `adk-sqlstore migrate` first (or ?auto_migrate=true in development).
    """
    from importlib import resources

    text = resources.files("adk_sqlstore").joinpath("services.yaml").read_text(encoding="utf-8")
    sys.stdout.write(text)


@app.command()
def demo(url: UrlOption = None) -> None:
    """Run the lunch example: Monday's preference recalled on Thursday, in a new process."""
    from .demo import main as demo_main

    try:
        code = demo_main([url] if url else [])
    except (AdkSqlStoreError, ValueError, OSError) as exc:
        _error(str(exc))
        raise typer.Exit(1) from None
    raise typer.Exit(code)


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
