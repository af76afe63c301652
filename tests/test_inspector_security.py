"""The memory inspector's safety (adk_sqlstore.inspector), over HTTP through its ASGI
app on SQLite, PostgreSQL and MariaDB: the token and the sign-in cookie, read-only mode,
CSRF, hostile stored text shown inert, malformed input answered with 4xx pages, and one
user's pages showing nothing of another."""

from __future__ import annotations

import base64
import json
import re
import secrets
from urllib.parse import quote

import pytest

pytest.importorskip(
    "starlette", reason="needs the inspector extra (pip install 'adk-sqlstore[inspector]')"
)
pytest.importorskip("httpx", reason="the tests of the inspector extra talk HTTP through httpx")

import httpx

from adk_sqlstore import MemoryEntry, SqlMemoryService, SqlSessionService
from adk_sqlstore.inspector.security import CSRF_COOKIE, TOKEN_COOKIE

from .inspector_data import (
    ALICE,
    APP,
    BOB,
    HOSTILE_SESSION,
    MALLORY,
    MARKERS,
    asgi_get,
    client,
    csrf_of,
    inspector,
    post,
    seed_hostile,
    seed_small,
    seed_user,
    snapshot,
    user_url,
)
from .scripted_models import ScriptedModel, memory_with

TOKEN = "s3cret-token-of-the-tests"


def cursor(key: object) -> str:
    """A cursor as the inspector makes them, of any key."""
    return base64.urlsafe_b64encode(json.dumps(key).encode()).decode().rstrip("=")


def entry(text: str) -> MemoryEntry:
    return MemoryEntry(content={"parts": [{"text": text}]})


def no_traceback(page: httpx.Response) -> None:
    assert "Traceback" not in page.text and 'File "' not in page.text, page.text[:2000]


# -- the token -------------------------------------------------------------------------------


async def test_with_a_token_every_request_needs_it(sessions: SqlSessionService) -> None:
    await seed_small(sessions)
    app = inspector(sessions, token=TOKEN)
    async with client(app) as http:
        browser = await http.get(user_url(ALICE))
        assert browser.status_code == 303 and browser.headers["location"] == "/sign-in"
        for headers in ({"authorization": "Bearer wrong"}, {"authorization": "Basic eDp5"}):
            refused = await http.get(user_url(ALICE), headers=headers)
            assert refused.status_code == 401 and "needs its token" in refused.text
            assert "alice-orders" not in refused.text
        posted = await http.post(user_url(ALICE, "export"), headers={"authorization": "Bearer x"})
        assert posted.status_code == 401
        right = await http.get(user_url(ALICE), headers={"authorization": f"Bearer {TOKEN}"})
        assert right.status_code == 200 and "alice-orders" in right.text
    async with client(app) as http:
        csrf = await csrf_of(http, "/sign-in")
        wrong = await http.post("/sign-in", data={"csrf": csrf, "token": TOKEN + "x"})
        assert wrong.status_code == 401 and "not this inspector's token" in wrong.text
        assert TOKEN_COOKIE not in http.cookies
        assert (await http.get("/")).status_code == 303
        signed = await http.post("/sign-in", data={"csrf": csrf, "token": TOKEN})
        assert signed.status_code == 303 and http.cookies.get(TOKEN_COOKIE) == TOKEN
        assert "httponly" in signed.headers["set-cookie"].lower()
        page = await http.get(user_url(ALICE))
        assert page.status_code == 200 and "alice-orders" in page.text
    async with client(app, cookies={TOKEN_COOKIE: "forged"}) as http:
        assert (await http.get("/")).status_code == 303


# -- read-only mode and CSRF -----------------------------------------------------------------


def changes(memory_id: str, fact_id: str) -> list[tuple[str, dict[str, str]]]:
    """Every change's URL (and form), on user alice's memory and fact."""
    return [
        (user_url(ALICE, "memories", memory_id, "delete"), {}),
        (user_url(ALICE, "facts", fact_id, "delete"), {}),
        (user_url(ALICE, "facts", fact_id, "correct"), {"text": "The user likes nothing."}),
        (user_url(ALICE, "sessions", f"{ALICE}-orders", "generate"), {}),
        (user_url(ALICE, "export"), {}),
        (user_url(ALICE, "forget"), {"confirm": ALICE}),
    ]


async def test_read_only_refuses_every_change(sessions: SqlSessionService) -> None:
    await seed_small(sessions)
    memory = memory_with(sessions, ScriptedModel())
    (added,) = await memory.add_memory(app_name=APP, user_id=ALICE, memories=[entry("seats")])
    (fact,) = await memory.add_memory(
        app_name=APP, user_id=ALICE, memories=[entry("The user likes tea.")], consolidate=True
    )
    async with client(inspector(sessions)) as http:
        before = await snapshot(http, ALICE)
        assert "seats" in before[2] and "The user likes tea." in before[1]
        token = secrets.token_urlsafe(32)
        http.cookies.set(CSRF_COOKIE, token)
        for url, form in changes(added, fact):
            refused = await http.post(url, data={"csrf": token, **form})
            assert refused.status_code == 403 and "read-only" in refused.text, url
            assert refused.headers["content-type"].startswith("text/html")
        search = {"csrf": token, "q": "seats"}  # the search form posts: it changes nothing
        searched = await http.post(user_url(ALICE, "search"), data=search)
        assert searched.status_code == 200 and "<mark>seats</mark>" in searched.text
        forget = await http.get(user_url(ALICE, "forget"))
        assert "read-only" in forget.text and 'name="confirm"' not in forget.text
        assert "Delete" not in (await http.get(user_url(ALICE) + "?tab=memories")).text
        assert await snapshot(http, ALICE) == before


async def test_a_change_needs_the_csrf_token_of_this_site(sessions: SqlSessionService) -> None:
    await seed_small(sessions)
    memory = SqlMemoryService(sessions.store)
    (added,) = await memory.add_memory(
        app_name=APP, user_id=ALICE, memories=[entry("Prefers window seats.")]
    )
    tab = user_url(ALICE) + "?tab=memories"
    delete = user_url(ALICE, "memories", added, "delete")
    async with client(inspector(sessions, write=True)) as http:
        before = await snapshot(http, ALICE)
        token = await csrf_of(http, tab)
        assert http.cookies.get(CSRF_COOKIE) == token
        refused = [
            await http.post(delete),
            await http.post(delete, data={"confirm": "x"}),
            await http.post(delete, data={"csrf": token[:-1] + ("A" if token[-1] != "A" else "B")}),
            await http.post(delete, data={"csrf": token}, headers={"origin": "http://evil.test"}),
            await http.post(delete, data={"csrf": token}, headers={"origin": "null"}),
            await http.post(
                delete, data={"csrf": token}, headers={"referer": "http://evil.test/page"}
            ),
        ]
        async with client(inspector(sessions, write=True)) as stranger:  # no cookie
            refused.append(await stranger.post(delete, data={"csrf": token}))
        for response in refused:
            assert response.status_code == 403 and "CSRF" in response.text
        assert await snapshot(http, ALICE) == before
        done = await http.post(delete, data={"csrf": token}, headers={"origin": "http://127.0.0.1"})
        assert done.status_code == 303
        assert "Prefers window seats" not in (await http.get(tab)).text


# -- hostile text ----------------------------------------------------------------------------

DANGEROUS = ("<script>alert", "<img src=x", "\u202e")
JAVASCRIPT_LINK = re.compile(r"""(?:href|src|action)\s*=\s*["']?\s*javascript:""", re.I)


async def test_hostile_text_is_shown_inert_and_cut(sessions: SqlSessionService) -> None:
    seeded = await seed_hostile(sessions)
    base = user_url(MALLORY)
    session, fact = f"{base}/sessions/{quote(HOSTILE_SESSION, safe='')}", f"{base}/facts/"
    pages = [f"{base}?tab={t}" for t in ("sessions", "facts", "memories", "state", "failures")]
    pages += [f"{base}?tab=facts&history=1", fact + seeded["fact"], session, "/", f"/apps/{APP}"]
    pages += [f"{base}/search?q=hostile", f"/apps/{quote('<script>alert(1)')}"]
    shown = {}
    for write, urls in ((False, pages), (True, [pages[2], pages[6], session])):
        async with client(inspector(sessions, write=write)) as http:
            for url in urls:
                page = await http.get(url)
                assert page.status_code in (200, 404), url
                found = [d for d in DANGEROUS if d in page.text]
                assert not found and not JAVASCRIPT_LINK.search(page.text), (url, found)
                assert len(page.content) < 100_000, (url, len(page.content))
                assert "'unsafe-inline'" not in page.headers["content-security-policy"]
                assert "script-src 'self'" in page.headers["content-security-policy"]
                assert page.headers["x-content-type-options"] == "nosniff"
                if "search" in url or "facts" in url or "memories" in url or "sessions/" in url:
                    assert '<span class="ctl">[U+202E]</span>' in page.text, url
                    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text, url
                    assert "&lt;img src=x onerror=alert(1)&gt;" in page.text, url
                shown[url] = page.text
    assert "<textarea" in shown[pages[6]] and "[U+202E]evil.exe" in shown[pages[6]]
    assert "more characters" in shown[session] and "m" * 5000 not in shown[session]
    state = shown[f"{base}?tab=state"]
    assert "more characters" in state and "y" * 5000 not in state
    assert "\\u003cscript\\u003e" in state or "&lt;script&gt;" in state


# -- bad input ------------------------------------------------------------------------------


async def test_unknown_and_malformed_input_get_4xx_pages(sessions: SqlSessionService) -> None:
    await seed_small(sessions)
    app = inspector(sessions)
    long_id = "x" * 300
    expected = {
        "/apps/no-such-app": 404,
        f"/apps/{APP}/users/nobody": 404,
        user_url(ALICE, "sessions", "no-such-session"): 404,
        user_url(ALICE, "facts", "fact-00000000000000000000000000000000"): 404,
        user_url(ALICE, "artifacts", "~", "user:none", "0"): 404,
        "/no/such/page": 404,
        f"/apps/{long_id}": 400,
        f"/apps/{APP}/users/{long_id}": 400,
        user_url(ALICE, "sessions", long_id): 400,
        user_url(ALICE, "facts", long_id): 400,
        user_url(ALICE, "sessions", "a%00b"): 400,
        f"/apps/{APP}/users/a%00b?tab=facts": 400,
        "/?after=garbage": 400,
        f"/apps/{APP}?after=%25%25%25": 400,
        user_url(ALICE) + "?tab=sessions&after=WzEsMiwzXQ": 400,  # [1,2,3]
        user_url(ALICE) + "?tab=facts&after=WyJ4IiwieCJd": 400,  # ["x","x"]
        user_url(ALICE) + "?tab=memories&after=dHJ1ZQ": 400,  # true
        user_url(ALICE) + "?tab=artifacts&after=" + "A" * 5000: 400,
        user_url(ALICE, "sessions", "alice-orders") + "?at=bm90IGEgbnVtYmVy": 400,
        user_url(ALICE, "sessions", "alice-orders") + "?after=e30": 400,  # {}
        user_url(ALICE) + "?tab=secrets": 400,
        user_url(ALICE) + "?tab=memories&kind=everything": 400,
        user_url(ALICE, "search") + "?q=x&kind=everything": 400,
        user_url(ALICE, "search") + "?q=" + "a" * 60_000: 414,
        # cursors of values no database takes: 400, not a database error
        user_url(ALICE) + "?tab=memories&after=" + cursor(2**70): 400,
        user_url(ALICE) + "?tab=sessions&after=" + cursor([float("inf"), "x"]): 400,
        user_url(ALICE) + "?tab=sessions&after=" + cursor([float("nan"), "x"]): 400,
        user_url(ALICE) + "?tab=facts&after=" + cursor([1.5, "x\u0000"]): 400,
        user_url(ALICE) + "?tab=facts&after=" + cursor([1.5, "\ud800"]): 400,
        user_url(ALICE) + "?tab=artifacts&after=" + cursor(["", "x", 2**70]): 400,
        user_url(ALICE, "sessions", "alice-orders") + "?after=" + cursor(2**70): 400,
        user_url(ALICE, "sessions", "alice-orders") + "?at=" + cursor(-(2**64)): 400,
        # artifacts and filters the store cannot hold
        user_url(ALICE, "artifacts", "~", "user:a%00b", "0"): 400,
        user_url(ALICE, "artifacts", "alice-orders", "x" * 2000, "0"): 404,
        user_url(ALICE, "artifacts", "~", "user:x", str(2**70)): 404,
        f"/apps/{APP}?prefix=a%00b": 400,
        user_url(ALICE) + "?tab=facts&topic=a%00b": 200,
        user_url(ALICE, "search") + "?q=a%00b": 200,
        f"/apps/{APP}?prefix=" + "z" * 300: 200,
    }
    async with client(app) as http:
        for url, status in expected.items():
            page = await http.get(url)
            assert page.status_code == status, (url[:120], page.status_code, page.text[-600:])
            assert page.headers["content-type"].startswith("text/html"), url[:120]
            assert status == 200 or f"<h1>{status}</h1>" in page.text, url[:120]
            no_traceback(page)
    status, body = await asgi_get(app, user_url(ALICE, "search"), b"q=" + b"word+" * 20_000)
    assert status == 414 and b"Traceback" not in body and b"<h1>414</h1>" in body


# -- one user's pages show nothing of another ------------------------------------------------


async def test_a_users_pages_show_nothing_of_another_user(sessions: SqlSessionService) -> None:
    alice = await seed_user(sessions, ALICE)
    bob = await seed_user(sessions, BOB)
    async with client(inspector(sessions, write=True)) as http:
        bobs_page = (await http.get(user_url(BOB) + "?tab=memories")).text
        bobs_memories = set(re.findall(r"/memories/([^/]+)/delete", bobs_page))
        assert bob.added_memory in bobs_memories and len(bobs_memories) >= 5
        secrets_of_bob = {MARKERS[BOB], "bob-", *bob.facts.values(), *bobs_memories}
        tabs = ("sessions", "facts&history=1", "memories", "state", "artifacts", "failures")
        urls = [user_url(ALICE) + f"?tab={t}" for t in tabs]
        urls += [user_url(ALICE, "sessions", s) for s in alice.sessions]
        urls += [user_url(ALICE, "facts", f) for f in alice.facts.values()]
        for query, switches in (
            (MARKERS[BOB], ""),
            ("ORD-4471 绿茶 window seats shipped", "&kind=turns"),
            ("tea Lisbon Porto chess bob", "&history=1"),
            ("tea Lisbon Porto", "&kind=facts&history=1"),
        ):
            urls.append(user_url(ALICE, "search") + f"?q={quote(query)}{switches}")
        for url in urls:
            page = await http.get(url)
            assert page.status_code == 200, url
            shown = re.sub(r'name="q" value="[^"]*"', "", page.text)  # the query itself
            leaked = [s for s in secrets_of_bob if s in shown]
            assert not leaked, (url, leaked)
        before = await snapshot(http, BOB)
        foreign = [user_url(ALICE, "facts", f) for f in bob.facts.values()]
        foreign += [user_url(ALICE, "sessions", s) for s in bob.sessions]
        foreign += [user_url(ALICE, "artifacts", "bob-orders", "receipts~2Freceipt.bin", "0")]
        for url in foreign:
            assert (await http.get(url)).status_code == 404, url
        tab = user_url(ALICE) + "?tab=memories"
        for memory_id in bobs_memories:
            deleted = await post(http, user_url(ALICE, "memories", memory_id, "delete"), tab)
            assert deleted.status_code == 404, memory_id
        for fact_id in bob.facts.values():
            deleted = await post(http, user_url(ALICE, "facts", fact_id, "delete"), tab)
            assert deleted.status_code == 404, fact_id
            corrected = await post(
                http, user_url(ALICE, "facts", fact_id, "correct"), tab, text="hijacked"
            )
            assert corrected.status_code in (400, 404) and "hijacked" not in corrected.text
        generate = user_url(ALICE, "sessions", "bob-broken", "generate")
        assert (await post(http, generate, tab)).status_code in (404, 409)
        assert await snapshot(http, BOB) == before
    memory = SqlMemoryService(sessions.store)
    facts = await memory.list_facts(app_name=APP, user_id=BOB, history=True)
    assert {f.id: f.text for f in facts} == {i: t for t, i in bob.facts.items()}
