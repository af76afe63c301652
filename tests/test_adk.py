"""The drop-in classes for Google ADK, tested with ADK's own types, Runner and registry."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("google.adk", reason="the adk extra is not installed")

from google.adk.agents import LlmAgent, SequentialAgent
from google.adk.errors import StaleSessionError as AdkStaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError as AdkAlreadyExists
from google.adk.errors.session_not_found_error import (
    SessionNotFoundError as AdkSessionNotFound,
)
from google.adk.events import Event, EventActions
from google.adk.memory import BaseMemoryService
from google.adk.memory.memory_entry import MemoryEntry
from google.adk.runners import Runner
from google.adk.sessions import BaseSessionService, Session
from google.adk.sessions.base_session_service import (
    GetSessionConfig,
    ListSessionsResponse,
)
from google.genai import types

from adk_sqlstore import errors
from adk_sqlstore.adk import SqlArtifactService, SqlMemoryService, SqlSessionService
from adk_sqlstore.urls import DATABASE_URL_ENV

from . import adk_agents
from .conftest import run_sync
from .helpers import text_of
from .workers import process_context


@pytest.fixture
async def adk_service(db_url: str) -> Any:
    async with SqlSessionService(db_url) as service:
        yield service


# -- the classes --------------------------------------------------------------------------


def test_core_package_imports_without_google_adk() -> None:
    code = (
        "import sys; sys.modules['google.adk'] = None\n"
        "import adk_sqlstore\n"
        "assert 'google.adk.sessions' not in sys.modules\n"
        "try:\n"
        "    import adk_sqlstore.adk\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert "pip install 'adk-sqlstore[adk]'" in done.stdout


def test_they_are_adk_services_implementing_every_method() -> None:
    assert issubclass(SqlSessionService, BaseSessionService)
    assert issubclass(SqlMemoryService, BaseMemoryService)
    assert not SqlSessionService.__abstractmethods__
    assert not SqlMemoryService.__abstractmethods__
    for name in ["get_user_state", "append_event", "flush"]:
        assert name in dir(SqlSessionService)
    for name in ["add_events_to_memory", "add_memory", "delete_memory"]:
        assert getattr(SqlMemoryService, name) is not getattr(BaseMemoryService, name), name


async def test_adk_types_in_and_out(adk_service: SqlSessionService) -> None:
    session = await adk_service.create_session(
        app_name="app", user_id="u1", state={"user:diet": "vegan", "k": 1}
    )
    assert type(session) is Session
    await adk_service.append_event(
        session,
        Event(
            author="user",
            invocation_id="i1",
            content=types.Content(role="user", parts=[types.Part(text="hello")]),
        ),
    )
    got = await adk_service.get_session(
        app_name="app",
        user_id="u1",
        session_id=session.id,
        config=GetSessionConfig(num_recent_events=1),
    )
    assert type(got) is Session and type(got.events[0]) is Event
    assert got.state == {"user:diet": "vegan", "k": 1}
    listing = await adk_service.list_sessions(app_name="app", user_id="u1")
    assert isinstance(listing, ListSessionsResponse) and listing.sessions[0].id == session.id
    assert await adk_service.get_user_state(app_name="app", user_id="u1") == {"diet": "vegan"}
    await adk_service.delete_session(app_name="app", user_id="u1", session_id=session.id)
    assert (
        await adk_service.get_session(app_name="app", user_id="u1", session_id=session.id) is None
    )


async def test_adk_errors_chained_to_ours(adk_service: SqlSessionService) -> None:
    s = await adk_service.create_session(app_name="app", user_id="u1", session_id="s")
    with pytest.raises(AdkAlreadyExists) as exists:
        await adk_service.create_session(app_name="app", user_id="u1", session_id="s")
    assert isinstance(exists.value.__cause__, errors.AlreadyExistsError)
    stale = await adk_service.get_session(app_name="app", user_id="u1", session_id="s")
    await adk_service.append_event(s, Event(author="a"))
    with pytest.raises(AdkStaleSessionError) as raced:
        await adk_service.append_event(stale, Event(author="b"))  # type: ignore[arg-type]
    assert isinstance(raced.value.__cause__, errors.StaleSessionError)
    assert isinstance(raced.value, ValueError)  # ADK's own base class
    await adk_service.delete_session(app_name="app", user_id="u1", session_id="s")
    with pytest.raises(AdkSessionNotFound) as gone:
        await adk_service.append_event(s, Event(author="c"))
    assert isinstance(gone.value.__cause__, errors.SessionNotFoundError)


def rich_events() -> list[Event]:
    """Events carrying every kind of field the issue lists."""
    return [
        Event(
            invocation_id="e-1",
            author="lunch_assistant",
            branch="root.lunch",
            content=types.Content(
                role="model",
                parts=[
                    types.Part(text="Here you go"),
                    types.Part(
                        function_call=types.FunctionCall(
                            id="adk-1", name="order", args={"items": ["thali"], "n": 2}
                        )
                    ),
                    types.Part(
                        inline_data=types.Blob(mime_type="image/png", data=b"\x89PNG\x00\xff")
                    ),
                ],
            ),
            grounding_metadata=types.GroundingMetadata(web_search_queries=["lunch pune"]),
            usage_metadata=types.GenerateContentResponseUsageMetadata(
                prompt_token_count=12, candidates_token_count=7, total_token_count=19
            ),
            long_running_tool_ids={"adk-1", "adk-2"},
            custom_metadata={"trace": {"span": "abc", "n": [1, 2.5, None]}},
            actions=EventActions(
                state_delta={"user:diet": "vegetarian", "order": 1},
                requested_tool_confirmations={"adk-1": {"hint": "confirm?", "confirmed": False}},
                compaction={
                    "start_timestamp": 1.0,
                    "end_timestamp": 2.0,
                    "compacted_content": types.Content(
                        role="model", parts=[types.Part(text="summary")]
                    ),
                },
                transfer_to_agent="billing",
                escalate=True,
                artifact_delta={"menu.pdf": 3},
            ),
            turn_complete=True,
        ),
        Event(
            invocation_id="e-1",
            author="lunch_assistant",
            content=types.Content(
                role="user",
                parts=[
                    types.Part(
                        function_response=types.FunctionResponse(
                            id="adk-1", name="order", response={"status": "ok", "eta": "12:30"}
                        )
                    )
                ],
            ),
        ),
    ]


async def test_adk_events_round_trip_equal(adk_service: SqlSessionService) -> None:
    session = await adk_service.create_session(app_name="app", user_id="u1")
    originals = rich_events()
    for event in originals:
        await adk_service.append_event(session, event.model_copy(deep=True))
    got = await adk_service.get_session(app_name="app", user_id="u1", session_id=session.id)
    assert got is not None
    assert got.events == originals
    assert got.events[0].content.parts[2].inline_data.data == b"\x89PNG\x00\xff"  # type: ignore[union-attr, index]
    assert got.events[0].long_running_tool_ids == {"adk-1", "adk-2"}


async def test_tool_results_are_stored_as_adks_own_services_store_them(
    adk_service: SqlSessionService, tmp_path: Path
) -> None:
    """A tool may return pydantic objects inside a function response (load_memory
    returns LoadMemoryResponse); their default-valued fields are kept, as ADK's
    SqliteSessionService keeps them (``{"memories": []}``, not ``{}``)."""
    from google.adk.sessions.sqlite_session_service import SqliteSessionService
    from google.adk.tools.load_memory_tool import LoadMemoryResponse
    from pydantic import BaseModel

    class Result(BaseModel):
        ok: bool = False
        count: int = 0
        items: list[str] = []
        note: str | None = None

    def event() -> Event:
        response = {"result": Result(), "memories": LoadMemoryResponse(), "none": None}
        call = types.FunctionResponse(id="c1", name="tool", response=response)
        return Event(
            id="e1",
            timestamp=1.5,
            author="agent",
            content=types.Content(role="user", parts=[types.Part(function_response=call)]),
        )

    theirs = SqliteSessionService(db_path=str(tmp_path / "adk.db"))
    adk_session = await theirs.create_session(app_name="app", user_id="u1", session_id="s")
    await theirs.append_event(adk_session, event())
    expected = await theirs.get_session(app_name="app", user_id="u1", session_id="s")
    await theirs.close()
    ours = await adk_service.create_session(app_name="app", user_id="u1", session_id="s")
    await adk_service.append_event(ours, event())
    got = await adk_service.get_session(app_name="app", user_id="u1", session_id="s")
    assert expected is not None and got is not None
    assert got.events == expected.events
    stored = got.events[0].content.parts[0].function_response.response  # type: ignore[union-attr, index]
    assert stored == {
        "result": {"ok": False, "count": 0, "items": []},
        "memories": {"memories": []},
        "none": None,
    }


@pytest.mark.filterwarnings("ignore:SequentialAgent is deprecated:DeprecationWarning")
async def test_temp_keys_pass_between_agents_of_one_invocation_and_are_not_stored(
    adk_service: SqlSessionService,
) -> None:
    """003: "output_key ... is the idiomatic way one pipeline stage hands a result to the
    next"; temp: values "are dropped when the event is appended"."""
    from .adk_agents import ScriptedLlm, request_text, say

    def polish(request: Any) -> str:
        instruction = str(request.config.system_instruction or "")
        return "polished: " + (
            "DRAFT-42" if "DRAFT-42" in instruction + request_text(request) else "nothing to polish"
        )

    writer = LlmAgent(
        name="writer",
        model=ScriptedLlm(script=[say("DRAFT-42")]),
        instruction="Write a draft.",
        output_key="temp:draft",
    )
    editor = LlmAgent(
        name="editor",
        model=ScriptedLlm(script=[say(polish)]),
        instruction="Polish this draft: {temp:draft}",
    )
    runner = Runner(
        app_name="app",
        session_service=adk_service,
        agent=SequentialAgent(name="pipeline", sub_agents=[writer, editor]),
    )
    session = await adk_service.create_session(app_name="app", user_id="u1")
    events = [
        e
        async for e in runner.run_async(
            user_id="u1",
            session_id=session.id,
            new_message=types.Content(role="user", parts=[types.Part(text="go")]),
        )
    ]
    replies = [
        e.content.parts[0].text
        for e in events
        if e.content and e.content.parts and e.content.parts[0].text
    ]
    assert "polished: DRAFT-42" in replies
    stored = await adk_service.get_session(app_name="app", user_id="u1", session_id=session.id)
    assert stored is not None
    assert not any(k.startswith("temp:") for k in stored.state)
    assert not any(k.startswith("temp:") for e in stored.events for k in e.actions.state_delta)


async def test_memory_service_with_adk_types(db_url: str) -> None:
    async with SqlSessionService(db_url) as sessions:
        memory = SqlMemoryService(engine=sessions.engine)
        session = await sessions.create_session(app_name="app", user_id="u1")
        await sessions.append_event(
            session,
            Event(
                author="user",
                content=types.Content(
                    role="user", parts=[types.Part(text="My favorite sport is badminton.")]
                ),
            ),
        )
        await memory.add_session_to_memory(session)
        await memory.add_events_to_memory(
            app_name="app",
            user_id="u1",
            session_id="s2",
            events=[
                Event(
                    author="user",
                    content=types.Content(parts=[types.Part(text="I play tennis too")]),
                )
            ],
        )
        await memory.add_memory(
            app_name="app",
            user_id="u1",
            memories=[
                MemoryEntry(
                    content=types.Content(
                        parts=[types.Part(text="User prefers morning deliveries")]
                    )
                )
            ],
        )
        found = await memory.search_memory(
            app_name="app", user_id="u1", query="What sport do I like?"
        )
        assert type(found.memories[0]) is MemoryEntry
        assert isinstance(found.memories[0].content, types.Content)
        assert found.memories[0].content.parts[0].text == "My favorite sport is badminton."  # type: ignore[index]
        assert len(found.memories) == 1
        fact = await memory.search_memory(app_name="app", user_id="u1", query="deliveries")
        assert fact.memories[0].custom_metadata["event_id"] is None
        await memory.delete_memory(app_name="app", user_id="u1", memory_id=found.memories[0].id)
        again = await memory.search_memory(app_name="app", user_id="u1", query="sport badminton")
        assert "My favorite sport is badminton." not in [text_of(m) for m in again.memories]
        # The idle job knows the ADK session's revision: nothing left to ingest.
        assert await memory.core.count_idle_sessions(idle_for=timedelta(0)) == 0


# -- ADK's CLI: services.yaml ---------------------------------------------------------------


def shipped_services_yaml() -> str:
    """The services.yaml the package ships, as ``adk-sqlstore services-yaml`` prints it."""
    from typer.testing import CliRunner

    from adk_sqlstore.cli import app

    result = CliRunner().invoke(app, ["services-yaml"], catch_exceptions=False)
    assert result.exit_code == 0
    return result.output


def test_shipped_services_yaml_covers_every_uri_form_the_readme_names() -> None:
    import re

    import yaml

    from .conftest import REPO

    entries = yaml.safe_load(shipped_services_yaml())["services"]
    registered = {(e["scheme"], e["type"]): e["class"] for e in entries}
    named = set(re.findall(r"\b(sqlstore(?:\+[a-z]+)?)://", (REPO / "README.md").read_text()))
    assert {"sqlstore", "sqlstore+postgresql", "sqlstore+sqlite"} <= named
    for scheme in named:
        assert registered[(scheme, "session")] == "adk_sqlstore.adk.SqlSessionService", scheme
        assert registered[(scheme, "memory")] == "adk_sqlstore.adk.SqlMemoryService", scheme


async def test_adk_service_registry_builds_them_from_services_yaml(
    tmp_path: Path, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from google.adk.cli.service_registry import load_services_module
    from google.adk.cli.utils.service_factory import (
        create_artifact_service_from_options,
        create_memory_service_from_options,
        create_session_service_from_options,
    )

    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "services.yaml").write_text(shipped_services_yaml())
    load_services_module(str(agents))
    monkeypatch.setenv(DATABASE_URL_ENV, db_url)
    for n, uri in enumerate(["sqlstore+" + db_url, "sqlstore://"]):
        sessions = create_session_service_from_options(base_dir=agents, session_service_uri=uri)
        memory = create_memory_service_from_options(base_dir=agents, memory_service_uri=uri)
        files = create_artifact_service_from_options(
            base_dir=agents, artifact_service_uri=uri, strict_uri=True
        )
        assert isinstance(sessions, SqlSessionService) and isinstance(memory, SqlMemoryService)
        assert isinstance(files, SqlArtifactService)
        try:
            s = await sessions.create_session(app_name="app", user_id="u1")
            text = f"registry works {n}"
            await sessions.append_event(
                s, Event(author="user", content=types.Content(parts=[types.Part(text=text)]))
            )
            await memory.add_session_to_memory(s)
            found = await memory.search_memory(app_name="app", user_id="u1", query="registry")
            assert len(found.memories) == n + 1  # both URIs reach the one database
            part = types.Part(text=text)
            saved = await files.save_artifact(
                app_name="app", user_id="u1", filename="user:log.txt", artifact=part
            )
            assert saved == n
        finally:
            await sessions.close()
            await memory.close()
            await files.close()


# -- end to end with ADK's Runner ---------------------------------------------------------


@pytest.mark.parametrize("mode", ["load_memory", "preload_memory"])
def test_monday_preference_recalled_on_thursday_in_another_process(db_url: str, mode: str) -> None:
    """000's worked example through ADK's Runner: user:diet by key lookup, the delivery
    address by memory search, Thursday in a second OS process."""
    monday_id = run_sync(adk_agents.monday(db_url))
    ctx = process_context()
    results = ctx.Queue()
    worker = ctx.Process(target=adk_agents.thursday_in_process, args=(db_url, mode, results))
    worker.start()
    thursday = results.get(timeout=180)
    worker.join(timeout=60)
    assert worker.exitcode == 0
    assert thursday["state_at_start"] == {"user:diet": "vegetarian"}
    assert thursday["reply"] == (
        "Shall I deliver your vegetarian lunch to the Pune office reception?"
    )
    if mode == "load_memory":
        assert thursday["responses"]["get_profile"] == {"diet": "vegetarian"}
        recalled = json.dumps(thursday["responses"]["load_memory"])
        assert adk_agents.MONDAY in recalled and monday_id in recalled

    async def monday_state() -> Any:
        async with SqlSessionService(db_url) as sessions:
            return await sessions.get_session(
                app_name=adk_agents.APP, user_id=adk_agents.USER, session_id=monday_id
            )

    monday = run_sync(monday_state())
    assert "temp:request_note" not in monday.state
    assert monday.state["user:diet"] == "vegetarian"


def test_two_runners_in_two_processes_one_turn_wins(db_url: str) -> None:
    async def create() -> str:
        async with SqlSessionService(db_url) as sessions:
            s = await sessions.create_session(app_name=adk_agents.APP, user_id=adk_agents.USER)
            return s.id

    session_id = run_sync(create())
    ctx = process_context()
    barrier = ctx.Barrier(2, timeout=120)
    results = ctx.Queue()
    workers = [
        ctx.Process(target=adk_agents.race_turn, args=(db_url, session_id, name, barrier, results))
        for name in ("runner-a", "runner-b")
    ]
    for w in workers:
        w.start()
    outcomes = dict(results.get(timeout=180) for _ in workers)
    for w in workers:
        w.join(timeout=60)
    assert sorted(outcomes.values()) == [
        "google.adk.errors._stale_session_error.StaleSessionError",
        "ok",
    ], outcomes
    (winner,) = [name for name, outcome in outcomes.items() if outcome == "ok"]

    async def stored() -> Any:
        async with SqlSessionService(db_url) as sessions:
            return await sessions.get_session(
                app_name=adk_agents.APP, user_id=adk_agents.USER, session_id=session_id
            )

    session = run_sync(stored())
    texts = [e.content.parts[0].text for e in session.events]
    assert texts == [f"message from {winner}", f"reply from {winner}"]  # nothing interleaved


def test_a_tool_saves_an_artifact_that_a_later_process_loads(db_url: str) -> None:
    """Issue 17: through ADK's Runner, a tool saves a receipt (``ToolContext.
    save_artifact``) into the store's database; a later turn of the session, in another
    OS process, has a tool load it (``ToolContext.load_artifact``): the same bytes."""
    session_id, delta = run_sync(adk_agents.order_with_receipt(db_url))
    assert delta == {"receipt.pdf": 0}
    ctx = process_context()
    results = ctx.Queue()
    worker = ctx.Process(
        target=adk_agents.receipt_later_in_process, args=(db_url, session_id, results)
    )
    worker.start()
    seen = results.get(timeout=180)
    worker.join(timeout=60)
    assert worker.exitcode == 0
    assert seen == {
        "found": True,
        "mime_type": "application/pdf",
        "size": len(adk_agents.RECEIPT),
        "same": True,
    }
