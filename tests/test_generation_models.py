"""The chat models a memory generator calls (adk_sqlstore.generation.models and its
adapters): an OpenAI-compatible endpoint against a real local HTTP server, ADK models
through ADK's own registry, and plain callables. No database."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast

import pytest

from adk_sqlstore.errors import ConfigurationError, GenerationError
from adk_sqlstore.generation import (
    CallableModel,
    ChatModel,
    ModelReply,
    ModelRequest,
    resolve_model,
)
from adk_sqlstore.generation.openai_chat import OpenAICompatibleModel

from .scripted_models import NEEDS_HTTPX

SECRET = "SECRET-MARKER-7f3a"  # in prompts and answers; never in an error's message
REQUEST = ModelRequest(system="Extract facts as JSON.", prompt=f"user: my pin is {SECRET}")


def echo_model(system: str, prompt: str) -> str:
    """A model named by ``tests.test_generation_models:echo_model``."""
    return json.dumps({"system": system, "prompt": prompt})


class EchoModel:
    """A ChatModel class named by ``tests.test_generation_models:EchoModel``."""

    name = "echo-class"

    async def complete(self, request: ModelRequest) -> ModelReply:
        return ModelReply(request.prompt, prompt_tokens=1, completion_tokens=2)


# --- a real OpenAI-compatible HTTP server -------------------------------------------


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class Script:
    status: int = 200
    body: bytes = b""
    delay: float = 0.0
    requests: list[Recorded] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    script: Script


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        script = cast(_Server, self.server).script
        raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        headers = {key.lower(): value for key, value in self.headers.items()}
        script.requests.append(Recorded("POST", self.path, headers, json.loads(raw)))
        if script.delay:
            script.release.wait(script.delay)
        try:
            self.send_response(script.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(script.body)))
            self.end_headers()
            self.wfile.write(script.body)
        except OSError:  # the client gave up (the timeout test)
            pass

    def log_message(self, format: str, *args: Any) -> None:
        pass


@dataclass
class LocalServer:
    url: str  # the API's root, ".../v1"
    script: Script

    def answer(self, status: int, body: Any, *, delay: float = 0.0) -> None:
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.script.status, self.script.body, self.script.delay = status, raw, delay


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalServer]:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    httpd = _Server(("127.0.0.1", 0), _Handler)
    httpd.script = Script()
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield LocalServer(f"http://127.0.0.1:{httpd.server_address[1]}/v1", httpd.script)
    finally:
        httpd.script.release.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


def completion(text: str | None, usage: dict[str, int] | None = None) -> dict[str, Any]:
    """An answer of OpenAI's chat completion shape."""
    answer: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop" if text is not None else "content_filter",
            }
        ],
    }
    if usage is not None:
        answer["usage"] = usage
    return answer


@NEEDS_HTTPX
async def test_openai_request_body_headers_and_reply(
    server: LocalServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key")
    server.answer(200, completion('{"facts": []}', {"prompt_tokens": 12, "completion_tokens": 3}))
    model = OpenAICompatibleModel("m-1", base_url=server.url + "/")

    reply = await model.complete(REQUEST)

    assert reply == ModelReply('{"facts": []}', prompt_tokens=12, completion_tokens=3)
    assert isinstance(model, ChatModel) and model.name == "m-1"
    [sent] = server.script.requests
    assert (sent.method, sent.path) == ("POST", "/v1/chat/completions")
    assert sent.headers["authorization"] == "Bearer sk-test-key"
    assert sent.headers["content-type"] == "application/json"
    assert sent.body == {
        "model": "m-1",
        "messages": [
            {"role": "system", "content": REQUEST.system},
            {"role": "user", "content": REQUEST.prompt},
        ],
        "temperature": 0.0,
        "response_format": {"type": "json_object"},
    }


@NEEDS_HTTPX
async def test_openai_without_key_sends_no_authorization(server: LocalServer) -> None:
    server.answer(200, completion("{}"))
    model = OpenAICompatibleModel("m-2", base_url=server.url, temperature=0.5, json_mode=False)

    reply = await model.complete(REQUEST)

    assert reply == ModelReply("{}", prompt_tokens=None, completion_tokens=None)
    [sent] = server.script.requests
    assert "authorization" not in sent.headers
    assert sent.body["temperature"] == 0.5
    assert "response_format" not in sent.body


@NEEDS_HTTPX
async def test_openai_explicit_key_wins_over_environment(
    server: LocalServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    server.answer(200, completion("{}"))
    await OpenAICompatibleModel("m", base_url=server.url, api_key="sk-given").complete(REQUEST)
    assert server.script.requests[0].headers["authorization"] == "Bearer sk-given"


@NEEDS_HTTPX
async def test_resolve_openai_name_honours_the_environment(
    server: LocalServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    server.answer(200, completion('{"a": 1}', {"prompt_tokens": 5, "completion_tokens": 7}))

    model = resolve_model("openai:some-model")

    assert isinstance(model, OpenAICompatibleModel)
    assert model.name == "some-model" and model.base_url == server.url
    assert await model.complete(REQUEST) == ModelReply('{"a": 1}', 5, 7)
    [sent] = server.script.requests
    assert sent.body["model"] == "some-model"
    assert sent.headers["authorization"] == "Bearer sk-env"


@NEEDS_HTTPX
def test_resolve_openai_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    model = resolve_model("openai:")
    assert isinstance(model, OpenAICompatibleModel)
    assert model.name == "gpt-4o-mini"
    assert model.base_url == "https://api.openai.com/v1"


def _messages(exc: BaseException) -> str:
    """The messages of ``exc`` and every exception chained to it."""
    seen: list[str] = []
    current: BaseException | None = exc
    while current is not None and len(seen) < 10:
        seen.append(f"{current!s} {current!r}")
        current = current.__cause__ or current.__context__
    return "\n".join(seen)


@NEEDS_HTTPX
@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        pytest.param(
            500,
            {"error": {"message": f"echo {SECRET}", "type": "server_error", "code": "x" * 200}},
            ["HTTP 500", "type 'server_error'", f"code '{'x' * 80}'"],
            id="http-500-openai-error",
        ),
        pytest.param(502, f"<html>{SECRET}</html>".encode(), ["HTTP 502"], id="http-502-html"),
        pytest.param(200, {"result": SECRET}, ["another shape"], id="not-openai-shape"),
        pytest.param(200, f"not json {SECRET}".encode(), ["another shape"], id="not-json"),
        pytest.param(200, completion(None), ["without text", "content_filter"], id="no-content"),
    ],
)
async def test_openai_answers_that_fail(
    server: LocalServer, status: int, body: Any, expected: list[str]
) -> None:
    server.answer(status, body)
    model = OpenAICompatibleModel("m-err", base_url=server.url)

    with pytest.raises(GenerationError) as caught:
        await model.complete(REQUEST)

    message = str(caught.value)
    assert "'m-err'" in message
    assert f"{server.url}/chat/completions" in message
    for part in expected:
        assert part in message
    assert "x" * 81 not in message
    assert SECRET not in _messages(caught.value)


@NEEDS_HTTPX
async def test_openai_timeout(server: LocalServer) -> None:
    server.answer(200, completion(f"late {SECRET}"), delay=10)
    model = OpenAICompatibleModel("m-slow", base_url=server.url, timeout=0.2)

    with pytest.raises(GenerationError, match=r"timed out after 0\.2 s \(ReadTimeout\)") as caught:
        await model.complete(REQUEST)

    assert "'m-slow'" in str(caught.value) and server.url in str(caught.value)
    assert SECRET not in _messages(caught.value)


@NEEDS_HTTPX
async def test_openai_connection_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    model = OpenAICompatibleModel("m-down", base_url=f"http://me:pw-{SECRET}@127.0.0.1:{port}/v1")

    with pytest.raises(GenerationError, match=r"failed \(ConnectError\)") as caught:
        await model.complete(REQUEST)

    assert "'m-down'" in str(caught.value) and f"{url}/chat/completions" in str(caught.value)
    assert SECRET not in str(caught.value)  # neither the prompt nor the URL's password


# --- callables, imported names and the rest -------------------------------------


async def test_sync_callable() -> None:
    def shout(system: str, prompt: str) -> str:
        return f"{system}|{prompt.upper()}"

    model = resolve_model(shout)
    assert isinstance(model, CallableModel) and model.name == "shout"
    assert (await model.complete(ModelRequest("s", "p"))).text == "s|P"


async def test_async_callable() -> None:
    async def answer(system: str, prompt: str) -> ModelReply:
        return ModelReply(prompt, prompt_tokens=3, completion_tokens=1)

    model = resolve_model(answer)
    assert await model.complete(ModelRequest("s", "p")) == ModelReply("p", 3, 1)


async def test_imported_function() -> None:
    model = resolve_model("tests.test_generation_models:echo_model")
    assert isinstance(model, CallableModel) and model.name == "echo_model"
    reply = await model.complete(ModelRequest("sys", "hello"))
    assert json.loads(reply.text) == {"system": "sys", "prompt": "hello"}


async def test_imported_class_is_made() -> None:
    model = resolve_model(" tests.test_generation_models:EchoModel ")
    assert isinstance(model, EchoModel)
    assert await model.complete(ModelRequest("s", "p")) == ModelReply("p", 1, 2)


def test_chat_model_is_kept() -> None:
    model = EchoModel()
    assert resolve_model(model) is model


@pytest.mark.parametrize(
    "bad",
    [42, None, object(), "tests.test_generation_models:NOT_THERE", "no_such_module_xyz:model"],
)
def test_bad_models(bad: object) -> None:
    with pytest.raises(ConfigurationError):
        resolve_model(bad)
