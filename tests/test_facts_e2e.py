"""Memory generation end to end through the real clients: an ADK ``BaseLlm`` (the
agent's own model) driven through ADK's request path after a ``Runner`` turn, and the
OpenAI-compatible path against a local HTTP server."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast

import pytest

pytest.importorskip("google.adk", reason="the adk extra is not installed")

from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.genai import types

from adk_sqlstore.adk import SqlMemoryService, SqlSessionService

from .adk_agents import APP, MONDAY, USER, ScriptedLlm, agent, run_turn, say

Answer = Callable[[str, dict[str, Any]], dict[str, Any]]


def _facts(system: str, prompt: dict[str, Any]) -> dict[str, Any]:
    """The model's side of generation: facts from the user's turns; a pescatarian fact
    invalidates the vegetarian one."""
    if "You extract memories" in system:
        facts = []
        for e in prompt["conversation"]:
            if e["author"] == "user" and "vegetarian" in e["text"]:
                facts.append(("The user is vegetarian.", e["id"]))
            if e["author"] == "user" and "fish" in e["text"]:
                facts.append(("The user eats fish now.", e["id"]))
        return {
            "facts": [
                {"text": t, "topics": ["USER_PREFERENCES"], "event_ids": [i]} for t, i in facts
            ]
        }
    decisions: list[dict[str, Any]] = []
    for new in prompt["new_facts"]:
        decisions.append({"fact": new["id"], "action": "create"})
        for old in prompt["stored_facts"]:
            if "vegetarian" in old["text"] and "fish" in new["text"]:
                decisions.append({"fact": new["id"], "action": "invalidate", "target": old["id"]})
    return {"decisions": decisions}


def generation_step(request: LlmRequest) -> LlmResponse:
    """A ScriptedLlm step answering a generator's request as ADK sends it."""
    config = request.config
    assert config is not None and config.response_mime_type == "application/json"
    system = str(config.system_instruction)
    (content,) = request.contents
    assert content.role == "user" and content.parts and content.parts[0].text
    answer = _facts(system, json.loads(content.parts[0].text))
    usage = types.GenerateContentResponseUsageMetadata(
        prompt_token_count=123, candidates_token_count=7
    )
    return LlmResponse(
        content=types.Content(role="model", parts=[types.Part(text=json.dumps(answer))]),
        usage_metadata=usage,
    )


async def test_the_agents_own_adk_model_generates_facts_after_a_runner_turn(
    db_url: str,
) -> None:
    """The agent's ``BaseLlm`` instance is the generator's model: Monday's turn through
    ADK's Runner, then ``add_session_to_memory`` generates the fact through the same
    model (ADK's LlmRequest, system instruction and JSON output asked for); Thursday's
    "I eat fish now" invalidates it."""
    lunch = agent([say("Noted: vegetarian."), generation_step], tools=[])
    model = cast(ScriptedLlm, lunch.model)
    async with SqlSessionService(db_url) as sessions:
        memory = SqlMemoryService(engine=sessions.engine, generator=model)
        runner = Runner(app_name=APP, session_service=sessions, memory_service=memory, agent=lunch)
        monday = await sessions.create_session(app_name=APP, user_id=USER)
        await run_turn(runner, monday.id, MONDAY)
        stored = await sessions.get_session(app_name=APP, user_id=USER, session_id=monday.id)
        assert stored is not None
        await memory.add_session_to_memory(stored)
        (fact,) = await memory.list_facts(app_name=APP, user_id=USER)
        assert fact.text == "The user is vegetarian."
        assert fact.event_ids == (stored.events[0].id,) and stored.events[0].author == "user"
        model.script += [say("Fish it is."), generation_step, generation_step]
        thursday = await sessions.create_session(app_name=APP, user_id=USER)
        await run_turn(runner, thursday.id, "Actually, I eat fish now.")
        report = await memory.core.ingest_session(
            app_name=APP, user_id=USER, session_id=thursday.id
        )
        assert report.generation is not None
        assert (report.generation.created, report.generation.invalidated) == (1, 1)
        assert report.generation.prompt_tokens == 2 * 123
        current = await memory.list_facts(app_name=APP, user_id=USER)
        assert [f.text for f in current] == ["The user eats fish now."]
        history = await memory.fact_history(app_name=APP, user_id=USER, fact_id=fact.id)
        assert history is not None and history[1][-1].model == "scripted-lunch-model"
        found = await memory.search_memory(app_name=APP, user_id=USER, query="fish")
        assert any(
            m.custom_metadata and m.custom_metadata.get("kind") == "fact" for m in found.memories
        )


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    answer: Answer
    requests: list[tuple[dict[str, str], dict[str, Any]]]


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        server = cast(_Server, self.server)
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        server.requests.append(({k.lower(): v for k, v in self.headers.items()}, body))
        system, prompt = (m["content"] for m in body["messages"])
        text = json.dumps(server.answer(system, json.loads(prompt)))
        reply = {
            "choices": [{"message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 200, "completion_tokens": 20},
        }
        raw = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def chat_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Server]:
    httpd = _Server(("127.0.0.1", 0), _Handler)
    httpd.answer, httpd.requests = _facts, []
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{httpd.server_address[1]}/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local-test")
    try:
        yield httpd
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


async def test_an_openai_compatible_server_named_in_the_uri_generates_facts(
    db_url: str, chat_server: _Server
) -> None:
    """``?generator=openai:MODEL`` in the URI, ``$OPENAI_BASE_URL`` and
    ``$OPENAI_API_KEY`` in the environment: two sessions, two extraction requests and
    one consolidation request to the local server, in OpenAI's shape."""
    sep = "&" if "?" in db_url else "?"
    async with SqlSessionService(db_url) as sessions:
        memory = SqlMemoryService(f"{db_url}{sep}generator=openai:local-model")
        try:
            for text in (MONDAY, "Actually, I eat fish now."):
                session = await sessions.create_session(app_name=APP, user_id=USER)
                await sessions.append_event(session, _user_event(text))
                await memory.add_session_to_memory(session)
            current = await memory.list_facts(app_name=APP, user_id=USER)
        finally:
            await memory.close()
    assert [f.text for f in current] == ["The user eats fish now."]
    bodies = [body for _, body in chat_server.requests]
    assert [b["model"] for b in bodies] == ["local-model"] * 3
    assert all(b["response_format"] == {"type": "json_object"} for b in bodies)
    assert ["You keep" in b["messages"][0]["content"] for b in bodies] == [False, False, True]
    assert {h["authorization"] for h, _ in chat_server.requests} == {"Bearer sk-local-test"}


def _user_event(text: str) -> Any:
    from google.adk.events import Event

    return Event(author="user", content=types.Content(role="user", parts=[types.Part(text=text)]))
