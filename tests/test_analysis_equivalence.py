"""The text analysis makes exactly the terms it made before its speed-ups (issue 15):
``adk_sqlstore.search.analysis`` against the frozen copy in
``tests/analysis_reference.py``, term for term and in order, for memories
(``index_terms``) and queries (``query_terms``), over the LoCoMo conversations, the
cases of ``tests/test_search_text.py``, hand-picked edge cases and arbitrary Unicode.

A change that alters any term is not a speed-up: it is a new ``ANALYSIS_VERSION``
(memories must then be re-indexed), with a new reference copy.
"""

from __future__ import annotations

import json
import random
import unicodedata
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adk_sqlstore.search import analysis
from adk_sqlstore.search.text import MAX_INDEXED_CHARS, indexed_text

from . import analysis_reference as reference
from .conftest import examples, shared_data
from .test_search_text import FILLER, TABLE

# Languages whose choice changes the path a word takes: English (the default), a Latin
# language with its own stop words, no stemming at all, and those owning a script
# (Cyrillic, Arabic script with Persian's and Urdu's letters, Devanagari, Hebrew).
LANGUAGES = ["english", "german", "simple", "russian", "persian", "arabic", "hindi", "yiddish"]

EDGE_CASES = [
    "",
    " ",
    "\x00",
    "a",
    "I",
    "C",
    "I'm",
    "c++ c# C++ C#+ a++b",
    "e-mail E-Mail-Adresse self-care x-1 1-x",
    "jane.doe@example.com https://github.com/google/adk-python/issues/1234?q=a&b=c#x",
    "C:\\Users\\jane\\notes.txt /home/u/report.pdf ~/.bashrc %TEMP%",
    "v2.3.1 python3.12 18.17.0 1.2.3.4.5 .5 5. 1..2 3.x",
    "+1 (555) 014-2233, 555.014.2233, 555-0142, 5550142, (12) 3456 7890 +44 20 7946 0958",
    "10,000 1,250,000 1,00 12,345,67 ,123 1,234. 9,999,999,999",
    "RFC7231 iPhone15 45am r2d2 a94a8fe5 GPT-4o AT&T node.js XMLHttpRequest ABCdef",
    "CustomerOrderService snake_case_name __init__ _private __ _",
    "ORD-4471 ord4471 A-1 1-2-3 12-34-56-78-90",
    "😀 🇯🇵🇫🇷 👍🏽 👩\u200d💻 🎉🎉 ©® ™ #️⃣ 1️⃣",
    "soft\u00adware co\u2060operate می\u200cخواهم \ufeffbom \u200b",
    "Ｆｕｌｌ ｗｉｄｔｈ ①②③ ﬁ ﬀ ㎏ ½ x²",
    unicodedata.normalize("NFD", "Crème brûlée Café Müller Ærø Łódź İstanbul"),
    "私はPythonでADKを使っています 我用Python写代码 ㇰ ｶﾀｶﾅ ー",
    "ฉันชอบเล่นแบดมินตันทุกวันอาทิตย์ ສະບາຍດີ ខ្ញុំចូលចិត្តកាហ្វេ ကော်ဖီ",
    "Зимой я читаю книги Йод й Καλημέρα κόσμε Բարև Երևան",
    "ذهبت إلى المكتبة مَكْتَبَة كتاب کتاب پدر ٹیکسی اردو",
    "मुझे क्रिकेट खेलना पसंद है தமிழ் אני אוהב שוקולד",
    "٣٫١٤ ١٢٣٤٥٦٧ ۱۲۳ १२३४ 𝟏𝟐𝟑 ⅫⅣ",
    "tab\tnew\nline\rreturn\x0bvt\x0cff\x1cfs\x1f\x7f\x85nel\u2028ls",
    "a" * 300 + " " + "b." * 200 + " " + "9" * 300,
    "Die Bücher sind teuer Fußball FUSSBALL ß ẞ",
    "'quoted' \"double\" (paren) [bracket] {brace} <angle> `tick` ^caret |pipe| !bang; semi,",
    "$1,250,000 €10,000 50% a=b ?q &amp; @user #tag ~tilde",
]


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _locomo_texts() -> list[str]:
    """Every string of the LoCoMo conversations (turns, captions, image URLs, dates,
    event summaries, questions and answers), and each turn as it is indexed (with its
    speaker); read from ../shared/data, never copied here."""
    texts: list[str] = []
    for path in sorted(shared_data("locomo").glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        texts.extend(_strings(data))
        for key, value in data.items():
            if key.startswith("session_") and isinstance(value, list):
                texts.extend(indexed_text(turn["speaker"], turn["text"]) for turn in value)
    return texts


def _mismatches(texts: list[str], language: str) -> Iterator[tuple[str, str]]:
    """(kind, text) for each text whose terms differ from the reference's."""
    new, old = analysis.Analyzer(language), reference.Analyzer(language)
    for text in texts:
        if new.index_terms(text) != old.index_terms(text):
            yield "index", text
        if new.query_terms(text) != old.query_terms(text):
            yield "query", text


def test_the_reference_is_the_analysis_of_this_version() -> None:
    """Same version, languages and limits: the copy is of the pipeline that made the
    stored terms."""
    assert reference.ANALYSIS_VERSION == analysis.ANALYSIS_VERSION
    assert reference.LANGUAGES == analysis.LANGUAGES
    assert (reference.MAX_TERM_CHARS, reference.MAX_TERMS_BYTES) == (
        analysis.MAX_TERM_CHARS,
        analysis.MAX_TERMS_BYTES,
    )
    assert analysis.Analyzer("german").signature == reference.Analyzer("german").signature


@pytest.mark.parametrize("language", ["english", "german", "simple"])  # its words are Latin
def test_locomo_gives_the_same_terms(language: str) -> None:
    texts = _locomo_texts()
    assert len(texts) > 10_000
    assert list(_mismatches(texts, language)) == []


def test_the_search_text_table_gives_the_same_terms_in_every_language() -> None:
    texts = [t for stored, query, _, _ in TABLE for t in (stored, query)] + [FILLER]
    for language in analysis.LANGUAGES:
        assert list(_mismatches(texts, language)) == [], language


@pytest.mark.parametrize("language", LANGUAGES)
def test_edge_cases_give_the_same_terms(language: str) -> None:
    texts = EDGE_CASES + [t.upper() for t in EDGE_CASES] + [" ".join(EDGE_CASES)]
    assert list(_mismatches(texts, language)) == []


def test_texts_past_the_terms_limit_are_cut_at_the_same_term() -> None:
    """Texts whose terms pass MAX_TERMS_BYTES (CJK bigrams, long identifiers): the
    same terms up to the same one."""
    rng = random.Random(15)
    han = "".join(chr(rng.randrange(0x4E00, 0x9FFF)) for _ in range(MAX_INDEXED_CHARS))
    dotted = " ".join(".".join(f"w{rng.randrange(10**6)}" for _ in range(12)) for _ in range(1_400))
    new, old = analysis.analyzer(), reference.analyzer()
    for text in (han, dotted[:MAX_INDEXED_CHARS], "x" + han[: MAX_INDEXED_CHARS // 2]):
        terms = new.index_terms(text)
        assert sum(len(t.encode()) + 8 for t in terms) <= analysis.MAX_TERMS_BYTES
        assert terms == old.index_terms(text)
        assert new.query_terms(text) == old.query_terms(text)


def test_a_full_chunk_cache_changes_no_term(monkeypatch: pytest.MonkeyPatch) -> None:
    """An analyzer that remembers only a few chunks forgets and recomputes them: the
    same terms."""
    monkeypatch.setattr(analysis, "_CACHED_CHUNKS", 3)
    small = analysis.Analyzer()
    old = reference.Analyzer()
    texts = EDGE_CASES * 2
    assert [small.index_terms(t) for t in texts] == [old.index_terms(t) for t in texts]
    assert [small.query_terms(t) for t in texts] == [old.query_terms(t) for t in texts]


# -- arbitrary text -----------------------------------------------------------------------

ANY_CHARACTER = st.characters(codec=None, exclude_categories=())  # surrogates included
PIECES = st.sampled_from(
    [
        " ",
        "  ",
        "\n",
        ".",
        "-",
        ",",
        "@",
        "/",
        "\\",
        ":",
        "+",
        "#",
        "~",
        "%",
        "=",
        "?",
        "&",
        "_",
        "'",
        "(",
        ")",
        "+1 ",
        "(555) ",
        "014-2233",
        "1,000",
        "3.12",
        "v2",
        "the",
        "and",
        "I",
        "a",
        "Running",
        "CamelCase",
        "ABC",
        "iPhone",
        "é",
        "ß",
        "İ",
        "\u0301",
        "\u00ad",
        "\u200d",
        "книги",
        "کتاب",
        "پ",
        "ٹ",
        "東京",
        "ー",
        "カタカナ",
        "한국",
        "ไทย",
        "🎉",
        "🇯🇵",
        "👍🏽",
        "١٢٣",
        "Ｆ",
        "ﬁ",
    ]
)
TEXTS = st.one_of(
    st.text(ANY_CHARACTER, max_size=120),
    st.text(st.characters(max_codepoint=127), max_size=120),  # the ASCII fast paths
    st.lists(
        st.one_of(PIECES, st.text(st.characters(max_codepoint=127), min_size=1, max_size=8)),
        max_size=40,
    ).map("".join),
)


@settings(
    max_examples=examples(1_500),
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(text=TEXTS, language=st.sampled_from(LANGUAGES))
def test_arbitrary_text_gives_the_same_terms(text: str, language: str) -> None:
    new, old = analysis.analyzer(language), reference.analyzer(language)
    assert new.index_terms(text) == old.index_terms(text)
    assert new.query_terms(text) == old.query_terms(text)
