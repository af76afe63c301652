"""Transient model failures (HTTP 429, 500, 502, 503, 504, a dropped or reset
connection) are tried again within the call, with a growing wait that honours
``Retry-After``, inside the generator's timeout; they no longer burn a session's
attempts. End to end against a real local OpenAI-compatible HTTP server on SQLite,
PostgreSQL and MariaDB; the retry loop itself (adk_sqlstore.generation.calls) with
scripted models and no database."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import struct
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast

import pytest

from adk_sqlstore import (
    Event,
    GenerationError,
    MemoryGenerator,
    SqlMemoryService,
    SqlSessionService,
    TransientModelError,
)
from adk_sqlstore.generation import GenerationReport, ModelReply, ModelRequest, calls
from adk_sqlstore.generation.calls import call_model
from adk_sqlstore.generation.openai_chat import (
    MAX_RETRY_AFTER,
    OpenAICompatibleModel,
    retry_after_seconds,
)

from .scripted_models import NEEDS_HTTPX, create_all, last_event_as_a_fact

SECRET = "SECRET-MARKER-51c9"  # in the conversation and the bodies; never in a message
APP = "retry-app"
USER = "user-5"
REQUEST = ModelRequest(system="Extract facts as JSON.", prompt=f"user: my pin is {SECRET}")


@pytest.fixture(autouse=True)
def short_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    """Waits of 10 ms doubling to 40 ms: the tests take no seconds of backoff."""
    monkeypatch.setattr(calls, "RETRY_BASE_DELAY", 0.01)
    monkeypatch.setattr(calls, "RETRY_MAX_DELAY", 0.04)


# --- a real OpenAI-compatible HTTP server, answering from a script ---------------

DROP = "drop"  # close the connection without an answer
RESET = "reset"  # reset the connection (RST) without an answer


@dataclass
class Step:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None  # None: a chat completion answering the prompt's JSON


@dataclass
class Script:
    steps: list[Step | str]
    prompts: list[str] = field(default_factory=list)

    def next(self) -> Step | str:
        """The next step; the last one again once the script is done."""
        index = min(len(self.prompts) - 1, len(self.steps) - 1)
        return self.steps[index]


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    script: Script


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        script = cast(_Server, self.server).script
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        script.prompts.append(body["messages"][1]["content"])
        step = script.next()
        if step in (DROP, RESET):
            if step == RESET:  # linger 0: close() sends RST
                self.connection.setsockopt(
                    socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                )
            self.close_connection = True
            return
        assert isinstance(step, Step)
        raw = json.dumps(_answer(script.prompts[-1]) if step.body is None else step.body).encode()
        try:
            self.send_response(step.status)
            for name, value in {"Content-Type": "application/json", **step.headers}.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)
        except OSError:  # the client gave up
            pass

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _answer(prompt: str) -> dict[str, Any]:
    """A chat completion: the extraction's or the consolidation's JSON for ``prompt``."""
    shown = json.loads(prompt)
    reply = last_event_as_a_fact(shown) if "conversation" in shown else create_all(shown)
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": json.dumps(reply)}}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20},
    }


@dataclass
class LocalServer:
    url: str  # the API's root, ".../v1"
    script: Script

    def play(self, *steps: Step | str) -> None:
        self.script.steps = list(steps)


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalServer]:
    """The server, which ``openai:MODEL`` names through ``$OPENAI_BASE_URL``."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    httpd = _Server(("127.0.0.1", 0), _Handler)
    httpd.script = Script([Step()])
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    try:
        yield LocalServer(url, httpd.script)
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


def http_date(seconds_from_now: float) -> str:
    return format_datetime(datetime.now(UTC) + timedelta(seconds=seconds_from_now), usegmt=True)


OVERLOADED = {"error": {"message": f"echo {SECRET}", "type": "server_error"}}


async def _memory_and_session(sessions: SqlSessionService, **options: Any) -> tuple[Any, Any]:
    memory = SqlMemoryService(
        sessions.store, generator=MemoryGenerator("openai:m-retry", **options)
    )
    session = await sessions.create_session(app_name=APP, user_id=USER)
    content = {"role": "user", "parts": [{"text": f"I'm vegetarian; my pin is {SECRET}"}]}
    await sessions.append_event(session, Event(author="user", content=content))
    return memory, session


def _messages(exc: BaseException) -> str:
    """The messages of ``exc`` and every exception chained to it."""
    seen: list[str] = []
    current: BaseException | None = exc
    while current is not None and len(seen) < 10:
        seen.append(f"{current!s} {current!r}")
        current = current.__cause__ or current.__context__
    return "\n".join(seen)


# --- end to end: generate through the store ----------------------------------------


@NEEDS_HTTPX
@pytest.mark.parametrize("retry_after", ["0", http_date(-5)], ids=["seconds", "http-date"])
async def test_429_then_503_then_an_answer_generates_with_two_retries(
    sessions: SqlSessionService, server: LocalServer, retry_after: str
) -> None:
    server.play(
        Step(429, {"Retry-After": retry_after}, {"error": {"type": "rate_limit_exceeded"}}),
        Step(503, {}, OVERLOADED),
        Step(),
    )
    memory, session = await _memory_and_session(sessions, max_attempts=1)

    report = await memory.generate(app_name=APP, user_id=USER, session_id=session.id)

    assert (report.created, report.retries, report.failed) == (1, 2, 0)
    assert report.model_calls == len(server.script.prompts) == 3
    assert report.prompt_tokens >= 100 and report.completion_tokens == 20
    assert len(set(server.script.prompts)) == 1  # the same request each time
    assert await memory.generation_failures(app_name=APP) == []
    (fact,) = await memory.list_facts(app_name=APP, user_id=USER)
    assert "vegetarian" in fact.text


@NEEDS_HTTPX
@pytest.mark.parametrize("failure", [DROP, RESET])
async def test_a_dropped_connection_is_tried_again(
    sessions: SqlSessionService, server: LocalServer, failure: str
) -> None:
    server.play(failure, Step())
    memory, session = await _memory_and_session(sessions, max_attempts=1)

    report = await memory.generate(app_name=APP, user_id=USER, session_id=session.id)

    assert (report.created, report.retries, report.model_calls) == (1, 1, 2)
    assert await memory.generation_failures(app_name=APP) == []


@NEEDS_HTTPX
async def test_503_forever_gives_up_within_the_timeout_and_records_the_failure(
    sessions: SqlSessionService, server: LocalServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(calls, "MAX_TRIES", 10_000)  # only the timeout ends it
    monkeypatch.setattr(calls, "RETRY_MAX_DELAY", 0.2)
    server.play(Step(503, {}, OVERLOADED))
    # 3 s: several tries even on a loaded machine, where one call may take a second
    memory, session = await _memory_and_session(sessions, max_attempts=1, timeout=3.0)

    started = time.monotonic()
    with pytest.raises(GenerationError) as e:
        await memory.generate(app_name=APP, user_id=USER, session_id=session.id)
    elapsed = time.monotonic() - started

    assert elapsed < 3.0 + 2.0  # near the timeout, not 10,000 tries later
    assert not isinstance(e.value, TransientModelError)
    # given up before a wait that would pass the timeout, or timed out during a try
    assert re.search(
        r"gave up on the extraction after \d+ tries: the next wait \(0\.\d\d s\) would pass"
        r" the timeout \(3 s\)|gave no extraction within 3 s \(\d+ tries",
        str(e.value),
    )
    assert "HTTP 503" in str(e.value)
    assert len(server.script.prompts) >= 3
    assert SECRET not in _messages(e.value)
    ((app, user, session_id, attempts, error),) = await memory.generation_failures(app_name=APP)
    assert (app, user, session_id, attempts) == (APP, USER, session.id, 1)
    assert error is not None and "HTTP 503" in error and SECRET not in error
    assert await memory.list_facts(app_name=APP, user_id=USER) == []


@NEEDS_HTTPX
async def test_502_forever_stops_at_the_most_tries(
    sessions: SqlSessionService, server: LocalServer
) -> None:
    server.play(Step(502, {}, b"<html>bad gateway</html>".decode()))
    memory, session = await _memory_and_session(sessions, max_attempts=1, timeout=30)

    with pytest.raises(GenerationError, match=r"after 6 tries, the most it makes.*HTTP 502"):
        await memory.generate(app_name=APP, user_id=USER, session_id=session.id)

    assert len(server.script.prompts) == calls.MAX_TRIES == 6


@NEEDS_HTTPX
async def test_a_400_fails_at_once(sessions: SqlSessionService, server: LocalServer) -> None:
    server.play(Step(400, {}, {"error": {"message": SECRET, "type": "invalid_request_error"}}))
    memory, session = await _memory_and_session(sessions, max_attempts=1)

    with pytest.raises(GenerationError, match="HTTP 400") as caught:
        await memory.generate(app_name=APP, user_id=USER, session_id=session.id)

    assert len(server.script.prompts) == 1
    assert "gave up" not in str(caught.value) and SECRET not in _messages(caught.value)
    ((*_, attempts, error),) = await memory.generation_failures(app_name=APP)
    assert attempts == 1 and error is not None and "HTTP 400" in error


@NEEDS_HTTPX
@pytest.mark.parametrize("http_date_form", [False, True], ids=["seconds", "http-date"])
async def test_a_retry_after_past_the_timeout_gives_up_without_waiting(
    sessions: SqlSessionService, server: LocalServer, http_date_form: bool
) -> None:
    retry_after = http_date(30) if http_date_form else "30"
    server.play(Step(429, {"Retry-After": retry_after}, {}), Step())
    memory, session = await _memory_and_session(sessions, max_attempts=1, timeout=2.0)

    started = time.monotonic()
    with pytest.raises(
        GenerationError,
        match=r"after 1 try: the next wait \(\d\d\.\d\d s\) would pass the timeout \(2 s\)",
    ):
        await memory.generate(app_name=APP, user_id=USER, session_id=session.id)

    assert time.monotonic() - started < 1.0  # no wait begun
    assert len(server.script.prompts) == 1


@NEEDS_HTTPX
async def test_a_spent_quota_is_not_retried(server: LocalServer) -> None:
    server.play(
        Step(429, {}, {"error": {"type": "insufficient_quota", "code": "insufficient_quota"}})
    )
    model = OpenAICompatibleModel("m-quota", base_url=server.url)

    with pytest.raises(GenerationError, match="HTTP 429") as caught:
        await call_model(MemoryGenerator(model), REQUEST, GenerationReport())

    assert not isinstance(caught.value, TransientModelError)
    assert len(server.script.prompts) == 1


# --- the OpenAI-compatible model's errors ------------------------------------------


@NEEDS_HTTPX
@pytest.mark.parametrize("status", [429, 500, 502, 503, 504])
async def test_transient_statuses_raise_transient_model_error(
    server: LocalServer, status: int
) -> None:
    server.play(Step(status, {"Retry-After": "7"}, OVERLOADED))
    model = OpenAICompatibleModel("m-busy", base_url=server.url)

    with pytest.raises(TransientModelError) as caught:
        await model.complete(REQUEST)

    assert (caught.value.status, caught.value.retry_after) == (status, 7.0)
    assert f"HTTP {status}" in str(caught.value) and "'m-busy'" in str(caught.value)
    assert SECRET not in _messages(caught.value)


@NEEDS_HTTPX
@pytest.mark.parametrize("status", [400, 401, 404, 422])
async def test_other_statuses_are_not_transient(server: LocalServer, status: int) -> None:
    server.play(Step(status, {"Retry-After": "1"}, OVERLOADED))
    with pytest.raises(GenerationError, match=f"HTTP {status}") as caught:
        await OpenAICompatibleModel("m-bad", base_url=server.url).complete(REQUEST)
    assert not isinstance(caught.value, TransientModelError)


@NEEDS_HTTPX
async def test_a_refused_connection_is_transient() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    model = OpenAICompatibleModel("m-down", base_url=f"http://127.0.0.1:{port}/v1")
    with pytest.raises(TransientModelError, match=r"failed \(ConnectError\)") as caught:
        await model.complete(REQUEST)
    assert caught.value.status is None and caught.value.retry_after is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        ("", None),
        ("0", 0.0),
        (" 12 ", 12.0),
        ("1.5", 1.5),
        ("-3", 0.0),
        ("nan", None),
        ("1e999", MAX_RETRY_AFTER),
        ("99999999", MAX_RETRY_AFTER),
        ("soon", None),
        ("Wed, 21 Oct 2015 07:28:00 GMT", 0.0),  # past
    ],
)
def test_retry_after_values(value: str | None, expected: float | None) -> None:
    assert retry_after_seconds(value) == expected


def test_retry_after_http_date_in_the_future() -> None:
    seconds = retry_after_seconds(http_date(60))
    assert seconds is not None and 55 <= seconds <= 60


# --- the retry loop, with scripted models (no database, no network) ---------------


class Flaky:
    """A chat model raising the given exceptions, one per call, then answering."""

    name = "flaky-model"

    def __init__(self, *failures: BaseException) -> None:
        self.failures = list(failures)
        self.calls = 0

    async def complete(self, request: ModelRequest) -> ModelReply:
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return ModelReply('{"facts": []}', prompt_tokens=40, completion_tokens=5)


class StatusError(Exception):
    """As google.genai's APIError (``code``) or LiteLLM's errors (``status_code``),
    with a message quoting the conversation."""

    def __init__(self, attribute: str, status: int, headers: dict[str, str] | None = None) -> None:
        super().__init__(f"failed on {SECRET}")
        setattr(self, attribute, status)
        self.response = type("Response", (), {"headers": headers or {}})()


@pytest.mark.parametrize(
    "failure",
    [
        StatusError("code", 429),
        StatusError("status_code", 503),
        StatusError("code", 500),
        ConnectionResetError(f"reset while sending {SECRET}"),
        TransientModelError("model 'flaky-model' answered HTTP 502", status=502),
    ],
    ids=["code-429", "status-code-503", "code-500", "connection-reset", "transient-error"],
)
async def test_transient_exceptions_are_retried_and_counted(failure: BaseException) -> None:
    model = Flaky(failure, failure)
    report = GenerationReport()

    reply = await call_model(MemoryGenerator(model), REQUEST, report)

    assert reply.text == '{"facts": []}' and model.calls == 3
    assert (report.model_calls, report.retries) == (3, 2)
    estimated = (len(REQUEST.system) + len(REQUEST.prompt)) // 4
    assert (report.prompt_tokens, report.completion_tokens) == (2 * estimated + 40, 5)


@pytest.mark.parametrize(
    ("failure", "message"),
    [
        (StatusError("code", 400), "StatusError"),
        (StatusError("status_code", 404), "StatusError"),
        (ValueError(f"bad {SECRET}"), "ValueError"),
        (GenerationError("model 'flaky-model' answered with error_code 'SAFETY'"), "SAFETY"),
    ],
    ids=["code-400", "status-code-404", "value-error", "generation-error"],
)
async def test_other_exceptions_fail_at_once(failure: BaseException, message: str) -> None:
    model = Flaky(failure)
    report = GenerationReport()

    with pytest.raises(GenerationError, match=message) as caught:
        await call_model(MemoryGenerator(model), REQUEST, report)

    assert model.calls == 1 and (report.model_calls, report.retries) == (1, 0)
    assert SECRET not in str(caught.value)


async def test_a_foreign_error_given_up_on_names_its_class_and_status_only() -> None:
    model = Flaky(*[StatusError("code", 503)] * 10)
    report = GenerationReport()

    with pytest.raises(GenerationError) as caught:
        await call_model(MemoryGenerator(model), REQUEST, report)

    assert str(caught.value) == (
        "model 'flaky-model' gave up on the extraction after 6 tries, the most it makes;"
        " the last failure: StatusError, HTTP 503"
    )
    assert SECRET not in _messages(caught.value)
    assert (model.calls, report.model_calls, report.retries) == (6, 6, 5)


async def test_retry_after_of_a_foreign_error_is_honoured() -> None:
    model = Flaky(StatusError("code", 429, {"retry-after": "0.3"}))
    report = GenerationReport()

    started = time.monotonic()
    await call_model(MemoryGenerator(model), REQUEST, report)

    assert time.monotonic() - started >= 0.3
    assert report.retries == 1


def test_waits_double_up_to_the_most_less_a_random_part() -> None:
    waits = [calls._wait(tries, None) for tries in range(1, 6)]
    for tries, wait in enumerate(waits, start=1):
        backoff = min(0.01 * 2 ** (tries - 1), 0.04)
        assert backoff / 2 <= wait <= backoff
    assert calls._wait(1, 5.0) == 5.0  # Retry-After wins when longer


async def test_a_slow_model_times_out_within_the_whole_calls_timeout() -> None:
    class SlowAfterFailing(Flaky):
        async def complete(self, request: ModelRequest) -> ModelReply:
            if not self.failures:
                self.calls += 1
                await asyncio.sleep(10)
            return await super().complete(request)

    model = SlowAfterFailing(ConnectionResetError())
    started = time.monotonic()
    with pytest.raises(
        GenerationError,
        match=r"no extraction within 0\.3 s \(2 tries; the last failure: ConnectionResetError\)",
    ):
        await call_model(MemoryGenerator(model, timeout=0.3), REQUEST, GenerationReport())
    assert time.monotonic() - started < 0.3 + 0.3


async def test_retries_are_logged_without_content(caplog: pytest.LogCaptureFixture) -> None:
    model = Flaky(StatusError("code", 429))
    with caplog.at_level("INFO", logger="adk_sqlstore"):
        await call_model(MemoryGenerator(model), REQUEST, GenerationReport())
    assert "'flaky-model' failed transiently during the extraction (StatusError, HTTP 429)" in (
        caplog.text
    )
    assert SECRET not in caplog.text


# --- telemetry ----------------------------------------------------------------------


@NEEDS_HTTPX
async def test_the_generate_span_counts_the_retries(sqlite_url: str, server: LocalServer) -> None:
    trace = pytest.importorskip("opentelemetry.trace")
    sdk_trace = pytest.importorskip("opentelemetry.sdk.trace")
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    provider = trace.get_tracer_provider()
    if not isinstance(provider, sdk_trace.TracerProvider):
        trace.set_tracer_provider(sdk_trace.TracerProvider())
        provider = trace.get_tracer_provider()
    exporter = InMemorySpanExporter()
    processor = SimpleSpanProcessor(exporter)
    provider.add_span_processor(processor)
    try:
        server.play(Step(503, {}, OVERLOADED), DROP, Step())
        async with SqlSessionService.from_url(sqlite_url) as sessions:
            memory, session = await _memory_and_session(sessions)
            await memory.generate(app_name=APP, user_id=USER, session_id=session.id)
            await memory.list_facts(app_name=APP, user_id=USER)
    finally:
        processor.shutdown()  # exports nothing more
    spans = {s.name: dict(s.attributes or {}) for s in exporter.get_finished_spans()}
    assert spans["adk_sqlstore.generate"]["adk_sqlstore.generation.retries"] == 2
    assert "adk_sqlstore.generation.retries" not in spans["adk_sqlstore.list_facts"]


async def test_google_genai_errors_are_retried_by_their_code() -> None:
    errors = pytest.importorskip("google.genai.errors")
    body = {"error": {"message": f"quota for {SECRET}", "status": "RESOURCE_EXHAUSTED"}}
    model = Flaky(errors.ClientError(429, body), errors.ServerError(503, body))
    report = GenerationReport()

    await call_model(MemoryGenerator(model), REQUEST, report)
    assert (report.model_calls, report.retries) == (3, 2)

    refused = Flaky(errors.ClientError(400, body))
    with pytest.raises(GenerationError, match="ClientError") as caught:
        await call_model(MemoryGenerator(refused), REQUEST, GenerationReport())
    assert refused.calls == 1 and SECRET not in _messages(caught.value)
