"""``MemoryGenerator``: what a memory service needs to turn conversations into facts
(the model, topics, limits), and the report of a run."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from ..errors import InvalidArgumentError
from ..validation import check_age, check_count
from .chat import ChatModel
from .models import resolve_model
from .topics import Topic, resolve_topics

__all__ = ["DEFAULT_MAX_ATTEMPTS", "GenerationReport", "MemoryGenerator", "resolve_generator"]

DEFAULT_MAX_ATTEMPTS = 3
"""Failed runs of a session before the automatic runs give up on it (a generator's
``max_attempts`` unless given)."""


class MemoryGenerator:
    """Extracts facts from conversations with a model of your choice, and consolidates
    them with the user's stored facts (a self-hosted counterpart of Vertex AI Memory
    Bank's generation). Give it to a ``SqlMemoryService`` (``generator=``).

    For each session, the events after its watermark (those not yet processed) go,
    after the ingestion filter (card numbers and your redactors), to one extraction
    call; the facts it returns that name shown events and configured topics are
    compared with the user's most similar stored facts (the store's own search) in at
    most one consolidation call, which creates, updates, invalidates or keeps each.
    The model is called outside every database transaction.

    Args:
        model: an ADK ``BaseLlm`` (``Gemini``, ``LiteLlm``, ``Claude``), a model name
            (as ``LlmAgent(model=...)`` takes; ``openai:MODEL`` for an
            OpenAI-compatible endpoint at ``$OPENAI_BASE_URL``; ``package.module:NAME``),
            a :class:`~.models.ChatModel`, or a callable ``(system, prompt) -> str``
            (see :func:`~.models.resolve_model`).
        topics: your topics (:class:`~.topics.Topic`), added to the built-in ones.
        builtin_topics: keep Memory Bank's built-in topics (default True).
        consolidate: compare new facts with stored ones (default True); without, every
            extracted fact is created.
        max_facts: facts kept from one extraction (default 50; more are dropped).
        similar_facts: stored facts shown per new fact (default 5; at most 50 in all).
        timeout: seconds a model call may take (default 120).
        max_attempts: failed runs of a session before the automatic runs (after an
            ingestion; ``generate_pending``) skip it (default 3); an explicit
            ``generate`` runs it again.
        ttl: how long a fact lives after its last change (``timedelta`` or seconds);
            default forever. Expired facts are never returned; ``prune`` deletes them.

    Raises:
        ConfigurationError: the model cannot be resolved.
        InvalidArgumentError: a topic, count or duration out of range.
    """

    def __init__(
        self,
        model: Any,
        *,
        topics: Iterable[Topic | str] | None = None,
        builtin_topics: bool = True,
        consolidate: bool = True,
        max_facts: int = 50,
        similar_facts: int = 5,
        timeout: float = 120.0,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        ttl: timedelta | float | None = None,
    ) -> None:
        self.model: ChatModel = resolve_model(model)
        self.topics: list[Topic] = resolve_topics(topics, builtin=builtin_topics)
        self.consolidate = bool(consolidate)
        self.max_facts = check_count("max_facts", max_facts, least=1)
        self.similar_facts = check_count("similar_facts", similar_facts, least=1)
        self.max_attempts = check_count("max_attempts", max_attempts, least=1)
        self.timeout = _seconds("timeout", timeout)
        self.ttl = None if ttl is None else _seconds("ttl", ttl)

    @property
    def lease_seconds(self) -> float:
        """How long a run may hold the user's lease: two model calls and a margin."""
        return 2 * self.timeout + 60.0


def _seconds(name: str, value: timedelta | float) -> float:
    """A duration (a ``timedelta`` or seconds) that must be more than 0
    (:func:`~adk_sqlstore.validation.check_age`, finite)."""
    seconds = check_age(name, value)
    if seconds == 0:
        raise InvalidArgumentError(f"{name} must be more than 0 seconds, not {value!r}")
    return seconds


def resolve_generator(generator: Any) -> MemoryGenerator | None:
    """A generator from a :class:`MemoryGenerator`, ``None``, or anything
    :class:`MemoryGenerator` takes as its model (a name, an ADK model, a callable)."""
    if generator is None or isinstance(generator, MemoryGenerator):
        return generator
    return MemoryGenerator(generator)


@dataclass
class GenerationReport:
    """What one generation run did (for one session, or summed over several).

    Attributes:
        sessions: sessions processed (their new events sent to the model).
        skipped: sessions with nothing new, or past their attempts.
        failed: sessions whose run failed (retried by the next run, but those
            ``given_up``).
        given_up: of those, sessions that failed ``max_attempts`` times: the
            automatic runs skip them from now on.
        events: events sent to the model.
        created, updated, invalidated, unchanged: facts, by what happened to them.
        dropped: items of the model's answers dropped, by reason (counts only).
        model_calls: calls made to the model, failed ones included.
        retries: calls repeated after a transient failure (HTTP 429 or 5xx, a reset
            connection), within the generator's timeout.
        prompt_tokens, completion_tokens: as the model reported them (prompt tokens
            estimated as characters / 4 where it did not).
        fact_ids: ids of the facts created or updated, in order.
    """

    sessions: int = 0
    skipped: int = 0
    failed: int = 0
    given_up: int = 0
    events: int = 0
    created: int = 0
    updated: int = 0
    invalidated: int = 0
    unchanged: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    model_calls: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    fact_ids: list[str] = field(default_factory=list)

    def add(self, other: GenerationReport) -> None:
        """Add another run's figures to these."""
        for name, value in other.__dict__.items():
            if name == "dropped":
                for reason, n in value.items():
                    self.dropped[reason] = self.dropped.get(reason, 0) + n
            elif name == "fact_ids":
                self.fact_ids.extend(value)
            else:
                setattr(self, name, getattr(self, name) + value)
