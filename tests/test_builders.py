"""Session objects built many at once for ``list_sessions`` (issue 15): the same
objects as the models' own constructors make, each with its own state."""

from __future__ import annotations

from typing import Any

import pydantic
import pytest

from adk_sqlstore import Session, SqlSessionService
from adk_sqlstore.models import session_incarnation, set_session_incarnation
from adk_sqlstore.sessions.builders import ManyModels


def _values(n: int) -> dict[str, Any]:
    return {
        "id": f"s{n}",
        "app_name": "app",
        "user_id": "u",
        "state": {"k": n, "nested": [n, {"x": None}]},
        "events": [],
        "last_update_time": 1.7e9 + n / 3,
        "revision": n,
    }


def test_many_core_sessions_equal_the_constructors() -> None:
    built = ManyModels(Session).build([_values(n) for n in range(3)], [{"_incarnation": "i"}] * 3)
    for n, session in enumerate(built):
        expected = Session(**_values(n))
        set_session_incarnation(expected, "i")
        assert session == expected
        assert session.model_fields_set == expected.model_fields_set
        assert session_incarnation(session) == "i"
        assert session.model_dump() == expected.model_dump()
    built[0].state["k"] = "changed"
    assert built[1].state["k"] == 1


def test_many_adk_sessions_equal_the_constructors() -> None:
    pytest.importorskip("google.adk", reason="the adk extra is not installed")
    from google.adk.sessions import Session as AdkSession

    values = [{k: v for k, v in _values(n).items() if k != "revision"} for n in range(3)]
    built = ManyModels(AdkSession).build(values, [{"_storage_update_marker": ":7"}] * 3)
    for n, session in enumerate(built):
        expected = AdkSession(**values[n])
        expected._storage_update_marker = ":7"
        assert session == expected
        assert session.model_fields_set == expected.model_fields_set


def test_values_missing_a_field_are_validated_as_usual() -> None:
    values = {"id": "s", "app_name": "app", "user_id": "u"}
    (session,) = ManyModels(Session).build([values])
    assert session == Session(**values)
    with pytest.raises(pydantic.ValidationError):
        ManyModels(Session).build([{"id": 5, "app_name": "app"}])


async def test_listed_sessions_each_have_their_own_state(service: SqlSessionService) -> None:
    for n in range(3):
        await service.create_session(app_name="app", user_id="u", session_id=f"s{n}")
    await service.create_session(app_name="app", user_id="u", session_id="with", state={"a": 1})
    listed = (await service.list_sessions(app_name="app", user_id="u")).sessions
    assert [s.state for s in listed] == [{}, {}, {}, {"a": 1}]
    listed[0].state["x"] = 1
    assert [s.state for s in listed] == [{"x": 1}, {}, {}, {"a": 1}]
    again = (await service.list_sessions(app_name="app", user_id="u")).sessions
    assert [s.state for s in again] == [{}, {}, {}, {"a": 1}]
    assert all(s.revision == 0 and s.events == [] for s in again)


def test_the_collector_pause_nests_and_leaves_no_young_collection_behind() -> None:
    import gc

    from adk_sqlstore.sessions.builders import gc_paused

    assert gc.isenabled()
    with gc_paused():
        with gc_paused():
            kept: list[Any] = [[n] for n in range(50_000)]
        assert not gc.isenabled()
    assert gc.isenabled()
    # what was made meanwhile went to the oldest generation, not to a pending young
    # collection that would scan all of it
    assert gc.get_count()[0] < 1_000
    gc.freeze()  # an application's own frozen objects stay frozen
    try:
        frozen = gc.get_freeze_count()
        with gc_paused():
            kept += [[n] for n in range(1_000)]
        assert gc.get_freeze_count() == frozen and gc.isenabled()
    finally:
        gc.unfreeze()
