"""Commands on sessions: ``sessions list``, ``sessions show``, ``import``, ``export``."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from ..errors import SessionNotFoundError
from ..memory import SqlMemoryService
from ..models import Event, Session
from ..sessions import SqlSessionService
from ..sessions.json_files import dump_session, load_sessions, path_component, session_files
from ..state import APP_PREFIX, USER_PREFIX
from ..store import Store
from .artifacts import export_artifacts, import_artifacts
from .common import (
    AppOption,
    UrlOption,
    app,
    consoles,
    database,
    error,
    run_command,
    sessions_app,
    when,
)

__all__ = ["export", "export_to_folder", "import_", "sessions_list", "sessions_show"]


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
        async with SqlSessionService.from_url(database(url)) as service:
            table = None
            async for s in service.iter_sessions(app_name=app_name, user_id=user):
                if table is None or table.row_count == 500:
                    if table is not None:
                        consoles.out.print(table)
                    table = _session_table(
                        f"sessions of {app_name}" + (f" / {user}" if user else ""), count == 0
                    )
                table.add_row(
                    s.id, s.user_id, when(s.last_update_time), str(s.revision), str(len(s.state))
                )
                count += 1
            if table is not None:
                consoles.out.print(table)
        consoles.out.print(f"{count} session(s)")

    run_command(run())


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
        async with SqlSessionService.from_url(database(url)) as service:
            session = await service.get_session(
                app_name=app_name, user_id=user, session_id=session_id
            )
        if session is None:
            error(f"no session {session_id!r} for app {app_name!r} and user {user!r}")
            raise typer.Exit(1)
        out = consoles.out
        out.print(
            f"session {session.id} of {app_name} / {user}: {len(session.events)} events,"
            f" revision {session.revision}, last update {when(session.last_update_time)}",
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
                when(event.timestamp).removesuffix(" UTC"),
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

    run_command(run())


def _read_sessions(paths: list[Path]) -> Iterator[tuple[str, Session]]:
    """(source name, session) from files, folders (``*.session.json`` inside, at any
    depth) or ``-`` (standard input), one file at a time; JSON lines hold one session
    per line.

    Raises:
        ValueError: naming the file that is not ADK session JSON.
    """
    for path in paths:
        if str(path) != "-" and not path.exists():
            raise ValueError(f"no file or folder {str(path)!r}")
        files: list[Path | None] = [None] if str(path) == "-" else list(session_files([path]))
        for file in files:
            name = "<stdin>" if file is None else str(file)
            try:
                data = sys.stdin.buffer.read() if file is None else file.read_bytes()
                found = load_sessions(data)
            except ValueError as exc:  # UnicodeDecodeError, or load_sessions' message
                raise ValueError(f"{name} is not ADK session JSON: {exc}") from None
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
            "--replace",
            help="Replace sessions that already exist, and user:/app: keys the store has.",
        ),
    ] = False,
    url: UrlOption = None,
) -> None:
    """Import ADK session JSON (what Session.model_dump_json() writes; snake_case or
    camelCase keys), and the artifacts and memories.json an export wrote beside them.
    A session that already exists is kept unless --replace; so are the user: and app:
    keys the store already has (a dump's copy is older), and artifact versions, memories
    and facts it has."""

    async def run() -> None:
        imported = skipped = 0
        folders = [path for path in paths if str(path) != "-"]
        async with SqlSessionService.from_url(url) as service:
            for name, session in _read_sessions(paths):
                where = f"session {session.id} of {session.app_name} / {session.user_id}"
                if await service.import_session(session, replace=replace):
                    imported += 1
                    consoles.out.print(
                        f"imported {where} from {name}, {len(session.events)} events"
                    )
                else:
                    skipped += 1
                    consoles.out.print(
                        f"skipped {where} from {name}: it already exists (use --replace)"
                    )
            versions, kept = await import_artifacts(service.store, folders, replace=replace)
            memories = await import_memories(service.store, folders, replace=replace)
        consoles.out.print(f"{imported} imported, {skipped} skipped")
        if versions or kept:
            consoles.out.print(f"artifact versions: {versions} imported, {kept} skipped")
        if any(memories.values()):
            consoles.out.print(
                f"memories: {memories['memories']} imported, facts: {memories['facts']}"
                f" imported with {memories['fact_revisions']} revision(s),"
                f" {memories['skipped']} skipped"
            )

    run_command(run())


MEMORIES_FILE = "memories.json"


async def export_memories(
    store: Store, app_name: str, user: str | None, out: Path, exported: set[str]
) -> int:
    """Write each user's memories no session holds to ``memories.json`` in the user's
    folder (``out`` itself with ``user``): that user's, or those of the users exported
    and every user of the app with such memories. How many files were written."""
    memory = SqlMemoryService(store)
    users = (
        [user]
        if user is not None
        else sorted(exported | set(await memory.users_with_memories(app_name=app_name)))
    )
    written = 0
    for user_id in users:
        document = await memory.export_memories(app_name=app_name, user_id=user_id)
        if not (document["memories"] or document["facts"] or document["generation"]):
            continue
        folder = out if user is not None else out / path_component(user_id)
        folder.mkdir(parents=True, exist_ok=True)
        text = json.dumps(document, ensure_ascii=False, indent=1)
        (folder / MEMORIES_FILE).write_text(text, encoding="utf-8")
        written += 1
    return written


async def import_memories(store: Store, folders: list[Path], *, replace: bool) -> dict[str, int]:
    """Import every ``memories.json`` under ``folders``; the counts summed."""
    memory = SqlMemoryService(store)
    total = {"memories": 0, "facts": 0, "fact_revisions": 0, "skipped": 0}
    for folder in folders:
        files = [folder] if folder.name == MEMORIES_FILE else sorted(folder.rglob(MEMORIES_FILE))
        for path in files if folder.is_dir() or folder.name == MEMORIES_FILE else []:
            document = json.loads(path.read_text(encoding="utf-8"))
            for name, n in (await memory.import_memories(document, replace=replace)).items():
                total[name] += n
    return total


async def _exported(
    service: SqlSessionService, app_name: str, user: str | None, session_id: str | None
) -> AsyncIterator[Session]:
    """The sessions an export writes: one, a user's, or an app's.

    Raises:
        SessionNotFoundError: the one asked for does not exist.
    """
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


def _write_session(session: Session, out: Path, *, by_user: bool) -> Path | None:
    """Write one exported session: a line of JSON to standard output (``out`` ``-``),
    or a file in ``out`` (in a folder per user when ``by_user``), whose folder is
    returned."""
    text = dump_session(session)
    if str(out) == "-":
        sys.stdout.write(json.dumps(json.loads(text), ensure_ascii=False) + "\n")
        return None
    folder = out / path_component(session.user_id) if by_user else out
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{path_component(session.id)}.session.json").write_text(text, encoding="utf-8")
    return folder


@app.command("export")
def export(
    app_name: AppOption,
    user: Annotated[
        str | None, typer.Option("--user", metavar="USER", help="Only this user_id.")
    ] = None,
    session_id: Annotated[
        str | None,
        typer.Option("--session", metavar="SESSION", help="Only this session (with --user)."),
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
    else DIR/<user_id>/<session id>.session.json (ids percent-encoded), with the
    sessions' artifacts and the users' own under artifacts/ beside them (every version:
    <n>.artifact.json and its bytes, <n>.artifact.bin), and the users' memories no
    session holds (facts with their history, add_memory's memories) in memories.json.
    With --out - (JSON lines) sessions only."""
    if session_id is not None and user is None:
        error("--session needs --user")
        raise typer.Exit(2)

    async def run() -> None:
        async with SqlSessionService.from_url(database(url)) as service:
            count, versions, memories = await export_to_folder(
                service, app_name=app_name, user=user, session_id=session_id, out=out
            )
        if str(out) != "-":
            consoles.out.print(f"exported {count} session(s) to {out}")
            if versions:
                consoles.out.print(f"exported {versions} artifact version(s)")
            if memories:
                consoles.out.print(f"exported the memories and facts of {memories} user(s)")

    run_command(run())


async def export_to_folder(
    service: SqlSessionService,
    *,
    app_name: str,
    user: str | None,
    session_id: str | None,
    out: Path,
) -> tuple[int, int, int]:
    """What ``adk-sqlstore export`` writes (see :func:`export`), into ``out``: the
    numbers of sessions, artifact versions and memories files written.

    Raises:
        SessionNotFoundError: ``session_id`` names no session of ``user``.
    """
    count = 0
    exported: dict[tuple[str, Path], list[str]] = {}
    async for session in _exported(service, app_name, user, session_id):
        folder = _write_session(session, out, by_user=user is None)
        if folder is not None:
            exported.setdefault((session.user_id, folder), []).append(session.id)
        count += 1
    versions = 0
    for (user_id, folder), ids in exported.items():
        versions += await export_artifacts(
            service.store, app_name=app_name, user_id=user_id, session_ids=ids, folder=folder
        )
    memories = 0
    if str(out) != "-":
        memories = await export_memories(
            service.store, app_name, user, out, {u for u, _ in exported}
        )
    return count, versions, memories
