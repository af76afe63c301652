"""Embedders by name: what ``?embedder=`` in a store URL or ADK URI, ``--embedder`` on
the command line and ``embedder="..."`` in the constructors accept.

================================  ====================================================
name                              embedder
================================  ====================================================
``minilm``                        :class:`~.local.MiniLMEmbedder` (local, offline)
``openai`` / ``openai:MODEL``     :class:`~.openai.OpenAICompatibleEmbedder`: OpenAI's
                                  ``text-embedding-3-small`` by default, at
                                  ``$OPENAI_BASE_URL`` (default OpenAI's API) with
                                  ``$OPENAI_API_KEY``
``google`` / ``google:MODEL``     :class:`~.google.GoogleGenAIEmbedder`:
                                  ``gemini-embedding-001`` by default (768
                                  dimensions), with google-genai's own configuration
``package.module:NAME``           ``NAME()`` from that module: any embedder of yours
================================  ====================================================
"""

from __future__ import annotations

import importlib
import os
from typing import Any

from ..errors import ConfigurationError
from .base import Embedder

__all__ = ["EMBEDDER_NAMES", "embedder_named", "resolve_embedder"]

EMBEDDER_NAMES = ("minilm", "openai", "google")
"""The built-in names (besides ``package.module:NAME``)."""

# OpenAI's models and their vectors' length; another model needs an embedder object.
_OPENAI_DIMENSIONS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}


def embedder_named(name: str) -> Embedder:
    """The embedder a name stands for (see the module docstring).

    Raises:
        ConfigurationError: an unknown name, an OpenAI model whose dimensions are not
            known, a ``module:NAME`` that cannot be imported or does not make an
            embedder, or a missing extra.
    """
    from .google import GoogleGenAIEmbedder
    from .local import MiniLMEmbedder
    from .openai import OpenAICompatibleEmbedder

    kind, _, model = name.strip().partition(":")
    kind = kind.lower()
    if kind in ("minilm", "all-minilm-l6-v2") and not model:
        return MiniLMEmbedder()
    if kind == "openai":
        model = model or "text-embedding-3-small"
        if model not in _OPENAI_DIMENSIONS:
            raise ConfigurationError(
                f"embedder {name!r}: the dimensions of {model!r} are not known; pass an"
                " OpenAICompatibleEmbedder(model, dimensions=...) object instead"
            )
        return OpenAICompatibleEmbedder(
            model,
            dimensions=_OPENAI_DIMENSIONS[model],
            base_url=os.environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1"),
        )
    if kind == "google":
        return GoogleGenAIEmbedder(model or "gemini-embedding-001")
    if model and ("." in kind or kind.isidentifier()):
        return _imported(name, kind, model)
    raise ConfigurationError(
        f"unknown embedder {name!r}: use one of {', '.join(EMBEDDER_NAMES)}, or"
        " package.module:NAME for your own"
    )


def _imported(name: str, module_name: str, attribute: str) -> Embedder:
    try:
        module = importlib.import_module(module_name)
        factory: Any = getattr(module, attribute)
    except (ImportError, AttributeError) as exc:
        raise ConfigurationError(f"embedder {name!r} cannot be imported: {exc}") from exc
    made = factory
    if isinstance(factory, type) or not isinstance(factory, Embedder):
        try:
            made = factory()  # a class, or a function making an embedder
        except Exception as exc:
            raise ConfigurationError(f"embedder {name!r} could not be made: {exc!r}") from exc
    if not isinstance(made, Embedder):
        raise ConfigurationError(
            f"embedder {name!r} is not an embedder (model, dimensions, batch_size and"
            " async embed(texts))"
        )
    return made


def resolve_embedder(embedder: Embedder | str | None) -> Embedder | None:
    """An embedder object from an object, a name, or ``None`` (none).

    Raises:
        ConfigurationError: see :func:`embedder_named`; an object that is not an
            embedder.
    """
    if embedder is None:
        return None
    if isinstance(embedder, str):
        return embedder_named(embedder)
    if not isinstance(embedder, Embedder):
        raise ConfigurationError(
            f"embedder must be an embedder or its name, not {type(embedder).__name__}"
        )
    if not isinstance(embedder.dimensions, int) or embedder.dimensions < 1:
        raise ConfigurationError(f"embedder {embedder.model!r}: dimensions must be 1 or more")
    return embedder
