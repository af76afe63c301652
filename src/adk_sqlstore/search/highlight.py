"""The words of a text that a query matched, found by the store's own analysis
(:mod:`.analysis`), for showing search results with their matches marked.

A text is cut into the chunks the analysis indexes (words, identifiers such as
``ORD-4471`` or ``snake_case``, emoji); a chunk is marked when one of its index terms
is a query term, so stemmed forms (``running`` for ``run``), folded case and accents
and an identifier's parts all mark the word they came from. Runs of scripts written
without spaces (Chinese, Japanese, Korean, Thai, ...) are searched by character
bigrams: there, the characters of each matched bigram (or matched single character)
are marked, not the whole run.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable

from .analysis import CHUNK, UNSPACED_RUN, Analyzer, fold

__all__ = ["highlight"]


def highlight(analyzer: Analyzer, text: str, terms: Iterable[str]) -> list[tuple[str, bool]]:
    """``text`` cut into pieces, each with whether a query term matched it; the pieces
    joined are ``text``. ``terms`` are the query's terms (``Analyzer.query_terms``)."""
    wanted = set(terms)
    marked = [False] * len(text)
    if wanted:
        for match in CHUNK.finditer(text):
            _mark_chunk(analyzer, match.group(), match.start(), wanted, marked)
    pieces: list[tuple[str, bool]] = []
    start = 0
    for i in range(1, len(text) + 1):
        if i == len(text) or marked[i] != marked[start]:
            pieces.append((text[start:i], marked[start]))
            start = i
    return pieces


def _mark_chunk(
    analyzer: Analyzer, chunk: str, offset: int, wanted: set[str], marked: list[bool]
) -> None:
    position = offset
    for run in UNSPACED_RUN.findall(chunk):
        if _is_unspaced(run):
            _mark_unspaced(run, position, wanted, marked)
        elif wanted.intersection(analyzer.index_terms(run)):
            core = run.strip(".@/\\:-+#~%=?&_")
            begin = position + run.find(core) if core else position
            for i in range(begin, begin + (len(core) or len(run))):
                marked[i] = True
        position += len(run)


def _is_unspaced(run: str) -> bool:
    return bool(run) and _unspaced_char(run[0])


def _unspaced_char(ch: str) -> bool:
    name = unicodedata.name(ch, "")
    return (
        name.startswith(
            ("CJK", "HIRAGANA", "KATAKANA", "HANGUL", "THAI", "LAO", "KHMER", "MYANMAR")
        )
        or ch == "\u30fc"
    )


def _mark_unspaced(run: str, position: int, wanted: set[str], marked: list[bool]) -> None:
    normal = unicodedata.normalize("NFKC", run)
    if len(normal) != len(run):  # half-width forms and the like: compare as written
        normal = run
    if fold(normal) in wanted:
        for i in range(position, position + len(run)):
            marked[i] = True
        return
    for i in range(len(run)):
        if normal[i : i + 2] in wanted and i + 1 < len(run):
            marked[position + i] = marked[position + i + 1] = True
        if normal[i] in wanted:
            marked[position + i] = True
