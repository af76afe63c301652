"""Memory rows made faster (issue 15) are the rows made before: the memory id is
``uuid.uuid5`` of the event's address, ``content`` is ``Content.model_dump_json``, the
metadata is ``json.dumps`` of it, and a whole row equals the one the former row
builder (below, as it was at 8fc62be) made, for arbitrary events."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from adk_sqlstore import Event, InvalidIdentifierError, InvalidStateError
from adk_sqlstore.memory import rows as rows_module
from adk_sqlstore.memory.redaction import build_filter
from adk_sqlstore.memory.rows import MemoryRows, memory_id
from adk_sqlstore.models import Content, Part
from adk_sqlstore.search.analysis import analyzer
from adk_sqlstore.search.text import indexed_text, search_scope, text_of, valid_unicode

from .conftest import examples

NAMESPACE = uuid.UUID("6f1c2d4e-8a9b-4c3d-9e2f-0a1b2c3d4e5f")
SETTINGS = settings(
    max_examples=examples(300),
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
ANY_TEXT = st.text(st.characters(codec="utf-8"), max_size=60)  # no lone surrogates
IDENTIFIER = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1)


def _former_row(
    app: str, user: str, session: str | None, event: Event, metadata: dict[str, Any] | None
) -> dict[str, Any] | None:
    """The row the former ``MemoryRows.row`` made of an event (card masking on)."""
    mask = build_filter(None, mask_cards=True)
    author = mask(valid_unicode(event.author)) if event.author else None
    filtered = mask(valid_unicode(text_of(event.content)))
    if not filtered.strip():
        return None
    indexed = indexed_text(author, filtered)
    terms = analyzer().index_terms(indexed)
    role = getattr(event.content, "role", None)
    return {
        "app_name": app,
        "user_id": user,
        "id": str(uuid.uuid5(NAMESPACE, f"{app}\x00{user}\x00{session or ''}\x00{event.id}")),
        "session_id": session,
        "event_id": event.id,
        "author": author,
        "timestamp": float(event.timestamp),
        "content": Content(role=role, parts=[Part(text=filtered)]).model_dump_json(
            exclude_none=True
        ),
        "text": indexed,
        "terms": " ".join(terms),
        "analysis": analyzer().signature,
        "token_count": len(terms),
        "custom_metadata": json.dumps(dict(metadata or {}), ensure_ascii=False, allow_nan=False),
        "search_scope": search_scope(app, user),
        "update_time": 5.0,
    }


@SETTINGS
@given(
    app=IDENTIFIER,
    user=IDENTIFIER,
    session=st.none() | IDENTIFIER,
    event_id=IDENTIFIER,
)
def test_the_memory_id_is_uuid5_of_the_events_address(
    app: str, user: str, session: str | None, event_id: str
) -> None:
    expected = uuid.uuid5(NAMESPACE, f"{app}\x00{user}\x00{session or ''}\x00{event_id}")
    assert memory_id(app, user, session, event_id) == str(expected)


@SETTINGS
@given(
    role=st.none() | st.sampled_from(["user", "model", ""]) | ANY_TEXT,
    text=st.text(st.characters(codec=None, exclude_categories=()), max_size=80),
)
def test_content_is_what_the_models_serialise(role: str | None, text: str) -> None:
    """Every character (controls, quotes, U+2028, emoji, lone surrogates: errors alike)."""
    try:
        expected = Content(role=role, parts=[Part(text=text)]).model_dump_json(exclude_none=True)
    except Exception as exc:
        with pytest.raises(type(exc)):
            rows_module._content_json(role, text)
    else:
        assert rows_module._content_json(role, text) == expected


def test_content_of_other_role_types_goes_through_the_models() -> None:
    class Role(str):
        pass

    expected = Content(role=Role("user"), parts=[Part(text="hi")]).model_dump_json(
        exclude_none=True
    )
    assert rows_module._content_json(Role("user"), "hi") == expected
    with pytest.raises(ValidationError, match="role"):  # as before
        rows_module._content_json(7, "hi")


EVENTS = st.lists(
    st.builds(
        Event,
        id=st.sampled_from(["e1", "e2", "e3", "é4", "e 5"]),
        author=st.sampled_from(["", "user", "assistant", "Caroline 4111 1111 1111 1111"]),
        timestamp=st.floats(0, 4e9),
        content=st.builds(
            Content,
            role=st.none() | st.sampled_from(["user", "model"]),
            parts=st.lists(st.builds(Part, text=st.none() | ANY_TEXT), max_size=3),
        ),
        partial=st.none() | st.booleans(),
    ),
    max_size=8,
)


@SETTINGS
@given(
    events=EVENTS,
    session=st.none() | st.sampled_from(["s1", "séance"]),
    metadata=st.none() | st.just({"k": ["v", 1, None]}),
)
def test_rows_are_the_rows_made_before(
    events: list[Event], session: str | None, metadata: dict[str, Any] | None
) -> None:
    made = MemoryRows(None, mask_card_numbers=True).from_events(
        app_name="app", user_id="ü", session_id=session, events=events,
        custom_metadata=metadata, now=5.0,
    )  # fmt: skip
    former: dict[str, dict[str, Any]] = {}
    for event in events:
        if event.partial:
            continue
        row = _former_row("app", "ü", session, event, metadata)
        key = memory_id("app", "ü", session, event.id)
        former.pop(key, None)
        if row is not None:
            former[key] = row
    assert made == list(former.values())


def test_an_event_id_with_a_lone_surrogate_is_an_invalid_identifier() -> None:
    """Checked before it is hashed into the memory id (it raised UnicodeEncodeError)."""
    event = Event(id="a\ud800", content={"parts": [{"text": "hi"}]})
    with pytest.raises(InvalidIdentifierError, match="event id contains a lone surrogate"):
        MemoryRows(None, mask_card_numbers=True).from_events(
            app_name="a", user_id="u", session_id="s", events=[event],
            custom_metadata=None, now=0.0,
        )  # fmt: skip


def test_metadata_is_checked_at_the_first_row_as_before() -> None:
    """Bad metadata fails at the first event with text, after that event's own checks;
    with no such event nothing is checked (as when each row checked it)."""
    rows = MemoryRows(None, mask_card_numbers=True)
    bad = {"x": float("nan")}
    partial = Event(id="p", partial=True, content={"parts": [{"text": "hi"}]})
    assert rows.from_events(
        app_name="a", user_id="u", session_id="s", events=[partial],
        custom_metadata=bad, now=0.0,
    ) == []  # fmt: skip
    with pytest.raises(InvalidIdentifierError):
        rows.from_events(
            app_name="a", user_id="u", session_id="s",
            events=[Event(id="", content={"parts": [{"text": "hi"}]})],
            custom_metadata=bad, now=0.0,
        )  # fmt: skip
    with pytest.raises(InvalidStateError, match="custom_metadata"):
        rows.from_events(
            app_name="a", user_id="u", session_id="s",
            events=[Event(id="e", content={"parts": [{"text": "hi"}]})],
            custom_metadata=bad, now=0.0,
        )  # fmt: skip
