"""``adk-sqlstore``: the command line.

Every command takes ``--url``; without it the database is
``$ADK_SQLSTORE_DATABASE_URL``, else the embedded SQLite file. Passwords in URLs are
never printed.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Coroutine
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from . import migration
from .engine import create_engine, resolve_url
from .errors import AdkSqlStoreError
from .memory import IngestReport, SqlMemoryService
from .models import Event, Session
from .session_json import dump_session, load_session, session_files
from .sessions import SqlSessionService
from .state import APP_PREFIX, USER_PREFIX

app = typer.Typer(
    name="adk-sqlstore",
    help="Durable sessions, scoped state and memory for ADK agents, in PostgreSQL or SQLite.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
sessions_app = typer.Typer(help="Inspect stored sessions.", no_args_is_help=True)
app.add_typer(sessions_app, name="sessions")
memory_app = typer.Typer(help="Search and ingest long-term memory.", no_args_is_help=True)
app.add_typer(memory_app, name="memory")


class _Consoles:
    """Rich consoles made on first use, so that they see the terminal (and COLUMNS) of
    the running command."""

    @property
    def out(self) -> Console:
        return Console(highlight=False)

    @property
    def err(self) -> Console:
        return Console(stderr=True, highlight=False)


_consoles = _Consoles()

UrlOption = Annotated[
    str | None,
    typer.Option(
        "--url",
        help="Database URL (postgresql://... or sqlite:///path). Default:"
        " $ADK_SQLSTORE_DATABASE_URL, else the embedded SQLite file.",
        show_default=False,
    ),
]
AppOption = Annotated[str, typer.Option("--app", help="The app_name.")]

T = TypeVar("T")


def _run(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine, turning library errors into one red line and exit code 1."""
    try:
        return asyncio.run(coro)
    except (AdkSqlStoreError, ValueError, OSError) as exc:
        _consoles.err.print(f"[red]error:[/] {escape(str(exc))}")
        raise typer.Exit(1) from None


@app.command()
def migrate(url: UrlOption = None) -> None:
    """Upgrade the database schema to the newest revision (idempotent)."""

    async def run() -> None:
        target = resolve_url(url)
        engine = create_engine(target.url)
        try:
            before = await migration.current_revision(engine)
            await migration.upgrade(engine)
            after = await migration.current_revision(engine)
        finally:
            await engine.dispose()
        if before == after:
            _consoles.out.print(f"{target.display}: already at revision {after}")
        else:
            _consoles.out.print(f"{target.display}: migrated from {before or 'empty'} to {after}")

    _run(run())


def _when(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


@sessions_app.command("list")
def sessions_list(
    app_name: AppOption,
    user: Annotated[str | None, typer.Option("--user", help="Only this user_id.")] = None,
    url: UrlOption = None,
) -> None:
    """List sessions, oldest update first."""

    async def run() -> None:
        async with SqlSessionService.from_url(url) as service:
            listing = await service.list_sessions(app_name=app_name, user_id=user)
        table = Table(title=f"sessions of {app_name}" + (f" / {user}" if user else ""))
        table.add_column("session id", no_wrap=True)
        table.add_column("user_id", no_wrap=True)
        for column in ("last update", "events", "state keys"):
            table.add_column(column)
        for s in listing.sessions:
            table.add_row(
                s.id, s.user_id, _when(s.last_update_time), str(s.revision), str(len(s.state))
            )
        _consoles.out.print(table)
        _consoles.out.print(f"{len(listing.sessions)} session(s)")

    _run(run())


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


@sessions_app.command("show")
def sessions_show(
    session_id: Annotated[str, typer.Argument(help="The session id.")],
    app_name: AppOption,
    user: Annotated[str, typer.Option("--user", help="The user_id.")],
    url: UrlOption = None,
) -> None:
    """Show a session: its events as a timeline and its state by scope."""

    async def run() -> None:
        async with SqlSessionService.from_url(url) as service:
            session = await service.get_session(
                app_name=app_name, user_id=user, session_id=session_id
            )
        if session is None:
            _consoles.err.print(
                f"[red]error:[/] no session {session_id!r} for app {app_name!r} and user {user!r}"
            )
            raise typer.Exit(1)
        _consoles.out.print(
            f"[bold]session {escape(session.id)}[/] of {escape(app_name)} /"
            f" {escape(user)}: {len(session.events)} events, revision"
            f" {session.revision}, last update {_when(session.last_update_time)}"
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
                _when(event.timestamp)[:-4],
                event.author,
                escape(_describe(event)),
                escape(delta),
            )
        _consoles.out.print(timeline)
        scopes = Table(title="state by scope")
        for column in ("scope", "key", "value"):
            scopes.add_column(column)
        for key, value in session.state.items():
            scope = (
                "app"
                if key.startswith(APP_PREFIX)
                else "user"
                if key.startswith(USER_PREFIX)
                else "session"
            )
            scopes.add_row(scope, escape(key), escape(json.dumps(value, ensure_ascii=False)))
        _consoles.out.print(scopes)

    _run(run())


@app.command("import")
def import_(
    paths: Annotated[list[Path], typer.Argument(help="Session JSON files, or folders of them.")],
    replace: Annotated[bool, typer.Option(help="Replace sessions that already exist.")] = False,
    url: UrlOption = None,
) -> None:
    """Import ADK session JSON (what Session.model_dump_json() writes; snake_case or
    camelCase keys). A session that already exists is kept unless --replace."""

    async def run() -> None:
        files = session_files(paths)
        parsed: list[tuple[Path, Session]] = []
        for path in files:
            try:
                parsed.append((path, load_session(path.read_bytes())))
            except (ValidationError, json.JSONDecodeError) as exc:
                raise ValueError(f"{path} is not an ADK session JSON file: {exc}") from None
        imported = skipped = 0
        async with SqlSessionService.from_url(url) as service:
            for path, session in parsed:
                if await service.import_session(session, replace=replace):
                    imported += 1
                    _consoles.out.print(
                        f"imported {path.name}: session {session.id} of"
                        f" {session.app_name} / {session.user_id},"
                        f" {len(session.events)} events"
                    )
                else:
                    skipped += 1
                    _consoles.out.print(
                        f"skipped {path.name}: session {session.id} already exists (use --replace)"
                    )
        _consoles.out.print(f"{imported} imported, {skipped} skipped")

    _run(run())


@app.command("export")
def export(
    app_name: AppOption,
    user: Annotated[str | None, typer.Option("--user", help="Only this user_id.")] = None,
    session_id: Annotated[str | None, typer.Option("--session", help="Only this session.")] = None,
    out: Annotated[
        Path,
        typer.Option(
            "--out", help="Folder for <id>.session.json files; '-' writes JSON lines to stdout."
        ),
    ] = Path("."),
    url: UrlOption = None,
) -> None:
    """Export sessions as ADK session JSON, one <session id>.session.json per session."""
    if session_id is not None and user is None:
        _consoles.err.print("[red]error:[/] --session needs --user")
        raise typer.Exit(2)

    async def run() -> None:
        async with SqlSessionService.from_url(url) as service:
            listing = await service.list_sessions(app_name=app_name, user_id=user)
            count = 0
            for summary in listing.sessions:
                if session_id is not None and summary.id != session_id:
                    continue
                session = await service.get_session(
                    app_name=app_name, user_id=summary.user_id, session_id=summary.id
                )
                if session is None:  # deleted meanwhile
                    continue
                text = dump_session(session)
                if str(out) == "-":
                    sys.stdout.write(json.dumps(json.loads(text), ensure_ascii=False) + "\n")
                else:
                    out.mkdir(parents=True, exist_ok=True)
                    (out / f"{session.id}.session.json").write_text(text, encoding="utf-8")
                count += 1
        if str(out) != "-":
            _consoles.out.print(f"exported {count} session(s) to {out}")

    _run(run())


@memory_app.command("search")
def memory_search(
    query: Annotated[str, typer.Argument(help="A natural-language query.")],
    app_name: AppOption,
    user: Annotated[str, typer.Option("--user", help="The user_id whose memories to search.")],
    limit: Annotated[int, typer.Option(help="Most results to show.")] = 10,
    url: UrlOption = None,
) -> None:
    """Search one user's memories; prints score, time, author and text, best first."""

    async def run() -> None:
        async with SqlMemoryService.from_url(url) as memory:
            found = await memory.search_memory(
                app_name=app_name, user_id=user, query=query, limit=limit
            )
        table = Table(title=f"memories of {app_name} / {user} for {query!r}")
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
                escape(text),
                escape(entry.custom_metadata.get("session_id") or "fact"),
            )
        _consoles.out.print(table)
        _consoles.out.print(f"{len(found.memories)} result(s)")

    _run(run())


@memory_app.command("ingest-idle")
def memory_ingest_idle(
    idle_minutes: Annotated[
        float, typer.Option(help="Ingest sessions not updated for this many minutes.")
    ] = 30,
    app_name: Annotated[str | None, typer.Option("--app", help="Only this app.")] = None,
    url: UrlOption = None,
) -> None:
    """Ingest idle sessions into memory (the idle-timeout trigger; suits cron).

    Only sessions whose current revision is not in memory yet are read, so running it
    again does nothing new until sessions change.
    """
    from datetime import timedelta

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    async def run() -> None:
        idle_for = timedelta(minutes=idle_minutes)
        async with SqlMemoryService.from_url(url) as memory:
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
                    progress.update(task, advance=report.sessions, events=done)

                total = await memory.ingest_idle_sessions(
                    idle_for, app_name=app_name, on_session=advance
                )
        _consoles.out.print(
            f"ingested {total.sessions} session(s), {total.events} event(s)"
            f" with text (idle for {idle_minutes:g} min or more)"
        )

    _run(run())


@app.command("forget-user")
def forget_user(
    app_name: AppOption,
    user: Annotated[str, typer.Option("--user", help="The user_id to forget.")],
    yes: Annotated[bool, typer.Option("--yes", help="Do not ask for confirmation.")] = False,
    url: UrlOption = None,
) -> None:
    """Delete everything stored for one user of one app: sessions, events, user state
    and memories, in one transaction."""
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


@app.command()
def demo(url: UrlOption = None) -> None:
    """Run the lunch example: Monday's preference recalled on Thursday, in a new process."""
    from .demo import main as demo_main

    try:
        code = demo_main([url] if url else [])
    except (AdkSqlStoreError, ValueError, OSError) as exc:
        _consoles.err.print(f"[red]error:[/] {escape(str(exc))}")
        raise typer.Exit(1) from None
    raise typer.Exit(code)


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
