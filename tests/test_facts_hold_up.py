"""Generated facts that hold up (issue 38): reused session ids, messy replies, deletions
that undo invalidations, both times of an invalidation, equal facts, add_memory's
metadata and visible failures, on SQLite, PostgreSQL and MariaDB (and Citus: the
contract suite runs this file), with scripted models.

The design notes (../shared/seeds/000): "Store dated facts, prefer recent ones" and
"Whatever you store, include a timestamp, because recency is the cheapest tie-breaker
when facts conflict."
"""

from __future__ import annotations

import json
import logging
import time
import unicodedata
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from adk_sqlstore import (
    Event,
    GenerationError,
    MemoryEntry,
    MemoryGenerator,
    Session,
    SqlMemoryService,
    SqlSessionService,
)
from adk_sqlstore.generation import running, writing

from .embedders import Concepts
from .scripted_models import ScriptedModel, create_all, memory_with

APP = "facts-app"
USER = "user-1"
JANUARY = datetime(2026, 1, 10, 12, tzinfo=UTC).timestamp()
JUNE = datetime(2026, 6, 10, 12, tzinfo=UTC).timestamp()
SEPTEMBER = datetime(2026, 9, 10, 12, tzinfo=UTC).timestamp()


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat()


def turn(text: str, ts: float) -> Event:
    return Event(author="user", timestamp=ts, content={"role": "user", "parts": [{"text": text}]})


def every_turn(prompt: dict[str, Any]) -> dict[str, Any]:
    """Extraction: each user turn is a fact, true from its event's time."""
    return {
        "facts": [
            {
                "text": f"The user said: {e['text']}",
                "topics": ["USER_PREFERENCES"],
                "event_ids": [e["id"]],
            }
            for e in prompt["conversation"]
        ]
    }


def residence(prompt: dict[str, Any]) -> dict[str, Any]:
    """Extraction: "I live in X." is "The user lives in X.", true from the event."""
    facts = []
    for e in prompt["conversation"]:
        if e["text"].startswith("I live in "):
            city = e["text"].removeprefix("I live in ").rstrip(".")
            facts.append(
                {
                    "text": f"The user lives in {city}.",
                    "topics": ["USER_PERSONAL_INFO"],
                    "event_ids": [e["id"]],
                    "valid_from": e["time"],
                }
            )
    return {"facts": facts}


def invalidating(contradicts: Callable[[str, str], bool]) -> Callable[..., dict[str, Any]]:
    """Consolidation: each new fact is created, and invalidates every stored fact it
    ``contradicts(new text, stored text)``."""

    def answer(prompt: dict[str, Any]) -> dict[str, Any]:
        decisions: list[dict[str, Any]] = []
        for new in prompt["new_facts"]:
            decisions.append({"fact": new["id"], "action": "create"})
            for old in prompt["stored_facts"]:
                if contradicts(new["text"], old["text"]):
                    decisions.append(
                        {"fact": new["id"], "action": "invalidate", "target": old["id"]}
                    )
        return {"decisions": decisions}

    return answer


moved = invalidating(lambda new, old: "lives in" in new and "lives in" in old)
"""A new residence invalidates every stored one."""


async def said(sessions: SqlSessionService, text: str, ts: float, session_id: str | None = None,
               user_id: str = USER) -> Any:  # fmt: skip
    session = await sessions.create_session(app_name=APP, user_id=user_id, session_id=session_id)
    await sessions.append_event(session, turn(text, ts))
    return await sessions.get_session(app_name=APP, user_id=user_id, session_id=session.id)


async def texts(memory: SqlMemoryService, history: bool = False) -> dict[str, Any]:
    return {f.text: f for f in await memory.list_facts(app_name=APP, user_id=USER, history=history)}


# -- 1. a reused session id gets its first facts ----------------------------------------


@pytest.mark.parametrize("way", ["delete", "prune", "replace"])
async def test_a_session_made_again_under_its_id_is_generated_from_its_first_event(
    sessions: SqlSessionService, way: str
) -> None:
    """The watermark belongs to one incarnation of the session: deleting, pruning or
    replacing the session takes it (and its failed attempts) with it."""
    model = ScriptedModel(every_turn, create_all)
    memory = memory_with(sessions, model)
    first = await sessions.create_session(app_name=APP, user_id=USER, session_id="main")
    for n, text in enumerate(["I like tea.", "I like jazz."]):
        await sessions.append_event(first, turn(text, JANUARY + n))
    await memory.add_session_to_memory(first)
    new_turns = [turn(t, JUNE + n) for n, t in enumerate(["I cycle.", "I read.", "I swim."])]
    if way == "delete":
        await sessions.delete_session(app_name=APP, user_id=USER, session_id="main")
    elif way == "prune":
        await sessions.prune(older_than=0)
    if way == "replace":
        await sessions.import_session(
            Session(id="main", app_name=APP, user_id=USER, events=new_turns), replace=True
        )
    else:
        again = await sessions.create_session(app_name=APP, user_id=USER, session_id="main")
        for event in new_turns:
            await sessions.append_event(again, event)
    stored = await sessions.get_session(app_name=APP, user_id=USER, session_id="main")
    assert stored is not None
    report = await memory.add_session_to_memory(stored)
    assert report.generation is not None and report.generation.events == 3
    shown = [e["text"] for e in model.prompts("extraction")[-1]["conversation"]]
    assert shown == ["I cycle.", "I read.", "I swim."]
    facts = await texts(memory)
    for text in ("I cycle.", "I read.", "I swim."):
        assert f"The user said: {text}" in facts
    assert (await memory.generate_pending()).sessions == 0  # nothing left pending


async def test_failed_attempts_do_not_outlive_the_session(sessions: SqlSessionService) -> None:
    model = ScriptedModel(lambda prompt: "no JSON")
    memory = memory_with(sessions, model, max_attempts=1)
    session = await said(sessions, "I like tea.", JANUARY, session_id="main")
    await memory.add_session_to_memory(session)
    assert len(await memory.generation_failures(app_name=APP)) == 1
    await sessions.delete_session(app_name=APP, user_id=USER, session_id="main")
    assert await memory.generation_failures(app_name=APP, retrying=True) == []
    model.answers["extraction"] = every_turn
    again = await said(sessions, "I like jazz.", JUNE, session_id="main")
    report = await memory.add_session_to_memory(again)
    assert report.generation is not None and report.generation.created == 1


# -- 2. messy replies and failures of one session ----------------------------------------


async def test_nul_and_lone_surrogates_in_a_reply_are_stored_clean(
    sessions: SqlSessionService,
) -> None:
    reply = (
        '{"facts": [{"text": "The user likes \\ud83d tea\\u0000.", "topics": '
        '["USER_PREFERENCES"], "event_ids": ["E1"]}]}'
    )
    memory = memory_with(sessions, ScriptedModel(lambda prompt: reply))
    session = await said(sessions, "I like tea.", JANUARY)
    report = await memory.add_session_to_memory(session)  # never raised
    assert report.generation is not None and report.generation.created == 1
    (fact,) = (await texts(memory)).values()
    assert fact.text == "The user likes \ufffd tea."
    found = await memory.search_memory(app_name=APP, user_id=USER, query="tea", kind="facts")
    assert (found.memories[0].content.parts or [])[0].text == "The user likes \ufffd tea."


async def test_add_memory_with_consolidation_stores_nul_and_surrogates_clean(
    sessions: SqlSessionService,
) -> None:
    memory = memory_with(sessions, ScriptedModel())
    ids = await memory.add_memory(
        app_name=APP,
        user_id=USER,
        memories=[MemoryEntry(content={"parts": [{"text": "The user likes\x00 tea."}]})],
        consolidate=True,
    )
    assert len(ids) == 1
    assert list(await texts(memory)) == ["The user likes tea."]


async def test_one_sessions_failure_is_recorded_and_stops_no_other(
    sessions: SqlSessionService, monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    """A failure of any kind in one session's run (here the write raises) is a recorded
    attempt, logged with the session's and user's ids, never raised from an automatic
    run; generate_pending goes on with the other users' sessions."""
    memory = memory_with(sessions, ScriptedModel(every_turn, create_all))
    broken = await said(sessions, "I like tea.", JANUARY, user_id="a-user")
    fine = await said(sessions, "I like jazz.", JANUARY, user_id="b-user")
    real = writing.write_plan

    async def failing(to: Any, key: Any, *args: Any) -> None:
        if key.user_id == "a-user":
            raise RuntimeError("disk on fire")
        await real(to, key, *args)

    monkeypatch.setattr(running, "write_plan", failing)
    with caplog.at_level(logging.WARNING):
        report = await memory.generate_pending(app_name=APP)
    assert (report.sessions, report.failed, report.created) == (2, 1, 1)
    assert report.model_calls == 2  # the failed run's call is counted
    assert [f.text for f in await memory.list_facts(app_name=APP, user_id="b-user")] == [
        "The user said: I like jazz."
    ]
    (failure,) = await memory.generation_failures(app_name=APP, retrying=True)
    assert failure[:4] == (APP, "a-user", broken.id, 1) and failure[4] == "RuntimeError"
    logged = [r.getMessage() for r in caplog.records if "generation failed" in r.getMessage()]
    assert len(logged) == 1 and broken.id in logged[0] and "a-user" in logged[0]
    assert "I like tea" not in logged[0]
    ingest = await memory.add_session_to_memory(broken)  # automatic: never raised
    assert ingest.generation is not None and ingest.generation.failed == 1
    assert fine.id  # untouched


async def test_a_failed_run_counts_its_calls_and_is_listed_from_the_first_failure(
    sessions: SqlSessionService,
) -> None:
    memory = memory_with(sessions, ScriptedModel(lambda prompt: '{"facts": [{"text": "cut'))
    session = await said(sessions, "I like tea.", JANUARY)
    with pytest.raises(GenerationError) as raised:
        await memory.generate(app_name=APP, user_id=USER, session_id=session.id)
    report = raised.value.report
    assert report is not None and (report.failed, report.model_calls) == (1, 1)
    assert report.prompt_tokens > 0
    assert await memory.generation_failures(app_name=APP) == []  # not given up on yet
    ((_, _, session_id, attempts, error),) = await memory.generation_failures(
        app_name=APP, retrying=True
    )
    assert (session_id, attempts) == (session.id, 1) and "cut off" in (error or "")


# -- 3. deleting a session's facts undoes their invalidations ---------------------------


async def test_deleting_the_facts_that_invalidated_one_makes_it_current_again(
    sessions: SqlSessionService,
) -> None:
    memory = memory_with(sessions, ScriptedModel(residence, moved))
    s0 = await said(sessions, "I live in Paris.", JANUARY)
    s1 = await said(sessions, "I live in Berlin.", JUNE)
    await memory.add_session_to_memory(s0)
    await memory.add_session_to_memory(s1)
    paris = (await texts(memory, history=True))["The user lives in Paris."]
    assert not paris.current and paris.session_id == s0.id  # its text's source
    await memory.delete_memories(app_name=APP, user_id=USER, session_id=s1.id)
    facts = await texts(memory, history=True)
    assert list(facts) == ["The user lives in Paris."]
    restored = facts["The user lives in Paris."]
    assert restored.current and restored.invalid_at is None and restored.invalidate_time is None
    _, revisions = await memory.fact_history(app_name=APP, user_id=USER, fact_id=paris.id) or (
        None,
        [],
    )
    assert [r.action for r in revisions] == ["create", "invalidate", "restore"]
    found = await memory.search_memory(app_name=APP, user_id=USER, query="Paris", kind="facts")
    assert [m.id for m in found.memories] == [paris.id]


async def test_deleting_a_middle_fact_hands_the_invalidation_to_the_fact_that_stays(
    sessions: SqlSessionService,
) -> None:
    memory = memory_with(sessions, ScriptedModel(residence, moved))
    made = [
        await said(sessions, f"I live in {city}.", ts)
        for city, ts in (("Paris", JANUARY), ("Berlin", JUNE), ("Munich", SEPTEMBER))
    ]
    for session in made:
        await memory.add_session_to_memory(session)
    facts = await texts(memory, history=True)
    berlin = facts["The user lives in Berlin."]
    await memory.delete_memories(app_name=APP, user_id=USER, memory_ids=[berlin.id])
    facts = await texts(memory, history=True)
    paris, munich = facts["The user lives in Paris."], facts["The user lives in Munich."]
    assert munich.current and not paris.current
    assert paris.invalidated_by == munich.id and paris.invalid_at == iso(SEPTEMBER)
    assert [f.text for f in await memory.list_facts(app_name=APP, user_id=USER)] == [
        "The user lives in Munich."
    ]


# -- 4. both times of an invalidation ----------------------------------------------------


async def test_an_invalidation_keeps_when_it_stopped_being_true_and_when_it_was_learned(
    sessions: SqlSessionService,
) -> None:
    memory = memory_with(sessions, ScriptedModel(residence, moved))
    before = time.time()
    await memory.add_session_to_memory(await said(sessions, "I live in Paris.", JANUARY))
    await memory.add_session_to_memory(await said(sessions, "I live in Berlin.", JUNE))
    facts = await texts(memory, history=True)
    paris, berlin = facts["The user lives in Paris."], facts["The user lives in Berlin."]
    assert paris.invalid_at == iso(JUNE)  # when Berlin became true, not today
    assert paris.invalidate_time is not None
    assert datetime.fromisoformat(paris.invalidate_time).timestamp() >= before
    assert paris.invalidated_by == berlin.id
    _, revisions = await memory.fact_history(app_name=APP, user_id=USER, fact_id=paris.id) or (
        None,
        [],
    )
    invalidation = revisions[-1]
    assert (invalidation.action, invalidation.invalid_at) == ("invalidate", iso(JUNE))
    assert invalidation.by_fact_id == berlin.id
    assert invalidation.create_time == paris.invalidate_time
    found = await memory.search_memory(app_name=APP, user_id=USER, query="Paris", history=True)
    past = [m for m in found.memories if m.id == paris.id]
    assert past and past[0].custom_metadata is not None
    assert past[0].custom_metadata["invalid_time"] == iso(JUNE)
    assert past[0].custom_metadata["invalidate_time"] == paris.invalidate_time


async def test_a_backfilled_older_conversation_does_not_invalidate_a_newer_fact(
    sessions: SqlSessionService,
) -> None:
    memory = memory_with(sessions, ScriptedModel(residence, moved))
    await memory.add_session_to_memory(await said(sessions, "I live in Berlin.", JUNE))
    await memory.add_session_to_memory(await said(sessions, "I live in Paris.", JANUARY))
    facts = await texts(memory, history=True)
    paris, berlin = facts["The user lives in Paris."], facts["The user lives in Berlin."]
    assert berlin.current
    assert not paris.current and paris.invalid_at == iso(JUNE)
    assert paris.invalidated_by == berlin.id
    assert [f.text for f in await memory.list_facts(app_name=APP, user_id=USER)] == [
        "The user lives in Berlin."
    ]


# -- 5. equal facts are one --------------------------------------------------------------


def repeats(prompt: dict[str, Any]) -> dict[str, Any]:
    """Extraction: the same facts spelt several ways, each naming its own event."""
    events = [e["id"] for e in prompt["conversation"]]
    spellings = [
        "The user likes tea.",
        "The user likes tea.",
        "the user  LIKES tea",
        unicodedata.normalize("NFC", "The user lives in Bogotá."),
        unicodedata.normalize("NFD", "The user lives in Bogotá."),
    ]
    return {
        "facts": [
            {"text": text, "topics": ["USER_PREFERENCES"], "event_ids": [events[n % len(events)]]}
            for n, text in enumerate(spellings)
        ]
    }


@pytest.mark.parametrize("consolidate", [True, False])
async def test_facts_equal_after_normalisation_are_one_fact(
    sessions: SqlSessionService, consolidate: bool
) -> None:
    model = ScriptedModel(repeats, create_all)
    memory = memory_with(sessions, model, consolidate=consolidate)
    session = await sessions.create_session(app_name=APP, user_id=USER)
    for n in range(3):
        await sessions.append_event(session, turn(f"Turn {n}.", JANUARY + n))
    report = await memory.generate(app_name=APP, user_id=USER, session_id=session.id)
    assert report.created == 2
    facts = await texts(memory)
    assert len(facts) == 2
    tea = facts["The user likes tea."]
    assert set(tea.event_ids) == {e.id for e in session.events}  # evidence merged
    calls = len(model.requests)
    again = await said(sessions, "Turn 9.", JUNE)
    report = await memory.generate(app_name=APP, user_id=USER, session_id=again.id)
    assert (report.created, report.unchanged) == (0, 2)
    assert len(model.requests) == calls + 1  # the extraction alone: no consolidation call
    assert len(await texts(memory)) == 2


# -- 6. add_memory keeps its metadata -----------------------------------------------------


async def test_add_memory_with_consolidation_keeps_custom_metadata(
    sessions: SqlSessionService,
) -> None:
    memory = memory_with(sessions, ScriptedModel())
    entry = MemoryEntry(
        content={"parts": [{"text": "The user prefers window seats."}]},
        custom_metadata={"topics": ["USER_PREFERENCES"], "confidence": 0.9},
    )
    await memory.add_memory(
        app_name=APP, user_id=USER, memories=[entry], custom_metadata={"source": "crm"},
        consolidate=True,
    )  # fmt: skip
    found = await memory.search_memory(app_name=APP, user_id=USER, query="window", kind="facts")
    metadata = found.memories[0].custom_metadata or {}
    assert metadata["source"] == "crm" and metadata["confidence"] == 0.9
    assert metadata["kind"] == "fact" and metadata["topics"] == ["USER_PREFERENCES"]
    exported = await memory.export_memories(app_name=APP, user_id=USER)
    assert json.dumps(exported)  # JSON-ready, with the metadata
    assert exported["facts"][0]["custom_metadata"] == {"confidence": 0.9, "source": "crm"}


# -- 10. every command that generates says what generation did --------------------------


def cli_model() -> ScriptedModel:
    return ScriptedModel(every_turn, create_all)


def failing_cli_model() -> ScriptedModel:
    return ScriptedModel(lambda prompt: "Sorry, I cannot help with that.")


@pytest.mark.parametrize("model", ["cli_model", "failing_cli_model"])
def test_ingest_idle_prints_what_generation_did(db_url: str, model: str) -> None:
    from adk_sqlstore.cli import app

    from .conftest import run_sync, with_query
    from .helpers import runner

    async def seed() -> None:
        async with SqlSessionService.from_url(db_url) as service:
            await said(service, "I like tea.", JANUARY)

    run_sync(seed())
    url = with_query(db_url, generator=f"tests.test_facts_hold_up:{model}")
    result = runner.invoke(app, ["memory", "ingest-idle", "--idle-minutes", "0", "--url", url])
    assert "ingested 1 session(s)" in result.output
    assert "facts generated: 1 session(s), 1 event(s) read" in result.output
    if model == "cli_model":
        assert result.exit_code == 0 and "1 fact(s) created" in result.output
    else:
        assert result.exit_code == 1, result.output
        assert "generation failed for 1 session(s)" in result.output


# -- found by a review: the edges of the above --------------------------------------------


async def test_a_record_older_than_its_session_counts_for_nothing(
    sessions: SqlSessionService,
) -> None:
    """A generation record bound to no incarnation (imported before its session, or
    kept by an older version of the store after its session was deleted) that is
    older than the session the store now holds is that of an earlier session."""
    model = ScriptedModel(every_turn, create_all)
    memory = memory_with(sessions, model)
    record = {"session_id": "main", "event_count": 3, "attempts": 0, "update_time": JANUARY}
    await memory.import_memories(
        {"format": "adk-sqlstore.memories/1", "app_name": APP, "user_id": USER,
         "generation": [record]}
    )  # fmt: skip
    session = await sessions.create_session(app_name=APP, user_id=USER, session_id="main")
    for n, text in enumerate(["I cycle.", "I read."]):
        await sessions.append_event(session, turn(text, JUNE + n))
    assert (await memory.generate_pending(app_name=APP)).sessions == 1
    assert len(await texts(memory)) == 2


async def test_a_run_of_a_session_deleted_meanwhile_charges_no_attempt_to_the_new_one(
    sessions: SqlSessionService,
) -> None:
    session = await said(sessions, "I like tea.", JANUARY, session_id="main")

    class Meanwhile(ScriptedModel):
        async def complete(self, request: Any) -> Any:
            await sessions.delete_session(app_name=APP, user_id=USER, session_id="main")
            await said(sessions, "I like jazz.", JUNE, session_id="main")
            raise RuntimeError("the model went away")

    memory = memory_with(sessions, Meanwhile(), max_attempts=1)
    await memory.add_session_to_memory(session)  # fails, for the deleted session
    assert await memory.generation_failures(app_name=APP, retrying=True) == []
    memory = memory_with(sessions, ScriptedModel(every_turn, create_all))
    report = await memory.generate_pending(app_name=APP)
    assert (report.sessions, report.created) == (1, 1)
    assert list(await texts(memory)) == ["The user said: I like jazz."]


def likes(prompt: dict[str, Any]) -> dict[str, Any]:
    """Extraction: "I like X." / "I dislike X." as facts."""
    facts = []
    for e in prompt["conversation"]:
        text = e["text"].rstrip(".")
        facts.append(
            {"text": f"The user {text.removeprefix('I ')}.", "topics": ["USER_PREFERENCES"],
             "event_ids": [e["id"]], "valid_from": e["time"]}
        )  # fmt: skip
    return {"facts": facts}


def _opposite(new: str, old: str) -> bool:
    a, b = new.lower(), old.lower()
    return a != b and a.replace("dislikes", "likes") == b.replace("dislikes", "likes")


opposites = invalidating(_opposite)
"""A "dislikes X" and a "likes X" invalidate each other."""


async def test_a_restored_fact_equal_to_a_current_one_stays_superseded_by_it(
    sessions: SqlSessionService,
) -> None:
    memory = memory_with(sessions, ScriptedModel(likes, opposites))
    await memory.add_session_to_memory(await said(sessions, "I like tea.", JANUARY))
    dislike = await said(sessions, "I dislike tea.", JUNE)
    await memory.add_session_to_memory(dislike)
    await memory.delete_memories(app_name=APP, user_id=USER, session_id=dislike.id)
    await memory.add_session_to_memory(await said(sessions, "I like tea.", SEPTEMBER))
    current = await memory.list_facts(app_name=APP, user_id=USER)
    assert [f.text for f in current] == ["The user like tea."]


async def test_an_update_to_another_current_facts_text_makes_no_duplicate(
    sessions: SqlSessionService,
) -> None:
    def merge_into_f2(prompt: dict[str, Any]) -> dict[str, Any]:
        stored = {f["text"]: f["id"] for f in prompt["stored_facts"]}
        jazz = stored.get("The user like jazz.")
        return {
            "decisions": [
                {"fact": "N1", "action": "update", "target": jazz, "text": "the user LIKE tea"},
            ]
        }

    model = ScriptedModel(likes, create_all)
    memory = memory_with(sessions, model)
    first = await sessions.create_session(app_name=APP, user_id=USER)
    for n, text in enumerate(["I like tea.", "I like jazz."]):
        await sessions.append_event(first, turn(text, JANUARY + n))
    await memory.generate(app_name=APP, user_id=USER, session_id=first.id)
    model.answers["consolidation"] = merge_into_f2
    await memory.add_session_to_memory(await said(sessions, "I like rooibos.", JUNE))
    current = sorted(f.text for f in await memory.list_facts(app_name=APP, user_id=USER))
    assert current == ["The user like jazz.", "The user like tea."]


async def test_import_with_replace_leaves_no_memory_of_a_fact_not_current(
    sessions: SqlSessionService,
) -> None:
    memory = memory_with(sessions, ScriptedModel(residence, moved))
    await memory.add_session_to_memory(await said(sessions, "I live in Paris.", JANUARY))
    berlin = await said(sessions, "I live in Berlin.", JUNE)
    await memory.add_session_to_memory(berlin)
    exported = await memory.export_memories(app_name=APP, user_id=USER)
    await memory.delete_memories(app_name=APP, user_id=USER, session_id=berlin.id)  # Paris back
    await memory.import_memories(exported, replace=True)
    found = await memory.search_memory(app_name=APP, user_id=USER, query="lives", kind="facts")
    assert [m.content.parts[0].text for m in found.memories if m.content.parts] == [
        "The user lives in Berlin."
    ]


async def test_a_valid_from_outside_the_years_1_to_9999_is_not_read(
    sessions: SqlSessionService,
) -> None:
    def far(prompt: dict[str, Any]) -> dict[str, Any]:
        (e,) = prompt["conversation"]
        return {
            "facts": [
                {"text": "The user likes tea.", "topics": ["USER_PREFERENCES"],
                 "event_ids": [e["id"]], "valid_from": "9999-12-31T23:59:59-05:00"},
                {"text": "The user likes jazz.", "topics": ["USER_PREFERENCES"],
                 "event_ids": [e["id"]], "valid_from": "0001-01-01T00:00:00+05:00"},
            ]
        }  # fmt: skip

    memory = memory_with(sessions, ScriptedModel(far))
    session = await said(sessions, "I like tea and jazz.", JANUARY)
    report = await memory.generate(app_name=APP, user_id=USER, session_id=session.id)
    assert report.created == 2
    assert {f.valid_from for f in await memory.list_facts(app_name=APP, user_id=USER)} == {
        iso(JANUARY)
    }


async def test_deleting_a_fact_of_an_invalidation_cycle_leaves_a_current_fact(
    sessions: SqlSessionService,
) -> None:
    memory = memory_with(sessions, ScriptedModel())

    def fact(fact_id: str, city: str, by: str | None, ts: float) -> dict[str, Any]:
        return {
            "id": fact_id, "text": f"The user lives in {city}.", "topics": ["USER_PERSONAL_INFO"],
            "valid_from": ts, "invalid_at": None if by is None else ts + 1,
            "invalidate_time": None if by is None else ts + 1, "invalidated_by": by,
            "revision_count": 1, "create_time": ts, "update_time": ts,
        }  # fmt: skip

    document = {
        "format": "adk-sqlstore.memories/1", "app_name": APP, "user_id": USER,
        "facts": [fact("fact-paris", "Paris", "fact-berlin", JANUARY),
                  fact("fact-berlin", "Berlin", "fact-rome", JUNE),
                  fact("fact-rome", "Rome", "fact-berlin", SEPTEMBER)],
    }  # fmt: skip
    await memory.import_memories(document)
    await memory.delete_memories(app_name=APP, user_id=USER, memory_ids=["fact-berlin"])
    facts = await texts(memory, history=True)
    rome, paris = facts["The user lives in Rome."], facts["The user lives in Paris."]
    assert rome.current and paris.invalidated_by == "fact-rome"


# -- consolidation sees the fact it contradicts ------------------------------------------


class Recording(ScriptedModel):
    """Answers every consolidation with no change, and keeps what it was shown."""

    def __init__(self) -> None:
        super().__init__(consolidation=lambda prompt: {"decisions": []})

    def shown(self) -> list[str]:
        return [f["text"] for f in self.prompts("consolidation")[-1]["stored_facts"]]


def filler(count: int) -> list[MemoryEntry]:
    return [
        MemoryEntry(content={"parts": [{"text": f"The user collects stamp series {n}."}]})
        for n in range(count)
    ]


async def test_a_user_with_few_facts_shows_them_all(sessions: SqlSessionService) -> None:
    """While the user has at most 50 current facts, consolidation is shown all of them
    (Memory Bank considers all of a scope's memories): a contradiction sharing no
    word with its fact is always seen."""
    model = Recording()
    memory = memory_with(sessions, model)
    stored = [*filler(48), MemoryEntry(content={"parts": [{"text": "The user is vegetarian."}]})]
    await memory.add_memory(app_name=APP, user_id=USER, memories=stored, consolidate=True)
    new = MemoryEntry(content={"parts": [{"text": "The user eats fish now."}]})
    await memory.add_memory(app_name=APP, user_id=USER, memories=[new], consolidate=True)
    assert "The user is vegetarian." in model.shown() and len(model.shown()) == 49


@pytest.fixture(params=["sqlite", "pgvector", pytest.param("mysql", marks=pytest.mark.mysql)])
def vector_url(request: pytest.FixtureRequest) -> str:
    return str(request.getfixturevalue(f"{request.param}_url"))


async def test_with_an_embedder_the_nearest_fact_by_meaning_is_shown(vector_url: str) -> None:
    """Past 50 facts, each new fact's hits are shown: with an embedder the nearest by
    vector too (not only by the fused score, where a fact sharing no word sinks),
    and never more than 50 facts."""
    model = Recording()
    async with SqlMemoryService.from_url(
        vector_url, embedder=Concepts(), generator=MemoryGenerator(model)
    ) as memory:
        tesla = MemoryEntry(content={"parts": [{"text": "The user drives a Tesla."}]})
        await memory.add_memory(
            app_name=APP, user_id=USER, memories=[*filler(120), tesla], consolidate=True
        )
        new = MemoryEntry(content={"parts": [{"text": "The user sold the car."}]})
        await memory.add_memory(app_name=APP, user_id=USER, memories=[new], consolidate=True)
        assert "The user drives a Tesla." in model.shown()
        assert len(model.shown()) == 50


async def test_facts_under_the_same_topics_have_a_quarter_of_the_prompt(
    sessions: SqlSessionService,
) -> None:
    """Past 50 facts, the search's hits (here 120 facts sharing words with the new
    one, under another topic) leave a quarter of the prompt to the facts under the
    new fact's topics, the most recently changed first."""
    model = Recording()
    memory = memory_with(sessions, model)
    diet = MemoryEntry(
        content={"parts": [{"text": "The user is vegetarian."}]},
        custom_metadata={"topics": ["USER_PREFERENCES"]},
    )
    alike = [
        MemoryEntry(
            content={"parts": [{"text": f"The user eats at restaurant {n} now."}]},
            custom_metadata={"topics": ["USER_PERSONAL_INFO"]},
        )
        for n in range(120)
    ]
    await memory.add_memory(app_name=APP, user_id=USER, memories=[diet, *alike], consolidate=True)
    new = MemoryEntry(
        content={"parts": [{"text": "The user eats fish now."}]},
        custom_metadata={"topics": ["USER_PREFERENCES"]},
    )
    await memory.add_memory(app_name=APP, user_id=USER, memories=[new], consolidate=True)
    assert "The user is vegetarian." in model.shown() and len(model.shown()) == 50
