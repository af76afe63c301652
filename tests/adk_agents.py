"""A real ADK Runner with a scripted model (no network), for the end-to-end tests.

The lunch example of the design notes (000): on Monday a tool writes ``user:diet``
through ``ToolContext.state``; on Thursday, in another OS process, a new session sees
it, and ``load_memory`` (or ``preload_memory``) brings back Monday's turn about the
delivery address. Functions here run in the test process and in worker processes.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, Callable
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.tools import ToolContext, load_memory, preload_memory  # type: ignore[attr-defined]
from google.genai import types
from pydantic import Field

from adk_sqlstore.adk import SqlMemoryService, SqlSessionService

APP = "lunch-app"
USER = "user-17"
MONDAY = "I'm vegetarian, and please always deliver to the Pune office reception."

Step = Callable[[LlmRequest], LlmResponse]


def call(name: str, **args: Any) -> Step:
    return lambda request: LlmResponse(
        content=types.Content(
            role="model", parts=[types.Part(function_call=types.FunctionCall(name=name, args=args))]
        )
    )


def say(text: str | Callable[[LlmRequest], str]) -> Step:
    def step(request: LlmRequest) -> LlmResponse:
        body = text(request) if callable(text) else text
        return LlmResponse(
            content=types.Content(role="model", parts=[types.Part(text=body)]), turn_complete=True
        )

    return step


class ScriptedLlm(BaseLlm):
    """Answers each model call with the next scripted step (no network)."""

    model: str = "scripted-lunch-model"
    script: list[Any] = Field(default_factory=list)
    position: int = 0

    @property
    def capabilities(self) -> Any:
        from google.adk.models._capabilities import LlmCapabilities

        return LlmCapabilities(output_schema_and_tools=False)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        step = self.script[self.position]
        self.position += 1
        yield step(llm_request)


def remember_diet(diet: str, tool_context: ToolContext) -> dict[str, Any]:
    """Called by the model when the user states a lasting preference."""
    tool_context.state["user:diet"] = diet.lower()
    tool_context.state["temp:request_note"] = "not to be stored"
    return {"status": "saved", "diet": diet.lower()}


def get_profile(tool_context: ToolContext) -> dict[str, Any]:
    """What the agent knows about the user."""
    return {"diet": tool_context.state.get("user:diet", "unknown")}


def request_text(request: LlmRequest) -> str:
    """Everything the model was sent, as text (instructions, history, tool results)."""
    parts = []
    for content in request.contents:
        for part in content.parts or []:
            if part.text:
                parts.append(part.text)
            if part.function_response:
                parts.append(json.dumps(part.function_response.response, default=str))
    return "\n".join(parts)


def address_reply(request: LlmRequest) -> str:
    seen = request_text(request)
    if "Pune office reception" in seen:
        return "Shall I deliver your vegetarian lunch to the Pune office reception?"
    return "Where should I deliver it?"


def agent(script: list[Step], tools: list[Any]) -> LlmAgent:
    return LlmAgent(
        name="lunch_assistant",
        model=ScriptedLlm(script=script),
        instruction="Help the user order lunch.",
        tools=tools,
    )


async def run_turn(runner: Runner, session_id: str, text: str) -> list[Any]:
    message = types.Content(role="user", parts=[types.Part(text=text)])
    return [
        event
        async for event in runner.run_async(
            user_id=USER, session_id=session_id, new_message=message
        )
    ]


async def monday(url: str) -> str:
    """Monday's turn; the session is then ingested into memory. Returns its id."""
    async with SqlSessionService(url) as sessions:
        memory = SqlMemoryService(engine=sessions.engine)
        runner = Runner(
            app_name=APP,
            session_service=sessions,
            memory_service=memory,
            agent=agent(
                [
                    call("remember_diet", diet="Vegetarian"),
                    say("Noted: vegetarian, delivered to the Pune office."),
                ],
                [remember_diet],
            ),
        )
        session = await sessions.create_session(app_name=APP, user_id=USER)
        await run_turn(runner, session.id, MONDAY)
        await memory.ingest_session(app_name=APP, user_id=USER, session_id=session.id)
        return session.id


async def thursday(url: str, mode: str) -> dict[str, Any]:
    """Thursday's turn in a new session: what it saw, as JSON-able data."""
    async with SqlSessionService(url) as sessions:
        memory = SqlMemoryService(engine=sessions.engine)
        if mode == "load_memory":
            script = [
                call("get_profile"),
                call("load_memory", query="delivery address office"),
                say(address_reply),
            ]
            tools: list[Any] = [get_profile, load_memory]
        else:
            script = [say(address_reply)]
            tools = [preload_memory]
        runner = Runner(
            app_name=APP,
            session_service=sessions,
            memory_service=memory,
            agent=agent(script, tools),
        )
        session = await sessions.create_session(app_name=APP, user_id=USER)
        state_at_start = dict(session.state)
        events = await run_turn(runner, session.id, "Lunch please, deliver to my office.")
        stored = await sessions.get_session(app_name=APP, user_id=USER, session_id=session.id)
        assert stored is not None
        responses = {
            p.function_response.name: p.function_response.response
            for e in stored.events
            for p in ((e.content.parts if e.content else None) or [])
            if p.function_response
        }
        return {
            "state_at_start": state_at_start,
            "reply": events[-1].content.parts[0].text,
            "responses": json.loads(json.dumps(responses, default=str)),
            "stored_events": len(stored.events),
        }


def thursday_in_process(url: str, mode: str, results: Any) -> None:
    """Entry point of the worker process."""
    results.put(asyncio.run(thursday(url, mode)))


class BarrierSessionService(SqlSessionService):
    """Waits at a barrier after its first get_session, so that two Runners in two
    processes both load the session before either appends."""

    def __init__(self, url: str, barrier: Any) -> None:
        super().__init__(url)
        self._barrier: Any = barrier

    async def get_session(self, **kwargs: Any) -> Any:
        session = await super().get_session(**kwargs)
        if self._barrier is not None:
            barrier, self._barrier = self._barrier, None
            await asyncio.get_running_loop().run_in_executor(None, barrier.wait)
        return session


def race_turn(url: str, session_id: str, name: str, barrier: Any, results: Any) -> None:
    """One Runner turn on a shared session; reports 'ok' or the error's class name."""

    async def run() -> str:
        async with BarrierSessionService(url, barrier) as sessions:
            runner = Runner(
                app_name=APP, session_service=sessions, agent=agent([say(f"reply from {name}")], [])
            )
            try:
                await run_turn(runner, session_id, f"message from {name}")
            except Exception as exc:
                return type(exc).__module__ + "." + type(exc).__name__
            return "ok"

    results.put((name, asyncio.run(run())))


# -- artifacts: a tool saves a receipt; a later process's tool reads it ----------------------

RECEIPT = b"%PDF-1.7\n" + bytes(range(256)) * 64 + b"\n%%EOF"


async def save_receipt(order: str, tool_context: ToolContext) -> dict[str, Any]:
    """Called by the model once an order is placed: keeps the receipt as an artifact."""
    receipt = types.Part(inline_data=types.Blob(mime_type="application/pdf", data=RECEIPT))
    version = await tool_context.save_artifact(
        "receipt.pdf", receipt, custom_metadata={"order": order}
    )
    return {"status": "saved", "version": version}


async def read_receipt(tool_context: ToolContext) -> dict[str, Any]:
    """What the receipt of the session's order holds."""
    part = await tool_context.load_artifact("receipt.pdf")
    if part is None or part.inline_data is None or part.inline_data.data is None:
        return {"found": False}
    data = part.inline_data.data
    return {
        "found": True,
        "mime_type": part.inline_data.mime_type,
        "size": len(data),
        "same": data == RECEIPT,
    }


def _artifact_runner(sessions: SqlSessionService, script: list[Step], tools: list[Any]) -> Runner:
    from adk_sqlstore.adk import SqlArtifactService

    return Runner(
        app_name=APP,
        session_service=sessions,
        artifact_service=SqlArtifactService(store=sessions.store),
        agent=agent(script, tools),
    )


async def order_with_receipt(url: str) -> tuple[str, dict[str, int]]:
    """A turn whose tool saves the receipt; the session id and the artifact delta the
    stored events carry."""
    async with SqlSessionService(url) as sessions:
        runner = _artifact_runner(
            sessions,
            [call("save_receipt", order="thali"), say("Ordered; your receipt is saved.")],
            [save_receipt],
        )
        session = await sessions.create_session(app_name=APP, user_id=USER)
        await run_turn(runner, session.id, "One thali, please.")
        stored = await sessions.get_session(app_name=APP, user_id=USER, session_id=session.id)
        assert stored is not None
        delta: dict[str, int] = {}
        for event in stored.events:
            delta.update(event.actions.artifact_delta or {})
        return session.id, delta


async def receipt_later(url: str, session_id: str) -> dict[str, Any]:
    """A later turn of the same session whose tool reads the receipt."""
    async with SqlSessionService(url) as sessions:
        runner = _artifact_runner(
            sessions, [call("read_receipt"), say("Here is your receipt.")], [read_receipt]
        )
        await run_turn(runner, session_id, "Show me my receipt.")
        stored = await sessions.get_session(app_name=APP, user_id=USER, session_id=session_id)
        assert stored is not None
        for event in stored.events:
            for part in (event.content.parts if event.content else None) or []:
                if part.function_response and part.function_response.name == "read_receipt":
                    return dict(part.function_response.response or {})
        return {}


def receipt_later_in_process(url: str, session_id: str, results: Any) -> None:
    """Entry point of the worker process."""
    results.put(asyncio.run(receipt_later(url, session_id)))
