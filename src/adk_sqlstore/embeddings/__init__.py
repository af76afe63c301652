"""Embedders: texts to vectors, for hybrid memory search.

An embedder turns on hybrid memory search (``SqlMemoryService(embedder=...)``, or
``?embedder=`` in a URL; see ``docs/hybrid-search.md``).

An embedder is any object with

- ``model``: the model's name, stored beside each vector so that vectors of another
  model are never compared;
- ``dimensions``: the length of every vector;
- ``batch_size``: the most texts one :meth:`embed` call is given;
- ``async embed(texts: list[str]) -> list[list[float]]``: one vector per text, in
  order.

Shipped: :class:`MiniLMEmbedder` (local and offline, the ``embeddings`` extra),
:class:`OpenAICompatibleEmbedder` (any server speaking OpenAI's ``/embeddings``:
OpenAI, Azure, vLLM, Ollama, llama.cpp, LiteLLM; the ``openai`` extra) and
:class:`GoogleGenAIEmbedder` (google-genai's ``embed_content``, which ADK users
already have). :func:`embed_texts` batches any embedder and checks what it returns.
"""

from __future__ import annotations

from .base import Embedder, embed_texts
from .google import GoogleGenAIEmbedder
from .local import MiniLMEmbedder
from .openai import OpenAICompatibleEmbedder
from .registry import EMBEDDER_NAMES, embedder_named, resolve_embedder

__all__ = [
    "EMBEDDER_NAMES",
    "Embedder",
    "GoogleGenAIEmbedder",
    "MiniLMEmbedder",
    "OpenAICompatibleEmbedder",
    "embed_texts",
    "embedder_named",
    "resolve_embedder",
]
