"""Commands on generated facts: ``memory generate``, ``memory facts list``,
``memory facts show``, ``memory facts failures``."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from ..errors import ConfigurationError, GenerationError
from ..generation import Fact, FactRevision, GenerationReport
from ..memory import SqlMemoryService
from .common import (
    AppOption,
    UrlOption,
    consoles,
    database,
    error,
    memory_app,
    renamed,
    run_command,
    warn,
)
from .parsing import App

__all__ = [
    "facts_failures",
    "facts_list",
    "facts_show",
    "memory_generate",
    "not_current",
    "print_generation",
]

facts_app = App(help="A user's generated facts and their history.", no_args_is_help=True)
memory_app.add_typer(facts_app, name="facts")

GeneratorOption = Annotated[
    str | None,
    typer.Option(
        "--generator",
        metavar="GENERATOR",
        help="The generator's model: a name as ADK's LlmAgent(model=...) takes"
        " (gemini-2.5-flash; ollama_chat/llama3.2 with LiteLLM), openai:MODEL (an"
        " OpenAI-compatible server at $OPENAI_BASE_URL, key $OPENAI_API_KEY), or"
        " package.module:NAME; default: ?generator= in the URL.",
    ),
]
OldModelOption = Annotated[
    str | None, typer.Option("--model", metavar="MODEL", hidden=True, help="Deprecated.")
]
"""``--model``, the deprecated name of ``--generator`` (and, on ``memory search`` and
``memory embed``, of ``--embedder``): hidden, kept for a release."""
UserOption = Annotated[str, typer.Option("--user", metavar="USER", help="The user_id.")]


@memory_app.command("generate")
def memory_generate(
    app_name: Annotated[
        str | None, typer.Option("--app", metavar="APP", help="Only this app.")
    ] = None,
    user: Annotated[
        str | None, typer.Option("--user", metavar="USER", help="Only this user_id.")
    ] = None,
    session: Annotated[
        str | None,
        typer.Option(
            "--session", metavar="SESSION", help="Only this session (with --app and --user)."
        ),
    ] = None,
    retry_failed: Annotated[
        bool,
        typer.Option("--retry-failed", help="Also run sessions that failed too often before."),
    ] = False,
    generator: GeneratorOption = None,
    url: UrlOption = None,
    model: OldModelOption = None,
) -> None:
    """Generate facts from the sessions' events not processed yet (memory generation).

    Each session's new events go to the generator's model once (re-running does
    nothing until sessions grow); the facts are consolidated with the user's stored
    ones. Exits with 1 if any session failed (the others are done; failed ones are
    retried by the next run, up to the generator's attempts: see `memory facts
    failures`).
    """
    if session is not None and (app_name is None or user is None):
        raise typer.BadParameter("needs --app and --user too", param_hint="--session")
    generator = renamed("--model", model, "--generator", generator)

    async def run() -> GenerationReport:
        async with SqlMemoryService.from_url(database(url), generator=generator) as memory:
            if memory.generator is None:
                raise ConfigurationError(
                    "no generator: pass --generator MODEL (e.g. --generator"
                    " gemini-2.5-flash) or ?generator= in the URL"
                )
            if session is not None:
                assert app_name is not None and user is not None
                try:
                    return await memory.generate(
                        app_name=app_name, user_id=user, session_id=session
                    )
                except GenerationError as exc:  # recorded by the run: its report says so
                    if exc.report is None:
                        raise
                    error(str(exc))
                    report: GenerationReport = exc.report
                    return report
            return await memory.generate_pending(
                app_name=app_name, user_id=user, retry_failed=retry_failed
            )

    report = run_command(run())
    if not print_generation(report):
        raise typer.Exit(1)


def print_generation(report: GenerationReport, *, heading: str = "") -> bool:
    """Print what generation did (one line, then dropped items and failures); whether
    no session failed."""
    consoles.out.print(
        f"{heading}{report.sessions} session(s), {report.events} event(s) read: {report.created}"
        f" fact(s) created, {report.updated} updated, {report.invalidated} invalidated,"
        f" {report.unchanged} already known; {report.model_calls} model call(s)"
        + (f" ({report.retries} retried)" if report.retries else "")
        + f", {report.prompt_tokens} prompt token(s)"
    )
    for reason, count in sorted(report.dropped.items()):
        consoles.out.print(f"dropped from the model's answers: {count} {reason}")
    if report.failed:
        retried = report.failed - report.given_up
        error(
            f"generation failed for {report.failed} session(s): {retried} retried by the next"
            f" run, {report.given_up} given up on (`memory generate --retry-failed` runs them"
            " again; see `adk-sqlstore memory facts failures`)"
        )
    return not report.failed


@facts_app.command("list")
def facts_list(
    app_name: AppOption,
    user: UserOption,
    history: Annotated[
        bool,
        typer.Option("--history", help="Also facts no longer current (contradicted or expired)."),
    ] = False,
    url: UrlOption = None,
) -> None:
    """List a user's facts, the most recently changed first."""

    async def run() -> list[Fact]:
        async with SqlMemoryService.from_url(database(url)) as memory:
            return await memory.list_facts(app_name=app_name, user_id=user, history=history)

    facts = run_command(run())
    table = Table()
    for column in ("id", "valid from (UTC)", "topics", "text", "revisions", "current"):
        table.add_column(column)
    for fact in facts:
        table.add_row(
            fact.id,
            _when(fact.valid_from),
            ", ".join(fact.topics),
            fact.text,
            str(fact.revision_count),
            "yes" if fact.current else _not_current(fact),
        )
    consoles.out.print(table)
    consoles.out.print(f"{len(facts)} fact(s) of {app_name} / {user}")


def _when(iso: str | None) -> str:
    return (iso or "")[:19].replace("T", " ")


def _not_current(fact: Fact) -> str:
    return not_current(fact.invalid_at, fact.invalidate_time, fact.expire_time)


def not_current(invalid_at: str | None, learned: str | None, expired: str | None) -> str:
    """Why a fact is not current (times in ISO 8601, UTC): when it stopped being true
    and when the store learned it, or when it expired."""
    if invalid_at is None and learned is None:
        return f"no: expired {_when(expired)}"
    return f"no: not true since {_when(invalid_at)}, learned {_when(learned)}"


@facts_app.command("show")
def facts_show(
    fact_id: Annotated[str, typer.Argument(metavar="FACT_ID", help="The fact's id.")],
    app_name: AppOption,
    user: UserOption,
    url: UrlOption = None,
) -> None:
    """Show one fact and its history: every revision, with the session and events it
    comes from and the model that made it. Exits with 1 if the user has no such fact."""

    async def run() -> tuple[Fact, list[FactRevision]] | None:
        async with SqlMemoryService.from_url(database(url)) as memory:
            return await memory.fact_history(app_name=app_name, user_id=user, fact_id=fact_id)

    found = run_command(run())
    if found is None:
        error(f"{app_name} / {user} has no fact {fact_id!r}")
        raise typer.Exit(1)
    fact, revisions = found
    state = "current" if fact.current else _not_current(fact).removeprefix("no: ")
    if fact.invalidated_by:
        state += f" by {fact.invalidated_by}"
    consoles.out.print(f"{fact.id}: {fact.text}", soft_wrap=True)
    consoles.out.print(
        f"{state}; valid from {_when(fact.valid_from)}; topics {', '.join(fact.topics)}"
        + (f"; expires {_when(fact.expire_time)}" if fact.expire_time else "")
    )
    table = Table()  # an invalidation's cause: in the state line above
    table.add_column("#")
    table.add_column("learned (UTC)", no_wrap=True)
    for column in ("action", "text before", "text after"):
        table.add_column(column, overflow="fold")  # wrapped whole, never cut
    for column in ("source", "model"):
        table.add_column(column)
    for r in revisions:
        source = f"{r.session_id or '-'} {' '.join(r.event_ids)}".strip()
        action = r.action
        if r.invalid_at is not None:  # when an invalidated fact stopped being true
            action += f" (true until {_when(r.invalid_at)[:10]})"
        table.add_row(
            str(r.revision),
            _when(r.create_time),
            action,
            r.old_text or "",
            r.new_text or "",
            source,
            r.model or "",
        )
    consoles.out.print(table)


@facts_app.command("failures")
def facts_failures(
    app_name: Annotated[
        str | None, typer.Option("--app", metavar="APP", help="Only this app.")
    ] = None,
    url: UrlOption = None,
    model: OldModelOption = None,
) -> None:
    """List the sessions whose generation failed, from the first failure, with their
    failed attempts and last error: those the next run retries, then those given up on
    (failed as often as the generator's attempts allow), which `memory generate
    --retry-failed` runs again."""
    if model is not None:  # it only ever named a model, which a listing never calls
        warn("--model is deprecated and ignored: memory facts failures calls no model")

    async def run() -> tuple[list[tuple[str, str, str, int, str | None]], int]:
        async with SqlMemoryService.from_url(database(url)) as memory:
            failing = await memory.generation_failures(app_name=app_name, retrying=True)
            return failing, memory.max_attempts

    failures, most = run_command(run())
    table = Table()
    for column in ("app", "user", "session", "attempts", "status", "last error"):
        table.add_column(column)
    retrying = [f for f in failures if f[3] < most]
    given_up = [f for f in failures if f[3] >= most]
    for app, user, session, attempts, message in [*retrying, *given_up]:
        status = "given up" if attempts >= most else "retried by the next run"
        table.add_row(app, user, session, str(attempts), status, message or "")
    consoles.out.print(table)
    consoles.out.print(
        f"{len(retrying)} session(s) to retry, {len(given_up)} given up on"
        f" (after {most} failed attempts)"
    )
