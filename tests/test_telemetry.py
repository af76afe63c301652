"""OpenTelemetry: one span per public store call, nested under ADK's own spans, with
no user id or content unless the application opts in (issue 11)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy.engine import make_url

trace = pytest.importorskip("opentelemetry.trace")
sdk_trace = pytest.importorskip("opentelemetry.sdk.trace")
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)

from adk_sqlstore import (  # noqa: E402
    Event,
    EventActions,
    MemoryEntry,
    SessionNotFoundError,
    SqlMemoryService,
    SqlSessionService,
    telemetry,
)

_EXPORTER = InMemorySpanExporter()


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """Spans finished during the test (the process's tracer provider exports to it)."""
    provider = trace.get_tracer_provider()
    if not isinstance(provider, sdk_trace.TracerProvider):
        provider = sdk_trace.TracerProvider()
        trace.set_tracer_provider(provider)
        provider = trace.get_tracer_provider()
    if not getattr(provider, "_adk_sqlstore_exporting", False):
        provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))  # type: ignore[attr-defined,unused-ignore]
        provider._adk_sqlstore_exporting = True  # type: ignore[attr-defined,unused-ignore]
    _EXPORTER.clear()
    yield _EXPORTER
    telemetry.record_identifiers(False)


def _ours(exporter: InMemorySpanExporter) -> list[Any]:
    return [s for s in exporter.get_finished_spans() if s.name.startswith("adk_sqlstore.")]


async def test_each_public_call_is_one_span_without_user_ids_or_content(
    spans: InMemorySpanExporter, db_url: str
) -> None:
    async with SqlSessionService.from_url(db_url) as sessions:
        memory = SqlMemoryService(sessions.engine)
        session = await sessions.create_session(
            app_name="traced", user_id="secret-user-7", state={"k": "private value"}
        )
        await sessions.append_event(
            session,
            Event(
                author="user",
                content={"role": "user", "parts": [{"text": "my private badminton note"}]},
                actions=EventActions(state_delta={"n": 1}),
            ),
        )
        await sessions.get_session(
            app_name="traced", user_id="secret-user-7", session_id=session.id
        )
        await sessions.list_sessions(app_name="traced", user_id="secret-user-7")
        await memory.add_session_to_memory(session)
        await memory.add_memory(
            app_name="traced",
            user_id="secret-user-7",
            memories=[MemoryEntry(content={"parts": [{"text": "a private fact"}]})],
        )
        await memory.search_memory(app_name="traced", user_id="secret-user-7", query="badminton")
        await sessions.delete_session(
            app_name="traced", user_id="secret-user-7", session_id=session.id
        )
        with pytest.raises(SessionNotFoundError):
            await sessions.append_event(session, Event(author="user"))
    ours = _ours(spans)
    names = [s.name.removeprefix("adk_sqlstore.") for s in ours]
    assert names == [
        "create_session",
        "append_event",
        "get_session",
        "list_sessions",
        "add_session_to_memory",
        "add_memory",
        "search_memory",
        "delete_session",
        "append_event",
    ]
    backend = make_url(db_url).get_backend_name()
    for span in ours:
        attributes = dict(span.attributes or {})
        assert attributes["db.system.name"] == backend
        assert attributes["db.operation.name"] == span.name.removeprefix("adk_sqlstore.")
        assert attributes["adk_sqlstore.app_name"] == "traced"
        shown = repr(attributes) + repr([(e.name, dict(e.attributes or {})) for e in span.events])
        shown += repr(span.status.description)
        for private in ("secret-user-7", session.id, "private", "badminton"):
            assert private not in shown, (span.name, private)
        assert span.kind == trace.SpanKind.CLIENT
    rows = {s.name: dict(s.attributes or {}).get("db.response.returned_rows") for s in ours}
    assert rows["adk_sqlstore.get_session"] == 1  # one event loaded
    assert rows["adk_sqlstore.list_sessions"] == 1
    assert rows["adk_sqlstore.search_memory"] == 1
    failed = ours[-1]
    assert failed.status.status_code == trace.StatusCode.ERROR
    error_type = "adk_sqlstore.errors.SessionNotFoundError"
    assert dict(failed.attributes or {})["error.type"] == error_type
    assert [dict(e.attributes or {}) for e in failed.events if e.name == "exception"] == [
        {"exception.type": error_type}
    ]


async def test_a_call_made_by_another_adds_no_span(
    spans: InMemorySpanExporter, sqlite_url: str
) -> None:
    async with SqlSessionService.from_url(sqlite_url) as sessions:
        memory = SqlMemoryService(sessions.engine)
        session = await sessions.create_session(app_name="traced", user_id="u1")
        await sessions.append_event(
            session, Event(author="user", content={"parts": [{"text": "hi"}]})
        )
        spans.clear()
        report = await memory.ingest_session(app_name="traced", user_id="u1", session_id=session.id)
        assert report.sessions == 1
        # the same calls made one by one are spans of their own
        await sessions.get_session(app_name="traced", user_id="u1", session_id=session.id)
        await memory.add_session_to_memory(session)
    names = [s.name for s in _ours(spans)]
    assert names == [
        "adk_sqlstore.ingest_session",
        "adk_sqlstore.get_session",
        "adk_sqlstore.add_session_to_memory",
    ]


async def test_identifiers_only_when_the_application_opts_in(
    spans: InMemorySpanExporter, sqlite_url: str
) -> None:
    telemetry.record_identifiers(True)
    async with SqlSessionService.from_url(sqlite_url) as sessions:
        session = await sessions.create_session(app_name="traced", user_id="u-9")
        await sessions.append_event(session, Event(author="user"))
    for span in _ours(spans):
        attributes = dict(span.attributes or {})
        assert attributes["enduser.id"] == "u-9"
        assert attributes.get("adk_sqlstore.session_id") in (None, session.id)
    assert dict(_ours(spans)[-1].attributes or {})["adk_sqlstore.session_id"] == session.id


async def test_spans_nest_under_adks_own(spans: InMemorySpanExporter, db_url: str) -> None:
    pytest.importorskip("google.adk")
    from google.adk.runners import Runner
    from google.genai import types

    from adk_sqlstore.adk import SqlSessionService as AdkSessions

    from .adk_agents import ScriptedLlm, say

    async with AdkSessions(db_url) as sessions:
        from google.adk.agents import LlmAgent

        agent = LlmAgent(name="helper", model=ScriptedLlm(script=[say("hello")]))
        runner = Runner(app_name="traced", agent=agent, session_service=sessions)
        session = await sessions.create_session(app_name="traced", user_id="u1")
        message = types.Content(role="user", parts=[types.Part(text="hi")])
        async for _ in runner.run_async(user_id="u1", session_id=session.id, new_message=message):
            pass
    finished = spans.get_finished_spans()
    by_id = {s.context.span_id: s for s in finished}
    appends = [s for s in finished if s.name == "adk_sqlstore.append_event"]
    assert appends
    for span in appends:  # the chain of parents reaches a span ADK made
        parents = []
        parent = span.parent
        while parent is not None and parent.span_id in by_id:
            parents.append(by_id[parent.span_id])
            parent = by_id[parent.span_id].parent
        assert any(not p.name.startswith("adk_sqlstore.") for p in parents), span.name


async def test_no_span_is_started_while_no_tracer_provider_is_set(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OpenTelemetry's default (proxy) provider records nothing: the calls then skip
    the span's work altogether, and still return what they return."""
    started: list[str] = []

    def start(name: str, **_: Any) -> Any:
        started.append(name)
        raise AssertionError("a span was started")

    monkeypatch.setattr(trace, "get_tracer_provider", trace.ProxyTracerProvider)
    assert telemetry._tracer is not None
    monkeypatch.setattr(telemetry._tracer, "start_as_current_span", start)
    async with SqlSessionService.from_url(sqlite_url) as sessions:
        session = await sessions.create_session(app_name="untraced", user_id="u")
        await sessions.append_event(session, Event(author="a"))
        assert len((await sessions.list_sessions(app_name="untraced")).sessions) == 1
    assert started == []
