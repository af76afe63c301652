"""Every ``adk-sqlstore`` command line the README and the documentation pages show runs
as shown: its options exist, and it does what it says or fails with one clear line.

Synopses are run with their placeholders filled (``A``: an app, ``U``: a user, ``ID``
and ``S``: a session, ``PATH``: an exported folder, ...) and their optional ``[...]``
parts left out; every URL names a seeded SQLite store of the test's own."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from adk_sqlstore import Event, SqlSessionService
from adk_sqlstore.artifacts import ArtifactStorage
from adk_sqlstore.cli import app
from adk_sqlstore.sql.artifacts import ArtifactKey

from .conftest import REPO, run_sync
from .helpers import runner

PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def _shown() -> list[tuple[str, str]]:
    """(where, command line) of every ``adk-sqlstore`` line in a shell or plain block."""
    found = []
    for page in PAGES:
        language = None  # inside a fenced block: its language ("" for none)
        for line in page.read_text().splitlines():
            if line.startswith("```"):
                language = line[3:].strip() if language is None else None
                continue
            command = line.split("  #", 1)[0].strip()
            if language in ("sh", "console", "bash", "") and command.startswith("adk-sqlstore"):
                found.append((f"{page.relative_to(REPO)}: {command}", command))
    return found


SHOWN = _shown()

# What a command is expected to answer with its exit status 1 (one line, "error: ..."),
# in this test's store: it needs something the store does not have.
FAILS_CLEARLY = {
    "memory embed": "the embedder's extra, where it is not installed",
    "memory facts show": "a fact (the store has none: no model is reachable here)",
    "memory generate": "a model (--generator or ?generator=; none is reachable here)",
    "import-adk": "a database of ADK's, here the test's own store (another layout)",
}

PLACEHOLDERS = {
    "A": "docs-app",
    "U": "docs-user",
    "ID": "s1",
    "S": "s1",
    "N": "1",
    "L": "english",
    "FACT_ID": "no-such-fact",
    "FILENAME": "user:notes.txt",
}


def _filled(command: str, url: str, folder: Path) -> list[str]:
    command = re.sub(r"\s*\[[^\]]*\]", "", command)  # optional parts left out
    command = command.replace("PATH...", str(folder / "exported"))
    words = shlex.split(command)[1:]
    out: list[str] = []
    for n, word in enumerate(words):
        if n and words[n - 1] in ("--url", "--source", "--target"):
            out.append(url)
        elif word == ">":  # the shell's redirection: the command's output is checked
            break
        else:
            out.append(PLACEHOLDERS.get(word, word))
    takes_no_url = (["--version"], ["services-yaml"], ["demo"], ["import-adk"])
    if "--url" not in out and out[:1] not in takes_no_url:
        out += ["--url", url]
    return out


async def _seed(url: str) -> None:
    async with SqlSessionService.from_url(url) as sessions:
        session = await sessions.create_session(
            app_name="docs-app", user_id="docs-user", session_id="s1"
        )
        content = {"role": "user", "parts": [{"text": "a query about kayaks"}]}
        await sessions.append_event(session, Event(author="user", content=content))
        key = ArtifactKey("docs-app", "docs-user", "", "user:notes.txt")
        await ArtifactStorage(sessions.store).save(
            key, part={}, data=b"notes", mime_type="text/plain", custom_metadata=None
        )


def test_the_pages_show_command_lines() -> None:
    shown = {command.split()[1] for _, command in SHOWN}
    assert {"migrate", "sessions", "memory", "import-adk", "prune", "artifacts"} <= shown


@pytest.mark.parametrize("command", [c for _, c in SHOWN], ids=[w for w, _ in SHOWN])
def test_a_command_line_the_docs_show_runs(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # a command that writes to "." (export) writes here
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.delenv("ADK_SQLSTORE_DATABASE_URL", raising=False)
    url = f"sqlite:///{tmp_path / 'store.db'}"
    assert runner.invoke(app, ["migrate", "--url", url]).exit_code == 0
    run_sync(_seed(url))
    out = str(tmp_path / "exported")
    exported = runner.invoke(app, ["export", "--app", "docs-app", "--out", out, "--url", url])
    assert exported.exit_code == 0, exported.output
    args = _filled(command, url, tmp_path)
    served: list[tuple[object, str, int]] = []
    if args[:1] == ["inspect"]:  # a server that never returns: record what it would serve
        uvicorn = pytest.importorskip("uvicorn", reason="inspect needs the inspector extra")
        monkeypatch.setattr(
            uvicorn, "run", lambda asgi, host, port, **_: served.append((asgi, host, port))
        )
    result = runner.invoke(app, args, input="y\n")
    if args[:1] == ["inspect"]:
        assert result.exit_code == 0, result.output
        assert [(h, p) for _, h, p in served] == [("127.0.0.1", 8765)], result.output
    assert "Traceback" not in result.output, result.output
    fails = next(
        (why for name, why in FAILS_CLEARLY.items() if command.startswith(f"adk-sqlstore {name}")),
        None,
    )
    if fails is None:
        assert result.exit_code == 0, (args, result.output)
    else:
        assert result.exit_code in (0, 1), (args, result.output)
        if result.exit_code == 1:
            assert result.output.strip().splitlines()[-1].startswith("error: "), result.output
