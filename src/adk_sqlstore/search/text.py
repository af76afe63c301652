"""Text for memory: what an event says, the indexed form, and query terms.

PostgreSQL stems and drops stop words itself (the ``english`` text search
configuration); for SQLite's FTS5 (Porter stemmer) the stop words are dropped from
queries here, with the same list PostgreSQL uses (Snowball's English list), so both
backends treat a question such as "What sport do I like?" alike.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

__all__ = [
    "MAX_INDEXED_CHARS",
    "MAX_QUERY_CHARS",
    "STOP_WORDS",
    "indexed_text",
    "query_terms",
    "search_scope",
    "text_of",
    "token_count",
    "valid_unicode",
]

MAX_INDEXED_CHARS = 100_000
"""Longest text indexed per memory (the stored content is never cut)."""

MAX_QUERY_CHARS = 10_000
"""Longest query searched; the rest of a longer query is ignored."""

# Snowball's English stop words: PostgreSQL's tsearch_data/english.stop.
STOP_WORDS = frozenset(
    """i me my myself we our ours ourselves you your yours yourself yourselves he him his
    himself she her hers herself it its itself they them their theirs themselves what which
    who whom this that these those am is are was were be been being have has had having do
    does did doing a an the and but if or because as until while of at by for with about
    against between into through during before after above below to from up down in out on
    off over under again further then once here there when where why how all any both each
    few more most other some such no nor not only own same so than too very s t can will
    just don should now""".split()
)

_WORD = re.compile(r"\w+")
_SURROGATE = re.compile("[\ud800-\udfff]")


def valid_unicode(text: str) -> str:
    """``text`` with lone surrogates (not encodable as UTF-8) replaced by U+FFFD."""
    return _SURROGATE.sub("\ufffd", text)


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


def query_terms(query: str) -> list[str]:
    """Lower-cased words of ``query`` without stop words and duplicates, in order."""
    words = _WORD.findall(query[:MAX_QUERY_CHARS].lower())
    return list(dict.fromkeys(w for w in words if w not in STOP_WORDS))


def token_count(text: str) -> int:
    """The BM25 length of an indexed text: its distinct words, stop words left out
    (as PostgreSQL's ``length(tsvector)`` counts distinct lexemes)."""
    return len({w for w in _WORD.findall(text.lower()) if w not in STOP_WORDS})


def search_scope(app_name: str, user_id: str) -> str:
    """One token standing for ``(app_name, user_id)``, indexed with each memory so that
    SQLite's FTS5 finds a user's rows without scanning other users' postings."""
    digest = hashlib.sha256(f"{app_name}\x00{user_id}".encode()).hexdigest()[:32]
    return f"scope{digest}"
