"""``python -m benchmarks citus [--size small|full]``: the per-user calls on a Citus
cluster beside the same coordinator undistributed, in one run.

Starts a throwaway cluster (a coordinator and two workers on free ports, from
``tests/citus_cluster.py``; the citus extension must be installed: ``.ci/run`` runs
``../shared/citus/install.sh``). Two databases on the coordinator: one with the
extension, its tables distributed by ``adk-sqlstore migrate``'s code; one plain, never
distributed. The same calls run on each, one at a time from one client: append (a
session key and a ``user:`` key), append with an ``app:`` key (a reference-table write:
every node, two-phase), get_session (the last 20 events), ingestion of one event
(add_events_to_memory) and search_memory; p50 and p95 in milliseconds, and the ratio
of the cluster's p50 to the plain database's.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable
from typing import Any

from rich.console import Console
from rich.table import Table

from adk_sqlstore import Event, EventActions, SqlMemoryService, SqlSessionService
from adk_sqlstore.engine import create_engine
from adk_sqlstore.migration import citus_layout, upgrade

SAMPLES = {"small": 30, "full": 400}
USERS = 16
WORDS = "kayak trip lisbon harbour sunrise coffee museum ferry tram bakery".split()


def _event(n: int, delta: dict[str, Any]) -> Event:
    words = " ".join(WORDS[(n + k) % len(WORDS)] for k in range(6))
    content = {"role": "user", "parts": [{"text": f"{words} turn {n}"}]}
    return Event(author="user", content=content, actions=EventActions(state_delta=delta))


def _quantiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return statistics.median(ordered), p95


async def _timed(samples: list[float], call: Awaitable[Any]) -> None:
    """Await ``call`` (a coroutine, which starts running here) and record its time."""
    started = time.perf_counter()
    await call
    samples.append((time.perf_counter() - started) * 1000)


async def measure(url: str, samples: int) -> dict[str, tuple[float, float]]:
    """p50 and p95 (ms) of each call on the store at ``url`` (migrated here)."""
    engine = create_engine(url)
    await upgrade(engine)
    await engine.dispose()
    times: dict[str, list[float]] = {
        name: [] for name in ("append", "append (app: key)", "get", "ingest", "search")
    }
    async with SqlSessionService.from_url(url) as sessions:
        memory = SqlMemoryService(sessions.engine)
        opened = [
            await sessions.create_session(app_name="bench", user_id=f"user-{n}")
            for n in range(USERS)
        ]
        for n in range(20):  # warm: pools, statement caches, some memories to search
            for session in opened:
                await sessions.append_event(session, _event(n, {"warm": n}))
        for session in opened:
            await memory.add_session_to_memory(session)
        for n in range(samples):
            session = opened[n % USERS]
            key: dict[str, Any] = {"app_name": "bench", "user_id": session.user_id}
            event = _event(n, {"n": n, "user:n": n})
            await _timed(times["append"], sessions.append_event(session, event))
            await _timed(
                times["get"],
                sessions.get_session(
                    **key, session_id=session.id, config={"num_recent_events": 20}
                ),
            )
            await _timed(
                times["ingest"],
                memory.add_events_to_memory(**key, session_id=session.id, events=[event]),
            )
            query = f"{WORDS[n % len(WORDS)]} {WORDS[(n + 3) % len(WORDS)]}"
            await _timed(times["search"], memory.search_memory(**key, query=query))
        for n in range(max(10, samples // 4)):  # apart: they write every node
            session = opened[n % USERS]
            shared = _event(n, {"app:n": n})
            await _timed(times["append (app: key)"], sessions.append_event(session, shared))
    return {name: _quantiles(values) for name, values in times.items()}


def run(size: str, console: Console) -> tuple[Table, str]:
    """Start the cluster, measure both databases, and the table (rich and Markdown)."""
    from tests.citus_cluster import CitusCluster

    with CitusCluster(workers=2) as cluster:
        distributed = cluster.create_database("bench_citus")

        async def plain() -> str:
            import asyncpg

            conn = await asyncpg.connect(cluster.coordinator.url())
            await conn.execute('CREATE DATABASE "bench_plain"')
            await conn.close()
            return cluster.coordinator.url("bench_plain")

        undistributed = asyncio.run(plain())

        async def both() -> tuple[Any, ...]:
            on_cluster = await measure(distributed, SAMPLES[size])
            engine = create_engine(distributed)
            layout = await citus_layout(engine)
            await engine.dispose()
            return on_cluster, await measure(undistributed, SAMPLES[size]), layout

        on_cluster, alone, layout = asyncio.run(both())
    assert layout is not None and layout[1] == 2, layout
    rich = Table(title=f"Citus: 2 workers ({len(layout[0])} tables) vs the coordinator alone")
    heads = ["call", "Citus p50", "Citus p95", "undistributed p50", "undistributed p95", "ratio"]
    for head in heads:
        rich.add_column(head, justify="left" if head == "call" else "right")
    lines = ["| " + " | ".join(heads) + " |", "|" + " --- |" * len(heads)]
    for name, (p50, p95) in on_cluster.items():
        base50, base95 = alone[name]
        row = [name, f"{p50:.2f} ms", f"{p95:.2f} ms", f"{base50:.2f} ms", f"{base95:.2f} ms"]
        row.append(f"{p50 / base50:.1f}x")
        rich.add_row(*row)
        lines.append("| " + " | ".join(row) + " |")
    return rich, "\n".join(lines)
