"""Optimistic concurrency across OS processes, not just inside one."""

from __future__ import annotations

from adk_sqlstore import SqlSessionService

from .workers import process_context, race_appends


async def test_two_processes_racing_on_one_session_one_wins_each_round(db_url: str) -> None:
    rounds = 25
    async with SqlSessionService.from_url(db_url) as service:
        session = await service.create_session(app_name="race", user_id="u1")
    ctx = process_context()
    barrier = ctx.Barrier(2, timeout=60)
    results = ctx.Queue()
    workers = [
        ctx.Process(target=race_appends, args=(db_url, session.id, name, rounds, barrier, results))
        for name in ("proc-a", "proc-b")
    ]
    for w in workers:
        w.start()
    outcomes = [results.get(timeout=120) for _ in range(2 * rounds)]
    for w in workers:
        w.join(timeout=60)
        assert w.exitcode == 0
    winners = {}
    for n, name, outcome, event_id, revision in outcomes:
        if outcome == "won":
            assert n not in winners, f"two winners in round {n}"
            winners[n] = (name, event_id, revision)
    # Exactly one winner and one StaleSessionError per round.
    assert sorted(winners) == list(range(rounds))
    assert sum(o[2] == "stale" for o in outcomes) == rounds

    async with SqlSessionService.from_url(db_url) as service:
        stored = await service.get_session(app_name="race", user_id="u1", session_id=session.id)
    assert stored is not None
    # No event lost, none duplicated, in round order; revision counts the appends.
    assert [e.id for e in stored.events] == [winners[n][1] for n in range(rounds)]
    assert [winners[n][2] for n in range(rounds)] == list(range(1, rounds + 1))
    assert stored.revision == rounds
    assert stored.state["last_writer"] == winners[rounds - 1][0]
