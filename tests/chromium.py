"""Debian's headless Chromium, driven by Playwright, for the tests of what a person
looks at (the memory inspector's pages, the documentation site)."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from .conftest import IN_CI

CHROMIUM = Path("/usr/bin/chromium")


@contextmanager
def headless_chromium() -> Iterator[Any]:
    """A launched headless Chromium (Playwright's ``Browser``), closed afterwards.

    Skips where the ``playwright`` package (the dev extra) or ``/usr/bin/chromium``
    (``apt-get install chromium``; Playwright's own browsers are not used) is missing;
    under ``CI=true`` a missing Chromium fails instead."""
    if importlib.util.find_spec("playwright") is None:
        pytest.skip(
            "the playwright package is not installed (the dev extra has it:"
            ' pip install -e ".[dev]"); these tests drive /usr/bin/chromium with it'
        )
    if not CHROMIUM.exists():
        message = (
            f"{CHROMIUM} is missing: these tests drive Debian's headless Chromium"
            " (apt-get install chromium); Playwright's own browsers are not used"
        )
        if IN_CI:
            pytest.fail("CI=true but " + message)
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=["--no-sandbox"], headless=True
        )
        yield launched
        launched.close()
