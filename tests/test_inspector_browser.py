"""The memory inspector in a real browser: Debian's headless Chromium, driven by
Playwright, over an SQLite store seeded through the public API (sessions with text,
state deltas and a tool call, memories, generated facts one of which a later session
contradicts, made by a scripted model), served by uvicorn on a free loopback port.

Each step checks what a person sees (visible text), with no console error, no script
error and no Content-Security-Policy violation on any page. The pages are saved as
screenshots in a temporary folder, or in the folder ``$ADK_SQLSTORE_SCREENSHOTS`` names:
``ADK_SQLSTORE_SCREENSHOTS=docs/images/inspector pytest tests/test_inspector_browser.py``
makes docs/inspector.md's pictures again (a plain run leaves the checkout alone).

Needs the ``inspector`` extra, the ``playwright`` package (the ``dev`` extra) and
``/usr/bin/chromium`` (``apt-get install chromium``; no browser is downloaded); they
skip without them, except that under ``CI=true`` a missing Chromium fails.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from adk_sqlstore import Event, MemoryEntry, SqlSessionService

from .chromium import headless_chromium
from .conftest import run_sync
from .scripted_models import ScriptedModel, memory_with

pytestmark = pytest.mark.browser

SCREENSHOTS = Path(
    os.environ.get("ADK_SQLSTORE_SCREENSHOTS")
    or Path(tempfile.gettempdir()) / f"adk-sqlstore-inspector-screenshots-{os.getpid()}"
)
WIDE = {"width": 1280, "height": 800}
NARROW = {"width": 390, "height": 844}

APP = "travel-agent"
ALICE = "alice"
BOB = "bob"
DAY = 86_400.0

PARIS = "The user lives in Paris."
PARIS_11 = "The user lives in Paris, in the 11th arrondissement."
BERLIN = "The user lives in Berlin."
VEGETARIAN = "The user is vegetarian."
AISLE = "The user prefers aisle seats."


def _needs() -> None:
    """Skip where the inspector extra is missing (a missing browser:
    :func:`tests.chromium.headless_chromium`)."""
    for module in ("starlette", "jinja2", "uvicorn", "multipart"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"the inspector extra is not installed ({module} is missing)")


# -- the store ----------------------------------------------------------------------------


def _extraction(prompt: dict[str, Any]) -> dict[str, Any]:
    """The scripted model's extraction: what the user says of home, diet and seats."""
    rules = {
        "I live in Paris.": (PARIS, "USER_PERSONAL_INFO"),
        "My flat is in the 11th arrondissement.": (PARIS_11, "USER_PERSONAL_INFO"),
        "I moved to Berlin last week.": (BERLIN, "USER_PERSONAL_INFO"),
        "I'm vegetarian, by the way.": (VEGETARIAN, "USER_PREFERENCES"),
        "Aisle seats, please, always.": (AISLE, "USER_PREFERENCES"),
    }
    facts = []
    for event in prompt["conversation"]:
        for said, (text, topic) in rules.items():
            if event["author"] == "user" and said in event["text"]:
                facts.append(
                    {"text": text, "topics": [topic], "event_ids": [event["id"]],
                     "valid_from": event["time"]}
                )  # fmt: skip
    return {"facts": facts}


def _consolidation(prompt: dict[str, Any]) -> dict[str, Any]:
    """The scripted model's consolidation: the flat refines where the user lives in
    Paris (an update), a move contradicts it (an invalidation), the rest is new."""
    decisions: list[dict[str, Any]] = []
    stored = {f["text"]: f["id"] for f in prompt["stored_facts"]}
    for new in prompt["new_facts"]:
        if new["text"] == PARIS_11 and PARIS in stored:
            decisions.append(
                {"fact": new["id"], "action": "update", "target": stored[PARIS],
                 "text": PARIS_11}
            )  # fmt: skip
            continue
        decisions.append({"fact": new["id"], "action": "create"})
        if new["text"] == BERLIN:
            decisions += [
                {"fact": new["id"], "action": "invalidate", "target": alias}
                for text, alias in stored.items()
                if text.startswith("The user lives in ")
            ]
    return {"decisions": decisions}


def _text(author: str, text: str, ts: float, **delta: Any) -> Event:
    role = "user" if author == "user" else "model"
    return Event(
        author=author, timestamp=ts, content={"role": role, "parts": [{"text": text}]},
        actions={"state_delta": delta},
    )  # fmt: skip


TRIP: list[tuple[str, str, dict[str, Any]]] = [  # (author, text, state delta): folded below
    ("user", "I live in Paris. Book me a train to Lyon for Friday.",
     {"destination": "Lyon", "user:home": "Paris"}),
    ("call", "search_trains", {"search": "Paris → Lyon"}),
    ("response", "search_trains", {"options": 2}),
    ("travel_agent", "Two trains to Lyon on Friday: I booked the 08:04 TGV, seat 42.",
     {"booking": "TGV 6601", "status": "booked"}),
    ("user", "Thanks! I'm vegetarian, by the way.", {"user:diet": "vegetarian"}),
    ("travel_agent", "Noted: a vegetarian meal is ordered for the train.",
     {"status": "meal ordered"}),
]  # fmt: skip


@dataclass
class Seeded:
    """What the store holds: the URL and the ids the test follows."""

    url: str
    trip: str = "trip-to-lyon"
    facts: dict[str, str] = field(default_factory=dict)  # text -> id (alice's, any state)

    def state_after(self, seq: int) -> dict[str, Any]:
        """The trip session's state after its event ``seq``, folded here."""
        state: dict[str, Any] = {}
        for _, _, delta in TRIP[:seq]:
            state.update(delta)
        return state


@contextmanager
def _days_ago(days: float) -> Iterator[None]:
    """The store's clock (``time.time``) set back ``days`` days meanwhile: what is
    written then (a session, its events, the facts made of it) is dated then."""
    real = time.time
    with mock.patch("time.time", side_effect=lambda: real() - days * DAY):
        yield


def _trip_event(n: int, author: str, text: str, delta: dict[str, Any]) -> Event:
    """The trip session's event ``n``: a text, or the tool call and its response."""
    ts = time.time() + 60 * n
    if author == "call":
        args = {"from": "Paris", "to": "Lyon", "day": "Friday"}
        part: dict[str, Any] = {"function_call": {"id": "call-1", "name": text, "args": args}}
        role = "model"
    elif author == "response":
        trains = {"trains": ["TGV 6601 08:04", "TGV 6605 10:04"]}
        part = {"function_response": {"id": "call-1", "name": text, "response": trains}}
        role = "user"
    else:
        return _text(author, text, ts, **delta)
    return Event(
        author="travel_agent", timestamp=ts, content={"role": role, "parts": [part]},
        actions={"state_delta": delta},
    )  # fmt: skip


async def _seed(url: str) -> Seeded:
    seeded = Seeded(url)
    async with SqlSessionService.from_url(url) as sessions:
        memory = memory_with(sessions, ScriptedModel(_extraction, _consolidation))

        async def said(user_id: str, session_id: str, *turns: tuple[str, str]) -> None:
            session = await sessions.create_session(
                app_name=APP, user_id=user_id, session_id=session_id
            )
            for n, (author, text) in enumerate(turns):
                await sessions.append_event(session, _text(author, text, time.time() + 30 * n))
            await memory.add_session_to_memory(session)

        with _days_ago(20):
            trip = await sessions.create_session(
                app_name=APP, user_id=ALICE, session_id=seeded.trip
            )
            for n, (author, text, delta) in enumerate(TRIP):
                await sessions.append_event(trip, _trip_event(n, author, text, delta))
            await memory.add_session_to_memory(trip)
        with _days_ago(12):
            await memory.add_memory(
                app_name=APP, user_id=ALICE,
                memories=[MemoryEntry(author="support", content={"parts": [{"text": (
                    "Alice's rail card: Carte Avantage, valid until December."
                )}]})],
            )  # fmt: skip
        with _days_ago(10):
            await said(ALICE, "flat-details", ("user", "My flat is in the 11th arrondissement."),
                       ("travel_agent", "Thanks, I noted it."))  # fmt: skip
        with _days_ago(2):
            await said(ALICE, "moving-day", ("user", "I moved to Berlin last week."),
                       ("travel_agent", "Welcome to Berlin!"))  # fmt: skip
        with _days_ago(1):
            await said(BOB, "first-trip", ("user", "Aisle seats, please, always."))

        facts = await memory.list_facts(app_name=APP, user_id=ALICE, history=True)
        seeded.facts = {f.text: f.id for f in facts}
    assert set(seeded.facts) == {PARIS_11, BERLIN, VEGETARIAN}, seeded.facts
    return seeded


@pytest.fixture
def seeded(sqlite_url: str) -> Seeded:
    return run_sync(_seed(sqlite_url))


# -- the server and the browser -----------------------------------------------------------


@contextmanager
def serving(app: Any) -> Iterator[str]:
    """``app`` served by uvicorn in a thread on a free loopback port: its base URL."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, log_level="warning", access_log=False, ws="none",
        lifespan="on",
    )  # fmt: skip
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started:
            assert thread.is_alive(), "the inspector's server stopped at start-up"
            assert time.monotonic() < deadline, "the inspector's server did not start in 30 s"
            time.sleep(0.02)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()
    assert not thread.is_alive(), "the inspector's server did not stop"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    _needs()
    with headless_chromium() as launched:
        yield launched


# Chromium reports a CSP violation on the console too; this makes sure of it, whatever
# the directive (the init script runs before the page's own, outside its CSP).
_REPORT_CSP = """
document.addEventListener("securitypolicyviolation", (e) => {
  console.error(`CSP violation: ${e.violatedDirective} blocked ${e.blockedURI || "inline"}`);
});
"""


class Person:
    """A browser tab, and everything the page complained of: console errors, script
    errors, CSP violations, failed requests, confirm() dialogs seen."""

    def __init__(self, browser: Any, base: str, viewport: dict[str, int] = WIDE) -> None:
        self.base = base
        self.context = browser.new_context(viewport=viewport)
        self.context.add_init_script(_REPORT_CSP)
        self.page = self.context.new_page()
        self.page.set_default_timeout(15_000)
        self.problems: list[str] = []
        self.dialogs: list[str] = []
        self.accept_dialogs = True
        self.allowed: int | None = None
        self.refusals: list[tuple[int, str]] = []  # (status, URL) of expected refusals
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda error: self.problems.append(f"page error: {error}"))
        self.page.on("requestfailed", lambda r: self.problems.append(f"failed: {r.url}"))
        self.page.on("response", self._response)
        self.page.on("dialog", self._dialog)

    @contextmanager
    def refused(self, status: int) -> Iterator[None]:
        """An answer of ``status`` is expected meanwhile (a refused form), not a problem."""
        self.allowed = status
        try:
            yield
        finally:
            self.allowed = None

    def _console(self, message: Any) -> None:
        where = message.location.get("url", "")
        for status, url in self.refusals:
            if where == url and f"responded with a status of {status} " in message.text:
                return
        if message.type in ("error", "warning") or "Content Security Policy" in message.text:
            self.problems.append(f"console {message.type}: {message.text} ({where})")

    def _response(self, response: Any) -> None:
        if response.status == self.allowed:
            self.refusals.append((response.status, response.url))
        elif response.status >= 400:
            method = response.request.method
            self.problems.append(f"HTTP {response.status}: {method} {response.url}")

    def _dialog(self, dialog: Any) -> None:
        self.dialogs.append(f"{dialog.type}: {dialog.message}")
        if self.accept_dialogs:
            dialog.accept()
        else:
            dialog.dismiss()

    def open(self, path: str = "/") -> None:
        response = self.page.goto(self.base + path)
        assert response is not None and response.ok, (path, response and response.status)
        self.check()

    def check(self) -> None:
        """No complaint so far, and the page is styled (its stylesheet loaded under
        the CSP)."""
        self.page.wait_for_load_state("load")
        assert self.problems == [], self.problems
        header = self.page.locator("header.top")
        assert header.evaluate("e => getComputedStyle(e).borderBottomStyle") == "solid"

    def sees(self, text: str, exact: bool = False) -> None:
        """``text`` is visible on the page."""
        found = self.page.get_by_text(text, exact=exact)
        assert found.count() > 0, f"{text!r} is not on {self.page.url}"
        assert found.first.is_visible(), f"{text!r} is not visible on {self.page.url}"

    def does_not_see(self, text: str) -> None:
        assert text not in self.page.locator("main").inner_text(), (text, self.page.url)

    def main(self) -> str:
        return str(self.page.locator("main").inner_text())

    def click(self, name: str, role: str = "link") -> None:
        self.page.get_by_role(role, name=name, exact=True).first.click()
        self.page.wait_for_load_state("load")
        self.check()

    def screenshot(self, name: str) -> None:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(SCREENSHOTS / name), full_page=True)

    def close(self) -> None:
        assert self.problems == [], self.problems
        self.context.close()


@contextmanager
def person(browser: Any, base: str, viewport: dict[str, int] = WIDE) -> Iterator[Person]:
    someone = Person(browser, base, viewport)
    try:
        yield someone
    finally:
        someone.close()


def _inspector(url: str, **options: Any) -> Any:
    _needs()
    from adk_sqlstore.inspector import create_app

    return create_app(url, **options)


# -- the tests ----------------------------------------------------------------------------


def test_a_person_reads_what_the_agent_remembers(browser: Any, seeded: Seeded) -> None:
    """Apps -> app -> user -> session (the state after an earlier event) -> a fact's
    history -> search, facts history toggled, read-only throughout."""
    with serving(_inspector(seeded.url)) as base, person(browser, base) as you:
        you.open("/")
        you.sees("Apps", exact=True)
        you.sees("read-only", exact=True)
        row = you.page.locator("table.list tbody tr", has_text=APP)
        cells = row.locator("td").all_inner_texts()
        assert cells[:5] == [APP, "2", "4", cells[3], "3"], cells  # 2 users, 4 sessions, 3 facts
        assert you.page.locator("svg.chart rect[height]:not([height='0'])").count() >= 3
        you.screenshot("apps.png")

        you.click(APP)
        you.sees("2 users · 4 sessions", exact=False)
        assert you.page.get_by_role("link", name=BOB, exact=True).is_visible()
        you.click(ALICE)

        # the user: sessions tab
        you.sees(f"User {ALICE}", exact=True)
        for session_id in (seeded.trip, "flat-details", "moving-day"):
            assert you.page.get_by_role("link", name=session_id).is_visible()
        assert "first-trip" not in you.main()  # bob's session is not alice's
        you.screenshot("user.png")

        # facts: current only, then with their history, then current only again
        you.click("facts")
        you.sees("Showing current facts")
        you.sees(BERLIN, exact=True)
        you.sees(VEGETARIAN, exact=True)
        you.does_not_see(PARIS_11)
        you.does_not_see(AISLE)  # bob's fact
        you.click("Show history too")
        you.sees("showing current and past facts")
        past = you.page.locator("ul.facts li.past", has_text=PARIS_11)
        assert past.is_visible()
        assert "line-through" in past.locator("a").evaluate(
            "e => getComputedStyle(e).textDecorationLine"
        )
        assert "not true since" in past.inner_text()
        you.screenshot("facts.png")
        you.click("Show current facts only")
        you.does_not_see(PARIS_11)
        you.sees(BERLIN, exact=True)

        # a session: its timeline, and its state after an earlier event
        you.click("sessions")
        you.click(seeded.trip)
        you.sees(f"Session {seeded.trip}", exact=True)
        you.sees("6 events", exact=False)
        events = you.page.locator("section.events ol.timeline > li")
        assert events.count() == len(TRIP)
        call = events.nth(1).inner_text()
        assert "search_trains" in call and '"to": "Lyon"' in call, call
        assert "TGV 6605 10:04" in events.nth(2).inner_text()
        assert "I booked the 08:04 TGV" in events.nth(3).inner_text()
        you.sees("State now", exact=True)  # the stored state, the fold of every delta
        assert _state_shown(you) == seeded.state_after(len(TRIP))

        events.nth(2).get_by_role("link", name="state after this event").click()
        you.page.wait_for_load_state("load")
        you.check()
        you.sees("State after event #3", exact=True)
        assert _state_shown(you) == seeded.state_after(3)
        assert "booking" not in _state_shown(you)  # set by event 4
        assert "chosen" in (events.nth(2).get_attribute("class") or "")
        assert you.page.locator("aside ul.facts").inner_text() == VEGETARIAN
        you.screenshot("session.png")

        # a fact's history: created, updated (old and new text), contradicted
        you.page.locator("nav.crumbs").get_by_role("link", name=ALICE).click()
        you.check()
        you.click("facts")
        you.click("Show history too")
        you.click(PARIS_11)
        you.sees("Fact", exact=True)
        you.sees("no longer true", exact=False)
        you.sees("contradicted by", exact=False)
        timeline = you.page.locator("ol.timeline > li")
        assert [t.split(" ·")[0] for t in timeline.locator("p.head").all_inner_texts()] == [
            "create", "update", "invalidate",
        ]  # fmt: skip
        update = timeline.nth(1)
        assert update.locator("p.old").inner_text() == f"WAS {PARIS}"
        assert update.locator("p.new").inner_text() == f"NOW {PARIS_11}"
        assert "flat-details" in update.inner_text()
        assert "by fact" in timeline.nth(2).inner_text()
        assert you.page.locator("textarea").count() == 0  # read-only: no correction form
        assert you.page.get_by_role("button", name="Delete this fact").count() == 0
        you.screenshot("fact.png")
        you.click(seeded.facts[BERLIN])  # the fact that contradicted it
        you.sees(BERLIN, exact=True)
        you.sees("current", exact=True)

        # search, as the agent would: results with the matched words marked
        you.page.get_by_role("link", name=ALICE, exact=True).first.click()
        you.check()
        you.page.get_by_label("Search this user's memory").fill("train to Lyon")
        you.page.get_by_role("button", name="Search").click()
        you.page.wait_for_load_state("load")
        you.check()
        you.sees(f"Search {ALICE}'s memory", exact=True)
        results = you.page.locator("ol.results > li")
        assert results.count() >= 2
        first = results.first.inner_text()
        assert "Lyon" in first and "score" in first, first
        marked = {m.lower() for m in you.page.locator("ol.results mark").all_inner_texts()}
        assert {"lyon", "train"} <= marked | {m.rstrip("s") for m in marked}, marked
        assert "Berlin" not in you.main()
        you.screenshot("search.png")

        assert "Lyon" not in you.page.url  # the query is posted: never in a URL
        with you.page.expect_navigation():
            you.page.get_by_label("Kind").select_option("facts")  # submits by itself
        you.check()
        assert you.page.get_by_label("Query").input_value() == "train to Lyon"
        assert you.page.locator("ol.results > li.empty").count() == 1  # no fact of trains

        # read-only: forgetting is refused
        you.open(f"/apps/{APP}/users/{ALICE}/forget")
        you.sees("The inspector is read-only", exact=False)
        assert you.page.get_by_role("button", name="Forget this user").count() == 0


def _state_shown(you: Person) -> dict[str, Any]:
    """The session page's state table, key -> value (JSON decoded)."""
    rows = you.page.locator("aside table.kv tr")
    shown = {}
    for n in range(rows.count()):
        key = rows.nth(n).locator("th")
        if key.count():
            shown[key.inner_text()] = json.loads(rows.nth(n).locator("td").inner_text())
    return shown


def test_an_operator_corrects_deletes_and_forgets(
    browser: Any, seeded: Seeded, caplog: pytest.LogCaptureFixture
) -> None:
    """In write mode: correct a fact, delete one (confirm() first dismissed, then
    accepted), forget a user by typing their id; each change logged with the operator."""
    caplog.set_level(logging.INFO, logger="adk_sqlstore.inspector")
    app = _inspector(seeded.url, write=True, operator="ops-tester")
    with serving(app) as base, person(browser, base) as you:
        you.open(f"/apps/{APP}/users/{ALICE}?tab=facts")
        you.sees("write mode", exact=True)

        # correct a fact: an update revision by the operator
        you.click(VEGETARIAN)
        corrected = "The user is vegetarian and avoids mushrooms."
        you.page.locator("form.correct textarea").fill(corrected)
        you.click("Save correction", role="button")
        you.sees("corrected", exact=True)
        assert you.page.locator("blockquote.fact").inner_text() == corrected
        last = you.page.locator("ol.timeline > li").last
        assert "update" in last.inner_text() and "operator:ops-tester" in last.inner_text()
        assert last.locator("p.old").inner_text() == f"WAS {VEGETARIAN}"
        assert last.locator("p.new").inner_text() == f"NOW {corrected}"

        # delete a fact: Berlin, which contradicted Paris; a dismissed confirm() keeps it
        you.open(f"/apps/{APP}/users/{ALICE}/facts/{seeded.facts[BERLIN]}")
        you.accept_dialogs = False
        you.page.get_by_role("button", name="Delete this fact").click()
        assert you.dialogs == ["confirm: Delete this fact and its history?"]
        you.check()
        you.sees(BERLIN, exact=True)
        you.accept_dialogs = True
        you.click("Delete this fact", role="button")
        assert len(you.dialogs) == 2
        you.sees("deleted", exact=True)
        you.sees("Showing current facts")
        you.does_not_see(BERLIN)
        you.sees(PARIS_11, exact=True)  # current again: what contradicted it is gone
        you.sees(corrected, exact=True)

        # forget a user: the id must be typed
        you.open(f"/apps/{APP}/users/{BOB}")
        you.click("Forget this user…")
        you.sees(f"Forget user {BOB}", exact=True)
        you.screenshot("forget.png")
        you.page.get_by_label("Type the user's id to confirm").fill("bobby")
        with you.refused(400):
            you.click("Forget this user", role="button")
        you.sees("What you typed is not this user's id: nothing was deleted.")
        you.page.get_by_label("Type the user's id to confirm").fill(BOB)
        you.click("Forget this user", role="button")
        you.sees("forgotten", exact=True)
        assert you.page.get_by_role("link", name=ALICE, exact=True).is_visible()
        assert you.page.get_by_role("link", name=BOB, exact=True).count() == 0
        you.sees("1 users", exact=False)
    logged = [r.getMessage() for r in caplog.records if r.name == "adk_sqlstore.inspector"]
    assert len(logged) == 3, logged
    for line, (action, fact) in zip(
        logged,
        [("corrected fact", VEGETARIAN), ("deleted fact", BERLIN), ("forgot user", None)],
        strict=True,
    ):
        assert f"inspector: {action} by ops-tester at 20" in line, line
        if fact:
            assert seeded.facts[fact] in line and fact not in line, line  # ids, never text


def test_the_user_page_fits_a_phone(browser: Any, seeded: Seeded) -> None:
    """At 390 px wide, the user's page (its tabs), a session and a fact need no
    horizontal scrolling."""
    user = f"/apps/{APP}/users/{ALICE}"
    with serving(_inspector(seeded.url, write=True)) as base, person(browser, base, NARROW) as you:
        for path, heading in (
            (user, f"User {ALICE}"),
            (f"{user}?tab=facts&history=1", f"User {ALICE}"),
            (f"{user}?tab=memories", f"User {ALICE}"),
            (f"{user}/sessions/{seeded.trip}", f"Session {seeded.trip}"),
            (f"{user}/facts/{seeded.facts[PARIS_11]}", "Fact"),
        ):
            you.open(path)
            you.sees(heading, exact=True)
            width = you.page.evaluate("document.documentElement.scrollWidth")
            assert width <= NARROW["width"] + 2, (path, width)
