"""The README's Python examples run as written."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from adk_sqlstore.urls import DATABASE_URL_ENV

from .conftest import REPO

EXAMPLES = re.findall(r"```python\n(.*?)```", (REPO / "README.md").read_text(), re.S)


@pytest.mark.parametrize("code", EXAMPLES, ids=[f"example{n}" for n in range(len(EXAMPLES))])
def test_readme_example_runs(code: str, tmp_path: Path) -> None:
    if "adk_sqlstore.adk" in code:
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
