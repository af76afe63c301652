"""Text analysis for memory search: one pipeline, in Python, for what is indexed and
for the query, on every backend.

Both backends store the terms made here (space-separated, in the ``terms`` column):
PostgreSQL turns them into a ``tsvector`` with ``array_to_tsvector`` (no parser, no
dictionary of its own), SQLite's FTS5 splits them at spaces only (its ``ascii``
tokenizer with every connector character a token character). A query is analysed by
the same :class:`Analyzer`, so both backends see identical terms and give identical
answers.

The steps, for each memory and each query:

1. **Unicode normalisation**: NFKC (composed and decomposed text index alike;
   full-width forms and ligatures become plain letters), invisible format characters
   removed (Unicode's default-ignorable code points: zero-width joiners, soft
   hyphens, variation selectors; ``soft\\u00adware`` is ``software``, Persian words
   match with or without their zero-width non-joiner), then case folding
   (``ß`` -> ``ss``).
2. **Accent folding** in Latin, Greek, Cyrillic, Arabic and Hebrew words: combining
   marks are dropped (``café`` -> ``cafe``, Arabic harakat, Hebrew niqqud; Cyrillic
   ``й`` keeps its breve), and a few letters without a decomposition fold to their
   base (``ø``, ``æ``, ``ł``, ...). Scripts whose marks are letters (Devanagari, Thai,
   ...) keep them. The stored content is never changed: only the index terms are.
3. **Identifiers**: a run of word characters joined by ``. @ / \\ : - _ + # ~ % = ? &``
   (an email, URL, path, version, ``ORD-4471``, ``snake_case_name``) is indexed whole,
   then by its segments between ``/ \\ @ : ? & =`` (``example.com``, ``report.pdf``),
   then by its words (``jane``, ``doe``, ``example``, ``com``), then the parts of a
   word in mixed case (``CamelCase`` -> ``camel``, ``case``) or of letters then
   digits or the reverse (``RFC7231`` -> ``rfc``, ``7231``; not ``a94a8fe5``). A
   dotted number inside a chunk is a term with its prefixes (``v2.3.1`` -> ``2.3.1``,
   ``2.3``; ``python3.12`` -> ``3.12``); digits written in groups give the digits
   alone (``555-0142`` -> ``5550142``; ``+1 (555) 014-2233`` -> ``15550142233`` and
   ``5550142233``, for numbers of 7 digits or more; ``10,000`` -> ``10000``); two
   parts joined by ``-``, ``.`` or ``&`` are also joined (``node.js`` -> ``nodejs``,
   ``AT&T`` -> ``att``, ``GPT-4o`` -> ``gpt4o``). Letters joined by hyphens are
   words, not an identifier: ``e-mail`` is indexed as ``e``, ``mail`` and the word
   ``email``. A query is analysed the same way, so a query for a part finds the
   whole, and a query for the whole matches every level: the exact whole term is
   rarer than its parts, so BM25 ranks exact whole matches first.
4. **Scripts without spaces** (Han, Hiragana, Katakana, Hangul, Thai, Lao, Khmer,
   Myanmar): each run of one script is a term (Japanese katakana loanwords, kanji
   compounds, Korean words with their particles); every two adjacent characters are a
   term (character bigrams: any query of two or more characters found inside a
   memory matches it), and each Han and Hangul character is a term in the index (a
   one-character query). Latin runs inside such text (``私はPythonを使う``) are words
   of their own.
5. **Stop words and stemming**, per word: the language's stop words and single
   lower-case letters ``a``-``z`` (the ``m`` of ``I'm``; ``C``, ``Vitamin D`` and
   ``c++`` stay) are dropped and the word is reduced to its Snowball stem. The
   language is the service's (``language="german"``; English by default) for
   Latin-script words; words in a
   script with one Snowball language use that language's stemmer whatever the
   setting (Cyrillic: Russian, Greek, Arabic, Armenian, Devanagari: Hindi, Tamil;
   Arabic-script words with the Persian letters پ چ ژ گ: Persian, with Urdu letters:
   none; set ``language="persian"`` for Persian text, whose words often have none of
   them; Arabic and Persian kaf and yeh fold to one letter), so
   that ``книги`` finds ``книга`` in an English app. ``"simple"`` turns stemming and
   stop words off. Identifiers (whole) and numbers are never stemmed.
6. **Emoji**: each pictographic character and each flag is a term (``🎉`` finds
   ``🎉🎉``; skin tones and zero-width joiners are not terms, so ``👍🏽`` finds any
   ``👍``).

Libraries, chosen by quality and install footprint:

- `regex <https://pypi.org/project/regex/>`_ (0.8 MB wheels on every platform) for
  Unicode word characters (the standard library's ``re`` leaves combining marks out
  of ``\\w``, which splits Hindi and vowelled Arabic words) and script properties;
- `PyStemmer <https://pypi.org/project/PyStemmer/>`_ (0.7 MB wheels), the Snowball
  project's own C stemmers for 35 languages, the algorithms PostgreSQL's ``english``
  configuration uses, about ten times faster than the pure-Python snowballstemmer;
- Snowball's stop word lists (the files PostgreSQL ships in ``tsearch_data``, BSD
  licence), in :mod:`adk_sqlstore.search` as data, for the 15 languages that have one.

No dictionary segmenter is shipped: PyICU (whose BreakIterator segments Chinese,
Japanese and the South-East Asian scripts) has no wheels and needs the system's ICU
and a compiler; jieba (19 MB, Chinese only) takes about a second to load its
dictionary in every process; PyThaiNLP pulls in much more. Character bigrams are what
Lucene's CJK analyzer and PostgreSQL's pg_bigm index; they find every substring of
two or more characters in every such script, which a segmenter alone does not (a
query that cuts a word differently from the segmenter finds nothing).
"""

from __future__ import annotations

import re
import threading
import unicodedata
from functools import cache, lru_cache
from importlib import resources

import regex
import Stemmer

from ..errors import ConfigurationError

__all__ = [
    "ANALYSIS_VERSION",
    "CHUNK",
    "DEFAULT_LANGUAGE",
    "LANGUAGES",
    "MAX_TERMS_BYTES",
    "MAX_TERM_CHARS",
    "UNSPACED_RUN",
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
_CACHED_FIRSTS = 10_000  # first characters whose script each analyzer remembers
_LONGEST_RUN_TERM = 16  # a longer run of one script is a clause, not a word

_FLAG = r"[\U0001F1E6-\U0001F1FF]{2}"  # a pair of regional indicators: a flag
_CHUNK = regex.compile(rf"[\w.@/\\:\-+#~%=?&]+|{_FLAG}|\p{{Extended_Pictographic}}")
# Format characters that change no word: zero-width (non-)joiners, soft hyphens, word
# joiners, variation selectors, ... (Unicode's Default_Ignorable_Code_Point; removed
# as NFKC_Casefold removes them, so "soft\u00adware" is "software").
_IGNORABLE = regex.compile(r"\p{Default_Ignorable_Code_Point}+")
# ASCII text: NFKC and the ignorable code points change none of it, a chunk is a run of
# the ASCII characters _CHUNK takes (letters, digits and the connectors; no ASCII
# character is pictographic), and a digit is 0-9 (tests/test_analysis_equivalence.py).
_ASCII_CHUNK_CHARS = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.@/\\:-+#~%=?&"
)
_ASCII_GAPS = str.maketrans({chr(c): " " for c in range(128) if chr(c) not in _ASCII_CHUNK_CHARS})
_ASCII_DIGIT = re.compile("[0-9]")
_DIGIT = regex.compile(r"\d")  # every match of _GROUPED_DIGITS and _THOUSANDS holds one
_EDGE = ".@/\\:-+#~%=?&_"
_SEGMENT_SPLIT = regex.compile(r"[/\\@:?&=]+")
_WORD = regex.compile(r"[^\W_]+")
_COMPOUND = regex.compile(r"[^\W\d_]+(?:-[^\W\d_]+)+")  # self-care: words, not an identifier
_PAIR = regex.compile(r"([^\W_]+)[-.&]([^\W_]+)")  # node.js, AT&T, GPT-4o: also joined
_THOUSANDS = regex.compile(r"(?<![\w.,])\d{1,3}(?:,\d{3})+(?![\d,])")  # 10,000: 10000
_SPACED_OR_UNSPACED = regex.compile(rf"[{_UNSPACED}]+|[^{_UNSPACED}]+")
_UNSPACED_RUN = regex.compile(rf"[{_UNSPACED}]")
CHUNK, UNSPACED_RUN = _CHUNK, _SPACED_OR_UNSPACED  # what a text's words are (highlight.py)
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
    data = resources.files(__package__).joinpath("stopwords", f"{language}.txt")
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
            # No cache of its own (the analyzers remember their chunks' terms): its
            # default one, of 10,000 words, purged whenever full, made each new word
            # about three times slower once a text had seen that many.
            stemmer = self.by_language[language] = Stemmer.Stemmer(language, 0)
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
        # The terms of chunks seen (mostly words), for memories and for queries; each
        # is emptied when full. Plain dicts: thread-safe for these single operations.
        self._chunks: tuple[dict[str, tuple[str, ...]], dict[str, tuple[str, ...]]] = ({}, {})
        self._firsts: dict[str, tuple[str, str] | None] = {}  # see _stemmer_for
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
        distinct = dict.fromkeys(self._terms(text, query=False))
        if 4 * sum(map(len, distinct)) + 8 * len(distinct) <= MAX_TERMS_BYTES:
            return list(distinct)  # surely within the limit (UTF-8: 4 bytes at most)
        terms: list[str] = []
        size = 0
        for term in distinct:
            size += len(term.encode()) + 8
            if size > MAX_TERMS_BYTES:
                break
            terms.append(term)
        return terms

    def query_terms(self, query: str) -> list[str]:
        """The distinct terms a query searches for, in order (no term: nothing is
        found). A one-character run of Han or Hangul searches for that character;
        longer runs search for their bigrams and runs."""
        return list(dict.fromkeys(self._terms(query, query=True)))

    # -- the pipeline -------------------------------------------------------------------

    def _terms(self, text: str, *, query: bool) -> list[str]:
        if text.isascii():  # most text: the same steps without regular expressions
            chunks = text.translate(_ASCII_GAPS).split()
            digits = _ASCII_DIGIT.search(text) is not None
        else:
            text = _IGNORABLE.sub("", unicodedata.normalize("NFKC", text))
            chunks = _CHUNK.findall(text)
            digits = _DIGIT.search(text) is not None
        out = self._chunks_terms(chunks, query)
        if digits:
            for match in _GROUPED_DIGITS.finditer(text):
                _grouped_digits(match, out)
            out.extend(m.replace(",", "") for m in _THOUSANDS.findall(text))
        return out

    def _chunks_terms(self, chunks: list[str], query: bool) -> list[str]:
        """The terms of each chunk, in order (memoised per analyzer: most chunks are
        common words)."""
        out: list[str] = []
        seen = self._chunks[query]
        for chunk in chunks:
            terms = seen.get(chunk)
            if terms is None:
                terms = self._chunk_terms(chunk, query)
                if len(seen) >= _CACHED_CHUNKS:
                    seen.clear()
                seen[chunk] = terms
            out += terms
        return out

    def _chunk_terms(self, chunk: str, query: bool) -> tuple[str, ...]:
        """The terms of one chunk."""
        if chunk.isascii() and chunk.isalpha() and (chunk.islower() or chunk.isupper()):
            out: list[str] = []  # a plain word: the one term _identifier would make
            self._stemmed(chunk, out)
            return tuple(out)
        if _PICTOGRAPH.fullmatch(chunk):
            return (chunk,)
        out = []
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
        first = word[:1]  # the script is the first character's
        if first in self._firsts:
            found = self._firsts[first]
        else:
            found = self._script_stemmer(first)
            if len(self._firsts) < _CACHED_FIRSTS:
                self._firsts[first] = found
        if found is None:
            return None
        script, language = found
        if script == "Arabic" and language == "arabic":
            if _URDU.search(word):
                return None
            if _PERSIAN.search(word) and "persian" in LANGUAGES:
                return "persian"
        return language

    def _script_stemmer(self, first: str) -> tuple[str, str] | None:
        """(script, stemmer language) of a word starting with ``first``, if any."""
        for script, language in self._script_stemmers.items():
            if _SCRIPT_OF[script].match(first):
                return script, language
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
