"""The session figures, measured for every contender on one database.

Each figure is measured ``repeat`` times on fresh sessions; the median is reported.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
import tracemalloc
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from .contenders import Contender, RawSqlite


@dataclass(frozen=True)
class Size:
    appends: int  # figure 1: sequential appends to one session
    tasks: int  # figure 2: concurrent tasks (one session each)
    per_task: int
    load: int  # figure 3: events in the session loaded whole
    big: int  # figure 4: the long session for num_recent_events
    huge: int  # figure 3b: a long session loaded whole
    sessions: int  # figure 5: sessions of one user
    repeat: int


SIZES = {
    "small": Size(
        appends=100, tasks=20, per_task=5, load=200, big=2_000, huge=2_000, sessions=200, repeat=1
    ),
    "full": Size(
        appends=2_000,
        tasks=20,
        per_task=100,
        load=2_000,
        big=100_000,
        huge=50_000,
        sessions=10_000,
        repeat=3,
    ),
}


@dataclass
class Figure:
    """One row of the results table: a value per contender."""

    key: str
    label: str
    unit: str
    higher_is_better: bool
    values: dict[str, float] = field(default_factory=dict)
    extra: dict[str, str] = field(default_factory=dict)


async def _median(repeat: int, once: Callable[[], Awaitable[float]]) -> float:
    return statistics.median([await once() for _ in range(repeat)])


async def warm_up(c: Contender) -> bool:
    """Pools, prepared statements and caches, before anything is timed."""
    session = await c.create(f"warm-{uuid.uuid4().hex[:8]}")
    for n in range(20):
        await c.append(session, c.make_event(n))
    await c.load(session_user(c, session), c.session_id(session), None)
    return True


def session_user(c: Contender, session: Any) -> str:
    return str(session["user"] if isinstance(session, dict) else session.user_id)


async def append_sequential(c: Contender, size: Size) -> float:
    async def once() -> float:
        session = await c.create(f"seq-{uuid.uuid4().hex[:8]}")
        events = [c.make_event(n) for n in range(size.appends)]
        start = time.perf_counter()
        for event in events:
            await c.append(session, event)
        return size.appends / (time.perf_counter() - start)

    return await _median(size.repeat, once)


async def append_concurrent(c: Contender, size: Size) -> float:
    async def once() -> float:
        sessions = [await c.create(f"conc-{n}-{uuid.uuid4().hex[:6]}") for n in range(size.tasks)]
        # the events are made before the clock starts, as for the sequential figure
        events = [[c.make_event(n) for n in range(size.per_task)] for _ in sessions]
        start = time.perf_counter()
        if isinstance(c, RawSqlite):
            await c.concurrent(sessions, events)
        else:

            async def task(session: Any, mine: list[Any]) -> None:
                for event in mine:
                    await c.append(session, event)

            await asyncio.gather(*(task(s, e) for s, e in zip(sessions, events, strict=True)))
        return size.tasks * size.per_task / (time.perf_counter() - start)

    return await _median(size.repeat, once)


async def _timed_load(
    c: Contender, user: str, session_id: str, recent: int | None, repeat: int
) -> float:
    await c.load(user, session_id, recent)  # warm caches and prepared statements
    times = []
    for _ in range(max(3 * repeat, 3)):  # loads are quick: more runs, a steadier median
        start = time.perf_counter()
        await c.load(user, session_id, recent)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


async def sessions_to_load(c: Contender, size: Size) -> dict[str, tuple[str, str]]:
    """The sessions figures 3 and 4 read: (user, session id) by name."""
    made = {}
    for name, count in (("load", size.load), ("big", size.big), ("huge", size.huge)):
        user = f"{name}-{uuid.uuid4().hex[:8]}"
        made[name] = (user, await c.bulk(user, count))
    return made


async def list_many(c: Contender, size: Size) -> tuple[float, float]:
    """(ms, peak MiB of Python allocations) to list a user with many sessions."""
    user = f"many-{uuid.uuid4().hex[:8]}"
    for _ in range(size.sessions):
        await c.create(user)
    await c.list(user)
    times = []
    for _ in range(max(size.repeat, 3)):  # timed without tracemalloc, which slows
        start = time.perf_counter()  # every allocation (Python-heavy stores most)
        count = await c.list(user)
        times.append((time.perf_counter() - start) * 1000)
        assert count == size.sessions, (c.name, count)
    tracemalloc.start()
    try:
        await c.list(user)
        peak = tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()
    return statistics.median(times), peak


async def run_sessions(
    contenders: list[Contender],
    url: str,
    size: Size,
    progress: Callable[[str], None],
    notes: list[str] | None = None,
) -> list[Figure]:
    """Every session figure for every contender; the contenders' notes go to ``notes``.

    A contender that raises fails the figures concerned (the reason is kept), not the run.
    """
    figures = {
        "append": Figure(
            "append", f"append_event, sequential, {size.appends:,} events", "events/s", True
        ),
        "concurrent": Figure(
            "concurrent",
            f"append_event, {size.tasks} tasks on {size.tasks} sessions",
            "events/s",
            True,
        ),
        "load": Figure("load", f"get_session, {size.load:,} events", "ms", False),
        "load_huge": Figure("load_huge", f"get_session, {size.huge:,} events", "ms", False),
        "recent_small": Figure(
            "recent_small", f"num_recent_events=20, {size.load:,}-event session", "ms", False
        ),
        "recent_big": Figure(
            "recent_big", f"num_recent_events=20, {size.big:,}-event session", "ms", False
        ),
        "list": Figure("list", f"list_sessions, {size.sessions:,} sessions", "ms", False),
        "list_mem": Figure("list_mem", "list_sessions peak memory", "MiB", False),
    }

    async def measure(keys: tuple[str, ...], c: Contender, job: Awaitable[Any]) -> Any:
        """``job``'s result, or None when it raised: then ``keys``' figures fail."""
        try:
            return await job
        except Exception as exc:  # a contender failing is a result, not a crash
            reason = (str(exc).splitlines() or [""])[0][:80]
            for key in keys:
                figures[key].extra[c.name] = f"{type(exc).__name__}: {reason}"
            progress(f"{c.name}: {figures[keys[0]].label} failed: {reason}")
            return None

    loads = (
        ("load", "load", None),
        ("load_huge", "huge", None),
        ("recent_small", "load", 20),
        ("recent_big", "big", 20),
    )
    for c in contenders:
        if await measure(tuple(figures), c, _opened(c, url)) is None:
            with contextlib.suppress(Exception):  # what it opened before it failed
                await c.close()
            continue
        try:
            progress(f"{c.name}: appends")
            if await measure(("append", "concurrent"), c, warm_up(c)) is not None:
                for key, job in (("append", append_sequential), ("concurrent", append_concurrent)):
                    value = await measure((key,), c, job(c, size))
                    if value is not None:
                        figures[key].values[c.name] = value
            progress(f"{c.name}: loads (writing a {size.big:,}-event session)")
            made = await measure(tuple(key for key, _, _ in loads), c, sessions_to_load(c, size))
            for key, name, recent in loads if made is not None else ():
                repeat = 1 if key == "load_huge" else size.repeat
                value = await measure((key,), c, _timed_load(c, *made[name], recent, repeat))
                if value is not None:
                    figures[key].values[c.name] = value
            progress(f"{c.name}: listing {size.sessions:,} sessions")
            listed = await measure(("list", "list_mem"), c, list_many(c, size))
            if listed is not None:
                figures["list"].values[c.name], figures["list_mem"].values[c.name] = listed
        finally:
            await c.close()
        if notes is not None:
            notes += c.notes
    return list(figures.values())


async def _opened(c: Contender, url: str) -> bool:
    await c.open(url)
    return True
