"""Code that tests run in other OS processes (multiprocessing, spawn)."""

from __future__ import annotations

import asyncio
from typing import Any

from adk_sqlstore import Event, SqlSessionService, StaleSessionError


def race_appends(
    url: str, session_id: str, name: str, rounds: int, barrier: Any, results: Any
) -> None:
    """Each round: load the session, wait for the other process, append, wait again."""

    async def run() -> None:
        async with SqlSessionService.from_url(url) as service:
            for n in range(rounds):
                session = await service.get_session(
                    app_name="race", user_id="u1", session_id=session_id
                )
                assert session is not None
                barrier.wait()
                event = Event(
                    author=name,
                    invocation_id=f"{name}-{n}",
                    actions={"state_delta": {"last_writer": name, f"user:{name}": n}},
                )
                try:
                    await service.append_event(session, event)
                    results.put((n, name, "won", event.id, session.revision))
                except StaleSessionError:
                    results.put((n, name, "stale", event.id, None))
                barrier.wait()

    asyncio.run(run())


def create_with_auto_migrate(url: str, n: int, results: Any) -> None:
    """Open a service that migrates a fresh database itself, then create a session."""

    async def run() -> None:
        async with SqlSessionService.from_url(url, auto_migrate=True) as service:
            await service.create_session(app_name="race", user_id=f"u{n}")

    try:
        asyncio.run(run())
        results.put(f"ok {n}")
    except Exception as exc:  # reported to the test, which shows it
        results.put(f"{type(exc).__name__}: {exc}")
