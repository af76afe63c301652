"""What must never be remembered: filters applied to text before it reaches memory.

From the design notes (000, "Scope, isolation and privacy"): "Decide what must never be
remembered, such as payment details, health information or credentials, and filter it
at ingestion rather than at retrieval." The filtered text is what is stored and indexed;
the raw value is nowhere in the memory table.

By default payment card numbers are masked: runs of 13 to 19 digits, with up to two
spaces (no-break and thin spaces included), tabs or dashes between digits, that pass
the Luhn check become ``[card ending 1111]``. Applications add their own rules: a
callable ``str -> str``, or a regular expression (string or compiled) whose matches
become ``[redacted]``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import TypeAlias

__all__ = ["Redactor", "build_filter", "luhn_valid", "mask_card_numbers"]

Redactor: TypeAlias = Callable[[str], str] | str | re.Pattern[str]

# 13-19 digits, not inside a longer run, with up to two separators between digits: spaces
# (including no-break and thin spaces), tabs or dashes.
_SEPARATORS = "[ \t\u00a0\u2007\u202f-]"
_CARD_CANDIDATE = re.compile(rf"(?<![\d])\d(?:{_SEPARATORS}{{0,2}}\d){{12,18}}(?![\d])")


def luhn_valid(digits: str) -> bool:
    """The Luhn checksum of a string of digits (as used by payment card numbers)."""
    total = 0
    for position, char in enumerate(reversed(digits)):
        value = ord(char) - 48
        if position % 2 == 1:
            value *= 2
            if value > 9:
                value -= 9
        total += value
    return total % 10 == 0


def mask_card_numbers(text: str) -> str:
    """Replace Luhn-valid 13-19 digit runs (spaces, tabs or dashes allowed between
    digits) by ``[card ending NNNN]``."""

    def mask(match: re.Match[str]) -> str:
        digits = re.sub(_SEPARATORS, "", match.group(0))
        if 13 <= len(digits) <= 19 and luhn_valid(digits):
            return f"[card ending {digits[-4:]}]"
        return match.group(0)

    return _CARD_CANDIDATE.sub(mask, text)


def _as_callable(rule: Redactor) -> Callable[[str], str]:
    if isinstance(rule, str | re.Pattern):
        pattern = re.compile(rule) if isinstance(rule, str) else rule
        return lambda text: pattern.sub("[redacted]", text)
    if callable(rule):
        return rule
    raise TypeError(f"a redaction rule is a callable or a regular expression, not {rule!r}")


def build_filter(
    rules: Iterable[Redactor] | None = None, *, mask_cards: bool = True
) -> Callable[[str], str]:
    """Compose the ingestion filter: card masking (unless ``mask_cards=False``), then
    ``rules`` in order.

    Raises:
        TypeError: a rule is neither a callable nor a pattern.
        re.error: a pattern does not compile.
    """
    steps: list[Callable[[str], str]] = [mask_card_numbers] if mask_cards else []
    steps.extend(_as_callable(rule) for rule in rules or ())

    def apply(text: str) -> str:
        for step in steps:
            text = step(text)
            if not isinstance(text, str):
                raise TypeError("a redaction rule must return a str")
        return text

    return apply
