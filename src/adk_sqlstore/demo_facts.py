"""The demo's Thursday follow-up: "actually, I eat fish now" (the design notes' own
example of what transcripts cannot do), with memory generation.

The user corrects Monday's preference in Thursday's session. A scripted model (no
network) extracts one fact per session; consolidating Thursday's, it finds Monday's
"vegetarian" fact among the user's stored facts and invalidates it. The current fact
says pescatarian; the vegetarian one stays in its history; both are printed with the
turns they come from.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from rich.console import Console
from rich.markup import escape

from .generation import MemoryGenerator, ModelReply, ModelRequest
from .memory import SqlMemoryService
from .models import Session
from .sessions import SqlSessionService

__all__ = ["FISH_MESSAGE", "DemoModel", "fish_follow_up"]

FISH_MESSAGE = "Actually, I eat fish now."


class DemoModel:
    """A scripted chat model: the diet a user's turn states, as a fact; a new diet
    invalidates the stored one. What a real model (Gemini, a local one) answers, for a
    conversation this simple."""

    name = "scripted-demo-model"

    async def complete(self, request: ModelRequest) -> ModelReply:
        prompt = json.loads(request.prompt)
        if request.purpose == "extraction":
            facts = []
            for event in prompt["conversation"]:
                text = event["text"].lower()
                if event["author"] != "user":
                    continue
                if "vegetarian" in text:
                    facts.append(("The user is vegetarian.", event))
                if "fish" in text:
                    facts.append(("The user eats fish now (pescatarian).", event))
            answer: dict[str, Any] = {
                "facts": [
                    {
                        "text": fact,
                        "topics": ["USER_PREFERENCES"],
                        "valid_from": event["time"],
                        "event_ids": [event["id"]],
                    }
                    for fact, event in facts
                ]
            }
        else:
            decisions: list[dict[str, Any]] = []
            for new in prompt["new_facts"]:
                decisions.append({"fact": new["id"], "action": "create"})
                for old in prompt["stored_facts"]:
                    if "vegetarian" in old["text"] and "fish" in new["text"]:
                        decisions.append(
                            {"fact": new["id"], "action": "invalidate", "target": old["id"]}
                        )
            answer = {"decisions": decisions}
        return ModelReply(json.dumps(answer))


async def _turn_text(
    sessions: SqlSessionService, app_name: str, user_id: str, session_id: str | None, event_id: str
) -> str:
    session = (
        await sessions.get_session(app_name=app_name, user_id=user_id, session_id=session_id)
        if session_id
        else None
    )
    for event in session.events if session else []:
        if event.id == event_id and event.content:
            return " ".join(p.text for p in event.content.parts or [] if p.text)
    return "?"


async def fish_follow_up(
    sessions: SqlSessionService,
    session: Session,
    monday_session_id: str,
    clock: datetime,
    console: Console,
    append_turn: Any,
) -> None:
    """Append Thursday's correction (``append_turn(text, reply, clock)``), generate
    facts from Monday's and Thursday's sessions, and print the current fact and the
    history of the one it replaced, with their source turns."""
    app_name, user_id = session.app_name, session.user_id
    await append_turn(FISH_MESSAGE, "Noted: fish is fine from now on.", clock)
    generator = MemoryGenerator(DemoModel())
    async with SqlMemoryService(sessions.store, generator=generator) as memory:
        for session_id in (monday_session_id, session.id):
            await memory.generate(app_name=app_name, user_id=user_id, session_id=session_id)
        facts = await memory.list_facts(app_name=app_name, user_id=user_id, history=True)
        current = [f for f in facts if f.current]
        for fact in current:
            source = await _turn_text(
                sessions, app_name, user_id, fact.session_id, fact.event_ids[0]
            )
            console.print(
                f"[bold]current fact[/]: {escape(repr(fact.text))} (valid from"
                f" {fact.valid_from[:10] if fact.valid_from else '?'}), from the user's turn"
                f" {escape(repr(source))} in session {str(fact.session_id)[:8]}, event"
                f" {fact.event_ids[0][:8]}"
            )
        for fact in (f for f in facts if not f.current):
            found = await memory.fact_history(app_name=app_name, user_id=user_id, fact_id=fact.id)
            assert found is not None
            first, last = found[1][0], found[1][-1]
            made = await _turn_text(
                sessions, app_name, user_id, first.session_id, first.event_ids[0]
            )
            ended = await _turn_text(
                sessions, app_name, user_id, last.session_id, last.event_ids[0]
            )
            console.print(
                f"[bold]in its history[/]: {escape(repr(fact.text))}: {first.action}d from the"
                f" user's turn {escape(repr(made))} (session {str(first.session_id)[:8]}),"
                f" {last.action}d by {escape(repr(ended))} (session"
                f" {str(last.session_id)[:8]}); search no longer returns it"
            )
