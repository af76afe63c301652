"""``adk-sqlstore import-adk``: copy ADK's own session databases in."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from ..errors import SchemaNotMigratedError
from ..failures import driver_error
from ..url_display import sqlite_path
from ..urls import resolve_url
from .common import app, consoles, database, error, progress_bar, run_command

if TYPE_CHECKING:
    from ..adk import SqlSessionService as AdkSqlSessionService
    from ..adk.database_import import ImportReport

__all__ = ["import_adk"]

SourceOption = Annotated[
    str,
    typer.Option(
        "--source",
        metavar="URL",
        help="The database of ADK's DatabaseSessionService (schema v1, SQLite,"
        " PostgreSQL, MySQL or MariaDB) or SqliteSessionService (e.g. adk web's"
        " sqlite:///agents/my_agent/.adk/session.db); detected, only read.",
    ),
]
TargetOption = Annotated[
    str | None,
    typer.Option(
        "--target",
        metavar="URL",
        help="The adk-sqlstore database. Default: $ADK_SQLSTORE_DATABASE_URL, else the"
        " embedded SQLite file.",
        show_default=False,
    ),
]
DryRunOption = Annotated[
    bool, typer.Option("--dry-run", help="Read and count everything, write nothing.")
]
ReplaceOption = Annotated[
    bool, typer.Option("--replace", help="Overwrite sessions and state keys that exist.")
]


@app.command("import-adk")
def import_adk(
    source: SourceOption,
    target: TargetOption = None,
    dry_run: DryRunOption = False,
    replace: ReplaceOption = False,
) -> None:
    """Copy sessions, events, user state and app state from ADK's DatabaseSessionService
    or SqliteSessionService.

    Either database layout is detected from its tables. One transaction per session;
    sessions already imported are skipped, so running it twice changes nothing. ADK's
    old pickled schema is refused. Needs the adk extra.
    """
    try:
        import google.adk  # noqa: F401 - the extra this command needs
    except ImportError:
        error("import-adk needs google-adk; install it with: pip install 'adk-sqlstore[adk]'")
        raise typer.Exit(1) from None
    report = run_command(_copy(source, database(target, must_exist=False), dry_run, replace))
    verb = "would copy" if dry_run else "copied"
    consoles.out.print(
        f"{verb} {report.sessions} session(s) with {report.events} event(s),"
        f" {report.user_state_keys} user state key(s), {report.app_state_keys} app state"
        f" key(s); {report.skipped} session(s) already there, skipped"
    )


async def _copy(source: str, target: str | None, dry_run: bool, replace: bool) -> ImportReport:
    from ..adk import SqlSessionService as AdkSqlSessionService
    from ..adk.database_import import count_sessions, import_adk_database, open_source

    engine = open_source(source)
    store = await _existing(target) if dry_run else AdkSqlSessionService(target)
    try:
        total = await count_sessions(engine)
        with progress_bar("dry run" if dry_run else "importing", "sessions") as progress:
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


async def _existing(target: str | None) -> AdkSqlSessionService | None:
    """The target as it is, for a dry run: ``None`` when it holds nothing yet (no file,
    or not migrated); never created or migrated."""
    from ..adk import SqlSessionService as AdkSqlSessionService

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
