"""Search latency at 1,000,000 memories, on its own (the same load and queries as the
full ``python -m benchmarks run``: 1,000 users with 900 memories each and one user with
100,000, Zipf-distributed words, queries of 3-6 words and 3 stop words).

To compare two versions in one run, import the other one first, e.g. from a
``git worktree`` of an earlier commit::

    python -m benchmarks.search_scale --backend sqlite
    git worktree add /tmp/before <commit>
    PYTHONPATH=/tmp/before/src:/tmp/before python -m benchmarks.search_scale --label before
"""

from __future__ import annotations

import argparse
import asyncio
import time

from adk_sqlstore import SqlMemoryService

from .__main__ import DEFAULT_ADMIN, throwaway
from .memory_bench import APP, Corpus, _load_scale, _percentiles, _search_latencies, _settle


async def measure(url: str, label: str, backend: str, users: int, heavy: int) -> str:
    corpus = Corpus()
    start = time.perf_counter()
    async with SqlMemoryService.from_url(url, auto_migrate=True) as memory:
        await _load_scale(memory, corpus, users, 900, heavy, lambda _: None)
        load = time.perf_counter() - start
        await _settle(memory)
        await memory.search_memory(app_name=APP, user_id="user-0", query="warm up")

        async def ours(user: str, query: str) -> object:
            return await memory.search_memory(app_name=APP, user_id=user, query=query)

        normal, heavy_times = await _search_latencies(ours, corpus, users, 200, heavy > 0)
    p50, p95 = _percentiles(normal)
    total = users * 900 + heavy
    line = (
        f"{label} {backend}: {total:,} memories loaded in {load:.0f} s"
        f" ({total / load:,.0f}/s); search p50 {p50:.2f} ms, p95 {p95:.2f} ms"
    )
    if heavy:
        h50, h95 = _percentiles(heavy_times)
        line += f"; user with {heavy:,}: p50 {h50:.1f} ms, p95 {h95:.1f} ms"
    return line


async def main(args: argparse.Namespace) -> None:
    async with throwaway(args.backend, args.postgres_admin_url) as url:
        print(await measure(url, args.label, args.backend, args.users, args.heavy), flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--label", default="this version")
    parser.add_argument("--users", type=int, default=1_000)
    parser.add_argument("--heavy", type=int, default=100_000)
    parser.add_argument("--postgres-admin-url", default=DEFAULT_ADMIN)
    asyncio.run(main(parser.parse_args()))
