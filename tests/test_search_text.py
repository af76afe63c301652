"""Memory search across scripts, identifiers, accents and languages (issue 13), on an
SQLite file and PostgreSQL: the same text analysis indexes and queries on both
backends (``adk_sqlstore.search.analysis``), so both give the same answer to every
row of the table, with the same scores.
"""

from __future__ import annotations

import unicodedata
import warnings
from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import text
from sqlalchemy.engine import make_url

from adk_sqlstore import ConfigurationError, MemoryEntry, SqlMemoryService
from adk_sqlstore.search.analysis import analyzer

from .helpers import cli, texts
from .test_hostile import SETTINGS

APP = "search-text"
FILLER = "the weather today and lunch plans with friends"

# (stored text, query, found?, language). A row "not found" shares no term with the
# query: any query term may match, so a partial match is found (and ranked lower).
TABLE: list[tuple[str, str, bool, str]] = [
    # the table
    ("私はPythonを使う", "Python", True, "english"),
    ("我喜欢打羽毛球", "羽毛球", True, "english"),
    ("나는 주말마다 배드민턴을 쳐요", "배드민턴", True, "english"),
    ("ฉันชอบเล่นแบดมินตันทุกวันอาทิตย์", "แบดมินตัน", True, "english"),
    ("write to jane.doe@example.com", "example", True, "english"),
    ("see docs.example.org/guide/setup", "guide", True, "english"),
    ("saved /home/u/report.pdf", "report", True, "english"),
    ("upgraded to Python 3.12.1", "3.12", True, "english"),
    ("order ORD-4471 shipped", "4471", True, "english"),
    # identifiers: whole and by parts
    ("write to jane.doe@example.com", "jane.doe@example.com", True, "english"),
    ("write to jane.doe@example.com", "doe", True, "english"),
    ("write to jane.doe@example.com", "example.com", True, "english"),
    ("see docs.example.org/guide/setup", "docs.example.org", True, "english"),
    ("saved /home/u/report.pdf", "report.pdf", True, "english"),
    ("open C:\\Users\\jane\\notes.txt", "notes.txt", True, "english"),
    ("https://github.com/google/adk-python/issues/1234", "1234", True, "english"),
    ("https://github.com/google/adk-python/issues/1234", "adk-python", True, "english"),
    ("order ORD-4471 shipped", "ORD-4471", True, "english"),
    ("order ORD-4471 shipped", "4472", False, "english"),
    ("rename the user_account_id column", "account", True, "english"),
    ("rename the user_account_id column", "user_account_id", True, "english"),
    ("class CustomerOrderService", "order", True, "english"),
    ("class CustomerOrderService", "CustomerOrderService", True, "english"),
    ("node v18.17.0 is installed", "18.17", True, "english"),
    ("I write C++ and C# daily", "c++", True, "english"),
    ("call me on +1 (555) 010-4477", "010-4477", True, "english"),
    ("call me on +1 (555) 010-4477", "0104477", True, "english"),
    ("call me on +1 (555) 010-4477", "555", True, "english"),
    ("trip planning #travel", "travel", True, "english"),
    ("call +1 (555) 014-2233 after 6", "5550142233", True, "english"),
    ("call 555.014.2233", "555-014-2233", True, "english"),
    ("deployed v2.3.1 today", "2.3.1", True, "english"),
    ("running python3.12 here", "3.12", True, "english"),
    ("meeting at 10:45am", "10:45", True, "english"),
    ("see RFC 7231", "RFC7231", True, "english"),
    ("order ORD-4471 shipped", "ord4471", True, "english"),
    ("my favourite language is C", "C", True, "english"),
    ("take Vitamin D daily", "D", True, "english"),
    ("I bought an iPhone15", "iphone", True, "english"),
    ("built with node.js", "nodejs", True, "english"),
    ("switched from AT&T", "att", True, "english"),
    ("sold for $1,250,000", "1250000", True, "english"),
    # accents, case, Unicode forms
    ("Café au lait", "cafe", True, "english"),
    ("we met at the cafe", "café", True, "english"),
    ("Fußball am Sonntag", "Fussball", True, "english"),
    ("FUSSBALL", "fußball", True, "english"),
    ("Crème brûlée recipe", "creme brulee", True, "english"),
    ("İstanbul in spring", "istanbul", True, "english"),
    ("Łódź and Ærø", "lodz aero", True, "english"),
    ("ＰＹＴＨＯＮ full width", "python", True, "english"),
    (unicodedata.normalize("NFD", "Café Müller"), "café müller", True, "english"),
    ("Café Müller", unicodedata.normalize("NFD", "Café Müller"), True, "english"),
    (unicodedata.normalize("NFD", "プログラミングが好き"), "プログラミング", True, "english"),
    (unicodedata.normalize("NFD", "민수입니다"), "민수", True, "english"),
    # German, French, Spanish: stemming follows the language
    ("Die Bücher sind teuer", "Buch", True, "german"),
    ("Die Bücher sind teuer", "Buch", False, "english"),
    ("Die Bücher sind teuer", "bucher", True, "english"),
    ("Haustürschlüssel verloren", "Haustürschlüssel", True, "german"),
    ("Haustürschlüssel verloren", "Schlüssel", False, "german"),  # no decompounding
    ("E-Mail-Adresse geändert", "Adresse", True, "german"),
    ("Die Bücher sind teuer", "die sind", False, "german"),  # German stop words
    ("Die Bücher sind teuer", "die sind", True, "english"),  # not English ones
    ("I bought running shoes", "running", True, "german"),  # mixed languages: exact words
    ("les élèves étudient", "élève", True, "french"),
    ("les élèves étudient", "eleve", True, "french"),
    ("Los niños juegan al fútbol", "futbol niño", True, "spanish"),
    # other scripts
    ("Зимой я читаю книги", "книга", True, "english"),
    ("Мы живём в Москве", "Москва", True, "english"),
    ("Καλημέρα κόσμε", "καλημερα", True, "english"),
    ("ذهبت إلى المكتبة", "مكتبة", True, "english"),
    ("مَكْتَبَة كبيرة", "مكتبة", True, "english"),
    ("אני אוהב שוקולד", "שוקולד", True, "english"),
    ("كتاب جديد", "کتاب", True, "english"),  # Arabic and Persian kaf
    ("מה שלומך", "שוקולד", False, "english"),
    ("मुझे क्रिकेट खेलना पसंद है", "क्रिकेट", True, "english"),
    ("Բարև Երևան", "Երևան", True, "english"),
    # scripts without spaces; Latin inside them
    ("私の名前は太郎です", "太郎", True, "english"),
    ("机器学习很有趣", "机器学习", True, "english"),
    ("机器学习很有趣", "学", True, "english"),
    ("東京に住んでいます", "京都", False, "english"),
    ("私はPythonでADKを使っています", "adk", True, "english"),
    ("私はPythonでADKを使っています", "python", True, "english"),
    ("ສະບາຍດີ ເພື່ອນ", "ສະບາຍ", True, "english"),
    ("ខ្ញុំចូលចិត្តកាហ្វេ", "កាហ្វេ", True, "english"),
    ("ကျွန်တော် ကော်ဖီ ကြိုက်တယ်", "ကော်ဖီ", True, "english"),
    # inputs of ADK's own test_search_memory_non_latin (google/adk-python,
    # tests/unittests/memory/test_in_memory_memory_service.py)
    ("私の名前は太郎です", "天気", False, "english"),
    ("我喜欢机器学习", "天气预报", False, "english"),
    ("제 이름은 민수입니다", "민수입니다", True, "english"),
    ("Меня зовут Алексей", "Алексей", True, "english"),
    ("太郎 works at ABC Corp", "太郎", True, "english"),
    ("太郎 works at ABC Corp", "ABC", True, "english"),
    ("我用Python写代码", "python", True, "english"),
    ("私はPythonでADKを使っています", "使って", True, "english"),
    ("私はPythonでADKを使っています", "Java", False, "english"),
    ("I like to code in Python.", "thon", False, "english"),
    ("私はPythonでADKを使っています", "thon", False, "english"),
    (unicodedata.normalize("NFD", "私はCaféでADKを使っています"), "café", True, "english"),
    (unicodedata.normalize("NFD", "私はCaféでADKを使っています"), "Ruby", False, "english"),
    # invisible characters, flags
    ("soft\u00adware engineer", "software", True, "english"),
    ("co\u2060operate", "cooperate", True, "english"),
    ("من می\u200cخواهم بروم", "میخواهم", True, "english"),
    ("🇯🇵 trip in spring", "🇯🇵", True, "english"),
    ("I love 👩\u200d💻 coding", "\u200d\ufe0f", False, "english"),
    # emoji, stop words
    ("🎉🎂", "🎂", True, "english"),
    ("🎉🎂", "🍕", False, "english"),
    ("the weather was nice", "the and of", False, "english"),
]


@pytest.fixture
async def memory(db_url: str) -> AsyncIterator[SqlMemoryService]:
    async with SqlMemoryService.from_url(db_url) as svc:
        yield svc


async def _answers(db_url: str) -> list[list[tuple[str, float]]]:
    """Each row stored for a user of its own (with a filler memory) and searched: the
    texts and scores found."""
    answers = []
    languages = sorted({row[3] for row in TABLE})
    services = {lang: SqlMemoryService.from_url(db_url, language=lang) for lang in languages}
    try:
        for n, (stored, query, _, language) in enumerate(TABLE):
            memory, user = services[language], f"row{n}"
            await memory.add_memory(
                app_name=APP,
                user_id=user,
                memories=[
                    MemoryEntry(content={"parts": [{"text": stored}]}),
                    MemoryEntry(content={"parts": [{"text": FILLER}]}),
                ],
            )
            found = await memory.search_memory(app_name=APP, user_id=user, query=query)
            answers.append(
                [
                    (t, round(m.custom_metadata["score"], 9))
                    for t, m in zip(texts(found), found.memories, strict=True)
                ]
            )
    finally:
        for svc in services.values():
            await svc.close()
    return answers


async def test_every_row_of_the_table_is_answered_as_it_states(db_url: str) -> None:
    assert len(TABLE) >= 40
    answers = await _answers(db_url)
    wrong = [
        (stored, query, language, expected)
        for (stored, query, expected, language), found in zip(TABLE, answers, strict=True)
        if any(t == stored for t, _ in found) != expected
    ]
    assert wrong == []
    assert all(t != FILLER for found in answers for t, _ in found)


async def test_every_backend_gives_the_same_answers(
    sqlite_url: str, postgres_url: str, mysql_url: str
) -> None:
    """Every row: the same memories, in the same order, with the same BM25 scores, on
    SQLite, PostgreSQL and MySQL/MariaDB."""
    sqlite = await _answers(sqlite_url)
    assert sqlite == await _answers(postgres_url)
    assert sqlite == await _answers(mysql_url)


async def test_exact_whole_identifiers_rank_above_part_matches(db_url: str) -> None:
    memory = SqlMemoryService.from_url(db_url)
    async with memory:
        await memory.add_memory(
            app_name=APP,
            user_id="u",
            memories=[
                MemoryEntry(content={"parts": [{"text": text}]})
                for text in [
                    "jane wrote from her example account",
                    "write to jane.doe@example.com",
                    "doe and jane at example dot com",
                    "order ORD 4471 and ORD 9",
                    "order ORD-4471 shipped",
                    "Python 3.12.1 is out",
                    "Python 3.11.12 is out",
                ]
            ],
        )

        async def first(query: str) -> str:
            found = await memory.search_memory(app_name=APP, user_id="u", query=query)
            return texts(found)[0]

        assert await first("jane.doe@example.com") == "write to jane.doe@example.com"
        assert await first("ORD-4471") == "order ORD-4471 shipped"
        assert await first("3.12") == "Python 3.12.1 is out"


async def test_the_stored_text_is_returned_unchanged(db_url: str) -> None:
    stored = unicodedata.normalize("NFD", "Crème Brûlée at ＣＡＦÉ ORD-4471")
    async with SqlMemoryService.from_url(db_url) as memory:
        await memory.add_memory(
            app_name=APP, user_id="u", memories=[MemoryEntry(content={"parts": [{"text": stored}]})]
        )
        found = await memory.search_memory(app_name=APP, user_id="u", query="creme cafe")
    assert texts(found) == [stored]


async def test_an_unknown_language_is_a_configuration_error(db_url: str) -> None:
    with pytest.raises(ConfigurationError, match="unknown search language 'klingon'"):
        SqlMemoryService.from_url(db_url, language="klingon")
    with pytest.raises(ConfigurationError, match="klingon"):
        SqlMemoryService.from_url(db_url + ("&" if "?" in db_url else "?") + "language=klingon")


async def test_the_language_can_come_from_the_url(db_url: str) -> None:
    url = db_url + ("&" if "?" in db_url else "?") + "language=german"
    async with SqlMemoryService.from_url(url) as memory:
        assert memory.language == "german"
        await memory.add_memory(
            app_name=APP,
            user_id="u",
            memories=[MemoryEntry(content={"parts": [{"text": "Die Bücher sind teuer"}]})],
        )
        found = await memory.search_memory(app_name=APP, user_id="u", query="Buch")
    assert texts(found) == ["Die Bücher sind teuer"]


# -- re-indexing --------------------------------------------------------------------------


async def _terms(memory: SqlMemoryService) -> list[tuple[str, str, int]]:
    async with memory.store.transaction(write=False) as conn:
        rows = await conn.execute(
            text("SELECT terms, analysis, token_count FROM sqlstore_memories ORDER BY pk")
        )
        return [tuple(r) for r in rows.all()]


async def test_reindex_switches_the_language_and_is_idempotent(db_url: str) -> None:
    stored = ["Die Bücher sind teuer", "Wir spielen Fußball", "Neue Häuser"]
    async with SqlMemoryService.from_url(db_url) as english:
        for user in ("u1", "u2"):
            await english.add_memory(
                app_name=APP,
                user_id=user,
                memories=[MemoryEntry(content={"parts": [{"text": t}]}) for t in stored],
            )
        assert await english.count_to_reindex(language="german") == 6
        batches: list[int] = []
        done = await english.reindex(language="german", batch_size=4, on_batch=batches.append)
        assert (done, batches) == (6, [4, 2])
        assert await english.reindex(language="german") == 0
        assert await english.count_to_reindex(language="german") == 0
        rows = await _terms(english)
    german = analyzer("german")
    assert rows == [
        (" ".join(german.index_terms(t)), german.signature, len(german.index_terms(t)))
        for _ in ("u1", "u2")
        for t in stored
    ]
    async with SqlMemoryService.from_url(db_url, language="german") as memory:
        for user in ("u1", "u2"):
            found = await memory.search_memory(app_name=APP, user_id=user, query="Buch Haus")
            assert sorted(texts(found)) == ["Die Bücher sind teuer", "Neue Häuser"]


async def test_reindex_of_one_app_leaves_the_others(db_url: str) -> None:
    async with SqlMemoryService.from_url(db_url) as memory:
        for app in ("a1", "a2"):
            await memory.add_memory(
                app_name=app,
                user_id="u",
                memories=[MemoryEntry(content={"parts": [{"text": "Bücher"}]})],
            )
        assert await memory.reindex(language="german", app_name="a1") == 1
        assert await memory.count_to_reindex(language="german") == 1
        assert [a for _, a, _ in await _terms(memory)] == ["1:german", "1:english"]


def test_memory_reindex_on_the_command_line(tmp_path: Any) -> None:
    url = f"sqlite:///{tmp_path}/cli.db"
    cli("migrate", "--url", url)
    cli("memory", "search", "x", "--app", APP, "--user", "u", "--url", url)
    out = cli("memory", "reindex", "--language", "german", "--url", url)
    assert "re-indexed 0 memories for search language 'german'" in out
    out = cli("memory", "reindex", "--language", "klingon", "--url", url, code=1)
    assert "unknown search language 'klingon'" in out


# -- hostile text -------------------------------------------------------------------------


@SETTINGS
@given(stored=st.text(min_size=1, max_size=80), query=st.text(max_size=80))
async def test_any_text_is_found_by_itself_and_no_query_raises(
    memory: SqlMemoryService, stored: str, query: str
) -> None:
    """Arbitrary Unicode (any script, marks, controls, lone surrogates): storing never
    raises, a query never raises, and a memory is found by its own text whenever that
    text has a search term."""
    await memory.delete_memories(app_name=APP, user_id="h")
    await memory.add_memory(
        app_name=APP, user_id="h", memories=[MemoryEntry(content={"parts": [{"text": stored}]})]
    )
    await memory.search_memory(app_name=APP, user_id="h", query=query)
    found = await memory.search_memory(app_name=APP, user_id="h", query=stored)
    searchable = bool(analyzer().query_terms(stored.replace("\x00", " ")))
    assert len(found.memories) == (1 if searchable and stored.strip() else 0)


async def test_the_adk_memory_service_takes_the_language_from_its_uri(db_url: str) -> None:
    pytest.importorskip("google.adk")
    from adk_sqlstore.adk import SqlMemoryService as AdkMemoryService

    uri = "sqlstore+" + db_url + ("&" if "?" in db_url else "?") + "language=german"
    async with AdkMemoryService(uri) as memory:
        assert memory.core.language == memory.language == "german"
    async with AdkMemoryService(uri, language="french") as memory:
        assert memory.core.language == "french"


async def test_a_query_of_ten_thousand_characters_is_searched_by_its_first_terms(
    db_url: str,
) -> None:
    """10,000 Chinese characters are 10,000 bigrams: the first 256 distinct terms are
    looked up (``TERMS_LOOKED_UP``), so the memory holding the query's start is found."""
    han = [chr(c) for c in range(0x4E00, 0x4E00 + 5000)]
    query = "".join(han[(n * 7919) % 5000] for n in range(10_000))
    async with SqlMemoryService.from_url(db_url) as memory:
        await memory.add_memory(
            app_name=APP,
            user_id="u",
            memories=[
                MemoryEntry(content={"parts": [{"text": query[:40]}]}),
                MemoryEntry(content={"parts": [{"text": query[-40:]}]}),
            ],
        )
        found = await memory.search_memory(app_name=APP, user_id="u", query=query)
        assert texts(found) == [query[:40]]
        found = await memory.search_memory(app_name=APP, user_id="u", query="a.b/" * 2_500)
        assert texts(found) == []


async def test_a_memory_service_on_a_sessions_store_takes_the_urls_language(db_url: str) -> None:
    """``?language=`` is a memory option: a session service's URL may carry it (one URL
    for both services) and a memory service on its store uses it."""
    from adk_sqlstore import SqlSessionService

    url = db_url + ("&" if "?" in db_url else "?") + "language=german"
    async with SqlSessionService.from_url(url) as sessions:
        assert sessions.store.search_language == "german"
        assert SqlMemoryService(sessions.store).language == "german"
        assert SqlMemoryService(sessions.store, language="french").language == "french"
    async with SqlSessionService.from_url(db_url) as sessions:
        assert SqlMemoryService(sessions.store).language == "english"


async def _big_user_answers(url: str) -> list[list[tuple[str, float]]]:
    """A user with 2,600 memories (past PostgreSQL's single-read size), "coffee" in
    about 80% of them: searches mixing it with rarer words."""
    import random

    rng = random.Random(5)
    docs = [
        " ".join(["coffee"] * (rng.random() < 0.8) + [f"tok{rng.randrange(300)}", f"w{n}"])
        for n in range(2_600)
    ]
    answers = []
    async with SqlMemoryService.from_url(url) as memory:
        await memory.add_memory(
            app_name=APP,
            user_id="big",
            memories=[MemoryEntry(content={"parts": [{"text": d}]}) for d in docs],
        )
        for query in ["coffee tok7", "coffee", "tok7 tok8 coffee", "w5 coffee", "tok299"]:
            found = await memory.search_memory(app_name=APP, user_id="big", query=query)
            answers.append(
                [
                    (t, m.custom_metadata["score"])
                    for t, m in zip(texts(found), found.memories, strict=True)
                ]
            )
    return answers


async def test_a_big_user_gets_the_same_answers_on_every_backend(
    sqlite_url: str, postgres_url: str, mysql_url: str
) -> None:
    """Past 2,000 memories PostgreSQL and MySQL read candidates MaxScore-style: still
    the exact top 10 SQLite gives, common word included ("coffee tok7": the 8 memories
    with tok7, then 2 with coffee only)."""
    sqlite, postgres = await _big_user_answers(sqlite_url), await _big_user_answers(postgres_url)
    assert sqlite == postgres
    assert sqlite == await _big_user_answers(mysql_url)
    assert all(len(found) == 10 for found in sqlite)


async def _halfway_answers(url: str, n: int, df: int, total: int, dl: int) -> list[float]:
    """A user whose BM25 score for "zzq" times 1e9 is exactly halfway between two
    integers (found by a break-test): ``n`` memories, ``df`` of them holding "zzq"
    among ``dl`` terms, ``total`` terms in all."""
    import itertools
    import string

    fresh = ("qx" + "".join(p) for p in itertools.product(string.ascii_lowercase, repeat=3))
    docs = [" ".join(["zzq"] + [next(fresh) for _ in range(dl - 1)]) for _ in range(df)]
    rest, remaining = n - df, total - df * dl
    sizes = [remaining // rest + (i < remaining % rest) for i in range(rest)]
    docs += [" ".join(next(fresh) for _ in range(size)) for size in sizes]
    async with SqlMemoryService.from_url(url) as memory:
        await memory.add_memory(
            app_name=APP,
            user_id="half",
            memories=[MemoryEntry(content={"parts": [{"text": d}]}) for d in docs],
        )
        found = await memory.search_memory(app_name=APP, user_id="half", query="zzq")
    return [m.custom_metadata["score"] for m in found.memories]


@pytest.mark.parametrize(("n", "df", "total", "dl"), [(148, 1, 679, 8), (212, 2, 1161, 2)])
async def test_scores_halfway_between_two_roundings_round_alike(
    sqlite_url: str, postgres_url: str, mysql_url: str, n: int, df: int, total: int, dl: int
) -> None:
    sqlite = await _halfway_answers(sqlite_url, n, df, total, dl)
    assert sqlite == await _halfway_answers(postgres_url, n, df, total, dl)
    assert sqlite == await _halfway_answers(mysql_url, n, df, total, dl)
    assert len(sqlite) == df


async def test_a_search_in_another_language_than_the_index_warns_once(db_url: str) -> None:
    """A search that finds nothing because the app's memories are indexed for another
    language says so (once per app and service), naming the command to run."""
    from adk_sqlstore import SearchLanguageWarning

    async with SqlMemoryService.from_url(db_url, language="simple") as simple:
        await simple.add_memory(
            app_name=APP,
            user_id="u",
            memories=[MemoryEntry(content={"parts": [{"text": "I read many books"}]})],
        )
    async with SqlMemoryService.from_url(db_url, language="English") as english:
        assert english.language == "english"
        with pytest.warns(
            SearchLanguageWarning,
            match="indexed for search language 'simple'.*reindex --language english --app",
        ):
            assert (
                texts(await english.search_memory(app_name=APP, user_id="u", query="books")) == []
            )
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            await english.search_memory(app_name=APP, user_id="u", query="books")  # once
            await english.reindex()
            found = await english.search_memory(app_name=APP, user_id="u", query="books")
    assert texts(found) == ["I read many books"]


def test_migrate_with_a_language_reindexes_for_it(tmp_path: Any) -> None:
    url = f"sqlite:///{tmp_path}/m.db"
    cli("migrate", "--url", url)
    cli("memory", "search", "x", "--app", APP, "--user", "u", "--url", url)
    out = cli("migrate", "--url", url + "?language=german")
    assert "already at revision" in out and "for search language 'german'" in out
    fresh = f"sqlite:///{tmp_path}/never.db"
    out = cli("migrate", "--url", fresh + "?language=klingon", code=1)
    assert "unknown search language 'klingon'" in out
    assert not (tmp_path / "never.db").exists()  # refused before anything was created
    out = cli("memory", "reindex", "--app", "no-such-app", "--url", url)
    assert "none of app 'no-such-app' needed it" in out


@pytest.mark.mysql
async def test_a_mysql_database_of_another_default_charset_indexes_every_script(
    mysql_factory: Any,
) -> None:
    """A MySQL database created with ``latin1`` as its default character set (MariaDB's
    default before 11.6): the store's tables are ``utf8mb4`` whatever it is, and so are
    the terms its triggers split (found by a review: every non-ASCII term was stored as
    '?' and nothing in Cyrillic, CJK or Korean was found)."""
    from .conftest import _mysql_admin, run_sync

    url = mysql_factory.create(migrate=False)
    name = make_url(url).database
    run_sync(
        _mysql_admin(f"ALTER DATABASE `{name}` CHARACTER SET latin1 COLLATE latin1_swedish_ci")
    )
    said = "русский язык 中文 カタカナ 한국어 Þórr"
    async with SqlMemoryService.from_url(url, auto_migrate=True) as memory:
        await memory.add_memory(
            app_name=APP, user_id="u", memories=[MemoryEntry(content={"parts": [{"text": said}]})]
        )
        for query in ("русский", "中文", "カタカナ", "한국어", "Þórr"):
            found = await memory.search_memory(app_name=APP, user_id="u", query=query)
            assert texts(found) == [said], query
