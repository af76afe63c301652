"""ADK models as a memory generator's model: resolved through ADK's own registry and
called through ADK's request path (adk_sqlstore.generation.adk_model). No database."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Iterator

import pytest

pytest.importorskip("google.adk", reason="the adk extra is not installed")

from google.adk.models import BaseLlm, LLMRegistry
from google.adk.models import registry as adk_registry
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types
from pydantic import Field

from adk_sqlstore.errors import ConfigurationError, GenerationError
from adk_sqlstore.generation import ChatModel, ModelReply, resolve_model
from adk_sqlstore.generation.adk_model import AdkModel

from .test_generation_models import REQUEST, SECRET, _messages

# --- ADK models, resolved through ADK's own registry ------------------------------


def _scripted_responses() -> list[LlmResponse]:
    """A partial chunk (left out), then the final answer with a thought (left out)."""
    return [
        LlmResponse(
            content=types.Content(role="model", parts=[types.Part(text="PARTIAL")]),
            partial=True,
        ),
        LlmResponse(
            content=types.Content(
                role="model",
                parts=[
                    types.Part(text="thinking it over", thought=True),
                    types.Part(text='{"facts": '),
                    types.Part(text="[]}"),
                ],
            ),
            usage_metadata=types.GenerateContentResponseUsageMetadata(
                prompt_token_count=21, candidates_token_count=4, total_token_count=25
            ),
            partial=False,
        ),
    ]


class ScriptedLlm(BaseLlm):
    """An ADK model answering from a script, recording the requests it gets."""

    responses: list[LlmResponse] = Field(default_factory=_scripted_responses)
    requests: list[LlmRequest] = Field(default_factory=list)
    raises: bool = False

    @classmethod
    def supported_models(cls) -> list[str]:
        return [r"scripted-.*"]

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        assert stream is False
        self.requests.append(llm_request)
        if self.raises:
            raise RuntimeError("the model's own failure")
        for response in self.responses:
            yield response


@pytest.fixture
def scripted_registry() -> Iterator[None]:
    """``ScriptedLlm`` in ADK's LLMRegistry for one test (a module-level dict in
    ``google.adk.models.registry``, read through an lru_cache)."""
    saved = dict(adk_registry._llm_registry_dict)
    LLMRegistry.register(ScriptedLlm)
    try:
        yield
    finally:
        adk_registry._llm_registry_dict.clear()
        adk_registry._llm_registry_dict.update(saved)
        LLMRegistry.resolve.cache_clear()


async def test_adk_model_by_name(scripted_registry: None) -> None:
    model = resolve_model("scripted-1")

    assert isinstance(model, AdkModel) and isinstance(model, ChatModel)
    assert model.name == "scripted-1"
    llm = model.llm
    assert isinstance(llm, ScriptedLlm)
    reply = await model.complete(REQUEST)
    assert reply == ModelReply('{"facts": []}', prompt_tokens=21, completion_tokens=4)
    [sent] = llm.requests
    assert sent.model == "scripted-1"
    assert sent.contents == [
        types.Content(role="user", parts=[types.Part(text=REQUEST.prompt)]),
    ]
    assert sent.config.system_instruction == REQUEST.system
    assert sent.config.response_mime_type == "application/json"
    assert sent.config.temperature == 0


async def test_adk_model_instance(scripted_registry: None) -> None:
    llm = ScriptedLlm(
        model="my-own-model",
        responses=[LlmResponse(content=types.Content(role="model", parts=[types.Part(text="{}")]))],
    )
    model = resolve_model(llm)

    assert isinstance(model, AdkModel) and model.llm is llm and model.name == "my-own-model"
    assert await model.complete(REQUEST) == ModelReply("{}", None, None)
    assert llm.requests[0].model == "my-own-model"


@pytest.mark.parametrize("code", ["SAFETY", types.FinishReason.SAFETY], ids=["str", "enum"])
async def test_adk_error_code(code: str) -> None:
    llm = ScriptedLlm(
        model="scripted-err",
        responses=[LlmResponse(error_code=code, error_message=f"blocked: {SECRET}")],
    )
    with pytest.raises(GenerationError) as caught:
        await AdkModel(llm).complete(REQUEST)
    assert str(caught.value) == "model 'scripted-err' answered with error_code 'SAFETY'"
    assert SECRET not in _messages(caught.value)


async def test_adk_model_exception_propagates() -> None:
    model = AdkModel(ScriptedLlm(model="scripted-boom", raises=True))
    with pytest.raises(RuntimeError, match="the model's own failure"):
        await model.complete(REQUEST)


def test_adk_unknown_name(scripted_registry: None) -> None:
    with pytest.raises(ConfigurationError, match="no-such-model-xyz") as caught:
        resolve_model("no-such-model-xyz")
    assert isinstance(caught.value.__cause__, ValueError)
    with pytest.raises(ConfigurationError, match="no-such-model-xyz"):
        AdkModel.named("no-such-model-xyz")


def test_adk_registry_is_restored() -> None:
    """The fixture above left no ScriptedLlm behind."""
    with pytest.raises(ConfigurationError):
        resolve_model("scripted-1")
