"""Text for memory: what an event says, the form it is indexed under (analysed into
terms by :mod:`.analysis`), and the user's scope token."""

from __future__ import annotations

import hashlib
import re
from typing import Any

__all__ = [
    "MAX_INDEXED_CHARS",
    "MAX_QUERY_CHARS",
    "indexed_text",
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
