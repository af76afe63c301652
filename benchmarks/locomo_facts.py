"""Memory generation on LoCoMo: evidence recall of turns, facts, and both.

``python -m benchmarks.locomo_recall --facts replay`` runs it. Every session is given
to ``add_session_to_memory`` of a service with a generator whose model *replays*
LoCoMo's own per-session observations (``session_N_observation``: facts about each
speaker with the ``dia_id`` turns they come from) as its extraction, and answers
every consolidation with "nothing to change" (no decision: every new fact is
created). So the store's whole path runs (prompts, aliases, parsing, consolidation
search, writes, search) with a model whose answers are known.

Each question of categories 1-4 is searched three ways: turns alone
(``kind="turns"``), facts alone (``kind="facts"``) and both (``kind=None``). A turn
counts for its own ``dia_id``; a fact for the evidence turns it names
(``custom_metadata["source_event_ids"]``). Recall at k is the share of a question's
evidence turns among those the first k results count for.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from adk_sqlstore import MemoryGenerator, SqlMemoryService
from adk_sqlstore.generation import ModelReply, ModelRequest

__all__ = ["FactsResult", "ReplayModel", "evaluate_facts", "report_facts"]

MODES = {"turns": "turns", "facts": "facts", "turns+facts": None}


def _ids(value: Any) -> list[str]:
    """A dia_id field of an observation: one id, a list, or "D8:6; D9:17"."""
    items = value if isinstance(value, list) else [value]
    return [p for item in items for p in re.split(r"[;,\s]+", str(item)) if p]


class ReplayModel:
    """A chat model answering extraction with the session's LoCoMo observations
    (found by the first turn shown: its time and text) and consolidation with no
    decision."""

    name = "locomo-observation-replay"

    def __init__(self, folder: Path, limit: int | None = None) -> None:
        self.sessions: dict[tuple[str, str], tuple[list[str], list[tuple[str, list[str]]]]] = {}
        for path in sorted(folder.glob("*.json"))[:limit]:
            data = json.loads(path.read_text())
            for key in data:
                found = re.fullmatch(r"session_(\d+)", key)
                if not found or not data[key]:
                    continue
                turns = data[key]
                observations = data.get(f"session_{found.group(1)}_observation") or {}
                facts = [
                    (str(item[0]), _ids(item[1]))
                    for items in observations.values()
                    for item in items
                    if isinstance(item, list) and len(item) == 2
                ]
                first = turns[0]["text"]
                self.sessions[(turns[0]["speaker"], first)] = ([t["dia_id"] for t in turns], facts)

    async def complete(self, request: ModelRequest) -> ModelReply:
        prompt = json.loads(request.prompt)
        if request.purpose == "consolidation":
            return ModelReply('{"decisions": []}')
        shown = prompt["conversation"]
        turns, facts = self.sessions[(shown[0]["author"], shown[0]["text"].split(" [shares ")[0])]
        alias = {dia: event["id"] for dia, event in zip(turns, shown, strict=False)}
        day = shown[0]["time"][:10]
        answer = [
            {
                "text": text,
                "topics": ["KEY_CONVERSATION_DETAILS"],
                "valid_from": day,
                "event_ids": [alias[d] for d in dias if d in alias],
            }
            for text, dias in facts
        ]
        return ModelReply(json.dumps({"facts": answer}))


@dataclass
class FactsResult:
    backend: str
    questions: int = 0
    recall: dict[str, dict[int, float]] = field(default_factory=dict)
    sessions: int = 0
    model_calls: int = 0
    prompt_tokens: int = 0
    facts: int = 0
    seconds: float = 0.0

    def as_json(self) -> dict[str, Any]:
        per = max(self.sessions, 1)
        return {
            "backend": self.backend,
            **{
                mode: {f"recall@{k}": round(v, 4) for k, v in sorted(by_k.items())}
                for mode, by_k in self.recall.items()
            },
            "model_calls_per_session": round(self.model_calls / per, 3),
            "prompt_tokens_per_session": round(self.prompt_tokens / per, 1),
        }


async def evaluate_facts(
    url: str,
    backend: str,
    conversations: list[Any],
    folder: Path,
    *,
    limit: int | None = None,
    embedder: Any = None,
    ks: tuple[int, ...] = (5, 10),
) -> FactsResult:
    """Ingest and generate every conversation, ask every question three ways."""
    import time

    result = FactsResult(backend)
    sums = {mode: dict.fromkeys(ks, 0.0) for mode in MODES}
    generator = MemoryGenerator(ReplayModel(folder, limit), max_facts=500)
    async with SqlMemoryService.from_url(url, embedder=embedder, generator=generator) as memory:
        began = time.perf_counter()
        for conversation in conversations:
            for session in conversation.sessions:
                report = await memory.add_session_to_memory(session)
                if report.generation is not None:
                    result.sessions += report.generation.sessions
                    result.model_calls += report.generation.model_calls
                    result.prompt_tokens += report.generation.prompt_tokens
                    result.facts += report.generation.created
        result.seconds = time.perf_counter() - began
        for conversation in conversations:
            for question, evidence, _ in conversation.questions:
                result.questions += 1
                for mode, kind in MODES.items():
                    found = await memory.search_memory(
                        app_name="locomo",
                        user_id=conversation.user_id,
                        query=question,
                        limit=max(ks),
                        kind=kind,  # type: ignore[arg-type]
                    )
                    for k in ks:
                        counted: set[str] = set()
                        for m in found.memories[:k]:
                            metadata = m.custom_metadata or {}
                            counted.update(
                                [metadata["event_id"]]
                                if metadata.get("event_id")
                                else metadata.get("source_event_ids") or []
                            )
                        sums[mode][k] += len(evidence & counted) / len(evidence)
    result.recall = {
        m: {k: v / max(result.questions, 1) for k, v in s.items()} for m, s in sums.items()
    }
    return result


def report_facts(results: list[FactsResult], console: Any) -> None:
    """The figures as a table."""
    from rich.table import Table

    table = Table(title="LoCoMo evidence recall with memory generation (observation replay)")
    for column in ("backend", *(f"{m} @5 / @10" for m in MODES), "facts", "calls/session",
                   "prompt tokens/session", "ingest+generate s"):  # fmt: skip
        table.add_column(column, justify="right")
    for r in results:
        per = max(r.sessions, 1)
        table.add_row(
            r.backend,
            *(f"{r.recall[m][5]:.3f} / {r.recall[m][10]:.3f}" for m in MODES),
            str(r.facts),
            f"{r.model_calls / per:.2f}",
            f"{r.prompt_tokens / per:,.0f}",
            f"{r.seconds:.1f}",
        )
    console.print(table)
