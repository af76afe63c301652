"""What every command shares: the Typer apps (their click classes: :mod:`.parsing`),
consoles, options, old option names, and how a command runs (errors as one line, exit
codes)."""

from __future__ import annotations

import asyncio
import logging
import os
import shlex
import sys
from collections.abc import Coroutine
from datetime import UTC, datetime
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.text import Text

from ..console import make_console
from ..errors import AdkSqlStoreError
from ..url_display import shown_url, sqlite_path
from ..urls import resolve_url
from .parsing import App

__all__ = [
    "AppOption",
    "UrlOption",
    "app",
    "artifacts_app",
    "consoles",
    "database",
    "error",
    "make_console",
    "memory_app",
    "progress_bar",
    "renamed",
    "run_command",
    "sessions_app",
    "warn",
    "when",
]

app = App(
    name="adk-sqlstore",
    help="Durable sessions, scoped state and memory for ADK agents, in PostgreSQL, MySQL,"
    " MariaDB or SQLite.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
sessions_app = App(help="Inspect stored sessions.", no_args_is_help=True)
app.add_typer(sessions_app, name="sessions")
memory_app = App(help="Search and ingest long-term memory.", no_args_is_help=True)
app.add_typer(memory_app, name="memory")
artifacts_app = App(help="List and fetch artifacts (the files agents saved).", no_args_is_help=True)
app.add_typer(artifacts_app, name="artifacts")


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        consoles.out.print(f"adk-sqlstore {version('adk-sqlstore')}")
        raise typer.Exit()


@app.callback()
def _commands(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_print_version,
            is_eager=True,
            help="Print adk-sqlstore's version and exit.",
        ),
    ] = False,
) -> None:
    # The commands report failures themselves, on one line; the library's log records
    # of the same failures would print them a second time (through logging's last
    # resort handler) unless the user configured logging.
    logging.getLogger("adk_sqlstore").addHandler(logging.NullHandler())


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


consoles = _Consoles()

UrlOption = Annotated[
    str | None,
    typer.Option(
        "--url",
        metavar="URL",
        help="Database URL: postgresql://user:pass@host/db, mysql://user:pass@host/db"
        " (or mariadb://), sqlite:///relative.db,"
        " sqlite:////absolute.db, or the same with ADK's sqlstore+ prefix (sqlstore:// is"
        " the default). Default: $ADK_SQLSTORE_DATABASE_URL, else the embedded SQLite file.",
        show_default=False,
    ),
]
AppOption = Annotated[str, typer.Option("--app", metavar="APP", help="The app_name.")]

T = TypeVar("T")


def error(message: str) -> None:
    consoles.err.print(Text("error: ", style="red") + Text(message), soft_wrap=True)


def warn(message: str) -> None:
    consoles.err.print(Text("warning: ", style="yellow") + Text(message), soft_wrap=True)


def renamed(old: str, old_value: T | None, new: str, value: T | None) -> T | None:
    """The value of an option given by its new name ``new``, or by its deprecated one
    ``old`` (a hidden option kept for a release), then with a warning on standard
    error.

    Raises:
        typer.BadParameter: both names given.
    """
    if old_value is None:
        return value
    if value is not None:
        raise typer.BadParameter(f"is {new}'s old name: give {new} only", param_hint=old)
    warn(f"{old} is deprecated; use {new}")
    return old_value


def run_command(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine, turning errors into one red line and exit code 1, and Ctrl-C
    into one line and exit code 130 (as at start-up, see ``adk_sqlstore._entry``)."""
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
        error(str(exc))
        raise typer.Exit(1) from None


def database(url: str | None, *, must_exist: bool = True) -> str | None:
    """``url`` unchanged, after checking that an SQLite file it names exists (a read
    command would otherwise create an empty file); the embedded default is exempt."""
    try:
        target = resolve_url(url)
    except ValueError as exc:
        error(str(exc))
        raise typer.Exit(1) from None
    path = sqlite_path(target.url)  # a file: URI's file too
    if must_exist and not target.embedded and path is not None and not path.exists():
        folder = path.parent
        make = "" if folder.is_dir() else f"mkdir -p {shlex.quote(str(folder))} && "
        error(
            f"no database file at {path}{'' if not make else f' (no folder {folder})'};"
            f" create it with: {make}adk-sqlstore migrate --url"
            f" {shlex.quote(shown_url(target.url))}"
        )
        raise typer.Exit(1)
    return url


def when(ts: float) -> str:
    try:
        return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (OverflowError, OSError, ValueError):  # outside the years 1-9999
        return f"{ts!r} s"


def progress_bar(verb: str, unit: str) -> Progress:
    """A progress bar on standard output: ``verb [=====] 3/10 unit`` (``unit`` may name
    a task's fields, ``{task.fields[events]}``)."""
    return Progress(
        TextColumn(verb), BarColumn(), MofNCompleteColumn(), TextColumn(unit), console=consoles.out
    )
