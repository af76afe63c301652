"""The name a mistyped one most likely meant: for a database URL's parameters
(:mod:`adk_sqlstore.url_parameters`) and the command line's options and commands
(:mod:`adk_sqlstore.cli.parsing`), found the one way."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["closest"]


def closest(word: str, choices: Iterable[str]) -> str | None:
    """The choice most like ``word``, or ``None`` when none is close.

    Close means a :func:`difflib.get_close_matches` similarity of at least 0.6 (its
    default, which click's suggestions for a mistyped option use too), the case of
    letters aside (``GENERATOR`` means ``generator``); ``word`` itself is never
    suggested, and of equally close choices the first in sorted order wins.
    """
    lowered: dict[str, str] = {}
    for choice in sorted(set(choices) - {word}):
        lowered.setdefault(choice.lower(), choice)
    found = difflib.get_close_matches(word.lower(), list(lowered), n=1)
    return lowered[found[0]] if found else None
