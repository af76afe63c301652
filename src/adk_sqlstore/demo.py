"""The lunch example, run on a real database with a scripted agent (no model, no network).

The worked example of the design notes behind adk-sqlstore (000, "a Monday preference,
recalled on Thursday"): on Monday the user says "I'm vegetarian, and please always
deliver to the Pune office reception."; the agent's ``remember_diet`` tool writes
``user:diet`` through the tool event's state delta, and the delivery instruction stays
in the transcript. The idle job (``adk-sqlstore memory ingest-idle``, as cron would run
it) finds the session and ingests it into memory. On Thursday, in a new process, a new
session already has ``user:diet``; the agent reads it with ``get_profile``, then calls
``load_memory("delivery address office")``, which searches memory and returns Monday's
turn about the Pune office reception. "One fact came back by key lookup and cost
nothing; the other came back by search and cost one tool call."

A minute later the user says "Actually, I eat fish now."; memory generation (a
scripted model, :mod:`.demo_facts`) turns each session into a dated fact and the new
one invalidates Monday's, which stays in its history.

Run it with ``adk-sqlstore demo``. Monday runs in this process, the idle job and
Thursday each in a child process. The demo keeps to an app of its own
(``adk-sqlstore-demo``): it never reads or changes another app's data (the README's
``lunch-app`` examples included), and each run first removes what its earlier runs left.
Piped to a file, its output is not wrapped at 80 columns.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from rich.console import Console
from rich.constrain import Constrain
from rich.markup import escape
from rich.rule import Rule
from rich.table import Table

from .console import make_console
from .demo_facts import FISH_MESSAGE, fish_follow_up
from .memory import SqlMemoryService
from .models import Content, Event, EventActions, FunctionCall, FunctionResponse, Part, Session
from .sessions import SqlSessionService
from .state import TEMP_PREFIX, USER_PREFIX
from .url_display import describe_url
from .urls import DATABASE_URL_ENV, resolve_url

__all__ = [
    "AGENT",
    "APP_NAME",
    "MEMORY_QUERY",
    "MONDAY_MESSAGE",
    "USER_ID",
    "ScriptedTurn",
    "ToolContext",
    "Transcript",
    "demo_week",
    "explain",
    "get_profile",
    "hybrid_recall",
    "load_memory",
    "main",
    "monday",
    "remember_diet",
    "run_turn",
    "thursday",
]

APP_NAME = "adk-sqlstore-demo"  # its own app: the demo touches no one else's data
USER_ID = "user-17"
AGENT = "lunch_assistant"
MONDAY_MESSAGE = "I'm vegetarian, and please always deliver to the Pune office reception."
MEMORY_QUERY = "delivery address office"


def demo_week(now: datetime | None = None) -> tuple[datetime, datetime]:
    """Monday 12:30 UTC of last week, and the Thursday after it (both in the past, so
    Monday's session is long idle when the idle job runs)."""
    now = now or datetime.now(UTC)
    this_monday = (now - timedelta(days=now.weekday())).replace(
        hour=12, minute=30, second=0, microsecond=0
    )
    monday = this_monday - timedelta(days=7)
    return monday, monday + timedelta(days=3)


@dataclass
class ToolContext:
    """What a tool sees, as in ADK: the session state, a pending delta, and memory."""

    session: Session
    memory: SqlMemoryService
    delta: dict[str, Any] = field(default_factory=dict)


async def remember_diet(ctx: ToolContext, diet: str) -> dict[str, Any]:
    """Called by the model when the user states a lasting preference."""
    ctx.delta["user:diet"] = diet.lower()
    return {"status": "saved", "diet": diet.lower()}


async def get_profile(ctx: ToolContext) -> dict[str, Any]:
    """What the agent knows about the user, by key lookup in state."""
    return {"diet": ctx.session.state.get("user:diet", "unknown")}


async def load_memory(ctx: ToolContext, query: str) -> dict[str, Any]:
    """ADK's load_memory tool: search this user's memory."""
    found = await ctx.memory.search_memory(
        app_name=ctx.session.app_name, user_id=ctx.session.user_id, query=query, limit=3
    )
    return {
        "memories": [
            {
                "author": m.author,
                "time": m.timestamp,
                "text": " ".join(p.text for p in m.content.parts or [] if p.text),
            }
            for m in found.memories
        ]
    }


TOOLS: dict[str, Callable[..., Awaitable[dict[str, Any]]]] = {
    "remember_diet": remember_diet,
    "get_profile": get_profile,
    "load_memory": load_memory,
}


@dataclass
class ScriptedTurn:
    """One user turn: the model's scripted tool calls, then its reply (computed from
    what the tools returned, so the transcript shows what really came back)."""

    user_text: str
    calls: list[tuple[str, dict[str, Any]]]
    reply: Callable[[dict[str, Any], dict[str, dict[str, Any]]], str]


class Transcript:
    """Prints events as a timeline: time, author, what happened."""

    def __init__(self, console: Console) -> None:
        self.console = console

    def event(self, event: Event, note: str = "") -> None:
        grid = Table.grid(padding=(0, 2))
        grid.add_column(no_wrap=True, style="dim")
        grid.add_column(no_wrap=True, style="bold", min_width=15)
        grid.add_column()
        when = datetime.fromtimestamp(event.timestamp, UTC).strftime("%a %H:%M:%S")
        for part in event.content.parts or [] if event.content else []:
            if part.text:
                grid.add_row(when, event.author, escape(part.text))
            elif part.function_call:
                args = ", ".join(
                    f"{k}={json.dumps(v)}" for k, v in (part.function_call.args or {}).items()
                )
                grid.add_row(
                    when, event.author, f"[cyan]→ {part.function_call.name}({escape(args)})[/]"
                )
            elif part.function_response:
                grid.add_row(
                    when,
                    event.author,
                    f"[cyan]← {part.function_response.name}: "
                    f"{escape(json.dumps(part.function_response.response))}[/]",
                )
        stored = event.actions.state_delta
        if stored:
            shown = ", ".join(f"{k} = {json.dumps(v)}" for k, v in stored.items())
            grid.add_row("", "", f"[green]state_delta stored: {escape(shown)}[/]")
        if note:
            grid.add_row("", "", f"[yellow]{escape(note)}[/]")
        self.console.print(grid)


async def run_turn(
    sessions: SqlSessionService,
    memory: SqlMemoryService,
    session: Session,
    turn: ScriptedTurn,
    clock: datetime,
    transcript: Transcript,
) -> None:
    """Append the events of one turn as ADK's Runner would, printing each."""
    invocation_id = f"e-{uuid.uuid4()}"
    tick = iter(range(1000))

    def event(author: str, role: str, *parts: Part, **fields: Any) -> Event:
        """The turn's next event, two seconds after the one before."""
        return Event(
            invocation_id=invocation_id,
            author=author,
            timestamp=(clock + timedelta(seconds=2 * next(tick))).timestamp(),
            content=Content(role=role, parts=list(parts)),
            **fields,
        )

    user_event = event("user", "user", Part(text=turn.user_text))
    await sessions.append_event(session, user_event)
    transcript.event(user_event)
    results: dict[str, dict[str, Any]] = {}
    for name, args in turn.calls:
        call_id = f"adk-{uuid.uuid4()}"
        call = event(
            AGENT, "model", Part(function_call=FunctionCall(id=call_id, name=name, args=args))
        )
        await sessions.append_event(session, call)
        transcript.event(call)
        ctx = ToolContext(session, memory, {TEMP_PREFIX + "request_id": invocation_id})
        results[name] = await TOOLS[name](ctx, **args)
        answer = FunctionResponse(id=call_id, name=name, response=results[name])
        response = event(
            AGENT,
            "user",
            Part(function_response=answer),
            actions=EventActions(state_delta=ctx.delta),
        )
        await sessions.append_event(session, response)
        note = ""
        if TEMP_PREFIX + "request_id" in session.state:
            note = (
                "temp:request_id was visible during the turn and is not stored (temp: keys"
                " never leave the invocation)"
            )
        transcript.event(response, note if ctx.delta.keys() - {TEMP_PREFIX + "request_id"} else "")
    text = turn.reply(session.state, results)
    reply = event(AGENT, "model", Part(text=text), turn_complete=True)
    await sessions.append_event(session, reply)
    transcript.event(reply)


def _monday_reply(state: dict[str, Any], results: dict[str, dict[str, Any]]) -> str:
    return (
        "Noted: vegetarian meals from now on, delivered to the Pune office reception."
        if results["remember_diet"]["status"] == "saved"
        else "Sorry, I could not save that."
    )


def _thursday_reply(state: dict[str, Any], results: dict[str, dict[str, Any]]) -> str:
    diet = results["get_profile"]["diet"]
    for memory in results["load_memory"]["memories"]:
        found = re.search(r"deliver to (?:the )?(.+?)[.!]?$", memory["text"])
        if found:
            return (
                f"A {diet} lunch, then. Shall I deliver it to the {found.group(1)}, as you"
                " asked before?"
            )
    return f"A {diet} lunch, then. Where should I deliver it?"


def _rule(title: str) -> Constrain:
    """A heading line, at most 100 columns wide (output to a file is 1,000 wide)."""
    return Constrain(Rule(title), width=100)


async def monday(console: Console) -> None:
    """Forget the demo's earlier runs (in its own app), then run Monday's conversation."""
    monday_at, _ = demo_week()
    async with SqlSessionService.from_url() as sessions:
        memory = SqlMemoryService(sessions.store)
        forgotten = await sessions.forget_user(app_name=APP_NAME, user_id=USER_ID)
        if forgotten["sessions"] or forgotten["memories"]:
            console.print(
                f"[dim](forgot an earlier run: {forgotten['sessions']} session(s),"
                f" {forgotten['memories']} memories of {USER_ID})[/]"
            )
        session = await sessions.create_session(app_name=APP_NAME, user_id=USER_ID)
        console.print(
            _rule(f"Monday {monday_at:%d %b}: process {os.getpid()}, session {session.id[:8]}")
        )
        await run_turn(
            sessions,
            memory,
            session,
            ScriptedTurn(
                MONDAY_MESSAGE,
                calls=[("remember_diet", {"diet": "vegetarian"})],
                reply=_monday_reply,
            ),
            monday_at,
            Transcript(console),
        )
        stored = await sessions.get_session(
            app_name=APP_NAME, user_id=USER_ID, session_id=session.id
        )
        assert stored is not None
        temp_stored = any(k.startswith(TEMP_PREFIX) for k in stored.state) or any(
            k.startswith(TEMP_PREFIX) for e in stored.events for k in e.actions.state_delta
        )
        console.print(
            f"stored: {len(stored.events)} events, revision {stored.revision},"
            f" temp: keys stored: {'yes' if temp_stored else 'no'}; memory holds"
            " nothing yet: the Runner never ingests by itself"
        )


async def thursday(console: Console) -> None:
    """A new session in a new process: key lookup for the diet, memory for the address."""
    _, thursday_at = demo_week()
    async with SqlSessionService.from_url() as sessions:
        memory = SqlMemoryService(sessions.store)
        session = await sessions.create_session(app_name=APP_NAME, user_id=USER_ID)
        console.print(
            _rule(
                f"Thursday {thursday_at:%d %b}: new process {os.getpid()}, new"
                f" session {session.id[:8]}"
            )
        )
        known = {k: v for k, v in session.state.items() if k.startswith(USER_PREFIX)}
        console.print(
            f"state of the new session before any turn: [green]{escape(json.dumps(known))}[/]"
        )
        await run_turn(
            sessions,
            memory,
            session,
            ScriptedTurn(
                "Lunch please.",
                calls=[("get_profile", {}), ("load_memory", {"query": MEMORY_QUERY})],
                reply=_thursday_reply,
            ),
            thursday_at,
            Transcript(console),
        )
        console.print(_rule("Where each fact came from"))
        await explain(sessions, memory, console, current=session.id)
        console.print(_rule(f"Thursday, a minute later: {FISH_MESSAGE!r}"))
        at = thursday_at + timedelta(minutes=1)

        async def append_turn(text: str, reply: str, clock: datetime) -> None:
            turn = ScriptedTurn(text, calls=[], reply=lambda state, results: reply)
            await run_turn(sessions, memory, session, turn, clock, Transcript(console))

        listing = await sessions.list_sessions(app_name=APP_NAME, user_id=USER_ID)
        (monday_id,) = [s.id for s in listing.sessions if s.id != session.id]
        await fish_follow_up(sessions, session, monday_id, at, console, append_turn)
        console.print(_rule("Recall without a shared word: hybrid search"))
        await hybrid_recall(sessions, console)


SPORT_FACT = "I play badminton every Sunday"
SPORT_QUESTION = "What sport do I like?"


async def hybrid_recall(sessions: SqlSessionService, console: Console) -> None:
    """BM25 alone cannot connect the question to the fact (no word in common); hybrid
    search with the local model (the ``embeddings`` extra) can."""
    try:
        import sentence_transformers  # noqa: F401
    except ImportError:
        console.print(
            escape(
                f"{SPORT_QUESTION!r} shares no word with {SPORT_FACT!r}, so keyword search"
                " cannot find it. Hybrid search with a local model can: pip install"
                ' torch==2.13.0 "adk-sqlstore[embeddings]", then run the demo again.'
            )
        )
        return
    async with SqlMemoryService(sessions.store, embedder="minilm") as hybrid:
        await hybrid.add_memory(
            app_name=APP_NAME,
            user_id=USER_ID,
            memories=[{"id": "demo-sport", "content": {"parts": [{"text": SPORT_FACT}]}}],
        )
        lexical = await SqlMemoryService(sessions.store).search_memory(
            app_name=APP_NAME, user_id=USER_ID, query=SPORT_QUESTION, limit=1
        )
        found = await hybrid.search_memory(
            app_name=APP_NAME, user_id=USER_ID, query=SPORT_QUESTION, limit=1
        )
    console.print(escape(f"remembered fact: {SPORT_FACT!r}; question: {SPORT_QUESTION!r}"))
    console.print(f"BM25 alone: {len(lexical.memories)} result(s) (no word in common)")
    for hit in found.memories:
        text = " ".join(p.text for p in hit.content.parts or [] if p.text)
        meta = hit.custom_metadata
        console.print(
            f"hybrid search (all-MiniLM-L6-v2, local): {escape(repr(text))}, vector similarity"
            f" {meta['vector_score']:.2f}, no word in common (BM25 none)"
        )


async def explain(
    sessions: SqlSessionService, memory: SqlMemoryService, console: Console, *, current: str
) -> None:
    """Trace ``user:diet`` to the event that wrote it, and the address to its memory."""
    user_state = await sessions.get_user_state(app_name=APP_NAME, user_id=USER_ID)
    listing = await sessions.list_sessions(app_name=APP_NAME, user_id=USER_ID)
    setters: dict[str, tuple[str, Event]] = {}
    for summary in listing.sessions:
        full = await sessions.get_session(app_name=APP_NAME, user_id=USER_ID, session_id=summary.id)
        for event in full.events if full else []:
            for key in event.actions.state_delta:
                best = setters.get(key)
                if key.startswith(USER_PREFIX) and (
                    best is None or best[1].timestamp <= event.timestamp
                ):
                    setters[key] = (summary.id, event)
    for key, value in sorted(user_state.items()):
        origin = setters.get(USER_PREFIX + key)
        if origin is None:
            continue
        session_id, event = origin
        parts = event.content.parts or [] if event.content else []
        tool = next((p.function_response.name for p in parts if p.function_response), None)
        when = datetime.fromtimestamp(event.timestamp, UTC).strftime("%a %d %b %H:%M:%S UTC")
        where = "this session" if session_id == current else f"session {session_id[:8]}"
        console.print(
            f"[bold]user:{key} = {escape(json.dumps(value))}[/]: key lookup, free. It is in the"
            f" user state of {APP_NAME}/{USER_ID}, written by the state_delta of event"
            f" {event.id[:8]} ({event.author}{', tool ' + tool if tool else ''}) in {where},"
            f" {when}."
        )
    found = await memory.search_memory(
        app_name=APP_NAME, user_id=USER_ID, query=MEMORY_QUERY, limit=1
    )
    if not found.memories:
        console.print("[bold]delivery address[/]: not found in memory (was the idle job run?)")
        return
    hit = found.memories[0]
    text = " ".join(p.text for p in hit.content.parts or [] if p.text)
    console.print(
        f"[bold]delivery address[/]: memory search, one tool call. load_memory"
        f"({MEMORY_QUERY!r}) returned {hit.author}'s turn {escape(repr(text))} (score"
        f" {hit.custom_metadata['score']:.3g}) from Monday's session"
        f" {str(hit.custom_metadata['session_id'])[:8]}, event"
        f" {str(hit.custom_metadata['event_id'])[:8]}, {hit.timestamp}; the idle job put it"
        " there."
    )


def main(argv: list[str] | None = None) -> int:
    """``adk-sqlstore demo``: Monday here; the idle job and Thursday in child processes."""
    argv = sys.argv[1:] if argv is None else argv
    console = make_console(markup=True)
    if argv[:1] == ["thursday"]:  # the child process; the URL comes through the environment
        asyncio.run(thursday(console))
        return 0
    url = argv[0] if argv else None
    env = dict(os.environ)
    if url:
        env[DATABASE_URL_ENV] = url  # not on a command line, where ps would show it
        os.environ[DATABASE_URL_ENV] = url
    target = resolve_url(url)
    console.print("[bold]adk-sqlstore demo[/]: the lunch example, scripted agent, no network")
    console.print(f"database: {escape(describe_url(target.url))}, app {APP_NAME}")
    asyncio.run(monday(console))
    console.print(_rule("Later: the idle job (as cron runs it)"))
    console.print("$ adk-sqlstore memory ingest-idle --idle-minutes 30")
    console.file.flush()
    job = subprocess.run(
        [
            sys.executable,
            "-m",
            "adk_sqlstore",
            "memory",
            "ingest-idle",
            "--idle-minutes",
            "30",
            "--app",
            APP_NAME,
        ],
        env=env,
        check=False,
    )
    if job.returncode:
        return job.returncode
    child = subprocess.run(
        [sys.executable, "-m", "adk_sqlstore.demo", "thursday"], env=env, check=False
    )
    if child.returncode == 0:
        _inspector_hint(console, url)
    return child.returncode


def _inspector_hint(console: Console, url: str | None) -> None:
    """How to see this store in the memory inspector (the demo's last lines)."""
    console.print(_rule("See what the agent remembers: the memory inspector"))
    given = "" if url is None else " --url URL  (the URL the demo was given)"
    console.print(f"$ adk-sqlstore inspect{given}")
    console.print(
        escape(
            f"then open http://127.0.0.1:8765/apps/{APP_NAME}/users/{USER_ID} in a browser"
            " (read-only; --write allows corrections; needs the inspector extra:"
            ' pip install "adk-sqlstore[inspector]", which make demo installs)'
        )
    )


if __name__ == "__main__":
    raise SystemExit(main())
