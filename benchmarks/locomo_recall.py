"""Retrieval quality of SqlMemoryService on LoCoMo, per backend.

LoCoMo (Maharana et al., "Evaluating Very Long-Term Conversational Memory of LLM
Agents", ACL 2024; CC BY-NC 4.0, evaluation only, never shipped): multi-session
conversations with questions and the turns that answer them.

Protocol: each conversation is one user (app ``locomo``, user id = the file name); each
of its sessions is one session given to ``add_session_to_memory``; event id = the
turn's ``dia_id``, author = the speaker, text = the turn's ``text`` plus
``[shares <blip_caption>]`` when present, timestamp = the session's date plus one
second per turn. Every question of categories 1-4 (multi-hop, temporal, open-domain,
single-hop) is one ``search_memory`` query; its score at k is the share of its evidence
turns among the first k results. Prints recall@5, recall@10 (in all and per
category), search latency (p50, p95) and ingestion throughput per backend.

With ``--embedder`` (e.g. ``minilm``, the local model of the ``embeddings`` extra),
search is hybrid (BM25 fused with vector similarity); on PostgreSQL that needs pgvector:
the server of ``--postgres-admin-url`` when it has it, else a throwaway PostgreSQL 16
with pgvector from the PyPI package ``pgserver``.

    python -m benchmarks.locomo_recall                       # SQLite and PostgreSQL
    python -m benchmarks.locomo_recall --embedder minilm
    python -m benchmarks.locomo_recall --backend sqlite --conversations 1
    python -m benchmarks.locomo_recall --facts replay --json   # memory generation
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from adk_sqlstore import Event, Session, SqlMemoryService
from adk_sqlstore.engine import create_engine
from adk_sqlstore.migration import upgrade
from adk_sqlstore.url_display import redact_url

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "locomo"
DEFAULT_POSTGRES_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"
DEFAULT_MYSQL_ADMIN = "mysql://root@127.0.0.1:3306/mysql"
APP = "locomo"


CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}


@dataclass
class Conversation:
    user_id: str
    sessions: list[Session]
    questions: list[tuple[str, set[str], int]]  # (question, evidence turns, category)


@dataclass
class Result:
    backend: str
    questions: int = 0
    recall: dict[int, float] = field(default_factory=dict)
    by_category: dict[int, dict[int, float]] = field(default_factory=dict)
    """Per category: recall at each k."""
    asked: dict[int, int] = field(default_factory=dict)
    """Per category: how many questions."""
    latencies_ms: list[float] = field(default_factory=list)
    events: int = 0
    ingest_seconds: float = 0.0
    embedder: str = ""


def _session_time(text: str) -> float:
    """'1:56 pm on 8 May, 2023' -> epoch seconds (UTC)."""
    return datetime.strptime(text, "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC).timestamp()


def _evidence(entries: list[str]) -> set[str]:
    ids: set[str] = set()
    for entry in entries:  # a few are malformed, e.g. "D8:6; D9:17"
        ids.update(part for part in re.split(r"[;,\s]+", entry) if part)
    return ids


def load_conversations(folder: Path = DATA, limit: int | None = None) -> list[Conversation]:
    """Read LoCoMo files into sessions (ADK-shaped) and (question, evidence) pairs."""
    conversations = []
    for path in sorted(folder.glob("*.json"))[:limit]:
        data = json.loads(path.read_text())
        sessions = []
        numbers = sorted(
            int(m.group(1)) for key in data if (m := re.fullmatch(r"session_(\d+)", key))
        )
        for n in numbers:
            start = _session_time(data[f"session_{n}_date_time"])
            events = []
            for offset, turn in enumerate(data[f"session_{n}"]):
                text = turn["text"]
                if turn.get("blip_caption"):
                    text += f" [shares {turn['blip_caption']}]"
                events.append(
                    Event(
                        id=turn["dia_id"],
                        author=turn["speaker"],
                        invocation_id=f"s{n}",
                        timestamp=start + offset,
                        content={"role": "user", "parts": [{"text": text}]},
                    )
                )
            sessions.append(
                Session(id=f"session_{n}", app_name=APP, user_id=path.stem, events=events)
            )
        questions = [
            (q["question"], _evidence(q["evidence"]), int(q["category"]))
            for q in data["qa"]
            if q["category"] in (1, 2, 3, 4) and q["evidence"]
        ]
        conversations.append(Conversation(path.stem, sessions, questions))
    return conversations


async def evaluate(
    url: str,
    backend: str,
    conversations: list[Conversation],
    ks: tuple[int, ...] = (5, 10),
    embedder: Any = None,
) -> Result:
    """Ingest every conversation, ask every question, score the rankings (hybrid
    search with ``embedder``: an embedder or its name)."""
    result = Result(backend)
    sums = dict.fromkeys(ks, 0.0)
    per: dict[int, dict[int, float]] = {}
    async with SqlMemoryService.from_url(url, embedder=embedder) as memory:
        if memory.embedder is not None:
            result.embedder = memory.embedder.model
            if await memory.vector_storage() == "none":
                raise SystemExit(f"{backend}: this database keeps no vectors (no pgvector)")
        start = time.perf_counter()
        for conversation in conversations:
            for session in conversation.sessions:
                report = await memory.add_session_to_memory(session)
                result.events += report.events
        result.ingest_seconds = time.perf_counter() - start
        for conversation in conversations:
            for question, evidence, category in conversation.questions:
                began = time.perf_counter()
                found = await memory.search_memory(
                    app_name=APP, user_id=conversation.user_id, query=question, limit=max(ks)
                )
                result.latencies_ms.append((time.perf_counter() - began) * 1000)
                ranked = [m.custom_metadata["event_id"] for m in found.memories]
                bucket = per.setdefault(category, dict.fromkeys(ks, 0.0))
                for k in ks:
                    share = len(evidence & set(ranked[:k])) / len(evidence)
                    sums[k] += share
                    bucket[k] += share
                result.asked[category] = result.asked.get(category, 0) + 1
                result.questions += 1
    result.recall = {k: sums[k] / max(result.questions, 1) for k in ks}
    result.by_category = {
        c: {k: v / result.asked[c] for k, v in bucket.items()} for c, bucket in sorted(per.items())
    }
    return result


def _percentile(values: list[float], q: float) -> float:
    if len(values) < 2:
        return values[0] if values else 0.0
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


@dataclass
class Run:
    """What to measure: plain recall, or (``facts``, the LoCoMo folder) memory
    generation replaying the observations (:mod:`.locomo_facts`)."""

    embedder: str | None = None
    facts: Path | None = None
    limit: int | None = None

    async def evaluate(self, url: str, backend: str, conversations: list[Conversation]) -> Any:
        if self.facts is None:
            return await evaluate(url, backend, conversations, embedder=self.embedder)
        from .locomo_facts import evaluate_facts

        return await evaluate_facts(
            url, backend, conversations, self.facts, limit=self.limit, embedder=self.embedder
        )


async def run_backend(
    backend: str,
    conversations: list[Conversation],
    url: str | None,
    admin_url: str,
    embedder: str | None = None,
    run: Run | None = None,
) -> Any:
    """Evaluate one backend on a fresh database (a temporary file, or a throwaway
    PostgreSQL or MySQL database created through ``admin_url``; with an embedder, on
    a PostgreSQL server with pgvector) unless ``url`` is given."""
    run = run or Run(embedder=embedder)
    if url is not None:
        engine = create_engine(url)
        try:
            await upgrade(engine)
        finally:
            await engine.dispose()
        return await run.evaluate(url, backend, conversations)
    if backend == "sqlite":
        with tempfile.TemporaryDirectory() as folder:
            db_url = f"sqlite:///{folder}/locomo.db"
            return await run_backend(backend, conversations, db_url, admin_url, run=run)
    if run.embedder is not None and backend == "postgres":
        from .hybrid_bench import vector_server

        async with vector_server(backend, admin_url) as (server, _):
            return await _on_throwaway(backend, conversations, server, run)
    return await _on_throwaway(backend, conversations, admin_url, run)


async def _on_throwaway(
    backend: str, conversations: list[Conversation], admin_url: str, run: Run
) -> Any:
    from .__main__ import throwaway

    async with throwaway(backend, admin_url) as db_url:
        return await run_backend(backend, conversations, db_url, admin_url, run=run)


def report(results: list[Result], console: Console) -> None:
    table = Table(title="LoCoMo retrieval (categories 1-4), adk-sqlstore SqlMemoryService")
    for column in (
        "backend",
        "search",
        "questions",
        "recall@5",
        "recall@10",
        "search p50 ms",
        "search p95 ms",
        "ingest events/s",
    ):
        table.add_column(column, justify="right")
    for r in results:
        table.add_row(
            r.backend,
            f"hybrid, {r.embedder}" if r.embedder else "BM25",
            str(r.questions),
            f"{r.recall[5]:.3f}",
            f"{r.recall[10]:.3f}",
            f"{_percentile(r.latencies_ms, 50):.1f}",
            f"{_percentile(r.latencies_ms, 95):.1f}",
            f"{r.events / r.ingest_seconds:,.0f}" if r.ingest_seconds else "-",
        )
    console.print(table)
    per = Table(title="recall@5 / recall@10 per question category")
    per.add_column("backend")
    for c, name in CATEGORIES.items():
        per.add_column(f"{c} {name}", justify="right")
    for r in results:
        cells = [
            f"{r.by_category[c][5]:.3f} / {r.by_category[c][10]:.3f} ({r.asked[c]})"
            if c in r.by_category
            else "-"
            for c in CATEGORIES
        ]
        per.add_row(r.backend, *cells)
    console.print(per)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--backend",
        choices=["sqlite", "postgres", "mysql", "both", "all"],
        default="both",
        help="both: SQLite and PostgreSQL; all: MySQL/MariaDB too (default: both, or all"
        " with --facts)",
    )
    parser.add_argument(
        "--mysql-admin-url",
        default=DEFAULT_MYSQL_ADMIN,
        help="MySQL or MariaDB server on which a throwaway database is created",
    )
    parser.add_argument(
        "--facts",
        choices=["replay"],
        help="memory generation: a model replaying LoCoMo's observations as its facts"
        " (benchmarks.locomo_facts); recall of turns, facts and both",
    )
    parser.add_argument("--json", action="store_true", help="one line of JSON per backend")
    parser.add_argument(
        "--url",
        help="use this (migrated or empty) database instead of a"
        " throwaway one; needs --backend sqlite or postgres",
    )
    parser.add_argument(
        "--postgres-admin-url",
        default=DEFAULT_POSTGRES_ADMIN,
        help="server on which a throwaway database is created",
    )
    parser.add_argument("--conversations", type=int, help="only the first N conversations")
    parser.add_argument(
        "--embedder",
        help="hybrid search with this embedder (minilm, openai, google, module:NAME)",
    )
    parser.add_argument("--data", type=Path, default=DATA, help="the LoCoMo folder")
    args = parser.parse_args(argv)
    if not args.data.is_dir():
        print(f"LoCoMo data not found at {args.data}", file=sys.stderr)
        return 2
    every = ["sqlite", "postgres", "mysql"]
    chosen = "all" if args.facts and args.backend == "both" else args.backend
    backends = {"both": every[:2], "all": every}.get(chosen, [chosen])
    if args.url and len(backends) > 1:
        parser.error("--url needs one --backend")
    conversations = load_conversations(args.data, args.conversations)
    console = Console(stderr=args.json)
    run = Run(args.embedder, args.data if args.facts else None, args.conversations)
    results = []
    for backend in backends:
        where = redact_url(args.url) if args.url else f"throwaway {backend} database"
        console.print(
            f"{backend}: ingesting {sum(len(c.sessions) for c in conversations)}"
            f" sessions of {len(conversations)} conversations into {where}"
        )
        admin = args.mysql_admin_url if backend == "mysql" else args.postgres_admin_url
        result = asyncio.run(run_backend(backend, conversations, args.url, admin, run=run))
        if args.json:
            print(json.dumps(result.as_json() if args.facts else as_dict(result)), flush=True)
        results.append(result)
    if args.facts:
        from .locomo_facts import report_facts

        report_facts(results, console)
    else:
        report(results, console)
    return 0


def as_dict(result: Result) -> dict[str, Any]:
    """The figures of one result (for tests and RESULTS files)."""
    return {
        "backend": result.backend,
        "questions": result.questions,
        "recall@5": result.recall[5],
        "recall@10": result.recall[10],
        "by_category": result.by_category,
        "p50_ms": _percentile(result.latencies_ms, 50),
        "p95_ms": _percentile(result.latencies_ms, 95),
    }


if __name__ == "__main__":
    raise SystemExit(main())
