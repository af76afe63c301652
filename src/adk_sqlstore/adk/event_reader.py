"""Reading stored events back into ADK's ``Event`` without running ADK's Python
validators a second time.

An event was validated when it was appended, and what is stored is its
``model_dump_json(exclude_none=True)``. Reading it back with ADK's own validator spends
most of its time (about 60% for a text turn) in Python code that does nothing to such
JSON:

* ``Event._accept_convenience_kwargs`` (before): routes the constructor's convenience
  keywords (``message=``, ``state=``, ``route=``, ``node_path=``) to their fields; a
  dump never holds them (the reader falls back to ADK's validator when the JSON text
  holds any of those keys, e.g. an Event subclass that has such a field);
* ``google.genai._common.BaseModel._check_field_type_mismatches`` (before, on every
  GenAI model): logs a warning when a field is given a model *instance* of another
  class; JSON holds no instances;
* ``google.genai.types.Part.__init__`` (a custom ``__init__`` pydantic calls for every
  part): accepts ``Part(value)`` positionally; given keywords only, as from JSON, it
  validates them unchanged, a second time.

:class:`EventListReader` builds pydantic-core's validator from ADK's own core schema
with exactly those three removed, every other validator, type and default kept, so
events come back as the same ``Event`` objects (``==`` to what was appended, unknown
fields and nested types included). Each removed function is pinned by the SHA-256 of
its source: if a later google-adk or google-genai release changes one, it is kept (the
read stays correct, only slower) and :attr:`EventListReader.skipped` shows it;
``tests/test_adk_event_reader.py`` then fails until the change is reviewed here.
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Mapping
from typing import Any

from pydantic import TypeAdapter

from ..sessions.builders import compile_schema
from ._google import AdkEvent

__all__ = ["SKIPPABLE", "EventListReader", "source_sha256"]

#: ``module.qualname`` of each function the reader leaves out, with the SHA-256 of
#: its source as reviewed (google-adk 2.13.0, google-genai 2.34.0).
SKIPPABLE: Mapping[str, str] = {
    "google.adk.events.event.Event._accept_convenience_kwargs": (
        "ac6141f5418d8a64654c22d9ee97e8d87ef9f9b84c924c90a1b0e7fd74fe55b1"
    ),
    "google.genai._common.BaseModel._check_field_type_mismatches": (
        "95c4d9d02f97b5c78bcfaee449310c040c2af327b425a3e470607aa11b413da2"
    ),
    "google.genai.types.Part.__init__": (
        "84d39cbfcb223ecd425598614774143c446ccf76b186de74a9c89e37b6f3d097"
    ),
}

#: Keys ``_accept_convenience_kwargs`` would act on: JSON text holding any of them is
#: read by ADK's own validator.
_CONVENIENCE_KEYS = ('"message":', '"state":', '"route":', '"node_path":')


def _name(function: Any) -> str:
    function = getattr(function, "__func__", function)
    return f"{function.__module__}.{function.__qualname__}"


def source_sha256(function: Any) -> str:
    """The SHA-256 of a function's source text ("" when it has none)."""
    try:
        source = inspect.getsource(getattr(function, "__func__", function))
    except (OSError, TypeError):
        return ""
    return hashlib.sha256(source.encode()).hexdigest()


def _skippable(function: Any) -> bool:
    return SKIPPABLE.get(_name(function)) == source_sha256(function)


class EventListReader:
    """``validate_json`` of a JSON array of stored ADK events, as ``list[Event]``.

    Attributes:
        skipped: ``module.qualname`` of the validators and ``__init__`` methods left
            out of this reader (a subset of :data:`SKIPPABLE`).
        kept: those of :data:`SKIPPABLE` found in ADK's schema but kept, because their
            source is not the one reviewed.
    """

    def __init__(self) -> None:
        self._full: TypeAdapter[list[AdkEvent]] = TypeAdapter(list[AdkEvent])
        self.skipped: set[str] = set()
        self.kept: set[str] = set()
        schema = self._strip(self._full.core_schema)
        self._fast = compile_schema(schema)

    def _strip(self, node: Any) -> Any:
        """A copy of a core schema without the reviewed no-op validators and inits."""
        if isinstance(node, list):
            return [self._strip(value) for value in node]
        if not isinstance(node, dict):
            return node
        if node.get("type") == "function-before":
            function = node["function"]["function"]
            if _name(function) in SKIPPABLE:
                if _skippable(function):
                    self.skipped.add(_name(function))
                    return self._strip(node["schema"])
                self.kept.add(_name(function))
        copy = {key: self._strip(value) for key, value in node.items()}
        if copy.get("type") == "model" and copy.get("custom_init"):
            init = copy["cls"].__init__
            if _skippable(init):
                self.skipped.add(_name(init))
                copy["custom_init"] = False
            else:
                self.kept.add(_name(init))
        return copy

    def validate_json(self, data: str) -> list[AdkEvent]:
        """The events of a JSON array of stored events.

        Raises:
            pydantic.ValidationError: the JSON is not such an array.
        """
        if any(key in data for key in _CONVENIENCE_KEYS):
            return self._full.validate_json(data)
        events: list[AdkEvent] = self._fast.validate_json(data)
        return events
