"""A frozen copy of the text analysis as it was before the ingestion work of issue 15
(``adk_sqlstore/search/analysis.py`` at commit 8fc62be), kept only for
``tests/test_analysis_equivalence.py``: the package's pipeline must give exactly the
terms this one gives, for every text, query and language. Do not change it (a change
of the terms the package makes is a new ``ANALYSIS_VERSION`` and a new copy here).
"""

from __future__ import annotations

import threading
import unicodedata
from functools import cache, lru_cache
from importlib import resources

import regex
import Stemmer

from adk_sqlstore.errors import ConfigurationError

__all__ = [
    "ANALYSIS_VERSION",
    "DEFAULT_LANGUAGE",
    "LANGUAGES",
    "MAX_TERMS_BYTES",
    "MAX_TERM_CHARS",
    "Analyzer",
    "analyzer",
    "fold",
    "stop_words",
]

ANALYSIS_VERSION = 1
"""Bumped whenever the terms made from a text change; rows analysed by an older
version (or another language) are re-indexed by ``adk-sqlstore memory reindex``."""

DEFAULT_LANGUAGE = "english"
LANGUAGES: tuple[str, ...] = (
    *sorted(a for a in Stemmer.algorithms() if a not in ("porter", "dutch_porter")),
    "simple",
)
"""Languages an :class:`Analyzer` takes: Snowball's, and ``"simple"`` (no stemming,
no stop words)."""

MAX_TERM_CHARS = 255
"""Longest term indexed; a longer word or identifier is indexed by its parts only."""
MAX_TERMS_BYTES = 600_000
"""Index terms of one memory, in UTF-8 bytes (within PostgreSQL's 1 MB ``tsvector``);
terms past it (of a text near :data:`~.text.MAX_INDEXED_CHARS`) are not indexed."""

# Scripts written without spaces between words, and those whose single characters
# are words or syllables (indexed alone too).
_UNSPACED = r"\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}\p{Thai}\p{Lao}\p{Khmer}\p{Myanmar}\u30fc"
_SCRIPT_RUN = regex.compile(
    r"[\p{Han}]+|[\p{Hiragana}]+|[\p{Katakana}\u30fc]+|[\p{Hangul}]+|[\p{Thai}]+"
    r"|[\p{Lao}]+|[\p{Khmer}]+|[\p{Myanmar}]+"
)
_SINGLE = regex.compile(r"[\p{Han}\p{Hangul}]")
_LETTERS_ALONE = frozenset("abcdefghijklmnopqrstuvwxyz")  # "I'm" -> m: no word of its own
# Arabic-script words: Persian letters take the Persian stemmer; Urdu's, none.
_PERSIAN = regex.compile(r"[\u067e\u0686\u0698\u06af]")  # pe, che, zhe, gaf
_URDU = regex.compile(r"[\u0679\u0688\u0691\u06ba\u06be\u06c1\u06c3\u06d2]")
_CACHED_CHUNKS = 50_000  # chunks (mostly words) whose terms each analyzer remembers
_LONGEST_RUN_TERM = 16  # a longer run of one script is a clause, not a word

_FLAG = r"[\U0001F1E6-\U0001F1FF]{2}"  # a pair of regional indicators: a flag
_CHUNK = regex.compile(rf"[\w.@/\\:\-+#~%=?&]+|{_FLAG}|\p{{Extended_Pictographic}}")
# Format characters that change no word: zero-width (non-)joiners, soft hyphens, word
# joiners, variation selectors, ... (Unicode's Default_Ignorable_Code_Point; removed
# as NFKC_Casefold removes them, so "soft\u00adware" is "software").
_IGNORABLE = regex.compile(r"\p{Default_Ignorable_Code_Point}+")
_EDGE = ".@/\\:-+#~%=?&_"
_SEGMENT_SPLIT = regex.compile(r"[/\\@:?&=]+")
_WORD = regex.compile(r"[^\W_]+")
_COMPOUND = regex.compile(r"[^\W\d_]+(?:-[^\W\d_]+)+")  # self-care: words, not an identifier
_PAIR = regex.compile(r"([^\W_]+)[-.&]([^\W_]+)")  # node.js, AT&T, GPT-4o: also joined
_THOUSANDS = regex.compile(r"(?<![\w.,])\d{1,3}(?:,\d{3})+(?![\d,])")  # 10,000: 10000
_SPACED_OR_UNSPACED = regex.compile(rf"[{_UNSPACED}]+|[^{_UNSPACED}]+")
_UNSPACED_RUN = regex.compile(rf"[{_UNSPACED}]")
_PARTS = regex.compile(
    r"\p{Lu}+(?=\p{Lu}[\p{Ll}\p{M}])|\p{Lu}?[\p{Ll}\p{M}]+|\p{Lu}+\p{M}*|\p{N}+"
    r"|[^\p{Lu}\p{Ll}\p{N}]+"
)
_VERSION = regex.compile(r"(?<![\d.])\d+(?:\.\d+)+(?!\d)")
_LETTERS_DIGITS = regex.compile(r"(\p{L}+)(\p{N}+)|(\p{N}+)(\p{L}+)")
# A phone number or another number written in groups: "+1 (555) 014-2233".
_GROUPED_DIGITS = regex.compile(
    r"(?<![\w.])(\+\d{1,3}[ .-]?)?(?:\(\d{2,4}\)[ .-]?)?\d{2,5}(?:[ .-]\d{2,5}){1,4}(?![\w])"
)
_DASHED_DIGITS = regex.compile(r"\d+(?:-\d+)+")
_PICTOGRAPH = regex.compile(rf"{_FLAG}|\p{{Extended_Pictographic}}")

# Accent folding: scripts whose combining marks are accents, and letters without a
# Unicode decomposition that fold like accented ones.
_FOLDED_SCRIPTS = regex.compile(r"[\p{Latin}\p{Greek}\p{Cyrillic}\p{Arabic}\p{Hebrew}]")
_CYRILLIC = regex.compile(r"\p{Cyrillic}")
_BREVE = "\u0306"
_LETTERS = str.maketrans(
    {"ø": "o", "đ": "d", "ł": "l", "ħ": "h", "ı": "i", "æ": "ae", "œ": "oe"}
    # Arabic-script letters written two ways: Persian kaf and yeh, alef maksura
    | {"\u06a9": "\u0643", "\u06cc": "\u064a", "\u0649": "\u064a"}
)

# The stemmer for a word by its script: Latin words take the service's language; a
# script with one Snowball language takes it whatever the setting.
_SCRIPT_STEMMERS = {
    "Cyrillic": "russian",
    "Greek": "greek",
    "Arabic": "arabic",
    "Armenian": "armenian",
    "Devanagari": "hindi",
    "Tamil": "tamil",
}
_LANGUAGE_SCRIPTS = {
    "russian": "Cyrillic",
    "serbian": "Cyrillic",
    "greek": "Greek",
    "arabic": "Arabic",
    "persian": "Arabic",
    "armenian": "Armenian",
    "hindi": "Devanagari",
    "nepali": "Devanagari",
    "tamil": "Tamil",
    "yiddish": "Hebrew",
}
_SCRIPT_OF = {s: regex.compile(rf"\p{{{s}}}") for s in ("Latin", *_SCRIPT_STEMMERS, "Hebrew")}


def fold(term: str) -> str:
    """A case-folded term with its accents folded (see the module docstring)."""
    term = term.casefold()
    if term.isascii():
        return term
    if _FOLDED_SCRIPTS.search(term) is None:
        return term
    out: list[str] = []
    base = ""
    for ch in unicodedata.normalize("NFD", term):
        if unicodedata.combining(ch) and _FOLDED_SCRIPTS.match(base):
            if ch == _BREVE and _CYRILLIC.match(base):
                out.append(ch)
            continue
        base = ch
        out.append(ch)
    return unicodedata.normalize("NFC", "".join(out)).translate(_LETTERS)


@cache
def stop_words(language: str) -> frozenset[str]:
    """The language's Snowball stop words, folded as index terms are (empty for a
    language without a list)."""
    data = resources.files("adk_sqlstore.search").joinpath("stopwords", f"{language}.txt")
    if not data.is_file():
        return frozenset()
    return frozenset(fold(w.strip()) for w in data.read_text("utf-8").split() if w.strip())


class _Stemmers(threading.local):
    """PyStemmer objects are not thread-safe: one set per thread."""

    def __init__(self) -> None:
        self.by_language: dict[str, Stemmer.Stemmer] = {}

    def stem(self, language: str, word: str) -> str:
        stemmer = self.by_language.get(language)
        if stemmer is None:
            stemmer = self.by_language[language] = Stemmer.Stemmer(language)
        return str(stemmer.stemWord(word))


_stemmers = _Stemmers()


class Analyzer:
    """The text-analysis pipeline for one language (see the module docstring).

    Args:
        language: a Snowball language (:data:`LANGUAGES`, in any case), or
            ``"simple"``.

    Raises:
        ConfigurationError: an unknown language.
    """

    def __init__(self, language: str = DEFAULT_LANGUAGE) -> None:
        language = language.strip().lower() if isinstance(language, str) else language
        if language not in LANGUAGES:
            raise ConfigurationError(
                f"unknown search language {language!r}; use one of: {', '.join(LANGUAGES)}"
            )
        self.language = language
        self.signature = f"{ANALYSIS_VERSION}:{language}"
        """Stored with each memory: the analysis its terms come from."""
        self._stop = stop_words(language) if language != "simple" else frozenset()
        self._chunk_terms = lru_cache(maxsize=_CACHED_CHUNKS)(self._chunk_terms)  # type: ignore[method-assign]
        own_script = _LANGUAGE_SCRIPTS.get(language, "Latin")
        self._script_stemmers = (
            {}
            if language == "simple"
            else {
                **_SCRIPT_STEMMERS,
                "Latin": language if own_script == "Latin" else DEFAULT_LANGUAGE,
                own_script: language,
            }
        )

    def index_terms(self, text: str) -> list[str]:
        """The distinct terms ``text`` is indexed under, in order of first appearance,
        at most :data:`MAX_TERMS_BYTES` of them."""
        terms: dict[str, None] = {}
        size = 0
        for term in self._terms(text, query=False):
            if term not in terms:
                size += len(term.encode()) + 8
                if size > MAX_TERMS_BYTES:
                    break
                terms[term] = None
        return list(terms)

    def query_terms(self, query: str) -> list[str]:
        """The distinct terms a query searches for, in order (no term: nothing is
        found). A one-character run of Han or Hangul searches for that character;
        longer runs search for their bigrams and runs."""
        return list(dict.fromkeys(self._terms(query, query=True)))

    # -- the pipeline -------------------------------------------------------------------

    def _terms(self, text: str, *, query: bool) -> list[str]:
        out: list[str] = []
        chunk_terms = self._chunk_terms
        text = _IGNORABLE.sub("", unicodedata.normalize("NFKC", text))
        for match in _CHUNK.finditer(text):
            out.extend(chunk_terms(match.group(), query))
        for match in _GROUPED_DIGITS.finditer(text):
            _grouped_digits(match, out)
        out.extend(m.replace(",", "") for m in _THOUSANDS.findall(text))
        return out

    def _chunk_terms(self, chunk: str, query: bool) -> tuple[str, ...]:
        """The terms of one chunk (memoised per analyzer: most chunks are common
        words)."""
        if _PICTOGRAPH.fullmatch(chunk):
            return (chunk,)
        out: list[str] = []
        chunk = _trim(chunk)
        if chunk:
            self._identifier(chunk, out, query=query)
        return tuple(out)

    def _identifier(self, chunk: str, out: list[str], *, query: bool) -> None:
        """Terms of one chunk: whole, segments, words (see the module docstring)."""
        words = _WORD.findall(chunk)
        if _COMPOUND.fullmatch(chunk):
            self._stemmed(chunk.replace("-", ""), out)  # e-mail: also email
        elif len(words) != 1 or words[0] != chunk:
            _whole(fold(chunk), out)
            segments = [s for s in map(_trim, _SEGMENT_SPLIT.split(chunk)) if s]
            if len(segments) > 1:
                for segment in segments:
                    if len(_WORD.findall(segment)) > 1:
                        _whole(fold(segment), out)
            for version in _VERSION.findall(chunk):
                _version(version, whole=version == chunk, out=out)
            pair = _PAIR.fullmatch(chunk)
            if pair and not (pair[1].isdigit() and pair[2].isdigit()):
                self._stemmed(pair[1] + pair[2], out)
            if _DASHED_DIGITS.fullmatch(chunk):
                _whole(chunk.replace("-", ""), out)
        for word in words:
            for run in _SPACED_OR_UNSPACED.findall(word):
                if _UNSPACED_RUN.match(run):
                    _unspaced(run, out, query=query)
                else:
                    self._word(run, out)

    def _word(self, word: str, out: list[str]) -> None:
        """A word of a spaced script, with its parts if it is in mixed case
        (``CamelCaseName``) or letters then digits or the reverse (``iPhone15``:
        ``iphone``, ``15``; not ``r2d2`` or a hex digest)."""
        self._stemmed(word, out)
        parts = _PARTS.findall(word) if not (word.islower() or word.isupper()) else []
        if len(parts) < 2:
            parts = []
        if split := _LETTERS_DIGITS.fullmatch(word):
            parts += [p for p in split.groups() if p]  # 45am, RFC7231: one boundary only
        for part in parts:
            self._stemmed(part, out)

    def _stemmed(self, word: str, out: list[str]) -> None:
        folded = fold(word)
        if folded in self._stop or len(folded) > MAX_TERM_CHARS or word in _LETTERS_ALONE:
            return
        if not folded.isdigit():
            language = self._stemmer_for(folded)
            if language is not None:
                folded = _stemmers.stem(language, folded)
        out.append(folded)

    def _stemmer_for(self, word: str) -> str | None:
        for script, language in self._script_stemmers.items():
            if _SCRIPT_OF[script].match(word):
                if script == "Arabic" and language == "arabic":
                    if _URDU.search(word):
                        return None
                    if _PERSIAN.search(word) and "persian" in LANGUAGES:
                        return "persian"
                return language
        return None


def _trim(chunk: str) -> str:
    """A chunk without connectors at its ends (keeping ``c++`` and ``c#``)."""
    core = chunk.strip(_EDGE)
    if not core:
        return ""
    tail = chunk[chunk.find(core) + len(core) :]
    if tail[:1] in ("+", "#") and core[-1:].isalpha():
        keep = len(tail) - len(tail.lstrip(tail[0]))
        core += tail[: min(keep, 2)]
    return core


def _whole(term: str, out: list[str]) -> None:
    if len(term) <= MAX_TERM_CHARS:
        out.append(term)


def _version(version: str, *, whole: bool, out: list[str]) -> None:
    """A dotted number inside a chunk (``2.3.1`` of ``v2.3.1``, unless it is the
    chunk) and its shorter prefixes (``2.3``)."""
    if not whole:
        _whole(version, out)
    numbers = version.split(".")
    for end in range(2, len(numbers)):
        out.append(".".join(numbers[:end]))


def _grouped_digits(match: regex.Match[str], out: list[str]) -> None:
    """Digits written in groups, joined (``5550142233`` of ``(555) 014-2233``), also
    without a ``+`` country code; only numbers of 7 digits or more."""
    digits = "".join(ch for ch in match.group() if ch.isdigit())
    if len(digits) >= 7:
        _whole(digits, out)
        if match.group(1):
            _whole(digits[sum(ch.isdigit() for ch in match.group(1)) :], out)


def _unspaced(run: str, out: list[str], *, query: bool) -> None:
    """Terms of a run of scripts without spaces (see the module docstring)."""
    for script_run in _SCRIPT_RUN.findall(run):
        if len(script_run) <= _LONGEST_RUN_TERM:
            out.append(script_run)
    out.extend(run[i : i + 2] for i in range(len(run) - 1))
    if not query or len(run) == 1:
        out.extend(ch for ch in run if _SINGLE.match(ch))


@lru_cache(maxsize=64)
def analyzer(language: str = DEFAULT_LANGUAGE) -> Analyzer:
    """The (shared, thread-safe) :class:`Analyzer` for ``language``.

    Raises:
        ConfigurationError: an unknown language.
    """
    return Analyzer(language)
