"""docs/adk-compatibility.md and the tests it lists stay in step: every test of ours it
names exists, and every test of the compatibility files names an upstream test that
the list has (issue 18: "Keep the list, with the upstream test name beside each of our
tests")."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from .conftest import IN_CI

TESTS = Path(__file__).parent
LIST = TESTS.parent / "docs" / "adk-compatibility.md"
COMPAT_FILES = (
    "test_adk_compat_sessions.py",
    "test_adk_compat_sessions_later.py",
    "test_adk_compat_memory.py",
)


def _rows() -> list[list[str]]:
    """The cells of every table row naming an upstream test."""
    rows = []
    for line in LIST.read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("| `test_") and len(cells) >= 4:
            rows.append(cells)
    return rows


def _defined_tests() -> set[str]:
    names = set()
    for path in TESTS.glob("test_*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                names.add(node.name)
    return names


def test_every_test_the_list_names_exists() -> None:
    rows = _rows()
    assert len(rows) > 40, "the list's tables were not found"
    defined = _defined_tests()
    named = {name for row in rows for name in re.findall(r"\btest_\w+\b(?!\.py)", row[2])}
    assert named, "no test of ours is named"
    assert not named - defined, sorted(named - defined)


def test_every_compatibility_test_names_an_upstream_test_of_the_list() -> None:
    upstream = {re.sub(r"[`\s]|\(.*", "", row[0]) for row in _rows()}
    for file in COMPAT_FILES:
        tree = ast.parse((TESTS / file).read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith(
                "test_"
            ):
                doc = ast.get_docstring(node) or ""
                cited = set(re.findall(r"\btest_\w+", doc)) & upstream
                beyond = "Beyond upstream" in doc
                assert cited or beyond, f"{file}::{node.name} names no upstream test of the list"


def test_the_list_is_of_the_installed_google_adk() -> None:
    """The list names the google-adk version whose tests it maps; a run with another
    minor version installed fails in CI (an upgrade refreshes the list and the tests
    in the same change) and skips elsewhere (a user's newer ADK)."""
    adk = pytest.importorskip("google.adk", reason="the adk extra is not installed")
    listed = re.search(r"google-adk\s+\*\*(\d+\.\d+)\*\*", LIST.read_text(encoding="utf-8"))
    assert listed, "docs/adk-compatibility.md names no google-adk version"
    installed = ".".join(adk.__version__.split(".")[:2])
    if installed != listed.group(1):
        message = (
            f"docs/adk-compatibility.md maps google-adk {listed.group(1)}'s tests;"
            f" {adk.__version__} is installed: refresh the list and the tests"
        )
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
