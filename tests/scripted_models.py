"""Scripted chat models for the memory generation tests: no network, answers written
by the test from what the store showed (the prompt's JSON)."""

from __future__ import annotations

import asyncio
import importlib.util
import json
from collections.abc import Callable
from typing import Any

import pytest

from adk_sqlstore import MemoryGenerator, SqlMemoryService, SqlSessionService
from adk_sqlstore.generation import ModelReply, ModelRequest

Answer = Callable[[dict[str, Any]], Any]
"""The prompt's JSON -> the reply: a dict (sent as JSON), a str (sent as it is), or an
exception (raised)."""


NEEDS_HTTPX = pytest.mark.skipif(
    importlib.util.find_spec("httpx") is None, reason="the openai extra (httpx) is not installed"
)
"""For the tests of the OpenAI-compatible model (make test-lowest has no httpx)."""


def memory_with(sessions: SqlSessionService, model: Any, **options: Any) -> SqlMemoryService:
    """A memory service on ``sessions``' store whose generator's model is ``model``."""
    return SqlMemoryService(sessions.store, generator=MemoryGenerator(model, **options))


def nothing_to_change(prompt: dict[str, Any]) -> dict[str, Any]:
    """Consolidation: every new fact is already known."""
    return {"decisions": [{"fact": f["id"], "action": "none"} for f in prompt["new_facts"]]}


def create_all(prompt: dict[str, Any]) -> dict[str, Any]:
    """Consolidation: every new fact is new."""
    return {"decisions": [{"fact": f["id"], "action": "create"} for f in prompt["new_facts"]]}


def last_event_as_a_fact(prompt: dict[str, Any]) -> dict[str, Any]:
    """Extraction: one fact, the text of the last event shown."""
    last = prompt["conversation"][-1]
    fact = {"text": last["text"], "topics": ["USER_PREFERENCES"], "event_ids": [last["id"]]}
    return {"facts": [fact]}


def alias(items: list[dict[str, Any]], words: str) -> str:
    """The alias (``E3``, ``F1``) of the shown item whose text holds ``words``."""
    found = [i["id"] for i in items if words.lower() in i["text"].lower()]
    assert len(found) == 1, (words, items)
    return str(found[0])


class ScriptedModel:
    """A :class:`~adk_sqlstore.generation.ChatModel` answering each purpose with a
    function of the prompt's JSON; records every request."""

    def __init__(
        self,
        extraction: Answer | None = None,
        consolidation: Answer | None = None,
        *,
        name: str = "scripted-model",
        delay: float = 0.0,
    ) -> None:
        self.name = name
        self.answers = {
            "extraction": extraction or (lambda prompt: {"facts": []}),
            "consolidation": consolidation or create_all,
        }
        self.requests: list[ModelRequest] = []
        self.delay = delay

    def prompts(self, purpose: str) -> list[dict[str, Any]]:
        """The JSON of the prompts of one purpose, in order."""
        return [json.loads(r.prompt) for r in self.requests if r.purpose == purpose]

    async def complete(self, request: ModelRequest) -> ModelReply:
        self.requests.append(request)
        if self.delay:
            await asyncio.sleep(self.delay)
        answer = self.answers[request.purpose](json.loads(request.prompt))
        if isinstance(answer, BaseException):
            raise answer
        text = answer if isinstance(answer, str) else json.dumps(answer)
        return ModelReply(text, prompt_tokens=len(request.prompt) // 4, completion_tokens=10)
