"""Text for memory: what an event says, the form it is indexed under (analysed into
terms by :mod:`.analysis`), and the user's scope token."""

from __future__ import annotations

import hashlib
import re
import unicodedata
from typing import Any

__all__ = [
    "LENGTH_CLASSES",
    "MAX_INDEXED_CHARS",
    "MAX_QUERY_CHARS",
    "classed",
    "clean_text",
    "indexed_text",
    "length_class",
    "normal_form",
    "search_scope",
    "text_hash",
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


def clean_text(text: str) -> str:
    """``text`` without NUL characters, its lone surrogates replaced by U+FFFD: text
    from a model or a caller as every backend can store it (PostgreSQL and MySQL
    refuse NUL; UTF-8 has no lone surrogates, which ``"\\ud83d"`` in JSON becomes)."""
    return valid_unicode(text.replace("\x00", ""))


_SPACE = re.compile(r"\s+")
_FINAL_STOPS = ".!。！．"


def normal_form(text: str) -> str:
    """The form two texts of one fact share: Unicode NFKC, case folded, runs of
    whitespace as one space, no leading or trailing space, no final full stop. Facts
    equal in it are one fact (compared by :func:`text_hash`, as mem0 hashes a
    memory's text)."""
    folded = unicodedata.normalize("NFKC", clean_text(text)).casefold()
    return _SPACE.sub(" ", folded).strip().rstrip(_FINAL_STOPS).strip()


def text_hash(text: str) -> str:
    """The SHA-256 (64 hex digits) of :func:`normal_form`."""
    return hashlib.sha256(normal_form(text).encode("utf-8")).hexdigest()


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
