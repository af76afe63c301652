"""Retrieval quality on a slice of LoCoMo, on both backends (the full run is
benchmarks/locomo_recall.py). The floor sits below the measured figure so that only a
real regression fails: on conversation conv-30 (81 questions) recall@10 measured 0.652
on SQLite and 0.676 on PostgreSQL (2026-11-29)."""

from __future__ import annotations

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
