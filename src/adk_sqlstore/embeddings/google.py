"""Embeddings from Google's Gemini API or Vertex AI, through google-genai."""

from __future__ import annotations

from typing import Any

from ..errors import ConfigurationError, EmbeddingError

__all__ = ["GoogleGenAIEmbedder"]


class GoogleGenAIEmbedder:
    """An embedder calling google-genai's ``client.aio.models.embed_content`` (the
    library ADK itself uses: its credentials and settings apply).

    Args:
        model: e.g. ``gemini-embedding-001`` or ``text-embedding-005``.
        dimensions: the vectors' length, sent as ``output_dimensionality``.
        client: a ``google.genai.Client``; default ``Client()``, configured from the
            environment (``GOOGLE_API_KEY``, or ``GOOGLE_GENAI_USE_VERTEXAI`` with
            project and location) as ADK configures its own.
        batch_size: texts per request.
        task_type: e.g. ``RETRIEVAL_DOCUMENT`` (optional).

    Raises:
        ConfigurationError: google-genai is not installed
            (``pip install "adk-sqlstore[google]"``).
    """

    def __init__(
        self,
        model: str = "gemini-embedding-001",
        *,
        dimensions: int = 768,
        client: Any = None,
        batch_size: int = 100,
        task_type: str | None = None,
    ) -> None:
        try:
            from google import genai
        except ImportError as exc:  # pragma: no cover - google-genai comes with ADK
            raise ConfigurationError(
                'GoogleGenAIEmbedder needs google-genai: pip install "adk-sqlstore[google]"'
            ) from exc
        self.model = model
        self.dimensions = dimensions
        self.batch_size = batch_size
        self._task_type = task_type
        self._client = client if client is not None else genai.Client()

    async def embed(self, texts: list[str]) -> list[list[float]]:
        """One vector per text, in order.

        Raises:
            EmbeddingError: the API call failed, or answered without vectors.
        """
        from google.genai import errors, types

        config = types.EmbedContentConfig(
            output_dimensionality=self.dimensions, task_type=self._task_type
        )
        try:
            response = await self._client.aio.models.embed_content(
                model=self.model, contents=texts, config=config
            )
        except errors.APIError as exc:
            raise EmbeddingError(f"{self.model}: embed_content failed: {exc}") from exc
        embeddings = response.embeddings or []
        if any(e.values is None for e in embeddings):
            raise EmbeddingError(f"{self.model}: embed_content answered without vectors")
        return [list(e.values or []) for e in embeddings]
