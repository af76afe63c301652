"""A chat model behind any server speaking OpenAI's ``POST /chat/completions``."""

from __future__ import annotations

import os
from typing import Any

from ..errors import ConfigurationError, GenerationError
from .chat import ModelReply, ModelRequest

__all__ = ["OpenAICompatibleModel"]

OPENAI_BASE_URL = "https://api.openai.com/v1"
DEFAULT_MODEL = "gpt-4o-mini"

_MAX_ERROR_FIELD = 80  # characters of the answer's JSON error ``type``/``code`` shown


class OpenAICompatibleModel:
    """A :class:`~adk_sqlstore.generation.ChatModel` calling ``POST
    {base_url}/chat/completions`` (OpenAI's Chat Completions API, and every server that
    copies it: Azure OpenAI, vLLM, Ollama, llama.cpp, LiteLLM's proxy, ...).

    Each call sends the request's system instruction as a ``system`` message and its
    prompt as one ``user`` message, and answers with ``choices[0].message.content`` and
    the ``usage`` the server reports.

    Args:
        model: the model name sent in each request (e.g. ``gpt-4o-mini``); also
            :attr:`name`.
        base_url: the API's root, e.g. ``http://localhost:11434/v1`` for Ollama.
        api_key: sent as ``Authorization: Bearer``; default ``$OPENAI_API_KEY``; no
            ``Authorization`` header is sent without one (local servers need none).
        timeout: seconds per request (connecting, and each wait for the answer).
        temperature: sent as ``temperature``.
        json_mode: also send ``response_format: {"type": "json_object"}`` (OpenAI's
            JSON mode; turn it off for servers that reject the field).

    Raises:
        ConfigurationError: httpx is not installed (``pip install "adk-sqlstore[openai]"``).
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str = OPENAI_BASE_URL,
        api_key: str | None = None,
        timeout: float = 60.0,
        temperature: float = 0.0,
        json_mode: bool = True,
    ) -> None:
        try:
            import httpx  # noqa: F401
        except ImportError as exc:  # pragma: no cover - httpx comes with the dev extras
            raise ConfigurationError(
                'OpenAICompatibleModel needs httpx: pip install "adk-sqlstore[openai]"'
            ) from exc
        self.name = model
        self.base_url = base_url.rstrip("/")
        self._api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self._timeout = timeout
        self._temperature = temperature
        self._json_mode = json_mode

    @classmethod
    def from_environment(cls, model: str | None = None) -> OpenAICompatibleModel:
        """The model ``model`` (default ``gpt-4o-mini``) at ``$OPENAI_BASE_URL`` (default
        OpenAI's API) with ``$OPENAI_API_KEY``, as OpenAI's own client reads them.

        Raises:
            ConfigurationError: httpx is not installed.
        """
        base_url = os.environ.get("OPENAI_BASE_URL") or OPENAI_BASE_URL
        return cls(model or DEFAULT_MODEL, base_url=base_url)

    async def complete(self, request: ModelRequest) -> ModelReply:
        """The model's answer to ``request``: its text, with ``usage.prompt_tokens`` and
        ``usage.completion_tokens`` when the server reports them.

        Raises:
            GenerationError: the server could not be reached or timed out (naming
                httpx's exception class), answered with an HTTP status other than 200,
                or answered in another shape than OpenAI's. The message names the
                model, the URL and the status; never the request's text nor the
                answer's body (it may echo the conversation), only the JSON error's
                ``type`` and ``code`` when the server gives them.
        """
        import httpx

        url = f"{self.base_url}/chat/completions"
        body: dict[str, Any] = {
            "model": self.name,
            "messages": [
                {"role": "system", "content": request.system},
                {"role": "user", "content": request.prompt},
            ],
            "temperature": self._temperature,
        }
        if self._json_mode:
            body["response_format"] = {"type": "json_object"}
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        where = f"model {self.name!r}: POST {_shown(url)}"
        try:
            async with httpx.AsyncClient(timeout=self._timeout) as client:
                response = await client.post(url, json=body, headers=headers)
        except httpx.TimeoutException as exc:
            raise GenerationError(
                f"{where} timed out after {self._timeout:g} s ({type(exc).__name__})"
            ) from exc
        except httpx.HTTPError as exc:
            raise GenerationError(f"{where} failed ({type(exc).__name__})") from exc
        if response.status_code != 200:
            raise GenerationError(
                f"{where} answered HTTP {response.status_code}{_error_fields(response)}"
            )
        return _reply(where, response)


def _reply(where: str, response: Any) -> ModelReply:
    """The reply in a 200 answer of OpenAI's shape; GenerationError otherwise."""
    try:
        answer = response.json()
        message = answer["choices"][0]["message"]
        text = message["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        # not chained: a JSONDecodeError holds the whole body (``doc``)
        raise GenerationError(
            f"{where} answered HTTP 200 in another shape than OpenAI's chat completion"
        ) from None
    if not isinstance(text, str):
        reason = answer["choices"][0].get("finish_reason")
        raise GenerationError(f"{where} answered without text (finish_reason {_field(reason)!r})")
    usage = answer.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    return ModelReply(
        text,
        prompt_tokens=_count(usage.get("prompt_tokens")),
        completion_tokens=_count(usage.get("completion_tokens")),
    )


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _error_fields(response: Any) -> str:
    """``" (type 'x', code 'y')"`` from an OpenAI error body, or ``""``: never more of
    the body than these two fields, each cut to 80 characters."""
    try:
        error = response.json().get("error")
    except (ValueError, AttributeError):
        return ""
    if not isinstance(error, dict):
        return ""
    fields = [
        f"{key} {_field(error[key])!r}"
        for key in ("type", "code")
        if isinstance(error.get(key), str | int) and not isinstance(error.get(key), bool)
    ]
    return f" ({', '.join(fields)})" if fields else ""


def _field(value: Any) -> str:
    return str(value)[:_MAX_ERROR_FIELD]


def _shown(url: str) -> str:
    """``url`` without any user name, password or query (which may hold a key)."""
    import httpx

    try:
        return str(httpx.URL(url).copy_with(username=None, password=None, query=None))
    except (httpx.InvalidURL, TypeError, ValueError):
        return "<invalid URL>"
