"""The memory inspector's pages and changes (adk_sqlstore.inspector), over HTTP through
its ASGI app, on SQLite, PostgreSQL and MariaDB, with data stored through the public
API (tests/inspector_data.py): what every page says, paging by cursors, the state after
any event, search with its matches marked, the write actions, and the app mounted under
a prefix. Access, CSRF, escaping, bad input and isolation: test_inspector_security.py."""

from __future__ import annotations

import html
import io
import re
import zipfile
from urllib.parse import quote

import pytest

pytest.importorskip(
    "starlette", reason="needs the inspector extra (pip install 'adk-sqlstore[inspector]')"
)
pytest.importorskip("httpx", reason="the tests of the inspector extra talk HTTP through httpx")

from starlette.applications import Starlette
from starlette.routing import Mount

from adk_sqlstore import MemoryEntry, SqlMemoryService, SqlSessionService

from .inspector_data import (
    ALICE,
    APP,
    BOB,
    CJK,
    RECEIPT,
    Seeded,
    client,
    consolidation,
    create_sessions,
    extraction,
    inspector,
    long_session,
    many_users,
    post,
    seed_small,
    seed_user,
    snapshot,
    turn,
    user_url,
)
from .scripted_models import ScriptedModel, memory_with

LINK = re.compile(r'href="([^"]+)"')


def links(page: str) -> list[str]:
    return [html.unescape(href) for href in LINK.findall(page)]


def next_link(page: str) -> str | None:
    found = re.search(r'<a rel="next" href="([^"]+)"', page)
    return html.unescape(found.group(1)) if found else None


@pytest.fixture
async def alice(sessions: SqlSessionService) -> Seeded:
    return await seed_user(sessions, ALICE, app_state=True)


def fact_id(seeded: Seeded, words: str) -> str:
    (found,) = [i for text, i in seeded.facts.items() if words in text]
    return found


# -- the read-only pages -------------------------------------------------------------------


async def test_apps_and_an_apps_users_with_counts_and_the_chart(
    sessions: SqlSessionService, alice: Seeded
) -> None:
    async with client(inspector(sessions)) as http:
        apps = await http.get("/")
        assert apps.status_code == 200
        row = apps.text.split(f'href="/apps/{APP}"', 1)[1]
        counts = re.findall(r'<td class="n">([\d,]+)</td>', row)[:4]
        assert counts[:2] == ["1", "4"] and counts[3] == "2"  # users, sessions, _, facts
        assert '<svg class="chart"' in apps.text and apps.text.count("<rect ") == 30
        assert 'aria-label="9 events in the last 30 days"' in apps.text
        users = await http.get(f"/apps/{APP}")
        assert "1 users · 4 sessions" in users.text and "2 current facts" in users.text
        row = users.text.split(f'href="{user_url(ALICE)}"', 1)[1].split("</tr>", 1)[0]
        assert re.findall(r'<td class="n">([\d,]+)</td>', row)[::2] == ["4", "2"]


async def test_users_sessions_and_memories_are_paged_by_cursor(
    sessions: SqlSessionService,
) -> None:
    ids = await many_users(sessions, 54)
    await create_sessions(sessions, *(("u000", f"s{n:02d}") for n in range(52)))  # 53 in all
    notes = [MemoryEntry(content={"parts": [{"text": f"note {n}"}]}) for n in range(53)]  # 53 too
    await SqlMemoryService(sessions.store).add_memory(app_name=APP, user_id="u000", memories=notes)
    async with client(inspector(sessions)) as http:
        first = await http.get(f"/apps/{APP}")
        shown = re.findall(r'/users/(u\d+)"', first.text)
        assert shown == ids[:50]
        following = next_link(first.text)
        assert following is not None and "after=" in following
        second = await http.get(following)
        rest = re.findall(r'/users/(u\d+)"', second.text)
        assert rest == ids[50:] and not set(rest) & set(shown)
        assert next_link(second.text) is None
        found = await http.get(f"/apps/{APP}", params={"prefix": "u05"})
        assert re.findall(r'/users/(u\d+)"', found.text) == ["u050", "u051", "u052", "u053"]
        none = await http.get(f"/apps/{APP}", params={"prefix": "zz"})
        assert "No user whose id starts with that" in none.text
        for tab, pattern in (("sessions", r'/sessions/(s\d*)"'), ("memories", r">note (\d+)<")):
            pages: list[list[str]] = []
            url: str | None = user_url("u000") + f"?tab={tab}"
            while url:
                page = (await http.get(url)).text
                pages.append(re.findall(pattern, page))
                url = next_link(page)
            assert [len(p) for p in pages] == [50, 3], tab
            assert len({i for p in pages for i in p}) == 53, tab  # no duplicates


async def test_a_users_sessions_facts_history_and_a_facts_revisions(
    sessions: SqlSessionService, alice: Seeded
) -> None:
    async with client(inspector(sessions)) as http:
        page = await http.get(user_url(ALICE))  # the sessions tab
        assert "4 sessions" in page.text and "2 current facts" in page.text
        for session_id in alice.sessions:
            assert f'href="{user_url(ALICE, "sessions", session_id)}"' in page.text
        current = (await http.get(user_url(ALICE), params={"tab": "facts"})).text
        assert "jasmine tea" in current and "I live in Porto" in current
        assert "Lisbon" not in current and 'class="past"' not in current
        history = (await http.get(user_url(ALICE), params={"tab": "facts", "history": "1"})).text
        lisbon = history.split("I live in Lisbon", 1)[0].rsplit("<li", 1)[1]
        assert 'class="past"' in lisbon and "Porto" in history and "jasmine" in history
        assert "Show current facts only" in history
        topic = (await http.get(user_url(ALICE), params={"tab": "facts", "topic": "OTHER"})).text
        assert "No current fact." in topic and "jasmine" not in topic
        shown = (await http.get(user_url(ALICE, "facts", fact_id(alice, "jasmine")))).text
        revisions = shown.split("<h2>Revisions</h2>", 1)[1]
        create, update = revisions.split('<li class="action-')[1:]
        assert create.startswith("create") and "I like green tea, aardvark." in create
        assert f'href="{user_url(ALICE, "sessions", "alice-day1")}"' in create
        assert update.startswith("update") and "by scripted-model" in update
        was = update.split('class="old"', 1)[1].split("</p>", 1)[0]
        now = update.split('class="new"', 1)[1].split("</p>", 1)[0]
        assert "I like green tea" in was and "Actually jasmine tea" in now
        assert f'href="{user_url(ALICE, "sessions", "alice-day2")}"' in update
        (event,) = [h for h in links(update) if "event=" in h]
        started = (await http.get(event)).text
        assert "State after event #2" in started and "Actually jasmine tea" in started
        past = (await http.get(user_url(ALICE, "facts", fact_id(alice, "Lisbon")))).text
        assert "no longer true" in past and fact_id(alice, "Porto") in past
        assert '<blockquote class="fact past">' in past


async def test_a_users_memories_by_kind_state_failures_and_artifacts(
    sessions: SqlSessionService, alice: Seeded
) -> None:
    async with client(inspector(sessions)) as http:
        every = (await http.get(user_url(ALICE), params={"tab": "memories"})).text
        assert "Prefers window seats" in every and "The user said: I live in Porto" in every
        assert "user: Where is ORD-4471 of aardvark?" in every
        facts = (await http.get(user_url(ALICE), params={"tab": "memories", "kind": "facts"})).text
        assert "The user said: I live in Porto" in facts and "Prefers window seats" not in facts
        assert "user: Where is ORD-4471" not in facts
        turns = (await http.get(user_url(ALICE), params={"tab": "memories", "kind": "turns"})).text
        assert "Prefers window seats" in turns and "user: Where is ORD-4471" in turns
        assert "The user said:" not in turns
        state = (await http.get(user_url(ALICE), params={"tab": "state"})).text
        assert 'user:tier</th><td><code class="value">&#34;gold aardvark&#34;' in state
        assert 'app:banner</th><td><code class="value">&#34;spring sale&#34;' in state
        assert "cart" not in state and "temp:" not in state
        failures = (await http.get(user_url(ALICE), params={"tab": "failures"})).text
        assert f'href="{user_url(ALICE, "sessions", f"{ALICE}-broken")}"' in failures
        assert "not JSON" in failures
        tab = (await http.get(user_url(ALICE), params={"tab": "artifacts"})).text
        downloads = [h for h in links(tab) if "/artifacts/" in h]
        assert sorted(downloads) == [
            user_url(ALICE, "artifacts", "alice-orders", "receipts~2Freceipt.bin", "0"),
            user_url(ALICE, "artifacts", "~", "user%3Anotes.txt", "0"),
        ]
        for url in downloads:
            got = await http.get(url)
            assert got.status_code == 200 and got.content == RECEIPT + b"aardvark"
            assert got.headers["content-type"] == "application/octet-stream"
            assert got.headers["content-disposition"].startswith("attachment;")
        for missing in ("receipts~2Freceipt.bin/7", "receipt.bin/0", "receipts~2Fnone/0"):
            page = await http.get(user_url(ALICE, "artifacts", "alice-orders", missing))
            assert page.status_code == 404 and "No such artifact version." in page.text


async def test_a_session_page_pages_events_and_folds_the_state_after_any_event(
    sessions: SqlSessionService,
) -> None:
    after = await long_session(sessions, ALICE, 110)
    async with client(inspector(sessions)) as http:
        url: str | None = user_url(ALICE, "sessions", "long")
        seen: list[int] = []
        state_links: dict[int, str] = {}
        pages = 0
        while url is not None:
            page = (await http.get(url)).text
            pages += 1
            numbers = [int(n) for n in re.findall(r'<span class="seq">#(\d+)</span>', page)]
            assert len(numbers) == (50 if pages < 3 else 10)
            seen += numbers
            for seq, href in re.findall(r'#(\d+)</span>.*?<a href="([^"]+)">state after', page):
                state_links[int(seq)] = html.unescape(href)
            url = next_link(page)
        assert seen == list(range(1, 111)) and pages == 3
        for k in (1, 2, 50, 73, 110):
            page = (await http.get(state_links[k])).text
            assert f"State after event #{k}" in page
            table = page.split("<aside>", 1)[1].split("</table>", 1)[0]
            rows = dict(re.findall(r'row">([^<]+)</th><td><code class="value">(\d+)', table))
            assert rows == {key: str(value) for key, value in after[k].items()}
            assert "temp:step" not in table
        whole = (await http.get(user_url(ALICE, "sessions", "long"))).text
        assert "State now" in whole and "110 events" in whole  # the stored state, no fold
        table = whole.split("<aside>", 1)[1].split("</table>", 1)[0]
        rows = dict(re.findall(r'row">([^<]+)</th><td><code class="value">(\d+)', table))
        assert rows == {key: str(value) for key, value in after[110].items()}
        started = await http.get(user_url(ALICE, "sessions", "long"), params={"event": "e73"})
        starting = re.findall(r'<span class="seq">#(\d+)</span>', started.text)
        assert starting == [str(k) for k in range(73, 111)]
        assert (
            "State after event #73" in started.text and 'class="author-user chosen"' in started.text
        )
        later = dict(re.findall(r'#(\d+)</span>.*?<a href="([^"]+)">state after', started.text))
        page = (await http.get(html.unescape(later["90"]))).text
        assert "State after event #90" in page and '<span class="seq">#73</span>' in page
        for event, status in (("e999", 404), ("e\x001", 400), ("x" * 300, 400)):
            missing = await http.get(user_url(ALICE, "sessions", "long"), params={"event": event})
            assert missing.status_code == status, event


async def test_search_shows_scores_marks_matches_and_switches_kind_and_history(
    sessions: SqlSessionService, alice: Seeded
) -> None:
    async with client(inspector(sessions)) as http:
        search = user_url(ALICE, "search")
        found = (await http.get(search, params={"q": "ORD-4471 绿茶"})).text
        assert "<mark>ORD-4471</mark>" in found
        assert f"{CJK[:4]}<mark>绿茶</mark>" in found
        assert len(re.findall(r"score \d+\.\d{4}", found)) == 2
        facts = (await http.get(search, params={"q": "tea", "kind": "facts"})).text
        assert "The user said: Actually jasmine <mark>tea</mark>" in facts
        assert ">I like green" not in facts and ">fact</a>" in facts
        turns = (await http.get(search, params={"q": "tea", "kind": "turns"})).text
        assert ">I like green <mark>tea</mark>" in turns and "The user said" not in turns
        current = (await http.get(search, params={"q": "Lisbon", "kind": "facts"})).text
        assert "Nothing found." in current
        past = await http.get(search, params={"q": "Lisbon", "kind": "facts", "history": "1"})
        assert "I live in <mark>Lisbon</mark>" in past.text
        assert "zebrafinch" not in found + facts + turns + past.text


# -- the changes (write=True) ----------------------------------------------------------------


async def test_deleting_a_memory_and_a_fact(sessions: SqlSessionService, alice: Seeded) -> None:
    async with client(inspector(sessions, write=True)) as http:
        tab = user_url(ALICE) + "?tab=memories"
        done = await post(http, user_url(ALICE, "memories", alice.added_memory, "delete"), tab)
        assert done.status_code == 303 and "tab=memories" in done.headers["location"]
        shown = (await http.get(done.headers["location"])).text
        assert "deleted" in shown and "Prefers window seats" not in shown
        porto = fact_id(alice, "Porto")
        done = await post(http, user_url(ALICE, "facts", porto, "delete"), tab)
        assert done.status_code == 303
        assert (await http.get(user_url(ALICE, "facts", porto))).status_code == 404
        facts = (await http.get(user_url(ALICE), params={"tab": "facts", "history": "1"})).text
        assert "Porto" not in facts and "jasmine" in facts


async def test_correcting_a_fact_adds_a_revision_by_the_operator(
    sessions: SqlSessionService, alice: Seeded
) -> None:
    fact = fact_id(alice, "jasmine")
    async with client(inspector(sessions, write=True, operator="ann")) as http:
        page = user_url(ALICE, "facts", fact)
        text = "The user likes oolong tea."
        done = await post(http, page + "/correct", page, text=text)
        assert done.status_code == 303 and done.headers["location"].startswith(page)
        shown = (await http.get(page)).text
        assert f'<blockquote class="fact current">{text}</blockquote>' in shown
        last = shown.split('<li class="action-')[-1]
        assert last.startswith("update") and "by operator:ann" in last
        assert "Actually jasmine tea" in last.split('class="old"')[1] and text in last
        found = (await http.get(user_url(ALICE, "search"), params={"q": "oolong"})).text
        assert "<mark>oolong</mark>" in found
        past = user_url(ALICE, "facts", fact_id(alice, "Lisbon"))
        before = (await http.get(past)).text
        assert "Save correction" not in before  # a past fact is not corrected
        refused = await post(http, past + "/correct", page, text="The user lives in Rome.")
        assert refused.status_code == 400 and "Rome" not in (await http.get(past)).text
        empty = await post(http, page + "/correct", page, text="   ")
        assert empty.status_code == 400 and text in (await http.get(page)).text


async def test_forgetting_a_user_needs_the_typed_id(
    sessions: SqlSessionService, alice: Seeded
) -> None:
    await seed_small(sessions, BOB)
    async with client(inspector(sessions, write=True)) as http:
        before = await snapshot(http, ALICE)
        forget = user_url(ALICE, "forget")
        for typed in ("alice ", "ALICE", "bob", ""):
            wrong = await post(http, forget, forget, confirm=typed)
            assert wrong.status_code == 400 and "nothing was deleted" in wrong.text
        assert await snapshot(http, ALICE) == before
        done = await post(http, forget, forget, confirm=ALICE)
        assert done.status_code == 303 and done.headers["location"].startswith(f"/apps/{APP}")
        assert "forgotten" in (await http.get(done.headers["location"])).text
        gone = [user_url(ALICE), user_url(ALICE, "sessions", alice.orders)]
        gone += [user_url(ALICE, "facts", f) for f in alice.facts.values()]
        gone += [user_url(ALICE, "artifacts", "~", "user%3Anotes.txt", "0")]
        for url in gone:
            assert (await http.get(url)).status_code == 404, url
        assert "bob-orders" in (await http.get(user_url(BOB))).text
        assert "1 users" in (await http.get(f"/apps/{APP}")).text
    assert await sessions.get_user_state(app_name=APP, user_id=ALICE) == {}


async def test_export_is_a_zip_and_generation_without_a_generator_is_refused(
    sessions: SqlSessionService, alice: Seeded
) -> None:
    odd = "用户 ?#%"  # a user id no header can hold as it is
    await sessions.create_session(app_name=APP, user_id=odd, session_id="s1")
    async with client(inspector(sessions, write=True)) as http:
        for user in (ALICE, odd):
            quoted = quote(user, safe="")
            got = await post(http, user_url(quoted, "export"), user_url(quoted))
            assert got.status_code == 200 and got.headers["content-type"] == "application/zip"
            assert got.headers["content-disposition"].startswith("attachment;")
            names = zipfile.ZipFile(io.BytesIO(got.content)).namelist()
            assert any(n.endswith(".session.json") for n in names), names
        assert any(n.endswith("memories.json") for n in names) or user == odd, names
        session = user_url(ALICE, "sessions", f"{ALICE}-broken")
        assert "Run generation again" in (await http.get(session)).text
        refused = await post(http, session + "/generate", session)
        assert refused.status_code == 409 and "no generator" in refused.text
        assert "Traceback" not in refused.text
    memory = memory_with(sessions, ScriptedModel(extraction, consolidation))
    async with client(inspector(sessions, write=True, memory=memory)) as http:
        done = await post(http, session + "/generate", session)
        assert done.status_code == 303 and "generated" in done.headers["location"]
        failures = (await http.get(user_url(ALICE), params={"tab": "failures"})).text
        assert "No generation failure." in failures
        assert "I like chess" in (await http.get(user_url(ALICE) + "?tab=facts")).text


# -- mounted under a prefix ------------------------------------------------------------------


async def test_mounted_under_a_prefix_every_link_starts_with_it(
    sessions: SqlSessionService, alice: Seeded
) -> None:
    outer = Starlette(routes=[Mount("/inspector", app=inspector(sessions, write=True))])
    async with client(outer) as http:
        pages = ["/inspector/", f"/inspector/apps/{APP}", "/inspector" + user_url(ALICE)]
        pages += ["/inspector" + user_url(ALICE, "facts", fact_id(alice, "jasmine"))]
        pages += ["/inspector" + user_url(ALICE, "sessions", "alice-orders")]
        pages += ["/inspector" + user_url(ALICE) + f"?tab={t}" for t in ("facts", "memories")]
        for url in pages:
            page = await http.get(url)
            assert page.status_code == 200, url
            hrefs = links(page.text) + re.findall(r'(?:action|src)="([^"]+)"', page.text)
            assert hrefs and all(h.startswith("/inspector/") for h in hrefs), (url, hrefs)
        tab = "/inspector" + user_url(ALICE) + "?tab=memories"
        done = await post(
            http, "/inspector" + user_url(ALICE, "memories", alice.added_memory, "delete"), tab
        )
        assert done.status_code == 303 and done.headers["location"].startswith("/inspector/")
        assert (await http.get("/inspector/static/inspector.css")).status_code == 200
    guarded = Starlette(routes=[Mount("/inspector", app=inspector(sessions, token="t0ken"))])
    async with client(guarded) as http:
        first = await http.get("/inspector" + user_url(ALICE))
        assert first.status_code == 303 and first.headers["location"] == "/inspector/sign-in"
        signed = await post(http, "/inspector/sign-in", "/inspector/sign-in", token="t0ken")
        assert signed.status_code == 303 and signed.headers["location"] == "/inspector/"
        assert "Path=/inspector" in signed.headers["set-cookie"]
        assert "alice-orders" in (await http.get("/inspector" + user_url(ALICE))).text


async def test_ids_with_a_slash_or_a_tilde_have_pages_of_their_own(
    sessions: SqlSessionService,
) -> None:
    """The store takes ``/`` and ``~`` in ids; a server decodes ``%2F`` before routing,
    so the links write them as ``~2F`` and ``~7E``: every page of such a user, session
    and artifact is reached, and a session named ``~`` is not the user's own scope."""
    user, session_id = "team/alice~1", "trip/2026~a"
    session = await sessions.create_session(app_name=APP, user_id=user, session_id=session_id)
    await sessions.append_event(session, turn("user", "Lisbon in May", 1_760_000_000.0))
    await create_sessions(sessions, (user, "~"))
    async with client(inspector(sessions)) as http:
        app_page = await http.get(f"/apps/{APP}")
        (user_link,) = [u for u in links(app_page.text) if "/users/" in u]
        user_page = await http.get(user_link)
        assert user_page.status_code == 200 and "team/alice~1" in html.unescape(user_page.text)
        session_links = [u for u in links(user_page.text) if "/sessions/" in u]
        assert len(session_links) == 2
        pages = [await http.get(u) for u in session_links]
        assert all(p.status_code == 200 for p in pages)
        shown = " ".join(html.unescape(p.text) for p in pages)
        assert "Session trip/2026~a" in shown and "Session ~" in shown
        assert "Lisbon in May" in shown
