"""Retrieval quality on a slice of LoCoMo, on both backends (the full run is
benchmarks/locomo_recall.py). The floor sits below the measured figure so that only a
real regression fails: on conversation conv-30 (81 questions) recall@10 measured 0.652
on SQLite and 0.676 on PostgreSQL (2026-11-29); 0.664 on both with the shared text
analysis, and 0.701 (recall@5 0.666) with hybrid search and the local model
(2026-12-01)."""

from __future__ import annotations

import os

import pytest
from benchmarks.locomo_recall import evaluate, load_conversations

from .conftest import shared_data

FLOOR_AT_10 = 0.60
FLOOR_AT_5 = 0.52


@pytest.mark.shared_data
async def test_locomo_slice_recall_stays_above_the_floor(db_url: str) -> None:
    folder = shared_data("locomo")
    (conversation,) = [c for c in load_conversations(folder) if c.user_id == "conv-30"]
    result = await evaluate(db_url, "test", [conversation])
    assert result.questions == 81
    assert result.recall[10] >= FLOOR_AT_10, result.recall
    assert result.recall[5] >= FLOOR_AT_5, result.recall


HYBRID_FLOOR_AT_10 = 0.68
HYBRID_FLOOR_AT_5 = 0.64


@pytest.mark.shared_data
@pytest.mark.parametrize("backend", ["sqlite", "pgvector"])
async def test_locomo_slice_hybrid_recall_with_the_local_model(
    backend: str, request: pytest.FixtureRequest
) -> None:
    """Hybrid search end to end with the real local model (all-MiniLM-L6-v2): it finds
    more evidence than BM25 alone. Runs where the embeddings extra is installed (CI:
    ``make test-embeddings`` sets ADK_SQLSTORE_REQUIRE_EMBEDDINGS, and it must run)."""
    if not os.environ.get("ADK_SQLSTORE_REQUIRE_EMBEDDINGS"):
        pytest.importorskip("sentence_transformers", reason="the embeddings extra is not installed")
    url = str(request.getfixturevalue(f"{backend}_url"))
    folder = shared_data("locomo")
    (conversation,) = [c for c in load_conversations(folder) if c.user_id == "conv-30"]
    hybrid = await evaluate(url, "test", [conversation], embedder="minilm")
    assert hybrid.embedder == "all-MiniLM-L6-v2"
    assert hybrid.recall[10] >= HYBRID_FLOOR_AT_10, hybrid.recall
    assert hybrid.recall[5] >= HYBRID_FLOOR_AT_5, hybrid.recall
    assert hybrid.recall[10] >= FLOOR_AT_10 + 0.05


@pytest.mark.shared_data
async def test_generated_facts_add_to_the_turns_recall(db_url: str) -> None:
    """Memory generation with LoCoMo's own observations replayed as the model's facts
    (benchmarks/locomo_facts.py) on conversation conv-30: turns and facts together
    find more evidence than turns alone, at two model calls per session at most."""
    from benchmarks.locomo_facts import evaluate_facts

    folder = shared_data("locomo")
    conversations = [c for c in load_conversations(folder) if c.user_id == "conv-30"]
    result = await evaluate_facts(db_url, "test", conversations, folder)
    figures = result.as_json()
    assert result.facts > 100 and result.questions == 81
    assert figures["turns+facts"]["recall@10"] > figures["turns"]["recall@10"] + 0.02, figures
    assert figures["facts"]["recall@10"] > 0.4, figures
    assert figures["model_calls_per_session"] <= 2
