"""Building many pydantic model objects fast: from values read back from the database
(:class:`ManyModels`, for ``list_sessions``), with a core schema changed from a
model's own (:func:`compile_schema`, for reading ADK events), and with the garbage
collector paused meanwhile (:func:`gc_paused`)."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Generic, TypeVar

from pydantic import BaseModel
from pydantic_core import SchemaValidator

__all__ = ["ManyModels", "compile_schema", "gc_paused", "model_schemas"]

M = TypeVar("M", bound=BaseModel)

_COMPILE_LOCK = threading.Lock()
_PAUSE_LOCK = threading.Lock()
_pauses = 0
_resume = False


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while thousands of objects that are all kept
    are made (a full collection would find nothing to free, yet scan the whole heap:
    reading 10,000 sessions took about twice as long). Pauses nest, across coroutines
    and threads: collection resumes when the last one ends, if it ran before the first.

    When it resumes, the objects made meanwhile are moved to the oldest generation
    (``gc.freeze()`` then ``gc.unfreeze()``, two list splices): else the first
    allocation after would start a young collection that scans every one of them
    (about 25 ms after 10,000 sessions), for nothing. They are collected as usual by
    the next full collection. Skipped while the application keeps objects frozen
    itself (``gc.get_freeze_count()``), whose frozen objects stay frozen.
    """
    global _pauses, _resume
    with _PAUSE_LOCK:
        if _pauses == 0:
            _resume = gc.isenabled()
            gc.disable()
        _pauses += 1
    try:
        yield
    finally:
        with _PAUSE_LOCK:
            _pauses -= 1
            if _pauses == 0 and _resume:
                if not gc.get_freeze_count():
                    gc.freeze()
                    gc.unfreeze()
                gc.enable()


def model_schemas(node: Any) -> Iterator[dict[str, Any]]:
    """Every ``model`` node of a pydantic core schema."""
    if isinstance(node, dict):
        if node.get("type") == "model":
            yield node
        for value in node.values():
            yield from model_schemas(value)
    elif isinstance(node, list):
        for value in node:
            yield from model_schemas(value)


def compile_schema(schema: dict[str, Any]) -> SchemaValidator:
    """pydantic-core's validator for a core schema changed from a model's own.

    pydantic-core reuses a model class's own compiled validator wherever its schema
    names the class: the classes are marked incomplete while this one is compiled, so
    that the changed schema is compiled instead. Their own validators are untouched;
    the marks are put back before this returns.
    """
    classes = {node["cls"] for node in model_schemas(schema)}
    with _COMPILE_LOCK:
        complete = {cls: cls.__dict__.get("__pydantic_complete__") for cls in classes}
        try:
            for cls in classes:
                type.__setattr__(cls, "__pydantic_complete__", False)
            return SchemaValidator(schema)
        finally:
            for cls, flag in complete.items():
                type.__setattr__(cls, "__pydantic_complete__", flag)


class ManyModels(Generic[M]):
    """Many ``model`` objects at once from values already of their fields' types (read
    back from the database), without validating them again: what pydantic's
    ``model_construct`` does, without its per-object Python overhead (10,000 sessions:
    about 17 ms instead of 48 ms validated).

    The objects equal ``model(**values)``: the same fields, fields set, and private
    attributes (their defaults, or the values given). Values that do not name every
    field, or a model with a ``model_post_init`` of its own, are validated by pydantic
    as usual instead.
    """

    def __init__(self, model: type[M]) -> None:
        self._model = model
        self._fields = frozenset(model.model_fields)
        self._private = model.__private_attributes__
        own_post_init = getattr(model.model_post_init, "__name__", "") != "init_private_attributes"
        self._constructs = not own_post_init and model.model_config.get("extra") != "allow"

    def build(
        self, values: list[dict[str, Any]], private: list[dict[str, Any]] | None = None
    ) -> list[M]:
        """The objects, in order. Each ``values`` dict becomes its object's own field
        dict (not copied); ``private`` gives each object its private attributes' values
        (the others keep their defaults; a dict naming every private attribute becomes
        the object's own, not copied).

        Raises:
            pydantic.ValidationError: values that are validated do not fit.
        """
        cls = self._model
        if not self._constructs or any(v.keys() != self._fields for v in values):
            built = [cls(**v) for v in values]
            for obj, own in zip(built, private or (), strict=False):
                for name, value in own.items():
                    setattr(obj, name, value)
            return built
        names = self._private.keys()
        if private is None:
            private = [self._private_values({}) for _ in values]
        elif any(own.keys() != names for own in private):
            private = [self._private_values(own) for own in private]
        return self._construct(values, private)

    def build_exact(self, values: list[dict[str, Any]], private: list[dict[str, Any]]) -> list[M]:
        """:meth:`build` for dicts made from one literal each, ``values`` naming every
        field and ``private`` every private attribute: only the first of each is
        checked (if it does not fit, all go through :meth:`build`)."""
        first_values = values[0].keys() if values else self._fields
        first_private = private[0].keys() if private else self._private.keys()
        if (
            not self._constructs
            or first_values != self._fields
            or first_private != self._private.keys()
        ):
            return self.build(values, private)
        return self._construct(values, private)

    def _construct(self, values: list[dict[str, Any]], private: list[dict[str, Any]]) -> list[M]:
        """The objects, each taking its dicts as they are."""
        cls = self._model
        set_ = object.__setattr__
        fields = set(self._fields)
        new = cls.__new__
        out = []
        for own_fields, mine in zip(values, private, strict=True):
            obj = new(cls)
            set_(obj, "__dict__", own_fields)
            set_(obj, "__pydantic_fields_set__", fields.copy())
            set_(obj, "__pydantic_extra__", None)
            set_(obj, "__pydantic_private__", mine)
            out.append(obj)
        return out

    def _private_values(self, given: dict[str, Any]) -> dict[str, Any]:
        """The private attributes' defaults, updated with ``given``."""
        mine = {name: attr.get_default() for name, attr in self._private.items()}
        mine.update(given)
        return mine
