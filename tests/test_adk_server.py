"""ADK's own server (``adk api_server``) with the shipped ``services.yaml``, one test per
documented URI form: create a session over HTTP, run a turn with a scripted model (no
network), restart the server, read the session back and run a turn that recalls the
first one from memory."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

pytest.importorskip("google.adk", reason="the adk extra is not installed")
httpx = pytest.importorskip("httpx")

from sqlalchemy.engine import make_url  # noqa: E402

from .conftest import PostgresFactory  # noqa: E402

APP = "scripted_agent"
USER = "user-17"

AGENT_PY = '''
"""A scripted agent (no model, no network) for adk-sqlstore's server tests.

The model answers from the last message alone, so it works across server restarts:
"diet: X" calls remember_diet, "recall: Q" calls load_memory, and each tool result
gets a one-line reply. After each turn the session is added to memory.
"""

import json
from typing import Any, AsyncGenerator

from google.adk.agents import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.tools import ToolContext, load_memory
from google.genai import types


def remember_diet(diet: str, tool_context: ToolContext) -> dict[str, Any]:
    """Remember the user's diet."""
    tool_context.state["user:diet"] = diet
    tool_context.state["turns"] = tool_context.state.get("turns", 0) + 1
    return {"status": "saved", "diet": diet}


def _reply(text: str) -> LlmResponse:
    return LlmResponse(content=types.Content(role="model", parts=[types.Part(text=text)]))


def _call(name: str, **args: Any) -> LlmResponse:
    call = types.FunctionCall(name=name, args=args)
    return LlmResponse(content=types.Content(role="model", parts=[types.Part(function_call=call)]))


class ScriptedModel(BaseLlm):
    model: str = "scripted"

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        part = llm_request.contents[-1].parts[-1]
        if part.function_response is not None:
            response = part.function_response.response or {}
            if part.function_response.name == "remember_diet":
                yield _reply(f"saved: {response.get('diet')}")
            else:
                yield _reply("recalled: " + json.dumps(response, default=str, ensure_ascii=False))
        elif (part.text or "").startswith("diet: "):
            yield _call("remember_diet", diet=part.text[len("diet: "):])
        elif (part.text or "").startswith("recall: "):
            yield _call("load_memory", query=part.text[len("recall: "):])
        else:
            yield _reply("echo: " + (part.text or ""))


async def _remember(callback_context) -> None:
    await callback_context.add_session_to_memory()


root_agent = LlmAgent(
    name="scripted_agent",
    model=ScriptedModel(),
    instruction="Answer the user.",
    tools=[remember_diet, load_memory],
    after_agent_callback=_remember,
)
'''


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class AdkServer:
    """``adk api_server`` in a child process, on a free port, logging to a file."""

    def __init__(self, agents: Path, uri: str, workdir: Path, env: dict[str, str]) -> None:
        self.agents, self.uri, self.workdir, self.env = agents, uri, workdir, env
        self.log = workdir / "server.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0

    def _command(self) -> list[str]:
        self.port = _free_port()
        adk = str(Path(sys.executable).with_name("adk"))
        command = [adk, "api_server", "--no-reload", "--host", "127.0.0.1"]
        command += ["--port", str(self.port), "--session_service_uri", self.uri]
        return [*command, "--memory_service_uri", self.uri, str(self.agents)]

    def start_fails(self) -> str:
        """Start a server that must stop at start-up; returns what it printed."""
        done = subprocess.run(
            self._command(),
            cwd=self.workdir,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode != 0, done.stdout + done.stderr
        return done.stdout + done.stderr

    def start(self) -> None:
        command = self._command()
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                command, cwd=self.workdir, env=self.env, stdout=log, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + 120
        while True:
            if self.process.poll() is not None:
                pytest.fail(f"adk api_server exited:\n{self.log.read_text()[-3000:]}")
            try:
                if httpx.get(self.url("/list-apps"), timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"adk api_server did not start:\n{self.log.read_text()[-3000:]}")
            time.sleep(0.2)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def create_session(self) -> Any:
        return httpx.post(self.url(f"/apps/{APP}/users/{USER}/sessions"), json={}, timeout=60)

    def get_session(self, session_id: str) -> dict[str, Any]:
        response = httpx.get(
            self.url(f"/apps/{APP}/users/{USER}/sessions/{session_id}"), timeout=60
        )
        assert response.status_code == 200, response.text
        return dict(response.json())

    def run(self, session_id: str, text: str) -> list[dict[str, Any]]:
        body = {
            "app_name": APP,
            "user_id": USER,
            "session_id": session_id,
            "new_message": {"role": "user", "parts": [{"text": text}]},
        }
        response = httpx.post(self.url("/run"), json=body, timeout=120)
        assert response.status_code == 200, response.text
        return list(response.json())


def _reply(events: list[dict[str, Any]]) -> str:
    texts = [
        p["text"]
        for e in events
        for p in (e.get("content") or {}).get("parts", [])
        if p.get("text") and e.get("author") == APP
    ]
    return str(texts[-1])


@pytest.fixture
def agents(tmp_path: Path) -> Path:
    """An agents folder with the shipped services.yaml (from the CLI, as the README
    says) and the scripted agent."""
    folder = tmp_path / "agents"
    (folder / APP).mkdir(parents=True)
    (folder / APP / "__init__.py").write_text("from . import agent\n")
    (folder / APP / "agent.py").write_text(textwrap.dedent(AGENT_PY))
    shipped = subprocess.run(
        [str(Path(sys.executable).with_name("adk-sqlstore")), "services-yaml"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    (folder / "services.yaml").write_text(shipped)
    return folder


@pytest.fixture
def server_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "ADK_SQLSTORE_DATABASE_URL"}
    env.update(XDG_DATA_HOME=str(tmp_path / "xdg"), ADK_DISABLE_LOCAL_STORAGE="1")
    env.update(PYTHONUNBUFFERED="1", GOOGLE_GENAI_USE_VERTEXAI="0")
    return env


@pytest.fixture
def server(agents: Path, server_env: dict[str, str], tmp_path: Path) -> Iterator[Any]:
    """Makes servers for a URI; all are stopped at the end."""
    made: list[AdkServer] = []

    def make(uri: str) -> AdkServer:
        workdir = tmp_path / "work"
        workdir.mkdir(exist_ok=True)
        made.append(AdkServer(agents, uri, workdir, server_env))
        return made[-1]

    yield make
    for one in made:
        one.stop()


def _session_survives_a_restart(server: AdkServer) -> None:
    server.start()
    created = server.create_session()
    assert created.status_code == 200, created.text
    session_id = created.json()["id"]
    assert _reply(server.run(session_id, "diet: vegan")) == "saved: vegan"
    before = server.get_session(session_id)
    server.stop()

    server.start()
    after = server.get_session(session_id)
    assert after["events"] == before["events"] and len(after["events"]) == 4
    assert after["state"]["user:diet"] == "vegan" and after["state"]["turns"] == 1
    # The restarted server appends to the session, and finds the first turn in memory.
    recalled = _reply(server.run(session_id, "recall: diet vegan"))
    assert recalled.startswith("recalled: ") and "diet: vegan" in recalled
    assert len(server.get_session(session_id)["events"]) == 8
    server.stop()


def test_sqlstore_default_uri_is_the_embedded_file(server: Any, tmp_path: Path) -> None:
    one = server("sqlstore://")
    _session_survives_a_restart(one)
    embedded = tmp_path / "xdg" / "adk-sqlstore" / "adk_sqlstore.db"
    assert embedded.is_file()
    assert f"adk-sqlstore session service: SQLite file {embedded}" in one.log.read_text()


@pytest.mark.soak  # two server starts (about 12 s); make test-all (CI) runs it
def test_sqlstore_sqlite_uri_is_relative_to_the_working_directory(
    server: Any, tmp_path: Path
) -> None:
    one = server("sqlstore+sqlite:///store.db")
    _session_survives_a_restart(one)
    path = tmp_path / "work" / "store.db"
    assert path.is_file()
    log = one.log.read_text()
    assert f"adk-sqlstore session service: SQLite file {path}" in log
    assert f"adk-sqlstore memory service: SQLite file {path}" in log


@pytest.mark.soak  # a server start each (about 10 s); make test-all (CI) runs them
def test_sqlstore_sqlite_uri_with_an_absolute_path(server: Any, tmp_path: Path) -> None:
    path = tmp_path / "elsewhere" / "abs.db"
    path.parent.mkdir()
    one = server(f"sqlstore+sqlite:///{path}")  # sqlite:////abs/path: four slashes
    _session_survives_a_restart(one)
    assert path.is_file() and not (tmp_path / "work" / "abs.db").exists()


@pytest.mark.soak  # server starts (about 30 s); make test-all (CI) runs it
@pytest.mark.postgres
def test_sqlstore_postgresql_uri_stops_at_start_up_until_migrated(
    server: Any, postgres_factory: PostgresFactory
) -> None:
    url = postgres_factory.create(migrate=False)
    uri = "sqlstore+" + url
    printed = server(uri).start_fails()
    lines = [line for line in printed.splitlines() if "adk-sqlstore migrate" in line]
    assert len(lines) == 1, printed  # stops at start-up with one clear line
    assert lines[0].startswith("Error: the database postgresql://"), lines
    assert "has no adk-sqlstore tables" in lines[0] and "auto_migrate=true" in lines[0]
    assert "Traceback" not in printed
    password = make_url(url).password
    if password:
        assert f":{password}@" not in printed
        assert f":{quote(str(password), safe='')}@" not in printed

    migrate = subprocess.run(
        [str(Path(sys.executable).with_name("adk-sqlstore")), "migrate", "--url", uri],
        capture_output=True,
        text=True,
        check=False,
    )
    assert migrate.returncode == 0, migrate.stdout + migrate.stderr
    _session_survives_a_restart(server(uri))


@pytest.mark.soak  # two server starts (about 13 s); make test-all (CI) runs it
@pytest.mark.postgres
def test_sqlstore_postgresql_uri_with_auto_migrate(
    server: Any, postgres_factory: PostgresFactory
) -> None:
    uri = "sqlstore+" + postgres_factory.create(migrate=False) + "?auto_migrate=true"
    _session_survives_a_restart(server(uri))


@pytest.mark.postgres
@pytest.mark.soak
def test_sqlstore_postgresql_uri_in_a_schema_of_its_own(
    server: Any, postgres_factory: PostgresFactory
) -> None:
    """``?search_path=agents``: migrated there, the server starts on it (its start-up
    check reads that schema), and the command it names keeps the setting."""
    import asyncpg

    from .conftest import run_sync

    url = postgres_factory.create(migrate=False)

    async def schema() -> None:
        conn = await asyncpg.connect(make_url(url).render_as_string(hide_password=False))
        try:
            await conn.execute("CREATE SCHEMA agents")
        finally:
            await conn.close()

    run_sync(schema())
    uri = f"sqlstore+{url}{'&' if '?' in url else '?'}search_path=agents"
    printed = server(uri).start_fails()  # not migrated yet: the command keeps search_path
    assert "search_path=agents" in printed and "adk-sqlstore migrate --url" in printed
    migrate = subprocess.run(
        [str(Path(sys.executable).with_name("adk-sqlstore")), "migrate", "--url", uri],
        capture_output=True,
        text=True,
        check=False,
    )
    assert migrate.returncode == 0, migrate.stdout + migrate.stderr
    _session_survives_a_restart(server(uri))
