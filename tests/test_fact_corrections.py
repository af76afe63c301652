"""An operator's correction of a generated fact (``SqlMemoryService.correct_fact``), on
SQLite, PostgreSQL and MariaDB, through the public API: never a silent overwrite (an
``update`` revision by ``operator:NAME``), the fact's memory searched under its new
text only, typed errors that change nothing, no duplicate facts, no model call.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from adk_sqlstore import (
    InvalidArgumentError,
    InvalidIdentifierError,
    MemoryEntry,
    MemoryGenerator,
    SqlMemoryService,
    SqlSessionService,
)

from .embedders import Concepts
from .scripted_models import ScriptedModel, memory_with

APP = "corrections-app"
USER = "user-1"
OTHER = "user-2"


def moved(prompt: dict[str, Any]) -> dict[str, Any]:
    """Consolidation: each new fact is created; a new residence invalidates every
    stored one."""
    decisions: list[dict[str, Any]] = []
    for new in prompt["new_facts"]:
        decisions.append({"fact": new["id"], "action": "create"})
        if "lives in" in new["text"]:
            decisions += [
                {"fact": new["id"], "action": "invalidate", "target": old["id"]}
                for old in prompt["stored_facts"]
                if "lives in" in old["text"]
            ]
    return {"decisions": decisions}


async def added(memory: SqlMemoryService, *texts: str, user_id: str = USER) -> dict[str, str]:
    """Store ``texts`` as facts (consolidated by the scripted model); text -> fact id."""
    entries = [MemoryEntry(content={"parts": [{"text": t}]}) for t in texts]
    await memory.add_memory(app_name=APP, user_id=user_id, memories=entries, consolidate=True)
    return {f.text: f.id for f in await memory.list_facts(app_name=APP, user_id=user_id)}


async def found(memory: SqlMemoryService, query: str, user_id: str = USER) -> list[Any]:
    """What search finds for ``query`` (facts and turns): (id, text) pairs."""
    response = await memory.search_memory(app_name=APP, user_id=user_id, query=query, limit=50)
    return [(m.id, "".join(p.text or "" for p in m.content.parts or [])) for m in response.memories]


async def everything(memory: SqlMemoryService, user_id: str = USER) -> Any:
    """The user's facts (current or not), their histories, and what search finds."""
    facts = await memory.list_facts(app_name=APP, user_id=user_id, history=True)
    histories = [
        await memory.fact_history(app_name=APP, user_id=user_id, fact_id=f.id) for f in facts
    ]
    return facts, histories, await found(memory, "user lives likes", user_id)


async def test_a_correction_is_an_update_revision_by_the_operator_and_search_follows(
    sessions: SqlSessionService,
) -> None:
    """The fact keeps its id and topics; its text, revision count and update time
    change; fact_history shows an ``update`` by ``operator:alice`` with the old and new
    text; search finds the new text and no longer the old. No generator is needed and
    no model is called."""
    model = ScriptedModel()
    ids = await added(
        memory_with(sessions, model), "The user lives in Pune.", "The user likes tea."
    )
    pune, tea = ids["The user lives in Pune."], ids["The user likes tea."]
    calls = len(model.requests)
    memory = SqlMemoryService(sessions.store)  # no generator
    (before,) = [f for f in await memory.list_facts(app_name=APP, user_id=USER) if f.id == pune]
    assert [i for i, _ in await found(memory, "Pune")] == [pune]

    fact = await memory.correct_fact(
        app_name=APP, user_id=USER, fact_id=pune, text="  The user lives in Mumbai.\x00\n",
        operator="alice",
    )  # fmt: skip

    assert (fact.id, fact.text, fact.revision_count) == (pune, "The user lives in Mumbai.", 2)
    assert (fact.topics, fact.valid_from, fact.create_time) == (
        before.topics, before.valid_from, before.create_time,
    )  # fmt: skip
    assert fact.current and fact.update_time >= before.update_time
    listed = {f.id: f for f in await memory.list_facts(app_name=APP, user_id=USER)}
    assert listed == {pune: fact, tea: listed[tea]}
    assert listed[tea].text == "The user likes tea." and listed[tea].revision_count == 1
    history = await memory.fact_history(app_name=APP, user_id=USER, fact_id=pune)
    assert history is not None
    stored, revisions = history
    assert stored == fact
    assert [(r.revision, r.action) for r in revisions] == [(1, "create"), (2, "update")]
    last = revisions[-1]
    assert (last.old_text, last.new_text) == (
        "The user lives in Pune.",
        "The user lives in Mumbai.",
    )
    assert (last.model, last.session_id, last.event_ids) == ("operator:alice", None, ())
    assert await found(memory, "Pune") == []
    assert await found(memory, "Mumbai") == [(pune, "The user lives in Mumbai.")]
    response = await memory.search_memory(app_name=APP, user_id=USER, query="Mumbai")
    assert (response.memories[0].custom_metadata or {})["revision_count"] == 2
    assert len(model.requests) == calls


async def test_an_unknown_another_users_or_past_fact_is_refused_and_nothing_changes(
    sessions: SqlSessionService,
) -> None:
    """An unknown id, another user's fact, a fact invalidated by a newer one and an
    expired one raise InvalidArgumentError, and no fact, revision or memory
    changes (of either user)."""
    memory = memory_with(sessions, ScriptedModel(consolidation=moved))
    await added(memory, "The user lives in Pune.")
    ids = await added(memory, "The user lives in Mumbai.", "The user likes tea.")
    (pune,) = [
        f.id
        for f in await memory.list_facts(app_name=APP, user_id=USER, history=True)
        if not f.current
    ]
    theirs = (await added(memory, "The user likes jazz.", user_id=OTHER))["The user likes jazz."]
    expiring = memory_with(sessions, ScriptedModel(), ttl=0.001)
    await added(expiring, "The user likes cake.")
    await asyncio.sleep(0.05)
    (expired,) = [
        f.id
        for f in await memory.list_facts(app_name=APP, user_id=USER, history=True)
        if f.text == "The user likes cake."
    ]
    before = (await everything(memory), await everything(memory, OTHER))
    assert ids["The user lives in Mumbai."] in {f.id for f in before[0][0]}

    cases = [
        (USER, "fact-unknown", "no fact"),
        (USER, theirs, "no fact"),
        (OTHER, ids["The user likes tea."], "no fact"),
        (USER, pune, "invalidated"),
        (USER, expired, "expired"),
    ]
    for user_id, fact_id, says in cases:
        with pytest.raises(InvalidArgumentError, match=says):
            await memory.correct_fact(
                app_name=APP, user_id=user_id, fact_id=fact_id, text="The user likes coffee.",
                operator="alice",
            )  # fmt: skip
    assert (await everything(memory), await everything(memory, OTHER)) == before


async def test_bad_texts_and_names_are_refused_and_nothing_changes(
    sessions: SqlSessionService,
) -> None:
    """An empty or blank text (once cleaned), one over 1,000 characters, or not a str:
    InvalidArgumentError; an empty operator or fact id: InvalidIdentifierError."""
    memory = memory_with(sessions, ScriptedModel())
    tea = (await added(memory, "The user likes tea."))["The user likes tea."]
    before = await everything(memory)
    texts: list[Any] = ["", "   \n\t", "\x00\x00", "x" * 1001, 42, None]
    for text in texts:
        with pytest.raises(InvalidArgumentError):
            await memory.correct_fact(
                app_name=APP, user_id=USER, fact_id=tea, text=text, operator="alice"
            )
    names: list[tuple[Any, Any]] = [(tea, ""), ("", "alice"), (tea, None)]
    for fact_id, operator in names:
        with pytest.raises(InvalidIdentifierError):
            await memory.correct_fact(
                app_name=APP, user_id=USER, fact_id=fact_id, text="The user likes coffee.",
                operator=operator,
            )  # fmt: skip
    assert await everything(memory) == before
    longest = "y" * 1000  # the limit itself is allowed
    fact = await memory.correct_fact(
        app_name=APP, user_id=USER, fact_id=tea, text=longest, operator="alice"
    )
    assert fact.text == longest


async def test_a_text_another_current_fact_says_is_refused_naming_that_fact(
    sessions: SqlSessionService,
) -> None:
    """Equal after normalisation (case, spacing, final full stop) to another current
    fact: refused, the message naming it, nothing changed; the fact's own text in
    another spelling is a correction."""
    memory = memory_with(sessions, ScriptedModel())
    ids = await added(memory, "The user likes tea.", "The user likes coffee.")
    tea, coffee = ids["The user likes tea."], ids["The user likes coffee."]
    before = await everything(memory)
    with pytest.raises(InvalidArgumentError, match=tea):
        await memory.correct_fact(
            app_name=APP, user_id=USER, fact_id=coffee, text="the user  LIKES tea",
            operator="alice",
        )  # fmt: skip
    assert await everything(memory) == before

    fact = await memory.correct_fact(
        app_name=APP, user_id=USER, fact_id=tea, text="The user likes TEA", operator="bob"
    )
    assert (fact.text, fact.revision_count) == ("The user likes TEA", 2)
    history = await memory.fact_history(app_name=APP, user_id=USER, fact_id=tea)
    assert history is not None
    assert history[1][-1].model == "operator:bob"


async def test_the_same_text_is_a_no_op(sessions: SqlSessionService) -> None:
    """The fact's own text (spaces around it aside): the fact returned unchanged, no
    revision, no write."""
    memory = memory_with(sessions, ScriptedModel())
    tea = (await added(memory, "The user likes tea."))["The user likes tea."]
    before = await everything(memory)
    for text in ["The user likes tea.", "  The user likes tea.\n"]:
        fact = await memory.correct_fact(
            app_name=APP, user_id=USER, fact_id=tea, text=text, operator="alice"
        )
        assert fact == before[0][0]
    assert await everything(memory) == before


@pytest.fixture(params=["sqlite", "pgvector", pytest.param("mysql", marks=pytest.mark.mysql)])
def vector_url(request: pytest.FixtureRequest) -> str:
    return str(request.getfixturevalue(f"{request.param}_url"))


async def test_with_an_embedder_the_memory_is_embedded_again(vector_url: str) -> None:
    """The corrected fact's vector is its new text's: a query sharing no word with it
    but its meaning finds it by vector, and the old meaning no longer does."""
    async with SqlMemoryService.from_url(
        vector_url, embedder=Concepts(), generator=MemoryGenerator(ScriptedModel())
    ) as memory:
        car = (await added(memory, "The user drives a Tesla."))["The user drives a Tesla."]

        async def similarity(query: str) -> float:
            response = await memory.search_memory(
                app_name=APP, user_id=USER, query=query, kind="facts"
            )
            scores = [(m.custom_metadata or {}).get("vector_score") for m in response.memories]
            return max([s for s in scores if isinstance(s, float)], default=0.0)

        assert await similarity("car") > 0.4
        await memory.correct_fact(
            app_name=APP, user_id=USER, fact_id=car, text="The user plays badminton.",
            operator="alice",
        )  # fmt: skip
        assert await similarity("tennis") > 0.4
        assert await similarity("car") < 0.2
