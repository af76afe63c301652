"""Rich consoles for the command line and the demo."""

from __future__ import annotations

import os

from rich.console import Console

__all__ = ["make_console"]

_PIPE_WIDTH = 1000


def make_console(*, stderr: bool = False, markup: bool = False) -> Console:
    """A rich console for the running command. Output to a pipe or file is not cut to
    80 columns: it is as wide as it needs (up to ``_PIPE_WIDTH``) unless COLUMNS says
    otherwise, so no line is broken inside a value."""
    console = Console(stderr=stderr, highlight=False, markup=markup)
    if not console.is_terminal and not os.environ.get("COLUMNS", "").strip():
        console = Console(stderr=stderr, highlight=False, markup=markup, width=_PIPE_WIDTH)
    return console
