"""One model call of a generation run: the request sent outside every transaction,
made again after a transient failure, all within the generator's timeout, and counted
in the run's report whether it succeeds or fails (calls, retries, tokens).

A transient failure (:class:`~adk_sqlstore.errors.TransientModelError`, an exception
with an HTTP ``code`` or ``status_code`` of 429, 500, 502, 503 or 504, as
``google.genai``'s and LiteLLM's errors carry, or a ``ConnectionError``) is tried again
after a wait that doubles from :data:`RETRY_BASE_DELAY` up to :data:`RETRY_MAX_DELAY`
seconds, with jitter, and never shorter than the server's ``Retry-After``; at most
:data:`MAX_TRIES` tries, and never past the timeout: a wait that would end after it is
not begun. Each retry is logged (the model and the failure, never content) and counted
in the report and on the public call's span (``adk_sqlstore.generation.retries``).

A model's exception becomes a :class:`~adk_sqlstore.errors.GenerationError` naming
the model and the exception's class, never the conversation.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from dataclasses import dataclass

from .. import telemetry
from ..errors import GenerationError, TransientModelError
from .chat import ModelReply, ModelRequest
from .generator import GenerationReport, MemoryGenerator
from .openai_chat import TRANSIENT_STATUSES, retry_after_seconds

__all__ = ["MAX_TRIES", "RETRY_BASE_DELAY", "RETRY_MAX_DELAY", "call_model"]

logger = logging.getLogger(__name__)

RETRY_BASE_DELAY = 0.5
"""Seconds before the first retry of a call; doubled before each next one."""
RETRY_MAX_DELAY = 8.0
"""Most seconds between two tries (unless the server's ``Retry-After`` asks more)."""
MAX_TRIES = 6
"""Most tries of one call (the first and its retries)."""

_SPAN_RETRIES = "adk_sqlstore.generation.retries"


@dataclass
class _Failure:
    """A transient failure: what to say of it (never content), the seconds the server
    asked to wait (if it did), and our own error to chain (never a foreign one: its
    message may quote the conversation)."""

    what: str
    retry_after: float | None
    error: TransientModelError | None = None


async def call_model(
    generator: MemoryGenerator, request: ModelRequest, report: GenerationReport
) -> ModelReply:
    """The model's reply to ``request``, within ``generator.timeout`` seconds for the
    whole call (its retries and the waits between them included). Every try is added
    to ``report`` (``model_calls``, tokens: prompt tokens estimated as characters / 4
    where the model reports none, a failed try included), and every retry to
    ``report.retries``.

    Raises:
        GenerationError: the model raised something not transient, timed out, or
            returned no ``ModelReply`` with text; or it failed transiently
            :data:`MAX_TRIES` times, or once more with no time left for the next wait
            (the message says after how many tries, and the last failure).
    """
    deadline = time.monotonic() + generator.timeout
    tries = 0
    last: _Failure | None = None  # the transient failure before this try
    while True:
        tries += 1
        try:
            outcome = await _try(generator, request, report, deadline)
        except TimeoutError as exc:
            raise _timed_out(generator, request, tries, last) from exc
        if isinstance(outcome, ModelReply):
            return outcome
        wait = _wait(tries, outcome.retry_after)
        if tries >= MAX_TRIES or time.monotonic() + wait >= deadline:
            raise _given_up(generator, request, tries, outcome, wait) from outcome.error
        report.retries += 1
        telemetry.add_count(_SPAN_RETRIES)
        logger.info(
            "model %r failed transiently during the %s (%s); trying again in %.2f s",
            generator.model.name,
            request.purpose,
            outcome.what,
            wait,
        )
        await asyncio.sleep(wait)
        last = outcome


async def _try(
    generator: MemoryGenerator,
    request: ModelRequest,
    report: GenerationReport,
    deadline: float,
) -> ModelReply | _Failure:
    """One try of the call, counted in ``report``, until ``deadline`` (monotonic
    seconds): the reply, or the transient failure.

    Raises:
        TimeoutError: the deadline passed.
        GenerationError: any other failure.
    """
    model = generator.model
    report.model_calls += 1
    estimated = (len(request.system) + len(request.prompt)) // 4
    failed: str | None = None
    try:
        reply = await asyncio.wait_for(model.complete(request), deadline - time.monotonic())
    except TimeoutError:
        report.prompt_tokens += estimated
        raise
    except Exception as exc:
        report.prompt_tokens += estimated
        failure = _transient(exc)
        if failure is not None:
            return failure
        if isinstance(exc, GenerationError):
            raise
        failed = type(exc).__name__
    if failed is not None:  # raised here, not in the handler: no __context__ kept
        raise GenerationError(f"model {model.name!r} failed during the {request.purpose}: {failed}")
    if not isinstance(reply, ModelReply) or not isinstance(reply.text, str):
        report.prompt_tokens += estimated
        raise GenerationError(f"model {model.name!r} returned no ModelReply with text")
    report.prompt_tokens += reply.prompt_tokens or estimated
    report.completion_tokens += reply.completion_tokens or 0
    return reply


def _transient(exc: Exception) -> _Failure | None:
    """The failure ``exc`` is when another try may pass, else ``None``: a
    :class:`TransientModelError`; an exception whose int ``code`` or ``status_code``
    is a transient HTTP status (its ``response.headers``' ``Retry-After`` honoured);
    a ``ConnectionError``. Described by status and class only (messages may quote the
    conversation), but for our own errors, whose messages never do."""
    if isinstance(exc, TransientModelError):
        return _Failure(str(exc), exc.retry_after, exc)
    if isinstance(exc, GenerationError):
        return None
    status = _status(exc)
    if status in TRANSIENT_STATUSES:
        return _Failure(f"{type(exc).__name__}, HTTP {status}", _retry_after(exc))
    if isinstance(exc, ConnectionError):
        return _Failure(type(exc).__name__, None)
    return None


def _status(exc: Exception) -> int | None:
    """The HTTP status an exception carries (``code``: google.genai's ``APIError``;
    ``status_code``: LiteLLM's and OpenAI's clients), or ``None``."""
    for name in ("code", "status_code"):
        value = getattr(exc, name, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def _retry_after(exc: Exception) -> float | None:
    """Seconds from the ``Retry-After`` header of the HTTP response an exception
    holds (``exc.response.headers``), or ``None``."""
    headers = getattr(getattr(exc, "response", None), "headers", None)
    try:
        value = headers.get("retry-after") if headers is not None else None
    except Exception:  # headers of an unknown kind
        return None
    return retry_after_seconds(value) if isinstance(value, str) else None


def _wait(tries: int, retry_after: float | None) -> float:
    """Seconds to wait after ``tries`` tries: :data:`RETRY_BASE_DELAY` doubled for each
    try after the first, at most :data:`RETRY_MAX_DELAY`, less up to a half at random
    (so that callers failing together do not come back together); at least
    ``retry_after``."""
    backoff = min(RETRY_BASE_DELAY * 2.0 ** (tries - 1), RETRY_MAX_DELAY)
    backoff *= random.uniform(0.5, 1.0)
    return max(backoff, retry_after or 0.0)


def _timed_out(
    generator: MemoryGenerator, request: ModelRequest, tries: int, last: _Failure | None
) -> GenerationError:
    """The error of a call whose ``tries``-th try was still running at the timeout,
    after the transient failure ``last`` (if any)."""
    after = f" ({tries} tries; the last failure: {last.what})" if last is not None else ""
    return GenerationError(
        f"model {generator.model.name!r} gave no {request.purpose} within"
        f" {generator.timeout:g} s{after}"
    )


def _given_up(
    generator: MemoryGenerator, request: ModelRequest, tries: int, failure: _Failure, wait: float
) -> GenerationError:
    """The error of a call given up after ``tries`` transient failures, the last one
    ``failure``, with ``wait`` seconds to wait before the next try."""
    if tries >= MAX_TRIES:
        reason = f"{tries} tries, the most it makes"
    else:
        reason = (
            f"{tries} {'try' if tries == 1 else 'tries'}: the next wait ({wait:.2f} s)"
            f" would pass the timeout ({generator.timeout:g} s)"
        )
    return GenerationError(
        f"model {generator.model.name!r} gave up on the {request.purpose} after {reason};"
        f" the last failure: {failure.what}"
    )
