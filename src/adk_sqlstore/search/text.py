"""Text for memory: what an event says, the form it is indexed under (analysed into
terms by :mod:`.analysis`), and the user's scope token."""

from __future__ import annotations

import hashlib
import re
from typing import Any

__all__ = [
    "LENGTH_CLASSES",
    "MAX_INDEXED_CHARS",
    "MAX_QUERY_CHARS",
    "classed",
    "indexed_text",
    "length_class",
    "search_scope",
    "text_of",
    "valid_unicode",
]

MAX_INDEXED_CHARS = 100_000
"""Longest text indexed per memory (the stored content is never cut)."""

MAX_QUERY_CHARS = 10_000
"""Longest query searched; the rest of a longer query is ignored."""

_SURROGATE = re.compile("[\ud800-\udfff]")


def valid_unicode(text: str) -> str:
    """``text`` with lone surrogates (not encodable as UTF-8) replaced by U+FFFD."""
    return text if text.isascii() else _SURROGATE.sub("\ufffd", text)


def text_of(content: Any) -> str:
    """The text parts of a GenAI-shaped ``content`` joined by newlines ("" if none)."""
    parts = getattr(content, "parts", None) or []
    return "\n".join(p.text for p in parts if getattr(p, "text", None))


def indexed_text(author: str | None, text: str) -> str:
    """The form a memory is indexed under: its author, then its text, without NUL
    characters and cut at :data:`MAX_INDEXED_CHARS`. The author is indexed so that a
    question naming the speaker ("What did Caroline research?") finds their turns."""
    body = f"{author}: {text}" if author else text
    return body.replace("\x00", " ")[:MAX_INDEXED_CHARS]


def search_scope(app_name: str, user_id: str) -> str:
    """One token standing for ``(app_name, user_id)``, indexed with each memory so that
    SQLite's FTS5 finds a user's rows without scanning other users' postings."""
    digest = hashlib.sha256(f"{app_name}\x00{user_id}".encode()).hexdigest()[:32]
    return f"scope{digest}"


LENGTH_CLASSES = (1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 13, 16, 20, 25, 32, 48, 64, 128)
"""The lowest length (number of distinct terms) of each length class: every length up
to 8 is a class, then wider ones. A memory's index tokens carry its class
(:func:`classed`; migration 0006), so that its BM25 weight, which depends on its length
alone (term frequency 1), is known from the index: impact-ordered postings."""


def length_class(token_count: int) -> int:
    """The lowest length of the class of a memory with ``token_count`` terms (0 for
    none)."""
    low = 0
    for candidate in LENGTH_CLASSES:
        if candidate > token_count:
            break
        low = candidate
    return low


def classed(term: str, low: int) -> str:
    """The index token of ``term`` in a memory of length class ``low``: ``term~low``
    (unambiguous whatever the term holds: the class is what follows the last ``~``)."""
    return f"{term}~{low}"
