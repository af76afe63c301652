"""The chat model a memory generator calls: the protocol, requests, replies, and plain
callables.

A model takes a system instruction and a prompt and answers with text (JSON, as the
prompt asks). Three kinds plug in (:func:`.models.resolve_model`):

- any ADK model (``google.adk.models.BaseLlm``: ``Gemini``, ``LiteLlm``, ``Claude``,
  ...) or a model name resolved as ADK resolves ``LlmAgent(model="...")``
  (:mod:`.adk_model`);
- an OpenAI-compatible chat endpoint over HTTP (:mod:`.openai_chat`);
- an object of yours with ``name`` and ``async complete(request)``, or a callable
  ``(system, prompt) -> str`` (sync or async), wrapped by :class:`CallableModel`.

The store calls a model outside every database transaction, with a timeout
(:class:`~adk_sqlstore.generation.MemoryGenerator`'s ``timeout``).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

__all__ = ["CallableModel", "ChatModel", "ModelReply", "ModelRequest"]


@dataclass(frozen=True)
class ModelRequest:
    """One call to a model.

    Attributes:
        system: the system instruction (what to do, the output's JSON shape).
        prompt: the user message: the conversation or the facts, as data.
        purpose: ``"extraction"`` or ``"consolidation"`` (scripted models and logs use
            it; real models need not).
    """

    system: str
    prompt: str
    purpose: str = "extraction"


@dataclass(frozen=True)
class ModelReply:
    """A model's answer: its text, and the tokens it was billed for when the model says
    (``None`` when it does not; the store then estimates prompt tokens as characters
    / 4)."""

    text: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


@runtime_checkable
class ChatModel(Protocol):
    """A chat model (see the module docstring)."""

    name: str

    async def complete(self, request: ModelRequest) -> ModelReply:
        """The model's answer to ``request``. May raise anything: the generator turns
        an exception into :class:`~adk_sqlstore.errors.GenerationError`."""
        ...


class CallableModel:
    """A callable ``(system, prompt) -> str | ModelReply`` (or a coroutine function) as a
    :class:`ChatModel`; ``name`` defaults to the callable's ``__name__``."""

    def __init__(
        self,
        function: Callable[[str, str], str | ModelReply | Awaitable[str | ModelReply]],
        *,
        name: str | None = None,
    ) -> None:
        self._function = function
        self.name: str = name or str(getattr(function, "__name__", type(function).__name__))

    async def complete(self, request: ModelRequest) -> ModelReply:
        answer: Any = self._function(request.system, request.prompt)
        if inspect.isawaitable(answer):
            answer = await answer
        if isinstance(answer, ModelReply):
            return answer
        if not isinstance(answer, str):
            raise TypeError(f"model {self.name!r} returned {type(answer).__name__}, not str")
        return ModelReply(answer)
