"""Commands on memory: ``memory search``, ``memory ingest-idle``, ``memory reindex``,
``memory embed``."""

from __future__ import annotations

import math
from datetime import timedelta
from enum import StrEnum
from typing import Annotated

import typer
from rich.table import Table

from ..errors import ConfigurationError
from ..generation.writing import FACT_KIND
from ..memory import IngestReport, SqlMemoryService
from ..models import MemoryEntry
from .common import (
    AppOption,
    UrlOption,
    consoles,
    database,
    error,
    memory_app,
    progress_bar,
    renamed,
    run_command,
)
from .facts import OldModelOption, not_current, print_generation

__all__ = ["memory_embed", "memory_ingest_idle", "memory_reindex", "memory_search"]

EmbedderOption = Annotated[
    str | None,
    typer.Option(
        "--embedder",
        metavar="EMBEDDER",
        help="Embedder for hybrid search: minilm (local; the embeddings extra), openai,"
        " openai:MODEL, google, google:MODEL or package.module:NAME; default:"
        " ?embedder= in the URL, else none (BM25 alone).",
    ),
]

LanguageOption = Annotated[
    str | None,
    typer.Option(
        metavar="LANGUAGE",
        help="Search language: a Snowball language (english, german, french, ...) or"
        " 'simple' (no stemming or stop words); default: ?language= in the URL, else"
        " english.",
    ),
]


class Kind(StrEnum):
    """What ``memory search --kind`` keeps: search_memory's ``kind``."""

    facts = "facts"
    turns = "turns"


KindOption = Annotated[
    Kind | None,
    typer.Option(
        metavar="KIND",
        case_sensitive=False,
        help="facts (what memory generate made of the sessions) or turns (what was said):"
        " only that kind. Default: both, ranked together.",
    ),
]
HistoryOption = Annotated[
    bool,
    typer.Option(
        "--history",
        help="Also up to --limit facts no longer current (contradicted or expired), after"
        " the others, with when they stopped being true.",
    ),
]


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
    kind: KindOption = None,
    history: HistoryOption = False,
    url: UrlOption = None,
    language: LanguageOption = None,
    embedder: EmbedderOption = None,
    model: OldModelOption = None,
) -> None:
    """Search one user's memories; prints score, time, kind (turn or fact), author,
    text and session (a fact's: the one it comes from), best first. With an embedder,
    the score is the hybrid one (BM25 fused with vector similarity); with --history,
    whether each fact is current, and if not since when."""
    embedder = renamed("--model", model, "--embedder", embedder)

    async def run() -> list[MemoryEntry]:
        async with SqlMemoryService.from_url(
            database(url), language=language, embedder=embedder
        ) as memory:
            found = await memory.search_memory(
                app_name=app_name,
                user_id=user,
                query=query,
                limit=limit,
                kind=None if kind is None else kind.value,
                history=history,
            )
        return found.memories

    memories = run_command(run())
    consoles.out.print(f"memories of {app_name} / {user} for {query!r}", soft_wrap=True)
    table = Table()
    table.add_column("score", justify="right")
    table.add_column("time (UTC)", no_wrap=True)
    for column in ("kind", "author", "text", "session", *(["current"] if history else [])):
        table.add_column(column)
    for entry in memories:
        table.add_row(*_found_row(entry, history=history))
    consoles.out.print(table)
    consoles.out.print(f"{len(memories)} result(s)")


def _found_row(entry: MemoryEntry, *, history: bool) -> list[str]:
    """A found memory's row: score, time, kind, author, text, session and, with
    ``history``, whether a fact is current (``not_current``'s words if not)."""
    metadata = entry.custom_metadata or {}
    fact = metadata.get("kind") == FACT_KIND
    row = [
        f"{metadata['score']:.3g}",
        (entry.timestamp or "")[:19].replace("T", " "),
        "fact" if fact else "turn",
        entry.author or "",
        "\n".join(p.text for p in entry.content.parts or [] if p.text),
        metadata.get("session_id") or metadata.get("source_session_id") or "",
    ]
    if history:
        current = metadata.get("current", True)
        past = (metadata.get(k) for k in ("invalid_time", "invalidate_time", "expire_time"))
        row.append("" if not fact else "yes" if current else not_current(*past))
    return row


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
    again does nothing new until sessions change. With a generator (?generator= in the
    URL), facts are generated after each ingestion, and sessions whose generation
    failed before are retried; what generation did is printed. Exits with 1 if any
    session could not be ingested or its generation failed (the others are done).
    """
    if not math.isfinite(idle_minutes):
        raise typer.BadParameter("must be a number of minutes", param_hint="--idle-minutes")

    async def run() -> IngestReport:
        idle_for = timedelta(minutes=idle_minutes)
        async with SqlMemoryService.from_url(database(url)) as memory:
            pending = await memory.count_idle_sessions(idle_for=idle_for, app_name=app_name)
            with progress_bar("ingesting", "sessions, {task.fields[events]} events") as progress:
                task = progress.add_task("ingest", total=pending, events=0)

                def advance(report: IngestReport) -> None:
                    done = progress.tasks[0].fields["events"] + report.events
                    progress.update(task, advance=report.sessions + report.failed, events=done)

                return await memory.ingest_idle_sessions(
                    idle_for, app_name=app_name, on_session=advance
                )

    total = run_command(run())
    consoles.out.print(
        f"ingested {total.sessions} session(s), {total.events} event(s)"
        f" with text (idle for {idle_minutes:g} min or more)"
    )
    generated = total.generation is None or print_generation(
        total.generation, heading="facts generated: "
    )
    if total.failed:
        for line in total.errors:
            error(f"not ingested: {line}")
        error(f"{total.failed} session(s) could not be ingested")
        raise typer.Exit(1)
    if not generated:
        raise typer.Exit(1)


@memory_app.command("reindex")
def memory_reindex(
    language: LanguageOption = None,
    app_name: Annotated[
        str | None, typer.Option("--app", metavar="APP", help="Only this app.")
    ] = None,
    batch_size: Annotated[
        int, typer.Option(metavar="N", min=1, max=100_000, help="Memories per transaction.")
    ] = 1000,
    url: UrlOption = None,
) -> None:
    """Index memories again from their stored text, for a search language or after an
    upgrade that changed the text analysis.

    Memories already indexed for the language by this version are skipped, so it can
    be run again or resumed after an interruption; each batch is one transaction.
    Services searching these memories should use the same language
    (SqlMemoryService(language=...), or ?language= in the URL).
    """

    async def run() -> tuple[int, str]:
        async with SqlMemoryService.from_url(database(url), language=language) as memory:
            pending = await memory.count_to_reindex(app_name=app_name)
            with progress_bar("re-indexing", "memories") as progress:
                task = progress.add_task("reindex", total=pending)
                done = await memory.reindex(
                    app_name=app_name,
                    batch_size=batch_size,
                    on_batch=lambda n: progress.update(task, advance=n),
                )
            return done, memory.language

    done, used = run_command(run())
    consoles.out.print(f"re-indexed {done} memories for search language {used!r}")
    if done == 0 and app_name is not None:
        consoles.out.print(
            f"(none of app {app_name!r} needed it: already indexed so, or the app has no memories)"
        )


@memory_app.command("embed")
def memory_embed(
    embedder: EmbedderOption = None,
    app_name: Annotated[
        str | None, typer.Option("--app", metavar="APP", help="Only this app.")
    ] = None,
    batch_size: Annotated[
        int, typer.Option(metavar="N", min=1, max=100_000, help="Memories per transaction.")
    ] = 256,
    url: UrlOption = None,
    model: OldModelOption = None,
) -> None:
    """Embed the memories that have no vector of the embedder's model (hybrid search).

    For memories written before an embedder was configured, or while it failed. On
    PostgreSQL it first enables pgvector (CREATE EXTENSION vector) if the server has
    it. Memories already embedded for the model are skipped, so it can be run again or
    resumed after an interruption; each batch is one transaction.
    """
    embedder = renamed("--model", model, "--embedder", embedder)

    async def run() -> tuple[int, str]:
        async with SqlMemoryService.from_url(database(url), embedder=embedder) as memory:
            if memory.embedder is None:
                raise ConfigurationError(
                    "no embedder: pass --embedder (e.g. --embedder minilm) or ?embedder= in the URL"
                )
            pending = await memory.count_to_embed(app_name=app_name)
            with progress_bar("embedding", "memories") as progress:
                task = progress.add_task("embed", total=pending)
                done = await memory.embed_missing(
                    app_name=app_name,
                    batch_size=batch_size,
                    on_batch=lambda n: progress.update(task, advance=n),
                )
            return done, memory.embedder.model

    done, model = run_command(run())
    consoles.out.print(f"embedded {done} memories with {model}")
