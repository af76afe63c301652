"""The model a generator is given, resolved to a :class:`~.chat.ChatModel`: an ADK
model or its name, ``openai:MODEL``, ``package.module:NAME``, a ChatModel, or a
callable."""

from __future__ import annotations

from typing import Any

from ..errors import ConfigurationError
from .chat import CallableModel, ChatModel

__all__ = ["resolve_model"]


def resolve_model(model: Any) -> ChatModel:
    """A :class:`ChatModel` from what a user gives a generator:

    - a :class:`ChatModel` (kept);
    - an ADK ``BaseLlm`` instance (wrapped by :class:`.adk_model.AdkModel`);
    - a string: ``openai:MODEL`` (an OpenAI-compatible endpoint at
      ``$OPENAI_BASE_URL`` with ``$OPENAI_API_KEY``), ``package.module:NAME`` (that
      object; a class or a function taking no arguments is called to make it), or else a model name
      resolved as ADK resolves ``LlmAgent(model=...)`` (``gemini-2.5-flash``; a
      LiteLLM name such as ``ollama_chat/llama3.2`` with ADK's LiteLLM installed);
    - a callable ``(system, prompt) -> str`` (wrapped by :class:`CallableModel`).

    Raises:
        ConfigurationError: an unknown name, a missing extra, or an object that is
            none of these.
    """
    if isinstance(model, ChatModel):
        return model
    if isinstance(model, str):
        return _named(model.strip())
    if _is_adk_llm(model):
        from .adk_model import AdkModel

        return AdkModel(model)
    if callable(model):
        return CallableModel(model)
    raise ConfigurationError(
        "a generator's model must be an ADK BaseLlm, a model name, a ChatModel"
        f" (name and async complete(request)) or a callable, not {type(model).__name__}"
    )


def _is_adk_llm(model: Any) -> bool:
    try:
        from google.adk.models import BaseLlm
    except ImportError:
        return False
    return isinstance(model, BaseLlm)


def _named(name: str) -> ChatModel:
    kind, _, rest = name.partition(":")
    if kind.lower() == "openai":
        from .openai_chat import OpenAICompatibleModel

        return OpenAICompatibleModel.from_environment(rest or None)
    dotted = all(p.isidentifier() for p in kind.split("."))
    # else an ADK name such as "Gemini:gemini-2.5-flash"
    if rest and "/" not in name and dotted and _importable(kind):
        return _imported(name, kind, rest)
    from .adk_model import AdkModel

    return AdkModel.named(name)


def _takes_nothing(function: Any) -> bool:
    """Whether ``function`` can be called without arguments (a factory, not a
    ``(system, prompt)`` model)."""
    import inspect

    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return False
    return all(
        p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        for p in signature.parameters.values()
    )


def _importable(module_name: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(module_name) is not None
    except (ImportError, ValueError):
        return False


def _imported(name: str, module_name: str, attribute: str) -> ChatModel:
    import importlib

    try:
        found: Any = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise ConfigurationError(f"model {name!r} cannot be imported: {exc}") from exc
    if isinstance(found, type) or (not isinstance(found, ChatModel) and _takes_nothing(found)):
        try:  # a class, or a function making a model
            found = found()
        except Exception as exc:
            raise ConfigurationError(f"model {name!r} could not be made: {exc!r}") from exc
    if isinstance(found, str):
        raise ConfigurationError(f"model {name!r} names a string, not a model")
    return resolve_model(found)
