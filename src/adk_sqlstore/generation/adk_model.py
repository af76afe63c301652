"""Any ADK model (``google.adk.models.BaseLlm``) as a chat model."""

from __future__ import annotations

from contextlib import aclosing
from typing import TYPE_CHECKING, Any

from ..errors import ConfigurationError, GenerationError
from .chat import ModelReply, ModelRequest

if TYPE_CHECKING:
    from google.adk.models import BaseLlm
    from google.adk.models.llm_request import LlmRequest
    from google.adk.models.llm_response import LlmResponse

__all__ = ["AdkModel"]

_ADK_MISSING = 'ADK models need google-adk: pip install "adk-sqlstore[adk]"'
_MAX_ERROR_CODE = 80  # characters of an LlmResponse's error_code shown


class AdkModel:
    """A :class:`~adk_sqlstore.generation.ChatModel` calling an ADK model (``Gemini``,
    ``LiteLlm``, ``Claude``, your own ``BaseLlm`` subclass, ...) as an ADK agent's flow
    does: one ``LlmRequest`` to ``generate_content_async(request, stream=False)``.

    Args:
        llm: the ADK model; :attr:`name` is its ``model`` field.
    """

    def __init__(self, llm: BaseLlm) -> None:
        self.llm = llm
        self.name: str = llm.model

    @classmethod
    def named(cls, name: str) -> AdkModel:
        """The model ADK makes of ``name`` for ``LlmAgent(model=name)``:
        ``LLMRegistry.new_llm(name)``, which matches the name against the patterns
        ADK's models registered (``gemini-.*``, ``claude-.*``, ``ollama_chat/.*``, ...;
        ``Class:model`` picks the class), as ``LlmAgent.canonical_model`` does.

        Raises:
            ConfigurationError: google-adk is not installed, ADK knows no model of that
                name, or the model's package (e.g. litellm, anthropic) is missing.
        """
        try:
            from google.adk.models import LLMRegistry
        except ImportError as exc:
            raise ConfigurationError(_ADK_MISSING) from exc
        try:
            llm = LLMRegistry.new_llm(name)
        except (ValueError, ImportError) as exc:
            raise ConfigurationError(f"ADK cannot make a model named {name!r}: {exc}") from exc
        return cls(llm)

    async def complete(self, request: ModelRequest) -> ModelReply:
        """The model's answer to ``request``: the text parts of its final (not
        ``partial``) responses, thoughts left out, with ``usage_metadata``'s
        ``prompt_token_count`` and ``candidates_token_count``.

        The request follows ADK's flow: ``model`` the llm's name, the prompt as one
        ``user`` content, and ``GenerateContentConfig(system_instruction=...,
        temperature=0, response_mime_type="application/json")``.

        Raises:
            GenerationError: a response carries an ``error_code`` (a blocked prompt, a
                safety stop, ...); the message names the model and the code only.
            Exception: anything the model raises propagates unchanged.
        """
        llm_request = self._request(request)
        texts: list[str] = []
        prompt_tokens: int | None = None
        completion_tokens: int | None = None
        responses = self.llm.generate_content_async(llm_request, stream=False)
        async with aclosing(responses) as stream:
            async for response in stream:
                self._check(response)
                if response.partial:
                    continue
                texts.extend(_texts(response))
                usage = response.usage_metadata
                if usage is not None:
                    prompt_tokens = usage.prompt_token_count
                    completion_tokens = usage.candidates_token_count
        return ModelReply("".join(texts), prompt_tokens, completion_tokens)

    def _request(self, request: ModelRequest) -> LlmRequest:
        from google.adk.models.llm_request import LlmRequest
        from google.genai import types

        return LlmRequest(
            model=self.llm.model,
            contents=[types.Content(role="user", parts=[types.Part(text=request.prompt)])],
            config=types.GenerateContentConfig(
                system_instruction=request.system,
                temperature=0,
                response_mime_type="application/json",
            ),
        )

    def _check(self, response: LlmResponse) -> None:
        """GenerationError when ``response`` is an error (its message left out: it may
        quote the conversation)."""
        if response.error_code is None:
            return
        code: Any = response.error_code
        code = str(getattr(code, "value", code))[:_MAX_ERROR_CODE]
        raise GenerationError(f"model {self.name!r} answered with error_code {code!r}")


def _texts(response: LlmResponse) -> list[str]:
    content = response.content
    if content is None or not content.parts:
        return []
    return [part.text for part in content.parts if part.text and not part.thought]
