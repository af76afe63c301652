"""``python -m benchmarks.pool_sizes [--url URL] [--tasks 50] [--seconds 10]``

How pool_size and max_overflow change PostgreSQL throughput: ``--tasks`` concurrent
tasks run conversation cycles (create a session, append 3 events, load it) through one
service for ``--seconds`` each, per setting, on a throwaway database; prints cycles per
setting and the most connections the service opened. The library's defaults
(``adk_sqlstore.engine.DEFAULT_POOL_SIZE``/``DEFAULT_MAX_OVERFLOW``) come from this run.
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid

from rich.console import Console
from rich.table import Table

from adk_sqlstore import Event, EventActions, SqlSessionService

from .__main__ import DEFAULT_ADMIN, throwaway

SETTINGS = [(5, 0), (5, 5), (10, 0), (10, 10), (20, 20), (40, 0)]


async def _cycles(
    url: str, pool_size: int, max_overflow: int, tasks: int, seconds: float
) -> tuple[int, int]:
    async with SqlSessionService.from_url(
        url, auto_migrate=True, pool_size=pool_size, max_overflow=max_overflow
    ) as service:
        await service.list_sessions(app_name="pool")  # migrated before the clock starts
        deadline = time.monotonic() + seconds
        done = 0
        peak = 0

        async def run() -> None:
            nonlocal done, peak
            user = uuid.uuid4().hex
            while time.monotonic() < deadline:
                session = await service.create_session(app_name="pool", user_id=user)
                for n in range(3):
                    await service.append_event(
                        session,
                        Event(author="user", actions=EventActions(state_delta={"n": n})),
                    )
                await service.get_session(app_name="pool", user_id=user, session_id=session.id)
                done += 1
                pool = service.engine.sync_engine.pool
                peak = max(peak, pool.checkedout())  # type: ignore[attr-defined]

        await asyncio.gather(*(run() for _ in range(tasks)))
        return done, peak


async def main(admin_url: str, tasks: int, seconds: float) -> None:
    table = Table(title=f"{tasks} tasks, {seconds:g} s per setting, PostgreSQL")
    for column in ("pool_size", "max_overflow", "cycles", "cycles/s", "connections used"):
        table.add_column(column, justify="right")
    for pool_size, max_overflow in SETTINGS:
        async with throwaway("postgres", admin_url) as url:
            done, peak = await _cycles(url, pool_size, max_overflow, tasks, seconds)
        table.add_row(
            str(pool_size), str(max_overflow), f"{done:,}", f"{done / seconds:,.0f}", str(peak)
        )
    Console().print(table)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m benchmarks.pool_sizes")
    parser.add_argument("--url", default=DEFAULT_ADMIN, help="admin URL of a PostgreSQL server")
    parser.add_argument("--tasks", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    asyncio.run(main(args.url, args.tasks, args.seconds))
