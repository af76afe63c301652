"""Code that tests run in other OS processes, and :func:`process_context`, which starts them."""

from __future__ import annotations

import asyncio
import multiprocessing
from typing import TYPE_CHECKING, Any

from adk_sqlstore import (
    Event,
    EventActions,
    GetSessionConfig,
    SqlMemoryService,
    SqlSessionService,
    StaleSessionError,
)

if TYPE_CHECKING:
    from multiprocessing.context import ForkServerContext, SpawnContext

PRELOADED = ["tests.workers", "tests.adk_agents"]
"""What every worker process has imported before it starts: this module and the ADK
agents (skipped where google-adk is not installed)."""


def process_context() -> ForkServerContext | SpawnContext:
    """The multiprocessing context the tests start other OS processes with.

    ``forkserver``: each process is forked from a server process (one per test process)
    that has imported :data:`PRELOADED` once and holds no connection, event loop or
    thread of the tests. A worker is as separate as a spawned one (its own interpreter
    state, connections and pools) but starts in milliseconds instead of importing
    SQLAlchemy, the store and ADK again (1-2 s of CPU each, which many tests paid
    several times). ``spawn`` where there is no fork server (Windows).
    """
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOADED)
    return context


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


def retrying_appender(url: str, session_id: str, name: str, count: int, results: Any) -> None:
    """Append ``count`` events to one shared session, reloading and retrying after
    every ``StaleSessionError``; report the ids that were accepted, in order."""

    async def run() -> tuple[list[str], int, int]:
        accepted: list[str] = []
        attempts = stale = 0
        recent = GetSessionConfig(num_recent_events=1)
        async with SqlSessionService.from_url(url) as service:
            key = {"app_name": "race", "user_id": "u1", "session_id": session_id}
            session = await service.get_session(**key, config=recent)
            assert session is not None
            for n in range(count):
                while True:
                    attempts += 1
                    event = Event(
                        author=name,
                        invocation_id=f"{name}-{n}",
                        actions=EventActions(
                            state_delta={
                                "last_writer": name,
                                f"count_{name}": n + 1,
                                f"user:{name}": n + 1,
                            }
                        ),
                    )
                    try:
                        await service.append_event(session, event)
                    except StaleSessionError:
                        stale += 1
                        reloaded = await service.get_session(**key, config=recent)
                        assert reloaded is not None
                        session = reloaded
                        continue
                    accepted.append(event.id)
                    break
        return accepted, attempts, stale

    try:
        results.put((name, *asyncio.run(run())))
    except Exception as exc:  # reported to the test, which shows it
        results.put((name, f"{type(exc).__name__}: {exc}", 0, 0))


def key_writer(url: str, name: str, count: int, results: Any) -> None:
    """On a session of its own (user u1), set ``user:<name>`` and ``app:<name>`` to
    1..count, one append each."""

    async def run() -> None:
        async with SqlSessionService.from_url(url) as service:
            session = await service.create_session(app_name="race", user_id="u1")
            for n in range(1, count + 1):
                delta = {f"user:{name}": n, f"app:{name}": n, "n": n}
                await service.append_event(
                    session, Event(author=name, actions=EventActions(state_delta=delta))
                )

    try:
        asyncio.run(run())
        results.put((name, "ok"))
    except Exception as exc:
        results.put((name, f"{type(exc).__name__}: {exc}"))


def endless_writer(url: str, user_id: str, seed: int) -> None:
    """Until killed: new sessions of ``user_id``, 12 appends each with session, user:
    and app: keys, memory ingestion every 4 appends and at the end."""
    import random

    rng = random.Random(seed)

    async def run() -> None:
        async with (
            SqlSessionService.from_url(url) as service,
            SqlMemoryService(service.engine) as memory,
        ):
            while True:
                session = await service.create_session(app_name="crash", user_id=user_id)
                for n in range(1, 13):
                    words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 8)))
                    delta = {
                        "n": n,
                        f"user:last_{session.id}": n,
                        f"app:{user_id}": n,
                        "words": words,
                    }
                    await service.append_event(
                        session,
                        Event(
                            author="user" if n % 2 else "agent",
                            content={"role": "user", "parts": [{"text": words}]} if n % 3 else None,
                            actions=EventActions(state_delta=delta),
                        ),
                    )
                    if n % 4 == 0:
                        await memory.add_session_to_memory(session)

    asyncio.run(run())


WORDS = "lunch thali pancakes waffles badminton garage bicycle canteen soup tea".split()


def contended_writer(url: str, name: str, count: int, results: Any) -> None:
    """Several kinds of write in a loop on one SQLite file: create, append, ingest,
    list, delete. Reports errors rather than raising."""

    async def run() -> int:
        done = 0
        async with (
            SqlSessionService.from_url(url) as service,
            SqlMemoryService(service.engine) as memory,
        ):
            for n in range(count):
                s = await service.create_session(app_name="busy", user_id=name)
                for k in range(3):
                    await service.append_event(
                        s,
                        Event(
                            author="user",
                            content={"role": "user", "parts": [{"text": f"turn {k} of {n}"}]},
                            actions=EventActions(state_delta={f"user:k{k}": n}),
                        ),
                    )
                await memory.add_session_to_memory(s)
                await service.list_sessions(app_name="busy", user_id=name)
                if n % 2:
                    await service.delete_session(app_name="busy", user_id=name, session_id=s.id)
                done += 1
        return done

    try:
        results.put((name, asyncio.run(run())))
    except Exception as exc:
        results.put((name, f"{type(exc).__name__}: {exc}"))


def _anonymous_rss() -> int:
    """This process's anonymous resident memory (heap, not mapped files), in bytes."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no RssAnon in /proc/self/status")


def artifact_round_trip(url: str, source: str, target: str, results: Any) -> None:
    """Stream the file ``source`` into an artifact and back out into ``target``,
    sampling anonymous memory every 2 ms: puts (baseline, peak, seconds in, seconds
    out) in bytes and seconds. The baseline is taken once everything is imported and
    the service has made its connections."""
    import threading
    import time

    from adk_sqlstore.adk import SqlArtifactService

    async def run(src: Any, out: Any) -> tuple[int, int, float, float]:
        async with SqlArtifactService.from_url(url) as service:
            where: dict[str, Any] = {"app_name": "big", "user_id": "u1", "session_id": "s1"}
            await service.save_artifact_stream(
                **where, filename="warm-up", stream=[b"x" * 1000], mime_type="text/plain"
            )
            _ = [c async for c in service.read_artifact(**where, filename="warm-up")]
            baseline, peak, done = _anonymous_rss(), [0], threading.Event()

            def sample() -> None:
                while not done.is_set():
                    peak[0] = max(peak[0], _anonymous_rss())
                    time.sleep(0.002)

            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            try:
                start = time.perf_counter()
                await service.save_artifact_stream(
                    **where,
                    filename="video.bin",
                    stream=iter(lambda: src.read(1 << 20), b""),
                    mime_type="application/octet-stream",
                )
                saved = time.perf_counter() - start
                start = time.perf_counter()
                async for chunk in service.read_artifact(**where, filename="video.bin"):
                    out.write(chunk)
                loaded = time.perf_counter() - start
            finally:
                done.set()
                sampler.join()
            return baseline, max(peak[0], _anonymous_rss()), saved, loaded

    with open(source, "rb") as src, open(target, "wb") as out:
        results.put(asyncio.run(run(src, out)))


def race_writer(url: str, conn: Any) -> None:
    """Run the writers of tests/test_forget_races.py sent over ``conn`` (a pipe), one
    at a time, sending back each one's result, until ``None`` comes."""
    from .race_ops import Executor

    async def serve() -> None:
        executor = Executor(url)
        try:
            await executor.sessions.ensure_schema()
            conn.send("ready")
            while (command := conn.recv()) is not None:
                conn.send(await executor.run(*command))
        finally:
            await executor.close()

    asyncio.run(serve())


def fact_generator(url: str, sessions: list[str], results: Any) -> None:
    """Generate facts for each of ``sessions`` (of one user) at once, with the colour
    model of tests.test_fact_races; put the summed report's figures."""
    from adk_sqlstore import MemoryGenerator

    from .test_fact_races import APP, USER, colour_model

    async def run() -> None:
        async with SqlMemoryService.from_url(url, generator=MemoryGenerator(colour_model())) as m:
            reports = await asyncio.gather(
                *(m.generate(app_name=APP, user_id=USER, session_id=s) for s in sessions)
            )
        results.put([(r.sessions, r.model_calls, r.created, r.invalidated) for r in reports])

    asyncio.run(run())
