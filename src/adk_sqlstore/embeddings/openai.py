"""Embeddings from any server speaking OpenAI's ``POST /embeddings``."""

from __future__ import annotations

import os
from typing import Any

from ..errors import ConfigurationError, EmbeddingError

__all__ = ["OpenAICompatibleEmbedder"]


class OpenAICompatibleEmbedder:
    """An embedder calling ``POST {base_url}/embeddings`` (OpenAI's API, and every
    server that copies it: Azure OpenAI, vLLM, Ollama, llama.cpp, LiteLLM, ...).

    Args:
        model: the model name sent in each request (e.g. ``text-embedding-3-small``).
        dimensions: the length of the vectors it returns.
        base_url: the API's root, e.g. ``http://localhost:11434/v1`` for Ollama.
        api_key: sent as ``Authorization: Bearer``; default ``$OPENAI_API_KEY``; none
            is sent without one (local servers need none).
        batch_size: texts per request.
        timeout: seconds per request.
        send_dimensions: also send ``dimensions`` (for models that shorten their
            vectors on request, such as OpenAI's ``text-embedding-3-*``).

    Raises:
        ConfigurationError: httpx is not installed (``pip install "adk-sqlstore[openai]"``).
    """

    def __init__(
        self,
        model: str,
        *,
        dimensions: int,
        base_url: str = "https://api.openai.com/v1",
        api_key: str | None = None,
        batch_size: int = 96,
        timeout: float = 30.0,
        send_dimensions: bool = False,
    ) -> None:
        try:
            import httpx  # noqa: F401
        except ImportError as exc:  # pragma: no cover - httpx comes with the dev extras
            raise ConfigurationError(
                'OpenAICompatibleEmbedder needs httpx: pip install "adk-sqlstore[openai]"'
            ) from exc
        self.model = model
        self.dimensions = dimensions
        self.batch_size = batch_size
        self.base_url = base_url.rstrip("/")
        self._api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self._timeout = timeout
        self._send_dimensions = send_dimensions

    async def embed(self, texts: list[str]) -> list[list[float]]:
        """One vector per text, in order.

        Raises:
            EmbeddingError: the request failed (naming the HTTP status and the start of
                the server's answer) or the answer is not OpenAI's shape.
        """
        import httpx

        body: dict[str, Any] = {"model": self.model, "input": texts}
        if self._send_dimensions:
            body["dimensions"] = self.dimensions
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        url = f"{self.base_url}/embeddings"
        try:
            async with httpx.AsyncClient(timeout=self._timeout) as client:
                response = await client.post(url, json=body, headers=headers)
        except httpx.HTTPError as exc:
            raise EmbeddingError(f"{self.model}: POST {url} failed: {exc!r}") from exc
        if response.status_code != 200:
            raise EmbeddingError(
                f"{self.model}: POST {url} answered {response.status_code}: {response.text[:200]}"
            )
        try:
            data = sorted(response.json()["data"], key=lambda item: item["index"])
            return [list(item["embedding"]) for item in data]
        except (ValueError, KeyError, TypeError) as exc:
            raise EmbeddingError(
                f"{self.model}: POST {url} answered in another shape: {response.text[:200]}"
            ) from exc
