"""What must never be remembered: filters applied to text before it reaches memory.

From the design notes (000, "Scope, isolation and privacy"): "Decide what must never be
remembered, such as payment details, health information or credentials, and filter it
at ingestion rather than at retrieval." The filtered text is what is stored and indexed;
the raw value is nowhere in the memory table.

By default payment card numbers are masked: runs of 13 to 19 digits (any script's
decimal digits), with up to three separators between digits (any whitespace, line
breaks and NUL included; dashes of every kind; soft hyphens and zero-width
characters), that pass the Luhn check become ``[card ending 1111]``. Parts of a message
are joined by line breaks before the filter runs, so a number split across parts is
caught too. Applications add their own rules: a
callable ``str -> str``, or a regular expression (string or compiled) whose matches
become ``[redacted]``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import TypeAlias

__all__ = ["Redactor", "build_filter", "luhn_valid", "mask_card_numbers"]

Redactor: TypeAlias = Callable[[str], str] | str | re.Pattern[str]

# 13-19 digits, not inside a longer run, with up to three separators between digits:
# whitespace (line breaks, no-break and thin spaces included), NUL, dashes (ASCII,
# Unicode hyphens and dashes, minus), soft hyphens and zero-width characters.
_SEPARATORS = "[\\s\x00\\-\u00ad\u2010-\u2015\u2212\u200b-\u200d\u2060\ufeff]"
_CARD_CANDIDATE = re.compile(rf"(?<![\d])\d(?:{_SEPARATORS}{{0,3}}\d){{12,18}}(?![\d])")
_DIGIT = re.compile(r"\d")  # a quick look first: most text holds no digit at all


def luhn_valid(digits: str) -> bool:
    """The Luhn checksum of a string of digits (as used by payment card numbers)."""
    total = 0
    for position, char in enumerate(reversed(digits)):
        value = int(char)  # any script's decimal digit
        if position % 2 == 1:
            value *= 2
            if value > 9:
                value -= 9
        total += value
    return total % 10 == 0


def mask_card_numbers(text: str) -> str:
    """Replace Luhn-valid 13-19 digit runs (separators as in the module docstring
    allowed between digits) by ``[card ending NNNN]``."""

    def mask(match: re.Match[str]) -> str:
        digits = re.sub(_SEPARATORS, "", match.group(0))
        if 13 <= len(digits) <= 19 and luhn_valid(digits):
            return f"[card ending {''.join(str(int(d)) for d in digits[-4:])}]"
        return match.group(0)

    if _DIGIT.search(text) is None:  # the candidate pattern tries every position
        return text
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
