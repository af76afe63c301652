"""Memory topics: what is worth remembering (as in Vertex AI Memory Bank).

A generator keeps a fact only if the model files it under one of its topics: the
built-in ones (Memory Bank's managed topics, same names) and any of yours, each with
a description and optional few-shot examples (a conversation snippet and the facts
to take from it).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ..errors import InvalidArgumentError

__all__ = ["BUILTIN_TOPICS", "Topic", "resolve_topics"]

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")


@dataclass(frozen=True)
class Topic:
    """A kind of fact to remember.

    Attributes:
        name: letters, digits and ``_``, starting with a letter, at most 64
            characters (``USER_PREFERENCES``, ``dietary_needs``).
        description: what facts of this topic are, for the model.
        examples: few-shot examples: ``(conversation, facts)`` pairs, the facts a list
            of strings.
    """

    name: str
    description: str
    examples: Sequence[tuple[str, Sequence[str]]] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise InvalidArgumentError(
                f"topic name {self.name!r}: letters, digits and _, starting with a letter,"
                " at most 64 characters"
            )
        if not isinstance(self.description, str) or not self.description.strip():
            raise InvalidArgumentError(f"topic {self.name!r}: a description is needed")


BUILTIN_TOPICS: tuple[Topic, ...] = (
    Topic(
        "USER_PERSONAL_INFO",
        "Significant personal information about the user: names, relationships, work,"
        " home, hobbies, important dates, health and life events they share.",
    ),
    Topic(
        "USER_PREFERENCES",
        "Stated or implied likes, dislikes, preferred styles, diets and patterns.",
    ),
    Topic(
        "KEY_CONVERSATION_DETAILS",
        "Important milestones, decisions, plans, promises made to or by the user, and"
        " outcomes of tasks in the conversation.",
    ),
    Topic(
        "EXPLICIT_INSTRUCTIONS",
        "Information the user explicitly asks to remember, or to forget.",
    ),
)
"""The built-in topics: Vertex AI Memory Bank's managed topics, same names."""


def resolve_topics(topics: Iterable[Topic | str] | None, *, builtin: bool = True) -> list[Topic]:
    """The topics a generator keeps: the built-in ones (unless ``builtin`` is false)
    then ``topics`` (a :class:`Topic`, or the name of a built-in one).

    Raises:
        InvalidArgumentError: an unknown built-in name, two topics of one name, or no
            topic at all.
    """
    chosen = list(BUILTIN_TOPICS) if builtin else []
    known = {t.name: t for t in BUILTIN_TOPICS}
    for topic in topics or ():
        if isinstance(topic, str):
            if topic not in known:
                raise InvalidArgumentError(
                    f"unknown topic {topic!r}: built-in topics are {', '.join(known)};"
                    " pass Topic(name, description) for your own"
                )
            topic = known[topic]
        if not isinstance(topic, Topic):
            raise InvalidArgumentError(f"a topic must be a Topic or a name, not {topic!r:.60}")
        if any(t.name == topic.name for t in chosen):
            if builtin and topic.name in known and known[topic.name] is topic:
                continue
            raise InvalidArgumentError(f"two topics are named {topic.name!r}")
        chosen.append(topic)
    if not chosen:
        raise InvalidArgumentError("a generator needs at least one topic")
    return chosen
