"""The inspector's read-only pages: apps, an app's users, a user, a fact, a session,
search, and an artifact's bytes. Each reads one page of rows in one read
transaction (:mod:`adk_sqlstore.sql.inspection`)."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from ..generation.facts import fact_of, revision_of
from ..search.analysis import analyzer
from ..search.highlight import highlight
from ..sql import fact_runs
from ..sql import facts as fact_sql
from ..sql import inspection as sql
from ..sql import inspection_memories as memory_sql
from ..sql import sessions as session_sql
from ..sql.artifacts import ArtifactKey
from ..state import drop_temp, merge_state
from ..validation import check_identifier
from .rendering import (
    PAGE_SIZE,
    USER_SCOPE,
    decode_cursor,
    encode_cursor,
    path_ids,
    path_text,
    render,
)

if TYPE_CHECKING:
    from .app import Context

__all__ = [
    "MAX_QUERY_CHARS",
    "app_page",
    "apps_page",
    "artifact_download",
    "fact_page",
    "search_page",
    "session_page",
    "user_page",
]

MAX_QUERY_CHARS = 10_000
"""The longest search the page runs (what ``search_memory`` reads of a query)."""

USER_TABS = ("sessions", "facts", "memories", "state", "artifacts", "failures")
ACTIVITY_DAYS = 30
STATE_KEYS = 500  # state keys shown per scope


def _context(request: Request) -> Context:
    return request.state.context  # type: ignore[no-any-return]


def _chart(counts: dict[int, int], now: float) -> dict[str, Any]:
    """The activity chart's bars: events per day, the last :data:`ACTIVITY_DAYS` days."""
    today = int(now // sql.DAY)
    days = [(d, counts.get(d, 0)) for d in range(today - ACTIVITY_DAYS + 1, today + 1)]
    top = max((n for _, n in days), default=0) or 1
    bars = [
        {"x": i * 10, "height": round(60 * n / top, 1), "count": n, "day": d * sql.DAY}
        for i, (d, n) in enumerate(days)
    ]
    return {"bars": bars, "total": sum(n for _, n in days), "top": top}


async def apps_page(request: Request) -> Response:
    """Every app, with its counts and an activity chart."""
    context = _context(request)
    after = decode_cursor(request.query_params.get("after"), (str,))
    now = time.time()
    async with context.store.transaction(write=False) as conn:
        names = await sql.apps(conn, after=after, limit=PAGE_SIZE + 1)
        activity = await sql.app_activity(
            conn, app_names=names[:PAGE_SIZE], since=now - ACTIVITY_DAYS * sql.DAY
        )  # every app's in one pass over the events
        shown = []
        for name in names[:PAGE_SIZE]:
            counts = await sql.app_counts(conn, app_name=name, now=now)
            shown.append((counts, _chart(activity[name], now)))
    more = encode_cursor(names[PAGE_SIZE - 1]) if len(names) > PAGE_SIZE else None
    return render(request, context.env, "apps.html", apps=shown, more=more, title="Apps")


async def app_page(request: Request) -> Response:
    """An app's users (searchable by id prefix), with their counts."""
    context = _context(request)
    (app_name,) = path_ids(request, "app")
    prefix = request.query_params.get("prefix", "")[:256]
    if "\x00" in prefix:
        raise HTTPException(400, "A user id has no NUL character.")
    after = decode_cursor(request.query_params.get("after"), (str,))
    now = time.time()
    async with context.store.transaction(write=False) as conn:
        counts = await sql.app_counts(conn, app_name=app_name, now=now)
        if counts.users == 0 and counts.sessions == 0:
            raise HTTPException(404, f"The store holds nothing of app {app_name!r}.")
        ids = await sql.user_page(
            conn, app_name=app_name, prefix=prefix, after=after, limit=PAGE_SIZE + 1
        )
        users = await sql.user_counts(conn, app_name=app_name, user_ids=ids[:PAGE_SIZE], now=now)
    more = encode_cursor(ids[PAGE_SIZE - 1]) if len(ids) > PAGE_SIZE else None
    return render(
        request, context.env, "app.html", app_name=app_name, counts=counts,
        users=[users[i] for i in ids[:PAGE_SIZE] if i in users], prefix=prefix, more=more,
        title=app_name,
    )  # fmt: skip


async def user_page(request: Request) -> Response:
    """A user: counts, then one tab (sessions, facts, memories, state, artifacts,
    generation failures), one page of it."""
    context = _context(request)
    app_name, user_id = path_ids(request, "app", "user")
    tab = request.query_params.get("tab", "sessions")
    if tab not in USER_TABS:
        raise HTTPException(400, f"No tab {tab!r}: one of {', '.join(USER_TABS)}.")
    now = time.time()
    async with context.store.transaction(write=False) as conn:
        counts = (await sql.user_counts(conn, app_name=app_name, user_ids=[user_id], now=now)).get(
            user_id
        )
        empty = counts is None or not (counts.sessions or counts.memories or counts.facts)
        if empty and not await _user_exists(conn, app_name, user_id):
            raise HTTPException(
                404, f"The store holds nothing of user {user_id!r} in app {app_name!r}."
            )
        values = await _TAB_READERS[tab](request, conn, app_name, user_id, now)
    if tab == "failures":
        values["failures"] = await context.memory.generation_failures(
            app_name=app_name, user_id=user_id, limit=PAGE_SIZE, retrying=True
        )
    return render(
        request, context.env, "user.html", app_name=app_name, user_id=user_id, counts=counts,
        tab=tab, tabs=USER_TABS, title=f"{user_id} · {app_name}", **values,
    )  # fmt: skip


async def _user_exists(conn: Any, app_name: str, user_id: str) -> bool:
    names = await sql.user_page(conn, app_name=app_name, prefix=user_id, after=None, limit=1)
    return names == [user_id]


async def _sessions_tab(
    request: Request, conn: Any, app_name: str, user_id: str, now: float
) -> dict[str, Any]:
    after = decode_cursor(request.query_params.get("after"), (float, str))
    rows = await sql.session_page(
        conn, app_name=app_name, user_id=user_id, after=after, limit=PAGE_SIZE + 1
    )
    more = None
    if len(rows) > PAGE_SIZE:
        last = rows[PAGE_SIZE - 1]
        more = encode_cursor([last.update_time, last.id])
    return {"sessions": rows[:PAGE_SIZE], "more": more}


async def _facts_tab(
    request: Request, conn: Any, app_name: str, user_id: str, now: float
) -> dict[str, Any]:
    history = request.query_params.get("history") == "1"
    topic = request.query_params.get("topic") or None
    after = decode_cursor(request.query_params.get("after"), (float, str))
    rows = await memory_sql.fact_page(
        conn, app_name=app_name, user_id=user_id, now=now, history=history, topic=topic,
        after=after, limit=PAGE_SIZE + 1,
    )  # fmt: skip
    more = None
    if len(rows) > PAGE_SIZE:
        last = rows[PAGE_SIZE - 1]
        more = encode_cursor([last.update_time, last.id])
    facts = [fact_of(fact_sql.FactRow.of(r)) for r in rows[:PAGE_SIZE]]
    by_topic: dict[str, list[Any]] = {}
    for fact in facts:
        by_topic.setdefault(fact.topics[0] if fact.topics else "(no topic)", []).append(fact)
    return {"by_topic": by_topic, "history": history, "topic": topic, "more": more}


async def _memories_tab(
    request: Request, conn: Any, app_name: str, user_id: str, now: float
) -> dict[str, Any]:
    kind = request.query_params.get("kind") or None
    if kind not in (None, "facts", "turns"):
        raise HTTPException(400, "kind is 'facts', 'turns' or empty.")
    after = decode_cursor(request.query_params.get("after"), (int,))
    rows = await memory_sql.memory_page(
        conn, app_name=app_name, user_id=user_id, kind=kind, session_id=None, after=after,
        limit=PAGE_SIZE + 1,
    )  # fmt: skip
    more = encode_cursor(rows[PAGE_SIZE - 1].pk) if len(rows) > PAGE_SIZE else None
    return {"memories": rows[:PAGE_SIZE], "kind": kind, "more": more}


async def _state_tab(
    request: Request, conn: Any, app_name: str, user_id: str, now: float
) -> dict[str, Any]:
    user_state, app_state = await sql.states(
        conn, app_name=app_name, user_id=user_id, limit=STATE_KEYS
    )
    return {"user_state": user_state, "app_state": app_state, "state_keys": STATE_KEYS}


async def _artifacts_tab(
    request: Request, conn: Any, app_name: str, user_id: str, now: float
) -> dict[str, Any]:
    after = decode_cursor(request.query_params.get("after"), (str, str, int))
    rows = await sql.artifact_versions(
        conn, app_name=app_name, user_id=user_id, session_id=None, after=after,
        limit=PAGE_SIZE + 1,
    )  # fmt: skip
    more = None
    if len(rows) > PAGE_SIZE:
        last = rows[PAGE_SIZE - 1]
        more = encode_cursor([last.session_id, last.filename, last.version])
    return {"artifacts": rows[:PAGE_SIZE], "more": more}


async def _failures_tab(
    request: Request, conn: Any, app_name: str, user_id: str, now: float
) -> dict[str, Any]:
    return {}


_TAB_READERS = {
    "sessions": _sessions_tab,
    "facts": _facts_tab,
    "memories": _memories_tab,
    "state": _state_tab,
    "artifacts": _artifacts_tab,
    "failures": _failures_tab,
}


async def fact_page(request: Request) -> Response:
    """A fact and its revision timeline, each revision linked to its session."""
    context = _context(request)
    app_name, user_id, fact_id = path_ids(request, "app", "user", "fact")
    async with context.store.transaction(write=False) as conn:
        row, revisions = await fact_sql.fact_history(
            conn, app_name=app_name, user_id=user_id, fact_id=fact_id
        )
    if row is None:
        raise HTTPException(404, f"User {user_id!r} has no fact {fact_id!r}.")
    fact = fact_of(row)
    now = time.time()
    current = (
        row.invalid_at is None
        and row.invalidate_time is None
        and (row.expire_at is None or row.expire_at > now)
    )
    return render(
        request, context.env, "fact.html", app_name=app_name, user_id=user_id, fact=fact,
        revisions=[revision_of(r) for r in revisions], current=current,
        title=f"fact · {user_id}",
    )  # fmt: skip


def _event_view(seq: int, event: dict[str, Any]) -> dict[str, Any]:
    """What the timeline shows of one stored event."""
    parts = ((event.get("content") or {}).get("parts")) or []
    texts, calls, responses = [], [], []
    for part in parts if isinstance(parts, list) else []:
        if not isinstance(part, dict):
            continue
        if isinstance(part.get("text"), str):
            texts.append(part["text"])
        if part.get("function_call"):
            calls.append(part["function_call"])
        if part.get("function_response"):
            responses.append(part["function_response"])
    actions = event.get("actions") or {}
    return {
        "seq": seq,
        "id": event.get("id", ""),
        "author": event.get("author", ""),
        "timestamp": event.get("timestamp"),
        "text": "\n".join(texts),
        "calls": calls,
        "responses": responses,
        "state_delta": actions.get("state_delta") or {},
        "artifact_delta": actions.get("artifact_delta") or {},
    }


async def session_page(request: Request) -> Response:
    """A session: its events (a page), its state after a chosen event, and what
    memory made of it."""
    context = _context(request)
    app_name, user_id, session_id = path_ids(request, "app", "user", "session")
    after = decode_cursor(request.query_params.get("after"), (int,)) or 0
    at = decode_cursor(request.query_params.get("at"), (int,))
    event_id = request.query_params.get("event")  # start at this event, state after it
    if event_id is not None:
        check_identifier("event id", event_id)
    async with context.store.transaction(write=False) as conn:
        row = await sql.session_row(conn, app_name=app_name, user_id=user_id, session_id=session_id)
        if row is None:
            raise HTTPException(404, f"User {user_id!r} has no session {session_id!r}.")
        if event_id is not None:
            at = await sql.event_position(
                conn, app_name=app_name, user_id=user_id, session_id=session_id, event_id=event_id
            )
            if at is None:
                raise HTTPException(404, f"Session {session_id!r} has no event {event_id!r}.")
            after = at - 1
        events = await sql.event_page(
            conn, app_name=app_name, user_id=user_id, session_id=session_id, after=after,
            limit=PAGE_SIZE + 1,
        )  # fmt: skip
        through = None if at is None else min(at, row.revision)
        state: dict[str, Any] = {}
        if through is None:  # the state now, as get_session returns it (no fold)
            now = await session_sql.load_states(
                conn, app_name=app_name, user_id=user_id, session_id=session_id
            )
            state = merge_state(now.app, now.user, now.session)
        else:
            for delta in await sql.state_deltas(
                conn, app_name=app_name, user_id=user_id, session_id=session_id, through=through
            ):
                state.update(drop_temp(delta))
        memory = await memory_sql.memory_page(
            conn, app_name=app_name, user_id=user_id, kind=None, session_id=session_id,
            after=None, limit=PAGE_SIZE,
        )  # fmt: skip
        facts = await memory_sql.facts_of_session(
            conn, app_name=app_name, user_id=user_id, session_id=session_id, limit=PAGE_SIZE
        )
        source = await fact_runs.read_source(
            conn, app_name=app_name, user_id=user_id, session_id=session_id
        )
    more = encode_cursor(events[PAGE_SIZE - 1][0]) if len(events) > PAGE_SIZE else None
    return render(
        request, context.env, "session.html", app_name=app_name, user_id=user_id,
        session=row, events=[_event_view(s, e) for s, e in events[:PAGE_SIZE]], more=more,
        state=dict(sorted(state.items())), at=through, memories=memory,
        page_after=encode_cursor(after) if after else None,
        chosen=None if at is None else encode_cursor(at),
        facts=[fact_of(fact_sql.FactRow.of(f)) for f in facts], source=source,
        encode_cursor=encode_cursor, title=f"session {session_id}",
    )  # fmt: skip


async def search_page(request: Request) -> Response:
    """The user's memories searched as an agent would, each result with its scores
    and its matched words marked. The page's form posts the query (so that it never
    shows in a URL, a history or a log); ``?q=`` works too."""
    context = _context(request)
    app_name, user_id = path_ids(request, "app", "user")
    given = request.state.form if request.method == "POST" else request.query_params
    query = given.get("q") or ""
    if not isinstance(query, str):
        raise HTTPException(400, "q is a text field.")
    if len(query) > MAX_QUERY_CHARS:
        raise HTTPException(
            414, f"The search is {len(query):,} characters long: at most {MAX_QUERY_CHARS:,}."
        )
    kind = given.get("kind") or None
    if kind not in (None, "facts", "turns"):
        raise HTTPException(400, "kind is 'facts', 'turns' or empty.")
    history = given.get("history") == "1"
    results = []
    hybrid = context.memory.embedder is not None
    if query.strip():
        found = await context.memory.search_memory(
            app_name=app_name,
            user_id=user_id,
            query=query,
            limit=20,
            kind=kind,  # type: ignore[arg-type]
            history=history,
        )
        words = analyzer(context.memory.language)
        terms = words.query_terms(query)
        for entry in found.memories:
            metadata = entry.custom_metadata or {}
            text = " ".join(p.text for p in (entry.content.parts or []) if p.text)
            results.append(
                {"entry": entry, "metadata": metadata,
                 "pieces": highlight(words, text[:2000], terms), "cut": max(0, len(text) - 2000)}
            )  # fmt: skip
    return render(
        request, context.env, "search.html", app_name=app_name, user_id=user_id, query=query,
        kind=kind, history=history, results=results, hybrid=hybrid,
        title=f"search · {user_id}",
    )  # fmt: skip


async def artifact_download(request: Request) -> Response:
    """An artifact version's bytes, as a download (never shown inline)."""
    context = _context(request)
    app_name, user_id = path_ids(request, "app", "user")
    user_own = request.path_params["scope"] == USER_SCOPE
    session_id = "" if user_own else path_ids(request, "scope")[0]
    filename, version = path_text(request, "filename"), request.path_params["version"]
    if "\x00" in filename:
        raise HTTPException(400, "An artifact's filename has no NUL character.")
    if version >= 2**63:  # beyond any version (and any database's integers)
        raise HTTPException(404, "No such artifact version.")
    key = ArtifactKey(app_name, user_id, session_id, filename)
    stored = await context.artifacts.version(key, version)
    if stored is None:
        raise HTTPException(404, "No such artifact version.")
    name = key.filename.rsplit("/", 1)[-1].encode("ascii", "replace").decode()
    name = "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in name) or "artifact"
    headers = {"content-disposition": f'attachment; filename="{name}"'}
    if stored.sha256 is None:
        body = json.dumps(stored.part, ensure_ascii=False).encode()
        return Response(body, media_type="application/octet-stream", headers=headers)
    return StreamingResponse(
        context.artifacts.read(key, stored), media_type="application/octet-stream",
        headers=headers,
    )  # fmt: skip


search_page.reads_only = True  # type: ignore[attr-defined]  # a POST that changes nothing
