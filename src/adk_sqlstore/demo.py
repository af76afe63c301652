"""The lunch example, run on a real database with a scripted agent (no model, no network).

From the design notes behind adk-sqlstore (cross-session memory, "a Monday preference,
recalled on Thursday"): on Monday the user says "I'm vegetarian, and please always
deliver to the Pune office reception."; the agent's ``remember_diet`` tool writes
``user:diet`` through the tool event's state delta. On Thursday, in a new process, a
new session already has ``user:diet`` in its state, and ``get_profile`` reads it
without asking the user again.

Run it with ``adk-sqlstore demo``; Thursday runs as ``python -m adk_sqlstore.demo
thursday`` in a child process.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.rule import Rule

from .engine import DATABASE_URL_ENV, redact_url, resolve_url
from .models import Content, Event, EventActions, FunctionCall, FunctionResponse, Part, Session
from .sessions import SqlSessionService
from .state import TEMP_PREFIX

APP_NAME = "lunch-app"
USER_ID = "user-17"
AGENT = "lunch_assistant"
MONDAY_MESSAGE = "I'm vegetarian, and please always deliver to the Pune office reception."


def demo_week(now: datetime | None = None) -> tuple[datetime, datetime]:
    """Monday 12:30 UTC of last week, and the Thursday after it (both in the past)."""
    now = now or datetime.now(UTC)
    this_monday = (now - timedelta(days=now.weekday())).replace(
        hour=12, minute=30, second=0, microsecond=0
    )
    monday = this_monday - timedelta(days=7)
    return monday, monday + timedelta(days=3)


# -- the agent's tools (ADK style: they write state through the context's delta) --------


def remember_diet(diet: str, state: dict[str, Any], delta: dict[str, Any]) -> dict[str, Any]:
    """Called by the model when the user states a lasting preference."""
    delta["user:diet"] = diet.lower()
    return {"status": "saved", "diet": diet.lower()}


def get_profile(state: dict[str, Any], delta: dict[str, Any]) -> dict[str, Any]:
    """Reads what the agent knows about the user."""
    return {"diet": state.get("user:diet", "unknown")}


TOOLS: dict[str, Callable[..., dict[str, Any]]] = {
    "remember_diet": remember_diet,
    "get_profile": get_profile,
}


class ScriptedTurn:
    """One user turn: the model's scripted tool calls, then its reply."""

    def __init__(
        self,
        user_text: str,
        calls: list[tuple[str, dict[str, Any]]],
        reply: Callable[[dict[str, Any]], str],
    ) -> None:
        self.user_text = user_text
        self.calls = calls
        self.reply = reply


async def run_turn(
    service: SqlSessionService,
    session: Session,
    turn: ScriptedTurn,
    clock: datetime,
    console: Console,
) -> None:
    """Append the events of one turn as ADK's Runner would, printing each."""
    invocation_id = f"e-{uuid.uuid4()}"
    tick = iter(range(1000))

    def at() -> float:
        return (clock + timedelta(seconds=2 * next(tick))).timestamp()

    async def emit(event: Event) -> None:
        await service.append_event(session, event)
        _print_event(console, event)

    await emit(
        Event(
            invocation_id=invocation_id,
            author="user",
            timestamp=at(),
            content=Content(role="user", parts=[Part(text=turn.user_text)]),
        )
    )
    for name, args in turn.calls:
        call_id = f"adk-{uuid.uuid4()}"
        await emit(
            Event(
                invocation_id=invocation_id,
                author=AGENT,
                timestamp=at(),
                content=Content(
                    role="model",
                    parts=[Part(function_call=FunctionCall(id=call_id, name=name, args=args))],
                ),
            )
        )
        delta: dict[str, Any] = {"temp:request_id": invocation_id}
        result = TOOLS[name](**args, state=session.state, delta=delta)
        await emit(
            Event(
                invocation_id=invocation_id,
                author=AGENT,
                timestamp=at(),
                content=Content(
                    role="user",
                    parts=[
                        Part(
                            function_response=FunctionResponse(
                                id=call_id, name=name, response=result
                            )
                        )
                    ],
                ),
                actions=EventActions(state_delta=delta),
            )
        )
    await emit(
        Event(
            invocation_id=invocation_id,
            author=AGENT,
            timestamp=at(),
            turn_complete=True,
            content=Content(role="model", parts=[Part(text=turn.reply(session.state))]),
        )
    )


def _print_event(console: Console, event: Event) -> None:
    when = datetime.fromtimestamp(event.timestamp, UTC).strftime("%a %H:%M:%S")
    parts = event.content.parts if event.content and event.content.parts else []
    for part in parts:
        if part.text:
            line = part.text
        elif part.function_call:
            args = ", ".join(
                f"{k}={json.dumps(v)}" for k, v in (part.function_call.args or {}).items()
            )
            line = f"[cyan]→ {part.function_call.name}({escape(args)})[/]"
            console.print(f"  [dim]{when}[/]  [bold]{event.author:<16}[/] {line}")
            continue
        elif part.function_response:
            line = (
                f"[cyan]← {part.function_response.name}: "
                f"{escape(json.dumps(part.function_response.response))}[/]"
            )
            console.print(f"  [dim]{when}[/]  [bold]{event.author:<16}[/] {line}")
            continue
        else:
            continue
        console.print(f"  [dim]{when}[/]  [bold]{event.author:<16}[/] {escape(line)}")
    stored = event.actions.state_delta
    if stored:
        shown = ", ".join(f"{k} = {json.dumps(v)}" for k, v in stored.items())
        console.print(f"  {'':<10}  {'':<16} [green]state_delta stored: {escape(shown)}[/]")


def _print_temp_note(console: Console) -> None:
    console.print(
        f"  {'':<10}  {'':<16} [yellow]temp:request_id was visible to the turn but not"
        " stored (temp: keys never leave the invocation)[/]"
    )


async def monday(url: str | None, console: Console) -> Session:
    """Clear the demo user's earlier sessions, then run Monday's conversation."""
    monday_at, _ = demo_week()
    async with SqlSessionService.from_url(url) as service:
        old = await service.list_sessions(app_name=APP_NAME, user_id=USER_ID)
        for s in old.sessions:
            await service.delete_session(app_name=APP_NAME, user_id=USER_ID, session_id=s.id)
        if old.sessions:
            console.print(
                f"[dim](removed {len(old.sessions)} session(s) of {USER_ID} left by an"
                " earlier run)[/]"
            )
        session = await service.create_session(app_name=APP_NAME, user_id=USER_ID)
        console.print(
            Rule(f"Monday {monday_at:%d %b}, process {os.getpid()}, session {session.id[:8]}")
        )
        await run_turn(
            service,
            session,
            ScriptedTurn(
                MONDAY_MESSAGE,
                calls=[("remember_diet", {"diet": "vegetarian"})],
                reply=lambda state: (
                    "Noted: vegetarian meals from now on, delivered to the Pune office reception."
                ),
            ),
            monday_at,
            console,
        )
        _print_temp_note(console)
        stored = await service.get_session(
            app_name=APP_NAME, user_id=USER_ID, session_id=session.id
        )
        assert stored is not None
        temp_stored = any(k.startswith(TEMP_PREFIX) for k in stored.state) or any(
            k.startswith(TEMP_PREFIX) for e in stored.events for k in e.actions.state_delta
        )
        console.print(
            f"  stored: {len(stored.events)} events, revision {stored.revision},"
            f" temp: keys stored: {'yes' if temp_stored else 'no'}"
        )
        return stored


async def thursday(url: str | None, console: Console) -> None:
    """A new session in a new process: ``user:diet`` is already in its state."""
    _, thursday_at = demo_week()
    async with SqlSessionService.from_url(url) as service:
        session = await service.create_session(app_name=APP_NAME, user_id=USER_ID)
        console.print(
            Rule(
                f"Thursday {thursday_at:%d %b}, new process {os.getpid()}, new"
                f" session {session.id[:8]}"
            )
        )
        known = {k: v for k, v in session.state.items() if k.startswith("user:")}
        console.print(
            f"  state of the new session before any turn: [green]{escape(json.dumps(known))}[/]"
        )
        await run_turn(
            service,
            session,
            ScriptedTurn(
                "Lunch please.",
                calls=[("get_profile", {})],
                reply=lambda state: (
                    f"A {state.get('user:diet', 'any')} lunch, then. Where should I deliver it?"
                ),
            ),
            thursday_at,
            console,
        )
        console.print(Rule("Where each fact came from"))
        await explain(service, console, current=session.id)


async def explain(service: SqlSessionService, console: Console, *, current: str) -> None:
    """Trace each ``user:`` key to the event whose state delta set it last."""
    user_state = await service.get_user_state(app_name=APP_NAME, user_id=USER_ID)
    listing = await service.list_sessions(app_name=APP_NAME, user_id=USER_ID)
    setters: dict[str, tuple[Session, Event]] = {}
    for summary in listing.sessions:
        full = await service.get_session(app_name=APP_NAME, user_id=USER_ID, session_id=summary.id)
        for event in full.events if full else []:
            for key in event.actions.state_delta:
                if key.startswith("user:"):
                    best = setters.get(key)
                    if best is None or best[1].timestamp <= event.timestamp:
                        setters[key] = (full, event)  # type: ignore[assignment]
    for key, value in sorted(user_state.items()):
        origin = setters.get("user:" + key)
        if origin is None:
            console.print(f"  user:{key} = {json.dumps(value)}: set outside any event")
            continue
        session, event = origin
        parts = event.content.parts or [] if event.content else []
        call = next((p.function_response.name for p in parts if p.function_response), None)
        when = datetime.fromtimestamp(event.timestamp, UTC).strftime("%a %d %b %H:%M:%S UTC")
        day = "this session" if session.id == current else f"session {session.id[:8]}"
        console.print(
            f"  [bold]user:{key} = {escape(json.dumps(value))}[/]: key lookup in the user state of"
            f" {APP_NAME}/{USER_ID}; written by the state_delta of event {event.id[:8]}"
            f" ({event.author}{', tool ' + call if call else ''}) in {day}, {when}."
        )
    console.print(
        "  [bold]delivery address[/]: not in state; it lives only in Monday's transcript."
        " (Searching it is the memory service's job.)"
    )


def main(argv: list[str] | None = None) -> int:
    """``adk-sqlstore demo``: Monday here, Thursday in a child process."""
    argv = sys.argv[1:] if argv is None else argv
    console = Console(highlight=False)
    if argv[:1] == ["thursday"]:
        asyncio.run(thursday(None, console))  # the URL comes through the environment
        return 0
    url = argv[0] if argv else None
    target = resolve_url(url)
    console.print("[bold]adk-sqlstore demo[/]: the lunch example, scripted agent, no network")
    console.print(f"database: {redact_url(target.url)}")
    asyncio.run(monday(url, console))
    env = dict(os.environ)
    if url:
        env[DATABASE_URL_ENV] = url  # not on the command line, where ps would show it
    child = subprocess.run(
        [sys.executable, "-m", "adk_sqlstore.demo", "thursday"], env=env, check=False
    )
    return child.returncode


if __name__ == "__main__":
    raise SystemExit(main())
