"""The Python examples of the README and of every documentation page run as written,
each in a folder and a default database of its own, and print what their comments say."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from adk_sqlstore.urls import DATABASE_URL_ENV

from .conftest import REPO

PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
EXAMPLES = [
    (f"{page.relative_to(REPO)}:{n}", code)
    for page in PAGES
    for n, code in enumerate(re.findall(r"```python\n(.*?)```", page.read_text(), re.S))
]


@pytest.mark.parametrize("code", [code for _, code in EXAMPLES], ids=[i for i, _ in EXAMPLES])
def test_readme_example_runs(code: str, tmp_path: Path) -> None:
    if "adk_sqlstore.adk" in code or re.search(r'MemoryGenerator\(\s*"(gemini|gpt)', code):
        # the ADK classes, or a model name ADK's registry resolves
        pytest.importorskip("google.adk", reason="the adk extra is not installed")
    if 'embedder="minilm"' in code and not os.environ.get("ADK_SQLSTORE_REQUIRE_EMBEDDINGS"):
        pytest.importorskip("sentence_transformers", reason="the embeddings extra is not installed")
    expected = re.findall(r"print\(.*\)  # (.+)", code)  # what the comment says it prints
    env = {k: v for k, v in os.environ.items() if k != DATABASE_URL_ENV}
    env["XDG_DATA_HOME"] = str(tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    for line in expected:  # each print prints what its comment says
        assert line.strip() in done.stdout, done.stdout
