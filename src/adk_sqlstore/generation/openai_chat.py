"""A chat model behind any server speaking OpenAI's ``POST /chat/completions``.

An answer that may pass on another try (HTTP 429, 500, 502, 503, 504; a connection
that failed or was reset) raises :class:`~adk_sqlstore.errors.TransientModelError`,
with the server's ``Retry-After``; the generator makes the call again
(:mod:`.calls`).
"""

from __future__ import annotations

import math
import os
import time
from datetime import UTC
from email.utils import parsedate_to_datetime
from typing import Any

from ..errors import ConfigurationError, GenerationError, TransientModelError
from .chat import ModelReply, ModelRequest

__all__ = ["MAX_RETRY_AFTER", "TRANSIENT_STATUSES", "OpenAICompatibleModel", "retry_after_seconds"]

OPENAI_BASE_URL = "https://api.openai.com/v1"
DEFAULT_MODEL = "gpt-4o-mini"

TRANSIENT_STATUSES = frozenset({429, 500, 502, 503, 504})
"""HTTP statuses worth another try: too many requests, and a server failing or
overloaded for now."""
MAX_RETRY_AFTER = 3600.0
"""Most seconds of a ``Retry-After`` taken as it is (a longer one counts as this)."""

_MAX_ERROR_FIELD = 80  # characters of the answer's JSON error ``type``/``code`` shown
_OUT_OF_QUOTA = "insufficient_quota"  # OpenAI's 429 for a spent budget: no retry helps


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
            TransientModelError: the server answered HTTP 429 (but for OpenAI's
                ``insufficient_quota``), 500, 502, 503 or 504 (``status``, and
                ``retry_after`` from its ``Retry-After`` in seconds), or could not be
                reached or dropped the connection (``httpx.NetworkError``,
                ``RemoteProtocolError``; ``status`` None).
            GenerationError: the server timed out (naming httpx's exception class),
                answered with another HTTP status than 200, or answered in another
                shape than OpenAI's. The message names the model, the URL and the
                status; never the request's text nor the answer's body (it may echo
                the conversation), only the JSON error's ``type`` and ``code`` when the
                server gives them.
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
        except (httpx.NetworkError, httpx.RemoteProtocolError) as exc:
            raise TransientModelError(f"{where} failed ({type(exc).__name__})") from exc
        except httpx.HTTPError as exc:
            raise GenerationError(f"{where} failed ({type(exc).__name__})") from exc
        if response.status_code != 200:
            raise _status_error(where, response)
        return _reply(where, response)


def retry_after_seconds(value: str | None) -> float | None:
    """The seconds an HTTP ``Retry-After`` value asks to wait: delta-seconds
    (``"120"``) or an HTTP-date (``"Wed, 21 Oct 2015 07:28:00 GMT"``, counted from
    now; a past one is 0), at most :data:`MAX_RETRY_AFTER`; ``None`` when absent or
    unreadable."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = when.timestamp() - time.time()
    if math.isnan(seconds):
        return None
    return min(max(seconds, 0.0), MAX_RETRY_AFTER)


def _status_error(where: str, response: Any) -> GenerationError:
    """The error of an answer with another status than 200: transient for the
    :data:`TRANSIENT_STATUSES` (but a 429 for a spent quota)."""
    status = response.status_code
    error = _error_of(response)
    message = f"{where} answered HTTP {status}{_error_fields(error)}"
    if status not in TRANSIENT_STATUSES or _OUT_OF_QUOTA in (error.get("type"), error.get("code")):
        return GenerationError(message)
    retry_after = retry_after_seconds(response.headers.get("retry-after"))
    return TransientModelError(message, status=status, retry_after=retry_after)


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


def _error_of(response: Any) -> dict[str, Any]:
    """The ``error`` object of an OpenAI error body, or ``{}``."""
    try:
        error = response.json().get("error")
    except (ValueError, AttributeError):
        return {}
    return error if isinstance(error, dict) else {}


def _error_fields(error: dict[str, Any]) -> str:
    """``" (type 'x', code 'y')"`` from an OpenAI error object, or ``""``: never more
    of the body than these two fields, each cut to 80 characters."""
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
